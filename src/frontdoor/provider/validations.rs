//! The answers to a provider's configuration validation, kept by the exact request: for the
//! run in memory, and between runs in a private folder.
//!
//! `PrepareProviderConfig` (protocol 5) and `ValidateProviderConfig` (6) answer from the
//! configuration sent, the provider's code and its environment (a setting's default may come
//! from a variable): they run before the provider is configured and change nothing in it.
//! Terraform sends one at each walk of each of its processes, and the AWS provider checks its
//! whole schema each time (about 2.3 s). An answer with status OK is kept under the digest of
//! the package's `h1:` hash, the plugin's environment, the call's path and its request, so a
//! changed package, environment or configuration is asked of a plugin again. The answer holds
//! the configuration, credentials among them: its file is private (0600, in a 0700 folder),
//! as the read cache's records are.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use hyper::body::Bytes;
use sha2::{Digest, Sha256};

use crate::cut::{Mechanism, cut};
use crate::engine::private_dir;
use crate::store::private_file::{self, Durability};

/// The gRPC paths of the provider configuration's validation, in protocols 5 and 6.
const PATHS: &[&str] = &[
    "/tfplugin5.Provider/PrepareProviderConfig",
    "/tfplugin6.Provider/ValidateProviderConfig",
];

/// Whether `path` validates a provider's own configuration.
pub fn is_provider_validation(path: &str) -> bool {
    PATHS.contains(&path)
}

/// One provider's kept validation answers (each the framed message of an answer with status OK).
pub struct Validations {
    memory: Mutex<HashMap<[u8; 32], Bytes>>,
    /// Where answers are kept between runs (none: for the run only).
    dir: Option<PathBuf>,
    /// The digest of the package's hash and the plugin's environment.
    salt: [u8; 32],
}

impl Validations {
    /// Answers of the provider whose package hashes to `package_h1`, run with the environment `env`, kept in `dir` between runs (none: for the run only).
    pub fn new<'a>(
        dir: Option<PathBuf>,
        package_h1: &str,
        env: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Self {
        let mut env: Vec<(&[u8], &[u8])> = env.into_iter().collect();
        env.sort();
        let mut digest = Sha256::new();
        digest.update(package_h1.as_bytes());
        for (name, value) in env {
            digest.update([0]);
            digest.update(name);
            digest.update([b'=']);
            digest.update(value);
        }
        Validations {
            memory: Mutex::new(HashMap::new()),
            dir,
            salt: digest.finalize().into(),
        }
    }

    /// The folder a root keeps them in, under terraform's data folder (`.terraform`).
    pub fn dir_for(data_dir: &Path) -> PathBuf {
        data_dir.join("choudoufu-live-cache").join("validations")
    }

    fn key(&self, path: &str, request: &[u8]) -> [u8; 32] {
        let mut digest = Sha256::new();
        digest.update(self.salt);
        digest.update(path.as_bytes());
        digest.update([0]);
        digest.update(request);
        digest.finalize().into()
    }

    /// The answer kept for exactly this request, if any.
    pub fn get(&self, path: &str, request: &[u8]) -> Option<Bytes> {
        if cut(Mechanism::KeptValidations) {
            return None;
        }
        let key = self.key(path, request);
        if let Some(kept) = self.memory.lock().ok()?.get(&key) {
            return Some(kept.clone());
        }
        let file = self.dir.as_ref()?.join(hex::encode(key));
        let kept = Bytes::from(std::fs::read(file).ok()?);
        if let Ok(mut memory) = self.memory.lock() {
            memory.insert(key, kept.clone());
        }
        Some(kept)
    }

    /// Keep `answer`, the framed message of an answer with status OK, to this request; a failure to write it only costs a plugin's answer next run.
    pub fn keep(&self, path: &str, request: &[u8], answer: &Bytes) {
        let key = self.key(path, request);
        if let Ok(mut memory) = self.memory.lock() {
            memory.insert(key, answer.clone());
        }
        let Some(dir) = &self.dir else {
            return;
        };
        let written = private_dir::create(dir)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                private_file::write(&dir.join(hex::encode(key)), answer, Durability::Unsynced)
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            tracing::debug!(error = %e, "could not keep a provider configuration's validation");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(value: &'static str) -> Vec<(&'static [u8], &'static [u8])> {
        vec![(b"AWS_REGION", value.as_bytes()), (b"HOME", b"/h")]
    }

    #[test]
    fn an_answer_is_kept_for_exactly_its_request_package_and_environment() {
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join("validations");
        let path = PATHS[0];
        let answer = Bytes::from_static(b"\0\0\0\0\0");
        let v = Validations::new(Some(kept.clone()), "h1:a", env("us-east-1"));
        assert!(v.get(path, b"config").is_none());
        v.keep(path, b"config", &answer);
        assert_eq!(v.get(path, b"config"), Some(answer.clone()));
        assert!(v.get(path, b"other").is_none());
        assert!(v.get(PATHS[1], b"config").is_none());
        // The next run reads it from the folder; another package or environment does not.
        let next = Validations::new(Some(kept.clone()), "h1:a", env("us-east-1"));
        assert_eq!(next.get(path, b"config"), Some(answer));
        let other_env = Validations::new(Some(kept.clone()), "h1:a", env("eu-west-1"));
        assert!(other_env.get(path, b"config").is_none());
        let other_package = Validations::new(Some(kept.clone()), "h1:b", env("us-east-1"));
        assert!(other_package.get(path, b"config").is_none());
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&kept), 0o700);
        for entry in std::fs::read_dir(&kept).unwrap() {
            assert_eq!(mode(&entry.unwrap().path()), 0o600);
        }
        assert!(is_provider_validation(PATHS[1]));
        assert!(!is_provider_validation(
            "/tfplugin5.Provider/ValidateResourceTypeConfig"
        ));
    }
}
