//! Every mark of an estate read at once, with its runs' records: which wanted changes other live runs are in the way of.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use futures::{StreamExt, stream};

use super::holder::{HeldChange, Holder};
use super::liveness::holder_alive;
use super::refusal::{Blocked, Relation};
use super::wanted::Wanted;
use super::wire::{Mark, RunRecord, read_mark, read_run};
use crate::cut::{Mechanism, cut};
use crate::engine::address::{names, resource_of};
use crate::engine::layout::Layout;
use crate::store::{DynStore, StoreError, Version};

/// How many store calls a read of the marks makes at once.
pub const PARALLEL: usize = 32;

/// Every mark of the estate with its version, and the run records of their runs.
pub struct MarkView {
    /// The marks, by address.
    pub marks: BTreeMap<String, (Mark, Version)>,
    /// The run record of each run that holds a mark (none: it has no readable one).
    pub runs: HashMap<String, Option<RunRecord>>,
}

impl MarkView {
    /// Read every mark of the estate and the run records of their runs.
    pub async fn read(store: &DynStore, layout: &Layout) -> Result<MarkView, StoreError> {
        Self::read_others(store, layout, &HashMap::new()).await
    }

    /// [`MarkView::read`] without the marks `own` names by key, each listed at the version written (the caller's own: neither they nor their run record are fetched).
    pub async fn read_others(
        store: &DynStore,
        layout: &Layout,
        own: &HashMap<String, Version>,
    ) -> Result<MarkView, StoreError> {
        let prefix = format!("{}p/", layout.prefix());
        let mut listed = crate::store::list_all(store.as_ref(), &prefix).await?;
        // A mark listed at another version than written is someone else's now: it is read.
        listed.retain(|item| {
            own.get(&item.key)
                .is_none_or(|v| v.token != item.version.token)
        });
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

    /// Whether the run holding `mark` counts as alive now.
    pub fn alive(&self, mark: &Mark) -> bool {
        holder_alive(mark, self.record(mark))
    }

    /// Who holds `mark`.
    pub fn holder(&self, mark: &Mark) -> Holder {
        Holder::of(mark, self.record(mark))
    }

    fn record(&self, mark: &Mark) -> Option<&RunRecord> {
        self.runs.get(&mark.run_id).and_then(Option::as_ref)
    }

    /// Marks of other live runs.
    fn others<'a>(&'a self, run_id: &'a str) -> impl Iterator<Item = &'a Mark> + 'a {
        self.marks
            .values()
            .map(|(m, _)| m)
            .filter(move |m| m.run_id != run_id && self.alive(m))
    }

    /// Whether nothing in the view bears on `wanted`: no mark of a wanted change (any run's) and no mark that blocks one.
    pub fn bears_on_nothing(&self, run_id: &str, wanted: &[Wanted]) -> bool {
        wanted.iter().all(|w| !self.marks.contains_key(&w.address))
            && self.dependency_blocks(run_id, wanted).is_empty()
    }

    /// Wanted changes another live run holds.
    pub fn overlaps(&self, run_id: &str, wanted: &[Wanted]) -> Vec<HeldChange> {
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

    /// Wanted changes held by any other run, live or not (who is in the way once a claim lost every try).
    pub fn held_elsewhere(&self, run_id: &str, wanted: &[Wanted]) -> Vec<HeldChange> {
        wanted
            .iter()
            .filter_map(|w| {
                let (mark, _) = self.marks.get(&w.address)?;
                (mark.run_id != run_id).then(|| HeldChange {
                    address: w.address.clone(),
                    holder: self.holder(mark),
                })
            })
            .collect()
    }

    /// Wanted changes related (either way) to a resource another live run has in flight.
    pub fn dependency_blocks(&self, run_id: &str, wanted: &[Wanted]) -> Vec<Blocked> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::claims::wire::{MARK_FORMAT, RUN_FORMAT};
    use crate::engine::operation::Operation;
    use crate::engine::program::{ProgramStamp, now_rfc3339};

    fn mark(address: &str, run: &str, deps: &[&str]) -> (Mark, Version) {
        (
            Mark {
                format: MARK_FORMAT.into(),
                estate: "e".into(),
                address: address.into(),
                run_id: run.into(),
                operation: Operation::Update,
                since: "2026-11-30T00:00:00Z".into(),
                heartbeat_millis: 0,
                dependencies: deps.iter().map(|d| d.to_string()).collect(),
                program: None,
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
            operation: Operation::Update,
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
            operation: Operation::Update,
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
