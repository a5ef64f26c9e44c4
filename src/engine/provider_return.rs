//! Which planned resource instance a provider's apply call was for, and the state instance object its answer makes.
//!
//! The provider door sees each `ApplyResourceChange` as a type name, a prior state and a
//! planned state; only the plan knows the instance address. [`Ledger`] holds the plan's
//! changes (`show -json`'s `resource_changes`) and hands each call the one change still open
//! that it fits: an update or a delete whose `before` equals the prior state, a create whose
//! every value the plan knew (`after`, less what `after_unknown` names) is the same known value
//! in the call's planned state. A null is not an unknown: a value the plan knew as null must be
//! null in the call. Only instances whose planned changes are identical (`count` with nothing
//! that differs) may take either address; a call that fits two changes that differ is
//! [`Unmatched::Ambiguous`], and is neither marked nor recorded at its return. A change whose
//! configuration refers to a resource with a create or update not yet returned cannot be in
//! flight (terraform applies a dependency first), so it takes no call meanwhile.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::cut::{Mechanism, cut};
use crate::engine::address::{IndexKey, instance_address, module_calls, resource_of};
use crate::engine::operation::Operation;
use crate::engine::plan::{InstanceIndex, Mode, Plan, ResourceChange};
use crate::engine::state::ResourceMeta;

/// What a provider apply call with this prior state and planned state (null when absent) does: a create, an update or a delete; none for a call with neither.
pub fn call_operation(prior: &Value, planned: &Value) -> Option<Operation> {
    match (prior.is_null(), planned.is_null()) {
        (true, false) => Some(Operation::Create),
        (false, false) => Some(Operation::Update),
        (false, true) => Some(Operation::Delete),
        (true, true) => None,
    }
}

/// One change of the plan a provider call may be for.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    /// The instance address.
    pub address: String,
    /// Its resource as the state names it.
    pub meta: ResourceMeta,
    /// Its `index_key` in the state (null without count or for_each).
    pub index_key: Value,
    /// The provider's source address (`registry.terraform.io/hashicorp/aws`).
    pub provider: String,
    /// What the call does: a create, an update or a delete.
    pub action: Operation,
    /// The plan's `before`.
    pub before: Value,
    /// The plan's `after` (unknown values left out or null).
    pub after: Value,
    /// The plan's `after_unknown`: `true` where a value is known only after the apply.
    pub after_unknown: Value,
    /// The plan's `after_sensitive`: `true` where a value is sensitive.
    pub after_sensitive: Value,
    /// Whether the resource has provisioners that run at create time.
    pub provisioned: bool,
    /// Its resource's address in the configuration (module instance keys left out).
    pub resource: String,
    /// The resources (configuration addresses) its configuration refers to or `depends_on`.
    pub depends_on: BTreeSet<String>,
}

/// Why a provider call was handed no planned change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unmatched {
    /// The call has neither a prior nor a planned state.
    #[error("the call has neither a prior state nor a planned state")]
    NoAction,
    /// No open change of its provider, type and action fits it.
    #[error("it fits no open planned change")]
    NoFit,
    /// It fits two or more open changes that differ: which address it is for is not known.
    #[error("it fits {} planned changes that differ ({}), so which one it is for is not known", .0.len(), .0.join(", "))]
    Ambiguous(Vec<String>),
}

/// The changes no call has taken yet, and the resources of creates and updates whose call went out and has not returned.
#[derive(Debug, Default)]
struct Open {
    changes: Vec<Planned>,
    in_flight: Vec<String>,
}

impl Open {
    /// Whether a create or update of a resource `p` depends on is still to be applied or in flight.
    fn waits(&self, p: &Planned) -> bool {
        !p.depends_on.is_empty()
            && (self.in_flight.iter().any(|r| p.depends_on.contains(r))
                || self.changes.iter().any(|o| {
                    matches!(o.action, Operation::Create | Operation::Update)
                        && p.depends_on.contains(&o.resource)
                }))
    }
}

