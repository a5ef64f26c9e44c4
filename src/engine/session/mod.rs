//! A session: one run's view of an estate: the base it read, and conditional writes of what changed.
//!
//! Concurrency duty: one session serves one run; its calls may come from several tasks at
//! once (terraform's GETs and POSTs), and a write holds the view for its whole length, so
//! a read never sees a base that is half advanced. Other runs are never waited for: the
//! store decides every write.
//!
//! By owner: `handle` the session and its set-up, `view` what it holds of the estate and the
//! run, `snapshot` the records it read and the base a write compares against, `run_info` who
//! the run is, `read_view` reading the estate into the view (through `engine::read`), `records_now` a few records read by key, `log_entries` the session's side of the write log
//! (its clock check, its entries), `assemble` the state document served, `write` writing one
//! (`report` what it did), `instant` writing one record at a provider's return (both through
//! [`crate::engine::write`]'s one record write), `recovery` what a failed write leaves, `estate_end` a workspace's estate deleted, `trace`
//! the spans and metrics, and `error` why a call failed.

mod assemble;
pub(crate) mod error;
mod estate_end;
mod handle;
mod instant;
mod log_entries;
mod read_view;
mod records_now;
mod recovery;
mod report;
mod run_info;
pub(crate) mod snapshot;
mod trace;
mod view;
mod write;

pub use assemble::{FALLBACK_TERRAFORM_VERSION, document, header_of, initial_lineage, serial_of};
pub use error::SessionError;
pub use estate_end::EstateDeleted;
pub use handle::{AheadSlot, DEFAULT_PARALLEL, Session};

pub use instant::{Instant, Landed};
pub use recovery::{RECOVERY_FORMAT, Recovery, RecoveryError};
pub use report::{RecordConflictError, WriteReport};
pub use run_info::RunInfo;
pub use snapshot::{BaseEntry, BaseRef, Part, PartInstance, Snapshot};
pub use view::{Pin, Unwritten};
