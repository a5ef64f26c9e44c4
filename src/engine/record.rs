//! Records: one resource instance object (or root output) as stored, with its writer's stamps.

use std::borrow::Cow;
use std::ops::Deref;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use thiserror::Error;

use crate::cut::{Mechanism, cut};
use crate::engine::digest::{canonical, value_digest};
use crate::engine::layout::{Layout, ROOT_PREFIX, RecordKey};
use crate::engine::program::ProgramStamp;
use crate::engine::state::{Instance, InstanceRank, Item, ResourceMeta};
use crate::store::key::MAX_READABLE_SEGMENT;

/// Format tag of a record.
pub const RECORD_FORMAT: &str = "choudoufu-live/record/v1";
/// Format tag of an estate's meta record.
pub const ESTATE_FORMAT: &str = "choudoufu-live/estate/v1";
/// Largest record this program decodes.
pub const MAX_RECORD_BYTES: usize = 64 * 1024 * 1024;

/// A record in the store that cannot be decoded or does not belong where it lies.
#[derive(Clone, Debug, Error)]
#[error("corrupted record at {key}: {reason}; the run stopped before writing anything")]
pub struct CorruptRecord {
    /// The store key.
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

/// What a record holds, as its stored `kind` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    /// One resource instance object.
    Resource,
    /// One root module output.
    Output,
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
    /// The store version this content was put back from, when `records restore` wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<String>,
    /// The name of the write log entry made before this write (none: an older writer's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// The SHA-256 of the saved plan whose apply wrote it (none: not a saved plan's apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
}

/// One stored record: the state item it holds, whose estate it is, and who last wrote it.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// The estate it belongs to.
    pub estate: String,
    /// The resource instance object or output it holds.
    pub item: Item,
    /// The program stamp of its last writer.
    pub program: ProgramStamp,
    /// Its last writer.
    pub writer: Writer,
}

/// A record as stored (format v1): a kind tag and the fields of that kind.
#[derive(Serialize)]
struct WireOut<'a> {
    format: &'a str,
    estate: &'a str,
    kind: RecordKind,
    address: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource: Option<&'a ResourceMeta>,
    #[serde(skip_serializing_if = "Option::is_none")]
    instance: Option<&'a Instance>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a Value>,
    program: &'a ProgramStamp,
    writer: &'a Writer,
}

#[derive(Deserialize)]
struct WireIn {
    format: String,
    estate: String,
    kind: RecordKind,
    address: String,
    #[serde(default)]
    resource: Option<ResourceMeta>,
    #[serde(default)]
    instance: Option<Value>,
    #[serde(default)]
    output: Option<Value>,
    program: ProgramStamp,
    writer: Writer,
}

/// A record in final form, as an estate image holds it: the instance kept as its text.
#[derive(Deserialize)]
struct WireFinal<'a> {
    #[serde(borrow)]
    format: Cow<'a, str>,
    #[serde(borrow)]
    estate: Cow<'a, str>,
    kind: RecordKind,
    address: String,
    #[serde(default)]
    resource: Option<ResourceMeta>,
    #[serde(default)]
    instance: Option<Box<RawValue>>,
    #[serde(default)]
    output: Option<Value>,
    program: ProgramStamp,
    writer: Writer,
}

/// Where a resource record in final form holds what a read serves of it without decoding it:
/// each text as `[start, end)` of the record's bytes, its JSON string's content between its
/// quotes (escapes as written), `[0, 0]` when absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary(pub [[usize; 2]; SUMMARY_SPANS]);

/// How many ranges a [`Summary`] holds: address, module, mode, type, name, each, provider,
/// the writer's terraform version, and the instance object.
pub const SUMMARY_SPANS: usize = 9;

/// A record in final form as [`summary_of_final`] reads it: its texts where they lie, every
/// other field skipped.
#[derive(Deserialize)]
struct WireView<'a> {
    kind: RecordKind,
    #[serde(borrow)]
    address: &'a RawValue,
    #[serde(default, borrow)]
    resource: Option<ResourceRaw<'a>>,
    #[serde(default, borrow)]
    instance: Option<&'a RawValue>,
    #[serde(borrow)]
    writer: WriterView<'a>,
}

