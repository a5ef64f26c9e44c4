//! Pairs of AWS objects of one type created in one apply through the provider door, with the
//! real hashicorp/aws 5.100.0 provider on moto: each object's `tofu-address`, read back with
//! boto3, names the address terraform saved it under, round after round. The pairs differ only
//! where one plan knows a value the other leaves unknown or null (a name and a name prefix,
//! tags and none, a VPC and none), which is where a loose match swapped them.

use testkit as common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::s3_endpoint;
use common::tf::{Root, text, turn};
use serde_json::Value;

use crate::aws_door::{aws_vars, mirror_root, with};

/// A copy of the markers_pairs root on local records, on the mirror, initialised.
pub fn pairs_root(estate: &str) -> Root {
    mirror_root("markers_pairs", estate)
}

/// The root's variables: moto's endpoint, the objects' name prefix and which pairs it holds.
pub fn pair_vars(prefix: &str, kinds: &[&str]) -> Vec<String> {
    aws_vars(prefix, "kinds", kinds)
}

/// Every live object of the pairs boto3 finds for `prefix` (estate `estate` for those named by no prefix): `(address it must carry, its tags)`.
pub fn live_pairs(prefix: &str, estate: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let script = r#"
import json, sys, boto3
endpoint, prefix, estate = sys.argv[1], sys.argv[2], sys.argv[3]
kw = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
s3, sqs, ec2, iam = (boto3.client(n, **kw) for n in ("s3", "sqs", "ec2", "iam"))
out = []
def which(name):
    if name == prefix + "-named":
        return "named"
    if name.startswith(prefix + "-p-"):
        return "prefixed"
    if name == prefix + "-lead":
        return "lead"
    if name.startswith(prefix + "-t-"):
        return "trail"
    return None
tagmap = lambda ts: {t["Key"]: t["Value"] for t in ts or []}
for b in s3.list_buckets()["Buckets"]:
    w = which(b["Name"])
    if w:
        try:
            ts = s3.get_bucket_tagging(Bucket=b["Name"])["TagSet"]
        except s3.exceptions.ClientError:
            ts = []
        out.append(("aws_s3_bucket." + w, tagmap(ts)))
for url in sqs.list_queues(QueueNamePrefix=prefix).get("QueueUrls", []):
    w = which(url.rsplit("/", 1)[1])
    if w:
        out.append(("aws_sqs_queue." + w, sqs.list_queue_tags(QueueUrl=url).get("Tags", {})))
for g in ec2.describe_security_groups()["SecurityGroups"]:
    w = which(g["GroupName"])
    if w:
        out.append(("aws_security_group." + w, tagmap(g.get("Tags"))))
for a in ec2.describe_addresses()["Addresses"]:
    ts = tagmap(a.get("Tags"))
    if ts.get("tofu-estate") == estate or ts.get("prefix") == prefix:
        out.append(("aws_eip." + ("tagged" if ts.get("role") == "tagged" else "untagged"), ts))
for g in ec2.describe_internet_gateways()["InternetGateways"]:
    ts = tagmap(g.get("Tags"))
    if ts.get("tofu-estate") == estate:
        out.append(("aws_internet_gateway." + ("attached" if g.get("Attachments") else "detached"), ts))
for p in iam.list_policies(Scope="Local")["Policies"]:
    w = which(p["PolicyName"])
    if w:
        out.append(("aws_iam_policy." + w, tagmap(iam.list_policy_tags(PolicyArn=p["Arn"])["Tags"])))
print(json.dumps(out))
"#;
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let out = Command::new(python)
        .args(["-c", script, &s3_endpoint(), prefix, estate])
        .output()
        .unwrap();
    assert!(out.status.success(), "boto3: {}", text(&out.stderr));
    let seen: Vec<(String, BTreeMap<String, String>)> =
        serde_json::from_slice(&out.stdout).unwrap();
    seen.into_iter()
        .map(|(a, t)| (format!("{a}[0]"), t))
        .collect()
}

