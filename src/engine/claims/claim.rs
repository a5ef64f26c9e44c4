//! Claims: the pending marks a run sets on the changes it is about to make, run liveness, and in-flight checks.
//!
//! A mark `p/<address>` says "run R is changing this resource". It is created with one
//! conditional request, so two runs can never both hold it. A run claims all the changes of
//! its plan at once, or none of them, before any provider call; it clears each mark as that
//! resource's record lands, and releases the rest when it ends. A run proves it is alive with
//! its run record `runs/<run id>`, written by its first heartbeat and kept fresh by the next;
//! until that first beat, each of its marks shows it alive by itself (a mark carries its run's
//! heartbeat interval), so a run that ends within one interval writes no run record at all.
//! The marks of a run whose last sign of life (its heartbeat, or its mark's time when it has
//! no run record) is older than [`MISSED_BEATS`] intervals are taken over by the next run that
//! needs them. Both doors (`run` and the choudoufu protocol) use this module.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, stream};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use thiserror::Error;

use crate::cut::{Mechanism, cut};
use crate::engine::layout::Layout;
use crate::engine::program::{ProgramStamp, now_rfc3339};
use crate::engine::session::SessionError;
use crate::store::{DynStore, Precondition, StoreError, Version, WriteOutcome, put_conditional};

/// Format tag of a pending mark.
pub const MARK_FORMAT: &str = "choudoufu-live/pending/v1";
/// Format tag of a run record.
pub const RUN_FORMAT: &str = "choudoufu-live/run/v1";
/// How often a choudoufu-protocol run proves it is alive, unless told otherwise.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);
/// A run is gone once its heartbeat is older than this many intervals.
pub const MISSED_BEATS: u32 = 3;
/// How many store calls a claim makes at once.
const PARALLEL: usize = 32;

/// A resource in flight in one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// Always [`MARK_FORMAT`].
    pub format: String,
    /// The estate.
    pub estate: String,
    /// The resource instance address.
    pub address: String,
    /// The run that has it in flight.
    pub run_id: String,
    /// create, update, delete, replace, forget, move or import.
    pub operation: String,
    /// When the mark was set (RFC 3339).
    pub since: String,
    /// Its run's heartbeat interval: until the run's first heartbeat writes its run record, the
    /// mark alone shows the run alive for [`MISSED_BEATS`] intervals from `since` (0, as in
    /// marks older programs wrote: only the run record counts).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub heartbeat_millis: u64,
    /// The resources this change depends on (resource or module addresses, without instance keys).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
}

/// A run's liveness record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Always [`RUN_FORMAT`].
    pub format: String,
    /// The estate.
    pub estate: String,
    /// The run.
    pub run_id: String,
    /// Its program stamp.
    pub program: ProgramStamp,
    /// When it started.
    pub started_at: String,
    /// Its last heartbeat.
    pub heartbeat_at: String,
    /// Its heartbeat interval.
    pub heartbeat_millis: u64,
    /// True once it said it ended.
    pub ended: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Whether `at` (RFC 3339) is less than [`MISSED_BEATS`] intervals of `heartbeat_millis` ago.
fn within_beats(at: &str, heartbeat_millis: u64) -> bool {
    let Ok(at) = OffsetDateTime::parse(at, &Rfc3339) else {
        return false;
    };
    let window = Duration::from_millis(heartbeat_millis.max(1)) * MISSED_BEATS;
    let age = OffsetDateTime::now_utc() - at;
    age < time::Duration::try_from(window).unwrap_or(time::Duration::MAX)
}

impl RunRecord {
    /// Whether the run counts as alive now: not ended, and its heartbeat within its window.
    pub fn alive_now(&self) -> bool {
        !self.ended && within_beats(&self.heartbeat_at, self.heartbeat_millis)
    }
}

impl Mark {
    /// Whether the mark alone shows its run alive now: it carries the run's heartbeat interval
    /// and was set less than [`MISSED_BEATS`] of them ago.
    pub fn fresh_now(&self) -> bool {
        self.heartbeat_millis > 0
            && !cut(Mechanism::MarkWindow)
            && within_beats(&self.since, self.heartbeat_millis)
    }
}

/// Whether the run holding `mark` counts as alive now, given its run record if it has one: a
/// run that said it ended is gone; otherwise its heartbeat or the mark's own time must be
/// fresh (the mark's time is the only sign of life before the run's first heartbeat).
fn holder_alive(mark: &Mark, record: Option<&RunRecord>) -> bool {
    if cut(Mechanism::Takeover) {
        return true;
    }
    match record {
        Some(r) if r.ended => false,
        Some(r) => r.alive_now() || mark.fresh_now(),
        None => mark.fresh_now(),
    }
}

fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

/// The run record of `run_id`, if there is a readable one.
pub async fn read_run(
    store: &DynStore,
    layout: &Layout,
    run_id: &str,
) -> Result<Option<RunRecord>, StoreError> {
    Ok(store
        .get(&layout.run_key(run_id))
        .await?
        .and_then(|s| serde_json::from_slice::<RunRecord>(&s.bytes).ok()))
}

/// A running run's liveness: its run record, written by its first heartbeat and kept fresh by the next.
///
/// Claims are made through it ([`Claims::claim`]), so every mark names a run that beats.
#[derive(Debug)]
pub struct Liveness {
    store: DynStore,
    layout: Layout,
    run_id: String,
    interval: Duration,
    record: tokio::sync::Mutex<(RunRecord, Option<Version>)>,
    beat: tokio::task::JoinHandle<()>,
}

impl Liveness {
    /// Start the run's heartbeat, every `interval`: the first beat writes the run record, one
    /// interval from now (until then the run's marks show it alive; a run that ends sooner
    /// writes none). Must be called inside a tokio runtime.
    pub fn start(
        store: DynStore,
        layout: Layout,
        run_id: &str,
        program: ProgramStamp,
        interval: Duration,
    ) -> Arc<Self> {
        let now = now_rfc3339();
        let record = RunRecord {
            format: RUN_FORMAT.into(),
            estate: layout.estate().to_string(),
            run_id: run_id.to_string(),
            program,
            started_at: now.clone(),
            heartbeat_at: now,
            heartbeat_millis: interval.as_millis() as u64,
            ended: false,
        };
        Arc::new_cyclic(|weak: &std::sync::Weak<Liveness>| {
            let weak = weak.clone();
            let beat = tokio::spawn(async move {
                let mut failing = false;
                loop {
                    tokio::time::sleep(interval).await;
                    let Some(me) = weak.upgrade() else { return };
                    match me.touch().await {
                        // Said once per outage: each beat that follows fails the same way.
                        Err(e) if !failing => {
                            failing = true;
                            tracing::warn!(error = %e, "heartbeat failed; other runs count this run as gone once its heartbeat is three beats old");
                        }
                        Err(e) => tracing::debug!(error = %e, "heartbeat failed again"),
                        Ok(()) if failing => {
                            failing = false;
                            tracing::warn!("heartbeat reaches the store again");
                        }
                        Ok(()) => {}
                    }
                }
            });
            Liveness {
                store,
                layout,
                run_id: run_id.to_string(),
                interval,
                record: tokio::sync::Mutex::new((record, None)),
                beat,
            }
        })
    }

    /// The run's ID.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// How often it beats.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    async fn touch(&self) -> Result<(), StoreError> {
        let mut guard = self.record.lock().await;
        let (record, version) = &mut *guard;
        record.heartbeat_at = now_rfc3339();
        let key = self.layout.run_key(&record.run_id);
        let bytes = encode(record);
        let precondition = match version {
            Some(v) => Precondition::Matches(v.clone()),
            None => Precondition::Absent,
        };
        if let WriteOutcome::Written(v) =
            put_conditional(self.store.as_ref(), &key, &bytes, &precondition).await?
        {
            *version = Some(v);
        }
        Ok(())
    }

    /// Say the run has ended: stop beating and delete its run record, if a beat wrote one.
    pub async fn end(&self) -> Result<(), StoreError> {
        // The lock first: a beat's write in flight lands (and is deleted below) before the
        // heartbeat stops, so no run record is left behind unseen.
        let mut guard = self.record.lock().await;
        self.beat.abort();
        let (record, version) = &mut *guard;
        record.ended = true;
        if let Some(v) = version.take() {
            self.store
                .delete(&self.layout.run_key(&record.run_id), &v)
                .await?;
        }
        Ok(())
    }
}

impl Drop for Liveness {
    fn drop(&mut self) {
        self.beat.abort();
    }
}

/// Who holds a claim: the run, its program, and what it is doing since when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The run.
    pub run_id: String,
    /// Its program stamp, from its run record (none: it has no readable record).
    pub program: Option<ProgramStamp>,
    /// What it is doing to the resource.
    pub operation: String,
    /// Since when (the mark's time).
    pub since: String,
    /// Its last heartbeat, from its run record.
    pub heartbeat_at: Option<String>,
}

