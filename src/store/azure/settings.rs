//! The Azure store's settings: the `record_store "azurerm"` attributes and Azure Storage connection strings.

use crate::store::settings::error::SettingError;
use crate::store::settings::kind::StoreKind;
use crate::store::settings::source::{Reader, SettingsSource};

/// The Azurite development account (public, documented by Microsoft).
pub(crate) const DEV_ACCOUNT: &str = "devstoreaccount1";
pub(crate) const DEV_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Settings of an Azure Blob Storage record store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AzureSettings {
    /// The storage account (also from the connection string or `AZURE_STORAGE_ACCOUNT_NAME`).
    pub storage_account_name: Option<String>,
    /// The container.
    pub container_name: String,
    /// A custom blob endpoint (Azurite, sovereign clouds), e.g. `http://127.0.0.1:10000/devstoreaccount1`.
    pub endpoint: Option<String>,
    /// An account key (Shared Key).
    pub access_key: Option<String>,
    /// A SAS token (`sv=...&sig=...`).
    pub sas_token: Option<String>,
    /// A connection string (`AccountName=...;AccountKey=...;BlobEndpoint=...`).
    pub connection_string: Option<String>,
    /// Skip the store safety check before the first write (unsafe; logs a warning).
    pub skip_bucket_checks: bool,
}

/// What a connection string says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectionString {
    /// `AccountName`.
    pub account: Option<String>,
    /// `AccountKey`.
    pub key: Option<String>,
    /// `SharedAccessSignature`.
    pub sas: Option<String>,
    /// `BlobEndpoint`, or one made from `DefaultEndpointsProtocol` and `EndpointSuffix`.
    pub blob_endpoint: Option<String>,
}

/// Read an Azure Storage connection string (`UseDevelopmentStorage=true` means Azurite's default).
pub fn parse_connection_string(s: &str) -> Result<ConnectionString, String> {
    let mut out = ConnectionString::default();
    let (mut protocol, mut suffix) = (None, None);
    for part in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = part.split_once('=') else {
            return Err(format!(
                "connection string part {:?} is not Name=value",
                part.split('=').next().unwrap_or("")
            ));
        };
        match k.trim() {
            "AccountName" => out.account = Some(v.to_string()),
            "AccountKey" => out.key = Some(v.to_string()),
            "SharedAccessSignature" => out.sas = Some(v.to_string()),
            "BlobEndpoint" => out.blob_endpoint = Some(v.trim_end_matches('/').to_string()),
            "DefaultEndpointsProtocol" => protocol = Some(v.to_string()),
            "EndpointSuffix" => suffix = Some(v.to_string()),
            "UseDevelopmentStorage" if v.eq_ignore_ascii_case("true") => {
                out.account.get_or_insert_with(|| DEV_ACCOUNT.into());
                out.key.get_or_insert_with(|| DEV_KEY.into());
                out.blob_endpoint
                    .get_or_insert_with(|| format!("http://127.0.0.1:10000/{DEV_ACCOUNT}"));
            }
            _ => {}
        }
    }
    if out.blob_endpoint.is_none()
        && let (Some(account), Some(suffix)) = (&out.account, &suffix)
    {
        let protocol = protocol.as_deref().unwrap_or("https");
        out.blob_endpoint = Some(format!("{protocol}://{account}.blob.{suffix}"));
    }
    if out.account.is_none() {
        return Err("the connection string has no AccountName".into());
    }
    Ok(out)
}

impl AzureSettings {
    /// The settings of `record_store "azurerm"` from any source; a connection string is checked here.
    pub fn from_source(source: &dyn SettingsSource) -> Result<Self, SettingError> {
        let r = Reader::new(
            source,
            StoreKind::Azure,
            &[
                "storage_account_name",
                "container_name",
                "endpoint",
                "access_key",
                "sas_token",
                "connection_string",
                "skip_bucket_checks",
            ],
        )?;
        let settings = AzureSettings {
            container_name: r.required("container_name", "records")?,
            storage_account_name: r.string("storage_account_name")?,
            endpoint: r.string("endpoint")?,
            access_key: r.string("access_key")?,
            sas_token: r.string("sas_token")?,
            connection_string: r.string("connection_string")?,
            skip_bucket_checks: r.boolean("skip_bucket_checks")?.unwrap_or(false),
        };
        if let Some(c) = &settings.connection_string {
            parse_connection_string(c).map_err(|m| {
                SettingError::setting(
                    "connection_string",
                    format!("{} `connection_string`: {m}", r.what()),
                )
            })?;
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_strings() {
        let c = parse_connection_string(
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=a2V5;EndpointSuffix=core.windows.net",
        )
        .unwrap();
        assert_eq!(c.account.as_deref(), Some("acme"));
        assert_eq!(c.key.as_deref(), Some("a2V5"));
        assert_eq!(
            c.blob_endpoint.as_deref(),
            Some("https://acme.blob.core.windows.net")
        );
        let dev = parse_connection_string("UseDevelopmentStorage=true").unwrap();
        assert_eq!(dev.account.as_deref(), Some(DEV_ACCOUNT));
        let az = parse_connection_string(
            "AccountName=devstoreaccount1;AccountKey=k==;BlobEndpoint=http://127.0.0.1:1234/devstoreaccount1/;",
        )
        .unwrap();
        assert_eq!(az.key.as_deref(), Some("k=="));
        assert_eq!(
            az.blob_endpoint.as_deref(),
            Some("http://127.0.0.1:1234/devstoreaccount1")
        );
        assert!(parse_connection_string("AccountKey=x").is_err());
        assert!(parse_connection_string("garbage").is_err());
    }
}
