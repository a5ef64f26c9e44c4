//! What the write log needs of every store kind: a listing that starts after a key (followed
//! over many small pages, exactly the keys after it, while others are created), and the store's
//! own clock, close to this machine's (every peer here runs on this machine).

use testkit as common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use choudoufu_live::store::azure::AzureStore;
use choudoufu_live::store::gcs::GcsStore;
use choudoufu_live::store::local::LocalStore;
use choudoufu_live::store::s3::S3Store;
use choudoufu_live::store::{DynStore, KeyRange, list_range};
use common::{Fixture, Kind};

/// The same store with small listing pages, so a listing after a key needs several requests.
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

/// A log-shaped key: 19 digits, then what the entry names.
fn entry(prefix: &str, n: u64) -> String {
    format!("{prefix}{n:019}-0a1b2c3d-000001-ur+terraform_data.r{n}")
}

/// Listing after a key gives exactly the keys after it, in order, over many pages, however
/// many keys are created meanwhile before it and after it; and never a key at or before it.
async fn listing_after_a_key_gives_exactly_the_keys_after_it(kind: Kind) {
    let f = Fixture::new(kind, "after").await;
    let s = small_pages(&f, 4).await;
    let prefix = "tofu-records/e/log/";
    // Keys in the folder beside the log must never be listed.
    s.create("tofu-records/e/r/terraform_data.x", b"{}")
        .await
        .unwrap();
    let mut have: Vec<String> = (0..30).map(|i| entry(prefix, 1000 + i * 10)).collect();
    for k in &have {
        s.create(k, b"{}").await.unwrap();
    }
    for round in 0..6u64 {
        let after = have[(round as usize * 4) % have.len()].clone();
        let range = KeyRange::new(Some(after.clone()), None);
        // Created while listing: some before the start key (never listed), some after it.
        let before_new = entry(prefix, round * 10 + 1);
        let after_new = entry(prefix, 5000 + round);
        let (listed, a, b) = tokio::join!(
            list_range(s.as_ref(), prefix, &range, 4),
            s.create(&before_new, b"{}"),
            s.create(&after_new, b"{}"),
        );
        a.unwrap();
        b.unwrap();
        let listed: Vec<String> = listed.unwrap().into_iter().map(|l| l.key).collect();
        have.extend([before_new, after_new.clone()]);
        have.sort();
        let want: Vec<&String> = have.iter().filter(|k| **k > after).collect();
        let got: Vec<&String> = listed.iter().collect();
        let stable: Vec<&String> = want.iter().copied().filter(|k| **k != after_new).collect();
        let without_new: Vec<&String> = got.iter().copied().filter(|k| **k != after_new).collect();
        assert_eq!(
            without_new, stable,
            "round {round}: every key after the start that existed throughout, in order, and no other"
        );
        assert!(
            got.iter().all(|k| **k > after && k.starts_with(prefix)),
            "round {round}: nothing at or before the start key"
        );
        let again: Vec<String> = list_range(s.as_ref(), prefix, &range, 4)
            .await
            .unwrap()
            .into_iter()
            .map(|l| l.key)
            .collect();
        assert_eq!(
            again.iter().collect::<Vec<_>>(),
            want,
            "round {round}: once still, exactly the keys after the start"
        );
    }
}

/// The store tells its own time, and on this machine it is this machine's within a few seconds,
/// for a key that exists and for one that does not.
async fn the_store_tells_its_time(kind: Kind) {
    let f = Fixture::new(kind, "clock").await;
    let key = "tofu-records/e/_estate";
    for exists in [false, true] {
        if exists {
            f.store.create(key, b"{}").await.unwrap();
        }
        let sent = SystemTime::now();
        let time = f.store.store_time(key).await.unwrap();
        let answered = SystemTime::now();
        let low = sent - Duration::from_secs(3);
        let high = answered + Duration::from_secs(3);
        assert!(
            time.at >= low && time.at <= high,
            "{kind:?} (key exists: {exists}): the store's time {:?} is not near this machine's {sent:?}",
            time.at
        );
        assert!(time.resolution <= Duration::from_secs(2));
    }
}

testkit::per_kind!(
    local => Local, s3 => S3, azurerm => Azure, gcs => Gcs;
    [
        listing_after_a_key_gives_exactly_the_keys_after_it,
        the_store_tells_its_time,
    ]
);