/// The plan's changes not yet matched to a provider call.
#[derive(Debug, Default)]
pub struct Ledger {
    open: Mutex<Open>,
    terraform_version: Option<String>,
}

impl Ledger {
    /// The changes of `plan` that a provider apply call makes.
    ///
    /// A replacement that destroys first gives a delete and a create; one that creates
    /// first (`create_before_destroy`) gives none (the old object becomes deposed, which
    /// the door does not record).
    pub fn from_plan(plan: &Plan) -> Ledger {
        let mut open = Vec::new();
        let dependencies = plan.resource_dependencies();
        for rc in &plan.resource_changes {
            if rc.mode != Mode::Managed {
                continue;
            }
            let calls = rc.change.actions.provider_calls();
            let Some(mut base) = planned_of(plan, rc) else {
                continue;
            };
            base.depends_on = dependencies
                .get(&base.resource)
                .map(|d| d.iter().filter(|r| **r != base.resource).cloned().collect())
                .unwrap_or_default();
            for action in calls {
                open.push(Planned {
                    action: *action,
                    ..base.clone()
                });
            }
        }
        Ledger {
            open: Mutex::new(Open {
                changes: open,
                in_flight: Vec::new(),
            }),
            terraform_version: plan
                .terraform_version
                .as_deref()
                .filter(|v| !v.is_empty())
                .map(str::to_string),
        }
    }

    /// The open changes, held.
    ///
    /// A lock poisoned by a panic elsewhere is taken over, not read as "nothing planned":
    /// each change under it is a single push or remove of a list, so what it holds is whole.
    fn held(&self) -> MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The version of terraform that made the plan, as the plan says.
    pub fn terraform_version(&self) -> Option<&str> {
        self.terraform_version.as_deref()
    }

    /// How many changes are still open.
    pub fn open(&self) -> usize {
        self.held().changes.len()
    }

    /// The one open change of a resource of `type_name` from `provider` that a call with `prior` and `planned` (unknown where `planned_unknown` says) fits; it is no longer open.
    ///
    /// Twins (open changes whose plans are identical) may take either one's call; a call
    /// that fits changes that differ takes none.
    pub fn take(
        &self,
        provider: &str,
        type_name: &str,
        prior: &Value,
        planned: &Value,
        planned_unknown: &Value,
    ) -> Result<Planned, Unmatched> {
        let action = call_operation(prior, planned).ok_or(Unmatched::NoAction)?;
        let mut held = self.held();
        let fitting: Vec<usize> = held
            .changes
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                p.provider == provider
                    && p.meta.type_name == type_name
                    && p.action == action
                    && (p.action == Operation::Delete
                        || cut(Mechanism::ExactMatch)
                        || !held.waits(p))
                    && match action {
                        Operation::Create if cut(Mechanism::ExactMatch) => loose(&p.after, planned),
                        Operation::Create => {
                            fits(&p.after, &p.after_unknown, planned, planned_unknown)
                        }
                        _ => same(&p.before, prior),
                    }
            })
            .map(|(at, _)| at)
            .collect();
        let Some(&first) = fitting.first() else {
            return Err(Unmatched::NoFit);
        };
        let open = &held.changes;
        let twins = fitting.iter().all(|&at| {
            let (a, b) = (&open[at], &open[first]);
            same(&a.before, &b.before)
                && same(&a.after, &b.after)
                && same(&a.after_unknown, &b.after_unknown)
        });
        if !twins && !cut(Mechanism::ExactMatch) {
            return Err(Unmatched::Ambiguous(
                fitting.iter().map(|&at| open[at].address.clone()).collect(),
            ));
        }
        let taken = held.changes.remove(first);
        if matches!(taken.action, Operation::Create | Operation::Update) {
            held.in_flight.push(taken.resource.clone());
        }
        Ok(taken)
    }

    /// The call `planned` was taken for has returned (whatever its answer): what depends on it may be in flight now.
    pub fn returned(&self, planned: &Planned) {
        let mut held = self.held();
        if let Some(at) = held.in_flight.iter().position(|r| *r == planned.resource) {
            held.in_flight.remove(at);
        }
    }
}

