//! Saved plans stamped per record, with the real terraform: refused (exit 3) only when one of their own changes moved.

use testkit as common;

use std::collections::BTreeMap;
use std::path::Path;

use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::session::{Pin, RunInfo, Session};
use common::Kind;
use common::tf::{Records, Root, text, turn};
use serde_json::Value;

async fn records(kind: Kind) -> Records {
    match kind {
        Kind::Local => Records::Local,
        Kind::S3 => {
            let (_store, bucket) = common::s3_store("plan").await;
            Records::S3 {
                bucket,
                endpoint: common::s3_endpoint(),
            }
        }
        other => panic!("a terraform root keeps its records on local or s3, not {other:?}"),
    }
}

/// Every file of a local store with its bytes: to show nothing was written.
fn store_bytes(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.insert(p.display().to_string(), std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&root.join(".live-records"), &mut out);
    out
}

/// Plan A changes db, plan B changes dns; apply B, then A: A is accepted, and dns keeps B's value.
async fn disjoint_saved_plans_both_apply(kind: Kind) {
    let root = Root::new("demo", "plans", &records(kind).await);
    let _turn = turn();
    root.init_and_apply();
    let a = root.ok(&[
        "plan",
        "-input=false",
        "-out=a.plan",
        "-target=terraform_data.db",
        "-var",
        "db_version=A",
    ]);
    assert!(
        text(&a.stderr).contains("stamped the plan"),
        "{}",
        text(&a.stderr)
    );
    assert!(root.path().join("a.plan.live-stamp").is_file());
    root.ok(&[
        "plan",
        "-input=false",
        "-out=b.plan",
        "-target=terraform_data.dns",
        "-var",
        "dns_version=B",
    ]);
    root.ok(&["apply", "-input=false", "b.plan"]);
    let applied = root.run(&["apply", "-input=false", "a.plan"]);
    assert!(
        applied.status.success(),
        "stock terraform would call this plan stale; here it applies: {}",
        text(&applied.stderr)
    );
    assert!(!text(&applied.stderr).contains("Saved plan is stale"));
    assert_eq!(root.stored_input("db").as_deref(), Some("A"));
    assert_eq!(
        root.stored_input("dns").as_deref(),
        Some("B"),
        "the record the plan did not change was not written back"
    );
    // The stamp holds versions and digests, never attribute values.
    let stamp = std::fs::read_to_string(root.path().join("a.plan.live-stamp")).unwrap();
    assert!(
        !stamp.contains("\"v1\"") && !stamp.contains("input"),
        "{stamp}"
    );
}

/// Plan A changes db; another run changes db; applying A is refused before terraform runs.
async fn moved_change_is_refused_before_anything(kind: Kind) {
    let root = Root::new("demo", "moved", &records(kind).await);
    let _turn = turn();
    root.init_and_apply();
    root.ok(&[
        "plan",
        "-input=false",
        "-out=a.plan",
        "-target=terraform_data.db",
        "-var",
        "db_version=A",
    ]);
    let planned = root.record("db").unwrap();
    root.ok(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-target=terraform_data.db",
        "-var",
        "db_version=other",
    ]);
    let before = root.record("db").unwrap();
    let local_before = store_bytes(root.path());
    let out = root
        .run_cmd(&["apply", "-input=false", "a.plan"])
        .env("CHOUDOUFU_LOG", "info")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("The approved plan no longer matches the live system")
            && err.contains("PlanMovedError"),
        "{err}"
    );
    assert!(
        err.contains("terraform_data.db changed: planned against sha256:")
            || err.contains("terraform_data.db changed: planned against "),
        "{err}"
    );
    assert!(
        !err.contains("serving state for this run"),
        "the server never started, so terraform never ran: {err}"
    );
    assert!(
        !text(&out.stdout).contains("Apply complete"),
        "terraform never ran"
    );
    assert_eq!(
        root.record("db").unwrap(),
        before,
        "db keeps the other run's record"
    );
    assert_ne!(planned["writer"], before["writer"]);
    if matches!(kind, Kind::Local) {
        assert_eq!(
            store_bytes(root.path()),
            local_before,
            "the store is byte-for-byte unchanged"
        );
    }
}

