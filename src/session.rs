//! A session: one run's view of an estate: the base it read, and conditional writes of what changed.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use crate::error::{
    CorruptRecord, RecordConflict, RecordConflictError, SessionError, UnsafeRecordStore,
};
use crate::layout::{KeyKind, Layout};
use crate::program::{ProgramStamp, now_rfc3339};
use crate::read_cache::ReadCache;
use crate::record::{ESTATE_FORMAT, EstateMeta, RECORD_FORMAT, Record, RecordKind, Writer};
use crate::state::{self, Header, Item, compare_versions};
use crate::store::{self, DynStore, Version, WriteOutcome};

/// How many store calls a session makes at once by default.
pub const DEFAULT_PARALLEL: usize = 32;
/// The terraform version an assembled state names when no record says.
pub const FALLBACK_TERRAFORM_VERSION: &str = "1.0.0";

/// What a run is: its ID and the program it applies.
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// A unique ID for this run.
    pub run_id: String,
    /// The program stamp of the configuration.
    pub program: ProgramStamp,
}

impl RunInfo {
    /// A new run with a fresh ID.
    pub fn new(program: ProgramStamp) -> Self {
        RunInfo {
            run_id: uuid::Uuid::new_v4().to_string(),
            program,
        }
    }
}

/// One record as the session read it.
#[derive(Clone, Debug)]
pub struct BaseEntry {
    /// The version read.
    pub version: Version,
    /// Digest of its content.
    pub digest: String,
    /// The record.
    pub record: Record,
}

/// What a session knows of the estate: the meta record and every record, by key.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The estate's meta record and its version, once it exists.
    pub estate: Option<(EstateMeta, Version)>,
    /// Every record by key.
    pub records: BTreeMap<String, BaseEntry>,
}

/// What a write compares a record against: the version and content digest this run's view holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct BaseRef {
    /// The record's address (an output's name for an output record).
    pub address: String,
    /// The version this run's view holds.
    pub version: Version,
    /// The digest of the content this run's view holds.
    pub digest: String,
}

/// A saved plan's view, pinned for its apply: writes diff against what the plan read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pin {
    /// The lineage the plan saw.
    pub lineage: String,
    /// The serial the plan saw.
    pub serial: u64,
    /// Every record the plan read, by key.
    pub base: BTreeMap<String, BaseRef>,
    /// The keys of the records the plan changes.
    pub changes: std::collections::BTreeSet<String>,
}

impl Snapshot {
    /// The write base this snapshot gives: each record's version and digest.
    pub fn refs(&self) -> BTreeMap<String, BaseRef> {
        self.records
            .iter()
            .map(|(k, e)| {
                (
                    k.clone(),
                    BaseRef {
                        address: e.record.address.clone(),
                        version: e.version.clone(),
                        digest: e.digest.clone(),
                    },
                )
            })
            .collect()
    }
}

/// A session's view: the last read, the write base, and a saved plan's pin.
#[derive(Debug, Default)]
struct View {
    snapshot: Snapshot,
    base: BTreeMap<String, BaseRef>,
    pin: Option<Pin>,
    served: Option<(String, u64)>,
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

    fn absorb(&mut self, other: WriteReport) {
        self.created.extend(other.created);
        self.updated.extend(other.updated);
        self.deleted.extend(other.deleted);
        self.unchanged += other.unchanged;
        self.already_gone.extend(other.already_gone);
        self.skipped.extend(other.skipped);
        self.conflicts.extend(other.conflicts);
    }
}

/// The lineage an estate has before any run wrote it: the same for every first run.
pub fn initial_lineage(layout: &Layout) -> String {
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_URL,
        format!("choudoufu-live:estate:{}", layout.estate()).as_bytes(),
    )
    .to_string()
}

enum Op {
    Put {
        key: String,
        record: Box<Record>,
        digest: String,
        expected: Option<Version>,
    },
    Delete {
        key: String,
        address: String,
        expected: Version,
    },
}

enum Done {
    Skipped {
        key: String,
        address: String,
    },
    Put {
        key: String,
        entry: Option<Box<BaseEntry>>,
        created: bool,
        conflict: Option<RecordConflict>,
    },
    Delete {
        key: String,
        address: String,
        gone: bool,
        conflict: Option<RecordConflict>,
    },
}

