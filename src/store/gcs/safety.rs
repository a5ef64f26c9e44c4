//! The GCS record store bucket's safety: object versioning, a lifecycle rule deleting
//! noncurrent generations (and none deleting live records), public access prevention,
//! uniform bucket-level access.
//!
//! All four are bucket metadata of the JSON API, read with one `GET` of the bucket and set
//! with one `PATCH`. [`GcsGuard`] checks once per run; [`setup`] applies what is missing,
//! keeping the bucket's other lifecycle rules.

use std::sync::{Arc, Once};

use serde_json::{Value, json};
use thiserror::Error;

use super::client::GcsStore;
use super::settings::GcsSettings;
use crate::store::call::StoreCall;
use crate::store::error::StoreError;
use crate::store::guard::{
    CheckStatus, Safety, SafetyCheck, SafetyReport, SafetyStep, SafetyUnchecked, SetupOutcome,
    WriteGuard, unless_skipped,
};
use crate::store::key::ROOT_PREFIX;
use crate::store::record_store::RecordStore;

/// How many days `bucket setup` keeps a noncurrent generation.
pub const NONCURRENT_DAYS: u32 = 90;

/// The setting names, as reports and errors print them.
pub const VERSIONING: &str = "object versioning";
/// The lifecycle setting.
pub const LIFECYCLE: &str = "lifecycle rule deleting noncurrent generations";
/// Public access prevention.
pub const PUBLIC_ACCESS_PREVENTION: &str = "public access prevention";
/// Uniform bucket-level access.
pub const UNIFORM_ACCESS: &str = "uniform bucket-level access";

/// A bucket metadata call failed.
#[derive(Debug, Error)]
#[error("{store}: {op} failed: {source}")]
pub struct GcsSafetyError {
    /// The store.
    pub store: String,
    /// The JSON API call, e.g. `buckets.get`.
    pub op: &'static str,
    /// The cause.
    #[source]
    pub source: StoreError,
}

/// The lifecycle rule `bucket setup` adds.
pub fn lifecycle_rule() -> Value {
    json!({
        "action": {"type": "Delete"},
        "condition": {"daysSinceNoncurrentTime": NONCURRENT_DAYS, "matchesPrefix": [ROOT_PREFIX]}
    })
}

/// Whether a rule's prefixes reach the record keys (no prefix reaches everything).
fn reaches_records(condition: &Value) -> bool {
    match condition.get("matchesPrefix").and_then(Value::as_array) {
        None => true,
        Some(prefixes) => prefixes
            .iter()
            .filter_map(Value::as_str)
            .any(|p| ROOT_PREFIX.starts_with(p) || p.starts_with(ROOT_PREFIX)),
    }
}

/// Whether a rule's condition holds only for noncurrent generations.
fn noncurrent_only(condition: &Value) -> bool {
    condition.get("isLive") == Some(&Value::Bool(false))
        || [
            "daysSinceNoncurrentTime",
            "numNewerVersions",
            "noncurrentTimeBefore",
        ]
        .iter()
        .any(|k| condition.get(*k).is_some())
}

fn deletes(rule: &Value) -> bool {
    rule.pointer("/action/type").and_then(Value::as_str) == Some("Delete")
}

/// Whether `rule` deletes the noncurrent generations of every record key.
fn expires_noncurrent_records(rule: &Value) -> bool {
    let Some(condition) = rule.get("condition") else {
        return false;
    };
    let covers = match condition.get("matchesPrefix").and_then(Value::as_array) {
        None => true,
        Some(prefixes) => prefixes
            .iter()
            .filter_map(Value::as_str)
            .any(|p| ROOT_PREFIX.starts_with(p)),
    };
    deletes(rule)
        && noncurrent_only(condition)
        && covers
        && condition.get("matchesSuffix").is_none()
        && condition.get("matchesStorageClass").is_none()
}

/// Whether `rule` could delete a live record.
fn deletes_live_records(rule: &Value) -> bool {
    let condition = rule.get("condition").cloned().unwrap_or(Value::Null);
    deletes(rule) && !noncurrent_only(&condition) && reaches_records(&condition)
}

