//! The collision check before a plan's creates: the live objects marked for each AWS create are listed; one is bound (imported, so the plan updates it), two or more end the run.
//!
//! It runs once the plan's changes are claimed, so no live run is creating the same
//! address meanwhile: an object marked for it and named by no record was made by a run
//! that is gone. The listing goes where the provider itself goes: the configurations the
//! provider door saw in terraform's `Configure` calls of the plan.

use serde_json::Value;

use super::command::ApplySplit;
use super::context::{Attempt, Ctx};
use super::error::{EXIT_COLLISION, RunError};
use super::{say, terraform};
use crate::cloud::aws::markers::{AwsLister, CollisionError, LiveObject, decide};
use crate::cut::{Mechanism, cut};
use crate::engine::markers::Family;
use crate::frontdoor::provider::Door;

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
fn creates(plan: &Value) -> Vec<Create> {
    plan["resource_changes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|rc| rc["mode"] == "managed")
        .filter(|rc| rc["change"]["actions"] == serde_json::json!(["create"]))
        .filter_map(|rc| {
            let provider = rc["provider_name"].as_str()?;
            let type_name = rc["type"].as_str()?;
            (Family::of(provider, type_name) == Some(Family::Aws)).then(|| Create {
                address: rc["address"].as_str().unwrap_or_default().to_string(),
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

/// List the markers of each AWS create of `plan`; bind the one object found, refuse on two or more.
pub async fn check(
    ctx: &Ctx,
    attempt: &mut Attempt,
    plan: &Value,
    split: &ApplySplit,
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
    let mut listers = Vec::new();
    for config in listing_configs(door) {
        match AwsLister::from_json(&config).await {
            Ok(l) => listers.push(l),
            Err(e) => say::no_marker_listing(e),
        }
    }
    if listers.is_empty() {
        say::no_collision_check(creates.len());
        return Ok(Checked::Clear);
    }
    let mut binds: Vec<(String, LiveObject)> = Vec::new();
    let mut collisions: Vec<CollisionError> = Vec::new();
    for create in &creates {
        let mut found = Vec::new();
        for lister in &listers {
            match lister
                .with_markers(&marking.estate, &create.type_name, &create.address)
                .await
            {
                Ok(objects) => found.extend(objects),
                Err(e) => say::marker_listing_failed(&create.address, e),
            }
        }
        found.sort_by(|a, b| a.arn.cmp(&b.arn));
        found.dedup_by(|a, b| a.arn == b.arn);
        match decide(&marking.estate, &create.address, found) {
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
    for (address, object) in &binds {
        let Some(id) = &object.import_id else {
            say::cannot_bind(address, &object.arn);
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
    }
    Ok(Checked::Bound)
}

#[cfg(test)]
mod tests {
    use super::listable;
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
}
