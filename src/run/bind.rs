//! The collision check before a plan's creates: the live objects marked for each AWS create are listed; one is bound (imported, so the plan updates it), two or more end the run.
//!
//! It runs once the plan's changes are claimed, so no live run is creating the same
//! address meanwhile: an object marked for it and named by no record was made by a run
//! that is gone. The listing goes where the provider itself goes: for `run`'s own plans, the
//! configurations the provider door saw in terraform's `Configure` calls of the plan; for a
//! saved plan, those its stamp kept when it was made (without credentials). A saved plan
//! cannot be planned again, so one object found refuses it before terraform applies.

use std::collections::BTreeMap;

use serde_json::Value;
use thiserror::Error;

use super::command::ApplySplit;
use super::context::{Attempt, Ctx};
use super::error::{EXIT_COLLISION, EXIT_PLAN_REFUSED, RunError};
use super::liveness::Liveness;
use super::remark::Holders;
use super::steps::{Early, stop_early};
use super::{say, terraform};
use crate::cloud::aws::markers::{AwsLister, CollisionError, LiveObject, decide};
use crate::cut::{Mechanism, cut};
use crate::engine::markers::Family;
use crate::engine::plan::Plan;
use crate::frontdoor::provider::Door;
use crate::frontdoor::provider::probe::Found;

/// A saved plan creates an address whose marked live object exists: applying it would make a second one.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "The approved plan no longer matches the live system (MarkedObjectExists): the plan creates {address}, but the live object {arn} (ID {id}) already carries its markers for estate {estate:?}: a run that is gone created it and recorded nothing. Applying the plan would create a second one, and a saved plan cannot be planned again to bind it. Nothing was applied; plan again through choudoufu-live run, which binds it."
)]
pub struct SavedPlanMarkedError {
    /// The address the plan creates.
    pub address: String,
    /// The estate.
    pub estate: String,
    /// The live object's ARN.
    pub arn: String,
    /// The ID terraform would import it by (its ARN when the type has no rule).
    pub id: String,
}

