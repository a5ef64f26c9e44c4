//! The planned apply: plan to a private file, approve, claim every change, check the plan's own changes, apply the plan.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Instant;

use super::approve::{self, Answer};
use super::command::ApplySplit;
use super::claims::{self, Claimed};
use super::flush::{self, Flushed};
use super::outputs::{self, Reconcile};
use super::terraform::{self, PlanDir, Signals};
use super::{Attempt, Ctx, EXIT_CONFLICT, EXIT_PLAN_REFUSED, RunError, summary};
use crate::cut::{Mechanism, cut};
use crate::engine::pending::Claims;
use crate::engine::plan_stamp::{ChangeSet, PlanMovedError, PlanRefused, PlanStamp};
use crate::telemetry::{self, ConflictKind};

/// How often a plain apply is planned again because its own changes moved before it claimed them.
const MAX_REPLANS: usize = 3;

/// What applying a claimed plan came to.
enum Applied {
    /// terraform ran.
    Ran(ExitStatus),
    /// One of the plan's own changes moved before the claim: nothing was applied.
    Moved(PlanMovedError),
}

fn refuse_plan(e: PlanRefused) -> i32 {
    telemetry::metrics().conflicts(
        match &e {
            PlanRefused::Unstamped(_) => ConflictKind::Unstamped,
            PlanRefused::Moved(_) => ConflictKind::PlanMoved,
        },
        1,
    );
    eprintln!("choudoufu-live: {e}");
    EXIT_PLAN_REFUSED
}

async fn release(claims: Option<&Arc<Claims>>) {
    if let Some(c) = claims
        && let Err(e) = c.release().await
    {
        eprintln!(
            "choudoufu-live: warning: could not release this run's claims ({e}); they are taken over once its heartbeat stops"
        );
    }
}

/// Claim `set`'s changes (nothing to claim: no claim), after the store's write guard passed.
async fn claim_set(
    ctx: &mut Ctx,
    attempt: &Attempt,
    set: &ChangeSet,
    deadline: Option<Instant>,
    signals: &mut Signals,
) -> Result<Result<Option<Arc<Claims>>, Claimed>, RunError> {
    let wanted = set.wanted();
    if wanted.is_empty() || cut(Mechanism::Claims) {
        return Ok(Ok(None));
    }
    // An unsafe store gets nothing written, not even this run's record or a claim.
    attempt.session().check_guard().await?;
    Ok(
        match claims::claim(ctx, &wanted, deadline, signals).await? {
            Claimed::Held(c) => Ok(Some(c)),
            other => Err(other),
        },
    )
}

/// Pin the session to what the plan read, if none of `keys` moved; then apply with `args`.
#[allow(clippy::too_many_arguments)]
async fn apply_claimed(
    ctx: &Ctx,
    attempt: &mut Attempt,
    stamp: &PlanStamp,
    keys: &BTreeSet<String>,
    claims: Option<&Arc<Claims>>,
    args: &[String],
    signals: &mut Signals,
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
    if let Some(c) = claims {
        session.hold(c.clone()).await;
    }
    session.reconcile_outputs().await;
    let server = attempt.serve(ctx).await?;
    Ok(Applied::Ran(ctx.tf.run(args, server, &[], signals).await?))
}

/// After an apply attempt: when terraform ran, write what it could not save (see [`flush`]);
/// then release the claims, which stay in place until that state landed or is in a recovery file.
async fn flush_and_release(
    ctx: &Ctx,
    attempt: &Attempt,
    applied: &Result<Applied, RunError>,
    claims: Option<&Arc<Claims>>,
    signals: &mut Signals,
) -> Result<Flushed, RunError> {
    let flushed = match applied {
        Ok(Applied::Ran(_)) => flush::flush(ctx, attempt.session(), signals).await,
        _ => Ok(Flushed::Nothing),
    };
    release(claims).await;
    flushed
}

/// After terraform applied: the summary, the unrecorded-object warning, the output reconcile, and the exit status.
async fn finish(
    ctx: &mut Ctx,
    attempt: Attempt,
    status: ExitStatus,
    flushed: Flushed,
    reconcile: Reconcile,
    signals: &mut Signals,
) -> Result<i32, RunError> {
    let stale = attempt.session().stale_outputs().await;
    let (backend, summary) = attempt.stop().await;
    let summary = summary::print(&ctx.config, summary, &flushed);
    if let Some(code) = summary::unwritten_exit(&flushed) {
        return Ok(code);
    }
    summary::warn_unrecorded_after(ctx, &backend).await;
    if !summary.conflicts.is_empty() {
        return Ok(EXIT_CONFLICT);
    }
    if !stale.is_empty() {
        if status.success() {
            outputs::reconcile(ctx, stale, &reconcile, signals).await?;
        } else {
            outputs::say_stale(&stale, "this apply failed");
        }
    }
    Ok(terraform::code(status))
}

