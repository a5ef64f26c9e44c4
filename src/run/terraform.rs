//! Terraform's child processes: their environment, the signals passed on, the provider door, `show -json`, and the private folder for temporary plans.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::Command;

use super::error::RunError;
use super::signals::{Caught, Signals};
use crate::engine::plan::{Plan, PlanJsonError};
use crate::frontdoor::provider::cone::Records;
use crate::frontdoor::provider::launch::die_with_parent;
use crate::frontdoor::provider::marking::Marking;
use crate::frontdoor::provider::used_types::StateSource;
use crate::frontdoor::provider::{Door, DoorError};
use crate::frontdoor::state_server::StateServer as Server;

/// Point terraform's backend at this run's server, with the run's credentials (and none of the user's that would override them).
pub fn child_env(cmd: &mut Command, server: &Server) {
    for var in server.cleared_env() {
        cmd.env_remove(var);
    }
    cmd.envs(server.terraform_env());
}

/// The terraform commands that call providers and so go through the provider door (never `init`).
pub const DOOR_COMMANDS: &[&str] = &["plan", "apply", "destroy", "refresh", "import"];

/// The provider door of one run, opened by the first command that calls providers and kept to the end.
pub struct DoorCell {
    root: PathBuf,
    marking: Option<Marking>,
    /// Where the door reads the state terraform is served (the types it names stay in the schema answer).
    state: StateSource,
    door: tokio::sync::OnceCell<Door>,
}

impl DoorCell {
    /// A door for the root at `root`, not yet open; with `marking`, it handles that estate's live markers.
    pub fn new(root: PathBuf, marking: Option<Marking>) -> Arc<DoorCell> {
        Arc::new(DoorCell {
            root,
            marking,
            state: StateSource::default(),
            door: tokio::sync::OnceCell::new(),
        })
    }

    async fn open(&self) -> Result<&Door, DoorError> {
        self.door
            .get_or_try_init(|| Door::open(&self.root, self.marking.clone(), self.state.clone()))
            .await
    }
}

impl std::fmt::Debug for DoorCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DoorCell")
            .field("root", &self.root)
            .field("open", &self.door.initialized())
            .finish()
    }
}

/// One terraform program and its global options (`-chdir=DIR`).
#[derive(Clone, Debug)]
pub struct Terraform {
    /// The program: terraform or tofu.
    pub program: String,
    /// The options before the subcommand.
    pub global: Vec<String>,
    /// The provider door, unless it is off.
    pub door: Option<Arc<DoorCell>>,
}

impl Terraform {
    /// The door's environment for the command `args` (the subcommand first): none unless it calls providers.
    async fn door_env(&self, args: &[String]) -> Result<Vec<(&'static str, String)>, RunError> {
        let Some(cell) = &self.door else {
            return Ok(Vec::new());
        };
        if !args
            .first()
            .is_some_and(|sub| DOOR_COMMANDS.contains(&sub.as_str()))
        {
            return Ok(Vec::new());
        }
        let door = cell.open().await?;
        Ok(door
            .env()
            .into_iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect())
    }

    /// The door reads the state terraform is served from `records` from now on.
    pub fn serve_state_from(&self, records: Records) {
        if let Some(cell) = &self.door
            && let Ok(mut source) = cell.state.lock()
        {
            *source = Some(records);
        }
    }

    /// The provider door, once open.
    pub fn door(&self) -> Option<&Door> {
        self.door.as_ref().and_then(|c| c.door.get())
    }

    /// Open the door now, unless it is off or open already.
    pub async fn open_door(&self) -> Result<(), RunError> {
        if let Some(cell) = &self.door {
            cell.open().await?;
        }
        Ok(())
    }

    /// Refuse a plan that uses a provider the door does not proxy (nothing to check when it is off or unused).
    pub fn check_plan_providers(&self, plan: &Plan) -> Result<(), RunError> {
        if let Some(door) = self.door.as_ref().and_then(|c| c.door.get()) {
            door.check_plan(plan)?;
        }
        Ok(())
    }

    /// Run `program [global] args` against `server`, its input and output passed through.
    ///
    /// SIGINT reaches terraform from the terminal too: it stops gracefully and saves its state,
    /// and this waits. SIGTERM is passed on.
    pub async fn run(
        &self,
        args: &[String],
        server: &Server,
        env: &[(&str, &str)],
        signals: &Signals,
    ) -> Result<ExitStatus, RunError> {
        self.run_with(args, server, env, signals, Stdout::Inherit)
            .await
    }

