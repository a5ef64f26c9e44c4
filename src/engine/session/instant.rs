//! One instance record written at once, when its provider call returns, ahead of terraform's own save.
//!
//! The write is conditional on the base like any other (a record the base lacks is created,
//! one it holds is updated or deleted against the version read), and the base advances with
//! it, so terraform's later save finds the record written and leaves it alone.

use serde_json::Value;

use super::assemble::initial_lineage;
use super::error::SessionError;
use super::handle::Session;
use super::report::RecordConflict;
use super::snapshot::BaseEntry;
use crate::cut::{Mechanism, cut};
use crate::engine::program::now_rfc3339;
use crate::engine::record::{Record, Writer};
use crate::engine::state::{Item, ResourceMeta};
use crate::engine::write_log::LogOp;
use crate::store::{self, Precondition, WriteOutcome};

/// One instance record to write at once.
#[derive(Clone, Debug)]
pub enum Instant {
    /// The instance object the provider call left.
    Put {
        /// The instance address.
        address: String,
        /// Its resource.
        meta: ResourceMeta,
        /// The state instance object.
        instance: Value,
        /// The version of terraform applying it (the plan's), stamped on the record as terraform's save would.
        terraform_version: Option<String>,
    },
    /// The provider call removed the object.
    Delete {
        /// The instance address.
        address: String,
    },
}

/// What became of an instant write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Landed {
    /// The record was created.
    Created,
    /// The record was updated.
    Updated,
    /// The record was deleted.
    Deleted,
    /// Nothing to write: the base already says so.
    Unchanged,
    /// The store refused it: another run changed the record.
    Refused(RecordConflict),
}

impl Session {
    /// The resource and instance object the session holds for `address`, if any.
    pub async fn instance_of(&self, address: &str) -> Option<(ResourceMeta, Value)> {
        let key = self.layout.resource_key(address);
        let view = self.view.lock().await;
        let entry = view.snapshot.records.get(&key)?;
        let record = entry
            .record()
            .inspect_err(|e| tracing::warn!(error = %e, "the record held for this address does not decode: the provider's return is recorded without it"))
            .ok()?;
        Some((record.resource()?.clone(), record.instance()?.clone()))
    }

    /// Write `change` now, conditionally against the base, and advance the base when it lands.
    pub async fn write_instant(&self, change: Instant) -> Result<Landed, SessionError> {
        if cut(Mechanism::ReturnRecords) {
            return Ok(Landed::Unchanged);
        }
        let mut view = self.view.lock().await;
        let (address, put) = match change {
            Instant::Put {
                address,
                meta,
                instance,
                terraform_version,
            } => (address, Some((meta, instance, terraform_version))),
            Instant::Delete { address } => (address, None),
        };
        let key = self.layout.resource_key(&address);
        let base = view.base().get(&key).cloned();
        let Some((meta, instance, terraform_version)) = put else {
            let Some(base) = base else {
                return Ok(Landed::Unchanged);
            };
            self.check_guard().await?;
            // The log entry and the store call go out without the session's lock, so calls
            // that return at once are written at once; no other writer of this run writes this
            // instance meanwhile (terraform has not heard the answer yet).
            drop(view);
            self.log.before_write(LogOp::Delete, &key).await?;
            let outcome = self.store.delete(&key, &base.version).await?;
            let mut view = self.view.lock().await;
            let still = view.base().get(&key).map(|b| &b.version) == Some(&base.version);
            return Ok(match outcome {
                WriteOutcome::Conflict(c) if c.found.is_some() => Landed::Refused(RecordConflict {
                    address,
                    op: "delete",
                    expected: c.expected,
                    stored: c.found,
                }),
                // Deleted now, or already gone.
                WriteOutcome::Written(()) | WriteOutcome::Conflict(_) => {
                    if still {
                        view.base().remove(&key);
                        view.snapshot.records.remove(&key);
                    }
                    Landed::Deleted
                }
            });
        };
        let mut record = Record {
            estate: self.layout.estate().to_string(),
            item: Item::Resource {
                address: address.clone(),
                meta,
                instance: instance.into(),
            },
            program: self.run.program.clone(),
            writer: Writer {
                run_id: self.run.run_id.clone(),
                written_at: now_rfc3339(),
                terraform_version,
                restored_from: None,
                log: None,
            },
        };
        let digest = record.content_digest();
        let precondition = match &base {
            Some(b) if b.digest == digest => return Ok(Landed::Unchanged),
            Some(b) => Precondition::Matches(b.version.clone()),
            None => Precondition::Absent,
        };
        self.check_guard().await?;
        if view.snapshot.estate.is_none() {
            let lineage = match (&view.pin, &view.served) {
                (Some(pin), _) => pin.lineage.clone(),
                (None, Some((lineage, _))) => lineage.clone(),
                (None, None) => initial_lineage(&self.layout),
            };
            view.snapshot.estate = Some(self.ensure_estate(&lineage).await?);
        }
        let op = match precondition {
            Precondition::Absent => LogOp::Create,
            Precondition::Matches(_) => LogOp::Update,
        };
        // As for a delete: the log entry and the PUT go out without the session's lock.
        drop(view);
        let entry = self.log.before_write(op, &key).await?;
        record.writer.log = Some(entry.name());
        let bytes = record.encode();
        let outcome =
            store::put_conditional(self.store.as_ref(), &key, &bytes, &precondition).await?;
        let mut view = self.view.lock().await;
        Ok(match outcome {
            WriteOutcome::Written(version) => {
                if let Some(cache) = &self.cache {
                    cache.put(&key, &version, &bytes);
                }
                // The base moves on only from the version this write was made against.
                let expected = match &precondition {
                    Precondition::Absent => None,
                    Precondition::Matches(v) => Some(v),
                };
                if view.base().get(&key).map(|b| &b.version) == expected {
                    let entry = BaseEntry::new(version, digest, record);
                    view.base().insert(key.clone(), entry.base_ref());
                    view.snapshot.records.insert(key, entry);
                }
                match precondition {
                    Precondition::Absent => Landed::Created,
                    Precondition::Matches(_) => Landed::Updated,
                }
            }
            WriteOutcome::Conflict(c) => Landed::Refused(RecordConflict {
                address,
                op: precondition.op(),
                expected: c.expected,
                stored: c.found,
            }),
        })
    }
}
