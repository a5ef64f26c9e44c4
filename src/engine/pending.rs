//! Pending operations and run liveness: marks a run sets before a provider call, and the heartbeat that says it is alive.

use std::sync::Arc;
use std::time::Duration;

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
/// How often a run proves it is alive, unless told otherwise.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);
/// A run is gone once its heartbeat is older than this many intervals.
pub const MISSED_BEATS: u32 = 3;

/// A change refused before its provider call: it, or something it depends on, is in flight in another live run.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "InFlightDependencyError: {address} cannot change now: {blocked_by} is being changed ({operation} since {since}) by run {other_run}, which is still alive. Nothing was changed and no provider was called; apply again once that run has ended."
)]
pub struct InFlightDependencyError {
    /// The resource this run wanted to change.
    pub address: String,
    /// The resource in flight (the same address, or a dependency).
    pub blocked_by: String,
    /// The other run.
    pub other_run: String,
    /// What the other run is doing.
    pub operation: String,
    /// Since when.
    pub since: String,
}

/// A resource in flight in one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// Always [`MARK_FORMAT`].
    pub format: String,
    /// The estate.
    pub estate: String,
    /// The resource address.
    pub address: String,
    /// The run that has it in flight.
    pub run_id: String,
    /// create, update, delete or replace.
    pub operation: String,
    /// When the mark was set (RFC 3339).
    pub since: String,
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

fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

/// Whether the run `run_id` is alive: it has a run record, has not ended, and beat recently.
pub async fn run_alive(
    store: &DynStore,
    layout: &Layout,
    run_id: &str,
) -> Result<bool, StoreError> {
    if cut(Mechanism::Takeover) {
        return Ok(true);
    }
    let Some(stored) = store.get(&layout.run_key(run_id)).await? else {
        return Ok(false);
    };
    let Ok(run) = serde_json::from_slice::<RunRecord>(&stored.bytes) else {
        return Ok(false);
    };
    if run.ended {
        return Ok(false);
    }
    let Ok(beat) = OffsetDateTime::parse(&run.heartbeat_at, &Rfc3339) else {
        return Ok(false);
    };
    let bound = Duration::from_millis(run.heartbeat_millis.max(1)) * MISSED_BEATS;
    let age = OffsetDateTime::now_utc() - beat;
    Ok(age < time::Duration::try_from(bound).unwrap_or(time::Duration::MAX))
}

/// A running run's liveness: its record, kept fresh by a heartbeat task.
#[derive(Debug)]
pub struct Liveness {
    store: DynStore,
    layout: Layout,
    record: tokio::sync::Mutex<(RunRecord, Option<Version>)>,
    beat: tokio::task::JoinHandle<()>,
}

impl Liveness {
    /// Write the run's record and start beating every `interval`.
    pub async fn start(
        store: DynStore,
        layout: Layout,
        run_id: &str,
        program: ProgramStamp,
        interval: Duration,
    ) -> Result<Arc<Self>, StoreError> {
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
        let key = layout.run_key(run_id);
        let version = match put_conditional(
            store.as_ref(),
            &key,
            &encode(&record),
            &Precondition::Absent,
        )
        .await?
        {
            WriteOutcome::Written(v) => Some(v),
            WriteOutcome::Conflict(_) => None,
        };
        let live = Arc::new_cyclic(|weak: &std::sync::Weak<Liveness>| {
            let weak = weak.clone();
            let beat = tokio::spawn(async move {
                loop {
                    tokio::time::sleep(interval).await;
                    let Some(me) = weak.upgrade() else { return };
                    if let Err(e) = me.touch(false).await {
                        tracing::warn!(error = %e, "heartbeat failed");
                    }
                }
            });
            Liveness {
                store,
                layout,
                record: tokio::sync::Mutex::new((record, version)),
                beat,
            }
        });
        Ok(live)
    }

    async fn touch(&self, ended: bool) -> Result<(), StoreError> {
        let mut guard = self.record.lock().await;
        let (record, version) = &mut *guard;
        record.heartbeat_at = now_rfc3339();
        record.ended = ended;
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

    /// Say the run has ended and stop beating.
    pub async fn end(&self) -> Result<(), StoreError> {
        self.beat.abort();
        self.touch(true).await
    }
}

impl Drop for Liveness {
    fn drop(&mut self) {
        self.beat.abort();
    }
}

/// What the dead run left, now this run's.
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
}

