//! Terraform state v4 documents: split into one item per resource instance and output, and assembled back.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::cut::{Mechanism, cut};
use crate::engine::address::{IndexKey, instance_address};

/// Largest state document accepted.
pub const MAX_STATE_BYTES: usize = 512 * 1024 * 1024;

/// A terraform state document that cannot be read as state version 4.
#[derive(Debug, Error)]
pub enum StateError {
    /// Not JSON at all.
    #[error("state document is not valid JSON ({0}); nothing was written")]
    NotJson(String),
    /// A state format version other than 4.
    #[error(
        "state document has format version {0}; only version 4 is supported; nothing was written"
    )]
    UnsupportedVersion(String),
    /// JSON of the wrong shape.
    #[error("state document is malformed: {0}; nothing was written")]
    Malformed(String),
    /// Two instance objects with one address.
    #[error("state document holds {0} twice; nothing was written")]
    DuplicateAddress(String),
    /// OpenTofu's encrypted state envelope, whose records could not be split or diffed.
    #[error(
        "state document is OpenTofu-encrypted (encryption_version {0:?}): records are split per resource and cannot be read from an encrypted document; nothing was written. Remove the `state` target from the `encryption` block of `terraform {{}}` (keep `plan` if you like) and let the record store encrypt records at rest instead: on S3, set `kms_key_id` for SSE-KMS (else SSE-S3), see operating.md"
    )]
    Encrypted(String),
    /// A document whose lineage is not the estate's: another state, or a push from elsewhere.
    #[error(
        "state document has lineage {document:?}, but estate {estate} has lineage {stored:?}: it is another state's document; nothing was written. Pull this estate's state (terraform state pull) instead of pushing another's"
    )]
    OtherLineage {
        /// The estate.
        estate: String,
        /// The estate's lineage.
        stored: String,
        /// The document's lineage.
        document: String,
    },
}

/// Refuse a document whose lineage is set and differs from the estate's (`stored`).
pub fn check_lineage(estate: &str, stored: &str, document: &str) -> Result<(), StateError> {
    if document.is_empty() || document == stored || cut(Mechanism::LineageCheck) {
        return Ok(());
    }
    Err(StateError::OtherLineage {
        estate: estate.to_string(),
        stored: stored.to_string(),
        document: document.to_string(),
    })
}

/// The `encryption_version` of OpenTofu's encrypted envelope (`meta`, `encrypted_data`, `encryption_version`), if `obj` is one.
fn encryption_version(obj: &Map<String, Value>) -> Option<String> {
    if cut(Mechanism::EncryptedState) {
        return None;
    }
    match (obj.get("encryption_version"), obj.get("encrypted_data")) {
        (Some(Value::String(v)), _) if !v.is_empty() => Some(v.clone()),
        (_, Some(_)) => Some(String::new()),
        _ => None,
    }
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

/// A resource as [`ResourceMeta`] names it, borrowed (from a record's bytes, or from a [`ResourceMeta`]) where it can be.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceView<'a> {
    /// The module path; none for the root module.
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    pub module: Option<Cow<'a, str>>,
    /// `managed` or `data`.
    #[serde(borrow)]
    pub mode: Cow<'a, str>,
    /// The resource type.
    #[serde(rename = "type", borrow)]
    pub type_name: Cow<'a, str>,
    /// The resource name.
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    /// `list` or `map`, when the resource repeats.
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    pub each: Option<Cow<'a, str>>,
    /// The provider configuration address.
    #[serde(borrow)]
    pub provider: Cow<'a, str>,
}

impl ResourceMeta {
    /// The same resource, borrowed.
    pub fn view(&self) -> ResourceView<'_> {
        ResourceView {
            module: self.module.as_deref().map(Cow::Borrowed),
            mode: Cow::Borrowed(&self.mode),
            type_name: Cow::Borrowed(&self.type_name),
            name: Cow::Borrowed(&self.name),
            each: self.each.as_deref().map(Cow::Borrowed),
            provider: Cow::Borrowed(&self.provider),
        }
    }
}

/// One piece of a state document that becomes one record.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// One resource instance object.
    Resource {
        /// Its address.
        address: String,
        /// Its resource.
        meta: ResourceMeta,
        /// The instance object as the state holds it.
        instance: Instance,
    },
    /// One root output.
    Output {
        /// The output's name.
        name: String,
        /// The output object (`value`, `type`, `sensitive`).
        output: Value,
    },
}

/// A state document read into its parts.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitState {
    /// The producing binary's version.
    pub terraform_version: String,
    /// The serial it carries.
    pub serial: u64,
    /// The lineage it carries.
    pub lineage: String,
    /// Resource instances and outputs, resources first in terraform's order.
    pub items: Vec<Item>,
}

