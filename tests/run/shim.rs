//! The `terraform` shim (`choudoufu-live shim DIR`) driven by real drivers from PyPI (tftest,
//! python-terraform), plain terraform through it, and its loop refusal.
//!
//! The drivers are installed into `.venv` by `scripts/with-moto` (pinned); each finds
//! `terraform` on PATH, where the shim's folder comes first.

use testkit as common;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::tf::{Records, Root, bin, interval, terraform, text, turn, wait};

/// A folder of shims written by `choudoufu-live shim DIR`, and the PATH that puts it first.
struct Shims {
    dir: tempfile::TempDir,
    path: OsString,
}

impl Shims {
    fn new() -> Shims {
        terraform();
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(bin())
            .arg("shim")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "shim DIR: {}", text(&out.stderr));
        assert_eq!(
            text(&out.stdout),
            format!("export PATH=\"{}:$PATH\"\n", dir.path().display())
        );
        for name in ["terraform", "tofu"] {
            let link = std::fs::read_link(dir.path().join(name)).unwrap();
            assert_eq!(link, std::fs::canonicalize(bin()).unwrap(), "{name}");
        }
        let mut dirs = vec![dir.path().to_path_buf()];
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        let path = std::env::join_paths(dirs).unwrap();
        Shims { dir, path }
    }

    /// The shim's `terraform`.
    fn terraform(&self) -> PathBuf {
        self.dir.path().join("terraform")
    }
}

/// The environment a root's runs get (as `Root::cli` sets it), with `path` as PATH.
fn root_env(cmd: &mut Command, root: &Path, path: &OsString) {
    cmd.current_dir(root)
        .env("PATH", path)
        .env("CHECKPOINT_DISABLE", "1")
        .env("TF_CLI_CONFIG_FILE", root.join(".cli.tfrc"))
        .env("TF_IN_AUTOMATION", "1")
        .env("NO_COLOR", "1")
        .env("CHOUDOUFU_PROGRAM_COMMIT", "test")
        .env("CHOUDOUFU_PROGRAM_TIME", "2026-11-30T00:00:00Z")
        .env_remove("CHOUDOUFU_TERRAFORM")
        .env_remove("CHOUDOUFU_SHIM_NEXT")
        .env_remove("CHOUDOUFU_LOG");
}

/// The project's Python, with the drivers `scripts/with-moto` installs; a loud failure without them.
fn python() -> PathBuf {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let ok = Command::new(&py)
        .args(["-c", "import tftest, python_terraform"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} cannot import tftest and python_terraform: run the tests through scripts/with-moto (or make test), which installs them",
        py.display()
    );
    py
}

