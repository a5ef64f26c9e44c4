//! The write log's retention on S3, on moto: every entry is created tagged `tofu-log=entry`,
//! `bucket setup` adds the lifecycle rule expiring objects so tagged after the retention beside
//! the bucket's other rules (once), and `bucket check` reports it (a warning when it is missing,
//! since the sweep still expires entries; a failure when a rule would expire them sooner).

use testkit as common;

use std::path::Path;
use std::process::{Command, Output};

use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, ExpirationStatus, LifecycleExpiration, LifecycleRule,
    LifecycleRuleFilter, Tag,
};
use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::log_writer::LogWriter;
use choudoufu_live::engine::operation::Operation;
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::session::{RunInfo, Session};
use choudoufu_live::store::DynStore;
use choudoufu_live::store::guard::CheckStatus;
use choudoufu_live::store::s3::{S3Store, bucket};
use common::tf::text;

fn layout(name: &str) -> Layout {
    Layout::new(EstateName::parse(name).unwrap())
}

fn cli(root: &Path, args: &[&str]) -> Output {
    Command::new(common::tf::bin())
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap()
}

/// A root whose live.hcl names `bucket` on moto.
fn live_root(bucket: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("live.hcl"),
        format!(
            "live {{\n  estate = \"prod\"\n  record_store \"s3\" {{\n    bucket = \"{bucket}\"\n    region = \"us-east-1\"\n    endpoint = \"{}\"\n  }}\n}}\n",
            common::s3_endpoint()
        ),
    )
    .unwrap();
    dir
}

/// The bucket's lifecycle rules as S3 gives them back.
async fn rules(store: &S3Store) -> Vec<LifecycleRule> {
    store
        .client()
        .get_bucket_lifecycle_configuration()
        .bucket(store.bucket())
        .send()
        .await
        .unwrap()
        .rules
        .unwrap_or_default()
}

/// The tags of the object at `key`.
async fn tags(store: &S3Store, key: &str) -> Vec<(String, String)> {
    let mut tags: Vec<(String, String)> = store
        .client()
        .get_object_tagging()
        .bucket(store.bucket())
        .key(key)
        .send()
        .await
        .unwrap()
        .tag_set
        .into_iter()
        .map(|t| (t.key, t.value))
        .collect();
    tags.sort();
    tags
}

fn user_rule() -> LifecycleRule {
    LifecycleRule::builder()
        .id("logs-expiry")
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("logs/").build())
        .expiration(LifecycleExpiration::builder().days(30).build())
        .build()
        .unwrap()
}

