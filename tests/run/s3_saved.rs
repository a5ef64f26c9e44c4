//! A saved plan of an s3 root, through the S3 door: stamped like an http root's, and refused
//! (exit 3, `PlanMovedError`) once another run changed one of its own changes; a plan whose
//! changes did not move applies, and its disjoint neighbour's change stays as that run wrote it.

use testkit as common;

use common::s3door::s3_root;
use common::tf::text;

const ROOT: &str = r#"
terraform {
  backend "s3" {
    bucket = "BUCKET"
    key    = "team/app.tfstate"
    region = "us-east-1"
  }
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
  input = "a${count.index}-${var.a}"
}

resource "terraform_data" "b" {
  count = 2
  input = "b${count.index}-${var.b}"
}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_saved_plan_of_an_s3_root_is_refused_once_its_change_moved_and_applies_otherwise() {
    let root = s3_root("s3saved", ROOT, false).await;
    root.ok(&["init", "-input=false"]);
    root.ok(&["apply", "-auto-approve", "-input=false"]);
    // Two saved plans: one of a, one of b.
    root.ok(&["plan", "-input=false", "-out=a.plan", "-var", "a=two"]);
    root.ok(&["plan", "-input=false", "-out=b.plan", "-var", "b=two"]);
    assert!(root.root.path().join("a.plan.live-stamp").is_file());
    // Another run changes a.
    root.ok(&["apply", "-auto-approve", "-input=false", "-var", "a=other"]);
    let out = root.run(&["apply", "-input=false", "a.plan"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("PlanMovedError"), "{err}");
    assert!(
        !text(&out.stdout).contains("Apply complete"),
        "terraform never ran"
    );
    assert_eq!(
        root.stored_input("terraform_data.a[0]").as_deref(),
        Some("a0-other"),
        "a keeps the other run's record"
    );
    // b's plan did not move: it applies, and a stays as the other run wrote it.
    let out = root.run(&["apply", "-input=false", "b.plan"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        root.stored_input("terraform_data.b[1]").as_deref(),
        Some("b1-two")
    );
    assert_eq!(
        root.stored_input("terraform_data.a[1]").as_deref(),
        Some("a1-other")
    );
}
