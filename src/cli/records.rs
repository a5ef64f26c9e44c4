//! `choudoufu-live records ...`: what the estate holds, its past, and moving state in and out.
//!
//! `ls` and `show` read the current records; `history`, `restore` and `log` read the
//! store's object versions ([`history`]); `export` and `import` turn the estate into one
//! terraform state document and back ([`transfer`]); `recover` writes a run's recovery file ([`recover`]).

mod history;
mod recover;
mod transfer;

use std::path::{Path, PathBuf};

use clap::Subcommand;

use super::CliError;
use crate::config::LiveConfig;
use crate::engine::layout::Layout;
use crate::engine::program::ProgramStamp;
use crate::engine::record::RecordKind;
use crate::engine::session::{BaseEntry, RunInfo, Session};
use crate::store::{self, DynStore};

/// Look at the estate's records, their history, and move state in and out.
#[derive(Debug, Subcommand)]
pub enum RecordsCommand {
    /// List every record: address, version and the program stamp of its last writer.
    Ls,
    /// Show one record as stored (it may hold secrets: it is printed only here, never logged).
    Show {
        /// The resource instance address, e.g. 'terraform_data.db' or 'module.a.x["k"]', or 'output.NAME'.
        address: String,
    },
    /// Every stored version of one record, newest first: version id, time, operation, run, program, size.
    #[command(
        long_about = "Every stored version of one record, newest first.\n\nEach row gives the store's version id (what `restore --version` takes), when the version was written, what the write was (create, update, restore, delete), the writer's run id, program stamp and terraform version, and the size. The versions come from the store: S3 object versions, Azure blob versions, GCS object generations. A store that keeps no old versions (a local folder, a bucket without versioning) shows only the current one and says so.\n\nExit status: 0, or 1 when the address has no record and no stored version."
    )]
    History {
        /// The resource instance address, e.g. 'terraform_data.db', or 'output.NAME'.
        address: String,
    },
    /// Put an older version of one record back, conditionally on the version now current.
    #[command(
        disable_version_flag = true,
        long_about = "Put an older version of one record back as its new current version.\n\nThe write is one conditional request on the version that is current when the restore reads it (If-Match; If-None-Match: * when the record is deleted now): if another run writes the record in between, the restore is refused by name (RecordConflictError, exit 4) and nothing is overwritten. No other record is touched.\n\nIt prints what it replaces, the attributes that change (sensitive values masked), and what the next plan should be expected to show: terraform refreshes the restored record against the real object. --dry-run prints the same and writes nothing.\n\nExit status: 0 restored (or nothing to do), 1 no such version or a store that keeps no history, 4 refused because the record changed."
    )]
    Restore {
        /// The resource instance address, e.g. 'terraform_data.db', or 'output.NAME'.
        address: String,
        /// The version to put back, as `records history ADDRESS` lists it.
        #[arg(long, value_name = "VERSION_ID")]
        version: String,
        /// Show what would change, and write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// The estate's writes in time order: creates, updates, restores, deletes, with run ids.
    #[command(
        long_about = "The estate's writes in time order, across all records: each create, update, restore and delete with its time, address, the writer's run id and program stamp, and the version it made. It answers \"what did the 14:02 run change?\": `records log --since 2h | grep RUN_ID`.\n\nThe writes come from the store's object versions, so the log reaches back as far as the store keeps them (a lifecycle rule expires old versions; the oldest version kept shows as a create). A delete carries no record, so no run id: S3 gives its time, GCS the time the object went noncurrent, Azure no time. A store that keeps no history (a local folder) shows each record's last write only, and says so."
    )]
    Log {
        /// Only writes newer than this: a duration (90s, 30m, 2h, 1d, 1h30m) or an RFC 3339 time.
        #[arg(long, value_name = "DURATION|TIME")]
        since: Option<String>,
        /// Only addresses matching this pattern (`*` any characters, `?` one), e.g. 'module.net.*' or 'output.*'.
        #[arg(long, value_name = "PATTERN")]
        address: Option<String>,
    },
    /// The estate as one terraform state v4 document, exactly as `run` serves it.
    #[command(
        long_about = "The estate as one terraform state (version 4) document: exactly the document `run` serves terraform, with its lineage, serial and terraform_version. For a backup, for another tool, or to leave: `terraform show FILE` and `terraform state push FILE` read it.\n\nThe document holds every attribute, secrets included: with -o the file is created private (0600) and replaced whole; without -o it goes to stdout."
    )]
    Export {
        /// Write to FILE (private, 0600) instead of stdout.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Create records from a terraform state v4 document: conditional creates only.
    #[command(
        long_about = "Create one record per resource instance and output of a terraform state (version 4) document, e.g. a `terraform state pull` of another backend: the way in without running terraform.\n\nOnly creates are made (If-None-Match: *). Before anything is written, every address of the document is checked: if any already has a record in the estate, the import is refused naming them (exit 1) and nothing is written. A record another run creates meanwhile is refused by name (RecordConflictError, exit 4); the others land. Records of other addresses in the estate are left as they are. The store's safety check runs before the first write, as for a run.\n\nA malformed document (not JSON, not version 4, one address twice) is refused before anything is written."
    )]
    Import {
        /// The state document, e.g. terraform.tfstate.
        file: PathBuf,
    },
    /// Write the state a run could not write (its recovery file), conditionally on the versions that run read.
    #[command(
        long_about = "Write the state a `run` could not write because the record store did not answer: the recovery file it left (choudoufu-live-recovery-ESTATE-TIME-RUN.tfstate.json in the root).\n\nEach record is written as that run's own write would have been: conditionally on the version the run read (If-Match; If-None-Match: * for a new one), so a record another run changed since is refused by name (RecordConflictError, exit 4) and keeps that run's content, while the others land. Records that already hold the file's content, written by that run, count as written: recovering one file twice changes nothing. A file of another estate or store is refused (RecoveryEstateMismatch) and nothing is written. The store's safety check runs before the first write.\n\nDo not `terraform state push errored.tfstate` instead: that writes terraform's copy against the records as they are then, and can undo what other runs wrote since.\n\nExit status: 0 written (or nothing left to write), 1 the file is unreadable, of another estate, or the store still does not answer (the file is kept), 4 some records were refused."
    )]
    Recover {
        /// The recovery file `run` wrote.
        file: PathBuf,
    },
}

