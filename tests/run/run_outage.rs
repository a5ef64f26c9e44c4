//! A record store outage in the middle of an apply loses nothing: with the real terraform and S3
//! on moto behind a proxy that refuses every connection for a while, `run` keeps the state
//! terraform could not save and writes it when the store answers again, conditionally on the
//! versions it read, or leaves it in a recovery file that `records recover` writes later.
//!
//! The run under test gets `AWS_MAX_ATTEMPTS=2`, so one store call gives up in about a second
//! instead of half a minute: terraform's own three tries then end well inside the outage.

use testkit as common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use choudoufu_live::config::LiveConfig;
use choudoufu_live::engine::claims;
use choudoufu_live::engine::layout::Layout;
use common::fault_proxy::{Outage, start_outage};
use common::tf::{Records, Root, apply_args, calls, strs, text, turn, wait};

/// The outage the tests make: longer than terraform's patience with its three tries.
const OUTAGE: Duration = Duration::from_secs(45);

/// A bucket on moto and an outage proxy in front of it, on a runtime that lives as long as the test.
struct Peer {
    rt: tokio::runtime::Runtime,
    bucket: String,
    proxy: Outage,
}

impl Peer {
    fn new(tag: &str) -> Peer {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (_store, bucket) = rt.block_on(common::s3_store(tag));
        let upstream = common::s3_authority();
        let proxy = rt.block_on(start_outage(upstream));
        Peer { rt, bucket, proxy }
    }

    /// A root of the outage fixture whose store is reached through the proxy.
    fn root(&self, estate: &str) -> Root {
        Root::new(
            "outage",
            estate,
            &Records::S3 {
                bucket: self.bucket.clone(),
                endpoint: self.proxy.endpoint.clone(),
            },
        )
    }

    /// A root of the same estate that reaches the store directly (another run, on another network path).
    fn direct_root(&self, estate: &str) -> Root {
        Root::new(
            "outage",
            estate,
            &Records::S3 {
                bucket: self.bucket.clone(),
                endpoint: common::s3_endpoint(),
            },
        )
    }

    /// The claims and run records left in the estate of `root`, read directly from moto.
    fn claims_left(&self, root: &Root) -> (Vec<String>, usize) {
        let config = LiveConfig::load(root.path()).unwrap();
        let mut settings = common::s3_settings(&self.bucket);
        settings.endpoint = Some(common::s3_endpoint());
        self.rt.block_on(async move {
            let store: choudoufu_live::store::DynStore =
                std::sync::Arc::new(choudoufu_live::store::s3::S3Store::connect(&settings).await);
            let layout = Layout::new(config.estate.clone());
            let marks = claims::read_marks(&store, &layout)
                .await
                .unwrap()
                .into_iter()
                .map(|(m, _)| m.address)
                .collect();
            let runs = choudoufu_live::store::list_all(
                store.as_ref(),
                &format!("{}runs/", layout.prefix()),
            )
            .await
            .unwrap()
            .len();
            (marks, runs)
        })
    }
}

