//! `records export` and `records import`: the estate as one terraform state document, and back.

use std::io::Write;
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::address::shown_address;
use super::estate::open_session;
use super::out::outln;
use crate::cli::error::CliError;
use crate::engine::layout::{Layout, RecordKey};
use crate::engine::program::ProgramStamp;
use crate::engine::record::{Record, Writer};
use crate::engine::session::{BaseEntry, RecordConflictError, RunInfo, Session};
use crate::engine::state::{self, Header, Item};
use crate::run::EXIT_CONFLICT;
use crate::store;
use crate::store::private_file::Durability;

/// A file of `export` or `import` could not be read or written.
#[derive(Debug, Error)]
#[error("{what} {path}: {source}")]
pub struct FileError {
    /// What was being done.
    pub what: &'static str,
    /// The file.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}

/// Some addresses of the document already have a record: nothing was imported.
#[derive(Debug, Error)]
#[error(
    "ImportRefused: {} address(es) of {file} already have a record in estate {estate}: {}; nothing was written. Import only addresses the estate does not hold (restore or change those with terraform instead).",
    addresses.len(),
    addresses.join(", ")
)]
pub struct ImportRefused {
    /// The document.
    pub file: String,
    /// The estate.
    pub estate: String,
    /// Every address that has a record, in order.
    pub addresses: Vec<String>,
}

/// Write `bytes` to `path` as a private file (0600), whole: a temp file beside it, then a rename.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    store::private_file::write(path, bytes, Durability::Synced).map_err(|e| FileError {
        what: if e.step == "create temp" {
            "cannot create"
        } else {
            "cannot write"
        },
        path: path.to_path_buf(),
        source: e.source,
    })
}

/// `records export [-o FILE]`.
pub async fn export(root: &Path, output: Option<&Path>) -> Result<i32, CliError> {
    let session = open_session(root).await?;
    let doc = session.state_document().await;
    let records = session.snapshot().await.records.len();
    match output {
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(&doc)?;
            out.flush()?;
        }
        Some(path) => {
            write_private(path, &doc)?;
            eprintln!(
                "exported estate {} ({} records, {}) to {} (private, 0600: it holds every attribute, secrets included)",
                session.layout().estate(),
                records,
                session.store().describe(),
                path.display()
            );
        }
    }
    Ok(0)
}

/// The store key of a document item.
fn key_of(layout: &Layout, item: &Item) -> RecordKey {
    match item {
        Item::Resource { address, .. } => layout.resource_key(address),
        Item::Output { name, .. } => layout.output_key(name),
    }
}

/// The address of a document item, as the commands print it.
fn address_of(item: &Item) -> String {
    match item {
        Item::Resource { address, .. } => address.clone(),
        Item::Output { name, .. } => format!("output.{name}"),
    }
}

/// The content digest of an item, as the session compares records.
fn digest_of(layout: &Layout, item: &Item) -> String {
    Record {
        estate: layout.estate().to_string(),
        item: item.clone(),
        program: ProgramStamp::default(),
        writer: Writer {
            run_id: String::new(),
            written_at: String::new(),
            terraform_version: None,
            restored_from: None,
            log: None,
            plan: None,
        },
    }
    .content_digest()
}

/// `records import FILE`.
pub async fn import(root: &Path, file: &Path) -> Result<i32, CliError> {
    let bytes = std::fs::read(file).map_err(|source| FileError {
        what: "cannot read",
        path: file.to_path_buf(),
        source,
    })?;
    let config = crate::config::backend_s3::root_config(root)?;
    let layout = Layout::new(config.estate.clone());
    import_bytes(root, &bytes, &file.display().to_string(), &config, layout).await
}

/// Import the state document `bytes` (named `file` in messages) into the estate of `layout`, in the store of `config`.
pub(super) async fn import_bytes(
    root: &Path,
    bytes: &[u8],
    file: &str,
    config: &crate::config::LiveConfig,
    layout: Layout,
) -> Result<i32, CliError> {
    let split = state::parse(bytes)?;
    let store = store::open(&config.store, root).await;
    let run = RunInfo::new(ProgramStamp::detect(root));
    let session = Session::open(store, layout.clone(), run)
        .await?
        .with_guard(store::guard_for(&config.store));
    let snapshot = session.snapshot().await;
    let existing: Vec<String> = split
        .items
        .iter()
        .filter(|i| snapshot.records.contains_key(key_of(&layout, i).as_str()))
        .map(address_of)
        .collect();
    if !existing.is_empty() {
        eprintln!(
            "choudoufu-live: {}",
            ImportRefused {
                file: file.to_string(),
                estate: layout.estate().to_string(),
                addresses: existing,
            }
        );
        return Ok(1);
    }
    if split.items.is_empty() {
        outln!(
            "{} holds no resources and no outputs: nothing to import into estate {}.",
            file,
            layout.estate()
        );
        return Ok(0);
    }
    // The estate's records and the document's together, so the session's write creates the
    // new records and leaves every other one as it is (it would delete what a document lacks).
    let header = Header {
        lineage: split.lineage.clone(),
        serial: split.serial,
        terraform_version: split.terraform_version.clone(),
    };
    let held = snapshot
        .records
        .values()
        .map(BaseEntry::record)
        .collect::<Result<Vec<_>, _>>()?;
    let merged = state::assemble_bytes(
        &header,
        held.iter().map(|r| &r.item).chain(split.items.iter()),
    );
    // A document resource that shares a resource block with an estate record but disagrees on
    // it (provider, `each`) would change that record when merged: refuse it before any write.
    let changed: Vec<String> = state::parse(&merged)?
        .items
        .iter()
        .filter_map(|item| {
            let entry = snapshot.records.get(key_of(&layout, item).as_str())?;
            (entry.digest != digest_of(&layout, item))
                .then(|| shown_address(entry.kind(), entry.address()))
        })
        .collect();
    if !changed.is_empty() {
        eprintln!(
            "Error: the document's resources disagree with the estate's records of the same resource block (provider, mode or each) for {}; importing would change those records, so nothing was written.",
            changed.join(", ")
        );
        return Ok(1);
    }
    let report = session.write_state(&merged).await?;
    let mut created = report.created.clone();
    created.sort();
    outln!(
        "imported into estate {} ({}): {} record(s) created{}",
        layout.estate(),
        session.store().describe(),
        created.len(),
        if created.is_empty() {
            String::new()
        } else {
            format!(" ({})", created.join(", "))
        }
    );
    if !report.conflicts.is_empty() {
        let landed = report.landed();
        eprintln!(
            "choudoufu-live: {}",
            RecordConflictError {
                conflicts: report.conflicts,
                landed,
            }
        );
        return Ok(EXIT_CONFLICT);
    }
    Ok(0)
}
