//! `make bench`: choudoufu-live against terraform's own `backend "s3"` with `use_lockfile`,
//! side by side in one run, on the same moto server. Figures are ratios against the stock way.
//! Writes target/bench/results.json and docs/bench/RESULTS.md; scripts/plot-bench.py draws the chart.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::read_cache::ReadCache;
use choudoufu_live::engine::session::{RunInfo, Session};
use choudoufu_live::store::local::LocalStore;
use choudoufu_live::store::s3::S3Store;
use choudoufu_live::store::{DynStore, RecordStore};
use common::tf::{Records, Root, text};
use futures::StreamExt;
use serde_json::{Value, json};

const REPEATS: usize = 3;

/// `CHOUDOUFU_BENCH_QUICK=1`: small sizes, for checking the harness itself.
fn quick() -> bool {
    std::env::var("CHOUDOUFU_BENCH_QUICK").is_ok()
}

fn size(n: usize) -> usize {
    if quick() { n / 50 } else { n }
}

fn stats(mut xs: Vec<f64>) -> (f64, f64, f64) {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (xs[xs.len() / 2], xs[0], xs[xs.len() - 1])
}

fn tf(dir: &Path, cli: &Path, args: &[&str]) -> Output {
    let out = Command::new("terraform")
        .args(args)
        .current_dir(dir)
        .env("CHECKPOINT_DISABLE", "1")
        .env("TF_CLI_CONFIG_FILE", cli)
        .env("TF_IN_AUTOMATION", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "terraform {args:?}: {}",
        text(&out.stderr)
    );
    out
}

/// A stock copy of a fixture root: `backend "s3"` with `use_lockfile` against `endpoint`.
fn stock_root(fixture: &str, bucket: &str, endpoint: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("terraform-fixtures")
        .join(fixture)
        .join("main.tf");
    let backend = format!(
        "backend \"s3\" {{\n    bucket = \"{bucket}\"\n    key = \"stock/terraform.tfstate\"\n    region = \"us-east-1\"\n    endpoints = {{ s3 = \"{endpoint}\" }}\n    use_path_style = true\n    use_lockfile = true\n    skip_credentials_validation = true\n    skip_requesting_account_id = true\n    skip_metadata_api_check = true\n    skip_region_validation = true\n    access_key = \"testing\"\n    secret_key = \"testing\"\n  }}"
    );
    let main = std::fs::read_to_string(src)
        .unwrap()
        .replace("backend \"http\" {}", &backend);
    std::fs::write(dir.path().join("main.tf"), main).unwrap();
    let cli = dir.path().join(".cli.tfrc");
    std::fs::write(&cli, "").unwrap();
    tf(dir.path(), &cli, &["init", "-input=false"]);
    (dir, cli)
}

fn s3_records(bucket: &str, endpoint: &str) -> Records {
    Records::S3 {
        bucket: bucket.to_string(),
        endpoint: endpoint.to_string(),
    }
}

/// B1: two applies of one root, disjoint resources, each with a 5 s local-exec.
async fn b1(rows: &mut Vec<Value>) {
    let (_s, bucket) = common::s3_store("b1").await;
    let endpoint = common::s3_endpoint();
    let (stock, cli) = stock_root("demo", &bucket, &endpoint);
    tf(
        stock.path(),
        &cli,
        &["apply", "-auto-approve", "-input=false"],
    );
    let live = Root::new("demo", "b1", &s3_records(&bucket, &endpoint));
    live.init_and_apply();
    let (mut stock_t, mut live_t) = (vec![], vec![]);
    for i in 0..REPEATS {
        let va = format!("db_version=s{i}");
        let vb = format!("dns_version=s{i}");
        let t = Instant::now();
        let spawn = |target: &str, var: &str| {
            Command::new("terraform")
                .args([
                    "apply",
                    "-auto-approve",
                    "-input=false",
                    "-lock-timeout=5m",
                    target,
                    "-var",
                    var,
                    "-var",
                    "sleep_seconds=5",
                ])
                .current_dir(stock.path())
                .env("CHECKPOINT_DISABLE", "1")
                .env("TF_CLI_CONFIG_FILE", &cli)
                .output()
        };
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| spawn("-target=terraform_data.db", &va));
            let b = s.spawn(|| spawn("-target=terraform_data.dns", &vb));
            (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
        });
        assert!(
            a.status.success() && b.status.success(),
            "stock: {}\n{}",
            text(&a.stderr),
            text(&b.stderr)
        );
        stock_t.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let a = live.spawn(&[
            "apply",
            "-auto-approve",
            "-input=false",
            "-target=terraform_data.db",
            "-var",
            &va,
            "-var",
            "sleep_seconds=5",
        ]);
        let b = live.spawn(&[
            "apply",
            "-auto-approve",
            "-input=false",
            "-target=terraform_data.dns",
            "-var",
            &vb,
            "-var",
            "sleep_seconds=5",
        ]);
        let (a, b) = (
            common::tf::wait(a, Duration::from_secs(300)),
            common::tf::wait(b, Duration::from_secs(300)),
        );
        assert!(a.status.success() && b.status.success());
        live_t.push(t.elapsed().as_secs_f64());
    }
    let (s, l) = (stats(stock_t), stats(live_t));
    rows.push(json!({"id": "B1", "what": "two applies at once, disjoint resources, 5 s each: wall time (s)", "stock": s, "live": l, "ratio": l.0 / s.0, "goal": "<= 0.6", "met": l.0 / s.0 <= 0.6}));
}

