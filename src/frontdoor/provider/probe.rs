//! A plugin of the door's own, configured as terraform configured the provider, that asks the provider itself whether a marked live object is there and by which import ID.
//!
//! The bind of a marked object needs its import ID, and must never take an object the cloud is
//! deleting. Both answers come from the provider, not from a table per service: each candidate
//! ID (from the object's ARN) is imported with `ImportResourceState`, and what it imported is
//! read with `ReadResource`, as terraform's own import does. A candidate is kept when its read
//! gives back the same object (its `arn`, or, for a type without one, the ARN's last segment
//! as its `id`). A read that finds nothing means the object is gone or going (a KMS key pending
//! deletion, a terminated instance, a secret scheduled for deletion): the provider reads those
//! as absent, so they are never bound. The plugin ends when the probe is dropped.

use std::time::Duration;

use hyper::body::Bytes;
use hyper::client::conn::http2::SendRequest;
use prost::Message;
use thiserror::Error;

use super::dynamic;
use super::launch::{LaunchError, Plugin, Upstream};
use super::proto::tfplugin5::diagnostic::Severity;
use super::proto::tfplugin5::{Diagnostic, import_resource_state, read_resource};
use super::proxy::Shared;
use super::unary::{self, Body};

/// How long one probe call may take before the probe gives up on it.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// Why the door could not ask the provider.
#[derive(Debug, Error)]
pub enum ProbeError {
    /// Terraform never configured the provider with this configuration in this run.
    #[error("terraform did not configure the provider with this configuration in this run")]
    NotConfigured,
    /// The probe's plugin could not be started or reached.
    #[error(transparent)]
    Launch(#[from] Box<LaunchError>),
    /// A call failed on the wire, or its answer was not one gRPC message.
    #[error("the provider's {call} call failed: {why}")]
    Call {
        /// The call.
        call: &'static str,
        /// What went wrong.
        why: String,
    },
    /// The provider answered a call with an error diagnostic.
    #[error("the provider refused {call}: {summary}")]
    Refused {
        /// The call.
        call: &'static str,
        /// The diagnostic's summary and detail.
        summary: String,
    },
}

/// What the provider says of a marked object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// It is live, and terraform imports it by this ID.
    Live {
        /// The import ID whose read gave back this object.
        id: String,
    },
    /// An import took, but the provider reads the object as absent: it is gone, or the cloud is deleting it.
    Gone,
    /// No candidate imported this object: why the last one failed.
    NotBindable(String),
}

/// One plugin of the door's own, configured as terraform configured its provider.
pub struct Probe {
    // Dropped last: the plugin process (killed on drop).
    sender: SendRequest<Body>,
    prefix: &'static str,
    _upstream: Upstream,
}

impl Probe {
    /// Start a plugin of `plugin`, read its schema (which the provider wants before anything else) and configure it with terraform's own configure `message`.
    pub(super) async fn start(
        plugin: &Plugin,
        shared: &Shared,
        message: &[u8],
    ) -> Result<Probe, ProbeError> {
        let upstream = shared.launcher.start(plugin).await.map_err(Box::new)?;
        let sender = upstream.connect().await.map_err(Box::new)?;
        let (prefix, schema, configure) = match upstream.protocol() {
            6 => (
                "/tfplugin6.Provider/",
                "GetProviderSchema",
                "ConfigureProvider",
            ),
            _ => ("/tfplugin5.Provider/", "GetSchema", "Configure"),
        };
        let probe = Probe {
            sender,
            prefix,
            _upstream: upstream,
        };
        probe.call(schema, &[]).await?;
        let answer = probe.call(configure, message).await?;
        // The configure answer's diagnostics are field 1 in both protocols.
        refused(
            "Configure",
            &ConfigureAnswer::decode(answer.as_ref())
                .map_err(|e| call_failed("Configure", e))?
                .diagnostics,
        )?;
        Ok(probe)
    }

