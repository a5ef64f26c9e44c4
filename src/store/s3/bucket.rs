//! The S3 record store bucket's safety: versioning, noncurrent-version expiry, public access
//! block; and the write log's retention (a rule expiring the entries, by their tag).
//!
//! Records hold what the cloud cannot give back (generated passwords, private data), so
//! before a run's first write the bucket must keep old versions (versioning), not keep them
//! forever (a lifecycle rule expiring noncurrent versions) and never be public (all four
//! public access block settings). [`BucketGuard`] checks this once per run; [`setup`]
//! applies all three, idempotently, and the write log's rule beside them: objects tagged
//! `tofu-log=entry` expire after [`LOG_EXPIRY_DAYS`]. Without that rule the check warns (the
//! sweep of each new image still deletes old entries, and no read depends on their deletion);
//! a rule expiring entries sooner fails it (a reader trusts the log for six days).

use std::sync::{Arc, Once};

use aws_sdk_s3::Client;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, BucketVersioningStatus, ExpirationStatus, LifecycleExpiration,
    LifecycleRule, LifecycleRuleAndOperator, LifecycleRuleFilter, NoncurrentVersionExpiration,
    PublicAccessBlockConfiguration, Tag, VersioningConfiguration,
};
use thiserror::Error;

use super::client::S3Store;
pub use super::client::{LOG_TAG_KEY, LOG_TAG_VALUE};
use super::settings::S3Settings;
use crate::cut::{Mechanism, cut};
use crate::store::error::Reason;
use crate::store::guard::{
    CheckStatus, Safety, SafetyCheck, SafetyReport, SafetyStep, SafetyUnchecked, SetupOutcome,
    WriteGuard, unless_skipped,
};
use crate::store::key::ROOT_PREFIX;
use crate::store::record_store::RecordStore;

/// The ID of the lifecycle rule `bucket setup` adds.
pub const LIFECYCLE_RULE_ID: &str = "choudoufu-live-expire-noncurrent-records";
/// How many days `bucket setup` keeps a noncurrent record version.
pub const NONCURRENT_DAYS: i32 = 90;

/// The ID of the lifecycle rule `bucket setup` adds for the write log.
pub const LOG_RULE_ID: &str = "choudoufu-live-expire-write-log";
/// After how many days the write log's rule expires an entry: the log's retention (the engine's
/// `write_log::RETENTION`), which no rule may undercut.
pub const LOG_EXPIRY_DAYS: i32 = 7;
/// After how many days the write log's rule removes an entry's noncurrent version.
pub const LOG_NONCURRENT_DAYS: i32 = 1;

/// The setting names, as reports and errors print them.
pub const VERSIONING: &str = "versioning";
/// The lifecycle setting's name.
pub const LIFECYCLE: &str = "lifecycle rule expiring noncurrent versions";
/// The public access block setting's name.
pub const PUBLIC_ACCESS_BLOCK: &str = "public access block";
/// The write log rule's name.
pub const LOG_LIFECYCLE: &str = "lifecycle rule expiring write log entries";

/// A bucket administration call failed.
#[derive(Debug, Error)]
#[error("bucket {bucket}: {op} failed: {message}")]
pub struct BucketError {
    /// The bucket.
    pub bucket: String,
    /// The S3 operation, e.g. `PutBucketVersioning`.
    pub op: &'static str,
    /// What S3 said.
    pub message: String,
    /// Why it failed: no answer, the credentials refused, or another answer.
    pub reason: Reason,
}

