//! Records at each provider return: an `ApplyResourceChange` that returned without an error writes its instance's record before terraform hears the answer.
//!
//! `run` installs a [`Recorder`] on the door for each apply, holding the plan's changes and
//! the session terraform saves through. The proxy hands it each apply call and its answer;
//! the recorder finds the planned instance ([`Ledger`]), builds the state instance object
//! and writes that one record in the session at once ([`Session::write_instant`]). A write
//! that fails is logged by address and never breaks terraform's call: terraform's own save
//! is then the record.
//!
//! [`Session::write_instant`]: crate::engine::session::Session::write_instant

use std::sync::Arc;

use prost::Message;
use serde_json::Value;

use super::dynamic;
use super::lockfile::ProviderAddress;
use super::proto::tfplugin5::apply_resource_change::{Request, Response};
use super::proto::tfplugin5::diagnostic::Severity;
use super::schema_cache::SchemaCache;
use crate::engine::provider_return::{self, Action, Ledger};
use crate::engine::session::{Instant, Landed};
use crate::frontdoor::http::Backend;

/// The gRPC paths of the apply call, in protocols 5 and 6.
const APPLY_PATHS: &[&str] = &[
    "/tfplugin5.Provider/ApplyResourceChange",
    "/tfplugin6.Provider/ApplyResourceChange",
];

/// Whether `path` is the apply call.
pub fn is_apply_call(path: &str) -> bool {
    APPLY_PATHS.contains(&path)
}

/// What one apply of a plan records at each provider return: the plan's open changes and the session to write in.
pub struct Recorder {
    backend: Arc<Backend>,
    ledger: Ledger,
}

impl Recorder {
    /// A recorder for the plan `plan` (`show -json`), writing in `backend`'s session.
    pub fn new(backend: Arc<Backend>, plan: &Value) -> Arc<Recorder> {
        Arc::new(Recorder {
            backend,
            ledger: Ledger::from_plan(plan),
        })
    }

    /// How many of the plan's changes no provider call has returned for yet.
    pub fn open(&self) -> usize {
        self.ledger.open()
    }

    /// An apply call of `provider` returned: `request` and `answer` are its messages (unframed).
    pub async fn returned(
        &self,
        provider: &ProviderAddress,
        schema: &SchemaCache,
        request: &[u8],
        answer: &[u8],
    ) {
        let (req, resp) = match (Request::decode(request), Response::decode(answer)) {
            (Ok(req), Ok(resp)) => (req, resp),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(provider = %provider, error = %e, "provider door: an apply call could not be read; terraform's own save records it");
                return;
            }
        };
        let values = (
            dynamic::to_json(req.prior_state.as_ref()),
            dynamic::to_json(req.planned_state.as_ref()),
            dynamic::to_json(resp.new_state.as_ref()),
        );
        let (prior, planned, new_state) = match values {
            (Ok(p), Ok(q), Ok(n)) => (p, q, n),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                tracing::warn!(provider = %provider, type_name = %req.type_name, error = %e, "provider door: an apply call's values could not be read; terraform's own save records it");
                return;
            }
        };
        let Some(planned) =
            self.ledger
                .take(&provider.to_string(), &req.type_name, &prior, &planned)
        else {
            tracing::warn!(provider = %provider, type_name = %req.type_name, "provider door: an apply call fits no planned change; terraform's own save records it");
            return;
        };
        let address = planned.address.clone();
        if resp
            .diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error as i32)
        {
            tracing::info!(address = %address, "provider door: the apply call failed; nothing recorded at its return");
            return;
        }
        let session = self.backend.session();
        let change = if planned.action == Action::Delete || new_state.is_null() {
            Instant::Delete { address }
        } else {
            let held = session.instance_of(&address).await;
            let schema_version = schema
                .version(&req.type_name)
                .or_else(|| {
                    held.as_ref()
                        .and_then(|(_, i)| i["schema_version"].as_u64())
                })
                .unwrap_or(0);
            let instance = provider_return::instance(
                &planned,
                new_state,
                &resp.private,
                schema_version,
                held.as_ref().map(|(_, i)| i),
            );
            let meta = match held {
                Some((meta, _)) if planned.action == Action::Update => meta,
                _ => planned.meta.clone(),
            };
            Instant::Put {
                address,
                meta,
                instance,
                terraform_version: self.ledger.terraform_version().map(str::to_string),
            }
        };
        let address = match &change {
            Instant::Put { address, .. } | Instant::Delete { address } => address.clone(),
        };
        match session.write_instant(change).await {
            Ok(Landed::Refused(conflict)) => {
                tracing::warn!(address = %address, conflict = %conflict, "provider door: the record at return met another run's write; terraform's own save meets it too");
            }
            Ok(landed) => {
                self.backend.note_instant(&address, &landed);
                tracing::info!(address = %address, landed = ?landed, "provider door: recorded at the provider's return");
            }
            Err(e) => {
                tracing::warn!(address = %address, error = %e, "provider door: could not write the record at the provider's return; terraform's own save records it");
            }
        }
    }
}