#[derive(Deserialize)]
struct StateV4 {
    #[serde(default)]
    terraform_version: String,
    #[serde(default)]
    serial: u64,
    #[serde(default)]
    lineage: String,
    #[serde(default)]
    outputs: Map<String, Value>,
    #[serde(default)]
    resources: Vec<ResourceV4>,
}

#[derive(Deserialize)]
struct ResourceV4 {
    #[serde(default)]
    module: Option<String>,
    mode: String,
    #[serde(rename = "type")]
    type_name: String,
    name: String,
    #[serde(default)]
    each: Option<String>,
    provider: String,
    #[serde(default)]
    instances: Vec<Value>,
}

/// The index key and deposed key of an instance object.
fn instance_keys(instance: &Value) -> Result<(IndexKey, Option<String>), String> {
    let obj = instance
        .as_object()
        .ok_or_else(|| "an instance is not an object".to_string())?;
    let key = match obj.get("index_key") {
        None | Some(Value::Null) => IndexKey::None,
        Some(Value::String(s)) => IndexKey::Str(s.clone()),
        Some(Value::Number(n)) => IndexKey::Int(
            n.as_i64()
                .ok_or_else(|| format!("index_key {n} is not a whole number"))?,
        ),
        Some(other) => return Err(format!("index_key {other} is neither number nor string")),
    };
    let deposed = match obj.get("deposed") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(other) => return Err(format!("deposed {other} is not a key")),
    };
    Ok((key, deposed))
}

/// Read a state document (format version 4) into items.
pub fn parse(bytes: &[u8]) -> Result<SplitState, StateError> {
    if bytes.len() > MAX_STATE_BYTES {
        return Err(StateError::Malformed(format!(
            "{} bytes is over the {MAX_STATE_BYTES}-byte limit",
            bytes.len()
        )));
    }
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| StateError::NotJson(e.to_string()))?;
    let obj = value
        .as_object()
        .ok_or_else(|| StateError::Malformed("the top level is not an object".into()))?;
    if let Some(version) = encryption_version(obj) {
        return Err(StateError::Encrypted(version));
    }
    match obj.get("version") {
        Some(Value::Number(n)) if n.as_u64() == Some(4) => {}
        Some(other) => return Err(StateError::UnsupportedVersion(other.to_string())),
        None => return Err(StateError::UnsupportedVersion("(none)".into())),
    }
    let doc: StateV4 =
        serde_json::from_value(value).map_err(|e| StateError::Malformed(e.to_string()))?;
    let mut items = Vec::new();
    let mut seen = BTreeSet::new();
    for r in doc.resources {
        if r.mode != "managed" && r.mode != "data" {
            return Err(StateError::Malformed(format!(
                "resource {}.{} has mode {:?}",
                r.type_name, r.name, r.mode
            )));
        }
        let module = r.module.filter(|m| !m.is_empty());
        let meta = ResourceMeta {
            module: module.clone(),
            mode: r.mode,
            type_name: r.type_name,
            name: r.name,
            each: r.each,
            provider: r.provider,
        };
        for instance in r.instances {
            let (key, deposed) = instance_keys(&instance).map_err(|e| {
                StateError::Malformed(format!("{}.{}: {e}", meta.type_name, meta.name))
            })?;
            let address = instance_address(
                module.as_deref(),
                &meta.mode,
                &meta.type_name,
                &meta.name,
                &key,
                deposed.as_deref(),
            );
            if !seen.insert(address.clone()) {
                return Err(StateError::DuplicateAddress(address));
            }
            items.push(Item::Resource {
                address,
                meta: meta.clone(),
                instance: instance.into(),
            });
        }
    }
    for (name, output) in doc.outputs {
        if !output.is_object() {
            return Err(StateError::Malformed(format!(
                "output {name} is not an object"
            )));
        }
        items.push(Item::Output { name, output });
    }
    Ok(SplitState {
        terraform_version: doc.terraform_version,
        serial: doc.serial,
        lineage: doc.lineage,
        items,
    })
}

/// Where an instance sorts within its resource: no key, then numbers, then strings; then deposed.
pub type InstanceRank = (u8, i64, String, String);

fn rank_of(v: &Value) -> InstanceRank {
    match instance_keys(v) {
        Ok((IndexKey::None, d)) => (0, 0, String::new(), d.unwrap_or_default()),
        Ok((IndexKey::Int(i), d)) => (1, i, String::new(), d.unwrap_or_default()),
        Ok((IndexKey::Str(s), d)) => (2, 0, s, d.unwrap_or_default()),
        Err(_) => (3, 0, String::new(), String::new()),
    }
}

