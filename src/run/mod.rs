//! `choudoufu-live run -- terraform ...`: one terraform or tofu run against a per-run HTTP backend.
//!
//! An `apply` or `destroy` is always a planned apply: `terraform plan -out=FILE`, the
//! approval, the claim of every change of the plan (all or nothing, before any provider
//! call), the check that the plan's own changes have not moved, then `terraform apply FILE`.
//! Every other command runs as given. The state is served by [`crate::frontdoor::http`].

mod approve;
mod args;
mod bind;
mod claiming;
mod claims;
mod command;
mod cone;
mod context;
mod deletes;
mod error;
mod flush;
mod liveness;
mod outputs;
mod planned;
mod remark;
mod s3door;
mod say;
mod show;
mod signals;
mod steps;
mod summary;
mod tally;
mod terraform;

use std::path::{Path, PathBuf};

use crate::config::LiveConfig;
use crate::config::backend_s3::{S3Backend, check_stored_s3, root_config, stored_is_http};
use crate::config::migration::check_backend_for_run;
use crate::cut::{Mechanism, StockLock, cut};
use crate::engine::layout::Layout;
use crate::engine::program::ProgramStamp;
use crate::engine::session::RunInfo;
use crate::frontdoor::provider::marking::Marking;
use crate::store;
pub use args::{DEFAULT_FLUSH_TIMEOUT, DEFAULT_RUN_HEARTBEAT, DoorSwitch, RefreshSwitch, RunArgs};
use claims::Heartbeat;
use command::ApplyCommand;
pub use command::TfCommand;
use context::{Attempt, Ctx};
pub use error::{EXIT_CONFLICT, EXIT_IN_FLIGHT, EXIT_PLAN_REFUSED, EXIT_UNWRITTEN, RunError};
use s3door::S3Root;
use signals::Signals;
use terraform::Terraform;

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
        say::nothing_to_unlock();
        return Ok(0);
    }
    let root = effective_root(root, &cmd);
    // `git log` runs while the configuration is read and the store opened.
    let stamp = tokio::task::spawn_blocking({
        let root = root.clone();
        move || ProgramStamp::detect(&root)
    });
    let s3_backend = if stored_is_http(rest) {
        None
    } else {
        S3Backend::find(&root)?
    };
    let (mut config, s3) = match s3_backend {
        Some(backend) => {
            check_stored_s3(rest)?;
            let config = root_config(&root)?;
            // The record store is the backend's own bucket unless a live.hcl names another.
            let own_bucket = LiveConfig::load(&root).is_err();
            let s3 = S3Root::new(&backend, config.estate.clone(), rest, own_bucket);
            (config, Some(s3))
        }
        None => {
            let config = LiveConfig::load(&root)?;
            check_backend_for_run(&root, rest)?;
            crate::config::check_stored_backend(rest)?;
            (config, None)
        }
    };
    if let Some(s3) = &s3 {
        // The selected workspace's estate is the run's: its records, markers and summary.
        config.estate = s3.estate()?;
    }
    let _stock_lock = StockLock::hold_if_cut(config.estate.as_str()).await?;
    let store = store::open(&config.store, &root).await;
    let run = RunInfo::new(stamp.await.map_err(std::io::Error::other)?);
    {
        // Names only: never the command's arguments, which can carry `-var` values.
        let span = tracing::Span::current();
        span.record("run_id", run.run_id.as_str());
        span.record("estate", config.estate.as_str());
        span.record("store.kind", store.kind().as_str());
        span.record("terraform.subcommand", cmd.sub().unwrap_or(""));
    }
    let door = match args.provider_door {
        Some(switch) => switch == DoorSwitch::On,
        None => config.provider_door,
    } && !cut(Mechanism::ProviderDoor);
    if !door && s3.is_some() && !cut(Mechanism::S3NeedsDoor) {
        return Err(RunError::S3NeedsProviderDoor);
    }
    let layout = Layout::new(config.estate.clone());
    if !door && matches!(cmd.sub(), Some("apply" | "destroy")) {
        say::provider_door_off();
    }
    let refresh = args::refresh_mode(
        args.refresh,
        std::env::var(args::REFRESH_ENV).ok(),
        config.refresh,
    )?;
    let mut ctx = Ctx {
        tf: Terraform {
            program: program.clone(),
            global: cmd.global.clone(),
            door: door.then(|| {
                let marking =
                    (config.live_markers || cut(Mechanism::MarkersOff)).then(|| Marking {
                        estate: config.estate.as_str().to_string(),
                    });
                terraform::DoorCell::new(root.clone(), marking)
            }),
        },
        layout,
        guard: store::guard_for(&config.store),
        store_name: store.describe(),
        store,
        cmd,
        root,
        config,
        program: run.program,
        run_id: run.run_id,
        wait: args.wait,
        flush_timeout: args.flush_timeout,
        refresh,
        heartbeat: Heartbeat::new(args.heartbeat),
        signals: Signals::install()?,
        s3,
        first: std::sync::Mutex::new(None),
    };
    let apply = match ctx.cmd.sub() {
        Some("apply" | "destroy") => command::apply_command(&ctx.cmd),
        _ => ApplyCommand::AsGiven,
    };
    // A saved plan's apply reads the estate for itself, stamped with the plan.
    ctx.prepare(!matches!(apply, ApplyCommand::Saved(..)))
        .await?;
    let result = match &apply {
        ApplyCommand::Planned(split) => planned::planned_apply(&mut ctx, split).await,
        ApplyCommand::Saved(file, split) => {
            let file = ctx.cmd.dir().join(file);
            planned::saved_apply(&mut ctx, &file, split).await
        }
        ApplyCommand::AsGiven => as_given(&mut ctx).await,
    };
    ctx.heartbeat.end().await;
    let code = result?;
    tracing::Span::current().record("exit_code", code);
    Ok(code)
}

/// Any command other than a planned apply: run it as given against this run's server.
async fn as_given(ctx: &mut Ctx) -> Result<i32, RunError> {
    let mut attempt = Attempt::start(ctx).await?;
    if matches!(ctx.cmd.sub(), Some("refresh")) {
        // A refresh changes nothing of its own: a record another run moved is skipped, never a conflict.
        attempt
            .session()
            .limit_changes(std::collections::BTreeSet::new())
            .await;
    }
    if command::unforced_push(&ctx.cmd) {
        // Terraform's own check of a push compares serials, and ours are digests.
        attempt.backend().guard_push();
    }
    let mut all = ctx.cmd.subcommand.iter().cloned().collect::<Vec<_>>();
    all.extend(ctx.cmd.args.iter().cloned());
    let status = cone::terraform(ctx, &mut attempt, &all, &[]).await?;
    let flushed = flush::flush(ctx, attempt.session()).await?;
    let (backend, summary) = attempt.end().await;
    let summary = summary::print(&ctx.config, summary, &flushed);
    if let Some(code) = summary::unwritten_exit(&flushed) {
        return Ok(code);
    }
    summary::warn_unrecorded_after(ctx, &backend).await;
    if let Some(file) = command::saved_plan_out(&ctx.cmd) {
        let file = ctx.cmd.dir().join(file);
        if matches!(status.code(), Some(0) | Some(2)) && file.is_file() {
            summary::stamp_plan(ctx, &backend, &file).await?;
        }
    }
    if !summary.conflicts.is_empty() {
        return Ok(EXIT_CONFLICT);
    }
    Ok(terraform::code(status))
}