fn api_error<E>(bucket: &str, op: &'static str, err: &SdkError<E>) -> BucketError
where
    E: std::error::Error + ProvideErrorMetadata + Send + Sync + 'static,
{
    BucketError {
        bucket: bucket.to_string(),
        op,
        message: if crate::store::error::verbose() {
            format!("{}", DisplayErrorContext(err))
        } else {
            super::client::sdk_message(err)
        },
        reason: super::client::sdk_reason(err).unwrap_or(Reason::Answered),
    }
}

fn error_code<E: ProvideErrorMetadata>(err: &SdkError<E>) -> Option<&str> {
    match err {
        SdkError::ServiceError(e) => e.err().code(),
        _ => None,
    }
}

/// The aws CLI's options that reach the same bucket (region, endpoint).
fn aws_cli_opts(settings: &S3Settings) -> String {
    let mut out = String::new();
    if let Some(region) = &settings.region {
        out.push_str(&format!(" --region {region}"));
    }
    if let Some(endpoint) = &settings.endpoint {
        out.push_str(&format!(" --endpoint-url {endpoint}"));
    }
    out
}

fn lifecycle_json() -> String {
    format!(
        "{{\"Rules\":[{{\"ID\":\"{LIFECYCLE_RULE_ID}\",\"Status\":\"Enabled\",\"Filter\":{{\"Prefix\":\"{ROOT_PREFIX}\"}},\"NoncurrentVersionExpiration\":{{\"NoncurrentDays\":{NONCURRENT_DAYS}}}}}]}}"
    )
}

fn log_lifecycle_json() -> String {
    format!(
        "{{\"Rules\":[{{\"ID\":\"{LOG_RULE_ID}\",\"Status\":\"Enabled\",\"Filter\":{{\"And\":{{\"Prefix\":\"{ROOT_PREFIX}\",\"Tags\":[{{\"Key\":\"{LOG_TAG_KEY}\",\"Value\":\"{LOG_TAG_VALUE}\"}}]}}}},\"Expiration\":{{\"Days\":{LOG_EXPIRY_DAYS}}},\"NoncurrentVersionExpiration\":{{\"NoncurrentDays\":{LOG_NONCURRENT_DAYS}}}}}]}}"
    )
}

/// The exact command that fixes `setting` on the bucket of `settings`.
pub fn fix_command(setting: &str, settings: &S3Settings) -> String {
    let bucket = &settings.bucket;
    let opts = aws_cli_opts(settings);
    let aws = match setting {
        VERSIONING => format!(
            "aws s3api put-bucket-versioning --bucket {bucket} --versioning-configuration Status=Enabled{opts}"
        ),
        LIFECYCLE => format!(
            "aws s3api put-bucket-lifecycle-configuration --bucket {bucket} --lifecycle-configuration '{}'{opts} (this replaces the bucket's other lifecycle rules; `bucket setup` keeps them)",
            lifecycle_json()
        ),
        LOG_LIFECYCLE => format!(
            "aws s3api put-bucket-lifecycle-configuration --bucket {bucket} --lifecycle-configuration '{}'{opts} (this replaces the bucket's other lifecycle rules; `bucket setup` keeps them)",
            log_lifecycle_json()
        ),
        _ => format!(
            "aws s3api put-public-access-block --bucket {bucket} --public-access-block-configuration BlockPublicAcls=true,IgnorePublicAcls=true,BlockPublicPolicy=true,RestrictPublicBuckets=true{opts}"
        ),
    };
    format!(
        "`choudoufu-live bucket setup --root DIR` (DIR: the root whose live block names this bucket), or `{aws}`"
    )
}

/// Whether `rule` expires noncurrent versions of every record key.
fn rule_expires_records(rule: &LifecycleRule) -> bool {
    if *rule.status() != ExpirationStatus::Enabled {
        return false;
    }
    let Some(expiry) = rule.noncurrent_version_expiration() else {
        return false;
    };
    if expiry.noncurrent_days().unwrap_or(0) <= 0 && expiry.newer_noncurrent_versions().is_none() {
        return false;
    }
    let covers = |prefix: Option<&str>| prefix.is_none_or(|p| ROOT_PREFIX.starts_with(p));
    match rule.filter() {
        // The legacy rule-level `Prefix`, which older buckets still carry.
        #[allow(deprecated)]
        None => covers(rule.prefix()),
        Some(f) => {
            f.tag().is_none()
                && f.and().is_none()
                && f.object_size_greater_than().is_none()
                && f.object_size_less_than().is_none()
                && covers(f.prefix())
        }
    }
}

/// Whether `rule`'s filter matches a write log entry: one carrying the entry's tag (and the
/// estate's), under the root prefix, of any size.
fn rule_matches_entries(rule: &LifecycleRule) -> bool {
    let entry_tag = |t: &Tag| t.key() == LOG_TAG_KEY && t.value() == LOG_TAG_VALUE;
    let covers = |prefix: Option<&str>| prefix.is_none_or(|p| ROOT_PREFIX.starts_with(p));
    match rule.filter() {
        #[allow(deprecated)]
        None => covers(rule.prefix()),
        Some(f) => match (f.tag(), f.and()) {
            (Some(t), _) => entry_tag(t),
            (None, Some(and)) => {
                and.tags()
                    .iter()
                    .all(|t| entry_tag(t) || t.key() == "tofu-estate")
                    && covers(and.prefix())
            }
            (None, None) => covers(f.prefix()),
        },
    }
}

/// The days after which an enabled `rule` expires the current version of what it matches.
fn expiry_days(rule: &LifecycleRule) -> Option<i32> {
    if *rule.status() != ExpirationStatus::Enabled {
        return None;
    }
    let expiry = rule.expiration()?;
    // A rule expiring at a date expires entries of any age: as soon as the next day.
    expiry.days().or(expiry.date().map(|_| 0))
}

/// How the bucket's rules stand for the write log's entries.
enum LogRule {
    /// A rule expires them, no sooner than the retention.
    Expires,
    /// None does: the sweep alone expires them.
    Missing,
    /// This rule expires them before the retention: a reader may miss a write.
    TooSoon(String, i32),
}

fn log_rule(rules: &[LifecycleRule]) -> LogRule {
    let matching: Vec<(&LifecycleRule, i32)> = rules
        .iter()
        .filter(|r| rule_matches_entries(r))
        .filter_map(|r| Some((r, expiry_days(r)?)))
        .collect();
    if let Some((r, days)) = matching.iter().find(|(_, d)| *d < LOG_EXPIRY_DAYS) {
        return LogRule::TooSoon(r.id().unwrap_or("(no ID)").to_string(), *days);
    }
    // Only a rule filtering on the entries' tag counts as theirs (a rule over every record
    // key would expire records too, which is not this check's concern).
    let tagged = |r: &LifecycleRule| {
        r.filter()
            .is_some_and(|f| f.tag().is_some() || f.and().is_some_and(|a| !a.tags().is_empty()))
    };
    if matching.iter().any(|(r, _)| tagged(r)) {
        LogRule::Expires
    } else {
        LogRule::Missing
    }
}

/// The bucket's versioning status; none when versioning was never enabled.
async fn versioning_status(
    client: &Client,
    bucket: &str,
) -> Result<Option<BucketVersioningStatus>, BucketError> {
    match client.get_bucket_versioning().bucket(bucket).send().await {
        Ok(out) => Ok(out.status),
        Err(e) => {
            // Some S3 peers (moto) answer with another XML root (`GetBucketVersioningResponse`)
            // that the SDK refuses to parse: read its `<Status>` from the 200 body instead.
            let body = e
                .raw_response()
                .filter(|r| r.status().as_u16() == 200)
                .and_then(|r| r.body().bytes())
                .map(|b| String::from_utf8_lossy(b).into_owned());
            match body {
                Some(body) if body.contains("GetBucketVersioningResponse") => {
                    Ok(xml_element(&body, "Status").map(BucketVersioningStatus::from))
                }
                _ => Err(api_error(bucket, "GetBucketVersioning", &e)),
            }
        }
    }
}

/// The text of the first `<name>...</name>` in `xml`.
fn xml_element<'a>(xml: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let len = xml.get(start..)?.find(&format!("</{name}>"))?;
    xml.get(start..start + len).map(str::trim)
}

