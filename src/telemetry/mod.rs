//! OpenTelemetry export: spans and metrics over OTLP/gRPC, only when the standard `OTEL_*` variables ask for it.
//!
//! With no `OTEL_EXPORTER_OTLP_ENDPOINT` (nor `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`) set, [`layer`] returns `None`: no exporter, no
//! connection, no background thread, and every metric below is OpenTelemetry's no-op.
//!
//! What is exported is names, never values: spans carry keys, addresses, versions, counts,
//! outcomes and timings; no record bytes and no state document content. Log events stay on
//! stderr (see `logging`) and are not exported.

pub mod export;
pub mod metrics;
pub mod scope;

pub use export::{EXIT_FLUSH, PLUGIN_FLUSH, Wanted, active, layer, shutdown, wanted, wanted_from};
pub use metrics::{ConflictKind, Metrics, elapsed_ms, metrics, names};
pub use scope::SERVICE;
