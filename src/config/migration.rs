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

use std::path::Path;

use super::backend::check_http_backend;
use super::error::ConfigError;
use super::stored::{read_stored_backend, stored_backend_file};
use crate::cut::{Mechanism, cut};

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
}
