//! Claims at the engine, raced on real stores (a local folder, S3 on moto): all or nothing, one
//! holder per change, and a session that skips records another run holds and clears its own
//! claims as their records land.

use testkit as common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use choudoufu_live::engine::claims::{self, ClaimRefused, Claims, Liveness, Wanted};
use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::operation::Operation;
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::session::{RunInfo, Session};
use choudoufu_live::store::DynStore;
use common::interposed::Interposed;
use common::state::doc;
use common::{Fixture, Kind};
use tokio::sync::Barrier;

const RUNS: usize = 8;
const ROUNDS: usize = 5;

fn want(address: &str, deps: &[&str]) -> Wanted {
    Wanted {
        address: address.to_string(),
        operation: Operation::Update,
        dependencies: deps.iter().map(|d| d.to_string()).collect(),
    }
}

/// Run `id`'s session identity.
fn run(id: &str) -> RunInfo {
    RunInfo {
        run_id: id.to_string(),
        program: ProgramStamp::default(),
    }
}

/// Write the estate's first state: `terraform_data` resources by name and input.
async fn seed(f: &Fixture, layout: &Layout, resources: &[(&str, &str)]) {
    Session::open(f.peer().await, layout.clone(), run("seed"))
        .await
        .unwrap()
        .write_state(&doc("l", resources))
        .await
        .unwrap();
}

/// The addresses of the marks standing in `layout`'s estate.
async fn mark_addresses(f: &Fixture, layout: &Layout) -> Vec<String> {
    claims::read_marks(&f.store, layout)
        .await
        .unwrap()
        .into_iter()
        .map(|(m, _)| m.address)
        .collect()
}

async fn live(f: &Fixture, layout: &Layout, run: &str) -> Arc<Liveness> {
    Liveness::start(
        f.peer().await,
        layout.clone(),
        run,
        ProgramStamp::default(),
        Duration::from_secs(60),
    )
}

/// Eight runs each claim a shared change and one of their own at once: exactly one gets both, the others hold nothing.
async fn claims_are_all_or_nothing(kind: Kind) {
    let f = Fixture::new(kind, "claimrace").await;
    let layout = Layout::new(EstateName::parse("race").unwrap());
    let mut lives = Vec::new();
    for i in 0..RUNS {
        lives.push(live(&f, &layout, &format!("run-{i}")).await);
    }
    for round in 0..ROUNDS {
        let shared = format!("terraform_data.shared{round}");
        let barrier = Arc::new(Barrier::new(RUNS));
        let mut tasks = Vec::new();
        for (i, run) in lives.iter().enumerate() {
            let store = f.peer().await;
            let layout = layout.clone();
            let barrier = barrier.clone();
            let run = run.clone();
            let wanted = vec![
                want(&shared, &[]),
                want(&format!("terraform_data.own{round}_{i}"), &[]),
            ];
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                Claims::claim(&store, &layout, &run, &wanted).await.unwrap()
            }));
        }
        let mut held = Vec::new();
        for (i, t) in tasks.into_iter().enumerate() {
            if let Ok(claims) = t.await.unwrap() {
                held.push((i, claims));
            }
        }
        assert_eq!(
            held.len(),
            1,
            "round {round}: exactly one run holds the shared change"
        );
        let (winner, claims) = &held[0];
        let marks: BTreeSet<String> = claims::read_marks(&f.store, &layout)
            .await
            .unwrap()
            .into_iter()
            .map(|(m, _)| {
                assert_eq!(m.run_id, format!("run-{winner}"), "round {round}: {m:?}");
                m.address
            })
            .collect();
        assert_eq!(
            marks,
            [
                shared.clone(),
                format!("terraform_data.own{round}_{winner}")
            ]
            .into(),
            "round {round}: the losers hold nothing"
        );
        assert_eq!(claims.release().await.unwrap(), 2);
        assert!(mark_addresses(&f, &layout).await.is_empty());
    }
    for l in lives {
        l.end().await.unwrap();
    }
}

