//! The state store's configuration as terraform sends it (a DynamicValue, msgpack or JSON), read into settings.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::config::StoreSettings;
use crate::layout::EstateName;
use crate::proto::tfplugin6::DynamicValue;
use crate::store::azure::AzureSettings;
use crate::store::gcs::GcsSettings;
use crate::store::s3::S3Settings;

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
pub fn decode(dv: &DynamicValue) -> Result<Attrs, String> {
    let mut out = Attrs::new();
    if !dv.msgpack.is_empty() {
        let value = rmpv::decode::read_value(&mut dv.msgpack.as_slice())
            .map_err(|e| format!("the configuration is not valid msgpack: {e}"))?;
        match value {
            rmpv::Value::Map(entries) => {
                for (k, v) in &entries {
                    if let Some(k) = k.as_str() {
                        out.insert(k.to_string(), from_msgpack(v));
                    }
                }
            }
            rmpv::Value::Nil => {}
            _ => return Err("the configuration is not an object".into()),
        }
    } else if !dv.json.is_empty() {
        let value: serde_json::Value = serde_json::from_slice(&dv.json)
            .map_err(|e| format!("the configuration is not valid JSON: {e}"))?;
        match value {
            serde_json::Value::Object(map) => {
                for (k, v) in &map {
                    out.insert(k.clone(), from_json(v));
                }
            }
            serde_json::Value::Null => {}
            _ => return Err("the configuration is not an object".into()),
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

fn string(attrs: &Attrs, name: &str) -> Result<Option<String>, String> {
    match attrs.get(name) {
        None | Some(Attr::Null) => Ok(None),
        Some(Attr::Str(s)) => Ok(Some(s.clone())),
        Some(Attr::Unknown) => Err(format!(
            "`{name}` is not known until apply; a state store needs it now"
        )),
        Some(_) => Err(format!("`{name}` must be a string")),
    }
}

fn boolean(attrs: &Attrs, name: &str) -> Result<Option<bool>, String> {
    match attrs.get(name) {
        None | Some(Attr::Null) => Ok(None),
        Some(Attr::Bool(b)) => Ok(Some(*b)),
        Some(Attr::Unknown) => Err(format!(
            "`{name}` is not known until apply; a state store needs it now"
        )),
        Some(_) => Err(format!("`{name}` must be true or false")),
    }
}

/// Interpret the attributes (`allow_unknown`: validation passes over values not known yet).
pub fn interpret(attrs: &Attrs, allow_unknown: bool) -> Result<Option<StoreConfig>, String> {
    if allow_unknown && attrs.values().any(|a| *a == Attr::Unknown) {
        return Ok(None);
    }
    let estate = string(attrs, "estate")?.ok_or_else(|| {
        "`estate` is required: the name of the estate this root owns, e.g. \"prod-eu\"".to_string()
    })?;
    let estate = EstateName::parse(&estate)?;
    let kind = string(attrs, "store")?.unwrap_or_else(|| {
        if string(attrs, "bucket").ok().flatten().is_some() {
            "s3".into()
        } else {
            "local".into()
        }
    });
    let store = match kind.as_str() {
        "local" => StoreSettings::Local {
            path: PathBuf::from(
                string(attrs, "path")?.unwrap_or_else(|| crate::config::DEFAULT_LOCAL_PATH.into()),
            ),
        },
        "s3" => {
            let bucket = string(attrs, "bucket")?
                .filter(|b| !b.is_empty())
                .ok_or_else(|| "store \"s3\" needs `bucket`".to_string())?;
            let use_path_style = boolean(attrs, "use_path_style")?;
            let skip_bucket_checks = boolean(attrs, "skip_bucket_checks")?.unwrap_or(false);
            StoreSettings::S3(S3Settings {
                bucket,
                region: string(attrs, "region")?,
                endpoint: string(attrs, "endpoint")?,
                use_path_style,
                kms_key_id: string(attrs, "kms_key_id")?,
                skip_bucket_checks,
            })
        }
        "azurerm" => {
            let container_name = string(attrs, "container_name")?
                .filter(|c| !c.is_empty())
                .ok_or_else(|| "store \"azurerm\" needs `container_name`".to_string())?;
            StoreSettings::Azure(AzureSettings {
                storage_account_name: string(attrs, "storage_account_name")?,
                container_name,
                endpoint: string(attrs, "endpoint")?,
                access_key: string(attrs, "access_key")?,
                sas_token: string(attrs, "sas_token")?,
                connection_string: string(attrs, "connection_string")?,
            })
        }
        "gcs" => {
            let bucket = string(attrs, "bucket")?
                .filter(|b| !b.is_empty())
                .ok_or_else(|| "store \"gcs\" needs `bucket`".to_string())?;
            StoreSettings::Gcs(GcsSettings {
                bucket,
                endpoint: string(attrs, "endpoint")?,
                credentials: string(attrs, "credentials")?,
                skip_credentials: boolean(attrs, "skip_credentials")?.unwrap_or(false),
            })
        }
        other => {
            return Err(format!(
                "unknown store {other:?}; use \"local\", \"s3\", \"azurerm\" or \"gcs\""
            ));
        }
    };
    Ok(Some(StoreConfig { estate, store }))
}
