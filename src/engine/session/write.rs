//! Writing a state document: diff it against the base, write what changed as conditional requests, gather conflicts.

use std::collections::{BTreeMap, BTreeSet};

use futures::{StreamExt, stream};

use super::assemble::initial_lineage;
use super::error::SessionError;
use super::handle::Session;
use super::report::WriteReport;
use super::snapshot::{BaseEntry, BaseRef};
use super::trace;
use super::view::{Unwritten, View};
use crate::cut::{Mechanism, cut};
use crate::engine::claims;
use crate::engine::layout::{KeyKind, Layout};
use crate::engine::operation::Operation;
use crate::engine::program::now_rfc3339;
use crate::engine::record::{CorruptRecord, ESTATE_FORMAT, EstateMeta, Record, Writer};
use crate::engine::state;
use crate::engine::write::conflict::RecordConflict;
use crate::engine::write::record_write::{Change, Wrote, write_record};
use crate::store::{self, Precondition, Version, WriteOutcome};

/// One record write a document asks for: at `key`, of `address`; a put carries the content
/// digest the base keeps once it lands.
struct Asked {
    key: String,
    address: String,
    digest: Option<String>,
    change: Change<Record>,
    /// An unchanged record rewritten to carry its refresh's time.
    refresh: bool,
}

/// What became of one record write: it landed, it was refused, or (under a saved plan) skipped.
enum Done {
    /// A put landed: the record as the store now holds it.
    Put {
        key: String,
        entry: Box<BaseEntry>,
        created: bool,
        refresh: bool,
    },
    /// A delete landed, or found the record already gone.
    Deleted {
        key: String,
        address: String,
        already_gone: bool,
    },
    /// The store refused the write: another run changed the record.
    Refused {
        key: String,
        conflict: RecordConflict,
    },
    /// A put refused because the store already holds this run's own record with this content.
    Already { key: String, entry: Box<BaseEntry> },
    /// A write of a record this run's plan does not change, skipped: another run moved it or holds it.
    Skipped { address: String },
    /// A refused output write, left for the door to reconcile.
    StaleOutput { name: String },
}

impl Session {
    /// Write `doc` as conditional record writes of what differs from the base.
    ///
    /// Unchanged records are not written; changed ones are updated against the version
    /// read, new ones created, gone ones deleted. Every record gets its try; conflicts are
    /// gathered in the report, and the base advances only for what landed.
    ///
    /// A document whose write failed for a store error is kept (see [`Session::unwritten`])
    /// until a later write lands.
    pub async fn write_state(&self, doc: &[u8]) -> Result<WriteReport, SessionError> {
        let result =
            trace::write_state(&self.layout, &self.run, doc.len(), self.write_untraced(doc)).await;
        let mut view = self.view.lock().await;
        match &result {
            Ok(_) => {
                view.unwritten = None;
                view.refused = None;
            }
            Err(e) if e.store_failed() => {
                view.unwritten = Some(Unwritten {
                    doc: doc.to_vec(),
                    last_error: e.to_string(),
                })
            }
            Err(SessionError::Conflict(_)) => {}
            Err(_) if cut(Mechanism::ErroredAdvice) => {}
            Err(e) => view.refused = Some(e.to_string()),
        }
        result
    }

