//! Record store safety and per-estate IAM, on moto (S3 and IAM): bucket check/setup, the guard,
//! encryption, the policy's shape, `iam apply`, and two estates in one bucket.

use testkit as common;

use std::path::Path;
use std::process::{Command, Output};

use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::session::SessionError;
use choudoufu_live::engine::session::{RunInfo, Session};
use choudoufu_live::store::StoreSettings;
use choudoufu_live::store::guard::CheckStatus;
use choudoufu_live::store::s3::bucket;
use choudoufu_live::store::s3::{S3Settings, S3Store};
use choudoufu_live::store::{self, DynStore, list_all};
use common::tf::{Records, Root, text, turn};
use serde_json::{Value, json};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_choudoufu-live")
}

/// A fresh bucket on moto with none of the safety settings.
async fn unsafe_bucket(tag: &str) -> (S3Store, String) {
    let bucket = common::unique_bucket(tag);
    let store = S3Store::connect(&common::s3_settings(&bucket)).await;
    store
        .client()
        .create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("create bucket on moto");
    (store, bucket)
}

/// A root folder whose live.hcl names `bucket` on moto.
fn live_root(estate: &str, bucket: &str, extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("live.hcl"),
        format!(
            "live {{\n  estate = \"{estate}\"\n  record_store \"s3\" {{\n    bucket = \"{bucket}\"\n    region = \"us-east-1\"\n    endpoint = \"{}\"\n{extra}  }}\n}}\n",
            common::s3_endpoint()
        ),
    )
    .unwrap();
    dir
}

fn cli(root: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap()
}

fn run() -> RunInfo {
    RunInfo::new(ProgramStamp {
        commit: "c0ffee".into(),
        time: "2026-11-30T00:00:00Z".into(),
    })
}

fn doc(names: &[&str]) -> Vec<u8> {
    let secrets: Vec<(&str, &str)> = names.iter().map(|n| (*n, "secret")).collect();
    common::state::doc("l-1", &secrets)
}

/// A session on `estate` with the guard the run wrapper installs for `settings`.
async fn guarded_session(settings: &S3Settings, estate: &str) -> Session {
    let store_settings = StoreSettings::S3(settings.clone());
    let store: DynStore = store::open(&store_settings, Path::new(".")).await;
    let guard = store::guard_for(&store_settings);
    Session::open(
        store,
        Layout::new(EstateName::parse(estate).unwrap()),
        run(),
    )
    .await
    .unwrap()
    .with_guard(guard)
}

async fn all_keys(store: &S3Store, prefix: &str) -> Vec<String> {
    list_all(store, prefix)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.key)
        .collect()
}

