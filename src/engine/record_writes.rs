//! Record-level reads and writes for the choudoufu protocol: conditional per record, with the delete rules.

use std::collections::BTreeMap;

use futures::{StreamExt, stream};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cut::{Mechanism, cut};
use crate::engine::layout::{KeyKind, Layout};
use crate::engine::log_writer::LogWriter;
use crate::engine::markers::owner_of;
use crate::engine::program::{ProgramStamp, now_rfc3339};
use crate::engine::record::{CorruptRecord, Record, Writer};
use crate::engine::session::{RecordConflict, RunInfo, SessionError};
use crate::engine::state::{Item, ResourceMeta};
use crate::engine::write_log::{LogEntry, LogOp};
use crate::store::{
    DynStore, KeyRange, Precondition, Version, WriteOutcome, list_range, put_conditional,
};

/// Format tag of a default provider record.
pub const PROVIDER_FORMAT: &str = "choudoufu-live/provider/v1";

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

/// One requested write.
#[derive(Clone, Debug, PartialEq)]
pub enum WriteOp {
    /// Create only if absent.
    Create(Value),
    /// Update only if still at the version.
    Update(Version, Value),
    /// Delete only if still at the version; `undeclared`: the delete rules apply.
    Delete(Version, bool),
}

/// One requested record write.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordWrite {
    /// The address (an output's name; a provider's configuration address).
    pub address: String,
    /// What it is.
    pub kind: Kind,
    /// What to do.
    pub op: WriteOp,
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

/// A default provider's record: its ID is a v5 UUID of its address and configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderRecord {
    /// Always [`PROVIDER_FORMAT`].
    pub format: String,
    /// The estate.
    pub estate: String,
    /// The provider configuration address.
    pub address: String,
    /// v5 UUID of address and configuration.
    pub id: String,
    /// The configuration.
    pub config: Value,
    /// Who wrote it.
    pub writer: Writer,
}

/// The ID of a default provider: the same for every run with the same address and configuration.
pub fn provider_id(address: &str, config: &Value) -> String {
    let canon =
        serde_json::to_string(&crate::engine::digest::canonical(config)).unwrap_or_default();
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_URL,
        format!("choudoufu-live:provider:{address}:{canon}").as_bytes(),
    )
    .to_string()
}

fn key_of(layout: &Layout, kind: Kind, address: &str) -> String {
    match kind {
        Kind::Resource => layout.resource_key(address),
        Kind::Output => layout.output_key(address),
        Kind::Provider => layout.provider_key(address),
    }
}

fn op_name(op: &WriteOp) -> &'static str {
    match op {
        WriteOp::Create(_) => "create",
        WriteOp::Update(..) => "update",
        WriteOp::Delete(..) => "delete",
    }
}

/// The stored bytes for a write's content.
fn build(
    layout: &Layout,
    run: &RunInfo,
    w: &RecordWrite,
    content: &Value,
    entry: &LogEntry,
) -> Result<Vec<u8>, String> {
    let writer = Writer {
        run_id: run.run_id.clone(),
        written_at: now_rfc3339(),
        terraform_version: None,
        restored_from: None,
        log: Some(entry.name()),
    };
    match w.kind {
        Kind::Provider => {
            let config = content.get("config").cloned().unwrap_or(Value::Null);
            let rec = ProviderRecord {
                format: PROVIDER_FORMAT.into(),
                estate: layout.estate().to_string(),
                address: w.address.clone(),
                id: provider_id(&w.address, &config),
                config,
                writer,
            };
            serde_json::to_vec(&rec).map_err(|e| e.to_string())
        }
        Kind::Resource | Kind::Output => {
            let item = if w.kind == Kind::Resource {
                let meta: ResourceMeta =
                    serde_json::from_value(content.get("resource").cloned().unwrap_or(Value::Null))
                        .map_err(|e| format!("content.resource: {e}"))?;
                let instance = content
                    .get("instance")
                    .cloned()
                    .filter(Value::is_object)
                    .ok_or("content.instance must be an object")?;
                Item::Resource {
                    address: w.address.clone(),
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
                    name: w.address.clone(),
                    output,
                }
            };
            let rec = Record {
                estate: layout.estate().to_string(),
                item,
                program: run.program.clone(),
                writer,
            };
            Ok(rec.encode())
        }
    }
}

