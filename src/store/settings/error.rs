//! A store setting that is wrong, as every settings source reports it.

use thiserror::Error;

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
