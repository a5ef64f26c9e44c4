//! A record store outage in the middle of an apply of an s3 root loses nothing, as for an http
//! root: the S3 door's write fails, terraform cannot save, and `run` writes the state it kept
//! once the store answers again (the store on moto behind a proxy that refuses every connection
//! for a while).

use testkit as common;

use std::time::{Duration, Instant};

use common::fault_proxy::start_outage;
use common::s3door::{S3Root, s3_root};
use common::tf::{calls, text, turn, wait};

/// Longer than terraform's patience with its tries.
const OUTAGE: Duration = Duration::from_secs(45);

/// The outage fixture, its backend the s3 one.
fn main_tf() -> String {
    let fixture = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("terraform-fixtures/outage/main.tf"),
    )
    .unwrap();
    fixture.replace(
        "backend \"http\" {}",
        "backend \"s3\" {\n    bucket = \"BUCKET\"\n    key    = \"team/app.tfstate\"\n    region = \"us-east-1\"\n  }",
    )
}

/// `choudoufu-live run -- terraform <args>` with the store reached through `endpoint`.
fn cmd(root: &S3Root, endpoint: &str, args: &[&str]) -> std::process::Command {
    let mut c = root.root.run_cmd_with(&["--flush-timeout=3m"], args);
    c.env("AWS_ENDPOINT_URL_S3", endpoint)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_MAX_ATTEMPTS", "2")
        .env_remove("TF_WORKSPACE");
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn an_outage_mid_apply_of_an_s3_root_is_flushed_when_the_store_answers_again() {
    let root = s3_root("s3outage", &main_tf(), false).await;
    let proxy = start_outage(common::s3_authority()).await;
    let _turn = turn();
    for args in [
        &["init", "-input=false"][..],
        &["apply", "-auto-approve", "-input=false"],
    ] {
        let out = cmd(&root, &proxy.endpoint, args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    }
    let file = root.root.path().join("calls");
    let cf = format!("calls_file={}", file.display());
    let child = {
        use std::os::unix::process::CommandExt;
        let mut c = cmd(
            &root,
            &proxy.endpoint,
            &[
                "apply",
                "-auto-approve",
                "-input=false",
                "-var",
                "a=v2",
                "-var",
                "b=v2",
                "-var",
                "c=v2",
                "-var",
                "sleep_seconds=2",
                "-var",
                &cf,
            ],
        );
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0);
        c.spawn().unwrap()
    };
    let started = Instant::now();
    while !calls(&file)
        .iter()
        .any(|c| c.name == "a" && c.end.is_some())
    {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "a never finished"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    proxy.down_for(OUTAGE);
    let out = wait(child, Duration::from_secs(240));
    let all = format!("{}\n{}", text(&out.stdout), text(&out.stderr));
    assert!(
        all.contains("StoreUnavailable"),
        "the failure is named StoreUnavailable:\n{all}"
    );
    assert!(!proxy.is_down(), "the outage is over:\n{all}");
    for name in ["a", "b", "c"] {
        assert_eq!(
            root.stored_input(&format!("terraform_data.{name}"))
                .as_deref(),
            Some("v2"),
            "terraform_data.{name} is recorded as applied:\n{all}"
        );
    }
    assert_eq!(root.stored_input("terraform_data.d").as_deref(), Some("v1"));
    let plan = cmd(
        &root,
        &proxy.endpoint,
        &[
            "plan",
            "-detailed-exitcode",
            "-input=false",
            "-var",
            "a=v2",
            "-var",
            "b=v2",
            "-var",
            "c=v2",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(
        plan.status.code(),
        Some(0),
        "the next plan shows no changes:\n{}",
        text(&plan.stderr)
    );
}
