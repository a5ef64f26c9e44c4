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

use super::dynamic;
use super::lockfile::ProviderAddress;
use super::marking::{self, Marking};
use super::proto::tfplugin5::apply_resource_change::{Request, Response};
use super::proto::tfplugin5::diagnostic::Severity;
use super::schema_cache::SchemaCache;
use crate::cut::{Mechanism, cut};
use crate::engine::operation::Operation;
use crate::engine::plan::Plan;
use crate::engine::provider_return::{self, Ledger, Planned, Unmatched};
use crate::engine::session::{Instant, Landed};
use crate::frontdoor::http::Backend;

/// The gRPC paths of the apply call, in protocols 5 and 6.
const APPLY_PATHS: &[&str] = &[
    "/tfplugin5.Provider/ApplyResourceChange",
    "/tfplugin6.Provider/ApplyResourceChange",
];

/// The apply call's fields the door marks, and the answer's it strips (tfplugin5 and 6 number them alike).
const PLANNED_STATE: u32 = 3;
const CONFIG: u32 = 4;
const NEW_STATE: u32 = 1;

/// Whether `path` is the apply call.
pub fn is_apply_call(path: &str) -> bool {
    APPLY_PATHS.contains(&path)
}

/// What one apply of a plan records at each provider return: the plan's open changes, the session to write in, and the estate whose markers creates carry.
pub struct Recorder {
    backend: Arc<Backend>,
    ledger: Ledger,
    marking: Option<Marking>,
    /// Every plugin that died with an apply call of this apply in flight.
    crashes: std::sync::Mutex<Vec<Crash>>,
}

/// A provider plugin that died while an apply call was in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Crash {
    /// The provider, e.g. `registry.terraform.io/hashicorp/aws`.
    pub provider: String,
    /// The instance whose call was in flight (none: the door could not read which).
    pub address: Option<String>,
    /// How the plugin died, e.g. `killed by signal 9 (SIGKILL)`.
    pub how: String,
}

/// An apply call on its way to the provider: the change it is for, and whether the door marked it.
pub struct Outgoing {
    call: Option<Call>,
    /// The request as the provider gets it, when the door changed it.
    pub request: Option<Vec<u8>>,
}

/// One apply call the recorder read.
struct Call {
    type_name: String,
    planned: Planned,
    marked: Option<marking::Marked>,
}

impl Recorder {
    /// A recorder for the plan `plan`, writing in `backend`'s session; with `marking`, each create of a marked provider carries the markers.
    pub fn new(backend: Arc<Backend>, plan: &Plan, marking: Option<Marking>) -> Arc<Recorder> {
        Arc::new(Recorder {
            backend,
            ledger: Ledger::from_plan(plan),
            marking,
            crashes: std::sync::Mutex::default(),
        })
    }

    /// The plugin of `provider` died (`how`) while `outgoing` was in flight: its call never returned.
    pub fn crashed(&self, provider: &ProviderAddress, outgoing: Option<&Outgoing>, how: String) {
        let address = outgoing
            .and_then(|o| o.call.as_ref())
            .map(|c| c.planned.address.clone());
        tracing::info!(provider = %provider, address = address.as_deref().unwrap_or("?"), "provider door: the provider plugin died ({how}) with an apply call in flight");
        if let Ok(mut crashes) = self.crashes.lock() {
            crashes.push(Crash {
                provider: provider.to_string(),
                address,
                how,
            });
        }
    }

    /// Every plugin that died with an apply call in flight, in the order seen.
    pub fn crashes(&self) -> Vec<Crash> {
        self.crashes.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// How many of the plan's changes no provider call has returned for yet.
    pub fn open(&self) -> usize {
        self.ledger.open()
    }

    /// An apply call of `provider` goes out (`request` unframed): find its planned change, and give a create its markers.
    pub fn called(&self, provider: &ProviderAddress, request: &[u8]) -> Outgoing {
        let none = Outgoing {
            call: None,
            request: None,
        };
        let req = match Request::decode(request) {
            Ok(req) => req,
            Err(e) => {
                tracing::warn!(provider = %provider, error = %e, "provider door: an apply call could not be read; terraform's own save records it");
                return none;
            }
        };
        let (prior, planned, planned_unknown) = match (
            dynamic::to_json(req.prior_state.as_ref()),
            dynamic::to_json_and_unknowns(req.planned_state.as_ref()),
        ) {
            (Ok(p), Ok((q, u))) => (p, q, u),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(provider = %provider, type_name = %req.type_name, error = %e, "provider door: an apply call's values could not be read; terraform's own save records it");
                return none;
            }
        };
        let planned = match self.ledger.take(
            &provider.to_string(),
            &req.type_name,
            &prior,
            &planned,
            &planned_unknown,
        ) {
            Ok(planned) => planned,
            Err(why @ Unmatched::Ambiguous(_)) => {
                tracing::warn!(provider = %provider, type_name = %req.type_name, "provider door: an apply call of {}: {why}; it goes without live markers, and terraform's own save records it", req.type_name);
                return none;
            }
            Err(why) => {
                tracing::warn!(provider = %provider, type_name = %req.type_name, "provider door: an apply call of {}: {why}; terraform's own save records it", req.type_name);
                return none;
            }
        };
        let mut call = Call {
            type_name: req.type_name.clone(),
            planned,
            marked: None,
        };
        let mut rewritten = None;
        if let Some(marking) = &self.marking
            && call.planned.action == Operation::Create
            && marking::marks(&provider.to_string())
            && !cut(Mechanism::CreateMarkers)
        {
            let markers = marking.markers(&call.planned.address);
            // What the planned `tags` was before the markers joined it: the answer gets it back.
            let tags_were = std::cell::Cell::new(None);
            let mark_planned = |v: &mut rmpv::Value| {
                let was_null = marking::tags_null(v);
                let changed = marking::mark(v, &markers)?;
                if changed {
                    tags_were.set(Some(if was_null {
                        marking::Marked::NullTags
                    } else {
                        marking::Marked::Tags
                    }));
                }
                Ok(changed)
            };
            let mark = |v: &mut rmpv::Value| marking::mark(v, &markers);
            let marked =
                marking::rewrite_message(request, PLANNED_STATE, mark_planned).and_then(|m| {
                    m.map(|planned| {
                        marking::rewrite_message(&planned, CONFIG, mark)
                            .map(|config| config.unwrap_or(planned))
                    })
                    .transpose()
                });
            match marked {
                Ok(Some(message)) => {
                    call.marked = Some(tags_were.get().unwrap_or(marking::Marked::Tags));
                    rewritten = Some(message);
                    tracing::info!(address = %call.planned.address, "provider door: the create carries its live markers");
                }
                Ok(None) => {
                    tracing::info!(address = %call.planned.address, type_name = %call.type_name, "provider door: the create has no tags to carry the live markers");
                }
                Err(e) => {
                    tracing::warn!(address = %call.planned.address, error = %e, "provider door: the create's tags could not be read; it goes unmarked");
                }
            }
        }
        Outgoing {
            call: Some(call),
            request: rewritten,
        }
    }

