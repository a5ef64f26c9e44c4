//! A record store that hangs when a provider returns (cdf-store-away-at-return), with the real
//! hashicorp/aws provider on moto and the records on S3 (moto again) behind a proxy that reads
//! every request and answers none: the door's record writes give up under the store's policy,
//! so terraform finishes its apply and exits while the store still hangs; `run` keeps the state
//! terraform could not save and writes it once the store answers, and every parameter in the
//! cloud has its record.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testkit::cdftest::Cdftest;
use testkit::fault_proxy::start_outage;
use testkit::tf::{Records, Root, text, turn};
use testkit::{procs, s3_authority, s3_endpoint};

use super::door_resume::parameters;

/// How long terraform may take, from the store hanging, to finish the apply and exit: the
/// store's policy under the test's settings (1 s attempts, 2 tries) for each write, and
/// terraform's own three tries of its save, with room to spare.
const NOT_HELD_PAST: Duration = Duration::from_secs(60);

fn run(root: &Root, cdf: &Cdftest, opts: &[&str], args: &[String]) -> Command {
    let mut c = cdf.run_cmd(root, opts, args);
    c.env("CHOUDOUFU_S3_ATTEMPT_TIMEOUT_MS", "1000")
        .env("AWS_MAX_ATTEMPTS", "2");
    c
}

#[test]
fn a_store_that_hangs_at_a_providers_return_holds_terraform_no_longer_than_its_policy_and_loses_no_record()
 {
    let _turn = turn();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (_store, bucket) = rt.block_on(testkit::s3_store("store-hang"));
    let proxy = rt.block_on(start_outage(s3_authority()));
    let cdf = Cdftest::new(true);
    let root = Root::new(
        "door-aws-stages",
        "store-hang",
        &Records::S3 {
            bucket,
            endpoint: proxy.endpoint.clone(),
        },
    );
    let prefix = testkit::unique_bucket("store-hang");
    let mut apply: Vec<String> = ["apply", "-auto-approve", "-input=false"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    apply.push(format!("-var=endpoint={}", s3_endpoint()));
    apply.push(format!("-var=prefix={prefix}"));
    apply.push("-var=wait_ms=1500".into());
    let init = run(&root, &cdf, &[], &["init".into(), "-input=false".into()])
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", text(&init.stderr));
    // Its output goes to a file, read at the end: a pipe nobody reads could hold the run up.
    let log = root.path().join("run.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut child = run(&root, &cdf, &["--flush-timeout=3m"], &apply)
        .stdout(Stdio::from(file.try_clone().unwrap()))
        .stderr(Stdio::from(file))
        .spawn()
        .unwrap();
    let run_pid = child.id();
    // a[*] returned and were recorded; the store hangs before b[*] return.
    cdf.wait_for("ApplyResourceChange", "wait", Duration::from_secs(240));
    proxy.stall();
    let stalled = Instant::now();
    // terraform finishes the apply and exits while the store still hangs: run is flushing.
    loop {
        let terraform = procs::descendants(run_pid)
            .into_iter()
            .any(|p| procs::name(p) == "terraform");
        if !terraform {
            break;
        }
        assert!(
            stalled.elapsed() < NOT_HELD_PAST,
            "terraform was held past the store's policy: still running {:?} after the store hung",
            stalled.elapsed()
        );
        assert!(child.try_wait().unwrap().is_none(), "run ended early");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        parameters(&prefix).len(),
        4,
        "the apply did not create all four"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "run ended while the store hung"
    );
    proxy.up();
    let waited = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if waited.elapsed() > Duration::from_secs(180) {
            procs::sigkill(run_pid);
            panic!("run did not end within 3 minutes of the store answering again");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let said = std::fs::read_to_string(&log).unwrap();
    // The store hung at b[*]'s returns: the door's writes gave up, and so did terraform's save.
    assert!(
        said.contains("could not write the record at the provider's return"),
        "{said}"
    );
    assert!(said.contains("Failed to persist state"), "{said}");
    assert!(
        said.contains("the state terraform could not save was written"),
        "{said}"
    );
    assert!(!said.contains("recovery file"), "{said}");
    // Every parameter in the cloud has its record.
    for address in [
        "aws_ssm_parameter.a[0]",
        "aws_ssm_parameter.a[1]",
        "aws_ssm_parameter.b[0]",
        "aws_ssm_parameter.b[1]",
    ] {
        let record = root
            .record_at(address)
            .unwrap_or_else(|| panic!("{address} is in the cloud with no record:\n{said}"));
        assert!(
            record["instance"]["attributes"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(&format!("/{prefix}/"))),
            "{address}: {record}"
        );
    }
    drop(rt);
}
