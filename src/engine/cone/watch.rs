//! One cone plan's reads and changes as the provider door sees them: which reads its records answer, and which of those answers the cloud must confirm.
//!
//! A provider's read call names the resource type and the object's current state, not its
//! address, so a read is known by its type and the digest of its state: the record whose
//! attributes have that digest (none, or two: the provider reads it). The plan is made once:
//!
//! - a read is answered from its record, unless the record is too long unrefreshed, its
//!   object is deposed, the run already holds a fresh read of it, or it depends on an object
//!   whose plan changed (a dependent of a change is refreshed);
//! - when an object's plan is a change, or depends on one, that object and the dependencies
//!   it read from their records are read from the cloud ([`Watch::planned`]): the door
//!   compares each answer with the record ([`Watch::verified`]). One that differs has
//!   drifted, and the plan is made again with every object the provider read answered from
//!   that fresh read.
//!
//! Every decision here is pure: the door does the I/O.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use serde_json::Value;

use super::age::LastRefresh;
use super::named::{Named, target_names};
use crate::cut::{Mechanism, cut};
use crate::engine::digest::value_digest;
use crate::engine::record::RecordKind;
use crate::engine::session::Snapshot;

/// One resource instance object a record holds, as a cone plan knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Object {
    /// Its instance address (`ADDR (deposed KEY)` for a deposed one).
    address: String,
    /// The resources (or module calls) its record says it depends on.
    dependencies: Vec<String>,
    /// Why the provider reads it whatever the plan does, if it must.
    must_read: Option<MustRead>,
}

/// Why an object is read from the cloud whatever the plan changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MustRead {
    /// Its last refresh is older than the maximum age, or not known.
    Stale,
    /// It is a deposed object.
    Deposed,
}

/// Which object a type and state digest name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    One(usize),
    /// Two objects of one type with one state: no one address.
    Many,
}

/// What the door does with one resource read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Read {
    /// Answer it with the state and private data it carries: the object's record, unrefreshed.
    FromRecord(ObjectId),
    /// Answer it with the run's fresh read of the object.
    Fresh(ObjectId),
    /// Send it to the provider; the object it is for, when its state names one.
    Provider(Option<ObjectId>),
}

/// An object of one [`Watch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectId(usize);

/// What one cone plan's door saw: what its records answered, what the provider read, and what drifted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The objects read from the cloud (by the provider, or confirmed against their records), by address.
    pub refreshed: BTreeSet<String>,
    /// The objects whose cloud read differed from their record.
    pub drifted: BTreeSet<String>,
    /// How many objects were answered from their records and not read from the cloud.
    pub not_refreshed: usize,
}

/// The door's decisions for one cone plan.
#[derive(Debug, Default)]
pub struct Watch {
    objects: Vec<Object>,
    by_state: HashMap<(String, String), Slot>,
    /// The objects the run holds a fresh read of (an earlier round's), by address.
    fresh: BTreeSet<String>,
    /// Answered from their records in this plan.
    answered: BTreeSet<ObjectId>,
    /// The objects whose plan changed, as dependencies name them.
    changed: Named,
    /// Asked to be read from the cloud after their plan.
    confirming: BTreeSet<ObjectId>,
    refreshed: BTreeSet<ObjectId>,
    drifted: BTreeSet<ObjectId>,
}