    /// [`Terraform::run`], its standard output passed through as `stdout` says.
    pub async fn run_with(
        &self,
        args: &[String],
        server: &Server,
        env: &[(&str, &str)],
        signals: &Signals,
        stdout: Stdout,
    ) -> Result<ExitStatus, RunError> {
        Ok(self.run_inner(args, server, env, signals, stdout).await?.0)
    }

    /// [`Terraform::run`], its standard output held and given back with its status.
    pub async fn run_held(
        &self,
        args: &[String],
        server: &Server,
        env: &[(&str, &str)],
        signals: &Signals,
    ) -> Result<(ExitStatus, Vec<u8>), RunError> {
        self.run_inner(args, server, env, signals, Stdout::Held)
            .await
    }

    async fn run_inner(
        &self,
        args: &[String],
        server: &Server,
        env: &[(&str, &str)],
        signals: &Signals,
        stdout: Stdout,
    ) -> Result<(ExitStatus, Vec<u8>), RunError> {
        let running = self.start(args, server, env, stdout).await?;
        self.wait(running, signals).await
    }

    /// Start `program [global] args` against `server`, its output passed through as `stdout` says; dropping the process before [`Terraform::wait`] ends kills it.
    pub async fn start(
        &self,
        args: &[String],
        server: &Server,
        env: &[(&str, &str)],
        stdout: Stdout,
    ) -> Result<Running, RunError> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.global)
            .args(args)
            .stdin(Stdio::inherit())
            .stdout(match stdout {
                Stdout::Inherit => Stdio::inherit(),
                Stdout::Rewritten(_) | Stdout::Held => Stdio::piped(),
            })
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        child_env(&mut cmd, server);
        for (k, v) in env {
            cmd.env(k, v);
        }
        for (k, v) in self.door_env(args).await? {
            cmd.env(k, v);
        }
        // A killed run stops its terraform: terraform is asked to stop as at an interrupt.
        die_with_parent(&mut cmd, Signal::SIGTERM);
        let mut child = cmd.spawn().map_err(|source| RunError::Start {
            program: self.program.clone(),
            source,
        })?;
        let copy = match (stdout, child.stdout.take()) {
            (Stdout::Rewritten(rewrite), Some(out)) => Some(tokio::spawn(async move {
                copy_lines(out, rewrite).await;
                Vec::new()
            })),
            (Stdout::Held, Some(out)) => Some(tokio::spawn(hold(out))),
            _ => None,
        };
        Ok(Running { child, copy })
    }

    /// Wait for a started process to end, the run's signals passed on; its status, and its output when held.
    ///
    /// SIGINT reaches terraform from the terminal too: it stops gracefully and saves its state,
    /// and this waits. SIGTERM is passed on.
    pub async fn wait(
        &self,
        running: Running,
        signals: &Signals,
    ) -> Result<(ExitStatus, Vec<u8>), RunError> {
        let Running { mut child, copy } = running;
        loop {
            tokio::select! {
                status = child.wait() => {
                    let mut held = Vec::new();
                    if let Some(copy) = copy {
                        // A process terraform left behind may hold the pipe open: its output is not waited for long.
                        if let Ok(Ok(out)) = tokio::time::timeout(std::time::Duration::from_secs(5), copy).await {
                            held = out;
                        }
                    }
                    let status = status?;
                    use std::os::unix::process::ExitStatusExt;
                    if let Some(signal) = status.signal() {
                        let name = Signal::try_from(signal).map_or_else(|_| signal.to_string(), |s| s.as_str().to_string());
                        super::say::terraform_killed(&self.program, &name, self.door().is_some());
                    }
                    return Ok((status, held));
                }
                caught = signals.next() => match caught {
                    Caught::Interrupt => {
                        tracing::info!("interrupt: waiting for {} to stop", self.program);
                    }
                    Caught::Terminate => {
                        if let Some(pid) = child.id() {
                            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
                        }
                    }
                },
            }
        }
    }

    /// `terraform show -json PLAN`: the plan, parsed (it reads no state).
    pub async fn show_json(&self, plan: &Path) -> Result<Plan, RunError> {
        let abs = std::fs::canonicalize(plan).map_err(|source| RunError::File {
            what: format!("cannot read the plan {}", plan.display()),
            source,
        })?;
        let out = self
            .show_command(&abs)
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|source| RunError::Start {
                program: format!("{} show", self.program),
                source,
            })?;
        self.shown(plan, out)
    }

    /// The command `terraform show -json ABS` (`abs`: the plan's absolute path), through the door when it is open.
    pub(super) fn show_command(&self, abs: &Path) -> Command {
        let mut cmd = Command::new(&self.program);
        // Through an open door, the providers' schemas come from its kept answers: no plugin starts.
        if let Some(door) = self.door() {
            cmd.envs(door.env());
        }
        cmd.args(self.global.iter().filter(|a| a.contains("chdir=")))
            .args(["show", "-json"])
            .arg(abs)
            // `show` of a plan file reads no state; an address that answers nothing keeps it that way.
            .env(
                "TF_HTTP_ADDRESS",
                "http://127.0.0.1:9/choudoufu-live-show-reads-no-state",
            );
        cmd
    }

    /// The plan a finished `show -json` of `plan` printed, or what it said when it failed.
    pub(super) fn shown(&self, plan: &Path, out: std::process::Output) -> Result<Plan, RunError> {
        if !out.status.success() {
            return Err(RunError::Show(format!(
                "{} show -json {} failed: {}",
                self.program,
                plan.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Plan::from_slice(&out.stdout).map_err(|e| match e {
            PlanJsonError::NotJson(e) => {
                RunError::Show(format!("{} show -json gave no JSON: {e}", self.program))
            }
            malformed => RunError::PlanJson(malformed),
        })
    }
}

/// A terraform process started by [`Terraform::start`], and the task copying its output; dropped before it ended, it is killed.
pub struct Running {
    child: tokio::process::Child,
    copy: Option<tokio::task::JoinHandle<Vec<u8>>>,
}

/// How terraform's standard output reaches the user.
#[derive(Clone, Copy, Debug)]
pub enum Stdout {
    /// Straight through: terraform writes to this process's stdout.
    Inherit,
    /// Line by line through this process, each line `rewrite` answers replaced by its answer.
    Rewritten(fn(&str) -> Option<String>),
    /// Held whole by this process, and given back ([`Terraform::run_held`]); its errors and input pass through.
    Held,
}

/// Copy terraform's output to stdout line by line, rewriting as `rewrite` says; a stdout that fails still drains terraform's.
async fn copy_lines(out: tokio::process::ChildStdout, rewrite: fn(&str) -> Option<String>) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut reader = BufReader::new(out);
    let mut to = tokio::io::stdout();
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let rewritten = std::str::from_utf8(&line).ok().and_then(rewrite);
        let bytes = rewritten.as_ref().map_or(&line[..], |new| new.as_bytes());
        // A stdout that fails (its reader gone) must not stop terraform: its output is still drained.
        let _ = to.write_all(bytes).await;
        let _ = to.flush().await;
    }
}

/// Read terraform's output whole (what it wrote before a failed read is kept).
async fn hold(mut out: tokio::process::ChildStdout) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut held = Vec::new();
    if let Err(e) = out.read_to_end(&mut held).await {
        tracing::warn!(error = %e, "terraform's output could not be read to its end");
    }
    held
}

/// Terraform's exit status as a number (128 + the signal when it was killed).
pub fn code(status: ExitStatus) -> i32 {
    match status.code() {
        Some(code) => code,
        None => {
            use std::os::unix::process::ExitStatusExt;
            128 + status.signal().unwrap_or(0)
        }
    }
}

const PLAN_DIR_PREFIX: &str = "choudoufu-live-plan-";

/// A folder only this user can read (0700) for the run's temporary plans, removed when dropped.
///
/// A plan file holds the values terraform will apply, secrets included. Folders that killed
/// runs left are removed by the next run of the same user.
#[derive(Debug)]
pub struct PlanDir(tempfile::TempDir);

impl PlanDir {
    /// A fresh folder in the system's temporary folder (`TMPDIR`).
    pub fn new() -> Result<PlanDir, RunError> {
        let dir = crate::store::private_folder::create(PLAN_DIR_PREFIX).map_err(|source| {
            RunError::File {
                what: "cannot make a private folder for the plan".into(),
                source,
            }
        })?;
        Ok(PlanDir(dir))
    }

    /// The path of a plan file in it.
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
}
