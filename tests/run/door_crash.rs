//! A provider plugin that dies mid-apply (cdf-provider-crash), with the real hashicorp/aws
//! provider on moto: every AWS plugin of the run SIGKILLed while the second stage's creates are
//! on their way to the cloud. `run` names the provider and the resource whose call was in
//! flight, the first stage keeps its records, no plugin outlives the run, and the next apply
//! converges with each parameter once.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testkit::cdftest::Cdftest;
use testkit::tf::{Records, Root, must, text, turn};
use testkit::{latency_proxy, procs, s3_authority, s3_endpoint};

use super::door_resume::parameters;

const PUT: &str = "AmazonSSM.PutParameter";

fn run(root: &Root, cdf: &Cdftest, args: &[String]) -> Command {
    cdf.run_cmd(root, &[], args)
}

#[test]
fn a_provider_plugin_killed_mid_apply_is_named_with_its_call_and_the_next_apply_converges() {
    let _turn = turn();
    let cdf = Cdftest::new(true);
    let root = Root::new("door-aws-stages", "crash-aws", &Records::Local);
    let prefix = testkit::unique_bucket("crash-aws");
    // The first apply reaches moto through a proxy that holds each request 0.3 s, so the
    // second stage's creates are in flight long enough to be caught there.
    let rt = testkit::runtime();
    let proxy = rt.block_on(latency_proxy::start(
        s3_authority(),
        Duration::from_millis(300),
    ));
    let with = |endpoint: &str, verb: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = verb.iter().map(|s| s.to_string()).collect();
        all.push(format!("-var=endpoint={endpoint}"));
        all.push(format!("-var=prefix={prefix}"));
        all
    };
    must(
        run(&root, &cdf, &["init".into(), "-input=false".into()])
            .output()
            .unwrap(),
        "run init",
    );
    let first = with(&proxy.endpoint, &["apply", "-auto-approve", "-input=false"]);
    let mut child = run(&root, &cdf, &first)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let run_pid = child.id();
    // a[0] and a[1] were put, the wait ran, and a create of b[*] has gone out.
    let started = Instant::now();
    while proxy.arrived(PUT) < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "the second stage's creates never went out"
        );
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    let family: Vec<u32> = procs::descendants(run_pid);
    let plugins: Vec<u32> = family
        .iter()
        .copied()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("terraform-provider-aws"))
        })
        .collect();
    assert!(!plugins.is_empty(), "no AWS plugin under run");
    plugins.iter().for_each(|p| procs::sigkill(*p));
    let out = child.wait_with_output().unwrap();
    let said = text(&out.stderr);
    assert!(!out.status.success(), "the broken apply exited 0:\n{said}");
    // run names the provider, how it died, and the resource whose call was in flight.
    assert!(
        said.contains("the provider plugin registry.terraform.io/hashicorp/aws died (killed by signal 9 (SIGKILL)) while its apply call for aws_ssm_parameter.b["),
        "{said}"
    );
    // No process the run started outlives it.
    let ended = Instant::now();
    let mut left = family.clone();
    while !left.is_empty() && ended.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
        left.retain(|p| procs::alive(*p));
    }
    left.iter().for_each(|p| procs::sigkill(*p));
    assert!(
        left.is_empty(),
        "processes of the run outlived it: {left:?}"
    );
    // The first stage's records are kept.
    assert!(root.record_at("aws_ssm_parameter.a[0]").is_some());
    assert!(root.record_at("aws_ssm_parameter.a[1]").is_some());
    drop(rt);

    // The next apply converges: it binds what the in-flight creates made; each parameter once, each recorded.
    let next = with(&s3_endpoint(), &["apply", "-auto-approve", "-input=false"]);
    let out = must(run(&root, &cdf, &next).output().unwrap(), "the next apply");
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        !said.contains("already exists") && !said.contains("ParameterAlreadyExists"),
        "{said}"
    );
    assert_eq!(
        parameters(&prefix),
        ["a0", "a1", "b0", "b1"].map(|n| format!("/{prefix}/{n}")),
        "each planned parameter once"
    );
    for address in ["aws_ssm_parameter.b[0]", "aws_ssm_parameter.b[1]"] {
        assert!(root.record_at(address).is_some(), "{address} has no record");
    }
}
