//! The protocol's side of the live service's values: diagnostics, versions, provider
//! configurations and live objects as its messages carry them.

use super::validate;
use crate::cloud::aws::markers as markers_aws;
use crate::frontdoor::plugin::proto::live as pb;
use crate::store::Version;

/// A diagnostic of `severity` about `address` (empty: none).
pub(super) fn diag(
    severity: pb::diagnostic::Severity,
    summary: &str,
    detail: &str,
    address: &str,
) -> pb::Diagnostic {
    pb::Diagnostic {
        severity: severity as i32,
        summary: summary.to_string(),
        detail: detail.to_string(),
        address: address.to_string(),
    }
}

/// The one error diagnostic of a refused request.
pub(super) fn error(summary: &str, detail: &str) -> Vec<pb::Diagnostic> {
    vec![diag(pb::diagnostic::Severity::Error, summary, detail, "")]
}

/// The diagnostic refusing a request whose field is wrong.
pub(super) fn invalid(e: &validate::FieldError) -> Vec<pb::Diagnostic> {
    error("Invalid request", &e.to_string())
}

/// A version as the protocol carries it.
pub(super) fn to_pb(v: &Version) -> pb::Version {
    pb::Version {
        token: v.token.clone(),
        version_id: v.version_id.clone().unwrap_or_default(),
    }
}

/// A provider configuration from its JSON bytes; empty bytes are no configuration.
pub(super) fn provider_config(bytes: &[u8]) -> serde_json::Value {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return serde_json::Value::Null;
    }
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| serde_json::Value::String(format!("(not JSON: {e})")))
}

/// A live object as the protocol carries it.
pub(super) fn live_object(o: markers_aws::LiveObject) -> pb::LiveObject {
    pb::LiveObject {
        address: o.address().unwrap_or_default().to_string(),
        id: o.arn,
        import_id: o.import_id.unwrap_or_default(),
        tags: o.tags.into_iter().collect(),
    }
}
