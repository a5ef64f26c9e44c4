//! The planned apply: plan to a private file, approve, claim every change, check the plan's own changes, apply the plan.
//!
//! Each apply is a loop of attempts. One attempt's body returns a [`Step`]: what to do
//! next. The loop ends the attempt (its claims released, its server stopped) in one place,
//! then acts on the step: exit, plan again, or tell what terraform applied.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::Arc;

use super::approve::{self, Answer};
use super::bind::{self, Bind, Checked};
use super::claiming::{self, Claimed, WaitBudget};
use super::command::{self, ApplySplit};
use super::cone;
use super::context::{Attempt, Ctx};
use super::deletes;
use super::error::{EXIT_CONFLICT, EXIT_PLAN_REFUSED, RunError};
use super::flush::{self, Flushed};
use super::outputs::{self, Reconcile};
use super::steps::{self, Ahead, Applied, Early, Plan};
use super::tally::RunSummary;
use super::terraform::{self, PlanDir, Stdout};
use super::{say, summary};
use crate::engine::claims::{Alongside, MarkView};
use crate::engine::plan::{ChangeSet, Plan as Shown};
use crate::engine::plan_stamp::{PlanMovedError, PlanRefused, PlanStamp};
use crate::engine::resume::{self, Finished};
use crate::frontdoor::http::Backend;
use crate::frontdoor::provider::Recorder;
use crate::telemetry::{self, ConflictKind};

/// How often a plain apply is planned again because its own changes moved before it claimed them.
const MAX_REPLANS: usize = 3;

/// What one attempt came to: what the loop does once the attempt has ended.
enum Step {
    /// End the run with this status (what stopped it was said).
    Exit(i32),
    /// The claims in the way were released while this run waited, or marked objects were bound: plan (or claim) again.
    Again,
    /// One of the plan's own changes moved before the claim: nothing was applied.
    Moved(PlanMovedError),
    /// terraform applied the plan.
    Ran(Box<Ran>),
}

/// What terraform's apply left: its status, what became of the state it could not save, and how to reconcile outputs.
struct Ran {
    status: ExitStatus,
    flushed: Flushed,
    reconcile: Reconcile,
}

/// Count and say a refused plan; the exit status for it.
fn refuse_plan(e: PlanRefused) -> i32 {
    telemetry::metrics().conflicts(
        match &e {
            PlanRefused::Unstamped(_) => ConflictKind::Unstamped,
            PlanRefused::Moved(_) => ConflictKind::PlanMoved,
        },
        1,
    );
    say::plan_refused(e);
    EXIT_PLAN_REFUSED
}

/// A checked plan to apply: its changes, its stamp, the keys checked, terraform's arguments, and what is left of `--wait`.
struct Apply<'a> {
    /// The plan (the provider door records each return against it).
    plan: &'a Shown,
    /// Its changes.
    set: &'a ChangeSet,
    stamp: &'a PlanStamp,
    keys: &'a BTreeSet<String>,
    args: &'a [String],
    budget: &'a mut WaitBudget,
    /// How terraform's output reaches the user (a destroy's closing line in `destroy`'s words).
    stdout: Stdout,
    /// What the collision check does with a marked object of a create: `run`'s own plan binds it and plans again; a saved plan is refused.
    bind: Bind<'a>,
    /// The estate's marks, read while the plan was read (none: the claim reads them).
    early: Option<MarkView>,
    /// The apply, started while the plan was read and claimed (none: it starts after the check).
    started: Option<Early>,
}

