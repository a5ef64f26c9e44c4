//! Load: concurrent runs on one estate, each round changing a random overlapping subset of records.
//! Every attempted write either landed or was refused by name, and the store's final content is
//! exactly what the landed writes say: each record holds its last landed write, nothing else changed.
//!
//! `make test` runs a short version; `make reliability` runs 8 runs x 200 rounds on 500 records.

use testkit as common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::session::{RunInfo, Session};
use common::{Fixture, Kind};

use tokio::sync::Mutex;

fn doc(values: &BTreeMap<String, String>) -> Vec<u8> {
    common::state::doc_of("l", values)
}

fn values_of(s: &choudoufu_live::engine::session::Snapshot) -> BTreeMap<String, (String, String)> {
    s.records
        .values()
        .map(|e| {
            let name = e
                .address()
                .trim_start_matches("terraform_data.")
                .to_string();
            let v = e.record().unwrap().instance().unwrap()["attributes"]["input"]["value"]
                .as_str()
                .unwrap()
                .to_string();
            (name, (v, e.version.token.clone()))
        })
        .collect()
}

#[derive(Default)]
struct Ledger {
    /// address -> (value written, version it got), every landed write.
    landed: BTreeMap<String, Vec<(String, String)>>,
    attempted: usize,
    conflicts: usize,
    landed_count: usize,
}

async fn load(kind: Kind, runs: usize, rounds: usize, records: usize, per_round: usize) {
    let f = Fixture::new(kind, "load").await;
    let layout = Layout::new(EstateName::parse("load").unwrap());
    let seed = Session::new(
        f.store.clone(),
        layout.clone(),
        RunInfo::new(ProgramStamp::default()),
    );
    let initial: BTreeMap<String, String> = (0..records)
        .map(|i| (format!("r{i:04}"), "init".to_string()))
        .collect();
    seed.write_state(&doc(&initial))
        .await
        .unwrap()
        .into_result()
        .unwrap();
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut tasks = Vec::new();
    for run in 0..runs {
        let (store, layout, ledger) = (f.peer().await, layout.clone(), ledger.clone());
        tasks.push(tokio::spawn(async move {
            let session = Session::new(store, layout, RunInfo::new(ProgramStamp::default()));
            let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (run as u64 + 1);
            let mut next = || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            for round in 0..rounds {
                session.refresh().await.unwrap();
                let snap = session.snapshot().await;
                let mut values: BTreeMap<String, String> = values_of(&snap)
                    .into_iter()
                    .map(|(k, (v, _))| (k, v))
                    .collect();
                let mut changed = BTreeSet::new();
                for _ in 0..per_round {
                    let name = format!("r{:04}", next() % records as u64);
                    values.insert(name.clone(), format!("run{run}-round{round}"));
                    changed.insert(format!("terraform_data.{name}"));
                }
                let report = session.write_state(&doc(&values)).await.unwrap();
                let after = session.snapshot().await;
                let mut l = ledger.lock().await;
                l.attempted += changed.len();
                l.conflicts += report.conflicts.len();
                l.landed_count += report.updated.len();
                for addr in &report.updated {
                    let name = addr.trim_start_matches("terraform_data.").to_string();
                    let key = format!("tofu-records/load/r/terraform_data.{name}");
                    let version = after.records[&key].version.token.clone();
                    l.landed
                        .entry(name.clone())
                        .or_default()
                        .push((values[&name].clone(), version));
                }
                for c in &report.conflicts {
                    assert!(
                        changed.contains(&c.address),
                        "a conflict on a record this round did not change: {}",
                        c.address
                    );
                }
                assert_eq!(
                    report.updated.len() + report.conflicts.len(),
                    changed.len(),
                    "run {run} round {round}: each changed record landed or was refused by name"
                );
                assert!(report.created.is_empty() && report.deleted.is_empty());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let l = ledger.lock().await;
    let read = Session::open(
        f.store.clone(),
        layout.clone(),
        RunInfo::new(ProgramStamp::default()),
    )
    .await
    .unwrap();
    let stored = values_of(&read.snapshot().await);
    assert_eq!(stored.len(), records, "no record lost or added");
    for (name, (value, version)) in &stored {
        match l.landed.get(name) {
            None => assert_eq!(
                value, "init",
                "{name} was never written, so it is unchanged"
            ),
            Some(writes) => assert!(
                writes.iter().any(|(v, ver)| v == value && ver == version),
                "{name}: the store holds {value} at {version}, which no landed write produced"
            ),
        }
    }
    assert_eq!(l.landed_count + l.conflicts, l.attempted);
    eprintln!(
        "load ({kind:?}): {runs} runs x {rounds} rounds on {records} records: {} writes attempted, {} landed, {} refused by name; final content accounted for exactly",
        l.attempted, l.landed_count, l.conflicts
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn short_load_local() {
    load(Kind::Local, 8, 20, 100, 8).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn short_load_s3() {
    load(Kind::S3, 4, 8, 40, 6).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "long: make reliability"]
async fn long_load_local() {
    load(Kind::Local, 8, 200, 500, 10).await;
}
