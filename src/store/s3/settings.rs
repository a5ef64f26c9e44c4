//! The settings of an S3 (or S3-compatible) record store, read from any source.

use crate::store::settings::error::SettingError;
use crate::store::settings::kind::StoreKind;
use crate::store::settings::source::{Reader, SettingsSource};

/// Settings of an S3 (or S3-compatible) record store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct S3Settings {
    /// The bucket.
    pub bucket: String,
    /// The region; the standard chain's region, else `us-east-1`.
    pub region: Option<String>,
    /// A custom endpoint for S3-compatible stores.
    pub endpoint: Option<String>,
    /// Path-style addressing; defaults to true when an endpoint is set.
    pub use_path_style: Option<bool>,
    /// A KMS key for server-side encryption (`aws:kms`); without it records use `AES256`.
    pub kms_key_id: Option<String>,
    /// Skip the bucket safety check before the first write (unsafe; logs a warning).
    pub skip_bucket_checks: bool,
    /// A profile of the shared AWS config and credentials files, for the credentials chain.
    pub profile: Option<String>,
    /// A role to assume (STS `AssumeRole`) with the chain's credentials, for every store call.
    pub role_arn: Option<String>,
}

impl S3Settings {
    /// The settings of `record_store "s3"` from any source.
    pub fn from_source(source: &dyn SettingsSource) -> Result<Self, SettingError> {
        let r = Reader::new(
            source,
            StoreKind::S3,
            &[
                "bucket",
                "region",
                "endpoint",
                "use_path_style",
                "kms_key_id",
                "skip_bucket_checks",
                "profile",
                "role_arn",
            ],
        )?;
        Ok(S3Settings {
            bucket: r.required("bucket", "my-records-bucket")?,
            region: r.string("region")?,
            endpoint: r.string("endpoint")?,
            use_path_style: r.boolean("use_path_style")?,
            kms_key_id: r.string("kms_key_id")?,
            skip_bucket_checks: r.boolean("skip_bucket_checks")?.unwrap_or(false),
            profile: r.string("profile")?,
            role_arn: r.string("role_arn")?,
        })
    }
}
