//! `choudoufu-live run` with the real terraform: two applies on one root, on the local store and on S3 (moto).

use testkit as common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::Kind;
use common::tf::{Records, Root, interval, text, turn, turn_alone, wait};

async fn records(kind: Kind) -> Records {
    match kind {
        Kind::Local => Records::Local,
        Kind::S3 => {
            let (_store, bucket) = common::s3_store("run").await;
            Records::S3 {
                bucket,
                endpoint: common::s3_endpoint(),
            }
        }
        other => panic!("a terraform root keeps its records on local or s3, not {other:?}"),
    }
}

fn apply_args<'a>(target: &'a str, vars: &'a [String]) -> Vec<&'a str> {
    let mut a = vec!["apply", "-auto-approve", "-input=false"];
    if !target.is_empty() {
        a.push(target);
    }
    for v in vars {
        a.push("-var");
        a.push(v);
    }
    a
}

/// A changes db while B changes dns, each apply taking 5 s: both land, at the same time.
async fn disjoint_applies_land_together(kind: Kind) {
    let root = Root::new("demo", "two-at-once", &records(kind).await);
    let _turn = turn_alone();
    root.init_and_apply();
    let trace = root.path().join("trace");
    let tv = format!("trace_file={}", trace.display());
    // One apply alone, for the time one apply takes.
    let vars = vec![
        "db_version=v2".to_string(),
        "sleep_seconds=5".into(),
        tv.clone(),
    ];
    let t = Instant::now();
    root.ok(&apply_args("-target=terraform_data.db", &vars));
    let one = t.elapsed();
    std::fs::remove_file(&trace).unwrap();
    // Two at once.
    let va = vec![
        "db_version=v3".to_string(),
        "sleep_seconds=5".into(),
        tv.clone(),
    ];
    let vb = vec![
        "dns_version=v3".to_string(),
        "sleep_seconds=5".into(),
        tv.clone(),
    ];
    let t = Instant::now();
    let a = root.spawn(&apply_args("-target=terraform_data.db", &va));
    let b = root.spawn(&apply_args("-target=terraform_data.dns", &vb));
    let (a, b) = (
        wait(a, Duration::from_secs(120)),
        wait(b, Duration::from_secs(120)),
    );
    let both = t.elapsed();
    assert!(a.status.success(), "A: {}", text(&a.stderr));
    assert!(b.status.success(), "B: {}", text(&b.stderr));
    // Each wrote only its own record.
    assert!(
        text(&a.stderr).contains("records 1 updated (terraform_data.db), 1 unchanged"),
        "{}",
        text(&a.stderr)
    );
    assert!(
        text(&b.stderr).contains("records 1 updated (terraform_data.dns), 1 unchanged"),
        "{}",
        text(&b.stderr)
    );
    assert_eq!(root.stored_input("db").as_deref(), Some("v3"));
    assert_eq!(root.stored_input("dns").as_deref(), Some("v3"));
    let (ra, rb) = (root.record("db").unwrap(), root.record("dns").unwrap());
    assert_ne!(
        ra["writer"]["run_id"], rb["writer"]["run_id"],
        "two runs wrote the two records"
    );
    // Their applies overlapped in time, and the pair took far less than the sum.
    let (db, dns) = (interval(&trace, "db"), interval(&trace, "dns"));
    assert!(
        db.0 < dns.1 && dns.0 < db.1,
        "the two applies did not overlap: db {db:?}, dns {dns:?}"
    );
    assert!(
        both.as_secs_f64() < 1.5 * one.as_secs_f64(),
        "two applies took {both:?}, one alone {one:?}: they did not run side by side"
    );
}

