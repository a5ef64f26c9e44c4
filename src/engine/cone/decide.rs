//! The cone of a plan made without a refresh: what changes, what depends on it, what it reads, and what is too long unrefreshed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::cut::{Mechanism, cut};
use crate::engine::address::{names, resource_of};
use crate::engine::plan::{Mode, Plan};

/// When each record was last refreshed from the cloud (Unix seconds), by instance address.
pub type LastRefresh = BTreeMap<String, i64>;

/// The managed resource instance objects of a plan's prior state, split into the cone and the rest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cone {
    /// The objects refreshed from the cloud, by instance address (`ADDR (deposed KEY)` for a deposed one).
    pub inside: BTreeSet<String>,
    /// The objects answered from their records.
    pub outside: BTreeSet<String>,
    /// How many are inside for their change, or a change's dependents or dependencies.
    pub changed: usize,
    /// How many are inside only because their last refresh is older than the maximum age (or not known).
    pub stale: usize,
}

/// A prior state object's address as the cone names it.
fn object_address(address: &str, deposed: Option<&str>) -> String {
    match deposed {
        Some(key) => format!("{address} (deposed {key})"),
        None => address.to_string(),
    }
}

/// Whether the dependency target `target` (an instance, a resource or a `module.NAME` call) names the object `object`.
fn target_names(target: &str, object: &str) -> bool {
    let instance = object.split(" (deposed ").next().unwrap_or(object);
    instance == target || names(target, object)
}

/// The objects and resources of the cone so far, as dependency targets meet them.
#[derive(Default)]
struct Named {
    /// Objects and resources, by address.
    exact: BTreeSet<String>,
    /// The resources they belong to, and every module call around them (`module.m`).
    around: BTreeSet<String>,
}

impl Named {
    /// Add an object (`aws_x.y[0]`) or a whole resource (`aws_x.y`).
    fn add(&mut self, address: &str) {
        let instance = address.split(" (deposed ").next().unwrap_or(address);
        self.exact.insert(instance.to_string());
        let resource = resource_of(instance);
        let mut prefix = String::new();
        for part in resource.split('.') {
            if !prefix.is_empty() {
                prefix.push('.');
            }
            prefix.push_str(part);
            self.around.insert(prefix.clone());
        }
    }

    /// Whether `target` names something added: that object, or a resource or module call holding one.
    fn names(&self, target: &str) -> bool {
        self.exact.contains(target) || self.around.contains(target)
    }
}

impl Cone {
    /// The cone of `plan`, a plan made without a refresh: its changes, the resources whose plan depends on them (transitively) and their direct dependencies, and every object whose last refresh in `last` is more than `max_age` before `now` (or not known).
    pub fn of(plan: &Plan, last: &LastRefresh, now: i64, max_age: Duration) -> Cone {
        let mut objects = Vec::new();
        if let Some(root) = plan.prior_root() {
            root.walk(&mut |r| {
                if r.mode == Mode::Managed
                    && let Some(address) = &r.address
                {
                    objects.push(object_address(address, r.deposed_key.as_deref()));
                }
            });
        }
        // The objects whose plan is not a no-op.
        let changed: BTreeSet<String> = plan
            .resource_changes
            .iter()
            .filter(|c| c.mode == Mode::Managed && c.operation().is_some())
            .filter(|_| !cut(Mechanism::ConeChanges))
            .map(|c| c.full_address())
            .collect();
        // What each resource's configuration depends on: instances by key, else resources.
        let targets = plan.reference_targets();
        let mut named = Named::default();
        for object in &changed {
            named.add(object);
        }
        // Their dependents, to a fixed point: a changed value flows down every reference.
        let mut dependents: BTreeSet<&str> = BTreeSet::new();
        loop {
            let more: Vec<&str> = targets
                .iter()
                .filter(|(r, on)| {
                    !dependents.contains(r.as_str()) && on.iter().any(|t| named.names(t))
                })
                .map(|(r, _)| r.as_str())
                .collect();
            if more.is_empty() {
                break;
            }
            for r in more {
                named.add(r);
                dependents.insert(r);
            }
        }
        // The dependencies each of them reads: the changed objects' resources' and the dependents'.
        let read: BTreeSet<&String> = changed
            .iter()
            .map(|o| resource_of(o))
            .collect::<BTreeSet<String>>()
            .iter()
            .filter_map(|r| targets.get(r))
            .chain(dependents.iter().filter_map(|r| targets.get(*r)))
            .flatten()
            .collect();
        let mut cone = Cone::default();
        let max_age = i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX);
        for object in objects {
            let resource = resource_of(&object);
            let changed = changed.contains(&object)
                || dependents.contains(resource.as_str())
                || read.iter().any(|t| target_names(t, &object));
            let stale = !changed
                && !cut(Mechanism::ConeAge)
                && last
                    .get(&object)
                    .is_none_or(|t| now.saturating_sub(*t) > max_age);
            if changed {
                cone.changed += 1;
            }
            if stale {
                cone.stale += 1;
            }
            if changed || stale {
                cone.inside.insert(object);
            } else {
                cone.outside.insert(object);
            }
        }
        cone
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DAY: Duration = Duration::from_secs(86_400);

