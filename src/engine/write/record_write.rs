//! One record write: its log entry, the writer stamp, the conditional write, and what became of it.
//!
//! Every writer of a record (a session's save, a record written at a provider's return, the
//! choudoufu protocol's record writes, `records restore`) writes through [`write_record`]: a
//! conflict comes back as a value, and a refused write whose earlier try landed is known as
//! this run's own.

use thiserror::Error;

use super::conflict::RecordConflict;
use crate::cut::{Mechanism, cut};
use crate::engine::layout::Layout;
use crate::engine::log_writer::{LogWriteError, LogWriter};
use crate::engine::operation::Operation;
use crate::engine::record::Record;
use crate::engine::write_log::LogEntry;
use crate::store::{Precondition, RecordStore, StoreError, Version, WriteOutcome, put_conditional};

/// What a record write puts: stamped with its log entry, encoded, and known again when read back.
pub trait Body: Sized + Send + Sync {
    /// Stamp the name of the write log entry made before this write.
    fn stamp(&mut self, entry: &LogEntry);
    /// The bytes stored.
    fn encode(&self) -> Vec<u8>;
    /// What `bytes`, read back from `key`, hold when they are this same write, landed (the same
    /// writing run, the same content); none when they are another write, or do not decode (then
    /// the refusal stands as a conflict).
    fn own(&self, key: &str, bytes: &[u8], layout: &Layout) -> Option<Self>;
}

impl Body for Record {
    fn stamp(&mut self, entry: &LogEntry) {
        self.writer.log = Some(entry.name());
    }

    fn encode(&self) -> Vec<u8> {
        Record::encode(self)
    }

    fn own(&self, key: &str, bytes: &[u8], layout: &Layout) -> Option<Record> {
        let stored = Record::decode(key, bytes, layout).ok()?;
        (stored.writer.run_id == self.writer.run_id
            && stored.content_digest() == self.content_digest())
        .then_some(stored)
    }
}

/// What one record write does, and what it requires of the record it replaces (object_store's
/// put mode, with the delete).
#[derive(Clone, Debug, PartialEq)]
pub enum Change<B> {
    /// Put `body` if the stored record meets `precondition`.
    Put {
        /// What is put.
        body: B,
        /// What the stored record must be.
        precondition: Precondition,
    },
    /// Delete the record if it is still at `expected`.
    Delete {
        /// The version read.
        expected: Version,
    },
}

impl<B> Change<B> {
    /// The operation: create (put on no record), update (put on a version) or delete.
    pub fn operation(&self) -> Operation {
        match self {
            Change::Put {
                precondition: Precondition::Absent,
                ..
            } => Operation::Create,
            Change::Put {
                precondition: Precondition::Matches(_),
                ..
            } => Operation::Update,
            Change::Delete { .. } => Operation::Delete,
        }
    }
}

/// What became of one record write.
#[derive(Clone, Debug, PartialEq)]
pub enum Wrote<B> {
    /// The put landed: the new version, the body as stamped, and the bytes stored.
    Put {
        /// The new version.
        version: Version,
        /// The body, stamped with its log entry.
        body: B,
        /// The bytes stored.
        bytes: Vec<u8>,
    },
    /// The store already holds this run's own write with this content (an earlier try landed
    /// and only its answer was lost): the version and what it holds.
    Already {
        /// The version the store holds.
        version: Version,
        /// The record it holds.
        stored: B,
    },
    /// The delete landed.
    Deleted,
    /// The delete found no record.
    AlreadyGone,
    /// Another run changed the record after this run read it; nothing was written.
    Conflict(RecordConflict),
}