/// The root's live block, store and estate layout.
pub(crate) struct Estate {
    /// The live block.
    pub config: LiveConfig,
    /// The store, traced.
    pub store: DynStore,
    /// The estate's keys.
    pub layout: Layout,
}

impl Estate {
    /// Read the live block of `root` and open its store.
    pub async fn open(root: &Path) -> Result<Estate, CliError> {
        let config = LiveConfig::load(root)?;
        let store = store::open(&config.store, root).await;
        let layout = Layout::new(config.estate.clone());
        Ok(Estate {
            config,
            store,
            layout,
        })
    }

    /// The store key of an address as the commands take it (`output.NAME` for an output).
    pub fn key_of(&self, address: &str) -> String {
        match address.strip_prefix("output.") {
            Some(name) => self.layout.output_key(name),
            None => self.layout.resource_key(address),
        }
    }
}

/// Open a read-only session on the root's estate.
pub async fn open_session(root: &Path) -> Result<Session, CliError> {
    let config = LiveConfig::load(root)?;
    let store = store::open(&config.store, root).await;
    let layout = Layout::new(config.estate.clone());
    let run = RunInfo::new(ProgramStamp::detect(root));
    Ok(Session::open(store, layout, run).await?)
}

/// An address as the commands print it: `output.NAME` for an output.
pub(crate) fn shown_address(kind: RecordKind, address: &str) -> String {
    match kind {
        RecordKind::Resource => address.to_string(),
        RecordKind::Output => format!("output.{address}"),
    }
}

/// Run a `records` command.
pub async fn run(root: &Path, cmd: RecordsCommand) -> Result<i32, CliError> {
    match cmd {
        RecordsCommand::Ls => ls(root).await,
        RecordsCommand::Show { address } => show(root, &address).await,
        RecordsCommand::History { address } => history::history(root, &address).await,
        RecordsCommand::Restore {
            address,
            version,
            dry_run,
        } => history::restore(root, &address, &version, dry_run).await,
        RecordsCommand::Log { since, address } => {
            history::log(root, since.as_deref(), address.as_deref()).await
        }
        RecordsCommand::Export { output } => transfer::export(root, output.as_deref()).await,
        RecordsCommand::Import { file } => transfer::import(root, &file).await,
        RecordsCommand::Recover { file } => recover::recover(root, &file).await,
    }
}

async fn ls(root: &Path) -> Result<i32, CliError> {
    let session = open_session(root).await?;
    let snapshot = session.snapshot().await;
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
            (
                shown_address(e.record.kind(), e.record.address()),
                e.version.to_string(),
                e.record.program.short(),
            )
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

async fn show(root: &Path, address: &str) -> Result<i32, CliError> {
    let session = open_session(root).await?;
    let snapshot = session.snapshot().await;
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        crate::cli::Cli::command().debug_assert();
    }
}
