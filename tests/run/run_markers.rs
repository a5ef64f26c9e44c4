//! `run` with a `markers "aws"` block: after a plan or apply, live objects carrying this estate's
//! marker that no record names are reported by name, and never deleted (real terraform, moto).

use testkit as common;

use common::tf::{Records, Root, text, turn};
use testkit::aws_objects::{create_queue, markers, queue_arn, queues, unique};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unrecorded_marked_objects_are_reported_and_kept() {
    let estate = unique("warn");
    let root = Root::new("demo", &estate, &Records::Local);
    let live = std::fs::read_to_string(root.path().join("live.hcl")).unwrap();
    let with_markers = format!(
        "{}  markers \"aws\" {{\n    region   = \"us-east-1\"\n    endpoint = \"{}\"\n  }}\n}}\n",
        live.trim_end().trim_end_matches('}'),
        common::s3_endpoint()
    );
    std::fs::write(root.path().join("live.hcl"), with_markers).unwrap();
    // A queue a killed run created for this estate, that no record names.
    let ghost = create_queue(
        &format!("{estate}-ghost"),
        &markers(&estate, "aws_sqs_queue.ghost"),
    )
    .await;
    // One marked with an address the estate does record, and one of another estate.
    let named = create_queue(
        &format!("{estate}-named"),
        &markers(&estate, "terraform_data.db"),
    )
    .await;
    let other = create_queue(
        &format!("{estate}-other"),
        &markers("someone-else", "aws_sqs_queue.ghost"),
    )
    .await;
    let (ghost_arn, named_arn, other_arn) = (
        queue_arn(&ghost).await,
        queue_arn(&named).await,
        queue_arn(&other).await,
    );
    let turn_guard = turn();
    root.init_and_apply();
    let out = root.run(&["plan", "-input=false"]);
    drop(turn_guard);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("unrecorded marked object {ghost_arn}"))
            && err.contains("tofu-address=aws_sqs_queue.ghost")
            && err.contains("it was not deleted"),
        "{err}"
    );
    assert!(
        !err.contains(&named_arn),
        "a recorded address is not reported: {err}"
    );
    assert!(
        !err.contains(&other_arn),
        "another estate's object is not reported: {err}"
    );
    assert_eq!(
        queues(&format!("{estate}-")).await.len(),
        3,
        "nothing was deleted"
    );
}

#[test]
fn a_markers_block_for_another_family_is_refused_by_name() {
    let root = Root::new("demo", "fam", &Records::Local);
    std::fs::write(
        root.path().join("live.hcl"),
        "live {\n  estate = \"fam\"\n  markers \"google\" {\n    region = \"x\"\n  }\n}\n",
    )
    .unwrap();
    let out = root.run(&["plan"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("live.hcl:3")
            && text(&out.stderr).contains("only the \"aws\" family"),
        "{}",
        text(&out.stderr)
    );
}
