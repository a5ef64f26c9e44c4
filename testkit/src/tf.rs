//! Real terraform roots for tests: a copy of a fixture root, a live.hcl, and the binary under test.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Condvar, LazyLock, Mutex};
use std::time::{Duration, Instant};

/// Terraform-heavy tests take turns: a few at once (`CHOUDOUFU_TEST_TURNS`, default 2, one per
/// core of these machines), and a test that times itself or races a clock alone.
static TURNS: Mutex<Turns> = Mutex::new(Turns {
    shared: 0,
    alone: false,
    alone_waiting: 0,
});
static TURN_FREED: Condvar = Condvar::new();

/// Who holds turns now.
struct Turns {
    shared: usize,
    alone: bool,
    alone_waiting: usize,
}

/// A test's turn, given back when dropped.
pub struct Turn {
    alone: bool,
    asked: Instant,
    got: Instant,
}

impl Turn {
    fn new(alone: bool, asked: Instant) -> Turn {
        Turn {
            alone,
            asked,
            got: Instant::now(),
        }
    }

    /// With `CHOUDOUFU_TEST_TURN_LOG` set, one line appended to that file per turn: the test,
    /// `alone` or `shared`, the seconds it waited for its turn and the seconds it held it.
    fn log(&self) {
        let Some(path) = std::env::var_os("CHOUDOUFU_TEST_TURN_LOG") else {
            return;
        };
        let line = format!(
            "{}\t{}\t{:.1}\t{:.1}\n",
            std::thread::current().name().unwrap_or("?"),
            if self.alone { "alone" } else { "shared" },
            (self.got - self.asked).as_secs_f64(),
            self.got.elapsed().as_secs_f64(),
        );
        use std::io::Write;
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            eprintln!(
                "testkit: the turn log {} was not written: {e}",
                path.display()
            );
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.log();
        let mut turns = TURNS.lock().unwrap_or_else(|e| e.into_inner());
        if self.alone {
            turns.alone = false;
        } else {
            turns.shared -= 1;
        }
        TURN_FREED.notify_all();
    }
}

/// How many terraform-heavy tests may run at once.
fn shared_turns() -> usize {
    static N: LazyLock<usize> = LazyLock::new(|| {
        std::env::var("CHOUDOUFU_TEST_TURNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|n| *n > 0)
            .unwrap_or(2)
    });
    *N
}

/// Wait for this test's turn, shared with at most `CHOUDOUFU_TEST_TURNS - 1` others.
pub fn turn() -> Turn {
    let asked = Instant::now();
    let mut turns = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    // A test waiting to run alone goes first, so it is not starved.
    while turns.alone || turns.alone_waiting > 0 || turns.shared >= shared_turns() {
        turns = TURN_FREED.wait(turns).unwrap_or_else(|e| e.into_inner());
    }
    turns.shared += 1;
    Turn::new(false, asked)
}

/// Wait for a turn no other terraform-heavy test of this test binary shares (`make test` runs the
/// other binaries beside it): for a test whose assertions time it.
pub fn turn_alone() -> Turn {
    let asked = Instant::now();
    let mut turns = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    turns.alone_waiting += 1;
    while turns.alone || turns.shared > 0 {
        turns = TURN_FREED.wait(turns).unwrap_or_else(|e| e.into_inner());
    }
    turns.alone_waiting -= 1;
    turns.alone = true;
    Turn::new(true, asked)
}

/// The real terraform binary; a loud failure when it is missing.
pub fn terraform() -> String {
    match Command::new("terraform").arg("version").output() {
        Ok(o) if o.status.success() => "terraform".into(),
        _ => panic!(
            "terraform is not on PATH: these tests need the real terraform binary (1.11.4 ships on this machine kind); they do not pass without it"
        ),
    }
}

/// The binary under test: cargo builds it in the profile's folder, beside the `deps/` folder that
/// holds each test binary (where `CARGO_BIN_EXE_choudoufu-live` points, which only the package's
/// own tests can read, not a crate they depend on).
pub fn bin() -> &'static Path {
    static BIN: LazyLock<PathBuf> = LazyLock::new(|| {
        let exe = std::env::current_exe().expect("the test binary's own path");
        let profile = exe
            .parent()
            .and_then(Path::parent)
            .expect("a test binary sits in <target>/<profile>/deps");
        let bin = profile.join(format!("choudoufu-live{}", std::env::consts::EXE_SUFFIX));
        assert!(
            bin.is_file(),
            "{} is not built: run the tests with cargo test",
            bin.display()
        );
        bin
    });
    &BIN
}

