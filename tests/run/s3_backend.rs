//! A root that keeps its `backend "s3"` block, run through `choudoufu-live run` with the real
//! terraform: its states are served by the run's S3 door from records in the backend's own
//! bucket, each workspace an estate of its own; two disjoint applies land at once; a state of
//! about 6 MB is written and read back (terraform 1.11 sends it in one PutObject; the door's
//! multipart path, which later terraform versions' uploader takes, is tested in s3_door.rs).

use testkit as common;

use std::time::Duration;

use common::s3door::{KEY, S3Root, s3_root};
use common::tf::{text, turn, wait};
use common::{s3_endpoint, s3_peer};

/// The root: the real hashicorp/aws provider on moto, two parameters of each of two resources,
/// named with the workspace.
const AWS_ROOT: &str = r#"
terraform {
  backend "s3" {
    bucket       = "BUCKET"
    key          = "team/app.tfstate"
    region       = "us-east-1"
    use_lockfile = true
  }
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "5.100.0"
    }
  }
}

variable "endpoint" {
  type = string
}

variable "prefix" {
  type = string
}

variable "a" {
  type    = string
  default = "one"
}

variable "b" {
  type    = string
  default = "one"
}

provider "aws" {
  region                      = "us-east-1"
  access_key                  = "testing"
  secret_key                  = "testing"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  skip_requesting_account_id  = true
  endpoints {
    ssm = var.endpoint
  }
}

resource "aws_ssm_parameter" "a" {
  count          = 2
  name           = "/${var.prefix}/${terraform.workspace}/a${count.index}"
  type           = "String"
  insecure_value = var.a
}

resource "aws_ssm_parameter" "b" {
  count          = 2
  name           = "/${var.prefix}/${terraform.workspace}/b${count.index}"
  type           = "String"
  insecure_value = var.b
}

output "workspace" {
  value = terraform.workspace
}
"#;

async fn keys(bucket: &str, prefix: &str) -> Vec<String> {
    let store = s3_peer(bucket).await;
    choudoufu_live::store::list_all(&store, prefix)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.key)
        .collect()
}

fn apply<'a>(vars: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["apply", "-auto-approve", "-input=false"];
    args.extend_from_slice(extra);
    for v in vars {
        args.push("-var");
        args.push(v);
    }
    args
}

fn pulled(root: &S3Root) -> serde_json::Value {
    serde_json::from_slice(&root.ok(&["state", "pull"]).stdout).unwrap()
}

/// The same root with terraform_data in place of the parameters: no provider process.
const DATA_ROOT: &str = r#"
terraform {
  backend "s3" {
    bucket       = "BUCKET"
    key          = "team/app.tfstate"
    region       = "us-east-1"
    use_lockfile = true
  }
}

variable "endpoint" {
  type = string
}

variable "prefix" {
  type = string
}

variable "a" {
  type    = string
  default = "one"
}

variable "b" {
  type    = string
  default = "one"
}

resource "terraform_data" "a" {
  count = 2
  input = { name = "/${var.prefix}/${terraform.workspace}/a${count.index}", value = var.a }
}

resource "terraform_data" "b" {
  count = 2
  input = { name = "/${var.prefix}/${terraform.workspace}/b${count.index}", value = var.b }
}

output "workspace" {
  value = terraform.workspace
}
"#;

/// Each instance's (name, value) in a pulled state.
type Named = fn(&serde_json::Value) -> (String, String);

fn instances(state: &serde_json::Value, named: Named) -> Vec<(String, String)> {
    state["resources"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["instances"].as_array().unwrap().clone())
        .map(|i| named(&i["attributes"]))
        .collect()
}

