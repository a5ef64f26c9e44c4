//! The settings of a Google Cloud Storage record store, read from any source.

use crate::store::settings::error::SettingError;
use crate::store::settings::kind::StoreKind;
use crate::store::settings::source::{Reader, SettingsSource};

/// Settings of a Google Cloud Storage record store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcsSettings {
    /// The bucket.
    pub bucket: String,
    /// A custom endpoint (emulators, private endpoints); default `https://storage.googleapis.com`.
    pub endpoint: Option<String>,
    /// A service account key: a path to its JSON file, or the JSON itself.
    pub credentials: Option<String>,
    /// Send no credentials (emulators only).
    pub skip_credentials: bool,
    /// Skip the store safety check before the first write (unsafe; logs a warning).
    pub skip_bucket_checks: bool,
}

impl GcsSettings {
    /// The settings of `record_store "gcs"` from any source.
    pub fn from_source(source: &dyn SettingsSource) -> Result<Self, SettingError> {
        let r = Reader::new(
            source,
            StoreKind::Gcs,
            &[
                "bucket",
                "endpoint",
                "credentials",
                "skip_credentials",
                "skip_bucket_checks",
            ],
        )?;
        Ok(GcsSettings {
            bucket: r.required("bucket", "my-records-bucket")?,
            endpoint: r.string("endpoint")?,
            credentials: r.string("credentials")?,
            skip_credentials: r.boolean("skip_credentials")?.unwrap_or(false),
            skip_bucket_checks: r.boolean("skip_bucket_checks")?.unwrap_or(false),
        })
    }
}