fn rules(meta: &Value) -> Vec<Value> {
    meta.pointer("/lifecycle/rule")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn versioning_on(meta: &Value) -> bool {
    meta.pointer("/versioning/enabled").and_then(Value::as_bool) == Some(true)
}

fn prevention_enforced(meta: &Value) -> bool {
    meta.pointer("/iamConfiguration/publicAccessPrevention")
        .and_then(Value::as_str)
        == Some("enforced")
}

fn uniform_on(meta: &Value) -> bool {
    meta.pointer("/iamConfiguration/uniformBucketLevelAccess/enabled")
        .and_then(Value::as_bool)
        == Some(true)
}

fn setup_or(gcloud: String) -> String {
    format!(
        "`choudoufu-live bucket setup --root DIR` (DIR: the root whose live block names this bucket), or `{gcloud}`"
    )
}

impl GcsStore {
    async fn metadata_for_safety(&self) -> Result<Value, GcsSafetyError> {
        self.bucket_metadata(StoreCall::BucketsGet)
            .await
            .map_err(|source| GcsSafetyError {
                store: self.describe(),
                op: "buckets.get",
                source,
            })
    }
}

/// The safety report of a bucket's metadata (pure: the one `GET` is made by [`check`]).
pub fn report_of(store: &str, bucket: &str, meta: &Value) -> SafetyReport {
    let pass = |ok: bool| {
        if ok {
            CheckStatus::Pass
        } else {
            CheckStatus::Fail
        }
    };
    let b = format!("gs://{bucket}");
    let rules = rules(meta);
    let live_deleters = rules.iter().filter(|r| deletes_live_records(r)).count();
    let has_noncurrent = rules.iter().any(expires_noncurrent_records);
    let lifecycle_found = match (has_noncurrent, live_deleters, rules.len()) {
        (_, n, _) if n > 0 => format!(
            "{n} Delete rule(s) that can delete live records under {ROOT_PREFIX} (no isLive=false or noncurrent condition)"
        ),
        (true, _, _) => "a Delete rule for noncurrent generations of records".to_string(),
        (false, _, 0) => "no lifecycle rules".to_string(),
        (false, _, n) => format!(
            "{n} lifecycle rule(s), none deleting noncurrent generations over {ROOT_PREFIX}"
        ),
    };
    SafetyReport {
        store: store.to_string(),
        checks: vec![
            SafetyCheck {
                setting: VERSIONING,
                status: pass(versioning_on(meta)),
                found: if versioning_on(meta) {
                    "enabled".into()
                } else {
                    "off".into()
                },
                fix: setup_or(format!("gcloud storage buckets update {b} --versioning")),
            },
            SafetyCheck {
                setting: LIFECYCLE,
                status: pass(has_noncurrent && live_deleters == 0),
                found: lifecycle_found,
                fix: if live_deleters > 0 {
                    format!(
                        "remove the rule(s) deleting live objects under {ROOT_PREFIX} (`gcloud storage buckets describe {b} --format='json(lifecycle_config)'`, then `gcloud storage buckets update {b} --lifecycle-file=FILE`)"
                    )
                } else {
                    setup_or(format!(
                        "gcloud storage buckets update {b} --lifecycle-file=FILE with FILE {{\"rule\":[{}]}} (this replaces the bucket's other rules; `bucket setup` keeps them)",
                        lifecycle_rule()
                    ))
                },
            },
            SafetyCheck {
                setting: PUBLIC_ACCESS_PREVENTION,
                status: pass(prevention_enforced(meta)),
                found: meta
                    .pointer("/iamConfiguration/publicAccessPrevention")
                    .and_then(Value::as_str)
                    .unwrap_or("not set")
                    .to_string(),
                fix: setup_or(format!(
                    "gcloud storage buckets update {b} --public-access-prevention"
                )),
            },
            SafetyCheck {
                setting: UNIFORM_ACCESS,
                status: pass(uniform_on(meta)),
                found: if uniform_on(meta) {
                    "enabled".into()
                } else {
                    "off (object ACLs apply)".into()
                },
                fix: setup_or(format!(
                    "gcloud storage buckets update {b} --uniform-bucket-level-access"
                )),
            },
        ],
    }
}

/// Check the four safety settings of the bucket of `store`.
pub async fn check(store: &GcsStore) -> Result<SafetyReport, GcsSafetyError> {
    let meta = store.metadata_for_safety().await?;
    Ok(report_of(&store.describe(), &store.bucket, &meta))
}

/// Apply what is missing with one `PATCH`; other lifecycle rules are kept.
pub async fn setup(store: &GcsStore) -> Result<Vec<SafetyStep>, GcsSafetyError> {
    let meta = store.metadata_for_safety().await?;
    let mut patch = serde_json::Map::new();
    let outcome = |done: bool| {
        if done {
            SetupOutcome::Unchanged
        } else {
            SetupOutcome::Applied
        }
    };
    let mut steps = Vec::new();

    let versioning = versioning_on(&meta);
    if !versioning {
        patch.insert("versioning".into(), json!({"enabled": true}));
    }
    steps.push(SafetyStep {
        setting: VERSIONING,
        outcome: outcome(versioning),
    });

    let mut rules = rules(&meta);
    let has_rule = rules.iter().any(expires_noncurrent_records);
    if !has_rule {
        rules.push(lifecycle_rule());
        patch.insert("lifecycle".into(), json!({ "rule": rules }));
    }
    let live_deleters = rules.iter().any(deletes_live_records);
    steps.push(SafetyStep {
        setting: LIFECYCLE,
        outcome: if live_deleters {
            SetupOutcome::Manual(format!(
                "remove the lifecycle rule(s) of gs://{} that delete live objects under {ROOT_PREFIX}: `bucket setup` does not remove your rules",
                store.bucket
            ))
        } else {
            outcome(has_rule)
        },
    });

    let (prevention, uniform) = (prevention_enforced(&meta), uniform_on(&meta));
    if !prevention || !uniform {
        patch.insert(
            "iamConfiguration".into(),
            json!({"uniformBucketLevelAccess": {"enabled": true}, "publicAccessPrevention": "enforced"}),
        );
    }
    steps.push(SafetyStep {
        setting: PUBLIC_ACCESS_PREVENTION,
        outcome: outcome(prevention),
    });
    steps.push(SafetyStep {
        setting: UNIFORM_ACCESS,
        outcome: outcome(uniform),
    });

    if !patch.is_empty() {
        let url = store.bucket_meta_url();
        let body = Value::Object(patch);
        let fail = |source: StoreError| GcsSafetyError {
            store: store.describe(),
            op: "buckets.patch",
            source,
        };
        let response = store
            .send(StoreCall::BucketsPatch, "", |http| {
                http.patch(&url).json(&body)
            })
            .await
            .map_err(fail)?;
        if !response.status().is_success() {
            return Err(fail(
                store.error(StoreCall::BucketsPatch, "", response).await,
            ));
        }
    }
    Ok(steps)
}

#[async_trait::async_trait]
impl Safety for GcsSettings {
    async fn report(&self) -> Result<SafetyReport, SafetyUnchecked> {
        let store = GcsStore::connect(self);
        check(&store).await.map_err(|e| {
            SafetyUnchecked::new(
                store.describe(),
                e.source.reason,
                e.to_string(),
                "the identity needs storage.buckets.get on the bucket",
            )
        })
    }
}

static SKIP_WARNED: Once = Once::new();

/// The guard for a GCS store, or none (with a warning, once) when `skip_bucket_checks` is set.
pub(super) fn guard(settings: &GcsSettings) -> Option<Arc<dyn WriteGuard>> {
    unless_skipped(
        settings.skip_bucket_checks,
        &SKIP_WARNED,
        &format!("gs://{}", settings.bucket),
        "object versioning, noncurrent expiry, public access prevention and uniform access",
        || settings.clone(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_deleting_live_records_fails_the_lifecycle_check() {
        let meta = json!({
            "versioning": {"enabled": true},
            "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": true}, "publicAccessPrevention": "enforced"},
            "lifecycle": {"rule": [lifecycle_rule()]}
        });
        assert!(report_of("gs://b", "b", &meta).passed());
        let mut bad = meta.clone();
        bad["lifecycle"]["rule"]
            .as_array_mut()
            .unwrap()
            .push(json!({"action": {"type": "Delete"}, "condition": {"age": 30}}));
        let report = report_of("gs://b", "b", &bad);
        assert!(!report.passed());
        assert!(
            report.checks[1].found.contains("live records"),
            "{report:?}"
        );
        // A rule for another prefix, or one that only changes storage class, is harmless.
        let mut other = meta;
        other["lifecycle"]["rule"].as_array_mut().unwrap().extend([
            json!({"action": {"type": "Delete"}, "condition": {"age": 1, "matchesPrefix": ["logs/"]}}),
            json!({"action": {"type": "SetStorageClass", "storageClass": "NEARLINE"}, "condition": {"age": 30}}),
        ]);
        assert!(report_of("gs://b", "b", &other).passed());
    }
}
