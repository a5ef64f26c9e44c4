//! The store layer's spans and metrics: every store call a `store.call` span and a latency sample,
//! every conditional put a `store.put_conditional` span. Names and counts, never bytes.

use std::future::Future;
use std::time::Instant;

use async_trait::async_trait;
use futures::StreamExt;
use tracing::Instrument;
use tracing::field::{Empty, display};

use super::call::StoreCall;
use super::error::StoreError;
use super::key;
use super::record_store::{
    DynStore, KeyRange, Page, Precondition, RangeStart, RecordStore, StoreTime, Stored, Streamed,
    Version, WriteOutcome,
};
use super::settings::kind::StoreKind;
use super::versions::VersionListing;
use crate::telemetry::{self, elapsed_ms};

/// Every call of the inner store in a `store.call` span, with its latency in the metrics.
#[derive(Debug)]
pub struct Traced {
    inner: DynStore,
}

impl Traced {
    /// `inner`, traced.
    pub fn new(inner: DynStore) -> Self {
        Traced { inner }
    }
}

fn call_span(kind: StoreKind, op: &'static str, key: &str) -> tracing::Span {
    tracing::info_span!(
        "store.call",
        store.kind = kind.as_str(),
        store.op = op,
        key = %key,
        outcome = Empty,
        latency_ms = Empty,
        attempt = 1u64,
        records = Empty,
        bytes = Empty,
        expected.version = Empty,
        found.version = Empty,
        version = Empty,
        conflict.address = Empty,
        range.after = Empty,
        range.before = Empty,
        otel.status_code = Empty,
    )
}

/// Record how a span's call ended and how long it took.
fn finish(span: &tracing::Span, outcome: &'static str, started: Instant) -> f64 {
    let ms = elapsed_ms(started);
    span.record("outcome", outcome);
    span.record("latency_ms", ms);
    if outcome == "error" {
        span.record("otel.status_code", "ERROR");
    }
    ms
}

/// What a landed write gives back, as a span shows it.
trait Landed {
    /// The record's new version, if the write leaves one.
    fn version(&self) -> Option<&Version>;
}

impl Landed for Version {
    fn version(&self) -> Option<&Version> {
        Some(self)
    }
}

impl Landed for () {
    fn version(&self) -> Option<&Version> {
        None
    }
}

/// The span attributes and outcome of a conditional write's result.
fn write_outcome<T: Landed>(
    span: &tracing::Span,
    key: &str,
    result: &Result<WriteOutcome<T>, StoreError>,
) -> &'static str {
    match result {
        Ok(WriteOutcome::Written(t)) => {
            if let Some(v) = t.version() {
                span.record("version", display(v));
            }
            "written"
        }
        Ok(WriteOutcome::Conflict(c)) => {
            if let Some(v) = &c.expected {
                span.record("expected.version", display(v));
            }
            if let Some(v) = &c.found {
                span.record("found.version", display(v));
            }
            span.record("conflict.address", key::name_of(key).as_str());
            "conflict"
        }
        Err(_) => "error",
    }
}

/// Run `call` (a conditional put that recognises its own retried write) in a `store.put_conditional` span.
pub(crate) async fn put_conditional(
    kind: StoreKind,
    key: &str,
    bytes: &[u8],
    precondition: &Precondition,
    call: impl Future<Output = Result<WriteOutcome<Version>, StoreError>>,
) -> Result<WriteOutcome<Version>, StoreError> {
    let span = tracing::info_span!(
        "store.put_conditional",
        store.kind = kind.as_str(),
        store.op = StoreCall::from(precondition).as_str(),
        key = %key,
        bytes = bytes.len(),
        outcome = Empty,
        latency_ms = Empty,
        own_retry = Empty,
        version = Empty,
        expected.version = Empty,
        found.version = Empty,
        conflict.address = Empty,
        otel.status_code = Empty,
    );
    if let Some(v) = precondition.expected() {
        span.record("expected.version", display(v));
    }
    let started = Instant::now();
    let result = call.instrument(span.clone()).await;
    let outcome = write_outcome(&span, key, &result);
    finish(&span, outcome, started);
    result
}

/// Note on the current `store.put_conditional` span that a refused write was this run's own retry.
pub(crate) fn own_retry() {
    tracing::Span::current().record("own_retry", true);
}

/// Note on the current `store.call` span which try of a write this is.
pub(crate) fn attempt(n: u32) {
    tracing::Span::current().record("attempt", u64::from(n));
}

#[async_trait]
impl RecordStore for Traced {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn kind(&self) -> StoreKind {
        self.inner.kind()
    }

