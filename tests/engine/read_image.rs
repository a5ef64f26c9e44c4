//! Reads through the estate image and parallel range listings, on every store kind: a read
//! through the image gives exactly what a plain read (list, then get every record) gives; an
//! image entry at another version than the listed one is never used; a corrupt or foreign
//! image is ignored with a warning; range listings under concurrent creates and deletes miss
//! nothing that existed throughout and list nothing that never existed.

use testkit as common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use choudoufu_live::engine::image::Image;
use choudoufu_live::engine::layout::{EstateName, KeyKind, Layout};
use choudoufu_live::engine::log_writer::LogWriter;
use choudoufu_live::engine::operation::Operation;
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::read::{Sources, read_estate};
use choudoufu_live::engine::read_cache::ReadCache;
use choudoufu_live::engine::record::{EstateMeta, Record};
use choudoufu_live::engine::session::{Instant, RunInfo, Session, Snapshot};
use choudoufu_live::engine::write_log::{Offset, OffsetClock, Timing};
use choudoufu_live::store::azure::AzureStore;
use choudoufu_live::store::gcs::GcsStore;
use choudoufu_live::store::local::LocalStore;
use choudoufu_live::store::s3::S3Store;
use choudoufu_live::store::{DynStore, KeyRange, Listed, Version, list_all, list_range};
use common::state::input;
use common::{Fixture, Kind};
use futures::StreamExt;
use serde_json::{Value, json};

const PARALLEL: usize = 32;

fn layout(name: &str) -> Layout {
    Layout::new(EstateName::parse(name).unwrap())
}

fn run() -> RunInfo {
    RunInfo::new(ProgramStamp::default())
}

/// A state document of `n` terraform_data resources (r0's input is `first`) and two outputs.
fn doc(n: usize, first: &str) -> Vec<u8> {
    use common::state::{input, terraform_data};
    let resources: Vec<Value> = (0..n)
        .map(|i| {
            let v = if i == 0 {
                first.to_string()
            } else {
                format!("v{i}")
            };
            terraform_data(
                &format!("r{i}"),
                json!({"id": format!("id-{i}"), "input": input(&v)}),
            )
        })
        .collect();
    serde_json::to_vec(&json!({
        "version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "l-img",
        "outputs": {"a": {"value": first, "type": "string"}, "b": {"value": 2, "type": "number"}},
        "resources": resources
    }))
    .unwrap()
}

async fn seed(store: &DynStore, l: &Layout, n: usize, first: &str) {
    Session::new(store.clone(), l.clone(), run())
        .write_state(&doc(n, first))
        .await
        .unwrap()
        .into_result()
        .unwrap();
}

/// A read in plain terms: the estate record with its version, and each record with its version.
type Plain = (
    Option<(EstateMeta, String)>,
    BTreeMap<String, (String, Record)>,
);

/// What a plain read sees: list the prefix, get every state record, decode it (no image, no cache).
async fn plain_read(store: &DynStore, l: &Layout) -> Plain {
    let mut estate = None;
    let mut records = BTreeMap::new();
    for item in list_all(store.as_ref(), &l.prefix()).await.unwrap() {
        let kind = l.classify(&item.key);
        if !matches!(
            kind,
            Some(KeyKind::Estate | KeyKind::Resource | KeyKind::Output)
        ) {
            continue;
        }
        let stored = store.get(&item.key).await.unwrap().unwrap();
        if kind == Some(KeyKind::Estate) {
            let meta = EstateMeta::decode(&item.key, &stored.bytes, l).unwrap();
            estate = Some((meta, stored.version.token));
        } else {
            let record = Record::decode(&item.key, &stored.bytes, l).unwrap();
            records.insert(item.key, (stored.version.token, record));
        }
    }
    (estate, records)
}

/// The snapshot a read gave, in the plain read's terms (and every digest is the record's own).
fn as_plain(s: &Snapshot) -> Plain {
    for e in s.records.values() {
        assert_eq!(
            e.digest,
            e.record().unwrap().content_digest(),
            "{}",
            e.address()
        );
    }
    (
        s.estate.as_ref().map(|(m, v)| (m.clone(), v.token.clone())),
        s.records
            .iter()
            .map(|(k, e)| {
                (
                    k.clone(),
                    (e.version.token.clone(), e.record().unwrap().clone()),
                )
            })
            .collect(),
    )
}

async fn cold_read(store: &DynStore, l: &Layout) -> choudoufu_live::engine::read::Read {
    read_estate(store, l, PARALLEL, "test", Sources::default())
        .await
        .unwrap()
}