async fn check_versioning(
    client: &Client,
    settings: &S3Settings,
) -> Result<SafetyCheck, BucketError> {
    let (ok, found) = match versioning_status(client, &settings.bucket).await? {
        Some(BucketVersioningStatus::Enabled) => (true, "Enabled".to_string()),
        Some(other) => (false, other.as_str().to_string()),
        None => (false, "never enabled".to_string()),
    };
    Ok(SafetyCheck {
        setting: VERSIONING,
        status: status(ok),
        found,
        fix: fix_command(VERSIONING, settings),
    })
}

async fn lifecycle_rules(client: &Client, bucket: &str) -> Result<Vec<LifecycleRule>, BucketError> {
    match client
        .get_bucket_lifecycle_configuration()
        .bucket(bucket)
        .send()
        .await
    {
        Ok(out) => Ok(out.rules.unwrap_or_default()),
        Err(e) if error_code(&e) == Some("NoSuchLifecycleConfiguration") => Ok(Vec::new()),
        Err(e) => Err(api_error(bucket, "GetBucketLifecycleConfiguration", &e)),
    }
}

async fn check_lifecycle(
    client: &Client,
    settings: &S3Settings,
) -> Result<SafetyCheck, BucketError> {
    let rules = lifecycle_rules(client, &settings.bucket).await?;
    let ok = rules.iter().any(rule_expires_records);
    let found = match (ok, rules.len()) {
        (true, _) => "an enabled rule expiring noncurrent record versions".to_string(),
        (false, 0) => "no lifecycle rules".to_string(),
        (false, n) => format!(
            "{n} lifecycle rule(s), none enabled with NoncurrentVersionExpiration over {ROOT_PREFIX}"
        ),
    };
    Ok(SafetyCheck {
        setting: LIFECYCLE,
        status: status(ok),
        found,
        fix: fix_command(LIFECYCLE, settings),
    })
}