/// Both change db at once: one lands, the other is refused by name before its provider call and overwrites nothing.
async fn same_resource_one_lands(kind: Kind) {
    let root = Root::new("demo", "same-db", &records(kind).await);
    let _turn = turn();
    root.init_and_apply();
    let trace = root.path().join("trace");
    let tv = format!("trace_file={}", trace.display());
    let va = vec![
        "db_version=from-a".to_string(),
        "sleep_seconds=3".into(),
        tv.clone(),
    ];
    let vb = vec![
        "db_version=from-b".to_string(),
        "sleep_seconds=3".into(),
        tv,
    ];
    let a = root.spawn(&apply_args("-target=terraform_data.db", &va));
    let b = root.spawn(&apply_args("-target=terraform_data.db", &vb));
    let (a, b) = (
        wait(a, Duration::from_secs(120)),
        wait(b, Duration::from_secs(120)),
    );
    let (winner, loser, value) = match (a.status.code(), b.status.code()) {
        (Some(0), Some(5)) => (a, b, "from-a"),
        (Some(5), Some(0)) => (b, a, "from-b"),
        other => panic!(
            "expected one 0 and one 5, got {other:?}\nA: {}\nB: {}",
            text(&a.stderr),
            text(&b.stderr)
        ),
    };
    let err = text(&loser.stderr);
    assert!(
        err.contains("InFlightChangeError") && err.contains("terraform_data.db: held by run"),
        "{err}"
    );
    assert!(
        err.contains("Nothing was applied and no provider was called"),
        "{err}"
    );
    let calls = std::fs::read_to_string(&trace).unwrap();
    assert_eq!(
        calls.matches("db start").count(),
        1,
        "only the winner called the provider: {calls}"
    );
    assert!(text(&winner.stderr).contains("1 updated (terraform_data.db)"));
    assert_eq!(
        root.stored_input("db").as_deref(),
        Some(value),
        "the store holds the winner's value"
    );
    // The loser's re-plan shows the value that landed.
    let plan = root.ok(&[
        "plan",
        "-input=false",
        "-target=terraform_data.db",
        "-var",
        &format!("db_version={value}"),
    ]);
    assert!(
        text(&plan.stdout).contains("No changes"),
        "{}",
        text(&plan.stdout)
    );
}

/// A destroy of db while an apply of db is applying: the destroy is refused by name before it destroys anything.
///
/// The destroy starts once the apply is applying (its provisioner has started), so the
/// apply holds db's claim.
async fn apply_racing_destroy(kind: Kind) {
    let root = Root::new("demo", "apply-destroy", &records(kind).await);
    let _turn = turn();
    root.init_and_apply();
    let trace = root.path().join("trace");
    let va = vec![
        "db_version=v7".to_string(),
        "sleep_seconds=3".into(),
        format!("trace_file={}", trace.display()),
    ];
    let a = root.spawn(&apply_args("-target=terraform_data.db", &va));
    let started = Instant::now();
    while !std::fs::read_to_string(&trace)
        .unwrap_or_default()
        .contains("db start")
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the apply never started applying"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let d = root.spawn(&[
        "destroy",
        "-auto-approve",
        "-input=false",
        "-target=terraform_data.db",
    ]);
    let (a, d) = (
        wait(a, Duration::from_secs(120)),
        wait(d, Duration::from_secs(120)),
    );
    assert_eq!(a.status.code(), Some(0), "{}", text(&a.stderr));
    assert_eq!(d.status.code(), Some(5), "{}", text(&d.stderr));
    assert!(
        text(&d.stderr).contains("InFlightChangeError")
            && text(&d.stderr).contains("terraform_data.db: held by run")
            && !text(&d.stdout).contains("Destruction complete"),
        "{}",
        text(&d.stderr)
    );
    assert_eq!(
        root.stored_input("db").as_deref(),
        Some("v7"),
        "the apply landed"
    );
    assert_eq!(
        root.stored_input("dns").as_deref(),
        Some("v1"),
        "dns untouched"
    );
}