#[derive(Deserialize)]
struct ResourceRaw<'a> {
    #[serde(default, borrow)]
    module: Option<&'a RawValue>,
    #[serde(borrow)]
    mode: &'a RawValue,
    #[serde(rename = "type", borrow)]
    type_name: &'a RawValue,
    #[serde(borrow)]
    name: &'a RawValue,
    #[serde(default, borrow)]
    each: Option<&'a RawValue>,
    #[serde(borrow)]
    provider: &'a RawValue,
}

#[derive(Deserialize)]
struct WriterView<'a> {
    #[serde(default, borrow)]
    terraform_version: Option<&'a RawValue>,
}

/// The summary of a resource record in final form (none: not one, or not readable as one).
pub fn summary_of_final(bytes: &[u8]) -> Option<Summary> {
    let wire: WireView = serde_json::from_slice(bytes).ok()?;
    if wire.kind != RecordKind::Resource {
        return None;
    }
    // Where `raw` lies in `bytes`.
    let at = |raw: &str| -> Option<[usize; 2]> {
        let start = (raw.as_ptr() as usize).checked_sub(bytes.as_ptr() as usize)?;
        let end = start.checked_add(raw.len())?;
        (bytes.get(start..end)?.as_ptr() == raw.as_ptr()).then_some([start, end])
    };
    // A string's content, between its quotes.
    let text = |raw: &RawValue| -> Option<[usize; 2]> {
        let [start, end] = at(raw.get())?;
        (raw.get().len() >= 2 && raw.get().starts_with('"')).then_some([start + 1, end - 1])
    };
    let optional = |raw: Option<&RawValue>| match raw {
        Some(r) if r.get() != "null" => text(r),
        _ => Some([0, 0]),
    };
    let r = wire.resource?;
    let instance = wire.instance?;
    if !instance.get().starts_with('{') {
        return None;
    }
    Some(Summary([
        text(wire.address)?,
        optional(r.module)?,
        text(r.mode)?,
        text(r.type_name)?,
        text(r.name)?,
        optional(r.each)?,
        text(r.provider)?,
        optional(wire.writer.terraform_version)?,
        at(instance.get())?,
    ]))
}

impl Serialize for Record {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (resource, instance, output) = match &self.item {
            Item::Resource { meta, instance, .. } => (Some(meta), Some(instance), None),
            Item::Output { output, .. } => (None, None, Some(output)),
        };
        WireOut {
            format: RECORD_FORMAT,
            estate: &self.estate,
            kind: self.kind(),
            address: self.address(),
            resource,
            instance,
            output,
            program: &self.program,
            writer: &self.writer,
        }
        .serialize(serializer)
    }
}

impl Record {
    /// What the record holds.
    pub fn kind(&self) -> RecordKind {
        match self.item {
            Item::Resource { .. } => RecordKind::Resource,
            Item::Output { .. } => RecordKind::Output,
        }
    }

    /// The instance address, or the output's name.
    pub fn address(&self) -> &str {
        match &self.item {
            Item::Resource { address, .. } => address,
            Item::Output { name, .. } => name,
        }
    }

    /// The resource, for a resource record.
    pub fn resource(&self) -> Option<&ResourceMeta> {
        match &self.item {
            Item::Resource { meta, .. } => Some(meta),
            Item::Output { .. } => None,
        }
    }

    /// The instance object exactly as the state holds it, for a resource record.
    pub fn instance(&self) -> Option<&Value> {
        match &self.item {
            Item::Resource { instance, .. } => Some(instance.deref()),
            Item::Output { .. } => None,
        }
    }

    /// The output object (`value`, `type`, `sensitive`), for an output record.
    pub fn output(&self) -> Option<&Value> {
        match &self.item {
            Item::Output { output, .. } => Some(output),
            Item::Resource { .. } => None,
        }
    }

    /// The record's store key in `layout`.
    pub fn key(&self, layout: &Layout) -> RecordKey {
        match &self.item {
            Item::Resource { address, .. } => layout.resource_key(address),
            Item::Output { name, .. } => layout.output_key(name),
        }
    }

