//! `choudoufu-live run -- terraform ...`: one terraform or tofu run against a per-run HTTP backend.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use clap::Args;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::Command;
use tokio::signal::unix::{SignalKind, signal};

use super::CliError;
use crate::config::{LiveConfig, check_http_backend};
use crate::http_backend::{self, Backend, NO_LOCK, RunSummary};
use crate::layout::Layout;
use crate::program::ProgramStamp;
use crate::session::{RunInfo, Session};
use crate::store;

/// Exit status when a record write met another run's newer record.
pub const EXIT_CONFLICT: i32 = 4;

/// Run terraform or tofu with the state served from the estate's records.
///
/// Starts a loopback HTTP backend for this one run, points the root's empty
/// `backend "http" {}` at it through TF_HTTP_ADDRESS, runs the command with its
/// input and output passed through, then prints what was written and every
/// named conflict. Exits with terraform's status, or 4 when a record conflicted.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The command and its arguments, after `--`: e.g. `-- terraform apply -auto-approve`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

/// The terraform subcommand in `args` (the first word that is not a flag).
fn subcommand(args: &[String]) -> Option<&str> {
    args.iter()
        .map(String::as_str)
        .find(|a| !a.starts_with('-'))
}

/// The root to use: `--root`, else terraform's own `-chdir=DIR`.
fn effective_root(root: &Path, args: &[String]) -> PathBuf {
    if root != Path::new(".") {
        return root.to_path_buf();
    }
    args.iter()
        .take_while(|a| a.starts_with('-'))
        .find_map(|a| a.strip_prefix("-chdir="))
        .map(PathBuf::from)
        .unwrap_or_else(|| root.to_path_buf())
}

/// Run `choudoufu-live run`.
pub async fn run(root: &Path, args: RunArgs) -> Result<i32, CliError> {
    let Some((program, rest)) = args.command.split_first() else {
        return Err("run needs a command: choudoufu-live run -- terraform apply".into());
    };
    if subcommand(rest) == Some("force-unlock") {
        println!("{NO_LOCK}");
        println!(
            "Nothing was changed: a run that was stopped leaves nothing held, so there is nothing to unlock."
        );
        return Ok(0);
    }
    let root = effective_root(root, rest);
    let config = LiveConfig::load(&root)?;
    check_http_backend(&root)?;
    let store = store::open(&config.store, &root).await;
    let layout = Layout::new(config.estate.clone());
    let run = RunInfo::new(ProgramStamp::detect(&root));
    let guard = store::guard_for(&config.store, &store);
    let session = Session::new(store, layout, run).with_guard(guard);
    let backend = Backend::new(session);
    let server = http_backend::serve(backend.clone()).await?;
    tracing::info!(url = %server.state_url(), estate = %config.estate, "serving state for this run");

    let mut cmd = Command::new(program);
    cmd.args(rest)
        .env("TF_HTTP_ADDRESS", server.state_url())
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    for var in ["TF_HTTP_LOCK_ADDRESS", "TF_HTTP_UNLOCK_ADDRESS"] {
        if std::env::var_os(var).is_some() {
            // Lock requests reach this run's server, which holds nothing.
            cmd.env(var, server.state_url());
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let mut interrupts = signal(SignalKind::interrupt())?;
    let mut terms = signal(SignalKind::terminate())?;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            _ = interrupts.recv() => {
                // The terminal sends Ctrl-C to terraform too; it stops gracefully and writes its state.
                tracing::info!("interrupt: waiting for {program} to stop");
            }
            _ = terms.recv() => {
                if let Some(pid) = child.id() {
                    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
                }
            }
        }
    };
    server.stop().await;
    let summary = backend.summary();
    print_summary(&config, &summary);
    let code = match status.code() {
        Some(code) => code,
        None => {
            use std::os::unix::process::ExitStatusExt;
            128 + status.signal().unwrap_or(0)
        }
    };
    if !summary.conflicts.is_empty() {
        return Ok(EXIT_CONFLICT);
    }
    Ok(code)
}

fn list(names: &std::collections::BTreeSet<String>) -> String {
    const SHOWN: usize = 8;
    let mut out: Vec<&str> = names.iter().take(SHOWN).map(String::as_str).collect();
    if names.len() > SHOWN {
        out.push("...");
    }
    out.join(", ")
}

fn print_summary(config: &LiveConfig, s: &RunSummary) {
    if s.writes == 0 && s.conflicts.is_empty() && s.errors.is_empty() {
        return;
    }
    let mut parts = Vec::new();
    for (n, what, names) in [
        (s.created.len(), "created", &s.created),
        (s.updated.len(), "updated", &s.updated),
        (s.deleted.len(), "deleted", &s.deleted),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what} ({})", list(names)));
        }
    }
    parts.push(format!("{} unchanged", s.unchanged));
    eprintln!(
        "choudoufu-live: estate {}: records {}",
        config.estate,
        parts.join(", ")
    );
    if !s.conflicts.is_empty() {
        let err = crate::error::RecordConflictError {
            landed: s.created.len() + s.updated.len() + s.deleted.len(),
            conflicts: s.conflicts.values().cloned().collect(),
        };
        eprintln!("choudoufu-live: {err}");
        eprintln!(
            "choudoufu-live: if terraform wrote errored.tfstate, do not `state push` it: it holds this run's view from before the other run's write, and pushing it would replace that write. Re-plan instead."
        );
    }
    for e in &s.errors {
        eprintln!("choudoufu-live: error: {e}");
    }
}
