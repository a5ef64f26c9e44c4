//! choudoufu-live: one record per resource, every write conditional, no state lock.
//!
//! The crate map (each layer imports only those above it in this list):
//!
//! - [`cut`]: test-only switches that cut one mechanism out, for `make prove-claims`;
//! - [`telemetry`], [`logging`]: spans and metrics exported over OTLP when asked; stderr logs;
//! - [`store`]: record stores (local, S3, Azure Blob, GCS) and their one conditional write;
//! - [`engine`]: records, state documents, sessions, claims and plan stamps (no HTTP, gRPC, SDK or CLI);
//! - [`config`]: finds and reads a root's live block;
//! - [`cloud`]: cloud-specific work beyond the store (AWS live markers, each cloud's per-estate access policy);
//! - [`frontdoor`]: the doors terraform comes in by (a per-run HTTP state server, plugin mode over gRPC);
//! - [`run`]: `choudoufu-live run`, the terraform driver around the HTTP door;
//! - [`cli`]: the command line.

pub mod cli;
pub mod cloud;
pub mod config;
pub mod cut;
pub mod engine;
pub mod frontdoor;
pub mod logging;
pub mod run;
pub mod store;
pub mod telemetry;