async fn a_cold_read_through_the_image_is_a_plain_read(kind: Kind) {
    let f = Fixture::new(kind, "img").await;
    let l = layout("img");
    let n = 80;
    seed(&f.store, &l, n, "a").await;

    // The first read finds no image, fetches every record, and writes one (80 > the bound).
    let first = Session::new(f.store.clone(), l.clone(), run());
    first.refresh().await.unwrap();
    let stored = f.store.get(&l.image_key()).await.unwrap();
    let stored = stored.expect("the first read wrote the estate image");
    assert_eq!(Image::decode(&l, stored.bytes).unwrap().len(), n + 3);

    // A cold read (another machine: no cache, no session) takes every record from the image.
    let read = cold_read(&f.store, &l).await;
    assert_eq!(
        (read.stats.from_image, read.stats.fetched),
        (n + 3, 0),
        "{:?}",
        read.stats
    );
    assert!(read.refresh.is_none(), "a fresh image is not written again");
    assert_eq!(as_plain(&read.snapshot), plain_read(&f.store, &l).await);

    // Another run changes r0 and output a: those two are fetched, the rest still come from the image.
    let other = Session::open(f.peer().await, l.clone(), run())
        .await
        .unwrap();
    other
        .write_state(&doc(n, "b"))
        .await
        .unwrap()
        .into_result()
        .unwrap();
    let read = cold_read(&f.store, &l).await;
    assert_eq!(
        (read.stats.from_image, read.stats.fetched),
        (n + 1, 2),
        "{:?}",
        read.stats
    );
    assert_eq!(as_plain(&read.snapshot), plain_read(&f.store, &l).await);
    let document = Session::open(f.store.clone(), l.clone(), run())
        .await
        .unwrap()
        .state_document()
        .await;
    let document: Value = serde_json::from_slice(&document).unwrap();
    assert_eq!(document["outputs"]["a"]["value"], "b");
    assert_eq!(document["resources"].as_array().unwrap().len(), n);
}

/// The claim: an image entry whose version is not the listed one is never used.
async fn an_image_entry_at_another_version_is_never_used(kind: Kind) {
    let f = Fixture::new(kind, "imgv").await;
    let l = layout("imgv");
    seed(&f.store, &l, 60, "old").await;
    Session::new(f.store.clone(), l.clone(), run())
        .refresh()
        .await
        .unwrap();
    assert!(f.store.get(&l.image_key()).await.unwrap().is_some());
    for round in 0..3 {
        // Another run changes r0 after the image was written: the image holds r0 at its old version.
        let value = format!("new-{round}");
        let other = Session::open(f.peer().await, l.clone(), run())
            .await
            .unwrap();
        other
            .write_state(&doc(60, &value))
            .await
            .unwrap()
            .into_result()
            .unwrap();
        let fresh = Session::open(f.store.clone(), l.clone(), run())
            .await
            .unwrap();
        let snap = fresh.snapshot().await;
        let r0 = &snap.records[l.resource_key("terraform_data.r0").as_str()];
        assert_eq!(
            r0.record().unwrap().instance().unwrap()["attributes"]["input"]["value"],
            value.as_str(),
            "round {round}: a read served r0 from an image entry at another version"
        );
        let (_, plain) = plain_read(&f.store, &l).await;
        assert_eq!(
            r0.version.token,
            plain[l.resource_key("terraform_data.r0").as_str()].0
        );
        // The read above went through the write log, which named r0. The full listing takes
        // each record from the image only at the version listed: a reader a week on no longer
        // trusts the log and lists, and the image holds r0 at its old version.
        let week = OffsetClock(Offset::Ahead(Duration::from_secs(7 * 24 * 3600)));
        let sources = Sources {
            clock: Some(&week),
            ..Sources::default()
        };
        let listed = read_estate(&f.store, &l, PARALLEL, "test", sources)
            .await
            .unwrap();
        let r0 = &listed.snapshot.records[l.resource_key("terraform_data.r0").as_str()];
        assert_eq!(
            r0.record().unwrap().instance().unwrap()["attributes"]["input"]["value"],
            value.as_str(),
            "round {round}: the full listing served r0 from an image entry at another version"
        );
    }
}

/// A writer collecting every log line, to see the warnings.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