/// Claim the plan's changes for `attempt`, check that none of its keys moved since its stamp, apply it; then write what terraform could not save (see [`flush`]), with the claims still held.
async fn claim_and_apply(
    ctx: &mut Ctx,
    attempt: &mut Attempt,
    apply: Apply<'_>,
    reconcile: Reconcile,
) -> Result<Step, RunError> {
    if let Some(code) = deletes::refuse(ctx, apply.set).await? {
        return Ok(Step::Exit(code));
    }
    let session = attempt.session();
    // The plan's own records are read once the marks are written, beside the claim's own read
    // after them: the check below then sees every write that landed before the claims were in place.
    let read_after_claims = async {
        let (read, clock) = futures::join!(session.records_now(apply.keys), session.check_clock());
        if let Err(e) = clock {
            // Not lost: the check is made again before the first write, which it refuses.
            tracing::debug!(error = %e, "the store's clock is compared again before the first write");
        }
        read
    };
    let along = Alongside {
        early: apply.early,
        after_written: read_after_claims,
    };
    let (claimed, read) = claiming::claim(ctx, attempt, apply.set, apply.budget, along).await?;
    match claimed {
        Claimed::Held(hold) => {
            tracing::info!("planned apply: the plan's changes are claimed");
            attempt.hold(hold);
        }
        Claimed::Released => return Ok(Step::Again),
        Claimed::Refused(code) => return Ok(Step::Exit(code)),
    }
    let now = read.transpose()?;
    let mut started = apply.started;
    match bind::check(ctx, attempt, apply.plan, &apply.bind, &mut started).await? {
        Checked::Clear => {}
        Checked::Bound => return Ok(Step::Again),
        Checked::Refused(code) => return Ok(Step::Exit(code)),
    }
    let door = ctx.tf.door();
    let recorder = door.map(|door| {
        let recorder = Recorder::new(
            attempt.backend().clone(),
            apply.plan,
            door.marking().cloned(),
        );
        door.record_returns(Some(recorder.clone()));
        // The apply is the run's last terraform process: no plugin is started that it will not take.
        door.last_process(apply.plan);
        recorder
    });
    let applied = steps::apply_pinned_with(
        ctx,
        attempt,
        apply.stamp,
        apply.keys,
        apply.args,
        apply.stdout,
        Ahead {
            now,
            early: started,
        },
    )
    .await;
    if let Some(door) = door {
        door.record_returns(None);
        door.last_process_ended(matches!(applied, Ok(Applied::Ran(_))));
    }
    for crash in recorder.iter().flat_map(|r| r.crashes()) {
        say::provider_crashed(&crash);
    }
    Ok(match applied? {
        Applied::Ran(status) => Step::Ran(Box::new(Ran {
            status,
            flushed: flush::flush(ctx, attempt.session()).await?,
            reconcile,
        })),
        Applied::Moved(moved) => Step::Moved(moved),
    })
}

/// What a loop that plans again makes of one ended attempt: the run's exit status, or `None` to plan again.
async fn replan_or_end(
    ctx: &mut Ctx,
    step: Step,
    ended: (Arc<Backend>, RunSummary),
    replans: &mut usize,
) -> Option<Result<i32, RunError>> {
    match step {
        Step::Exit(code) => {
            say::state_errors(&ended.1.errors);
            Some(Ok(code))
        }
        Step::Again => None,
        Step::Moved(moved) => {
            *replans += 1;
            if *replans > MAX_REPLANS {
                return Some(Ok(refuse_plan(moved.into())));
            }
            let names: Vec<&str> = moved.moved.iter().map(|m| m.address.as_str()).collect();
            say::replanning(&names);
            None
        }
        Step::Ran(ran) => Some(finish(ctx, ended, ran).await),
    }
}

/// After terraform applied: the summary, the unrecorded-object warning, the output reconcile, and the exit status.
async fn finish(
    ctx: &mut Ctx,
    (backend, summary): (Arc<Backend>, RunSummary),
    ran: Box<Ran>,
) -> Result<i32, RunError> {
    let Ran {
        status,
        flushed,
        reconcile,
    } = *ran;
    let stale = backend.session().stale_outputs().await;
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
            outputs::reconcile(ctx, stale, &reconcile).await?;
        } else {
            say::stale(&stale, "this apply failed");
        }
    }
    Ok(terraform::code(status))
}

/// `apply`/`destroy` without a plan file: plan, approve, claim, check, apply; plan again when its changes moved or (with `--wait`) the claims in the way were released.
pub async fn planned_apply(ctx: &mut Ctx, split: &ApplySplit) -> Result<i32, RunError> {
    let dir = PlanDir::new()?;
    let plan = dir.file("run.tfplan");
    let mut budget = WaitBudget::new(ctx.wait);
    let mut replans = 0;
    loop {
        let _ = std::fs::remove_file(&plan);
        let mut attempt = Attempt::start(ctx).await?;
        let step = plan_and_apply(ctx, &mut attempt, split, (&dir, &plan), &mut budget).await;
        let ended = attempt.end().await;
        if let Some(status) = replan_or_end(ctx, step?, ended, &mut replans).await {
            return status;
        }
    }
}

