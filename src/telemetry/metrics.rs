//! The metric instruments every layer records into (OpenTelemetry's no-ops unless export is set up).

use std::sync::OnceLock;
use std::time::Instant;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram};

use super::scope::SERVICE;

/// The metric instruments (no-ops when export is not set up).
pub struct Metrics {
    records_read: Counter<u64>,
    records_written: Counter<u64>,
    records_unchanged: Counter<u64>,
    conflicts: Counter<u64>,
    store_duration: Histogram<f64>,
    bytes_read: Counter<u64>,
    bytes_written: Counter<u64>,
    unauthorized: Counter<u64>,
}

/// Metric names, as exported.
pub mod names {
    /// Records read from the store (resource and output records of a state read).
    pub const RECORDS_READ: &str = "choudoufu.records.read";
    /// Records that landed (attribute `op`: create, update, delete).
    pub const RECORDS_WRITTEN: &str = "choudoufu.records.written";
    /// Records a state write left alone because their content had not changed.
    pub const RECORDS_UNCHANGED: &str = "choudoufu.records.unchanged";
    /// Refusals (attribute `kind`: record, plan_moved, unstamped, in_flight).
    pub const CONFLICTS: &str = "choudoufu.conflicts";
    /// Store call latency in milliseconds (attributes `store.kind`, `store.op`, `outcome`).
    pub const STORE_DURATION: &str = "choudoufu.store.call.duration";
    /// Record bytes read from the store.
    pub const BYTES_READ: &str = "choudoufu.store.bytes.read";
    /// Record bytes sent to the store in writes.
    pub const BYTES_WRITTEN: &str = "choudoufu.store.bytes.written";
    /// Requests to a run's state server refused for want of the run's credentials (401).
    pub const UNAUTHORIZED: &str = "choudoufu.http.unauthorized";
}

/// The process's instruments, made on first use from the global meter provider.
pub fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let m = opentelemetry::global::meter(SERVICE);
        Metrics {
            records_read: m
                .u64_counter(names::RECORDS_READ)
                .with_unit("{record}")
                .with_description("Records read from the record store")
                .build(),
            records_written: m
                .u64_counter(names::RECORDS_WRITTEN)
                .with_unit("{record}")
                .with_description("Record writes that landed, by op")
                .build(),
            records_unchanged: m
                .u64_counter(names::RECORDS_UNCHANGED)
                .with_unit("{record}")
                .with_description("Records a state write did not write: unchanged")
                .build(),
            conflicts: m
                .u64_counter(names::CONFLICTS)
                .with_unit("{conflict}")
                .with_description("Refused writes and plans, by kind")
                .build(),
            store_duration: m
                .f64_histogram(names::STORE_DURATION)
                .with_unit("ms")
                .with_description("Latency of one record store call")
                .with_boundaries(vec![
                    1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
                    10000.0,
                ])
                .build(),
            bytes_read: m
                .u64_counter(names::BYTES_READ)
                .with_unit("By")
                .with_description("Record bytes read from the store")
                .build(),
            bytes_written: m
                .u64_counter(names::BYTES_WRITTEN)
                .with_unit("By")
                .with_description("Record bytes sent to the store")
                .build(),
            unauthorized: m
                .u64_counter(names::UNAUTHORIZED)
                .with_unit("{request}")
                .with_description("State server requests refused without the run's credentials")
                .build(),
        }
    })
}

/// A refusal's kind, as the `kind` attribute of `choudoufu.conflicts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConflictKind {
    /// A record another run changed after this run read it.
    Record,
    /// A saved plan whose changes moved.
    PlanMoved,
    /// A saved plan with no valid stamp.
    Unstamped,
    /// A change refused because it or a dependency is in flight in another live run.
    InFlight,
}

impl ConflictKind {
    /// The attribute value.
    pub fn as_str(self) -> &'static str {
        match self {
            ConflictKind::Record => "record",
            ConflictKind::PlanMoved => "plan_moved",
            ConflictKind::Unstamped => "unstamped",
            ConflictKind::InFlight => "in_flight",
        }
    }
}

impl Metrics {
    /// `n` records read.
    pub fn records_read(&self, n: usize) {
        if n > 0 {
            self.records_read.add(n as u64, &[]);
        }
    }

    /// `n` records landed with `op` (create, update, delete).
    pub fn records_written(&self, op: &'static str, n: usize) {
        if n > 0 {
            self.records_written
                .add(n as u64, &[KeyValue::new("op", op)]);
        }
    }

    /// `n` records unchanged by a state write.
    pub fn records_unchanged(&self, n: usize) {
        if n > 0 {
            self.records_unchanged.add(n as u64, &[]);
        }
    }

    /// `n` refusals of `kind`.
    pub fn conflicts(&self, kind: ConflictKind, n: usize) {
        if n > 0 {
            self.conflicts
                .add(n as u64, &[KeyValue::new("kind", kind.as_str())]);
        }
    }

    /// One store call and how long it took.
    pub fn store_call(&self, kind: &'static str, op: &'static str, outcome: &'static str, ms: f64) {
        self.store_duration.record(
            ms,
            &[
                KeyValue::new("store.kind", kind),
                KeyValue::new("store.op", op),
                KeyValue::new("outcome", outcome),
            ],
        );
    }

    /// `n` record bytes read.
    pub fn bytes_read(&self, n: usize) {
        if n > 0 {
            self.bytes_read.add(n as u64, &[]);
        }
    }

    /// `n` record bytes sent in writes.
    pub fn bytes_written(&self, n: usize) {
        if n > 0 {
            self.bytes_written.add(n as u64, &[]);
        }
    }

    /// One state server request refused with 401 (`reason`: `no_credentials`, `wrong_credentials`).
    pub fn unauthorized(&self, reason: &'static str) {
        self.unauthorized.add(1, &[KeyValue::new("reason", reason)]);
    }
}

/// Milliseconds since `started`, for `latency_ms`.
pub fn elapsed_ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}
