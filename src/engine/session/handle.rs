//! The session itself: what it holds, how it is opened and set up, what the run tells it, and the write guard it checks first.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, OnceCell};

use super::error::SessionError;
use super::run_info::RunInfo;
use super::snapshot::{BaseRef, Snapshot};
use super::trace;
use super::view::{Pin, View};
use crate::cut::{Mechanism, cut};
use crate::engine::claims::Claims;
use crate::engine::layout::Layout;
use crate::engine::log_writer::LogWriter;
use crate::engine::read_cache::ReadCache;
use crate::engine::write_log::{Clock, Timing};
use crate::store::{DynStore, GuardError, WriteGuard};

/// How many store calls a session makes at once by default.
pub const DEFAULT_PARALLEL: usize = 32;

/// One run's session on an estate.
#[derive(Debug)]
pub struct Session {
    pub(super) store: DynStore,
    pub(super) layout: Layout,
    pub(super) run: RunInfo,
    pub(super) parallel: usize,
    pub(super) view: Mutex<View>,
    guard: Option<Arc<dyn WriteGuard>>,
    guard_passed: OnceCell<()>,
    /// The last check that could not be made (kept only for the `guard-retry` cut, which answers it again).
    guard_failed: std::sync::Mutex<Option<GuardError>>,
    pub(super) cache: Option<ReadCache>,
    /// The writer of this run's write log entries (its clock and figures).
    pub(super) log: LogWriter,
    /// The SHA-256 of the saved plan this session applies, stamped on every record it writes.
    pub(super) plan: Option<String>,
    /// When the last read was made ahead for terraform's next state request ([`Session::read_ahead`]); held while a read ahead is made, so that request waits for it.
    ahead: Arc<Mutex<Option<Instant>>>,
}

/// The right to make a session's read ahead, taken before terraform can ask for the state ([`Session::read_ahead_slot`]).
pub struct AheadSlot(tokio::sync::OwnedMutexGuard<Option<Instant>>);

/// How long a read made ahead stands for terraform's next state request.
pub const AHEAD: Duration = Duration::from_secs(2);

impl Session {
    /// A session that has read nothing yet.
    pub fn new(store: DynStore, layout: Layout, run: RunInfo) -> Self {
        Session {
            log: LogWriter::new(store.clone(), layout.clone(), &run.run_id),
            store,
            layout,
            run,
            parallel: DEFAULT_PARALLEL,
            view: Mutex::new(View::default()),
            guard: None,
            guard_passed: OnceCell::new(),
            guard_failed: std::sync::Mutex::new(None),
            cache: None,
            plan: None,
            ahead: Arc::new(Mutex::new(None)),
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

    /// The same session reading the time from `clock` (tests set a skewed one).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.log = self.log.with_clock(clock);
        self
    }

    /// The same session under the write log's figures `timing` (tests shorten them).
    pub fn with_timing(mut self, timing: Timing) -> Self {
        self.log = self.log.with_timing(timing);
        self
    }

    /// The same session applying the saved plan whose SHA-256 is `plan`: each record it writes says so.
    pub fn with_plan(mut self, plan: &str) -> Self {
        self.plan = Some(plan.to_string());
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

    /// The slot to read ahead in, while no state request has come yet (none: one came, or a read ahead is being made).
    pub fn read_ahead_slot(&self) -> Option<AheadSlot> {
        self.ahead.clone().try_lock_owned().ok().map(AheadSlot)
    }

    /// Read the estate in `slot` for terraform's next state request, which waits for this read (a failed read is made again at that request, which says why).
    pub async fn read_ahead(&self, slot: AheadSlot) {
        let mut made = slot.0;
        match self.refresh().await {
            Ok(()) => *made = Some(Instant::now()),
            Err(e) => {
                tracing::debug!(error = %e, "the estate is read again at terraform's first request");
            }
        }
    }

    /// Read the estate for a state request of terraform: a read made ahead for it stands when it is fresh ([`AHEAD`]); a pinned view is not read again (terraform applies a saved plan against the plan's own copy of the state, and compares only the lineage and serial, which are pinned); else the estate is read again.
    pub async fn refresh_for_request(&self) -> Result<(), SessionError> {
        let mut ahead = self.ahead.lock().await;
        if ahead.take().is_some_and(|at| at.elapsed() < AHEAD) {
            return Ok(());
        }
        if self.view.lock().await.pin.is_some() && !cut(Mechanism::KeyedCheck) {
            return Ok(());
        }
        self.refresh().await
    }

    /// Pin the write base to what a saved plan read; its lineage and serial are served from now on.
    pub async fn pin(&self, pin: Pin) {
        if cut(Mechanism::Pin) {
            return;
        }
        let mut view = self.view.lock().await;
        view.set_base(pin.base.clone());
        view.changes = Some(pin.changes.clone());
        view.pin = Some(pin);
    }

    /// The resources `addresses` were refreshed from the cloud by this run's plan: the next state write rewrites the record of each one it leaves unchanged, so the record carries the refresh's time.
    pub async fn note_refreshed(&self, addresses: BTreeSet<String>) {
        self.view.lock().await.refreshed = addresses;
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
        self.view.lock().await.base().clone()
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