/// One attempt of a planned apply: plan, approve, stamp, then claim, check and apply.
async fn plan_and_apply(
    ctx: &mut Ctx,
    attempt: &mut Attempt,
    split: &ApplySplit,
    (plan_dir, plan): (&PlanDir, &Path),
    budget: &mut WaitBudget,
) -> Result<Step, RunError> {
    // The plan is an inner step: terraform need not say how to apply the file.
    let env = [("TF_IN_AUTOMATION", "1")];
    // `show -json` starts now and waits, so that its start-up is spent while the plan runs.
    let show = ctx.tf.show_ahead(plan_dir, plan);
    let status = cone::terraform(ctx, attempt, &split.plan_args(plan), &env).await?;
    if !status.success() {
        return Ok(Step::Exit(terraform::code(status)));
    }
    let dir = ctx.cmd.dir();
    let started = early_apply(ctx, attempt, split, &dir, plan).await?;
    // The marks are read while `show -json` reads the plan; the claim uses that read when nothing in it bears on the plan's changes.
    let marks = MarkView::read(&ctx.store, &ctx.layout);
    let (shown, set, early) = match steps::read_plan_with(ctx, plan, show, marks).await? {
        (Plan::Made { plan, set }, marks) => (plan, set, marks.ok()),
        (Plan::Failed(status), _) => return Ok(Step::Exit(terraform::code(status))),
    };
    let ephemeral = command::ephemeral_variables(&dir, &shown);
    let needs_approval = shown.applyable();
    if !split.auto_approve && needs_approval {
        match approve::ask(split.kind, split.no_color, &ctx.signals).await {
            Answer::Approved => {}
            Answer::Cancelled | Answer::Unanswered(_) => return Ok(Step::Exit(1)),
        }
    }
    let Some(stamp) = steps::stamp(ctx, attempt.session(), plan).await? else {
        return Err(RunError::Unread);
    };
    let args = split.apply_args(&ephemeral, &dir, plan);
    // An apply started with other arguments is stopped (dropped) before it read anything.
    let started = started.filter(|e| e.args == args);
    // Outputs are not claimed: another run's newer output is reconciled, never a conflict.
    let keys = set.resource_keys(&ctx.layout);
    let reconcile = Reconcile {
        plan: split.reconcile_flags(),
        apply: split.apply_flags(&ephemeral, &dir),
        env: Vec::new(),
    };
    let apply = Apply {
        plan: &shown,
        set: &set,
        stamp: &stamp,
        keys: &keys,
        args: &args,
        budget,
        stdout: summary::terraform_stdout(split.kind),
        bind: Bind::Import(split),
        early,
        started,
    };
    claim_and_apply(ctx, attempt, apply, reconcile).await
}

/// Start the apply of `plan` now, while the plan is read and claimed, when no question comes between (`-auto-approve`) and it prints nothing before it reads the state (no `-json`); its state request waits for the claims and the check. Its arguments pass on the variables the root's files declare ephemeral: when the plan shows others, it is stopped.
async fn early_apply(
    ctx: &Ctx,
    attempt: &mut Attempt,
    split: &ApplySplit,
    dir: &Path,
    plan: &Path,
) -> Result<Option<Early>, RunError> {
    let args = split.apply_args(&command::ephemeral_in_files(dir), dir, plan);
    if !split.auto_approve || args.iter().any(|a| a == "-json" || a == "--json") {
        return Ok(None);
    }
    let stdout = summary::terraform_stdout(split.kind);
    Ok(Some(Early::start(ctx, attempt, args, stdout).await?))
}

