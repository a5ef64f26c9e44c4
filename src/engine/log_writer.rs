//! A run's writer of write log entries (docs/architecture.md, "The write log"): its clock,
//! checked once against the store's before its first entry and refused by name when too far
//! off; the entry made before each record write, and a new one when the record write is about
//! to go out after the stall limit. Every record writer (a session, the choudoufu protocol's
//! record writes, `records restore`) holds one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use thiserror::Error;
use tokio::sync::OnceCell;

use crate::cut::{Mechanism, cut};
use crate::engine::layout::Layout;
use crate::engine::operation::Operation;
use crate::engine::write_log::{
    Clock, ClockSkewError, LogEntry, SystemClock, Timing, check_skew, is_logged,
};
use crate::store::{DynStore, Precondition, StoreError, WriteOutcome, put_conditional};

/// Why a clock check did not pass.
#[derive(Debug, Error)]
pub enum ClockCheckError {
    /// The store could not tell its time: the check is made again next time.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// This clock is too far from the store's.
    #[error(transparent)]
    Skew(#[from] ClockSkewError),
}

/// Why an entry's name could not be taken: then its record is not written.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum EntryRefused {
    /// The key is not a record of this estate that the log names.
    #[error("{0} is no record the write log names")]
    NotARecord(String),
    /// The operation is no record write (only creates, updates and deletes are logged).
    #[error("{0} is no record write the write log names")]
    NotAWrite(Operation),
    /// Another entry holds the name (two entries of one run at one nanosecond and counter).
    #[error("write log entry {0} exists already")]
    Taken(String),
}

/// Why a write log entry could not be made: then its record is not written.
#[derive(Debug, Error)]
pub enum LogWriteError {
    /// The clock check did not pass.
    #[error(transparent)]
    Clock(#[from] ClockCheckError),
    /// The store call failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The entry was refused.
    #[error(transparent)]
    Refused(#[from] EntryRefused),
}

/// One run's writer of entries in one estate's log.
#[derive(Debug)]
pub struct LogWriter {
    store: DynStore,
    layout: Layout,
    run_id: String,
    clock: Arc<dyn Clock>,
    timing: Timing,
    /// Set once this clock was found close enough to the store's.
    checked: OnceCell<()>,
    /// The counter of this writer's entries.
    seq: AtomicU32,
}

impl LogWriter {
    /// A writer for run `run_id` in `layout`'s estate, on this machine's clock and the product's figures.
    pub fn new(store: DynStore, layout: Layout, run_id: &str) -> Self {
        LogWriter {
            store,
            layout,
            run_id: run_id.to_string(),
            clock: Arc::new(SystemClock),
            timing: Timing::default(),
            checked: OnceCell::new(),
            seq: AtomicU32::new(0),
        }
    }

    /// The same writer reading the time from `clock` (tests set a skewed one).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The same writer under the figures `timing` (tests shorten them).
    pub fn with_timing(mut self, timing: Timing) -> Self {
        self.timing = timing;
        self
    }

    /// The clock it reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Its figures.
    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    /// Compare this clock with the store's, once (a check that could not be made is made again
    /// next time): a clock further off than the skew limit is refused by name.
    pub async fn check_clock(&self) -> Result<(), ClockCheckError> {
        if cut(Mechanism::ClockSkew) {
            return Ok(());
        }
        self.checked
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

    /// Make the entry for `op` on `record_key` (`If-None-Match: *`), after the clock check.
    pub async fn log(&self, op: Operation, record_key: &str) -> Result<LogEntry, LogWriteError> {
        if !is_logged(op) {
            return Err(EntryRefused::NotAWrite(op).into());
        }
        self.check_clock().await?;
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let entry = LogEntry::new(
            &self.layout,
            self.clock.now(),
            &self.run_id,
            seq,
            op,
            record_key,
        )
        .ok_or_else(|| EntryRefused::NotARecord(record_key.to_string()))?;
        if cut(Mechanism::LogEntries) {
            return Ok(entry);
        }
        let key = entry.key(&self.layout);
        let body = entry.body(&self.layout, &self.run_id);
        match put_conditional(self.store.as_ref(), &key, &body, &Precondition::Absent).await? {
            WriteOutcome::Written(_) => Ok(entry),
            WriteOutcome::Conflict(_) => Err(EntryRefused::Taken(key.into_string()).into()),
        }
    }

    /// The entry a record write about to go out is made after: `entry`, or, when `entry` is
    /// older than the stall limit, a new one (so no record write starts from an old entry).
    pub async fn fresh(
        &self,
        entry: LogEntry,
        record_key: &str,
    ) -> Result<LogEntry, LogWriteError> {
        if !self.timing.is_stalled(entry.at(), self.clock.now()) || cut(Mechanism::LogStall) {
            return Ok(entry);
        }
        tracing::debug!(entry = %entry.name(), "the write log entry is past the stall limit: logging again");
        self.log(entry.op(), record_key).await
    }

    /// The entry to make before writing `record_key` (`op`): logged, and logged again when the
    /// first entry's write took past the stall limit. Its name goes into the record's writer stamp.
    pub async fn before_write(
        &self,
        op: Operation,
        record_key: &str,
    ) -> Result<LogEntry, LogWriteError> {
        let entry = self.log(op, record_key).await?;
        self.fresh(entry, record_key).await
    }
}
