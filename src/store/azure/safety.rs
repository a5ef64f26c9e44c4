//! The Azure record store's safety: blob versioning or soft delete, no public access, HTTPS only.
//!
//! What the Blob service (the data plane) can show is checked: blob soft delete (the
//! service properties' `DeleteRetentionPolicy`), the container's public access level, and
//! whether this program reaches the account over HTTPS. Blob versioning, the account's
//! "allow blob public access" and "secure transfer required" are management-plane (ARM)
//! account properties that no data-plane call reads: versioning counts as on once a listed
//! blob carries a version id, and the other two are reported as unchecked, with the `az`
//! command that checks them. [`AzureGuard`] checks once per run; [`setup`] applies what the
//! data plane can set (soft delete, a private container), idempotently.

use std::sync::{Arc, Once};

use reqwest::Method;
use serde::Deserialize;
use thiserror::Error;

use super::client::AzureStore;
use super::settings::AzureSettings;
use crate::store::call::StoreCall;
use crate::store::error::StoreError;
use crate::store::guard::{
    CheckStatus, Safety, SafetyCheck, SafetyReport, SafetyStep, SafetyUnchecked, SetupOutcome,
    WriteGuard, unless_skipped,
};
use crate::store::http;
use crate::store::key::ROOT_PREFIX;
use crate::store::record_store::RecordStore;

/// How many days `bucket setup` keeps a deleted or overwritten blob (blob soft delete).
pub const SOFT_DELETE_DAYS: u32 = 90;

/// The setting names, as reports and errors print them.
pub const VERSIONS_OR_SOFT_DELETE: &str = "blob versioning or soft delete";
/// The container's public access level.
pub const CONTAINER_PUBLIC_ACCESS: &str = "container public access";
/// The account's "allow blob public access" (ARM).
pub const ACCOUNT_PUBLIC_ACCESS: &str = "account blob public access";
/// HTTPS between this program and the account.
pub const HTTPS: &str = "HTTPS";
/// The account's "secure transfer required" (ARM).
pub const ACCOUNT_HTTPS_ONLY: &str = "account HTTPS only";

/// A Blob service administration call failed.
#[derive(Debug, Error)]
#[error("{store}: {op} failed: {source}")]
pub struct AzureSafetyError {
    /// The store.
    pub store: String,
    /// The Blob service operation, e.g. `Get Blob Service Properties`.
    pub op: &'static str,
    /// The cause.
    #[source]
    pub source: StoreError,
}

#[derive(Debug, Default, Deserialize)]
struct ServiceProperties {
    #[serde(rename = "DeleteRetentionPolicy", default)]
    delete_retention_policy: Option<RetentionPolicy>,
}

#[derive(Debug, Deserialize)]
struct RetentionPolicy {
    #[serde(rename = "Enabled", default)]
    enabled: bool,
    #[serde(rename = "Days", default)]
    days: Option<u32>,
}

impl AzureStore {
    async fn admin(
        &self,
        op: &'static str,
        method: Method,
        url: Result<url::Url, String>,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
    ) -> Result<reqwest::Response, AzureSafetyError> {
        let fail = |source: StoreError| AzureSafetyError {
            store: self.describe(),
            op,
            source,
        };
        let url = url.map_err(|e| fail(self.fail(StoreCall::Admin, "", e)))?;
        self.rest(StoreCall::Admin, "", method, url, headers, body)
            .await
            .map_err(fail)
    }

    async fn expect_success(
        &self,
        op: &'static str,
        response: reqwest::Response,
    ) -> Result<reqwest::Response, AzureSafetyError> {
        if response.status().is_success() {
            Ok(response)
        } else {
            Err(AzureSafetyError {
                store: self.describe(),
                op,
                source: http::unexpected(self.name(), StoreCall::Admin, "", response).await,
            })
        }
    }

    async fn service_properties(&self) -> Result<ServiceProperties, AzureSafetyError> {
        const OP: &str = "Get Blob Service Properties";
        let url = self.service_url(&[("restype", "service"), ("comp", "properties")]);
        let response = self.admin(OP, Method::GET, url, &[], Vec::new()).await?;
        let text = self
            .expect_success(OP, response)
            .await?
            .text()
            .await
            .map_err(|e| self.safety_error(OP, e))?;
        quick_xml::de::from_str(&text).map_err(|e| self.safety_error(OP, e))
    }

    fn safety_error(
        &self,
        op: &'static str,
        e: impl Into<crate::store::error::Cause>,
    ) -> AzureSafetyError {
        AzureSafetyError {
            store: self.describe(),
            op,
            source: self.fail(StoreCall::Admin, "", e),
        }
    }

