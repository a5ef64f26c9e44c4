//! A bind never takes what another address holds, and markers are kept right, with the real
//! hashicorp/aws 5.100.0 provider on moto through the provider door: a bucket whose marker names
//! an address it is not recorded under is not bound there and is re-marked; a `moved` address
//! is re-marked after the apply; a security group whose create was killed before its default
//! egress rule was revoked is bound as tainted and replaced, so the re-run ends with one group
//! and one egress rule. What is live is read with boto3. A test leaves its objects in moto (their
//! names unique to it), which the test run throws away: a closing destroy would prove nothing a
//! test here claims, and cost a run with the AWS provider.

use testkit as common;

use std::time::{Duration, Instant};

use common::tf::{text, turn};
use common::{procs, s3_authority};
use serde_json::Value;

use crate::aws_door::{boto3, with};
use crate::door_pairs::{live_pairs, pair_vars, pairs_root};

/// The `tofu-address` tag of bucket `name`, if it has one.
fn bucket_address(name: &str) -> Option<String> {
    let tags = boto3(
        "ts = s3.get_bucket_tagging(Bucket=sys.argv[2])['TagSet']\nprint(json.dumps({t['Key']: t['Value'] for t in ts}))",
        &[name],
    );
    tags["tofu-address"].as_str().map(str::to_string)
}

/// Set bucket `name`'s `tofu-address` tag to `address`, its other tags kept (as a wrong marker left it).
fn mark_bucket(name: &str, address: &str) {
    boto3(
        "ts = [t for t in s3.get_bucket_tagging(Bucket=sys.argv[2])['TagSet'] if t['Key'] != 'tofu-address']\nts.append({'Key': 'tofu-address', 'Value': sys.argv[3]})\ns3.put_bucket_tagging(Bucket=sys.argv[2], Tagging={'TagSet': ts})\nprint('{}')",
        &[name, address],
    );
}

/// The names of the live buckets under `prefix`.
fn buckets(prefix: &str) -> Vec<String> {
    let seen = boto3(
        "print(json.dumps(sorted(b['Name'] for b in s3.list_buckets()['Buckets'] if b['Name'].startswith(sys.argv[2] + '-'))))",
        &[prefix],
    );
    serde_json::from_value(seen).unwrap()
}

fn clean_plan(root: &common::tf::Root, v: &[String]) -> String {
    let plan = root.run(&with(&["plan", "-detailed-exitcode", "-input=false"], v));
    assert_eq!(
        plan.status.code(),
        Some(0),
        "the next plan is clean: {}\n{}",
        text(&plan.stdout),
        text(&plan.stderr)
    );
    text(&plan.stderr)
}

