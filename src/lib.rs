//! choudoufu-live: one record per resource, every write conditional, no state lock.
//!
//! The engine (`store`, `record`, `state`, `session`) knows nothing of gRPC or
//! HTTP; the front doors translate their protocol and call it.

pub mod address;
pub mod bucket;
pub mod cli;
pub mod config;
pub mod cut;
pub mod digest;
pub mod error;
pub mod http_backend;
pub mod iam;
pub mod layout;
pub mod logging;
pub mod markers;
pub mod markers_aws;
pub mod pending;
pub mod plan_stamp;
pub mod plugin;
pub mod program;
pub mod proto;
pub mod read_cache;
pub mod record;
pub mod record_writes;
pub mod session;
pub mod state;
pub mod store;
pub mod telemetry;
