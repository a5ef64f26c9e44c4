//! The wording of refusals: why a claim was refused, and what taking over a gone run's claims means.
//!
//! These texts are what both doors print; tests and users match them, so they change only on purpose.

use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

use super::holder::{HeldChange, Holder, TakenOver, program_text};

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

/// What taking over a gone run's marks means, one message per gone run (both doors say this).
pub fn takeover_messages(taken: &[TakenOver]) -> Vec<String> {
    let mut by_run: BTreeMap<&str, Vec<&TakenOver>> = BTreeMap::new();
    for t in taken {
        by_run.entry(t.holder.run_id.as_str()).or_default().push(t);
    }
    by_run
        .into_iter()
        .map(|(run, marks)| {
            let first = marks[0];
            let program = program_text(first.holder.program());
            let beat = match first.holder.heartbeat_at() {
                Some(b) => format!("last heartbeat {b}"),
                None => "no run record: it ended, or never beat".into(),
            };
            let what: Vec<String> = marks
                .iter()
                .map(|m| format!("{} ({} since {})", m.address, m.holder.operation, m.holder.since))
                .collect();
            format!(
                "took over {} claim(s) of run {run} (program {program}; {beat}), which is gone: {}. That run may have changed these objects in the cloud without recording it; this run's plan was made against what the store last recorded for them, so the live objects can differ from what the plan assumed. Check them (a plan after this run shows the difference for attributes the provider reads back).",
                marks.len(),
                what.join(", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::claims::holder::HolderRecord;
    use crate::engine::operation::Operation;
    use crate::engine::program::ProgramStamp;

    fn holder(run: &str, record: bool) -> Holder {
        Holder {
            run_id: run.into(),
            operation: Operation::Replace,
            since: "2026-11-30T00:00:00Z".into(),
            marked_by: None,
            record: record.then(|| HolderRecord {
                program: ProgramStamp {
                    commit: "0123456789abcdef".into(),
                    time: "2026-11-29T00:00:00Z".into(),
                },
                heartbeat_at: "2026-11-30T00:00:10Z".into(),
            }),
        }
    }

    fn held(address: &str, run: &str, record: bool) -> HeldChange {
        HeldChange {
            address: address.into(),
            holder: holder(run, record),
        }
    }

    #[test]
    fn refusals_read_as_they_always_have() {
        let one = InFlightChangeError {
            held: vec![held("terraform_data.a", "r1", true)],
        };
        assert_eq!(
            one.to_string(),
            "InFlightChangeError: 1 of this run's changes is being made by another run that is still alive, so this run cannot make it now:\n  - terraform_data.a: held by run r1 (program 0123456789ab of 2026-11-29T00:00:00Z; replace since 2026-11-30T00:00:00Z)\nNothing was applied and no provider was called: the apply did not start, and this run holds no claim. Apply again once that run has ended."
        );
        let two = InFlightChangeError {
            held: vec![
                held("terraform_data.a", "r1", true),
                held("terraform_data.b", "r2", false),
            ],
        };
        assert_eq!(
            two.to_string(),
            "InFlightChangeError: 2 of this run's changes are being made by another run that is still alive, so this run cannot make them now:\n  - terraform_data.a: held by run r1 (program 0123456789ab of 2026-11-29T00:00:00Z; replace since 2026-11-30T00:00:00Z)\n  - terraform_data.b: held by run r2 (program unknown; replace since 2026-11-30T00:00:00Z)\nNothing was applied and no provider was called: the apply did not start, and this run holds no claim. Apply again once that run has ended."
        );
        let blocked = InFlightDependencyError {
            blocked: vec![
                Blocked {
                    address: "terraform_data.app".into(),
                    blocked_by: "terraform_data.db".into(),
                    relation: Relation::DependsOn,
                    holder: holder("r1", true),
                },
                Blocked {
                    address: "terraform_data.net".into(),
                    blocked_by: "terraform_data.db".into(),
                    relation: Relation::DependedOnBy,
                    holder: holder("r1", false),
                },
            ],
        };
        assert_eq!(
            blocked.to_string(),
            "InFlightDependencyError: 2 change(s) cannot be made now: a resource they depend on, or that depends on them, is being changed by another run that is still alive:\n  - terraform_data.app depends on terraform_data.db, held by run r1 (program 0123456789ab of 2026-11-29T00:00:00Z; replace since 2026-11-30T00:00:00Z)\n  - terraform_data.net is a dependency of terraform_data.db, held by run r1 (program unknown; replace since 2026-11-30T00:00:00Z)\nNothing was changed and no provider was called. Apply again once that run has ended."
        );
        let refused = ClaimRefused::from(blocked);
        assert_eq!(refused.name(), "InFlightDependencyError");
        assert_eq!(refused.in_the_way()[0].0, "terraform_data.db");
    }

    #[test]
    fn takeovers_are_told_once_per_gone_run() {
        let messages = takeover_messages(&[
            held("terraform_data.a", "r1", true),
            held("terraform_data.b", "r2", false),
            held("terraform_data.c", "r1", true),
        ]);
        let tail = "That run may have changed these objects in the cloud without recording it; this run's plan was made against what the store last recorded for them, so the live objects can differ from what the plan assumed. Check them (a plan after this run shows the difference for attributes the provider reads back).";
        assert_eq!(
            messages,
            [
                format!(
                    "took over 2 claim(s) of run r1 (program 0123456789ab of 2026-11-29T00:00:00Z; last heartbeat 2026-11-30T00:00:10Z), which is gone: terraform_data.a (replace since 2026-11-30T00:00:00Z), terraform_data.c (replace since 2026-11-30T00:00:00Z). {tail}"
                ),
                format!(
                    "took over 1 claim(s) of run r2 (program unknown; no run record: it ended, or never beat), which is gone: terraform_data.b (replace since 2026-11-30T00:00:00Z). {tail}"
                ),
            ]
        );
    }
}
