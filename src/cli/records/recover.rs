//! `records recover FILE`: write the state a run could not write (its recovery file), conditionally on the versions that run read.

use std::path::Path;

use super::estate::Estate;
use super::out::outln;
use crate::cli::error::CliError;
use crate::engine::claims;
use crate::engine::session::{Recovery, Session, SessionError};
use crate::run::EXIT_CONFLICT;
use crate::store;

/// Write the recovery file `file` into the root's estate; the exit status.
pub async fn recover(root: &Path, file: &Path) -> Result<i32, CliError> {
    let recovery = Recovery::load(file)?;
    let estate = Estate::open(root).await?;
    let store_name = estate.store.describe();
    if let Err(e) = recovery.check_for(file, estate.layout.estate().as_str(), &store_name) {
        eprintln!("choudoufu-live: {e}");
        return Ok(1);
    }
    outln!(
        "recover {} into estate {} ({}): the state run {} could not write (saved {}), each record conditionally on the version that run read",
        file.display(),
        estate.layout.estate(),
        store_name,
        recovery.run_id,
        recovery.saved_at,
    );
    let session = Session::resume(estate.store.clone(), estate.layout.clone(), &recovery)
        .await
        .with_guard(store::guard_for(&estate.config.store));
    let report = match session.write_state(&recovery.document()).await {
        Ok(report) => report,
        Err(e @ (SessionError::Store(_) | SessionError::Unchecked(_))) => {
            eprintln!("choudoufu-live: {e}");
            eprintln!(
                "choudoufu-live: nothing of {} is lost: the file is kept, and what landed of it counts as landed next time. Run `records recover` again once the store answers.",
                file.display()
            );
            return Ok(1);
        }
        Err(e) => return Err(e.into()),
    };
    let mut parts = Vec::new();
    for (what, names) in [
        ("created", &report.created),
        ("updated", &report.updated),
        ("deleted", &report.deleted),
        ("already written", &report.already),
        ("already gone", &report.already_gone),
        ("skipped (another run moved or holds them)", &report.skipped),
    ] {
        if !names.is_empty() {
            parts.push(format!("{} {what} ({})", names.len(), names.join(", ")));
        }
    }
    parts.push(format!("{} unchanged", report.unchanged));
    outln!("records {}", parts.join(", "));
    let landed: Vec<String> = report
        .created
        .iter()
        .chain(&report.updated)
        .chain(&report.deleted)
        .chain(&report.already)
        .chain(&report.already_gone)
        .cloned()
        .collect();
    // The run ended before it could clear its claims of these, or remove its run record.
    match claims::clear_marks_of(&estate.store, &estate.layout, &recovery.run_id, &landed).await {
        Ok(0) => {}
        Ok(n) => outln!("cleared {n} claim(s) run {} left on them", recovery.run_id),
        Err(e) => eprintln!(
            "choudoufu-live: warning: could not clear the claims run {} left (they are taken over by the next run that needs them): {e}",
            recovery.run_id
        ),
    }
    if let Err(e) = claims::remove_gone_run(&estate.store, &estate.layout, &recovery.run_id).await {
        eprintln!(
            "choudoufu-live: warning: could not remove the run record run {} left: {e}",
            recovery.run_id
        );
    }
    if !report.conflicts.is_empty() {
        let conflicts = report.into_result().err();
        if let Some(c) = conflicts {
            eprintln!("choudoufu-live: {c}");
        }
        eprintln!(
            "choudoufu-live: the records above were changed by another run after run {} read them; they keep that run's content. Plan and apply again: the plan reads what is stored now.",
            recovery.run_id
        );
        return Ok(EXIT_CONFLICT);
    }
    if report.landed() == 0 {
        outln!(
            "nothing to write: the estate already holds this file's state; {} is no longer needed (remove it: it holds the records' values)",
            file.display()
        );
    } else {
        outln!(
            "the state of {} is written; the file is no longer needed (remove it: it holds the records' values)",
            file.display()
        );
    }
    Ok(0)
}
