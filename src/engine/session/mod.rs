//! A session: one run's view of an estate: the base it read, and conditional writes of what changed.
//!
//! Concurrency duty: one session serves one run; its calls may come from several tasks at
//! once (terraform's GETs and POSTs), and a write holds the view for its whole length, so
//! a read never sees a base that is half advanced. Other runs are never waited for: the
//! store decides every write.

mod assemble;
mod read;
mod recovery;
mod trace;
mod write;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::sync::{Mutex, OnceCell};

use crate::cut::{Mechanism, cut};
use crate::engine::claims::Claims;
use crate::engine::image::Held;
use crate::engine::layout::Layout;
use crate::engine::program::ProgramStamp;
use crate::engine::read_cache::ReadCache;
use crate::engine::record::{CorruptRecord, EstateMeta, Record};
use crate::engine::state::StateError;
use crate::store::{
    DynStore, GuardError, SafetyUnchecked, StoreError, UnsafeRecordStore, Version, WriteGuard,
};

pub use assemble::{FALLBACK_TERRAFORM_VERSION, document, header_of, initial_lineage, serial_of};
pub use read::{
    Read, ReadStats, Sources, fetch_image, read_estate, read_snapshot, read_snapshot_cached,
    snapshot_of_image,
};
pub use recovery::{RECOVERY_FORMAT, Recovery, RecoveryError, Unwritten};
pub use write::{RecordConflict, RecordConflictError, WriteReport};

/// How many store calls a session makes at once by default.
pub const DEFAULT_PARALLEL: usize = 32;

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

impl Snapshot {
    /// The write base this snapshot gives: each record's version and digest.
    pub fn refs(&self) -> BTreeMap<String, BaseRef> {
        self.records
            .iter()
            .map(|(k, e)| (k.clone(), e.base_ref()))
            .collect()
    }
}

impl BaseEntry {
    /// What a write compares this record against.
    pub fn base_ref(&self) -> BaseRef {
        BaseRef {
            address: self.record.address().to_string(),
            version: self.version.clone(),
            digest: self.digest.clone(),
        }
    }
}

/// What a write compares a record against: the version and content digest this run's view holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    pub changes: BTreeSet<String>,
}

/// A session's view: the last read, the write base, a saved plan's pin, and what the run claimed.
#[derive(Debug, Default)]
struct View {
    snapshot: Snapshot,
    base: BTreeMap<String, BaseRef>,
    pin: Option<Pin>,
    served: Option<(String, u64)>,
    /// The keys this run's plan changes; a write of any other record is skipped when another run moved or holds it.
    changes: Option<BTreeSet<String>>,
    /// This run's claims, whose marks are cleared as their records land.
    claims: Option<Arc<Claims>>,
    /// Whether a refused output write is left for the door to reconcile instead of being a conflict.
    reconcile_outputs: bool,
    /// Outputs whose write met another run's newer value.
    stale_outputs: BTreeSet<String>,
    /// What this run knows of the estate image (`read.rs`).
    image: Held,
    /// Whether `snapshot` is a read (not yet: the first read fetches the stored image).
    read_before: bool,
    /// The newest document terraform sent whose write failed for a store error, until a write lands.
    unwritten: Option<Unwritten>,
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
    guard_passed: OnceCell<()>,
    /// The last check that could not be made (kept only for the `guard-retry` cut, which answers it again).
    guard_failed: std::sync::Mutex<Option<GuardError>>,
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
            guard_passed: OnceCell::new(),
            guard_failed: std::sync::Mutex::new(None),
            cache: None,
        }
    }

    /// Open a session and read the estate.
    pub async fn open(store: DynStore, layout: Layout, run: RunInfo) -> Result<Self, SessionError> {
        let session = Session::new(store, layout, run);
        session.refresh().await?;
        Ok(session)
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
    pub async fn refresh(&self) -> Result<(), SessionError> {
        trace::refresh(&self.layout, &self.run, self.read_view()).await
    }

    /// Pin the write base to what a saved plan read; its lineage and serial are served from now on.
    pub async fn pin(&self, pin: Pin) {
        if cut(Mechanism::Pin) {
            return;
        }
        let mut view = self.view.lock().await;
        view.base = pin.base.clone();
        view.changes = Some(pin.changes.clone());
        view.pin = Some(pin);
    }

    /// Limit this run's own changes to `keys`: a write of any other record is skipped (counted, never a conflict) when another run moved it or holds its claim.
    pub async fn limit_changes(&self, keys: BTreeSet<String>) {
        self.view.lock().await.changes = Some(keys);
    }

    /// Clear `claims`' marks as their records land.
    pub async fn hold(&self, claims: Arc<Claims>) {
        self.view.lock().await.claims = Some(claims);
    }

    /// Leave refused output writes to the door (see [`Session::stale_outputs`]) instead of reporting them as conflicts.
    pub async fn reconcile_outputs(&self) {
        if cut(Mechanism::OutputReconcile) {
            return;
        }
        self.view.lock().await.reconcile_outputs = true;
    }

    /// The outputs whose write met another run's newer value, so far.
    pub async fn stale_outputs(&self) -> BTreeSet<String> {
        self.view.lock().await.stale_outputs.clone()
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

    /// Run the store's write guard before anything of this run is written: once it passed, never again; a check that could not be made is made again next time.
    pub async fn check_guard(&self) -> Result<(), SessionError> {
        let Some(guard) = &self.guard else {
            return Ok(());
        };
        if cut(Mechanism::GuardRetry)
            && let Some(failed) = self.guard_failed.lock().ok().and_then(|f| f.clone())
        {
            return Err(failed.into());
        }
        let checked = self.guard_passed.get_or_try_init(|| guard.check()).await;
        if let Err(e) = &checked
            && let Ok(mut failed) = self.guard_failed.lock()
        {
            *failed = Some(e.clone());
        }
        checked?;
        Ok(())
    }
}
