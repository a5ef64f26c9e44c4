//! A provider's schema answer, kept from the first plugin that gave it, so a connection that only reads the schema needs no plugin process.
//!
//! Terraform opens a connection just to read a provider's schema (once per command, and
//! again at the start of each walk); the answer depends only on the provider's package,
//! whose hash the door checked, so one door answers them all alike.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use hyper::HeaderMap;
use hyper::body::Bytes;
use prost::Message;

use super::proto::tfplugin5::diagnostic::Severity;
use super::proto::tfplugin5::get_provider_schema::Response as SchemaResponse;

/// The gRPC paths of the schema call, in protocols 5 and 6.
const SCHEMA_PATHS: &[&str] = &[
    "/tfplugin5.Provider/GetSchema",
    "/tfplugin6.Provider/GetProviderSchema",
];

/// Whether `path` is the schema call.
pub fn is_schema_call(path: &str) -> bool {
    SCHEMA_PATHS.contains(&path)
}

/// One whole gRPC answer: its headers, its length-prefixed message, its trailers.
#[derive(Clone, Debug)]
pub struct Answer {
    /// The response headers.
    pub headers: HeaderMap,
    /// The body: the framed message as the plugin sent it.
    pub body: Bytes,
    /// The trailers (`grpc-status` among them).
    pub trailers: HeaderMap,
}

/// The one uncompressed message of a framed gRPC body, if it holds exactly that.
pub fn framed_message(body: &[u8]) -> Option<&[u8]> {
    let (&0, rest) = body.split_first()? else {
        return None;
    };
    let (len, message) = rest.split_first_chunk::<4>()?;
    (u32::from_be_bytes(*len) as usize == message.len()).then_some(message)
}

/// A gRPC answer's `name` (`grpc-status`, `grpc-message`): from its trailers, else from its headers (a trailers-only answer).
pub fn grpc_field<'a>(
    trailers: Option<&'a HeaderMap>,
    headers: &'a HeaderMap,
    name: &str,
) -> Option<&'a hyper::header::HeaderValue> {
    trailers
        .and_then(|t| t.get(name))
        .or_else(|| headers.get(name))
}

/// `message` framed as the one uncompressed message of a gRPC body.
pub fn frame(message: &[u8]) -> hyper::body::Bytes {
    let len = u32::try_from(message.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(message.len() + 5);
    out.push(0);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(message);
    out.into()
}

impl Answer {
    /// Whether the answer may stand for every later schema call: status OK, one uncompressed message, no error diagnostic.
    pub fn reusable(&self) -> bool {
        if self.trailers.get("grpc-status").map(|v| v.as_bytes()) != Some(b"0") {
            return false;
        }
        let Some(message) = framed_message(&self.body) else {
            return false;
        };
        // Protocols 5 and 6 both carry the diagnostics as field 4 of the schema answer.
        match SchemaResponse::decode(message) {
            Ok(resp) => !resp
                .diagnostics
                .iter()
                .any(|d| d.severity == Severity::Error as i32),
            Err(_) => false,
        }
    }
}

/// The schema answer of one provider, once a plugin gave a reusable one, its resource types' schema versions, and whether the door's own schema call ended.
#[derive(Debug)]
pub struct SchemaCache(
    Mutex<Option<Answer>>,
    OnceLock<BTreeMap<String, u64>>,
    tokio::sync::watch::Sender<bool>,
);

impl Default for SchemaCache {
    fn default() -> Self {
        SchemaCache(
            Mutex::new(None),
            OnceLock::new(),
            tokio::sync::watch::Sender::new(false),
        )
    }
}

impl SchemaCache {
    /// Say that the door's own schema call ended, whatever it gave: [`SchemaCache::settled`] stops waiting.
    pub fn settle(&self) {
        self.2.send_replace(true);
    }

    /// The kept answer, once the door's own schema call ended (none: it gave none, and a plugin must answer).
    pub async fn settled(&self) -> Option<Answer> {
        let mut settled = self.2.subscribe();
        let _ = settled.wait_for(|s| *s).await;
        self.get()
    }

    /// The kept answer, if any.
    pub fn get(&self) -> Option<Answer> {
        self.0.lock().ok().and_then(|a| a.clone())
    }

    /// The schema version of resource type `type_name`, once an answer is kept (read from it once).
    pub fn version(&self, type_name: &str) -> Option<u64> {
        if self.1.get().is_none() {
            let answer = self.get()?;
            let message = framed_message(&answer.body)?;
            let versions = SchemaResponse::decode(message)
                .ok()?
                .resource_schemas
                .into_iter()
                // A negative version is no version: such a type's objects are not recorded at return.
                .filter_map(|(name, schema)| Some((name, u64::try_from(schema.version).ok()?)))
                .collect();
            let _ = self.1.set(versions);
        }
        self.1.get()?.get(type_name).copied()
    }

    /// Keep `answer` if it is reusable and none is kept yet.
    pub fn offer(&self, answer: &Answer) {
        if !answer.reusable() {
            return;
        }
        if let Ok(mut kept) = self.0.lock()
            && kept.is_none()
        {
            *kept = Some(answer.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontdoor::provider::proto::tfplugin5::{Diagnostic, Schema};

    fn answer(diags: Vec<Diagnostic>, status: &'static str) -> Answer {
        let msg = SchemaResponse {
            diagnostics: diags,
            resource_schemas: [("t_thing".to_string(), Schema { version: 3 })].into(),
        }
        .encode_to_vec();
        let mut body = vec![0u8];
        body.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        body.extend_from_slice(&msg);
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", status.parse().unwrap());
        Answer {
            headers: HeaderMap::new(),
            body: Bytes::from(body),
            trailers,
        }
    }

    #[test]
    fn only_a_clean_answer_is_kept() {
        let warning = Diagnostic {
            severity: Severity::Warning as i32,
            summary: "w".into(),
            ..Default::default()
        };
        let error = Diagnostic {
            severity: Severity::Error as i32,
            summary: "e".into(),
            ..Default::default()
        };
        assert!(answer(vec![warning.clone()], "0").reusable());
        assert!(!answer(vec![error], "0").reusable());
        assert!(!answer(vec![], "14").reusable());
        let cache = SchemaCache::default();
        cache.offer(&answer(vec![], "14"));
        assert!(cache.get().is_none());
        assert_eq!(cache.version("t_thing"), None);
        cache.offer(&answer(vec![warning], "0"));
        assert!(cache.get().is_some());
        assert_eq!(cache.version("t_thing"), Some(3));
        assert_eq!(cache.version("t_other"), None);
        assert!(is_schema_call("/tfplugin5.Provider/GetSchema"));
        assert!(!is_schema_call("/tfplugin5.Provider/Configure"));
    }
}