async fn a_corrupt_or_foreign_image_is_ignored_with_a_warning(kind: Kind) {
    let f = Fixture::new(kind, "imgc").await;
    let l = layout("imgc");
    seed(&f.store, &l, 60, "a").await;
    Session::new(f.store.clone(), l.clone(), run())
        .refresh()
        .await
        .unwrap();
    let good = f.store.get(&l.image_key()).await.unwrap().unwrap();
    // Another estate's image (same records' shape), a damaged one, a truncated one, no image at all.
    let other = layout("imgc-other");
    seed(&f.store, &other, 60, "z").await;
    Session::new(f.store.clone(), other.clone(), run())
        .refresh()
        .await
        .unwrap();
    let foreign = f
        .store
        .get(&other.image_key())
        .await
        .unwrap()
        .unwrap()
        .bytes;
    let mut damaged = good.bytes.clone();
    let at = damaged.len() / 2;
    damaged[at] = if damaged[at] == b'7' { b'8' } else { b'7' };
    let truncated = good.bytes[..good.bytes.len() - 40].to_vec();
    // An image of the earlier format (v1: SHA-256, records as stored) is never read as this one.
    let tag = b"choudoufu-live/image/v4-lz4\n";
    assert!(good.bytes.starts_with(tag));
    let older = [&b"choudoufu-live/image/v1\n"[..], &good.bytes[tag.len()..]].concat();
    let plain = plain_read(&f.store, &l).await;
    for (what, bytes, warning) in [
        ("foreign", foreign, "is estate \"imgc-other\"'s"),
        ("damaged", damaged, "checksum does not match"),
        (
            "truncated",
            truncated,
            "do not add up to its text and its bytes",
        ),
        (
            "of format v1",
            older,
            "its first line is \"choudoufu-live/image/v1\"",
        ),
        (
            "not an image",
            b"{\"resources\": []}".to_vec(),
            "not an estate image",
        ),
    ] {
        let current = f.store.get(&l.image_key()).await.unwrap().unwrap().version;
        f.store
            .update(&l.image_key(), &bytes, &current)
            .await
            .unwrap();
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let read = cold_read(&f.store, &l).await;
        drop(_guard);
        assert_eq!(read.stats.from_image, 0, "{what}: {:?}", read.stats);
        assert_eq!(as_plain(&read.snapshot), plain, "{what}");
        let text = logs.text();
        assert!(
            text.contains("WARN")
                && text.contains("ignoring the estate image")
                && text.contains(warning),
            "{what}: no warning naming the reason:\n{text}"
        );
        // That read found every record outside a usable image, so it has a good one to store.
        assert!(read.refresh.is_some(), "{what}: no new image is due");
    }
    // A session stores that new image, and the next cold read uses it.
    Session::new(f.store.clone(), l.clone(), run())
        .refresh()
        .await
        .unwrap();
    let read = cold_read(&f.store, &l).await;
    assert_eq!(read.stats.fetched, 0, "{:?}", read.stats);
    assert_eq!(as_plain(&read.snapshot), plain);
}

/// The same store with small listing pages, so every range needs several requests.
async fn small_pages(f: &Fixture, page: usize) -> DynStore {
    match f.kind {
        Kind::Local => Arc::new(
            LocalStore::new(f.dir.as_ref().unwrap().path().join("records")).with_page_size(page),
        ),
        Kind::S3 => Arc::new(
            S3Store::connect(&common::s3_settings(f.bucket.as_ref().unwrap()))
                .await
                .with_page_size(page as i32),
        ),
        Kind::Azure => {
            Arc::new(AzureStore::connect(f.azure.as_ref().unwrap()).with_page_size(page))
        }
        Kind::Gcs => Arc::new(GcsStore::connect(f.gcs.as_ref().unwrap()).with_page_size(page)),
    }
}

/// Ranges over `prefix` split after every `every`-th key of `known`, tiling the key space.
fn ranges_of(known: &[String], every: usize) -> Vec<KeyRange> {
    let chunks: Vec<&[String]> = known.chunks(every).collect();
    let mut after = None;
    let mut out = Vec::new();
    for (i, c) in chunks.iter().enumerate() {
        let last = c.last().cloned();
        out.push(if i + 1 == chunks.len() {
            KeyRange::new(after.clone(), None)
        } else {
            KeyRange::through(after.clone(), last.clone())
        });
        after = last;
    }
    out
}