/// The plan's change `rc` as a [`Planned`] (its action still to be set).
fn planned_of(plan: &Plan, rc: &ResourceChange) -> Option<Planned> {
    let address = rc.address.clone();
    let type_name = rc.type_name.clone()?;
    let name = rc.name.clone()?;
    let module = rc.module_address.clone();
    let provider = rc.provider_name.clone()?;
    // No `each`: terraform (since 0.13) and OpenTofu never write it in a state's resources,
    // so a record with it would differ from terraform's own save of the same instance.
    let key = match &rc.index {
        Some(InstanceIndex::Int(n)) => IndexKey::Int(n.as_i64()?),
        Some(InstanceIndex::Str(s)) => IndexKey::Str(s.clone()),
        None => IndexKey::None,
    };
    let index_key = rc
        .index
        .as_ref()
        .map_or(Value::Null, InstanceIndex::to_value);
    let expected = instance_address(module.as_deref(), "managed", &type_name, &name, &key, None);
    if expected != address {
        return None;
    }
    let calls = module_calls(module.as_deref().unwrap_or(""));
    let config = plan
        .configuration
        .root_module
        .descend(calls.iter().map(String::as_str))
        .and_then(|m| m.managed(&type_name, &name));
    let provider_config = provider_config_address(
        plan,
        config.and_then(|c| c.provider_config_key.as_deref()),
        &provider,
    );
    let provisioned = config.is_some_and(|c| c.provisioned());
    Some(Planned {
        resource: resource_of(&address),
        address,
        meta: ResourceMeta {
            module,
            mode: "managed".into(),
            type_name,
            name,
            each: None,
            provider: provider_config,
        },
        index_key,
        provider,
        action: Operation::Create,
        before: rc.change.before.clone(),
        after: rc.change.after.clone(),
        after_unknown: rc.change.after_unknown.clone(),
        after_sensitive: rc.change.after_sensitive.clone(),
        provisioned,
        depends_on: BTreeSet::new(),
    })
}

/// The provider configuration address the state names (`provider["HOST/NS/TYPE"]`, with `.ALIAS` and a module prefix when the configuration's `key` says so).
fn provider_config_address(plan: &Plan, key: Option<&str>, provider: &str) -> String {
    let mut out = format!("provider[\"{provider}\"]");
    let Some(pc) = key.and_then(|k| plan.configuration.provider_config.get(k)) else {
        return out;
    };
    if let Some(alias) = &pc.alias {
        out.push('.');
        out.push_str(alias);
    }
    if let Some(module) = pc.module_address.as_deref().filter(|m| !m.is_empty()) {
        out = format!("{module}.{out}");
    }
    out
}

/// Whether two values are the same (numbers by value: `1` and `1.0` alike).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Whether a call's planned value (unknown where `planned_unknown` is `true`) is the plan's `after` (unknown where `after_unknown` is `true`): every value the plan knew is the same known value in the call, a null included.
///
/// A value unknown in the plan may be anything in the call (the apply may know it by then); a
/// value the plan knew is never unknown in the call, as terraform holds a final plan to its plan.
fn fits(after: &Value, after_unknown: &Value, planned: &Value, planned_unknown: &Value) -> bool {
    if *after_unknown == Value::Bool(true) {
        return true;
    }
    if *planned_unknown == Value::Bool(true) {
        return false;
    }
    match (after, planned) {
        (Value::Object(a), Value::Object(p)) => a.keys().chain(p.keys()).all(|k| {
            fits(
                a.get(k).unwrap_or(&Value::Null),
                &after_unknown[k.as_str()],
                p.get(k).unwrap_or(&Value::Null),
                &planned_unknown[k.as_str()],
            )
        }),
        (Value::Array(a), Value::Array(p)) => {
            a.len() == p.len()
                && a.iter()
                    .zip(p)
                    .enumerate()
                    .all(|(i, (v, w))| fits(v, &after_unknown[i], w, &planned_unknown[i]))
        }
        _ => same(after, planned),
    }
}