    /// Whether the object of `type_name` at `arn` is live, and by which of `candidates` it imports (tried in order).
    pub async fn read_back(&self, type_name: &str, arn: &str, candidates: &[String]) -> Found {
        let mut gone = false;
        let mut why = String::from("no candidate import ID");
        for id in candidates {
            let imported = match self.import(type_name, id).await {
                Ok(Some(imported)) => imported,
                Ok(None) => {
                    why = format!("importing {id} gave no {type_name}");
                    continue;
                }
                Err(e) => {
                    why = e.to_string();
                    continue;
                }
            };
            match self.read(type_name, imported).await {
                Ok(None) => gone = true,
                Ok(Some(state)) if same_object(&state, arn) => {
                    return Found::Live { id: id.clone() };
                }
                Ok(Some(_)) => why = format!("importing {id} reads back another object"),
                Err(e) => why = e.to_string(),
            }
        }
        if gone {
            Found::Gone
        } else {
            Found::NotBindable(why)
        }
    }

    /// `ImportResourceState` of `id`: the imported object of `type_name`, if the provider gave one.
    async fn import(
        &self,
        type_name: &str,
        id: &str,
    ) -> Result<Option<import_resource_state::ImportedResource>, ProbeError> {
        let request = import_resource_state::Request {
            type_name: type_name.to_string(),
            id: id.to_string(),
        };
        let answer = self
            .call("ImportResourceState", &request.encode_to_vec())
            .await?;
        let answer = import_resource_state::Response::decode(answer.as_ref())
            .map_err(|e| call_failed("ImportResourceState", e))?;
        refused("ImportResourceState", &answer.diagnostics)?;
        Ok(answer
            .imported_resources
            .into_iter()
            .find(|r| r.type_name == type_name))
    }

    /// `ReadResource` of what an import gave: the object as the provider reads it now, none when it reads it as absent.
    async fn read(
        &self,
        type_name: &str,
        imported: import_resource_state::ImportedResource,
    ) -> Result<Option<serde_json::Value>, ProbeError> {
        let request = read_resource::Request {
            type_name: type_name.to_string(),
            current_state: imported.state,
            private: imported.private,
        };
        let answer = self.call("ReadResource", &request.encode_to_vec()).await?;
        let answer = read_resource::Response::decode(answer.as_ref())
            .map_err(|e| call_failed("ReadResource", e))?;
        refused("ReadResource", &answer.diagnostics)?;
        let state = dynamic::to_json(answer.new_state.as_ref())
            .map_err(|e| call_failed("ReadResource", e))?;
        Ok((!state.is_null()).then_some(state))
    }

    /// One unary call of `method` with `message`; the answer's message.
    async fn call(&self, method: &'static str, message: &[u8]) -> Result<Bytes, ProbeError> {
        unary::call(
            &self.sender,
            &format!("{}{method}", self.prefix),
            message,
            CALL_TIMEOUT,
        )
        .await
        .map_err(|e| ProbeError::Call {
            call: method,
            why: e.to_string(),
        })
    }
}

/// The configure answer: its diagnostics alone.
#[derive(Clone, PartialEq, Message)]
struct ConfigureAnswer {
    #[prost(message, repeated, tag = "1")]
    diagnostics: Vec<Diagnostic>,
}

fn call_failed(call: &'static str, e: impl std::fmt::Display) -> ProbeError {
    ProbeError::Call {
        call,
        why: e.to_string(),
    }
}

/// An error diagnostic among `diagnostics`, as a refusal of `call`.
fn refused(call: &'static str, diagnostics: &[Diagnostic]) -> Result<(), ProbeError> {
    match diagnostics
        .iter()
        .find(|d| d.severity == Severity::Error as i32)
    {
        Some(d) => Err(ProbeError::Refused {
            call,
            summary: if d.detail.is_empty() {
                d.summary.clone()
            } else {
                format!("{}: {}", d.summary, d.detail)
            },
        }),
        None => Ok(()),
    }
}

/// Whether `state`, as the provider read it, is the object at `arn`: its `arn` is that ARN, or, for a type with no `arn`, its `id` is the ARN's last segment.
pub fn same_object(state: &serde_json::Value, arn: &str) -> bool {
    match state["arn"].as_str().filter(|a| !a.is_empty()) {
        Some(read) => same_arn(read, arn),
        None => state["id"]
            .as_str()
            .is_some_and(|id| !id.is_empty() && last_segment(arn) == id),
    }
}

