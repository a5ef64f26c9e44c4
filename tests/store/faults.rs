//! Faults between the store client and its peer (moto, azurite, the GCS emulator): the
//! service's own 500s and 503s, resets, and answers lost after the store applied the write. Runs keep going through retries; a write that landed but whose
//! answer was lost is recognised as landed, never reported as a conflict; nothing lost or doubled.

use testkit as common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::session::{RunInfo, Session};
use choudoufu_live::store::azure::AzureStore;
use choudoufu_live::store::gcs::GcsStore;
use choudoufu_live::store::s3::S3Store;
use choudoufu_live::store::{DynStore, Precondition, WriteOutcome, list_all, put_conditional};
use futures::StreamExt;

/// The share of requests, in percent, the proxy fails. Every fault fails the try it meets, so
/// a call fails only when all its 8 tries do: at 15% that is 0.15^8 = 2.6e-7 a call, about one
/// CI run in 5,000 over these six tests' ~800 calls (each kind of fault is still injected 3 to
/// 11 times a test); at the 25% used before it was 1.5e-5 a call, about one CI run in 80 (seen:
/// a 503 on the eighth try of an update).
const FAULT_RATE: u32 = 15;

async fn through_proxy(
    tag: &str,
    rate: u32,
    seed: u64,
) -> (DynStore, DynStore, common::fault_proxy::Proxy) {
    let (direct, bucket) = common::s3_store(tag).await;
    let upstream = common::s3_authority();
    let proxy = common::fault_proxy::start(upstream, rate, seed).await;
    let mut settings = common::s3_settings(&bucket);
    settings.endpoint = Some(proxy.endpoint.clone());
    let faulty: DynStore = Arc::new(S3Store::connect(&settings).await);
    (faulty, Arc::new(direct), proxy)
}

/// `endpoint` (`http://host:port/path`) as host:port and the proxy's endpoint with the same path.
async fn proxied(
    endpoint: &str,
    rate: u32,
    seed: u64,
    dialect: common::fault_proxy::Dialect,
) -> (String, common::fault_proxy::Proxy) {
    let rest = endpoint.trim_start_matches("http://");
    let (upstream, path) = rest.split_once('/').unwrap_or((rest, ""));
    let proxy = common::fault_proxy::start_as(upstream.to_string(), rate, seed, dialect).await;
    let through = match path {
        "" => proxy.endpoint.clone(),
        p => format!("{}/{p}", proxy.endpoint),
    };
    (through, proxy)
}

async fn azure_through_proxy(
    tag: &str,
    rate: u32,
    seed: u64,
) -> (DynStore, DynStore, common::fault_proxy::Proxy) {
    let (direct, mut settings) = common::azure_store(tag).await;
    let endpoint = settings.endpoint.clone().unwrap();
    let (through, proxy) =
        proxied(&endpoint, rate, seed, common::fault_proxy::Dialect::Azure).await;
    settings.endpoint = Some(through);
    let faulty: DynStore = Arc::new(AzureStore::connect(&settings));
    (faulty, Arc::new(direct), proxy)
}

