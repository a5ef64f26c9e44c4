//! Sessions: stale bases, disjoint writers, unchanged records, fixtures through a store, bad input.

use testkit as common;

use std::path::Path;

use choudoufu_live::engine::digest::canonical;
use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::session::SessionError;
use choudoufu_live::engine::session::{Pin, RunInfo, Session};
use choudoufu_live::engine::state::StateError;
use choudoufu_live::store::{DynStore, list_all};
use common::{Fixture, Kind};
use serde_json::{Value, json};

fn layout(name: &str) -> Layout {
    Layout::new(EstateName::parse(name).unwrap())
}

fn run() -> RunInfo {
    RunInfo::new(ProgramStamp {
        commit: "c0ffee".into(),
        time: "2026-11-30T00:00:00Z".into(),
    })
}

fn doc(resources: &[(&str, &str)]) -> Vec<u8> {
    common::state::doc("l-1", resources)
}

async fn open(store: &DynStore, estate: &str) -> Session {
    Session::open(store.clone(), layout(estate), run())
        .await
        .unwrap()
}

async fn stored_input(store: &DynStore, estate: &str, name: &str) -> String {
    let s = open(store, estate).await;
    let snap = s.snapshot().await;
    let key = layout(estate).resource_key(&format!("terraform_data.{name}"));
    snap.records[key.as_str()]
        .record()
        .unwrap()
        .instance()
        .unwrap()["attributes"]["input"]["value"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn stale_base_on_one_of_three(kind: Kind) {
    let f = Fixture::new(kind, "stale").await;
    let seed = open(&f.store, "prod").await;
    seed.write_state(&doc(&[("a", "1"), ("b", "1"), ("c", "1")]))
        .await
        .unwrap()
        .into_result()
        .unwrap();
    let a = open(&f.store, "prod").await;
    let base_b = a.snapshot().await.records
        [layout("prod").resource_key("terraform_data.b").as_str()]
    .version
    .clone();
    // Another run changes b after run A read it.
    let other = Session::open(f.peer().await, layout("prod"), run())
        .await
        .unwrap();
    let r = other
        .write_state(&doc(&[("a", "1"), ("b", "other"), ("c", "1")]))
        .await
        .unwrap();
    assert_eq!(r.updated, vec!["terraform_data.b".to_string()]);
    let after_other = other.snapshot().await.records
        [layout("prod").resource_key("terraform_data.b").as_str()]
    .version
    .clone();
    // Run A writes all three.
    let report = a
        .write_state(&doc(&[("a", "2"), ("b", "2"), ("c", "2")]))
        .await
        .unwrap();
    assert_eq!(
        report.updated,
        vec![
            "terraform_data.a".to_string(),
            "terraform_data.c".to_string()
        ]
    );
    let err = report.into_result().unwrap_err();
    assert_eq!(err.conflicts.len(), 1);
    let c = &err.conflicts[0];
    assert_eq!(c.address, "terraform_data.b");
    assert_eq!(c.expected.as_ref().map(|v| &v.token), Some(&base_b.token));
    assert_eq!(
        c.stored.as_ref().map(|v| &v.token),
        Some(&after_other.token)
    );
    let text = err.to_string();
    assert!(
        text.contains("terraform_data.b") && text.contains("Nothing was overwritten"),
        "{text}"
    );
    assert!(
        text.contains(base_b.to_string().as_str())
            && text.contains(after_other.to_string().as_str()),
        "{text}"
    );
    assert_eq!(stored_input(&f.store, "prod", "b").await, "other");
    assert_eq!(stored_input(&f.store, "prod", "a").await, "2");
    // The base did not advance for b: writing again still refuses, never overwrites.
    let again = a
        .write_state(&doc(&[("a", "2"), ("b", "3"), ("c", "2")]))
        .await
        .unwrap();
    assert_eq!(again.conflicts.len(), 1);
    assert_eq!(stored_input(&f.store, "prod", "b").await, "other");
}

async fn disjoint_runs_both_land(kind: Kind) {
    let f = Fixture::new(kind, "disjoint").await;
    open(&f.store, "prod")
        .await
        .write_state(&doc(&[("db", "1"), ("dns", "1")]))
        .await
        .unwrap()
        .into_result()
        .unwrap();
    let a = open(&f.store, "prod").await;
    let b = Session::open(f.peer().await, layout("prod"), run())
        .await
        .unwrap();
    let (da, db) = (
        doc(&[("db", "A"), ("dns", "1")]),
        doc(&[("db", "1"), ("dns", "B")]),
    );
    let (ra, rb) = tokio::join!(a.write_state(&da), b.write_state(&db));
    let (ra, rb) = (
        ra.unwrap().into_result().unwrap(),
        rb.unwrap().into_result().unwrap(),
    );
    assert_eq!(ra.updated, vec!["terraform_data.db".to_string()]);
    assert_eq!(rb.updated, vec!["terraform_data.dns".to_string()]);
    assert_eq!(ra.unchanged, 1);
    assert_eq!(stored_input(&f.store, "prod", "db").await, "A");
    assert_eq!(stored_input(&f.store, "prod", "dns").await, "B");
}

async fn unchanged_records_are_not_written(kind: Kind) {
    let f = Fixture::new(kind, "unchanged").await;
    let s = open(&f.store, "prod").await;
    s.write_state(&doc(&[("a", "1"), ("b", "1")]))
        .await
        .unwrap();
    let before = list_all(f.store.as_ref(), "tofu-records/prod/")
        .await
        .unwrap();
    let r = s
        .write_state(&doc(&[("a", "1"), ("b", "1")]))
        .await
        .unwrap();
    assert_eq!((r.landed(), r.unchanged), (0, 2));
    // A fresh session, given the document it assembled, writes nothing either.
    let fresh = open(&f.store, "prod").await;
    let r = fresh
        .write_state(&fresh.state_document().await)
        .await
        .unwrap();
    assert_eq!((r.landed(), r.unchanged), (0, 2));
    let after = list_all(f.store.as_ref(), "tofu-records/prod/")
        .await
        .unwrap();
    assert_eq!(before, after);
    // A resource gone from the document is deleted.
    let r = s.write_state(&doc(&[("a", "1")])).await.unwrap();
    assert_eq!(r.deleted, vec!["terraform_data.b".to_string()]);
}

async fn fixtures_through_the_store(kind: Kind) {
    let f = Fixture::new(kind, "fixtures").await;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("terraform-fixtures/states");
    for name in [
        "count",
        "for_each_odd_keys",
        "modules",
        "outputs",
        "tainted_deposed",
        "empty",
    ] {
        let bytes = std::fs::read(dir.join(format!("{name}.tfstate"))).unwrap();
        let estate = format!("fx-{}", name.replace('_', "-"));
        let s = open(&f.store, &estate).await;
        s.write_state(&bytes).await.unwrap().into_result().unwrap();
        let back: Value =
            serde_json::from_slice(&open(&f.store, &estate).await.state_document().await).unwrap();
        let original: Value = serde_json::from_slice(&bytes).unwrap();
        for field in ["resources", "outputs"] {
            assert_eq!(
                canonical(&back[field]),
                canonical(&original[field]),
                "{name}: {field}"
            );
        }
        assert_eq!(back["version"], json!(4));
        // The serial is a function of the record versions: the same on every read.
        let again: Value =
            serde_json::from_slice(&open(&f.store, &estate).await.state_document().await).unwrap();
        assert_eq!(back, again, "{name}: assembling is deterministic");
    }
}

async fn serial_changes_when_any_record_changes(kind: Kind) {
    let f = Fixture::new(kind, "serial").await;
    let s = open(&f.store, "prod").await;
    s.write_state(&doc(&[("a", "1"), ("b", "1")]))
        .await
        .unwrap();
    let serial = |d: Vec<u8>| {
        serde_json::from_slice::<Value>(&d).unwrap()["serial"]
            .as_u64()
            .unwrap()
    };
    let s1 = serial(open(&f.store, "prod").await.state_document().await);
    s.write_state(&doc(&[("a", "1"), ("b", "2")]))
        .await
        .unwrap();
    let s2 = serial(open(&f.store, "prod").await.state_document().await);
    assert_ne!(s1, s2);
    assert!(s1 > 0 && s2 > 0);
    // Lineage: the one the first write brought, for every later reader.
    let lineage =
        serde_json::from_slice::<Value>(&open(&f.store, "prod").await.state_document().await)
            .unwrap()["lineage"]
            .clone();
    assert_eq!(lineage, json!("l-1"));
}

async fn bad_documents_write_nothing(kind: Kind) {
    let f = Fixture::new(kind, "bad").await;
    let s = open(&f.store, "prod").await;
    let cases: Vec<(&[u8], &str)> = vec![
        (b"{not json", "NotJson"),
        (br#"{"version": 3, "resources": []}"#, "UnsupportedVersion"),
        (br#"{"resources": []}"#, "UnsupportedVersion"),
        (br#"[1,2]"#, "Malformed"),
        (br#"{"version": 4, "resources": [{"mode": "managed"}]}"#, "Malformed"),
        (br#"{"version": 4, "resources": [{"mode":"weird","type":"t","name":"n","provider":"p","instances":[{}]}]}"#, "Malformed"),
        (br#"{"version": 4, "resources": [{"mode":"managed","type":"t","name":"n","provider":"p","instances":[{"index_key":[1]}]}]}"#, "Malformed"),
        (br#"{"version": 4, "resources": [{"mode":"managed","type":"t","name":"n","provider":"p","instances":[{},{}]}]}"#, "DuplicateAddress"),
        (&[0xff, 0xfe, 0x00], "NotJson"),
    ];
    for (bytes, want) in cases {
        match s.write_state(bytes).await {
            Err(SessionError::State(e)) => {
                let name = match e {
                    StateError::NotJson(_) => "NotJson",
                    StateError::UnsupportedVersion(_) => "UnsupportedVersion",
                    StateError::Malformed(_) => "Malformed",
                    StateError::DuplicateAddress(_) => "DuplicateAddress",
                    StateError::Encrypted(_) => "Encrypted",
                    StateError::OtherLineage { .. } => "OtherLineage",
                };
                assert_eq!(name, want, "{}", String::from_utf8_lossy(bytes));
            }
            other => panic!(
                "{}: expected a state error, got {other:?}",
                String::from_utf8_lossy(bytes)
            ),
        }
    }
    // Deeply nested JSON is an error, not a stack overflow.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(s.write_state(deep.as_bytes()).await.is_err());
    assert!(
        list_all(f.store.as_ref(), "tofu-records/")
            .await
            .unwrap()
            .is_empty(),
        "nothing was written"
    );
}

async fn corrupted_record_is_named(kind: Kind) {
    let f = Fixture::new(kind, "corrupt").await;
    open(&f.store, "prod")
        .await
        .write_state(&doc(&[("a", "1")]))
        .await
        .unwrap();
    let key = layout("prod").resource_key("terraform_data.zz");
    f.store
        .create(&key, b"{\"format\": \"garbage")
        .await
        .unwrap();
    let err = Session::open(f.store.clone(), layout("prod"), run())
        .await
        .unwrap_err();
    assert!(matches!(err, SessionError::Corrupt(_)), "{err:?}");
    assert!(err.to_string().contains(key.as_str()), "{err}");
    // A record that claims another estate.
    let f2 = Fixture::new(kind, "claims").await;
    open(&f2.store, "other")
        .await
        .write_state(&doc(&[("a", "1")]))
        .await
        .unwrap();
    let other_key = layout("other").resource_key("terraform_data.a");
    let bytes = f2.store.get(&other_key).await.unwrap().unwrap().bytes;
    f2.store
        .create(&layout("prod").resource_key("terraform_data.a"), &bytes)
        .await
        .unwrap();
    let err = Session::open(f2.store.clone(), layout("prod"), run())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("claims estate \"other\""), "{err}");
    // A record stored under the wrong address's key.
    let f3 = Fixture::new(kind, "misplaced").await;
    open(&f3.store, "prod")
        .await
        .write_state(&doc(&[("a", "1")]))
        .await
        .unwrap();
    let bytes = f3
        .store
        .get(&layout("prod").resource_key("terraform_data.a"))
        .await
        .unwrap()
        .unwrap()
        .bytes;
    f3.store
        .create(&layout("prod").resource_key("terraform_data.b"), &bytes)
        .await
        .unwrap();
    let err = Session::open(f3.store.clone(), layout("prod"), run())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("terraform_data.a"), "{err}");
}

async fn estates_that_start_alike_stay_apart(kind: Kind) {
    let f = Fixture::new(kind, "alike").await;
    open(&f.store, "prod")
        .await
        .write_state(&doc(&[("a", "prod")]))
        .await
        .unwrap();
    open(&f.store, "prod-eu")
        .await
        .write_state(&doc(&[("a", "eu"), ("b", "eu")]))
        .await
        .unwrap();
    assert_eq!(
        open(&f.store, "prod").await.snapshot().await.records.len(),
        1
    );
    assert_eq!(
        open(&f.store, "prod-eu")
            .await
            .snapshot()
            .await
            .records
            .len(),
        2
    );
    assert_eq!(stored_input(&f.store, "prod", "a").await, "prod");
    // Deleting everything of prod leaves prod-eu whole.
    open(&f.store, "prod")
        .await
        .write_state(&doc(&[]))
        .await
        .unwrap();
    assert_eq!(
        open(&f.store, "prod-eu")
            .await
            .snapshot()
            .await
            .records
            .len(),
        2
    );
}

/// A state whose `sensitive_attributes`, `dependencies` and object keys come in another order.
fn reordered_doc(sensitive: &[&str], dependencies: &[&str], flipped: bool) -> Vec<u8> {
    let paths: Vec<Value> = sensitive
        .iter()
        .map(|a| json!([{"type": "get_attr", "value": a}]))
        .collect();
    let attributes = if flipped {
        serde_json::from_str::<Value>(
            r#"{"output":null,"input":{"type":"string","value":"1"},"id":"id-db","triggers_replace":null}"#,
        )
        .unwrap()
    } else {
        json!({"id": "id-db", "input": {"value": "1", "type": "string"}, "output": null, "triggers_replace": null})
    };
    let resource = json!({
        "mode": "managed", "type": "terraform_data", "name": "db",
        "provider": common::state::TERRAFORM_PROVIDER,
        "instances": [{
            "schema_version": 0,
            "attributes": attributes,
            "sensitive_attributes": paths,
            "dependencies": dependencies,
        }]
    });
    common::state::document("1.11.4", "l-1", vec![resource])
}

/// A refresh or import whose state differs from the records only in the order of set-like lists and keys writes nothing, and adds no history.
async fn reordered_lists_are_not_a_change(kind: Kind) {
    let f = Fixture::new(kind, "reordered").await;
    let s = open(&f.store, "prod").await;
    let first = s
        .write_state(&reordered_doc(
            &["a", "b", "c"],
            &["terraform_data.x", "terraform_data.y"],
            false,
        ))
        .await
        .unwrap();
    assert_eq!(first.landed(), 1, "{first:?}");
    let before = list_all(f.store.as_ref(), "tofu-records/prod/")
        .await
        .unwrap();
    // Another run reads the records and saves terraform's state with the lists in another order.
    let other = open(&f.store, "prod").await;
    let r = other
        .write_state(&reordered_doc(
            &["c", "a", "b"],
            &["terraform_data.y", "terraform_data.x"],
            true,
        ))
        .await
        .unwrap();
    assert_eq!((r.landed(), r.unchanged), (0, 1), "{r:?}");
    let after = list_all(f.store.as_ref(), "tofu-records/prod/")
        .await
        .unwrap();
    assert_eq!(before, after, "no record was written");
    // A real change to the list is still one.
    let r = other
        .write_state(&reordered_doc(
            &["c", "a"],
            &["terraform_data.y", "terraform_data.x"],
            true,
        ))
        .await
        .unwrap();
    assert_eq!(r.landed(), 1, "{r:?}");
}

/// A write refused for a reason trying again would not mend (not the store, not a conflict) is remembered until a write lands: `run` tells how to write terraform's errored.tfstate from it.
async fn a_refused_write_is_remembered_until_one_lands(kind: Kind) {
    let f = Fixture::new(kind, "refused").await;
    let s = open(&f.store, "prod").await;
    s.write_state(&doc(&[("a", "1")])).await.unwrap();
    assert_eq!(s.refused().await, None);
    let other = common::state::doc("another-lineage", &[("a", "2")]);
    let err = s.write_state(&other).await.unwrap_err();
    assert!(!err.store_failed(), "{err}");
    assert_eq!(s.refused().await, Some(err.to_string()));
    assert!(
        s.unwritten().await.is_none(),
        "not kept for the outage flush"
    );
    s.write_state(&doc(&[("a", "3")])).await.unwrap();
    assert_eq!(s.refused().await, None);
}

/// A plan's own records read by key are the store's now and leave the session's view as it
/// was; terraform's request of a pinned view reads nothing again; a read made ahead answers the
/// next request, and only that one.
async fn own_records_are_read_by_key_and_a_pinned_view_is_not_read_again(kind: Kind) {
    let f = Fixture::new(kind, "keyed").await;
    let l = layout("prod");
    let (a, b, c) = (
        l.resource_key("terraform_data.a").into_string(),
        l.resource_key("terraform_data.b").into_string(),
        l.resource_key("terraform_data.c").into_string(),
    );
    let other = open(&f.store, "prod").await;
    other
        .write_state(&doc(&[("a", "1"), ("b", "1")]))
        .await
        .unwrap();
    let s = open(&f.store, "prod").await;
    let token = |snap: &choudoufu_live::engine::session::Snapshot, key: &str| {
        snap.records.get(key).map(|e| e.version.token.clone())
    };
    let read = s.snapshot().await;
    other
        .write_state(&doc(&[("a", "2"), ("b", "1")]))
        .await
        .unwrap();
    let wanted = std::collections::BTreeSet::from([a.clone(), c.clone()]);
    let now = s.records_now(&wanted).await.unwrap();
    let stored = open(&f.store, "prod").await.snapshot().await;
    assert_eq!(token(&now, &a), token(&stored, &a), "the store's a now");
    assert_ne!(token(&now, &a), token(&read, &a));
    assert_eq!(token(&now, &c), None, "c has no record");
    assert_eq!(
        token(&s.snapshot().await, &a),
        token(&read, &a),
        "the view is as it was"
    );
    s.pin(Pin {
        lineage: "l-1".into(),
        serial: 1,
        base: s.base().await,
        changes: std::collections::BTreeSet::from([a.clone()]),
    })
    .await;
    other
        .write_state(&doc(&[("a", "2"), ("b", "2")]))
        .await
        .unwrap();
    s.refresh_for_request().await.unwrap();
    assert_eq!(
        token(&s.snapshot().await, &b),
        token(&read, &b),
        "a pinned view is not read again"
    );
    let t = Session::new(f.store.clone(), l.clone(), run());
    let slot = t.read_ahead_slot().expect("no request came yet");
    t.read_ahead(slot).await;
    let ahead = t.snapshot().await;
    other
        .write_state(&doc(&[("a", "3"), ("b", "2")]))
        .await
        .unwrap();
    t.refresh_for_request().await.unwrap();
    assert_eq!(
        token(&t.snapshot().await, &a),
        token(&ahead, &a),
        "answered from the read ahead"
    );
    t.refresh_for_request().await.unwrap();
    assert_ne!(
        token(&t.snapshot().await, &a),
        token(&ahead, &a),
        "the next request reads again"
    );
}

testkit::per_kind!(
    local => Local, s3 => S3;
    [
        own_records_are_read_by_key_and_a_pinned_view_is_not_read_again,
        a_refused_write_is_remembered_until_one_lands,
        reordered_lists_are_not_a_change,
        stale_base_on_one_of_three,
        disjoint_runs_both_land,
        unchanged_records_are_not_written,
        fixtures_through_the_store,
        serial_changes_when_any_record_changes,
        bad_documents_write_nothing,
        corrupted_record_is_named,
        estates_that_start_alike_stay_apart,
    ]
);