/// A check made once, before a session's first write (the record store bucket's safety).
#[async_trait::async_trait]
pub trait WriteGuard: Send + Sync + std::fmt::Debug {
    /// Pass, or say why nothing may be written.
    async fn check(&self) -> Result<(), UnsafeRecordStore>;
}

/// One run's session on an estate.
#[derive(Debug)]
pub struct Session {
    store: DynStore,
    layout: Layout,
    run: RunInfo,
    parallel: usize,
    view: Mutex<View>,
    guard: Option<Arc<dyn WriteGuard>>,
    guard_passed: tokio::sync::OnceCell<()>,
    cache: Option<ReadCache>,
}

impl Session {
    /// A session that has read nothing yet.
    pub fn new(store: DynStore, layout: Layout, run: RunInfo) -> Self {
        Session {
            store,
            layout,
            run,
            parallel: DEFAULT_PARALLEL,
            view: Mutex::new(View::default()),
            guard: None,
            guard_passed: tokio::sync::OnceCell::new(),
            cache: None,
        }
    }

    /// The same session, reading through `cache` (warm reads fetch only what changed).
    pub fn with_cache(mut self, cache: Option<ReadCache>) -> Self {
        self.cache = cache;
        self
    }

    /// The same session, checking `guard` once before its first write.
    pub fn with_guard(mut self, guard: Option<Arc<dyn WriteGuard>>) -> Self {
        self.guard = guard;
        self
    }

    async fn check_guard(&self) -> Result<(), SessionError> {
        if let Some(guard) = &self.guard {
            self.guard_passed.get_or_try_init(|| guard.check()).await?;
        }
        Ok(())
    }

    /// Open a session and read the estate.
    pub async fn open(store: DynStore, layout: Layout, run: RunInfo) -> Result<Self, SessionError> {
        let session = Session::new(store, layout, run);
        session.refresh().await?;
        Ok(session)
    }

    /// The same session making at most `parallel` store calls at once.
    pub fn with_parallel(mut self, parallel: usize) -> Self {
        self.parallel = parallel.max(1);
        self
    }

    /// The estate's layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The run.
    pub fn run(&self) -> &RunInfo {
        &self.run
    }

    /// The store.
    pub fn store(&self) -> &DynStore {
        &self.store
    }

