//! Saved plans stamped per record: what a plan read, and the check that refuses it only when its own changes moved.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cut::{Mechanism, cut};
use crate::engine::address::resource_of;
use crate::engine::claims::Wanted;
use crate::engine::digest::sha256_hex;
use crate::engine::layout::Layout;
use crate::engine::operation::Operation;
use crate::engine::session::{BaseRef, Pin, Snapshot};
use crate::store::Version;

/// Format tag of a stamp file.
pub const STAMP_FORMAT: &str = "choudoufu-live/plan-stamp/v1";
/// What a stamp file's name adds to its plan file's name.
pub const STAMP_SUFFIX: &str = ".live-stamp";

/// The record versions a saved plan read (versions and content digests, never attribute values).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStamp {
    /// Always [`STAMP_FORMAT`].
    pub format: String,
    /// The estate the plan read.
    pub estate: String,
    /// The record store the plan read, e.g. `s3://bucket`.
    pub store: String,
    /// SHA-256 of the plan file the stamp belongs to.
    pub plan_sha256: String,
    /// The lineage the plan saw.
    pub lineage: String,
    /// The serial the plan saw.
    pub serial: u64,
    /// Every record the plan read, by store key.
    pub records: BTreeMap<String, BaseRef>,
    /// Where the live markers of the plan's creates are listed before it is applied: the provider configurations it was planned with, reduced to where to list (no credentials).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marker_listings: Vec<serde_json::Value>,
}

/// A saved plan with no valid stamp; nothing was applied or written.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "The approved plan no longer matches the live system (UnstampedPlanError): {reason}. A saved plan is applied only with the stamp that `choudoufu-live run -- terraform plan -out=FILE` writes beside it (FILE{STAMP_SUFFIX}). Nothing was applied and nothing was written; plan again through choudoufu-live run."
)]
pub struct UnstampedPlanError {
    /// What is wrong with the stamp.
    pub reason: String,
}

/// One of a plan's changes whose record moved since the plan read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MovedRecord {
    /// The address.
    pub address: String,
    /// The version the plan read (none: no record).
    pub planned: Option<Version>,
    /// The version the store has now (none: no record).
    pub stored: Option<Version>,
}

impl fmt::Display for MovedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<Version>| {
            v.as_ref()
                .map_or("no record".to_string(), |v| v.to_string())
        };
        let what = match (&self.planned, &self.stored) {
            (None, Some(_)) => "appeared",
            (Some(_), None) => "vanished",
            _ => "changed",
        };
        write!(
            f,
            "{} {what}: planned against {}, store has {}",
            self.address,
            show(&self.planned),
            show(&self.stored)
        )
    }
}

/// A saved plan one of whose own changes' records moved since it was made; nothing was applied.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub struct PlanMovedError {
    /// Every moved record among the plan's changes.
    pub moved: Vec<MovedRecord>,
}

impl fmt::Display for PlanMovedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "The approved plan no longer matches the live system (PlanMovedError): {} of its changes moved since the plan was made:",
            self.moved.len()
        )?;
        for m in &self.moved {
            writeln!(f, "  - {m}")?;
        }
        write!(
            f,
            "Nothing was applied and nothing was written. Plan again: the new plan reads what the other run wrote."
        )
    }
}

