//! What `run` tells after terraform: the records written and refused, unrecorded marked objects, and plan stamps.

use std::collections::BTreeSet;
use std::path::Path;

use super::context::Ctx;
use super::error::{EXIT_UNWRITTEN, RunError};
use super::flush::Flushed;
use super::say::{self, Carried};
use super::steps;
use crate::cloud::aws::markers::AwsLister;
use crate::config::LiveConfig;
use crate::engine::session::RecordConflictError;
use crate::frontdoor::http::{Backend, RunSummary};

/// Fold what the flush after terraform wrote into the run's summary.
fn merge(s: &mut RunSummary, flushed: &Flushed) {
    let Flushed::Landed(report) = flushed else {
        return;
    };
    s.writes += 1;
    s.created.extend(report.created.iter().cloned());
    s.updated.extend(report.updated.iter().cloned());
    s.updated.extend(report.already.iter().cloned());
    s.deleted.extend(report.deleted.iter().cloned());
    s.deleted.extend(report.already_gone.iter().cloned());
    s.unchanged = report.unchanged;
    s.skipped.extend(report.skipped.iter().cloned());
    for c in &report.conflicts {
        s.conflicts.insert(c.address.clone(), c.clone());
    }
}

/// The exit status when the state terraform could not save was not written.
pub fn unwritten_exit(flushed: &Flushed) -> Option<i32> {
    matches!(flushed, Flushed::Recovery(_) | Flushed::Lost).then_some(EXIT_UNWRITTEN)
}

/// Print one line of what was written (with what the flush after terraform wrote), and every named conflict and error; the summary with the flush folded in.
pub fn print(config: &LiveConfig, mut s: RunSummary, flushed: &Flushed) -> RunSummary {
    merge(&mut s, flushed);
    let carried = match flushed {
        Flushed::Nothing => Carried::Nothing,
        Flushed::Landed(_) => Carried::Landed,
        Flushed::Recovery(path) => Carried::Recovery(path),
        Flushed::Lost => Carried::Lost,
    };
    let conflict = RecordConflictError {
        landed: s.created.len() + s.updated.len() + s.deleted.len(),
        conflicts: s.conflicts.values().cloned().collect(),
    };
    say::summary(&config.estate, &s, carried, &conflict);
    s
}

/// Stamp the saved plan `file` with the record versions the plan read.
pub async fn stamp_plan(ctx: &Ctx, backend: &Backend, file: &Path) -> Result<(), RunError> {
    let Some(stamp) = steps::stamp(ctx, backend.session(), file).await? else {
        say::unstamped();
        return Ok(());
    };
    let path = stamp.save(file).map_err(|source| RunError::File {
        what: format!("cannot write the plan stamp beside {}", file.display()),
        source,
    })?;
    say::stamped(stamp.records.len(), &path);
    Ok(())
}

/// After commands that plan, warn about marked live objects no record names (when markers are configured).
pub async fn warn_unrecorded_after(ctx: &Ctx, backend: &Backend) {
    if let Some(listing) = &ctx.config.markers
        && matches!(
            ctx.cmd.sub(),
            Some("plan" | "apply" | "refresh" | "destroy" | "import")
        )
    {
        warn_unrecorded(&ctx.config, &listing.provider_json(), backend).await;
    }
}

/// Warn, without deleting, about live objects carrying this estate's marker that no record names.
async fn warn_unrecorded(config: &LiveConfig, provider: &serde_json::Value, backend: &Backend) {
    let session = backend.session();
    if let Err(e) = session.refresh().await {
        say::no_records_for_markers(e);
        return;
    }
    let snapshot = session.snapshot().await;
    let mut recorded = Vec::new();
    let mut types = BTreeSet::new();
    for entry in snapshot.records.values() {
        if let Some(meta) = entry.record.resource() {
            recorded.push(entry.record.address().to_string());
            types.insert(meta.type_name.clone());
        }
    }
    let lister = match AwsLister::from_json(provider).await {
        Ok(l) => l,
        Err(e) => {
            say::no_marker_listing(e);
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
                say::unrecorded(&o.arn, &config.estate, o.address().unwrap_or("?"));
            }
        }
        Err(e) => say::listing_failed(e),
    }
}