/// B2: bytes of the write requests (PUT, POST, DELETE) an apply that changes one resource of n sends to the store.
async fn b2(rows: &mut Vec<Value>, n: usize) {
    let (_s, bucket) = common::s3_store("b2").await;
    let upstream = common::s3_endpoint()
        .trim_start_matches("http://")
        .to_string();
    let proxy = common::fault_proxy::start(upstream, 0, 1).await;
    let written = || proxy.counts.bytes_written.load(Ordering::SeqCst);
    let (stock, cli) = stock_root("bench", &bucket, &proxy.endpoint);
    let nv = format!("n={n}");
    let apply = [
        "apply",
        "-auto-approve",
        "-input=false",
        "-parallelism=50",
        "-var",
        &nv,
    ];
    let change = [
        "apply",
        "-auto-approve",
        "-input=false",
        "-parallelism=50",
        "-var",
        &nv,
        "-var",
        "first=changed",
    ];
    tf(stock.path(), &cli, &apply);
    let before = written();
    tf(stock.path(), &cli, &change);
    let stock_bytes = written() - before;
    let live = Root::new(
        "bench",
        &format!("b2-{n}"),
        &s3_records(&bucket, &proxy.endpoint),
    );
    live.ok(&["init", "-input=false"]);
    live.ok(&apply);
    let before = written();
    live.ok(&change);
    let live_bytes = written() - before;
    let (sw, lw) = (stock_bytes as f64, live_bytes as f64);
    rows.push(json!({"id": format!("B2/{n}"), "what": format!("bytes of write requests sent to the store by an apply changing 1 of {n} resources"), "stock": [sw, sw, sw], "live": [lw, lw, lw], "ratio": lw / sw, "goal": "<= 0.01", "met": lw / sw <= 0.01}));
}

fn doc(n: usize) -> Vec<u8> {
    use common::state::{document, input, terraform_data};
    let rs = (0..n)
        .map(|i| {
            let v = format!("value-{i}");
            terraform_data(
                &format!("r{i}"),
                json!({"id": format!("id-{i}"), "input": input(&v), "output": input(&v), "triggers_replace": null}),
            )
        })
        .collect();
    document("1.11.4", "l", rs)
}

/// B3: time to serve the state of an estate of n records (cold), against stock's single GET.
async fn b3(rows: &mut Vec<Value>, n: usize) {
    let (store, bucket) = common::s3_store("b3").await;
    let store: DynStore = Arc::new(store);
    let layout = Layout::new(EstateName::parse(&format!("b3-{n}")).unwrap());
    let seed = Session::new(
        store.clone(),
        layout.clone(),
        RunInfo::new(ProgramStamp::default()),
    );
    seed.write_state(&doc(n))
        .await
        .unwrap()
        .into_result()
        .unwrap();
    let whole = seed.state_document().await;
    store
        .create("stock/terraform.tfstate", &whole)
        .await
        .unwrap();
    let client = S3Store::connect(&common::s3_settings(&bucket)).await;
    let (mut stock_t, mut cold_t, mut warm_t) = (vec![], vec![], vec![]);
    let cache_dir = tempfile::tempdir().unwrap();
    let cached = || {
        Session::new(
            store.clone(),
            layout.clone(),
            RunInfo::new(ProgramStamp::default()),
        )
        .with_cache(Some(ReadCache::new(cache_dir.path())))
    };
    cached().refresh().await.unwrap();
    for _ in 0..REPEATS {
        let t = Instant::now();
        let got = client
            .get("stock/terraform.tfstate")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got.bytes.len(), whole.len());
        stock_t.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let s = Session::open(
            store.clone(),
            layout.clone(),
            RunInfo::new(ProgramStamp::default()),
        )
        .await
        .unwrap();
        let d = s.state_document().await;
        assert!(d.len() > n * 10);
        cold_t.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let s = cached();
        s.refresh().await.unwrap();
        let w = s.state_document().await;
        assert_eq!(w, d);
        warm_t.push(t.elapsed().as_secs_f64());
    }
    let (s, c, w) = (stats(stock_t), stats(cold_t), stats(warm_t));
    rows.push(json!({"id": format!("B3/{n}/cold"), "what": format!("serve the state of {n} records, cold (s)"), "stock": s, "live": c, "ratio": c.0 / s.0, "goal": "reported", "met": Value::Null}));
    rows.push(json!({"id": format!("B3/{n}/warm"), "what": format!("serve the state of {n} records, warm: listing + cache (s)"), "stock": s, "live": w, "ratio": w.0 / s.0, "goal": "<= 1.5", "met": w.0 / s.0 <= 1.5}));
}

