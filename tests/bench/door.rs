//! B8 and B7/aws: applies whose providers pass through the provider door (`run`'s default),
//! against the same `run` with `--provider-door=off` and against stock terraform with its own
//! `backend "s3"` and `use_lockfile`, side by side on one peer, and the peak memory of each
//! apply's process tree (`rss.rs`).
//!
//! B8 applies 10 things of the project's own provider (`cdftest_thing`, no sleep), each a
//! provider call of its own, so the door's own cost shows: its plugins and proxies, and a
//! record written at each provider return. B7/aws applies one change to a small root of the
//! real hashicorp/aws 5.100.0 against moto, where starting the provider dominates. The state
//! goes through the latency model's proxy (20 ms per request, SeaweedFS) on every side alike,
//! and the proxy counts each apply's requests and sequential round trips.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Instant;

use serde_json::{Value, json};
use testkit::cdftest::Cdftest;
use testkit::latency_proxy::{self, Account, Call, account};
use testkit::tf::{Root, text};

use crate::phases;
use crate::rss::{self, TreePeak};
use crate::{
    LATENCY, REPEATS, account_json, host, seaweed_bucket, seaweed_endpoint, seaweed_root, stats,
    stock_root_with, write_split,
};

/// B8's things: one provider call each.
const B8_THINGS: usize = 10;
/// B7/aws's parameters, each updated in place by every timed apply (1-3: every start of the
/// AWS provider costs seconds of CPU and some 0.6 GB).
const AWS_PARAMETERS: usize = 2;
/// B8's timed rounds (each of the three ways once a round).
const B8_ROUNDS: usize = REPEATS;
/// B7/aws's timed rounds: two, where the other rows have [`REPEATS`] (each apply starts the AWS
/// provider, seconds of CPU; the three ways' 15 applies were some 10 minutes of `make bench`).
const AWS_ROUNDS: usize = 2;
/// What the door says, at info, for each plugin it starts.
const STARTED: &str = "provider door: started a provider plugin";

/// How one side runs its applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    /// Plain terraform on its own `backend "s3"` with `use_lockfile`.
    Stock,
    /// `run --provider-door=off`: terraform starts its providers itself.
    Off,
    /// `run` with the provider door, the default.
    Door,
}

impl Way {
    /// Every way, in the order each round runs them.
    const ALL: [Way; 3] = [Way::Stock, Way::Off, Way::Door];

    /// Its name in ids and the accounting table.
    fn key(self) -> &'static str {
        match self {
            Way::Stock => "stock",
            Way::Off => "off",
            Way::Door => "door",
        }
    }
}

/// Where a side's applies run.
enum Place {
    /// A stock copy of the fixture and its CLI config.
    Stock(tempfile::TempDir, PathBuf),
    /// A `run` root.
    Run(Root),
}

/// One side of a row: its way, its root and the environment its provider needs.
struct Side {
    way: Way,
    place: Place,
    env: Vec<(&'static str, PathBuf)>,
}

impl Side {
    /// A side of `fixture`, its CLI config `cli_text`, its state on `endpoint` in `bucket`, initialised.
    fn new(
        way: Way,
        fixture: &str,
        estate: &str,
        bucket: &str,
        endpoint: &str,
        cli_text: &str,
    ) -> Side {
        let place = match way {
            Way::Stock => {
                let (dir, cli) = stock_root_with(fixture, bucket, endpoint, cli_text);
                Place::Stock(dir, cli)
            }
            Way::Off | Way::Door => {
                let root = seaweed_root(fixture, estate, bucket, endpoint);
                std::fs::write(&root.cli_config, cli_text).unwrap();
                root.ok(&["init", "-input=false"]);
                Place::Run(root)
            }
        };
        Side {
            way,
            place,
            env: Vec::new(),
        }
    }