    /// The container's public access level (`container`, `blob`), none when private;
    /// `Err` with a 404 when there is no such container.
    async fn container_access(&self) -> Result<ContainerAccess, AzureSafetyError> {
        const OP: &str = "Get Container ACL";
        let url = self.container_url(&[("restype", "container"), ("comp", "acl")]);
        let response = self.admin(OP, Method::GET, url, &[], Vec::new()).await?;
        if response.status().as_u16() == 404 {
            return Ok(ContainerAccess::Missing);
        }
        let response = self.expect_success(OP, response).await?;
        let public = response
            .headers()
            .get("x-ms-blob-public-access")
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(str::to_string);
        let acl = response
            .bytes()
            .await
            .map_err(|e| self.safety_error(OP, e))?
            .to_vec();
        Ok(match public {
            Some(level) => ContainerAccess::Public { level, acl },
            None => ContainerAccess::Private,
        })
    }

    /// Whether any blob under the records prefix carries a version id (versioning is on).
    async fn versions_seen(&self) -> Result<bool, AzureSafetyError> {
        let listing = super::versions::list(self, ROOT_PREFIX)
            .await
            .map_err(|source| AzureSafetyError {
                store: self.describe(),
                op: "List Blobs (include=versions)",
                source,
            })?;
        Ok(listing.versions.iter().any(|v| v.version_id.is_some()))
    }
}

/// A container's public access as Get Container ACL gives it.
enum ContainerAccess {
    Missing,
    Private,
    Public {
        /// `container` or `blob`.
        level: String,
        /// The stored access policies, kept when access is turned off.
        acl: Vec<u8>,
    },
}

fn loopback(service: &str) -> bool {
    url::Url::parse(service)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .is_some_and(|h| h == "127.0.0.1" || h == "localhost" || h == "[::1]" || h == "::1")
}

/// The `az` options that name the account.
fn az_account(store: &AzureStore) -> String {
    format!("--account-name {}", store.account)
}

fn setup_or(az: String) -> String {
    format!(
        "`choudoufu-live bucket setup --root DIR` (DIR: the root whose live block names this container), or `{az}`"
    )
}

/// Check the safety settings of the account and container of `store`.
pub async fn check(store: &AzureStore) -> Result<SafetyReport, AzureSafetyError> {
    let acct = az_account(store);
    let container = &store.container;
    let mut checks = Vec::new();

    let retention = store.service_properties().await?.delete_retention_policy;
    let soft_delete = retention
        .as_ref()
        .filter(|r| r.enabled && r.days.unwrap_or(0) > 0)
        .and_then(|r| r.days);
    let (status, found) = match soft_delete {
        Some(days) => (CheckStatus::Pass, format!("blob soft delete on ({days} days)")),
        None if store.versions_seen().await? => (
            CheckStatus::Pass,
            "blob versions seen under tofu-records/ (versioning is on)".to_string(),
        ),
        None => (
            CheckStatus::Fail,
            "blob soft delete off, and no blob version seen (versioning is an account setting the data plane cannot read; if it is on, this passes once a record has a version)".to_string(),
        ),
    };
    checks.push(SafetyCheck {
        setting: VERSIONS_OR_SOFT_DELETE,
        status,
        found,
        fix: setup_or(format!(
            "az storage account blob-service-properties update {acct} --enable-versioning true --enable-delete-retention true --delete-retention-days {SOFT_DELETE_DAYS}"
        )),
    });

    let (status, found) = match store.container_access().await? {
        ContainerAccess::Private => (CheckStatus::Pass, "private".to_string()),
        ContainerAccess::Public { level, .. } => {
            (CheckStatus::Fail, format!("public access level {level:?}"))
        }
        ContainerAccess::Missing => (
            CheckStatus::Fail,
            format!("no container {container:?} in the account"),
        ),
    };
    checks.push(SafetyCheck {
        setting: CONTAINER_PUBLIC_ACCESS,
        status,
        found,
        fix: setup_or(format!(
            "az storage container set-permission --name {container} {acct} --public-access off"
        )),
    });

    checks.push(SafetyCheck {
        setting: ACCOUNT_PUBLIC_ACCESS,
        status: CheckStatus::Unchecked,
        found: "could not be checked: an account (ARM) property no data-plane call reads".into(),
        fix: format!(
            "check: `az storage account show --name {} --query allowBlobPublicAccess`; fix: `az storage account update --name {} --allow-blob-public-access false`",
            store.account, store.account
        ),
    });

    let (status, found) = if store.service.starts_with("https://") {
        (CheckStatus::Pass, format!("{} is https", store.service))
    } else if loopback(&store.service) {
        (
            CheckStatus::Pass,
            format!("{} is http to a loopback emulator", store.service),
        )
    } else {
        (
            CheckStatus::Fail,
            format!(
                "{} is http: records would cross the network unencrypted",
                store.service
            ),
        )
    };
    checks.push(SafetyCheck {
        setting: HTTPS,
        status,
        found,
        fix: "set an https:// endpoint (or none) in the record_store block".into(),
    });

    checks.push(SafetyCheck {
        setting: ACCOUNT_HTTPS_ONLY,
        status: CheckStatus::Unchecked,
        found: "could not be checked: an account (ARM) property no data-plane call reads".into(),
        fix: format!(
            "check: `az storage account show --name {} --query enableHttpsTrafficOnly`; fix: `az storage account update --name {} --https-only true`",
            store.account, store.account
        ),
    });

    Ok(SafetyReport {
        store: store.describe(),
        checks,
    })
}