/// Run a driver script (`python -c SCRIPT ROOT ARGS...`) in `root` with the shims first on PATH; its stdout is one JSON value.
fn driver(shims: &Shims, root: &Path, script: &str, args: &[&str]) -> serde_json::Value {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(python());
    cmd.arg("-c").arg(script).arg(root).args(args);
    root_env(&mut cmd, root, &shims.path);
    // The drivers' temporary plans (and the stamps `run` writes beside them) go with the root.
    let tmp = root.join(".tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    cmd.env("TMPDIR", &tmp);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let out = wait(cmd.spawn().unwrap(), Duration::from_secs(300));
    assert!(
        out.status.success(),
        "the driver failed: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("the driver printed no JSON ({e}): {}", text(&out.stdout)))
}

/// A live root of the demo fixture with an output, its records in a local folder.
fn live_root(estate: &str) -> Root {
    let root = Root::new("demo", estate, &Records::Local);
    std::fs::write(
        root.path().join("outputs.tf"),
        "output \"db\" {\n  value = terraform_data.db.output\n}\n",
    )
    .unwrap();
    root
}

/// tftest, each of its calls recorded (its own `execute_command`, wrapped): init, plan with
/// `-out` then `show -json`, apply, output `-json`.
const TFTEST_STEPS: &str = r#"
import json, sys, tftest
root = sys.argv[1]
calls = []
tf = tftest.TerraformTest(root, binary="terraform")
run = tf.execute_command
def recorded(cmd, *args):
    out = run(cmd, *args)
    calls.append({"cmd": cmd, "args": list(args), "retcode": out.retcode, "err": out.err})
    return out
tf.execute_command = recorded
tf.init()
plan = tf.plan(output=True, tf_vars={"db_version": "v2"})
tf.apply(tf_vars={"db_version": "v2"})
outputs = tf.output()
print(json.dumps({
    "calls": calls,
    "planned": {a: c["change"]["actions"] for a, c in plan.resource_changes.items()},
    "outputs": {k: outputs[k] for k in outputs.keys()},
}))
"#;

#[test]
fn tftest_drives_a_live_root() {
    let root = live_root("shim-tftest");
    let shims = Shims::new();
    let _turn = turn();
    let got = driver(&shims, root.path(), TFTEST_STEPS, &[]);
    let calls = got["calls"].as_array().unwrap();
    let cmds: Vec<&str> = calls.iter().map(|c| c["cmd"].as_str().unwrap()).collect();
    assert_eq!(cmds, ["init", "plan", "show", "apply", "output"], "{got:#}");
    for c in calls {
        assert_eq!(c["retcode"], 0, "{c:#}");
    }
    // The apply went through run: its summary is on stderr, and the records hold what it applied.
    let apply = &calls[3]["err"];
    assert!(
        apply
            .as_str()
            .unwrap()
            .contains("records 3 created (db, terraform_data.db, terraform_data.dns)"),
        "{apply}"
    );
    assert_eq!(
        got["planned"]["terraform_data.db"],
        serde_json::json!(["create"])
    );
    assert_eq!(got["outputs"]["db"], "v2", "{got:#}");
    assert_eq!(root.stored_input("db").as_deref(), Some("v2"));
    assert_eq!(root.stored_input("dns").as_deref(), Some("v1"));
    assert!(
        !root.path().join("terraform.tfstate").exists(),
        "terraform kept a local state"
    );
    // `apply -json` from another folder, `-chdir` naming the root: JSON lines only on stdout, ours on stderr.
    let elsewhere = tempfile::tempdir().unwrap();
    let chdir = format!("-chdir={}", root.path().display());
    let mut cmd = Command::new(shims.terraform());
    cmd.args([
        chdir.as_str(),
        "apply",
        "-auto-approve",
        "-input=false",
        "-json",
        "-var=db_version=v4",
    ])
    .stdin(Stdio::null());
    root_env(&mut cmd, elsewhere.path(), &shims.path);
    cmd.env("TF_CLI_CONFIG_FILE", root.path().join(".cli.tfrc"));
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.lines().count() > 3, "{stdout}");
    for line in stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}\n{stdout}"));
        assert!(v["@message"].is_string(), "{line}");
    }
    assert!(
        text(&out.stderr).contains("records 2 updated (db, terraform_data.db)"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(root.stored_input("db").as_deref(), Some("v4"));
}

/// Two tftest applies at once in threads of one driver, each of one resource: `ROUND` is the value.
const TFTEST_TWO_AT_ONCE: &str = r#"
import json, sys, threading, tftest
root, trace, value = sys.argv[1], sys.argv[2], sys.argv[3]
results = {}
def apply(name):
    tf = tftest.TerraformTest(root, binary="terraform")
    run = tf.execute_command
    def recorded(cmd, *args):
        out = run(cmd, *args)
        results[name] = {"retcode": out.retcode, "err": out.err}
        return out
    tf.execute_command = recorded
    try:
        tf.apply(tf_vars={name + "_version": value, "sleep_seconds": 4, "trace_file": trace},
                 targets=["terraform_data." + name])
    except Exception as e:
        results[name] = {"retcode": None, "err": str(e)}
threads = [threading.Thread(target=apply, args=(n,)) for n in ("db", "dns")]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(results))
"#;

#[test]
fn two_tftest_applies_land_together() {
    let root = Root::new("demo", "shim-two-at-once", &Records::Local);
    let shims = Shims::new();
    let _turn = turn();
    root.init_and_apply();
    let trace = root.path().join("trace");
    for round in ["r1", "r2"] {
        let _ = std::fs::remove_file(&trace);
        let got = driver(
            &shims,
            root.path(),
            TFTEST_TWO_AT_ONCE,
            &[trace.to_str().unwrap(), round],
        );
        for name in ["db", "dns"] {
            let r = &got[name];
            assert_eq!(r["retcode"], 0, "{round} {name}: {r:#}");
            let err = r["err"].as_str().unwrap();
            assert!(
                err.contains(&format!(
                    "records 1 updated (terraform_data.{name}), 1 unchanged"
                )),
                "{round} {name}: {err}"
            );
            assert_eq!(root.stored_input(name).as_deref(), Some(round), "{name}");
        }
        let (db, dns) = (interval(&trace, "db"), interval(&trace, "dns"));
        assert!(
            db.0 < dns.1 && dns.0 < db.1,
            "{round}: the two applies did not overlap: db {db:?}, dns {dns:?}"
        );
    }
}

