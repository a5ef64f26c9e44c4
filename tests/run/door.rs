//! The provider door with the real hashicorp/aws provider 5.100.0 (a filesystem mirror) against
//! moto: an apply through it lands and is recorded, a package the lock file does not list is
//! refused by name, and a killed `run` takes its terraform and its plugins with it, after which
//! no provider request reaches the cloud. Run under `scripts/with-moto` (or `with-peers`).

use testkit as common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::tf::{Records, Root, text, turn};
use common::{latency_proxy, procs, s3_authority, s3_endpoint};

/// Where the tests' CLI configuration finds the provider.
const MIRROR: &str = "/opt/tf-plugins";
const AWS_PLATFORM: &str = "registry.terraform.io/hashicorp/aws/5.100.0/linux_amd64";
const AWS_BINARY: &str = "terraform-provider-aws_v5.100.0_x5";

/// The mirror; a loud failure when the real provider is not on this machine.
fn mirror() -> &'static str {
    let binary = Path::new(MIRROR).join(AWS_PLATFORM).join(AWS_BINARY);
    assert!(
        binary.is_file(),
        "the real hashicorp/aws 5.100.0 provider is not at {}: these tests need it",
        binary.display()
    );
    MIRROR
}

/// A copy of the door_aws root on local records, its CLI configuration on the mirror, initialised through `run`.
fn aws_root(estate: &str) -> Root {
    let root = Root::new("door_aws", estate, &Records::Local);
    std::fs::write(
        &root.cli_config,
        format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    include = [\"registry.terraform.io/hashicorp/aws\"]\n  }}\n  direct {{\n    exclude = [\"registry.terraform.io/hashicorp/aws\"]\n  }}\n}}\n",
            mirror()
        ),
    )
    .unwrap();
    root.ok(&["init", "-input=false"]);
    root
}

fn vars(endpoint: &str, prefix: &str, n: usize) -> Vec<String> {
    vec![
        "-var".into(),
        format!("endpoint={endpoint}"),
        "-var".into(),
        format!("prefix={prefix}"),
        "-var".into(),
        format!("n={n}"),
    ]
}

fn args<'a>(first: &[&'a str], rest: &'a [String]) -> Vec<&'a str> {
    let mut all = first.to_vec();
    all.extend(rest.iter().map(String::as_str));
    all
}

/// The door says, at info, each plugin it starts.
const STARTED: &str = "provider door: started a provider plugin";
const KEPT_SCHEMA: &str = "provider door: answered a schema call from the kept answer";
const DOOR_LOG: &str = "choudoufu_live::frontdoor::provider=info";

#[test]
fn an_apply_through_the_door_lands_is_recorded_and_the_next_plan_is_clean() {
    let _turn = turn();
    let root = aws_root("door-apply");
    let v = vars(&s3_endpoint(), "door-apply", 1);
    let out = root
        .run_cmd(&args(&["apply", "-auto-approve", "-input=false"], &v))
        .env("CHOUDOUFU_LOG", DOOR_LOG)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{}\n{err}", text(&out.stdout));
    // terraform reached the provider through the door: the door started its plugins.
    assert!(err.contains(STARTED), "the door started no plugin:\n{err}");
    // Connections that only read the schema were answered without a plugin of their own.
    assert!(
        err.contains(KEPT_SCHEMA),
        "no schema call was answered from the kept answer:\n{err}"
    );
    assert!(
        err.contains("records 1 created (aws_ssm_parameter.p[0])"),
        "{err}"
    );
    let shown = root
        .cli(&["records", "show", "aws_ssm_parameter.p[0]"])
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    assert!(text(&shown.stdout).contains("/door-apply/p0"));
    // The next plan, through the door again, finds nothing to do.
    let plan = root.run(&args(&["plan", "-detailed-exitcode", "-input=false"], &v));
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{}\n{}",
        text(&plan.stdout),
        text(&plan.stderr)
    );
}

#[test]
fn a_package_the_lock_file_does_not_list_is_refused_by_name() {
    let _turn = turn();
    let root = aws_root("door-hash");
    // The installed package, as init linked it, with one file changed beside the real binary.
    let platform = root.path().join(".terraform/providers").join(AWS_PLATFORM);
    let real = std::fs::canonicalize(&platform).unwrap();
    std::fs::remove_file(&platform).unwrap();
    std::fs::create_dir(&platform).unwrap();
    std::os::unix::fs::symlink(real.join(AWS_BINARY), platform.join(AWS_BINARY)).unwrap();
    std::fs::write(platform.join("LICENSE.txt"), "changed\n").unwrap();
    let v = vars(&s3_endpoint(), "door-hash", 1);
    let out = root.run(&args(&["apply", "-auto-approve", "-input=false"], &v));
    let err = text(&out.stderr);
    assert!(!out.status.success(), "a changed package was run:\n{err}");
    assert!(err.contains("ProviderHashMismatch"), "{err}");
    assert!(
        err.contains("registry.terraform.io/hashicorp/aws 5.100.0"),
        "{err}"
    );
    assert!(
        !root.path().join(".live-records").exists()
            || root
                .cli(&["records", "show", "aws_ssm_parameter.p[0]"])
                .output()
                .is_ok_and(|o| !o.status.success()),
        "nothing was applied"
    );
}