    async fn get(&self, key: &str) -> Result<Option<Stored>, StoreError> {
        let span = call_span(self.kind(), "get", key);
        let started = Instant::now();
        let result = self.inner.get(key).instrument(span.clone()).await;
        let outcome = match &result {
            Ok(Some(stored)) => {
                span.record("bytes", stored.bytes.len());
                span.record("version", display(&stored.version));
                telemetry::metrics().bytes_read(stored.bytes.len());
                "read"
            }
            Ok(None) => "absent",
            Err(_) => "error",
        };
        let ms = finish(&span, outcome, started);
        telemetry::metrics().store_call(self.kind().as_str(), "get", outcome, ms);
        result
    }

    async fn get_streamed(&self, key: &str) -> Result<Option<Streamed>, StoreError> {
        // The call is traced to its answer's head; its bytes are counted as they arrive.
        let span = call_span(self.kind(), "get", key);
        let started = Instant::now();
        let result = self.inner.get_streamed(key).instrument(span.clone()).await;
        let outcome = match &result {
            Ok(Some(streamed)) => {
                span.record("version", display(&streamed.version));
                "read"
            }
            Ok(None) => "absent",
            Err(_) => "error",
        };
        let ms = finish(&span, outcome, started);
        telemetry::metrics().store_call(self.kind().as_str(), "get", outcome, ms);
        Ok(result?.map(|s| Streamed {
            version: s.version,
            chunks: Box::pin(s.chunks.inspect(|chunk| {
                if let Ok(bytes) = chunk {
                    telemetry::metrics().bytes_read(bytes.len());
                }
            })),
        }))
    }

    async fn list_page(&self, prefix: &str, token: Option<String>) -> Result<Page, StoreError> {
        let span = call_span(self.kind(), "list", prefix);
        let started = Instant::now();
        let result = self
            .inner
            .list_page(prefix, token)
            .instrument(span.clone())
            .await;
        listed(self.kind(), &span, started, result)
    }

    fn range_start(&self) -> RangeStart {
        self.inner.range_start()
    }

    async fn list_range_page(
        &self,
        prefix: &str,
        range: &KeyRange,
        limit: usize,
        token: Option<String>,
    ) -> Result<Page, StoreError> {
        let span = call_span(self.kind(), "list_range", prefix);
        if let Some(after) = &range.after {
            span.record("range.after", after.as_str());
        }
        if let Some(before) = &range.before {
            span.record("range.before", before.trim_end_matches('\0'));
        }
        let started = Instant::now();
        let result = self
            .inner
            .list_range_page(prefix, range, limit, token)
            .instrument(span.clone())
            .await;
        listed(self.kind(), &span, started, result)
    }

    async fn put(
        &self,
        key: &str,
        bytes: &[u8],
        precondition: &Precondition,
    ) -> Result<WriteOutcome<Version>, StoreError> {
        let op = StoreCall::from(precondition).as_str();
        let span = call_span(self.kind(), op, key);
        span.record("bytes", bytes.len());
        if let Some(v) = precondition.expected() {
            span.record("expected.version", display(v));
        }
        let started = Instant::now();
        let result = self
            .inner
            .put(key, bytes, precondition)
            .instrument(span.clone())
            .await;
        if matches!(result, Ok(WriteOutcome::Written(_))) {
            telemetry::metrics().bytes_written(bytes.len());
        }
        let outcome = write_outcome(&span, key, &result);
        let ms = finish(&span, outcome, started);
        telemetry::metrics().store_call(self.kind().as_str(), op, outcome, ms);
        result
    }

    async fn delete(&self, key: &str, expected: &Version) -> Result<WriteOutcome<()>, StoreError> {
        let span = call_span(self.kind(), "delete", key);
        span.record("expected.version", display(expected));
        let started = Instant::now();
        let result = self
            .inner
            .delete(key, expected)
            .instrument(span.clone())
            .await;
        let outcome = match &result {
            // A delete that finds nothing there: the record is already gone.
            Ok(WriteOutcome::Conflict(c)) if c.found.is_none() => "absent",
            _ => write_outcome(&span, key, &result),
        };
        let ms = finish(&span, outcome, started);
        telemetry::metrics().store_call(self.kind().as_str(), "delete", outcome, ms);
        result
    }

    async fn list_versions(&self, prefix: &str) -> Result<VersionListing, StoreError> {
        let span = call_span(self.kind(), "list_versions", prefix);
        let started = Instant::now();
        let result = self
            .inner
            .list_versions(prefix)
            .instrument(span.clone())
            .await;
        let outcome = match &result {
            Ok(listing) => {
                span.record("records", listing.versions.len());
                "read"
            }
            Err(_) => "error",
        };
        let ms = finish(&span, outcome, started);
        telemetry::metrics().store_call(self.kind().as_str(), "list_versions", outcome, ms);
        result
    }

    async fn get_version(&self, key: &str, version_id: &str) -> Result<Option<Stored>, StoreError> {
        let span = call_span(self.kind(), "get_version", key);
        let started = Instant::now();
        let result = self
            .inner
            .get_version(key, version_id)
            .instrument(span.clone())
            .await;
        let outcome = match &result {
            Ok(Some(stored)) => {
                span.record("bytes", stored.bytes.len());
                span.record("version", version_id);
                telemetry::metrics().bytes_read(stored.bytes.len());
                "read"
            }
            Ok(None) => "absent",
            Err(_) => "error",
        };
        let ms = finish(&span, outcome, started);
        telemetry::metrics().store_call(self.kind().as_str(), "get_version", outcome, ms);
        result
    }

