//! The session's side of the write log: its clock, checked once against the store's before
//! it writes (an image, for now; every record write once the log is written), and refused by
//! name when too far off; the entry made before a record write, and a new one when the record
//! write is about to go out after the stall limit.

use std::sync::atomic::Ordering;

use thiserror::Error;

use super::handle::Session;
use crate::cut::{Mechanism, cut};
use crate::engine::write_log::{ClockSkewError, LogEntry, LogOp, check_skew};
use crate::store::{Precondition, StoreError, WriteOutcome, put_conditional};

/// Why a session's clock check did not pass.
#[derive(Debug, Error)]
pub enum ClockCheckError {
    /// The store could not tell its time: the check is made again next time.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// This clock is too far from the store's.
    #[error(transparent)]
    Skew(#[from] ClockSkewError),
}

impl Session {
    /// Compare this session's clock with the store's, once (a check that could not be made is
    /// made again next time): a clock further off than the skew limit is refused by name.
    pub async fn check_clock(&self) -> Result<(), ClockCheckError> {
        if cut(Mechanism::ClockSkew) {
            return Ok(());
        }
        self.clock_checked
            .get_or_try_init(|| async {
                let key = self.layout.estate_key();
                let sent = self.clock.now();
                let time = self.store.store_time(&key).await?;
                let answered = self.clock.now();
                let limit = self.timing.skew_limit();
                let skew = check_skew(&self.store.describe(), sent, answered, time, limit)?;
                tracing::debug!(
                    skew_ms = skew.as_millis() as u64,
                    "this clock is close enough to the store's"
                );
                Ok::<(), ClockCheckError>(())
            })
            .await?;
        Ok(())
    }
}

/// Why a session could not make a write log entry: then it writes no record.
#[derive(Debug, Error)]
pub enum LogWriteError {
    /// The clock check did not pass.
    #[error(transparent)]
    Clock(#[from] ClockCheckError),
    /// The store call failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The key is not a record of this estate that the log names.
    #[error("{0} is no record the write log names")]
    NotARecord(String),
    /// Another entry holds the name (two entries of one run at one nanosecond and counter).
    #[error("write log entry {0} exists already")]
    Taken(String),
}

impl Session {
    /// Make the entry for `op` on `record_key` (`If-None-Match: *`), after the clock check:
    /// before the record write it names.
    pub async fn log_write(&self, op: LogOp, record_key: &str) -> Result<LogEntry, LogWriteError> {
        self.check_clock().await?;
        let seq = self.log_seq.fetch_add(1, Ordering::Relaxed);
        let entry = LogEntry::new(
            &self.layout,
            self.clock.now(),
            &self.run.run_id,
            seq,
            op,
            record_key,
        )
        .ok_or_else(|| LogWriteError::NotARecord(record_key.to_string()))?;
        let key = entry.key(&self.layout);
        let body = entry.body(&self.layout, &self.run.run_id);
        match put_conditional(self.store.as_ref(), &key, &body, &Precondition::Absent).await? {
            WriteOutcome::Written(_) => Ok(entry),
            WriteOutcome::Conflict(_) => Err(LogWriteError::Taken(key)),
        }
    }

    /// The entry a record write about to go out is made after: `entry`, or, when `entry` is
    /// older than the stall limit, a new one (so no record write starts from an old entry).
    pub async fn fresh_entry(
        &self,
        entry: LogEntry,
        record_key: &str,
    ) -> Result<LogEntry, LogWriteError> {
        if !self.timing.is_stalled(entry.at(), self.clock.now()) || cut(Mechanism::LogStall) {
            return Ok(entry);
        }
        tracing::debug!(entry = %entry.name(), "the write log entry is past the stall limit: logging again");
        self.log_write(entry.op, record_key).await
    }
}