/// python-terraform: init, apply, plan to a file (`-detailed-exitcode`), apply of that file, output.
const PYTHON_TERRAFORM_STEPS: &str = r#"
import json, sys
from python_terraform import Terraform
root, plan = sys.argv[1], sys.argv[2]
t = Terraform(working_dir=root)
steps = {}
steps["init"] = t.init()
steps["apply"] = t.apply(skip_plan=True, var={"db_version": "v3"})
steps["plan"] = t.plan(out=plan, var={"db_version": "v3", "dns_version": "v3"})
steps["apply_plan"] = t.apply(plan)
outputs = t.output()
print(json.dumps({
    "steps": {k: {"rc": v[0], "out": v[1], "err": v[2]} for k, v in steps.items()},
    "outputs": outputs,
}))
"#;

#[test]
fn python_terraform_applies_and_outputs() {
    let root = live_root("shim-python-terraform");
    let shims = Shims::new();
    let _turn = turn();
    let plan = root.path().join("next.tfplan");
    let got = driver(
        &shims,
        root.path(),
        PYTHON_TERRAFORM_STEPS,
        &[plan.to_str().unwrap()],
    );
    let steps = &got["steps"];
    for (step, rc) in [("init", 0), ("apply", 0), ("plan", 2), ("apply_plan", 0)] {
        assert_eq!(steps[step]["rc"], rc, "{step}: {:#}", steps[step]);
    }
    assert!(
        steps["apply"]["err"]
            .as_str()
            .unwrap()
            .contains("records 3 created (db, terraform_data.db, terraform_data.dns)"),
        "{:#}",
        steps["apply"]
    );
    assert!(
        steps["apply_plan"]["err"]
            .as_str()
            .unwrap()
            .contains("records 1 updated (terraform_data.dns)"),
        "{:#}",
        steps["apply_plan"]
    );
    assert_eq!(got["outputs"]["db"]["value"], "v3", "{got:#}");
    assert_eq!(root.stored_input("db").as_deref(), Some("v3"));
    assert_eq!(root.stored_input("dns").as_deref(), Some("v3"));
}

/// Run the shim's `terraform ARGS` in `root` to the end.
fn through_shim(shims: &Shims, root: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(shims.terraform());
    cmd.args(args).stdin(Stdio::null());
    root_env(&mut cmd, root, &shims.path);
    cmd.output().unwrap()
}

#[test]
fn a_root_without_live_hcl_is_left_to_terraform() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join("main.tf"),
        "resource \"terraform_data\" \"x\" {\n  input = \"plain\"\n  provisioner \"local-exec\" {\n    command = \"echo \\\"[$TF_HTTP_ADDRESS]\\\" > seen\"\n  }\n}\n",
    )
    .unwrap();
    std::fs::write(root.path().join(".cli.tfrc"), "").unwrap();
    let shims = Shims::new();
    let _turn = turn();
    // Started in a live root's folder: `-chdir` picks the root, and that one has no live.hcl.
    let elsewhere = live_root("shim-elsewhere");
    let chdir = format!("-chdir={}", root.path().display());
    for args in [
        &[chdir.as_str(), "init", "-input=false", "-no-color"][..],
        &[
            chdir.as_str(),
            "apply",
            "-auto-approve",
            "-input=false",
            "-no-color",
        ],
    ] {
        let out = through_shim(&shims, elsewhere.path(), args);
        assert!(
            out.status.success(),
            "{args:?}: {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        assert!(
            !text(&out.stderr).contains("choudoufu-live"),
            "{}",
            text(&out.stderr)
        );
    }
    // Stock terraform's local state, and no state server in terraform's environment.
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.path().join("terraform.tfstate")).unwrap())
            .unwrap();
    assert_eq!(state["resources"][0]["type"], "terraform_data");
    assert_eq!(
        std::fs::read_to_string(root.path().join("seen")).unwrap(),
        "[]\n"
    );
    assert!(!root.path().join(".live-records").exists());
    assert!(!elsewhere.path().join(".live-records").exists());
}