    /// Read the whole estate again and make it the base (a pinned base stays as the plan read it).
    #[tracing::instrument(
        name = "session.refresh",
        skip_all,
        fields(estate = %self.layout.estate(), run_id = %self.run.run_id, records = tracing::field::Empty)
    )]
    pub async fn refresh(&self) -> Result<(), SessionError> {
        let snapshot = read_snapshot_cached(
            &self.store,
            &self.layout,
            self.parallel,
            self.cache.as_ref(),
        )
        .await?;
        tracing::Span::current().record("records", snapshot.records.len());
        let mut view = self.view.lock().await;
        if view.pin.is_none() {
            view.base = snapshot.refs();
        }
        view.snapshot = snapshot;
        Ok(())
    }

    /// Pin the write base to what a saved plan read; its lineage and serial are served from now on.
    pub async fn pin(&self, pin: Pin) {
        if crate::cut::cut("pin") {
            return;
        }
        let mut view = self.view.lock().await;
        view.base = pin.base.clone();
        view.pin = Some(pin);
    }

    /// A copy of the last read.
    pub async fn snapshot(&self) -> Snapshot {
        self.view.lock().await.snapshot.clone()
    }

    /// A copy of the write base.
    pub async fn base(&self) -> BTreeMap<String, BaseRef> {
        self.view.lock().await.base.clone()
    }

    /// The lineage and serial of the last document served, if one was.
    pub async fn served(&self) -> Option<(String, u64)> {
        self.view.lock().await.served.clone()
    }

    /// The state document of the last read (with a pinned plan's lineage and serial).
    pub async fn state_document(&self) -> Vec<u8> {
        let mut view = self.view.lock().await;
        let header = match &view.pin {
            Some(pin) => header_of(
                &self.layout,
                &view.snapshot,
                Some((pin.lineage.clone(), pin.serial)),
            ),
            None => header_of(&self.layout, &view.snapshot, None),
        };
        view.served = Some((header.lineage.clone(), header.serial));
        let items: Vec<Item> = view
            .snapshot
            .records
            .values()
            .map(|e| item_of(&e.record))
            .collect();
        state::assemble_bytes(&header, &items)
    }

    /// Write `doc` as conditional record writes of what differs from the base.
    ///
    /// Unchanged records are not written; changed ones are updated against the version
    /// read, new ones created, gone ones deleted. Every record gets its try; conflicts are
    /// gathered in the report, and the base advances only for what landed.
    pub async fn write_state(&self, doc: &[u8]) -> Result<WriteReport, SessionError> {
        use tracing::Instrument;
        use tracing::field::Empty;
        let span = tracing::info_span!(
            "session.write_state",
            estate = %self.layout.estate(),
            run_id = %self.run.run_id,
            bytes = doc.len(),
            records.created = Empty,
            records.updated = Empty,
            records.deleted = Empty,
            records.already_gone = Empty,
            records.unchanged = Empty,
            records.skipped = Empty,
            conflicts = Empty,
            conflict.addresses = Empty,
            outcome = Empty,
            otel.status_code = Empty,
        );
        let result = self
            .write_state_untraced(doc)
            .instrument(span.clone())
            .await;
        let m = crate::telemetry::metrics();
        match &result {
            Ok(report) => {
                span.record("records.created", report.created.len());
                span.record("records.updated", report.updated.len());
                span.record("records.deleted", report.deleted.len());
                span.record("records.already_gone", report.already_gone.len());
                span.record("records.unchanged", report.unchanged);
                span.record("records.skipped", report.skipped.len());
                span.record("conflicts", report.conflicts.len());
                m.records_written("create", report.created.len());
                m.records_written("update", report.updated.len());
                m.records_written("delete", report.deleted.len());
                m.records_unchanged(report.unchanged);
                m.conflicts(
                    crate::telemetry::ConflictKind::Record,
                    report.conflicts.len(),
                );
                if report.conflicts.is_empty() {
                    span.record("outcome", "written");
                } else {
                    let names: Vec<&str> = report
                        .conflicts
                        .iter()
                        .map(|c| c.address.as_str())
                        .collect();
                    span.record("conflict.addresses", names.join(",").as_str());
                    span.record("outcome", "conflict");
                }
            }
            Err(_) => {
                span.record("outcome", "error");
                span.record("otel.status_code", "ERROR");
            }
        }
        result
    }

    async fn write_state_untraced(&self, doc: &[u8]) -> Result<WriteReport, SessionError> {
        let split = state::parse(doc)?;
        let mut view = self.view.lock().await;
        let writer = Writer {
            run_id: self.run.run_id.clone(),
            written_at: now_rfc3339(),
            terraform_version: Some(split.terraform_version.clone()).filter(|v| !v.is_empty()),
        };
        let mut wanted: BTreeMap<String, Record> = BTreeMap::new();
        for item in split.items {
            let record = self.record_of(item, &writer);
            let key = match record.kind {
                RecordKind::Resource => self.layout.resource_key(&record.address),
                RecordKind::Output => self.layout.output_key(&record.address),
            };
            wanted.insert(key, record);
        }
        let mut report = WriteReport::default();
        let mut ops = Vec::new();
        for (key, record) in wanted.iter() {
            let digest = record.content_digest();
            match view.base.get(key) {
                Some(entry) if entry.digest == digest && !crate::cut::cut("diff") => {
                    report.unchanged += 1
                }
                Some(entry) => ops.push(Op::Put {
                    key: key.clone(),
                    record: Box::new(record.clone()),
                    digest,
                    expected: Some(entry.version.clone()),
                }),
                None => ops.push(Op::Put {
                    key: key.clone(),
                    record: Box::new(record.clone()),
                    digest,
                    expected: None,
                }),
            }
        }
        for (key, entry) in view.base.iter() {
            if !wanted.contains_key(key) {
                ops.push(Op::Delete {
                    key: key.clone(),
                    address: entry.address.clone(),
                    expected: entry.version.clone(),
                });
            }
        }
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
                    let done = self.excuse(&view, done);
                    report.absorb(advance(&mut view, done));
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        for list in [
            &mut report.created,
            &mut report.updated,
            &mut report.deleted,
            &mut report.already_gone,
            &mut report.skipped,
        ] {
            list.sort();
        }
        report.conflicts.sort_by(|a, b| a.address.cmp(&b.address));
        Ok(report)
    }

    /// Under a saved plan, a failed write of a record the plan does not change is skipped, not a conflict.
    fn excuse(&self, view: &View, done: Done) -> Done {
        let Some(pin) = &view.pin else { return done };
        match done {
            Done::Put {
                key,
                conflict: Some(c),
                ..
            } if !pin.changes.contains(&key) => Done::Skipped {
                key,
                address: c.address,
            },
            Done::Delete {
                key,
                conflict: Some(c),
                ..
            } if !pin.changes.contains(&key) => Done::Skipped {
                key,
                address: c.address,
            },
            other => other,
        }
    }

    fn record_of(&self, item: Item, writer: &Writer) -> Record {
        let (kind, address, resource, instance, output) = match item {
            Item::Resource {
                address,
                meta,
                instance,
            } => (
                RecordKind::Resource,
                address,
                Some(meta),
                Some(instance),
                None,
            ),
            Item::Output { name, output } => (RecordKind::Output, name, None, None, Some(output)),
        };
        Record {
            format: RECORD_FORMAT.into(),
            estate: self.layout.estate().to_string(),
            kind,
            address,
            resource,
            instance,
            output,
            program: self.run.program.clone(),
            writer: writer.clone(),
        }
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
        match store::put_conditional(self.store.as_ref(), &key, &bytes, None).await? {
            WriteOutcome::Written(Some(v)) => Ok((meta, v)),
            _ => match self.store.get(&key).await? {
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
                expected,
            } => {
                let bytes = record.encode();
                let created = expected.is_none();
                let outcome =
                    store::put_conditional(self.store.as_ref(), &key, &bytes, expected.as_ref())
                        .await?;
                if let (Some(cache), WriteOutcome::Written(Some(version))) = (&self.cache, &outcome)
                {
                    // What this run wrote is what the next read lists: keep it warm.
                    cache.put(&key, version, &bytes);
                }
                Ok(match outcome {
                    WriteOutcome::Written(Some(version)) => Done::Put {
                        key,
                        entry: Some(Box::new(BaseEntry {
                            version,
                            digest,
                            record: *record,
                        })),
                        created,
                        conflict: None,
                    },
                    WriteOutcome::Written(None) => Done::Put {
                        key,
                        entry: None,
                        created,
                        conflict: None,
                    },
                    WriteOutcome::Conflict(c) => Done::Put {
                        key,
                        entry: None,
                        created,
                        conflict: Some(RecordConflict {
                            address: record.address,
                            op: if created { "create" } else { "update" },
                            expected: c.expected,
                            stored: c.found,
                        }),
                    },
                })
            }
            Op::Delete {
                key,
                address,
                expected,
            } => {
                let outcome = self.store.delete(&key, &expected).await?;
                Ok(match outcome {
                    WriteOutcome::Written(_) => Done::Delete {
                        key,
                        address,
                        gone: false,
                        conflict: None,
                    },
                    WriteOutcome::Conflict(c) if c.found.is_none() => Done::Delete {
                        key,
                        address,
                        gone: true,
                        conflict: None,
                    },
                    WriteOutcome::Conflict(c) => Done::Delete {
                        key,
                        address: address.clone(),
                        gone: false,
                        conflict: Some(RecordConflict {
                            address,
                            op: "delete",
                            expected: c.expected,
                            stored: c.found,
                        }),
                    },
                })
            }
        }
    }
}

