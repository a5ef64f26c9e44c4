//! Live markers through the provider door, with the real hashicorp/aws provider 5.100.0 (a
//! filesystem mirror) against moto: each create carries `tofu-estate` and `tofu-address` in
//! its own call, terraform never sees them, and the next plan is clean. What is live is read
//! with boto3, not through our code. Run under `scripts/with-moto` (or `with-peers`).

use testkit as common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::cdftest::cli_config;
use common::tf::{Records, Root, text, turn};
use serde_json::Value;

/// moto's endpoint; a loud failure outside `scripts/with-moto`.
fn moto() -> String {
    std::env::var("CHOUDOUFU_TEST_S3_ENDPOINT")
        .expect("run under scripts/with-moto: CHOUDOUFU_TEST_S3_ENDPOINT names moto")
}

/// A copy of the markers_aws root on local records, on the mirror, initialised.
fn aws_root(estate: &str) -> Root {
    let root = Root::new("markers_aws", estate, &Records::Local);
    std::fs::write(
        &root.cli_config,
        cli_config(Path::new("/nonexistent"), true),
    )
    .unwrap();
    root.ok(&["init", "-input=false"]);
    root
}

fn vars(prefix: &str, objects: &[&str]) -> Vec<String> {
    let set: Vec<String> = objects.iter().map(|o| format!("\"{o}\"")).collect();
    vec![
        "-var".into(),
        format!("endpoint={}", moto()),
        "-var".into(),
        format!("prefix={prefix}"),
        "-var".into(),
        format!("objects=[{}]", set.join(",")),
    ]
}

fn args<'a>(first: &[&'a str], rest: &'a [String]) -> Vec<&'a str> {
    let mut all = first.to_vec();
    all.extend(rest.iter().map(String::as_str));
    all
}

/// What boto3 sees live under `prefix`: the parameter's tags, and each bucket's and role's name and tags.
fn live(prefix: &str) -> Value {
    let script = r#"
import json, sys, boto3
endpoint, prefix = sys.argv[1], sys.argv[2]
kw = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
ssm, s3, iam = boto3.client("ssm", **kw), boto3.client("s3", **kw), boto3.client("iam", **kw)
out = {"params": {}, "buckets": {}, "roles": {}}
for p in ssm.describe_parameters(ParameterFilters=[{"Key": "Name", "Option": "BeginsWith", "Values": ["/" + prefix + "/"]}])["Parameters"]:
    tags = ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId=p["Name"])["TagList"]
    out["params"][p["Name"]] = {t["Key"]: t["Value"] for t in tags}
for b in s3.list_buckets()["Buckets"]:
    if b["Name"].startswith(prefix + "-"):
        try:
            tags = s3.get_bucket_tagging(Bucket=b["Name"])["TagSet"]
        except s3.exceptions.ClientError:
            tags = []
        out["buckets"][b["Name"]] = {t["Key"]: t["Value"] for t in tags}
for r in iam.list_roles()["Roles"]:
    if r["RoleName"].startswith(prefix + "-"):
        tags = iam.list_role_tags(RoleName=r["RoleName"])["Tags"]
        out["roles"][r["RoleName"]] = {t["Key"]: t["Value"] for t in tags}
print(json.dumps(out))
"#;
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let out = Command::new(python)
        .args(["-c", script, &moto(), prefix])
        .output()
        .unwrap();
    assert!(out.status.success(), "boto3: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The tags of each object of `kind` (params, buckets, roles).
fn tags(live: &Value, kind: &str) -> Vec<BTreeMap<String, String>> {
    live[kind]
        .as_object()
        .unwrap()
        .values()
        .map(|t| serde_json::from_value(t.clone()).unwrap())
        .collect()
}

#[test]
fn creates_through_the_door_carry_the_markers_and_the_next_plan_is_clean() {
    let _turn = turn();
    let prefix = common::aws_objects::unique("mk");
    let estate = format!("e-{prefix}");
    let root = aws_root(&estate);
    let v = vars(&prefix, &["p", "b", "r"]);
    // A bucket a gone run marked for this estate, at an address no record names.
    let ghost = format!("gh-{prefix}");
    make_bucket(
        &ghost,
        &[
            ("tofu-estate", estate.as_str()),
            ("tofu-address", "aws_s3_bucket.ghost"),
        ],
    );
    let out = root.run(&args(&["apply", "-auto-approve", "-input=false"], &v));
    let err = text(&out.stderr);
    assert!(out.status.success(), "{}\n{err}", text(&out.stdout));
    // It is warned about after the apply, and kept.
    assert!(
        err.contains(&format!("unrecorded marked object arn:aws:s3:::{ghost}"))
            && err.contains("it was not deleted"),
        "{err}"
    );
    assert!(bucket_exists(&ghost), "the unrecorded bucket was deleted");
    let seen = live(&prefix);
    for (kind, address) in [
        ("params", "aws_ssm_parameter.p[\"p\"]"),
        ("buckets", "aws_s3_bucket.b[\"b\"]"),
        ("roles", "aws_iam_role.r[\"r\"]"),
    ] {
        let all = tags(&seen, kind);
        assert_eq!(all.len(), 1, "one of {kind}: {seen}");
        let t = &all[0];
        assert_eq!(t.get("tofu-estate"), Some(&estate), "{kind}: {t:?}");
        assert_eq!(
            t.get("tofu-address").map(String::as_str),
            Some(address),
            "{kind}: {t:?}"
        );
        // The user's default_tags ride along: merged, not replaced.
        assert_eq!(
            t.get("owner").map(String::as_str),
            Some("tests"),
            "{kind}: {t:?}"
        );
    }
    assert_eq!(
        tags(&seen, "params")[0].get("team").map(String::as_str),
        Some("db")
    );
    // Terraform never saw the markers: not in its state, and the next plan is clean.
    let shown = root
        .cli(&["records", "show", "aws_iam_role.r[\"r\"]"])
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    assert!(
        !text(&shown.stdout).contains("tofu-"),
        "the record holds a marker: {}",
        text(&shown.stdout)
    );
    let plan = root.run(&args(&["plan", "-detailed-exitcode", "-input=false"], &v));
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{}\n{}",
        text(&plan.stdout),
        text(&plan.stderr)
    );
}

