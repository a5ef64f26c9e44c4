//! Records at each provider return (cdf-killed-records, both kills), with the project's own
//! provider: a chain p1 → wait → p2 → wait → p3 → wait → p4 killed while a wait runs leaves a
//! record for every object it made, and the next apply creates only the rest.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testkit::cdftest::{Cdftest, started};
use testkit::tf::{Records, Root, must, text, turn};
use testkit::{procs, s3_endpoint};

fn run(root: &Root, cdf: &Cdftest, opts: &[&str], args: &[&str]) -> Command {
    cdf.run_cmd(root, opts, args)
}

/// The provider door's sockets that terraform `pid` was handed lie in a folder of this user's that only it can open.
fn sockets_are_private(pid: u32) {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let reattach = environ
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(b"TF_REATTACH_PROVIDERS="))
        .expect("terraform was not handed TF_REATTACH_PROVIDERS");
    let entries: serde_json::Value = serde_json::from_slice(reattach).unwrap();
    let entries = entries.as_object().unwrap();
    assert!(!entries.is_empty());
    let me = std::fs::metadata("/proc/self").unwrap().uid();
    for (provider, entry) in entries {
        assert_eq!(entry["Addr"]["Network"], "unix", "{provider}: {entry}");
        let socket = std::path::Path::new(entry["Addr"]["String"].as_str().unwrap());
        assert!(
            std::fs::metadata(socket).unwrap().file_type().is_socket(),
            "{provider}: {}",
            socket.display()
        );
        let folder = std::fs::metadata(socket.parent().unwrap()).unwrap();
        assert_eq!(
            (folder.permissions().mode() & 0o777, folder.uid()),
            (0o700, me),
            "{provider}: the socket folder of {} is not this user's alone",
            socket.display()
        );
    }
}

/// Which process the test kills mid-apply.
#[derive(Clone, Copy, Debug)]
enum Victim {
    /// terraform alone (`run` lives on and ends).
    Terraform,
    /// `run` itself (its terraform and plugins die with it).
    Run,
}

fn killed_chain(victim: Victim, estate: &str) {
    let _turn = turn();
    let cdf = Cdftest::new(false);
    let root = Root::new("cdftest-chain", estate, &Records::Local);
    must(
        run(&root, &cdf, &[], &["init", "-input=false"])
            .output()
            .unwrap(),
        "run init",
    );
    let mut child = run(
        &root,
        &cdf,
        &[],
        &["apply", "-auto-approve", "-input=false"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let run_pid = child.id();
    // p3's create is sleeping: p1 and p2 returned, p3 and p4 are not made.
    cdf.wait_for("ApplyResourceChange", "p3", Duration::from_secs(120));
    let family: Vec<(u32, String)> = procs::descendants(run_pid)
        .into_iter()
        .map(|p| (p, procs::name(p)))
        .collect();
    match victim {
        Victim::Terraform => {
            let tf: Vec<u32> = family
                .iter()
                .filter(|(_, n)| n == "terraform")
                .map(|(p, _)| *p)
                .collect();
            assert!(!tf.is_empty(), "no terraform under run: {family:?}");
            tf.iter().for_each(|p| sockets_are_private(*p));
            tf.iter().for_each(|p| procs::sigkill(*p));
        }
        Victim::Run => procs::sigkill(run_pid),
    }
    procs::reap(&mut child, Duration::from_secs(60));
    // Every process of the killed run is gone before the next one starts.
    let killed = Instant::now();
    let mut left = family.clone();
    while !left.is_empty() && killed.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
        left.retain(|(p, _)| procs::alive(*p));
    }
    left.iter().for_each(|(p, _)| procs::sigkill(*p));

    let objects = cdf.objects();
    let names: Vec<&str> = objects.iter().filter_map(|o| o["name"].as_str()).collect();
    assert_eq!(names, ["p1", "p2"], "{victim:?}: the cloud after the kill");
    for object in &objects {
        let name = object["name"].as_str().unwrap();
        let address = format!("cdftest_thing.{name}");
        let rec = root
            .record_at(&address)
            .unwrap_or_else(|| panic!("{victim:?}: {name} is in the cloud with no record"));
        assert_eq!(
            rec["instance"]["attributes"]["id"], object["id"],
            "{victim:?}: {address}'s record is not its object"
        );
    }
    for name in ["p3", "p4"] {
        assert!(
            root.record_at(&format!("cdftest_thing.{name}")).is_none(),
            "{victim:?}: {name} has a record and no object"
        );
    }

    // The next apply (waiting out a killed run's claims) creates only the rest.
    let before = cdf.calls().len();
    let out = must(
        run(
            &root,
            &cdf,
            &["--wait=3m"],
            &["apply", "-auto-approve", "-input=false"],
        )
        .output()
        .unwrap(),
        "the next apply",
    );
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!said.contains("already exists"), "{said}");
    let calls = cdf.calls();
    let mut applied: Vec<&str> = started(&calls[before..], "ApplyResourceChange", None)
        .filter_map(|c| c.name.as_deref())
        .collect();
    applied.sort_unstable();
    assert_eq!(
        applied,
        ["p3", "p4"],
        "{victim:?}: the next apply's creates"
    );
    let names: Vec<String> = cdf
        .objects()
        .iter()
        .filter_map(|o| o["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        names,
        ["p1", "p2", "p3", "p4"],
        "{victim:?}: exactly 4 objects"
    );
    let plan = run(
        &root,
        &cdf,
        &[],
        &["plan", "-detailed-exitcode", "-input=false"],
    )
    .output()
    .unwrap();
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{victim:?}: the plan after is not clean:\n{}\n{}",
        text(&plan.stdout),
        text(&plan.stderr)
    );
}

