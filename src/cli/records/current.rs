//! `records ls` and `records show`: the estate's current records.

use std::path::Path;

use super::address::shown_address;
use super::estate::open_session;
use super::out::outln;
use crate::cli::error::CliError;
use crate::engine::record::{CorruptRecord, RecordKind};
use crate::engine::session::BaseEntry;

/// `records ls`: every record with its version and program stamp.
pub(super) async fn ls(root: &Path) -> Result<i32, CliError> {
    let session = open_session(root).await?;
    let snapshot = session.snapshot().await;
    outln!(
        "estate {} in {} ({} records)",
        session.layout().estate(),
        session.store().describe(),
        snapshot.records.len()
    );
    let mut rows: Vec<(String, String, String)> = snapshot
        .records
        .values()
        .map(|e| {
            Ok((
                shown_address(e.kind(), e.address()),
                e.version.to_string(),
                e.record()?.program.short(),
            ))
        })
        .collect::<Result<_, CorruptRecord>>()?;
    rows.sort();
    let w0 = rows
        .iter()
        .map(|r| r.0.chars().count())
        .max()
        .unwrap_or(7)
        .max(7);
    let w1 = rows
        .iter()
        .map(|r| r.1.chars().count())
        .max()
        .unwrap_or(7)
        .max(7);
    outln!("{:w0$}  {:w1$}  PROGRAM", "ADDRESS", "VERSION");
    for (a, v, p) in rows {
        outln!("{a:w0$}  {v:w1$}  {p}");
    }
    Ok(0)
}

/// `records show`: one record as stored.
pub(super) async fn show(root: &Path, address: &str) -> Result<i32, CliError> {
    let session = open_session(root).await?;
    let snapshot = session.snapshot().await;
    let wanted = |e: &&BaseEntry| match e.kind() {
        RecordKind::Resource => e.address() == address,
        RecordKind::Output => address.strip_prefix("output.") == Some(e.address()),
    };
    match snapshot.records.values().find(wanted) {
        Some(entry) => {
            outln!("# version {}", entry.version);
            outln!("{}", serde_json::to_string_pretty(entry.record()?)?);
            Ok(0)
        }
        None => {
            eprintln!(
                "Error: no record for {address} in estate {}; `choudoufu-live records ls` lists them",
                session.layout().estate()
            );
            Ok(1)
        }
    }
}