    /// The apply call `outgoing` returned `answer` (unframed): the markers taken out again, and its record written; the answer terraform gets when the door changed it.
    pub async fn returned(
        &self,
        schema: &SchemaCache,
        outgoing: Outgoing,
        answer: &[u8],
    ) -> Option<Vec<u8>> {
        let call = outgoing.call?;
        self.ledger.returned(&call.planned);
        let mut rewritten = None;
        if let Some(was) = call.marked
            && !cut(Mechanism::MarkerStrip)
        {
            let null_tags = was == marking::Marked::NullTags && !cut(Mechanism::NullTags);
            match marking::rewrite_message(answer, NEW_STATE, |v| marking::strip(v, null_tags)) {
                Ok(stripped) => {
                    if stripped.is_some() {
                        tracing::info!(address = %call.planned.address, "provider door: took the live markers out of the answer");
                    }
                    rewritten = stripped;
                }
                Err(e) => {
                    tracing::warn!(address = %call.planned.address, error = %e, "provider door: the new state's tags could not be read");
                }
            }
        }
        // The answer terraform gets is the one recorded: the stripped one when the door changed it.
        let resp = match Response::decode(rewritten.as_deref().unwrap_or(answer)) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(address = %call.planned.address, error = %e, "provider door: an apply answer could not be read; terraform's own save records it");
                return None;
            }
        };
        self.record(schema, call, &resp).await;
        rewritten
    }

    /// Write the record of `call`'s answer `resp` (nothing when its schema version is not known).
    async fn record(&self, schema: &SchemaCache, call: Call, resp: &Response) {
        let Call {
            type_name, planned, ..
        } = call;
        let new_state = match dynamic::to_json(resp.new_state.as_ref()) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(address = %planned.address, error = %e, "provider door: an apply call's values could not be read; terraform's own save records it");
                return;
            }
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
        let change = if planned.action == Operation::Delete || new_state.is_null() {
            Instant::Delete {
                address: address.clone(),
            }
        } else {
            let held = session.instance_of(&address).await;
            let Some(schema_version) =
                schema_version(schema.version(&type_name), held.as_ref().map(|(_, i)| i))
            else {
                // Never a guessed 0: the next plan would upgrade the record from a version it is not.
                tracing::warn!(address = %address, type_name = %type_name, "provider door: the resource type's schema version is not known; nothing recorded at its return; terraform's own save records it");
                return;
            };
            let instance = provider_return::instance(
                &planned,
                new_state,
                &resp.private,
                schema_version,
                held.as_ref().map(|(_, i)| i),
            );
            let meta = match held {
                Some((meta, _)) if planned.action == Operation::Update => meta,
                _ => planned.meta.clone(),
            };
            Instant::Put {
                address: address.clone(),
                meta,
                instance,
                terraform_version: self.ledger.terraform_version().map(str::to_string),
            }
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

/// The schema version to record an object under: the provider's schema's, else the one its
/// record already holds; `None` when neither says (a record is never written under a guess).
fn schema_version(from_schema: Option<u64>, held: Option<&serde_json::Value>) -> Option<u64> {
    from_schema.or_else(|| held.and_then(|i| i["schema_version"].as_u64()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_schema_version_is_never_guessed() {
        let held = serde_json::json!({"schema_version": 2});
        assert_eq!(super::schema_version(Some(1), Some(&held)), Some(1));
        assert_eq!(super::schema_version(None, Some(&held)), Some(2));
        assert_eq!(
            super::schema_version(None, Some(&serde_json::json!({}))),
            None
        );
        assert_eq!(super::schema_version(None, None), None);
    }
}
