//! A cone plan's refreshed records: the next state write rewrites each unchanged one, so it carries the refresh's time (its writer's), and leaves the others alone.

use testkit as common;

use std::collections::BTreeSet;

use choudoufu_live::engine::cone::last_refresh;
use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::session::{RunInfo, Session};
use common::{Fixture, Kind};

fn layout() -> Layout {
    Layout::new(EstateName::parse("prod").unwrap())
}

async fn open(f: &Fixture) -> Session {
    Session::open(
        f.store.clone(),
        layout(),
        RunInfo::new(ProgramStamp::default()),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_refreshed_unchanged_record_is_rewritten_with_the_refresh_time() {
    let f = Fixture::new(Kind::Local, "refreshed").await;
    let doc = common::state::doc("l-1", &[("a", "1"), ("b", "1"), ("c", "1")]);
    open(&f).await.write_state(&doc).await.unwrap();
    let before = last_refresh(&open(&f).await.snapshot().await);
    // Written at a later second than the first write.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let s = open(&f).await;
    s.note_refreshed(BTreeSet::from(["terraform_data.a".to_string()]))
        .await;
    // b changes; a is refreshed and unchanged; c is neither.
    let doc2 = common::state::doc("l-1", &[("a", "1"), ("b", "2"), ("c", "1")]);
    let r = s.write_state(&doc2).await.unwrap();
    assert_eq!(r.refreshed, ["terraform_data.a".to_string()]);
    assert_eq!(r.updated, ["terraform_data.b".to_string()]);
    assert_eq!(r.unchanged, 2);
    let after = last_refresh(&open(&f).await.snapshot().await);
    assert!(after["terraform_data.a"] > before["terraform_data.a"]);
    assert!(after["terraform_data.b"] > before["terraform_data.b"]);
    assert_eq!(after["terraform_data.c"], before["terraform_data.c"]);
    // Once: the next write of the same document writes nothing.
    let r = s.write_state(&doc2).await.unwrap();
    assert_eq!((r.landed(), r.refreshed.len(), r.unchanged), (0, 0, 3));
}
