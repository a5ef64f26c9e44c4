//! Writing a state document: diff it against the base, write what changed as conditional requests, gather conflicts.

use std::collections::BTreeMap;
use std::fmt;

use futures::{StreamExt, stream};
use serde::Serialize;
use thiserror::Error;

use super::{BaseEntry, BaseRef, SessionError, View, initial_lineage, trace};
use crate::cut::{Mechanism, cut};
use crate::engine::program::now_rfc3339;
use crate::engine::record::{CorruptRecord, ESTATE_FORMAT, EstateMeta, Record, Writer};
use crate::engine::state;
use crate::store::{self, Precondition, Version, WriteOutcome};

/// One record whose conditional write met a version another run wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordConflict {
    /// The resource instance address (or the output's name).
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

/// What one write of a state document did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WriteReport {
    /// Addresses created.
    pub created: Vec<String>,
    /// Addresses updated.
    pub updated: Vec<String>,
    /// Addresses deleted.
    pub deleted: Vec<String>,
    /// How many records were already as the document says.
    pub unchanged: usize,
    /// Deletes that found the record already gone.
    pub already_gone: Vec<String>,
    /// Records a saved plan does not change whose write was skipped: another run moved them.
    pub skipped: Vec<String>,
    /// Records another run changed after this run read them; nothing of these was written.
    #[serde(skip)]
    pub conflicts: Vec<RecordConflict>,
}

impl WriteReport {
    /// How many records landed.
    pub fn landed(&self) -> usize {
        self.created.len() + self.updated.len() + self.deleted.len()
    }

    /// The report, or the named conflicts when there were any.
    pub fn into_result(self) -> Result<WriteReport, RecordConflictError> {
        if self.conflicts.is_empty() {
            Ok(self)
        } else {
            Err(RecordConflictError {
                landed: self.landed(),
                conflicts: self.conflicts,
            })
        }
    }

    fn sort(&mut self) {
        for list in [
            &mut self.created,
            &mut self.updated,
            &mut self.deleted,
            &mut self.already_gone,
            &mut self.skipped,
        ] {
            list.sort();
        }
        self.conflicts.sort_by(|a, b| a.address.cmp(&b.address));
    }
}

/// One record write a document asks for.
enum Op {
    Put {
        key: String,
        record: Box<Record>,
        digest: String,
        precondition: Precondition,
    },
    Delete {
        key: String,
        address: String,
        expected: Version,
    },
}

