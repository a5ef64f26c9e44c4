//! Record-level reads and writes for the choudoufu protocol: conditional per record, with the delete rules.

use std::collections::BTreeMap;

use futures::{StreamExt, stream};
use serde_json::Value;

use super::conflict::RecordConflict;
use super::delete_rule::{DeleteBlock, check_delete};
use super::provider::{PROVIDER_FORMAT, ProviderRecord, provider_id};
use super::record_write::{Change, Wrote, write_record};
use crate::cut::{Mechanism, cut};
use crate::engine::layout::{KeyKind, Layout, RecordKey};
use crate::engine::log_writer::LogWriter;
use crate::engine::program::{ProgramStamp, now_rfc3339};
use crate::engine::record::{CorruptRecord, Record, Writer};
use crate::engine::session::{RunInfo, SessionError};
use crate::engine::state::{Item, ResourceMeta};
use crate::store::{DynStore, KeyRange, Precondition, Version, list_range};

/// What kind of record a write is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A resource instance.
    Resource,
    /// A root output.
    Output,
    /// A default provider configuration.
    Provider,
}

/// One requested record write.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordWrite {
    /// The address (an output's name; a provider's configuration address).
    pub address: String,
    /// What it is.
    pub kind: Kind,
    /// What to do: put this content (JSON) on the precondition, or delete.
    pub change: Change<Value>,
    /// For a delete: the resource is no longer declared, so the delete rules apply.
    pub undeclared: bool,
}

/// What became of one write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Landed (the new version; none after a delete).
    Written(Option<Version>),
    /// Another run changed it; nothing was overwritten.
    Conflict(RecordConflict),
    /// Not deleted: a newer program wrote it (the message has both stamps).
    Kept(String),
    /// Refused (another estate owns it, or the write is invalid).
    Refused(String),
    /// A delete that found no record.
    AlreadyGone,
}

fn key_of(layout: &Layout, kind: Kind, address: &str) -> RecordKey {
    match kind {
        Kind::Resource => layout.resource_key(address),
        Kind::Output => layout.output_key(address),
        Kind::Provider => layout.provider_key(address),
    }
}

/// What a write puts: a state record, or a default provider's.
enum Built {
    Record(Box<Record>),
    Provider(Box<ProviderRecord>),
}

/// The record a write's content makes, stamped by `run` (its log entry is stamped when it is made).
fn build(
    layout: &Layout,
    run: &RunInfo,
    kind: Kind,
    address: &str,
    content: &Value,
) -> Result<Built, String> {
    let writer = Writer {
        run_id: run.run_id.clone(),
        written_at: now_rfc3339(),
        terraform_version: None,
        restored_from: None,
        log: None,
        plan: None,
    };
    match kind {
        Kind::Provider => {
            let config = content.get("config").cloned().unwrap_or(Value::Null);
            Ok(Built::Provider(Box::new(ProviderRecord {
                format: PROVIDER_FORMAT.into(),
                estate: layout.estate().to_string(),
                address: address.to_string(),
                id: provider_id(address, &config),
                config,
                writer,
            })))
        }
        Kind::Resource | Kind::Output => {
            let item = if kind == Kind::Resource {
                let meta: ResourceMeta =
                    serde_json::from_value(content.get("resource").cloned().unwrap_or(Value::Null))
                        .map_err(|e| format!("content.resource: {e}"))?;
                let instance = content
                    .get("instance")
                    .cloned()
                    .filter(Value::is_object)
                    .ok_or("content.instance must be an object")?;
                Item::Resource {
                    address: address.to_string(),
                    meta,
                    instance: instance.into(),
                }
            } else {
                let output = content
                    .get("output")
                    .cloned()
                    .filter(Value::is_object)
                    .ok_or("content.output must be an object")?;
                Item::Output {
                    name: address.to_string(),
                    output,
                }
            };
            Ok(Built::Record(Box::new(Record {
                estate: layout.estate().to_string(),
                item,
                program: run.program.clone(),
                writer,
            })))
        }
    }
}

/// Decide a delete of an undeclared resource stored as `bytes`: keep a newer program's, refuse
/// another estate's, refuse one whose record does not decode.
fn delete_rule(
    layout: &Layout,
    run: &RunInfo,
    address: &str,
    key: &str,
    bytes: &[u8],
) -> Option<Outcome> {
    let block = match check_delete(layout, &run.program, address, key, bytes) {
        Ok(block) => block?,
        Err(unreadable) => return Some(Outcome::Refused(unreadable.to_string())),
    };
    Some(match block {
        DeleteBlock::NewerProgram {
            address,
            stored,
            run,
        } => Outcome::Kept(format!(
            "kept {address}: it was written by a newer program ({}) than this run's ({}); an older checkout does not delete a newer one's resource",
            stored.short(),
            run.short()
        )),
        DeleteBlock::OtherEstate {
            address,
            owner,
            estate,
        } => Outcome::Refused(format!(
            "refused to delete {address}: its live marker says estate {owner:?} owns it, not {estate:?}"
        )),
    })
}

/// What a landed, refused or own write of `B` is to the protocol.
fn outcome_of<B>(wrote: Wrote<B>) -> Outcome {
    match wrote {
        Wrote::Put { version, .. } | Wrote::Already { version, .. } => {
            Outcome::Written(Some(version))
        }
        Wrote::Deleted => Outcome::Written(None),
        Wrote::AlreadyGone => Outcome::AlreadyGone,
        Wrote::Conflict(c) => Outcome::Conflict(c),
    }
}

