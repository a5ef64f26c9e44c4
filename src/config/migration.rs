//! Leaving in one command: `run -- terraform init -migrate-state` after the root's backend
//! block was changed away from `http`.
//!
//! terraform reads the *old* backend from its working folder's stored backend
//! (`.terraform/terraform.tfstate`, or `$TF_DATA_DIR/terraform.tfstate`): when that says
//! `http` with no stored address, terraform takes the address from `TF_HTTP_ADDRESS`, which
//! `run` points at its per-run server, and reads the estate's records through it (two GETs,
//! no lock, no write), then writes them to the new backend. So `run` serves the records as
//! the old backend for that one init. Any other command with a non-http backend is refused
//! as before, with the hint to migrate when the working folder still says http.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{ConfigError, check_http_backend};
use crate::cut::{Mechanism, cut};

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

/// Whether `args` are an `init` that migrates or reconfigures the backend.
pub fn is_backend_migration(args: &[String]) -> bool {
    let mut words = args.iter().map(String::as_str);
    if words.find(|a| !a.starts_with('-')) != Some("init") {
        return false;
    }
    args.iter().any(|a| {
        let flag = a.trim_start_matches('-');
        let (name, value) = flag.split_once('=').unwrap_or((flag, "true"));
        a.starts_with('-')
            && matches!(name, "migrate-state" | "force-copy" | "reconfigure")
            && value != "false"
    })
}

/// Check the root's backend for `run` of `args`: `backend "http" {}`, or an `init
/// -migrate-state` leaving http while terraform's working folder still names http (then
/// `run` serves the records as the old backend, and says so).
pub fn check_backend_for_run(root: &Path, args: &[String]) -> Result<(), ConfigError> {
    let refusal = match check_http_backend(root) {
        Ok(()) => return Ok(()),
        Err(e @ (ConfigError::NotHttpBackend { .. } | ConfigError::NoHttpBackend { .. })) => e,
        Err(e) => return Err(e),
    };
    let file = stored_backend_file(args);
    let stored = match read_stored_backend(&file)? {
        Some(s) if s.kind == "http" => s,
        _ => return Err(refusal),
    };
    let (at, kind) = match &refusal {
        ConfigError::NotHttpBackend { at, kind } => (at.clone(), kind.clone()),
        _ => (root.display().to_string(), "local".to_string()),
    };
    if !is_backend_migration(args) || cut(Mechanism::MigrateOut) {
        return Err(ConfigError::LeaveWithInit {
            at,
            kind,
            stored: file.display().to_string(),
        });
    }
    if let Some(address) = &stored.address {
        return Err(ConfigError::Invalid {
            at: file.display().to_string(),
            message: format!(
                "terraform's stored backend \"http\" has address {address:?}, which wins over the address `run` gives: terraform would read the old state from there, not from the records. Run `terraform init -reconfigure` with backend \"http\" {{}} first, then migrate"
            ),
        });
    }
    eprintln!(
        "choudoufu-live: terraform is moving this root's state from backend \"http\" to backend {kind:?}: this run serves the estate's records as the old backend (reads only). The records stay in the store."
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_an_init_that_migrates_is_a_migration() {
        for yes in [
            &["init", "-migrate-state"][..],
            &["-chdir=x", "init", "-force-copy", "-input=false"],
            &["init", "--migrate-state"],
            &["init", "-reconfigure"],
            &["init", "-migrate-state=true"],
        ] {
            assert!(is_backend_migration(&args(yes)), "{yes:?}");
        }
        for no in [
            &["init"][..],
            &["plan", "-migrate-state"],
            &["init", "-migrate-state=false"],
            &["apply", "-auto-approve"],
            &[],
        ] {
            assert!(!is_backend_migration(&args(no)), "{no:?}");
        }
    }

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