/// Advance the base for one finished write and say what it did.
fn advance(view: &mut View, done: Done) -> WriteReport {
    let mut report = WriteReport::default();
    match done {
        Done::Skipped { key, address } => {
            tracing::info!(key = %key, "skipped a record the saved plan does not change: another run moved it");
            report.skipped.push(address);
        }
        Done::Put {
            conflict: Some(c), ..
        }
        | Done::Delete {
            conflict: Some(c), ..
        } => report.conflicts.push(c),
        Done::Put {
            key,
            entry,
            created,
            conflict: None,
        } => {
            if let Some(entry) = entry {
                let address = entry.record.address.clone();
                view.base.insert(
                    key.clone(),
                    BaseRef {
                        address: address.clone(),
                        version: entry.version.clone(),
                        digest: entry.digest.clone(),
                    },
                );
                view.snapshot.records.insert(key, *entry);
                if created {
                    report.created.push(address);
                } else {
                    report.updated.push(address);
                }
            }
        }
        Done::Delete {
            key,
            address,
            gone,
            conflict: None,
        } => {
            view.base.remove(&key);
            view.snapshot.records.remove(&key);
            if gone {
                report.already_gone.push(address);
            } else {
                report.deleted.push(address);
            }
        }
    }
    report
}

/// Read every record of an estate, `parallel` gets at a time.
pub async fn read_snapshot(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
) -> Result<Snapshot, SessionError> {
    read_snapshot_cached(store, layout, parallel, None).await
}