    fn param(name: &str, depends_on: &[&str]) -> serde_json::Value {
        json!({"address": format!("aws_ssm_parameter.{name}"), "mode": "managed", "type": "aws_ssm_parameter",
               "values": {"name": name}, "depends_on": depends_on})
    }

    /// Four parameters: `b` reads `a`, `c` reads `b`, `d` stands alone; and a data source.
    fn plan(changed: &[&str]) -> Plan {
        let changes: Vec<serde_json::Value> = ["a", "b", "c", "d"]
            .iter()
            .map(|n| {
                let actions = if changed.contains(n) {
                    json!(["update"])
                } else {
                    json!(["no-op"])
                };
                json!({"address": format!("aws_ssm_parameter.{n}"), "mode": "managed",
                       "type": "aws_ssm_parameter", "change": {"actions": actions}})
            })
            .chain([
                json!({"address": "data.aws_region.r", "mode": "data", "type": "aws_region",
                            "change": {"actions": ["read"]}}),
            ])
            .collect();
        let refs = |r: &str| json!({"value": {"references": [format!("{r}.value"), r]}});
        Plan::from_value(json!({
            "resource_changes": changes,
            "prior_state": {"values": {"root_module": {"resources": [
                param("a", &[]), param("b", &["aws_ssm_parameter.a"]), param("c", &[]), param("d", &[]),
                {"address": "data.aws_region.r", "mode": "data", "type": "aws_region", "values": {}}
            ]}}},
            "configuration": {"root_module": {"resources": [
                {"address": "aws_ssm_parameter.a", "expressions": {}},
                {"address": "aws_ssm_parameter.b", "expressions": refs("aws_ssm_parameter.a")},
                {"address": "aws_ssm_parameter.c", "expressions": refs("aws_ssm_parameter.b")},
                {"address": "aws_ssm_parameter.d", "expressions": {"value": {"references": ["data.aws_region.r"]}}}
            ]}}
        }))
        .unwrap()
    }

    fn fresh(now: i64) -> LastRefresh {
        ["a", "b", "c", "d"]
            .iter()
            .map(|n| (format!("aws_ssm_parameter.{n}"), now - 60))
            .collect()
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names
            .iter()
            .map(|n| format!("aws_ssm_parameter.{n}"))
            .collect()
    }

    #[test]
    fn nothing_changed_nothing_stale_is_an_empty_cone() {
        let cone = Cone::of(&plan(&[]), &fresh(1_000_000), 1_000_000, DAY);
        assert!(cone.inside.is_empty());
        assert_eq!(cone.outside, set(&["a", "b", "c", "d"]));
        // Data sources are never in it: the door never answers them.
        assert!(!cone.outside.iter().any(|a| a.starts_with("data.")));
    }

    #[test]
    fn a_change_brings_its_dependents_and_their_dependencies() {
        // b changes: c reads b (a dependent), b reads a (a dependency); d stands apart.
        let cone = Cone::of(&plan(&["b"]), &fresh(1_000_000), 1_000_000, DAY);
        assert_eq!(cone.inside, set(&["a", "b", "c"]));
        assert_eq!(cone.outside, set(&["d"]));
        assert_eq!((cone.changed, cone.stale), (3, 0));
        // a changes: b and c follow it down, transitively.
        let cone = Cone::of(&plan(&["a"]), &fresh(1_000_000), 1_000_000, DAY);
        assert_eq!(cone.inside, set(&["a", "b", "c"]));
        // c changes: it reads b, and b's own dependency is not read by c's plan.
        let cone = Cone::of(&plan(&["c"]), &fresh(1_000_000), 1_000_000, DAY);
        assert_eq!(cone.inside, set(&["b", "c"]));
    }

