//! `choudoufu-live run` claims a plan's changes before terraform applies them, with the real
//! terraform, on the local store and on S3 (moto). The claims fixture's `local-exec`
//! provisioners are "the cloud": each call is noted in a calls file, so provider calls are counted.

use testkit as common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use choudoufu_live::config::LiveConfig;
use choudoufu_live::engine::claims;
use choudoufu_live::engine::layout::Layout;
use common::Kind;
use common::tf::{
    Call, Records, Root, apply_args, calls, kill_group, strs, text, turn, turn_alone, wait,
    wait_for_call,
};

async fn records(kind: Kind) -> Records {
    match kind {
        Kind::Local => Records::Local,
        Kind::S3 => {
            let (_store, bucket) = common::s3_store("claims").await;
            Records::S3 {
                bucket,
                endpoint: common::s3_endpoint(),
            }
        }
        other => panic!("a terraform root keeps its records on local or s3, not {other:?}"),
    }
}

/// Run `f` to the end on a runtime of its own (the terraform turn is a std mutex, never held across an await).
fn block<T: Send + 'static>(f: impl std::future::Future<Output = T> + Send + 'static) -> T {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    })
    .join()
    .unwrap()
}

/// The estate's claims (marks, by address and run) and how many run records are left in the store.
fn claims_left(root: &Root) -> (Vec<(String, String)>, usize) {
    let dir = root.path().to_path_buf();
    block(async move {
        let config = LiveConfig::load(&dir).unwrap();
        let store = choudoufu_live::store::open(&config.store, &dir).await;
        let layout = Layout::new(config.estate.clone());
        let marks = claims::read_marks(&store, &layout)
            .await
            .unwrap()
            .into_iter()
            .map(|(m, _)| (m.address, m.run_id))
            .collect();
        let runs =
            choudoufu_live::store::list_all(store.as_ref(), &format!("{}runs/", layout.prefix()))
                .await
                .unwrap()
                .len();
        (marks, runs)
    })
}

/// The run holding the claim on `address` now, read from the store.
fn holder_of(root: &Root, address: &str) -> Option<String> {
    claims_left(root)
        .0
        .into_iter()
        .find(|(a, _)| a == address)
        .map(|(_, run)| run)
}

fn calls_of(file: &Path, name: &str) -> Vec<Call> {
    calls(file).into_iter().filter(|c| c.name == name).collect()
}

/// Three applies replacing `one` at once: one provider call; the two others are refused by name before theirs.
async fn three_applies_make_one_provider_call(kind: Kind) {
    let root = Root::new("claims", "three", &records(kind).await);
    let _turn = turn();
    root.init_and_apply();
    let file = root.path().join("calls");
    let cf = file.display().to_string();
    let values = ["red", "green", "blue"];
    let children: Vec<_> = values
        .iter()
        .map(|v| {
            root.spawn(&strs(&apply_args(&[
                ("one", v),
                ("sleep_seconds", "5"),
                ("calls_file", &cf),
            ])))
        })
        .collect();
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| wait(c, Duration::from_secs(180)))
        .collect();
    let codes: Vec<Option<i32>> = outs.iter().map(|o| o.status.code()).collect();
    let all: Vec<String> = outs.iter().map(|o| text(&o.stderr)).collect();
    let winners: Vec<usize> = (0..3).filter(|i| codes[*i] == Some(0)).collect();
    assert_eq!(
        winners.len(),
        1,
        "exactly one apply lands: {codes:?}\n{}",
        all.join("\n---\n")
    );
    let made = calls_of(&file, "one");
    assert_eq!(
        made.len(),
        1,
        "exactly one provider call: {made:?}\n{}",
        all.join("\n---\n")
    );
    let winner = winners[0];
    assert_eq!(made[0].value, values[winner]);
    assert_eq!(root.stored_input("one").as_deref(), Some(values[winner]));
    let winner_run = root.record("one").unwrap()["writer"]["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    for (i, out) in outs.iter().enumerate().filter(|(i, _)| *i != winner) {
        assert_eq!(out.status.code(), Some(5), "{}", all[i]);
        let err = &all[i];
        assert!(
            err.contains("InFlightChangeError")
                && err.contains("terraform_data.one: held by run")
                && err.contains(&winner_run)
                && err.contains("Nothing was applied and no provider was called"),
            "{err}"
        );
        assert!(!text(&out.stdout).contains("Apply complete"), "{err}");
    }
    assert_eq!(
        claims_left(&root),
        (vec![], 0),
        "every claim and run record is gone"
    );
}

