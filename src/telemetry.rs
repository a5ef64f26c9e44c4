//! OpenTelemetry export: spans and metrics over OTLP/gRPC, only when the standard `OTEL_*` variables ask for it.
//!
//! With no `OTEL_EXPORTER_OTLP_ENDPOINT` (nor `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`) set, [`layer`] returns `None`: no exporter, no
//! connection, no background thread, and every metric below is OpenTelemetry's no-op.
//!
//! What is exported is names, never values: spans carry keys, addresses, versions, counts,
//! outcomes and timings; no record bytes and no state document content. Log events stay on
//! stderr (see `logging`) and are not exported.

use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;

/// The instrumentation scope and default `service.name`.
pub const SERVICE: &str = "choudoufu-live";

/// How long the CLI waits at exit for the last spans and metrics to be sent.
pub const EXIT_FLUSH: Duration = Duration::from_secs(5);

/// How long plugin mode waits after Shutdown for the last spans and metrics (go-plugin kills at 2 s).
pub const PLUGIN_FLUSH: Duration = Duration::from_millis(400);

const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
const METRICS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";

/// Which signals the environment asks to export.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wanted {
    /// Spans, over OTLP/gRPC.
    pub traces: bool,
    /// Metrics, over OTLP/gRPC.
    pub metrics: bool,
}

impl Wanted {
    /// Nothing to export.
    pub fn none(&self) -> bool {
        !self.traces && !self.metrics
    }
}

/// What the `OTEL_*` variables (read through `get`) ask for.
pub fn wanted_from(get: &dyn Fn(&str) -> Option<String>) -> Wanted {
    let set = |k: &str| get(k).is_some_and(|v| !v.trim().is_empty());
    let off = |k: &str| get(k).is_some_and(|v| v.trim().eq_ignore_ascii_case("none"));
    if get("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Wanted::default();
    }
    Wanted {
        traces: (set(ENDPOINT) || set(TRACES_ENDPOINT)) && !off("OTEL_TRACES_EXPORTER"),
        metrics: (set(ENDPOINT) || set(METRICS_ENDPOINT)) && !off("OTEL_METRICS_EXPORTER"),
    }
}

/// What this process's environment asks for.
pub fn wanted() -> Wanted {
    wanted_from(&|k| std::env::var(k).ok())
}

struct Providers {
    traces: Option<SdkTracerProvider>,
    metrics: Option<SdkMeterProvider>,
}

static PROVIDERS: Mutex<Option<Providers>> = Mutex::new(None);

fn resource() -> Resource {
    let builder = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_some() {
        builder.build()
    } else {
        builder.with_service_name(SERVICE).build()
    }
}

fn warn(what: &str) {
    eprintln!("choudoufu-live: telemetry: {what}; continuing without it");
}

/// Set up export as the environment asks and return the tracing layer that feeds it.
///
/// `None` (and nothing set up) when no OTLP endpoint is set. Must be called inside a
/// Tokio runtime, which must outlive [`shutdown`]: the gRPC client runs on it.
pub fn layer<S>() -> Option<Box<dyn Layer<S> + Send + Sync + 'static>>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let wanted = wanted();
    if wanted.none() {
        return None;
    }
    if tokio::runtime::Handle::try_current().is_err() {
        warn("OTLP export needs the async runtime, which is not running yet");
        return None;
    }
    if let Ok(p) = std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL")
        && !p.trim().eq_ignore_ascii_case("grpc")
    {
        warn(&format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={p} is not supported, only grpc; exporting over gRPC"
        ));
    }
    let resource = resource();
    let mut providers = Providers {
        traces: None,
        metrics: None,
    };
    if wanted.metrics {
        match opentelemetry_otlp::MetricExporter::builder()
            .with_tonic()
            .build()
        {
            Ok(exporter) => {
                let provider = SdkMeterProvider::builder()
                    .with_periodic_exporter(exporter)
                    .with_resource(resource.clone())
                    .build();
                opentelemetry::global::set_meter_provider(provider.clone());
                providers.metrics = Some(provider);
            }
            Err(e) => warn(&format!("cannot set up the OTLP metric exporter: {e}")),
        }
    }
    let mut layer = None;
    if wanted.traces {
        match opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .build()
        {
            Ok(exporter) => {
                let provider = SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(resource)
                    .build();
                let tracer = provider.tracer(SERVICE);
                // Only this crate's spans: never the exporter's own gRPC client (a feedback
                // loop), never the SDKs' internals, and no log events (their text stays on stderr).
                let only_ours = filter_fn(|meta| {
                    meta.is_span()
                        && meta.target().starts_with("choudoufu_live")
                        && *meta.level() <= tracing::Level::INFO
                });
                layer = Some(
                    tracing_opentelemetry::layer()
                        .with_tracer(tracer)
                        .with_filter(only_ours)
                        .boxed(),
                );
                providers.traces = Some(provider);
            }
            Err(e) => warn(&format!("cannot set up the OTLP span exporter: {e}")),
        }
    }
    if providers.traces.is_none() && providers.metrics.is_none() {
        return None;
    }
    if let Ok(mut slot) = PROVIDERS.lock() {
        *slot = Some(providers);
    }
    // A layer that does nothing when only metrics are exported.
    Some(layer.unwrap_or_else(|| tracing_subscriber::layer::Identity::new().boxed()))
}

