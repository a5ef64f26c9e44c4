//! `choudoufu-live run -- terraform ...`: one terraform or tofu run against a per-run HTTP backend.
//!
//! An `apply` or `destroy` is always a planned apply: `terraform plan -out=FILE`, the
//! approval, the claim of every change of the plan (all or nothing, before any provider
//! call), the check that the plan's own changes have not moved, then `terraform apply FILE`.
//! Every other command runs as given.

mod approve;
pub mod command;
mod claims;
mod flush;
mod outputs;
mod planned;
mod summary;
mod terraform;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use thiserror::Error;

use crate::frontdoor::http::{self, Backend, RunSummary, Server};
use crate::config::migration::check_backend_for_run;
use crate::config::{ConfigError, LiveConfig};
use crate::cut::{Mechanism, StockLock, cut};
use crate::engine::layout::Layout;
use crate::engine::pending::Liveness;
use crate::engine::plan_stamp::PlanJsonError;
use crate::engine::program::ProgramStamp;
use crate::engine::read_cache::ReadCache;
use crate::engine::session::{RunInfo, Session, SessionError};
use crate::frontdoor::NO_LOCK;
use crate::store::{self, DynStore, StoreError, WriteGuard};
use command::{ApplyCommand, TfCommand};
use terraform::{Signals, Terraform};

/// Why `run` stopped before or around terraform (terraform's own failures are its exit status).
#[derive(Debug, Error)]
pub enum RunError {
    /// The root's live block or backend block is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The estate could not be read or written.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A claim, heartbeat or release could not reach the store.
    #[error("claims: {0}")]
    Store(#[from] StoreError),
    /// terraform (or tofu) could not be started.
    #[error("cannot start {program}: {source}")]
    Start {
        /// The program.
        program: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `terraform show -json` of a plan failed or gave no JSON.
    #[error("{0}")]
    Show(String),
    /// A plan's JSON is not as terraform writes it.
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

/// Exit status when a saved plan is refused (its changes moved, or it has no stamp), as choudoufu uses.
pub const EXIT_PLAN_REFUSED: i32 = 3;
/// Exit status when a record write met another run's newer record.
pub const EXIT_CONFLICT: i32 = 4;
/// Exit status when a change, or a resource it depends on, is claimed by another live run: nothing was applied.
pub const EXIT_IN_FLIGHT: i32 = 5;
/// Exit status when the state terraform could not save was not written either: it is in a recovery file.
pub const EXIT_UNWRITTEN: i32 = 6;
/// How long `run` keeps trying to write the state terraform could not save, unless `--flush-timeout` says otherwise.
pub const DEFAULT_FLUSH_TIMEOUT: Duration = Duration::from_secs(300);
/// How often `run` proves it is alive while it holds claims, unless `--heartbeat` says otherwise.
pub const DEFAULT_RUN_HEARTBEAT: Duration = Duration::from_secs(5);

fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("{e}: give a duration such as 90s, 10m or 1h30m"))
}

/// Run terraform or tofu with the state served from the estate's records.
///
/// Starts a loopback HTTP backend for this one run, points the root's empty
/// `backend "http" {}` at it through TF_HTTP_ADDRESS, and runs the command with its
/// input and output passed through. An `apply` or `destroy` is planned first, approved
/// as terraform asks, and every change of the plan is claimed before terraform applies
/// it, so no two runs make the same change at once. Prints what was written and every
/// named conflict. When the record store does not answer and terraform cannot save its
/// state, `run` keeps that state and writes it once terraform exits, conditionally on the
/// versions it read, for up to --flush-timeout; past that, it leaves it in a recovery file
/// for `records recover`. Exits with terraform's status, or 3 when a saved plan's changes
/// moved, 4 when a record conflicted, 5 when another live run holds one of the plan's
/// changes, 6 when the state terraform could not save is in a recovery file.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// When another live run holds one of the plan's changes (or a resource they depend on), wait up to DURATION for it (e.g. 10m), then plan again; without it, stop at once with status 5.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub wait: Option<Duration>,

