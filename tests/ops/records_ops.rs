//! Operating the records: `history`, `restore`, `log`, `export`, `import`, on moto (a
//! versioned bucket) with the real terraform, on a local folder (no history), and on azurite
//! (no blob versions).

use testkit as common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::record::Record;
use choudoufu_live::engine::session::{RunInfo, Session};
use choudoufu_live::store::{DynStore, History, RecordStore};
use common::tf::{Records, Root, text};
use serde_json::Value;

/// The `id` of each run, in the order the record's versions were written (from `records show`).
fn run_id_of(root: &Root, name: &str) -> String {
    root.record(name).expect("a record")["writer"]["run_id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// The rows of a `history` table that carry a run id: (version id, op, run id, current?).
fn history_rows(stdout: &str) -> Vec<(String, String, String, bool)> {
    stdout
        .lines()
        .skip(2)
        .filter_map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            let timed = cells.get(1).is_some_and(|t| t.ends_with('Z') || *t == "-");
            (cells.len() >= 7 && timed).then(|| {
                (
                    cells[0].to_string(),
                    cells[2].to_string(),
                    cells[3].to_string(),
                    cells.last() == Some(&"current"),
                )
            })
        })
        .collect()
}

/// Every key under the estate with its version token (for "nothing else was touched").
/// Every key of the estate but its write log's entries (each record write adds one), with its version.
async fn versions_of(store: &dyn RecordStore, estate: &str) -> BTreeMap<String, String> {
    let log = format!("tofu-records/{estate}/wlog/");
    choudoufu_live::store::list_all(store, &format!("tofu-records/{estate}/"))
        .await
        .unwrap()
        .into_iter()
        .filter(|l| !l.key.starts_with(&log))
        .map(|l| (l.key, l.version.token))
        .collect()
}

async fn s3_root(tag: &str, estate: &str) -> (Root, DynStore) {
    let (store, bucket) = common::s3_store(tag).await;
    let root = Root::new(
        "demo",
        estate,
        &Records::S3 {
            bucket,
            endpoint: common::s3_endpoint(),
        },
    );
    (root, Arc::new(store))
}