/// One root, two workspaces, two disjoint applies at once: `kind` is the resource type of
/// `a` and `b`, `named` reads an instance's name and value.
async fn workspaces_and_disjoint_applies(root: S3Root, kind: &str, named: Named) {
    let turn = turn();
    let prefix = format!("s3ws-{}", uuid::Uuid::new_v4().simple());
    let vars = vec![
        format!("endpoint={}", s3_endpoint()),
        format!("prefix={prefix}"),
    ];
    root.ok(&["init", "-input=false"]);
    root.ok(&apply(&vars, &[]));
    // Two applies at once, each changing its own resource's objects.
    let va = [vars.clone(), vec!["a=two".into()]].concat();
    let vb = [vars.clone(), vec!["b=two".into()]].concat();
    let (ta, tb) = (format!("-target={kind}.a"), format!("-target={kind}.b"));
    let a = root.spawn(&apply(&va, &[&ta]));
    let b = root.spawn(&apply(&vb, &[&tb]));
    let (a, b) = (
        wait(a, Duration::from_secs(180)),
        wait(b, Duration::from_secs(180)),
    );
    for (name, out) in [("A", &a), ("B", &b)] {
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("records 2 updated"),
            "{name}: {}",
            text(&out.stderr)
        );
    }
    // A second workspace: its own estate, its objects named with it.
    root.ok(&["workspace", "new", "dev"]);
    root.ok(&apply(&vars, &[]));
    let dev = instances(&pulled(&root), named);
    assert_eq!(dev.len(), 4, "{dev:?}");
    assert!(
        dev.iter().all(|(n, v)| n.contains("/dev/") && v == "one"),
        "{dev:?}"
    );
    let out = root.ok(&["output", "-raw", "workspace"]);
    assert_eq!(text(&out.stdout).trim(), "dev");
    let listed = text(&root.ok(&["workspace", "list"]).stdout);
    assert!(
        listed.contains("default") && listed.contains("* dev"),
        "{listed}"
    );
    // TF_WORKSPACE is honoured: the default workspace's state, with both applies' values.
    let default = root
        .cmd(&["state", "pull"])
        .env("TF_WORKSPACE", "default")
        .output()
        .unwrap();
    let default: serde_json::Value = serde_json::from_slice(&default.stdout).unwrap();
    let default = instances(&default, named);
    assert_eq!(default.len(), 4, "{default:?}");
    assert!(
        default
            .iter()
            .all(|(n, v)| n.contains("/default/") && v == "two"),
        "both applies landed: {default:?}"
    );
    drop(turn);
    // Records only, each workspace under its own estate; no state object in the bucket.
    let all = keys(&root.bucket, "").await;
    for estate in ["team-app.tfstate", "team-app.tfstate@dev"] {
        for address in ["a%5B0%5D", "a%5B1%5D", "b%5B0%5D", "b%5B1%5D"] {
            let key = format!("tofu-records/{estate}/r/{kind}.{address}");
            assert!(all.contains(&key), "{key} in {all:?}");
        }
    }
    assert!(
        all.iter().all(|k| k.starts_with("tofu-records/")),
        "no {KEY} or env:/ object: {all:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn workspaces_of_one_s3_root_are_estates_and_disjoint_applies_land_at_once() {
    let root = s3_root("s3ws", DATA_ROOT, false).await;
    workspaces_and_disjoint_applies(root, "terraform_data", |a| {
        let input = &a["input"]["value"];
        (
            input["name"].as_str().unwrap_or_default().to_string(),
            input["value"].as_str().unwrap_or_default().to_string(),
        )
    })
    .await;
}

/// The same with the real hashicorp/aws provider on moto (about 90 s: `make reliability`).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "the real AWS provider, about 90 s: make reliability"]
async fn aws_workspaces_of_one_s3_root_are_estates_and_disjoint_applies_land_at_once() {
    let root = s3_root("s3wsaws", AWS_ROOT, true).await;
    workspaces_and_disjoint_applies(root, "aws_ssm_parameter", |a| {
        (
            a["name"].as_str().unwrap_or_default().to_string(),
            a["insecure_value"].as_str().unwrap_or_default().to_string(),
        )
    })
    .await;
}

