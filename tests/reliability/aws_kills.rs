//! Kill rounds on a chained apply with the real hashicorp/aws provider on moto (`make
//! reliability`): each round SIGKILLs `run`, terraform or every AWS plugin of the run at a random
//! moment of an apply that creates, updates and deletes SSM parameters; the next apply
//! converges at once, and the parameters in the cloud, counted with boto3, are exactly those the
//! records name, each once. `CHOUDOUFU_AWS_KILL_ROUNDS` sets the rounds (default 10).

use testkit as common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cdftest::cli_config;
use common::tf::{Records, Root, text, turn};
use common::{procs, s3_endpoint};

fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// Which process a round kills.
#[derive(Clone, Copy, Debug)]
enum Victim {
    /// `run` itself (its terraform and plugins follow it).
    Run,
    /// terraform under `run`.
    Terraform,
    /// Every AWS plugin of the run.
    Plugins,
}

/// The SSM parameters under `/prefix/`, as boto3 lists them from moto.
fn cloud(prefix: &str) -> BTreeSet<String> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let script = "import json, sys, boto3\nssm = boto3.client('ssm', endpoint_url=sys.argv[1], region_name='us-east-1', aws_access_key_id='testing', aws_secret_access_key='testing')\nnames = []\nfor page in ssm.get_paginator('describe_parameters').paginate(ParameterFilters=[{'Key': 'Name', 'Option': 'BeginsWith', 'Values': ['/' + sys.argv[2] + '/']}]):\n    names += [p['Name'] for p in page['Parameters']]\nprint(json.dumps(names))\n";
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(s3_endpoint())
        .arg(prefix)
        .output()
        .unwrap();
    assert!(out.status.success(), "boto3: {}", text(&out.stderr));
    let names: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    let set: BTreeSet<String> = names.iter().cloned().collect();
    assert_eq!(
        set.len(),
        names.len(),
        "a parameter listed twice: {names:?}"
    );
    set
}

/// The names the estate's SSM parameter records hold, one per record.
fn recorded(root: &Root) -> Vec<String> {
    let ls = root.cli(&["records", "ls"]).output().unwrap();
    assert!(ls.status.success(), "{}", text(&ls.stderr));
    text(&ls.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|a| a.starts_with("aws_ssm_parameter."))
        .map(|address| {
            let record = root
                .record_at(address)
                .unwrap_or_else(|| panic!("{address} is listed but has no record"));
            record["instance"]["attributes"]["name"]
                .as_str()
                .unwrap_or_else(|| panic!("{address}: no name in {record}"))
                .to_string()
        })
        .collect()
}

fn apply_args(prefix: &str, n: u64, value: &str) -> Vec<String> {
    vec![
        "apply".into(),
        "-auto-approve".into(),
        "-input=false".into(),
        format!("-var=endpoint={}", s3_endpoint()),
        format!("-var=prefix={prefix}"),
        format!("-var=n={n}"),
        format!("-var=value={value}"),
    ]
}

fn kill_rounds(rounds: usize) {
    let _turn = turn();
    let root = Root::new("door-aws-rounds", "aws-kills", &Records::Local);
    std::fs::write(
        &root.cli_config,
        cli_config(Path::new("/nonexistent"), true),
    )
    .unwrap();
    root.ok(&["init", "-input=false"]);
    let prefix = common::unique_bucket("aws-kills");
    let mut next = rng(0x5EED_AB1E);
    let opts = ["--heartbeat=1s", "--wait=2m"];
    let mut tally = [0usize; 3];
    let mut last = (2, String::from("v"));
    for round in 0..rounds {
        let n = 1 + next() % 3;
        let value = format!("r{round}");
        let args = apply_args(&prefix, n, &value);
        let strs: Vec<&str> = args.iter().map(String::as_str).collect();
        last = (n, value.clone());
        let victim = match next() % 3 {
            0 => Victim::Run,
            1 => Victim::Terraform,
            _ => Victim::Plugins,
        };
        let mut child = root
            .run_cmd_with(&opts, &strs)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let run_pid = child.id();
        let delay = Duration::from_millis(1500 + next() % 9000);
        let started = Instant::now();
        while started.elapsed() < delay && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(20));
        }
        if child.try_wait().unwrap().is_none() {
            let family = procs::descendants(run_pid);
            let targets: Vec<u32> = match victim {
                Victim::Run => vec![run_pid],
                Victim::Terraform => family
                    .iter()
                    .copied()
                    .filter(|p| procs::name(*p) == "terraform")
                    .collect(),
                Victim::Plugins => family
                    .iter()
                    .copied()
                    .filter(|p| {
                        std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
                            String::from_utf8_lossy(&c).contains("terraform-provider-aws")
                        })
                    })
                    .collect(),
            };
            targets.iter().for_each(|p| procs::sigkill(*p));
            if !targets.is_empty() {
                tally[victim as usize] += 1;
            }
        }
        let waited = Instant::now();
        while child.try_wait().unwrap().is_none() {
            assert!(
                waited.elapsed() < Duration::from_secs(120),
                "round {round}: run did not end after its {victim:?} was killed"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // The next apply starts at once and converges.
        let again = root.run_with(&opts, &strs);
        assert!(
            again.status.success(),
            "round {round} ({victim:?} killed after {delay:?}): the next apply failed:\n{}\n{}",
            text(&again.stdout),
            text(&again.stderr)
        );
        // The cloud's parameters are exactly the records', each once.
        let names = recorded(&root);
        let set: BTreeSet<String> = names.iter().cloned().collect();
        assert_eq!(
            set.len(),
            names.len(),
            "round {round}: two records name one parameter: {names:?}"
        );
        let expected: BTreeSet<String> = (0..n)
            .flat_map(|i| [format!("/{prefix}/a{i}"), format!("/{prefix}/b{i}")])
            .collect();
        assert_eq!(set, expected, "round {round}: the records");
        assert_eq!(cloud(&prefix), expected, "round {round}: the cloud (boto3)");
        eprintln!("aws kills: round {round}: {victim:?} killed after {delay:?}, n={n}; converged");
    }
    // After the last round, a plan of the same values is clean.
    let (n, value) = last;
    let mut args = apply_args(&prefix, n, &value);
    args[0] = "plan".into();
    args[1] = "-detailed-exitcode".into();
    let strs: Vec<&str> = args.iter().map(String::as_str).collect();
    let plan = root.run(&strs);
    assert_eq!(
        plan.status.code(),
        Some(0),
        "the plan after the rounds is not clean:\n{}\n{}",
        text(&plan.stdout),
        text(&plan.stderr)
    );
    eprintln!(
        "aws kills: {rounds} rounds (kills landed: run {}, terraform {}, plugins {}); every next apply converged, cloud = records",
        tally[0], tally[1], tally[2]
    );
}

#[test]
#[ignore = "long: make reliability"]
fn kill_rounds_on_a_chained_aws_apply_converge_with_the_cloud_equal_to_the_records() {
    let rounds = std::env::var("CHOUDOUFU_AWS_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    kill_rounds(rounds);
}