async fn write_one(
    store: &DynStore,
    layout: &Layout,
    run: &RunInfo,
    log: &LogWriter,
    w: RecordWrite,
) -> Result<(String, Outcome), SessionError> {
    let key = key_of(layout, w.kind, &w.address);
    let address = w.address;
    let outcome = match w.change {
        Change::Put {
            body: content,
            precondition,
        } => match build(layout, run, w.kind, &address, &content) {
            Err(m) => Outcome::Refused(format!("invalid content: {m}")),
            Ok(Built::Record(record)) => {
                let change = Change::Put {
                    body: *record,
                    precondition,
                };
                outcome_of(write_record(store.as_ref(), layout, log, &key, &address, change).await?)
            }
            Ok(Built::Provider(provider)) => {
                let id = provider.id.clone();
                let create = precondition == Precondition::Absent;
                let change = Change::Put {
                    body: *provider,
                    precondition,
                };
                match write_record(store.as_ref(), layout, log, &key, &address, change).await? {
                    Wrote::Conflict(c) if create && !cut(Mechanism::ProviderId) => {
                        // Two first runs: the same provider ID is the same record.
                        match same_provider(store, &key, &id).await? {
                            Some(v) => Outcome::Written(Some(v)),
                            None => Outcome::Conflict(c),
                        }
                    }
                    wrote => outcome_of(wrote),
                }
            }
        },
        Change::Delete { expected } => {
            if w.undeclared
                && w.kind == Kind::Resource
                && let Some(stored) = store.get(&key).await?
                && let Some(decided) = delete_rule(layout, run, &address, &key, &stored.bytes)
            {
                return Ok((address, decided));
            }
            let change = Change::<Record>::Delete { expected };
            outcome_of(write_record(store.as_ref(), layout, log, &key, &address, change).await?)
        }
    };
    Ok((address, outcome))
}

/// The version of the provider record at `key`, when it has provider ID `id`.
async fn same_provider(
    store: &DynStore,
    key: &str,
    id: &str,
) -> Result<Option<Version>, SessionError> {
    Ok(match store.get(key).await? {
        Some(s) => serde_json::from_slice::<ProviderRecord>(&s.bytes)
            .ok()
            .filter(|p| p.id == id)
            .map(|_| s.version),
        None => None,
    })
}

/// One write's place in the batch and what became of it.
type Numbered = (usize, (String, Outcome));

/// Make every write, `parallel` at a time, each after its entry in the write log (made by
/// `log`); one outcome per write, in the order given.
pub async fn write_records(
    store: &DynStore,
    layout: &Layout,
    run: &RunInfo,
    log: &LogWriter,
    writes: Vec<RecordWrite>,
    parallel: usize,
) -> Result<Vec<(String, Outcome)>, SessionError> {
    let results: Vec<Result<Numbered, SessionError>> = stream::iter(writes.into_iter().enumerate())
        .map(|(i, w)| async move { write_one(store, layout, run, log, w).await.map(|r| (i, r)) })
        .buffer_unordered(parallel.max(1))
        .collect()
        .await;
    let mut out = BTreeMap::new();
    for r in results {
        let (i, r) = r?;
        out.insert(i, r);
    }
    Ok(out.into_values().collect())
}

/// One stored entry, as ReadRecords gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The address.
    pub address: String,
    /// What it is.
    pub kind: Kind,
    /// Its version.
    pub version: Version,
    /// Its writer's program stamp (providers: none).
    pub program: ProgramStamp,
    /// Its content JSON.
    pub content: Value,
}

/// Every resource, output and provider record of the estate.
pub async fn read_entries(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
) -> Result<Vec<Entry>, SessionError> {
    // Everything but the write log, which sorts last.
    let before_log = KeyRange::new(None, Some(layout.log_prefix()));
    let listed = list_range(store.as_ref(), &layout.prefix(), &before_log, 1000).await?;
    let wanted: Vec<(String, KeyKind)> = listed
        .into_iter()
        .filter_map(|l| match layout.classify(&l.key) {
            Some(k @ (KeyKind::Resource | KeyKind::Output | KeyKind::Provider)) => Some((l.key, k)),
            _ => None,
        })
        .collect();
    let fetched: Vec<Result<Option<Entry>, SessionError>> = stream::iter(wanted)
        .map(|(key, kind)| async move {
            let Some(stored) = store.get(&key).await? else {
                return Ok(None);
            };
            if kind == KeyKind::Provider {
                let p: ProviderRecord =
                    serde_json::from_slice(&stored.bytes).map_err(|e| CorruptRecord {
                        key: key.clone(),
                        reason: format!("not a provider record: {e}"),
                    })?;
                return Ok(Some(Entry {
                    address: p.address,
                    kind: Kind::Provider,
                    version: stored.version,
                    program: Default::default(),
                    content: serde_json::json!({"id": p.id, "config": p.config}),
                }));
            }
            let r = Record::decode(&key, &stored.bytes, layout)?;
            let (k, address, content) = match r.item {
                Item::Resource {
                    address,
                    meta,
                    instance,
                } => (
                    Kind::Resource,
                    address,
                    serde_json::json!({"resource": meta, "instance": instance}),
                ),
                Item::Output { name, output } => {
                    (Kind::Output, name, serde_json::json!({"output": output}))
                }
            };
            Ok(Some(Entry {
                address,
                kind: k,
                version: stored.version,
                program: r.program,
                content,
            }))
        })
        .buffer_unordered(parallel.max(1))
        .collect()
        .await;
    let mut out = Vec::new();
    for f in fetched {
        if let Some(e) = f? {
            out.push(e);
        }
    }
    out.sort_by(|a, b| a.address.cmp(&b.address));
    Ok(out)
}