/// The match before exact matching, kept only for `make prove-claims` to cut back to: a null on either side agrees with anything.
fn loose(after: &Value, planned: &Value) -> bool {
    match (after, planned) {
        (_, Value::Null) | (Value::Null, _) => true,
        (Value::Object(a), Value::Object(p)) => a
            .iter()
            .all(|(k, v)| p.get(k).map_or(v.is_null(), |w| loose(v, w))),
        (Value::Array(a), Value::Array(p)) => {
            a.len() == p.len() && a.iter().zip(p).all(|(v, w)| loose(v, w))
        }
        _ => same(after, planned),
    }
}

/// The state (format 4) instance object for `planned` after its provider returned `new_state` and `private`.
///
/// `prior` is the instance as the record holds it (an update keeps its dependencies and
/// `create_before_destroy`); a create has no dependencies until terraform's own save. A
/// create of a resource with create-time provisioners is `tainted`, as terraform leaves it
/// when a provisioner dies; terraform's save says otherwise once they ran.
pub fn instance(
    planned: &Planned,
    new_state: Value,
    private: &[u8],
    schema_version: u64,
    prior: Option<&Value>,
) -> Value {
    let mut obj = Map::new();
    if !planned.index_key.is_null() {
        obj.insert("index_key".into(), planned.index_key.clone());
    }
    if planned.action == Operation::Create && planned.provisioned {
        obj.insert("status".into(), json!("tainted"));
    }
    obj.insert("schema_version".into(), json!(schema_version));
    obj.insert("attributes".into(), new_state);
    obj.insert(
        "sensitive_attributes".into(),
        Value::Array(sensitive_paths(&planned.after_sensitive)),
    );
    if !private.is_empty() {
        obj.insert(
            "private".into(),
            json!(base64::engine::general_purpose::STANDARD.encode(private)),
        );
    }
    for kept in ["dependencies", "create_before_destroy"] {
        if let Some(v) = prior.and_then(|p| p.get(kept)) {
            obj.insert(kept.into(), v.clone());
        }
    }
    Value::Object(obj)
}

/// The state's `sensitive_attributes` paths for a plan's `after_sensitive` (`true` where sensitive).
fn sensitive_paths(marks: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    let mut path = Vec::new();
    walk_sensitive(marks, &mut path, &mut out);
    out
}

