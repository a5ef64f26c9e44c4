//! B6: a plan of one change in an estate of n `aws_ssm_parameter` (the real hashicorp/aws
//! 5.100.0 against moto behind the 20 ms-per-request proxy): stock terraform's full plan
//! against `run --refresh=cone`, the planned changes compared (`show -json`'s
//! `resource_changes`) and the provider's reads counted at the proxy.
//!
//! The estate is seeded fast: the parameters are made in moto directly (one boto3 process), and
//! the state is written once (stock's `terraform.tfstate`, pushed into `run`'s records with
//! one `state push -force`); no apply of n resources runs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};
use testkit::latency_proxy;
use testkit::tf::{Records, Root, text};

use crate::{LATENCY, host, tf};

const GET: &str = "AmazonSSM.GetParameter";

/// The CLI configuration that installs the AWS provider from the machine's mirror.
fn cli_text() -> String {
    format!(
        "provider_installation {{\n  filesystem_mirror {{\n    path    = \"{m}\"\n    include = [\"registry.terraform.io/hashicorp/aws\"]\n  }}\n  direct {{\n    exclude = [\"registry.terraform.io/hashicorp/aws\"]\n  }}\n}}\n",
        m = testkit::cdftest::AWS_MIRROR
    )
}

/// Run `body` in one boto3 process, with `ssm` a client of moto's SSM, `names` the n parameter
/// names `/<prefix>/p0` .. `p<n-1>`; `what` names it in the failure.
fn on_parameters(body: &str, prefix: &str, n: usize, what: &str) {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let script = format!(
        "import sys, boto3\nssm = boto3.client('ssm', endpoint_url=sys.argv[1], region_name='us-east-1', aws_access_key_id='testing', aws_secret_access_key='testing')\nnames = [f'/{{sys.argv[2]}}/p{{i}}' for i in range(int(sys.argv[3]))]\n{body}"
    );
    let out = Command::new(python)
        .args([
            "-c",
            &script,
            &testkit::s3_endpoint(),
            prefix,
            &n.to_string(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{what}: {}", text(&out.stderr));
}

/// Make `/<prefix>/p0` .. `p<n-1>` (value "v") in moto, in one boto3 process.
fn seed_parameters(prefix: &str, n: usize) {
    let body = "for name in names:\n    ssm.put_parameter(Name=name, Value='v', Type='String')\n";
    on_parameters(body, prefix, n, "seeding SSM");
}

/// Delete `/<prefix>/p0` .. `p<n-1>` from moto, ten to a request: moto's DescribeParameters,
/// which the provider's read of each parameter makes, walks every parameter it holds, so a
/// larger size's stock plan would otherwise pay for the smaller size's estate too.
fn delete_parameters(prefix: &str, n: usize) {
    let body =
        "for k in range(0, len(names), 10):\n    ssm.delete_parameters(Names=names[k:k + 10])\n";
    on_parameters(body, prefix, n, "deleting the SSM parameters");
}

/// The state of the n parameters as the provider reads them from moto.
fn state(prefix: &str, n: usize) -> Value {
    let instances: Vec<Value> = (0..n)
        .map(|i| {
            let name = format!("/{prefix}/p{i}");
            json!({
                "index_key": i,
                "schema_version": 0,
                "attributes": {
                    "allowed_pattern": "", "arn": format!("arn:aws:ssm:us-east-1:123456789012:parameter{name}"),
                    "data_type": "text", "description": "", "has_value_wo": null, "id": name,
                    "insecure_value": "v", "key_id": "", "name": name, "overwrite": null, "tags": {},
                    "tags_all": {}, "tier": "Standard", "type": "String", "value": null, "value_wo": null,
                    "value_wo_version": null, "version": 1
                },
                "sensitive_attributes": [
                    [{"type": "get_attr", "value": "value_wo"}],
                    [{"type": "get_attr", "value": "value"}]
                ],
                "private": "bnVsbA=="
            })
        })
        .collect();
    json!({
        "version": 4, "terraform_version": "1.11.4", "serial": 1,
        "lineage": uuid::Uuid::new_v4().to_string(), "outputs": {},
        "resources": [{
            "mode": "managed", "type": "aws_ssm_parameter", "name": "p",
            "provider": "provider[\"registry.terraform.io/hashicorp/aws\"]",
            "instances": instances
        }],
        "check_results": null
    })
}

/// What the plan `file` in `dir` changes: each entry's address and actions, and the values of every change that is not a no-op.
fn planned(dir: &Path, cli: &Path, file: &str) -> Vec<Value> {
    let out = tf(dir, cli, &["show", "-json", file]);
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    plan["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let actions = &c["change"]["actions"];
            if *actions == json!(["no-op"]) {
                json!({"address": c["address"], "actions": actions})
            } else {
                json!({"address": c["address"], "actions": actions, "before": c["change"]["before"], "after": c["change"]["after"]})
            }
        })
        .collect()
}

fn reads(calls: &[latency_proxy::Call]) -> usize {
    calls
        .iter()
        .filter(|c| c.target.as_deref() == Some(GET))
        .count()
}

/// B6 at n parameters: one row.
pub async fn b6(rows: &mut Vec<Value>, n: usize) {
    let proxy = latency_proxy::start(host(&testkit::s3_endpoint()), LATENCY).await;
    let run_id = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let prefix = format!("b6-{run_id}-{n}");
    let t = Instant::now();
    seed_parameters(&prefix, n);
    let state = serde_json::to_vec(&state(&prefix, n)).unwrap();
    // Stock: the fixture on terraform's local backend, its state written once.
    let stock = tempfile::tempdir().unwrap();
    let main = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("terraform-fixtures/cone_bench/main.tf"),
    )
    .unwrap()
    .replace("backend \"http\" {}", "");
    std::fs::write(stock.path().join("main.tf"), main).unwrap();
    let cli: PathBuf = stock.path().join(".cli.tfrc");
    std::fs::write(&cli, cli_text()).unwrap();
    std::fs::write(stock.path().join("terraform.tfstate"), &state).unwrap();
    tf(stock.path(), &cli, &["init", "-input=false"]);
    // run: the fixture on local records, the same state pushed once.
    let live = Root::new("cone_bench", &format!("b6-{n}"), &Records::Local);
    std::fs::write(&live.cli_config, cli_text()).unwrap();
    live.ok(&["init", "-input=false"]);
    let pushed = live.path().join("seed.tfstate");
    std::fs::write(&pushed, &state).unwrap();
    live.ok(&["state", "push", "-force", "seed.tfstate"]);
    let seeded = t.elapsed().as_secs_f64();
    let vars = [
        format!("endpoint={}", proxy.endpoint),
        format!("prefix={prefix}"),
        format!("n={n}"),
        "first=changed".to_string(),
    ];
    let plan = |out: &str| {
        let mut a = vec![
            "plan".to_string(),
            "-input=false".into(),
            format!("-out={out}"),
        ];
        for v in &vars {
            a.push("-var".into());
            a.push(v.clone());
        }
        a
    };
    // The first size also times the floor of any plan that reads nothing (stock's own plan
    // without a refresh) and the root's first cone plan after init; a larger one warms the root
    // with a targeted plan instead, so that `make bench` keeps to its 20 minutes.
    let detail = n <= crate::size(1000);
    let floor_s = detail.then(|| {
        let mut unrefreshed = plan("floor.tfplan");
        unrefreshed.push("-refresh=false".into());
        let t = Instant::now();
        tf(stock.path(), &cli, &crate::args(&unrefreshed));
        t.elapsed().as_secs_f64()
    });
    proxy.reset();
    let t = Instant::now();
    tf(stock.path(), &cli, &crate::args(&plan("stock.tfplan")));
    let stock_s = t.elapsed().as_secs_f64();
    let stock_reads = reads(&proxy.take());
    // The root's first plan after init asks the provider to validate its configuration; later
    // plans answer from the kept answers (docs/run.md, "A provider configuration is validated
    // once"). The row times a later one.
    let first = if detail {
        let t = Instant::now();
        let out = live.run_with(&["--refresh=cone"], &crate::args(&plan("cone.tfplan")));
        let cone_s = t.elapsed().as_secs_f64();
        let cone_reads = reads(&proxy.take());
        assert!(
            out.status.success(),
            "run --refresh=cone: {}",
            text(&out.stderr)
        );
        Some((cone_s, cone_reads))
    } else {
        let mut warm = plan("warm.tfplan");
        warm.push("-refresh=false".into());
        warm.push("-target=aws_ssm_parameter.p[0]".into());
        let out = live.run(&crate::args(&warm));
        assert!(
            out.status.success(),
            "the warming plan: {}",
            text(&out.stderr)
        );
        proxy.reset();
        None
    };
    let t = Instant::now();
    let again = live.run_with(&["--refresh=cone"], &crate::args(&plan("again.tfplan")));
    let again_s = t.elapsed().as_secs_f64();
    let again_reads = reads(&proxy.take());
    assert!(
        again.status.success(),
        "run --refresh=cone: {}",
        text(&again.stderr)
    );
    for l in text(&again.stderr)
        .lines()
        .filter(|l| l.contains("cone plan:"))
    {
        eprintln!("bench: B6/{n}: {l}");
    }
    let told = text(&again.stderr)
        .lines()
        .find(|l| l.contains("not refreshed (cone)"))
        .unwrap_or("")
        .trim()
        .to_string();
    let stock_changes = planned(stock.path(), &cli, "stock.tfplan");
    let same = stock_changes == planned(live.path(), &live.cli_config, "again.tfplan")
        && (first.is_none()
            || stock_changes == planned(live.path(), &live.cli_config, "cone.tfplan"));
    delete_parameters(&prefix, n);
    let ratio = again_s / stock_s;
    let first_said = first.map_or_else(
        || "not timed at this size (a targeted plan warmed the root)".to_string(),
        |(cone_s, cone_reads)| {
            format!(
                "{cone_s:.1} s, {:.2}x ({cone_reads} GetParameter)",
                cone_s / stock_s
            )
        },
    );
    let floor_said = floor_s.map_or_else(
        || "not timed at this size".to_string(),
        |f| format!("{f:.1} s"),
    );
    eprintln!(
        "bench: B6/{n}: stock {stock_s:.1} s ({stock_reads} GetParameter), cone {again_s:.1} s ({again_reads}), the root's first cone plan {first_said}, same changes {same}; stock's plan -refresh=false {floor_said}; seeded in {seeded:.0} s"
    );
    rows.push(json!({
        "id": format!("B6/{n}"),
        "what": format!("terraform plan of one change on {n} `aws_ssm_parameter` (the real hashicorp/aws 5.100.0 against moto, 20 ms per request): stock's full plan against `run --refresh=cone`, a root's later plan (s)"),
        "stock": [stock_s, stock_s, stock_s],
        "live": [again_s, again_s, again_s],
        "ratio": ratio,
        "goal": "<= 0.25",
        "met": ratio <= 0.25 && same,
        "note": format!("the root's first cone plan after init, before its provider's validation answers were kept: {first_said}; provider reads (GetParameter at the proxy): stock {stock_reads}, cone {again_reads}; the same resource_changes: {same}; run said \"{told}\"; stock's own plan -refresh=false (what any plan that reads nothing costs): {floor_said}; seeded in {seeded:.0} s (parameters made in moto directly, the state written once)"),
    }));
}

/// B6 alone (`CHOUDOUFU_BENCH_ONLY=B6`, sizes in `CHOUDOUFU_BENCH_B6_SIZES`, default 1000): its rows, printed.
pub async fn b6_alone() {
    let sizes: Vec<usize> = std::env::var("CHOUDOUFU_BENCH_B6_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![crate::size(1000)]);
    let mut rows = vec![];
    for n in sizes {
        b6(&mut rows, n).await;
    }
    println!("{}", serde_json::to_string_pretty(&rows).unwrap());
}