#[tokio::test]
async fn fresh_bucket_fails_check_naming_all_three_then_setup_makes_it_pass() {
    let (store, bucket) = unsafe_bucket("check").await;
    let report = bucket::check(store.client(), &common::s3_settings(&bucket))
        .await
        .unwrap();
    assert!(!report.passed());
    let failing: Vec<&str> = report
        .checks
        .iter()
        .filter(|c| c.status == CheckStatus::Fail)
        .map(|c| c.setting)
        .collect();
    assert_eq!(
        failing,
        [
            bucket::VERSIONING,
            bucket::LIFECYCLE,
            bucket::PUBLIC_ACCESS_BLOCK
        ]
    );

    let root = live_root("prod", &bucket, "");
    let out = cli(root.path(), &["bucket", "check"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    for setting in [
        bucket::VERSIONING,
        bucket::LIFECYCLE,
        bucket::PUBLIC_ACCESS_BLOCK,
    ] {
        assert!(
            stdout.contains(&format!("FAIL  {setting}")),
            "{setting} not named as failing:\n{stdout}"
        );
    }
    assert!(stdout.contains("choudoufu-live bucket setup"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "aws s3api put-bucket-versioning --bucket {bucket}"
        )),
        "{stdout}"
    );

    let out = cli(root.path(), &["bucket", "setup"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    // The three settings and the write log's lifecycle rule.
    assert_eq!(stdout.matches("applied").count(), 4, "{stdout}");

    let out = cli(root.path(), &["bucket", "check"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(!stdout.contains("FAIL"), "{stdout}");

    // Idempotent: a second setup changes nothing.
    let out = cli(root.path(), &["bucket", "setup"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert_eq!(stdout.matches("unchanged").count(), 4, "{stdout}");
    assert!(!stdout.contains("applied"), "{stdout}");
}

#[tokio::test]
async fn setup_keeps_existing_lifecycle_rules() {
    use aws_sdk_s3::types::{
        BucketLifecycleConfiguration, ExpirationStatus, LifecycleExpiration, LifecycleRule,
        LifecycleRuleFilter,
    };
    let (store, bucket) = unsafe_bucket("keeprules").await;
    let other = LifecycleRule::builder()
        .id("logs-expiry")
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("logs/").build())
        .expiration(LifecycleExpiration::builder().days(30).build())
        .build()
        .unwrap();
    store
        .client()
        .put_bucket_lifecycle_configuration()
        .bucket(&bucket)
        .lifecycle_configuration(
            BucketLifecycleConfiguration::builder()
                .rules(other)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let report = bucket::check(store.client(), &common::s3_settings(&bucket))
        .await
        .unwrap();
    assert!(
        !report.checks[1].passed(),
        "a rule on logs/ only does not count"
    );
    bucket::setup(store.client(), &bucket).await.unwrap();
    let rules = store
        .client()
        .get_bucket_lifecycle_configuration()
        .bucket(&bucket)
        .send()
        .await
        .unwrap()
        .rules
        .unwrap_or_default();
    let ids: Vec<&str> = rules.iter().filter_map(|r| r.id()).collect();
    assert!(ids.contains(&"logs-expiry"), "{ids:?}");
    assert!(ids.contains(&bucket::LIFECYCLE_RULE_ID), "{ids:?}");
    assert!(
        bucket::check(store.client(), &common::s3_settings(&bucket))
            .await
            .unwrap()
            .passed()
    );
}

/// A store that refuses the credentials while the check runs: "could not be checked", never
/// "unsafe"; the state is kept, and the check is made again before the next write, which lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unavailable_store_is_unchecked_not_unsafe_and_checked_again() {
    let (direct, bucket) = common::s3_store("unchecked").await;
    let upstream = common::s3_authority();
    let proxy = common::fault_proxy::start_outage(upstream).await;
    let mut settings = common::s3_settings(&bucket);
    settings.endpoint = Some(proxy.endpoint.clone());
    let session = guarded_session(&settings, "prod").await;
    proxy.deny();
    let err = session.write_state(&doc(&["db"])).await.unwrap_err();
    let SessionError::Unchecked(unchecked) = &err else {
        panic!("expected SafetyUnchecked, got {err}");
    };
    assert_eq!(unchecked.store, format!("s3://{bucket}"));
    let message = err.to_string();
    assert!(message.starts_with("StoreUnavailable: "), "{message}");
    assert!(message.contains("could not be checked"), "{message}");
    assert!(
        message.contains("ExpiredToken"),
        "the last error: {message}"
    );
    assert!(
        message.contains("not a finding that the store is unsafe"),
        "{message}"
    );
    assert!(
        !message.contains("UnsafeRecordStore") && !message.contains("skip_bucket_checks"),
        "an unavailable store is not reported unsafe, nor the check advised off: {message}"
    );
    assert!(session.unwritten().await.is_some(), "the state is kept");
    assert!(
        all_keys(&direct, "").await.is_empty(),
        "nothing was written"
    );
    proxy.up();
    let report = session.write_state(&doc(&["db"])).await.unwrap();
    assert_eq!(report.created, vec!["terraform_data.db".to_string()]);
    assert!(session.unwritten().await.is_none());
    assert!(
        all_keys(&direct, "")
            .await
            .iter()
            .any(|k| k.ends_with("/r/terraform_data.db")),
        "the write landed once the check passed"
    );
}

#[tokio::test]
async fn guarded_session_refuses_unsafe_bucket_and_writes_nothing() {
    let (store, bucket) = unsafe_bucket("guard").await;
    let settings = common::s3_settings(&bucket);
    let session = guarded_session(&settings, "prod").await;
    let err = session.write_state(&doc(&["db"])).await.unwrap_err();
    let SessionError::Unsafe(unsafe_err) = &err else {
        panic!("expected UnsafeRecordStore, got {err}");
    };
    assert_eq!(unsafe_err.store, format!("s3://{bucket}"));
    assert_eq!(unsafe_err.problems.len(), 3, "{err}");
    let message = err.to_string();
    for setting in [
        bucket::VERSIONING,
        bucket::LIFECYCLE,
        bucket::PUBLIC_ACCESS_BLOCK,
    ] {
        assert!(message.contains(setting), "{message}");
    }
    assert!(message.contains("choudoufu-live bucket setup"), "{message}");
    assert!(message.contains("skip_bucket_checks"), "{message}");
    // Nothing at all was written: not even the estate record.
    assert!(all_keys(&store, "").await.is_empty());

    // Still refused on a second try, and still nothing written.
    assert!(session.write_state(&doc(&["db"])).await.is_err());
    assert!(all_keys(&store, "").await.is_empty());

    // The opt-out writes (with a warning).
    let skipping = S3Settings {
        skip_bucket_checks: true,
        ..settings.clone()
    };
    let session = guarded_session(&skipping, "prod").await;
    let report = session.write_state(&doc(&["db"])).await.unwrap();
    assert_eq!(report.created, ["terraform_data.db"]);
    assert!(!all_keys(&store, "tofu-records/prod/").await.is_empty());

    // After setup, the guarded session writes too.
    bucket::setup(store.client(), &bucket).await.unwrap();
    let session = guarded_session(&settings, "prod").await;
    let report = session.write_state(&doc(&["db", "dns"])).await.unwrap();
    assert_eq!(report.created, ["terraform_data.dns"]);
}

#[tokio::test]
async fn skip_bucket_checks_is_read_from_the_live_block() {
    let root = live_root("prod", "some-bucket", "    skip_bucket_checks = true\n");
    let config = choudoufu_live::config::LiveConfig::load(root.path()).unwrap();
    let StoreSettings::S3(s3) = &config.store else {
        panic!("not s3");
    };
    assert!(s3.skip_bucket_checks);
    assert!(store::guard_for(&config.store).is_none());

    let root = live_root("prod", "some-bucket", "");
    let config = choudoufu_live::config::LiveConfig::load(root.path()).unwrap();
    assert!(store::guard_for(&config.store).is_some());

    let root = live_root("prod", "some-bucket", "    skip_bucket_checks = \"yes\"\n");
    let err = choudoufu_live::config::LiveConfig::load(root.path()).unwrap_err();
    assert!(err.to_string().contains("skip_bucket_checks"), "{err}");
}

#[tokio::test]
async fn the_run_wrapper_refuses_an_unsafe_bucket_and_writes_nothing() {
    let (store, bucket) = unsafe_bucket("runguard").await;
    let root = Root::new(
        "demo",
        "unsafe",
        &Records::S3 {
            bucket: bucket.clone(),
            endpoint: common::s3_endpoint(),
        },
    );
    let apply = {
        let _turn = turn();
        let init = root.run(&["init", "-input=false"]);
        assert!(init.status.success(), "{}", text(&init.stderr));
        root.run(&["apply", "-auto-approve", "-input=false"])
    };
    let all = format!("{}{}", text(&apply.stdout), text(&apply.stderr));
    assert!(!apply.status.success(), "{all}");
    assert!(all.contains("UnsafeRecordStore"), "{all}");
    assert!(all_keys(&store, "").await.is_empty(), "{all}");
}

#[tokio::test]
async fn records_are_written_with_server_side_encryption() {
    let (store, bucket) = common::s3_store("sse").await;
    let settings = common::s3_settings(&bucket);
    let session = guarded_session(&settings, "prod").await;
    session.write_state(&doc(&["db"])).await.unwrap();
    let key = Layout::new(EstateName::parse("prod").unwrap()).resource_key("terraform_data.db");
    let head = store
        .client()
        .head_object()
        .bucket(&bucket)
        .key(key.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(
        head.server_side_encryption(),
        Some(&aws_sdk_s3::types::ServerSideEncryption::Aes256)
    );

    // With a KMS key: aws:kms and the key.
    let kms = S3Settings {
        kms_key_id: Some("alias/records".into()),
        ..settings.clone()
    };
    let session = guarded_session(&kms, "kms").await;
    session.write_state(&doc(&["db"])).await.unwrap();
    let key = Layout::new(EstateName::parse("kms").unwrap()).resource_key("terraform_data.db");
    let head = store
        .client()
        .head_object()
        .bucket(&bucket)
        .key(key.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(
        head.server_side_encryption(),
        Some(&aws_sdk_s3::types::ServerSideEncryption::AwsKms)
    );
    assert!(
        head.ssekms_key_id().unwrap_or_default().contains("records"),
        "{:?}",
        head.ssekms_key_id()
    );
}

fn as_list(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().map(|x| x.as_str().unwrap().to_string()).collect(),
        other => panic!("not a string or list: {other}"),
    }
}

fn printed_policy(args: &[&str]) -> Value {
    let mut all = vec!["iam", "policy"];
    all.extend_from_slice(args);
    let out = Command::new(bin()).args(&all).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the printed policy is valid JSON")
}

#[test]
fn printed_policy_is_scoped_to_the_estate_prefix_and_tag() {
    let policy = printed_policy(&[
        "--estate",
        "prod-eu",
        "--bucket",
        "acme-records",
        "--region",
        "eu-west-1",
    ]);
    assert_eq!(policy["Version"], "2012-10-17");
    let statements = policy["Statement"].as_array().unwrap();
    let object_arn = "arn:aws:s3:::acme-records/tofu-records/prod-eu/*";
    let mut saw_objects = false;
    let mut saw_list = false;
    let mut saw_resource_tag = false;
    let mut saw_request_tag = false;
    for s in statements {
        assert_eq!(s["Effect"], "Allow");
        let actions = as_list(&s["Action"]);
        let resources = as_list(&s["Resource"]);
        let s3_actions: Vec<&String> = actions.iter().filter(|a| a.starts_with("s3:")).collect();
        if !s3_actions.is_empty() {
            // No s3 action anywhere is granted on "*" or on the whole bucket's objects.
            for r in &resources {
                assert_ne!(r, "*", "{s}");
                assert!(!r.ends_with("acme-records/*"), "{s}");
                assert!(r.starts_with("arn:aws:s3:::acme-records"), "{s}");
            }
            assert!(
                s3_actions.iter().all(|a| !a.contains('*')),
                "wildcard s3 action: {s}"
            );
        }
        if actions.iter().any(|a| a == "s3:GetObject") {
            saw_objects = true;
            assert_eq!(resources, [object_arn]);
            for a in [
                "s3:GetObject",
                "s3:PutObject",
                "s3:DeleteObject",
                "s3:GetObjectTagging",
                "s3:PutObjectTagging",
            ] {
                assert!(actions.iter().any(|x| x == a), "{a} missing: {s}");
            }
        }
        if actions.iter().any(|a| a == "s3:GetBucketVersioning") {
            // The run's safety check reads bucket settings: on the bucket only, never a Put.
            assert_eq!(resources, ["arn:aws:s3:::acme-records"]);
            assert!(
                actions
                    .iter()
                    .all(|a| a.starts_with("s3:GetBucket") || a == "s3:GetLifecycleConfiguration"),
                "{s}"
            );
        }
        if actions.iter().any(|a| a == "s3:ListBucket") {
            saw_list = true;
            assert_eq!(actions, ["s3:ListBucket"]);
            assert_eq!(resources, ["arn:aws:s3:::acme-records"]);
            assert_eq!(
                s["Condition"]["StringLike"]["s3:prefix"],
                "tofu-records/prod-eu/*"
            );
        }
        let cond = &s["Condition"]["StringEquals"];
        if let Some(v) = cond.get("aws:ResourceTag/tofu-estate") {
            assert_eq!(v, "prod-eu");
            // The live markers' tag calls have a statement of their own under the same condition.
            if s["Sid"] != "LiveMarkerTagging" {
                saw_resource_tag = true;
                assert!(actions.iter().any(|a| a == "ec2:TerminateInstances"), "{s}");
            }
        }
        if let Some(v) = cond.get("aws:RequestTag/tofu-estate") {
            assert_eq!(v, "prod-eu");
            if actions.iter().any(|a| a == "ec2:RunInstances") {
                saw_request_tag = true;
            }
        }
        // Every statement that allows a write on cloud resources is tag-conditioned.
        let writes = actions.iter().any(|a| {
            !a.starts_with("s3:")
                && !a.contains(":Describe")
                && !a.contains(":Get")
                && !a.contains(":List")
        });
        if writes {
            assert!(
                cond.get("aws:ResourceTag/tofu-estate").is_some()
                    || cond.get("aws:RequestTag/tofu-estate").is_some(),
                "untagged write statement: {s}"
            );
            assert_eq!(cond["aws:RequestedRegion"], "eu-west-1", "{s}");
        }
    }
    assert!(saw_objects && saw_list && saw_resource_tag && saw_request_tag);
    // Nothing names another estate's prefix, and `prod` is not a prefix of `prod-eu`.
    let prod = printed_policy(&["--estate", "prod", "--bucket", "acme-records"]);
    let text = prod.to_string();
    assert!(text.contains("tofu-records/prod/*"));
    assert!(!text.contains("prod-eu"));
    assert!(!text.contains("tofu-records/*"));
    assert!(!text.contains("tofu-records/prod*"));
}

#[test]
fn iam_policy_refuses_bad_input() {
    let out = Command::new(bin())
        .args(["iam", "policy", "--estate", "a/b", "--bucket", "acme"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("invalid estate name"));
    let out = Command::new(bin())
        .args(["iam", "policy", "--estate", "prod", "--bucket", "Acme*"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("invalid bucket name"));
}

#[tokio::test]
async fn iam_apply_puts_the_inline_policy_once() {
    let endpoint = common::s3_endpoint();
    let iam = choudoufu_live::cloud::aws::iam::client(Some(&endpoint)).await;
    let role = common::unique_bucket("role");
    iam.create_role()
        .role_name(&role)
        .assume_role_policy_document(
            json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}).to_string(),
        )
        .send()
        .await
        .unwrap();
    let apply = |extra: &[&str]| {
        let mut args = vec![
            "iam",
            "apply",
            "--estate",
            "prod-eu",
            "--bucket",
            "acme-records",
            "--role",
            role.as_str(),
        ];
        args.extend_from_slice(extra);
        Command::new(bin()).args(&args).output().unwrap()
    };
    let out = apply(&["--endpoint", &endpoint]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.starts_with("created:"), "{stdout}");

    let names = iam
        .list_role_policies()
        .role_name(&role)
        .send()
        .await
        .unwrap()
        .policy_names;
    assert_eq!(names, ["choudoufu-live-prod-eu"]);
    let stored = iam
        .get_role_policy()
        .role_name(&role)
        .policy_name("choudoufu-live-prod-eu")
        .send()
        .await
        .unwrap()
        .policy_document;
    let decoded = percent_encoding::percent_decode_str(&stored)
        .decode_utf8()
        .unwrap()
        .to_string();
    let stored: Value = serde_json::from_str(&stored)
        .or_else(|_| serde_json::from_str(&decoded))
        .unwrap();
    assert_eq!(
        stored,
        choudoufu_live::cloud::aws::iam::policy(
            &EstateName::parse("prod-eu").unwrap(),
            "acme-records",
            None
        )
    );

    // A second apply (endpoint from the live block this time) changes nothing.
    let root = live_root("prod-eu", "acme-records", "");
    let out = apply(&["--root", root.path().to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.starts_with("unchanged:"), "{stdout}");

    // Another region is another policy: updated in place, still one inline policy.
    let out = apply(&["--endpoint", &endpoint, "--region", "eu-west-1"]);
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("updated:"), "{stdout}");
    let names = iam
        .list_role_policies()
        .role_name(&role)
        .send()
        .await
        .unwrap()
        .policy_names;
    assert_eq!(names.len(), 1);
}

#[tokio::test]
async fn two_estates_in_one_bucket_never_touch_each_other() {
    let (store, bucket) = common::s3_store("twoestates").await;
    let settings = common::s3_settings(&bucket);
    let prod = guarded_session(&settings, "prod").await;
    let prod_eu = guarded_session(&settings, "prod-eu").await;
    let (doc_a, doc_b) = (doc(&["db", "dns"]), doc(&["db", "cache"]));
    let (a, b) = tokio::join!(prod.write_state(&doc_a), prod_eu.write_state(&doc_b));
    a.unwrap();
    b.unwrap();
    let prod_keys = all_keys(&store, "tofu-records/prod/").await;
    let eu_keys = all_keys(&store, "tofu-records/prod-eu/").await;
    // _estate and two records, and the write log's entry before each record's create.
    for keys in [&prod_keys, &eu_keys] {
        let (log, state): (Vec<&String>, Vec<&String>) =
            keys.iter().partition(|k| k.contains("/wlog/"));
        assert_eq!(state.len(), 3, "{keys:?}");
        assert_eq!(log.len(), 2, "{keys:?}");
    }
    assert!(
        prod_keys
            .iter()
            .all(|k| k.starts_with("tofu-records/prod/"))
    );
    assert!(
        eu_keys
            .iter()
            .all(|k| k.starts_with("tofu-records/prod-eu/"))
    );
    let versions_before = list_all(&store, "tofu-records/prod-eu/").await.unwrap();

    // prod changes and deletes; prod-eu's records stay exactly as they were.
    prod.write_state(&doc(&["dns", "web"])).await.unwrap();
    assert_eq!(
        list_all(&store, "tofu-records/prod-eu/").await.unwrap(),
        versions_before
    );

    // Each estate's listing shows only its own, and each next write changes nothing.
    let prod_again = guarded_session(&settings, "prod").await;
    let snap = prod_again.snapshot().await;
    let addresses: Vec<&str> = snap.records.values().map(|e| e.address()).collect();
    assert_eq!(addresses, ["terraform_data.dns", "terraform_data.web"]);
    let eu_again = guarded_session(&settings, "prod-eu").await;
    let snap = eu_again.snapshot().await;
    let addresses: Vec<&str> = snap.records.values().map(|e| e.address()).collect();
    assert_eq!(addresses, ["terraform_data.cache", "terraform_data.db"]);
    assert_eq!(
        prod_again
            .write_state(&doc(&["dns", "web"]))
            .await
            .unwrap()
            .landed(),
        0
    );
    assert_eq!(
        eu_again
            .write_state(&doc(&["db", "cache"]))
            .await
            .unwrap()
            .landed(),
        0
    );

    // Records carry their estate's tag (what the IAM tag conditions key on).
    for (key, estate) in [(&prod_keys[0], "prod"), (&eu_keys[0], "prod-eu")] {
        let tags = store
            .client()
            .get_object_tagging()
            .bucket(&bucket)
            .key(key)
            .send()
            .await
            .unwrap();
        let tag = tags
            .tag_set()
            .iter()
            .find(|t| t.key() == "tofu-estate")
            .map(|t| t.value().to_string());
        assert_eq!(tag.as_deref(), Some(estate), "{key}");
    }
}

/// `bucket check` with env fit for moto and a store that may refuse; how long it took.
fn timed_check(root: &Path) -> (Output, std::time::Duration) {
    let started = std::time::Instant::now();
    let out = Command::new(bin())
        .arg("--root")
        .arg(root)
        .args(["bucket", "check"])
        .env("AWS_MAX_ATTEMPTS", "20")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("CHOUDOUFU_VERBOSE")
        .output()
        .unwrap();
    (out, started.elapsed())
}

/// `bucket check` on a store that refuses every connection gives up in seconds (not after
/// `AWS_MAX_ATTEMPTS=20` tries), naming the endpoint, with no SDK debug dump.
#[test]
fn a_refused_store_fails_bucket_check_in_seconds_naming_its_endpoint() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("live.hcl"),
        format!(
            "live {{\n  estate = \"e\"\n  record_store \"s3\" {{\n    bucket = \"refused\"\n    region = \"us-east-1\"\n    endpoint = \"{endpoint}\"\n  }}\n}}\n"
        ),
    )
    .unwrap();
    let (out, took) = timed_check(dir.path());
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        took < std::time::Duration::from_secs(25),
        "took {took:?}:\n{said}"
    );
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 2, "one line of cause, one of advice:\n{said}");
    assert!(
        lines[0].contains(&endpoint) && lines[0].contains("could not be reached"),
        "{said}"
    );
    assert!(lines[1].contains("once it answers"), "{said}");
    assert!(
        !said.contains("DispatchFailure") && !said.contains("ConnectorError {"),
        "{said}"
    );
}

/// `bucket check` of a bucket that does not exist says so and what to do (create it, or fix
/// live.hcl; `bucket setup` creates none), not "check again once it answers".
#[test]
fn a_missing_bucket_is_named_by_bucket_check_with_what_to_do() {
    let bucket = common::unique_bucket("missing");
    let root = live_root("e", &bucket, "");
    let (out, _) = timed_check(root.path());
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 2, "one line of cause, one of advice:\n{said}");
    assert!(
        lines[0].contains(&bucket)
            && lines[0].contains("does not exist")
            && lines[0].contains("NoSuchBucket"),
        "{said}"
    );
    assert!(
        lines[1].contains("does not create buckets") && lines[1].contains("live.hcl"),
        "{said}"
    );
    assert!(!said.contains("once it answers"), "{said}");
    assert!(!said.contains("ServiceError {"), "{said}");
}