/// Whether export was set up in this process.
pub fn active() -> bool {
    PROVIDERS.lock().map(|p| p.is_some()).unwrap_or(false)
}

/// Send the last spans and metrics and stop the exporters, waiting at most `budget`.
///
/// Call it from outside the runtime's worker threads (or in `spawn_blocking`), while the
/// runtime still runs. A second call does nothing.
pub fn shutdown(budget: Duration) {
    let Some(providers) = PROVIDERS.lock().ok().and_then(|mut p| p.take()) else {
        return;
    };
    let (done, finished) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .name("otel-shutdown".into())
        .spawn(move || {
            if let Some(t) = &providers.traces {
                let _ = t.shutdown_with_timeout(budget);
            }
            if let Some(m) = &providers.metrics {
                let _ = m.shutdown_with_timeout(budget);
            }
            let _ = done.send(());
        });
    if worker.is_ok() && finished.recv_timeout(budget).is_err() {
        warn("the last spans and metrics could not be sent in time");
    }
}

/// The address a record key names (its last segment, unescaped), for `conflict.address`.
///
/// Long addresses are stored under a digest segment; then the key itself is given.
pub fn address_of_key(key: &str) -> String {
    let segment = key.rsplit('/').next().unwrap_or(key);
    crate::address::unescape(segment).unwrap_or_else(|| key.to_string())
}

/// The kind of a store, from its description (`s3://bucket` → `s3`, `local:/path` → `local`).
pub fn store_kind(describe: &str) -> &'static str {
    if describe.starts_with("s3:") {
        "s3"
    } else if describe.starts_with("local:") {
        "local"
    } else {
        "other"
    }
}

/// The metric instruments (no-ops when export is not set up).
pub struct Metrics {
    records_read: Counter<u64>,
    records_written: Counter<u64>,
    records_unchanged: Counter<u64>,
    conflicts: Counter<u64>,
    store_duration: Histogram<f64>,
    bytes_read: Counter<u64>,
    bytes_written: Counter<u64>,
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
}

/// Milliseconds since `started`, for `latency_ms`.
pub fn elapsed_ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn nothing_is_exported_without_an_endpoint() {
        assert!(wanted_from(&env(&[])).none());
        assert!(wanted_from(&env(&[(ENDPOINT, "")])).none());
        assert!(wanted_from(&env(&[("OTEL_SERVICE_NAME", "x")])).none());
        assert!(
            wanted_from(&env(&[
                (ENDPOINT, "http://127.0.0.1:4317"),
                ("OTEL_SDK_DISABLED", "true")
            ]))
            .none()
        );
    }

    #[test]
    fn endpoints_choose_signals() {
        let both = wanted_from(&env(&[(ENDPOINT, "http://127.0.0.1:4317")]));
        assert_eq!(
            both,
            Wanted {
                traces: true,
                metrics: true
            }
        );
        let traces = wanted_from(&env(&[(TRACES_ENDPOINT, "http://127.0.0.1:4317")]));
        assert_eq!(
            traces,
            Wanted {
                traces: true,
                metrics: false
            }
        );
        let no_metrics = wanted_from(&env(&[
            (ENDPOINT, "http://127.0.0.1:4317"),
            ("OTEL_METRICS_EXPORTER", "none"),
        ]));
        assert_eq!(
            no_metrics,
            Wanted {
                traces: true,
                metrics: false
            }
        );
    }

    #[test]
    fn conflict_addresses_come_from_keys() {
        let layout = crate::layout::Layout::new(crate::layout::EstateName::parse("e").unwrap());
        for a in ["terraform_data.db", "module.m.aws_s3_bucket.b[\"x/y\"]"] {
            assert_eq!(address_of_key(&layout.resource_key(a)), a);
        }
        assert_eq!(store_kind("s3://bucket"), "s3");
        assert_eq!(store_kind("local:/tmp/x"), "local");
    }

    #[test]
    fn no_layer_and_no_providers_without_an_endpoint() {
        if !wanted().none() {
            return; // the environment running the tests asks for export
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _in = rt.enter();
        assert!(layer::<tracing_subscriber::Registry>().is_none());
        assert!(!active());
    }
}