/// A plan with no stamp, a stamp of another plan, or a stamp for another estate: refused the same way.
async fn unstamped_plans_are_refused(kind: Kind) {
    let root = Root::new("demo", "unstamped", &records(kind).await);
    let _turn = turn();
    root.init_and_apply();
    root.ok(&[
        "plan",
        "-input=false",
        "-out=a.plan",
        "-var",
        "db_version=A",
    ]);
    root.ok(&[
        "plan",
        "-input=false",
        "-out=b.plan",
        "-var",
        "dns_version=B",
    ]);
    std::fs::copy(root.path().join("a.plan"), root.path().join("copy.plan")).unwrap();
    let out = root.run(&["apply", "-input=false", "copy.plan"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("UnstampedPlanError")
            && text(&out.stderr).contains("has no stamp"),
        "{}",
        text(&out.stderr)
    );
    std::fs::copy(
        root.path().join("b.plan.live-stamp"),
        root.path().join("a.plan.live-stamp"),
    )
    .unwrap();
    let out = root.run(&["apply", "-input=false", "a.plan"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("belongs to another plan file"),
        "{}",
        text(&out.stderr)
    );
    let live = std::fs::read_to_string(root.path().join("live.hcl")).unwrap();
    std::fs::write(
        root.path().join("live.hcl"),
        live.replace("estate = \"unstamped\"", "estate = \"elsewhere\""),
    )
    .unwrap();
    let out = root.run(&["apply", "-input=false", "b.plan"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("the stamp is for estate \"unstamped\""),
        "{}",
        text(&out.stderr)
    );
    std::fs::write(root.path().join("live.hcl"), live).unwrap();
    assert_eq!(
        root.stored_input("db").as_deref(),
        Some("v1"),
        "nothing was applied"
    );
}

/// A plan that deletes a record another run changed, or creates one another run created: refused by name.
async fn deletes_and_creates_that_moved_are_refused(kind: Kind) {
    let root = Root::new("demo", "delcreate", &records(kind).await);
    let _turn = turn();
    root.init_and_apply();
    root.ok(&[
        "plan",
        "-input=false",
        "-destroy",
        "-out=destroy.plan",
        "-target=terraform_data.db",
    ]);
    root.ok(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-target=terraform_data.db",
        "-var",
        "db_version=changed",
    ]);
    let out = root.run(&["apply", "-input=false", "destroy.plan"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("terraform_data.db changed"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(root.stored_input("db").as_deref(), Some("changed"));

    root.ok(&[
        "plan",
        "-input=false",
        "-out=create.plan",
        "-var",
        "with_extra=true",
        "-var",
        "db_version=changed",
    ]);
    root.ok(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-var",
        "with_extra=true",
        "-var",
        "db_version=changed",
    ]);
    let out = root.run(&["apply", "-input=false", "create.plan"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("terraform_data.extra[0] appeared: planned against no record"),
        "{}",
        text(&out.stderr)
    );
}

testkit::per_kind!(
    local => Local, s3 => S3;
    [
        disjoint_saved_plans_both_apply,
        moved_change_is_refused_before_anything,
        unstamped_plans_are_refused,
        deletes_and_creates_that_moved_are_refused,
    ]
);

fn doc(resources: &[(&str, &str)]) -> Vec<u8> {
    common::state::doc("l", resources)
}

/// Under a saved plan, a record the plan does not change but a refresh updated is written only if
/// it has not moved, and otherwise skipped with a notice, never a conflict.
#[tokio::test]
async fn refreshed_records_outside_the_plan_are_skipped_when_moved() {
    let f = common::Fixture::new(common::Kind::Local, "refresh").await;
    let layout = Layout::new(EstateName::parse("refresh").unwrap());
    let run = || RunInfo::new(ProgramStamp::default());
    let seed = Session::open(f.store.clone(), layout.clone(), run())
        .await
        .unwrap();
    seed.write_state(&doc(&[("db", "1"), ("dns", "1"), ("q", "1")]))
        .await
        .unwrap()
        .into_result()
        .unwrap();
    // The plan read all three and changes db only.
    let planned = Session::open(f.store.clone(), layout.clone(), run())
        .await
        .unwrap();
    let base = planned.base().await;
    let pin = Pin {
        lineage: "l".into(),
        serial: 7,
        base: base.clone(),
        changes: [layout.resource_key("terraform_data.db").into_string()].into(),
    };
    // Another run moves dns.
    let other = Session::open(f.store.clone(), layout.clone(), run())
        .await
        .unwrap();
    other
        .write_state(&doc(&[("db", "1"), ("dns", "other"), ("q", "1")]))
        .await
        .unwrap()
        .into_result()
        .unwrap();
    let applying = Session::new(f.store.clone(), layout.clone(), run());
    applying.pin(pin).await;
    applying.refresh().await.unwrap();
    let served: Value = serde_json::from_slice(&applying.state_document().await).unwrap();
    assert_eq!(
        (served["lineage"].as_str(), served["serial"].as_u64()),
        (Some("l"), Some(7)),
        "the plan's lineage and serial are served"
    );
    // The apply's state: db changed by the plan; dns and q "refreshed".
    let report = applying
        .write_state(&doc(&[
            ("db", "2"),
            ("dns", "refreshed"),
            ("q", "refreshed"),
        ]))
        .await
        .unwrap();
    assert!(report.conflicts.is_empty(), "{:?}", report.conflicts);
    assert_eq!(report.skipped, vec!["terraform_data.dns".to_string()]);
    assert_eq!(
        report.updated,
        vec![
            "terraform_data.db".to_string(),
            "terraform_data.q".to_string()
        ]
    );
    let now = Session::open(f.store.clone(), layout.clone(), run())
        .await
        .unwrap()
        .snapshot()
        .await;
    let input = |name: &str| {
        now.records[layout
            .resource_key(&format!("terraform_data.{name}"))
            .as_str()]
        .record()
        .unwrap()
        .instance()
        .unwrap()["attributes"]["input"]["value"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(input("dns"), "other", "the other run's write survives");
    assert_eq!(input("db"), "2");
}
