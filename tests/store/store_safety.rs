//! Store safety and history beyond S3, as far as the peers show them: azurite (blob service
//! properties, container public access; no blob versions) and gcp-storage-emulator (bucket
//! versioning, lifecycle, public access prevention, uniform access; no old generations).

use testkit as common;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::session::{RunInfo, Session, SessionError};
use choudoufu_live::store::azure::{AzureSettings, AzureStore, safety as azure_safety};
use choudoufu_live::store::gcs::{GcsSettings, GcsStore, safety as gcs_safety};
use choudoufu_live::store::guard::CheckStatus;
use choudoufu_live::store::{self, DynStore, History, RecordStore, StoreSettings, list_all};
use common::tf::text;

fn cli(root: &Path, args: &[&str]) -> Output {
    Command::new(common::tf::bin())
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap()
}

fn live_root(estate: &str, store_block: String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("live.hcl"),
        format!("live {{\n  estate = \"{estate}\"\n{store_block}}}\n"),
    )
    .unwrap();
    dir
}

fn azure_block(s: &AzureSettings, extra: &str) -> String {
    format!(
        "  record_store \"azurerm\" {{\n    storage_account_name = \"{}\"\n    container_name = \"{}\"\n    endpoint = \"{}\"\n    access_key = \"{}\"\n{extra}  }}\n",
        s.storage_account_name.as_deref().unwrap(),
        s.container_name,
        s.endpoint.as_deref().unwrap(),
        s.access_key.as_deref().unwrap()
    )
}

fn gcs_block(s: &GcsSettings) -> String {
    format!(
        "  record_store \"gcs\" {{\n    bucket = \"{}\"\n    endpoint = \"{}\"\n    skip_credentials = true\n  }}\n",
        s.bucket,
        s.endpoint.as_deref().unwrap()
    )
}

/// A session on `estate` with the guard `run` installs for `settings`.
async fn guarded(store: DynStore, settings: &StoreSettings, estate: &str) -> Session {
    Session::open(
        store,
        Layout::new(EstateName::parse(estate).unwrap()),
        RunInfo::new(ProgramStamp::default()),
    )
    .await
    .unwrap()
    .with_guard(store::guard_for(settings))
}

/// The rows of a `history` table marked current.
fn current_rows(stdout: &str) -> usize {
    stdout
        .lines()
        .filter(|l| l.trim_end().ends_with("  current"))
        .count()
}

fn doc(value: &str) -> Vec<u8> {
    common::state::doc("l", &[("db", value)])
}