    async fn write_untraced(&self, doc: &[u8]) -> Result<WriteReport, SessionError> {
        let split = state::parse(doc)?;
        let mut view = self.view.lock().await;
        if let Some((estate, _)) = &view.snapshot.estate {
            state::check_lineage(&estate.estate, &estate.lineage, &split.lineage)?;
        }
        let writer = Writer {
            run_id: self.run.run_id.clone(),
            written_at: now_rfc3339(),
            terraform_version: Some(split.terraform_version.clone()).filter(|v| !v.is_empty()),
            restored_from: None,
            log: None,
            plan: self.plan.clone(),
        };
        let mut wanted: BTreeMap<String, Record> = BTreeMap::new();
        for item in split.items {
            let record = Record {
                estate: self.layout.estate().to_string(),
                item,
                program: self.run.program.clone(),
                writer: writer.clone(),
            };
            wanted.insert(record.key(&self.layout).into_string(), record);
        }
        let mut report = WriteReport::default();
        let refreshed = std::mem::take(&mut view.refreshed);
        let ops = diff(view.base(), wanted, &mut report, &refreshed);
        if ops.is_empty() {
            return Ok(report);
        }
        self.check_guard().await?;
        if view.snapshot.estate.is_none() {
            view.snapshot.estate = Some(self.ensure_estate(&split.lineage).await?);
        }
        let ops = self.skip_held(&view, ops, &mut report).await?;
        let results: Vec<Result<Done, SessionError>> = stream::iter(ops)
            .map(|op| self.apply(op))
            .buffer_unordered(self.parallel)
            .collect()
            .await;
        let mut first_error = None;
        let mut landed = Vec::new();
        for result in results {
            match result {
                Ok(done) => {
                    let done = excuse(&view, &self.layout, done);
                    if let Some(address) = landed_resource(&self.layout, &done) {
                        landed.push(address);
                    }
                    advance(&mut view, done, &mut report)
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        self.clear_landed(&view, landed);
        if let Some(e) = first_error {
            return Err(e);
        }
        report.sort();
        Ok(report)
    }

    /// Leave out writes of records outside this run's changes that another live run holds: its change comes first.
    async fn skip_held(
        &self,
        view: &View,
        ops: Vec<Asked>,
        report: &mut WriteReport,
    ) -> Result<Vec<Asked>, SessionError> {
        let Some(changes) = &view.changes else {
            return Ok(ops);
        };
        if cut(Mechanism::RefreshSkip) {
            return Ok(ops);
        }
        let judged: Vec<Result<(Asked, bool), SessionError>> = stream::iter(ops)
            .map(|op| async move {
                if changes.contains(&op.key)
                    || self.layout.classify(&op.key) != Some(KeyKind::Resource)
                {
                    return Ok((op, false));
                }
                let held = claims::held_by_other(
                    &self.store,
                    &self.layout,
                    &self.run.run_id,
                    &op.address,
                )
                .await?;
                if let Some(holder) = &held {
                    tracing::info!(address = %op.address, holder = %holder.run_id, "skipped a record this run's plan does not change: another live run holds its claim");
                }
                Ok((op, held.is_some()))
            })
            .buffer_unordered(self.parallel)
            .collect()
            .await;
        let mut keep = Vec::new();
        for j in judged {
            match j? {
                (op, true) => report.skipped.push(op.address),
                (op, false) => keep.push(op),
            }
        }
        Ok(keep)
    }

    /// Clear the claims of the resources whose records landed (not while a deposed object of theirs is left).
    fn clear_landed(&self, view: &View, landed: Vec<String>) {
        let Some(claims) = &view.claims else { return };
        let done: Vec<String> = landed
            .into_iter()
            .filter(|a| {
                let deposed = format!("{a} (deposed ");
                !view
                    .snapshot
                    .records
                    .values()
                    .any(|e| e.address().starts_with(&deposed))
            })
            .collect();
        claims.landed(&done);
    }

    pub(super) async fn ensure_estate(
        &self,
        lineage: &str,
    ) -> Result<(EstateMeta, Version), SessionError> {
        let key = self.layout.estate_key();
        let meta = EstateMeta {
            format: ESTATE_FORMAT.into(),
            estate: self.layout.estate().to_string(),
            lineage: if lineage.is_empty() {
                initial_lineage(&self.layout)
            } else {
                lineage.to_string()
            },
            created_at: now_rfc3339(),
            created_by: self.run.program.clone(),
        };
        let bytes = meta.encode();
        match store::put_conditional(self.store.as_ref(), &key, &bytes, &Precondition::Absent)
            .await?
        {
            WriteOutcome::Written(v) => Ok((meta, v)),
            WriteOutcome::Conflict(_) => match self.store.get(&key).await? {
                Some(stored) => Ok((
                    EstateMeta::decode(&key, &stored.bytes, &self.layout)?,
                    stored.version,
                )),
                None => Err(CorruptRecord {
                    key: key.into_string(),
                    reason: "the estate record vanished while it was being created".into(),
                }
                .into()),
            },
        }
    }

    async fn apply(&self, asked: Asked) -> Result<Done, SessionError> {
        let Asked {
            key,
            address,
            digest,
            change,
            refresh,
        } = asked;
        let created = change.operation() == Operation::Create;
        let wrote = write_record(
            self.store.as_ref(),
            &self.layout,
            &self.log,
            &key,
            &address,
            change,
        )
        .await?;
        Ok(match wrote {
            Wrote::Put {
                version,
                body,
                bytes,
            } => {
                if let Some(cache) = &self.cache {
                    // What this run wrote is what the next read lists: keep it warm.
                    cache.put(&key, &version, &bytes);
                }
                let digest = digest.unwrap_or_else(|| body.content_digest());
                Done::Put {
                    key,
                    entry: Box::new(BaseEntry::new(version, digest, body)),
                    created,
                    refresh,
                }
            }
            Wrote::Already { version, stored } => {
                let digest = digest.unwrap_or_else(|| stored.content_digest());
                Done::Already {
                    key,
                    entry: Box::new(BaseEntry::new(version, digest, stored)),
                }
            }
            Wrote::Deleted => Done::Deleted {
                key,
                address,
                already_gone: false,
            },
            Wrote::AlreadyGone => Done::Deleted {
                key,
                address,
                already_gone: true,
            },
            Wrote::Conflict(conflict) => Done::Refused { key, conflict },
        })
    }
}

/// The writes that make the store hold `wanted` where it holds `base`; unchanged records are counted, and those of `refreshed` (addresses) rewritten to carry their refresh's time.
fn diff(
    base: &BTreeMap<String, BaseRef>,
    wanted: BTreeMap<String, Record>,
    report: &mut WriteReport,
    refreshed: &BTreeSet<String>,
) -> Vec<Asked> {
    let mut ops = Vec::new();
    for (key, entry) in base {
        if !wanted.contains_key(key) {
            ops.push(Asked {
                key: key.clone(),
                address: entry.address.clone(),
                digest: None,
                change: Change::Delete {
                    expected: entry.version.clone(),
                },
                refresh: false,
            });
        }
    }
    for (key, record) in wanted {
        let digest = record.content_digest();
        let mut refresh = false;
        let precondition = match base.get(&key) {
            Some(entry) if entry.digest == digest && !cut(Mechanism::Diff) => {
                report.unchanged += 1;
                report.unchanged_of.push(record.address().to_string());
                if !refreshed.contains(record.address()) {
                    continue;
                }
                refresh = true;
                Precondition::Matches(entry.version.clone())
            }
            Some(entry) => Precondition::Matches(entry.version.clone()),
            None => Precondition::Absent,
        };
        ops.push(Asked {
            key,
            address: record.address().to_string(),
            digest: Some(digest),
            change: Change::Put {
                body: record,
                precondition,
            },
            refresh,
        });
    }
    ops
}

/// A refused output write is stale (when the door reconciles outputs); a refused write of a record the plan does not change is skipped. Neither is a conflict.
fn excuse(view: &View, layout: &Layout, done: Done) -> Done {
    match done {
        Done::Refused { key, conflict }
            if view.reconcile_outputs && layout.classify(&key) == Some(KeyKind::Output) =>
        {
            tracing::info!(output = %conflict.address, "an output met another run's newer value; left to reconcile");
            Done::StaleOutput {
                name: conflict.address,
            }
        }
        Done::Refused { key, conflict }
            if view.changes.as_ref().is_some_and(|c| !c.contains(&key))
                && !cut(Mechanism::RefreshSkip) =>
        {
            tracing::info!(key = %key, "skipped a record this run's plan does not change: another run moved it");
            Done::Skipped {
                address: conflict.address,
            }
        }
        done => done,
    }
}

/// The resource address whose record landed, if `done` is one.
fn landed_resource(layout: &Layout, done: &Done) -> Option<String> {
    match done {
        Done::Put { key, entry, .. } if layout.classify(key) == Some(KeyKind::Resource) => {
            Some(entry.address().to_string())
        }
        Done::Deleted { key, address, .. } if layout.classify(key) == Some(KeyKind::Resource) => {
            Some(address.clone())
        }
        Done::Already { key, entry } if layout.classify(key) == Some(KeyKind::Resource) => {
            Some(entry.address().to_string())
        }
        _ => None,
    }
}

/// Advance the base for one finished write and say in the report what it did.
fn advance(view: &mut View, done: Done, report: &mut WriteReport) {
    match done {
        Done::Skipped { address } => report.skipped.push(address),
        Done::StaleOutput { name } => {
            view.stale_outputs.insert(name.clone());
            report.stale_outputs.push(name);
        }
        Done::Refused { conflict, .. } => report.conflicts.push(conflict),
        Done::Already { key, entry } => {
            report.already.push(entry.address().to_string());
            view.base().insert(key.clone(), entry.base_ref());
            view.snapshot.records.insert(key, *entry);
        }
        Done::Put {
            key,
            entry,
            created,
            refresh,
        } => {
            let address = entry.address().to_string();
            view.base().insert(key.clone(), entry.base_ref());
            view.snapshot.records.insert(key, *entry);
            if refresh {
                report.refreshed.push(address);
            } else if created {
                report.created.push(address);
            } else {
                report.updated.push(address);
            }
        }
        Done::Deleted {
            key,
            address,
            already_gone,
        } => {
            view.base().remove(&key);
            view.snapshot.records.remove(&key);
            if already_gone {
                report.already_gone.push(address);
            } else {
                report.deleted.push(address);
            }
        }
    }
}
