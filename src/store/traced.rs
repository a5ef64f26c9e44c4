//! A record store wrapped so every call is a span and a latency sample: names and counts, never bytes.

use std::time::Instant;

use async_trait::async_trait;
use tracing::Instrument;
use tracing::field::Empty;

use super::{DynStore, Page, RecordStore, Stored, Version, WriteOutcome};
use crate::error::StoreError;
use crate::telemetry::{self, elapsed_ms};

/// Every call of the inner store in a `store.call` span, with its latency in the metrics.
#[derive(Debug)]
pub struct Traced {
    inner: DynStore,
    kind: &'static str,
}

impl Traced {
    /// `inner`, traced.
    pub fn new(inner: DynStore) -> Self {
        let kind = telemetry::store_kind(&inner.describe());
        Traced { inner, kind }
    }
}

fn span(kind: &'static str, op: &'static str, key: &str) -> tracing::Span {
    tracing::info_span!(
        "store.call",
        store.kind = kind,
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
        otel.status_code = Empty,
    )
}

fn finish(
    span: &tracing::Span,
    kind: &'static str,
    op: &'static str,
    outcome: &'static str,
    started: Instant,
) {
    let ms = elapsed_ms(started);
    span.record("outcome", outcome);
    span.record("latency_ms", ms);
    if outcome == "error" {
        span.record("otel.status_code", "ERROR");
    }
    telemetry::metrics().store_call(kind, op, outcome, ms);
}

/// The span attributes and outcome of a conditional write's result.
pub fn write_outcome(
    span: &tracing::Span,
    key: &str,
    result: &Result<WriteOutcome, StoreError>,
) -> &'static str {
    match result {
        Ok(WriteOutcome::Written(v)) => {
            if let Some(v) = v {
                span.record("version", tracing::field::display(v));
            }
            "written"
        }
        Ok(WriteOutcome::Conflict(c)) => {
            if let Some(v) = &c.expected {
                span.record("expected.version", tracing::field::display(v));
            }
            if let Some(v) = &c.found {
                span.record("found.version", tracing::field::display(v));
            }
            span.record("conflict.address", telemetry::address_of_key(key).as_str());
            "conflict"
        }
        Err(_) => "error",
    }
}

#[async_trait]
impl RecordStore for Traced {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    async fn get(&self, key: &str) -> Result<Option<Stored>, StoreError> {
        let span = span(self.kind, "get", key);
        let started = Instant::now();
        let result = self.inner.get(key).instrument(span.clone()).await;
        let outcome = match &result {
            Ok(Some(stored)) => {
                span.record("bytes", stored.bytes.len());
                span.record("version", tracing::field::display(&stored.version));
                telemetry::metrics().bytes_read(stored.bytes.len());
                "read"
            }
            Ok(None) => "absent",
            Err(_) => "error",
        };
        finish(&span, self.kind, "get", outcome, started);
        result
    }

    async fn list_page(&self, prefix: &str, token: Option<String>) -> Result<Page, StoreError> {
        let span = span(self.kind, "list", prefix);
        let started = Instant::now();
        let result = self
            .inner
            .list_page(prefix, token)
            .instrument(span.clone())
            .await;
        let outcome = match &result {
            Ok(page) => {
                span.record("records", page.items.len());
                "read"
            }
            Err(_) => "error",
        };
        finish(&span, self.kind, "list", outcome, started);
        result
    }

    async fn create(&self, key: &str, bytes: &[u8]) -> Result<WriteOutcome, StoreError> {
        let span = span(self.kind, "create", key);
        span.record("bytes", bytes.len());
        let started = Instant::now();
        let result = self.inner.create(key, bytes).instrument(span.clone()).await;
        if matches!(result, Ok(WriteOutcome::Written(_))) {
            telemetry::metrics().bytes_written(bytes.len());
        }
        let outcome = write_outcome(&span, key, &result);
        finish(&span, self.kind, "create", outcome, started);
        result
    }

    async fn update(
        &self,
        key: &str,
        bytes: &[u8],
        expected: &Version,
    ) -> Result<WriteOutcome, StoreError> {
        let span = span(self.kind, "update", key);
        span.record("bytes", bytes.len());
        span.record("expected.version", tracing::field::display(expected));
        let started = Instant::now();
        let result = self
            .inner
            .update(key, bytes, expected)
            .instrument(span.clone())
            .await;
        if matches!(result, Ok(WriteOutcome::Written(_))) {
            telemetry::metrics().bytes_written(bytes.len());
        }
        let outcome = write_outcome(&span, key, &result);
        finish(&span, self.kind, "update", outcome, started);
        result
    }

    async fn delete(&self, key: &str, expected: &Version) -> Result<WriteOutcome, StoreError> {
        let span = span(self.kind, "delete", key);
        span.record("expected.version", tracing::field::display(expected));
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
        finish(&span, self.kind, "delete", outcome, started);
        result
    }
}