/// terraform_data values of 1 MiB each: a state of about 6 MB.
const BIG_ROOT: &str = r#"
terraform {
  backend "s3" {
    bucket = "BUCKET"
    key    = "team/app.tfstate"
    region = "us-east-1"
  }
}

locals {
  kib = join("", [for i in range(64) : "0123456789abcdef"])
  mib = join("", [for i in range(1024) : local.kib])
}

resource "terraform_data" "big" {
  count = 3
  input = "${count.index}${local.mib}"
}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_state_of_six_megabytes_is_written_and_read_back() {
    let root = s3_root("s3big", BIG_ROOT, false).await;
    let turn = turn();
    root.ok(&["init", "-input=false"]);
    root.ok(&["apply", "-auto-approve", "-input=false"]);
    let state = root.ok(&["state", "pull"]).stdout;
    assert!(state.len() > 6_000_000, "{} bytes", state.len());
    drop(turn);
    let all = keys(&root.bucket, "tofu-records/team-app.tfstate/r/").await;
    assert_eq!(all.len(), 3, "{all:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_s3_root_with_the_provider_door_off_is_refused_by_name_and_nothing_runs() {
    let root = s3_root("s3nodoor", DATA_ROOT, false).await;
    let out = root
        .root
        .run_cmd_with(&["--provider-door=off"], &["init", "-input=false"])
        .env("AWS_ENDPOINT_URL_S3", s3_endpoint())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("needs the provider door"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        !root.root.path().join(".terraform").exists(),
        "terraform was not started"
    );
    assert!(keys(&root.bucket, "tofu-records/").await.is_empty());
}

/// One terraform_data, as a stock s3 backend keeps it at the key before `run`.
const STOCK_ROOT: &str = r#"
terraform {
  backend "s3" {
    bucket = "BUCKET"
    key    = "team/app.tfstate"
    region = "us-east-1"
  }
}

resource "terraform_data" "x" {
  input = "stock"
}
"#;

const STOCK_STATE: &str = r#"{"version":4,"terraform_version":"1.11.4","serial":3,"lineage":"0f6e4d52-4a4f-4c43-9a55-5b0d5a1e0001","outputs":{},"resources":[{"mode":"managed","type":"terraform_data","name":"x","provider":"provider[\"terraform.io/builtin/terraform\"]","instances":[{"schema_version":0,"attributes":{"id":"5d3b8c1e-0000-4000-8000-000000000001","input":{"value":"stock","type":"string"},"output":{"value":"stock","type":"string"},"triggers_replace":null},"sensitive_attributes":[]}]}],"check_results":null}"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_stock_state_at_the_key_refuses_the_run_until_it_is_moved_into_records() {
    use choudoufu_live::store::RecordStore;
    let root = s3_root("s3stock", STOCK_ROOT, false).await;
    let peer = s3_peer(&root.bucket).await;
    peer.create(KEY, STOCK_STATE.as_bytes()).await.unwrap();
    let held = turn();
    root.ok(&["init", "-input=false"]);
    let out = root.run(&["plan", "-input=false"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("holds terraform's own state at \"team/app.tfstate\""),
        "{}",
        text(&out.stderr)
    );
    drop(held);
    assert!(
        keys(&root.bucket, "tofu-records/team-app.tfstate/r/")
            .await
            .is_empty(),
        "nothing was written"
    );
    // Moved in when told: pushed into records, the stock object moved away.
    let file = root.root.path().join("stock.tfstate");
    std::fs::write(&file, STOCK_STATE).unwrap();
    let held = turn();
    root.ok(&["state", "push", file.to_str().unwrap()]);
    drop(held);
    let stock = peer.get(KEY).await.unwrap().unwrap();
    peer.delete(KEY, &stock.version).await.unwrap();
    let _turn = turn();
    let plan = root.run(&["plan", "-detailed-exitcode", "-input=false"]);
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{}{}",
        text(&plan.stdout),
        text(&plan.stderr)
    );
}

