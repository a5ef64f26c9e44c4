//! The write log's rules as the session keeps them, on every store kind: a session whose clock
//! is further from the store's than the skew limit is refused by name, and writes no image.

use testkit as common;

use std::sync::Arc;
use std::time::Duration;

use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::session::{ClockCheckError, RunInfo, Session};
use choudoufu_live::engine::write_log::{Offset, OffsetClock};
use choudoufu_live::store::DynStore;
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

testkit::per_kind!(
    local => Local, s3 => S3, azurerm => Azure, gcs => Gcs;
    [a_skewed_clock_is_refused_by_name, a_skewed_reader_writes_no_image]
);