fn walk_sensitive(marks: &Value, path: &mut Vec<Value>, out: &mut Vec<Value>) {
    match marks {
        Value::Bool(true) if !path.is_empty() => out.push(Value::Array(path.clone())),
        Value::Object(m) => {
            for (k, v) in m {
                path.push(json!({"type": "get_attr", "value": k}));
                walk_sensitive(v, path, out);
                path.pop();
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                path.push(json!({"type": "index", "value": {"value": i, "type": "number"}}));
                walk_sensitive(v, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Value {
        let change = |addr: &str, idx: Value, actions: Value, before: Value, after: Value| {
            json!({
                "address": addr, "mode": "managed", "type": "t_thing", "name": addr.split('.').nth(1).unwrap().split('[').next().unwrap(),
                "index": idx, "provider_name": "example.com/x/t",
                "change": {"actions": actions, "before": before, "after": after,
                           "after_sensitive": {"secret": true}}
            })
        };
        json!({
            "resource_changes": [
                change("t_thing.a", Value::Null, json!(["create"]), Value::Null, json!({"name": "a", "id": null})),
                change("t_thing.b[0]", json!(0), json!(["create"]), Value::Null, json!({"name": "b"})),
                change("t_thing.b[1]", json!(1), json!(["create"]), Value::Null, json!({"name": "b"})),
                change("t_thing.c", Value::Null, json!(["update"]), json!({"name": "c", "id": "1", "n": 1}), json!({"name": "c2"})),
                change("t_thing.d", Value::Null, json!(["delete", "create"]), json!({"name": "d", "id": "2"}), json!({"name": "d2"})),
                change("t_thing.e", Value::Null, json!(["create", "delete"]), json!({"name": "e"}), json!({"name": "e2"})),
            ],
            "configuration": {"root_module": {"resources": [
                {"address": "t_thing.a", "mode": "managed", "type": "t_thing", "name": "a",
                 "provider_config_key": "t.east", "provisioners": [{"type": "local-exec"}]}
            ]}, "provider_config": {"t.east": {"name": "t", "full_name": "example.com/x/t", "alias": "east"}}}
        })
    }

    const P: &str = "example.com/x/t";

    /// The ledger of a plan given as JSON.
    fn ledger_of(plan: &Value) -> Ledger {
        Ledger::from_plan(&Plan::from_value(plan.clone()).unwrap())
    }

    /// A create call's planned state: `unknown` names the attributes left unknown.
    fn take(ledger: &Ledger, planned: Value, unknown: Value) -> Result<Planned, Unmatched> {
        ledger.take(P, "t_thing", &Value::Null, &planned, &unknown)
    }

    #[test]
    fn each_call_finds_its_change() {
        let ledger = ledger_of(&plan());
        assert_eq!(ledger.open(), 6);
        let known = json!({});
        // Another provider, or a call that agrees with nothing, takes nothing.
        assert_eq!(
            ledger
                .take(
                    "other/x/t",
                    "t_thing",
                    &Value::Null,
                    &json!({"name": "a", "id": null}),
                    &known
                )
                .unwrap_err(),
            Unmatched::NoFit
        );
        assert_eq!(
            take(&ledger, json!({"name": "zz"}), json!({})).unwrap_err(),
            Unmatched::NoFit
        );
        let a = take(&ledger, json!({"name": "a", "id": null}), json!({})).unwrap();
        assert_eq!(a.address, "t_thing.a");
        assert_eq!(a.meta.provider, "provider[\"example.com/x/t\"].east");
        assert!(a.provisioned);
        // Twins go by plan order.
        let b = take(&ledger, json!({"name": "b"}), json!({})).unwrap();
        assert_eq!(
            (b.address.as_str(), b.meta.each.as_deref(), &b.index_key),
            ("t_thing.b[0]", None, &json!(0))
        );
        // An update by its prior state, numbers by value.
        let c = ledger
            .take(
                P,
                "t_thing",
                &json!({"name": "c", "id": "1", "n": 1.0}),
                &json!({"name": "c2"}),
                &known,
            )
            .unwrap();
        assert_eq!(
            (c.address.as_str(), c.action),
            ("t_thing.c", Operation::Update)
        );
        // A destroy-first replacement: the delete, then the create.
        let d = ledger
            .take(
                P,
                "t_thing",
                &json!({"name": "d", "id": "2"}),
                &Value::Null,
                &known,
            )
            .unwrap();
        assert_eq!(
            (d.address.as_str(), d.action),
            ("t_thing.d", Operation::Delete)
        );
        let d2 = take(&ledger, json!({"name": "d2"}), json!({})).unwrap();
        assert_eq!(
            (d2.address.as_str(), d2.action),
            ("t_thing.d", Operation::Create)
        );
        // create_before_destroy is not recorded at return.
        assert_eq!(ledger.open(), 1);
        assert_eq!(
            take(&ledger, json!({"name": "e2"}), json!({})).unwrap_err(),
            Unmatched::NoFit
        );
    }

    /// A plan of two buckets of one type created together: one named, one by prefix (the swap).
    fn buckets() -> Value {
        let create = |name: &str, after: Value, unknown: Value| {
            json!({
                "address": format!("t_thing.{name}"), "mode": "managed", "type": "t_thing",
                "name": name, "provider_name": P,
                "change": {"actions": ["create"], "before": null, "after": after,
                           "after_unknown": unknown, "after_sensitive": {}}
            })
        };
        json!({"resource_changes": [
            create("prefixed", json!({"bucket_prefix": "trial-", "tags": null}),
                   json!({"bucket": true, "id": true, "arn": true})),
            create("named", json!({"bucket": "trial-data", "bucket_prefix": null, "tags": null}),
                   json!({"id": true, "arn": true})),
        ]})
    }

    #[test]
    fn a_null_is_not_an_unknown_and_each_bucket_takes_its_own_change() {
        // The named bucket's call: its name known, its prefix null. The prefixed bucket's
        // change comes first, and a loose match (null agreeing with anything) took it.
        let ledger = ledger_of(&buckets());
        let named = take(
            &ledger,
            json!({"bucket": "trial-data", "bucket_prefix": null, "tags": null}),
            json!({"id": true, "arn": true}),
        )
        .unwrap();
        assert_eq!(named.address, "t_thing.named");
        // The prefixed bucket's call: its name unknown, which the named change knew.
        let prefixed = take(
            &ledger,
            json!({"bucket_prefix": "trial-", "tags": null}),
            json!({"bucket": true, "id": true, "arn": true}),
        )
        .unwrap();
        assert_eq!(prefixed.address, "t_thing.prefixed");
        // A name known only at apply time is still the prefixed bucket's.
        let ledger = ledger_of(&buckets());
        let later = take(
            &ledger,
            json!({"bucket": "trial-123", "bucket_prefix": "trial-", "tags": null}),
            json!({"id": true, "arn": true}),
        )
        .unwrap();
        assert_eq!(later.address, "t_thing.prefixed");
        // A value the plan knew as null is not an unknown in the call, nor another value.
        let ledger = ledger_of(&buckets());
        assert_eq!(
            take(
                &ledger,
                json!({"bucket": "trial-data", "tags": null}),
                json!({"bucket_prefix": true, "id": true, "arn": true}),
            )
            .unwrap_err(),
            Unmatched::NoFit
        );
        assert_eq!(
            take(
                &ledger,
                json!({"bucket": "trial-data", "bucket_prefix": null, "tags": {}}),
                json!({"id": true, "arn": true}),
            )
            .unwrap_err(),
            Unmatched::NoFit
        );
        assert_eq!(ledger.open(), 2);
    }

    #[test]
    fn a_call_that_fits_changes_that_differ_takes_none() {
        // Two changes that differ only where the plan did not know: a call that knows both fits both.
        let create = |name: &str, after: Value, unknown: Value| {
            json!({
                "address": format!("t_thing.{name}"), "mode": "managed", "type": "t_thing",
                "name": name, "provider_name": P,
                "change": {"actions": ["create"], "before": null, "after": after,
                           "after_unknown": unknown, "after_sensitive": {}}
            })
        };
        let plan = json!({"resource_changes": [
            create("x", json!({"name": "a"}), json!({"size": true})),
            create("y", json!({"size": 1}), json!({"name": true})),
        ]});
        let ledger = ledger_of(&plan);
        match take(&ledger, json!({"name": "a", "size": 1}), json!({})) {
            Err(Unmatched::Ambiguous(both)) => assert_eq!(both, ["t_thing.x", "t_thing.y"]),
            other => panic!("{other:?}"),
        }
        assert_eq!(ledger.open(), 2, "an ambiguous call takes no change");
        // Each call that only one fits still takes its own.
        let x = take(&ledger, json!({"name": "a", "size": 7}), json!({})).unwrap();
        assert_eq!(x.address, "t_thing.x");
        let y = take(&ledger, json!({"name": "a", "size": 1}), json!({})).unwrap();
        assert_eq!(y.address, "t_thing.y");
    }

    #[test]
    fn a_change_waiting_on_a_dependency_takes_no_call() {
        // One gateway attached to a VPC made in the same apply (its vpc_id unknown), one not
        // (vpc_id null): the detached one's call fits both until the VPC's create returned.
        let create = |ty: &str, name: &str, after: Value, unknown: Value| {
            json!({
                "address": format!("{ty}.{name}"), "mode": "managed", "type": ty,
                "name": name, "provider_name": P,
                "change": {"actions": ["create"], "before": null, "after": after,
                           "after_unknown": unknown, "after_sensitive": {}}
            })
        };
        let plan = json!({
            "resource_changes": [
                create("t_vpc", "v", json!({"cidr": "10.0.0.0/16"}), json!({"id": true})),
                create("t_thing", "attached", json!({}), json!({"vpc_id": true, "id": true})),
                create("t_thing", "detached", json!({"vpc_id": null}), json!({"id": true})),
            ],
            "configuration": {"root_module": {"resources": [
                {"address": "t_thing.attached", "mode": "managed", "type": "t_thing", "name": "attached",
                 "expressions": {"vpc_id": {"references": ["t_vpc.v.id", "t_vpc.v"]}}},
                {"address": "t_thing.detached", "mode": "managed", "type": "t_thing", "name": "detached",
                 "expressions": {"vpc_id": {"references": ["var.none"]}}},
            ]}}
        });
        let vpc_call = |ledger: &Ledger| {
            ledger
                .take(
                    P,
                    "t_vpc",
                    &Value::Null,
                    &json!({"cidr": "10.0.0.0/16"}),
                    &json!({"id": true}),
                )
                .unwrap()
        };
        // Before the VPC's call, and while it is in flight, only the detached gateway can be called.
        let ledger = ledger_of(&plan);
        let detached = json!({"vpc_id": null});
        assert_eq!(
            take(&ledger, detached.clone(), json!({"id": true}))
                .unwrap()
                .address,
            "t_thing.detached"
        );
        let ledger = ledger_of(&plan);
        let vpc = vpc_call(&ledger);
        assert_eq!(
            take(&ledger, detached.clone(), json!({"id": true}))
                .unwrap()
                .address,
            "t_thing.detached"
        );
        // Once the VPC returned, the attached one's call takes its own change.
        ledger.returned(&vpc);
        let attached = take(&ledger, json!({"vpc_id": "vpc-1"}), json!({"id": true})).unwrap();
        assert_eq!(attached.address, "t_thing.attached");
        // Had the detached call come after the VPC returned, it would fit both: ambiguous.
        let ledger = ledger_of(&plan);
        let vpc = vpc_call(&ledger);
        ledger.returned(&vpc);
        assert!(matches!(
            take(&ledger, detached, json!({"id": true})),
            Err(Unmatched::Ambiguous(_))
        ));
    }

    #[test]
    fn the_instance_object() {
        let ledger = ledger_of(&plan());
        let a = take(&ledger, json!({"name": "a", "id": null}), json!({})).unwrap();
        let prior = json!({"dependencies": ["t_thing.z"]});
        let got = instance(&a, json!({"name": "a", "id": "9"}), b"pv", 2, Some(&prior));
        assert_eq!(
            got,
            json!({
                "status": "tainted", "schema_version": 2,
                "attributes": {"name": "a", "id": "9"},
                "sensitive_attributes": [[{"type": "get_attr", "value": "secret"}]],
                "private": "cHY=", "dependencies": ["t_thing.z"]
            })
        );
    }

    #[test]
    fn a_poisoned_ledger_still_holds_its_changes() {
        // A panic while the lock was held does not read as "nothing planned".
        let ledger = ledger_of(&plan());
        let poisoned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _held = ledger.open.lock();
            panic!("a holder dies");
        }));
        assert!(poisoned.is_err() && ledger.open.is_poisoned());
        assert_eq!(ledger.open(), 6);
        let a = take(&ledger, json!({"name": "a", "id": null}), json!({})).unwrap();
        assert_eq!(a.address, "t_thing.a");
        ledger.returned(&a);
        assert_eq!(ledger.open(), 5);
    }
}