#[test]
fn a_killed_run_takes_its_terraform_and_plugins_with_it_and_no_provider_call_follows() {
    let _turn = turn();
    // Every provider request to moto passes a proxy that holds it 1.5 s and logs it.
    let rt = common::runtime();
    let upstream = s3_authority();
    let proxy = rt.block_on(latency_proxy::start(upstream, Duration::from_millis(1500)));
    let root = aws_root("door-kill");
    let v = vars(&proxy.endpoint, "door-kill", 3);
    let mut child = root
        .run_cmd(&args(&["apply", "-auto-approve", "-input=false"], &v))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let run_pid = child.id();
    // Mid-apply: the first provider request to the cloud has been answered, more are coming.
    let started = Instant::now();
    let mut calls = Vec::new();
    while calls.is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "no provider request reached the proxy"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before any provider request"
        );
        std::thread::sleep(Duration::from_millis(50));
        calls.extend(proxy.take());
    }
    let family: Vec<(u32, String)> = procs::descendants(run_pid)
        .into_iter()
        .map(|p| (p, procs::name(p)))
        .collect();
    assert!(
        family.iter().any(|(_, n)| n == "terraform"),
        "no terraform under run: {family:?}"
    );
    assert!(
        family.iter().any(|(_, n)| n.starts_with("terraform-prov")),
        "no provider plugin under run: {family:?}"
    );
    procs::sigkill(run_pid);
    let killed = Instant::now();
    let _ = child.wait();
    // Within seconds, every process the run had started is gone.
    let mut left: Vec<(u32, String)> = family.clone();
    while !left.is_empty() && killed.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
        left.retain(|(p, _)| procs::alive(*p));
    }
    for (p, _) in &left {
        procs::sigkill(*p);
    }
    assert!(
        left.is_empty(),
        "30 s after run was killed, these of its processes still run: {left:?}"
    );
    // And no provider request reached the cloud after the kill (one already on its way may land).
    std::thread::sleep(Duration::from_secs(4));
    calls.extend(proxy.take());
    let after: Vec<&latency_proxy::Call> = calls
        .iter()
        .filter(|c| c.start > killed + Duration::from_millis(500))
        .collect();
    assert!(
        after.is_empty(),
        "{} provider requests reached the cloud after run was killed: {:?}",
        after.len(),
        after.iter().map(|c| &c.path).collect::<Vec<_>>()
    );
    drop(rt);
}

#[test]
fn the_door_turns_off_with_the_flag_or_the_live_block_and_says_what_that_loses() {
    let _turn = turn();
    // Only the builtin terraform_data: nothing passes through the door, whether on or off.
    let root = Root::new("bench", "door-off", &Records::Local);
    root.ok(&["init", "-input=false"]);
    let warning = "the provider door is off: a killed apply loses";
    let on = root.ok(&["apply", "-auto-approve", "-input=false", "-var", "n=1"]);
    assert!(!text(&on.stderr).contains(warning), "{}", text(&on.stderr));
    let off = root.run_with(
        &["--provider-door=off"],
        &["apply", "-auto-approve", "-input=false", "-var", "n=2"],
    );
    assert!(off.status.success(), "{}", text(&off.stderr));
    assert!(text(&off.stderr).contains(warning), "{}", text(&off.stderr));
    let live = root.path().join("live.hcl");
    let text_of = std::fs::read_to_string(&live).unwrap();
    std::fs::write(
        &live,
        text_of.replacen("live {\n", "live {\n  provider_door = false\n", 1),
    )
    .unwrap();
    let by_block = root.ok(&["apply", "-auto-approve", "-input=false", "-var", "n=3"]);
    assert!(
        text(&by_block.stderr).contains(warning),
        "{}",
        text(&by_block.stderr)
    );
    // The flag wins over the block.
    let flag_on = root.run_with(
        &["--provider-door=on"],
        &["apply", "-auto-approve", "-input=false", "-var", "n=3"],
    );
    assert!(flag_on.status.success(), "{}", text(&flag_on.stderr));
    assert!(
        !text(&flag_on.stderr).contains(warning),
        "{}",
        text(&flag_on.stderr)
    );
}

#[test]
fn a_run_whose_terraform_was_killed_says_so_with_what_it_recorded() {
    let _turn = turn();
    let root = Root::new("claims", "door-tf-killed", &Records::Local);
    root.ok(&["init", "-input=false"]);
    let calls = root.path().join("calls");
    let calls_var = format!("calls_file={}", calls.display());
    let child = root
        .run_cmd(&[
            "apply",
            "-auto-approve",
            "-input=false",
            "-var",
            &calls_var,
            "-var",
            "sleep_seconds=60",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::tf::wait_for_call(&calls, "one", Duration::from_secs(120));
    procs::kill_terraform_under(child.id());
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{err}");
    assert!(
        err.contains("terraform was killed (SIGKILL) before it finished"),
        "{err}"
    );
    // It saved nothing before the kill: no record, and the next plan creates everything.
    let plan = root.run(&["plan", "-detailed-exitcode", "-input=false"]);
    assert_eq!(plan.status.code(), Some(2), "{}", text(&plan.stderr));
}
