//! The project's own provider, terraform-provider-cdftest (`testprovider/`): its binary, a
//! filesystem mirror and CLI config that install it, and its call log as the tests read it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The provider's source address, as a root's `required_providers` names it.
pub const SOURCE: &str = "choudoufu/cdftest";
/// Its version in the mirror.
pub const VERSION: &str = "0.1.0";
/// The real hashicorp/aws provider's filesystem mirror on these machines.
pub const AWS_MIRROR: &str = "/opt/tf-plugins";

/// The cargo profile [`bin`] builds with when the test binary sits in `target/release`, which
/// both `release` and `bench` (Cargo.toml's, which the bench binary is built in) write to.
static RELEASE_FOLDER_PROFILE: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Build the provider in cargo profile `profile` when the test binary sits in `target/release`
/// (the bench binary: `bench`, so the build reuses its dependencies); call before [`bin`].
pub fn release_folder_profile(profile: &'static str) {
    let _ = RELEASE_FOLDER_PROFILE.set(profile);
}

/// The built `terraform-provider-cdftest`: cargo builds it (once per test process) in the
/// profile folder beside the test binary's `deps/`, as `cargo build` does for the workspace.
pub fn bin() -> &'static Path {
    static BIN: LazyLock<PathBuf> = LazyLock::new(|| {
        let exe = std::env::current_exe().expect("the test binary's own path");
        let profile = exe
            .parent()
            .and_then(Path::parent)
            .expect("a test binary sits in <target>/<profile>/deps");
        let target = profile
            .parent()
            .expect("the profile folder sits in the target folder");
        let mut cargo = Command::new(option_env!("CARGO").unwrap_or("cargo"));
        cargo
            .args(["build", "--quiet", "-p", "testprovider", "--bin"])
            .arg("terraform-provider-cdftest")
            .arg("--target-dir")
            .arg(target)
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
        match profile.file_name().and_then(|n| n.to_str()) {
            Some("debug") => {}
            Some("release") => match RELEASE_FOLDER_PROFILE.get() {
                Some(profile) => {
                    cargo.args(["--profile", profile]);
                }
                None => {
                    cargo.arg("--release");
                }
            },
            Some(other) => {
                cargo.args(["--profile", other]);
            }
            None => panic!("no profile folder above {}", exe.display()),
        }
        let status = cargo
            .status()
            .expect("run cargo to build the test provider");
        assert!(
            status.success(),
            "cargo build -p testprovider failed: {status}"
        );
        let bin = profile.join("terraform-provider-cdftest");
        assert!(bin.is_file(), "{} is not built", bin.display());
        bin
    });
    &BIN
}

/// Lay out a filesystem mirror under `dir` holding a copy of the provider binary; its root.
pub fn mirror(dir: &Path) -> PathBuf {
    let platform = dir
        .join("registry.terraform.io")
        .join(SOURCE)
        .join(VERSION)
        .join("linux_amd64");
    std::fs::create_dir_all(&platform).unwrap();
    let to = platform.join(format!("terraform-provider-cdftest_v{VERSION}"));
    std::fs::copy(bin(), &to).unwrap();
    dir.to_path_buf()
}

/// A CLI config installing choudoufu/* from `mirror` (and, with `aws`, hashicorp/aws from
/// [`AWS_MIRROR`]), nothing else from the network.
pub fn cli_config(mirror: &Path, aws: bool) -> String {
    let mut text = format!(
        "provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    include = [\"registry.terraform.io/choudoufu/*\"]\n  }}\n",
        mirror.display()
    );
    let mut exclude = vec!["\"registry.terraform.io/choudoufu/*\""];
    if aws {
        let aws_bin = Path::new(AWS_MIRROR).join(
            "registry.terraform.io/hashicorp/aws/5.100.0/linux_amd64/terraform-provider-aws_v5.100.0_x5",
        );
        assert!(
            aws_bin.is_file(),
            "the real hashicorp/aws provider is not at {}: these tests need it",
            aws_bin.display()
        );
        text.push_str(&format!(
            "  filesystem_mirror {{\n    path    = \"{AWS_MIRROR}\"\n    include = [\"registry.terraform.io/hashicorp/aws\"]\n  }}\n"
        ));
        exclude.push("\"registry.terraform.io/hashicorp/aws\"");
    }
    text.push_str(&format!(
        "  direct {{\n    exclude = [{}]\n  }}\n}}\n",
        exclude.join(", ")
    ));
    text
}