/// Whether the ARN a provider read names the object at `arn`: the same ARN, or the same but for an account the provider left empty (it builds some ARNs from its own account ID, which `skip_requesting_account_id` leaves unknown).
fn same_arn(read: &str, arn: &str) -> bool {
    if read == arn {
        return true;
    }
    let (r, a): (Vec<&str>, Vec<&str>) =
        (read.splitn(6, ':').collect(), arn.splitn(6, ':').collect());
    r.len() == 6 && a.len() == 6 && r[4].is_empty() && (0..6).all(|i| i == 4 || r[i] == a[i])
}

/// The part of `arn` after its last `/` or `:`.
fn last_segment(arn: &str) -> &str {
    arn.rsplit(['/', ':']).next().unwrap_or(arn)
}

/// The import IDs to try for the object at `arn`, in order: `known` (a rule's), the ARN's last segment, its resource part (whole, and after its type), and the whole ARN.
pub fn candidates(arn: &str, known: Option<&str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |c: &str| {
        if !c.is_empty() && !out.iter().any(|o| o == c) {
            out.push(c.to_string());
        }
    };
    if let Some(k) = known {
        add(k);
    }
    add(last_segment(arn));
    if let Some(resource) = arn.splitn(6, ':').nth(5) {
        add(resource);
        // `type/name` and `type:name` (a log group's name may hold slashes of its own).
        if let Some((_, rest)) = resource.split_once('/') {
            add(rest);
        }
        if let Some((_, rest)) = resource.split_once(':') {
            add(rest);
        }
    }
    add(arn);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn candidates_come_from_the_arn_a_known_id_first() {
        assert_eq!(
            candidates("arn:aws:kms:us-east-1:1:key/abc-1", None),
            ["abc-1", "key/abc-1", "arn:aws:kms:us-east-1:1:key/abc-1"]
        );
        assert_eq!(
            candidates("arn:aws:s3:::b", Some("b")),
            ["b", "arn:aws:s3:::b"]
        );
        assert_eq!(
            candidates("arn:aws:iam::1:policy/path/p", None),
            [
                "p",
                "policy/path/p",
                "path/p",
                "arn:aws:iam::1:policy/path/p"
            ]
        );
        assert_eq!(
            candidates("arn:aws:sqs:r:1:q", Some("http://h/1/q")),
            ["http://h/1/q", "q", "arn:aws:sqs:r:1:q"]
        );
        assert_eq!(
            candidates("arn:aws:logs:r:1:log-group:/aws/lambda/f", None),
            [
                "f",
                "log-group:/aws/lambda/f",
                "aws/lambda/f",
                "/aws/lambda/f",
                "arn:aws:logs:r:1:log-group:/aws/lambda/f"
            ]
        );
        assert_eq!(candidates("", None), Vec::<String>::new());
    }

    #[test]
    fn the_same_object_by_its_arn_else_by_its_id() {
        assert!(same_object(
            &json!({"arn": "arn:x:1", "id": "1"}),
            "arn:x:1"
        ));
        assert!(!same_object(
            &json!({"arn": "arn:x:2", "id": "1"}),
            "arn:x:1"
        ));
        assert!(same_object(
            &json!({"id": "eipalloc-1"}),
            "arn:aws:ec2:r:1:elastic-ip/eipalloc-1"
        ));
        assert!(!same_object(
            &json!({"id": "eipalloc-2"}),
            "arn:aws:ec2:r:1:elastic-ip/eipalloc-1"
        ));
        assert!(!same_object(&json!({"id": ""}), "arn:aws:ec2:r:1:x/"));
        assert!(!same_object(&json!(null), "arn:x:1"));
        // A provider that knows no account ID leaves it out of the ARNs it builds.
        assert!(same_object(
            &json!({"arn": "arn:aws:ec2:r::internet-gateway/igw-1"}),
            "arn:aws:ec2:r:123:internet-gateway/igw-1"
        ));
        assert!(!same_object(
            &json!({"arn": "arn:aws:ec2:r::internet-gateway/igw-2"}),
            "arn:aws:ec2:r:123:internet-gateway/igw-1"
        ));
        assert!(!same_object(
            &json!({"arn": "arn:aws:ec2:r:456:internet-gateway/igw-1"}),
            "arn:aws:ec2:r:123:internet-gateway/igw-1"
        ));
    }
}