/// `markers = false` in the live block: the create carries the user's tags and no marker.
#[test]
fn markers_false_in_the_live_block_leaves_creates_unmarked() {
    let _turn = turn();
    let prefix = common::aws_objects::unique("mkoff");
    let root = Root::new("markers_aws", &format!("e-{prefix}"), &Records::Local);
    let live_hcl = root.path().join("live.hcl");
    let text_of = std::fs::read_to_string(&live_hcl).unwrap();
    std::fs::write(
        &live_hcl,
        text_of.replacen("live {\n", "live {\n  markers = false\n", 1),
    )
    .unwrap();
    std::fs::write(
        &root.cli_config,
        cli_config(Path::new("/nonexistent"), true),
    )
    .unwrap();
    root.ok(&["init", "-input=false"]);
    let v = vars(&prefix, &["p"]);
    let out = root.run(&args(&["apply", "-auto-approve", "-input=false"], &v));
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let seen = live(&prefix);
    let params = tags(&seen, "params");
    assert_eq!(params.len(), 1, "{seen}");
    assert_eq!(params[0].get("team").map(String::as_str), Some("db"));
    assert!(
        params[0].keys().all(|k| !k.starts_with("tofu-")),
        "markers = false, and the create was marked: {:?}",
        params[0]
    );
}

/// A bucket made by hand with `tags`, as a gone run's create would have left it.
fn make_bucket(name: &str, tags: &[(&str, &str)]) {
    let script = r#"
import json, sys, boto3
endpoint, name, tags = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
s3.create_bucket(Bucket=name)
s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]})
"#;
    let tags: BTreeMap<&str, &str> = tags.iter().copied().collect();
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let out = Command::new(python)
        .args([
            "-c",
            script,
            &moto(),
            name,
            &serde_json::to_string(&tags).unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "boto3: {}", text(&out.stderr));
}

/// Whether the bucket `name` exists.
fn bucket_exists(name: &str) -> bool {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    Command::new(python)
        .args([
            "-c",
            "import sys, boto3; boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1', aws_access_key_id='testing', aws_secret_access_key='testing').head_bucket(Bucket=sys.argv[2])",
            &moto(),
            name,
        ])
        .output()
        .unwrap()
        .status
        .success()
}

/// A name as the provider makes one from `prefix` (26 characters after it, so the import reads `prefix` back).
fn generated(prefix: &str, n: u32) -> String {
    format!("{prefix}-{n:026}")
}

const BUCKET: &str = "aws_s3_bucket.b[\"b\"]";

