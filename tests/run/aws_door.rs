//! What the tests of the provider door with the real hashicorp/aws provider on moto share: a
//! root on the mirror, its variables, terraform's arguments, and boto3 to read what is live.

use testkit as common;

use std::path::Path;
use std::process::Command;

use common::cdftest::cli_config;
use common::s3_endpoint;
use common::tf::{Records, Root, text};
use serde_json::Value;

/// A copy of terraform-fixtures/`fixture` on local records for `estate`, with providers from the mirror, initialised.
pub fn mirror_root(fixture: &str, estate: &str) -> Root {
    let root = Root::new(fixture, estate, &Records::Local);
    std::fs::write(
        &root.cli_config,
        cli_config(Path::new("/nonexistent"), true),
    )
    .unwrap();
    root.ok(&["init", "-input=false"]);
    root
}

/// The root's variables: moto's endpoint, the objects' name prefix, and the set variable `set` holding `items`.
pub fn aws_vars(prefix: &str, set: &str, items: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = items.iter().map(|o| format!("\"{o}\"")).collect();
    vec![
        "-var".into(),
        format!("endpoint={}", s3_endpoint()),
        "-var".into(),
        format!("prefix={prefix}"),
        "-var".into(),
        format!("{set}=[{}]", quoted.join(",")),
    ]
}

/// Terraform's arguments: `first`, then `rest`.
pub fn with<'a>(first: &[&'a str], rest: &'a [String]) -> Vec<&'a str> {
    let mut all = first.to_vec();
    all.extend(rest.iter().map(String::as_str));
    all
}

/// Run a boto3 `script` against moto with `args` after the endpoint (`kw` holds the client arguments; `s3` and `ec2` are clients); what it prints, as JSON.
pub fn boto3(script: &str, args: &[&str]) -> Value {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let prelude = "import json, sys, boto3\nkw = dict(endpoint_url=sys.argv[1], region_name='us-east-1', aws_access_key_id='testing', aws_secret_access_key='testing')\ns3, ec2 = boto3.client('s3', **kw), boto3.client('ec2', **kw)\n";
    let out = Command::new(python)
        .arg("-c")
        .arg(format!("{prelude}{script}"))
        .arg(s3_endpoint())
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "boto3: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}