    /// The command of one terraform step on this side, not yet started.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = match &self.place {
            Place::Stock(dir, cli) => {
                let mut c = Command::new("terraform");
                c.args(args)
                    .current_dir(dir.path())
                    .env("CHECKPOINT_DISABLE", "1")
                    .env("TF_CLI_CONFIG_FILE", cli)
                    .env("TF_IN_AUTOMATION", "1");
                c
            }
            Place::Run(root) => {
                let opts: &[&str] = match self.way {
                    Way::Off => &["--provider-door=off"],
                    Way::Stock | Way::Door => &[],
                };
                root.run_cmd_with(opts, args)
            }
        };
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    /// Run one step to its end and insist on success.
    fn ok(&self, args: &[&str]) -> Output {
        checked(self.way, args, self.command(args).output().unwrap())
    }

    /// Run one step with its process tree sampled (`rss.rs`), and insist on success.
    fn sampled(&self, args: &[&str]) -> (Output, TreePeak) {
        let (out, peak) = rss::sampled(&mut self.command(args));
        (checked(self.way, args, out), peak)
    }

    /// The first apply after init (untimed): on the door's side it checks, from the door's
    /// log, that the providers did pass through it, and on the others that they did not.
    fn first(&self, args: &[&str]) {
        let out = self
            .command(args)
            .env("CHOUDOUFU_LOG", "choudoufu_live::frontdoor::provider=info")
            .output()
            .unwrap();
        let out = checked(self.way, args, out);
        let said = text(&out.stderr).contains(STARTED);
        assert_eq!(
            said,
            self.way == Way::Door,
            "{:?}: the door started plugins: {said}\n{}",
            self.way,
            text(&out.stderr)
        );
    }
}

