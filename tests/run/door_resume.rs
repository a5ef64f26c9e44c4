//! A stopped saved plan resumed under its approval (cdf-resume), with the real hashicorp/aws
//! provider on moto: `apply PLANFILE` killed after two parameters were created together, then the
//! same `apply PLANFILE` applies only the rest with no prompt; a configuration that would change
//! the rest is refused with exit 3 naming what differs.

use std::process::{Command, Stdio};
use std::time::Duration;

use testkit::cdftest::Cdftest;
use testkit::tf::{Records, Root, must, text, turn};
use testkit::{procs, s3_endpoint};

fn run(root: &Root, cdf: &Cdftest, args: &[String]) -> Command {
    cdf.run_cmd(root, &[], args)
}

/// The names of the SSM parameters under `/prefix`, sorted, as moto has them.
pub fn parameters(prefix: &str) -> Vec<String> {
    let rt = testkit::runtime();
    let v = rt.block_on(async {
        reqwest::Client::new()
            .post(format!("{}/", s3_endpoint()))
            .header("X-Amz-Target", "AmazonSSM.GetParametersByPath")
            .header("Content-Type", "application/x-amz-json-1.1")
            .header(
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=testing/20261202/us-east-1/ssm/aws4_request, SignedHeaders=host, Signature=0",
            )
            .body(serde_json::json!({ "Path": format!("/{prefix}"), "Recursive": true }).to_string())
            .send()
            .await
            .unwrap()
            .json::<serde_json::Value>()
            .await
            .unwrap()
    });
    let mut names: Vec<String> = v["Parameters"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .filter_map(|p| p["Name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

#[test]
fn a_saved_plan_killed_midway_resumes_under_its_approval_and_a_changed_rest_is_refused() {
    let _turn = turn();
    let cdf = Cdftest::new(true);
    let root = Root::new("door-aws-stages", "resume-aws", &Records::Local);
    let prefix = testkit::unique_bucket("resume-aws");
    let with = |verb: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = verb.iter().map(|s| s.to_string()).collect();
        all.push(format!("-var=endpoint={}", s3_endpoint()));
        all.push(format!("-var=prefix={prefix}"));
        all.push("-var=wait_ms=1500".into());
        all
    };
    let plain = |verb: &[&str]| -> Vec<String> { verb.iter().map(|s| s.to_string()).collect() };
    must(
        run(&root, &cdf, &plain(&["init", "-input=false"]))
            .output()
            .unwrap(),
        "run init",
    );
    must(
        run(&root, &cdf, &with(&["plan", "-input=false", "-out=tfplan"]))
            .output()
            .unwrap(),
        "the plan",
    );
    let apply = plain(&["apply", "-input=false", "tfplan"]);
    let mut child = run(&root, &cdf, &apply)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let run_pid = child.id();
    // The wait's create is sleeping: a[0] and a[1] returned, b[*] have not started.
    cdf.wait_for("ApplyResourceChange", "wait", Duration::from_secs(240));
    procs::kill_terraform_under(run_pid);
    procs::reap(&mut child, Duration::from_secs(60));
    assert_eq!(
        parameters(&prefix),
        [format!("/{prefix}/a0"), format!("/{prefix}/a1")],
        "the cloud after the kill"
    );
    assert!(root.record_at("aws_ssm_parameter.a[0]").is_some());
    assert!(root.record_at("aws_ssm_parameter.a[1]").is_some());

    // A configuration that changes the rest is refused, naming what differs; nothing more is made.
    let main = root.path().join("main.tf");
    let config = std::fs::read_to_string(&main).unwrap();
    std::fs::write(
        &main,
        config.replace("insecure_value = \"b\"", "insecure_value = \"changed\""),
    )
    .unwrap();
    let refused = run(&root, &cdf, &apply)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(3), "{said}");
    assert!(said.contains("ResumeRefusedError"), "{said}");
    assert!(
        said.contains(
            "aws_ssm_parameter.b[0]: planned values differ from the approved ones (insecure_value"
        ),
        "{said}"
    );
    assert!(!said.contains("changed\""), "a value was shown: {said}");
    assert_eq!(parameters(&prefix).len(), 2, "the refused resume applied");

    // The approved configuration: the same plan file resumes, with no prompt (stdin is closed).
    std::fs::write(&main, config).unwrap();
    let out = must(
        run(&root, &cdf, &apply)
            .stdin(Stdio::null())
            .output()
            .unwrap(),
        "the resume",
    );
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        said.contains("an earlier apply of this plan stopped after making"),
        "{said}"
    );
    assert!(
        !said.contains("already exists") && !said.contains("Enter a value"),
        "{said}"
    );
    assert_eq!(
        parameters(&prefix),
        ["a0", "a1", "b0", "b1"].map(|n| format!("/{prefix}/{n}")),
        "exactly the four planned parameters"
    );
    for address in [
        "aws_ssm_parameter.a[0]",
        "aws_ssm_parameter.a[1]",
        "aws_ssm_parameter.b[0]",
        "aws_ssm_parameter.b[1]",
        "cdftest_thing.wait",
    ] {
        assert!(root.record_at(address).is_some(), "{address} has no record");
    }
}
