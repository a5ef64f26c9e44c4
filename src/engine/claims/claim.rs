//! The claim algorithm: claim a plan's changes all at once or none, take over gone runs' marks, clear marks as records land, release the rest.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use futures::{StreamExt, stream};
use thiserror::Error;
use tokio::task::JoinHandle;

use super::holder::{HeldChange, Holder, TakenOver};
use super::liveness::{Liveness, holder_alive, millis, remove_gone_run};
use super::refusal::{ClaimRefused, InFlightChangeError, InFlightDependencyError};
use super::view::{MarkView, PARALLEL};
use super::wanted::Wanted;
use super::wire::{EncodeError, MARK_FORMAT, Mark, read_mark, read_run};
use crate::cut::{Mechanism, cut};
use crate::engine::layout::Layout;
use crate::engine::program::now_rfc3339;
use crate::store::{DynStore, Precondition, StoreError, Version, WriteOutcome, put_conditional};

/// How many times a claim reads the marks again when one moved between its read and its write.
const TRIES: usize = 3;

/// A claim that could not be made; nothing of it is held.
#[derive(Debug, Error)]
pub enum ClaimError {
    /// A store call failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A mark could not be encoded.
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// The versions of the marks a run holds, by address.
///
/// A panic while the lock is held cannot leave the map half-changed (each call inserts or
/// takes whole entries), so a poisoned lock is used as it is: the marks it lists are still
/// this run's, and dropping them would leave them for other runs to wait on.
#[derive(Debug, Default)]
struct HeldMarks(Mutex<BTreeMap<String, Version>>);

impl HeldMarks {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Version>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn insert(&self, address: String, version: Version) {
        self.lock().insert(address, version);
    }

    fn addresses(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    fn version(&self, address: &str) -> Option<Version> {
        self.lock().get(address).cloned()
    }

    fn take(&self, addresses: &[String]) -> Vec<(String, Version)> {
        let mut held = self.lock();
        addresses
            .iter()
            .filter_map(|a| held.remove(a).map(|v| (a.clone(), v)))
            .collect()
    }

    fn take_all(&self) -> Vec<(String, Version)> {
        std::mem::take(&mut *self.lock()).into_iter().collect()
    }
}

/// What a claim may use besides its own reads.
pub struct Alongside<F> {
    /// The estate's marks as read a moment before (while the plan was read).
    pub early: Option<MarkView>,
    /// Started once every mark is written, beside the read that follows the writes.
    pub after_written: F,
}

/// The marks one run holds: all the changes of its plan, claimed at once.
#[derive(Debug)]
pub struct Claims {
    store: DynStore,
    layout: Layout,
    held: HeldMarks,
    taken_over: Vec<TakenOver>,
    /// The clearing of marks whose records landed, each giving back the marks it could not clear.
    clearing: Mutex<Vec<Clearing>>,
}

/// One clearing of landed marks: it gives back the marks (address, version) it could not clear.
type Clearing = JoinHandle<Vec<(String, Version)>>;

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
    ) -> Result<Result<Claims, ClaimRefused>, ClaimError> {
        let along = Alongside {
            early: None,
            after_written: async {},
        };
        Ok(Self::claim_with(store, layout, run, wanted, along).await?.0)
    }

