//! One source of store settings, and the reader each kind's parser reads it with.

use super::error::SettingError;
use super::kind::StoreKind;

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
