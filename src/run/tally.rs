//! The run's account of what its doors served: reads, the records each write created,
//! updated, deleted or met in conflict, the errors told to terraform, and refused requests.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};

use crate::engine::session::{Landed, WriteReport};
use crate::engine::write::RecordConflict;
use crate::frontdoor::http::{Served, Tally};

/// What the run's writes did, over all of terraform's POSTs and the provider door's records.
#[derive(Clone, Debug, Default)]
pub struct RunSummary {
    /// State reads served.
    pub reads: usize,
    /// State writes received.
    pub writes: usize,
    /// Addresses created.
    pub created: BTreeSet<String>,
    /// Addresses updated.
    pub updated: BTreeSet<String>,
    /// Addresses deleted.
    pub deleted: BTreeSet<String>,
    /// Records unchanged by the last write.
    pub unchanged: BTreeSet<String>,
    /// Records a saved plan does not change, skipped because another run moved them.
    pub skipped: BTreeSet<String>,
    /// Named conflicts, the latest per address.
    pub conflicts: BTreeMap<String, RecordConflict>,
    /// Other errors, as told to terraform.
    pub errors: Vec<String>,
    /// Requests refused with 401: they did not carry this run's credentials.
    pub unauthorized: usize,
}

impl RunSummary {
    /// The summary's line about refused requests, when there were any.
    pub fn refusal_line(&self) -> Option<String> {
        (self.unauthorized > 0).then(|| {
            format!(
                "choudoufu-live: refused {} request(s) to this run's state server without the run's credentials (401); they read and wrote nothing",
                self.unauthorized
            )
        })
    }

    /// Fold in what one state write did.
    fn absorb(&mut self, report: &WriteReport) {
        self.writes += 1;
        self.created.extend(report.created.iter().cloned());
        self.updated.extend(report.updated.iter().cloned());
        self.deleted.extend(report.deleted.iter().cloned());
        self.deleted.extend(report.already_gone.iter().cloned());
        self.unchanged = report.unchanged_of.iter().cloned().collect();
        self.skipped.extend(report.skipped.iter().cloned());
        for c in &report.conflicts {
            self.conflicts.insert(c.address.clone(), c.clone());
        }
    }
}

/// The run's [`Tally`]: the summary, kept as the doors tell it.
#[derive(Debug, Default)]
pub struct RunTally(Mutex<RunSummary>);

impl RunTally {
    /// A copy of the summary so far.
    pub fn summary(&self) -> RunSummary {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RunSummary> {
        // A count taken while another thread panicked is still a count: keep it.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Tally for RunTally {
    fn served(&self, what: Served<'_>) {
        let mut s = self.lock();
        match what {
            Served::Read => s.reads += 1,
            Served::Wrote(report) => s.absorb(report),
            Served::Recorded { address, landed } => {
                let set = match landed {
                    Landed::Created => &mut s.created,
                    Landed::Updated => &mut s.updated,
                    Landed::Deleted => &mut s.deleted,
                    Landed::Unchanged | Landed::Refused(_) => return,
                };
                set.insert(address.to_string());
            }
            Served::Failed(message) => s.errors.push(message.to_string()),
            Served::Unauthorized => s.unauthorized += 1,
        }
    }
}