/// How many rounds of create and destroy: `CHOUDOUFU_MARKER_ROUNDS`, else 2 (`make reliability` runs more).
fn rounds() -> usize {
    std::env::var("CHOUDOUFU_MARKER_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(2)
}

#[test]
fn pairs_created_together_each_carry_their_own_address_round_after_round() {
    let _turn = turn();
    let prefix = common::aws_objects::unique("pr");
    let estate = format!("e-{prefix}");
    let root = pairs_root(&estate);
    let v = pair_vars(&prefix, &["s3", "sqs", "sg", "eip", "igw", "iam", "order"]);
    let mut wrong = Vec::new();
    for round in 0..rounds() {
        let out = root.run(&with(&["apply", "-auto-approve", "-input=false"], &v));
        let err = text(&out.stderr);
        assert!(
            out.status.success(),
            "round {round}: {}\n{err}",
            text(&out.stdout)
        );
        // Each create call carried its own address: none had to be put right after the apply.
        if err.contains("re-marked") {
            wrong.push(format!("round {round}: the apply re-marked objects: {err}"));
        }
        let seen = live_pairs(&prefix, &estate);
        let mut addresses: Vec<&str> = seen.iter().map(|(a, _)| a.as_str()).collect();
        addresses.sort();
        assert_eq!(
            addresses,
            [
                "aws_eip.tagged[0]",
                "aws_eip.untagged[0]",
                "aws_iam_policy.named[0]",
                "aws_iam_policy.prefixed[0]",
                "aws_internet_gateway.attached[0]",
                "aws_internet_gateway.detached[0]",
                "aws_s3_bucket.lead[0]",
                "aws_s3_bucket.named[0]",
                "aws_s3_bucket.prefixed[0]",
                "aws_s3_bucket.trail[0]",
                "aws_security_group.named[0]",
                "aws_security_group.prefixed[0]",
                "aws_sqs_queue.named[0]",
                "aws_sqs_queue.prefixed[0]",
            ],
            "round {round}: one of each, each marked for this estate: {seen:?}"
        );
        for (address, tags) in &seen {
            assert_eq!(
                tags.get("tofu-estate"),
                Some(&estate),
                "{address}: {tags:?}"
            );
            assert_eq!(tags.get("owner").map(String::as_str), Some("tests"));
            if tags.get("tofu-address").map(String::as_str) != Some(address.as_str()) {
                wrong.push(format!(
                    "round {round}: {address} carries tofu-address={:?}",
                    tags.get("tofu-address")
                ));
            }
        }
        let plan = root.run(&with(&["plan", "-detailed-exitcode", "-input=false"], &v));
        assert_eq!(
            plan.status.code(),
            Some(0),
            "round {round}: the next plan is clean: {}\n{}",
            text(&plan.stdout),
            text(&plan.stderr)
        );
        let out = root.run(&with(&["destroy", "-auto-approve", "-input=false"], &v));
        assert!(
            out.status.success(),
            "round {round}: {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        assert!(
            wrong.is_empty(),
            "markers naming another address: {wrong:#?}"
        );
    }
}

#[test]
fn rules_without_tags_apply_clean_through_the_door_and_their_tags_stay_null() {
    let _turn = turn();
    let prefix = common::aws_objects::unique("rl");
    let estate = format!("e-{prefix}");
    let root = pairs_root(&estate);
    let v = pair_vars(&prefix, &["sg"]);
    let out = root.run(&with(&["apply", "-auto-approve", "-input=false"], &v));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("inconsistent result"), "{stderr}");
    // The state holds the rules' tags as the provider gives them without markers: null.
    let state = root.run(&["show", "-json"]);
    assert!(state.status.success(), "{}", text(&state.stderr));
    let state: Value = serde_json::from_slice(&state.stdout).unwrap();
    let resources = state["values"]["root_module"]["resources"]
        .as_array()
        .unwrap();
    for rule in [
        "aws_vpc_security_group_ingress_rule.https[0]",
        "aws_vpc_security_group_egress_rule.all[0]",
    ] {
        let r = resources
            .iter()
            .find(|r| r["address"] == rule)
            .unwrap_or_else(|| panic!("{rule} not in the state"));
        assert_eq!(r["values"]["tags"], Value::Null, "{rule}: {}", r["values"]);
        assert!(
            r["values"]["tags_all"].get("tofu-address").is_none(),
            "{rule}: {}",
            r["values"]
        );
    }
    let plan = root.run(&with(&["plan", "-detailed-exitcode", "-input=false"], &v));
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{}\n{}",
        text(&plan.stdout),
        text(&plan.stderr)
    );
    let out = root.run(&with(&["destroy", "-auto-approve", "-input=false"], &v));
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}
