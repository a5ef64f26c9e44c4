//! Records: one resource instance (or root output) as stored, with its writer's stamps.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::digest::value_digest;
use crate::error::CorruptRecord;
use crate::layout::Layout;
use crate::program::ProgramStamp;

/// Format tag of a record.
pub const RECORD_FORMAT: &str = "choudoufu-live/record/v1";
/// Format tag of an estate's meta record.
pub const ESTATE_FORMAT: &str = "choudoufu-live/estate/v1";
/// Largest record this program decodes.
pub const MAX_RECORD_BYTES: usize = 64 * 1024 * 1024;

/// What a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    /// One resource instance object.
    Resource,
    /// One root module output.
    Output,
}

/// The resource an instance belongs to, as terraform's state names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceMeta {
    /// The module path, e.g. `module.net[0]`; none for the root module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// `managed` or `data`.
    pub mode: String,
    /// The resource type.
    #[serde(rename = "type")]
    pub type_name: String,
    /// The resource name.
    pub name: String,
    /// `list` (count) or `map` (for_each), when the resource repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub each: Option<String>,
    /// The provider configuration address.
    pub provider: String,
}

/// Who wrote a record, and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Writer {
    /// The writing run's unique ID.
    pub run_id: String,
    /// When the record was written (RFC 3339).
    pub written_at: String,
    /// The terraform or tofu version that produced the state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terraform_version: Option<String>,
}

/// One stored record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Always [`RECORD_FORMAT`].
    pub format: String,
    /// The estate it belongs to.
    pub estate: String,
    /// What it holds.
    pub kind: RecordKind,
    /// The instance address, or the output's name.
    pub address: String,
    /// The resource, for a resource record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceMeta>,
    /// The instance object exactly as the state holds it, for a resource record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<Value>,
    /// The output object (`value`, `type`, `sensitive`), for an output record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The program stamp of its last writer.
    pub program: ProgramStamp,
    /// Its last writer.
    pub writer: Writer,
}

impl Record {
    /// Digest of what the record says about the resource, leaving out who wrote it and when.
    pub fn content_digest(&self) -> String {
        content_digest(
            self.kind,
            &self.address,
            self.resource.as_ref(),
            self.instance.as_ref(),
            self.output.as_ref(),
        )
    }

    /// The record's bytes as stored.
    pub fn encode(&self) -> Vec<u8> {
        // A Record has string keys only: serialising cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Read a record from the bytes at `key`, checking it belongs there.
    pub fn decode(key: &str, bytes: &[u8], layout: &Layout) -> Result<Record, CorruptRecord> {
        let bad = |reason: String| CorruptRecord {
            key: key.to_string(),
            reason,
        };
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(bad(format!(
                "{} bytes is larger than any record",
                bytes.len()
            )));
        }
        let record: Record =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("not a record: {e}")))?;
        if record.format != RECORD_FORMAT {
            return Err(bad(format!("unknown record format {:?}", record.format)));
        }
        if record.estate != layout.estate().as_str() {
            return Err(bad(format!(
                "it claims estate {:?}, but lies under estate {:?}",
                record.estate,
                layout.estate().as_str()
            )));
        }
        let (expected_key, complete) = match record.kind {
            RecordKind::Resource => (
                layout.resource_key(&record.address),
                record.resource.is_some()
                    && record.instance.as_ref().is_some_and(Value::is_object)
                    && record.output.is_none(),
            ),
            RecordKind::Output => (
                layout.output_key(&record.address),
                record.output.as_ref().is_some_and(Value::is_object)
                    && record.resource.is_none()
                    && record.instance.is_none(),
            ),
        };
        if expected_key != key {
            return Err(bad(format!(
                "it names {:?}, whose key is {expected_key}",
                record.address
            )));
        }
        if !complete {
            return Err(bad("its fields do not match its kind".into()));
        }
        Ok(record)
    }
}

/// Digest of a record's content fields.
pub fn content_digest(
    kind: RecordKind,
    address: &str,
    resource: Option<&ResourceMeta>,
    instance: Option<&Value>,
    output: Option<&Value>,
) -> String {
    value_digest(&json!({
        "kind": kind,
        "address": address,
        "resource": resource,
        "instance": instance,
        "output": output,
    }))
}

/// An estate's meta record: its lineage, created once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EstateMeta {
    /// Always [`ESTATE_FORMAT`].
    pub format: String,
    /// The estate.
    pub estate: String,
    /// The lineage terraform sees for this estate.
    pub lineage: String,
    /// When it was created.
    pub created_at: String,
    /// The program that created it.
    pub created_by: ProgramStamp,
}

impl EstateMeta {
    /// Read the meta record at `key`.
    pub fn decode(key: &str, bytes: &[u8], layout: &Layout) -> Result<EstateMeta, CorruptRecord> {
        let bad = |reason: String| CorruptRecord {
            key: key.to_string(),
            reason,
        };
        let meta: EstateMeta =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("not an estate record: {e}")))?;
        if meta.format != ESTATE_FORMAT {
            return Err(bad(format!("unknown estate format {:?}", meta.format)));
        }
        if meta.estate != layout.estate().as_str() {
            return Err(bad(format!("it claims estate {:?}", meta.estate)));
        }
        Ok(meta)
    }

    /// The meta record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}
