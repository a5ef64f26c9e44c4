//! The record store contract, run against every kind with a real peer here (local folder, S3 on
//! moto, Azure Blob Storage on azurite; GCS on gcp-storage-emulator for what it can prove).

use testkit as common;

use std::sync::Arc;

use choudoufu_live::store::local::LocalStore;
use choudoufu_live::store::{
    self, DynStore, Precondition, RecordStore, WriteOutcome, list_all, put_conditional,
};
use common::{Fixture, Kind};

const KEY: &str = "tofu-records/e/r/terraform_data.db";

fn version(o: &WriteOutcome<store::Version>) -> store::Version {
    match o {
        WriteOutcome::Written(v) => v.clone(),
        other => panic!("expected a landed write with a version, got {other:?}"),
    }
}

async fn create_only_if_absent(kind: Kind) {
    let f = Fixture::new(kind, "create").await;
    let s = &f.store;
    let v1 = version(&s.create(KEY, b"one").await.unwrap());
    let again = s.create(KEY, b"two").await.unwrap();
    assert!(
        matches!(again, WriteOutcome::Conflict(ref c) if c.expected.is_none()),
        "{again:?}"
    );
    let stored = s.get(KEY).await.unwrap().unwrap();
    assert_eq!(stored.bytes, b"one");
    assert_eq!(stored.version.token, v1.token);
}

async fn update_only_if_match(kind: Kind) {
    let f = Fixture::new(kind, "update").await;
    let s = &f.store;
    let v1 = version(&s.create(KEY, b"one").await.unwrap());
    let v2 = version(&s.update(KEY, b"two", &v1).await.unwrap());
    assert_ne!(v1.token, v2.token);
    // The version read before is no longer current: 412.
    let stale = s.update(KEY, b"three", &v1).await.unwrap();
    match stale {
        WriteOutcome::Conflict(c) => assert_eq!(c.expected.as_ref(), Some(&v1)),
        other => panic!("stale update landed: {other:?}"),
    }
    assert_eq!(s.get(KEY).await.unwrap().unwrap().bytes, b"two");
    // Updating a record that is not there: 404, a conflict with nothing stored.
    let missing = s.update("tofu-records/e/r/none", b"x", &v1).await.unwrap();
    assert!(matches!(missing, WriteOutcome::Conflict(_)), "{missing:?}");
    assert!(s.get("tofu-records/e/r/none").await.unwrap().is_none());
}

async fn delete_only_if_match(kind: Kind) {
    let f = Fixture::new(kind, "delete").await;
    let s = &f.store;
    let v1 = version(&s.create(KEY, b"one").await.unwrap());
    let v2 = version(&s.update(KEY, b"two", &v1).await.unwrap());
    let stale = s.delete(KEY, &v1).await.unwrap();
    match stale {
        WriteOutcome::Conflict(c) => assert_eq!(c.found.map(|v| v.token), Some(v2.token.clone())),
        other => panic!("stale delete landed: {other:?}"),
    }
    assert_eq!(s.get(KEY).await.unwrap().unwrap().bytes, b"two");
    assert_eq!(s.delete(KEY, &v2).await.unwrap(), WriteOutcome::Written(()));
    assert!(s.get(KEY).await.unwrap().is_none());
    // Deleting what is gone: a conflict that finds no record (404).
    match s.delete(KEY, &v2).await.unwrap() {
        WriteOutcome::Conflict(c) => assert!(c.found.is_none()),
        other => panic!("delete of a gone record: {other:?}"),
    }
}

async fn own_retried_write_is_not_a_conflict(kind: Kind) {
    let f = Fixture::new(kind, "retry").await;
    let s = &f.store;
    let bytes = br#"{"writer":"run-1","n":1}"#;
    let first = put_conditional(s.as_ref(), KEY, bytes, &Precondition::Absent)
        .await
        .unwrap();
    let v1 = version(&first);
    // The same write again, as after a lost answer: the store holds exactly these bytes.
    let retried = put_conditional(s.as_ref(), KEY, bytes, &Precondition::Absent)
        .await
        .unwrap();
    assert_eq!(version(&retried).token, v1.token);
    let other = put_conditional(s.as_ref(), KEY, b"another run", &Precondition::Absent)
        .await
        .unwrap();
    match other {
        WriteOutcome::Conflict(c) => assert_eq!(c.found.map(|v| v.token), Some(v1.token.clone())),
        o => panic!("{o:?}"),
    }
}

