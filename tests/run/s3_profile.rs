//! An s3 root whose backend block names a `profile` and an `assume_role`, kept as they are:
//! the record store takes its credentials from that profile and assumes that role (STS on
//! moto, seen through a proxy), and terraform, through the run's door, reads the same profile
//! name and assumes the role at the door.

use testkit as common;

use std::time::Duration;

use common::s3door::s3_root;
use common::tf::text;
use common::{latency_proxy, s3_authority, s3_peer};

/// Two terraform_data resources; the backend block with a profile and a role.
const ROOT: &str = r#"
terraform {
  backend "s3" {
    bucket      = "BUCKET"
    key         = "team/app.tfstate"
    region      = "us-east-1"
    profile     = "records"
    assume_role = {
      role_arn = "arn:aws:iam::123456789012:role/records"
    }
  }
}

resource "terraform_data" "a" {
  input = "a"
}

resource "terraform_data" "b" {
  input = "b"
}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_backend_blocks_profile_and_role_give_the_record_store_its_credentials() {
    let root = s3_root("s3profile", ROOT, false).await;
    let proxy = latency_proxy::start(s3_authority(), Duration::ZERO).await;
    // The user's credentials exist only under the profile the block names.
    let aws = tempfile::tempdir().unwrap();
    let (config, credentials) = (aws.path().join("config"), aws.path().join("credentials"));
    std::fs::write(&config, "[profile records]\nregion = us-east-1\n").unwrap();
    std::fs::write(
        &credentials,
        "[records]\naws_access_key_id = profilekey\naws_secret_access_key = profilesecret\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        root.root
            .run_cmd(args)
            .env("AWS_ENDPOINT_URL", &proxy.endpoint)
            .env("AWS_CONFIG_FILE", &config)
            .env("AWS_SHARED_CREDENTIALS_FILE", &credentials)
            .env_remove("AWS_ENDPOINT_URL_S3")
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("AWS_PROFILE")
            .env_remove("TF_WORKSPACE")
            .output()
            .unwrap()
    };
    for args in [
        &["init", "-input=false"][..],
        &["apply", "-auto-approve", "-input=false"],
    ] {
        let out = run(args);
        assert!(
            out.status.success(),
            "{args:?}: {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    // The store assumed the role, with the profile's credentials.
    let calls = proxy.take();
    let assumed = calls
        .iter()
        .filter(|c| c.action.as_deref() == Some("AssumeRole"))
        .count();
    assert!(assumed >= 1, "no AssumeRole reached moto");
    // Both records landed in the backend's own bucket; no stock state at the key.
    let store = s3_peer(&root.bucket).await;
    let keys: Vec<String> = choudoufu_live::store::list_all(&store, "")
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.key)
        .collect();
    for name in ["terraform_data.a", "terraform_data.b"] {
        assert!(
            keys.iter()
                .any(|k| k.starts_with("tofu-records/") && k.contains(name)),
            "{name} not recorded: {keys:?}"
        );
    }
    assert!(!keys.iter().any(|k| k == "team/app.tfstate"), "{keys:?}");
    // The next plan through run is clean.
    let plan = run(&["plan", "-input=false", "-detailed-exitcode"]);
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan.stderr));
}
