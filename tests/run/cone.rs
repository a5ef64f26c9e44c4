//! The change cone (`run --refresh=cone`) with the real hashicorp/aws 5.100.0 provider on moto:
//! five aws_ssm_parameter, every SSM call counted through a proxy on the way to moto. One root
//! and one story, so the claims cost one set of AWS provider processes (`make test` budget):
//! a cone plan reads only its cone from the cloud, plans a changed resource against the cloud's
//! values and leaves drift outside the cone unseen (and says so); the saved cone plan is stamped
//! and applied like any other; a full plan sees every drift; the maximum age brings an old
//! record back into the cone. Run under `scripts/with-moto` (or `with-peers`).

use testkit as common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::latency_proxy::{self, Call};
use common::tf::{Records, Root, text, turn};

const MIRROR: &str = "/opt/tf-plugins";
const GET: &str = "AmazonSSM.GetParameter";

/// A copy of the cone_aws root on local records, its CLI configuration on the mirror, initialised through `run`.
fn cone_root(estate: &str) -> Root {
    let root = Root::new("cone_aws", estate, &Records::Local);
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

/// Terraform's arguments `verb`, then the root's variables: SSM at `endpoint`, names under `prefix`, p[i] = `values[i]`.
fn args(verb: &[&str], endpoint: &str, prefix: &str, values: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
    let mut all: Vec<String> = verb.iter().map(|s| s.to_string()).collect();
    for v in [
        format!("endpoint={endpoint}"),
        format!("prefix={prefix}"),
        format!("values=[{}]", quoted.join(",")),
    ] {
        all.push("-var".into());
        all.push(v);
    }
    all
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Overwrite the parameter `name` in moto behind terraform's back (drift).
fn drift(rt: &tokio::runtime::Runtime, name: &str, value: &str) {
    let url = format!("http://{}/", common::s3_authority());
    let body =
        serde_json::json!({ "Name": name, "Value": value, "Type": "String", "Overwrite": true })
            .to_string();
    rt.block_on(async move {
        let answer = reqwest::Client::new()
            .post(url)
            .header("X-Amz-Target", "AmazonSSM.PutParameter")
            .header("Content-Type", "application/x-amz-json-1.1")
            .header(
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=testing/20261202/us-east-1/ssm/aws4_request, SignedHeaders=host, Signature=0",
            )
            .body(body)
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success(), "moto's PutParameter: {}", answer.status());
    });
}

/// Whether terraform's plan output `said` plans `was -> now` for insecure_value.
fn plans(said: &str, was: &str, now: &str) -> bool {
    said.lines().any(|l| {
        l.trim_start().starts_with("~ insecure_value")
            && l.contains(&format!("\"{was}\" -> \"{now}\""))
    })
}

fn reads(calls: &[Call]) -> usize {
    calls
        .iter()
        .filter(|c| c.target.as_deref() == Some(GET))
        .count()
}

#[test]
fn a_cone_plan_reads_its_cone_plans_a_change_against_the_cloud_and_ages_records_back_in() {
    assert!(
        Path::new(MIRROR).is_dir(),
        "the real hashicorp/aws provider mirror is not under {MIRROR}: this test needs it"
    );
    let _turn = turn();
    let started = Instant::now();
    let rt = common::runtime();
    let prefix = common::unique_bucket("cone");
    let root = cone_root("cone");
    let counted = rt.block_on(latency_proxy::start(common::s3_authority(), Duration::ZERO));
    let at = counted.endpoint.clone();
    let first = ["a0", "a1", "a2", "a3"];
    root.ok(&strs(&args(
        &["apply", "-auto-approve", "-input=false"],
        &at,
        &prefix,
        &first,
    )));
    // p[1] and p[3] drift in the cloud; the plan changes p[1] only.
    drift(&rt, &format!("/{prefix}/p1"), "drift1");
    drift(&rt, &format!("/{prefix}/p3"), "drift3");
    let second = ["a0", "b1", "a2", "a3"];
    counted.take();
    let cone = root.run_with(
        &["--refresh=cone"],
        &strs(&args(
            &["plan", "-input=false", "-out=cone.tfplan"],
            &at,
            &prefix,
            &second,
        )),
    );
    let cone_calls = counted.take();
    let (said, err) = (text(&cone.stdout), text(&cone.stderr));
    assert!(cone.status.success(), "{said}\n{err}");
    eprintln!("cone test: the cone plan at {:?}", started.elapsed());
    // The changed resource is planned against the cloud's value, not its record's.
    assert!(plans(&said, "drift1", "b1"), "{said}\n{err}");
    // Drift outside the cone is not seen, and the plan says so.
    assert!(!said.contains("drift3"), "{said}\n{err}");
    assert!(
        err.contains("3 resources not refreshed (cone); `--refresh=full` refreshes all"),
        "{err}"
    );
    // The saved cone plan is stamped like any other.
    assert!(
        root.path().join("cone.tfplan.live-stamp").is_file(),
        "the saved cone plan has no stamp: {err}"
    );
    // A full plan sees every drift: p[3]'s too.
    let full = root.run(&strs(&args(
        &["plan", "-input=false"],
        &at,
        &prefix,
        &second,
    )));
    let full_calls = counted.take();
    let said = text(&full.stdout);
    assert!(full.status.success(), "{}", text(&full.stderr));
    assert!(!text(&full.stderr).contains("not refreshed (cone)"));
    assert!(plans(&said, "drift3", "a3"), "{said}");
    eprintln!("cone test: the full plan at {:?}", started.elapsed());
    // The cone plan's reads: its cone (p[1], which changes, and d, which depends on resource p),
    // two of the five the full plan read; p[1] once only, though its drift made the plan again.
    let (cone_reads, full_reads) = (reads(&cone_calls), reads(&full_calls));
    assert!(
        full_reads >= 5 && cone_reads * 5 <= full_reads * 2 && cone_reads >= 1,
        "GetParameter: {cone_reads} in the cone plan, {full_reads} in the full plan"
    );
    // Past the maximum age a record is back in the cone: p[3]'s drift is seen by a cone plan.
    let live = root.path().join("live.hcl");
    let hcl = std::fs::read_to_string(&live).unwrap();
    std::fs::write(
        &live,
        hcl.replacen("live {", "live {\n  refresh_max_age = \"1s\"", 1),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let aged = root.run_with(
        &["--refresh=cone"],
        &strs(&args(&["plan", "-input=false"], &at, &prefix, &second)),
    );
    let said = text(&aged.stdout);
    assert!(aged.status.success(), "{}", text(&aged.stderr));
    assert!(
        plans(&said, "drift3", "a3"),
        "{said}\n{}",
        text(&aged.stderr)
    );
    eprintln!("cone test: {:?}", started.elapsed());
}
