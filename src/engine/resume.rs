//! A stopped saved plan resumed under its approval: which of its changes its own apply made
//! (by the plan stamp on each record's writer), and whether a new plan of the rest is exactly
//! what was approved. No I/O: the run plans and applies.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;
use thiserror::Error;

use crate::cut::{Mechanism, cut};
use crate::engine::plan::{Actions, Mode, Plan, ResourceChange};
use crate::engine::plan_stamp::{MovedRecord, PlanMovedError, PlanStamp};
use crate::engine::session::Snapshot;

/// What an earlier apply of a saved plan left: the plan's changes it already made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Finished {
    /// The addresses of the plan's changes whose records that apply wrote.
    pub addresses: BTreeSet<String>,
}

/// Which of the plan's changed records (`keys`) moved since `stamp` only because an apply of this same plan wrote them; any other move refuses the resume.
pub fn finished(
    stamp: &PlanStamp,
    keys: &BTreeSet<String>,
    current: &Snapshot,
) -> Result<Finished, PlanMovedError> {
    let mut done = Finished::default();
    let mut moved = Vec::new();
    for key in keys {
        let planned = stamp.records.get(key);
        let stored = current.records.get(key);
        let same = match (planned, stored) {
            (None, None) => true,
            (Some(p), Some(s)) => p.version.token == s.version.token,
            _ => false,
        };
        if same {
            continue;
        }
        let own = stored.is_some_and(|s| {
            s.record()
                .is_ok_and(|r| r.writer.plan.as_deref() == Some(stamp.plan_sha256.as_str()))
        });
        match stored {
            Some(s) if own && !cut(Mechanism::Resume) => {
                done.addresses.insert(s.address().to_string());
            }
            _ => moved.push(MovedRecord {
                address: planned
                    .map(|p| p.address.clone())
                    .or_else(|| stored.map(|s| s.address().to_string()))
                    .unwrap_or_else(|| key.clone()),
                planned: planned.map(|p| p.version.clone()),
                stored: stored.map(|s| s.version.clone()),
            }),
        }
    }
    if moved.is_empty() {
        return Ok(done);
    }
    moved.sort_by(|a, b| a.address.cmp(&b.address));
    Err(PlanMovedError { moved })
}

/// How one change of the new plan differs from the approved plan's rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Difference {
    /// The new plan makes a change the approved plan does not make (or already made).
    NotApproved {
        /// The instance.
        address: String,
        /// What the new plan does to it.
        now: String,
    },
    /// The approved plan makes a change the new plan does not.
    Missing {
        /// The instance.
        address: String,
        /// What the approved plan does to it.
        approved: String,
    },
    /// Both change it, with other actions.
    Actions {
        /// The instance.
        address: String,
        /// What the approved plan does.
        approved: String,
        /// What the new plan does.
        now: String,
    },
    /// Both change it the same way, to other values.
    Values {
        /// The instance.
        address: String,
        /// The attributes whose planned values differ (names only, never values).
        attributes: Vec<String>,
    },
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::NotApproved { address, now } => write!(
                f,
                "{address}: the new plan would {now} it, the approved plan's rest does not"
            ),
            Difference::Missing { address, approved } => write!(
                f,
                "{address}: approved to {approved}, the new plan does not change it"
            ),
            Difference::Actions {
                address,
                approved,
                now,
            } => write!(
                f,
                "{address}: approved to {approved}, the new plan would {now} it"
            ),
            Difference::Values {
                address,
                attributes,
            } => write!(
                f,
                "{address}: planned values differ from the approved ones ({})",
                attributes.join(", ")
            ),
        }
    }
}

/// A resume refused: the new plan of the rest is not the approved plan's rest; nothing was applied.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub struct ResumeRefused {
    /// How many of the approved plan's changes the stopped apply had made.
    pub finished: usize,
    /// Every difference, by address.
    pub differences: Vec<Difference>,
}

impl fmt::Display for ResumeRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "The approved plan no longer matches the live system (ResumeRefusedError): an earlier apply of this plan made {} of its changes, and a new plan of the rest differs from what was approved in {}:",
            self.finished,
            self.differences.len()
        )?;
        for d in &self.differences {
            writeln!(f, "  - {d}")?;
        }
        write!(
            f,
            "Nothing more was applied; the records of what the earlier apply made are kept. Plan again and have the new plan approved."
        )
    }
}

/// A change's actions as the approval names them.
fn verb(actions: &Actions) -> String {
    match actions {
        Actions::NoChange => "leave".into(),
        Actions::Create => "create".into(),
        Actions::Update => "update".into(),
        Actions::Delete => "delete".into(),
        Actions::DeleteThenCreate => "replace (delete, then create)".into(),
        Actions::CreateThenDelete => "replace (create, then delete)".into(),
        Actions::Forget => "forget".into(),
        Actions::Other(list) => list.join(", "),
    }
}

/// A plan's managed changes that do something, by full address.
fn changes(plan: &Plan) -> BTreeMap<String, &ResourceChange> {
    plan.resource_changes
        .iter()
        .filter(|c| c.mode != Mode::Data && c.operation().is_some())
        .map(|c| (c.full_address(), c))
        .collect()
}

