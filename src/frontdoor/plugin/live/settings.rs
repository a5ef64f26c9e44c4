//! The live protocol's `StoreSettings` message as a settings source: an empty string or `false` is unset.

use super::super::proto::live as pb;
use crate::store::settings::{SettingError, SettingsSource, StoreKind, StoreSettings};

/// The message's fields by name.
struct ProtoSource(pb::StoreSettings);

impl ProtoSource {
    fn text(&self, name: &str) -> Option<&str> {
        let s = &self.0;
        let v = match name {
            "path" => &s.path,
            "bucket" => &s.bucket,
            "region" => &s.region,
            "endpoint" => &s.endpoint,
            "kms_key_id" => &s.kms_key_id,
            "storage_account_name" => &s.storage_account_name,
            "container_name" => &s.container_name,
            "access_key" => &s.access_key,
            "sas_token" => &s.sas_token,
            "connection_string" => &s.connection_string,
            "credentials" => &s.credentials,
            _ => return None,
        };
        Some(v.as_str()).filter(|v| !v.is_empty())
    }

    fn flag(&self, name: &str) -> Option<bool> {
        let s = &self.0;
        match name {
            "use_path_style" => s.use_path_style,
            "skip_bucket_checks" => Some(true).filter(|_| s.skip_bucket_checks),
            "skip_credentials" => Some(true).filter(|_| s.skip_credentials),
            _ => None,
        }
    }
}

/// Every setting field of the message.
const FIELDS: &[&str] = &[
    "path",
    "bucket",
    "region",
    "endpoint",
    "use_path_style",
    "kms_key_id",
    "skip_bucket_checks",
    "storage_account_name",
    "container_name",
    "access_key",
    "sas_token",
    "connection_string",
    "credentials",
    "skip_credentials",
];

impl SettingsSource for ProtoSource {
    fn string(&self, name: &str) -> Result<Option<String>, SettingError> {
        match self.flag(name) {
            Some(_) => Err(SettingError::setting(
                name,
                format!("`{name}` is a bool field"),
            )),
            None => Ok(self.text(name).map(str::to_string)),
        }
    }

    fn boolean(&self, name: &str) -> Result<Option<bool>, SettingError> {
        match self.text(name) {
            Some(_) => Err(SettingError::setting(
                name,
                format!("`{name}` is a string field"),
            )),
            None => Ok(self.flag(name)),
        }
    }

    fn names(&self) -> Vec<String> {
        FIELDS
            .iter()
            .filter(|f| self.text(f).is_some() || self.flag(f).is_some())
            .map(|f| f.to_string())
            .collect()
    }
}

/// The store settings a Configure request gives (no settings, or kind "": the local store).
pub fn settings(s: Option<pb::StoreSettings>) -> Result<StoreSettings, SettingError> {
    let s = s.unwrap_or_default();
    let kind = match s.kind.as_str() {
        "" => StoreKind::Local,
        other => StoreKind::parse(other)?,
    };
    StoreSettings::from_source(kind, &ProtoSource(s))
}