/// The same three with `--wait=2m`: all land, one after the other, each planned after the previous one landed.
async fn three_waiting_applies_take_turns(kind: Kind) {
    let root = Root::new("claims", "turns", &records(kind).await);
    let _turn = turn();
    root.init_and_apply();
    let file = root.path().join("calls");
    let cf = file.display().to_string();
    let values = ["red", "green", "blue"];
    let children: Vec<_> = values
        .iter()
        .map(|v| {
            root.spawn_with(
                &["--wait=2m"],
                &strs(&apply_args(&[
                    ("one", v),
                    ("sleep_seconds", "2"),
                    ("calls_file", &cf),
                ])),
            )
        })
        .collect();
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| wait(c, Duration::from_secs(240)))
        .collect();
    for o in &outs {
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let made = calls_of(&file, "one");
    assert_eq!(made.len(), 3, "{made:?}");
    for pair in made.windows(2) {
        assert!(
            pair[0].end.unwrap() < pair[1].start,
            "provider calls overlapped: {made:?}"
        );
    }
    assert!(
        outs.iter()
            .any(|o| text(&o.stderr).contains("waiting up to")),
        "someone waited"
    );
    // Each run's last plan (the one it applied) read the value the previous call landed.
    for (i, call) in made.iter().enumerate() {
        let run = values.iter().position(|v| *v == call.value).unwrap();
        let stdout = text(&outs[run].stdout);
        let last = stdout
            .lines()
            .rfind(|l| l.trim_start().starts_with("~ input"))
            .unwrap_or_else(|| panic!("no plan in {stdout}"));
        let before = if i == 0 { "v1" } else { &made[i - 1].value };
        assert!(
            last.contains(&format!("\"{before}\" -> \"{}\"", call.value)),
            "run {} planned {last:?}, not after {before} landed",
            call.value
        );
    }
    assert_eq!(
        root.stored_input("one").as_deref(),
        Some(made[2].value.as_str())
    );
    assert_eq!(claims_left(&root), (vec![], 0));
}

/// A change of y while another run replaces x, which y depends on: refused before y's provider call.
async fn a_change_whose_dependency_is_in_flight_is_refused(kind: Kind) {
    let root = Root::new("claims", "deps", &records(kind).await);
    let _turn = turn_alone();
    root.init_and_apply();
    let file = root.path().join("calls");
    let cf = file.display().to_string();
    let x = root.spawn(&strs(&apply_args(&[
        ("x", "x2"),
        ("sleep_seconds", "8"),
        ("calls_file", &cf),
    ])));
    wait_for_call(&file, "x", Duration::from_secs(60));
    let x_run =
        holder_of(&root, "terraform_data.x").expect("x is claimed while its provisioner runs");
    let t = Instant::now();
    let y = root.run(&strs(&apply_args(&[("y", "y2"), ("calls_file", &cf)])));
    let err = text(&y.stderr);
    assert_eq!(y.status.code(), Some(5), "{err}");
    assert!(
        err.contains("InFlightDependencyError")
            && err.contains("terraform_data.y depends on terraform_data.x, held by run")
            && err.contains(&x_run)
            && err.contains("no provider was called"),
        "{err}"
    );
    assert!(
        calls_of(&file, "y").is_empty(),
        "y's provisioner never ran: {:?}",
        calls(&file)
    );
    assert!(t.elapsed() < Duration::from_secs(8), "refused at once");
    let x = wait(x, Duration::from_secs(120));
    assert!(x.status.success(), "{}", text(&x.stderr));
    // Once x landed, y goes.
    root.ok(&strs(&apply_args(&[
        ("x", "x2"),
        ("y", "y2"),
        ("calls_file", &cf),
    ])));
    assert_eq!(calls_of(&file, "y").len(), 1);
    assert_eq!(root.stored_input("y").as_deref(), Some("y2"));
}

