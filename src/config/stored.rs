//! The backend terraform's working folder was last initialised with: `.terraform/terraform.tfstate`, or `$TF_DATA_DIR/terraform.tfstate`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::ConfigError;

/// terraform's environment variable for its data folder (default `.terraform`).
pub const DATA_DIR_ENV: &str = "TF_DATA_DIR";

/// The backend terraform's working folder was last initialised with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredBackend {
    /// The file it was read from.
    pub file: PathBuf,
    /// Its type, e.g. `http`.
    pub kind: String,
    /// The `address` stored with it, when one is (it wins over `TF_HTTP_ADDRESS`).
    pub address: Option<String>,
    /// Every setting stored with a value (not null).
    pub set: Vec<String>,
}

/// terraform's working folder for `args`: `-chdir=DIR`, else the current folder.
pub(super) fn working_dir(args: &[String]) -> PathBuf {
    args.iter()
        .take_while(|a| a.starts_with('-'))
        .find_map(|a| a.strip_prefix("-chdir="))
        .map_or_else(|| PathBuf::from("."), PathBuf::from)
}

/// The stored backend file for `args` (`TF_DATA_DIR` as terraform reads it, from its working folder).
pub fn stored_backend_file(args: &[String]) -> PathBuf {
    let data = std::env::var_os(DATA_DIR_ENV)
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from(".terraform"), PathBuf::from);
    working_dir(args).join(data).join("terraform.tfstate")
}

/// The backend stored in `file`; none when terraform was never initialised with a backend there.
pub fn read_stored_backend(file: &Path) -> Result<Option<StoredBackend>, ConfigError> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ConfigError::Read {
                path: file.to_path_buf(),
                source,
            });
        }
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| ConfigError::Parse {
        file: file.display().to_string(),
        message: format!("not terraform's backend state: {e}"),
    })?;
    let Some(kind) = value.pointer("/backend/type").and_then(Value::as_str) else {
        return Ok(None);
    };
    Ok(Some(StoredBackend {
        file: file.to_path_buf(),
        kind: kind.to_string(),
        address: value
            .pointer("/backend/config/address")
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty())
            .map(str::to_string),
        set: value
            .pointer("/backend/config")
            .and_then(Value::as_object)
            .map(|c| {
                c.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_backends_are_read_with_their_address() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("terraform.tfstate");
        assert_eq!(read_stored_backend(&file).unwrap(), None);
        std::fs::write(
            &file,
            r#"{"version":3,"backend":{"type":"http","config":{"address":null,"lock_address":null},"hash":1}}"#,
        )
        .unwrap();
        let b = read_stored_backend(&file).unwrap().unwrap();
        assert_eq!((b.kind.as_str(), b.address), ("http", None));
        std::fs::write(
            &file,
            r#"{"version":3,"backend":{"type":"http","config":{"address":"http://x/"}}}"#,
        )
        .unwrap();
        let b = read_stored_backend(&file).unwrap().unwrap();
        assert_eq!(b.address.as_deref(), Some("http://x/"));
        std::fs::write(&file, "{").unwrap();
        assert!(read_stored_backend(&file).is_err());
    }
}