/// Plain terraform (no `run`) on the root's backend at moto, in a data folder of its own.
fn plain(root: &S3Root, args: &[&str]) -> std::process::Output {
    std::process::Command::new(common::tf::terraform())
        .args(args)
        .current_dir(root.root.path())
        .env("TF_DATA_DIR", ".plain")
        .env("TF_CLI_CONFIG_FILE", &root.root.cli_config)
        .env("TF_IN_AUTOMATION", "1")
        .env("CHECKPOINT_DISABLE", "1")
        .env("AWS_ENDPOINT_URL_S3", s3_endpoint())
        .env("AWS_ENDPOINT_URL_STS", s3_endpoint())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap()
}

fn records(root: &S3Root, args: &[&str]) -> std::process::Output {
    root.root
        .cli(args)
        .env("AWS_ENDPOINT_URL_S3", s3_endpoint())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stock_state_is_adopted_when_told_stock_terraform_is_refused_after_and_leaving_writes_it_back()
 {
    use choudoufu_live::store::RecordStore;
    let root = s3_root("s3adopt", STOCK_ROOT, false).await;
    let peer = s3_peer(&root.bucket).await;
    peer.create(KEY, STOCK_STATE.as_bytes()).await.unwrap();
    let _turn = turn();
    let init = plain(
        &root,
        &[
            "init",
            "-input=false",
            "-backend-config=use_path_style=true",
        ],
    );
    assert!(init.status.success(), "{}", text(&init.stderr));
    root.ok(&["init", "-input=false"]);
    // Told: the stock state into records, the marker in its place.
    let out = records(&root, &["records", "import"]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("1 record(s) created"),
        "{}",
        text(&out.stdout)
    );
    let plan = root.run(&["plan", "-detailed-exitcode", "-input=false"]);
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{}{}",
        text(&plan.stdout),
        text(&plan.stderr)
    );
    // Stock terraform without run refuses to plan, naming choudoufu-live.
    let stock = plain(&root, &["plan", "-input=false", "-lock=false"]);
    assert!(!stock.status.success());
    assert!(
        text(&stock.stderr).contains("choudoufu-live run"),
        "{}",
        text(&stock.stderr)
    );
    // Leaving: a plain state at the key, which stock terraform reads with no changes.
    let out = records(&root, &["records", "export", "--to-backend"]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let stock = plain(
        &root,
        &["plan", "-detailed-exitcode", "-input=false", "-lock=false"],
    );
    assert_eq!(
        stock.status.code(),
        Some(0),
        "{}{}",
        text(&stock.stdout),
        text(&stock.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_shim_sends_an_s3_root_through_run() {
    let root = s3_root("s3shim", STOCK_ROOT, false).await;
    let shims = tempfile::tempdir().unwrap();
    let made = std::process::Command::new(common::tf::bin())
        .arg("shim")
        .arg(shims.path())
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made.stderr));
    let mut dirs = vec![shims.path().to_path_buf()];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let path = std::env::join_paths(dirs).unwrap();
    let held = turn();
    for args in [
        &["init", "-input=false"][..],
        &["apply", "-auto-approve", "-input=false"],
    ] {
        let out = std::process::Command::new(shims.path().join("terraform"))
            .args(args)
            .current_dir(root.root.path())
            .env("PATH", &path)
            .env("TF_CLI_CONFIG_FILE", &root.root.cli_config)
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .env("AWS_ENDPOINT_URL_S3", s3_endpoint())
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .env_remove("CHOUDOUFU_TERRAFORM")
            .env_remove("CHOUDOUFU_SHIM_NEXT")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    drop(held);
    let all = keys(&root.bucket, "").await;
    assert!(
        all.contains(&"tofu-records/team-app.tfstate/r/terraform_data.x".to_string()),
        "{all:?}"
    );
    assert!(!all.contains(&KEY.to_string()), "{all:?}");
}