/// B4: `terraform plan` wall time on n resources, stock against run.
async fn b4(rows: &mut Vec<Value>, n: usize) {
    let (_s, bucket) = common::s3_store("b4").await;
    let endpoint = common::s3_endpoint();
    let nv = format!("n={n}");
    let (stock, cli) = stock_root("bench", &bucket, &endpoint);
    tf(
        stock.path(),
        &cli,
        &[
            "apply",
            "-auto-approve",
            "-input=false",
            "-parallelism=50",
            "-var",
            &nv,
        ],
    );
    let live = Root::new("bench", "b4", &s3_records(&bucket, &endpoint));
    live.ok(&["init", "-input=false"]);
    live.ok(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-parallelism=50",
        "-var",
        &nv,
    ]);
    let (mut st, mut lt) = (vec![], vec![]);
    for _ in 0..REPEATS {
        let t = Instant::now();
        tf(stock.path(), &cli, &["plan", "-input=false", "-var", &nv]);
        st.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        live.ok(&["plan", "-input=false", "-var", &nv]);
        lt.push(t.elapsed().as_secs_f64());
    }
    let (s, l) = (stats(st), stats(lt));
    rows.push(json!({"id": format!("B4/{n}"), "what": format!("terraform plan on {n} resources (s)"), "stock": s, "live": l, "ratio": l.0 / s.0, "goal": "<= 1.1", "met": l.0 / s.0 <= 1.1}));
}

/// B5: conditional record writes per second, local and moto, at concurrency 1, 8 and 32.
async fn b5(rows: &mut Vec<Value>) {
    for kind in ["local", "s3"] {
        for conc in [1usize, 8, 32] {
            let mut rates = vec![];
            for rep in 0..REPEATS {
                let dir = tempfile::tempdir().unwrap();
                let store: DynStore = match kind {
                    "local" => Arc::new(LocalStore::new(dir.path())),
                    _ => Arc::new(common::s3_store("b5").await.0),
                };
                let n = 300;
                let t = Instant::now();
                futures::stream::iter(0..n)
                    .map(|i| {
                        let s = store.clone();
                        async move {
                            s.create(
                                &format!("tofu-records/b5/r/k{rep}-{i}"),
                                format!("{{\"i\":{i}}}").as_bytes(),
                            )
                            .await
                            .unwrap()
                        }
                    })
                    .buffer_unordered(conc)
                    .collect::<Vec<_>>()
                    .await;
                rates.push(n as f64 / t.elapsed().as_secs_f64());
            }
            let r = stats(rates);
            rows.push(json!({"id": format!("B5/{kind}/{conc}"), "what": format!("conditional creates per second, {kind}, concurrency {conc}"), "stock": Value::Null, "live": r, "ratio": Value::Null, "goal": "reported", "met": Value::Null}));
        }
    }
}