async fn check_log_lifecycle(
    client: &Client,
    settings: &S3Settings,
) -> Result<SafetyCheck, BucketError> {
    let rules = lifecycle_rules(client, &settings.bucket).await?;
    let (status, found) = match log_rule(&rules) {
        LogRule::Expires => (
            CheckStatus::Pass,
            format!(
                "an enabled rule expiring objects tagged {LOG_TAG_KEY}={LOG_TAG_VALUE} after {LOG_EXPIRY_DAYS} days or more"
            ),
        ),
        LogRule::Missing => (
            CheckStatus::Warn,
            format!(
                "no rule expiring objects tagged {LOG_TAG_KEY}={LOG_TAG_VALUE}: the sweep alone expires write log entries (after each new estate image, so an estate no one reads keeps its last entries)"
            ),
        ),
        LogRule::TooSoon(id, days) => (
            CheckStatus::Fail,
            format!(
                "rule {id} expires write log entries after {days} days, before the {LOG_EXPIRY_DAYS} days a reader may still need them"
            ),
        ),
    };
    Ok(SafetyCheck {
        setting: LOG_LIFECYCLE,
        status,
        found,
        fix: fix_command(LOG_LIFECYCLE, settings),
    })
}

async fn public_access_block(
    client: &Client,
    bucket: &str,
) -> Result<Option<PublicAccessBlockConfiguration>, BucketError> {
    match client.get_public_access_block().bucket(bucket).send().await {
        Ok(out) => Ok(out.public_access_block_configuration),
        Err(e) if error_code(&e) == Some("NoSuchPublicAccessBlockConfiguration") => Ok(None),
        Err(e) => Err(api_error(bucket, "GetPublicAccessBlock", &e)),
    }
}

