//! The write log's rules as the session keeps them, on every store kind: a session whose clock
//! is further from the store's than the skew limit is refused by name, and writes no image nor
//! entry; entries list newest first with no start key and name their records; an entry past
//! the stall limit is replaced by a new one before the record write goes out.

use testkit as common;

use std::sync::Arc;
use std::time::Duration;

use choudoufu_live::engine::image::Image;
use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::log_writer::{ClockCheckError, LogWriteError, LogWriter};
use choudoufu_live::engine::operation::Operation;
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::read::{Sources, read_estate};
use choudoufu_live::engine::record::Record;
use choudoufu_live::engine::session::{Instant, RunInfo, Session, SessionError};
use choudoufu_live::engine::write::Change;
use choudoufu_live::engine::write::records::{self, Outcome, RecordWrite};
use choudoufu_live::engine::write_log::{LogEntry, Offset, OffsetClock, Timing};
use choudoufu_live::store::{DynStore, KeyRange, Precondition, list_all};
use common::interposed::Interposed;
use common::{Fixture, Kind};
use serde_json::{Value, json};

fn layout(name: &str) -> Layout {
    Layout::new(EstateName::parse(name).unwrap())
}

fn run() -> RunInfo {
    RunInfo::new(ProgramStamp::default())
}

/// A state document of `n` terraform_data resources.
fn doc(n: usize) -> Vec<u8> {
    use common::state::{input, terraform_data};
    let resources: Vec<Value> = (0..n)
        .map(|i| {
            terraform_data(
                &format!("r{i}"),
                json!({"id": format!("id-{i}"), "input": input(&format!("v{i}"))}),
            )
        })
        .collect();
    serde_json::to_vec(&json!({
        "version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "l-log",
        "outputs": {}, "resources": resources
    }))
    .unwrap()
}

fn skewed(store: &DynStore, l: &Layout, offset: Offset) -> Session {
    Session::new(store.clone(), l.clone(), run()).with_clock(Arc::new(OffsetClock(offset)))
}

/// A clock five minutes ahead of the store's, or behind it, is refused by name; one that is right passes.
async fn a_skewed_clock_is_refused_by_name(kind: Kind) {
    let f = Fixture::new(kind, "skew").await;
    let l = layout("skew");
    let five = Duration::from_secs(300);
    for (offset, way) in [
        (Offset::Ahead(five), "ahead of"),
        (Offset::Behind(five), "behind"),
    ] {
        match skewed(&f.store, &l, offset).check_clock().await {
            Err(ClockCheckError::Skew(e)) => {
                let message = e.to_string();
                assert!(message.starts_with("ClockSkewError: "), "{message}");
                assert!(
                    message.contains(&format!("{way} the clock of {}", f.store.describe())),
                    "{message}"
                );
                assert!(e.skew >= Duration::from_secs(295), "{e:?}");
            }
            other => panic!("{kind:?}: a clock {way} by 5 min was not refused: {other:?}"),
        }
    }
    let right = Session::new(f.store.clone(), l.clone(), run());
    right.check_clock().await.unwrap();
    let close = skewed(&f.store, &l, Offset::Ahead(Duration::from_secs(20)));
    close.check_clock().await.unwrap();
}

/// A reader whose clock is too far off writes no estate image (whose watermark its clock would
/// set); the same read with a right clock writes one.
async fn a_skewed_reader_writes_no_image(kind: Kind) {
    let f = Fixture::new(kind, "skew-image").await;
    let l = layout("skewimg");
    Session::new(f.store.clone(), l.clone(), run())
        .write_state(&doc(60))
        .await
        .unwrap()
        .into_result()
        .unwrap();
    let reader = skewed(&f.store, &l, Offset::Behind(Duration::from_secs(600)));
    reader.refresh().await.unwrap();
    assert_eq!(reader.snapshot().await.records.len(), 60);
    assert!(
        f.store.get(&l.image_key()).await.unwrap().is_none(),
        "{kind:?}: a reader with a skewed clock wrote the estate image"
    );
    Session::new(f.store.clone(), l.clone(), run())
        .refresh()
        .await
        .unwrap();
    assert!(
        f.store.get(&l.image_key()).await.unwrap().is_some(),
        "{kind:?}: a reader with a right clock writes the image of 60 records read"
    );
}

