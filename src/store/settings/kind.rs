//! The record store kinds, as `record_store "<kind>"` names them.

use super::error::SettingError;

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