#[test]
fn one_marked_object_is_bound_and_two_are_a_collision_with_nothing_created() {
    let _turn = turn();
    let prefix = common::aws_objects::unique("bd");
    let estate = format!("e-{prefix}");
    let root = aws_root(&estate);
    let v = vars(&prefix, &["b"]);
    // Two objects carry the bucket's markers: CollisionError naming both, nothing created.
    let (one, two) = (generated(&prefix, 1), generated(&prefix, 2));
    for name in [&one, &two] {
        make_bucket(
            name,
            &[("tofu-estate", estate.as_str()), ("tofu-address", BUCKET)],
        );
    }
    let out = root.run(&args(&["apply", "-auto-approve", "-input=false"], &v));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{}\n{err}", text(&out.stdout));
    assert!(err.contains("CollisionError"), "{err}");
    for name in [&one, &two] {
        assert!(err.contains(&format!("arn:aws:s3:::{name}")), "{err}");
    }
    assert_eq!(live(&prefix)["buckets"].as_object().unwrap().len(), 2);
    // One of them gone: the other is bound, not a second one created, and recorded.
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"))
        .args([
            "-c",
            "import sys, boto3; boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1', aws_access_key_id='testing', aws_secret_access_key='testing').delete_bucket(Bucket=sys.argv[2])",
            &moto(),
            &two,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = root.run(&args(&["apply", "-auto-approve", "-input=false"], &v));
    let err = text(&out.stderr);
    assert!(out.status.success(), "{}\n{err}", text(&out.stdout));
    assert!(
        err.contains(&format!(
            "bound {BUCKET} to the live object arn:aws:s3:::{one}"
        )),
        "{err}"
    );
    let buckets = live(&prefix)["buckets"].clone();
    assert_eq!(
        buckets.as_object().unwrap().keys().collect::<Vec<_>>(),
        [&one],
        "exactly the bound bucket: {buckets}"
    );
    let shown = root.cli(&["records", "show", BUCKET]).output().unwrap();
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    assert!(text(&shown.stdout).contains(&one));
    let plan = root.run(&args(&["plan", "-detailed-exitcode", "-input=false"], &v));
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{}\n{}",
        text(&plan.stdout),
        text(&plan.stderr)
    );
}

/// Every living descendant of `pid`.
fn descendants(pid: u32) -> Vec<u32> {
    let parent_of = |p: u32| -> Option<u32> {
        let s = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        let after = &s[s.rfind(')')? + 2..];
        let mut fields = after.split(' ');
        let state = fields.next()?;
        (state != "Z").then_some(())?;
        fields.next()?.parse().ok()
    };
    let mut all = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if parent_of(child) == Some(parent) {
                all.push(child);
                frontier.push(child);
            }
        }
    }
    all
}

fn kill(pid: u32) {
    use nix::sys::signal::{Signal, kill};
    let _ = kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGKILL);
}

/// Whether every object of `kind` under `prefix` carries a `tofu-address` marker, and there is one.
fn marked(seen: &Value, kind: &str) -> bool {
    let all = tags(seen, kind);
    all.len() == 1 && all[0].contains_key("tofu-address")
}

#[test]
fn a_run_killed_during_server_named_creates_is_bound_by_the_next_run_not_duplicated() {
    let _turn = turn();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // Every provider request passes a proxy that holds it 1.5 s: a create's reads after its
    // create and tag requests take seconds, so a kill once both objects are marked lands
    // while the bucket's create call (about ten reads after its tagging) has not returned.
    let upstream = moto().trim_start_matches("http://").to_string();
    let proxy = rt.block_on(common::latency_proxy::start(
        upstream,
        std::time::Duration::from_millis(1500),
    ));
    let prefix = common::aws_objects::unique("kl");
    let estate = format!("e-{prefix}");
    let root = aws_root(&estate);
    let mut slow = vars(&prefix, &["b", "r"]);
    slow[1] = format!("endpoint={}", proxy.endpoint);
    let mut child = root
        .run_cmd(&args(&["apply", "-auto-approve", "-input=false"], &slow))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let run_pid = child.id();
    let start = std::time::Instant::now();
    loop {
        let seen = live(&prefix);
        if marked(&seen, "buckets") && marked(&seen, "roles") {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(240),
            "the bucket and the role never came up marked: {seen}"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "run ended before both objects were made: {seen}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let family = descendants(run_pid);
    kill(run_pid);
    let _ = child.wait();
    let killed = std::time::Instant::now();
    let mut left = family;
    while !left.is_empty() && killed.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(100));
        left.retain(|p| Path::new(&format!("/proc/{p}")).exists());
    }
    left.iter().for_each(|p| kill(*p));
    let bucket_record = root.cli(&["records", "show", BUCKET]).output().unwrap();
    assert!(
        !bucket_record.status.success(),
        "the bucket's create had returned before the kill: the test did not kill during it"
    );

    // The next run takes over the dead run's claims, binds what it made, creates nothing.
    let v = vars(&prefix, &["b", "r"]);
    let out = root.run_with(
        &["--wait=3m"],
        &args(&["apply", "-auto-approve", "-input=false"], &v),
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{}\n{err}", text(&out.stdout));
    assert!(!err.contains("already exists"), "{err}");
    assert!(
        err.contains(&format!("bound {BUCKET} to the live object")),
        "{err}"
    );
    let seen = live(&prefix);
    assert_eq!(tags(&seen, "buckets").len(), 1, "one bucket: {seen}");
    assert_eq!(tags(&seen, "roles").len(), 1, "one role: {seen}");
    let bucket = seen["buckets"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let role = seen["roles"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    for (address, name) in [(BUCKET, &bucket), ("aws_iam_role.r[\"r\"]", &role)] {
        let shown = root.cli(&["records", "show", address]).output().unwrap();
        assert!(shown.status.success(), "{address}: {}", text(&shown.stderr));
        assert!(text(&shown.stdout).contains(name.as_str()), "{address}");
    }
    let listed = root.cli(&["records", "ls"]).output().unwrap();
    let listed = text(&listed.stdout);
    assert_eq!(
        listed.lines().filter(|l| l.contains("aws_")).count(),
        2,
        "one record each: {listed}"
    );
    let plan = root.run(&args(&["plan", "-detailed-exitcode", "-input=false"], &v));
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{}\n{}",
        text(&plan.stdout),
        text(&plan.stderr)
    );
}
