//! The named errors: each says what happened, names what it is about, and what was not changed.

use std::fmt;
use std::path::PathBuf;

use thiserror::Error;

use crate::store::Version;

/// A record store call failed for a reason other than a conditional-write conflict.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The store answered with an error.
    #[error("record store {store}: {op} {key} failed: {message}")]
    Backend {
        /// The store, e.g. `s3://bucket`.
        store: String,
        /// The operation: get, list, create, update, delete.
        op: &'static str,
        /// The key concerned.
        key: String,
        /// What the store said.
        message: String,
    },
    /// A local file operation failed.
    #[error("local record store: {op} {path}: {source}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A local record's lock file was held by a live writer for longer than the wait bound.
    #[error(
        "local record store: {path} is held by a live writer ({holder}) for more than {waited_secs}s; nothing was written"
    )]
    LockBusy {
        /// The lock file.
        path: PathBuf,
        /// Who holds it, as written in the lock file.
        holder: String,
        /// How long this writer waited.
        waited_secs: u64,
    },
    /// A key that is not inside the store's layout.
    #[error("record store: refused key {key:?}: {reason}")]
    BadKey {
        /// The key.
        key: String,
        /// Why it is refused.
        reason: &'static str,
    },
}

/// A terraform state document that cannot be read as state version 4.
#[derive(Debug, Error)]
pub enum StateError {
    /// Not JSON at all.
    #[error("state document is not valid JSON ({0}); nothing was written")]
    NotJson(String),
    /// A state format version other than 4.
    #[error(
        "state document has format version {0}; only version 4 is supported; nothing was written"
    )]
    UnsupportedVersion(String),
    /// JSON of the wrong shape.
    #[error("state document is malformed: {0}; nothing was written")]
    Malformed(String),
    /// Two instance objects with one address.
    #[error("state document holds {0} twice; nothing was written")]
    DuplicateAddress(String),
}

/// A record in the store that cannot be decoded or does not belong where it lies.
#[derive(Debug, Error)]
#[error("corrupted record at {key}: {reason}; the run stopped before writing anything")]
pub struct CorruptRecord {
    /// The store key.
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

/// The root's `live` block is missing or invalid.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// No live block anywhere in the root.
    #[error(
        "no live block in {root}: add a file live.hcl to the root with\n\n  live {{\n    estate = \"my-estate\"\n    record_store \"local\" {{\n      path = \".live-records\"\n    }}\n  }}\n\n(or, for choudoufu, the same block inside terraform {{}})"
    )]
    NoLiveBlock {
        /// The root folder.
        root: PathBuf,
    },
    /// Two live blocks: in two files, or twice in one.
    #[error("two live blocks: {first} and {second}; keep exactly one")]
    TwoLiveBlocks {
        /// `file:line` of the first.
        first: String,
        /// `file:line` of the second.
        second: String,
    },
    /// A file that is not valid HCL.
    #[error("{file}: {message}")]
    Parse {
        /// The file.
        file: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A live block whose content is wrong.
    #[error("{at}: {message}")]
    Invalid {
        /// `file:line` of the offending item.
        at: String,
        /// What is wrong and what to write instead.
        message: String,
    },
    /// The root has no `backend "http" {}` for `run` to point at its server.
    #[error(
        "no backend \"http\" block in {root}: `choudoufu-live run` serves the state over terraform's HTTP backend; add to a .tf file in the root:\n\n  terraform {{\n    backend \"http\" {{}}\n  }}\n\n(leave address, lock_address and unlock_address out: run sets the address for each run)"
    )]
    NoHttpBackend {
        /// The root folder.
        root: PathBuf,
    },
    /// A file that could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// One record whose conditional write met a version another run wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordConflict {
    /// The resource instance address (or `output.<name>`).
    pub address: String,
    /// What this run tried: create, update or delete.
    pub op: &'static str,
    /// The version this run read (none: it expected no record).
    pub expected: Option<Version>,
    /// The version the store holds now (none: no record).
    pub stored: Option<Version>,
}

impl fmt::Display for RecordConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<Version>| match v {
            Some(v) => v.to_string(),
            None => "no record".to_string(),
        };
        write!(
            f,
            "{} ({}): expected version {}, store has {}",
            self.address,
            self.op,
            show(&self.expected),
            show(&self.stored)
        )
    }
}

/// Record store write conflict: records another run changed after this run read them.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub struct RecordConflictError {
    /// Every conflicting record, in address order.
    pub conflicts: Vec<RecordConflict>,
    /// How many other records this write did land.
    pub landed: usize,
}

impl fmt::Display for RecordConflictError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Record store write conflict (RecordConflictError): {} record(s) changed by another run after this run read them:",
            self.conflicts.len()
        )?;
        for c in &self.conflicts {
            writeln!(f, "  - {c}")?;
        }
        write!(
            f,
            "Nothing was overwritten: the store keeps the other run's records. {} other record(s) of this write landed. Re-plan and re-apply; the new plan reads what the other run wrote.",
            self.landed
        )
    }
}

/// The record store's bucket is not safe to keep records in; nothing was written.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "UnsafeRecordStore: {store} is not safe to keep records in; nothing was written.\n{}\nTo proceed anyway (unsafe), set skip_bucket_checks = true in the record_store block.",
    problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n")
)]
pub struct UnsafeRecordStore {
    /// The store, e.g. `s3://bucket`.
    pub store: String,
    /// Each failing setting, with the command that fixes it.
    pub problems: Vec<String>,
}

/// A change refused before its provider call: it, or something it depends on, is in flight in another live run.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "InFlightDependencyError: {address} cannot change now: {blocked_by} is being changed ({operation} since {since}) by run {other_run}, which is still alive. Nothing was changed and no provider was called; apply again once that run has ended."
)]
pub struct InFlightDependencyError {
    /// The resource this run wanted to change.
    pub address: String,
    /// The resource in flight (the same address, or a dependency).
    pub blocked_by: String,
    /// The other run.
    pub other_run: String,
    /// What the other run is doing.
    pub operation: String,
    /// Since when.
    pub since: String,
}

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
}

/// Two or more live objects carry one resource's live markers: none is bound, nothing is created.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "CollisionError: {address} (estate {estate:?}): {} live objects carry its markers (tofu-estate, tofu-address): {}. None was bound and nothing was created; delete the extra object(s), or import the right one, and apply again.",
    ids.len(),
    ids.join(", ")
)]
pub struct CollisionError {
    /// The resource instance address.
    pub address: String,
    /// The estate.
    pub estate: String,
    /// Every object found (ARNs), in order.
    pub ids: Vec<String>,
}
