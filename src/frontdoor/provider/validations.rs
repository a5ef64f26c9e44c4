//! The answers to a provider's configuration validation, kept for the run by the exact request.
//!
//! `PrepareProviderConfig` (protocol 5) and `ValidateProviderConfig` (6) answer from the
//! configuration sent alone: they run before the provider is configured and change nothing
//! in it. Terraform sends the same request at each walk of each of its processes, and the
//! AWS provider checks its whole schema each time. An answer with status OK is kept in
//! memory, by the digest of the call's path and request, for the run's other calls; it holds
//! the configuration, credentials among them, so it is never written anywhere.

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::schema_cache::Answer;
use crate::cut::{Mechanism, cut};

/// The gRPC paths of the provider configuration's validation, in protocols 5 and 6.
const PATHS: &[&str] = &[
    "/tfplugin5.Provider/PrepareProviderConfig",
    "/tfplugin6.Provider/ValidateProviderConfig",
];

/// Whether `path` validates a provider's own configuration.
pub fn is_provider_validation(path: &str) -> bool {
    PATHS.contains(&path)
}

/// One provider's kept validation answers.
#[derive(Default)]
pub struct Validations(Mutex<HashMap<[u8; 32], Answer>>);

fn key(path: &str, request: &[u8]) -> [u8; 32] {
    let mut digest = Sha256::new();
    digest.update(path.as_bytes());
    digest.update([0]);
    digest.update(request);
    digest.finalize().into()
}

impl Validations {
    /// The answer kept for exactly this request, if any.
    pub fn get(&self, path: &str, request: &[u8]) -> Option<Answer> {
        if cut(Mechanism::KeptValidations) {
            return None;
        }
        let kept = self.0.lock().ok()?;
        kept.get(&key(path, request)).cloned()
    }

    /// Keep `answer` (status OK) to this request.
    pub fn keep(&self, path: &str, request: &[u8], answer: &Answer) {
        if let Ok(mut kept) = self.0.lock() {
            kept.insert(key(path, request), answer.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_kept_for_exactly_its_request() {
        let v = Validations::default();
        let path = PATHS[0];
        let answer = Answer {
            headers: Default::default(),
            body: hyper::body::Bytes::from_static(b"\0\0\0\0\0"),
            trailers: Default::default(),
        };
        assert!(v.get(path, b"config").is_none());
        v.keep(path, b"config", &answer);
        assert_eq!(v.get(path, b"config").map(|a| a.body), Some(answer.body));
        assert!(v.get(path, b"other").is_none());
        assert!(v.get(PATHS[1], b"config").is_none());
        assert!(is_provider_validation(PATHS[1]));
        assert!(!is_provider_validation(
            "/tfplugin5.Provider/ValidateResourceTypeConfig"
        ));
    }
}