    /// How often this run's heartbeat proves it alive while it holds claims; a killed run's claims are taken over after three missed beats.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "5s")]
    pub heartbeat: Duration,

    /// When the record store does not answer and terraform could not save its state, keep trying to write that state for up to DURATION after terraform exits; then leave it in a recovery file (exit status 6) for `records recover`.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "5m")]
    pub flush_timeout: Duration,

    /// The command and its arguments, after `--`: e.g. `-- terraform apply -auto-approve`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

/// The root to use: `--root`, else terraform's own `-chdir=DIR`.
fn effective_root(root: &Path, cmd: &TfCommand) -> PathBuf {
    if root != Path::new(".") {
        return root.to_path_buf();
    }
    let dir = cmd.dir();
    if dir == Path::new(".") {
        root.to_path_buf()
    } else {
        dir
    }
}

/// What every step of one run shares.
pub(crate) struct Ctx {
    tf: Terraform,
    cmd: TfCommand,
    root: PathBuf,
    config: LiveConfig,
    store: DynStore,
    layout: Layout,
    store_name: String,
    guard: Option<Arc<dyn WriteGuard>>,
    program: ProgramStamp,
    run_id: String,
    wait: Option<Duration>,
    heartbeat: Duration,
    flush_timeout: Duration,
    liveness: Option<Arc<Liveness>>,
}

impl Ctx {
    /// A fresh session of this run (every session of one run shares its run id).
    fn session(&self) -> Session {
        Session::new(
            self.store.clone(),
            self.layout.clone(),
            RunInfo {
                run_id: self.run_id.clone(),
                program: self.program.clone(),
            },
        )
        .with_guard(self.guard.clone())
        .with_cache(Some(ReadCache::for_root(&self.root)))
    }

    /// This run's liveness, its heartbeat started on first use: claims are made through it.
    fn alive(&mut self) -> Arc<Liveness> {
        self.liveness
            .get_or_insert_with(|| {
                Liveness::start(
                    self.store.clone(),
                    self.layout.clone(),
                    &self.run_id,
                    self.program.clone(),
                    self.heartbeat,
                )
            })
            .clone()
    }

    /// Say this run has ended (its run record, if a heartbeat wrote one, is removed).
    async fn end(&mut self) {
        if let Some(live) = self.liveness.take()
            && let Err(e) = live.end().await
        {
            eprintln!(
                "choudoufu-live: warning: could not remove this run's record (it counts as gone after three missed heartbeats): {e}"
            );
        }
    }
}

/// One session of the run and, once it serves terraform, its server.
struct Attempt {
    backend: Arc<Backend>,
    server: Option<Server>,
}

impl Attempt {
    /// A session serving terraform at once.
    async fn start(ctx: &Ctx) -> Result<Attempt, RunError> {
        let mut attempt = Attempt::unserved(ctx.session());
        attempt.serve(ctx).await?;
        Ok(attempt)
    }

    /// A session that serves nothing yet.
    fn unserved(session: Session) -> Attempt {
        Attempt {
            backend: Backend::new(session),
            server: None,
        }
    }

    /// Start serving (once) and give the server.
    async fn serve(&mut self, ctx: &Ctx) -> Result<&Server, RunError> {
        if self.server.is_none() {
            let server = http::serve(self.backend.clone()).await?;
            tracing::info!(url = %server.state_url(), estate = %ctx.config.estate, "serving state for this run");
            self.server = Some(server);
        }
        self.server
            .as_ref()
            .ok_or_else(|| RunError::Io(std::io::Error::other("the state server did not start")))
    }

    fn session(&self) -> &Session {
        self.backend.session()
    }