/// A program stamp as messages show it: the commit's first 12 characters and its time.
fn program_text(program: Option<&ProgramStamp>) -> String {
    match program {
        Some(p) => {
            let commit: String = p.commit.chars().take(12).collect();
            if p.time.is_empty() {
                commit
            } else {
                format!("{commit} of {}", p.time)
            }
        }
        None => "unknown".into(),
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "run {} (program {}; {} since {})",
            self.run_id,
            program_text(self.program.as_ref()),
            self.operation,
            self.since
        )
    }
}

/// One change of this run that another live run has in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldChange {
    /// The resource instance address.
    pub address: String,
    /// The live run that holds it.
    pub holder: Holder,
}

/// Changes refused before any provider call: another live run is making them.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub struct InFlightChangeError {
    /// Every change held elsewhere, in address order.
    pub held: Vec<HeldChange>,
}

impl fmt::Display for InFlightChangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (n, are) = match self.held.len() {
            1 => ("1 of this run's changes is".to_string(), "it"),
            n => (format!("{n} of this run's changes are"), "them"),
        };
        writeln!(
            f,
            "InFlightChangeError: {n} being made by another run that is still alive, so this run cannot make {are} now:"
        )?;
        for h in &self.held {
            writeln!(f, "  - {}: held by {}", h.address, h.holder)?;
        }
        write!(
            f,
            "Nothing was applied and no provider was called: the apply did not start, and this run holds no claim. Apply again once that run has ended."
        )
    }
}

/// How a change relates to the resource another run has in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relation {
    /// The change depends on the resource in flight.
    DependsOn,
    /// The resource in flight depends on the change.
    DependedOnBy,
}

/// One change blocked by a related resource in flight in another live run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    /// The resource this run wanted to change.
    pub address: String,
    /// The resource in flight in the other run.
    pub blocked_by: String,
    /// How the two relate.
    pub relation: Relation,
    /// The other run.
    pub holder: Holder,
}

/// Changes refused before any provider call: something they depend on (or that depends on them) is in flight in another live run.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub struct InFlightDependencyError {
    /// Every blocked change.
    pub blocked: Vec<Blocked>,
}

impl fmt::Display for InFlightDependencyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "InFlightDependencyError: {} change(s) cannot be made now: a resource they depend on, or that depends on them, is being changed by another run that is still alive:",
            self.blocked.len()
        )?;
        for b in &self.blocked {
            let how = match b.relation {
                Relation::DependsOn => "depends on",
                Relation::DependedOnBy => "is a dependency of",
            };
            writeln!(
                f,
                "  - {} {how} {}, held by {}",
                b.address, b.blocked_by, b.holder
            )?;
        }
        write!(
            f,
            "Nothing was changed and no provider was called. Apply again once that run has ended."
        )
    }
}

/// Why a claim was refused; nothing of it is held.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ClaimRefused {
    /// Another live run is making some of the same changes.
    #[error(transparent)]
    Change(#[from] InFlightChangeError),
    /// A related resource is in flight in another live run.
    #[error(transparent)]
    Dependency(#[from] InFlightDependencyError),
}

impl ClaimRefused {
    /// The error's name.
    pub fn name(&self) -> &'static str {
        match self {
            ClaimRefused::Change(_) => "InFlightChangeError",
            ClaimRefused::Dependency(_) => "InFlightDependencyError",
        }
    }

    /// The claims in the way: (address of the mark, holder).
    pub fn in_the_way(&self) -> Vec<(String, Holder)> {
        match self {
            ClaimRefused::Change(e) => e
                .held
                .iter()
                .map(|h| (h.address.clone(), h.holder.clone()))
                .collect(),
            ClaimRefused::Dependency(e) => e
                .blocked
                .iter()
                .map(|b| (b.blocked_by.clone(), b.holder.clone()))
                .collect(),
        }
    }
}

/// One change a run wants to claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// The resource instance address (a deposed object: `ADDR (deposed KEY)`).
    pub address: String,
    /// What the run will do: create, update, delete, replace, forget, move or import.
    pub operation: String,
    /// What the change depends on: resource addresses (instance keys are ignored) or `module.NAME`.
    pub dependencies: Vec<String>,
}

