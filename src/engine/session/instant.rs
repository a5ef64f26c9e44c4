//! One instance record written at once, when its provider call returns, ahead of terraform's own save.
//!
//! The write is conditional on the base like any other (a record the base lacks is created,
//! one it holds is updated or deleted against the version read), and the base advances with
//! it, so terraform's later save finds the record written and leaves it alone.

use serde_json::Value;

use super::assemble::initial_lineage;
use super::error::SessionError;
use super::handle::Session;
use super::snapshot::BaseEntry;
use crate::cut::{Mechanism, cut};
use crate::engine::operation::Operation;
use crate::engine::program::now_rfc3339;
use crate::engine::record::{Record, Writer};
use crate::engine::state::{Item, ResourceMeta};
use crate::engine::write::conflict::RecordConflict;
use crate::engine::write::record_write::{Change, Wrote, write_record};
use crate::store::Precondition;

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
        let entry = view.snapshot.records.get(key.as_str())?;
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
        let base = view.base().get(key.as_str()).cloned();
        let (change, digest) = match (put, base) {
            (None, None) => return Ok(Landed::Unchanged),
            (None, Some(base)) => (
                Change::Delete {
                    expected: base.version,
                },
                None,
            ),
            (Some((meta, instance, terraform_version)), base) => {
                let record = self.instance_record(&address, meta, instance, terraform_version);
                let digest = record.content_digest();
                let precondition = match base {
                    Some(b) if b.digest == digest => return Ok(Landed::Unchanged),
                    Some(b) => Precondition::Matches(b.version),
                    None => Precondition::Absent,
                };
                let change = Change::Put {
                    body: record,
                    precondition,
                };
                (change, Some(digest))
            }
        };
        self.check_guard().await?;
        if matches!(change, Change::Put { .. }) && view.snapshot.estate.is_none() {
            let lineage = match (&view.pin, &view.served) {
                (Some(pin), _) => pin.lineage.clone(),
                (None, Some((lineage, _))) => lineage.clone(),
                (None, None) => initial_lineage(&self.layout),
            };
            view.snapshot.estate = Some(self.ensure_estate(&lineage).await?);
        }
        // The version the base held when this write was made against it: the base moves on only from it.
        let expected = match &change {
            Change::Put { precondition, .. } => precondition.expected().cloned(),
            Change::Delete { expected } => Some(expected.clone()),
        };
        let op = change.operation();
        // The log entry and the store call go out without the session's lock, so calls that
        // return at once are written at once; no other writer of this run writes this instance
        // meanwhile (terraform has not heard the answer yet).
        drop(view);
        let wrote = write_record(
            self.store.as_ref(),
            &self.layout,
            &self.log,
            &key,
            &address,
            change,
        )
        .await?;
        let mut view = self.view.lock().await;
        let still = view.base().get(key.as_str()).map(|b| &b.version) == expected.as_ref();
        // What the store holds now: the record written (or this run's own, written before), or none.
        let now = match wrote {
            Wrote::Put {
                version,
                body,
                bytes,
            } => {
                if let Some(cache) = &self.cache {
                    cache.put(&key, &version, &bytes);
                }
                Some((version, body))
            }
            Wrote::Already { version, stored } => Some((version, stored)),
            // Deleted now, or already gone.
            Wrote::Deleted | Wrote::AlreadyGone => None,
            Wrote::Conflict(c) => return Ok(Landed::Refused(c)),
        };
        if still {
            match now {
                Some((version, record)) => {
                    let digest = digest.unwrap_or_else(|| record.content_digest());
                    let entry = BaseEntry::new(version, digest, record);
                    view.base().insert(key.to_string(), entry.base_ref());
                    view.snapshot.records.insert(key.into_string(), entry);
                }
                None => {
                    view.base().remove(key.as_str());
                    view.snapshot.records.remove(key.as_str());
                }
            }
        }
        Ok(match op {
            Operation::Create => Landed::Created,
            Operation::Update => Landed::Updated,
            _ => Landed::Deleted,
        })
    }

    /// The record of `address`'s instance object, stamped by this run.
    fn instance_record(
        &self,
        address: &str,
        meta: ResourceMeta,
        instance: Value,
        terraform_version: Option<String>,
    ) -> Record {
        Record {
            estate: self.layout.estate().to_string(),
            item: Item::Resource {
                address: address.to_string(),
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
                plan: self.plan.clone(),
            },
        }
    }
}
