//! Why a session could not read or write the estate.

use thiserror::Error;

use super::report::RecordConflictError;
use crate::engine::log_writer::{ClockCheckError, EntryRefused, LogWriteError};
use crate::engine::record::CorruptRecord;
use crate::engine::state::StateError;
use crate::engine::write::record_write::WriteError;
use crate::engine::write_log::ClockSkewError;
use crate::store::{GuardError, SafetyUnchecked, StoreError, UnsafeRecordStore};

/// Why a session could not read or write the estate.
#[derive(Debug, Error)]
pub enum SessionError {
    /// A store call failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The state document given to write is unreadable.
    #[error(transparent)]
    State(#[from] StateError),
    /// A stored record is corrupted.
    #[error(transparent)]
    Corrupt(#[from] CorruptRecord),
    /// Some records conflicted; the rest were written.
    #[error(transparent)]
    Conflict(#[from] RecordConflictError),
    /// The record store failed its safety check before the first write.
    #[error(transparent)]
    Unsafe(#[from] UnsafeRecordStore),
    /// The record store's safety could not be checked before the first write; it is checked again before the next.
    #[error(transparent)]
    Unchecked(#[from] SafetyUnchecked),
    /// This machine's clock is too far from the store's: no record was written.
    #[error(transparent)]
    ClockSkew(#[from] ClockSkewError),
    /// A record's write log entry was refused: the record was not written.
    #[error(transparent)]
    LogEntry(#[from] EntryRefused),
}

impl From<LogWriteError> for SessionError {
    fn from(e: LogWriteError) -> Self {
        match e {
            LogWriteError::Clock(ClockCheckError::Store(s)) | LogWriteError::Store(s) => {
                SessionError::Store(s)
            }
            LogWriteError::Clock(ClockCheckError::Skew(s)) => SessionError::ClockSkew(s),
            LogWriteError::Refused(r) => SessionError::LogEntry(r),
        }
    }
}

impl From<WriteError> for SessionError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Log(l) => l.into(),
            WriteError::Store(s) => SessionError::Store(s),
        }
    }
}

impl From<GuardError> for SessionError {
    fn from(e: GuardError) -> Self {
        match e {
            GuardError::Unsafe(u) => SessionError::Unsafe(u),
            GuardError::Unchecked(u) => SessionError::Unchecked(u),
        }
    }
}

impl SessionError {
    /// Whether the write failed because the store failed (not a conflict, a bad document or a finding): what was not written is worth keeping.
    pub fn store_failed(&self) -> bool {
        matches!(self, SessionError::Store(_) | SessionError::Unchecked(_))
    }
}