fn fmt3(v: &Value) -> String {
    match v.as_array() {
        Some(a) if a.len() == 3 => format!(
            "{:.3} ({:.3}-{:.3})",
            a[0].as_f64().unwrap_or(0.0),
            a[1].as_f64().unwrap_or(0.0),
            a[2].as_f64().unwrap_or(0.0)
        ),
        _ => "-".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "make bench"]
async fn bench() {
    let started = Instant::now();
    let mut rows = vec![];
    b1(&mut rows).await;
    eprintln!("bench: B1 done at {:?}", started.elapsed());
    for n in [size(1000), size(5000)] {
        b2(&mut rows, n).await;
        eprintln!("bench: B2/{n} done at {:?}", started.elapsed());
    }
    for n in [size(1000), size(5000), size(10000)] {
        b3(&mut rows, n).await;
        eprintln!("bench: B3/{n} done at {:?}", started.elapsed());
    }
    b4(&mut rows, size(1000)).await;
    b5(&mut rows).await;
    let machine = format!(
        "{} cores, {}; terraform {}; moto {} (requests serialised, see scripts/moto-server.py); {} build",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| m.lines().next().map(|l| l
                .split_whitespace()
                .nth(1)
                .unwrap_or("?")
                .to_string()))
            .map(|kb| format!(
                "{} GiB memory",
                kb.parse::<u64>().unwrap_or(0) / 1024 / 1024
            ))
            .unwrap_or_default(),
        text(
            &Command::new("terraform")
                .arg("version")
                .output()
                .unwrap()
                .stdout
        )
        .lines()
        .next()
        .unwrap_or("?"),
        std::env::var("CHOUDOUFU_MOTO_VERSION").unwrap_or_else(|_| "?".into()),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    let results =
        json!({"machine": machine, "seconds": started.elapsed().as_secs_f64(), "rows": rows});
    let out_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::write(
        out_dir.join("results.json"),
        serde_json::to_vec_pretty(&results).unwrap(),
    )
    .unwrap();
    let mut md = String::from(
        "# Benchmark results\n\nGenerated by `make bench` (tests/bench.rs), choudoufu-live side by side with terraform's own `backend \"s3\"` with `use_lockfile = true`, against the same moto server, in one run. Times are median (min-max) of 3 runs.\n\n",
    );
    md.push_str(&format!(
        "Machine: {machine}. Whole run: {:.0} s.\n\n",
        started.elapsed().as_secs_f64()
    ));
    md.push_str("| id | what | stock | choudoufu-live | ratio | goal | met |\n|---|---|---|---|---|---|---|\n");
    for r in &rows {
        let ratio = r["ratio"]
            .as_f64()
            .map_or("-".to_string(), |x| format!("{x:.4}"));
        let met = match &r["met"] {
            Value::Bool(true) => "met".to_string(),
            Value::Bool(false) => format!(
                "**missed**{}",
                r["note"]
                    .as_str()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            ),
            _ => "-".to_string(),
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r["id"].as_str().unwrap_or(""),
            r["what"].as_str().unwrap_or(""),
            fmt3(&r["stock"]),
            fmt3(&r["live"]),
            ratio,
            r["goal"].as_str().unwrap_or(""),
            met
        ));
    }
    md.push_str("\n![chart](chart.png)\n");
    let docs = if quick() {
        out_dir.clone()
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/bench")
    };
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("RESULTS.md"), &md).unwrap();
    println!("{md}");
}

/// Where a warm read of 10,000 records spends its time: the listing, then the cache reads, decoding and assembly.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "make bench (profile of B3 warm)"]
async fn b3_warm_profile() {
    let n = 10_000;
    let (store, _bucket) = common::s3_store("b3p").await;
    let store: DynStore = Arc::new(store);
    let layout = Layout::new(EstateName::parse("b3p").unwrap());
    Session::new(
        store.clone(),
        layout.clone(),
        RunInfo::new(ProgramStamp::default()),
    )
    .write_state(&doc(n))
    .await
    .unwrap()
    .into_result()
    .unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cached = || {
        Session::new(
            store.clone(),
            layout.clone(),
            RunInfo::new(ProgramStamp::default()),
        )
        .with_cache(Some(ReadCache::new(cache_dir.path())))
    };
    cached().refresh().await.unwrap();
    let t = Instant::now();
    let listed = choudoufu_live::store::list_all(store.as_ref(), &layout.prefix())
        .await
        .unwrap();
    let list_s = t.elapsed().as_secs_f64();
    assert_eq!(listed.len(), n + 1);
    let t = Instant::now();
    let s = cached();
    s.refresh().await.unwrap();
    let refresh_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let d = s.state_document().await;
    let assemble_s = t.elapsed().as_secs_f64();
    println!(
        "B3 warm profile, {n} records: listing {list_s:.3} s ({} pages of 1000); whole warm refresh {refresh_s:.3} s, so cache reads and decoding {:.3} s; assembling the {} byte document {assemble_s:.3} s",
        listed.len().div_ceil(1000),
        refresh_s - list_s,
        d.len()
    );
}
