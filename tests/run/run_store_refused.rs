//! A store `run` cannot use is refused before terraform starts, in seconds, with its own reason:
//! a store that refuses every connection (a loopback port bound, then closed), and a bucket that
//! does not exist on moto.

use testkit as common;

use std::process::Output;
use std::time::{Duration, Instant};

use common::tf::{Records, Root, text};

/// An endpoint on loopback that refuses every connection.
fn refused_endpoint() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    endpoint
}

/// `run -- terraform <args>` with as many tries per store call as would take minutes; its output and how long it took.
fn timed_run(root: &Root, args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let out = root
        .run_cmd(args)
        .env("AWS_MAX_ATTEMPTS", "20")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("CHOUDOUFU_VERBOSE")
        .output()
        .unwrap();
    (out, started.elapsed())
}

#[test]
fn a_refused_store_fails_plan_and_apply_in_seconds_naming_its_endpoint() {
    let endpoint = refused_endpoint();
    let root = Root::new(
        "demo",
        "refused",
        &Records::S3 {
            bucket: "refused-bucket".into(),
            endpoint: endpoint.clone(),
        },
    );
    for args in [
        &["plan", "-input=false"][..],
        &["apply", "-auto-approve", "-input=false"][..],
    ] {
        let (out, took) = timed_run(&root, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            took < Duration::from_secs(25),
            "{args:?} took {took:?} to fail:\n{err}"
        );
        let error: Vec<&str> = err
            .lines()
            .skip_while(|l| !l.starts_with("Error:"))
            .collect();
        assert_eq!(error.len(), 2, "one line of cause, one of advice:\n{err}");
        assert!(
            error[0].contains("terraform was not started")
                && error[0].contains(&endpoint)
                && error[0].contains("could not be reached"),
            "{args:?}: {err}"
        );
        assert!(error[1].contains("once it answers"), "{err}");
        assert!(
            !err.contains("DispatchFailure") && !err.contains("ConnectorError {"),
            "no SDK debug dump:\n{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bucket_is_refused_before_terraform_starts() {
    let (_store, bucket) = common::s3_store("present").await;
    let endpoint = common::s3_endpoint();
    let root = Root::new(
        "demo",
        "missing",
        &Records::S3 {
            bucket,
            endpoint: endpoint.clone(),
        },
    );
    root.ok(&["init", "-input=false"]);
    // The user's live.hcl names a bucket that is not there (a typo, or not made yet).
    let missing = common::unique_bucket("missing");
    std::fs::write(
        root.path().join("live.hcl"),
        format!(
            "live {{\n  estate = \"missing\"\n  record_store \"s3\" {{\n    bucket = \"{missing}\"\n    region = \"us-east-1\"\n    endpoint = \"{endpoint}\"\n  }}\n}}\n"
        ),
    )
    .unwrap();
    let trace = root.path().join("trace");
    let tf = trace.display().to_string();
    let (out, _) = tokio::task::block_in_place(|| {
        timed_run(
            &root,
            &[
                "apply",
                "-auto-approve",
                "-input=false",
                "-var",
                &format!("trace_file={tf}"),
            ],
        )
    });
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let error: Vec<&str> = err
        .lines()
        .skip_while(|l| !l.starts_with("Error:"))
        .collect();
    assert_eq!(error.len(), 2, "one line of cause, one of advice:\n{err}");
    assert!(
        error[0].contains("terraform was not started")
            && error[0].contains(&missing)
            && error[0].contains("does not exist")
            && error[0].contains(&endpoint),
        "{err}"
    );
    assert!(
        error[1].contains("does not create buckets") && error[1].contains("live.hcl"),
        "what to do: {err}"
    );
    assert!(
        !err.contains("giving up after"),
        "terraform never asked the state server:\n{err}"
    );
    assert!(!trace.exists(), "nothing was applied");
    assert!(!err.contains("ServiceError {"), "no SDK debug dump:\n{err}");
}