async fn gcs_through_proxy(
    tag: &str,
    rate: u32,
    seed: u64,
) -> (DynStore, DynStore, common::fault_proxy::Proxy) {
    let (direct, mut settings) = common::gcs_store(tag).await;
    let endpoint = settings.endpoint.clone().unwrap();
    let (through, proxy) = proxied(&endpoint, rate, seed, common::fault_proxy::Dialect::Gcs).await;
    settings.endpoint = Some(through);
    let faulty: DynStore = Arc::new(GcsStore::connect(&settings));
    (faulty, Arc::new(direct), proxy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conditional_writes_survive_faults_and_lost_answers() {
    let (faulty, direct, proxy) = through_proxy("faults", FAULT_RATE, 0x5eed_0001).await;
    writes_survive(faulty, direct, proxy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn azurerm_conditional_writes_survive_faults_and_lost_answers() {
    let (faulty, direct, proxy) = azure_through_proxy("faults", FAULT_RATE, 0x5eed_0003).await;
    writes_survive(faulty, direct, proxy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gcs_conditional_writes_survive_faults_and_lost_answers() {
    let (faulty, direct, proxy) = gcs_through_proxy("faults", FAULT_RATE, 0x5eed_0005).await;
    writes_survive(faulty, direct, proxy).await;
}

/// Three conditional puts per key and a conditional delete of every odd one, through faults:
/// each lands once, none is reported a conflict, and the store holds exactly the last bytes.
async fn writes_survive(faulty: DynStore, direct: DynStore, proxy: common::fault_proxy::Proxy) {
    let keys: Vec<usize> = (0..40).collect();
    let results: Vec<(usize, Vec<u8>)> = futures::stream::iter(keys)
        .map(|i| {
            let s = faulty.clone();
            async move {
                let key = format!("tofu-records/f/r/k{i:03}");
                let mut last = Vec::new();
                let mut version: Option<choudoufu_live::store::Version> = None;
                for round in 0..3 {
                    let bytes = format!("{{\"key\":{i},\"round\":{round},\"writer\":\"run-1\"}}")
                        .into_bytes();
                    let precondition = match &version {
                        Some(v) => Precondition::Matches(v.clone()),
                        None => Precondition::Absent,
                    };
                    match put_conditional(s.as_ref(), &key, &bytes, &precondition).await {
                        Ok(WriteOutcome::Written(v)) => {
                            version = Some(v);
                            last = bytes;
                        }
                        other => {
                            panic!("{key} round {round}: our own write was reported as {other:?}")
                        }
                    }
                }
                if i % 2 == 1 {
                    match s.delete(&key, version.as_ref().unwrap()).await {
                        Ok(WriteOutcome::Written(())) => {}
                        // Its first try landed and the answer was lost: the retry finds it gone.
                        Ok(WriteOutcome::Conflict(c)) if c.found.is_none() => {}
                        other => panic!("{key}: delete gave {other:?}"),
                    }
                    last.clear();
                }
                (i, last)
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    // The store, read directly: exactly the even keys, each with its last write's bytes.
    let listed = list_all(direct.as_ref(), "tofu-records/f/").await.unwrap();
    let expected: BTreeMap<String, Vec<u8>> = results
        .into_iter()
        .filter(|(_, b)| !b.is_empty())
        .map(|(i, b)| (format!("tofu-records/f/r/k{i:03}"), b))
        .collect();
    assert_eq!(
        listed.iter().map(|l| l.key.clone()).collect::<Vec<_>>(),
        expected.keys().cloned().collect::<Vec<_>>(),
        "no record lost or doubled"
    );
    for (key, bytes) in &expected {
        assert_eq!(
            &direct.get(key).await.unwrap().unwrap().bytes,
            bytes,
            "{key}"
        );
    }
    let c = &proxy.counts;
    eprintln!(
        "faults: {} requests, injected {} (500: {}, 503: {}, reset: {}, lost answer: {}), all survived",
        c.requests.load(Ordering::SeqCst),
        c.injected(),
        c.internal.load(Ordering::SeqCst),
        c.slowdown.load(Ordering::SeqCst),
        c.reset.load(Ordering::SeqCst),
        c.lost.load(Ordering::SeqCst)
    );
    for (what, n) in [
        ("500", &c.internal),
        ("503", &c.slowdown),
        ("reset", &c.reset),
        ("lost answer", &c.lost),
    ] {
        assert!(
            n.load(Ordering::SeqCst) > 0,
            "no {what} fault was injected: the test proves nothing about it"
        );
    }
}

fn doc(values: &BTreeMap<String, String>) -> Vec<u8> {
    common::state::doc_of("l", values)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_writes_through_faults_without_false_conflicts() {
    let (faulty, direct, proxy) = through_proxy("sessfaults", FAULT_RATE, 0x5eed_0002).await;
    session_survives(faulty, direct, proxy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn azurerm_a_session_writes_through_faults_without_false_conflicts() {
    let (faulty, direct, proxy) = azure_through_proxy("sessfaults", FAULT_RATE, 0x5eed_0004).await;
    session_survives(faulty, direct, proxy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gcs_a_session_writes_through_faults_without_false_conflicts() {
    let (faulty, direct, proxy) = gcs_through_proxy("sessfaults", FAULT_RATE, 0x5eed_0006).await;
    session_survives(faulty, direct, proxy).await;
}

/// Ten state documents written by one session through faults: no false conflict, and the
/// store holds exactly the last document.
async fn session_survives(faulty: DynStore, direct: DynStore, proxy: common::fault_proxy::Proxy) {
    let layout = Layout::new(EstateName::parse("faulty").unwrap());
    let session = Session::new(
        faulty,
        layout.clone(),
        RunInfo::new(ProgramStamp::default()),
    );
    let mut values: BTreeMap<String, String> = (0..12)
        .map(|i| (format!("r{i}"), "0".to_string()))
        .collect();
    for round in 1..=10 {
        for (i, (_, v)) in values.iter_mut().enumerate() {
            if (i + round) % 3 == 0 {
                *v = round.to_string();
            }
        }
        if round == 5 {
            values.remove("r0");
        }
        let report = session.write_state(&doc(&values)).await.unwrap();
        assert!(
            report.conflicts.is_empty(),
            "round {round}: a false conflict: {:?}",
            report.conflicts
        );
    }
    let read = Session::open(direct, layout, RunInfo::new(ProgramStamp::default()))
        .await
        .unwrap();
    let stored: BTreeMap<String, String> = read
        .snapshot()
        .await
        .records
        .values()
        .map(|e| {
            (
                e.record()
                    .unwrap()
                    .address()
                    .trim_start_matches("terraform_data.")
                    .to_string(),
                e.record().unwrap().instance().unwrap()["attributes"]["input"]["value"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(stored, values, "the store holds exactly the last document");
    assert!(proxy.counts.injected() > 0);
}
