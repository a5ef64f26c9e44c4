//! Where records are kept: the store kinds, and the one settings parser per kind that every source feeds.
//!
//! Settings reach the program three ways: the `record_store` block of the live block
//! (`config`), the tfplugin6 state store's attributes, and the `choudoufu.live.v1`
//! `StoreSettings` message. Each of those is a [`SettingsSource`]; each kind reads its
//! settings from a source with one function next to its store, so the three give the same
//! settings and the same errors for the same input.

use thiserror::Error;

use super::azure::AzureSettings;
use super::gcs::GcsSettings;
use super::local::LocalSettings;
use super::s3::S3Settings;

/// The record store kinds, as `record_store "<kind>"` names them.
pub const STORE_KINDS: &[&str] = &["local", "s3", "azurerm", "gcs"];

/// A record store's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// A local folder.
    Local,
    /// An S3 bucket.
    S3,
    /// An Azure Blob Storage container.
    Azure,
    /// A Google Cloud Storage bucket.
    Gcs,
}

impl StoreKind {
    /// The kind's name, as `record_store "<kind>"` and the `store.kind` span attribute give it.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Local => "local",
            StoreKind::S3 => "s3",
            StoreKind::Azure => "azurerm",
            StoreKind::Gcs => "gcs",
        }
    }

    /// The kind a name names.
    pub fn parse(name: &str) -> Result<StoreKind, SettingError> {
        match name {
            "local" => Ok(StoreKind::Local),
            "s3" => Ok(StoreKind::S3),
            "azurerm" => Ok(StoreKind::Azure),
            "gcs" => Ok(StoreKind::Gcs),
            other => Err(SettingError::block(format!(
                "unknown record store kind {other:?}; the kinds are {}",
                STORE_KINDS
                    .iter()
                    .map(|k| format!("{k:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }
}

/// Where records are kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreSettings {
    /// A local folder.
    Local(LocalSettings),
    /// An S3 bucket.
    S3(S3Settings),
    /// An Azure Blob Storage container.
    Azure(AzureSettings),
    /// A Google Cloud Storage bucket.
    Gcs(GcsSettings),
}

impl StoreSettings {
    /// The kind.
    pub fn kind(&self) -> StoreKind {
        match self {
            StoreSettings::Local(_) => StoreKind::Local,
            StoreSettings::S3(_) => StoreKind::S3,
            StoreSettings::Azure(_) => StoreKind::Azure,
            StoreSettings::Gcs(_) => StoreKind::Gcs,
        }
    }

    /// Read the settings of a store of `kind` from `source`, with that kind's parser.
    pub fn from_source(
        kind: StoreKind,
        source: &dyn SettingsSource,
    ) -> Result<StoreSettings, SettingError> {
        Ok(match kind {
            StoreKind::Local => StoreSettings::Local(LocalSettings::from_source(source)?),
            StoreKind::S3 => StoreSettings::S3(S3Settings::from_source(source)?),
            StoreKind::Azure => StoreSettings::Azure(AzureSettings::from_source(source)?),
            StoreKind::Gcs => StoreSettings::Gcs(GcsSettings::from_source(source)?),
        })
    }
}

/// A store setting that is wrong: which one (none: the settings as a whole), and why.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct SettingError {
    /// The setting concerned, when the error is about one.
    pub setting: Option<String>,
    /// What is wrong and what to write instead.
    pub message: String,
}

impl SettingError {
    /// An error about the setting `name`.
    pub fn setting(name: &str, message: impl Into<String>) -> Self {
        SettingError {
            setting: Some(name.to_string()),
            message: message.into(),
        }
    }

    /// An error about the settings as a whole.
    pub fn block(message: impl Into<String>) -> Self {
        SettingError {
            setting: None,
            message: message.into(),
        }
    }
}

/// One source of store settings: the live block, the tfplugin6 configuration, the live protocol.
pub trait SettingsSource {
    /// The string setting `name`: unset, its value, or why it is not a string.
    fn string(&self, name: &str) -> Result<Option<String>, SettingError>;
    /// The boolean setting `name`: unset, its value, or why it is not true or false.
    fn boolean(&self, name: &str) -> Result<Option<bool>, SettingError>;
    /// The names of every setting the source sets.
    fn names(&self) -> Vec<String>;
}

/// How a kind's parser reads a source: its name in messages and the settings it takes.
pub(crate) struct Reader<'a> {
    source: &'a dyn SettingsSource,
    what: String,
}

impl<'a> Reader<'a> {
    /// A reader for a store of `kind` taking only `allowed`; any other setting is refused by name.
    pub(crate) fn new(
        source: &'a dyn SettingsSource,
        kind: StoreKind,
        allowed: &[&str],
    ) -> Result<Self, SettingError> {
        let what = format!("record_store {:?}", kind.as_str());
        for name in source.names() {
            if !allowed.contains(&name.as_str()) {
                return Err(SettingError::setting(
                    &name,
                    format!(
                        "{what} has no setting `{name}`; it takes: {}",
                        allowed.join(", ")
                    ),
                ));
            }
        }
        Ok(Reader { source, what })
    }

    /// The store's name in messages, e.g. `record_store "s3"`.
    pub(crate) fn what(&self) -> &str {
        &self.what
    }

    /// An optional string.
    pub(crate) fn string(&self, name: &str) -> Result<Option<String>, SettingError> {
        self.source.string(name)
    }

    /// A required, non-empty string; `example` shows what to write.
    pub(crate) fn required(&self, name: &str, example: &str) -> Result<String, SettingError> {
        match self.source.string(name)? {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(SettingError::block(format!(
                "{} has no `{name}`; add {name} = \"{example}\"",
                self.what
            ))),
        }
    }

    /// An optional boolean.
    pub(crate) fn boolean(&self, name: &str) -> Result<Option<bool>, SettingError> {
        self.source.boolean(name)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A source from a map: the simplest source, for the kinds' own tests.
    pub(crate) struct MapSource(pub BTreeMap<&'static str, Value>);

    /// A value in a [`MapSource`].
    pub(crate) enum Value {
        Str(&'static str),
        Bool(bool),
    }

    impl SettingsSource for MapSource {
        fn string(&self, name: &str) -> Result<Option<String>, SettingError> {
            match self.0.get(name) {
                None => Ok(None),
                Some(Value::Str(s)) => Ok(Some(s.to_string())),
                Some(Value::Bool(_)) => Err(SettingError::setting(name, "not a string")),
            }
        }
        fn boolean(&self, name: &str) -> Result<Option<bool>, SettingError> {
            match self.0.get(name) {
                None => Ok(None),
                Some(Value::Bool(b)) => Ok(Some(*b)),
                Some(Value::Str(_)) => Err(SettingError::setting(name, "not a bool")),
            }
        }
        fn names(&self) -> Vec<String> {
            self.0.keys().map(|k| k.to_string()).collect()
        }
    }

    #[test]
    fn kinds_parse_and_unknown_kinds_are_named() {
        for k in STORE_KINDS {
            assert_eq!(StoreKind::parse(k).map(StoreKind::as_str), Ok(*k));
        }
        let e = StoreKind::parse("gopher").unwrap_err();
        assert!(
            e.message
                .contains("\"local\", \"s3\", \"azurerm\", \"gcs\"")
        );
    }

    #[test]
    fn a_setting_the_kind_does_not_take_is_refused_by_name() {
        let src = MapSource(BTreeMap::from([
            ("bucket", Value::Str("b")),
            ("bukket", Value::Str("c")),
        ]));
        let e = StoreSettings::from_source(StoreKind::S3, &src).unwrap_err();
        assert_eq!(e.setting.as_deref(), Some("bukket"));
        assert!(e.message.contains("no setting `bukket`"), "{e}");
        let src = MapSource(BTreeMap::from([
            ("bucket", Value::Str("b")),
            ("skip_bucket_checks", Value::Bool(true)),
        ]));
        match StoreSettings::from_source(StoreKind::S3, &src) {
            Ok(StoreSettings::S3(s3)) => assert!(s3.skip_bucket_checks),
            other => panic!("{other:?}"),
        }
    }
}