/// A killed apply's claim stays in the way while its heartbeat is fresh; with `--wait` the next apply takes it over.
async fn a_killed_runs_claim_is_taken_over(kind: Kind) {
    let root = Root::new("claims", "takeover", &records(kind).await);
    let _turn = turn_alone();
    root.init_and_apply();
    let file = root.path().join("calls");
    let cf = file.display().to_string();
    let dead = root.spawn(&strs(&apply_args(&[
        ("one", "dead"),
        ("sleep_seconds", "60"),
        ("calls_file", &cf),
    ])));
    wait_for_call(&file, "one", Duration::from_secs(60));
    let dead_run = holder_of(&root, "terraform_data.one").unwrap();
    // Its first heartbeat writes its run record: what the run taking over must remove.
    let beating = Instant::now();
    while claims_left(&root).1 == 0 {
        assert!(
            beating.elapsed() < Duration::from_secs(30),
            "the run never wrote its run record"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    kill_group(dead.id());
    wait(dead, Duration::from_secs(10));
    let killed_at = Instant::now();
    // `records claims` shows the dead run's claim, still standing.
    let listed = root.cli(&["records", "claims"]).output().unwrap();
    let listed = text(&listed.stdout);
    assert!(
        listed.lines().any(|l| l.starts_with("terraform_data.one")
            && l.contains(&dead_run)
            && l.contains("live (gone once its heartbeat is 15s old)")),
        "{listed}"
    );
    // A plan claims nothing and never waits.
    let plan = root.run(&["plan", "-input=false", "-var", "one=next"]);
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    let refused = root.run(&strs(&apply_args(&[("one", "next"), ("calls_file", &cf)])));
    let err = text(&refused.stderr);
    assert_eq!(
        refused.status.code(),
        Some(5),
        "refused while the dead run's heartbeat is fresh ({:?} after the kill): {err}",
        killed_at.elapsed()
    );
    assert!(
        err.contains("InFlightChangeError") && err.contains(&dead_run),
        "{err}"
    );
    let next = root.run_with(
        &["--wait=40s"],
        &strs(&apply_args(&[("one", "next"), ("calls_file", &cf)])),
    );
    let err = text(&next.stderr);
    assert!(next.status.success(), "{err}");
    assert!(
        err.contains(&format!("took over 1 claim(s) of run {dead_run}"))
            && err.contains("terraform_data.one (replace since")
            && err.contains("may have changed these objects in the cloud without recording it"),
        "{err}"
    );
    let made = calls_of(&file, "one");
    assert_eq!(made.len(), 2, "{made:?}");
    assert_eq!(made[1].value, "next");
    assert_eq!(root.stored_input("one").as_deref(), Some("next"));
    let (marks, runs) = claims_left(&root);
    assert!(marks.is_empty(), "{marks:?}");
    assert_eq!(
        runs, 0,
        "the dead run's runs/<id> record was removed by the run that took over"
    );
}

/// A plain apply of b writes back a's refreshed record while another run replaces a: no conflict for either.
async fn refreshed_records_outside_the_plan_are_skipped(kind: Kind) {
    let root = Root::new("claims", "refresh", &records(kind).await);
    let _turn = turn();
    root.init_and_apply();
    // a's record as an older writer left it (no sensitive_attributes): every apply writes it back.
    let rec = root
        .path()
        .join(".live-records/tofu-records/refresh/r/terraform_data.a");
    let mut a: serde_json::Value = serde_json::from_slice(&std::fs::read(&rec).unwrap()).unwrap();
    a["instance"]
        .as_object_mut()
        .unwrap()
        .remove("sensitive_attributes");
    std::fs::write(&rec, serde_json::to_vec(&a).unwrap()).unwrap();
    let file = root.path().join("calls");
    let cf = file.display().to_string();
    let ra = root.spawn(&strs(&apply_args(&[
        ("a", "a2"),
        ("sleep_seconds", "6"),
        ("calls_file", &cf),
    ])));
    wait_for_call(&file, "a", Duration::from_secs(60));
    let mut b_args = apply_args(&[("b", "b2"), ("calls_file", &cf)]);
    b_args.push("-target=terraform_data.b".into());
    let b = root.run(&strs(&b_args));
    let a = wait(ra, Duration::from_secs(120));
    let (ea, eb) = (text(&a.stderr), text(&b.stderr));
    assert!(b.status.success(), "{eb}");
    assert!(a.status.success(), "{ea}");
    assert!(
        !ea.contains("RecordConflictError") && !eb.contains("RecordConflictError"),
        "{ea}\n{eb}"
    );
    assert!(
        eb.contains("1 skipped: not changed by this run's plan, and another run moved them or is changing them (terraform_data.a)"),
        "{eb}"
    );
    assert_eq!(root.stored_input("a").as_deref(), Some("a2"));
    assert_eq!(root.stored_input("b").as_deref(), Some("b2"));
}

/// Two applies of a and b at once, with an output listing both: both land and the stored output holds both new ids.
async fn a_shared_output_is_reconciled(kind: Kind) {
    let root = Root::new("claims", "outputs", &records(kind).await);
    let _turn = turn();
    root.init_and_apply();
    let id = |name: &str| {
        root.record(name).unwrap()["instance"]["attributes"]["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (a0, b0) = (id("a"), id("b"));
    let file = root.path().join("calls");
    let cf = file.display().to_string();
    let run = |target: &str| {
        let mut args = apply_args(&[("sleep_seconds", "3"), ("calls_file", &cf)]);
        args.push(format!("-replace=terraform_data.{target}"));
        root.spawn(&strs(&args))
    };
    let (ca, cb) = (run("a"), run("b"));
    let (a, b) = (
        wait(ca, Duration::from_secs(180)),
        wait(cb, Duration::from_secs(180)),
    );
    let (ea, eb) = (text(&a.stderr), text(&b.stderr));
    assert!(a.status.success(), "{ea}");
    assert!(b.status.success(), "{eb}");
    assert!(
        !ea.contains("RecordConflictError") && !eb.contains("RecordConflictError"),
        "{ea}\n{eb}"
    );
    assert!(
        ea.contains("reconciled output(s) ab_ids") || eb.contains("reconciled output(s) ab_ids"),
        "the second output write met the first and was reconciled:\n{ea}\n{eb}"
    );
    let (a1, b1) = (id("a"), id("b"));
    assert!(a1 != a0 && b1 != b0, "both were replaced");
    let out = root
        .cli(&["records", "show", "output.ab_ids"])
        .output()
        .unwrap();
    let body: String = text(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect();
    let stored: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        stored["output"]["value"],
        serde_json::json!([a1, b1]),
        "the stored output holds both new ids"
    );
    assert_eq!(calls_of(&file, "a").len() + calls_of(&file, "b").len(), 2);
}

testkit::per_kind!(
    local => Local;
    [
        three_applies_make_one_provider_call,
        three_waiting_applies_take_turns,
        a_killed_runs_claim_is_taken_over,
        refreshed_records_outside_the_plan_are_skipped,
    ]
);
testkit::per_kind!(
    s3 => S3;
    [
        three_applies_make_one_provider_call,
        a_change_whose_dependency_is_in_flight_is_refused,
        a_shared_output_is_reconciled,
    ]
);

/// Every flag of an apply reaches the terraform step that takes it, with its meaning.
#[test]
fn every_flag_reaches_terraform_with_its_meaning() {
    let root = Root::new("claims", "flags", &Records::Local);
    let _turn = turn();
    root.init_and_apply();
    let file = root.path().join("calls");
    let cf = file.display().to_string();
    std::fs::write(root.path().join("a.tfvars"), "a = \"from-file\"\n").unwrap();
    let with = |extra: &[&str]| {
        let mut args = apply_args(&[("calls_file", &cf), ("b", "t2")]);
        args.push("-var-file=a.tfvars".into());
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    // -var-file (and -var) shape the plan.
    let out = root.ok(&strs(&with(&["-target=terraform_data.a"])));
    assert_eq!(root.stored_input("a").as_deref(), Some("from-file"));
    assert!(
        text(&out.stdout).contains("Refreshing state"),
        "{}",
        text(&out.stdout)
    );
    // -target limits the plan: b changed nowhere else.
    assert_eq!(root.stored_input("b").as_deref(), Some("v1"));
    root.ok(&strs(&with(&["-target=terraform_data.b"])));
    assert_eq!(root.stored_input("b").as_deref(), Some("t2"));
    // -replace replaces with the same input.
    let x_id = |root: &Root| root.record("x").unwrap()["instance"]["attributes"]["id"].clone();
    let before = x_id(&root);
    root.ok(&strs(&with(&["-replace=terraform_data.x"])));
    assert_ne!(x_id(&root), before);
    assert_eq!(calls_of(&file, "x").len(), 1);
    // -refresh=false skips the refresh; flags both steps take are accepted by both.
    let out = root.ok(&strs(&with(&[
        "-refresh=false",
        "-parallelism=1",
        "-lock=false",
        "-lock-timeout=1s",
        "-compact-warnings",
        "-var",
        "one=r2",
    ])));
    assert!(
        !text(&out.stdout).contains("Refreshing state"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(root.stored_input("one").as_deref(), Some("r2"));
    // -json: terraform's machine-readable lines, from both steps.
    let out = root.ok(&strs(&with(&["-json", "-var", "one=j2"])));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        lines.iter().any(|l| l["type"] == "change_summary"
            && l["changes"]["operation"] == "apply"
            && l["changes"]["add"] == 1),
        "{lines:?}"
    );
    assert_eq!(root.stored_input("one").as_deref(), Some("j2"));
    // An ephemeral variable set at plan time reaches the apply step.
    let tok_file = root.path().join("tok");
    let tf = tok_file.display().to_string();
    root.ok(&strs(&with(&[
        "-var",
        "one=j2",
        "-var",
        "e=e2",
        "-var",
        "tok=TOKEN-7f3a",
        "-var",
        &format!("tok_file={tf}"),
    ])));
    assert_eq!(std::fs::read_to_string(&tok_file).unwrap(), "TOKEN-7f3a");
    // -destroy (apply -destroy) and destroy.
    root.ok(&[
        "apply",
        "-destroy",
        "-auto-approve",
        "-input=false",
        "-target=terraform_data.b",
    ]);
    assert_eq!(root.stored_input("b"), None);
    assert_eq!(root.stored_input("a").as_deref(), Some("from-file"));
    root.ok(&[
        "destroy",
        "-auto-approve",
        "-input=false",
        "-target=terraform_data.a",
    ]);
    assert_eq!(root.stored_input("a"), None);
    assert_eq!(root.stored_input("one").as_deref(), Some("j2"));
}

/// Feed `input` to an interactive apply; TMPDIR is `tmp`, so the temporary plan's folder can be watched.
fn interactive(
    root: &Root,
    args: &[&str],
    input: Option<&str>,
    tmp: &Path,
) -> std::process::Output {
    use std::io::Write;
    let mut cmd = root.run_cmd(args);
    cmd.env("TMPDIR", tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    let mut child = cmd.spawn().unwrap();
    if let Some(i) = input {
        child.stdin.take().unwrap().write_all(i.as_bytes()).unwrap();
    }
    wait(child, Duration::from_secs(120))
}

/// An apply answered anything but `yes` applies nothing and leaves no claim and no plan file behind.
#[test]
fn an_apply_answered_no_applies_nothing_and_leaves_nothing() {
    let root = Root::new("claims", "approve", &Records::Local);
    let _turn = turn();
    root.init_and_apply();
    let tmp = tempfile::tempdir().unwrap();
    let file = root.path().join("calls");
    let cf = format!("calls_file={}", file.display());
    let args = ["apply", "-var", "one=never", "-var", cf.as_str()];
    let no = interactive(&root, &args, Some("no\n"), tmp.path());
    let said = text(&no.stdout);
    assert_eq!(no.status.code(), Some(1), "{said}{}", text(&no.stderr));
    assert!(
        said.contains("Do you want to perform these actions?")
            && said.contains("Only 'yes' will be accepted to approve.")
            && said.contains("Apply cancelled."),
        "{said}"
    );
    // -input=false does not answer for the user: no input is no approval, as with terraform.
    let mut eof_args = args.to_vec();
    eof_args.push("-input=false");
    let eof = interactive(&root, &eof_args, None, tmp.path());
    assert_eq!(eof.status.code(), Some(1));
    assert!(
        text(&eof.stderr).contains("Error: error asking for approval: EOF"),
        "{}",
        text(&eof.stderr)
    );
    let d = interactive(
        &root,
        &["destroy", "-target=terraform_data.e"],
        Some("y\n"),
        tmp.path(),
    );
    assert_eq!(d.status.code(), Some(1));
    assert!(
        text(&d.stdout).contains("Do you really want to destroy all resources?")
            && text(&d.stdout).contains("Destroy cancelled."),
        "{}",
        text(&d.stdout)
    );
    assert!(calls_of(&file, "one").is_empty(), "nothing was applied");
    assert_eq!(root.stored_input("one").as_deref(), Some("v1"));
    assert!(root.stored_input("e").is_some());
    assert_eq!(claims_left(&root), (vec![], 0), "no claim left");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "no plan file left: {left:?}");
    // `yes` applies.
    let yes = interactive(&root, &args, Some("yes\n"), tmp.path());
    assert!(yes.status.success(), "{}", text(&yes.stderr));
    assert_eq!(root.stored_input("one").as_deref(), Some("never"));
    assert_eq!(calls_of(&file, "one").len(), 1);
    assert!(std::fs::read_dir(tmp.path()).unwrap().next().is_none());
}

/// Ctrl-C at the approval question stops the run with nothing applied and its plan removed; a killed run's plan folder is removed by the next run.
#[test]
fn an_interrupted_apply_leaves_no_plan_behind() {
    use std::io::Read;
    let root = Root::new("claims", "interrupt", &Records::Local);
    let _turn = turn();
    root.init_and_apply();
    let tmp = tempfile::tempdir().unwrap();
    // A folder a killed run left: its pid is no process.
    let dead_pid = (4_000_000..4_100_000)
        .find(|p| !Path::new(&format!("/proc/{p}")).exists())
        .unwrap();
    let left = tmp
        .path()
        .join(format!("choudoufu-live-plan-{dead_pid}-AbC123"));
    std::fs::create_dir(&left).unwrap();
    std::fs::write(left.join("run.tfplan"), "secret plan").unwrap();
    let mut child = root
        .run_cmd(&["apply", "-var", "one=never"])
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kept open: the question gets no answer, only the interrupt.
    let stdin = child.stdin.take();
    let mut stdout = child.stdout.take().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let reader = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let started = Instant::now();
    while !text(&seen.lock().unwrap()).contains("Enter a value:") {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no approval question: {}",
            text(&seen.lock().unwrap())
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!left.exists(), "the killed run's plan folder was removed");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = wait(child, Duration::from_secs(60));
    drop(stdin);
    reader.join().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("error asking for approval: interrupted"),
        "{}",
        text(&out.stderr)
    );
    let files: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(files.is_empty(), "no plan file left: {files:?}");
    assert_eq!(root.stored_input("one").as_deref(), Some("v1"));
    assert_eq!(claims_left(&root), (vec![], 0));
}

/// `--wait=10s` counts from the first refused claim: an approval answered 5 s late still waits the whole 10 s.
#[test]
fn the_wait_counts_from_the_first_refusal() {
    use std::io::{Read, Write};
    let root = Root::new("claims", "waitclock", &Records::Local);
    let _turn = turn();
    root.init_and_apply();
    let file = root.path().join("calls");
    let cf = file.display().to_string();
    let holder = root.spawn(&strs(&apply_args(&[
        ("one", "held"),
        ("sleep_seconds", "60"),
        ("calls_file", &cf),
    ])));
    wait_for_call(&file, "one", Duration::from_secs(60));
    let cf_var = format!("calls_file={cf}");
    let mut child = root
        .run_cmd_with(
            &["--wait=10s"],
            &["apply", "-var", "one=late", "-var", cf_var.as_str()],
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let reader = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let started = Instant::now();
    while !text(&seen.lock().unwrap()).contains("Enter a value:") {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no approval question: {}",
            text(&seen.lock().unwrap())
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The user takes 5 s to answer; the claim is refused only then.
    std::thread::sleep(Duration::from_secs(5));
    stdin.write_all(b"yes\n").unwrap();
    let out = wait(child, Duration::from_secs(120));
    reader.join().unwrap();
    kill_group(holder.id());
    wait(holder, Duration::from_secs(10));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    let left = err
        .lines()
        .find_map(|l| {
            l.split_once("waiting up to ")
                .and_then(|(_, rest)| rest.split_once(" for "))
                .map(|(d, _)| d.to_string())
        })
        .unwrap_or_else(|| panic!("no waiting line: {err}"));
    let left = humantime::parse_duration(&left).unwrap();
    assert!(
        left >= Duration::from_secs(9),
        "the wait counted from the run's start, not the refusal: waiting up to {left:?}\n{err}"
    );
    assert!(err.contains("waited 10s (--wait)"), "{err}");
    assert!(calls_of(&file, "one").iter().all(|c| c.value != "late"));
}
