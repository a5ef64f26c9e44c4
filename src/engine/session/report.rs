//! What one write of a state document did, and the conflicts it met.

use std::fmt;

use serde::Serialize;
use thiserror::Error;

use crate::engine::write::conflict::RecordConflict;

/// Record store write conflict: records another run changed after this run read them.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub struct RecordConflictError {
    /// Every conflicting record, in address order.
    pub conflicts: Vec<RecordConflict>,
    /// How many other records this write did land.
    pub landed: usize,
}

impl fmt::Display for RecordConflictError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Record store write conflict (RecordConflictError): {} record(s) changed by another run after this run read them:",
            self.conflicts.len()
        )?;
        for c in &self.conflicts {
            writeln!(f, "  - {c}")?;
        }
        write!(
            f,
            "Nothing was overwritten: the store keeps the other run's records. {} other record(s) of this write landed. Re-plan and re-apply; the new plan reads what the other run wrote.",
            self.landed
        )
    }
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
    /// The addresses of those records.
    #[serde(skip)]
    pub unchanged_of: Vec<String>,
    /// Deletes that found the record already gone.
    pub already_gone: Vec<String>,
    /// Records this run's plan does not change whose write was skipped: another run moved them, or holds their claim.
    pub skipped: Vec<String>,
    /// Outputs whose write met another run's newer value, left for the door to reconcile.
    pub stale_outputs: Vec<String>,
    /// Records the store already held with this content, written by this same run (an earlier try whose answer was lost, or a recovery written before).
    pub already: Vec<String>,
    /// Records another run changed after this run read them; nothing of these was written.
    #[serde(skip)]
    pub conflicts: Vec<RecordConflict>,
    /// Unchanged records rewritten to carry the time a cone plan refreshed them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refreshed: Vec<String>,
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

    /// Each list in address order.
    pub(super) fn sort(&mut self) {
        for list in [
            &mut self.created,
            &mut self.updated,
            &mut self.deleted,
            &mut self.already_gone,
            &mut self.skipped,
            &mut self.stale_outputs,
            &mut self.already,
            &mut self.refreshed,
        ] {
            list.sort();
        }
        self.conflicts.sort_by(|a, b| a.address.cmp(&b.address));
    }
}
