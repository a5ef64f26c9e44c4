//! The seeds' claims with the real hashicorp/aws 5.100.0 provider, through the provider door, on
//! one aws_ssm_parameter in moto. Each run reaches moto through a proxy of its own that logs every
//! SSM action (`X-Amz-Target`) with its time; the first run's proxy holds its `PutParameter` at a
//! gate, so that run holds its claim with its cloud call in flight for as long as the test needs.
//! Run under `scripts/with-moto` (or `with-peers`).

use testkit as common;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::latency_proxy::{self, Call, Proxy};
use common::procs;
use common::tf::{Records, Root, text, turn, wait};

const MIRROR: &str = "/opt/tf-plugins";
const AWS_BINARY: &str =
    "registry.terraform.io/hashicorp/aws/5.100.0/linux_amd64/terraform-provider-aws_v5.100.0_x5";
const PUT: &str = "AmazonSSM.PutParameter";
const ADDRESS: &str = "aws_ssm_parameter.p[0]";
/// Rounds of each race: one in `make test` (the gated proxy makes each round's overlap certain,
/// and the terraform_data versions race many rounds); `CHOUDOUFU_AWS_RACE_ROUNDS` asks for more
/// (`make reliability`: 3). The AWS provider is heavy: each round starts it about six times.
fn rounds() -> usize {
    std::env::var("CHOUDOUFU_AWS_RACE_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// A copy of the door_aws root on `records`, its CLI configuration on the mirror, initialised through `run`.
fn aws_root(estate: &str, records: &Records) -> Root {
    assert!(
        Path::new(MIRROR).join(AWS_BINARY).is_file(),
        "the real hashicorp/aws 5.100.0 provider is not under {MIRROR}: these tests need it"
    );
    let root = Root::new("door_aws", estate, records);
    std::fs::write(
        &root.cli_config,
        format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path    = \"{MIRROR}\"\n    include = [\"registry.terraform.io/hashicorp/aws\"]\n  }}\n  direct {{\n    exclude = [\"registry.terraform.io/hashicorp/aws\"]\n  }}\n}}\n"
        ),
    )
    .unwrap();
    root.ok(&["init", "-input=false"]);
    root
}

/// `terraform <verb> ...` of `value` for the parameter `/<prefix>/p0`, reaching SSM at `endpoint`.
fn tf_args(verb: &[&str], endpoint: &str, prefix: &str, value: &str) -> Vec<String> {
    let mut all: Vec<String> = verb.iter().map(|s| s.to_string()).collect();
    for v in [
        format!("endpoint={endpoint}"),
        format!("prefix={prefix}"),
        format!("value={value}"),
    ] {
        all.push("-var".into());
        all.push(v);
    }
    all
}

fn apply(endpoint: &str, prefix: &str, value: &str) -> Vec<String> {
    tf_args(
        &["apply", "-auto-approve", "-input=false"],
        endpoint,
        prefix,
        value,
    )
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The parameter's value in moto, read with SSM's own GetParameter (None: no such parameter).
fn cloud_value(rt: &tokio::runtime::Runtime, name: &str) -> Option<String> {
    let url = format!("http://{}/", common::s3_authority());
    let body = serde_json::json!({ "Name": name }).to_string();
    rt.block_on(async move {
        let answer = reqwest::Client::new()
            .post(url)
            .header("X-Amz-Target", "AmazonSSM.GetParameter")
            .header("Content-Type", "application/x-amz-json-1.1")
            .header(
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=testing/20261202/us-east-1/ssm/aws4_request, SignedHeaders=host, Signature=0",
            )
            .body(body)
            .send()
            .await
            .unwrap();
        let status = answer.status();
        let v: serde_json::Value = answer.json().await.unwrap();
        if !status.is_success() {
            assert_eq!(
                v["__type"].as_str().map(|t| t.ends_with("ParameterNotFound")),
                Some(true),
                "moto's GetParameter: {status} {v}"
            );
            return None;
        }
        v["Parameter"]["Value"].as_str().map(str::to_string)
    })
}

/// The record of the parameter, as `records show` prints it.
fn record(root: &Root) -> serde_json::Value {
    root.record_at(ADDRESS).expect("the parameter has a record")
}

fn recorded_value(root: &Root) -> String {
    record(root)["instance"]["attributes"]["insecure_value"]
        .as_str()
        .unwrap()
        .to_string()
}

fn recorded_run(root: &Root) -> String {
    record(root)["writer"]["run_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A call that changes the cloud (anything but SSM's reads).
fn changes_cloud(c: &Call) -> bool {
    let action = c
        .target
        .as_deref()
        .and_then(|t| t.strip_prefix("AmazonSSM."))
        .unwrap_or("?");
    !["Get", "Describe", "List"]
        .iter()
        .any(|read| action.starts_with(read))
}

/// A run started in the background whose stderr is read as it comes, so the test can see when it says something.
struct Watched {
    child: Child,
    err: Arc<Mutex<Vec<u8>>>,
    reader: JoinHandle<()>,
}

impl Watched {
    fn start(root: &Root, opts: &[&str], args: &[String]) -> Watched {
        let mut child = root
            .run_cmd_with(opts, &strs(args))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let err = Arc::new(Mutex::new(Vec::new()));
        let e = err.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                e.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Watched { child, err, reader }
    }

    fn stderr(&self) -> String {
        text(&self.err.lock().unwrap())
    }

    /// Wait until `until` holds (of the run and its stderr so far); a loud failure when the run ends first.
    fn wait_until(&mut self, what: &str, until: impl Fn(&Watched) -> bool) -> Instant {
        let started = Instant::now();
        while !until(self) {
            assert!(
                self.child.try_wait().unwrap().is_none(),
                "the run ended before {what}:\n{}",
                self.stderr()
            );
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "no {what} in 300 s:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Instant::now()
    }

    /// The run to its end: its output, with the stderr read so far.
    fn finish(self) -> Output {
        let mut out = wait(self.child, Duration::from_secs(300));
        self.reader.join().unwrap();
        out.stderr = self.err.lock().unwrap().clone();
        out
    }
}

/// Start run A of `value` through a fresh proxy holding its PutParameter, and wait until that call is held:
/// A has claimed the parameter and its provider call is in flight.
fn held_run(
    rt: &tokio::runtime::Runtime,
    root: &Root,
    opts: &[&str],
    prefix: &str,
    value: &str,
) -> (Watched, Proxy) {
    let gated = rt.block_on(latency_proxy::start_gated(common::s3_authority(), &[PUT]));
    let mut a = Watched::start(root, opts, &apply(&gated.endpoint, prefix, value));
    a.wait_until("its PutParameter", |_| gated.arrived(PUT) == 1);
    (a, gated)
}

#[test]
fn a_second_apply_of_one_aws_parameter_is_refused_by_name_and_calls_nothing_while_the_first_holds_it()
 {
    let _turn = turn();
    let rt = common::runtime();
    let prefix = common::unique_bucket("door-race");
    let name = format!("/{prefix}/p0");
    let root = aws_root("door-race", &Records::Local);
    let counted = rt.block_on(latency_proxy::start(common::s3_authority(), Duration::ZERO));
    for round in 0..rounds() {
        let (a_value, b_value) = (format!("a{round}"), format!("b{round}"));
        let (a, gated) = held_run(&rt, &root, &[], &prefix, &a_value);
        // B, while A's PutParameter is held: refused by name, with no call that changes the cloud.
        let b = root.run(&strs(&apply(&counted.endpoint, &prefix, &b_value)));
        let err = text(&b.stderr);
        assert_eq!(b.status.code(), Some(5), "round {round}: {err}");
        assert!(
            err.contains("InFlightChangeError")
                && err.contains(&format!("{ADDRESS}: held by run"))
                && err.contains("Nothing was applied and no provider was called"),
            "round {round}: {err}"
        );
        let b_calls = counted.take();
        let writes: Vec<&Call> = b_calls.iter().filter(|c| changes_cloud(c)).collect();
        assert!(
            writes.is_empty(),
            "round {round}: the refused run changed the cloud: {writes:?}"
        );
        assert_eq!(
            gated.arrived(PUT),
            1,
            "round {round}: A's call is still held"
        );
        // A goes on and lands alone.
        gated.open();
        let a = a.finish();
        let err_a = text(&a.stderr);
        assert!(a.status.success(), "round {round}: {err_a}");
        let a_run = recorded_run(&root);
        assert!(
            err.contains(&a_run),
            "round {round}: B's refusal names A's run {a_run}: {err}"
        );
        assert_eq!(cloud_value(&rt, &name).as_deref(), Some(a_value.as_str()));
        assert_eq!(recorded_value(&root), a_value);
        // B's re-plan shows the value that landed.
        let plan = root.run(&strs(&tf_args(
            &["plan", "-input=false"],
            &counted.endpoint,
            &prefix,
            &b_value,
        )));
        let said = text(&plan.stdout);
        assert!(plan.status.success(), "{}", text(&plan.stderr));
        assert!(
            said.lines()
                .any(|l| l.trim_start().starts_with("~ insecure_value")
                    && l.contains(&format!("\"{a_value}\" -> \"{b_value}\""))),
            "round {round}: the re-plan does not start from the value that landed:\n{said}"
        );
        counted.take();
    }
}

#[test]
fn a_waiting_apply_of_one_aws_parameter_calls_nothing_while_the_first_holds_it_then_applies_its_value()
 {
    let _turn = turn();
    let rt = common::runtime();
    let (_store, bucket) = rt.block_on(common::s3_store("door-wait"));
    let records = Records::S3 {
        bucket,
        endpoint: common::s3_endpoint(),
    };
    let prefix = common::unique_bucket("door-wait");
    let name = format!("/{prefix}/p0");
    let root = aws_root("door-wait", &records);
    let counted = rt.block_on(latency_proxy::start(common::s3_authority(), Duration::ZERO));
    let mut runs_in_order = Vec::new();
    for round in 0..rounds() {
        let (a_value, b_value) = (format!("a{round}"), format!("b{round}"));
        let (a, gated) = held_run(&rt, &root, &[], &prefix, &a_value);
        let mut b = Watched::start(
            &root,
            &["--wait=4m"],
            &apply(&counted.endpoint, &prefix, &b_value),
        );
        let waiting = b.wait_until("its wait for A", |w| w.stderr().contains("waiting up to"));
        // B waits while A's call is held; then A goes on.
        std::thread::sleep(Duration::from_secs(2));
        gated.open();
        let a = a.finish();
        let b = b.finish();
        let (err_a, err_b) = (text(&a.stderr), text(&b.stderr));
        assert!(a.status.success(), "round {round}: {err_a}");
        assert!(b.status.success(), "round {round}: {err_b}");
        let a_last = gated.take().iter().map(|c| c.end).max().expect("A's calls");
        let b_calls = counted.take();
        // From its wait until A's last cloud call was answered, B made no call at all.
        let meanwhile: Vec<&Call> = b_calls
            .iter()
            .filter(|c| c.start >= waiting && c.start <= a_last)
            .collect();
        assert!(
            meanwhile.is_empty(),
            "round {round}: B called the cloud while A held the claim: {meanwhile:?}"
        );
        // B changed the cloud once, after A's calls: its own PutParameter.
        let writes: Vec<&Call> = b_calls.iter().filter(|c| changes_cloud(c)).collect();
        assert_eq!(
            writes.iter().map(|c| c.target.clone()).collect::<Vec<_>>(),
            vec![Some(PUT.to_string())],
            "round {round}"
        );
        assert!(writes[0].start > a_last, "round {round}: {writes:?}");
        // B planned again from what A landed, and applied its own value.
        let out_b = text(&b.stdout);
        let last = out_b
            .lines()
            .rfind(|l| l.trim_start().starts_with("~ insecure_value"))
            .unwrap_or_else(|| panic!("round {round}: no update in B's plans:\n{out_b}"));
        assert!(
            last.contains(&format!("\"{a_value}\" -> \"{b_value}\"")),
            "round {round}: B's last plan {last:?} was not made after A landed"
        );
        assert_eq!(cloud_value(&rt, &name).as_deref(), Some(b_value.as_str()));
        assert_eq!(recorded_value(&root), b_value);
        let a_run = err_b
            .lines()
            .find_map(|l| {
                l.split_once("waiting up to ")?
                    .1
                    .split_once(" for run ")?
                    .1
                    .split_once(' ')
            })
            .map(|(run, _)| run.to_string())
            .unwrap_or_else(|| panic!("round {round}: no holder in {err_b}"));
        runs_in_order.push(a_run);
        runs_in_order.push(recorded_run(&root));
    }
    // The record's history: every run's write, newest first, in the order they landed.
    let history = root.cli(&["records", "history", ADDRESS]).output().unwrap();
    let said = text(&history.stdout);
    assert!(history.status.success(), "{}", text(&history.stderr));
    let writers: Vec<&String> = said
        .lines()
        .filter_map(|l| runs_in_order.iter().find(|r| l.contains(r.as_str())))
        .collect();
    let newest_first: Vec<&String> = runs_in_order.iter().rev().collect();
    assert_eq!(writers, newest_first, "{said}");
}

#[test]
fn a_waiting_apply_takes_over_a_killed_runs_aws_parameter_and_lands_alone() {
    let _turn = turn();
    let rt = common::runtime();
    let prefix = common::unique_bucket("door-takeover");
    let name = format!("/{prefix}/p0");
    let root = aws_root("door-takeover", &Records::Local);
    let counted = rt.block_on(latency_proxy::start(common::s3_authority(), Duration::ZERO));
    root.ok(&strs(&apply(&counted.endpoint, &prefix, "v0")));
    counted.take();
    // A updates the parameter, and holds it with its PutParameter in flight; B waits for it.
    // A beats every 2 s, so its claim is taken over 6 s after the kill rather than 30.
    let (a, gated) = held_run(&rt, &root, &["--heartbeat=2s"], &prefix, "dead");
    let mut b = Watched::start(
        &root,
        &["--wait=90s"],
        &apply(&counted.endpoint, &prefix, "next"),
    );
    // The whole line, which names A's run.
    b.wait_until("its wait for A", |w| {
        w.stderr()
            .split_once("waiting up to")
            .is_some_and(|(_, rest)| rest.contains('\n'))
    });
    let a_run = b
        .stderr()
        .lines()
        .find_map(|l| {
            l.split_once(" for run ")?
                .1
                .split_once(' ')
                .map(|(r, _)| r.to_string())
        })
        .unwrap_or_else(|| panic!("no holder in {}", b.stderr()));
    // SIGKILL of A's run alone, mid-apply; the request it had sent reaches the cloud.
    procs::sigkill(a.child.id());
    let killed = Instant::now();
    gated.open();
    let a = a.finish();
    assert!(!a.status.success(), "A was killed: {}", text(&a.stderr));
    let b = b.finish();
    let err_b = text(&b.stderr);
    assert!(b.status.success(), "{err_b}");
    assert!(
        err_b.contains(&format!("took over 1 claim(s) of run {a_run}")) && err_b.contains(ADDRESS),
        "{err_b}"
    );
    // Nothing of A reached the cloud after the kill; B changed it once, after the kill.
    let late: Vec<latency_proxy::Arrival> = gated
        .arrivals()
        .into_iter()
        .filter(|c| c.at > killed + Duration::from_millis(500))
        .collect();
    assert!(late.is_empty(), "A's requests after the kill: {late:?}");
    let writes: Vec<Call> = counted.take().into_iter().filter(changes_cloud).collect();
    assert_eq!(
        writes.iter().map(|c| c.target.clone()).collect::<Vec<_>>(),
        vec![Some(PUT.to_string())]
    );
    assert!(writes[0].start > killed);
    // Cloud equals record: B's value, written by B.
    assert_eq!(cloud_value(&rt, &name).as_deref(), Some("next"));
    assert_eq!(recorded_value(&root), "next");
    assert_ne!(recorded_run(&root), a_run);
}