/// Two runs claiming related resources at once: they never both hold them.
async fn related_claims_never_both_land(kind: Kind) {
    let f = Fixture::new(kind, "deprace").await;
    let layout = Layout::new(EstateName::parse("deps").unwrap());
    let run_x = live(&f, &layout, "run-x").await;
    let run_y = live(&f, &layout, "run-y").await;
    for round in 0..ROUNDS {
        let (x, y) = (
            format!("terraform_data.x{round}"),
            format!("terraform_data.y{round}"),
        );
        let barrier = Arc::new(Barrier::new(2));
        let claim =
            |store: choudoufu_live::store::DynStore, run: Arc<Liveness>, wanted: Vec<Wanted>| {
                let barrier = barrier.clone();
                let layout = layout.clone();
                async move {
                    barrier.wait().await;
                    Claims::claim(&store, &layout, &run, &wanted).await.unwrap()
                }
            };
        let (sx, sy) = (f.peer().await, f.peer().await);
        let (rx, ry) = tokio::join!(
            claim(sx, run_x.clone(), vec![want(&x, &[])]),
            claim(sy, run_y.clone(), vec![want(&y, &[x.as_str()])]),
        );
        assert!(
            !(rx.is_ok() && ry.is_ok()),
            "round {round}: y and the x it depends on were both claimed"
        );
        for c in [rx.ok(), ry.ok()].into_iter().flatten() {
            c.release().await.unwrap();
        }
    }
}

