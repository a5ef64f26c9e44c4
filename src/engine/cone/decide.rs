//! The cone of a plan made without a refresh: what changes, what depends on it, what it reads, and what is too long unrefreshed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

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

/// Whether a resource in `resources` (resource addresses, sorted) is named by the dependency `dep` (a resource, or a `module.NAME` call).
fn names_any(dep: &str, resources: &BTreeSet<String>) -> bool {
    if resources.contains(dep) {
        return true;
    }
    let prefix = format!("{dep}.");
    resources
        .range(prefix.clone()..)
        .next()
        .is_some_and(|r| r.starts_with(&prefix))
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
        // The resources whose plan is not a no-op.
        let mut resources: BTreeSet<String> = plan
            .resource_changes
            .iter()
            .filter(|c| c.mode == Mode::Managed && c.operation().is_some())
            .map(|c| resource_of(&c.address))
            .collect();
        // Each resource's dependencies: its configuration's, and its instances' in the state.
        let mut deps = plan.resource_dependencies();
        for (address, on) in plan.state_dependencies() {
            deps.entry(resource_of(&address)).or_default().extend(on);
        }
        // Their dependents, to a fixed point: a changed value flows down every reference.
        loop {
            let more: Vec<String> = deps
                .iter()
                .filter(|(r, on)| {
                    !resources.contains(*r) && on.iter().any(|d| names_any(d, &resources))
                })
                .map(|(r, _)| r.clone())
                .collect();
            if more.is_empty() {
                break;
            }
            resources.extend(more);
        }
        // The dependencies each of them reads.
        let read: BTreeSet<String> = resources
            .iter()
            .filter_map(|r| deps.get(r))
            .flatten()
            .cloned()
            .collect();
        let mut cone = Cone::default();
        let max_age = i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX);
        for object in objects {
            let resource = resource_of(&object);
            let changed =
                resources.contains(&resource) || read.iter().any(|d| names(d, &object));
            let stale = !changed
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
                let actions = if changed.contains(n) { json!(["update"]) } else { json!(["no-op"]) };
                json!({"address": format!("aws_ssm_parameter.{n}"), "mode": "managed",
                       "type": "aws_ssm_parameter", "change": {"actions": actions}})
            })
            .chain([json!({"address": "data.aws_region.r", "mode": "data", "type": "aws_region",
                            "change": {"actions": ["read"]}})])
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
        names.iter().map(|n| format!("aws_ssm_parameter.{n}")).collect()
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

    #[test]
    fn module_calls_and_instances_name_what_they_hold() {
        let resources: BTreeSet<String> = ["module.m.aws_x.y".to_string()].into();
        assert!(names_any("module.m", &resources));
        assert!(names_any("module.m.aws_x.y", &resources));
        assert!(!names_any("module.mm", &resources));
        assert!(!names_any("aws_x.y", &resources));
        assert_eq!(
            object_address("aws_x.y[0]", Some("0a1b")),
            "aws_x.y[0] (deposed 0a1b)"
        );
    }
}