/// A mark of a gone run, now this run's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TakenOver {
    /// The resource.
    pub address: String,
    /// The run that is gone.
    pub run_id: String,
    /// What it was doing.
    pub operation: String,
    /// Since when.
    pub since: String,
    /// The gone run's program, if its record is still there.
    pub program: Option<ProgramStamp>,
    /// Its last heartbeat, if its record is still there.
    pub heartbeat_at: Option<String>,
}

/// What taking over a gone run's marks means, one message per gone run (both doors say this).
pub fn takeover_messages(taken: &[TakenOver]) -> Vec<String> {
    let mut by_run: BTreeMap<&str, Vec<&TakenOver>> = BTreeMap::new();
    for t in taken {
        by_run.entry(t.run_id.as_str()).or_default().push(t);
    }
    by_run
        .into_iter()
        .map(|(run, marks)| {
            let first = marks[0];
            let program = program_text(first.program.as_ref());
            let beat = match &first.heartbeat_at {
                Some(b) => format!("last heartbeat {b}"),
                None => "no run record: it ended, or never beat".into(),
            };
            let what: Vec<String> = marks
                .iter()
                .map(|m| format!("{} ({} since {})", m.address, m.operation, m.since))
                .collect();
            format!(
                "took over {} claim(s) of run {run} (program {program}; {beat}), which is gone: {}. That run may have changed these objects in the cloud without recording it; this run's plan was made against what the store last recorded for them, so the live objects can differ from what the plan assumed. Check them (a plan after this run shows the difference for attributes the provider reads back).",
                marks.len(),
                what.join(", ")
            )
        })
        .collect()
}