    /// [`Claims::claim`], starting from `along.early` when nothing in it bears on `wanted`, and running `along.after_written` beside the read that follows the marks' writes (its output is given back when it ran).
    pub async fn claim_with<F: Future>(
        store: &DynStore,
        layout: &Layout,
        run: &Liveness,
        wanted: &[Wanted],
        along: Alongside<F>,
    ) -> Result<(Result<Claims, ClaimRefused>, Option<F::Output>), ClaimError> {
        let run_id = run.run_id();
        let heartbeat_millis = millis(run.interval());
        let since = now_rfc3339();
        let Alongside {
            mut early,
            after_written,
        } = along;
        let mut after_written = Some(after_written);
        // A mark that moves between our read and our write is judged again with a fresh read.
        for _ in 0..TRIES {
            // An earlier read stands only when it holds no mark of a wanted change and nothing
            // that blocks one: every write is then a create, which fails if a mark came since,
            // and the read after the writes sees any blocking mark that came since.
            let view = match early.take() {
                Some(view) if view.bears_on_nothing(run_id, wanted) => view,
                _ => MarkView::read(store, layout).await?,
            };
            let held = view.overlaps(run_id, wanted);
            if !held.is_empty() {
                return Ok((Err(InFlightChangeError { held }.into()), None));
            }
            let blocked = view.dependency_blocks(run_id, wanted);
            if !blocked.is_empty() {
                return Ok((Err(InFlightDependencyError { blocked }.into()), None));
            }
            let mut taken_over = Vec::new();
            let mut writes = Vec::new();
            for w in wanted {
                let precondition = match view.marks.get(&w.address) {
                    None => Precondition::Absent,
                    Some((mark, version)) => {
                        if mark.run_id != run_id {
                            taken_over.push(HeldChange {
                                address: w.address.clone(),
                                holder: view.holder(mark),
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
                    operation: w.operation,
                    since: since.clone(),
                    heartbeat_millis,
                    dependencies: w.dependencies.clone(),
                    program: Some(run.program().clone()),
                };
                writes.push((w.address.clone(), mark.encode()?, precondition));
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
                held: HeldMarks::default(),
                taken_over,
                clearing: Mutex::new(Vec::new()),
            };
            let mut lost = false;
            let mut error = None;
            for (address, outcome) in results {
                match outcome {
                    Ok(WriteOutcome::Written(v)) => claims.held.insert(address, v),
                    Ok(WriteOutcome::Conflict(_)) => lost = true,
                    Err(e) => {
                        error.get_or_insert(e);
                    }
                }
            }
            if let Some(e) = error {
                claims.release().await?;
                return Err(e.into());
            }
            if lost {
                claims.release().await?;
                continue;
            }
            // This run's own marks, just written, cannot block it: only the others' are read.
            let own: HashMap<String, Version> = wanted
                .iter()
                .filter_map(|w| {
                    let key = layout.pending_key(&w.address).into_string();
                    Some((key, claims.version(&w.address)?))
                })
                .collect();
            let along = async {
                match after_written.take() {
                    Some(f) => Some(f.await),
                    None => None,
                }
            };
            let (after, along) = futures::join!(MarkView::read_others(store, layout, &own), along);
            let after = after?;
            let blocked = after.dependency_blocks(run_id, wanted);
            if !blocked.is_empty() {
                claims.release().await?;
                return Ok((Err(InFlightDependencyError { blocked }.into()), along));
            }
            remove_gone_records(store, layout, &claims.taken_over).await;
            return Ok((Ok(claims), along));
        }
        // Three times a mark moved under us: whoever holds them now is in the way.
        let view = MarkView::read(store, layout).await?;
        let held = view.held_elsewhere(run_id, wanted);
        Ok((Err(InFlightChangeError { held }.into()), None))
    }

    /// The gone runs' marks this claim took over.
    pub fn taken_over(&self) -> &[TakenOver] {
        &self.taken_over
    }

    /// The addresses still held.
    pub fn addresses(&self) -> Vec<String> {
        self.held.addresses()
    }

    /// The version of this run's mark on `address`, while it holds it.
    pub fn version(&self, address: &str) -> Option<Version> {
        self.held.version(address)
    }

    /// Clear the marks of `addresses` whose records landed (only marks this run still holds), beside what the run does next: [`Claims::release`] waits for it, and releases what it could not clear.
    pub fn landed(&self, addresses: &[String]) {
        let marks = self.held.take(addresses);
        if marks.is_empty() {
            return;
        }
        let (store, layout) = (self.store.clone(), self.layout.clone());
        let task = tokio::spawn(async move {
            let mut left = Vec::new();
            for (address, version, cleared) in clear_each(&store, &layout, marks).await {
                if let Err(e) = cleared {
                    tracing::warn!(address, error = %e, "could not clear the claim of a record that landed; it is released when the run ends");
                    left.push((address, version));
                }
            }
            left
        });
        self.clearing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(task);
    }

    /// Release every mark still held, those a clearing could not clear among them, once every clearing ended; returns how many were released.
    pub async fn release(&self) -> Result<usize, StoreError> {
        let clearing =
            std::mem::take(&mut *self.clearing.lock().unwrap_or_else(PoisonError::into_inner));
        let mut mine = Vec::new();
        for task in clearing {
            // A clearing that could not finish gave back nothing: its marks stay until taken over.
            if let Ok(left) = task.await
                && !cut(Mechanism::ReleaseUncleared)
            {
                mine.extend(left);
            }
        }
        mine.extend(self.held.take_all());
        let n = mine.len();
        self.clear(mine).await?;
        Ok(n)
    }

    async fn clear(&self, marks: Vec<(String, Version)>) -> Result<(), StoreError> {
        clear_each(&self.store, &self.layout, marks)
            .await
            .into_iter()
            .try_for_each(|(_, _, cleared)| cleared)
    }
}

/// Clear `marks`, [`PARALLEL`] at a time; each with what its clearing came to.
async fn clear_each(
    store: &DynStore,
    layout: &Layout,
    marks: Vec<(String, Version)>,
) -> Vec<(String, Version, Result<(), StoreError>)> {
    stream::iter(marks)
        .map(|(address, version)| async move {
            let cleared = clear_mark(store, layout, &address, &version).await;
            (address, version, cleared)
        })
        .buffer_unordered(PARALLEL)
        .collect()
        .await
}

/// Delete the run records of the gone runs whose marks were taken over, each conditionally on the
/// version read when it is judged gone again (a run that beat meanwhile keeps its record).
///
/// Their other marks, if any, show no sign of life either: a mark is never newer than its run's
/// last heartbeat. A record left behind only costs a read; the next takeover tries again.
async fn remove_gone_records(store: &DynStore, layout: &Layout, taken_over: &[TakenOver]) {
    if cut(Mechanism::GoneRunRecord) {
        return;
    }
    let gone: std::collections::BTreeSet<&str> = taken_over
        .iter()
        .map(|t| t.holder.run_id.as_str())
        .collect();
    for run_id in gone {
        match remove_gone_run(store, layout, run_id).await {
            Ok(removed) => tracing::info!(run_id, removed, "gone run's record"),
            Err(e) => {
                tracing::warn!(run_id, error = %e, "could not remove a gone run's record; the next takeover tries again")
            }
        }
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
    Ok(alive.then(|| Holder::of(&mark, record.as_ref())))
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

    fn v(token: &str) -> Version {
        Version::new(token)
    }

    #[test]
    fn held_marks_survive_a_poisoned_lock() {
        let held = HeldMarks::default();
        held.insert("terraform_data.a".into(), v("1"));
        held.insert("terraform_data.b".into(), v("2"));
        let poisoned = std::thread::scope(|s| {
            s.spawn(|| {
                let _guard = held.0.lock();
                panic!("a panic while the claims are locked");
            })
            .join()
            .is_err()
        });
        assert!(poisoned && held.0.is_poisoned());
        assert_eq!(
            held.addresses(),
            ["terraform_data.a", "terraform_data.b"],
            "the claims are still listed, so they are released"
        );
        assert_eq!(held.version("terraform_data.a"), Some(v("1")));
        assert_eq!(
            held.take(&["terraform_data.a".into(), "terraform_data.x".into()]),
            [("terraform_data.a".to_string(), v("1"))]
        );
        held.insert("terraform_data.c".into(), v("3"));
        assert_eq!(
            held.take_all(),
            [
                ("terraform_data.b".to_string(), v("2")),
                ("terraform_data.c".to_string(), v("3"))
            ]
        );
        assert!(held.addresses().is_empty());
    }
}