#[tokio::test]
async fn azurite_container_safety_check_setup_and_the_guard() {
    let settings = common::azure_settings(&common::unique_bucket("azsafe"));
    common::create_container_with_access(&settings, Some("container")).await;
    let root = live_root("azs", azure_block(&settings, ""));
    let out = cli(root.path(), &["bucket", "check"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("FAIL  container public access: found public access level \"container\""),
        "{stdout}"
    );
    assert!(stdout.contains("??    account blob public access: could not be checked"));
    assert!(
        stdout.contains(
            "az storage account show --name devstoreaccount1 --query allowBlobPublicAccess"
        )
    );
    assert!(stdout.contains("??    account HTTPS only: could not be checked"));
    assert!(stdout.contains("ok    HTTPS:"), "{stdout}");

    // The guard refuses the public container before the first write: nothing is written.
    let kind = StoreSettings::Azure(settings.clone());
    let store: DynStore = Arc::new(AzureStore::connect(&settings));
    let session = guarded(store.clone(), &kind, "azs").await;
    match session.write_state(&doc("a")).await {
        Err(SessionError::Unsafe(e)) => {
            let message = e.to_string();
            assert!(message.contains("UnsafeRecordStore"), "{message}");
            assert!(message.contains("container public access"), "{message}");
        }
        other => panic!("expected UnsafeRecordStore, got {other:?}"),
    }
    assert!(list_all(store.as_ref(), "").await.unwrap().is_empty());

    // setup: what the data plane can set is set, the rest is named with its az command.
    let out = cli(root.path(), &["bucket", "setup"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("applied    container public access"),
        "{stdout}"
    );
    assert!(stdout.contains("not set    account HTTPS only: run `az storage account update"));
    let report = azure_safety::check(&AzureStore::connect(&settings))
        .await
        .unwrap();
    let status = |name: &str| report.checks.iter().find(|c| c.setting == name).unwrap();
    assert_eq!(
        status(azure_safety::CONTAINER_PUBLIC_ACCESS).status,
        CheckStatus::Pass
    );
    let soft = status(azure_safety::VERSIONS_OR_SOFT_DELETE);
    assert_eq!(soft.status, CheckStatus::Pass, "{soft:?}");
    assert!(soft.found.contains("soft delete on"), "{soft:?}");
    assert_eq!(
        status(azure_safety::ACCOUNT_HTTPS_ONLY).status,
        CheckStatus::Unchecked
    );
    let again = cli(root.path(), &["bucket", "setup"]);
    assert!(text(&again.stdout).contains("unchanged  container public access"));

    let session = guarded(store.clone(), &kind, "azs").await;
    session.write_state(&doc("a")).await.unwrap();
    assert!(!list_all(store.as_ref(), "").await.unwrap().is_empty());

    // skip_bucket_checks is read for azurerm too, and turns the guard off.
    let skip = live_root(
        "azs",
        azure_block(&settings, "    skip_bucket_checks = true\n"),
    );
    let config = choudoufu_live::config::LiveConfig::load(skip.path()).unwrap();
    assert!(store::guard_for(&config.store).is_none());
}

#[tokio::test]
async fn azurite_keeps_no_blob_versions_and_history_says_so() {
    let (store, settings) = common::azure_store("azhist").await;
    let store: DynStore = Arc::new(store);
    let kind = StoreSettings::Azure(settings.clone());
    for v in ["a", "b"] {
        let session = guarded(store.clone(), &kind, "azh").await;
        session.write_state(&doc(v)).await.unwrap();
    }
    let listing = store.list_versions("tofu-records/azh/").await.unwrap();
    assert!(
        matches!(&listing.history, History::CurrentOnly(why) if why.contains("azurite")),
        "{listing:?}"
    );
    let root = live_root("azh", azure_block(&settings, ""));
    let out = cli(root.path(), &["records", "history", "terraform_data.db"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("only the current version is shown"),
        "{stdout}"
    );
    assert_eq!(current_rows(&stdout), 1, "{stdout}");
    let out = cli(
        root.path(),
        &["records", "restore", "terraform_data.db", "--version", "x"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot be restored"));
}

#[tokio::test]
async fn gcs_bucket_safety_check_setup_and_the_guard_on_the_emulator() {
    let (raw, settings) = common::gcs_bucket_unsafe("gsafe").await;
    let report = gcs_safety::check(&raw).await.unwrap();
    let failing: Vec<&str> = report
        .checks
        .iter()
        .filter(|c| c.status == CheckStatus::Fail)
        .map(|c| c.setting)
        .collect();
    assert_eq!(
        failing,
        [
            gcs_safety::VERSIONING,
            gcs_safety::LIFECYCLE,
            gcs_safety::PUBLIC_ACCESS_PREVENTION,
            gcs_safety::UNIFORM_ACCESS
        ]
    );
    let root = live_root("gs", gcs_block(&settings));
    let out = cli(root.path(), &["bucket", "check"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("gcloud storage buckets update gs://"));

    let kind = StoreSettings::Gcs(settings.clone());
    let store: DynStore = Arc::new(GcsStore::connect(&settings));
    let session = guarded(store.clone(), &kind, "gs").await;
    assert!(matches!(
        session.write_state(&doc("a")).await,
        Err(SessionError::Unsafe(_))
    ));
    assert!(list_all(store.as_ref(), "").await.unwrap().is_empty());

    let out = cli(root.path(), &["bucket", "setup"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    for setting in [
        gcs_safety::VERSIONING,
        gcs_safety::LIFECYCLE,
        gcs_safety::PUBLIC_ACCESS_PREVENTION,
        gcs_safety::UNIFORM_ACCESS,
    ] {
        assert!(
            stdout.contains(&format!("applied    {setting}")),
            "{stdout}"
        );
    }
    assert!(gcs_safety::check(&raw).await.unwrap().passed());
    let again = text(&cli(root.path(), &["bucket", "setup"]).stdout);
    assert_eq!(again.matches("unchanged  ").count(), 4, "{again}");

    for v in ["a", "b"] {
        let session = guarded(store.clone(), &kind, "gs").await;
        session.write_state(&doc(v)).await.unwrap();
    }
    // The emulator saves the versioning flag but keeps no old generation: history shows the live one.
    let out = cli(root.path(), &["records", "history", "terraform_data.db"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert_eq!(current_rows(&stdout), 1, "{stdout}");
}

#[tokio::test]
async fn azurite_version_listings_page_and_give_each_blob_once() {
    let (store, settings) = common::azure_store("azpages").await;
    let store = store.with_page_size(2);
    for k in ["a", "b", "c", "d", "e"] {
        let key = format!("tofu-records/azp/r/{k}");
        store.create(&key, k.as_bytes()).await.unwrap();
    }
    let listing = store.list_versions("tofu-records/azp/r/").await.unwrap();
    let keys: Vec<&str> = listing.versions.iter().map(|v| v.key.as_str()).collect();
    assert_eq!(
        keys,
        ["a", "b", "c", "d", "e"].map(|k| format!("tofu-records/azp/r/{k}"))
    );
    assert!(
        listing
            .versions
            .iter()
            .all(|v| v.latest && v.version_id.is_none())
    );
    assert!(listing.versions.iter().all(|v| v.modified.is_some()));
    let _ = settings;
}