async fn range_listings_during_creates_and_deletes_miss_nothing_and_invent_nothing(kind: Kind) {
    let f = Fixture::new(kind, "race").await;
    let lister = small_pages(&f, 7).await;
    for round in 0..2 {
        let prefix = format!("tofu-records/race{round}/r/");
        let key = |i: usize, tail: &str| format!("{prefix}k{i:04}{tail}");
        // Stable keys (even), churn keys deleted during the listing (odd), keys created during it.
        let stable: Vec<String> = (0..120).step_by(2).map(|i| key(i, "")).collect();
        let churn: Vec<String> = (1..120).step_by(2).map(|i| key(i, "")).collect();
        let created: Vec<String> = (0..120).step_by(2).map(|i| key(i, "x")).collect();
        let mut versions = BTreeMap::new();
        for k in stable.iter().chain(&churn) {
            let v = f.store.create(k, k.as_bytes()).await.unwrap();
            let choudoufu_live::store::WriteOutcome::Written(v) = v else {
                panic!("{k} exists")
            };
            versions.insert(k.clone(), v);
        }
        let ever: BTreeSet<&String> = stable.iter().chain(&churn).chain(&created).collect();
        let ranges = ranges_of(&stable, 10);
        assert!(ranges.len() >= 6);

        let (deleter, creator) = (f.peer().await, f.peer().await);
        let churn_versions: Vec<(String, Version)> = churn
            .iter()
            .map(|k| (k.clone(), versions[k].clone()))
            .collect();
        let deletes = tokio::spawn(async move {
            for (k, v) in churn_versions.into_iter().rev() {
                deleter.delete(&k, &v).await.unwrap();
            }
        });
        let creates = {
            let created = created.clone();
            tokio::spawn(async move {
                for k in created {
                    creator.create(&k, k.as_bytes()).await.unwrap();
                }
            })
        };
        let mut listings = 0;
        while !(deletes.is_finished() && creates.is_finished()) || listings < 2 {
            let pages: Vec<Vec<Listed>> = futures::stream::iter(ranges.clone())
                .map(|r| {
                    let (lister, prefix) = (lister.clone(), prefix.clone());
                    async move { list_range(lister.as_ref(), &prefix, &r, 7).await.unwrap() }
                })
                .buffer_unordered(8)
                .collect()
                .await;
            let listed: Vec<&Listed> = pages.iter().flatten().collect();
            let keys: Vec<&String> = listed.iter().map(|l| &l.key).collect();
            let unique: BTreeSet<&String> = keys.iter().copied().collect();
            assert_eq!(
                unique.len(),
                keys.len(),
                "round {round}: a key was listed twice"
            );
            for k in &stable {
                assert!(
                    unique.contains(k),
                    "round {round}: {k} existed throughout and was missed"
                );
            }
            for l in &listed {
                assert!(
                    ever.contains(&l.key),
                    "round {round}: {} never existed",
                    l.key
                );
                if let Some(v) = versions.get(&l.key) {
                    assert_eq!(l.version.token, v.token, "{}", l.key);
                }
            }
            listings += 1;
        }
        deletes.await.unwrap();
        creates.await.unwrap();
        let after: Vec<String> = futures::stream::iter(ranges.clone())
            .map(|r| {
                let (lister, prefix) = (lister.clone(), prefix.clone());
                async move { list_range(lister.as_ref(), &prefix, &r, 7).await.unwrap() }
            })
            .buffered(8)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .flatten()
            .map(|l| l.key)
            .collect();
        let mut want: Vec<String> = stable.iter().chain(&created).cloned().collect();
        want.sort();
        assert_eq!(
            after, want,
            "round {round}: the ranges in order list exactly what is there"
        );
    }
}

/// On a kind whose server starts a listing at the range's start, a range near the end is one request.
async fn the_server_starts_a_range_listing_after_its_start(kind: Kind) {
    let f = Fixture::new(kind, "start").await;
    let s = small_pages(&f, 5).await;
    let keys: Vec<String> = (0..40)
        .map(|i| format!("tofu-records/s/r/k{i:02}"))
        .collect();
    for k in &keys {
        s.create(k, b"x").await.unwrap();
    }
    let range = KeyRange::new(Some(keys[36].clone()), None);
    let page = s
        .list_range_page("tofu-records/s/r/", &range, 5, None)
        .await
        .unwrap();
    let got: Vec<&str> = page.items.iter().map(|l| l.key.as_str()).collect();
    assert_eq!(got, [&keys[37], &keys[38], &keys[39]]);
    assert_eq!(page.next, None);
    let through = KeyRange::through(Some(keys[3].clone()), Some(keys[6].clone()));
    let page = s
        .list_range_page("tofu-records/s/r/", &through, 5, None)
        .await
        .unwrap();
    let got: Vec<&str> = page.items.iter().map(|l| l.key.as_str()).collect();
    assert_eq!(
        got,
        [&keys[4], &keys[5], &keys[6]],
        "the end is inclusive of `last` and nothing past it"
    );
    assert_eq!(page.next, None, "no page past the range's end");
}

/// Delete every write log entry of `l`, as the retention's expiry would.
async fn expire_log(store: &DynStore, l: &Layout) {
    for item in list_all(store.as_ref(), &l.log_prefix()).await.unwrap() {
        store.delete(&item.key, &item.version).await.unwrap();
    }
}