/// What the check does with the one live object found for a create, and where it lists.
pub enum Bind<'a> {
    /// `run`'s own plan: list with the configurations the door saw; import the object and plan again.
    Import(&'a ApplySplit),
    /// A saved plan: list with the configurations its stamp kept; refuse the plan.
    Refuse(&'a [Value]),
}

/// What the check came to.
pub enum Checked {
    /// Nothing is marked for any create: apply the plan.
    Clear,
    /// Marked objects were imported: plan again, so the plan updates them.
    Bound,
    /// The run ends with this status (what stopped it was said).
    Refused(i32),
}

/// One create of the plan the markers can find.
struct Create {
    address: String,
    type_name: String,
}

/// The plan's creates of the AWS family (a replacement keeps its old object's markers, so only plain creates).
fn creates(plan: &Plan) -> Vec<Create> {
    plan.creates()
        .filter_map(|rc| {
            let provider = rc.provider_name.as_deref()?;
            let type_name = rc.type_name.as_deref()?;
            (Family::of(provider, type_name) == Some(Family::Aws)).then(|| Create {
                address: rc.address.clone(),
                type_name: type_name.to_string(),
            })
        })
        .filter(|c| !c.address.is_empty())
        .collect()
}

/// Whether the marker listings may use `config`: not when it points the provider at custom endpoints but names none for the Tagging API (nor `endpoint_url`), as for a test peer; the objects are not where AWS's own endpoint would look.
pub fn listable(config: &Value) -> bool {
    let named = |v: &Value| v.as_str().is_some_and(|s| !s.trim().is_empty());
    if named(&config["endpoint_url"]) {
        return true;
    }
    let endpoints = match &config["endpoints"] {
        Value::Array(items) => items.first().cloned().unwrap_or(Value::Null),
        other => other.clone(),
    };
    let Value::Object(endpoints) = endpoints else {
        return true;
    };
    let tagging = ["resourcegroupstaggingapi", "resourcegroupstagging"];
    tagging.iter().any(|k| endpoints.get(*k).is_some_and(named)) || !endpoints.values().any(named)
}

/// The AWS configurations the door saw that the marker listings may use ([`listable`]); each left out is said.
pub fn listing_configs(door: &Door) -> Vec<Value> {
    door.provider_configs()
        .into_iter()
        .filter(|(p, _)| Family::of(&p.to_string(), "") == Some(Family::Aws))
        .filter_map(|(p, config)| {
            if listable(&config) {
                Some(config)
            } else {
                say::no_tagging_endpoint(&p.to_string());
                None
            }
        })
        .collect()
}

/// What a saved plan's stamp keeps of a listable AWS configuration: where to list (`region`, the Tagging, IAM and SQS endpoints, `endpoint_url`, `profile`), never credentials.
pub fn for_stamp(config: &Value) -> Value {
    let mut kept = serde_json::Map::new();
    for key in ["region", "endpoint_url", "profile"] {
        if let Some(v) = config.get(key).filter(|v| !v.is_null()) {
            kept.insert(key.to_string(), v.clone());
        }
    }
    let endpoints = match &config["endpoints"] {
        Value::Array(items) => items.first().cloned().unwrap_or(Value::Null),
        other => other.clone(),
    };
    let names = [
        "resourcegroupstaggingapi",
        "resourcegroupstagging",
        "iam",
        "sqs",
    ];
    let endpoints: serde_json::Map<String, Value> = names
        .iter()
        .filter_map(|n| {
            let v = endpoints.get(*n).filter(|v| !v.is_null())?;
            Some((n.to_string(), v.clone()))
        })
        .collect();
    if !endpoints.is_empty() {
        kept.insert("endpoints".into(), Value::Object(endpoints));
    }
    Value::Object(kept)
}

/// The configurations a saved plan's stamp keeps for the marker listings ([`for_stamp`] of each [`listing_configs`]).
pub fn stamped_configs(door: &Door) -> Vec<Value> {
    if door.marking().is_none() {
        return Vec::new();
    }
    let mut kept: Vec<Value> = listing_configs(door).iter().map(for_stamp).collect();
    kept.dedup();
    kept
}

/// List the markers of each AWS create of `plan`; bind (or, for a saved plan, refuse on) the one object found, refuse on two or more.
pub async fn check(
    ctx: &Ctx,
    attempt: &mut Attempt,
    plan: &Plan,
    bind: &Bind<'_>,
    early: &mut Option<Early>,
) -> Result<Checked, RunError> {
    let Some(door) = ctx.tf.door() else {
        return Ok(Checked::Clear);
    };
    let Some(marking) = door.marking() else {
        return Ok(Checked::Clear);
    };
    let creates = creates(plan);
    if creates.is_empty() || cut(Mechanism::MarkerBind) {
        return Ok(Checked::Clear);
    }
    let configs = match bind {
        Bind::Import(_) => listing_configs(door),
        Bind::Refuse(stamped) => stamped.to_vec(),
    };
    // Each lister with the configuration it was made from (a probe is configured alike).
    let mut listers = Vec::new();
    let mut made_from = Vec::new();
    for config in configs {
        match AwsLister::from_json(&config).await {
            Ok(l) => {
                listers.push(l);
                made_from.push(config);
            }
            Err(e) => say::no_marker_listing(e),
        }
    }
    let configs = made_from;
    if listers.is_empty() {
        match bind {
            Bind::Import(_) => say::no_collision_check(creates.len()),
            Bind::Refuse(_) => say::no_stamped_listing(creates.len()),
        }
        return Ok(Checked::Clear);
    }
    let wanted: Vec<(&str, &str)> = creates
        .iter()
        .map(|c| (c.type_name.as_str(), c.address.as_str()))
        .collect();
    // Each object found for a create, with the lister that found it (which can put its marker right).
    let mut found: Vec<Vec<(usize, LiveObject)>> = vec![Vec::new(); creates.len()];
    for (which, lister) in listers.iter().enumerate() {
        let listed = lister.with_markers_each(&marking.estate, &wanted).await;
        for ((create, objects), all) in creates.iter().zip(listed).zip(found.iter_mut()) {
            match objects {
                Ok(objects) => all.extend(objects.into_iter().map(|o| (which, o))),
                Err(e) => say::marker_listing_failed(&create.address, e),
            }
        }
    }
    let found = guard(
        &listers,
        &Holders::of(&attempt.session().snapshot().await),
        &creates,
        found,
    )
    .await;
    let mut unbindable = BTreeMap::new();
    let found = match bind {
        Bind::Import(_) => read_back(door, &configs, &creates, found, &mut unbindable).await,
        // A saved plan's apply has configured no provider yet: its listing is all it has.
        Bind::Refuse(_) => found
            .into_iter()
            .map(|objects| objects.into_iter().map(|(_, o)| o).collect())
            .collect(),
    };
    let mut binds: Vec<(String, LiveObject)> = Vec::new();
    let mut collisions: Vec<CollisionError> = Vec::new();
    for (create, mut objects) in creates.iter().zip(found) {
        objects.sort_by(|a, b| a.arn.cmp(&b.arn));
        objects.dedup_by(|a, b| a.arn == b.arn);
        match decide(&marking.estate, &create.address, objects) {
            Ok(None) => {}
            Ok(Some(object)) => binds.push((create.address.clone(), object)),
            Err(collision) => collisions.push(collision),
        }
    }
    if !collisions.is_empty() {
        for c in &collisions {
            say::collision(c);
        }
        return Ok(Checked::Refused(EXIT_COLLISION));
    }
    if binds.is_empty() {
        return Ok(Checked::Clear);
    }
    let split = match bind {
        Bind::Import(split) => split,
        Bind::Refuse(_) => {
            for (address, object) in binds {
                say::plan_refused(SavedPlanMarkedError {
                    address,
                    estate: marking.estate.clone(),
                    id: object.import_id.unwrap_or_else(|| object.arn.clone()),
                    arn: object.arn,
                });
            }
            return Ok(Checked::Refused(EXIT_PLAN_REFUSED));
        }
    };
    // The imports read the state first: an apply started early, held until now, never applies.
    stop_early(attempt, early);
    for (address, object) in &binds {
        let Some(id) = &object.import_id else {
            let why = unbindable.get(&object.arn).map_or(
                "its type has no import ID rule, and the provider could not be asked",
                String::as_str,
            );
            say::cannot_bind(address, &object.arn, why);
            return Ok(Checked::Refused(EXIT_COLLISION));
        };
        say::binding(address, &object.arn, id);
        let args = split.import_args(address, id);
        let server = attempt.serve(ctx).await?;
        let status = ctx.terraform(&args, server, &[]).await?;
        if !status.success() {
            say::bind_failed(address);
            return Ok(Checked::Refused(terraform::code(status)));
        }
        if cut(Mechanism::BindTainted) {
            continue;
        }
        // Its create never returned, so it may be incomplete (a security group whose default
        // egress rule was never revoked): the plan replaces it, as terraform replaces a create
        // that failed midway.
        let args = split.taint_args(address);
        let server = attempt.serve(ctx).await?;
        let status = ctx.terraform(&args, server, &[]).await?;
        if !status.success() {
            say::taint_failed(address);
            return Ok(Checked::Refused(terraform::code(status)));
        }
        say::bound_tainted(address);
    }
    Ok(Checked::Bound)
}

/// Ask the provider itself about each object found for a create: one it reads as gone or going away (a key pending deletion, a terminated instance) is left out, said, and never bound; one it reads back takes the import ID whose read gave it; why one could not be imported goes into `unbindable`, by ARN.
async fn read_back(
    door: &Door,
    configs: &[Value],
    creates: &[Create],
    found: Vec<Vec<(usize, LiveObject)>>,
    unbindable: &mut BTreeMap<String, String>,
) -> Vec<Vec<LiveObject>> {
    let mut liveness = Liveness::new(door);
    let mut kept = Vec::with_capacity(found.len());
    for (create, objects) in creates.iter().zip(found) {
        let mut live = Vec::new();
        for (which, mut object) in objects {
            match liveness
                .ask(&configs[which], &create.type_name, &object)
                .await
            {
                Some(Found::Gone) => {
                    say::going_away(&create.address, &object.arn);
                    continue;
                }
                Some(Found::Live { id }) => object.import_id = Some(id),
                Some(Found::NotBindable(why)) => {
                    object.import_id = None;
                    unbindable.insert(object.arn.clone(), why);
                }
                // Not asked: the ARN's rule, where there is one, is all there is.
                None => {}
            }
            live.push(object);
        }
        kept.push(live);
    }
    kept
}

/// Leave out of each create's found objects any that another address holds: one a record holds under another address (its marker is put right to that address), and one found for two creates (bound to neither). Those creates go ahead.
async fn guard(
    listers: &[AwsLister],
    holders: &Holders,
    creates: &[Create],
    found: Vec<Vec<(usize, LiveObject)>>,
) -> Vec<Vec<(usize, LiveObject)>> {
    if cut(Mechanism::BindGuard) {
        return found;
    }
    let mut wanted_by: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (create, objects) in creates.iter().zip(&found) {
        for (_, object) in objects {
            let by = wanted_by.entry(object.arn.as_str()).or_default();
            if !by.contains(&create.address.as_str()) {
                by.push(create.address.as_str());
            }
        }
    }
    let twice: BTreeMap<String, Vec<&str>> = wanted_by
        .into_iter()
        .filter(|(_, by)| by.len() > 1)
        .map(|(arn, by)| (arn.to_string(), by))
        .collect();
    for (arn, by) in &twice {
        say::marked_twice(arn, by);
    }
    let mut kept = Vec::with_capacity(found.len());
    for (create, objects) in creates.iter().zip(found) {
        let mut mine = Vec::new();
        for (which, object) in objects {
            if twice.contains_key(&object.arn) {
                continue;
            }
            match holders.holder(&object) {
                Some(holder) if holder != create.address => {
                    say::held_elsewhere(&create.address, &object.arn, holder);
                    if let Err(e) = listers[which].remark(&object, holder).await {
                        let was = object.address().unwrap_or("none");
                        say::remark_failed(&object.arn, was, holder, e);
                    }
                }
                _ => mine.push((which, object)),
            }
        }
        kept.push(mine);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::{for_stamp, listable};
    use serde_json::json;

    #[test]
    fn a_configuration_aimed_at_other_endpoints_is_not_listed_at_aws() {
        assert!(listable(&json!({"region": "eu-west-1"})));
        assert!(listable(&json!({"region": "eu-west-1", "endpoints": []})));
        assert!(listable(
            &json!({"endpoints": [{"ssm": "http://127.0.0.1:1", "resourcegroupstaggingapi": "http://127.0.0.1:1"}]})
        ));
        assert!(listable(
            &json!({"endpoint_url": "http://127.0.0.1:1", "endpoints": [{"ssm": "http://127.0.0.1:1"}]})
        ));
        assert!(!listable(
            &json!({"endpoints": [{"ssm": "http://127.0.0.1:1", "s3": null}]})
        ));
        assert!(listable(&json!({"endpoints": [{"ssm": null}]})));
    }

    #[test]
    fn a_stamp_keeps_where_to_list_and_no_credentials() {
        let config = json!({
            "region": "eu-west-1",
            "access_key": "AKIA",
            "secret_key": "s",
            "token": "t",
            "profile": null,
            "endpoints": [{"s3": "http://127.0.0.1:1", "iam": "http://127.0.0.1:2", "resourcegroupstaggingapi": "http://127.0.0.1:3", "sqs": null}],
        });
        assert_eq!(
            for_stamp(&config),
            json!({"region": "eu-west-1", "endpoints": {"iam": "http://127.0.0.1:2", "resourcegroupstaggingapi": "http://127.0.0.1:3"}})
        );
        assert_eq!(for_stamp(&json!({"region": "r"})), json!({"region": "r"}));
    }
}