/// Whether `now` (with its unknowns `now_unknown`) is what `approved` allows: the same value, or anything where the approved plan left the value unknown until apply.
fn allowed(approved: &Value, approved_unknown: &Value, now: &Value, now_unknown: &Value) -> bool {
    if approved_unknown == &Value::Bool(true) {
        return true;
    }
    if now_unknown == &Value::Bool(true) {
        return false;
    }
    match (approved, now) {
        (Value::Object(a), Value::Object(n)) => {
            let keys: BTreeSet<&String> = a.keys().chain(n.keys()).collect();
            keys.into_iter().all(|k| {
                allowed(
                    a.get(k).unwrap_or(&Value::Null),
                    approved_unknown.get(k).unwrap_or(&Value::Null),
                    n.get(k).unwrap_or(&Value::Null),
                    now_unknown.get(k).unwrap_or(&Value::Null),
                )
            })
        }
        (Value::Array(a), Value::Array(n)) => {
            a.len() == n.len()
                && a.iter().zip(n).enumerate().all(|(i, (av, nv))| {
                    allowed(
                        av,
                        approved_unknown.get(i).unwrap_or(&Value::Null),
                        nv,
                        now_unknown.get(i).unwrap_or(&Value::Null),
                    )
                })
        }
        _ => approved == now,
    }
}

/// The top-level attributes whose new planned values the approved ones do not allow.
fn differing(approved: &ResourceChange, now: &ResourceChange) -> Vec<String> {
    let (a, n) = (&approved.change, &now.change);
    if allowed(&a.after, &a.after_unknown, &n.after, &n.after_unknown) {
        return Vec::new();
    }
    let (Value::Object(av), Value::Object(nv)) = (&a.after, &n.after) else {
        return vec!["(the whole object)".into()];
    };
    let keys: BTreeSet<&String> = av.keys().chain(nv.keys()).collect();
    keys.into_iter()
        .filter(|k| {
            !allowed(
                av.get(*k).unwrap_or(&Value::Null),
                a.after_unknown.get(*k).unwrap_or(&Value::Null),
                nv.get(*k).unwrap_or(&Value::Null),
                n.after_unknown.get(*k).unwrap_or(&Value::Null),
            )
        })
        .map(|k| k.to_string())
        .collect()
}

/// Check that `now`, a new plan made after an apply of `approved` stopped having made `done`, changes exactly the rest: the same addresses, actions and planned values (a value the approved plan left unknown may now be known).
pub fn compare(approved: &Plan, done: &Finished, now: &Plan) -> Result<(), ResumeRefused> {
    let rest: BTreeMap<String, &ResourceChange> = changes(approved)
        .into_iter()
        .filter(|(address, _)| !done.addresses.contains(address))
        .collect();
    let new = changes(now);
    let mut differences = Vec::new();
    for (address, a) in &rest {
        let Some(n) = new.get(address) else {
            differences.push(Difference::Missing {
                address: address.clone(),
                approved: verb(&a.change.actions),
            });
            continue;
        };
        if a.change.actions != n.change.actions || a.operation() != n.operation() {
            differences.push(Difference::Actions {
                address: address.clone(),
                approved: verb(&a.change.actions),
                now: verb(&n.change.actions),
            });
            continue;
        }
        let attributes = differing(a, n);
        if !attributes.is_empty() {
            differences.push(Difference::Values {
                address: address.clone(),
                attributes,
            });
        }
    }
    for (address, n) in &new {
        if !rest.contains_key(address) {
            differences.push(Difference::NotApproved {
                address: address.clone(),
                now: verb(&n.change.actions),
            });
        }
    }
    if differences.is_empty() || cut(Mechanism::Resume) {
        return Ok(());
    }
    Err(ResumeRefused {
        finished: done.addresses.len(),
        differences,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan(changes: Value) -> Plan {
        Plan::from_value(json!({"format_version": "1.2", "resource_changes": changes})).unwrap()
    }

    fn create(address: &str, after: Value, unknown: Value) -> Value {
        json!({"address": address, "mode": "managed", "type": "aws_ssm_parameter", "name": "p",
               "change": {"actions": ["create"], "before": null, "after": after, "after_unknown": unknown}})
    }

    #[test]
    fn the_rest_of_an_approved_plan_matches_and_known_values_fill_its_unknowns() {
        let approved = plan(json!([
            create("a.p1", json!({"name": "p1"}), json!({"arn": true})),
            create(
                "a.p2",
                json!({"name": "p2", "value": null}),
                json!({"arn": true, "value": true})
            ),
        ]));
        let done = Finished {
            addresses: BTreeSet::from(["a.p1".to_string()]),
        };
        let now = plan(json!([create(
            "a.p2",
            json!({"name": "p2", "value": "arn:1"}),
            json!({"arn": true})
        )]));
        assert_eq!(compare(&approved, &done, &now), Ok(()));
    }

    #[test]
    fn another_value_an_extra_change_and_a_missing_one_are_each_named() {
        let approved = plan(json!([
            create("a.p1", json!({"name": "p1"}), json!({})),
            create("a.p2", json!({"name": "p2"}), json!({})),
            create("a.p3", json!({"name": "p3"}), json!({})),
        ]));
        let done = Finished {
            addresses: BTreeSet::from(["a.p1".to_string()]),
        };
        let now = plan(json!([
            create("a.p1", json!({"name": "p1"}), json!({})),
            create("a.p2", json!({"name": "other"}), json!({})),
        ]));
        let refused = compare(&approved, &done, &now).unwrap_err();
        assert_eq!(
            refused.differences,
            vec![
                Difference::Values {
                    address: "a.p2".into(),
                    attributes: vec!["name".into()]
                },
                Difference::Missing {
                    address: "a.p3".into(),
                    approved: "create".into()
                },
                Difference::NotApproved {
                    address: "a.p1".into(),
                    now: "create".into()
                },
            ]
        );
        let text = refused.to_string();
        assert!(!text.contains("other"), "{text}");
    }

    #[test]
    fn a_known_value_the_new_plan_leaves_unknown_differs() {
        let approved = plan(json!([create("a.p", json!({"value": "x"}), json!({}))]));
        let now = plan(json!([create(
            "a.p",
            json!({"value": null}),
            json!({"value": true})
        )]));
        assert!(compare(&approved, &Finished::default(), &now).is_err());
    }
}