/// The outcome of marking a change.
#[derive(Clone, Debug)]
pub struct Marked {
    /// The mark's version (to clear it with).
    pub version: Version,
    /// Marks of gone runs this run took over.
    pub taken_over: Vec<TakenOver>,
}

async fn read_mark(store: &DynStore, key: &str) -> Result<Option<(Mark, Version)>, StoreError> {
    Ok(store.get(key).await?.and_then(|s| {
        serde_json::from_slice::<Mark>(&s.bytes)
            .ok()
            .map(|m| (m, s.version))
    }))
}

/// Mark `address` as in flight in run `run_id`, unless it or a dependency is in flight in another live run.
pub async fn begin_change(
    store: &DynStore,
    layout: &Layout,
    run_id: &str,
    address: &str,
    operation: &str,
    dependencies: &[String],
) -> Result<Result<Marked, InFlightDependencyError>, SessionError> {
    for dep in dependencies.iter().filter(|d| d.as_str() != address) {
        if let Some((mark, _)) = read_mark(store, &layout.pending_key(dep)).await?
            && mark.run_id != run_id
            && !cut(Mechanism::PendingMarks)
            && run_alive(store, layout, &mark.run_id).await?
        {
            return Ok(Err(InFlightDependencyError {
                address: address.to_string(),
                blocked_by: dep.clone(),
                other_run: mark.run_id,
                operation: mark.operation,
                since: mark.since,
            }));
        }
    }
    let key = layout.pending_key(address);
    let mine = Mark {
        format: MARK_FORMAT.into(),
        estate: layout.estate().to_string(),
        address: address.to_string(),
        run_id: run_id.to_string(),
        operation: operation.to_string(),
        since: now_rfc3339(),
    };
    let bytes = encode(&mine);
    // Two tries: a mark that appears between our read and our write is judged again.
    for _ in 0..2 {
        let existing = read_mark(store, &key).await?;
        let mut taken_over = Vec::new();
        let precondition = match &existing {
            None => Precondition::Absent,
            Some((mark, version)) if mark.run_id == run_id => {
                Precondition::Matches(version.clone())
            }
            Some((mark, version)) => {
                if run_alive(store, layout, &mark.run_id).await? {
                    return Ok(Err(InFlightDependencyError {
                        address: address.to_string(),
                        blocked_by: address.to_string(),
                        other_run: mark.run_id.clone(),
                        operation: mark.operation.clone(),
                        since: mark.since.clone(),
                    }));
                }
                taken_over.push(TakenOver {
                    address: address.to_string(),
                    run_id: mark.run_id.clone(),
                    operation: mark.operation.clone(),
                    since: mark.since.clone(),
                });
                Precondition::Matches(version.clone())
            }
        };
        match put_conditional(store.as_ref(), &key, &bytes, &precondition).await? {
            WriteOutcome::Written(version) => {
                return Ok(Ok(Marked {
                    version,
                    taken_over,
                }));
            }
            WriteOutcome::Conflict(_) => continue,
        }
    }
    let (mark, _) = read_mark(store, &key)
        .await?
        .unwrap_or((mine.clone(), Version::new("")));
    Ok(Err(InFlightDependencyError {
        address: address.to_string(),
        blocked_by: address.to_string(),
        other_run: mark.run_id,
        operation: mark.operation,
        since: mark.since,
    }))
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

/// Every pending mark of the estate, by address, with whether its run is alive.
pub async fn read_marks(
    store: &DynStore,
    layout: &Layout,
) -> Result<Vec<(Mark, bool)>, StoreError> {
    let prefix = format!("{}p/", layout.prefix());
    let mut out = Vec::new();
    for item in crate::store::list_all(store.as_ref(), &prefix).await? {
        if let Some((mark, _)) = read_mark(store, &item.key).await? {
            let alive = run_alive(store, layout, &mark.run_id).await?;
            out.push((mark, alive));
        }
    }
    Ok(out)
}
