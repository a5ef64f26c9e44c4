//! The state store's configuration as terraform sends it (a DynamicValue, msgpack or JSON), read into settings.

use std::collections::BTreeMap;

use super::super::proto::tfplugin6::DynamicValue;
use crate::engine::layout::EstateName;
use crate::store::settings::{SettingError, SettingsSource, StoreKind, StoreSettings};

/// One attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    /// Not set.
    Null,
    /// Not known until apply (refused: a state store needs known settings).
    Unknown,
    /// A string.
    Str(String),
    /// A bool.
    Bool(bool),
    /// Anything else.
    Other,
}

/// The attributes of the store's schema, by name.
pub type Attrs = BTreeMap<String, Attr>;

fn from_msgpack(v: &rmpv::Value) -> Attr {
    match v {
        rmpv::Value::Nil => Attr::Null,
        rmpv::Value::Boolean(b) => Attr::Bool(*b),
        rmpv::Value::String(s) => s.as_str().map_or(Attr::Other, |s| Attr::Str(s.to_string())),
        rmpv::Value::Ext(0, _) => Attr::Unknown,
        _ => Attr::Other,
    }
}

fn from_json(v: &serde_json::Value) -> Attr {
    match v {
        serde_json::Value::Null => Attr::Null,
        serde_json::Value::Bool(b) => Attr::Bool(*b),
        serde_json::Value::String(s) => Attr::Str(s.clone()),
        _ => Attr::Other,
    }
}

/// Decode a DynamicValue holding an object.
pub fn decode(dv: &DynamicValue) -> Result<Attrs, SettingError> {
    let mut out = Attrs::new();
    if !dv.msgpack.is_empty() {
        let mut rest = dv.msgpack.as_slice();
        let value = rmpv::decode::read_value(&mut rest).map_err(|e| {
            SettingError::block(format!("the configuration is not valid msgpack: {e}"))
        })?;
        if !rest.is_empty() {
            return Err(SettingError::block(format!(
                "the configuration is not valid msgpack: {} byte(s) after its value",
                rest.len()
            )));
        }
        match value {
            rmpv::Value::Map(entries) => {
                for (k, v) in &entries {
                    let Some(k) = k.as_str() else {
                        return Err(SettingError::block(
                            "the configuration has a key that is not a string; terraform sends an object of named attributes",
                        ));
                    };
                    out.insert(k.to_string(), from_msgpack(v));
                }
            }
            rmpv::Value::Nil => {}
            _ => return Err(SettingError::block("the configuration is not an object")),
        }
    } else if !dv.json.is_empty() {
        let value: serde_json::Value = serde_json::from_slice(&dv.json).map_err(|e| {
            SettingError::block(format!("the configuration is not valid JSON: {e}"))
        })?;
        match value {
            serde_json::Value::Object(map) => {
                for (k, v) in &map {
                    out.insert(k.clone(), from_json(v));
                }
            }
            serde_json::Value::Null => {}
            _ => return Err(SettingError::block("the configuration is not an object")),
        }
    }
    Ok(out)
}

/// Settings read from attributes; unknown values are reported, not guessed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// The estate.
    pub estate: EstateName,
    /// The record store.
    pub store: StoreSettings,
}

fn string(attrs: &Attrs, name: &str) -> Result<Option<String>, SettingError> {
    match attrs.get(name) {
        None | Some(Attr::Null) => Ok(None),
        Some(Attr::Str(s)) => Ok(Some(s.clone())),
        Some(Attr::Unknown) => Err(SettingError::setting(
            name,
            format!("`{name}` is not known until apply; a state store needs it now"),
        )),
        Some(_) => Err(SettingError::setting(
            name,
            format!("`{name}` must be a string"),
        )),
    }
}

/// The attributes other than `estate` and `store`, as the chosen kind's settings.
struct AttrsSource<'a>(&'a Attrs);

/// The attributes that are not store settings.
const NOT_STORE_SETTINGS: &[&str] = &["estate", "store"];

impl SettingsSource for AttrsSource<'_> {
    fn string(&self, name: &str) -> Result<Option<String>, SettingError> {
        string(self.0, name)
    }

    fn boolean(&self, name: &str) -> Result<Option<bool>, SettingError> {
        match self.0.get(name) {
            None | Some(Attr::Null) => Ok(None),
            Some(Attr::Bool(b)) => Ok(Some(*b)),
            Some(Attr::Unknown) => Err(SettingError::setting(
                name,
                format!("`{name}` is not known until apply; a state store needs it now"),
            )),
            Some(_) => Err(SettingError::setting(
                name,
                format!("`{name}` must be true or false"),
            )),
        }
    }

    fn names(&self) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, v)| **v != Attr::Null && !NOT_STORE_SETTINGS.contains(&k.as_str()))
            .map(|(k, _)| k.clone())
            .collect()
    }
}

/// Interpret the attributes (`allow_unknown`: validation passes over values not known yet).
pub fn interpret(attrs: &Attrs, allow_unknown: bool) -> Result<Option<StoreConfig>, SettingError> {
    if allow_unknown && attrs.values().any(|a| *a == Attr::Unknown) {
        return Ok(None);
    }
    let estate = string(attrs, "estate")?.ok_or_else(|| {
        SettingError::setting(
            "estate",
            "`estate` is required: the name of the estate this root owns, e.g. \"prod-eu\"",
        )
    })?;
    let estate = EstateName::parse(&estate).map_err(|m| SettingError::setting("estate", m))?;
    let kind = match string(attrs, "store")? {
        Some(kind) => StoreKind::parse(&kind).map_err(|e| SettingError {
            setting: Some("store".into()),
            ..e
        })?,
        None if string(attrs, "bucket").ok().flatten().is_some() => StoreKind::S3,
        None => StoreKind::Local,
    };
    let store = StoreSettings::from_source(kind, &AttrsSource(attrs))?;
    Ok(Some(StoreConfig { estate, store }))
}
