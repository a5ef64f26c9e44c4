//! Who holds a claim: the run, what it is doing since when, and what its run record says of it.

use std::fmt;

use super::wire::{Mark, RunRecord};
use crate::engine::operation::Operation;
use crate::engine::program::ProgramStamp;

/// Who holds a claim: the run, and what it is doing since when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The run.
    pub run_id: String,
    /// What it is doing to the resource.
    pub operation: Operation,
    /// Since when (the mark's time).
    pub since: String,
    /// Its run record as read (none: it has no readable record).
    pub record: Option<HolderRecord>,
    /// The program stamp its mark carries (none in marks older programs wrote).
    pub marked_by: Option<ProgramStamp>,
}

/// What a holder's run record says of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HolderRecord {
    /// Its program stamp.
    pub program: ProgramStamp,
    /// Its last heartbeat.
    pub heartbeat_at: String,
}

impl Holder {
    /// The holder `mark` names, with its run's record if it has a readable one.
    pub fn of(mark: &Mark, record: Option<&RunRecord>) -> Holder {
        Holder {
            run_id: mark.run_id.clone(),
            operation: mark.operation,
            since: mark.since.clone(),
            marked_by: mark.program.clone(),
            record: record.map(|r| HolderRecord {
                program: r.program.clone(),
                heartbeat_at: r.heartbeat_at.clone(),
            }),
        }
    }

    /// Its program stamp, from its run record, else from its mark.
    pub fn program(&self) -> Option<&ProgramStamp> {
        self.record
            .as_ref()
            .map(|r| &r.program)
            .or(self.marked_by.as_ref())
    }

    /// Its last heartbeat, from its run record.
    pub fn heartbeat_at(&self) -> Option<&str> {
        self.record.as_ref().map(|r| r.heartbeat_at.as_str())
    }
}

/// A program stamp as messages show it: the commit's first 12 characters and its time.
pub fn program_text(program: Option<&ProgramStamp>) -> String {
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
            program_text(self.program()),
            self.operation,
            self.since
        )
    }
}

/// One resource and the run that holds (or held) its claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldChange {
    /// The resource instance address.
    pub address: String,
    /// The run that holds it.
    pub holder: Holder,
}

/// A mark of a gone run, now this run's: the holder is the run that is gone.
pub type TakenOver = HeldChange;
