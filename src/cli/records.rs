//! `choudoufu-live records ls|show`: what the estate holds.

use std::path::Path;

use clap::Subcommand;

use super::CliError;
use crate::config::LiveConfig;
use crate::engine::layout::Layout;
use crate::engine::program::ProgramStamp;
use crate::engine::record::RecordKind;
use crate::engine::session::{BaseEntry, RunInfo, Session};
use crate::store;

/// Look at the estate's records.
#[derive(Debug, Subcommand)]
pub enum RecordsCommand {
    /// List every record: address, version and the program stamp of its last writer.
    Ls,
    /// Show one record as stored (it may hold secrets: it is printed only here, never logged).
    Show {
        /// The resource instance address, e.g. 'terraform_data.db' or 'module.a.x["k"]', or 'output.NAME'.
        address: String,
    },
}

/// Open a read-only session on the root's estate.
pub async fn open_session(root: &Path) -> Result<Session, CliError> {
    let config = LiveConfig::load(root)?;
    let store = store::open(&config.store, root).await;
    let layout = Layout::new(config.estate.clone());
    let run = RunInfo::new(ProgramStamp::detect(root));
    Ok(Session::open(store, layout, run).await?)
}

/// Run a `records` command.
pub async fn run(root: &Path, cmd: RecordsCommand) -> Result<i32, CliError> {
    let session = open_session(root).await?;
    let snapshot = session.snapshot().await;
    match cmd {
        RecordsCommand::Ls => {
            println!(
                "estate {} in {} ({} records)",
                session.layout().estate(),
                session.store().describe(),
                snapshot.records.len()
            );
            let mut rows: Vec<(String, String, String)> = snapshot
                .records
                .values()
                .map(|e| {
                    let address = match e.record.kind() {
                        RecordKind::Resource => e.record.address().to_string(),
                        RecordKind::Output => format!("output.{}", e.record.address()),
                    };
                    (address, e.version.to_string(), e.record.program.short())
                })
                .collect();
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
            println!("{:w0$}  {:w1$}  PROGRAM", "ADDRESS", "VERSION");
            for (a, v, p) in rows {
                println!("{a:w0$}  {v:w1$}  {p}");
            }
            Ok(0)
        }
        RecordsCommand::Show { address } => {
            let wanted = |e: &&BaseEntry| match e.record.kind() {
                RecordKind::Resource => e.record.address() == address,
                RecordKind::Output => address.strip_prefix("output.") == Some(e.record.address()),
            };
            match snapshot.records.values().find(wanted) {
                Some(entry) => {
                    println!("# version {}", entry.version);
                    println!("{}", serde_json::to_string_pretty(&entry.record)?);
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
    }
}