/// Why the delete rules stop a delete of a stored resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeleteBlock {
    /// A newer program than the deleting run's wrote the record.
    NewerProgram {
        /// The instance address.
        address: String,
        /// The stamp of the record's writer.
        stored: ProgramStamp,
        /// The deleting run's stamp.
        run: ProgramStamp,
    },
    /// The record's live marker names another estate than the deleting run's.
    OtherEstate {
        /// The instance address.
        address: String,
        /// The estate its marker names.
        owner: String,
        /// The deleting run's estate.
        estate: String,
    },
}

/// The delete rules, for every door: a run of `program` in `layout`'s estate may delete `stored`
/// unless a newer program wrote it or its live marker names another estate.
pub fn delete_block(
    layout: &Layout,
    program: &ProgramStamp,
    stored: &Record,
) -> Option<DeleteBlock> {
    if cut(Mechanism::DeleteRule) {
        return None;
    }
    if stored.program.is_newer_than(program) {
        return Some(DeleteBlock::NewerProgram {
            address: stored.address().to_string(),
            stored: stored.program.clone(),
            run: program.clone(),
        });
    }
    if let Some(owner) = stored.instance().and_then(owner_of)
        && owner != layout.estate().as_str()
    {
        return Some(DeleteBlock::OtherEstate {
            address: stored.address().to_string(),
            owner,
            estate: layout.estate().to_string(),
        });
    }
    None
}

/// Decide a delete of an undeclared resource: keep a newer program's, refuse another estate's.
fn delete_rule(layout: &Layout, run: &RunInfo, stored: &Record) -> Option<Outcome> {
    delete_block(layout, &run.program, stored).map(|block| match block {
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

async fn write_one(
    store: &DynStore,
    layout: &Layout,
    run: &RunInfo,
    log: &LogWriter,
    w: RecordWrite,
) -> Result<(String, Outcome), SessionError> {
    let key = key_of(layout, w.kind, &w.address);
    let conflict = |expected: Option<Version>, stored: Option<Version>| {
        Outcome::Conflict(RecordConflict {
            address: w.address.clone(),
            op: op_name(&w.op),
            expected,
            stored,
        })
    };
    let outcome = match &w.op {
        WriteOp::Create(content) | WriteOp::Update(_, content) => {
            let op = match &w.op {
                WriteOp::Update(..) => LogOp::Update,
                _ => LogOp::Create,
            };
            let entry = log.before_write(op, &key).await?;
            let bytes = match build(layout, run, &w, content, &entry) {
                Ok(b) => b,
                Err(m) => {
                    return Ok((
                        w.address.clone(),
                        Outcome::Refused(format!("invalid content: {m}")),
                    ));
                }
            };
            let precondition = match &w.op {
                WriteOp::Update(v, _) => Precondition::Matches(v.clone()),
                _ => Precondition::Absent,
            };
            match put_conditional(store.as_ref(), &key, &bytes, &precondition).await? {
                WriteOutcome::Written(v) => Outcome::Written(Some(v)),
                WriteOutcome::Conflict(c)
                    if w.kind == Kind::Provider
                        && precondition == Precondition::Absent
                        && !cut(Mechanism::ProviderId) =>
                {
                    // Two first runs: the same provider ID is the same record.
                    let same = match store.get(&key).await? {
                        Some(s) => serde_json::from_slice::<ProviderRecord>(&s.bytes)
                            .ok()
                            .filter(|p| {
                                p.id == provider_id(
                                    &w.address,
                                    &content.get("config").cloned().unwrap_or(Value::Null),
                                )
                            })
                            .map(|_| s.version),
                        None => None,
                    };
                    match same {
                        Some(v) => Outcome::Written(Some(v)),
                        None => conflict(c.expected, c.found),
                    }
                }
                WriteOutcome::Conflict(c) => conflict(c.expected, c.found),
            }
        }
        WriteOp::Delete(expected, undeclared) => {
            if *undeclared
                && w.kind == Kind::Resource
                && let Some(stored) = store.get(&key).await?
                && let Ok(rec) = Record::decode(&key, &stored.bytes, layout)
                && let Some(decided) = delete_rule(layout, run, &rec)
            {
                return Ok((w.address.clone(), decided));
            }
            log.before_write(LogOp::Delete, &key).await?;
            match store.delete(&key, expected).await? {
                WriteOutcome::Written(_) => Outcome::Written(None),
                WriteOutcome::Conflict(c) if c.found.is_none() => Outcome::AlreadyGone,
                WriteOutcome::Conflict(c) => conflict(c.expected, c.found),
            }
        }
    };
    Ok((w.address.clone(), outcome))
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
