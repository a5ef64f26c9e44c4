//! The engine: records, state documents, one run's session, claims, plans and plan stamps.
//!
//! It knows no HTTP, gRPC, cloud SDK or command line: the front doors translate their
//! protocol into these calls, and every read and write goes through a [`crate::store`].

pub mod address;
pub mod claims;
pub mod cone;
pub mod cores;
pub mod digest;
pub mod image;
pub mod layout;
pub mod log_writer;
pub mod markers;
pub mod operation;
pub mod plan;
pub mod plan_stamp;
pub mod private_dir;
pub mod program;
pub mod provider_return;
pub mod read;
pub mod read_cache;
pub mod record;
pub mod resume;
pub mod session;
pub mod state;
pub mod write;
pub mod write_log;
