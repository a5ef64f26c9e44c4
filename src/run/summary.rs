//! What `run` prints after terraform: the records written and refused, unrecorded marked objects, and plan stamps.

use std::collections::BTreeSet;
use std::path::Path;

use super::flush::Flushed;
use super::{Ctx, EXIT_UNWRITTEN, RunError};
use crate::cloud::aws::markers::AwsLister;
use crate::config::LiveConfig;
use crate::engine::layout::Layout;
use crate::engine::plan_stamp::PlanStamp;
use crate::engine::session::RecordConflictError;
use crate::frontdoor::http::{Backend, RunSummary};

/// Up to eight names, then `...`.
pub fn list(names: &BTreeSet<String>) -> String {
    const SHOWN: usize = 8;
    let mut out: Vec<&str> = names.iter().take(SHOWN).map(String::as_str).collect();
    if names.len() > SHOWN {
        out.push("...");
    }
    out.join(", ")
}

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

/// Each distinct error once, with how often it came.
fn distinct(errors: &[String]) -> Vec<String> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for e in errors {
        match out.iter_mut().find(|(seen, _)| seen == e) {
            Some((_, n)) => *n += 1,
            None => out.push((e.clone(), 1)),
        }
    }
    out.into_iter()
        .map(|(e, n)| if n > 1 { format!("{e} ({n} times)") } else { e })
        .collect()
}

/// Print one line of what was written (with what the flush after terraform wrote), and every named conflict and error; the summary with the flush folded in.
pub fn print(config: &LiveConfig, mut s: RunSummary, flushed: &Flushed) -> RunSummary {
    merge(&mut s, flushed);
    s.refusal_line().into_iter().for_each(|l| eprintln!("{l}"));
    if s.writes == 0 && s.conflicts.is_empty() && s.errors.is_empty() {
        return s;
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
            "{} skipped: not changed by this run's plan, and another run moved them or is changing them ({})",
            s.skipped.len(),
            list(&s.skipped)
        ));
    }
    let carried = match flushed {
        Flushed::Landed(_) => Some("was written after terraform exited"),
        Flushed::Recovery(_) => Some("is in the recovery file named above"),
        Flushed::Lost => Some("is only in terraform's errored.tfstate"),
        Flushed::Nothing => None,
    };
    match (carried, s.errors.last()) {
        (Some(carried), Some(last)) => eprintln!(
            "choudoufu-live: while terraform ran, {} of its state write(s) failed (the last: {last}); the state they carried {carried}",
            s.errors.len()
        ),
        _ => {
            for e in distinct(&s.errors) {
                eprintln!("choudoufu-live: error: {e}");
            }
        }
    }
    if s.writes > 0 || !s.conflicts.is_empty() {
        eprintln!(
            "choudoufu-live: estate {}: records {}",
            config.estate,
            parts.join(", ")
        );
    }
    if let Flushed::Recovery(path) = flushed {
        eprintln!(
            "choudoufu-live: the rest of this run's state is not in the store yet: it is in {} (exit status 6)",
            path.display()
        );
    }
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
    s
}

/// Stamp the saved plan `file` with the record versions the plan read.
pub async fn stamp_plan(
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
        eprintln!(
            "choudoufu-live: warning: could not read the records to look for unrecorded marked objects: {e}"
        );
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