/// A reader whose image's watermark is older than the log's trust (an injected clock a week
/// ahead) does not read through the log, whose entries may have expired: it lists the estate,
/// and sees a write made after the image whose entry is gone.
async fn an_image_older_than_the_logs_trust_falls_back_to_the_full_listing(kind: Kind) {
    let f = Fixture::new(kind, "img-old").await;
    let l = layout("imgold");
    seed(&f.store, &l, 60, "a").await;
    Session::new(f.store.clone(), l.clone(), run())
        .refresh()
        .await
        .unwrap();
    let image = Image::decode(
        &l,
        f.store.get(&l.image_key()).await.unwrap().unwrap().bytes,
    )
    .unwrap();
    assert!(image.log().is_some(), "{kind:?}: the image has a watermark");
    let writer = Session::open(f.store.clone(), l.clone(), run())
        .await
        .unwrap();
    let (meta, mut instance) = writer.instance_of("terraform_data.r5").await.unwrap();
    instance["attributes"]["input"] = input("changed");
    writer
        .write_instant(Instant::Put {
            address: "terraform_data.r5".into(),
            meta,
            instance,
            terraform_version: None,
        })
        .await
        .unwrap();
    expire_log(&f.store, &l).await;
    let week = OffsetClock(Offset::Ahead(Duration::from_secs(7 * 24 * 3600)));
    let sources = Sources {
        clock: Some(&week),
        ..Sources::default()
    };
    let read = read_estate(&f.store, &l, PARALLEL, "test", sources)
        .await
        .unwrap();
    assert_eq!(
        as_plain(&read.snapshot),
        plain_read(&f.store, &l).await,
        "{kind:?}: a reader a week on read what the store holds"
    );
}

