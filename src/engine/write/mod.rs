//! Writing records: one record write, and the writes made of it.
//!
//! By owner: `record_write` one record write (its log entry, writer stamp, conditional write,
//! own content, and a conflict as a value), `conflict` the conflict it reports, `records` the
//! choudoufu protocol's record-level writes and reads, `provider` a default provider's record,
//! `delete_rule` the delete rules every door applies, and `restore` putting an older version
//! of a record back. A session's save and its writes at a provider's return
//! ([`crate::engine::session`]) write through [`record_write`] too.

pub mod conflict;
pub mod delete_rule;
pub mod provider;
pub mod record_write;
pub mod records;
pub mod restore;

pub use conflict::RecordConflict;
pub use record_write::{Body, Change, WriteError, Wrote, write_record};
