//! The steps every plan `run` applies goes through, each written once: plan, stamp the plan with
//! what it read, and refresh→check→pin→apply.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitStatus;

use super::context::{Attempt, Ctx};
use super::error::RunError;
use super::terraform::Stdout;
use crate::engine::plan::{ChangeSet, Plan as Shown};
use crate::engine::plan_stamp::{PlanMovedError, PlanStamp};
use crate::engine::session::Session;

/// What a `terraform plan -out=FILE` came to.
pub enum Plan {
    /// terraform failed (it said why): its status.
    Failed(ExitStatus),
    /// The plan, as `show -json` gives it, and its changes.
    Made {
        /// `terraform show -json FILE`, parsed.
        plan: Box<Shown>,
        /// The changes it makes.
        set: ChangeSet,
    },
}

/// Run `terraform` with `args` (a plan writing to `file`) against `attempt`, and read the plan it wrote.
pub async fn plan(
    ctx: &Ctx,
    attempt: &mut Attempt,
    args: &[String],
    env: &[(&str, &str)],
    file: &Path,
) -> Result<Plan, RunError> {
    let status = super::cone::terraform(ctx, attempt, args, env).await?;
    if !status.success() {
        return Ok(Plan::Failed(status));
    }
    let plan = ctx.tf.show_json(file).await?;
    ctx.tf.check_plan_providers(&plan)?;
    let set = ChangeSet::of(&plan);
    tracing::info!(
        changes = set.resources.len(),
        "planned apply: the plan is read (show -json)"
    );
    Ok(Plan::Made {
        plan: Box::new(plan),
        set,
    })
}

/// The stamp of the plan at `file`: the record versions `session` served terraform (none when terraform read no state through it).
pub async fn stamp(
    ctx: &Ctx,
    session: &Session,
    file: &Path,
) -> Result<Option<PlanStamp>, RunError> {
    let Some(served) = session.served().await else {
        return Ok(None);
    };
    let plan_bytes = std::fs::read(file).map_err(|source| RunError::File {
        what: format!("cannot read the plan {}", file.display()),
        source,
    })?;
    Ok(Some(PlanStamp::new(
        &ctx.layout,
        &ctx.store_name,
        &plan_bytes,
        served,
        session.base().await,
    )))
}

/// What applying a checked plan came to.
pub enum Applied {
    /// terraform ran.
    Ran(ExitStatus),
    /// One of the plan's own changes moved since it was planned: nothing was applied.
    Moved(PlanMovedError),
}

/// Read the records again; if none of `keys` moved since `stamp`, pin the session to what the plan read (with the attempt's claims) and apply with `args`.
pub async fn apply_pinned(
    ctx: &Ctx,
    attempt: &mut Attempt,
    stamp: &PlanStamp,
    keys: &BTreeSet<String>,
    args: &[String],
) -> Result<Applied, RunError> {
    apply_pinned_with(ctx, attempt, stamp, keys, args, Stdout::Inherit).await
}

/// [`apply_pinned`], terraform's output passed through as `stdout` says (a destroy's closing line in `destroy`'s words).
pub async fn apply_pinned_with(
    ctx: &Ctx,
    attempt: &mut Attempt,
    stamp: &PlanStamp,
    keys: &BTreeSet<String>,
    args: &[String],
    stdout: Stdout,
) -> Result<Applied, RunError> {
    let session = attempt.session();
    session.refresh().await?;
    let pin = match stamp.check(keys, &session.snapshot().await) {
        Ok(pin) => pin,
        Err(moved) => return Ok(Applied::Moved(moved)),
    };
    tracing::info!(
        changes = keys.len(),
        "the plan's own changes have not moved"
    );
    session.pin(pin).await;
    attempt.claims().lend(session).await;
    session.reconcile_outputs().await;
    let server = attempt.serve(ctx).await?;
    Ok(Applied::Ran(
        ctx.tf
            .run_with(args, server, &[], &ctx.signals, stdout)
            .await?,
    ))
}