    /// Digest of what the record says about the resource, leaving out who wrote it and when.
    ///
    /// Compared in a canonical form: object keys in byte order ([`value_digest`]), and the
    /// instance's lists that terraform treats as sets (`sensitive_attributes`, `dependencies`)
    /// in a fixed order, so a state that only lists them in another order is no change.
    pub fn content_digest(&self) -> String {
        let (resource, instance, output) = match &self.item {
            Item::Resource { meta, instance, .. } => {
                (Some(meta), Some(canonical_instance(instance)), None)
            }
            Item::Output { output, .. } => (None, None, Some(output)),
        };
        value_digest(&json!({
            "kind": self.kind(),
            "address": self.address(),
            "resource": resource,
            "instance": instance,
            "output": output,
        }))
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
        within_size(key, bytes)?;
        let wire: WireIn =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("not a record: {e}")))?;
        check_origin(key, &wire.format, &wire.estate, layout)?;
        let item = match (wire.kind, wire.resource, wire.instance, wire.output) {
            (RecordKind::Resource, Some(meta), Some(instance), None) if instance.is_object() => {
                Item::Resource {
                    address: wire.address,
                    meta,
                    instance: instance.into(),
                }
            }
            (RecordKind::Output, None, None, Some(output)) if output.is_object() => Item::Output {
                name: wire.address,
                output,
            },
            _ => return Err(bad("its fields do not match its kind".into())),
        };
        let record = Record {
            estate: wire.estate,
            item,
            program: wire.program,
            writer: wire.writer,
        };
        record.placed_at(key, layout)
    }
}

/// Refuse bytes larger than any record, before they are parsed.
/// The lists of a resource instance whose order carries no meaning to terraform.
const SET_LISTS: &[&str] = &["sensitive_attributes", "dependencies"];

/// `instance` with its [`SET_LISTS`] sorted by their items' canonical JSON.
fn canonical_instance(instance: &Value) -> Value {
    let mut out = instance.clone();
    if cut(Mechanism::CanonicalCompare) {
        return out;
    }
    for name in SET_LISTS {
        if let Some(Value::Array(items)) = out.get_mut(*name) {
            items.sort_by_cached_key(|item| canonical(item).to_string());
        }
    }
    out
}

fn within_size(key: &str, bytes: &[u8]) -> Result<(), CorruptRecord> {
    if bytes.len() > MAX_RECORD_BYTES {
        return Err(CorruptRecord {
            key: key.to_string(),
            reason: format!("{} bytes is larger than any record", bytes.len()),
        });
    }
    Ok(())
}

/// Refuse a record of another format, or one claiming another estate than the one it lies under.
fn check_origin(
    key: &str,
    format: &str,
    estate: &str,
    layout: &Layout,
) -> Result<(), CorruptRecord> {
    let reason = if format != RECORD_FORMAT {
        format!("unknown record format {format:?}")
    } else if estate != layout.estate().as_str() {
        format!(
            "it claims estate {estate:?}, but lies under estate {:?}",
            layout.estate().as_str()
        )
    } else {
        return Ok(());
    };
    Err(CorruptRecord {
        key: key.to_string(),
        reason,
    })
}

/// Whether `key` is `layout`'s key of the record `item` holds, building no key when it can
/// tell without (a read checks every record it decodes, thousands at a time).
fn belongs_at(item: &Item, key: &str, layout: &Layout) -> bool {
    match item {
        Item::Resource { address, .. } => resource_belongs_at(address, key, layout),
        Item::Output { name, .. } => named_at("o/", name, key, layout),
    }
}

/// Whether `key` is `layout`'s key of the resource instance `address`.
pub fn resource_belongs_at(address: &str, key: &str, layout: &Layout) -> bool {
    named_at("r/", address, key, layout)
}