/// The provider set up for one test: a mirror and CLI config, a call log and an objects folder.
pub struct Cdftest {
    /// Holds the mirror, the log and the objects.
    pub dir: tempfile::TempDir,
    /// The CLI config file (`TF_CLI_CONFIG_FILE`).
    pub cli_config: PathBuf,
    /// The call log (`CDFTEST_CALL_LOG`).
    pub call_log: PathBuf,
    /// The objects folder (`CDFTEST_OBJECTS`): one `<id>.json` per thing, the "cloud".
    pub objects: PathBuf,
}

impl Cdftest {
    /// A fresh mirror, CLI config (with the AWS mirror too when `aws`), empty log and objects.
    pub fn new(aws: bool) -> Cdftest {
        let dir = tempfile::tempdir().unwrap();
        let mirror = mirror(&dir.path().join("mirror"));
        let config = dir.path().join("cli.tfrc");
        std::fs::write(&config, cli_config(&mirror, aws)).unwrap();
        let objects = dir.path().join("objects");
        std::fs::create_dir(&objects).unwrap();
        Cdftest {
            call_log: dir.path().join("calls.jsonl"),
            cli_config: config,
            objects,
            dir,
        }
    }

    /// Point `cmd` (terraform, or `choudoufu-live run`) at this provider: its CLI config, log and objects.
    /// `choudoufu-live run OPTS -- terraform ARGS` in `root`, with this provider's environment.
    pub fn run_cmd<S: AsRef<str>>(
        &self,
        root: &crate::tf::Root,
        opts: &[&str],
        args: &[S],
    ) -> Command {
        let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
        let mut c = root.run_cmd_with(opts, &args);
        self.env(&mut c);
        c
    }

    pub fn env<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("CDFTEST_CALL_LOG", &self.call_log)
            .env("CDFTEST_OBJECTS", &self.objects)
            .env("CHECKPOINT_DISABLE", "1")
    }

    /// The calls logged so far.
    pub fn calls(&self) -> Vec<ProviderCall> {
        read_calls(&self.call_log)
    }

    /// The things in the "cloud" (the objects folder), by name.
    pub fn objects(&self) -> Vec<Value> {
        let mut out: Vec<Value> = std::fs::read_dir(&self.objects)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .map(|e| serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap())
            .collect();
        out.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        out
    }

    /// Wait until the log shows `rpc` started for the thing `name`.
    pub fn wait_for(&self, rpc: &str, name: &str, limit: Duration) {
        let started = Instant::now();
        while !self
            .calls()
            .iter()
            .any(|c| c.rpc == rpc && c.name.as_deref() == Some(name) && c.phase == Phase::Start)
        {
            assert!(
                started.elapsed() < limit,
                "no {rpc} of {name} started within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Where a logged call stood.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// It arrived.
    Start,
    /// It was answered.
    End,
    /// It was stopped before its answer.
    Cancelled,
}

/// One line of the call log.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderCall {
    /// The provider process.
    pub pid: u32,
    /// Seconds since the Unix epoch.
    pub t: f64,
    /// The RPC, e.g. `ApplyResourceChange`.
    pub rpc: String,
    /// The resource type, for resource calls.
    pub type_name: Option<String>,
    /// The thing's `name`, when the call carried one.
    pub name: Option<String>,
    /// Start, end or cancelled.
    pub phase: Phase,
}

/// Every call in a call log, in the order written (a missing log: none).
pub fn read_calls(path: &Path) -> Vec<ProviderCall> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("cannot read the call log {}: {e}", path.display()),
    };
    text.lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("call log line {line:?}: {e}"));
            let s = |k: &str| v[k].as_str().map(str::to_string);
            ProviderCall {
                pid: v["pid"].as_u64().expect("pid") as u32,
                t: v["t"].as_f64().expect("t"),
                rpc: s("rpc").expect("rpc"),
                type_name: s("type"),
                name: s("name"),
                phase: match v["phase"].as_str() {
                    Some("start") => Phase::Start,
                    Some("end") => Phase::End,
                    Some("cancelled") => Phase::Cancelled,
                    other => panic!("call log phase {other:?}"),
                },
            }
        })
        .collect()
}

/// The calls of `rpc` that started, for the thing `name` (any thing: `None`).
pub fn started<'a>(
    calls: &'a [ProviderCall],
    rpc: &'a str,
    name: Option<&'a str>,
) -> impl Iterator<Item = &'a ProviderCall> + 'a {
    calls.iter().filter(move |c| {
        c.rpc == rpc && c.phase == Phase::Start && (name.is_none() || c.name.as_deref() == name)
    })
}