/// Entries land under `wlog/`, list newest first from the folder's start, and name their records.
async fn entries_list_newest_first_and_name_their_records(kind: Kind) {
    let f = Fixture::new(kind, "entries").await;
    let l = layout("entries");
    let s = Session::new(f.store.clone(), l.clone(), run());
    let keys = [
        l.resource_key("terraform_data.a"),
        l.output_key("out"),
        l.resource_key("terraform_data.b[\"x/y\"]"),
    ];
    let ops = [Operation::Create, Operation::Update, Operation::Delete];
    let mut made = Vec::new();
    for (key, op) in keys.iter().zip(ops) {
        made.push(s.log_write(op, key).await.unwrap());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let page = f
        .store
        .list_range_page(&l.log_prefix(), &KeyRange::default(), 1000, None)
        .await
        .unwrap();
    let listed: Vec<LogEntry> = page
        .items
        .iter()
        .map(|i| LogEntry::parse(&l, &i.key).unwrap())
        .collect();
    made.reverse();
    assert_eq!(
        listed, made,
        "{kind:?}: newest first, exactly the entries made"
    );
    let named: Vec<String> = listed.iter().map(|e| e.record_key(&l)).collect();
    assert_eq!(named, [keys[2].clone(), keys[1].clone(), keys[0].clone()]);
    let body: Value = serde_json::from_slice(
        &f.store
            .get(&page.items[0].key)
            .await
            .unwrap()
            .unwrap()
            .bytes,
    )
    .unwrap();
    assert_eq!(
        (body["key"].as_str(), body["op"].as_str()),
        (Some(keys[2].as_str()), Some("delete"))
    );
    let skew = skewed(&f.store, &l, Offset::Ahead(Duration::from_secs(300)));
    assert!(matches!(
        skew.log_write(Operation::Update, &keys[0]).await,
        Err(LogWriteError::Clock(ClockCheckError::Skew(_)))
    ));
    assert_eq!(
        list_all(f.store.as_ref(), &l.log_prefix())
            .await
            .unwrap()
            .len(),
        3,
        "a refused writer makes no entry"
    );
}

/// A record write about to go out after its entry is past the stall limit logs again first: the
/// new entry is newer and both are in the log; an entry within the limit is kept.
async fn a_stalled_write_logs_again(kind: Kind) {
    let f = Fixture::new(kind, "stall").await;
    let l = layout("stall");
    let timing = Timing {
        stall: Duration::from_millis(1500),
        ..Timing::default()
    };
    let s = Session::new(f.store.clone(), l.clone(), run()).with_timing(timing);
    let key = l.resource_key("terraform_data.a").into_string();
    let first = s.log_write(Operation::Update, &key).await.unwrap();
    let kept = s.fresh_entry(first.clone(), &key).await.unwrap();
    assert_eq!(kept, first, "within the stall limit the entry stands");
    tokio::time::sleep(Duration::from_millis(1700)).await;
    let again = s.fresh_entry(first.clone(), &key).await.unwrap();
    assert_ne!(again, first);
    assert!(again.at() > first.at() && again.key(&l) < first.key(&l));
    assert_eq!(
        (again.op(), again.record_key(&l)),
        (Operation::Update, key.clone())
    );
    let listed: Vec<String> = list_all(f.store.as_ref(), &l.log_prefix())
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.key)
        .collect();
    assert_eq!(listed, [again.key(&l), first.key(&l)]);
}

/// The entries in `l`'s log, as their names say them.
async fn entries(store: &DynStore, l: &Layout) -> Vec<LogEntry> {
    list_all(store.as_ref(), &l.log_prefix())
        .await
        .unwrap()
        .iter()
        .map(|i| LogEntry::parse(l, &i.key).unwrap())
        .collect()
}

/// The name of the entry the record at `key` carries, and that record's key.
async fn carried(store: &DynStore, l: &Layout, key: &str) -> Option<String> {
    let stored = store.get(key).await.unwrap()?;
    Record::decode(key, &stored.bytes, l).unwrap().writer.log
}