/// An apply killed with SIGKILL (wrapper and terraform) mid-apply: nothing held, the next run goes at once.
async fn killed_apply_leaves_nothing_held(kind: Kind) {
    let root = Root::new("demo", "killed", &records(kind).await);
    let _turn = turn();
    root.init_and_apply();
    let trace = root.path().join("trace");
    let vars = vec![
        "db_version=v9".to_string(),
        "dns_version=v9".into(),
        "sleep_seconds=30".into(),
        format!("trace_file={}", trace.display()),
    ];
    let child = root.spawn(&apply_args("", &vars));
    let started = Instant::now();
    while !std::fs::read_to_string(&trace)
        .unwrap_or_default()
        .contains("start")
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the apply never started a resource"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Kill the whole group: the wrapper, terraform and its provisioners.
    common::tf::kill_group(child.id());
    let out = wait(child, Duration::from_secs(10));
    assert!(!out.status.success());
    // No unlock: the next run starts at once, and its plan matches what the store recorded.
    let plan_file = root.path().join("after-kill.plan");
    let t = Instant::now();
    let plan = root.run(&[
        "plan",
        "-input=false",
        "-detailed-exitcode",
        &format!("-out={}", plan_file.display()),
        "-var",
        "db_version=v9",
        "-var",
        "dns_version=v9",
    ]);
    assert!(t.elapsed() < Duration::from_secs(30));
    assert_eq!(
        plan.status.code(),
        Some(2),
        "changes remain: {}",
        text(&plan.stderr)
    );
    let show = Command::new(&root.tf)
        .args(["show", "-json"])
        .arg(&plan_file)
        .current_dir(root.path())
        .env("CHECKPOINT_DISABLE", "1")
        .env("TF_CLI_CONFIG_FILE", &root.cli_config)
        .env("TF_HTTP_ADDRESS", "http://127.0.0.1:9/unused")
        .output()
        .unwrap();
    assert!(show.status.success(), "{}", text(&show.stderr));
    let json: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    for name in ["db", "dns"] {
        let change = json["resource_changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["address"] == format!("terraform_data.{name}"))
            .unwrap_or_else(|| panic!("no change for {name}"));
        let actions: Vec<String> = change["change"]["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        let recorded = root.stored_input(name);
        match recorded.as_deref() {
            None => assert_eq!(
                actions,
                vec!["create"],
                "{name} has no record, so the plan creates it"
            ),
            Some("v9") => panic!("{name}: the killed apply cannot have finished"),
            Some(_) => assert!(
                actions.contains(&"delete".to_string()) && actions.contains(&"create".to_string()),
                "{name} recorded at its old value, so the plan replaces it: {actions:?}"
            ),
        }
    }
    let unlock = root.run(&["force-unlock", "-force", "0000"]);
    assert_eq!(unlock.status.code(), Some(0));
    assert!(
        text(&unlock.stdout)
            .contains("no lock: choudoufu-live holds no locks; every record write is conditional")
    );
    // And it finishes what the killed run left, taking over its claims once its heartbeat stops.
    let finish = root.run_with(
        &["--wait=1m"],
        &apply_args("", &["db_version=v9".to_string(), "dns_version=v9".into()]),
    );
    assert!(finish.status.success(), "{}", text(&finish.stderr));
    assert_eq!(root.stored_input("db").as_deref(), Some("v9"));
}

testkit::per_kind!(
    local => Local, s3 => S3;
    [
        disjoint_applies_land_together,
        same_resource_one_lands,
        apply_racing_destroy,
        killed_apply_leaves_nothing_held,
    ]
);

#[test]
fn force_unlock_says_there_is_no_lock_and_runs_nothing() {
    let root = Root::new("demo", "unlock", &Records::Local);
    let out = root.run(&["force-unlock", "-force", "6d3bd1f5-0000"]);
    assert_eq!(out.status.code(), Some(0));
    let said = text(&out.stdout);
    assert!(
        said.contains("no lock: choudoufu-live holds no locks; every record write is conditional"),
        "{said}"
    );
    assert!(!said.contains("successfully unlocked"), "{said}");
    // What a SIGKILLed run leaves, for how long, and how to see it.
    assert!(
        said.contains("SIGKILL")
            && said.contains(
                "up to three heartbeats after its last one (15s with the default --heartbeat=5s)"
            )
            && said.contains("`choudoufu-live records claims` shows who holds what now"),
        "{said}"
    );
    assert!(
        !root.path().join(".terraform").exists(),
        "terraform was not run"
    );
    assert!(
        !root.path().join(".live-records").exists(),
        "nothing was written"
    );
}

/// A planned apply's `show -json` starts beside the plan and reads the plan once it is written; when the plan fails, it is stopped with the run.
#[test]
fn the_show_started_beside_the_plan_reads_it_or_ends_with_the_run() {
    let root = Root::new("demo", "show-ahead", &Records::Local);
    let _turn = turn();
    root.init_and_apply();
    // The plan folder (and the FIFO the show waits on) is made under this run's own TMPDIR.
    let tmp = tempfile::tempdir().unwrap();
    let tmp_path = tmp.path().to_string_lossy().to_string();
    let run = |args: &[&str]| {
        root.run_cmd(args)
            .env("TMPDIR", tmp.path())
            .env("CHOUDOUFU_LOG", "choudoufu_live::run=debug")
            .output()
            .unwrap()
    };
    let out = run(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-var",
        "db_version=v2",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("show -json, started ahead, read the plan"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(root.stored_input("db").as_deref(), Some("v2"));
    // A plan that fails: the show waiting for it does not outlive the run.
    let out = run(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-var",
        "undeclared=1",
    ]);
    assert!(!out.status.success());
    assert!(
        !text(&out.stderr).contains("show -json, started ahead, read the plan"),
        "{}",
        text(&out.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left = common::procs::with_env(&tmp_path);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        left = common::procs::with_env(&tmp_path);
    }
    assert!(left.is_empty(), "processes left waiting: {left:?}");
}

#[test]
fn every_state_command_works_through_run() {
    let root = Root::new("demo", "commands", &Records::Local);
    std::fs::write(
        root.path().join("outputs.tf"),
        "output \"db_input\" {\n  value = terraform_data.db.output\n}\n",
    )
    .unwrap();
    let _turn = turn();
    root.init_and_apply();
    let list = root.ok(&["state", "list"]);
    assert_eq!(
        text(&list.stdout).lines().collect::<Vec<_>>(),
        vec!["terraform_data.db", "terraform_data.dns"]
    );
    let show = root.ok(&["state", "show", "terraform_data.db"]);
    assert!(
        text(&show.stdout).contains("\"v1\""),
        "{}",
        text(&show.stdout)
    );
    let output = root.ok(&["output", "-raw", "db_input"]);
    assert_eq!(text(&output.stdout), "v1");
    root.ok(&["refresh", "-input=false"]);
    root.ok(&["apply", "-refresh-only", "-auto-approve", "-input=false"]);
    // state rm then import brings the same object back.
    let id = root.record("dns").unwrap()["instance"]["attributes"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    root.ok(&["state", "rm", "terraform_data.dns"]);
    assert_eq!(root.stored_input("dns"), None);
    root.ok(&["import", "-input=false", "terraform_data.dns", &id]);
    assert_eq!(
        root.record("dns").unwrap()["instance"]["attributes"]["id"].as_str(),
        Some(id.as_str())
    );
    let plan = root.run(&["plan", "-input=false", "-detailed-exitcode"]);
    // The imported object has no input yet, so the plan updates it; nothing else changes.
    assert!(
        matches!(plan.status.code(), Some(0) | Some(2)),
        "{}",
        text(&plan.stderr)
    );
    root.ok(&["destroy", "-auto-approve", "-input=false"]);
    let ls = root.cli(&["records", "ls"]).output().unwrap();
    assert!(
        text(&ls.stdout).contains("(0 records)"),
        "{}",
        text(&ls.stdout)
    );
}

#[test]
fn a_root_without_the_http_backend_or_live_block_is_told_what_to_add() {
    let root = Root::new("demo", "missing", &Records::Local);
    std::fs::write(
        root.path().join("main.tf"),
        "resource \"terraform_data\" \"a\" {}\n",
    )
    .unwrap();
    let out = root.run(&["plan"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("backend \"http\" {}"),
        "{}",
        text(&out.stderr)
    );
    std::fs::remove_file(root.path().join("live.hcl")).unwrap();
    let out = root.run(&["plan"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no live block") && text(&out.stderr).contains("live.hcl"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        !root.path().join(".terraform").exists(),
        "terraform was not run"
    );
}

#[test]
fn tofu_runs_two_applies_at_once_when_it_is_installed() {
    if Command::new("tofu").arg("version").output().is_err() {
        eprintln!(
            "SKIPPED: `tofu` is not on PATH on this machine, so the two-applies case did not run with tofu (it runs with terraform above)"
        );
        return;
    }
    let root = Root::with_binary("demo", "tofu", &Records::Local, "tofu");
    let _turn = turn();
    root.init_and_apply();
    let a = root.spawn(&apply_args(
        "-target=terraform_data.db",
        &["db_version=t2".to_string(), "sleep_seconds=3".into()],
    ));
    let b = root.spawn(&apply_args(
        "-target=terraform_data.dns",
        &["dns_version=t2".to_string(), "sleep_seconds=3".into()],
    ));
    let (a, b) = (
        wait(a, Duration::from_secs(120)),
        wait(b, Duration::from_secs(120)),
    );
    assert!(
        a.status.success() && b.status.success(),
        "{}\n{}",
        text(&a.stderr),
        text(&b.stderr)
    );
    assert_eq!(root.stored_input("db").as_deref(), Some("t2"));
    assert_eq!(root.stored_input("dns").as_deref(), Some("t2"));
}

/// Sensitive values never reach our logs: a run at trace level, and a conflict, print no secret.
#[test]
fn secrets_stay_out_of_logs() {
    let root = Root::new("demo", "secrets", &Records::Local);
    let secret = "s3cr3t-Zq8w-never-logged";
    std::fs::write(
        root.path().join("secret.tf"),
        format!("variable \"password\" {{\n  type      = string\n  sensitive = true\n  default   = \"{secret}\"\n}}\n\nresource \"terraform_data\" \"password\" {{\n  input = var.password\n}}\n\noutput \"password\" {{\n  value     = var.password\n  sensitive = true\n}}\n"),
    )
    .unwrap();
    let _turn = turn();
    let mut logs = String::new();
    for args in [
        vec!["init", "-input=false"],
        vec!["apply", "-auto-approve", "-input=false"],
        vec!["plan", "-input=false"],
    ] {
        for format in ["human", "json"] {
            let mut all = vec!["--log-format", format, "run", "--", "terraform"];
            all.extend(args.iter());
            let out = root
                .cli(&all)
                .env("CHOUDOUFU_LOG", "trace")
                .output()
                .unwrap();
            logs.push_str(&text(&out.stderr));
            if args[0] == "init" {
                break;
            }
        }
    }
    // A conflict names the resource, never its value.
    let a = root.spawn(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-target=terraform_data.db",
        "-var",
        "db_version=x1",
        "-var",
        "sleep_seconds=1",
    ]);
    let b = root.spawn(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-target=terraform_data.db",
        "-var",
        "db_version=x2",
        "-var",
        "sleep_seconds=1",
    ]);
    for out in [
        wait(a, Duration::from_secs(60)),
        wait(b, Duration::from_secs(60)),
    ] {
        logs.push_str(&text(&out.stderr));
    }
    assert!(
        logs.contains("serving state for this run"),
        "our own log lines were captured"
    );
    assert!(!logs.contains(secret), "a sensitive value reached the logs");
    // It is in the record (the state needs it), and only there.
    assert!(
        std::fs::read_dir(root.path().join(".live-records/tofu-records/secrets/r"))
            .unwrap()
            .count()
            >= 3
    );
}

/// Every line of `out` that is choudoufu-live's own (its log lines, its words, the approval) and carries an ESC byte.
fn coloured_own_lines(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| {
            l.contains(" INFO ")
                || l.contains("INFO\u{1b}")
                || l.contains("WARN")
                || l.contains("choudoufu-live")
                || l.contains("Do you want to perform these actions?")
                || l.contains("Enter a value:")
        })
        .filter(|l| l.contains('\u{1b}'))
        .map(str::to_string)
        .collect()
}

#[test]
fn run_output_through_a_pipe_has_no_colour() {
    use std::io::Write;
    use std::process::Stdio;
    let root = Root::new("demo", "colour", &Records::Local);
    let _turn = turn();
    root.ok(&["init", "-input=false"]);
    // No NO_COLOR and no -no-color: only the pipe says "no terminal".
    let mut child = root
        .cli(&["run", "--", root.tf.as_str(), "apply", "-input=true"])
        .env_remove("NO_COLOR")
        .env("CHOUDOUFU_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"no\n").unwrap();
    let out = wait(child, Duration::from_secs(120));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        stdout.contains("Do you want to perform these actions?"),
        "{stdout}\n{stderr}"
    );
    assert!(stderr.contains("INFO"), "{stderr}");
    let coloured = [coloured_own_lines(&stdout), coloured_own_lines(&stderr)].concat();
    assert!(
        coloured.is_empty(),
        "choudoufu-live wrote ANSI colour into a pipe: {coloured:?}"
    );
}

/// `destroy` and `apply -destroy` end in `terraform destroy`'s words, `apply -refresh-only` in apply's, as stock terraform 1.11.4 prints them.
#[test]
fn destroy_and_refresh_only_keep_terraforms_words() {
    let root = Root::new("demo", "words", &Records::Local);
    let _turn = turn();
    root.init_and_apply();
    let refresh = root.ok(&["apply", "-refresh-only", "-auto-approve", "-input=false"]);
    assert!(
        text(&refresh.stdout)
            .contains("Apply complete! Resources: 0 added, 0 changed, 0 destroyed."),
        "{}",
        text(&refresh.stdout)
    );
    for destroy in [
        &["destroy", "-auto-approve", "-input=false"][..],
        &["apply", "-destroy", "-auto-approve", "-input=false"],
    ] {
        let out = text(&root.ok(destroy).stdout);
        assert!(
            out.contains("\nDestroy complete! Resources: 2 destroyed.\n"),
            "{destroy:?}: {out}"
        );
        assert!(!out.contains("Apply complete!"), "{destroy:?}: {out}");
        root.ok(&["apply", "-auto-approve", "-input=false"]);
    }
    let json = text(
        &root
            .ok(&["destroy", "-auto-approve", "-input=false", "-json"])
            .stdout,
    );
    let summary: serde_json::Value = json
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .rfind(|v| v["type"] == "change_summary")
        .unwrap_or_else(|| panic!("no change_summary: {json}"));
    assert_eq!(
        summary["@message"],
        "Destroy complete! Resources: 2 destroyed."
    );
    assert_eq!(summary["changes"]["operation"], "destroy");
}

/// On a terminal (a pty made by util-linux `script`) run's log lines are coloured, unless `NO_COLOR`, `-no-color` or `-no-color` in `TF_CLI_ARGS_<command>` says not.
#[test]
fn colour_on_a_terminal_follows_no_color_and_tf_cli_args() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("util-linux script is not installed: no pty to test with");
        return;
    }
    let root = Root::new("demo", "tty", &Records::Local);
    let _turn = turn();
    root.ok(&["init", "-input=false"]);
    let on_a_tty = |extra: &str, env: &[(&str, &str)]| -> String {
        let line = format!(
            "{} run -- {} plan -input=false{extra}",
            common::tf::bin().display(),
            root.tf
        );
        let mut cmd = Command::new("script");
        cmd.args(["-qec", line.as_str(), "/dev/null"])
            .current_dir(root.path())
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_CLI_CONFIG_FILE", &root.cli_config)
            .env("CHOUDOUFU_PROGRAM_COMMIT", "test")
            .env("CHOUDOUFU_PROGRAM_TIME", "2026-11-30T00:00:00Z")
            .env("CHOUDOUFU_LOG", "info")
            .env_remove("NO_COLOR")
            .env_remove("TF_CLI_ARGS")
            .env_remove("TF_CLI_ARGS_plan")
            .stdin(std::process::Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stdout));
        text(&out.stdout)
    };
    let plain = on_a_tty("", &[]);
    assert!(
        !coloured_own_lines(&plain).is_empty(),
        "on a terminal the log lines are coloured: {plain}"
    );
    for (extra, env) in [
        (" -no-color", &[][..]),
        ("", &[("NO_COLOR", "1")][..]),
        ("", &[("TF_CLI_ARGS_plan", "-no-color")][..]),
        ("", &[("TF_CLI_ARGS", "-no-color")][..]),
    ] {
        let out = on_a_tty(extra, env);
        assert!(out.contains("INFO"), "{out}");
        let coloured = coloured_own_lines(&out);
        assert!(coloured.is_empty(), "{extra:?} {env:?}: {coloured:?}");
    }
}