#[test]
fn version_json_is_the_real_terraforms_byte_for_byte() {
    let root = live_root("shim-version");
    let shims = Shims::new();
    // `run` would say on stderr that it serves the state: nothing of ours may appear.
    let real = |args: &[&str]| {
        let mut cmd = Command::new(terraform());
        cmd.args(args).stdin(Stdio::null());
        root_env(
            &mut cmd,
            root.path(),
            &std::env::var_os("PATH").unwrap_or_default(),
        );
        cmd.env("CHOUDOUFU_LOG", "info");
        cmd.output().unwrap()
    };
    let shimmed = |args: &[&str]| {
        let mut cmd = Command::new(shims.terraform());
        cmd.args(args).stdin(Stdio::null());
        root_env(&mut cmd, root.path(), &shims.path);
        cmd.env("CHOUDOUFU_LOG", "info");
        cmd.output().unwrap()
    };
    for args in [&["version", "-json"][..], &["-version"], &["version"]] {
        let (a, b) = (real(args), shimmed(args));
        assert!(a.status.success(), "{args:?}: {}", text(&a.stderr));
        assert_eq!(text(&b.stdout), text(&a.stdout), "{args:?} stdout");
        assert_eq!(b.stdout, a.stdout, "{args:?} stdout bytes");
        assert_eq!(text(&b.stderr), text(&a.stderr), "{args:?} stderr");
        assert_eq!(b.status.code(), a.status.code(), "{args:?}");
    }
    let json: serde_json::Value =
        serde_json::from_slice(&real(&["version", "-json"]).stdout).unwrap();
    assert!(json["terraform_version"].is_string(), "{json}");
    assert!(!root.path().join(".live-records").exists());
}

/// Start the shim's `terraform version` with `env`, in its own process group; at most 20 s.
fn refused(shims: &Shims, path: &OsString, env: &[(&str, &Path)]) -> String {
    use std::os::unix::process::CommandExt;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join(".cli.tfrc"), "").unwrap();
    let mut cmd = Command::new(shims.terraform());
    cmd.arg("version").stdin(Stdio::null());
    root_env(&mut cmd, root.path(), path);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let out = wait(cmd.spawn().unwrap(), Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    text(&out.stderr)
}

#[test]
fn a_shim_whose_next_terraform_is_itself_is_refused_by_name() {
    let shims = Shims::new();
    // CHOUDOUFU_TERRAFORM naming the shim.
    let err = refused(
        &shims,
        &shims.path,
        &[("CHOUDOUFU_TERRAFORM", &shims.terraform())],
    );
    assert!(
        err.contains(&format!(
            "CHOUDOUFU_TERRAFORM={} is this shim itself",
            shims.terraform().display()
        )) && err.contains("a loop, refused"),
        "{err}"
    );
    // A copy of the binary as the next terraform on PATH: the copy refuses, by its name.
    let copy = tempfile::tempdir().unwrap();
    let other = copy.path().join("terraform");
    std::fs::copy(bin(), &other).unwrap();
    let mut dirs = vec![shims.dir.path().to_path_buf(), copy.path().to_path_buf()];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let path = std::env::join_paths(dirs).unwrap();
    let err = refused(&shims, &path, &[]);
    assert!(
        err.contains(&format!(
            "{} is a choudoufu-live shim, and the shim that ran it took it for the real terraform: a loop, refused",
            other.display()
        )),
        "{err}"
    );
    // No terraform after the shim at all.
    let only = std::env::join_paths([shims.dir.path()]).unwrap();
    let err = refused(&shims, &only, &[]);
    assert!(
        err.contains("no terraform on PATH other than this shim"),
        "{err}"
    );
}

