//! A cone plan (`--refresh=cone`): a plan without a refresh first, its cone, then the real plan with the provider door answering every resource read outside the cone from its record.
//!
//! The first plan writes nothing and shows nothing; when it fails, or `show -json` of it
//! does, the real plan refreshes everything, as `full` does, and says why in the log. The
//! user's plan is then run as given, so its output, exit status and saved file are terraform's
//! own; only the reads outside the cone are answered by the door. After it, one line tells how
//! many resources were not refreshed.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::ExitStatus;
use std::sync::Arc;

use super::command;
use super::context::{Attempt, Ctx};
use super::error::RunError;
use super::terraform::{PlanDir, Stdout};
use crate::cut::{Mechanism, cut};
use crate::engine::cone::{Cone, ReadAnswers, RefreshMode, last_refresh};
use crate::frontdoor::provider::cone::ConeReads;

/// Run terraform with `args` against `attempt`: a plan of a cone run as a cone plan, any other command (or a plan terraform's own flags keep from refreshing) as given.
pub async fn terraform(
    ctx: &Ctx,
    attempt: &mut Attempt,
    args: &[String],
    env: &[(&str, &str)],
) -> Result<ExitStatus, RunError> {
    let mode = if cut(Mechanism::FullRefresh) {
        RefreshMode::Cone
    } else {
        ctx.refresh
    };
    let served = mode == RefreshMode::Cone
        && ctx.tf.door.is_some()
        && command::cone_plan_args(args, std::path::Path::new("")).is_some();
    if !served {
        let server = attempt.serve(ctx).await?;
        return ctx.terraform(args, server, env).await;
    }
    let dir = PlanDir::new()?;
    let first = dir.file("cone.tfplan");
    let first_args = command::cone_plan_args(args, &first).unwrap_or_default();
    let (reads, old) = match cone_of(ctx, attempt, &first_args, env, &first).await? {
        Some(got) => got,
        None => {
            let server = attempt.serve(ctx).await?;
            return ctx.terraform(args, server, env).await;
        }
    };
    let Some(door) = ctx.tf.door() else {
        let server = attempt.serve(ctx).await?;
        return ctx.terraform(args, server, env).await;
    };
    door.answer_reads(Some(reads.clone()));
    let server = attempt.serve(ctx).await?;
    let status = ctx.terraform(args, server, env).await;
    door.answer_reads(None);
    let status = status?;
    tracing::info!(
        from_records = reads.from_records(),
        to_provider = reads.to_provider(),
        refreshed = reads.refreshed().len(),
        "cone plan: resource reads"
    );
    if matches!(status.code(), Some(0 | 2)) {
        not_refreshed(reads.from_records());
        // An apply's save then rewrites each old record the plan refreshed, so it carries the refresh's time.
        let refreshed: BTreeSet<String> = reads.refreshed().intersection(&old).cloned().collect();
        attempt.session().note_refreshed(refreshed).await;
    }
    Ok(status)
}

/// Plan without a refresh (`first_args`, to `file`) and read its cone, with the records last refreshed more than half the maximum age ago; none when that plan could not be made or read (the real plan then refreshes everything).
async fn cone_of(
    ctx: &Ctx,
    attempt: &mut Attempt,
    first_args: &[String],
    env: &[(&str, &str)],
    file: &std::path::Path,
) -> Result<Option<(Arc<ConeReads>, BTreeSet<String>)>, RunError> {
    let server = attempt.serve(ctx).await?;
    let status = ctx
        .tf
        .run_with(first_args, server, env, &ctx.signals, Stdout::Quiet)
        .await?;
    if !status.success() {
        tracing::warn!(status = %status, "cone plan: the plan without a refresh failed; this plan refreshes every resource");
        return Ok(None);
    }
    let shown = match ctx.tf.show_json(file).await {
        Ok(shown) => shown,
        Err(e) => {
            tracing::warn!(error = %e, "cone plan: the plan without a refresh could not be read; this plan refreshes every resource");
            return Ok(None);
        }
    };
    let last = last_refresh(&attempt.session().snapshot().await);
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let max_age = ctx.config.refresh_max_age;
    let cone = Cone::of(&shown, &last, now, max_age);
    let half = i64::try_from(max_age.as_secs() / 2).unwrap_or(i64::MAX);
    let old: BTreeSet<String> = cone
        .inside
        .iter()
        .filter(|a| last.get(*a).is_none_or(|t| now.saturating_sub(*t) > half))
        .cloned()
        .collect();
    tracing::info!(
        inside = cone.inside.len(),
        outside = cone.outside.len(),
        changed = cone.changed,
        stale = cone.stale,
        "cone plan: the cone"
    );
    Ok(Some((
        Arc::new(ConeReads::new(ReadAnswers::new(&shown, &cone))),
        old,
    )))
}

/// Tell the user how many resources the plan did not refresh, in one line on stderr.
fn not_refreshed(count: usize) {
    let noun = if count == 1 { "resource" } else { "resources" };
    let line = format!(
        "choudoufu-live: {count} {noun} not refreshed (cone); `--refresh=full` refreshes all\n"
    );
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