/// Where records go for a root.
pub enum Records {
    Local,
    S3 { bucket: String, endpoint: String },
}

/// A terraform root in a temporary folder.
pub struct Root {
    pub dir: tempfile::TempDir,
    pub cli_config: PathBuf,
    pub tf: String,
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(&name));
        } else {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
}

impl Root {
    /// A copy of `terraform-fixtures/<fixture>` with its live.hcl for `estate` on `records`.
    pub fn new(fixture: &str, estate: &str, records: &Records) -> Root {
        Self::with_binary(fixture, estate, records, &terraform())
    }

    /// The same, run with another binary (tofu).
    pub fn with_binary(fixture: &str, estate: &str, records: &Records, tf: &str) -> Root {
        let dir = tempfile::tempdir().unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../terraform-fixtures")
            .join(fixture);
        copy_dir(&src, dir.path());
        let store = match records {
            Records::Local => {
                "  record_store \"local\" {\n    path = \".live-records\"\n  }\n".to_string()
            }
            Records::S3 { bucket, endpoint } => format!(
                "  record_store \"s3\" {{\n    bucket = \"{bucket}\"\n    region = \"us-east-1\"\n    endpoint = \"{endpoint}\"\n  }}\n"
            ),
        };
        std::fs::write(
            dir.path().join("live.hcl"),
            format!("live {{\n  estate = \"{estate}\"\n{store}}}\n"),
        )
        .unwrap();
        let cli_config = dir.path().join(".cli.tfrc");
        std::fs::write(&cli_config, "").unwrap();
        Root {
            dir,
            cli_config,
            tf: tf.to_string(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The record of `address` as `records show` prints it; none when the estate has no such record.
    pub fn record_at(&self, address: &str) -> Option<serde_json::Value> {
        let out = self.cli(&["records", "show", address]).output().unwrap();
        if !out.status.success() {
            return None;
        }
        let body: String = text(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        Some(serde_json::from_str(&body).unwrap())
    }

    /// `choudoufu-live <args>` in the root.
    pub fn cli(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(args)
            .current_dir(self.path())
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("TF_IN_AUTOMATION", "1")
            .env("NO_COLOR", "1")
            .env("CHOUDOUFU_PROGRAM_COMMIT", "test")
            .env("CHOUDOUFU_PROGRAM_TIME", "2026-11-30T00:00:00Z");
        c
    }

    /// `choudoufu-live run -- terraform <args>` as a command, not yet started.
    pub fn run_cmd(&self, args: &[&str]) -> Command {
        self.run_cmd_with(&[], args)
    }

    /// `choudoufu-live run <opts> -- terraform <args>` (e.g. `--wait=2m`), not yet started.
    pub fn run_cmd_with(&self, opts: &[&str], args: &[&str]) -> Command {
        let mut all = vec!["run"];
        all.extend_from_slice(opts);
        all.extend_from_slice(&["--", self.tf.as_str()]);
        all.extend_from_slice(args);
        let mut c = self.cli(&all);
        if args.iter().any(|a| {
            *a == "apply" || *a == "destroy" || *a == "plan" || *a == "refresh" || *a == "import"
        }) {
            c.arg("-no-color");
        }
        c
    }

    /// Run `choudoufu-live run -- terraform <args>` to the end.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_cmd(args).output().unwrap()
    }

    /// Run and insist on success.
    pub fn ok(&self, args: &[&str]) -> Output {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{:?} failed: {}\n{}",
            args,
            text(&out.stdout),
            text(&out.stderr)
        );
        out
    }

    /// Run `choudoufu-live run <opts> -- terraform <args>` to the end.
    pub fn run_with(&self, opts: &[&str], args: &[&str]) -> Output {
        self.run_cmd_with(opts, args).output().unwrap()
    }

    /// Start a run in the background, in its own process group.
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.spawn_with(&[], args)
    }

    /// Start `choudoufu-live run <opts> -- terraform <args>` in the background, in its own process group.
    pub fn spawn_with(&self, opts: &[&str], args: &[&str]) -> Child {
        use std::os::unix::process::CommandExt;
        let mut c = self.run_cmd_with(opts, args);
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        c.spawn().unwrap()
    }

    /// init, then apply everything once, quickly.
    pub fn init_and_apply(&self) {
        self.ok(&["init", "-input=false"]);
        self.ok(&["apply", "-auto-approve", "-input=false"]);
    }

    /// The stored `input` value of `terraform_data.<name>`, or None when it has no record.
    pub fn stored_input(&self, name: &str) -> Option<String> {
        self.record(name)?["instance"]["attributes"]["input"]["value"]
            .as_str()
            .map(str::to_string)
    }

    /// The stored record of `terraform_data.<name>` as JSON.
    pub fn record(&self, name: &str) -> Option<serde_json::Value> {
        self.record_at(&format!("terraform_data.{name}"))
    }
}

/// `out` itself when its command succeeded; else a panic naming `what`, with its status and output.
pub fn must(out: std::process::Output, what: &str) -> std::process::Output {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Wait for a child with a deadline.
pub fn wait(child: Child, limit: Duration) -> Output {
    let started = Instant::now();
    let pid = child.id();
    let out = std::thread::spawn(move || child.wait_with_output().unwrap());
    while !out.is_finished() {
        if started.elapsed() > limit {
            kill_group(pid);
            panic!("a run took longer than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    out.join().unwrap()
}

/// SIGKILL a whole process group (a run started with [`Root::spawn`]: the wrapper, terraform, provisioners).
pub fn kill_group(pgid: u32) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    killpg(Pid::from_raw(pgid as i32), Signal::SIGKILL).expect("kill the run's process group");
}

/// The `start`/`end` times a trace file holds for `name`.
pub fn interval(trace: &Path, name: &str) -> (f64, f64) {
    let t = std::fs::read_to_string(trace).unwrap_or_default();
    let find = |what: &str| {
        t.lines()
            .rev()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                match (w.next(), w.next(), w.next()) {
                    (Some(n), Some(k), Some(ts)) if n == name && k == what => {
                        ts.parse::<f64>().ok()
                    }
                    _ => None,
                }
            })
            .next()
            .unwrap_or_else(|| panic!("no {name} {what} in trace:\n{t}"))
    };
    (find("start"), find("end"))
}

/// One provider call a fixture's `local-exec` noted: `NAME start TIME VALUE` and `NAME end TIME`.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub name: String,
    pub value: String,
    pub start: f64,
    pub end: Option<f64>,
}

/// The provider calls in a calls file (the claims fixture's `calls_file`), in the order they started.
pub fn calls(file: &Path) -> Vec<Call> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut out: Vec<Call> = Vec::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            [name, "start", t, value @ ..] => out.push(Call {
                name: name.to_string(),
                value: value.join(" "),
                start: t.parse().unwrap(),
                end: None,
            }),
            [name, "end", t] => {
                if let Some(c) = out
                    .iter_mut()
                    .rev()
                    .find(|c| c.name == *name && c.end.is_none())
                {
                    c.end = Some(t.parse().unwrap());
                }
            }
            _ => {}
        }
    }
    out.sort_by(|a, b| a.start.total_cmp(&b.start));
    out
}

/// Wait until the calls file shows `name` started (a run is in its provider call).
pub fn wait_for_call(file: &Path, name: &str, limit: Duration) {
    let started = Instant::now();
    while !calls(file).iter().any(|c| c.name == name) {
        assert!(
            started.elapsed() < limit,
            "no provider call of {name} within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `apply -auto-approve -input=false` with `-var k=v` for each pair.
pub fn apply_args(vars: &[(&str, &str)]) -> Vec<String> {
    let mut a: Vec<String> = ["apply", "-auto-approve", "-input=false"]
        .map(String::from)
        .to_vec();
    for (k, v) in vars {
        a.push("-var".into());
        a.push(format!("{k}={v}"));
    }
    a
}

/// Borrow each argument, for `Root::run` and friends.
pub fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}