/// Every record write, by every writer of the engine (a session's state write, a record written
/// at a provider's return, the choudoufu protocol's record writes), makes its write log entry
/// first: each create, update and delete has one entry naming its record and operation, and
/// each record written carries its entry's name.
async fn every_record_write_logs_first(kind: Kind) {
    let f = Fixture::new(kind, "logged").await;
    let l = layout("logged");
    let s = Session::new(f.store.clone(), l.clone(), run());
    s.write_state(&doc(3)).await.unwrap().into_result().unwrap();
    // r0 changes, r2 goes, r1 stays.
    let mut next: Value = serde_json::from_slice(&doc(2)).unwrap();
    next["resources"][0]["instances"][0]["attributes"]["id"] = json!("id-0b");
    s.write_state(&serde_json::to_vec(&next).unwrap())
        .await
        .unwrap()
        .into_result()
        .unwrap();
    let (meta, mut instance) = s.instance_of("terraform_data.r1").await.unwrap();
    instance["attributes"]["id"] = json!("id-1b");
    s.write_instant(Instant::Put {
        address: "terraform_data.r1".into(),
        meta,
        instance,
        terraform_version: None,
    })
    .await
    .unwrap();
    s.write_instant(Instant::Delete {
        address: "terraform_data.r0".into(),
    })
    .await
    .unwrap();
    let protocol = LogWriter::new(f.store.clone(), l.clone(), &s.run().run_id);
    let written = records::write_records(
        &f.store,
        &l,
        s.run(),
        &protocol,
        vec![RecordWrite {
            address: "o".into(),
            kind: records::Kind::Output,
            change: Change::Put {
                body: json!({"output": {"value": "v", "type": "string"}}),
                precondition: Precondition::Absent,
            },
            undeclared: false,
        }],
        4,
    )
    .await
    .unwrap();
    assert!(
        matches!(written[0].1, Outcome::Written(_)),
        "{kind:?}: {written:?}"
    );
    let key = |i: usize| {
        l.resource_key(&format!("terraform_data.r{i}"))
            .into_string()
    };
    let mut listed: Vec<(String, Operation)> = entries(&f.store, &l)
        .await
        .iter()
        .rev()
        .map(|e| (e.record_key(&l), e.op()))
        .collect();
    let mut expected = vec![
        (key(0), Operation::Create),
        (key(1), Operation::Create),
        (key(2), Operation::Create),
        (key(2), Operation::Delete),
        (key(0), Operation::Update),
        (key(1), Operation::Update),
        (key(0), Operation::Delete),
        (l.output_key("o").into_string(), Operation::Create),
    ];
    // The writes of one document go out at once, in any order.
    listed[..3].sort_by(|a, b| a.0.cmp(&b.0));
    listed[3..5].sort_by_key(|(_, op)| *op == Operation::Update);
    expected[3..5].sort_by_key(|(_, op)| *op == Operation::Update);
    assert_eq!(listed, expected, "{kind:?}: one entry per record write");
    let names: Vec<String> = entries(&f.store, &l)
        .await
        .iter()
        .map(LogEntry::name)
        .collect();
    for record in [key(1), l.output_key("o").into_string()] {
        let name = carried(&f.store, &l, &record).await;
        let entry = names
            .iter()
            .find(|n| Some(*n) == name.as_ref())
            .unwrap_or_else(|| panic!("{kind:?}: {record} carries {name:?}, no entry"));
        assert_eq!(
            LogEntry::parse(&l, &format!("{}{entry}", l.log_prefix()))
                .unwrap()
                .record_key(&l),
            record
        );
    }
}

/// A writer whose clock is too far from the store's writes no record and no entry: its state
/// write is refused by name (ClockSkewError).
async fn a_skewed_writer_writes_nothing(kind: Kind) {
    let f = Fixture::new(kind, "skew-write").await;
    let l = layout("skewwrite");
    let s = skewed(&f.store, &l, Offset::Ahead(Duration::from_secs(300)));
    match s.write_state(&doc(2)).await {
        Err(SessionError::ClockSkew(e)) => {
            assert!(e.to_string().starts_with("ClockSkewError: "), "{e}")
        }
        other => panic!("{kind:?}: a writer 5 min ahead wrote: {other:?}"),
    }
    let left: Vec<String> = list_all(f.store.as_ref(), &l.prefix())
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.key)
        .filter(|k| k.starts_with(&format!("{}r/", l.prefix())) || k.starts_with(&l.log_prefix()))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "{kind:?}: no record, no entry");
}