/// Wait until the calls file shows `name`'s provisioner finished.
fn wait_for_end(file: &Path, name: &str, limit: Duration) {
    let started = Instant::now();
    while !calls(file)
        .iter()
        .any(|c| c.name == name && c.end.is_some())
    {
        assert!(
            started.elapsed() < limit,
            "{name} did not finish within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Start the apply of a, b and c to `v2` through the proxy, and take the store away once a is done.
fn apply_through_outage(
    peer: &Peer,
    root: &Root,
    opts: &[&str],
    window: Option<Duration>,
) -> std::process::Child {
    let file = root.path().join("calls");
    let cf = file.display().to_string();
    let args = apply_args(&[
        ("a", "v2"),
        ("b", "v2"),
        ("c", "v2"),
        ("sleep_seconds", "2"),
        ("calls_file", &cf),
    ]);
    let mut cmd = root.run_cmd_with(opts, &strs(&args));
    {
        use std::os::unix::process::CommandExt;
        cmd.env("AWS_MAX_ATTEMPTS", "2")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0);
    }
    let child = cmd.spawn().unwrap();
    wait_for_end(&file, "a", Duration::from_secs(120));
    match window {
        Some(w) => peer.proxy.down_for(w),
        None => peer.proxy.down(),
    }
    child
}

fn all_text(out: &Output) -> String {
    format!("{}\n{}", text(&out.stdout), text(&out.stderr))
}

/// The whole of the estate's records as `records ls` lists them (address and version).
fn listing(root: &Root) -> String {
    let out = root.cli(&["records", "ls"]).output().unwrap();
    assert!(out.status.success(), "{}", all_text(&out));
    text(&out.stdout)
}

/// `plan -detailed-exitcode` with `vars`: 0 means no changes.
fn plan_code(root: &Root, vars: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut args = vec![
        "plan".to_string(),
        "-detailed-exitcode".into(),
        "-input=false".into(),
    ];
    for (k, v) in vars {
        args.push("-var".into());
        args.push(format!("{k}={v}"));
    }
    let out = root.run(&strs(&args));
    (out.status.code(), all_text(&out))
}

const V2: [(&str, &str); 3] = [("a", "v2"), ("b", "v2"), ("c", "v2")];

#[test]
fn an_outage_mid_apply_is_flushed_when_the_store_answers_again() {
    let peer = Peer::new("outage");
    let root = peer.root("outage-flush");
    let _turn = turn();
    root.init_and_apply();
    let child = apply_through_outage(&peer, &root, &["--flush-timeout=3m"], Some(OUTAGE));
    let out = wait(child, Duration::from_secs(240));
    let all = all_text(&out);
    assert!(
        all.contains("Failed to persist state"),
        "terraform did not report the failed persist; the outage was not longer than its patience:\n{all}"
    );
    assert!(
        all.contains("StoreUnavailable"),
        "the failure is named StoreUnavailable:\n{all}"
    );
    assert!(
        !all.contains("UnsafeRecordStore") && !all.contains("skip_bucket_checks"),
        "an unreachable store is not an unsafe one:\n{all}"
    );
    assert_eq!(out.status.code(), Some(1), "terraform's own status:\n{all}");
    assert!(!peer.proxy.is_down(), "the outage is over");
    for name in ["a", "b", "c"] {
        assert_eq!(
            root.stored_input(name).as_deref(),
            Some("v2"),
            "terraform_data.{name} is recorded as applied:\n{all}"
        );
    }
    assert_eq!(root.stored_input("d").as_deref(), Some("v1"));
    let (marks, runs) = peer.claims_left(&root);
    assert!(
        marks.is_empty() && runs == 0,
        "claims {marks:?}, {runs} run records left:\n{all}"
    );
    let (code, plan) = plan_code(&root, &V2);
    assert_eq!(code, Some(0), "the next plan shows no changes:\n{plan}");
}

#[test]
fn the_flush_leaves_another_runs_record_as_that_run_wrote_it() {
    let peer = Peer::new("outage2");
    let root = peer.root("outage-other");
    let other = peer.direct_root("outage-other");
    let _turn = turn();
    root.init_and_apply();
    other.ok(&["init", "-input=false"]);
    let child = apply_through_outage(&peer, &root, &["--flush-timeout=3m"], Some(OUTAGE));
    // While this run cannot reach the store, another run (on another path) changes d.
    let changed = other.run(&strs(&apply_args(&[("d", "v2")])));
    assert!(changed.status.success(), "{}", all_text(&changed));
    assert!(
        peer.proxy.is_down(),
        "the other run landed during the outage"
    );
    let d_written = other.record("d").expect("the other run's record of d");
    let out = wait(child, Duration::from_secs(240));
    let all = all_text(&out);
    assert!(all.contains("Failed to persist state"), "{all}");
    assert_eq!(out.status.code(), Some(1), "{all}");
    for name in ["a", "b", "c"] {
        assert_eq!(
            root.stored_input(name).as_deref(),
            Some("v2"),
            "{name}:\n{all}"
        );
    }
    assert_eq!(
        root.record("d"),
        Some(d_written),
        "the flush left d exactly as the other run wrote it:\n{all}"
    );
    let (code, plan) = plan_code(&root, &[("a", "v2"), ("b", "v2"), ("c", "v2"), ("d", "v2")]);
    assert_eq!(code, Some(0), "the next plan shows no changes:\n{plan}");
}

fn recovery_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("choudoufu-live-recovery-"))
        })
        .collect()
}

#[test]
fn a_store_away_past_the_flush_timeout_leaves_a_recovery_file_written_later() {
    use std::os::unix::fs::PermissionsExt;
    let peer = Peer::new("outage3");
    let root = peer.root("outage-rec");
    let elsewhere = peer.direct_root("outage-elsewhere");
    let _turn = turn();
    root.init_and_apply();
    let child = apply_through_outage(&peer, &root, &["--flush-timeout=5s"], None);
    let out = wait(child, Duration::from_secs(240));
    let all = all_text(&out);
    assert_eq!(
        out.status.code(),
        Some(6),
        "the state is in a recovery file:\n{all}"
    );
    let files = recovery_files(root.path());
    assert_eq!(files.len(), 1, "one recovery file in the root:\n{all}");
    let file = &files[0];
    assert!(
        all.contains(&file.file_name().unwrap().to_string_lossy().to_string()),
        "run says where:\n{all}"
    );
    assert!(all.contains("records recover"), "{all}");
    let mode = std::fs::metadata(file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the recovery file is private");
    let shown = file.display().to_string();

    // Another estate's root refuses it by name, and writes nothing.
    let refused = elsewhere
        .cli(&["records", "recover", &shown])
        .output()
        .unwrap();
    let said = all_text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(
        said.contains("RecoveryEstateMismatch")
            && said.contains("outage-rec")
            && said.contains("outage-elsewhere"),
        "{said}"
    );
    assert!(
        elsewhere.stored_input("a").is_none(),
        "nothing was written to the other estate"
    );

    // The store answers again: the file is written, conditionally.
    peer.proxy.up();
    for name in ["a", "b", "c"] {
        assert_eq!(
            root.stored_input(name).as_deref(),
            Some("v1"),
            "not written yet: {name}"
        );
    }
    let recovered = root.cli(&["records", "recover", &shown]).output().unwrap();
    let said = all_text(&recovered);
    assert_eq!(recovered.status.code(), Some(0), "{said}");
    for name in ["a", "b", "c"] {
        assert_eq!(
            root.stored_input(name).as_deref(),
            Some("v2"),
            "{name}:\n{said}"
        );
    }
    let before = listing(&root);

    // A second recover of the same file changes nothing.
    let again = root.cli(&["records", "recover", &shown]).output().unwrap();
    let said = all_text(&again);
    assert_eq!(again.status.code(), Some(0), "{said}");
    assert!(said.contains("nothing to write"), "{said}");
    assert_eq!(
        listing(&root),
        before,
        "no record was written again:\n{said}"
    );
    let (marks, _) = peer.claims_left(&root);
    assert!(marks.is_empty(), "claims left: {marks:?}");
    let (code, plan) = plan_code(&root, &V2);
    assert_eq!(code, Some(0), "the next plan shows no changes:\n{plan}");
}
