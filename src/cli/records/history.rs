//! `records history`: every stored version of one record, newest first.

use std::path::Path;

use super::estate::Estate;
use super::out::{outln, table};
use super::versions::{change_of, read_all, show_time, writer_cells, written};
use crate::cli::error::CliError;
use crate::store::{History, ObjectVersion, VersionKind};

/// `records history ADDRESS`.
pub async fn history(root: &Path, address: &str) -> Result<i32, CliError> {
    let estate = Estate::open(root).await?;
    let key = estate.key_of(address);
    let listing = estate.store.list_versions(&key).await?;
    let versions: Vec<ObjectVersion> = listing.of_key(&key).cloned().collect();
    if versions.is_empty() {
        eprintln!(
            "Error: no record and no stored version of {address} in estate {} ({}); `choudoufu-live records ls` lists the records",
            estate.layout.estate(),
            estate.store.describe()
        );
        return Ok(1);
    }
    let pasts = read_all(&estate, versions).await;
    outln!(
        "history of {address} in estate {} ({}), newest first:",
        estate.layout.estate(),
        estate.store.describe()
    );
    let rows: Vec<Vec<String>> = pasts
        .iter()
        .enumerate()
        .map(|(i, past)| {
            let older = pasts.get(i + 1).map(|p| &p.version);
            let op = change_of(&past.seen, older, &listing.history);
            let [run, program, tf] = writer_cells(&past.seen);
            vec![
                past.version
                    .version_id
                    .clone()
                    .unwrap_or_else(|| "(current)".into()),
                written(past).map_or("-".into(), show_time),
                op.name().to_string(),
                run,
                program,
                tf,
                match past.version.kind {
                    VersionKind::Content { size } => size.to_string(),
                    VersionKind::Deleted => "-".into(),
                },
                if past.version.latest {
                    "current".into()
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    table(
        &[
            "VERSION",
            "WRITTEN",
            "OP",
            "RUN",
            "PROGRAM",
            "TERRAFORM",
            "SIZE",
            "",
        ],
        &rows,
    )?;
    if let History::CurrentOnly(why) = &listing.history {
        outln!("only the current version is shown: {why}");
    }
    Ok(0)
}