/// Why a saved plan is refused.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum PlanRefused {
    /// No valid stamp.
    #[error(transparent)]
    Unstamped(#[from] UnstampedPlanError),
    /// One of its changes moved.
    #[error(transparent)]
    Moved(#[from] PlanMovedError),
}

/// The stamp file beside a plan file.
pub fn stamp_path(plan: &Path) -> PathBuf {
    let mut name = plan.as_os_str().to_os_string();
    name.push(STAMP_SUFFIX);
    PathBuf::from(name)
}

impl PlanStamp {
    /// A stamp of what a session served: its write base and the lineage and serial it showed.
    pub fn new(
        layout: &Layout,
        store: &str,
        plan_bytes: &[u8],
        served: (String, u64),
        records: BTreeMap<String, BaseRef>,
    ) -> Self {
        PlanStamp {
            format: STAMP_FORMAT.into(),
            estate: layout.estate().to_string(),
            store: store.to_string(),
            plan_sha256: sha256_hex(plan_bytes),
            lineage: served.0,
            serial: served.1,
            records,
            marker_listings: Vec::new(),
        }
    }

    /// Write the stamp beside `plan`.
    pub fn save(&self, plan: &Path) -> std::io::Result<PathBuf> {
        let path = stamp_path(plan);
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&path, bytes)?;
        Ok(path)
    }

    /// Read and check the stamp of `plan` for `layout` in `store`.
    pub fn load(
        plan: &Path,
        layout: &Layout,
        store: &str,
    ) -> Result<PlanStamp, UnstampedPlanError> {
        let path = stamp_path(plan);
        if cut(Mechanism::StampCheck) {
            if let Some(stamp) = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
            {
                return Ok(stamp);
            }
            return Ok(PlanStamp {
                format: STAMP_FORMAT.into(),
                estate: layout.estate().to_string(),
                store: store.to_string(),
                plan_sha256: String::new(),
                lineage: String::new(),
                serial: 0,
                records: BTreeMap::new(),
                marker_listings: Vec::new(),
            });
        }
        let bytes = std::fs::read(&path).map_err(|e| UnstampedPlanError {
            reason: format!(
                "the plan {} has no stamp ({}: {e})",
                plan.display(),
                path.display()
            ),
        })?;
        let stamp: PlanStamp = serde_json::from_slice(&bytes).map_err(|e| UnstampedPlanError {
            reason: format!("the stamp {} is unreadable: {e}", path.display()),
        })?;
        if stamp.format != STAMP_FORMAT {
            return Err(UnstampedPlanError {
                reason: format!(
                    "the stamp {} has unknown format {:?}",
                    path.display(),
                    stamp.format
                ),
            });
        }
        if stamp.estate != layout.estate().as_str() || stamp.store != store {
            return Err(UnstampedPlanError {
                reason: format!(
                    "the stamp is for estate {:?} in {}, not estate {:?} in {store}",
                    stamp.estate,
                    stamp.store,
                    layout.estate().as_str()
                ),
            });
        }
        let plan_bytes = std::fs::read(plan).map_err(|e| UnstampedPlanError {
            reason: format!("cannot read the plan {}: {e}", plan.display()),
        })?;
        if sha256_hex(&plan_bytes) != stamp.plan_sha256 {
            return Err(UnstampedPlanError {
                reason: format!("the stamp {} belongs to another plan file", path.display()),
            });
        }
        Ok(stamp)
    }

    /// Compare the plan's own changes (record keys) with the store now; pin the plan's view when none moved.
    pub fn check(
        &self,
        changes: &BTreeSet<String>,
        current: &Snapshot,
    ) -> Result<Pin, PlanMovedError> {
        let mut moved = Vec::new();
        for key in changes {
            let planned = self.records.get(key);
            let stored = current.records.get(key);
            let same = match (planned, stored) {
                (None, None) => true,
                (Some(p), Some(s)) => p.version.token == s.version.token,
                _ => false,
            };
            if !same {
                let address = planned
                    .map(|p| p.address.clone())
                    .or_else(|| stored.map(|s| s.address().to_string()))
                    .unwrap_or_else(|| key.clone());
                moved.push(MovedRecord {
                    address,
                    planned: planned.map(|p| p.version.clone()),
                    stored: stored.map(|s| s.version.clone()),
                });
            }
        }
        if !moved.is_empty() && !cut(Mechanism::StampCheck) {
            moved.sort_by(|a, b| a.address.cmp(&b.address));
            return Err(PlanMovedError { moved });
        }
        Ok(Pin {
            lineage: self.lineage.clone(),
            serial: self.serial,
            base: self.records.clone(),
            changes: changes.clone(),
        })
    }
}

/// A plan's JSON (`terraform show -json PLAN`) that is not as terraform writes it.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{0}")]
pub struct PlanJsonError(pub String);

/// One resource instance a plan changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedChange {
    /// The instance address (a deposed object: `ADDR (deposed KEY)`).
    pub address: String,
    /// What the plan does to it.
    pub operation: Operation,
    /// The address it moves from, when a `moved` block moves it.
    pub moved_from: Option<String>,
    /// What it depends on: its state dependencies and its configuration's references (resource or `module.NAME` addresses).
    pub dependencies: Vec<String>,
}

