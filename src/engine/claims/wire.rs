//! The claims as stored: the pending mark `p/<address>` and the run record `runs/<run id>`.
//!
//! Their JSON is a wire format: programs of other versions read and write the same objects,
//! so a field is only ever added (with a default that reads what older programs wrote).

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::engine::layout::Layout;
use crate::engine::operation::Operation;
use crate::engine::program::ProgramStamp;
use crate::store::{DynStore, StoreError, Version};

/// Format tag of a pending mark.
pub const MARK_FORMAT: &str = "choudoufu-live/pending/v1";
/// Format tag of a run record.
pub const RUN_FORMAT: &str = "choudoufu-live/run/v1";

/// A resource in flight in one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// Always [`MARK_FORMAT`].
    pub format: String,
    /// The estate.
    pub estate: String,
    /// The resource instance address.
    pub address: String,
    /// The run that has it in flight.
    pub run_id: String,
    /// What the run is doing to it.
    pub operation: Operation,
    /// When the mark was set (RFC 3339).
    pub since: String,
    /// Its run's heartbeat interval: until the run's first heartbeat writes its run record, the
    /// mark alone shows the run alive for [`MISSED_BEATS`](crate::engine::claims::MISSED_BEATS) intervals from
    /// `since` (0, as in marks older programs wrote: only the run record counts).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub heartbeat_millis: u64,
    /// The resources this change depends on (resource or module addresses, without instance keys).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
    /// Its run's program stamp, so its holder is named before the run's first heartbeat writes its run record (none in marks older programs wrote).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<ProgramStamp>,
}

/// A run's liveness record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Always [`RUN_FORMAT`].
    pub format: String,
    /// The estate.
    pub estate: String,
    /// The run.
    pub run_id: String,
    /// Its program stamp.
    pub program: ProgramStamp,
    /// When it started.
    pub started_at: String,
    /// Its last heartbeat.
    pub heartbeat_at: String,
    /// Its heartbeat interval.
    pub heartbeat_millis: u64,
    /// True once it said it ended.
    pub ended: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A mark or run record that could not be turned into JSON; nothing was written.
#[derive(Debug, Error)]
#[error("could not encode a {what} as JSON; nothing was written: {source}")]
pub struct EncodeError {
    /// What was being encoded.
    pub what: &'static str,
    /// The cause.
    #[source]
    pub source: serde_json::Error,
}

impl Mark {
    /// The mark's stored bytes.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        encode("pending mark", self)
    }
}

impl RunRecord {
    /// The run record's stored bytes.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        encode("run record", self)
    }
}

fn encode<T: Serialize>(what: &'static str, v: &T) -> Result<Vec<u8>, EncodeError> {
    serde_json::to_vec(v).map_err(|source| EncodeError { what, source })
}

/// The mark stored at `key`, with its version, if there is a readable one.
///
/// A stored object that is not a mark (another program's, or damaged) counts as no mark, as
/// it always has: a claim then finds the key taken by its conditional write and reads again.
pub async fn read_mark(store: &DynStore, key: &str) -> Result<Option<(Mark, Version)>, StoreError> {
    Ok(store.get(key).await?.and_then(|s| {
        serde_json::from_slice::<Mark>(&s.bytes)
            .ok()
            .map(|m| (m, s.version))
    }))
}

/// The run record of `run_id`, if there is a readable one (an unreadable one counts as none: its run shows no sign of life).
pub async fn read_run(
    store: &DynStore,
    layout: &Layout,
    run_id: &str,
) -> Result<Option<RunRecord>, StoreError> {
    Ok(store
        .get(&layout.run_key(run_id))
        .await?
        .and_then(|s| serde_json::from_slice::<RunRecord>(&s.bytes).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mark and a run record exactly as the program before the `Operation` enum stored them.
    const OLD_MARK: &str = r#"{"format":"choudoufu-live/pending/v1","estate":"e","address":"module.m[0].terraform_data.x[\"k\"]","run_id":"r1","operation":"replace","since":"2026-11-30T00:00:00Z","heartbeat_millis":10000,"dependencies":["terraform_data.w"]}"#;
    const OLD_BARE_MARK: &str = r#"{"format":"choudoufu-live/pending/v1","estate":"e","address":"terraform_data.a","run_id":"r0","operation":"import","since":"2026-11-30T00:00:00Z"}"#;
    const OLD_RUN: &str = r#"{"format":"choudoufu-live/run/v1","estate":"e","run_id":"r1","program":{"commit":"0123456789abcdef","time":"2026-11-30T00:00:00Z"},"started_at":"2026-11-30T00:00:00Z","heartbeat_at":"2026-11-30T00:00:10Z","heartbeat_millis":10000,"ended":false}"#;

    #[test]
    fn records_of_the_previous_version_read_and_write_back_byte_for_byte() {
        let mark: Mark = serde_json::from_str(OLD_MARK).unwrap();
        assert_eq!(mark.operation, Operation::Replace);
        assert_eq!(mark.encode().unwrap(), OLD_MARK.as_bytes());
        let bare: Mark = serde_json::from_str(OLD_BARE_MARK).unwrap();
        assert_eq!(
            (
                bare.operation,
                bare.heartbeat_millis,
                bare.dependencies.len()
            ),
            (Operation::Import, 0, 0)
        );
        assert_eq!(bare.encode().unwrap(), OLD_BARE_MARK.as_bytes());
        let run: RunRecord = serde_json::from_str(OLD_RUN).unwrap();
        assert_eq!(run.encode().unwrap(), OLD_RUN.as_bytes());
    }

    #[test]
    fn a_mark_naming_no_known_operation_is_not_a_mark() {
        let odd = OLD_BARE_MARK.replace("\"import\"", "\"obliterate\"");
        assert!(serde_json::from_str::<Mark>(&odd).is_err());
    }
}
