//! The session layer's spans and metrics: `session.refresh` and `session.write_state`, names and counts only.

use std::future::Future;

use tracing::Instrument;
use tracing::field::Empty;

use super::error::SessionError;
use super::report::WriteReport;
use super::run_info::RunInfo;
use crate::engine::layout::Layout;
use crate::telemetry::{self, ConflictKind};

/// Run `read` (which answers how many records it read) in a `session.refresh` span.
pub(super) async fn refresh(
    layout: &Layout,
    run: &RunInfo,
    read: impl Future<Output = Result<usize, SessionError>>,
) -> Result<(), SessionError> {
    let span = tracing::info_span!(
        "session.refresh",
        estate = %layout.estate(),
        run_id = %run.run_id,
        records = Empty,
    );
    let records = read.instrument(span.clone()).await?;
    span.record("records", records);
    Ok(())
}

/// Run `write` (a state document of `bytes` bytes) in a `session.write_state` span, and count what it did.
pub(super) async fn write_state(
    layout: &Layout,
    run: &RunInfo,
    bytes: usize,
    write: impl Future<Output = Result<WriteReport, SessionError>>,
) -> Result<WriteReport, SessionError> {
    let span = tracing::info_span!(
        "session.write_state",
        estate = %layout.estate(),
        run_id = %run.run_id,
        bytes,
        records.created = Empty,
        records.updated = Empty,
        records.deleted = Empty,
        records.already_gone = Empty,
        records.unchanged = Empty,
        records.skipped = Empty,
        conflicts = Empty,
        conflict.addresses = Empty,
        outcome = Empty,
        otel.status_code = Empty,
    );
    let result = write.instrument(span.clone()).await;
    match &result {
        Ok(report) => record_report(&span, report),
        Err(_) => {
            span.record("outcome", "error");
            span.record("otel.status_code", "ERROR");
        }
    }
    result
}

fn record_report(span: &tracing::Span, report: &WriteReport) {
    span.record("records.created", report.created.len());
    span.record("records.updated", report.updated.len());
    span.record("records.deleted", report.deleted.len());
    span.record("records.already_gone", report.already_gone.len());
    span.record("records.unchanged", report.unchanged);
    span.record("records.skipped", report.skipped.len());
    span.record("conflicts", report.conflicts.len());
    let m = telemetry::metrics();
    m.records_written("create", report.created.len());
    m.records_written("update", report.updated.len());
    m.records_written("delete", report.deleted.len());
    m.records_unchanged(report.unchanged);
    m.conflicts(ConflictKind::Record, report.conflicts.len());
    if report.conflicts.is_empty() {
        span.record("outcome", "written");
    } else {
        let names: Vec<&str> = report
            .conflicts
            .iter()
            .map(|c| c.address.as_str())
            .collect();
        span.record("conflict.addresses", names.join(",").as_str());
        span.record("outcome", "conflict");
    }
}