/// Everything a plan changes: resource instances (with what they depend on) and root outputs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeSet {
    /// The resource instance changes, in the plan's order.
    pub resources: Vec<PlannedChange>,
    /// The root outputs whose value changes.
    pub outputs: BTreeSet<String>,
}

fn actions(v: &serde_json::Value) -> Vec<String> {
    v["actions"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn no_change(a: &[String]) -> bool {
    a.is_empty() || a.iter().all(|x| x == "no-op" || x == "read")
}

/// The resource (or `module.NAME`) a configuration reference names, relative to module path `prefix`.
fn referenced(prefix: &str, reference: &str) -> Option<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for c in reference.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' if depth > 0 => in_string = true,
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '.' if depth == 0 => parts.push(std::mem::take(&mut current)),
            c if depth == 0 => current.push(c),
            _ => {}
        }
    }
    parts.push(current);
    match parts.as_slice() {
        [first, ..]
            if matches!(
                first.as_str(),
                "var" | "local" | "count" | "each" | "path" | "terraform" | "self" | "data"
            ) =>
        {
            None
        }
        [module, name, ..] if module == "module" => Some(format!("{prefix}module.{name}")),
        [ty, name, ..] => Some(format!("{prefix}{ty}.{name}")),
        _ => None,
    }
}

fn collect_references(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                if k == "references"
                    && let Some(refs) = v.as_array()
                {
                    out.extend(refs.iter().filter_map(|r| r.as_str().map(str::to_string)));
                } else {
                    collect_references(v, out);
                }
            }
        }
        serde_json::Value::Array(items) => {
            for i in items {
                collect_references(i, out);
            }
        }
        _ => {}
    }
}

/// Each resource of `plan`'s configuration (`show -json`) and the resources it depends on (its references and `depends_on`), by resource address without instance keys (`module.a.aws_vpc.v`).
pub fn resource_dependencies(plan: &serde_json::Value) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    config_dependencies(&plan["configuration"]["root_module"], "", &mut out);
    out
}

/// Each configured resource's dependencies (its references and `depends_on`), by absolute resource address.
fn config_dependencies(
    module: &serde_json::Value,
    prefix: &str,
    out: &mut BTreeMap<String, BTreeSet<String>>,
) {
    for r in module["resources"].as_array().into_iter().flatten() {
        let Some(address) = r["address"].as_str() else {
            continue;
        };
        let mut refs = Vec::new();
        collect_references(&r["expressions"], &mut refs);
        collect_references(&r["count_expression"], &mut refs);
        collect_references(&r["for_each_expression"], &mut refs);
        collect_references(&r["provisioners"], &mut refs);
        refs.extend(
            r["depends_on"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| d.as_str().map(str::to_string)),
        );
        let deps = out.entry(format!("{prefix}{address}")).or_default();
        deps.extend(refs.iter().filter_map(|r| referenced(prefix, r)));
    }
    if let Some(calls) = module["module_calls"].as_object() {
        for (name, call) in calls {
            config_dependencies(&call["module"], &format!("{prefix}module.{name}."), out);
        }
    }
}

/// Each instance's state dependencies (`depends_on` in `prior_state`), by instance address.
fn state_dependencies(module: &serde_json::Value, out: &mut BTreeMap<String, Vec<String>>) {
    for r in module["resources"].as_array().into_iter().flatten() {
        if let Some(address) = r["address"].as_str() {
            let deps = r["depends_on"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| d.as_str().map(str::to_string))
                .collect();
            out.insert(address.to_string(), deps);
        }
    }
    for child in module["child_modules"].as_array().into_iter().flatten() {
        state_dependencies(child, out);
    }
}