/// Turn on blob soft delete and make the container private; what the data plane cannot set is named.
pub async fn setup(store: &AzureStore) -> Result<Vec<SafetyStep>, AzureSafetyError> {
    let acct = az_account(store);
    let mut steps = Vec::new();

    let on = store
        .service_properties()
        .await?
        .delete_retention_policy
        .is_some_and(|r| r.enabled && r.days.unwrap_or(0) > 0);
    if !on {
        const OP: &str = "Set Blob Service Properties";
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><StorageServiceProperties><DeleteRetentionPolicy><Enabled>true</Enabled><Days>{SOFT_DELETE_DAYS}</Days></DeleteRetentionPolicy></StorageServiceProperties>"
        );
        let url = store.service_url(&[("restype", "service"), ("comp", "properties")]);
        let response = store
            .admin(
                OP,
                Method::PUT,
                url,
                &[("content-type", "application/xml".to_string())],
                body.into_bytes(),
            )
            .await?;
        store.expect_success(OP, response).await?;
    }
    steps.push(SafetyStep {
        setting: VERSIONS_OR_SOFT_DELETE,
        outcome: if on {
            SetupOutcome::Unchanged
        } else {
            SetupOutcome::Applied
        },
    });

    let outcome = match store.container_access().await? {
        ContainerAccess::Private => SetupOutcome::Unchanged,
        ContainerAccess::Missing => SetupOutcome::Manual(format!(
            "az storage container create --name {} {acct} --public-access off",
            store.container
        )),
        ContainerAccess::Public { acl, .. } => {
            const OP: &str = "Set Container ACL";
            // No x-ms-blob-public-access header: private. The stored access policies are sent back as they were.
            let body = if acl.is_empty() {
                b"<?xml version=\"1.0\" encoding=\"utf-8\"?><SignedIdentifiers />".to_vec()
            } else {
                acl
            };
            let url = store.container_url(&[("restype", "container"), ("comp", "acl")]);
            let response = store
                .admin(
                    OP,
                    Method::PUT,
                    url,
                    &[("content-type", "application/xml".to_string())],
                    body,
                )
                .await?;
            store.expect_success(OP, response).await?;
            SetupOutcome::Applied
        }
    };
    steps.push(SafetyStep {
        setting: CONTAINER_PUBLIC_ACCESS,
        outcome,
    });
    steps.push(SafetyStep {
        setting: ACCOUNT_PUBLIC_ACCESS,
        outcome: SetupOutcome::Manual(format!(
            "az storage account update --name {} --allow-blob-public-access false",
            store.account
        )),
    });
    steps.push(SafetyStep {
        setting: ACCOUNT_HTTPS_ONLY,
        outcome: SetupOutcome::Manual(format!(
            "az storage account update --name {} --https-only true",
            store.account
        )),
    });
    Ok(steps)
}

#[async_trait::async_trait]
impl Safety for AzureSettings {
    async fn report(&self) -> Result<SafetyReport, SafetyUnchecked> {
        let store = AzureStore::connect(self);
        check(&store).await.map_err(|e| {
            SafetyUnchecked::new(
                store.describe(),
                e.source.reason,
                e.to_string(),
                "the identity needs to read the blob service properties and the container's ACL (an account key, or a role with Microsoft.Storage/storageAccounts/blobServices/read)",
            )
        })
    }
}

static SKIP_WARNED: Once = Once::new();

/// The guard for an Azure store, or none (with a warning, once) when `skip_bucket_checks` is set.
pub(super) fn guard(settings: &AzureSettings) -> Option<Arc<dyn WriteGuard>> {
    unless_skipped(
        settings.skip_bucket_checks,
        &SKIP_WARNED,
        &format!("azurerm container {}", settings.container_name),
        "blob versioning or soft delete, public access and HTTPS",
        || settings.clone(),
    )
}