/// Readers race writers, many rounds: two writers update, create and delete their own records
/// (one record at a time, as a provider's return writes them) while two readers read the estate
/// again and again (each read through the image and the log, rewriting the image when due).
/// After each round a reader through the log reads exactly what a full listing of the store
/// gives: no write is ever missed.
async fn readers_racing_writers_miss_no_write(kind: Kind) {
    let f = Fixture::new(kind, "img-race").await;
    let l = layout("imgrace");
    seed(&f.store, &l, 60, "a").await;
    Session::new(f.store.clone(), l.clone(), run())
        .refresh()
        .await
        .unwrap();
    let writers: Vec<Session> =
        futures::future::join_all((0..2).map(|_| Session::open(f.store.clone(), l.clone(), run())))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
    let mut through_log = 0;
    let rounds = 8;
    for round in 0..rounds {
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (store, l, done) = (f.store.clone(), l.clone(), done.clone());
                tokio::spawn(async move {
                    while !done.load(Ordering::SeqCst) {
                        Session::new(store.clone(), l.clone(), run())
                            .refresh()
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        let writes = writers.iter().enumerate().map(|(w, s)| async move {
            // Writer w owns r{w}, r{w+2}, ...: updates five, creates one, deletes one.
            for i in 0..5 {
                let address = format!("terraform_data.r{}", w + 2 * (i + 5 * round) % 60);
                let Some((meta, mut instance)) = s.instance_of(&address).await else {
                    continue;
                };
                instance["attributes"]["input"] = input(&format!("round {round}"));
                s.write_instant(Instant::Put {
                    address: address.clone(),
                    meta: meta.clone(),
                    instance: instance.clone(),
                    terraform_version: None,
                })
                .await
                .unwrap();
                if i == 0 {
                    let new = format!("terraform_data.n{w}x{round}");
                    let mut made = instance;
                    made["attributes"]["id"] = json!(new);
                    s.write_instant(Instant::Put {
                        address: new,
                        meta,
                        instance: made,
                        terraform_version: None,
                    })
                    .await
                    .unwrap();
                }
            }
            if round > 0 {
                s.write_instant(Instant::Delete {
                    address: format!("terraform_data.n{w}x{}", round - 1),
                })
                .await
                .unwrap();
            }
        });
        futures::future::join_all(writes).await;
        done.store(true, Ordering::SeqCst);
        for r in readers {
            r.await.unwrap();
        }
        let read = cold_read(&f.store, &l).await;
        // No full listing: the read listed the log (one page or more) and nothing else.
        if read.stats.log_pages > 0 {
            through_log += 1;
        }
        assert_eq!(
            as_plain(&read.snapshot),
            plain_read(&f.store, &l).await,
            "{kind:?}: round {round}: the read through the log differs from the store"
        );
    }
    assert!(
        through_log * 2 >= rounds,
        "{kind:?}: only {through_log} of {rounds} checks read through the log"
    );
}

/// Change `address`'s input to `value` through a session's record write (its entry first).
async fn change(store: &DynStore, l: &Layout, address: &str, value: &str) {
    let writer = Session::open(store.clone(), l.clone(), run())
        .await
        .unwrap();
    let (meta, mut instance) = writer.instance_of(address).await.unwrap();
    instance["attributes"]["input"] = input(value);
    writer
        .write_instant(Instant::Put {
            address: address.into(),
            meta,
            instance,
            terraform_version: None,
        })
        .await
        .unwrap();
}

/// `count` write log entries naming r2..r6, as writers that stopped before their record write
/// leave them (`at_once` made at once).
async fn bulk_entries(store: &DynStore, l: &Layout, count: usize, at_once: usize) {
    let log = LogWriter::new(store.clone(), l.clone(), "bulk-run");
    let keys: Vec<String> = (0..count)
        .map(|i| {
            l.resource_key(&format!("terraform_data.r{}", 2 + i % 5))
                .into_string()
        })
        .collect();
    let made: Vec<_> = futures::stream::iter(&keys)
        .map(|k| log.log(Operation::Update, k))
        .buffer_unordered(at_once)
        .collect()
        .await;
    for m in made {
        m.unwrap();
    }
}

/// The claim: a write log longer than one page since the image (150 entries after it, past the
/// first page's 100) is listed on after the page's last key down to the watermark, and the read
/// goes through it: no full listing, and a write whose entry is on the second page is read at
/// its new version.
async fn a_log_longer_than_a_page_is_listed_to_the_watermark(kind: Kind) {
    let f = Fixture::new(kind, "img-pages").await;
    let l = layout("imgpages");
    seed(&f.store, &l, 60, "a").await;
    Session::new(f.store.clone(), l.clone(), run())
        .refresh()
        .await
        .unwrap();
    // The oldest entry after the image: a real write of r1, then 150 newer entries.
    change(&f.store, &l, "terraform_data.r1", "on the second page").await;
    // gcp-storage-emulator serves few connections at once.
    let at_once = if matches!(kind, Kind::Gcs) { 2 } else { 16 };
    bulk_entries(&f.store, &l, 150, at_once).await;
    let read = cold_read(&f.store, &l).await;
    assert_eq!(
        as_plain(&read.snapshot),
        plain_read(&f.store, &l).await,
        "{kind:?}: the read through a long log differs from the store"
    );
    let r1 = &read.snapshot.records[l.resource_key("terraform_data.r1").as_str()];
    assert_eq!(
        r1.record().unwrap().instance().unwrap()["attributes"]["input"]["value"],
        "on the second page"
    );
    // gcp-storage-emulator ignores maxResults: its one page holds every entry.
    let pages = if matches!(kind, Kind::Gcs) { 1 } else { 2 };
    assert_eq!(
        (read.stats.log_pages, read.stats.fetched),
        (pages, 6),
        "{kind:?}: not read through the log's {pages} pages: {:?}",
        read.stats
    );
    assert!(read.refresh.is_none(), "{kind:?}: {:?}", read.stats);
}

/// A log longer than the pages a read lists (here pages of 100 entries, 2 pages for 60 records)
/// is read by the full listing, which writes a new image whose watermark lies past those entries:
/// the next read lists one page of the log again.
async fn a_log_past_the_page_bound_is_compacted(kind: Kind) {
    let f = Fixture::new(kind, "img-bound").await;
    let l = layout("imgbound");
    let small = small_pages(&f, 100).await;
    // A short margin whose skew limit (3 s) is still above the local store's 2 s resolution.
    let timing = Timing {
        margin: Duration::from_secs(6),
        ..Timing::default()
    };
    seed(&small, &l, 60, "a").await;
    Session::new(small.clone(), l.clone(), run())
        .with_timing(timing)
        .refresh()
        .await
        .unwrap();
    change(&small, &l, "terraform_data.r1", "changed").await;
    bulk_entries(&small, &l, 250, 16).await;
    let before = small.get(&l.image_key()).await.unwrap().unwrap().version;
    let sources = Sources {
        timing,
        ..Sources::default()
    };
    let long = read_estate(&small, &l, PARALLEL, "test", sources.clone())
        .await
        .unwrap();
    assert_eq!(long.stats.log_pages, 0, "{kind:?}: {:?}", long.stats);
    assert!(
        long.refresh.is_none(),
        "{kind:?}: entries younger than the margin: a new image would not shorten the log"
    );
    // Past the margin, the read that falls back writes a new image.
    tokio::time::sleep(Duration::from_millis(6100)).await;
    Session::new(small.clone(), l.clone(), run())
        .with_timing(timing)
        .refresh()
        .await
        .unwrap();
    let after = small.get(&l.image_key()).await.unwrap().unwrap().version;
    assert_ne!(before.token, after.token, "{kind:?}: no new image");
    let read = read_estate(&small, &l, PARALLEL, "test", sources)
        .await
        .unwrap();
    assert_eq!(read.stats.log_pages, 1, "{kind:?}: {:?}", read.stats);
    assert_eq!(as_plain(&read.snapshot), plain_read(&f.store, &l).await);
}

testkit::per_kind!(
    local_bound => Local, s3_bound => S3;
    [a_log_past_the_page_bound_is_compacted]
);

testkit::per_kind!(
    local => Local, s3 => S3, azurerm => Azure, gcs => Gcs;
    [
        a_log_longer_than_a_page_is_listed_to_the_watermark,
        a_cold_read_through_the_image_is_a_plain_read,
        an_image_older_than_the_logs_trust_falls_back_to_the_full_listing,
        readers_racing_writers_miss_no_write,
        a_corrupt_or_foreign_image_is_ignored_with_a_warning,
        range_listings_during_creates_and_deletes_miss_nothing_and_invent_nothing,
        an_image_entry_at_another_version_is_never_used,
    ]
);

// gcp-storage-emulator ignores startOffset and maxResults, and Azure filters here too when the
// service ignores startFrom (docs/stores.md): only these two can show it.
testkit::per_kind!(
    local_start => Local, s3_start => S3;
    [the_server_starts_a_range_listing_after_its_start]
);

/// A cold read of more than one page of records on S3, with an image written after the last
/// write: one round of the image GET and one page of the write log, and no record GET. The image
/// comes packed (its LZ4 block, under half its text's bytes) and the log's page is its short
/// first one (100 entries asked for, not 1,000: the seed's 1,100 entries are all older than the
/// watermark, yet a full page would bring 1,000 of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_cold_read_is_an_image_get_and_one_page_of_the_log() {
    let (direct, bucket) = common::s3_store("imgreq").await;
    let direct: DynStore = Arc::new(direct);
    let l = layout("imgreq");
    let n = 1100;
    seed(&direct, &l, n, "a").await;
    // A short margin (its skew limit still above the Date header's second), so the image's
    // watermark lies past the seed's entries.
    let timing = Timing {
        margin: Duration::from_secs(3),
        ..Timing::default()
    };
    tokio::time::sleep(Duration::from_millis(3100)).await;
    Session::new(direct.clone(), l.clone(), run())
        .with_timing(timing)
        .refresh()
        .await
        .unwrap();
    let proxy = common::latency_proxy::start(common::s3_authority(), Duration::ZERO).await;
    let mut settings = common::s3_settings(&bucket);
    settings.endpoint = Some(proxy.endpoint.clone());
    let counted: DynStore = Arc::new(S3Store::connect(&settings).await);
    let sources = Sources {
        timing,
        ..Sources::default()
    };
    let read = read_estate(&counted, &l, PARALLEL, "test", sources)
        .await
        .unwrap();
    let calls = proxy.take();
    let records = n + 3;
    assert_eq!(read.stats.from_image, records, "{:?}", read.stats);
    assert_eq!(
        calls.len(),
        2,
        "{} requests for {records} records: {:?}",
        calls.len(),
        read.stats
    );
    assert_eq!(read.stats.ranges, 1, "{:?}", read.stats);
    assert_eq!(as_plain(&read.snapshot), plain_read(&direct, &l).await);
    let stored = direct.get(&l.image_key()).await.unwrap().unwrap().bytes;
    let text = Image::decode(&l, stored.clone()).unwrap().bytes().len();
    let image_get = calls
        .iter()
        .find(|c| c.method == "GET" && c.path.contains("/_image"))
        .expect("the image GET");
    assert!(
        stored.len() * 2 < text && image_get.down < text / 2,
        "the image came as {} bytes ({} stored) for a text of {text}",
        image_get.down,
        stored.len()
    );
    // The SDK's second agent header is left off (store/s3/agent.rs); its `User-Agent` stays.
    for c in &calls {
        let has = |h: &str| c.headers.iter().any(|n| n == h);
        assert!(
            has("user-agent") && !has("x-amz-user-agent"),
            "{} {}: {:?}",
            c.method,
            c.path,
            c.headers
        );
    }
    let log_page = calls
        .iter()
        .find(|c| c.path.contains("list-type=2"))
        .expect("the log's listing");
    assert!(
        log_page.path.contains("max-keys=100&") || log_page.path.ends_with("max-keys=100"),
        "the log's first page asked for more than 100 entries: {}",
        log_page.path
    );
}

/// A warm read takes the image from the root's own copy (a private file): no GET at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_read_uses_the_roots_copy_of_the_image() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store: DynStore = Arc::new(LocalStore::new(dir.path().join("records")));
    let l = layout("warm");
    seed(&store, &l, 1200, "a").await;
    let cache = ReadCache::new(dir.path().join("cache"));
    let open = || Session::new(store.clone(), l.clone(), run()).with_cache(Some(cache.clone()));
    open().refresh().await.unwrap();
    let copy = std::fs::read_dir(cache.dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("image-")
        })
        .expect("the root keeps a copy of the image");
    assert_eq!(
        std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let sources = Sources {
        cache: Some(&cache),
        ..Sources::default()
    };
    let read = read_estate(&store, &l, PARALLEL, "t", sources)
        .await
        .unwrap();
    assert!(!read.stats.image_fetched, "{:?}", read.stats);
    assert_eq!((read.stats.from_image, read.stats.fetched), (1203, 0));
    // The seed's 1,203 entries are newer than the image's watermark: three pages of the log
    // (the first of 100, then 1,000 and 103).
    assert_eq!(read.stats.log_pages, 3, "{:?}", read.stats);
    assert_eq!(as_plain(&read.snapshot), plain_read(&store, &l).await);

    // A damaged copy is ignored with nothing lost: the stored image is fetched instead.
    std::fs::write(&copy, b"{}\ngarbage").unwrap();
    let sources = Sources {
        cache: Some(&cache),
        ..Sources::default()
    };
    let read = read_estate(&store, &l, PARALLEL, "t", sources)
        .await
        .unwrap();
    assert!(read.stats.image_fetched);
    assert_eq!(read.stats.from_image, 1203);
}

/// An image past the size decoded where the read is (4,096 entries) is decoded over the cores,
/// warm while the log's page is in flight, cold after its GET: the same records as a plain read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_image_is_read_whole_warm_and_cold() {
    let dir = tempfile::tempdir().unwrap();
    let store: DynStore = Arc::new(LocalStore::new(dir.path().join("records")));
    let l = layout("large");
    seed(&store, &l, 4200, "a").await;
    let cache = ReadCache::new(dir.path().join("cache"));
    Session::new(store.clone(), l.clone(), run())
        .with_cache(Some(cache.clone()))
        .refresh()
        .await
        .unwrap();
    let plain = plain_read(&store, &l).await;
    for warm in [true, false] {
        let sources = Sources {
            cache: warm.then_some(&cache),
            ..Sources::default()
        };
        let read = read_estate(&store, &l, PARALLEL, "t", sources)
            .await
            .unwrap();
        assert_eq!(read.stats.image_fetched, !warm, "{:?}", read.stats);
        assert_eq!((read.stats.from_image, read.stats.fetched), (4203, 0));
        assert_eq!(as_plain(&read.snapshot), plain);
    }
}