impl ChangeSet {
    /// The change set of `terraform show -json PLAN`.
    pub fn from_plan_json(plan_json: &serde_json::Value) -> Result<ChangeSet, PlanJsonError> {
        let mut config = BTreeMap::new();
        config_dependencies(&plan_json["configuration"]["root_module"], "", &mut config);
        let mut state = BTreeMap::new();
        state_dependencies(
            &plan_json["prior_state"]["values"]["root_module"],
            &mut state,
        );
        let mut set = ChangeSet::default();
        match plan_json.get("resource_changes") {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::Array(changes)) => {
                for c in changes {
                    let acts = actions(&c["change"]);
                    let address = c["address"]
                        .as_str()
                        .ok_or_else(|| PlanJsonError("a resource change has no address".into()))?;
                    if c["mode"].as_str() == Some("data") {
                        continue;
                    }
                    let moved_from = c["previous_address"]
                        .as_str()
                        .filter(|p| *p != address)
                        .map(str::to_string);
                    let importing = c["change"]["importing"].is_object();
                    let operation = match acts.iter().map(String::as_str).collect::<Vec<_>>()[..] {
                        ["create"] => Operation::Create,
                        ["update"] => Operation::Update,
                        ["delete"] => Operation::Delete,
                        ["delete", "create"] | ["create", "delete"] => Operation::Replace,
                        ["forget"] => Operation::Forget,
                        _ if !no_change(&acts) => Operation::Update,
                        _ if importing => Operation::Import,
                        _ if moved_from.is_some() => Operation::Move,
                        _ => continue,
                    };
                    let full = match c["deposed"].as_str() {
                        Some(d) => format!("{address} (deposed {d})"),
                        None => address.to_string(),
                    };
                    let own = resource_of(address);
                    let mut deps: BTreeSet<String> = config.get(&own).cloned().unwrap_or_default();
                    for from in [Some(address), moved_from.as_deref()].into_iter().flatten() {
                        deps.extend(state.get(from).into_iter().flatten().cloned());
                    }
                    deps.remove(&own);
                    set.resources.push(PlannedChange {
                        address: full,
                        operation,
                        moved_from,
                        dependencies: deps.into_iter().collect(),
                    });
                }
            }
            Some(_) => return Err(PlanJsonError("resource_changes is not a list".into())),
        }
        if let Some(outputs) = plan_json.get("output_changes").and_then(|o| o.as_object()) {
            for (name, change) in outputs {
                if !no_change(&actions(change)) {
                    set.outputs.insert(name.clone());
                }
            }
        }
        Ok(set)
    }

    /// The record keys of the resource instances it changes (and the addresses they move from).
    pub fn resource_keys(&self, layout: &Layout) -> BTreeSet<String> {
        let mut keys = BTreeSet::new();
        for c in &self.resources {
            keys.insert(layout.resource_key(&c.address));
            if let Some(from) = &c.moved_from {
                keys.insert(layout.resource_key(from));
            }
        }
        keys
    }

    /// Every record key it changes: resources, the addresses they move from, and outputs.
    pub fn keys(&self, layout: &Layout) -> BTreeSet<String> {
        let mut keys = self.resource_keys(layout);
        keys.extend(self.outputs.iter().map(|o| layout.output_key(o)));
        keys
    }

    /// The claims that cover it: each changed instance, and each address a move leaves.
    pub fn wanted(&self) -> Vec<Wanted> {
        let mut out = Vec::new();
        for c in &self.resources {
            out.push(Wanted {
                address: c.address.clone(),
                operation: c.operation,
                dependencies: c.dependencies.clone(),
            });
            if let Some(from) = &c.moved_from {
                out.push(Wanted {
                    address: from.clone(),
                    operation: Operation::Move,
                    dependencies: c.dependencies.clone(),
                });
            }
        }
        out
    }
}