impl Watch {
    /// The decisions for a plan over the resource records of `snapshot`: `last` says when each was last refreshed, those older than `max_age` at `now` (Unix seconds) are read from the cloud, and `fresh` names the objects the run read already.
    pub fn new(
        snapshot: &Snapshot,
        last: &LastRefresh,
        now: i64,
        max_age: Duration,
        fresh: BTreeSet<String>,
    ) -> Watch {
        let max_age = i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX);
        let mut watch = Watch {
            fresh,
            ..Watch::default()
        };
        for entry in snapshot.records.values() {
            if entry.kind() != RecordKind::Resource {
                continue;
            }
            let Ok(record) = entry.record() else {
                continue;
            };
            let (Some(meta), Some(instance)) = (record.resource(), record.instance()) else {
                continue;
            };
            if meta.mode != "managed" {
                continue;
            }
            let address = record.address().to_string();
            let deposed = instance.get("deposed").and_then(Value::as_str);
            let dependencies = instance
                .get("dependencies")
                .and_then(Value::as_array)
                .map(|d| {
                    d.iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            let stale = !cut(Mechanism::ConeAge)
                && last
                    .get(&address)
                    .is_none_or(|t| now.saturating_sub(*t) > max_age);
            let must_read = match (deposed, stale) {
                (Some(_), _) => Some(MustRead::Deposed),
                (None, true) => Some(MustRead::Stale),
                (None, false) => None,
            };
            let address = match deposed {
                Some(key) => format!("{address} (deposed {key})"),
                None => address,
            };
            let attributes = instance.get("attributes").unwrap_or(&Value::Null);
            watch.add(
                meta.type_name.clone(),
                attributes,
                Object {
                    address,
                    dependencies,
                    must_read,
                },
            );
        }
        watch
    }

    fn add(&mut self, type_name: String, attributes: &Value, object: Object) {
        let id = self.objects.len();
        self.objects.push(object);
        let key = (type_name, value_digest(attributes));
        let slot = match self.by_state.get(&key) {
            None => Slot::One(id),
            Some(_) => Slot::Many,
        };
        self.by_state.insert(key, slot);
    }

    /// `state`, as the cloud gave it, names `id` too (unless it names another object already).
    pub fn alias(&mut self, type_name: &str, state: &Value, id: ObjectId) {
        self.by_state
            .entry((type_name.to_string(), value_digest(state)))
            .or_insert(Slot::One(id.0));
    }

    /// The object a `type_name` state names: the one record with those attributes (JSON, as the state holds them).
    pub fn object(&self, type_name: &str, state: &Value) -> Option<ObjectId> {
        match self
            .by_state
            .get(&(type_name.to_string(), value_digest(state)))
        {
            Some(Slot::One(id)) => Some(ObjectId(*id)),
            Some(Slot::Many) | None => None,
        }
    }

    /// The address of `id`.
    pub fn address(&self, id: ObjectId) -> &str {
        self.objects.get(id.0).map_or("", |o| o.address.as_str())
    }

    fn depends_on_a_change(&self, id: ObjectId) -> bool {
        self.objects
            .get(id.0)
            .is_some_and(|o| o.dependencies.iter().any(|d| self.changed.names(d)))
    }

    /// What to do with a read of a `type_name` object whose current state is `state`.
    pub fn read(&mut self, type_name: &str, state: &Value) -> Read {
        let Some(id) = self.object(type_name, state) else {
            return Read::Provider(None);
        };
        let read = if self.fresh.contains(self.address(id)) {
            Read::Fresh(id)
        } else if self.objects[id.0].must_read.is_some() || self.depends_on_a_change(id) {
            Read::Provider(Some(id))
        } else {
            Read::FromRecord(id)
        };
        match read {
            Read::FromRecord(id) => {
                self.answered.insert(id);
            }
            Read::Fresh(id) | Read::Provider(Some(id)) => {
                self.refreshed.insert(id);
            }
            Read::Provider(None) => {}
        }
        read
    }

    /// A `type_name` object's plan from `prior` (its state as the read answered it) was made; `changed` when it is not a no-op. The objects to read from the cloud now, to confirm their records.
    pub fn planned(&mut self, type_name: &str, prior: &Value, changed: bool) -> Vec<ObjectId> {
        let Some(id) = self.object(type_name, prior) else {
            return Vec::new();
        };
        if cut(Mechanism::ConeChanges) {
            return Vec::new();
        }
        let answered = self.answered.contains(&id);
        if !changed {
            // A dependent of a change read from its record (terraform read it first): confirm it alone.
            return if answered && self.depends_on_a_change(id) && self.confirming.insert(id) {
                vec![id]
            } else {
                Vec::new()
            };
        }
        let address = self.address(id).to_string();
        self.changed.add(&address);
        let mut confirm: Vec<ObjectId> = Vec::new();
        if answered && self.confirming.insert(id) {
            confirm.push(id);
        }
        let dependencies = self.objects[id.0].dependencies.clone();
        let read_by_it: Vec<ObjectId> = self
            .answered
            .iter()
            .copied()
            .filter(|o| {
                dependencies
                    .iter()
                    .any(|d| target_names(d, self.address(*o)))
            })
            .collect();
        for o in read_by_it {
            if self.confirming.insert(o) {
                confirm.push(o);
            }
        }
        confirm
    }

    /// The cloud's read of `id` gave its record's state (`same`), or another (or none could be made).
    pub fn verified(&mut self, id: ObjectId, same: bool) {
        self.refreshed.insert(id);
        if !same {
            self.drifted.insert(id);
        }
    }

    /// What the plan's reads came to.
    pub fn outcome(&self) -> Outcome {
        let names = |ids: &BTreeSet<ObjectId>| -> BTreeSet<String> {
            ids.iter().map(|id| self.address(*id).to_string()).collect()
        };
        Outcome {
            refreshed: names(&self.refreshed),
            drifted: names(&self.drifted),
            not_refreshed: self.answered.difference(&self.refreshed).count(),
        }
    }
}

/// Whether the cloud's read `cloud` gives the record's state `record`: equal, where a null and an empty collection count as one (providers read back an unset map as empty).
pub fn same_state(cloud: &Value, record: &Value) -> bool {
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    };
    match (cloud, record) {
        (Value::Object(a), Value::Object(b)) => {
            a.keys()
                .chain(b.keys())
                .all(|k| match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => same_state(x, y),
                    (Some(x), None) | (None, Some(x)) => x.is_null(),
                    (None, None) => true,
                })
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_state(x, y))
        }
        (a, b) if empty(a) && empty(b) => true,
        (a, b) => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DAY: Duration = Duration::from_secs(86_400);
    const NOW: i64 = 1_000_000;

    /// p[0..2], d depending on resource p, e standing alone, and q (deposed): objects as records hold them.
    fn watch(last: &LastRefresh, fresh: &[&str]) -> Watch {
        let mut w = Watch {
            fresh: fresh.iter().map(|s| s.to_string()).collect(),
            ..Watch::default()
        };
        let stale = |a: &str| {
            last.get(a)
                .is_none_or(|t| NOW - t > 86_400)
                .then_some(MustRead::Stale)
        };
        for (address, deps) in [
            ("aws_ssm_parameter.p[0]", vec![]),
            ("aws_ssm_parameter.p[1]", vec![]),
            ("aws_ssm_parameter.p[2]", vec![]),
            (
                "aws_ssm_parameter.d",
                vec!["aws_ssm_parameter.p".to_string()],
            ),
            ("aws_ssm_parameter.e", vec![]),
        ] {
            w.add(
                "aws_ssm_parameter".into(),
                &json!({"name": address}),
                Object {
                    address: address.into(),
                    dependencies: deps,
                    must_read: stale(address),
                },
            );
        }
        w.add(
            "aws_ssm_parameter".into(),
            &json!({"name": "q"}),
            Object {
                address: "aws_ssm_parameter.q (deposed 0a)".into(),
                dependencies: vec![],
                must_read: Some(MustRead::Deposed),
            },
        );
        w
    }

    fn recent() -> LastRefresh {
        ["p[0]", "p[1]", "p[2]", "d", "e"]
            .iter()
            .map(|n| (format!("aws_ssm_parameter.{n}"), NOW - 60))
            .collect()
    }

    fn state(address: &str) -> Value {
        json!({"name": address})
    }

    fn read(w: &mut Watch, address: &str) -> Read {
        w.read("aws_ssm_parameter", &state(address))
    }

    fn names(w: &Watch, ids: &[ObjectId]) -> Vec<String> {
        ids.iter().map(|id| w.address(*id).to_string()).collect()
    }

    #[test]
    fn with_no_change_every_recent_record_answers() {
        let mut w = watch(&recent(), &[]);
        for p in ["p[0]", "p[1]", "p[2]", "d", "e"] {
            let a = format!("aws_ssm_parameter.{p}");
            assert!(matches!(read(&mut w, &a), Read::FromRecord(_)), "{a}");
            assert!(w.planned("aws_ssm_parameter", &state(&a), false).is_empty());
        }
        // A deposed object, a state no record has, one of another type: the provider.
        assert!(matches!(
            w.read("aws_ssm_parameter", &json!({"name": "q"})),
            Read::Provider(Some(_))
        ));
        assert_eq!(
            w.read("aws_ssm_parameter", &json!({"name": "new"})),
            Read::Provider(None)
        );
        assert_eq!(
            w.read("aws_other", &state("aws_ssm_parameter.e")),
            Read::Provider(None)
        );
        let outcome = w.outcome();
        assert_eq!(outcome.not_refreshed, 5);
        assert!(outcome.drifted.is_empty());
    }

    #[test]
    fn a_change_is_confirmed_and_its_dependents_are_read() {
        let mut w = watch(&recent(), &[]);
        for p in ["p[0]", "p[1]", "p[2]"] {
            read(&mut w, &format!("aws_ssm_parameter.{p}"));
        }
        // p[1]'s plan changes: p[1] is read from the cloud to confirm its record.
        let confirm = w.planned("aws_ssm_parameter", &state("aws_ssm_parameter.p[1]"), true);
        assert_eq!(names(&w, &confirm), ["aws_ssm_parameter.p[1]"]);
        // Asked once only.
        assert!(
            w.planned("aws_ssm_parameter", &state("aws_ssm_parameter.p[1]"), true)
                .is_empty()
        );
        // d depends on resource p: the provider reads it; e stands alone.
        assert!(matches!(
            read(&mut w, "aws_ssm_parameter.d"),
            Read::Provider(Some(_))
        ));
        assert!(matches!(
            read(&mut w, "aws_ssm_parameter.e"),
            Read::FromRecord(_)
        ));
        w.verified(confirm[0], false);
        let outcome = w.outcome();
        assert_eq!(
            outcome.drifted,
            ["aws_ssm_parameter.p[1]".to_string()].into()
        );
        assert_eq!(
            outcome.refreshed,
            ["aws_ssm_parameter.d", "aws_ssm_parameter.p[1]"]
                .map(String::from)
                .into()
        );
        // p[0], p[2] and e: answered and not refreshed.
        assert_eq!(outcome.not_refreshed, 3);
    }

    #[test]
    fn a_changed_dependent_confirms_what_it_read() {
        let mut w = watch(&recent(), &[]);
        for a in ["p[0]", "p[1]", "p[2]", "d"] {
            read(&mut w, &format!("aws_ssm_parameter.{a}"));
        }
        // d changes: d and every p it read from the records.
        let confirm = w.planned("aws_ssm_parameter", &state("aws_ssm_parameter.d"), true);
        assert_eq!(
            names(&w, &confirm),
            [
                "aws_ssm_parameter.d",
                "aws_ssm_parameter.p[0]",
                "aws_ssm_parameter.p[1]",
                "aws_ssm_parameter.p[2]"
            ]
        );
        for id in confirm {
            w.verified(id, true);
        }
        assert!(w.outcome().drifted.is_empty());
        assert_eq!(w.outcome().not_refreshed, 0);
    }

    #[test]
    fn old_records_and_fresh_reads_are_not_answered_from_records() {
        let mut last = recent();
        last.remove("aws_ssm_parameter.p[0]");
        last.insert("aws_ssm_parameter.e".into(), NOW - 86_401);
        let mut w = watch(&last, &["aws_ssm_parameter.p[2]"]);
        assert!(matches!(
            read(&mut w, "aws_ssm_parameter.p[0]"),
            Read::Provider(Some(_))
        ));
        assert!(matches!(
            read(&mut w, "aws_ssm_parameter.e"),
            Read::Provider(Some(_))
        ));
        assert!(matches!(
            read(&mut w, "aws_ssm_parameter.p[2]"),
            Read::Fresh(_)
        ));
        assert!(matches!(
            read(&mut w, "aws_ssm_parameter.p[1]"),
            Read::FromRecord(_)
        ));
        // A changed object the provider read needs no confirming.
        assert!(
            w.planned("aws_ssm_parameter", &state("aws_ssm_parameter.e"), true)
                .is_empty()
        );
        assert_eq!(w.outcome().refreshed.len(), 3);
        let _ = DAY;
    }

    #[test]
    fn an_unset_map_read_back_empty_is_the_same_state() {
        let record = json!({"tags": null, "name": "a", "list": [], "n": 1});
        assert!(same_state(
            &json!({"tags": {}, "name": "a", "list": null, "n": 1}),
            &record
        ));
        assert!(!same_state(
            &json!({"tags": {"k": "v"}, "name": "a", "list": [], "n": 1}),
            &record
        ));
        assert!(!same_state(
            &json!({"tags": null, "name": "b", "list": [], "n": 1}),
            &record
        ));
        assert!(!same_state(
            &json!({"tags": null, "name": "a", "list": [], "n": 2}),
            &record
        ));
        assert!(!same_state(&json!(""), &json!(null)));
    }

    #[test]
    fn two_objects_with_one_state_go_to_the_provider() {
        let mut w = Watch::default();
        for a in ["terraform_data.a", "terraform_data.b"] {
            w.add(
                "terraform_data".into(),
                &json!({"input": "same"}),
                Object {
                    address: a.into(),
                    dependencies: vec![],
                    must_read: None,
                },
            );
        }
        assert_eq!(
            w.read("terraform_data", &json!({"input": "same"})),
            Read::Provider(None)
        );
        // Key order does not matter.
        let mut w = watch(&recent(), &[]);
        assert!(matches!(
            w.read("aws_ssm_parameter", &json!({"name": "aws_ssm_parameter.e"})),
            Read::FromRecord(_)
        ));
    }
}
