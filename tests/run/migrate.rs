//! Moving in and out with one command each: `run -- terraform init -migrate-state`, with the
//! real terraform, records on moto; out to `backend "local"`, in from `backend "local"` and
//! from terraform's own `backend "s3"` on moto.

use testkit as common;

use std::process::{Command, Output};

use common::tf::{Records, Root, terraform, text};
use serde_json::Value;

const HTTP: &str = "backend \"http\" {}";

fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "failed: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// Replace the root's backend block.
fn set_backend(root: &Root, from: &str, to: &str) {
    let main = root.path().join("main.tf");
    let tf = std::fs::read_to_string(&main).unwrap();
    assert!(tf.contains(from), "main.tf has no {from}");
    std::fs::write(&main, tf.replacen(from, to, 1)).unwrap();
}

/// Stock terraform in the root, without `run`.
fn plain(root: &Root, args: &[&str]) -> Output {
    let mut c = Command::new(terraform());
    c.args(args)
        .current_dir(root.path())
        .env("CHECKPOINT_DISABLE", "1")
        .env("TF_CLI_CONFIG_FILE", &root.cli_config)
        .env("TF_IN_AUTOMATION", "1")
        .env_remove("TF_HTTP_ADDRESS");
    if args
        .iter()
        .any(|a| matches!(*a, "apply" | "plan" | "destroy"))
    {
        c.arg("-no-color");
    }
    c.output().unwrap()
}

async fn records_root(tag: &str, estate: &str) -> Root {
    let (_, bucket) = common::s3_store(tag).await;
    Root::new(
        "demo",
        estate,
        &Records::S3 {
            bucket,
            endpoint: common::s3_endpoint(),
        },
    )
}

fn record_count(root: &Root) -> usize {
    let out = ok(root.cli(&["records", "ls"]).output().unwrap());
    text(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("terraform_data."))
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn leaving_for_backend_local_is_one_command() {
    let root = records_root("leave", "leave").await;
    root.init_and_apply();
    set_backend(&root, HTTP, "backend \"local\" {}");

    // Any other command is refused, and told how to leave.
    let refused = root.run(&["plan", "-input=false"]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = text(&refused.stderr);
    assert!(
        stderr.contains("choudoufu-live run -- terraform init -migrate-state"),
        "{stderr}"
    );

    let out = ok(root.run(&["init", "-migrate-state", "-force-copy", "-input=false"]));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("serves the estate's records as the old backend"),
        "{stderr}"
    );
    let state: Value =
        serde_json::from_slice(&std::fs::read(root.path().join("terraform.tfstate")).unwrap())
            .unwrap();
    let names: Vec<&str> = state["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["db", "dns"]);
    // Stock terraform on the local state: nothing to change. The records are left in place.
    let plan = plain(&root, &["plan", "-detailed-exitcode", "-input=false"]);
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{}{}",
        text(&plan.stdout),
        text(&plan.stderr)
    );
    assert_eq!(record_count(&root), 2);

    // Once terraform has left http, `run` refuses it as any root without backend "http".
    let after = root.run(&["init", "-migrate-state", "-force-copy", "-input=false"]);
    assert_eq!(after.status.code(), Some(1));
    assert!(text(&after.stderr).contains("replace it with backend \"http\""));
}

#[tokio::test(flavor = "multi_thread")]
async fn coming_in_from_backend_local_is_one_command() {
    let root = records_root("in-local", "inlocal").await;
    set_backend(&root, HTTP, "backend \"local\" {}");
    ok(plain(&root, &["init", "-input=false"]));
    ok(plain(&root, &["apply", "-auto-approve", "-input=false"]));
    set_backend(&root, "backend \"local\" {}", HTTP);
    let out = ok(root.run(&["init", "-migrate-state", "-force-copy", "-input=false"]));
    assert!(
        text(&out.stderr).contains("records 2 created"),
        "{}",
        text(&out.stderr)
    );
    let plan = root.run(&["plan", "-detailed-exitcode", "-input=false"]);
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan.stdout));
    assert_eq!(record_count(&root), 2);
}

/// terraform's own S3 backend block, on a bucket of its own on the same moto.
async fn stock_s3_backend() -> String {
    let (_, stock) = common::s3_store("stock").await;
    format!(
        "backend \"s3\" {{\n    bucket = \"{stock}\"\n    key = \"stock/terraform.tfstate\"\n    region = \"us-east-1\"\n    endpoints = {{ s3 = \"{}\" }}\n    use_path_style = true\n    skip_credentials_validation = true\n    skip_requesting_account_id = true\n    skip_metadata_api_check = true\n    skip_region_validation = true\n    access_key = \"testing\"\n    secret_key = \"testing\"\n  }}",
        common::s3_endpoint()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn leaving_for_backend_s3_is_one_command() {
    let root = records_root("leave-s3", "leaves3").await;
    root.init_and_apply();
    let s3 = stock_s3_backend().await;
    set_backend(&root, HTTP, &s3);
    ok(root.run(&["init", "-migrate-state", "-force-copy", "-input=false"]));
    let plan = plain(&root, &["plan", "-detailed-exitcode", "-input=false"]);
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{}{}",
        text(&plan.stdout),
        text(&plan.stderr)
    );
    let list = ok(plain(&root, &["state", "list"]));
    assert_eq!(
        text(&list.stdout).lines().count(),
        2,
        "{}",
        text(&list.stdout)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn coming_in_from_backend_s3_is_one_command() {
    let root = records_root("in-s3", "ins3").await;
    let s3 = stock_s3_backend().await;
    set_backend(&root, HTTP, &s3);
    ok(plain(&root, &["init", "-input=false"]));
    ok(plain(
        &root,
        &[
            "apply",
            "-auto-approve",
            "-input=false",
            "-var=db_version=s3",
        ],
    ));
    set_backend(&root, &s3, HTTP);
    let out = ok(root.run(&["init", "-migrate-state", "-force-copy", "-input=false"]));
    assert!(
        text(&out.stderr).contains("records 2 created"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(root.stored_input("db").as_deref(), Some("s3"));
    let plan = root.run(&[
        "plan",
        "-detailed-exitcode",
        "-input=false",
        "-var=db_version=s3",
    ]);
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan.stdout));
}

#[test]
fn a_stored_http_address_is_refused_before_terraform_starts() {
    let root = Root::new("demo", "addr", &Records::Local);
    set_backend(&root, HTTP, "backend \"local\" {}");
    std::fs::create_dir_all(root.path().join(".terraform")).unwrap();
    std::fs::write(
        root.path().join(".terraform/terraform.tfstate"),
        r#"{"version":3,"backend":{"type":"http","config":{"address":"http://127.0.0.1:9/elsewhere"}}}"#,
    )
    .unwrap();
    let out = root.run(&["init", "-migrate-state", "-force-copy", "-input=false"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("http://127.0.0.1:9/elsewhere"), "{stderr}");
    assert!(stderr.contains("not from the records"), "{stderr}");
    assert!(!root.path().join("terraform.tfstate").exists());
}