/// A run that changes one record and reads again (as `run` does after its writes) takes every
/// record from its own last read, and those the image holds at their version are not outside
/// it: the image is not rewritten for one change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_after_one_change_does_not_rewrite_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let store: DynStore = Arc::new(LocalStore::new(dir.path().join("records")));
    let l = layout("onechange");
    seed(&store, &l, 120, "a").await;
    Session::new(store.clone(), l.clone(), run())
        .refresh()
        .await
        .unwrap();
    let image = || async { store.get(&l.image_key()).await.unwrap().unwrap().version };
    let written = image().await;
    let session = Session::new(store.clone(), l.clone(), run());
    session.refresh().await.unwrap();
    session
        .write_state(&doc(120, "b"))
        .await
        .unwrap()
        .into_result()
        .unwrap();
    session.refresh().await.unwrap();
    assert_eq!(
        image().await.token,
        written.token,
        "one changed record rewrote the image"
    );
}

/// The claim: a read serves the resource records an image holds without decoding them (each stays
/// the image's bytes until a write looks into it), and what it serves is what decoding gives: the
/// same records, and the same document as one assembled from the records fetched one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_records_are_served_undecoded() {
    use choudoufu_live::engine::layout::KeyKind;
    let f = Fixture::new(Kind::Local, "lazy").await;
    let l = layout("lazy");
    let n = 80;
    seed(&f.store, &l, n, "a").await;
    Session::new(f.store.clone(), l.clone(), run())
        .refresh()
        .await
        .unwrap();
    let read = cold_read(&f.store, &l).await;
    assert_eq!(read.stats.from_image, n + 3, "{:?}", read.stats);
    for (key, e) in &read.snapshot.records {
        if l.classify(key) == Some(KeyKind::Resource) {
            assert!(
                e.image_bytes().is_some(),
                "{key} was decoded as it was read, not served from the image's bytes"
            );
        }
    }
    // Looked into, each decodes to the record a plain read gets.
    assert_eq!(as_plain(&read.snapshot), plain_read(&f.store, &l).await);
    // The document served from the image's bytes is the one served after a read with no image.
    let served = Session::open(f.store.clone(), l.clone(), run())
        .await
        .unwrap()
        .state_document()
        .await;
    let image = f.store.get(&l.image_key()).await.unwrap().unwrap();
    f.store
        .delete(&l.image_key(), &image.version)
        .await
        .unwrap();
    let unimaged = Session::open(f.store.clone(), l.clone(), run())
        .await
        .unwrap();
    for (key, e) in &unimaged.snapshot().await.records {
        assert!(e.image_bytes().is_none(), "{key} came from an image");
    }
    assert_eq!(
        String::from_utf8(served).unwrap(),
        String::from_utf8(unimaged.state_document().await).unwrap()
    );
}