/// The resource (or module call) an instance address belongs to: instance keys and any `(deposed KEY)` left out.
pub fn resource_of(address: &str) -> String {
    let address = match address.find(" (deposed ") {
        Some(i) => &address[..i],
        None => address,
    };
    let mut out = String::with_capacity(address.len());
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for c in address.chars() {
        if depth > 0 {
            if in_string {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    in_string = false;
                }
                continue;
            }
            match c {
                '"' => in_string = true,
                '[' => depth += 1,
                ']' => depth -= 1,
                _ => {}
            }
            continue;
        }
        if c == '[' {
            depth = 1;
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether the dependency `dep` (a resource or `module.NAME` address) names the instance `address`.
fn names(dep: &str, address: &str) -> bool {
    let resource = resource_of(address);
    resource == dep || resource.starts_with(&format!("{dep}."))
}

/// Every mark of the estate with its version, and the run records of their runs.
struct MarkView {
    marks: BTreeMap<String, (Mark, Version)>,
    runs: HashMap<String, Option<RunRecord>>,
}

impl MarkView {
    async fn read(store: &DynStore, layout: &Layout) -> Result<MarkView, StoreError> {
        let prefix = format!("{}p/", layout.prefix());
        let listed = crate::store::list_all(store.as_ref(), &prefix).await?;
        let fetched: Vec<Result<Option<(Mark, Version)>, StoreError>> = stream::iter(listed)
            .map(|item| async move { read_mark(store, &item.key).await })
            .buffer_unordered(PARALLEL)
            .collect()
            .await;
        let mut marks = BTreeMap::new();
        for m in fetched {
            if let Some((mark, version)) = m? {
                marks.insert(mark.address.clone(), (mark, version));
            }
        }
        let ids: BTreeSet<String> = marks.values().map(|(m, _)| m.run_id.clone()).collect();
        let records: Vec<Result<(String, Option<RunRecord>), StoreError>> = stream::iter(ids)
            .map(|id| async move {
                let r = read_run(store, layout, &id).await?;
                Ok((id, r))
            })
            .buffer_unordered(PARALLEL)
            .collect()
            .await;
        let mut runs = HashMap::new();
        for r in records {
            let (id, record) = r?;
            runs.insert(id, record);
        }
        Ok(MarkView { marks, runs })
    }

    fn alive(&self, mark: &Mark) -> bool {
        holder_alive(mark, self.runs.get(&mark.run_id).and_then(Option::as_ref))
    }

    fn holder(&self, mark: &Mark) -> Holder {
        let record = self.runs.get(&mark.run_id).and_then(Option::as_ref);
        Holder {
            run_id: mark.run_id.clone(),
            program: record.map(|r| r.program.clone()),
            operation: mark.operation.clone(),
            since: mark.since.clone(),
            heartbeat_at: record.map(|r| r.heartbeat_at.clone()),
        }
    }

    /// Marks of other live runs.
    fn others<'a>(&'a self, run_id: &'a str) -> impl Iterator<Item = &'a Mark> + 'a {
        self.marks
            .values()
            .map(|(m, _)| m)
            .filter(move |m| m.run_id != run_id && self.alive(m))
    }

    fn overlaps(&self, run_id: &str, wanted: &[Wanted]) -> Vec<HeldChange> {
        wanted
            .iter()
            .filter_map(|w| {
                let (mark, _) = self.marks.get(&w.address)?;
                (mark.run_id != run_id && self.alive(mark)).then(|| HeldChange {
                    address: w.address.clone(),
                    holder: self.holder(mark),
                })
            })
            .collect()
    }

    /// Wanted changes related (either way) to a resource another live run has in flight.
    fn dependency_blocks(&self, run_id: &str, wanted: &[Wanted]) -> Vec<Blocked> {
        if cut(Mechanism::PendingMarks) {
            return Vec::new();
        }
        let mut out = Vec::new();
        for w in wanted {
            let own = resource_of(&w.address);
            for other in self.others(run_id) {
                let other_resource = resource_of(&other.address);
                if other_resource == own {
                    continue;
                }
                let relation = if w
                    .dependencies
                    .iter()
                    .any(|d| d != &own && names(d, &other.address))
                {
                    Relation::DependsOn
                } else if other
                    .dependencies
                    .iter()
                    .any(|d| d != &other_resource && names(d, &w.address))
                {
                    Relation::DependedOnBy
                } else {
                    continue;
                };
                out.push(Blocked {
                    address: w.address.clone(),
                    blocked_by: other.address.clone(),
                    relation,
                    holder: self.holder(other),
                });
            }
        }
        out
    }
}

async fn read_mark(store: &DynStore, key: &str) -> Result<Option<(Mark, Version)>, StoreError> {
    Ok(store.get(key).await?.and_then(|s| {
        serde_json::from_slice::<Mark>(&s.bytes)
            .ok()
            .map(|m| (m, s.version))
    }))
}

/// The marks one run holds: all the changes of its plan, claimed at once.
#[derive(Debug)]
pub struct Claims {
    store: DynStore,
    layout: Layout,
    held: std::sync::Mutex<BTreeMap<String, Version>>,
    taken_over: Vec<TakenOver>,
}

impl Claims {
    /// Claim every change in `wanted` for the beating run `run`, or none: refused when another live run holds one of them or a related resource.
    ///
    /// Each mark carries the run's heartbeat interval, so it shows the run alive before its
    /// first beat. Marks of gone runs are taken over. Dependencies are checked again after the
    /// marks are written, so of two runs claiming related resources at once at least one sees
    /// the other.
    pub async fn claim(
        store: &DynStore,
        layout: &Layout,
        run: &Liveness,
        wanted: &[Wanted],
    ) -> Result<Result<Claims, ClaimRefused>, StoreError> {
        let run_id = run.run_id();
        let heartbeat_millis = u64::try_from(run.interval().as_millis()).unwrap_or(u64::MAX);
        let since = now_rfc3339();
        // A mark that moves between our read and our write is judged again with a fresh read.
        for _ in 0..3 {
            let view = MarkView::read(store, layout).await?;
            let held = view.overlaps(run_id, wanted);
            if !held.is_empty() {
                return Ok(Err(InFlightChangeError { held }.into()));
            }
            let blocked = view.dependency_blocks(run_id, wanted);
            if !blocked.is_empty() {
                return Ok(Err(InFlightDependencyError { blocked }.into()));
            }
            let mut taken_over = Vec::new();
            let mut writes = Vec::new();
            for w in wanted {
                let precondition = match view.marks.get(&w.address) {
                    None => Precondition::Absent,
                    Some((mark, version)) => {
                        if mark.run_id != run_id {
                            let holder = view.holder(mark);
                            taken_over.push(TakenOver {
                                address: w.address.clone(),
                                run_id: mark.run_id.clone(),
                                operation: mark.operation.clone(),
                                since: mark.since.clone(),
                                program: holder.program,
                                heartbeat_at: holder.heartbeat_at,
                            });
                        }
                        Precondition::Matches(version.clone())
                    }
                };
                let mark = Mark {
                    format: MARK_FORMAT.into(),
                    estate: layout.estate().to_string(),
                    address: w.address.clone(),
                    run_id: run_id.to_string(),
                    operation: w.operation.clone(),
                    since: since.clone(),
                    heartbeat_millis,
                    dependencies: w.dependencies.clone(),
                };
                writes.push((w.address.clone(), encode(&mark), precondition));
            }
            let results: Vec<(String, Result<WriteOutcome<Version>, StoreError>)> =
                stream::iter(writes)
                    .map(|(address, bytes, precondition)| async move {
                        let key = layout.pending_key(&address);
                        let outcome =
                            put_conditional(store.as_ref(), &key, &bytes, &precondition).await;
                        (address, outcome)
                    })
                    .buffer_unordered(PARALLEL)
                    .collect()
                    .await;
            let claims = Claims {
                store: store.clone(),
                layout: layout.clone(),
                held: std::sync::Mutex::new(BTreeMap::new()),
                taken_over,
            };
            let mut lost = false;
            let mut error = None;
            for (address, outcome) in results {
                match outcome {
                    Ok(WriteOutcome::Written(v)) => claims.hold(address, v),
                    Ok(WriteOutcome::Conflict(_)) => lost = true,
                    Err(e) => {
                        error.get_or_insert(e);
                    }
                }
            }
            if let Some(e) = error {
                claims.release().await?;
                return Err(e);
            }
            if lost {
                claims.release().await?;
                continue;
            }
            let after = MarkView::read(store, layout).await?;
            let blocked = after.dependency_blocks(run_id, wanted);
            if !blocked.is_empty() {
                claims.release().await?;
                return Ok(Err(InFlightDependencyError { blocked }.into()));
            }
            return Ok(Ok(claims));
        }
        // Three times a mark moved under us: whoever holds them now is in the way.
        let view = MarkView::read(store, layout).await?;
        let held: Vec<HeldChange> = wanted
            .iter()
            .filter_map(|w| {
                let (mark, _) = view.marks.get(&w.address)?;
                (mark.run_id != run_id).then(|| HeldChange {
                    address: w.address.clone(),
                    holder: view.holder(mark),
                })
            })
            .collect();
        Ok(Err(InFlightChangeError { held }.into()))
    }

    fn hold(&self, address: String, version: Version) {
        if let Ok(mut held) = self.held.lock() {
            held.insert(address, version);
        }
    }

    /// The gone runs' marks this claim took over.
    pub fn taken_over(&self) -> &[TakenOver] {
        &self.taken_over
    }

    /// The addresses still held.
    pub fn addresses(&self) -> Vec<String> {
        self.held
            .lock()
            .map(|h| h.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Clear the marks of `addresses` whose records landed (only marks this run still holds).
    pub async fn landed(&self, addresses: &[String]) -> Result<(), StoreError> {
        let mine: Vec<(String, Version)> = match self.held.lock() {
            Ok(mut held) => addresses
                .iter()
                .filter_map(|a| held.remove(a).map(|v| (a.clone(), v)))
                .collect(),
            Err(_) => Vec::new(),
        };
        self.clear(mine).await
    }

    /// Release every mark still held; returns how many were released.
    pub async fn release(&self) -> Result<usize, StoreError> {
        let mine: Vec<(String, Version)> = match self.held.lock() {
            Ok(mut held) => std::mem::take(&mut *held).into_iter().collect(),
            Err(_) => Vec::new(),
        };
        let n = mine.len();
        self.clear(mine).await?;
        Ok(n)
    }

    async fn clear(&self, marks: Vec<(String, Version)>) -> Result<(), StoreError> {
        let results: Vec<Result<(), StoreError>> = stream::iter(marks)
            .map(|(address, version)| async move {
                clear_mark(&self.store, &self.layout, &address, &version).await
            })
            .buffer_unordered(PARALLEL)
            .collect()
            .await;
        results.into_iter().collect()
    }
}

/// The live run other than `run_id` that holds `address`, if one does.
pub async fn held_by_other(
    store: &DynStore,
    layout: &Layout,
    run_id: &str,
    address: &str,
) -> Result<Option<Holder>, StoreError> {
    let Some((mark, _)) = read_mark(store, &layout.pending_key(address)).await? else {
        return Ok(None);
    };
    if mark.run_id == run_id {
        return Ok(None);
    }
    let record = read_run(store, layout, &mark.run_id).await?;
    let alive = holder_alive(&mark, record.as_ref());
    Ok(alive.then(|| Holder {
        run_id: mark.run_id.clone(),
        program: record.as_ref().map(|r| r.program.clone()),
        operation: mark.operation.clone(),
        since: mark.since.clone(),
        heartbeat_at: record.map(|r| r.heartbeat_at),
    }))
}

/// Which of a refusal's claims are still held by the same live runs.
pub async fn still_in_the_way(
    store: &DynStore,
    layout: &Layout,
    refused: &ClaimRefused,
) -> Result<Vec<(String, Holder)>, StoreError> {
    let mut out = Vec::new();
    for (address, holder) in refused.in_the_way() {
        if let Some(now) = held_by_other(store, layout, "", &address).await?
            && now.run_id == holder.run_id
        {
            out.push((address, now));
        }
    }
    Ok(out)
}

/// The outcome of marking one change (the choudoufu protocol's BeginChange).
#[derive(Clone, Debug)]
pub struct Marked {
    /// The mark's version (to clear it with).
    pub version: Version,
    /// Marks of gone runs this run took over.
    pub taken_over: Vec<TakenOver>,
}

/// Mark `address` as in flight in run `run`, unless it or a related resource is in flight in another live run.
pub async fn begin_change(
    store: &DynStore,
    layout: &Layout,
    run: &Liveness,
    address: &str,
    operation: &str,
    dependencies: &[String],
) -> Result<Result<Marked, ClaimRefused>, SessionError> {
    let wanted = [Wanted {
        address: address.to_string(),
        operation: operation.to_string(),
        dependencies: dependencies.iter().map(|d| resource_of(d)).collect(),
    }];
    match Claims::claim(store, layout, run, &wanted).await? {
        Err(refused) => Ok(Err(refused)),
        Ok(claims) => {
            let version = claims
                .held
                .lock()
                .ok()
                .and_then(|h| h.get(address).cloned())
                .unwrap_or_else(|| Version::new(""));
            Ok(Ok(Marked {
                version,
                taken_over: claims.taken_over.clone(),
            }))
        }
    }
}

/// Clear this run's mark on `address` (only if it is still the mark this run set).
pub async fn clear_mark(
    store: &DynStore,
    layout: &Layout,
    address: &str,
    version: &Version,
) -> Result<(), StoreError> {
    store
        .delete(&layout.pending_key(address), version)
        .await
        .map(|_| ())
}

/// Clear the marks run `run_id` still holds on `addresses` (a run that ended before it could); how many were cleared.
pub async fn clear_marks_of(
    store: &DynStore,
    layout: &Layout,
    run_id: &str,
    addresses: &[String],
) -> Result<usize, StoreError> {
    let mut cleared = 0;
    for address in addresses {
        if let Some((mark, version)) = read_mark(store, &layout.pending_key(address)).await?
            && mark.run_id == run_id
            && let WriteOutcome::Written(()) =
                store.delete(&layout.pending_key(address), &version).await?
        {
            cleared += 1;
        }
    }
    Ok(cleared)
}

/// Remove the run record of `run_id` when that run is no longer alive (it ended without removing it); whether one was removed.
pub async fn remove_gone_run(
    store: &DynStore,
    layout: &Layout,
    run_id: &str,
) -> Result<bool, StoreError> {
    let key = layout.run_key(run_id);
    let Some(stored) = store.get(&key).await? else {
        return Ok(false);
    };
    let alive = serde_json::from_slice::<RunRecord>(&stored.bytes).is_ok_and(|r| r.alive_now());
    if alive {
        return Ok(false);
    }
    Ok(matches!(
        store.delete(&key, &stored.version).await?,
        WriteOutcome::Written(())
    ))
}

/// Every pending mark of the estate, by address, with whether its run is alive.
pub async fn read_marks(
    store: &DynStore,
    layout: &Layout,
) -> Result<Vec<(Mark, bool)>, StoreError> {
    let view = MarkView::read(store, layout).await?;
    Ok(view
        .marks
        .values()
        .map(|(m, _)| (m.clone(), view.alive(m)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_of_instance_addresses() {
        assert_eq!(resource_of("terraform_data.a"), "terraform_data.a");
        assert_eq!(resource_of("terraform_data.a[0]"), "terraform_data.a");
        assert_eq!(
            resource_of("module.m[\"k]\"].aws_s3_bucket.b[\"x.y\"]"),
            "module.m.aws_s3_bucket.b"
        );
        assert_eq!(
            resource_of("terraform_data.a (deposed 0a1b2c3d)"),
            "terraform_data.a"
        );
        assert_eq!(
            resource_of("terraform_data.a[\"q\\\"]\"]"),
            "terraform_data.a"
        );
    }

    #[test]
    fn dependencies_name_instances_and_modules() {
        assert!(names("terraform_data.x", "terraform_data.x[1]"));
        assert!(!names("terraform_data.x", "terraform_data.xy"));
        assert!(names("module.m", "module.m[0].terraform_data.x"));
        assert!(!names("module.m", "module.mm.terraform_data.x"));
    }

    fn mark(address: &str, run: &str, deps: &[&str]) -> (Mark, Version) {
        (
            Mark {
                format: MARK_FORMAT.into(),
                estate: "e".into(),
                address: address.into(),
                run_id: run.into(),
                operation: "update".into(),
                since: "2026-11-30T00:00:00Z".into(),
                heartbeat_millis: 0,
                dependencies: deps.iter().map(|d| d.to_string()).collect(),
            },
            Version::new("v"),
        )
    }

    fn alive_run(id: &str) -> RunRecord {
        RunRecord {
            format: RUN_FORMAT.into(),
            estate: "e".into(),
            run_id: id.into(),
            program: ProgramStamp::default(),
            started_at: now_rfc3339(),
            heartbeat_at: now_rfc3339(),
            heartbeat_millis: 60_000,
            ended: false,
        }
    }

    #[test]
    fn a_mark_shows_its_run_alive_within_its_window_when_it_has_no_run_record() {
        let mut view = MarkView {
            marks: BTreeMap::new(),
            runs: HashMap::new(),
        };
        let (mut m, v) = mark("terraform_data.x", "r", &[]);
        m.since = now_rfc3339();
        m.heartbeat_millis = 60_000;
        view.marks.insert(m.address.clone(), (m.clone(), v.clone()));
        view.runs.insert("r".into(), None);
        let want = [Wanted {
            address: "terraform_data.x".into(),
            operation: "update".into(),
            dependencies: vec![],
        }];
        assert_eq!(view.overlaps("s", &want).len(), 1, "fresh: alive");
        // A run that said it ended is gone, whatever its marks say.
        let mut ended = alive_run("r");
        ended.ended = true;
        view.runs.insert("r".into(), Some(ended));
        assert!(view.overlaps("s", &want).is_empty(), "ended: gone");
        // Past three intervals from the mark, with no run record: gone.
        m.since = "2020-01-01T00:00:00Z".into();
        view.marks.insert(m.address.clone(), (m.clone(), v.clone()));
        view.runs.insert("r".into(), None);
        assert!(view.overlaps("s", &want).is_empty(), "stale: gone");
        // A mark of an older program (no interval) never vouches for its run.
        m.since = now_rfc3339();
        m.heartbeat_millis = 0;
        view.marks.insert(m.address.clone(), (m, v));
        assert!(view.overlaps("s", &want).is_empty(), "no interval: gone");
    }

    #[test]
    fn dependencies_block_both_ways_and_dead_runs_do_not() {
        let mut view = MarkView {
            marks: BTreeMap::new(),
            runs: HashMap::new(),
        };
        view.marks.insert(
            "terraform_data.x".into(),
            mark("terraform_data.x", "r", &[]),
        );
        view.marks.insert(
            "terraform_data.z".into(),
            mark("terraform_data.z", "r", &["terraform_data.w"]),
        );
        view.runs.insert("r".into(), Some(alive_run("r")));
        let want = |a: &str, deps: &[&str]| Wanted {
            address: a.into(),
            operation: "update".into(),
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
        };
        let b = view.dependency_blocks("s", &[want("terraform_data.y", &["terraform_data.x"])]);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].relation, Relation::DependsOn);
        assert_eq!(b[0].blocked_by, "terraform_data.x");
        let b = view.dependency_blocks("s", &[want("terraform_data.w[2]", &[])]);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].relation, Relation::DependedOnBy);
        assert!(
            view.dependency_blocks("s", &[want("terraform_data.q", &["terraform_data.v"])])
                .is_empty()
        );
        assert_eq!(
            view.overlaps("s", &[want("terraform_data.x", &[])]).len(),
            1
        );
        assert!(
            view.overlaps("r", &[want("terraform_data.x", &[])])
                .is_empty()
        );
        let mut dead = alive_run("r");
        dead.heartbeat_at = "2020-01-01T00:00:00Z".into();
        view.runs.insert("r".into(), Some(dead));
        assert!(
            view.overlaps("s", &[want("terraform_data.x", &[])])
                .is_empty()
        );
        assert!(
            view.dependency_blocks("s", &[want("terraform_data.y", &["terraform_data.x"])])
                .is_empty()
        );
    }
}
