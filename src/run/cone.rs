//! A cone plan (`--refresh=cone`): the user's plan, with the provider door answering resource reads from their records and confirming each change against the cloud.
//!
//! The plan is made once. Its reads are answered from the records, except those the cone
//! refreshes (records past the maximum age, dependents of a change); each object whose plan
//! changes is read from the cloud with the dependencies it read, before terraform hears the
//! plan ([`crate::frontdoor::provider::cone`]). When none of those reads differs from its
//! record, the plan stands: its output, exit status and saved file are terraform's own. When
//! one drifted, the plan is made again, every object the provider read answered from that
//! read; after [`ROUNDS`] plans that still drift, the last plan refreshes everything, as
//! `full` does. Terraform's output is held until the plan stands; when terraform may ask for
//! input at a terminal it is shown as it comes, and a plan made again says why. After it, one line tells how many resources were not refreshed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{IsTerminal, Write};
use std::process::ExitStatus;
use std::sync::Arc;

use hyper::body::Bytes;

use super::command;
use super::context::{Attempt, Ctx};
use super::error::RunError;
use crate::cut::{Mechanism, cut};
use crate::engine::cone::{RefreshMode, last_refresh};
use crate::frontdoor::provider::cone::{ConeReads, Records, WatchParams};

/// How many plans a cone plan makes before one that drifted again refreshes everything.
const ROUNDS: usize = 3;

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
    if served {
        ctx.tf.open_door().await?;
    }
    let door = match ctx.tf.door() {
        Some(door) if served => door,
        _ => {
            let server = attempt.serve(ctx).await?;
            return ctx.terraform(args, server, env).await;
        }
    };
    // Terraform asks for missing variables on its output: held, the question would not be seen.
    let hold = !std::io::stdin().is_terminal() || no_input(args);
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let max_age = ctx.config.refresh_max_age;
    let mut fresh: BTreeMap<String, Bytes> = BTreeMap::new();
    let mut read_again: BTreeSet<String> = BTreeSet::new();
    for round in 1..=ROUNDS {
        let backend = attempt.backend().clone();
        let records: Records = Box::new(move || {
            let backend = backend.clone();
            Box::pin(async move { backend.session().snapshot().await })
        });
        let params = WatchParams {
            now,
            max_age,
            read_again: read_again.clone(),
        };
        let reads = Arc::new(ConeReads::new(records, params, std::mem::take(&mut fresh)));
        door.answer_reads(Some(reads.clone()));
        let server = attempt.serve(ctx).await?;
        let ran = if hold {
            ctx.tf.run_held(args, server, env, &ctx.signals).await
        } else {
            ctx.terraform(args, server, env)
                .await
                .map(|status| (status, Vec::new()))
        };
        door.answer_reads(None);
        let (status, out) = ran?;
        let outcome = reads.outcome();
        tracing::info!(
            round,
            from_records = reads.from_records(),
            to_provider = reads.to_provider(),
            refreshed = outcome.refreshed.len(),
            drifted = outcome.drifted.len(),
            "cone plan: resource reads"
        );
        let planned = matches!(status.code(), Some(0 | 2));
        if outcome.drifted.is_empty() || !planned {
            let _ = std::io::stdout().lock().write_all(&out);
            if planned {
                not_refreshed(outcome.not_refreshed);
                // An apply's save then rewrites each old record the plan refreshed, so it carries the refresh's time.
                let last = last_refresh(&attempt.session().snapshot().await);
                let half = i64::try_from(max_age.as_secs() / 2).unwrap_or(i64::MAX);
                let old: BTreeSet<String> = outcome
                    .refreshed
                    .into_iter()
                    .filter(|a| last.get(a).is_none_or(|t| now.saturating_sub(*t) > half))
                    .collect();
                attempt.session().note_refreshed(old).await;
            }
            return Ok(status);
        }
        tracing::info!(
            round,
            drifted = outcome.drifted.len(),
            "cone plan: objects of the cone drifted since their records; planning again with the cloud's reads"
        );
        if !hold {
            planning_again(outcome.drifted.len());
        }
        read_again.extend(outcome.refreshed);
        read_again.extend(outcome.drifted);
        fresh = reads.fresh();
    }
    tracing::warn!(
        "cone plan: the cone drifted in {ROUNDS} plans; this plan refreshes every resource"
    );
    let server = attempt.serve(ctx).await?;
    ctx.terraform(args, server, env).await
}

/// Whether terraform's arguments keep it from asking for input.
fn no_input(args: &[String]) -> bool {
    args.iter()
        .any(|a| a == "-input=false" || a == "--input=false")
}

/// Tell the user how many resources the plan did not refresh, in one line on stderr.
fn not_refreshed(count: usize) {
    let noun = if count == 1 { "resource" } else { "resources" };
    let line = format!(
        "choudoufu-live: {count} {noun} not refreshed (cone); `--refresh=full` refreshes all\n"
    );
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Tell the user, who saw the plan as it ran, that `count` of its changes drifted from their records and it is made again.
fn planning_again(count: usize) {
    let noun = if count == 1 { "object" } else { "objects" };
    let line = format!(
        "choudoufu-live: {count} {noun} of this plan's cone drifted from their records in the cloud; planning again from the cloud's values\n"
    );
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