/// Terraform's order of instances within a resource: no key, then numbers, then strings; then deposed.
pub fn instance_order(a: &Instance, b: &Instance) -> Ordering {
    match (&a.raw, &b.raw) {
        (Some(x), Some(y)) => x.1.cmp(&y.1),
        _ => a.rank().cmp(&b.rank()),
    }
}

/// A resource instance object: a parsed value, or the compact JSON text an estate image holds
/// in final form (exactly what serialising its value writes), parsed only when looked into.
#[derive(Clone, Debug, Default)]
pub struct Instance {
    value: OnceLock<Value>,
    raw: Option<Arc<(Box<RawValue>, InstanceRank)>>,
}

impl Instance {
    /// An instance kept as `text`, a JSON object in final form, with its rank; none when `text` is no object.
    pub fn from_final(text: Box<RawValue>, rank: InstanceRank) -> Option<Instance> {
        text.get().starts_with('{').then(|| Instance {
            value: OnceLock::new(),
            raw: Some(Arc::new((text, rank))),
        })
    }

    /// Where it sorts within its resource.
    pub fn rank(&self) -> InstanceRank {
        match (&self.raw, self.value.get()) {
            (Some(raw), None) => raw.1.clone(),
            _ => rank_of(self),
        }
    }

    /// Whether it is a JSON object (as every instance must be).
    pub fn is_object(&self) -> bool {
        match (&self.raw, self.value.get()) {
            (Some(_), None) => true,
            _ => self.deref().is_object(),
        }
    }
}

impl From<Value> for Instance {
    fn from(value: Value) -> Self {
        Instance {
            value: OnceLock::from(value),
            raw: None,
        }
    }
}

impl Deref for Instance {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.value.get_or_init(|| {
            // The text was read as JSON when it was kept: parsing it again cannot fail.
            self.raw
                .as_ref()
                .and_then(|r| serde_json::from_str(r.0.get()).ok())
                .unwrap_or(Value::Null)
        })
    }
}

impl PartialEq for Instance {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Serialize for Instance {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match (&self.raw, self.value.get()) {
            (Some(raw), None) => raw.0.serialize(serializer),
            _ => self.deref().serialize(serializer),
        }
    }
}

/// The header fields of an assembled document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The lineage.
    pub lineage: String,
    /// The serial.
    pub serial: u64,
    /// The terraform version.
    pub terraform_version: String,
}

/// Assemble items into a state v4 document, deterministically and in terraform's resource order.
pub fn assemble<'a>(header: &Header, items: impl IntoIterator<Item = &'a Item>) -> Value {
    type ResKey = (String, String, String, String);
    let mut resources: BTreeMap<ResKey, (&ResourceMeta, Vec<&Instance>)> = BTreeMap::new();
    let mut outputs = Map::new();
    for item in items {
        match item {
            Item::Resource { meta, instance, .. } => {
                let key = (
                    meta.module.clone().unwrap_or_default(),
                    meta.mode.clone(),
                    meta.type_name.clone(),
                    meta.name.clone(),
                );
                resources
                    .entry(key)
                    .or_insert((meta, Vec::new()))
                    .1
                    .push(instance);
            }
            Item::Output { name, output } => {
                outputs.insert(name.clone(), output.clone());
            }
        }
    }
    let resources: Vec<Value> = resources
        .into_values()
        .map(|(meta, mut instances)| {
            instances.sort_by(|a, b| instance_order(a, b));
            let mut r = Map::new();
            if let Some(m) = &meta.module {
                r.insert("module".into(), json!(m));
            }
            r.insert("mode".into(), json!(meta.mode));
            r.insert("type".into(), json!(meta.type_name));
            r.insert("name".into(), json!(meta.name));
            if let Some(each) = &meta.each {
                r.insert("each".into(), json!(each));
            }
            r.insert("provider".into(), json!(meta.provider));
            r.insert(
                "instances".into(),
                Value::Array(instances.into_iter().map(|i| (**i).clone()).collect()),
            );
            Value::Object(r)
        })
        .collect();
    json!({
        "version": 4,
        "terraform_version": header.terraform_version,
        "serial": header.serial,
        "lineage": header.lineage,
        "outputs": outputs,
        "resources": resources,
        "check_results": null,
    })
}

/// Assemble and serialise, pretty-printed as terraform writes state.
pub fn assemble_bytes<'a>(header: &Header, items: impl IntoIterator<Item = &'a Item>) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(&assemble(header, items)).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Compare two dotted versions (`1.11.4`), numerically per part; non-numbers compare as text.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    let parts = |s: &str| -> Vec<(u64, String)> {
        s.split(['.', '-'])
            .map(|p| (p.parse::<u64>().unwrap_or(u64::MAX), p.to_string()))
            .collect()
    };
    parts(a).cmp(&parts(b))
}
