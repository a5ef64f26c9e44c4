//! The read cache: a warm read lists the estate and fetches only what changed; a record another run
//! changed is always fetched again (the cache is never trusted without the listing).

use testkit as common;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::read_cache::ReadCache;
use choudoufu_live::engine::session::{RunInfo, Session};
use choudoufu_live::store::DynStore;
use choudoufu_live::store::s3::S3Store;
use serde_json::{Value, json};

fn doc(n: usize, changed: &str) -> Vec<u8> {
    use common::state::{document, terraform_data};
    let rs = (0..n)
        .map(|i| {
            let input = if i == 0 {
                changed.to_string()
            } else {
                format!("v{i}")
            };
            terraform_data(&format!("r{i}"), json!({"id": i, "input": input}))
        })
        .collect();
    document("1.11.4", "l", rs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_reads_fetch_only_what_changed() {
    let (direct, bucket) = common::s3_store("cache").await;
    let upstream = common::s3_authority();
    let proxy = common::fault_proxy::start(upstream, 0, 1).await;
    let mut settings = common::s3_settings(&bucket);
    settings.endpoint = Some(proxy.endpoint.clone());
    let counted: DynStore = Arc::new(S3Store::connect(&settings).await);
    let layout = Layout::new(EstateName::parse("cached").unwrap());
    let run = || RunInfo::new(ProgramStamp::default());
    Session::new(Arc::new(direct) as DynStore, layout.clone(), run())
        .write_state(&doc(30, "a"))
        .await
        .unwrap()
        .into_result()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        Session::new(counted.clone(), layout.clone(), run())
            .with_cache(Some(ReadCache::new(dir.path())))
    };
    let requests = || proxy.counts.requests.load(Ordering::SeqCst);

    let before = requests();
    let cold = open();
    cold.refresh().await.unwrap();
    let cold_requests = requests() - before;
    assert!(
        cold_requests >= 31,
        "a cold read fetches every record: {cold_requests}"
    );

    let before = requests();
    let warm = open();
    warm.refresh().await.unwrap();
    assert_eq!(requests() - before, 1, "a warm read is one listing");
    assert_eq!(warm.state_document().await, cold.state_document().await);

    // This run writes r0: what it wrote is cached, so its next read is still one listing.
    cold.write_state(&doc(30, "b"))
        .await
        .unwrap()
        .into_result()
        .unwrap();
    let before = requests();
    open().refresh().await.unwrap();
    assert_eq!(
        requests() - before,
        1,
        "a run's own write keeps the cache warm"
    );

    // Another run (another machine, no shared cache) changes r0: the next warm read fetches r0 again, and only r0.
    let other = Session::open(counted.clone(), layout.clone(), run())
        .await
        .unwrap();
    other
        .write_state(&doc(30, "c"))
        .await
        .unwrap()
        .into_result()
        .unwrap();
    let before = requests();
    let again = open();
    again.refresh().await.unwrap();
    assert_eq!(
        requests() - before,
        2,
        "one listing and one fetch of the changed record"
    );
    let doc: Value = serde_json::from_slice(&again.state_document().await).unwrap();
    let r0 = doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "r0")
        .unwrap();
    assert_eq!(
        r0["instances"][0]["attributes"]["input"], "c",
        "the cache never serves a version the listing does not name"
    );
}