/// A session skips a record outside its changes that another live run holds, and clears its own claims as records land.
async fn a_session_skips_held_records_and_clears_its_claims(kind: Kind) {
    let f = Fixture::new(kind, "sessclaims").await;
    let layout = Layout::new(EstateName::parse("sess").unwrap());
    seed(&f, &layout, &[("db", "1"), ("dns", "1")]).await;
    // Run R holds db.
    let live_r = live(&f, &layout, "r").await;
    let r_claims = Claims::claim(
        &f.store,
        &layout,
        &live_r,
        &[want("terraform_data.db", &[])],
    )
    .await
    .unwrap()
    .unwrap();
    // Run S changes dns only, and its document rewrites db too (as a refresh would).
    let live_s = live(&f, &layout, "s").await;
    let s_claims = Arc::new(
        Claims::claim(
            &f.store,
            &layout,
            &live_s,
            &[want("terraform_data.dns", &[])],
        )
        .await
        .unwrap()
        .unwrap(),
    );
    let s = Session::open(f.peer().await, layout.clone(), run("s"))
        .await
        .unwrap();
    s.limit_changes([layout.resource_key("terraform_data.dns").into_string()].into())
        .await;
    s.hold(s_claims.clone()).await;
    let report = s
        .write_state(&doc("l", &[("db", "refreshed"), ("dns", "2")]))
        .await
        .unwrap();
    assert_eq!(report.updated, ["terraform_data.dns"]);
    assert_eq!(report.skipped, ["terraform_data.db"]);
    assert!(report.conflicts.is_empty());
    assert!(
        s_claims.addresses().is_empty(),
        "dns's claim was cleared as it landed"
    );
    // The clearing runs beside the write's answer: its mark is gone soon after.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let marks = mark_addresses(&f, &layout).await;
        if marks == ["terraform_data.db"] || std::time::Instant::now() > deadline {
            assert_eq!(
                marks,
                ["terraform_data.db"],
                "R's claim stands, dns's is cleared"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // R's own change of db lands against the version it read: S did not move it.
    let r = Session::open(f.peer().await, layout.clone(), run("r"))
        .await
        .unwrap();
    let report = r
        .write_state(&doc("l", &[("db", "2"), ("dns", "2")]))
        .await
        .unwrap();
    assert!(report.conflicts.is_empty(), "{report:?}");
    assert_eq!(report.updated, ["terraform_data.db"]);
    r_claims.release().await.unwrap();
}

/// A mark whose clearing the store refused as its record landed is released when the run ends,
/// with the run's other marks, and not left standing until another run takes it over.
async fn a_mark_the_store_would_not_clear_as_its_record_landed_is_released_at_the_end(kind: Kind) {
    let f = Fixture::new(kind, "uncleared").await;
    let layout = Layout::new(EstateName::parse("uncleared").unwrap());
    seed(&f, &layout, &[("db", "1"), ("dns", "1"), ("web", "1")]).await;
    let interposed = Arc::new(Interposed::new(f.peer().await));
    let store: DynStore = interposed.clone();
    let live_s = live(&f, &layout, "s").await;
    let claims = Arc::new(
        Claims::claim(
            &store,
            &layout,
            &live_s,
            &[
                want("terraform_data.db", &[]),
                want("terraform_data.dns", &[]),
                want("terraform_data.web", &[]),
            ],
        )
        .await
        .unwrap()
        .unwrap(),
    );
    let s = Session::open(store.clone(), layout.clone(), run("s"))
        .await
        .unwrap();
    s.hold(claims.clone()).await;
    // db and dns land while the store refuses every delete; web is left for the end.
    interposed.refuse_deletes(true);
    let report = s
        .write_state(&doc("l", &[("db", "2"), ("dns", "2"), ("web", "1")]))
        .await
        .unwrap();
    assert_eq!(report.updated, ["terraform_data.db", "terraform_data.dns"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while interposed.refused.load(std::sync::atomic::Ordering::SeqCst) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "{kind:?}: the landed records' marks were never cleared"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        claims.addresses(),
        ["terraform_data.web"],
        "{kind:?}: the landed records' marks are no longer held as claims"
    );
    interposed.refuse_deletes(false);
    let released = claims.release().await.unwrap();
    let left = mark_addresses(&f, &layout).await;
    assert!(
        left.is_empty(),
        "{kind:?}: marks left standing after the run ended: {left:?}"
    );
    assert_eq!(released, 3, "{kind:?}: the two uncleared marks and web's");
}

/// Before its first heartbeat a run has no run record and its marks alone keep its claims:
/// another run is refused, naming it; a run that ends within one interval leaves no run record.
async fn a_run_holds_its_claims_by_its_marks_before_its_first_heartbeat(kind: Kind) {
    let f = Fixture::new(kind, "markwindow").await;
    let layout = Layout::new(EstateName::parse("window").unwrap());
    // A 60 s heartbeat: no beat falls within this test.
    let (r, s) = (live(&f, &layout, "r").await, live(&f, &layout, "s").await);
    let db = [want("terraform_data.db", &[])];
    let claims = Claims::claim(&f.store, &layout, &r, &db)
        .await
        .unwrap()
        .unwrap();
    assert!(
        f.store.get(&layout.run_key("r")).await.unwrap().is_none(),
        "no run record before the first heartbeat"
    );
    match Claims::claim(&f.store, &layout, &s, &db).await.unwrap() {
        Err(ClaimRefused::Change(e)) => {
            assert_eq!(e.held.len(), 1);
            assert_eq!(e.held[0].holder.run_id, "r", "{e}");
            // Its program is named from its mark, before any run record says it.
            assert_eq!(e.held[0].holder.program(), Some(r.program()), "{e}");
        }
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(taken) => panic!(
            "s took over the claim of r, a run alive by its mark: {:?}",
            taken.taken_over()
        ),
    }
    assert_eq!(claims.release().await.unwrap(), 1);
    r.end().await.unwrap();
    s.end().await.unwrap();
    for run in ["r", "s"] {
        assert!(
            f.store.get(&layout.run_key(run)).await.unwrap().is_none(),
            "run {run} ended within one interval and left no run record"
        );
    }
}

/// A run's first heartbeat writes its run record (alive), and its end removes it.
async fn a_runs_first_heartbeat_writes_its_record_and_its_end_removes_it(kind: Kind) {
    let f = Fixture::new(kind, "firstbeat").await;
    let layout = Layout::new(EstateName::parse("beat").unwrap());
    // Beats of 2 s: the record reads as alive for 6 s after each, however slow the read that
    // finds it on a loaded machine (at 200 ms, a read 600 ms late found it stale in CI).
    let run = Liveness::start(
        f.peer().await,
        layout.clone(),
        "b",
        ProgramStamp::default(),
        Duration::from_secs(2),
    );
    let mut record = None;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        record = claims::read_run(&f.store, &layout, "b").await.unwrap();
        if record.is_some() {
            break;
        }
    }
    let record = record.expect("the first heartbeat wrote the run record");
    assert!(record.alive_now(), "{record:?}");
    run.end().await.unwrap();
    assert!(
        f.store.get(&layout.run_key("b")).await.unwrap().is_none(),
        "the run's end removed its record"
    );
}

testkit::per_kind!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    local => Local, s3 => S3;
    [
        claims_are_all_or_nothing,
        related_claims_never_both_land,
        a_session_skips_held_records_and_clears_its_claims,
        a_mark_the_store_would_not_clear_as_its_record_landed_is_released_at_the_end,
        a_run_holds_its_claims_by_its_marks_before_its_first_heartbeat,
        a_runs_first_heartbeat_writes_its_record_and_its_end_removes_it,
    ]
);
