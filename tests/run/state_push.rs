//! `run -- terraform state push` as stock terraform keeps it: a file pulled before other
//! writes is refused without `-force` and overwrites nothing; the current pull, edited and
//! bumped, is pushed; `-force` pushes any file.

use testkit as common;

use common::tf::{Records, Root, text, turn};
use serde_json::Value;

fn pull(root: &Root) -> Value {
    let out = root.ok(&["state", "pull"]);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn write(root: &Root, name: &str, doc: &Value) -> String {
    let path = root.path().join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(doc).unwrap()).unwrap();
    path.display().to_string()
}

#[test]
fn a_push_of_an_older_pull_is_refused_without_force_and_overwrites_nothing() {
    let root = Root::new("demo", "push-old", &Records::Local);
    let _turn = turn();
    root.init_and_apply();
    let mut old = pull(&root);
    root.ok(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-var",
        "db_version=v2",
    ]);
    assert_eq!(root.stored_input("db").as_deref(), Some("v2"));
    let now = pull(&root);
    let served = now["serial"].as_u64().unwrap();
    // The serial is a digest of the records' versions: half of all older pulls carry a higher
    // one than the state served now, and terraform's own check lets those through. This one does.
    old["serial"] = (served + 10_000_000).into();
    let old_file = write(&root, "old.tfstate", &old);

    let out = root.run(&["state", "push", &old_file]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}\n{err}", text(&out.stdout));
    assert!(err.contains("StalePushError"), "{err}");
    assert!(err.contains("Nothing was written"), "{err}");
    assert_eq!(
        root.stored_input("db").as_deref(),
        Some("v2"),
        "the newer record stands"
    );

    // The state pulled now, edited and bumped as terraform asks, is pushed.
    let mut edited = now.clone();
    edited["serial"] = (served + 1).into();
    edited["outputs"]["pushed"] = serde_json::json!({"value": "yes", "type": "string"});
    let edited_file = write(&root, "edited.tfstate", &edited);
    let out = root.run(&["state", "push", &edited_file]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(pull(&root)["outputs"]["pushed"]["value"], "yes");

    // -force pushes the older file over the records, as stock terraform's does.
    let out = root.run(&["state", "push", "-force", &old_file]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(root.stored_input("db").as_deref(), Some("v1"));
}