/// The record keys a plan changes, from `terraform show -json PLAN`: resources, the addresses they moved from, and outputs.
pub fn planned_changes(
    layout: &Layout,
    plan_json: &serde_json::Value,
) -> Result<BTreeSet<String>, PlanJsonError> {
    Ok(ChangeSet::from_plan_json(plan_json)?.keys(layout))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::layout::EstateName;
    use serde_json::json;

    /// Trimmed from `terraform show -json` of a plan with a replace, an update, a move, a module and a data source.
    fn plan() -> serde_json::Value {
        json!({
            "resource_changes": [
                {"address": "terraform_data.a", "mode": "managed", "change": {"actions": ["delete", "create"]}},
                {"address": "terraform_data.b", "mode": "managed", "change": {"actions": ["update"]}},
                {"address": "terraform_data.c2", "previous_address": "terraform_data.c", "mode": "managed", "change": {"actions": ["no-op"]}},
                {"address": "terraform_data.same", "mode": "managed", "change": {"actions": ["no-op"]}},
                {"address": "terraform_data.imp", "mode": "managed", "change": {"actions": ["no-op"], "importing": {"id": "i-1"}}},
                {"address": "terraform_data.dep", "deposed": "1b6df766", "mode": "managed", "change": {"actions": ["delete"]}},
                {"address": "terraform_data.gone", "mode": "managed", "change": {"actions": ["forget"]}},
                {"address": "module.m[0].terraform_data.z[\"k\"]", "mode": "managed", "change": {"actions": ["create"]}},
                {"address": "data.terraform_remote_state.rd", "mode": "data", "change": {"actions": ["read"]}}
            ],
            "output_changes": {"ids": {"actions": ["update"]}, "same": {"actions": ["no-op"]}},
            "configuration": {"root_module": {
                "resources": [
                    {"address": "terraform_data.a", "expressions": {"input": {"constant_value": "A"}}},
                    {"address": "terraform_data.b",
                     "expressions": {"input": {"references": ["terraform_data.a.id", "terraform_data.a", "var.x", "local.l"]}},
                     "depends_on": ["terraform_data.c2"]}
                ],
                "module_calls": {"m": {"module": {"resources": [
                    {"address": "terraform_data.z",
                     "expressions": {"input": {"references": ["terraform_data.w[0].id", "module.n.out", "data.x.y.id", "each.key"]}}}
                ]}}}
            }},
            "prior_state": {"values": {"root_module": {"resources": [
                {"address": "terraform_data.b", "depends_on": ["terraform_data.a", "terraform_data.c"]}
            ]}}}
        })
    }

    #[test]
    fn a_plans_change_set_with_operations_and_dependencies() {
        let set = ChangeSet::from_plan_json(&plan()).unwrap();
        let ops: Vec<(&str, Operation)> = set
            .resources
            .iter()
            .map(|c| (c.address.as_str(), c.operation))
            .collect();
        assert_eq!(
            ops,
            [
                ("terraform_data.a", Operation::Replace),
                ("terraform_data.b", Operation::Update),
                ("terraform_data.c2", Operation::Move),
                ("terraform_data.imp", Operation::Import),
                ("terraform_data.dep (deposed 1b6df766)", Operation::Delete),
                ("terraform_data.gone", Operation::Forget),
                ("module.m[0].terraform_data.z[\"k\"]", Operation::Create),
            ]
        );
        let b = &set.resources[1];
        assert_eq!(
            b.dependencies,
            ["terraform_data.a", "terraform_data.c", "terraform_data.c2"]
        );
        assert_eq!(
            set.resources[6].dependencies,
            ["module.m.module.n", "module.m.terraform_data.w"]
        );
        assert_eq!(set.outputs, ["ids".to_string()].into());
        let wanted = set.wanted();
        assert!(
            wanted
                .iter()
                .any(|w| w.address == "terraform_data.c" && w.operation == Operation::Move)
        );
        let layout = Layout::new(EstateName::parse("e").unwrap());
        let keys = set.keys(&layout);
        assert!(keys.contains(&layout.resource_key("terraform_data.c")));
        assert!(keys.contains(&layout.output_key("ids")));
        assert!(
            !set.resource_keys(&layout)
                .contains(&layout.output_key("ids"))
        );
        assert_eq!(planned_changes(&layout, &plan()).unwrap(), keys);
    }

    #[test]
    fn a_malformed_plan_is_refused_by_name() {
        assert!(ChangeSet::from_plan_json(&json!({"resource_changes": 3})).is_err());
        assert!(ChangeSet::from_plan_json(&json!({"resource_changes": [{"change": {}}]})).is_err());
        assert_eq!(
            ChangeSet::from_plan_json(&json!({})).unwrap(),
            ChangeSet::default()
        );
    }
}