/// `apply FILE`: check the stamp, claim the plan's changes, check them again against the store, apply.
pub async fn saved_apply(ctx: &mut Ctx, file: &Path, split: &ApplySplit) -> Result<i32, RunError> {
    let stamp = match PlanStamp::load(file, &ctx.layout, &ctx.store_name) {
        Ok(s) => s,
        Err(e) => return Ok(refuse_plan(e.into())),
    };
    let shown = ctx.tf.show_json(file).await?;
    ctx.tf.open_door().await?;
    ctx.tf.check_plan_providers(&shown)?;
    let set = ChangeSet::of(&shown);
    let keys = set.keys(&ctx.layout);
    let mut budget = WaitBudget::new(ctx.wait);
    let mut args = vec!["apply".to_string()];
    args.extend(ctx.cmd.args.iter().cloned());
    // Each record this apply writes names the plan, so a stopped apply can be resumed.
    let read = ctx.session().with_plan(&stamp.plan_sha256);
    read.refresh().await?;
    if let Ok(done) = resume::finished(&stamp, &keys, &read.snapshot().await)
        && !done.addresses.is_empty()
    {
        let approved = Approved {
            plan: &shown,
            stamp: &stamp,
            done: &done,
        };
        return resume(ctx, split, approved, &mut budget).await;
    }
    let mut read = Some(read);
    loop {
        // The server starts only once the plan's changes are claimed and have not moved.
        let session = read
            .take()
            .unwrap_or_else(|| ctx.session().with_plan(&stamp.plan_sha256));
        let mut attempt = Attempt::unserved(session);
        let apply = Apply {
            plan: &shown,
            set: &set,
            stamp: &stamp,
            keys: &keys,
            args: &args,
            budget: &mut budget,
            // `apply FILE` keeps terraform's words, a destroy plan's among them.
            stdout: Stdout::Inherit,
            bind: Bind::Refuse(&stamp.marker_listings),
            early: None,
            started: None,
        };
        let reconcile = Reconcile::for_saved_plan(split, &shown);
        let step = claim_and_apply(ctx, &mut attempt, apply, reconcile).await;
        let ended = attempt.end().await;
        match step? {
            Step::Exit(code) => {
                say::state_errors(&ended.1.errors);
                return Ok(code);
            }
            Step::Again => {}
            Step::Moved(_) => {
                // Records this plan's own earlier apply wrote are not moves: resume it; name any other.
                let current = ended.0.session().snapshot().await;
                return match resume::finished(&stamp, &keys, &current) {
                    Ok(done) => {
                        let approved = Approved {
                            plan: &shown,
                            stamp: &stamp,
                            done: &done,
                        };
                        resume(ctx, split, approved, &mut budget).await
                    }
                    Err(moved) => Ok(refuse_plan(moved.into())),
                };
            }
            Step::Ran(ran) => return finish(ctx, ended, ran).await,
        }
    }
}

/// A saved plan whose apply stopped: the plan, its stamp, and the changes that apply made.
struct Approved<'a> {
    plan: &'a Shown,
    stamp: &'a PlanStamp,
    done: &'a Finished,
}

/// Resume a stopped saved plan under its approval: plan the rest again with the plan's own variables, check it changes exactly what the approved plan has left, and apply it without asking.
async fn resume(
    ctx: &mut Ctx,
    split: &ApplySplit,
    approved: Approved<'_>,
    budget: &mut WaitBudget,
) -> Result<i32, RunError> {
    say::resuming(&approved.done.addresses);
    let dir = PlanDir::new()?;
    let plan = dir.file("resume.tfplan");
    let reconcile = Reconcile::for_saved_plan(split, approved.plan);
    let mut env: Vec<(&str, &str)> = vec![("TF_IN_AUTOMATION", "1")];
    env.extend(reconcile.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let mut plan_args = split.plan_args(&plan);
    plan_args.push("-input=false".into());
    let mut replans = 0;
    loop {
        let _ = std::fs::remove_file(&plan);
        let mut attempt = Attempt::unserved(ctx.session().with_plan(&approved.stamp.plan_sha256));
        let step = async {
            let (shown, set) = match steps::plan(ctx, &mut attempt, &plan_args, &env, &plan).await?
            {
                Plan::Failed(status) => return Ok(Step::Exit(terraform::code(status))),
                Plan::Made { plan, set } => (plan, set),
            };
            if let Err(refused) = resume::compare(approved.plan, approved.done, &shown) {
                telemetry::metrics().conflicts(ConflictKind::PlanMoved, 1);
                say::plan_refused(refused);
                return Ok(Step::Exit(EXIT_PLAN_REFUSED));
            }
            if set.resources.is_empty() && set.outputs.is_empty() {
                say::resumed_nothing_left();
                return Ok(Step::Exit(0));
            }
            let Some(stamp) = steps::stamp(ctx, attempt.session(), &plan).await? else {
                return Err(RunError::Unread);
            };
            let dir = ctx.cmd.dir();
            let ephemeral = command::ephemeral_variables(&dir, &shown);
            let args = split.apply_args(&ephemeral, &dir, &plan);
            let keys = set.resource_keys(&ctx.layout);
            let apply = Apply {
                plan: &shown,
                set: &set,
                stamp: &stamp,
                keys: &keys,
                args: &args,
                budget: &mut *budget,
                stdout: Stdout::Inherit,
                // Where the approved plan was stamped to list the markers of its creates.
                bind: Bind::Refuse(&approved.stamp.marker_listings),
                early: None,
                started: None,
            };
            let reconcile = Reconcile::for_saved_plan(split, approved.plan);
            claim_and_apply(ctx, &mut attempt, apply, reconcile).await
        }
        .await;
        let ended = attempt.end().await;
        if let Some(status) = replan_or_end(ctx, step?, ended, &mut replans).await {
            return status;
        }
    }
}
