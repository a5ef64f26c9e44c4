//! `choudoufu-live run -- terraform ...`: one terraform or tofu run against a per-run HTTP backend.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use clap::Args;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::Command;
use tokio::signal::unix::{SignalKind, signal};

use thiserror::Error;

use super::{Backend, RunSummary};
use crate::cloud::aws::markers::AwsLister;
use crate::config::{ConfigError, LiveConfig, MarkerListing, check_http_backend};
use crate::cut::{Mechanism, StockLock, cut};
use crate::engine::layout::Layout;
use crate::engine::plan_stamp::{PlanJsonError, PlanRefused, PlanStamp, planned_changes};
use crate::engine::program::ProgramStamp;
use crate::engine::read_cache::ReadCache;
use crate::engine::session::{RecordConflictError, RunInfo, Session, SessionError};
use crate::frontdoor::NO_LOCK;
use crate::store;
use crate::telemetry::{self, ConflictKind};

/// Why `run` stopped before or around terraform (terraform's own failures are its exit status).
#[derive(Debug, Error)]
pub enum RunError {
    /// The root's live block or backend block is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The estate could not be read.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// terraform (or tofu) could not be started.
    #[error("cannot start {program}: {source}")]
    Start {
        /// The program.
        program: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `terraform show -json` of a saved plan failed or gave no JSON.
    #[error("{0}")]
    Show(String),
    /// A saved plan's JSON is not as terraform writes it.
    #[error(transparent)]
    PlanJson(#[from] PlanJsonError),
    /// A plan or stamp file could not be read or written.
    #[error("{what}: {source}")]
    File {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The state server or the signal handlers could not be set up.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The command line names no command.
    #[error("run needs a command: choudoufu-live run -- terraform apply")]
    NoCommand,
}

/// Exit status when a record write met another run's newer record.
pub const EXIT_CONFLICT: i32 = 4;
/// Exit status when a saved plan is refused (its changes moved, or it has no stamp), as choudoufu uses.
pub const EXIT_PLAN_REFUSED: i32 = 3;

/// Flags of terraform's plan and apply that take their value as the next argument.
const VALUE_FLAGS: &[&str] = &[
    "-var",
    "-var-file",
    "-target",
    "-replace",
    "-lock-timeout",
    "-parallelism",
    "-state",
    "-state-out",
    "-backup",
    "-out",
    "-generate-config-out",
];

/// What a run does with saved plans.
#[derive(Debug, PartialEq, Eq)]
enum PlanMode {
    /// Neither makes nor applies one.
    None,
    /// `plan -out=FILE`: stamp FILE afterwards.
    Save(PathBuf),
    /// `apply FILE`: check FILE's stamp first.
    Apply(PathBuf),
}

/// The arguments after the subcommand.
fn after_subcommand(args: &[String]) -> &[String] {
    match args.iter().position(|a| !a.starts_with('-')) {
        Some(i) => &args[i + 1..],
        None => &[],
    }
}

fn plan_mode(args: &[String], base: &Path) -> PlanMode {
    let rest = after_subcommand(args);
    match subcommand(args) {
        Some("plan") => {
            let mut it = rest.iter();
            while let Some(a) = it.next() {
                if let Some(f) = a.strip_prefix("-out=") {
                    return PlanMode::Save(base.join(f));
                }
                if a == "-out"
                    && let Some(f) = it.next()
                {
                    return PlanMode::Save(base.join(f));
                }
            }
            PlanMode::None
        }
        Some("apply") => {
            let mut positional = Vec::new();
            let mut it = rest.iter();
            while let Some(a) = it.next() {
                if a.starts_with('-') {
                    if VALUE_FLAGS.contains(&a.as_str()) {
                        it.next();
                    }
                } else {
                    positional.push(a);
                }
            }
            match positional.as_slice() {
                [one] => PlanMode::Apply(base.join(one)),
                _ => PlanMode::None,
            }
        }
        _ => PlanMode::None,
    }
}

/// Terraform's own working folder: `-chdir=DIR` or the current folder.
fn terraform_dir(args: &[String]) -> PathBuf {
    args.iter()
        .take_while(|a| a.starts_with('-'))
        .find_map(|a| a.strip_prefix("-chdir="))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The record keys a saved plan changes, read with `terraform show -json`.
async fn plan_changes(
    program: &str,
    args: &[String],
    plan: &Path,
    layout: &Layout,
) -> Result<std::collections::BTreeSet<String>, RunError> {
    let mut cmd = Command::new(program);
    if let Some(chdir) = args
        .iter()
        .take_while(|a| a.starts_with('-'))
        .find(|a| a.starts_with("-chdir="))
    {
        cmd.arg(chdir);
    }
    let abs = std::fs::canonicalize(plan).map_err(|source| RunError::File {
        what: format!("cannot read the plan {}", plan.display()),
        source,
    })?;
    let out = cmd
        .args(["show", "-json"])
        .arg(&abs)
        // `show` of a plan file reads no state; an address that answers nothing keeps it that way.
        .env(
            "TF_HTTP_ADDRESS",
            "http://127.0.0.1:9/choudoufu-live-show-reads-no-state",
        )
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|source| RunError::Start {
            program: format!("{program} show"),
            source,
        })?;
    if !out.status.success() {
        return Err(RunError::Show(format!(
            "{program} show -json {} failed: {}",
            plan.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| RunError::Show(format!("{program} show -json gave no JSON: {e}")))?;
    Ok(planned_changes(layout, &json)?)
}

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
#[tracing::instrument(
    name = "run",
    skip_all,
    fields(
        run_id = tracing::field::Empty,
        estate = tracing::field::Empty,
        store.kind = tracing::field::Empty,
        terraform.subcommand = tracing::field::Empty,
        exit_code = tracing::field::Empty,
    )
)]
pub async fn run(root: &Path, args: RunArgs) -> Result<i32, RunError> {
    let Some((program, rest)) = args.command.split_first() else {
        return Err(RunError::NoCommand);
    };
    if subcommand(rest) == Some("force-unlock") && !cut(Mechanism::NoLock) {
        println!("{NO_LOCK}");
        println!(
            "Nothing was changed: a run that was stopped leaves nothing held, so there is nothing to unlock."
        );
        return Ok(0);
    }
    let root = effective_root(root, rest);
    let config = LiveConfig::load(&root)?;
    check_http_backend(&root)?;
    crate::config::check_stored_backend(rest)?;
    let _stock_lock = StockLock::hold_if_cut(config.estate.as_str()).await?;
    let store = store::open(&config.store, &root).await;
    let layout = Layout::new(config.estate.clone());
    let run = RunInfo::new(ProgramStamp::detect(&root));
    {
        // Names only: never the command's arguments, which can carry `-var` values.
        let span = tracing::Span::current();
        span.record("run_id", run.run_id.as_str());
        span.record("estate", config.estate.as_str());
        span.record("store.kind", store.kind().as_str());
        span.record("terraform.subcommand", subcommand(rest).unwrap_or(""));
    }
    let guard = store::guard_for(&config.store);
    let store_name = store.describe();
    let session = Session::new(store, layout.clone(), run)
        .with_guard(guard)
        .with_cache(Some(ReadCache::for_root(&root)));
    let plan = plan_mode(rest, &terraform_dir(rest));
    if let PlanMode::Apply(file) = &plan {
        let refused = |e: PlanRefused| {
            telemetry::metrics().conflicts(
                match &e {
                    PlanRefused::Unstamped(_) => ConflictKind::Unstamped,
                    PlanRefused::Moved(_) => ConflictKind::PlanMoved,
                },
                1,
            );
            tracing::Span::current().record("exit_code", EXIT_PLAN_REFUSED);
            eprintln!("choudoufu-live: {e}");
            Ok(EXIT_PLAN_REFUSED)
        };
        let stamp = match PlanStamp::load(file, &layout, &store_name) {
            Ok(s) => s,
            Err(e) => return refused(e.into()),
        };
        let changes = plan_changes(program, rest, file, &layout).await?;
        session.refresh().await?;
        match stamp.check(&changes, &session.snapshot().await) {
            Ok(pin) => {
                tracing::info!(
                    changes = changes.len(),
                    "the saved plan's changes have not moved"
                );
                session.pin(pin).await;
            }
            Err(e) => return refused(e.into()),
        }
    }
    let backend = Backend::new(session);
    let server = super::serve(backend.clone()).await?;
    tracing::info!(url = %server.state_url(), estate = %config.estate, "serving state for this run");

    let mut cmd = Command::new(program);
    cmd.args(rest)
        .envs(server.terraform_env())
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().map_err(|source| RunError::Start {
        program: program.clone(),
        source,
    })?;
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
    if let Some(listing) = &config.markers
        && matches!(
            subcommand(rest),
            Some("plan" | "apply" | "refresh" | "destroy" | "import")
        )
    {
        warn_unrecorded(&config, listing, &backend).await;
    }
    if let PlanMode::Save(file) = &plan
        && matches!(status.code(), Some(0) | Some(2))
        && file.is_file()
    {
        stamp_plan(&backend, &layout, &store_name, file).await?;
    }
    let code = match status.code() {
        Some(code) => code,
        None => {
            use std::os::unix::process::ExitStatusExt;
            128 + status.signal().unwrap_or(0)
        }
    };
    if !summary.conflicts.is_empty() {
        tracing::Span::current().record("exit_code", EXIT_CONFLICT);
        return Ok(EXIT_CONFLICT);
    }
    tracing::Span::current().record("exit_code", code);
    Ok(code)
}

async fn stamp_plan(
    backend: &Backend,
    layout: &Layout,
    store: &str,
    file: &Path,
) -> Result<(), RunError> {
    let session = backend.session();
    let Some(served) = session.served().await else {
        eprintln!(
            "choudoufu-live: the plan read no state through this run, so it has no stamp; applying it will be refused"
        );
        return Ok(());
    };
    let plan_bytes = std::fs::read(file).map_err(|source| RunError::File {
        what: format!("cannot read the plan {}", file.display()),
        source,
    })?;
    let stamp = PlanStamp::new(layout, store, &plan_bytes, served, session.base().await);
    let path = stamp.save(file).map_err(|source| RunError::File {
        what: format!("cannot write the plan stamp beside {}", file.display()),
        source,
    })?;
    eprintln!(
        "choudoufu-live: stamped the plan with the {} record version(s) it read: {}",
        stamp.records.len(),
        path.display()
    );
    Ok(())
}

/// Warn, without deleting, about live objects carrying this estate's marker that no record names.
async fn warn_unrecorded(config: &LiveConfig, listing: &MarkerListing, backend: &Backend) {
    let session = backend.session();
    if let Err(e) = session.refresh().await {
        eprintln!(
            "choudoufu-live: warning: could not read the records to look for unrecorded marked objects: {e}"
        );
        return;
    }
    let snapshot = session.snapshot().await;
    let mut recorded = Vec::new();
    let mut types = std::collections::BTreeSet::new();
    for entry in snapshot.records.values() {
        if let Some(meta) = entry.record.resource() {
            recorded.push(entry.record.address().to_string());
            types.insert(meta.type_name.clone());
        }
    }
    let lister = match AwsLister::from_json(&listing.provider_json()).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("choudoufu-live: warning: no listing of marked objects: {e}");
            return;
        }
    };
    let types: Vec<String> = types.into_iter().collect();
    match lister
        .list_unrecorded(config.estate.as_str(), &recorded, &types)
        .await
    {
        Ok(objects) => {
            for o in objects {
                eprintln!(
                    "choudoufu-live: warning: unrecorded marked object {}: it carries estate {}'s marker (tofu-address={}) but no record names it; it was not deleted",
                    o.arn,
                    config.estate,
                    o.address().unwrap_or("?")
                );
            }
        }
        Err(e) => eprintln!("choudoufu-live: warning: listing marked objects failed: {e}"),
    }
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
    s.refusal_line().into_iter().for_each(|l| eprintln!("{l}"));
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
    if !s.skipped.is_empty() {
        parts.push(format!(
            "{} skipped: not changed by the plan, moved by another run ({})",
            s.skipped.len(),
            list(&s.skipped)
        ));
    }
    eprintln!(
        "choudoufu-live: estate {}: records {}",
        config.estate,
        parts.join(", ")
    );
    if !s.conflicts.is_empty() {
        let err = RecordConflictError {
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