fn block_flags(c: &PublicAccessBlockConfiguration) -> [(&'static str, bool); 4] {
    [
        ("BlockPublicAcls", c.block_public_acls() == Some(true)),
        ("IgnorePublicAcls", c.ignore_public_acls() == Some(true)),
        ("BlockPublicPolicy", c.block_public_policy() == Some(true)),
        (
            "RestrictPublicBuckets",
            c.restrict_public_buckets() == Some(true),
        ),
    ]
}

async fn check_public_access(
    client: &Client,
    settings: &S3Settings,
) -> Result<SafetyCheck, BucketError> {
    let (ok, found) = match public_access_block(client, &settings.bucket).await? {
        None => (false, "no public access block".to_string()),
        Some(c) => {
            let off: Vec<&str> = block_flags(&c)
                .iter()
                .filter(|(_, on)| !on)
                .map(|(name, _)| *name)
                .collect();
            if off.is_empty() {
                (true, "all four settings on".to_string())
            } else {
                (false, format!("{} off", off.join(", ")))
            }
        }
    };
    Ok(SafetyCheck {
        setting: PUBLIC_ACCESS_BLOCK,
        status: status(ok),
        found,
        fix: fix_command(PUBLIC_ACCESS_BLOCK, settings),
    })
}

/// Check the three safety settings of the bucket in `settings`, and the write log's rule.
pub async fn check(client: &Client, settings: &S3Settings) -> Result<SafetyReport, BucketError> {
    Ok(SafetyReport {
        store: format!("s3://{}", settings.bucket),
        checks: vec![
            check_versioning(client, settings).await?,
            check_lifecycle(client, settings).await?,
            check_public_access(client, settings).await?,
            check_log_lifecycle(client, settings).await?,
        ],
    })
}

/// The rule expiring write log entries: tagged `tofu-log=entry` under the root prefix, after
/// the retention; their noncurrent versions (a versioned bucket keeps one) a day later.
fn log_expiry_rule(bucket: &str) -> Result<LifecycleRule, BucketError> {
    let built = |e: aws_sdk_s3::error::BuildError| BucketError {
        bucket: bucket.to_string(),
        op: "PutBucketLifecycleConfiguration",
        message: e.to_string(),
        reason: Reason::Answered,
    };
    let tag = Tag::builder()
        .key(LOG_TAG_KEY)
        .value(LOG_TAG_VALUE)
        .build()
        .map_err(built)?;
    LifecycleRule::builder()
        .id(LOG_RULE_ID)
        .status(ExpirationStatus::Enabled)
        .filter(
            LifecycleRuleFilter::builder()
                .and(
                    LifecycleRuleAndOperator::builder()
                        .prefix(ROOT_PREFIX)
                        .tags(tag)
                        .build(),
                )
                .build(),
        )
        .expiration(LifecycleExpiration::builder().days(LOG_EXPIRY_DAYS).build())
        .noncurrent_version_expiration(
            NoncurrentVersionExpiration::builder()
                .noncurrent_days(LOG_NONCURRENT_DAYS)
                .build(),
        )
        .build()
        .map_err(built)
}

/// Apply the three safety settings to `bucket`; settings already right are left alone.
///
/// Existing lifecycle rules are kept: the noncurrent-expiry rule is added beside them.
pub async fn setup(client: &Client, bucket: &str) -> Result<Vec<SafetyStep>, BucketError> {
    let mut steps = Vec::new();

    let enabled = versioning_status(client, bucket).await? == Some(BucketVersioningStatus::Enabled);
    if !enabled {
        client
            .put_bucket_versioning()
            .bucket(bucket)
            .versioning_configuration(
                VersioningConfiguration::builder()
                    .status(BucketVersioningStatus::Enabled)
                    .build(),
            )
            .send()
            .await
            .map_err(|e| api_error(bucket, "PutBucketVersioning", &e))?;
    }
    steps.push(SafetyStep {
        setting: VERSIONING,
        outcome: outcome(!enabled),
    });

    let mut rules = lifecycle_rules(client, bucket).await?;
    let has_rule = rules.iter().any(rule_expires_records);
    // The write log's rule, unless one expires the entries already, or a rule of the user's
    // expires them too soon (the check then fails naming it: setup never changes a user's rule).
    let add_log = !cut(Mechanism::LogLifecycle)
        && match log_rule(&rules) {
            LogRule::Expires => false,
            LogRule::Missing => true,
            LogRule::TooSoon(id, _) => id == LOG_RULE_ID,
        };
    if add_log {
        rules.retain(|r| r.id() != Some(LOG_RULE_ID));
        rules.push(log_expiry_rule(bucket)?);
    }
    if !has_rule {
        rules.retain(|r| r.id() != Some(LIFECYCLE_RULE_ID));
        let rule = LifecycleRule::builder()
            .id(LIFECYCLE_RULE_ID)
            .status(ExpirationStatus::Enabled)
            .filter(LifecycleRuleFilter::builder().prefix(ROOT_PREFIX).build())
            .noncurrent_version_expiration(
                NoncurrentVersionExpiration::builder()
                    .noncurrent_days(NONCURRENT_DAYS)
                    .build(),
            )
            .build()
            .map_err(|e| BucketError {
                bucket: bucket.to_string(),
                op: "PutBucketLifecycleConfiguration",
                message: e.to_string(),
                reason: Reason::Answered,
            })?;
        rules.push(rule);
    }
    if !has_rule || add_log {
        let config = BucketLifecycleConfiguration::builder()
            .set_rules(Some(rules))
            .build()
            .map_err(|e| BucketError {
                bucket: bucket.to_string(),
                op: "PutBucketLifecycleConfiguration",
                message: e.to_string(),
                reason: Reason::Answered,
            })?;
        client
            .put_bucket_lifecycle_configuration()
            .bucket(bucket)
            .lifecycle_configuration(config)
            .send()
            .await
            .map_err(|e| api_error(bucket, "PutBucketLifecycleConfiguration", &e))?;
    }
    steps.push(SafetyStep {
        setting: LIFECYCLE,
        outcome: outcome(!has_rule),
    });

    let blocked = public_access_block(client, bucket)
        .await?
        .is_some_and(|c| block_flags(&c).iter().all(|(_, on)| *on));
    if !blocked {
        client
            .put_public_access_block()
            .bucket(bucket)
            .public_access_block_configuration(
                PublicAccessBlockConfiguration::builder()
                    .block_public_acls(true)
                    .ignore_public_acls(true)
                    .block_public_policy(true)
                    .restrict_public_buckets(true)
                    .build(),
            )
            .send()
            .await
            .map_err(|e| api_error(bucket, "PutPublicAccessBlock", &e))?;
    }
    steps.push(SafetyStep {
        setting: PUBLIC_ACCESS_BLOCK,
        outcome: outcome(!blocked),
    });
    steps.push(SafetyStep {
        setting: LOG_LIFECYCLE,
        outcome: outcome(add_log),
    });
    Ok(steps)
}

/// A setting's status from whether it is as it must be (S3 reads every one of its settings).
fn status(ok: bool) -> CheckStatus {
    if ok {
        CheckStatus::Pass
    } else {
        CheckStatus::Fail
    }
}

/// What `setup` did to a setting, from whether it changed it.
fn outcome(changed: bool) -> SetupOutcome {
    if changed {
        SetupOutcome::Applied
    } else {
        SetupOutcome::Unchanged
    }
}

#[async_trait::async_trait]
impl Safety for S3Settings {
    async fn report(&self) -> Result<SafetyReport, SafetyUnchecked> {
        let store = S3Store::connect(self).await;
        check(store.client(), self).await.map_err(|e| {
            SafetyUnchecked::new(
                store.describe(),
                e.reason,
                e.to_string(),
                "the role needs s3:GetBucketVersioning, s3:GetLifecycleConfiguration and s3:GetBucketPublicAccessBlock",
            )
        })
    }
}

static SKIP_WARNED: Once = Once::new();

/// The guard for an S3 store, or none (with a warning, once) when `skip_bucket_checks` is set.
pub(super) fn guard(settings: &S3Settings) -> Option<Arc<dyn WriteGuard>> {
    unless_skipped(
        settings.skip_bucket_checks,
        &SKIP_WARNED,
        &format!("s3://{}", settings.bucket),
        "versioning, noncurrent-version expiry and public access block",
        || settings.clone(),
    )
}
