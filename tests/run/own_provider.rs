//! The project's own provider (terraform-provider-cdftest) with the real terraform: plainly, and
//! through `choudoufu-live run`, its call log counting what terraform asked of it.

use std::path::Path;
use std::process::{Command, Output};

use testkit::cdftest::{Cdftest, Phase, ProviderCall, started};
use testkit::tf::{Records, Root, must, terraform, text, turn, turn_alone};

fn fixture() -> &'static Path {
    static DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/terraform-fixtures/cdftest");
    Path::new(DIR)
}

fn plain(cdf: &Cdftest, dir: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(terraform());
    c.args(args)
        .current_dir(dir)
        .env("TF_IN_AUTOMATION", "1")
        .env("NO_COLOR", "1");
    cdf.env(&mut c);
    c.output().unwrap()
}

/// The ApplyResourceChange of `name` that started after `from` calls, with its end: how long it took.
fn apply_of(calls: &[ProviderCall], from: usize, name: &str) -> (f64, Phase) {
    let rest = &calls[from..];
    let start = started(rest, "ApplyResourceChange", Some(name))
        .next()
        .unwrap_or_else(|| panic!("no ApplyResourceChange of {name}: {rest:#?}"));
    let end = rest
        .iter()
        .find(|c| {
            c.rpc == "ApplyResourceChange"
                && c.pid == start.pid
                && c.name.as_deref() == Some(name)
                && c.phase != Phase::Start
                && c.t >= start.t
        })
        .unwrap_or_else(|| panic!("ApplyResourceChange of {name} never ended: {rest:#?}"));
    (end.t - start.t, end.phase)
}

fn applies(calls: &[ProviderCall], from: usize) -> usize {
    started(&calls[from..], "ApplyResourceChange", None).count()
}