/// The machine's load average over the last minute (/proc/loadavg), as the notes give it.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn checked(way: Way, args: &[&str], out: Output) -> Output {
    assert!(
        out.status.success(),
        "{way:?} {args:?}: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// What one side measured.
#[derive(Default)]
struct Measured {
    /// Wall time of each timed apply, in seconds.
    times: Vec<f64>,
    /// The proxy's calls during the last timed apply.
    calls: Vec<Call>,
    /// Provider processes that answered a call in the last timed apply (B8's call log).
    serving: Option<usize>,
    /// The sampled apply's process tree.
    peak: TreePeak,
}

impl Measured {
    fn account(&self) -> Account {
        account(&self.calls)
    }
}

/// The three sides' figures, by [`Way::ALL`]'s order.
struct Compared {
    stock: Measured,
    off: Measured,
    door: Measured,
}

impl Compared {
    fn of(&self, way: Way) -> &Measured {
        match way {
            Way::Stock => &self.stock,
            Way::Off => &self.off,
            Way::Door => &self.door,
        }
    }

    fn of_mut(&mut self, way: Way) -> &mut Measured {
        match way {
            Way::Stock => &mut self.stock,
            Way::Off => &mut self.off,
            Way::Door => &mut self.door,
        }
    }

    /// Requests, round trips and processes of each side, for a row's note.
    fn accounting(&self) -> String {
        Way::ALL
            .iter()
            .map(|w| {
                let m = self.of(*w);
                let a = m.account();
                let serving = m.serving.map_or(String::new(), |n| {
                    format!(", {n} provider process(es) answered its calls")
                });
                format!(
                    "{} {} requests in {} sequential round trips{serving}",
                    w.key(),
                    a.requests,
                    a.round_trips
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The sampled apply of each side: its peak, and the plugins it started.
    fn memory(&self) -> String {
        Way::ALL
            .iter()
            .map(|w| {
                let p = &self.of(*w).peak;
                format!(
                    "{} {:.0} MiB ({:.0} MiB of it private anonymous memory; {} provider plugin(s) started, at most {} at once; {} processes in all, {} samples; {})",
                    w.key(),
                    p.rss_mib(),
                    p.anon_mib(),
                    p.plugins(),
                    p.plugins_at_once,
                    p.seen.len(),
                    p.samples,
                    p.by_process()
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The accounting table's lines of this row: each side's last timed apply at the proxy.
    fn accounts(&self, id: &str) -> Vec<Value> {
        if std::env::var_os("CHOUDOUFU_BENCH_CALLS").is_some() {
            for w in Way::ALL {
                let calls = &self.of(w).calls;
                let Some(t0) = calls.iter().map(|c| c.start).min() else {
                    continue;
                };
                eprintln!("{id}/{}: the proxy's calls", w.key());
                for c in calls {
                    eprintln!(
                        "  {:>6.3} {:>6.3} {} {}",
                        (c.start - t0).as_secs_f64(),
                        (c.end - t0).as_secs_f64(),
                        c.method,
                        c.path
                    );
                }
            }
        }
        Way::ALL
            .iter()
            .map(|w| {
                let m = self.of(*w);
                json!({"id": id, "way": w.key(), "account": account_json(&m.account()), "writes": write_split(&m.calls, 1)})
            })
            .collect()
    }
}

/// Time `rounds` applies on each side (each round runs stock, off, door in turn); the last
/// round's applies are also sampled for their process tree's memory (reading /proc every
/// [`rss::EVERY`], which costs the apply little), so no apply runs only to be sampled.
/// `apply` gives a side's arguments for a round's value; `before` runs ahead of each apply,
/// untimed (B8's destroy); `pids` gives the pid of each call in a side's call log so far
/// (`None`: the side has none).
fn measure(
    sides: &[Side],
    proxy: &latency_proxy::Proxy,
    rounds: usize,
    apply: &dyn Fn(&Side, &str) -> Vec<String>,
    before: &dyn Fn(&Side),
    pids: &dyn Fn(&Side) -> Option<Vec<u32>>,
) -> Compared {
    let mut got = Compared {
        stock: Measured::default(),
        off: Measured::default(),
        door: Measured::default(),
    };
    for round in 0..rounds {
        for side in sides {
            before(side);
            let args = apply(side, &format!("r{round}"));
            let from = pids(side).map_or(0, |p| p.len());
            proxy.reset();
            let t = Instant::now();
            let peak = if round + 1 == rounds {
                Some(side.sampled(&crate::args(&args)).1)
            } else {
                side.ok(&crate::args(&args));
                None
            };
            let took = t.elapsed().as_secs_f64();
            let m = got.of_mut(side.way);
            m.times.push(took);
            m.calls = proxy.take();
            m.serving = pids(side).map(|p| p[from..].iter().collect::<BTreeSet<_>>().len());
            if let Some(peak) = peak {
                m.peak = peak;
            }
        }
    }
    got
}

/// Where one more apply's time goes on the stock side and the door's (untimed, run with the
/// logs on: [`phases`]), as markdown tables; `before` runs ahead of each, as in [`measure`].
fn phase_tables(
    id: &str,
    sides: &[Side],
    apply: &dyn Fn(&Side, &str) -> Vec<String>,
    before: &dyn Fn(&Side),
) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let mut md = String::new();
    for side in sides.iter().filter(|s| s.way != Way::Off) {
        before(side);
        let args = apply(side, "phases");
        let got = phases::timeline(&mut side.command(&crate::args(&args)), scratch.path());
        md.push_str(&phases::table(&format!("{id}, {}", side.way.key()), &got));
    }
    md
}

/// Keep `tables` on the row `id` of `rows`.
fn keep_phases(rows: &mut [Value], id: &str, tables: String) {
    if let Some(row) = rows.iter_mut().find(|r| r["id"] == id) {
        row["phases"] = json!(tables);
    }
}

/// The rows of one comparison: `<id>/off` and `<id>/door` against stock, and `<id>/rss`.
fn push_rows(
    rows: &mut Vec<Value>,
    accounts: &mut Vec<Value>,
    id: &str,
    what: &str,
    door_goal: DoorGoal,
    got: &Compared,
    notes: Notes,
) {
    let Notes {
        door: extra,
        off: split,
    } = notes;
    let stock = stats(got.stock.times.clone());
    let (off, door) = (stats(got.off.times.clone()), stats(got.door.times.clone()));
    let door_off = door.0 / off.0;
    let accounting = got.accounting();
    let (goal, met, off_goal, off_met) = match door_goal {
        DoorGoal::OfOff(g) => (
            format!("<= {g} of {id}/off"),
            json!(door_off <= g),
            "reported".to_string(),
            Value::Null,
        ),
        DoorGoal::OfStock(g) => (
            format!("<= {g}"),
            json!(door.0 / stock.0 <= g),
            format!("<= {g}"),
            json!(off.0 / stock.0 <= g),
        ),
    };
    let plugins = |w: Way| got.of(w).peak.plugins();
    let off_note = format!(
        "run's apply is a planned apply: `plan -out`, `show -json` of the plan, then `apply PLAN`, three terraform processes where stock's apply is one; in the sampled apply terraform started {} provider plugin(s) without the door, {} for stock{split}",
        plugins(Way::Off),
        plugins(Way::Stock)
    );
    rows.push(json!({"id": format!("{id}/off"), "what": format!("{what} through `run --provider-door=off`, against stock apply with use_lockfile"), "stock": stock, "live": off, "ratio": off.0 / stock.0, "goal": off_goal, "met": off_met, "note": off_note}));
    rows.push(json!({"id": format!("{id}/door"), "what": format!("{what} through `run` with the provider door (the default), against stock apply with use_lockfile"), "stock": stock, "live": door, "ratio": door.0 / stock.0, "goal": goal, "met": met,
        "note": format!("door / no door {door_off:.3} (medians: stock {:.3} s, off {:.3} s, door {:.3} s); per apply at the proxy (the last timed one): {accounting}{extra}", stock.0, off.0, door.0)}));
    let mib = |m: &Measured| {
        let v = m.peak.rss_mib();
        [v, v, v]
    };
    let (s, o, d) = (
        got.stock.peak.rss_mib(),
        got.off.peak.rss_mib(),
        got.door.peak.rss_mib(),
    );
    rows.push(json!({"id": format!("{id}/rss"), "what": format!("peak RSS (MiB) of one {id} apply's process tree (terraform, run, the provider plugins), summed over the tree as sampled every {} ms, through `run` with the door, against stock", rss::EVERY.as_millis()), "stock": mib(&got.stock), "live": mib(&got.door), "ratio": d / s, "goal": "reported", "met": Value::Null,
        "note": format!("sampled in each way's last timed apply: {}; without the door {:.2}x of stock ({o:.0} MiB)", got.memory(), o / s)}));
    accounts.extend(got.accounts(id));
}

/// What a row's notes add to what [`push_rows`] measured: for the door row, and the off row.
struct Notes<'a> {
    door: &'a str,
    off: &'a str,
}

/// The door row's goal.
#[derive(Clone, Copy)]
enum DoorGoal {
    /// At most this ratio of the same run without the door.
    OfOff(f64),
    /// At most this ratio of stock (both run rows).
    OfStock(f64),
}

/// B8: an apply creating [`B8_THINGS`] things of the project's own provider, three ways.
pub async fn b8(rows: &mut Vec<Value>, accounts: &mut Vec<Value>) {
    let load_before = load();
    let proxy = latency_proxy::start(host(&seaweed_endpoint()), LATENCY).await;
    let bucket = seaweed_bucket("b8").await;
    // The bench binary is built in Cargo.toml's `bench` profile (in target/release): so is the provider.
    testkit::cdftest::release_folder_profile("bench");
    let providers: Vec<Cdftest> = Way::ALL.iter().map(|_| Cdftest::new(false)).collect();
    let sides: Vec<Side> = Way::ALL
        .iter()
        .zip(&providers)
        .map(|(way, cdf)| {
            let cli = std::fs::read_to_string(&cdf.cli_config).unwrap();
            let mut side = Side::new(
                *way,
                "bench_cdftest",
                &format!("b8-{}", way.key()),
                &bucket,
                &proxy.endpoint,
                &cli,
            );
            side.env = vec![
                ("CDFTEST_CALL_LOG", cdf.call_log.clone()),
                ("CDFTEST_OBJECTS", cdf.objects.clone()),
            ];
            side
        })
        .collect();
    let n = format!("n={B8_THINGS}");
    let apply = |_: &Side, value: &str| {
        ["apply", "-auto-approve", "-input=false", "-var", &n, "-var"]
            .iter()
            .map(|s| s.to_string())
            .chain([format!("value={value}")])
            .collect::<Vec<_>>()
    };
    let destroy = ["destroy", "-auto-approve", "-input=false", "-var", &n];
    let cdf_of = |side: &Side| {
        &providers[Way::ALL
            .iter()
            .position(|w| *w == side.way)
            .expect("every way has its provider")]
    };
    // The first apply after init, and its destroy: so every timed apply starts as a user's
    // next command does (and the door's side shows it used the door).
    for side in &sides {
        side.first(&crate::args(&apply(side, "warm")));
        side.ok(&destroy);
    }
    let before = |side: &Side| {
        if !cdf_of(side).objects().is_empty() {
            side.ok(&destroy);
        }
        assert!(
            cdf_of(side).objects().is_empty(),
            "{:?}: destroyed",
            side.way
        );
    };
    let pids = |side: &Side| Some(cdf_of(side).calls().iter().map(|c| c.pid).collect());
    let got = measure(&sides, &proxy, B8_ROUNDS, &apply, &before, &pids);
    let tables = phase_tables("B8", &sides, &apply, &before);
    for (side, cdf) in sides.iter().zip(&providers) {
        assert_eq!(
            cdf.objects().len(),
            B8_THINGS,
            "{:?}: every thing was created",
            side.way
        );
    }
    push_rows(
        rows,
        accounts,
        "B8",
        &format!(
            "terraform apply creating {B8_THINGS} `cdftest_thing` (the project's own provider, one provider call each; s; 20 ms per request, SeaweedFS)"
        ),
        DoorGoal::OfOff(1.05),
        &got,
        Notes {
            door: &format!(
                "; the machine's load average (1 min) {load_before} at the start, {} at the end",
                load()
            ),
            off: "",
        },
    );
    keep_phases(rows, "B8/door", tables);
}

/// B7/aws: B7 again on a small root of the real hashicorp/aws 5.100.0 against moto
/// ([`AWS_PARAMETERS`] `aws_ssm_parameter`, each updated in place), where starting the
/// provider dominates; the state on SeaweedFS through the latency model's proxy.
pub async fn b7_aws(rows: &mut Vec<Value>, accounts: &mut Vec<Value>) {
    let load_before = load();
    let proxy = latency_proxy::start(host(&seaweed_endpoint()), LATENCY).await;
    let bucket = seaweed_bucket("b7aws").await;
    let moto = testkit::s3_endpoint();
    testkit::cdftest::release_folder_profile("bench");
    let aws = Cdftest::new(true);
    let cli = std::fs::read_to_string(&aws.cli_config).unwrap();
    let run_id = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let sides: Vec<Side> = Way::ALL
        .iter()
        .map(|way| {
            Side::new(
                *way,
                "door_aws",
                &format!("b7aws-{}", way.key()),
                &bucket,
                &proxy.endpoint,
                &cli,
            )
        })
        .collect();
    let prefix = |side: &Side| format!("b7aws-{run_id}-{}", side.way.key());
    let apply = |side: &Side, value: &str| {
        vec![
            "apply".to_string(),
            "-auto-approve".into(),
            "-input=false".into(),
            "-var".into(),
            format!("endpoint={moto}"),
            "-var".into(),
            format!("prefix={}", prefix(side)),
            "-var".into(),
            format!("n={AWS_PARAMETERS}"),
            "-var".into(),
            format!("value={value}"),
        ]
    };
    // The creates, untimed: each timed apply then updates every parameter in place.
    for side in &sides {
        side.first(&crate::args(&apply(side, "first")));
    }
    let got = measure(&sides, &proxy, AWS_ROUNDS, &apply, &|_| {}, &|_| None);
    let tables = phase_tables("B7/aws", &sides, &apply, &|_| {});
    let split = aws_split(&sides[0], &apply(&sides[0], "split"));
    push_rows(
        rows,
        accounts,
        "B7/aws",
        &format!(
            "terraform apply of one change ({AWS_PARAMETERS} `aws_ssm_parameter` updated in place) with the real hashicorp/aws 5.100.0 against moto (s; state: 20 ms per request, SeaweedFS)"
        ),
        DoorGoal::OfStock(1.25),
        &got,
        Notes {
            door: &format!(
                "; the machine's load average (1 min) {load_before} at the start, {} at the end; {split}",
                load()
            ),
            off: &format!("; {split}"),
        },
    );
    keep_phases(rows, "B7/aws/door", tables);
}

/// `CHOUDOUFU_BENCH_ONLY=B8` or `B7/aws` (`which`): that row alone, its rows, accounts and phase tables printed (peers: moto and SeaweedFS, as `make bench`'s).
pub async fn alone(which: &str) {
    let (mut rows, mut accounts) = (Vec::new(), Vec::new());
    match which {
        "B8" => b8(&mut rows, &mut accounts).await,
        _ => b7_aws(&mut rows, &mut accounts).await,
    }
    for row in &rows {
        let mut shown = row.clone();
        if let Some(o) = shown.as_object_mut() {
            o.remove("phases");
        }
        eprintln!(
            "{}",
            serde_json::to_string_pretty(&shown).unwrap_or_default()
        );
    }
    for a in &accounts {
        eprintln!("{a}");
    }
    for row in &rows {
        if let Some(md) = row["phases"].as_str() {
            eprintln!("{md}");
        }
    }
}

/// Where B7/aws's time goes, timed on stock's root (`side`) apart: a `plan -out` and a
/// `show -json` of it (the two steps run's planned apply adds; both start terraform and load
/// the provider's schema), and the `h1:` hash of the AWS package, which the door computes
/// before it starts a plugin, in every run.
fn aws_split(side: &Side, apply: &[String]) -> String {
    let Place::Stock(dir, _) = &side.place else {
        return String::new();
    };
    let plan_file = dir.path().join("split.tfplan");
    let out = format!("-out={}", plan_file.display());
    // The apply's variables, for a plan of the same change.
    let mut plan = vec!["plan"];
    plan.extend(
        apply
            .iter()
            .map(String::as_str)
            .filter(|a| *a != "apply" && *a != "-auto-approve"),
    );
    plan.push(&out);
    let t = Instant::now();
    side.ok(&plan);
    let plan_s = t.elapsed().as_secs_f64();
    let shown = plan_file.to_string_lossy().to_string();
    let t = Instant::now();
    side.ok(&["show", "-json", &shown]);
    let show_s = t.elapsed().as_secs_f64();
    let package = std::path::Path::new(testkit::cdftest::AWS_MIRROR)
        .join("registry.terraform.io/hashicorp/aws/5.100.0/linux_amd64");
    let t = Instant::now();
    let hashed = choudoufu_live::frontdoor::provider::lockfile::h1(&package);
    let hash_s = t.elapsed().as_secs_f64();
    assert!(hashed.is_ok(), "hash the AWS package: {hashed:?}");
    format!(
        "on the stock root apart, a `plan -out` takes {plan_s:.2} s and a `show -json` of it {show_s:.2} s; the door's `h1:` hash of the AWS package (0.7 GB), before its first plugin starts, {hash_s:.2} s"
    )
}