    async fn store_time(&self, key: &str) -> Result<StoreTime, StoreError> {
        let span = call_span(self.kind(), "time", key);
        let started = Instant::now();
        let result = self.inner.store_time(key).instrument(span.clone()).await;
        let outcome = if result.is_ok() { "read" } else { "error" };
        let ms = finish(&span, outcome, started);
        telemetry::metrics().store_call(self.kind().as_str(), "time", outcome, ms);
        result
    }
}

/// End a listing's span with its outcome and record count, and count it as a `list` call.
fn listed(
    kind: StoreKind,
    span: &tracing::Span,
    started: Instant,
    result: Result<Page, StoreError>,
) -> Result<Page, StoreError> {
    let outcome = match &result {
        Ok(page) => {
            span.record("records", page.items.len());
            "read"
        }
        Err(_) => "error",
    };
    let ms = finish(span, outcome, started);
    telemetry::metrics().store_call(kind.as_str(), "list", outcome, ms);
    result
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id};
    use tracing_subscriber::layer::{Context, SubscriberExt};
    use tracing_subscriber::registry::LookupSpan;

    use super::*;

    /// A store double answering every call at once, of a chosen kind (unit test of the span layer only).
    #[derive(Debug)]
    struct Answering(StoreKind);

    #[async_trait]
    impl RecordStore for Answering {
        fn describe(&self) -> String {
            format!("{}://double", self.0.as_str())
        }
        fn kind(&self) -> StoreKind {
            self.0
        }
        async fn get(&self, _key: &str) -> Result<Option<Stored>, StoreError> {
            Ok(None)
        }
        async fn list_page(&self, _p: &str, _t: Option<String>) -> Result<Page, StoreError> {
            Ok(Page::default())
        }
        async fn put(
            &self,
            _key: &str,
            _bytes: &[u8],
            _p: &Precondition,
        ) -> Result<WriteOutcome<Version>, StoreError> {
            Ok(WriteOutcome::Written(Version::new("v1")))
        }
        async fn delete(&self, _k: &str, _v: &Version) -> Result<WriteOutcome<()>, StoreError> {
            Ok(WriteOutcome::Written(()))
        }
        async fn list_versions(&self, _p: &str) -> Result<VersionListing, StoreError> {
            Ok(VersionListing {
                versions: vec![],
                history: crate::store::History::Kept,
            })
        }
        async fn get_version(&self, _k: &str, _v: &str) -> Result<Option<Stored>, StoreError> {
            Ok(None)
        }
        async fn store_time(&self, _k: &str) -> Result<StoreTime, StoreError> {
            Ok(StoreTime {
                at: std::time::SystemTime::now(),
                resolution: std::time::Duration::ZERO,
            })
        }
    }

    /// Collects the `store.kind` attribute of every span.
    #[derive(Clone, Default)]
    struct Kinds(Arc<Mutex<BTreeMap<String, Vec<String>>>>);

    struct KindVisit<'a>(&'a mut Option<String>);

    impl Visit for KindVisit<'_> {
        fn record_str(&mut self, field: &Field, value: &str) {
            if field.name() == "store.kind" {
                *self.0 = Some(value.to_string());
            }
        }
        fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
    }

    impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Kinds {
        fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
            let mut kind = None;
            attrs.record(&mut KindVisit(&mut kind));
            if let (Some(kind), Ok(mut seen)) = (kind, self.0.lock()) {
                seen.entry(attrs.metadata().name().to_string())
                    .or_default()
                    .push(kind);
            }
        }
    }

    #[test]
    fn spans_name_every_kind() {
        let kinds = Kinds::default();
        let subscriber = tracing_subscriber::registry().with(kinds.clone());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        tracing::subscriber::with_default(subscriber, || {
            rt.block_on(async {
                for kind in [
                    StoreKind::Local,
                    StoreKind::S3,
                    StoreKind::Azure,
                    StoreKind::Gcs,
                ] {
                    let store = Traced::new(Arc::new(Answering(kind)));
                    store.get("tofu-records/e/r/a").await.unwrap();
                    super::super::put_conditional(
                        &store,
                        "tofu-records/e/r/a",
                        b"x",
                        &Precondition::Absent,
                    )
                    .await
                    .unwrap();
                }
            })
        });
        let seen = kinds.0.lock().unwrap().clone();
        let want: Vec<String> = ["local", "s3", "azurerm", "gcs"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(seen["store.put_conditional"], want);
        let calls: Vec<String> = seen["store.call"].iter().step_by(2).cloned().collect();
        assert_eq!(calls, want, "{seen:?}");
    }
}