/// Read every record of an estate; with a cache, fetch only records whose listed version is not cached.
pub async fn read_snapshot_cached(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
    cache: Option<&ReadCache>,
) -> Result<Snapshot, SessionError> {
    let listed = store::list_all(store.as_ref(), &layout.prefix()).await?;
    let mut wanted = Vec::new();
    for item in listed {
        match layout.classify(&item.key) {
            Some(KeyKind::Unknown) | None => {
                tracing::warn!(key = %item.key, "ignoring a key this layout does not write");
            }
            Some(kind @ (KeyKind::Estate | KeyKind::Resource | KeyKind::Output)) => {
                wanted.push((item.key, kind, item.version))
            }
            Some(_) => {} // marks, runs and provider records are not state
        }
    }
    let fetched: Vec<Result<_, SessionError>> = stream::iter(wanted)
        .map(|(key, kind, listed)| {
            let store = Arc::clone(store);
            async move {
                if let Some(hit) = cache.and_then(|c| c.get(&key, &listed)) {
                    return Ok((key, kind, Some(hit)));
                }
                let stored = store.get(&key).await?;
                if let (Some(c), Some(s)) = (cache, &stored) {
                    c.put(&key, &s.version, &s.bytes);
                }
                Ok((key, kind, stored))
            }
        })
        .buffer_unordered(parallel.max(1))
        .collect()
        .await;
    let mut snapshot = Snapshot::default();
    crate::telemetry::metrics().records_read(
        fetched
            .iter()
            .filter(|r| matches!(r, Ok((_, _, Some(_)))))
            .count(),
    );
    for result in fetched {
        let (key, kind, stored) = result?;
        let Some(stored) = stored else { continue };
        match kind {
            KeyKind::Estate => {
                let meta = EstateMeta::decode(&key, &stored.bytes, layout)?;
                snapshot.estate = Some((meta, stored.version));
            }
            _ => {
                let record = Record::decode(&key, &stored.bytes, layout)?;
                snapshot.records.insert(
                    key,
                    BaseEntry {
                        version: stored.version,
                        digest: record.content_digest(),
                        record,
                    },
                );
            }
        }
    }
    Ok(snapshot)
}

/// The serial of a snapshot: a digest of its lineage and every record version, never zero.
pub fn serial_of(lineage: &str, snapshot: &Snapshot) -> u64 {
    let mut h = Sha256::new();
    h.update(lineage.as_bytes());
    for (key, entry) in &snapshot.records {
        h.update([0]);
        h.update(key.as_bytes());
        h.update([0]);
        h.update(entry.version.token.as_bytes());
    }
    let d = h.finalize();
    let mut n = [0u8; 8];
    n.copy_from_slice(&d[..8]);
    (u64::from_be_bytes(n) & ((1 << 52) - 1)) + 1
}

/// The header of a snapshot's document: its lineage and serial (or those given), and terraform version.
pub fn header_of(layout: &Layout, snapshot: &Snapshot, fixed: Option<(String, u64)>) -> Header {
    let lineage = snapshot
        .estate
        .as_ref()
        .map(|(m, _)| m.lineage.clone())
        .unwrap_or_else(|| initial_lineage(layout));
    let terraform_version = snapshot
        .records
        .values()
        .filter_map(|e| e.record.writer.terraform_version.clone())
        .min_by(|a, b| compare_versions(a, b))
        .unwrap_or_else(|| FALLBACK_TERRAFORM_VERSION.into());
    match fixed {
        Some((lineage, serial)) => Header {
            lineage,
            serial,
            terraform_version,
        },
        None => Header {
            serial: serial_of(&lineage, snapshot),
            lineage,
            terraform_version,
        },
    }
}

/// The state item a record holds.
pub fn item_of(record: &Record) -> Item {
    match record.kind {
        RecordKind::Resource => Item::Resource {
            address: record.address.clone(),
            meta: record
                .resource
                .clone()
                .unwrap_or_else(|| crate::record::ResourceMeta {
                    module: None,
                    mode: String::new(),
                    type_name: String::new(),
                    name: String::new(),
                    each: None,
                    provider: String::new(),
                }),
            instance: record.instance.clone().unwrap_or_default(),
        },
        RecordKind::Output => Item::Output {
            name: record.address.clone(),
            output: record.output.clone().unwrap_or_default(),
        },
    }
}
