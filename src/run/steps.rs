//! The steps every plan `run` applies goes through, each written once: plan, stamp the plan with
//! what it read, and refresh→check→pin→apply.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::Arc;

use super::context::{Attempt, Ctx};
use super::error::RunError;
use super::show::ShowAhead;
use super::terraform::{Running, Stdout};
use crate::engine::plan::{ChangeSet, Plan as Shown};
use crate::engine::plan_stamp::{PlanMovedError, PlanStamp};
use crate::engine::session::{Session, Snapshot};
use crate::frontdoor::http::{Backend, Gate};

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
    Ok(read_plan_with(ctx, file, None, async {}).await?.0)
}

/// Read the plan terraform wrote at `file` (`show -json`, the one started `ahead` if any), with `alongside` run meanwhile (its output given back).
pub async fn read_plan_with<F: Future>(
    ctx: &Ctx,
    file: &Path,
    ahead: Option<ShowAhead>,
    alongside: F,
) -> Result<(Plan, F::Output), RunError> {
    let (plan, along) = futures::join!(ctx.tf.show_started(ahead, file), alongside);
    let plan = plan?;
    ctx.tf.check_plan_providers(&plan)?;
    let set = ChangeSet::of(&plan);
    tracing::info!(
        changes = set.resources.len(),
        "planned apply: the plan is read (show -json)"
    );
    Ok((
        Plan::Made {
            plan: Box::new(plan),
            set,
        },
        along,
    ))
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

/// Read the plan's own records (`keys`) now; if none moved since `stamp`, pin the session to what the plan read (with the attempt's claims) and apply with `args`.
pub async fn apply_pinned(
    ctx: &Ctx,
    attempt: &mut Attempt,
    stamp: &PlanStamp,
    keys: &BTreeSet<String>,
    args: &[String],
) -> Result<Applied, RunError> {
    apply_pinned_with(
        ctx,
        attempt,
        stamp,
        keys,
        args,
        Stdout::Inherit,
        Ahead::default(),
    )
    .await
}

/// What was done ahead of the check of a plan's own changes.
#[derive(Default)]
pub struct Ahead {
    /// The plan's own records as read after the claims were written ([`Session::records_now`]); none: read by the check.
    pub now: Option<Snapshot>,
    /// The apply, started early; none: started after the check.
    pub early: Option<Early>,
}

/// [`apply_pinned`], terraform's output passed through as `stdout` says (a destroy's closing line in `destroy`'s words), with what was done `ahead` of the check.
pub async fn apply_pinned_with(
    ctx: &Ctx,
    attempt: &mut Attempt,
    stamp: &PlanStamp,
    keys: &BTreeSet<String>,
    args: &[String],
    stdout: Stdout,
    ahead: Ahead,
) -> Result<Applied, RunError> {
    let Ahead { now, early } = ahead;
    let session = attempt.session();
    let now = match now {
        Some(now) => now,
        None => session.records_now(keys).await?,
    };
    let pin = match stamp.check(keys, &now) {
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
    if let Some(running) = early.and_then(Early::go) {
        tracing::info!("the apply started early reads the state now");
        let (status, _) = ctx.tf.wait(running, &ctx.signals).await?;
        return Ok(Applied::Ran(status));
    }
    attempt.backend().set_gate(Gate::Open);
    let server = attempt.serve(ctx).await?;
    Ok(Applied::Ran(
        ctx.tf
            .run_with(args, server, &[], &ctx.signals, stdout)
            .await?,
    ))
}

/// An apply started before its plan's changes were claimed and checked: its state requests wait at the gate until they are, and it does nothing before it has read the state; dropped without [`Early::go`], the gate shuts and the process is killed.
pub struct Early {
    /// Its arguments.
    pub args: Vec<String>,
    running: Option<Running>,
    backend: Arc<Backend>,
}

impl Early {
    /// Start `args` (an apply of a plan) against `attempt`'s server, its state requests held, its output as `stdout` says.
    pub async fn start(
        ctx: &Ctx,
        attempt: &mut Attempt,
        args: Vec<String>,
        stdout: Stdout,
    ) -> Result<Early, RunError> {
        let backend = attempt.backend().clone();
        backend.set_gate(Gate::Held);
        let started = match attempt.serve(ctx).await {
            Ok(server) => ctx.tf.start(&args, server, &[], stdout).await,
            Err(e) => Err(e),
        };
        let running = match started {
            Ok(running) => running,
            Err(e) => {
                // Nothing started: the attempt's state requests are answered again.
                backend.set_gate(Gate::Open);
                return Err(e);
            }
        };
        tracing::info!("the apply started early; its state request waits for the claims");
        Ok(Early {
            args,
            running: Some(running),
            backend,
        })
    }

    /// Open the gate: the process reads the state and applies.
    fn go(mut self) -> Option<Running> {
        self.backend.set_gate(Gate::Open);
        self.running.take()
    }
}

/// Stop the apply started early, if any, and answer the attempt's state requests again (another terraform process of the attempt reads the state first).
pub fn stop_early(attempt: &Attempt, early: &mut Option<Early>) {
    if let Some(early) = early.take() {
        tracing::info!(
            "the apply started early is stopped: another terraform process reads the state first"
        );
        drop(early);
    }
    attempt.backend().set_gate(Gate::Open);
}

impl Drop for Early {
    fn drop(&mut self) {
        // Killed first, so that it never hears the refusal its held request is then given.
        if let Some(running) = self.running.take() {
            drop(running);
            self.backend.set_gate(Gate::Shut);
        }
    }
}