/// Two applies replacing the claims fixture's `one` at once through the shim, with `env`; their outputs.
fn two_applies_of_one(
    shims: &Shims,
    root: &Root,
    round: &str,
    env: &[(&str, &str)],
) -> Vec<Output> {
    use std::os::unix::process::CommandExt;
    let calls = root.path().join("calls");
    let children: Vec<_> = ["a", "b"]
        .iter()
        .map(|who| {
            let mut cmd = Command::new(shims.terraform());
            cmd.args(["apply", "-auto-approve", "-input=false", "-no-color"])
                .arg(format!("-var=one={round}-{who}"))
                .arg("-var=sleep_seconds=4")
                .arg(format!("-var=calls_file={}", calls.display()));
            root_env(&mut cmd, root.path(), &shims.path);
            for (k, v) in env {
                cmd.env(k, v);
            }
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0);
            cmd.spawn().unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| wait(c, Duration::from_secs(240)))
        .collect()
}

#[test]
fn choudoufu_wait_queues_a_drivers_apply_behind_another() {
    let root = Root::new("claims", "shim-wait", &Records::Local);
    let shims = Shims::new();
    let _turn = turn();
    root.init_and_apply();
    // Without CHOUDOUFU_WAIT, the apply that finds the change held stops with 5.
    let outs = two_applies_of_one(&shims, &root, "r1", &[]);
    let mut codes: Vec<Option<i32>> = outs.iter().map(|o| o.status.code()).collect();
    codes.sort();
    let all: Vec<String> = outs.iter().map(|o| text(&o.stderr)).collect();
    assert_eq!(codes, [Some(0), Some(5)], "{}", all.join("\n---\n"));
    assert!(
        all.iter().any(|e| e.contains("InFlightChangeError")),
        "{}",
        all.join("\n---\n")
    );
    // With it, the second waits for the first, plans again, and lands after it.
    let _ = std::fs::remove_file(root.path().join("calls"));
    let outs = two_applies_of_one(&shims, &root, "r2", &[("CHOUDOUFU_WAIT", "2m")]);
    let all: Vec<String> = outs.iter().map(|o| text(&o.stderr)).collect();
    for o in &outs {
        assert!(o.status.success(), "{}", all.join("\n---\n"));
    }
    assert!(
        all.iter().any(|e| e.contains("waiting up to")),
        "{}",
        all.join("\n---\n")
    );
    let made = common::tf::calls(&root.path().join("calls"));
    let made: Vec<_> = made.into_iter().filter(|c| c.name == "one").collect();
    assert_eq!(made.len(), 2, "{made:?}");
    assert!(made[0].end.unwrap() < made[1].start, "{made:?}");
    assert_eq!(
        root.stored_input("one").as_deref(),
        Some(made[1].value.as_str())
    );
}

#[test]
fn shim_dir_replaces_its_own_links_and_leaves_anything_else_alone() {
    let shims = Shims::new();
    // Again over its own links: the same links.
    let again = Command::new(bin())
        .arg("shim")
        .arg(shims.dir.path())
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(
        std::fs::read_link(shims.terraform()).unwrap(),
        std::fs::canonicalize(bin()).unwrap()
    );
    // A folder holding a real program under one of the names: refused, nothing written.
    let dir = tempfile::tempdir().unwrap();
    let tofu = dir.path().join("tofu");
    std::fs::write(&tofu, "#!/bin/sh\necho the real tofu\n").unwrap();
    let out = Command::new(bin())
        .arg("shim")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains(&format!(
            "{} exists and is not a choudoufu-live shim: nothing was written",
            tofu.display()
        )),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&tofu).unwrap(),
        "#!/bin/sh\necho the real tofu\n"
    );
    assert!(!dir.path().join("terraform").exists());
}

#[test]
fn run_with_the_shim_on_path_runs_the_real_terraform_once() {
    let root = live_root("shim-inside-run");
    let shims = Shims::new();
    let _turn = turn();
    // `choudoufu-live run -- terraform ...` finds the shim on PATH as its terraform.
    let run = |args: &[&str]| {
        let mut cmd = Command::new(bin());
        cmd.args(["run", "--", "terraform"])
            .args(args)
            .stdin(Stdio::null());
        root_env(&mut cmd, root.path(), &shims.path);
        cmd.output().unwrap()
    };
    let init = run(&["init", "-input=false", "-no-color"]);
    assert!(init.status.success(), "{}", text(&init.stderr));
    let out = run(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-no-color",
        "-var=db_version=v5",
    ]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(
        err.matches("records 3 created").count(),
        1,
        "one run, one summary: {err}"
    );
    assert_eq!(root.stored_input("db").as_deref(), Some("v5"));
}