/// `apply`/`destroy` without a plan file: plan, approve, claim, check, apply; plan again when its changes moved or (with `--wait`) the claims in the way were released.
pub async fn planned_apply(
    ctx: &mut Ctx,
    split: &ApplySplit,
    signals: &mut Signals,
) -> Result<i32, RunError> {
    let dir = PlanDir::new()?;
    let plan = dir.file("run.tfplan");
    let deadline = ctx.wait.map(|w| Instant::now() + w);
    let mut replans = 0;
    loop {
        let _ = std::fs::remove_file(&plan);
        let mut attempt = Attempt::start(ctx).await?;
        let server = attempt.serve(ctx).await?;
        let status = ctx
            .tf
            .run(
                &split.plan_args(&plan),
                server,
                // The plan is an inner step: terraform need not say how to apply the file.
                &[("TF_IN_AUTOMATION", "1")],
                signals,
            )
            .await?;
        if !status.success() {
            attempt.stop().await;
            return Ok(terraform::code(status));
        }
        let json = ctx.tf.show_json(&plan).await?;
        let set = ChangeSet::from_plan_json(&json)?;
        let ephemeral = super::command::ephemeral_variables(&ctx.cmd.dir(), &json);
        let needs_approval = json["applyable"].as_bool().unwrap_or(true);
        if !split.auto_approve && needs_approval {
            match approve::ask(split.kind, !split.no_color, signals).await {
                Answer::Approved => {}
                Answer::Cancelled | Answer::Unanswered(_) => {
                    attempt.stop().await;
                    return Ok(1);
                }
            }
        }
        let session = attempt.session();
        let Some(served) = session.served().await else {
            attempt.stop().await;
            return Err(RunError::Show(
                "terraform planned without reading the state through this run, so its changes cannot be checked; nothing was applied".into(),
            ));
        };
        let plan_bytes = std::fs::read(&plan).map_err(|source| RunError::File {
            what: format!("cannot read the plan {}", plan.display()),
            source,
        })?;
        let stamp = PlanStamp::new(
            &ctx.layout,
            &ctx.store_name,
            &plan_bytes,
            served,
            session.base().await,
        );
        let claims = match claim_set(ctx, &attempt, &set, deadline, signals).await? {
            Ok(c) => c,
            Err(Claimed::Refused(code)) => {
                attempt.stop().await;
                return Ok(code);
            }
            Err(_) => {
                attempt.stop().await;
                continue;
            }
        };
        let args = split.apply_args(&ephemeral, &ctx.cmd.dir(), &plan);
        // Outputs are not claimed: another run's newer output is reconciled, never a conflict.
        let keys = set.resource_keys(&ctx.layout);
        let applied = apply_claimed(
            ctx,
            &mut attempt,
            &stamp,
            &keys,
            claims.as_ref(),
            &args,
            signals,
        )
        .await;
        let flushed = flush_and_release(ctx, &attempt, &applied, claims.as_ref(), signals).await?;
        match applied? {
            Applied::Ran(status) => {
                let reconcile = Reconcile {
                    plan: split.reconcile_flags(),
                    apply: split.apply_flags(&ephemeral, &ctx.cmd.dir()),
                    env: Vec::new(),
                };
                return finish(ctx, attempt, status, flushed, reconcile, signals).await;
            }
            Applied::Moved(moved) => {
                attempt.stop().await;
                replans += 1;
                if replans > MAX_REPLANS {
                    return Ok(refuse_plan(moved.into()));
                }
                let names: Vec<&str> = moved.moved.iter().map(|m| m.address.as_str()).collect();
                eprintln!(
                    "choudoufu-live: another run changed {} after this plan read it; nothing was applied. Planning again from the records as they are now.",
                    names.join(", ")
                );
            }
        }
    }
}

/// `apply FILE`: check the stamp, claim the plan's changes, check them again against the store, apply.
pub async fn saved_apply(
    ctx: &mut Ctx,
    file: &Path,
    split: &ApplySplit,
    signals: &mut Signals,
) -> Result<i32, RunError> {
    let stamp = match PlanStamp::load(file, &ctx.layout, &ctx.store_name) {
        Ok(s) => s,
        Err(e) => return Ok(refuse_plan(e.into())),
    };
    let json = ctx.tf.show_json(file).await?;
    let set = ChangeSet::from_plan_json(&json)?;
    let keys = set.keys(&ctx.layout);
    let deadline = ctx.wait.map(|w| Instant::now() + w);
    loop {
        // The server starts only once the plan's changes are claimed and have not moved.
        let mut attempt = Attempt::unserved(ctx.session());
        let claims = match claim_set(ctx, &attempt, &set, deadline, signals).await? {
            Ok(c) => c,
            Err(Claimed::Refused(code)) => {
                attempt.stop().await;
                return Ok(code);
            }
            Err(_) => {
                attempt.stop().await;
                continue;
            }
        };
        let mut args = vec!["apply".to_string()];
        args.extend(ctx.cmd.args.iter().cloned());
        let applied = apply_claimed(
            ctx,
            &mut attempt,
            &stamp,
            &keys,
            claims.as_ref(),
            &args,
            signals,
        )
        .await;
        let flushed = flush_and_release(ctx, &attempt, &applied, claims.as_ref(), signals).await?;
        return match applied? {
            Applied::Ran(status) => {
                let reconcile = Reconcile::for_saved_plan(split, &json);
                finish(ctx, attempt, status, flushed, reconcile, signals).await
            }
            Applied::Moved(moved) => {
                attempt.stop().await;
                Ok(refuse_plan(moved.into()))
            }
        };
    }
}
