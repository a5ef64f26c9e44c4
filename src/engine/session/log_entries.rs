//! The session's side of the write log: its clock check (before it writes an image or a
//! record) and its entries, each made by the session's [`LogWriter`].

use super::handle::Session;
use crate::engine::log_writer::{ClockCheckError, LogWriteError};
use crate::engine::operation::Operation;
use crate::engine::write_log::LogEntry;

impl Session {
    /// Compare this session's clock with the store's, once (a check that could not be made is
    /// made again next time): a clock further off than the skew limit is refused by name.
    pub async fn check_clock(&self) -> Result<(), ClockCheckError> {
        self.log.check_clock().await
    }

    /// Make the entry for `op` on `record_key` (`If-None-Match: *`), after the clock check:
    /// before the record write it names.
    pub async fn log_write(
        &self,
        op: Operation,
        record_key: &str,
    ) -> Result<LogEntry, LogWriteError> {
        self.log.log(op, record_key).await
    }

    /// The entry a record write about to go out is made after: `entry`, or, when `entry` is
    /// older than the stall limit, a new one (so no record write starts from an old entry).
    pub async fn fresh_entry(
        &self,
        entry: LogEntry,
        record_key: &str,
    ) -> Result<LogEntry, LogWriteError> {
        self.log.fresh(entry, record_key).await
    }
}