    #[test]
    fn an_old_or_unknown_refresh_brings_a_record_back() {
        let now = 1_000_000;
        let mut last = fresh(now);
        last.insert("aws_ssm_parameter.d".into(), now - 86_401);
        last.remove("aws_ssm_parameter.a");
        let cone = Cone::of(&plan(&[]), &last, now, DAY);
        assert_eq!(cone.inside, set(&["a", "d"]));
        assert_eq!((cone.changed, cone.stale), (0, 2));
        // Exactly the maximum age is still young enough.
        last.insert("aws_ssm_parameter.d".into(), now - 86_400);
        last.insert("aws_ssm_parameter.a".into(), now);
        assert!(Cone::of(&plan(&[]), &last, now, DAY).inside.is_empty());
    }

    /// p[0..3] of one resource, and d reading p[0] by its key.
    fn counted(changed: &[&str]) -> Plan {
        let addresses = [
            "aws_ssm_parameter.p[0]",
            "aws_ssm_parameter.p[1]",
            "aws_ssm_parameter.p[2]",
            "aws_ssm_parameter.d",
        ];
        let changes: Vec<serde_json::Value> = addresses
            .iter()
            .map(|a| {
                let actions = if changed.contains(a) { json!(["update"]) } else { json!(["no-op"]) };
                json!({"address": a, "mode": "managed", "type": "aws_ssm_parameter", "change": {"actions": actions}})
            })
            .collect();
        let prior: Vec<serde_json::Value> = addresses
            .iter()
            .map(|a| json!({"address": a, "mode": "managed", "type": "aws_ssm_parameter", "values": {},
                            "depends_on": if a.ends_with(".d") { json!(["aws_ssm_parameter.p"]) } else { json!([]) }}))
            .collect();
        Plan::from_value(json!({
            "resource_changes": changes,
            "prior_state": {"values": {"root_module": {"resources": prior}}},
            "configuration": {"root_module": {"resources": [
                {"address": "aws_ssm_parameter.p", "expressions": {"value": {"references": ["var.values"]}}},
                {"address": "aws_ssm_parameter.d", "expressions": {"value": {"references":
                    ["aws_ssm_parameter.p[0].insecure_value", "aws_ssm_parameter.p[0]", "aws_ssm_parameter.p"]}}}
            ]}}
        }))
        .unwrap()
    }

    #[test]
    fn instances_of_one_resource_stand_apart() {
        let now = 1_000_000;
        let last: LastRefresh = ["p[0]", "p[1]", "p[2]", "d"]
            .iter()
            .map(|n| (format!("aws_ssm_parameter.{n}"), now))
            .collect();
        // p[1] changes: no other instance of p, and d reads only p[0].
        let cone = Cone::of(&counted(&["aws_ssm_parameter.p[1]"]), &last, now, DAY);
        assert_eq!(cone.inside, ["aws_ssm_parameter.p[1]".to_string()].into());
        // p[0] changes: d reads it by key, so d follows.
        let cone = Cone::of(&counted(&["aws_ssm_parameter.p[0]"]), &last, now, DAY);
        assert_eq!(cone.inside, set(&["d", "p[0]"]));
        // d changes: it reads p[0], not its siblings.
        let cone = Cone::of(&counted(&["aws_ssm_parameter.d"]), &last, now, DAY);
        assert_eq!(cone.inside, set(&["d", "p[0]"]));
    }

    #[test]
    fn module_calls_and_instances_name_what_they_hold() {
        let mut named = Named::default();
        named.add("module.m.aws_x.y[0]");
        assert!(named.names("module.m"));
        assert!(named.names("module.m.aws_x.y"));
        assert!(named.names("module.m.aws_x.y[0]"));
        assert!(!named.names("module.m.aws_x.y[1]"));
        assert!(!named.names("module.mm"));
        assert!(!named.names("aws_x.y"));
        assert!(target_names("aws_x.y[0]", "aws_x.y[0] (deposed 0a)"));
        assert!(target_names("aws_x.y", "aws_x.y[1]"));
        assert!(!target_names("aws_x.y[0]", "aws_x.y[1]"));
        assert_eq!(
            object_address("aws_x.y[0]", Some("0a1b")),
            "aws_x.y[0] (deposed 0a1b)"
        );
    }
}