/// What became of one record write: it landed, it was refused, or (under a saved plan) skipped.
enum Done {
    /// A put landed: the record as the store now holds it.
    Put {
        key: String,
        entry: Box<BaseEntry>,
        created: bool,
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
    /// A refused write of a record a saved plan does not change.
    Skipped { address: String },
}

impl super::Session {
    /// Write `doc` as conditional record writes of what differs from the base.
    ///
    /// Unchanged records are not written; changed ones are updated against the version
    /// read, new ones created, gone ones deleted. Every record gets its try; conflicts are
    /// gathered in the report, and the base advances only for what landed.
    pub async fn write_state(&self, doc: &[u8]) -> Result<WriteReport, SessionError> {
        trace::write_state(&self.layout, &self.run, doc.len(), self.write_untraced(doc)).await
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
        };
        let mut wanted: BTreeMap<String, Record> = BTreeMap::new();
        for item in split.items {
            let record = Record {
                estate: self.layout.estate().to_string(),
                item,
                program: self.run.program.clone(),
                writer: writer.clone(),
            };
            wanted.insert(record.key(&self.layout), record);
        }
        let mut report = WriteReport::default();
        let ops = diff(&view.base, wanted, &mut report);
        if ops.is_empty() {
            return Ok(report);
        }
        self.check_guard().await?;
        if view.snapshot.estate.is_none() {
            view.snapshot.estate = Some(self.ensure_estate(&split.lineage).await?);
        }
        let results: Vec<Result<Done, SessionError>> = stream::iter(ops)
            .map(|op| self.apply(op))
            .buffer_unordered(self.parallel)
            .collect()
            .await;
        let mut first_error = None;
        for result in results {
            match result {
                Ok(done) => {
                    let done = excuse(&view, done);
                    advance(&mut view, done, &mut report)
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        report.sort();
        Ok(report)
    }

    async fn ensure_estate(&self, lineage: &str) -> Result<(EstateMeta, Version), SessionError> {
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
                    key,
                    reason: "the estate record vanished while it was being created".into(),
                }
                .into()),
            },
        }
    }

    async fn apply(&self, op: Op) -> Result<Done, SessionError> {
        match op {
            Op::Put {
                key,
                record,
                digest,
                precondition,
            } => {
                let bytes = record.encode();
                let outcome =
                    store::put_conditional(self.store.as_ref(), &key, &bytes, &precondition)
                        .await?;
                Ok(match outcome {
                    WriteOutcome::Written(version) => {
                        if let Some(cache) = &self.cache {
                            // What this run wrote is what the next read lists: keep it warm.
                            cache.put(&key, &version, &bytes);
                        }
                        Done::Put {
                            key,
                            entry: Box::new(BaseEntry {
                                version,
                                digest,
                                record: *record,
                            }),
                            created: precondition == Precondition::Absent,
                        }
                    }
                    WriteOutcome::Conflict(c) => Done::Refused {
                        key,
                        conflict: RecordConflict {
                            address: record.address().to_string(),
                            op: precondition.op(),
                            expected: c.expected,
                            stored: c.found,
                        },
                    },
                })
            }
            Op::Delete {
                key,
                address,
                expected,
            } => Ok(match self.store.delete(&key, &expected).await? {
                WriteOutcome::Written(()) => Done::Deleted {
                    key,
                    address,
                    already_gone: false,
                },
                WriteOutcome::Conflict(c) if c.found.is_none() => Done::Deleted {
                    key,
                    address,
                    already_gone: true,
                },
                WriteOutcome::Conflict(c) => Done::Refused {
                    key,
                    conflict: RecordConflict {
                        address,
                        op: "delete",
                        expected: c.expected,
                        stored: c.found,
                    },
                },
            }),
        }
    }
}

/// The writes that make the store hold `wanted` where it holds `base`; unchanged records are counted.
fn diff(
    base: &BTreeMap<String, BaseRef>,
    wanted: BTreeMap<String, Record>,
    report: &mut WriteReport,
) -> Vec<Op> {
    let mut ops = Vec::new();
    for (key, entry) in base {
        if !wanted.contains_key(key) {
            ops.push(Op::Delete {
                key: key.clone(),
                address: entry.address.clone(),
                expected: entry.version.clone(),
            });
        }
    }
    for (key, record) in wanted {
        let digest = record.content_digest();
        let precondition = match base.get(&key) {
            Some(entry) if entry.digest == digest && !cut(Mechanism::Diff) => {
                report.unchanged += 1;
                continue;
            }
            Some(entry) => Precondition::Matches(entry.version.clone()),
            None => Precondition::Absent,
        };
        ops.push(Op::Put {
            key,
            record: Box::new(record),
            digest,
            precondition,
        });
    }
    ops
}

/// Under a saved plan, a refused write of a record the plan does not change is skipped, not a conflict.
fn excuse(view: &View, done: Done) -> Done {
    match (&view.pin, done) {
        (Some(pin), Done::Refused { key, conflict }) if !pin.changes.contains(&key) => {
            tracing::info!(key = %key, "skipped a record the saved plan does not change: another run moved it");
            Done::Skipped {
                address: conflict.address,
            }
        }
        (_, done) => done,
    }
}

/// Advance the base for one finished write and say in the report what it did.
fn advance(view: &mut View, done: Done, report: &mut WriteReport) {
    match done {
        Done::Skipped { address } => report.skipped.push(address),
        Done::Refused { conflict, .. } => report.conflicts.push(conflict),
        Done::Put {
            key,
            entry,
            created,
        } => {
            let address = entry.record.address().to_string();
            view.base.insert(key.clone(), entry.base_ref());
            view.snapshot.records.insert(key, *entry);
            if created {
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
            view.base.remove(&key);
            view.snapshot.records.remove(&key);
            if already_gone {
                report.already_gone.push(address);
            } else {
                report.deleted.push(address);
            }
        }
    }
}