/// init, apply (b sleeps 400 ms), a clean plan, an update, a failing update (exit 1, terraform's
/// error), an import by id, destroy: the objects and the call log follow each step.
#[test]
fn plain_terraform_round_trip() {
    let _turn = turn();
    let cdf = Cdftest::new(false);
    let root = tempfile::tempdir().unwrap();
    std::fs::copy(fixture().join("main.tf"), root.path().join("main.tf")).unwrap();
    let dir = root.path();
    must(plain(&cdf, dir, &["init", "-input=false"]), "init");

    let before = cdf.calls().len();
    must(
        plain(
            &cdf,
            dir,
            &[
                "apply",
                "-auto-approve",
                "-input=false",
                "-var",
                "b_sleep_ms=400",
            ],
        ),
        "apply",
    );
    let calls = cdf.calls();
    assert_eq!(applies(&calls, before), 2, "{calls:#?}");
    let (took, phase) = apply_of(&calls, before, "b");
    assert_eq!(phase, Phase::End);
    assert!(took >= 0.4, "b's apply took {took} s, not its 400 ms");
    let objects = cdf.objects();
    assert_eq!(objects.len(), 2, "{objects:?}");
    assert_eq!(objects[0]["name"], "a");
    assert_eq!(
        objects[1]["value"].as_str(),
        Some(format!("v1-{}", objects[0]["id"].as_str().unwrap()).as_str())
    );
    assert!(
        calls
            .iter()
            .all(|c| c.phase != Phase::Cancelled && c.pid > 0),
        "{calls:#?}"
    );

    let before = cdf.calls().len();
    let out = plain(
        &cdf,
        dir,
        &[
            "plan",
            "-detailed-exitcode",
            "-input=false",
            "-var",
            "b_sleep_ms=400",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "plan is clean: {}",
        text(&out.stdout)
    );
    assert_eq!(applies(&cdf.calls(), before), 0);

    // An in-place update keeps the id; a told-to-fail update gives terraform's error and exit 1.
    let id_b = objects[1]["id"].clone();
    must(
        plain(
            &cdf,
            dir,
            &[
                "apply",
                "-auto-approve",
                "-input=false",
                "-var",
                "b_value=v2",
            ],
        ),
        "update",
    );
    let objects = cdf.objects();
    assert_eq!(objects[1]["id"], id_b);
    assert!(objects[1]["value"].as_str().unwrap().starts_with("v2-"));
    let before = cdf.calls().len();
    let out = plain(
        &cdf,
        dir,
        &[
            "apply",
            "-auto-approve",
            "-input=false",
            "-var",
            "b_value=v3",
            "-var",
            "b_fail=true",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stderr);
    assert!(
        said.contains("cdftest_thing told to fail") && said.contains("b has fail = true"),
        "{said}"
    );
    assert_eq!(applies(&cdf.calls(), before), 1);
    assert!(
        cdf.objects()[1]["value"]
            .as_str()
            .unwrap()
            .starts_with("v2-")
    );

    // Import by id: forgotten, imported again, and the plan is clean.
    let id_a = cdf.objects()[0]["id"].as_str().unwrap().to_string();
    must(
        plain(&cdf, dir, &["state", "rm", "cdftest_thing.a"]),
        "state rm",
    );
    let before = cdf.calls().len();
    must(
        plain(
            &cdf,
            dir,
            &["import", "-input=false", "cdftest_thing.a", &id_a],
        ),
        "import",
    );
    assert_eq!(
        started(&cdf.calls()[before..], "ImportResourceState", None).count(),
        1
    );
    let out = plain(
        &cdf,
        dir,
        &[
            "plan",
            "-detailed-exitcode",
            "-input=false",
            "-var",
            "b_value=v2",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "clean after import: {}",
        text(&out.stdout)
    );

    must(
        plain(&cdf, dir, &["destroy", "-auto-approve", "-input=false"]),
        "destroy",
    );
    assert!(cdf.objects().is_empty());
}

fn run(root: &Root, cdf: &Cdftest, args: &[&str]) -> Output {
    let mut c = root.run_cmd(args);
    cdf.env(&mut c);
    c.output().unwrap()
}

/// The same provider through `run` on a live root (local store): each thing has its record, the
/// sleep is honoured, a told-to-fail apply exits 1 with terraform's error and keeps the record.
#[test]
fn through_run_on_a_live_root() {
    let _turn = turn();
    let cdf = Cdftest::new(false);
    let root = Root::new("cdftest", "cdftest", &Records::Local);
    must(run(&root, &cdf, &["init", "-input=false"]), "run init");
    let before = cdf.calls().len();
    must(
        run(
            &root,
            &cdf,
            &[
                "apply",
                "-auto-approve",
                "-input=false",
                "-var",
                "b_sleep_ms=300",
            ],
        ),
        "run apply",
    );
    let calls = cdf.calls();
    assert_eq!(applies(&calls, before), 2, "{calls:#?}");
    let (took, phase) = apply_of(&calls, before, "b");
    assert_eq!(phase, Phase::End);
    assert!(took >= 0.3, "b's apply took {took} s, not its 300 ms");
    let objects = cdf.objects();
    for (address, object) in [
        ("cdftest_thing.a", &objects[0]),
        ("cdftest_thing.b", &objects[1]),
    ] {
        let rec = root
            .record_at(address)
            .unwrap_or_else(|| panic!("no record of {address}"));
        assert_eq!(
            rec["instance"]["attributes"]["id"], object["id"],
            "{address}"
        );
    }

    let before = cdf.calls().len();
    let out = run(
        &root,
        &cdf,
        &[
            "plan",
            "-detailed-exitcode",
            "-input=false",
            "-var",
            "b_sleep_ms=300",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "clean: {}", text(&out.stdout));
    assert_eq!(applies(&cdf.calls(), before), 0);

    let before = cdf.calls().len();
    let out = run(
        &root,
        &cdf,
        &[
            "apply",
            "-auto-approve",
            "-input=false",
            "-var",
            "b_value=v2",
            "-var",
            "b_fail=true",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(said.contains("cdftest_thing told to fail"), "{said}");
    assert_eq!(applies(&cdf.calls(), before), 1);
    let rec = root.record_at("cdftest_thing.b").unwrap();
    assert!(
        rec["instance"]["attributes"]["value"]
            .as_str()
            .unwrap()
            .starts_with("v1-"),
        "{rec}"
    );

    must(
        run(&root, &cdf, &["destroy", "-auto-approve", "-input=false"]),
        "run destroy",
    );
    assert!(cdf.objects().is_empty());
    assert!(root.record_at("cdftest_thing.a").is_none());
}

/// An interrupted terraform sends StopProvider: the sleeping apply is cut short (logged
/// `cancelled`), creates nothing, and terraform exits soon after, not when the sleep would end.
#[test]
fn an_interrupt_stops_a_sleeping_apply() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let _turn = turn_alone();
    let cdf = Cdftest::new(false);
    let root = tempfile::tempdir().unwrap();
    std::fs::copy(fixture().join("main.tf"), root.path().join("main.tf")).unwrap();
    let dir = root.path();
    must(plain(&cdf, dir, &["init", "-input=false"]), "init");
    let mut c = Command::new(terraform());
    c.args([
        "apply",
        "-auto-approve",
        "-input=false",
        "-var",
        "b_sleep_ms=60000",
    ])
    .current_dir(dir)
    .env("NO_COLOR", "1")
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    cdf.env(&mut c);
    let child = c.spawn().unwrap();
    cdf.wait_for(
        "ApplyResourceChange",
        "b",
        std::time::Duration::from_secs(60),
    );
    let interrupted = std::time::Instant::now();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let out = testkit::tf::wait(child, std::time::Duration::from_secs(30));
    assert!(
        interrupted.elapsed() < std::time::Duration::from_secs(20),
        "terraform took {:?} after the interrupt",
        interrupted.elapsed()
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let calls = cdf.calls();
    assert_eq!(
        started(&calls, "StopProvider", None).count(),
        1,
        "{calls:#?}"
    );
    assert!(
        calls.iter().any(|c| c.rpc == "ApplyResourceChange"
            && c.name.as_deref() == Some("b")
            && c.phase == Phase::Cancelled),
        "{calls:#?}"
    );
    let objects = cdf.objects();
    assert_eq!(objects.len(), 1, "only a was created: {objects:?}");
    assert_eq!(objects[0]["name"], "a");
}

/// Through the provider door, terraform hears the schema of the types the configuration and the
/// state name: `cdftest_spare`, in the provider's schema but named by neither, is left out. A
/// root whose resource blocks were all removed still destroys its things: their type comes
/// from the state terraform is served.
#[test]
fn the_schema_terraform_hears_holds_the_types_the_configuration_and_the_state_name() {
    let _turn = turn();
    let cdf = Cdftest::new(false);
    let root = Root::new("cdftest", "schema-types", &Records::Local);
    must(run(&root, &cdf, &["init", "-input=false"]), "run init");
    let logged = |args: &[&str]| {
        let mut c = root.run_cmd(args);
        cdf.env(&mut c).env("CHOUDOUFU_LOG", "info");
        c.output().unwrap()
    };
    let out = must(
        logged(&["apply", "-auto-approve", "-input=false"]),
        "run apply",
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("the schema answer holds the types the configuration and state name")
            && err.contains("kept=1 of=2"),
        "{err}"
    );
    assert_eq!(cdf.objects().len(), 2);
    // Every resource block goes: only the provider's requirement is left.
    let main = root.path().join("main.tf");
    let text_of_main = std::fs::read_to_string(&main).unwrap();
    let end = text_of_main.find("variable").unwrap();
    std::fs::write(&main, &text_of_main[..end]).unwrap();
    let before = cdf.calls().len();
    let out = logged(&["apply", "-auto-approve", "-input=false"]);
    must(
        out,
        "the apply that destroys what the configuration no longer names",
    );
    assert_eq!(applies(&cdf.calls(), before), 2);
    assert!(cdf.objects().is_empty(), "{:?}", cdf.objects());
}

/// Through the provider door, a provider configuration's validation is asked of a plugin once
/// per distinct request, package and environment: terraform validates the (empty) configuration
/// of the project's own provider at each walk of the plan and of the apply, and the provider's
/// call log shows one ValidateProviderConfig; the next run's plan asks none (the answer was kept
/// between runs), and a run with one more variable in its environment asks again.
#[test]
fn a_provider_configuration_is_validated_once_per_request_package_and_environment() {
    let _turn = turn();
    let cdf = Cdftest::new(false);
    let root = Root::new("cdftest", "validations", &Records::Local);
    must(run(&root, &cdf, &["init", "-input=false"]), "run init");
    let validations = |from: usize| {
        let calls = cdf.calls();
        started(&calls[from..], "ValidateProviderConfig", None).count()
    };
    let before = cdf.calls().len();
    must(
        run(&root, &cdf, &["apply", "-auto-approve", "-input=false"]),
        "run apply",
    );
    assert_eq!(validations(before), 1, "{:#?}", &cdf.calls()[before..]);
    assert_eq!(applies(&cdf.calls(), before), 2);
    assert_eq!(cdf.objects().len(), 2);
    let before = cdf.calls().len();
    must(run(&root, &cdf, &["plan", "-input=false"]), "the next plan");
    assert_eq!(validations(before), 0, "{:#?}", &cdf.calls()[before..]);
    let before = cdf.calls().len();
    let mut c = root.run_cmd(&["plan", "-input=false"]);
    cdf.env(&mut c).env("CHOUDOUFU_TEST_ONE_MORE", "1");
    must(c.output().unwrap(), "a plan in another environment");
    assert_eq!(validations(before), 1, "{:#?}", &cdf.calls()[before..]);
}