async fn put_rules(store: &S3Store, rules: Vec<LifecycleRule>) {
    store
        .client()
        .put_bucket_lifecycle_configuration()
        .bucket(store.bucket())
        .lifecycle_configuration(
            BucketLifecycleConfiguration::builder()
                .set_rules(Some(rules))
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
}

/// The claim: `bucket setup` adds the rule expiring objects tagged `tofu-log=entry` after 7 days
/// beside the user's rules (and a second setup changes nothing), `bucket check` reports it, and
/// each write log entry is created with that tag (records are not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_adds_the_write_log_rule_and_entries_carry_its_tag() {
    let (store, name) = common::s3_store("logrule").await;
    put_rules(&store, vec![user_rule()]).await;
    let settings = common::s3_settings(&name);
    let log_check = |report: &choudoufu_live::store::guard::SafetyReport| {
        report
            .checks
            .iter()
            .find(|c| c.setting == bucket::LOG_LIFECYCLE)
            .cloned()
            .expect("bucket check reports the write log's rule")
    };
    let before = log_check(&bucket::check(store.client(), &settings).await.unwrap());
    assert_eq!(before.status, CheckStatus::Warn, "{before:?}");
    assert!(before.found.contains("the sweep alone"), "{before:?}");

    let root = live_root(&name);
    let out = cli(root.path(), &["bucket", "setup"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains(&format!("applied    {}", bucket::LOG_LIFECYCLE)),
        "{stdout}"
    );
    let after = rules(&store).await;
    let ids: Vec<&str> = after.iter().filter_map(|r| r.id()).collect();
    assert!(
        ids.contains(&"logs-expiry"),
        "the user's rule is kept: {ids:?}"
    );
    assert!(ids.contains(&bucket::LIFECYCLE_RULE_ID), "{ids:?}");
    let rule = after
        .iter()
        .find(|r| r.id() == Some(bucket::LOG_RULE_ID))
        .unwrap_or_else(|| panic!("no write log rule: {ids:?}"));
    assert_eq!(*rule.status(), ExpirationStatus::Enabled);
    assert_eq!(
        rule.expiration().and_then(|e| e.days()),
        Some(bucket::LOG_EXPIRY_DAYS)
    );
    let filter = rule.filter().expect("a filter");
    let and = filter.and().expect("the prefix and the tag");
    assert_eq!(and.prefix(), Some("tofu-records/"));
    let tagged: Vec<(&str, &str)> = and.tags().iter().map(|t| (t.key(), t.value())).collect();
    assert_eq!(tagged, [(bucket::LOG_TAG_KEY, bucket::LOG_TAG_VALUE)]);

    let out = cli(root.path(), &["bucket", "check"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains(&format!("ok    {}", bucket::LOG_LIFECYCLE)),
        "{stdout}"
    );
    // Idempotent: a second setup changes nothing, and the rules are as they were.
    let out = cli(root.path(), &["bucket", "setup"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(!stdout.contains("applied"), "{stdout}");
    assert_eq!(rules(&store).await.len(), after.len());

    // Entries carry the rule's tag beside the estate's; records only the estate's.
    let l = layout("prod");
    let direct: DynStore = std::sync::Arc::new(S3Store::connect(&settings).await);
    let record = l.resource_key("terraform_data.a");
    let entry = LogWriter::new(direct.clone(), l.clone(), "run-1")
        .log(Operation::Create, &record)
        .await
        .unwrap();
    let estate = (String::from("tofu-estate"), String::from("prod"));
    let log_tag = (
        bucket::LOG_TAG_KEY.to_string(),
        bucket::LOG_TAG_VALUE.to_string(),
    );
    assert_eq!(
        tags(&store, &entry.key(&l)).await,
        [estate.clone(), log_tag],
        "the entry carries the write log's tag"
    );
    let s = Session::new(direct, l.clone(), RunInfo::new(ProgramStamp::default()));
    s.write_state(&common::state::doc("l", &[("a", "v")]))
        .await
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(tags(&store, &record).await, [estate]);
}

/// A rule that would expire write log entries sooner than the retention fails the check: a
/// reader could miss a write whose entry went before the image's log stopped being trusted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_expiring_entries_sooner_fails_the_check() {
    let (store, name) = common::s3_store("logsoon").await;
    let soon = LifecycleRule::builder()
        .id("too-soon")
        .status(ExpirationStatus::Enabled)
        .filter(
            LifecycleRuleFilter::builder()
                .tag(
                    Tag::builder()
                        .key(bucket::LOG_TAG_KEY)
                        .value(bucket::LOG_TAG_VALUE)
                        .build()
                        .unwrap(),
                )
                .build(),
        )
        .expiration(LifecycleExpiration::builder().days(1).build())
        .build()
        .unwrap();
    put_rules(&store, vec![soon]).await;
    let report = bucket::check(store.client(), &common::s3_settings(&name))
        .await
        .unwrap();
    let check = report
        .checks
        .iter()
        .find(|c| c.setting == bucket::LOG_LIFECYCLE)
        .unwrap();
    assert_eq!(check.status, CheckStatus::Fail, "{check:?}");
    assert!(check.found.contains("too-soon"), "{check:?}");
}