fn destroy(root: &common::tf::Root, v: &[String]) {
    let out = root.run(&with(&["destroy", "-auto-approve", "-input=false"], v));
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn a_marked_object_another_address_holds_is_never_bound_and_its_marker_is_put_right() {
    let _turn = turn();
    let prefix = common::aws_objects::unique("wm");
    let estate = format!("e-{prefix}");
    let root = pairs_root(&estate);
    let v = pair_vars(&prefix, &["s3"]);
    root.ok(&with(&["apply", "-auto-approve", "-input=false"], &v));
    let named = format!("{prefix}-named");
    // The prefixed bucket is forgotten and gone; the named bucket, which the record of
    // aws_s3_bucket.named[0] holds, carries the prefixed bucket's marker, as a swap left it.
    root.ok(&["state", "rm", "aws_s3_bucket.prefixed[0]"]);
    for gone in buckets(&prefix).iter().filter(|b| **b != named) {
        boto3("s3.delete_bucket(Bucket=sys.argv[2])\nprint('{}')", &[gone]);
    }
    mark_bucket(&named, "aws_s3_bucket.prefixed[0]");

    let out = root.run(&with(&["apply", "-auto-approve", "-input=false"], &v));
    let err = text(&out.stderr);
    assert!(out.status.success(), "{}\n{err}", text(&out.stdout));
    assert!(
        err.contains(&format!(
            "arn:aws:s3:::{named} carries the markers of aws_s3_bucket.prefixed[0], but the record of aws_s3_bucket.named[0] holds it"
        )),
        "{err}"
    );
    assert!(!err.contains("bound aws_s3_bucket.prefixed[0]"), "{err}");
    // The named bucket lives on under its own marker; the prefixed bucket was created anew.
    let live = buckets(&prefix);
    assert_eq!(live.len(), 2, "{live:?}");
    assert!(live.contains(&named), "{live:?}");
    assert_eq!(
        bucket_address(&named).as_deref(),
        Some("aws_s3_bucket.named[0]")
    );
    for (address, tags) in live_pairs(&prefix, &estate) {
        assert_eq!(
            tags.get("tofu-address"),
            Some(&address),
            "{address}: {tags:?}"
        );
    }
    let plan_err = clean_plan(&root, &v);
    assert!(!plan_err.contains("unrecorded"), "{plan_err}");
}

#[test]
fn a_moved_address_is_re_marked_after_the_apply() {
    let _turn = turn();
    let prefix = common::aws_objects::unique("mv");
    let estate = format!("e-{prefix}");
    let root = pairs_root(&estate);
    let v = pair_vars(&prefix, &["s3"]);
    root.ok(&with(&["apply", "-auto-approve", "-input=false"], &v));
    let named = format!("{prefix}-named");
    assert_eq!(
        bucket_address(&named).as_deref(),
        Some("aws_s3_bucket.named[0]")
    );
    let main = root.path().join("main.tf");
    let config = std::fs::read_to_string(&main).unwrap();
    let moved = config.replace(
        "resource \"aws_s3_bucket\" \"named\" {",
        "moved {\n  from = aws_s3_bucket.named\n  to   = aws_s3_bucket.kept\n}\n\nresource \"aws_s3_bucket\" \"kept\" {",
    );
    assert_ne!(config, moved);
    std::fs::write(&main, moved).unwrap();

    let out = root.run(&with(&["apply", "-auto-approve", "-input=false"], &v));
    let err = text(&out.stderr);
    assert!(out.status.success(), "{}\n{err}", text(&out.stdout));
    assert!(
        err.contains(&format!(
            "re-marked arn:aws:s3:::{named}: its tofu-address named aws_s3_bucket.named[0], and the record of aws_s3_bucket.kept[0] holds it"
        )),
        "{err}"
    );
    assert_eq!(
        bucket_address(&named).as_deref(),
        Some("aws_s3_bucket.kept[0]")
    );
    let plan_err = clean_plan(&root, &v);
    assert!(!plan_err.contains("unrecorded"), "{plan_err}");
    assert!(!plan_err.contains("re-marked"), "{plan_err}");
}

/// The security groups of `prefix`, each with its egress rules (`[protocol, cidr]`).
fn groups(prefix: &str) -> Value {
    boto3(
        r#"
out = {}
for g in ec2.describe_security_groups()["SecurityGroups"]:
    if g["GroupName"].startswith(sys.argv[2] + "-"):
        rules = ec2.describe_security_group_rules(Filters=[{"Name": "group-id", "Values": [g["GroupId"]]}])["SecurityGroupRules"]
        out[g["GroupName"]] = sorted([r["IpProtocol"], r.get("CidrIpv4", "")] for r in rules if r["IsEgress"])
print(json.dumps(out))
"#,
        &[prefix],
    )
}

#[test]
fn a_kill_during_a_security_groups_create_converges_with_one_group_and_one_egress_rule() {
    let _turn = turn();
    let rt = common::runtime();
    // The groups' RevokeSecurityGroupEgress (the last step of their create, which takes AWS's
    // default allow-all egress rule away) is held, so the kill lands with each group made and
    // marked, its default egress rule still on it, and its create not returned.
    let proxy = rt.block_on(common::latency_proxy::start_gated(
        s3_authority(),
        &["RevokeSecurityGroupEgress"],
    ));
    let prefix = common::aws_objects::unique("sk");
    let estate = format!("e-{prefix}");
    let root = pairs_root(&estate);
    let mut slow = pair_vars(&prefix, &["sg"]);
    slow[1] = format!("endpoint={}", proxy.endpoint);
    let mut child = root
        .run_cmd(&with(&["apply", "-auto-approve", "-input=false"], &slow))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let run_pid = child.id();
    let start = Instant::now();
    while proxy.arrived("RevokeSecurityGroupEgress") < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(240),
            "the groups' creates never reached their egress revoke"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "run ended before the groups were made"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let family = procs::descendants(run_pid);
    procs::sigkill(run_pid);
    let _ = child.wait();
    let killed = Instant::now();
    let mut left = family;
    while !left.is_empty() && killed.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
        left.retain(|p| procs::alive(*p));
    }
    left.iter().for_each(|p| procs::sigkill(*p));
    let named = format!("{prefix}-named");
    let seen = groups(&prefix);
    assert_eq!(
        seen[&named],
        serde_json::json!([["-1", "0.0.0.0/0"]]),
        "the killed group keeps AWS's default egress rule: {seen}"
    );
    assert!(root.record_at("aws_security_group.named[0]").is_none());

    let v = pair_vars(&prefix, &["sg"]);
    let out = root.run_with(
        &["--wait=3m"],
        &with(&["apply", "-auto-approve", "-input=false"], &v),
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{}\n{err}", text(&out.stdout));
    assert!(
        err.contains("bound aws_security_group.named[0] to the live object"),
        "{err}"
    );
    assert!(
        err.contains("aws_security_group.named[0] is bound as tainted"),
        "{err}"
    );
    let seen = groups(&prefix);
    let names: Vec<&String> = seen.as_object().unwrap().keys().collect();
    assert_eq!(names.len(), 2, "one named group and one prefixed: {seen}");
    assert_eq!(
        seen[&named],
        serde_json::json!([["-1", "0.0.0.0/0"]]),
        "one egress rule, terraform's: {seen}"
    );
    let rule = root
        .record_at("aws_vpc_security_group_egress_rule.all[0]")
        .unwrap_or_else(|| panic!("the egress rule has its record: {err}"));
    assert!(rule.to_string().contains("0.0.0.0/0"), "{rule}");
    clean_plan(&root, &v);
}

/// The KMS keys whose description starts with `prefix`: `{key ID: [its state, its tofu-address]}`.
fn keys(prefix: &str) -> Value {
    boto3(
        r#"
kms = boto3.client("kms", **kw)
out = {}
for k in kms.list_keys()["Keys"]:
    m = kms.describe_key(KeyId=k["KeyId"])["KeyMetadata"]
    if m.get("Description", "").startswith(sys.argv[2] + "-"):
        ts = {t["TagKey"]: t["TagValue"] for t in kms.list_resource_tags(KeyId=k["KeyId"]).get("Tags", [])}
        out[k["KeyId"]] = [m["KeyState"], ts.get("tofu-address")]
print(json.dumps(out))
"#,
        &[prefix],
    )
}

/// The IDs of the keys of `seen` ([`keys`]) in `state` that carry the marker of `address`.
fn keys_of(seen: &Value, state: &str, address: &str) -> Vec<String> {
    let mut ids: Vec<String> = seen
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| v[0] == state && v[1] == address)
        .map(|(id, _)| id.clone())
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_key_pending_deletion_is_never_bound_and_a_live_one_binds_by_the_providers_import_id() {
    let _turn = turn();
    let prefix = common::aws_objects::unique("km");
    let estate = format!("e-{prefix}");
    let root = pairs_root(&estate);
    let v = pair_vars(&prefix, &["kms"]);
    let apply = with(&["apply", "-auto-approve", "-input=false"], &v);
    root.ok(&apply);
    destroy(&root, &v);
    let seen = keys(&prefix);
    for address in ["aws_kms_key.named[0]", "aws_kms_key.prefixed[0]"] {
        assert_eq!(
            keys_of(&seen, "PendingDeletion", address).len(),
            1,
            "the destroy left {address}'s key pending deletion, marked: {seen}"
        );
    }

    // A key the cloud is deleting is not live: the next apply creates both again.
    let out = root.run(&apply);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{}\n{err}", text(&out.stdout));
    assert!(!err.contains("MarkedObjectNotBound"), "{err}");
    assert!(!err.contains("bound aws_kms_key"), "{err}");
    assert!(!err.contains("unrecorded marked object"), "{err}");
    assert!(
        err.contains("carries the markers of aws_kms_key.named[0], but the provider reads it as gone or being deleted"),
        "{err}"
    );
    let seen = keys(&prefix);
    for address in ["aws_kms_key.named[0]", "aws_kms_key.prefixed[0]"] {
        let live = keys_of(&seen, "Enabled", address);
        assert_eq!(live.len(), 1, "{address}: one live key: {seen}");
        let record = root
            .record_at(address)
            .unwrap_or_else(|| panic!("{address} has its record"));
        assert!(record.to_string().contains(&live[0]), "{address}: {record}");
    }

    // A live key whose record is gone is bound by the import ID the provider itself reads back
    // (KMS has no rule among the ARN's), as tainted, and replaced; the pending keys are left be.
    root.ok(&["state", "rm", "aws_kms_key.named[0]"]);
    let lost = keys_of(&seen, "Enabled", "aws_kms_key.named[0]").remove(0);
    let out = root.run(&apply);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{}\n{err}", text(&out.stdout));
    assert!(
        err.contains(&format!("(imported as {lost})")),
        "bound by the key's ID: {err}"
    );
    assert!(
        err.contains("aws_kms_key.named[0] is bound as tainted"),
        "{err}"
    );
    let seen = keys(&prefix);
    assert_eq!(
        seen[&lost][0], "PendingDeletion",
        "the bound key was replaced: {seen}"
    );
    let live = keys_of(&seen, "Enabled", "aws_kms_key.named[0]");
    assert_eq!(live.len(), 1, "one live key, not two: {seen}");
    let record = root.record_at("aws_kms_key.named[0]").unwrap();
    assert!(record.to_string().contains(&live[0]), "{record}");
    let plan_err = clean_plan(&root, &v);
    assert!(!plan_err.contains("unrecorded"), "{plan_err}");
}