/// Whether `key` is `layout`'s key of `name` in `folder` (`r/` or `o/`).
fn named_at(folder: &str, name: &str, key: &str, layout: &Layout) -> bool {
    let segment = (!cut(Mechanism::EstatePrefix))
        .then(|| {
            key.strip_prefix(ROOT_PREFIX)?
                .strip_prefix(layout.estate().as_str())?
                .strip_prefix('/')?
                .strip_prefix(folder)
        })
        .flatten();
    match segment {
        Some(segment) if name.len() * 3 <= MAX_READABLE_SEGMENT => escapes_to(name, segment),
        // A long name's segment may be its digest, and a cut prefix is another: build the key.
        _ if folder == "r/" => layout.resource_key(name) == key,
        _ => layout.output_key(name) == key,
    }
}

/// Whether `segment` is `name` as [`crate::store::key::escape`] writes it (for a name short
/// enough that its escape is its segment).
fn escapes_to(name: &str, segment: &str) -> bool {
    let mut rest = segment.as_bytes();
    for (i, b) in name.bytes().enumerate() {
        let plain = b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0);
        rest = if plain {
            match rest.split_first() {
                Some((&c, tail)) if c == b => tail,
                _ => return false,
            }
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            let want = [b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]];
            match rest.split_at_checked(3) {
                Some((head, tail)) if head == want => tail,
                _ => return false,
            }
        };
    }
    rest.is_empty()
}

impl Record {
    /// The record, if `key` is the key it belongs at.
    fn placed_at(self, key: &str, layout: &Layout) -> Result<Record, CorruptRecord> {
        if !belongs_at(&self.item, key, layout) {
            let expected_key = self.key(layout);
            return Err(CorruptRecord {
                key: key.to_string(),
                reason: format!("it names {:?}, whose key is {expected_key}", self.address()),
            });
        }
        Ok(self)
    }

    /// Read a record in final form (as [`Record::encode`] wrote it) from the bytes at `key`,
    /// keeping a resource's instance as text with its `rank`, checking it belongs there.
    pub fn decode_final(
        key: &str,
        bytes: &[u8],
        layout: &Layout,
        rank: Option<InstanceRank>,
    ) -> Result<Record, CorruptRecord> {
        let bad = |reason: String| CorruptRecord {
            key: key.to_string(),
            reason,
        };
        within_size(key, bytes)?;
        let wire: WireFinal =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("not a record: {e}")))?;
        check_origin(key, &wire.format, &wire.estate, layout)?;
        let item = match (wire.kind, wire.resource, wire.instance, wire.output) {
            (RecordKind::Resource, Some(meta), Some(text), None) => Item::Resource {
                address: wire.address,
                meta,
                instance: rank
                    .and_then(|rank| Instance::from_final(text, rank))
                    .ok_or_else(|| bad("its instance is not an object with a rank".into()))?,
            },
            (RecordKind::Output, None, None, Some(output)) if output.is_object() => Item::Output {
                name: wire.address,
                output,
            },
            _ => return Err(bad("its fields do not match its kind".into())),
        };
        let record = Record {
            estate: wire.estate.into_owned(),
            item,
            program: wire.program,
            writer: wire.writer,
        };
        record.placed_at(key, layout)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::layout::EstateName;

    #[test]
    fn a_key_is_checked_as_the_key_the_layout_builds() {
        let l = Layout::new(EstateName::parse("prod").unwrap());
        let other = Layout::new(EstateName::parse("prod2").unwrap());
        let long = format!("aws_s3_object.o[\"{}\"]", "k".repeat(80));
        for address in [
            "aws_instance.web",
            "aws_instance.web[3]",
            "module.net[0].aws_subnet.s[\"a b/é\"]",
            ".hidden",
            &long,
        ] {
            let item = Item::Output {
                name: address.to_string(),
                output: json!({}),
            };
            assert!(belongs_at(&item, &l.output_key(address), &l), "{address}");
            assert!(
                !belongs_at(&item, &l.resource_key(address), &l),
                "{address}"
            );
            assert!(
                !belongs_at(&item, &other.output_key(address), &l),
                "{address}"
            );
            assert!(!belongs_at(
                &item,
                &format!("{}x", l.output_key(address)),
                &l
            ));
            let shorter = l.output_key(address);
            assert!(!belongs_at(&item, &shorter[..shorter.len() - 1], &l));
        }
    }
}