/// terraform SIGKILLed while p3's wait runs: p1 and p2 have their records; the next apply makes p3 and p4 only.
#[test]
fn terraform_killed_mid_chain_leaves_a_record_for_every_object() {
    killed_chain(Victim::Terraform, "ret-tf");
}

/// `run` SIGKILLed while p3's wait runs: the same, once the next run waited out the killed run's claims.
#[test]
fn run_killed_mid_chain_leaves_a_record_for_every_object() {
    killed_chain(Victim::Run, "ret-run");
}

/// The names of the SSM parameters under `/<prefix>/` in moto, sorted.
fn parameters(prefix: &str) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (status, v) = rt.block_on(async {
        let answer = reqwest::Client::new()
            .post(format!("{}/", s3_endpoint()))
            .header("X-Amz-Target", "AmazonSSM.GetParametersByPath")
            .header("Content-Type", "application/x-amz-json-1.1")
            .header(
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=testing/20261202/us-east-1/ssm/aws4_request, SignedHeaders=host, Signature=0",
            )
            .body(serde_json::json!({ "Path": format!("/{prefix}"), "Recursive": true }).to_string())
            .send()
            .await
            .unwrap();
        let status = answer.status();
        (status, answer.json::<serde_json::Value>().await.unwrap())
    });
    assert!(
        status.is_success(),
        "moto's GetParametersByPath: {status} {v}"
    );
    let mut names: Vec<String> = v["Parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["Name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

/// With the real hashicorp/aws provider (protocol 5) on moto: terraform SIGKILLed after p1's
/// CreateParameter returned, while the next create sleeps; p1 has its record, and the next apply
/// creates only the rest, with no ParameterAlreadyExists.
#[test]
fn terraform_killed_after_an_aws_create_returned_leaves_its_record_and_the_next_apply_creates_only_the_rest()
 {
    let _turn = turn();
    let cdf = Cdftest::new(true);
    let root = Root::new("door-aws-chain", "ret-aws", &Records::Local);
    let prefix = testkit::unique_bucket("ret-aws");
    let endpoint = s3_endpoint();
    let vars = |wait_ms: u32| {
        vec![
            format!("-var=endpoint={endpoint}"),
            format!("-var=prefix={prefix}"),
            format!("-var=wait_ms={wait_ms}"),
        ]
    };
    let args = |verb: &[&str], wait_ms: u32| -> Vec<String> {
        let mut all: Vec<String> = verb.iter().map(|s| s.to_string()).collect();
        all.extend(vars(wait_ms));
        all
    };
    must(
        run(&root, &cdf, &[], &["init", "-input=false"])
            .output()
            .unwrap(),
        "run init",
    );
    let first = args(&["apply", "-auto-approve", "-input=false"], 120_000);
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let mut child = run(&root, &cdf, &[], &first)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let run_pid = child.id();
    // The wait's create is sleeping: p1's CreateParameter returned, p2's has not started.
    cdf.wait_for("ApplyResourceChange", "wait", Duration::from_secs(240));
    procs::kill_terraform_under(run_pid);
    procs::reap(&mut child, Duration::from_secs(60));

    assert_eq!(
        parameters(&prefix),
        [format!("/{prefix}/p1")],
        "the cloud after the kill"
    );
    let rec = root
        .record_at("aws_ssm_parameter.p1")
        .expect("p1 is in the cloud with no record");
    assert_eq!(
        rec["instance"]["attributes"]["name"].as_str(),
        Some(format!("/{prefix}/p1").as_str())
    );
    assert!(root.record_at("aws_ssm_parameter.p2").is_none());

    let next = args(&["apply", "-auto-approve", "-input=false"], 0);
    let next: Vec<&str> = next.iter().map(String::as_str).collect();
    let out = must(
        run(&root, &cdf, &["--wait=3m"], &next).output().unwrap(),
        "the next apply",
    );
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        !said.contains("already exists") && !said.contains("ParameterAlreadyExists"),
        "{said}"
    );
    assert_eq!(
        parameters(&prefix),
        [format!("/{prefix}/p1"), format!("/{prefix}/p2")],
        "exactly the two planned parameters"
    );
    let plan = args(&["plan", "-detailed-exitcode", "-input=false"], 0);
    let plan: Vec<&str> = plan.iter().map(String::as_str).collect();
    let plan = run(&root, &cdf, &[], &plan).output().unwrap();
    assert_eq!(
        plan.status.code(),
        Some(0),
        "the plan after is not clean:\n{}\n{}",
        text(&plan.stdout),
        text(&plan.stderr)
    );
}