#[tokio::test(flavor = "multi_thread")]
async fn history_restore_and_log_on_a_versioned_bucket() {
    let (root, store) = s3_root("hist", "ops").await;
    root.ok(&["init", "-input=false"]);
    let mut runs = Vec::new();
    for v in ["v1", "v2", "v3"] {
        root.ok(&[
            "apply",
            "-auto-approve",
            "-input=false",
            &format!("-var=db_version={v}"),
        ]);
        runs.push(run_id_of(&root, "db"));
    }
    assert_eq!(root.stored_input("db").as_deref(), Some("v3"));

    // history: three versions, newest first, each with its run id.
    let out = ok(root
        .cli(&["records", "history", "terraform_data.db"])
        .output()
        .unwrap());
    let rows = history_rows(&out);
    assert_eq!(rows.len(), 3, "{out}");
    let got: Vec<&str> = rows.iter().map(|r| r.2.as_str()).collect();
    let want: Vec<&str> = runs.iter().rev().map(String::as_str).collect();
    assert_eq!(got, want, "{out}");
    let ops: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(ops, ["update", "update", "create"], "{out}");
    assert!(rows[0].3 && !rows[1].3 && !rows[2].3, "{out}");
    let first = rows[2].0.clone();

    // A dry run shows the change and writes nothing.
    let before = versions_of(store.as_ref(), "ops").await;
    let out = ok(root
        .cli(&[
            "records",
            "restore",
            "terraform_data.db",
            "--version",
            &first,
            "--dry-run",
        ])
        .output()
        .unwrap());
    assert!(out.contains("~ attributes.input:"), "{out}");
    assert!(out.contains("v3") && out.contains("v1"), "{out}");
    assert!(out.contains("dry run: nothing was written"), "{out}");
    assert_eq!(versions_of(store.as_ref(), "ops").await, before);

    // The restore puts v1 back and touches no other record.
    let out = ok(root
        .cli(&[
            "records",
            "restore",
            "terraform_data.db",
            "--version",
            &first,
        ])
        .output()
        .unwrap());
    assert!(out.contains("replacing the current version"), "{out}");
    assert!(out.contains("next plan"), "{out}");
    assert_eq!(root.stored_input("db").as_deref(), Some("v1"));
    let after = versions_of(store.as_ref(), "ops").await;
    let db = "tofu-records/ops/r/terraform_data.db";
    for (key, v) in &before {
        if key != db {
            assert_eq!(after.get(key), Some(v), "{key} was touched");
        }
    }
    assert_eq!(after.len(), before.len());
    assert_ne!(after[db], before[db]);
    let restored = root.record("db").unwrap();
    assert_eq!(
        restored["writer"]["restored_from"],
        Value::from(first.clone())
    );
    assert!(
        restored["writer"]["log"].is_string(),
        "the restore made its write log entry first: {restored}"
    );
    // The configuration's default is v1 again: the next plan agrees with the restored record.
    let plan = root.run(&["plan", "-detailed-exitcode", "-input=false"]);
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan.stdout));

    // history: the restore on top.
    let out = ok(root
        .cli(&["records", "history", "terraform_data.db"])
        .output()
        .unwrap());
    let rows = history_rows(&out);
    assert_eq!(rows.len(), 4, "{out}");
    assert_eq!(rows[0].1, "restore", "{out}");

    // log: every write in order, with run ids; --address narrows, a future --since empties.
    let out = ok(root.cli(&["records", "log"]).output().unwrap());
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("terraform_data."))
        .collect();
    let db_ops: Vec<(&str, &str)> = lines
        .iter()
        .filter(|l| l.contains("terraform_data.db"))
        .map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            (c[1], c[3])
        })
        .collect();
    assert_eq!(
        db_ops.iter().map(|o| o.0).collect::<Vec<_>>(),
        ["create", "update", "update", "restore"],
        "{out}"
    );
    assert_eq!(
        db_ops[..3].iter().map(|o| o.1).collect::<Vec<_>>(),
        runs.iter().map(String::as_str).collect::<Vec<_>>(),
        "{out}"
    );
    let dns: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains("terraform_data.dns"))
        .collect();
    assert_eq!(dns.len(), 1, "dns was written once: {out}");
    assert!(dns[0].contains(&runs[0]), "{out}");
    let out = ok(root
        .cli(&["records", "log", "--since", "1h", "--address", "*.dns"])
        .output()
        .unwrap());
    assert_eq!(
        out.lines()
            .filter(|l| l.contains("terraform_data."))
            .count(),
        1,
        "{out}"
    );
    let out = ok(root
        .cli(&["records", "log", "--since", "2999-01-01T00:00:00Z"])
        .output()
        .unwrap());
    assert!(!out.contains("terraform_data."), "{out}");
    let bad = root
        .cli(&["records", "log", "--since", "soon"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).contains("--since"),
        "{}",
        text(&bad.stderr)
    );

    // Restoring a version that does not exist is refused by name.
    let out = root
        .cli(&[
            "records",
            "restore",
            "terraform_data.db",
            "--version",
            "nope",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no stored version nope"));
}

/// Write `value` to terraform_data.db through a session on `store` (another run's write).
async fn write_db(store: DynStore, estate: &str, value: &str) {
    let session = Session::open(
        store,
        Layout::new(EstateName::parse(estate).unwrap()),
        RunInfo::new(ProgramStamp::default()),
    )
    .await
    .unwrap();
    let report = session
        .write_state(&common::state::doc("l", &[("db", value)]))
        .await
        .unwrap();
    assert!(report.conflicts.is_empty(), "{report:?}");
}

async fn stored_db(store: &dyn RecordStore, estate: &str) -> String {
    let key = format!("tofu-records/{estate}/r/terraform_data.db");
    let stored = store.get(&key).await.unwrap().unwrap();
    let layout = Layout::new(EstateName::parse(estate).unwrap());
    let record = Record::decode(&key, &stored.bytes, &layout).unwrap();
    record.instance().unwrap()["attributes"]["input"]["value"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restore_racing_another_write_is_refused_by_name_and_the_other_write_survives() {
    let (store, bucket) = common::s3_store("race").await;
    let store: DynStore = Arc::new(store);
    write_db(store.clone(), "race", "first").await;
    write_db(store.clone(), "race", "second").await;
    let upstream = common::s3_authority();
    for round in 0..3 {
        let listing = store
            .list_versions("tofu-records/race/r/terraform_data.db")
            .await
            .unwrap();
        assert_eq!(listing.history, History::Kept);
        let oldest = listing
            .versions
            .last()
            .and_then(|v| v.version_id.clone())
            .unwrap();
        // The restore talks to moto through a proxy that holds its first PutObject.
        let gate = common::fault_proxy::start_gated(upstream.clone()).await;
        let root = Root::new(
            "demo",
            "race",
            &Records::S3 {
                bucket: bucket.clone(),
                endpoint: gate.endpoint.clone(),
            },
        );
        let restore = root
            .cli(&[
                "records",
                "restore",
                "terraform_data.db",
                "--version",
                &oldest,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        tokio::time::timeout(Duration::from_secs(60), gate.held.notified())
            .await
            .expect("the restore sent its PutObject");
        // Another run writes the record while the restore's write is on its way.
        let other = format!("other-{round}");
        write_db(store.clone(), "race", &other).await;
        gate.release.notify_one();
        let out = tokio::task::spawn_blocking(move || restore.wait_with_output().unwrap())
            .await
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(4),
            "round {round}: {stderr}\n{}",
            text(&out.stdout)
        );
        assert!(stderr.contains("RecordConflictError"), "{stderr}");
        assert!(stderr.contains("terraform_data.db"), "{stderr}");
        assert!(stderr.contains("Nothing was overwritten"), "{stderr}");
        assert_eq!(
            stored_db(store.as_ref(), "race").await,
            other,
            "round {round}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn export_is_read_by_stock_terraform_and_import_fills_an_empty_estate_once() {
    let (root, store) = s3_root("export", "src").await;
    root.init_and_apply();
    let file = root.path().join("exported.tfstate");
    let out = root
        .cli(&["records", "export", "-o", file.to_str().unwrap()])
        .output()
        .unwrap();
    ok(out);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the export holds secrets: private");
    // The same document on stdout, and the one `run` serves terraform.
    let stdout = root.cli(&["records", "export"]).output().unwrap().stdout;
    assert_eq!(stdout, std::fs::read(&file).unwrap());
    let pulled: Value = serde_json::from_slice(&root.ok(&["state", "pull"]).stdout).unwrap();
    let exported: Value = serde_json::from_slice(&stdout).unwrap();
    for field in ["lineage", "serial", "resources", "outputs"] {
        assert_eq!(pulled[field], exported[field], "{field}");
    }

    // Stock terraform reads it, in a folder of its own.
    let elsewhere = tempfile::tempdir().unwrap();
    let show = Command::new(common::tf::terraform())
        .args(["show", "-json"])
        .arg(&file)
        .current_dir(elsewhere.path())
        .env("CHECKPOINT_DISABLE", "1")
        .env("TF_CLI_CONFIG_FILE", &root.cli_config)
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap_or_else(|e| {
        panic!("terraform show -json: {e}: {}", text(&show.stderr));
    });
    let resources = shown["values"]["root_module"]["resources"]
        .as_array()
        .unwrap();
    let inputs: BTreeMap<&str, &Value> = resources
        .iter()
        .map(|r| (r["address"].as_str().unwrap(), &r["values"]["input"]))
        .collect();
    assert_eq!(inputs["terraform_data.db"], "v1");
    assert_eq!(inputs["terraform_data.dns"], "v1");

    // Import into an empty estate of another root: creates only, then the plan agrees.
    let bucket = match store.describe().strip_prefix("s3://") {
        Some(b) => b.to_string(),
        None => panic!("an s3 store"),
    };
    let target = Root::new(
        "demo",
        "dst",
        &Records::S3 {
            bucket,
            endpoint: common::s3_endpoint(),
        },
    );
    let out = ok(target
        .cli(&["records", "import", file.to_str().unwrap()])
        .output()
        .unwrap());
    assert!(out.contains("2 record(s) created"), "{out}");
    assert_eq!(target.stored_input("db").as_deref(), Some("v1"));
    target.ok(&["init", "-input=false"]);
    let plan = target.run(&["plan", "-detailed-exitcode", "-input=false"]);
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan.stdout));

    // A second import is refused by name, and writes nothing.
    let before = versions_of(store.as_ref(), "dst").await;
    let again = target
        .cli(&["records", "import", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    let stderr = text(&again.stderr);
    assert!(stderr.contains("ImportRefused"), "{stderr}");
    assert!(stderr.contains("terraform_data.db") && stderr.contains("terraform_data.dns"));
    assert!(stderr.contains("nothing was written"), "{stderr}");
    assert_eq!(versions_of(store.as_ref(), "dst").await, before);

    // A document that is not state is refused before anything is written.
    let junk = target.path().join("junk.tfstate");
    std::fs::write(&junk, "{\"version\": 3}").unwrap();
    let bad = target
        .cli(&["records", "import", junk.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(text(&bad.stderr).contains("nothing was written"));
    assert_eq!(versions_of(store.as_ref(), "dst").await, before);
}

/// A root folder (no terraform) whose live.hcl names `store_block`.
fn live_root(estate: &str, store_block: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("live.hcl"),
        format!("live {{\n  estate = \"{estate}\"\n{store_block}}}\n"),
    )
    .unwrap();
    dir
}

fn cli(root: &Path, args: &[&str]) -> Output {
    Command::new(common::tf::bin())
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test]
async fn a_local_folder_says_plainly_that_it_keeps_no_history() {
    let dir = live_root(
        "loc",
        "  record_store \"local\" {\n    path = \"records\"\n  }\n",
    );
    let store: DynStore = Arc::new(choudoufu_live::store::local::LocalStore::new(
        dir.path().join("records"),
    ));
    write_db(store.clone(), "loc", "a").await;
    write_db(store.clone(), "loc", "b").await;
    let out = cli(dir.path(), &["records", "history", "terraform_data.db"]);
    let stdout = ok(out);
    assert_eq!(history_rows(&stdout).len(), 1, "{stdout}");
    assert!(
        stdout.contains("a local folder keeps no history"),
        "{stdout}"
    );
    let out = cli(dir.path(), &["records", "log"]);
    let stdout = ok(out);
    assert!(
        stdout.contains("a local folder keeps no history"),
        "{stdout}"
    );
    let out = cli(
        dir.path(),
        &["records", "restore", "terraform_data.db", "--version", "x"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("keeps no history"));
    assert!(text(&out.stderr).contains("Nothing was written"));
    assert_eq!(stored_db(store.as_ref(), "loc").await, "b");
}

/// Versions of three keys, written in a known order, listed back two at a time: every version
/// once, each key's newest first (moto pages wrongly on KeyMarker alone; both markers are sent).
#[tokio::test]
async fn s3_version_listings_page_with_both_markers() {
    use choudoufu_live::store::{Precondition, VersionKind, WriteOutcome};
    let (store, bucket) = common::s3_store("pages").await;
    let mut written: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for k in ["a", "b", "c"] {
        let key = format!("tofu-records/pages/r/{k}");
        let mut pre = Precondition::Absent;
        for n in 0..3 {
            let WriteOutcome::Written(v) = store
                .put(&key, format!("{k}{n}").as_bytes(), &pre)
                .await
                .unwrap()
            else {
                panic!("write {key} {n}");
            };
            written
                .entry(key.clone())
                .or_default()
                .insert(0, v.version_id.clone().unwrap());
            pre = Precondition::Matches(v);
        }
    }
    // b is deleted: a delete marker on top of its three versions.
    let b = "tofu-records/pages/r/b";
    let current = store.get(b).await.unwrap().unwrap().version;
    assert!(matches!(
        store.delete(b, &current).await.unwrap(),
        WriteOutcome::Written(())
    ));
    let paged = common::s3_peer(&bucket).await.with_page_size(2);
    let listing = paged.list_versions("tofu-records/pages/").await.unwrap();
    assert_eq!(listing.history, History::Kept);
    assert_eq!(listing.versions.len(), 10, "{listing:?}");
    for (key, ids) in &written {
        let listed: Vec<_> = listing.of_key(key).collect();
        let contents: Vec<String> = listed
            .iter()
            .filter(|v| matches!(v.kind, VersionKind::Content { .. }))
            .map(|v| v.version_id.clone().unwrap())
            .collect();
        assert_eq!(&contents, ids, "{key}: {listed:?}");
        if key == b {
            assert_eq!(listed[0].kind, VersionKind::Deleted);
            assert!(listed[0].latest);
        } else {
            assert!(listed[0].latest);
        }
    }
    // An old version reads back as it was written.
    let oldest = written["tofu-records/pages/r/a"].last().unwrap();
    let stored = paged
        .get_version("tofu-records/pages/r/a", oldest)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.bytes, b"a0");
}

/// An endpoint on loopback that refuses every connection: a port bound, then closed.
fn refused_endpoint() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

/// `records ls` on a store that refuses every connection gives up in seconds, however many tries
/// a call is given (`AWS_MAX_ATTEMPTS=20` would take minutes): one line naming the endpoint and
/// one of advice, with the SDK's whole error only under `CHOUDOUFU_VERBOSE=1`.
#[test]
fn a_refused_store_fails_records_ls_in_seconds_naming_its_endpoint() {
    let endpoint = refused_endpoint();
    let root = live_root(
        "refused",
        &format!(
            "  record_store \"s3\" {{\n    bucket = \"refused-bucket\"\n    region = \"us-east-1\"\n    endpoint = \"{endpoint}\"\n  }}\n"
        ),
    );
    let ls = |verbose: bool| {
        let mut c = Command::new(common::tf::bin());
        c.arg("--root")
            .arg(root.path())
            .args(["records", "ls"])
            .env("AWS_MAX_ATTEMPTS", "20")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("NO_COLOR", "1")
            .env_remove("CHOUDOUFU_VERBOSE");
        if verbose {
            c.env("CHOUDOUFU_VERBOSE", "1");
        }
        let started = std::time::Instant::now();
        let out = c.output().unwrap();
        (out, started.elapsed())
    };
    let (out, took) = ls(false);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        took < Duration::from_secs(25),
        "took {took:?} to fail:\n{err}"
    );
    let error: Vec<&str> = err
        .lines()
        .skip_while(|l| !l.starts_with("Error:"))
        .collect();
    assert_eq!(error.len(), 2, "one line of cause, one of advice:\n{err}");
    assert!(
        error[0].contains(&endpoint) && error[0].contains("could not be reached"),
        "{err}"
    );
    assert!(error[1].contains("once it answers"), "{err}");
    for dump in ["DispatchFailure", "ConnectorError {"] {
        assert!(!err.contains(dump), "no SDK debug dump:\n{err}");
    }
    let (out, _) = ls(true);
    let err = text(&out.stderr);
    assert!(
        err.contains("ConnectorError"),
        "the whole chain under CHOUDOUFU_VERBOSE=1:\n{err}"
    );
}

/// `records ls`, `log` and `history` into a pipe whose reader has gone (`| head -1`) end quietly: no panic, no message, status 0.
#[tokio::test]
async fn a_closed_pipe_ends_records_commands_quietly() {
    let dir = live_root(
        "pipe",
        "  record_store \"local\" {\n    path = \"records\"\n  }\n",
    );
    let store: DynStore = Arc::new(choudoufu_live::store::local::LocalStore::new(
        dir.path().join("records"),
    ));
    write_db(store.clone(), "pipe", "a").await;
    for args in [
        &["records", "ls"][..],
        &["records", "log"],
        &["records", "history", "terraform_data.db"],
    ] {
        // A real pipe whose reading end is closed before the command writes its first line.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(common::tf::bin())
            .arg("--root")
            .arg(dir.path())
            .args(args)
            .env("RUST_BACKTRACE", "1")
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?} said something on a closed pipe");
    }
}
