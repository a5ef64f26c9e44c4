//! Run liveness: the heartbeat that keeps a run record fresh, and when a run counts as gone.

use std::sync::{Arc, Weak};
use std::time::Duration;

use thiserror::Error;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::wire::{EncodeError, Mark, RUN_FORMAT, RunRecord};
use crate::cut::{Mechanism, cut};
use crate::engine::layout::Layout;
use crate::engine::program::{ProgramStamp, now_rfc3339};
use crate::store::{DynStore, Precondition, StoreError, Version, WriteOutcome, put_conditional};

/// How often a choudoufu-protocol run proves it is alive, unless told otherwise.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);
/// A run is gone once its heartbeat is older than this many intervals.
pub const MISSED_BEATS: u32 = 3;

/// A heartbeat that did not land; the next one tries again.
#[derive(Debug, Error)]
pub enum BeatError {
    /// The store call failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run record could not be encoded.
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// An interval in milliseconds, as marks and run records store it (saturating).
pub fn millis(interval: Duration) -> u64 {
    u64::try_from(interval.as_millis()).unwrap_or(u64::MAX)
}

/// Whether `at` (RFC 3339) is less than [`MISSED_BEATS`] intervals of `heartbeat_millis` ago (a time that does not parse is long ago).
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
pub fn holder_alive(mark: &Mark, record: Option<&RunRecord>) -> bool {
    if cut(Mechanism::Takeover) {
        return true;
    }
    match record {
        Some(r) if r.ended => false,
        Some(r) => r.alive_now() || mark.fresh_now(),
        None => mark.fresh_now(),
    }
}

/// A running run's liveness: its run record, written by its first heartbeat and kept fresh by the next.
///
/// Claims are made through it ([`Claims::claim`](crate::engine::claims::Claims::claim)), so every mark names a run that beats.
#[derive(Debug)]
pub struct Liveness {
    store: DynStore,
    layout: Layout,
    run_id: String,
    interval: Duration,
    program: ProgramStamp,
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
            program: program.clone(),
            started_at: now.clone(),
            heartbeat_at: now,
            heartbeat_millis: millis(interval),
            ended: false,
        };
        Arc::new_cyclic(|weak: &Weak<Liveness>| Liveness {
            store,
            layout,
            run_id: run_id.to_string(),
            interval,
            program,
            record: tokio::sync::Mutex::new((record, None)),
            beat: tokio::spawn(heartbeat(weak.clone(), interval)),
        })
    }

    /// The run's ID.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The program the run is.
    pub fn program(&self) -> &ProgramStamp {
        &self.program
    }

    /// How often it beats.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    async fn touch(&self) -> Result<(), BeatError> {
        let mut guard = self.record.lock().await;
        let (record, version) = &mut *guard;
        record.heartbeat_at = now_rfc3339();
        let key = self.layout.run_key(&record.run_id);
        let bytes = record.encode()?;
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

/// The heartbeat task: touch the run record every `interval` while the run's [`Liveness`] lives.
async fn heartbeat(run: Weak<Liveness>, interval: Duration) {
    let mut failing = false;
    loop {
        tokio::time::sleep(interval).await;
        let Some(me) = run.upgrade() else { return };
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
}

/// Remove the run record of `run_id` when that run is no longer alive (it ended without removing it); whether one was removed.
///
/// A stored object there that is not a run record counts as a gone run's, and is removed too.
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