/// A reader that writes a new image deletes the write log entries older than the retention
/// (here shortened to 4 s), and leaves the younger ones.
async fn a_new_image_sweeps_expired_entries(kind: Kind) {
    let f = Fixture::new(kind, "sweep").await;
    let l = layout("sweep");
    let timing = Timing {
        retention: Duration::from_secs(4),
        ..Timing::default()
    };
    Session::new(f.store.clone(), l.clone(), run())
        .write_state(&doc(60))
        .await
        .unwrap()
        .into_result()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    // Made by a clock 50 s ahead (within the skew limit): younger than the retention for 54 s.
    let young = skewed(&f.store, &l, Offset::Ahead(Duration::from_secs(50)))
        .log_write(Operation::Update, &l.resource_key("terraform_data.r0"))
        .await
        .unwrap();
    Session::new(f.store.clone(), l.clone(), run())
        .with_timing(timing)
        .refresh()
        .await
        .unwrap();
    assert!(f.store.get(&l.image_key()).await.unwrap().is_some());
    assert_eq!(
        entries(&f.store, &l).await,
        [young],
        "{kind:?}: only the entry younger than the retention is left"
    );
}

/// The claim: a record write whose log entry a compacting read lists, but which lands after that
/// read listed the records (its write held in flight past the margin), is still seen by the
/// next reader through the log: the new image names the entry as pending, though it is older
/// than the image's watermark.
async fn a_write_landing_after_compaction_is_seen_through_pending(kind: Kind) {
    let f = Fixture::new(kind, "pending").await;
    let l = layout("pending");
    // A short margin whose skew limit (3 s) is above the local store's 2 s resolution.
    let timing = Timing {
        margin: Duration::from_secs(6),
        ..Timing::default()
    };
    Session::new(f.store.clone(), l.clone(), run())
        .write_state(&doc(60))
        .await
        .unwrap()
        .into_result()
        .unwrap();
    let key = l.resource_key("terraform_data.r5").into_string();
    let held = Arc::new(Interposed::new(f.store.clone()).holding_put(key.clone()));
    let writer = Session::open(held.clone(), l.clone(), run())
        .await
        .unwrap()
        .with_timing(timing);
    let (meta, mut instance) = writer.instance_of("terraform_data.r5").await.unwrap();
    instance["attributes"]["input"] = common::state::input("landed late");
    let write = tokio::spawn(async move {
        writer
            .write_instant(Instant::Put {
                address: "terraform_data.r5".into(),
                meta,
                instance,
                terraform_version: None,
            })
            .await
    });
    held.held.notified().await;
    let entry = entries(&f.store, &l)
        .await
        .into_iter()
        .find(|e| e.record_key(&l) == key && e.op() == Operation::Update)
        .expect("the entry is made before the record write");
    // Past the margin, the image is lost and the next read compacts: its watermark lies past the
    // entry, whose record write has not landed.
    tokio::time::sleep(Duration::from_millis(6500)).await;
    if let Some(image) = f.store.get(&l.image_key()).await.unwrap() {
        f.store
            .delete(&l.image_key(), &image.version)
            .await
            .unwrap();
    }
    Session::new(f.store.clone(), l.clone(), run())
        .with_timing(timing)
        .refresh()
        .await
        .unwrap();
    let stored = f.store.get(&l.image_key()).await.unwrap();
    let image = Image::decode(&l, stored.expect("the compaction wrote an image").bytes).unwrap();
    let mark = image.log().expect("a watermark");
    assert!(
        mark.from > entry.at(),
        "{kind:?}: the entry is older than the watermark"
    );
    held.release.notify_one();
    write.await.unwrap().unwrap();
    let read = read_estate(&f.store, &l, 32, "test", Sources::default())
        .await
        .unwrap();
    assert_eq!(read.stats.log_pages, 1, "{kind:?}: {:?}", read.stats);
    let r5 = &read.snapshot.records[key.as_str()];
    assert_eq!(
        r5.record().unwrap().instance().unwrap()["attributes"]["input"]["value"],
        "landed late",
        "{kind:?}: the write that landed after the compaction was missed"
    );
}

testkit::per_kind!(
    local_pending => Local, s3_pending => S3;
    [a_write_landing_after_compaction_is_seen_through_pending]
);

testkit::per_kind!(
    local => Local, s3 => S3, azurerm => Azure, gcs => Gcs;
    [
        every_record_write_logs_first,
        a_new_image_sweeps_expired_entries,
        a_skewed_writer_writes_nothing,
        a_skewed_clock_is_refused_by_name,
        a_skewed_reader_writes_no_image,
        entries_list_newest_first_and_name_their_records,
        a_stalled_write_logs_again,
    ]
);