async fn paging_past_a_thousand(kind: Kind) {
    let f = Fixture::new(kind, "paging").await;
    let s: DynStore = match kind {
        Kind::Local => Arc::new(LocalStore::new(
            f.dir.as_ref().unwrap().path().join("records"),
        )),
        _ => f.store.clone(),
    };
    let n = 1050;
    let keys: Vec<String> = (0..n)
        .map(|i| format!("tofu-records/p/r/k{i:05}"))
        .collect();
    use futures::StreamExt;
    let results: Vec<_> = futures::stream::iter(keys.clone())
        .map(|k| {
            let s = s.clone();
            async move { s.create(&k, k.as_bytes()).await }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for r in results {
        version(&r.unwrap());
    }
    // Another estate that starts alike is not listed.
    s.create("tofu-records/p-eu/r/k00000", b"x").await.unwrap();
    let first = s.list_page("tofu-records/p/", None).await.unwrap();
    assert_eq!(first.items.len(), 1000);
    assert!(first.next.is_some());
    let all = list_all(s.as_ref(), "tofu-records/p/").await.unwrap();
    let listed: Vec<String> = all.iter().map(|l| l.key.clone()).collect();
    assert_eq!(listed, keys);
    // Listed versions are the versions a get returns.
    let got = s.get(&keys[1049]).await.unwrap().unwrap();
    assert_eq!(all[1049].version.token, got.version.token);
}

// The whole contract: local folder, S3 on moto, Azure Blob Storage on azurite.
testkit::per_kind!(
    #[tokio::test]
    local => Local, s3 => S3, azurerm => Azure;
    [
        create_only_if_absent,
        update_only_if_match,
        delete_only_if_match,
        own_retried_write_is_not_a_conflict,
        paging_past_a_thousand,
        a_streamed_read_is_the_read,
    ]
);

// GCS on gcp-storage-emulator: the emulator ignores `ifGenerationMatch` and does not page
// its listings, so only what it can prove runs here (docs/stores.md).
testkit::per_kind!(
    #[tokio::test]
    gcs => Gcs;
    [
        writes_reads_and_lists,
        delete_of_the_current_version,
        a_streamed_read_is_the_read
    ]
);

/// A read as the bytes arrive gives the bytes and version a whole read gives (S3's in more
/// than one chunk, as its answer arrives); none for an absent key.
async fn a_streamed_read_is_the_read(kind: Kind) {
    use futures::StreamExt;
    let f = Fixture::new(kind, "streamed").await;
    let s = &f.store;
    let bytes: Vec<u8> = (0..3_000_000u64).map(|i| (i * 7919 % 251) as u8).collect();
    let v = version(&s.create(KEY, &bytes).await.unwrap());
    let streamed = s.get_streamed(KEY).await.unwrap().unwrap();
    assert_eq!(streamed.version, v);
    let chunks: Vec<Vec<u8>> = streamed
        .chunks
        .map(|c| c.unwrap())
        .collect::<Vec<_>>()
        .await;
    assert_eq!(chunks.concat(), bytes);
    assert_eq!(s.get(KEY).await.unwrap().unwrap().version, v);
    if matches!(kind, Kind::S3) {
        assert!(
            chunks.len() > 1,
            "S3's answer came in {} chunk(s)",
            chunks.len()
        );
    }
    assert!(
        s.get_streamed("tofu-records/e/r/none")
            .await
            .unwrap()
            .is_none()
    );
}

/// Writes land, reads give the bytes and version written, listings give the same versions.
async fn writes_reads_and_lists(kind: Kind) {
    let f = Fixture::new(kind, "rw").await;
    let s = &f.store;
    let v1 = version(&s.create(KEY, b"one").await.unwrap());
    let got = s.get(KEY).await.unwrap().unwrap();
    assert_eq!(got.bytes, b"one");
    assert_eq!(got.version, v1);
    let v2 = version(&s.update(KEY, b"two", &v1).await.unwrap());
    assert_ne!(v1.token, v2.token);
    let got = s.get(KEY).await.unwrap().unwrap();
    assert_eq!((got.bytes.as_slice(), &got.version), (&b"two"[..], &v2));
    assert!(s.get("tofu-records/e/r/none").await.unwrap().is_none());
    // Keys with the characters record keys use, and another estate that starts alike.
    let odd = "tofu-records/e/r/aws_instance.web%5B%22a b%22%5D";
    version(&s.create(odd, b"odd").await.unwrap());
    s.create("tofu-records/e-eu/r/x", b"x").await.unwrap();
    assert_eq!(s.get(odd).await.unwrap().unwrap().bytes, b"odd");
    let all = list_all(s.as_ref(), "tofu-records/e/").await.unwrap();
    let keys: Vec<&str> = all.iter().map(|l| l.key.as_str()).collect();
    assert_eq!(keys, vec![odd, KEY], "byte order");
    assert_eq!(all[1].version, v2);
}

/// A delete against the version read removes the record.
async fn delete_of_the_current_version(kind: Kind) {
    let f = Fixture::new(kind, "del").await;
    let s = &f.store;
    let v1 = version(&s.create(KEY, b"one").await.unwrap());
    assert_eq!(s.delete(KEY, &v1).await.unwrap(), WriteOutcome::Written(()));
    assert!(s.get(KEY).await.unwrap().is_none());
    assert!(
        list_all(s.as_ref(), "tofu-records/")
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn local_store_breaks_a_stale_lock_file() {
    let dir = tempfile::tempdir().unwrap();
    let s = LocalStore::new(dir.path());
    let v1 = version(&s.create("tofu-records/e/r/a", b"one").await.unwrap());
    // A writer that died mid-write left its lock file (pid that cannot exist).
    let lock = dir.path().join("tofu-records/e/r/.lock.a");
    std::fs::write(&lock, "pid=4194304999 since=0\n").unwrap();
    let started = std::time::Instant::now();
    version(&s.update("tofu-records/e/r/a", b"two", &v1).await.unwrap());
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(
        !lock.exists(),
        "the stale lock file is gone after the write"
    );
    assert_eq!(
        s.get("tofu-records/e/r/a").await.unwrap().unwrap().bytes,
        b"two"
    );
}

#[tokio::test]
async fn local_store_waits_for_a_live_holder() {
    let dir = tempfile::tempdir().unwrap();
    let s = LocalStore::new(dir.path());
    let v1 = version(&s.create("tofu-records/e/r/a", b"one").await.unwrap());
    // A live writer holds the lock (this process, holding its flock) for 300 ms.
    let lock = dir.path().join("tofu-records/e/r/.lock.a");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
        .unwrap();
    file.lock().unwrap();
    std::fs::write(&lock, format!("pid={} since=0\n", std::process::id())).unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        std::fs::remove_file(&lock).unwrap();
        drop(file);
    });
    let started = std::time::Instant::now();
    version(&s.update("tofu-records/e/r/a", b"two", &v1).await.unwrap());
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(250),
        "the writer waited for the live holder"
    );
    release.join().unwrap();
}

#[tokio::test]
async fn local_store_refuses_keys_outside_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let s = LocalStore::new(dir.path().join("records"));
    for key in [
        "../x",
        "tofu-records/../../x",
        "/etc/passwd",
        "a//b",
        "tofu-records/e/r/.lock.a",
        "",
    ] {
        assert!(s.create(key, b"x").await.is_err(), "{key:?} was accepted");
    }
    assert!(!dir.path().join("x").exists());
}

#[tokio::test]
async fn s3_records_carry_the_estate_tag() {
    let (s, bucket) = common::s3_store("tag").await;
    s.create("tofu-records/prod-eu/r/terraform_data.a", b"x")
        .await
        .unwrap();
    let tags = s
        .client()
        .get_object_tagging()
        .bucket(&bucket)
        .key("tofu-records/prod-eu/r/terraform_data.a")
        .send()
        .await
        .unwrap();
    let found: Vec<(String, String)> = tags
        .tag_set()
        .iter()
        .map(|t| (t.key().to_string(), t.value().to_string()))
        .collect();
    assert_eq!(
        found,
        vec![("tofu-estate".to_string(), "prod-eu".to_string())]
    );
}