    async fn stop(self) -> (Arc<Backend>, RunSummary) {
        if let Some(server) = self.server {
            server.stop().await;
        }
        let summary = self.backend.summary();
        (self.backend, summary)
    }
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
    let cmd = TfCommand::parse(rest);
    if cmd.sub() == Some("force-unlock") && !cut(Mechanism::NoLock) {
        println!("{NO_LOCK}");
        println!(
            "Nothing was changed: a run that was stopped leaves nothing held, so there is nothing to unlock."
        );
        return Ok(0);
    }
    let root = effective_root(root, &cmd);
    let config = LiveConfig::load(&root)?;
    check_backend_for_run(&root, rest)?;
    crate::config::check_stored_backend(rest)?;
    let _stock_lock = StockLock::hold_if_cut(config.estate.as_str()).await?;
    let store = store::open(&config.store, &root).await;
    let run = RunInfo::new(ProgramStamp::detect(&root));
    {
        // Names only: never the command's arguments, which can carry `-var` values.
        let span = tracing::Span::current();
        span.record("run_id", run.run_id.as_str());
        span.record("estate", config.estate.as_str());
        span.record("store.kind", store.kind().as_str());
        span.record("terraform.subcommand", cmd.sub().unwrap_or(""));
    }
    let mut ctx = Ctx {
        tf: Terraform {
            program: program.clone(),
            global: cmd.global.clone(),
        },
        layout: Layout::new(config.estate.clone()),
        guard: store::guard_for(&config.store),
        store_name: store.describe(),
        store,
        cmd,
        root,
        config,
        program: run.program,
        run_id: run.run_id,
        wait: args.wait,
        heartbeat: args.heartbeat,
        flush_timeout: args.flush_timeout,
        liveness: None,
    };
    let mut signals = Signals::install()?;
    let apply = match ctx.cmd.sub() {
        Some("apply" | "destroy") => command::apply_command(&ctx.cmd),
        _ => ApplyCommand::AsGiven,
    };
    let result = match &apply {
        ApplyCommand::Planned(split) => planned::planned_apply(&mut ctx, split, &mut signals).await,
        ApplyCommand::Saved(file, split) => {
            let file = ctx.cmd.dir().join(file);
            planned::saved_apply(&mut ctx, &file, split, &mut signals).await
        }
        ApplyCommand::AsGiven => as_given(&mut ctx, &mut signals).await,
    };
    ctx.end().await;
    let code = result?;
    tracing::Span::current().record("exit_code", code);
    Ok(code)
}

/// Any command other than a planned apply: run it as given against this run's server.
async fn as_given(ctx: &mut Ctx, signals: &mut Signals) -> Result<i32, RunError> {
    let mut attempt = Attempt::start(ctx).await?;
    if matches!(ctx.cmd.sub(), Some("refresh")) {
        // A refresh changes nothing of its own: a record another run moved is skipped, never a conflict.
        attempt
            .session()
            .limit_changes(std::collections::BTreeSet::new())
            .await;
    }
    let mut all = ctx.cmd.subcommand.iter().cloned().collect::<Vec<_>>();
    all.extend(ctx.cmd.args.iter().cloned());
    let server = attempt.serve(ctx).await?;
    let status = ctx.tf.run(&all, server, &[], signals).await?;
    let flushed = flush::flush(ctx, attempt.session(), signals).await?;
    let (backend, summary) = attempt.stop().await;
    let summary = summary::print(&ctx.config, summary, &flushed);
    if let Some(code) = summary::unwritten_exit(&flushed) {
        return Ok(code);
    }
    summary::warn_unrecorded_after(ctx, &backend).await;
    if let Some(file) = command::saved_plan_out(&ctx.cmd) {
        let file = ctx.cmd.dir().join(file);
        if matches!(status.code(), Some(0) | Some(2)) && file.is_file() {
            summary::stamp_plan(&backend, &ctx.layout, &ctx.store_name, &file).await?;
        }
    }
    if !summary.conflicts.is_empty() {
        return Ok(EXIT_CONFLICT);
    }
    Ok(terraform::code(status))
}