/// Why a record write failed other than by a conflict: then the record was not written, or
/// whether it was is unknown.
#[derive(Debug, Error)]
pub enum WriteError {
    /// The write log entry could not be made: the record was not written.
    #[error(transparent)]
    Log(#[from] LogWriteError),
    /// A store call failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Write the record at `key` (`address` names it in a conflict): make its write log entry with
/// `log`, stamp the entry's name on the body, encode it, and make `change` as one conditional
/// request. A refused put whose stored record is this run's own with this content is
/// [`Wrote::Already`]; any other refusal is [`Wrote::Conflict`].
pub async fn write_record<B: Body>(
    store: &dyn RecordStore,
    layout: &Layout,
    log: &LogWriter,
    key: &str,
    address: &str,
    change: Change<B>,
) -> Result<Wrote<B>, WriteError> {
    let op = change.operation();
    let conflict = |expected, stored| {
        Wrote::Conflict(RecordConflict {
            address: address.to_string(),
            op,
            expected,
            stored,
        })
    };
    match change {
        Change::Delete { expected } => {
            log.before_write(op, key).await?;
            Ok(match store.delete(key, &expected).await? {
                WriteOutcome::Written(()) => Wrote::Deleted,
                WriteOutcome::Conflict(c) if c.found.is_none() => Wrote::AlreadyGone,
                WriteOutcome::Conflict(c) => conflict(c.expected, c.found),
            })
        }
        Change::Put { body, precondition } => {
            put_record(store, layout, log, key, address, body, precondition)
                .await
                .map(Wrote::from)
        }
    }
}

/// What a put did: [`Wrote`] without the outcomes only a delete has.
#[derive(Debug)]
pub enum Put<B> {
    /// The put landed: the new version, the body as stamped, and the bytes stored.
    Landed {
        /// The new version.
        version: Version,
        /// The body, stamped with its log entry.
        body: B,
        /// The bytes stored.
        bytes: Vec<u8>,
    },
    /// The store already holds this run's own write with this content.
    Already {
        /// The version the store holds.
        version: Version,
        /// The record it holds.
        stored: B,
    },
    /// Another run changed the record after this run read it; nothing was written.
    Conflict(RecordConflict),
}

impl<B> From<Put<B>> for Wrote<B> {
    fn from(put: Put<B>) -> Self {
        match put {
            Put::Landed {
                version,
                body,
                bytes,
            } => Wrote::Put {
                version,
                body,
                bytes,
            },
            Put::Already { version, stored } => Wrote::Already { version, stored },
            Put::Conflict(c) => Wrote::Conflict(c),
        }
    }
}

/// [`write_record`] of a put of `body` under `precondition`.
pub async fn put_record<B: Body>(
    store: &dyn RecordStore,
    layout: &Layout,
    log: &LogWriter,
    key: &str,
    address: &str,
    mut body: B,
    precondition: Precondition,
) -> Result<Put<B>, WriteError> {
    let op = match precondition {
        Precondition::Absent => Operation::Create,
        Precondition::Matches(_) => Operation::Update,
    };
    let entry = log.before_write(op, key).await?;
    body.stamp(&entry);
    let bytes = body.encode();
    Ok(
        match put_conditional(store, key, &bytes, &precondition).await? {
            WriteOutcome::Written(version) => Put::Landed {
                version,
                body,
                bytes,
            },
            WriteOutcome::Conflict(c) => {
                if c.found.is_some()
                    && let Some((version, stored)) = own_content(store, layout, key, &body).await?
                {
                    return Ok(Put::Already { version, stored });
                }
                Put::Conflict(RecordConflict {
                    address: address.to_string(),
                    op,
                    expected: c.expected,
                    stored: c.found,
                })
            }
        },
    )
}

/// The record at `key`, when it is `body`'s own write with this content: a try of it landed before.
async fn own_content<B: Body>(
    store: &dyn RecordStore,
    layout: &Layout,
    key: &str,
    body: &B,
) -> Result<Option<(Version, B)>, StoreError> {
    if cut(Mechanism::OwnContent) {
        return Ok(None);
    }
    let Some(stored) = store.get(key).await? else {
        return Ok(None);
    };
    let Some(own) = body.own(key, &stored.bytes, layout) else {
        return Ok(None);
    };
    tracing::info!(key = %key, "the store already holds this run's own record with this content");
    Ok(Some((stored.version, own)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_names_its_operation_by_its_precondition() {
        let v = Version::new("v1");
        let put = |precondition| Change::Put {
            body: (),
            precondition,
        };
        assert_eq!(put(Precondition::Absent).operation(), Operation::Create);
        assert_eq!(
            put(Precondition::Matches(v.clone())).operation(),
            Operation::Update
        );
        assert_eq!(
            Change::<()>::Delete {
                expected: v.clone()
            }
            .operation(),
            Operation::Delete
        );
        let conflict = RecordConflict {
            address: "terraform_data.a".into(),
            op: Operation::Delete,
            expected: Some(v),
            stored: None,
        };
        assert_eq!(
            conflict.to_string(),
            "terraform_data.a (delete): expected version v1, store has no record"
        );
    }
}
