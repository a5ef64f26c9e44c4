//! Putting an older version of one record back as its new current version (`records restore`).

use super::conflict::RecordConflict;
use super::record_write::{Put, WriteError, put_record};
use crate::cut::{Mechanism, cut};
use crate::engine::layout::Layout;
use crate::engine::log_writer::LogWriter;
use crate::engine::program::now_rfc3339;
use crate::engine::record::{Record, Writer};
use crate::engine::session::RunInfo;
use crate::store::{DynStore, Precondition, Version};

/// What a restore did.
#[derive(Clone, Debug, PartialEq)]
pub enum Restored {
    /// It landed: the record's new current version, written by the restore run `run_id`.
    Written {
        /// The new current version.
        version: Version,
        /// The restore run's id, stamped on the record.
        run_id: String,
    },
    /// Another run wrote the record after the restore read it; nothing was overwritten.
    Conflict(RecordConflict),
}

/// Put `old`, the content of stored version `from` of the record at `key` (`address`), back as
/// a new write by a restore run, conditional on `current`: the version read as current (none:
/// the record is deleted now).
pub async fn restore(
    store: &DynStore,
    layout: &Layout,
    key: &str,
    address: &str,
    old: &Record,
    from: &str,
    current: Option<Version>,
) -> Result<Restored, WriteError> {
    let run = RunInfo::new(old.program.clone());
    let restored = Record {
        estate: layout.estate().to_string(),
        item: old.item.clone(),
        program: old.program.clone(),
        writer: Writer {
            run_id: run.run_id.clone(),
            written_at: now_rfc3339(),
            terraform_version: old.writer.terraform_version.clone(),
            restored_from: Some(from.to_string()),
            log: None,
            plan: None,
        },
    };
    let log = LogWriter::new(store.clone(), layout.clone(), &run.run_id);
    let mut precondition = match current {
        Some(v) => Precondition::Matches(v),
        None => Precondition::Absent,
    };
    let mut tries = 0;
    loop {
        let body = restored.clone();
        let tried = precondition.clone();
        match put_record(store.as_ref(), layout, &log, key, address, body, tried).await? {
            Put::Landed { version, .. } | Put::Already { version, .. } => {
                return Ok(Restored::Written {
                    version,
                    run_id: run.run_id,
                });
            }
            // Cut: a blind restore, tried again on whatever is there now (last writer wins).
            Put::Conflict(_) if cut(Mechanism::RestoreCondition) && tries < 10 => {
                tries += 1;
                precondition = match store.get(key).await? {
                    Some(s) => Precondition::Matches(s.version),
                    None => Precondition::Absent,
                };
            }
            Put::Conflict(c) => return Ok(Restored::Conflict(c)),
        }
    }
}
