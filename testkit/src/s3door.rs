//! Roots whose backend is `s3`, for the S3 door's tests: no live.hcl, the backend's bucket a
//! fresh one on moto (set up as a record store), terraform run through `choudoufu-live run`.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use crate::cdftest::cli_config;
use crate::tf::{Root, terraform, text};
use crate::{s3_endpoint, s3_store};

/// The state key the roots' backend blocks use.
pub const KEY: &str = "team/app.tfstate";

/// An s3-backend root and its bucket.
pub struct S3Root {
    /// The root (its `run_cmd` is `choudoufu-live run -- terraform ...` in its folder).
    pub root: Root,
    /// The backend's bucket.
    pub bucket: String,
}

/// A root holding `main_tf` with `BUCKET` replaced by a fresh bucket on moto; `aws`: the real
/// hashicorp/aws provider from the mirror.
pub async fn s3_root(tag: &str, main_tf: &str, aws: bool) -> S3Root {
    let (_, bucket) = s3_store(tag).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("main.tf"),
        main_tf.replace("BUCKET", &bucket),
    )
    .unwrap();
    let cli = dir.path().join(".cli.tfrc");
    let config = if aws {
        cli_config(Path::new("/nonexistent"), true)
    } else {
        String::new()
    };
    std::fs::write(&cli, config).unwrap();
    S3Root {
        root: Root {
            dir,
            cli_config: cli,
            tf: terraform(),
        },
        bucket,
    }
}

impl S3Root {
    /// `choudoufu-live run -- terraform <args>`, with the user's AWS environment pointing at moto.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.root.run_cmd(args);
        c.env("AWS_ENDPOINT_URL_S3", s3_endpoint())
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .env_remove("TF_WORKSPACE");
        c
    }

    /// Run to the end.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// Run and insist on success.
    pub fn ok(&self, args: &[&str]) -> Output {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?} failed: {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        out
    }

    /// Start in the background, in its own process group.
    pub fn spawn(&self, args: &[&str]) -> Child {
        use std::os::unix::process::CommandExt;
        let mut c = self.cmd(args);
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        c.spawn().unwrap()
    }

    /// The stored input of `address` (a `terraform_data`) in the default workspace's estate, as `records show` reads it from the bucket on moto.
    pub fn stored_input(&self, address: &str) -> Option<String> {
        let out = self
            .root
            .cli(&["records", "show", address])
            .env("AWS_ENDPOINT_URL_S3", s3_endpoint())
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .output()
            .unwrap();
        let body: String = text(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        let record: serde_json::Value = serde_json::from_str(&body).ok()?;
        record["instance"]["attributes"]["input"]["value"]
            .as_str()
            .map(str::to_string)
    }
}
