//! The tfplugin6 Provider service: plan, apply, read, import and upgrade of `cdftest_thing`, each call logged.

use std::collections::HashMap;

use tokio::sync::watch;
use tonic::{Request, Response, Status};

use choudoufu_live::frontdoor::plugin::proto::tfplugin6 as pb;
use choudoufu_live::frontdoor::plugin::proto::tfplugin6::provider_server::Provider;

use crate::calls::{CallLog, CallLogError};
use crate::objects::Objects;
use crate::schema::{self, THING};
use crate::thing::{self, Thing, Val};

/// The provider: its call log, its objects, and whether the host asked it to stop.
pub struct Cdftest {
    log: CallLog,
    objects: Objects,
    stop: watch::Sender<bool>,
}

/// The provider could not start.
#[derive(Debug, thiserror::Error)]
#[error("the objects folder {0} does not exist")]
pub struct StartError(String);

impl Cdftest {
    /// The provider as its environment sets it up (`CDFTEST_CALL_LOG`, `CDFTEST_OBJECTS`).
    pub fn from_env() -> Result<Cdftest, StartError> {
        let objects = Objects::from_env();
        if let Some(dir) = std::env::var_os(crate::objects::OBJECTS_ENV).filter(|d| !d.is_empty())
            && !std::path::Path::new(&dir).is_dir()
        {
            return Err(StartError(dir.to_string_lossy().into_owned()));
        }
        Ok(Cdftest {
            log: CallLog::from_env(),
            objects,
            stop: watch::channel(false).0,
        })
    }
}

fn error(summary: &str, detail: String) -> Vec<pb::Diagnostic> {
    vec![pb::Diagnostic {
        severity: pb::diagnostic::Severity::Error as i32,
        summary: summary.to_string(),
        detail,
        attribute: None,
    }]
}

fn unknown_type(type_name: &str) -> Vec<pb::Diagnostic> {
    error(
        "Unknown resource type",
        format!("this provider has one resource type, {THING}, not {type_name:?}"),
    )
}

fn bad_value(what: &str, e: impl std::fmt::Display) -> Vec<pb::Diagnostic> {
    error("Invalid value", format!("{what}: {e}"))
}

fn name_of(t: Option<&Thing>) -> Option<&str> {
    t.and_then(|t| t.name.known()).map(String::as_str)
}

fn log_err(e: CallLogError) -> Status {
    e.into()
}

/// What an apply came to: the new object (none after a delete) or why not.
enum Applied {
    Done(Option<Thing>),
    Failed(Vec<pb::Diagnostic>),
    Stopped,
}

impl Cdftest {
    /// Sleep as `thing` says, unless the host asks the provider to stop first (then false).
    async fn sleep(&self, thing: &Thing) -> bool {
        let Some(d) = thing::sleep_of(thing) else {
            return !*self.stop.borrow();
        };
        let mut stop = self.stop.subscribe();
        tokio::select! {
            () = tokio::time::sleep(d) => true,
            _ = stop.wait_for(|s| *s) => false,
        }
    }

    async fn apply(&self, prior: Option<Thing>, planned: Option<Thing>) -> Applied {
        match (prior, planned) {
            (None, None) => Applied::Done(None),
            (Some(prior), None) => {
                if !self.sleep(&prior).await {
                    return Applied::Stopped;
                }
                if let Some(id) = prior.id.known()
                    && let Err(e) = self.objects.delete(id)
                {
                    return Applied::Failed(error("Delete failed", e.to_string()));
                }
                Applied::Done(None)
            }
            (prior, Some(mut planned)) => {
                if !self.sleep(&planned).await {
                    return Applied::Stopped;
                }
                if planned.fail.known() == Some(&true) {
                    return Applied::Failed(error(
                        "cdftest_thing told to fail",
                        format!(
                            "{} has fail = true, so its {} fails",
                            name_of(Some(&planned)).unwrap_or("(unknown name)"),
                            if prior.is_some() { "update" } else { "create" }
                        ),
                    ));
                }
                if [
                    planned.name == Val::Unknown,
                    planned.value == Val::Unknown,
                    planned.sleep_ms == Val::Unknown,
                    planned.fail == Val::Unknown,
                ]
                .contains(&true)
                {
                    return Applied::Failed(error(
                        "Unknown value at apply",
                        "every configured attribute must be known when it is applied".into(),
                    ));
                }
                let id = match (prior.as_ref().map(|p| &p.id), &planned.id) {
                    (Some(Val::Known(id)), _) | (None, Val::Known(id)) => id.clone(),
                    _ => uuid::Uuid::new_v4().simple().to_string(),
                };
                planned.id = Val::Known(id.clone());
                if let Err(e) = self.objects.put(&id, &planned) {
                    return Applied::Failed(error("Write failed", e.to_string()));
                }
                Applied::Done(Some(planned))
            }
        }
    }
}

#[tonic::async_trait]
impl Provider for Cdftest {
    async fn get_metadata(
        &self,
        _req: Request<pb::get_metadata::Request>,
    ) -> Result<Response<pb::get_metadata::Response>, Status> {
        let call = self.log.start("GetMetadata", None, None).map_err(log_err)?;
        let resp = pb::get_metadata::Response {
            server_capabilities: Some(pb::ServerCapabilities::default()),
            resources: vec![pb::get_metadata::ResourceMetadata {
                type_name: THING.into(),
            }],
            ..Default::default()
        };
        call.end().map_err(log_err)?;
        Ok(Response::new(resp))
    }

    async fn get_provider_schema(
        &self,
        _req: Request<pb::get_provider_schema::Request>,
    ) -> Result<Response<pb::get_provider_schema::Response>, Status> {
        let call = self
            .log
            .start("GetProviderSchema", None, None)
            .map_err(log_err)?;
        let resp = pb::get_provider_schema::Response {
            provider: Some(schema::provider()),
            resource_schemas: HashMap::from([
                (THING.to_string(), schema::thing()),
                (schema::SPARE.to_string(), schema::thing()),
            ]),
            server_capabilities: Some(pb::ServerCapabilities::default()),
            ..Default::default()
        };
        call.end().map_err(log_err)?;
        Ok(Response::new(resp))
    }

    async fn validate_provider_config(
        &self,
        _req: Request<pb::validate_provider_config::Request>,
    ) -> Result<Response<pb::validate_provider_config::Response>, Status> {
        let call = self
            .log
            .start("ValidateProviderConfig", None, None)
            .map_err(log_err)?;
        call.end().map_err(log_err)?;
        Ok(Response::new(Default::default()))
    }

    async fn configure_provider(
        &self,
        _req: Request<pb::configure_provider::Request>,
    ) -> Result<Response<pb::configure_provider::Response>, Status> {
        let call = self
            .log
            .start("ConfigureProvider", None, None)
            .map_err(log_err)?;
        call.end().map_err(log_err)?;
        Ok(Response::new(Default::default()))
    }

    async fn validate_resource_config(
        &self,
        req: Request<pb::validate_resource_config::Request>,
    ) -> Result<Response<pb::validate_resource_config::Response>, Status> {
        let req = req.into_inner();
        let config = thing::decode(req.config.as_ref());
        let name = config.as_ref().ok().and_then(|t| name_of(t.as_ref()));
        let call = self
            .log
            .start("ValidateResourceConfig", Some(&req.type_name), name)
            .map_err(log_err)?;
        let diagnostics = if req.type_name != THING {
            unknown_type(&req.type_name)
        } else {
            match &config {
                Ok(t) => match t.as_ref().and_then(|t| t.sleep_ms.known()) {
                    Some(ms) if !ms.is_finite() || *ms < 0.0 => {
                        bad_value("sleep_ms", "must be a number of milliseconds, 0 or more")
                    }
                    _ => Vec::new(),
                },
                Err(e) => bad_value("config", e),
            }
        };
        call.end().map_err(log_err)?;
        Ok(Response::new(pb::validate_resource_config::Response {
            diagnostics,
        }))
    }

    async fn upgrade_resource_state(
        &self,
        req: Request<pb::upgrade_resource_state::Request>,
    ) -> Result<Response<pb::upgrade_resource_state::Response>, Status> {
        let req = req.into_inner();
        let json = req.raw_state.map(|r| r.json).unwrap_or_default();
        let stored = serde_json::from_slice(&json)
            .map_err(thing::ThingError::from)
            .and_then(|v| thing::from_json(&v));
        let name = stored.as_ref().ok().and_then(|t| name_of(t.as_ref()));
        let call = self
            .log
            .start("UpgradeResourceState", Some(&req.type_name), name)
            .map_err(log_err)?;
        // Version 0 is the only version: the stored JSON is the state, checked and passed on.
        let resp = if req.type_name != THING {
            pb::upgrade_resource_state::Response {
                upgraded_state: None,
                diagnostics: unknown_type(&req.type_name),
            }
        } else {
            match &stored {
                Ok(_) => pb::upgrade_resource_state::Response {
                    upgraded_state: Some(pb::DynamicValue {
                        msgpack: Vec::new(),
                        json,
                    }),
                    diagnostics: Vec::new(),
                },
                Err(e) => pb::upgrade_resource_state::Response {
                    upgraded_state: None,
                    diagnostics: bad_value("stored state", e),
                },
            }
        };
        call.end().map_err(log_err)?;
        Ok(Response::new(resp))
    }

    async fn read_resource(
        &self,
        req: Request<pb::read_resource::Request>,
    ) -> Result<Response<pb::read_resource::Response>, Status> {
        let req = req.into_inner();
        let current = thing::decode(req.current_state.as_ref());
        let name = current.as_ref().ok().and_then(|t| name_of(t.as_ref()));
        let call = self
            .log
            .start("ReadResource", Some(&req.type_name), name)
            .map_err(log_err)?;
        let mut resp = pb::read_resource::Response {
            new_state: req.current_state.clone(),
            private: req.private.clone(),
            ..Default::default()
        };
        if req.type_name != THING {
            resp.diagnostics = unknown_type(&req.type_name);
        } else {
            match &current {
                Err(e) => resp.diagnostics = bad_value("current state", e),
                Ok(current) => {
                    let id = current.as_ref().and_then(|t| t.id.known());
                    if let (Some(id), true) = (id, self.objects.enabled()) {
                        match self.objects.get(id) {
                            Ok(found) => resp.new_state = Some(thing::encode(found.as_ref())),
                            Err(e) => resp.diagnostics = error("Read failed", e.to_string()),
                        }
                    }
                }
            }
        }
        call.end().map_err(log_err)?;
        Ok(Response::new(resp))
    }

    async fn plan_resource_change(
        &self,
        req: Request<pb::plan_resource_change::Request>,
    ) -> Result<Response<pb::plan_resource_change::Response>, Status> {
        let req = req.into_inner();
        let decoded = thing::decode(req.prior_state.as_ref()).and_then(|prior| {
            thing::decode(req.proposed_new_state.as_ref()).map(|proposed| (prior, proposed))
        });
        let name = decoded
            .as_ref()
            .ok()
            .and_then(|(prior, proposed)| name_of(proposed.as_ref()).or(name_of(prior.as_ref())));
        let call = self
            .log
            .start("PlanResourceChange", Some(&req.type_name), name)
            .map_err(log_err)?;
        let mut resp = pb::plan_resource_change::Response::default();
        if req.type_name != THING {
            resp.diagnostics = unknown_type(&req.type_name);
        } else {
            match decoded {
                Err(e) => resp.diagnostics = bad_value("plan", e),
                Ok((prior, proposed)) => {
                    let planned = proposed.map(|mut p| {
                        p.id = match &prior {
                            Some(prior) => prior.id.clone(),
                            None => Val::Unknown,
                        };
                        p
                    });
                    if let (Some(prior), Some(planned)) = (&prior, &planned)
                        && prior.name != planned.name
                    {
                        resp.requires_replace = vec![pb::AttributePath {
                            steps: vec![pb::attribute_path::Step {
                                selector: Some(pb::attribute_path::step::Selector::AttributeName(
                                    "name".into(),
                                )),
                            }],
                        }];
                    }
                    resp.planned_state = Some(thing::encode(planned.as_ref()));
                    resp.planned_private = req.prior_private;
                }
            }
        }
        call.end().map_err(log_err)?;
        Ok(Response::new(resp))
    }

    async fn apply_resource_change(
        &self,
        req: Request<pb::apply_resource_change::Request>,
    ) -> Result<Response<pb::apply_resource_change::Response>, Status> {
        let req = req.into_inner();
        let decoded = thing::decode(req.prior_state.as_ref()).and_then(|prior| {
            thing::decode(req.planned_state.as_ref()).map(|planned| (prior, planned))
        });
        let name = decoded
            .as_ref()
            .ok()
            .and_then(|(prior, planned)| name_of(planned.as_ref()).or(name_of(prior.as_ref())));
        let call = self
            .log
            .start("ApplyResourceChange", Some(&req.type_name), name)
            .map_err(log_err)?;
        let mut resp = pb::apply_resource_change::Response {
            new_state: req.prior_state.clone(),
            private: req.planned_private.clone(),
            ..Default::default()
        };
        if req.type_name != THING {
            resp.diagnostics = unknown_type(&req.type_name);
            call.end().map_err(log_err)?;
            return Ok(Response::new(resp));
        }
        let (prior, planned) = match decoded {
            Ok(p) => p,
            Err(e) => {
                resp.diagnostics = bad_value("apply", e);
                call.end().map_err(log_err)?;
                return Ok(Response::new(resp));
            }
        };
        match self.apply(prior, planned).await {
            Applied::Done(new) => resp.new_state = Some(thing::encode(new.as_ref())),
            Applied::Failed(d) => resp.diagnostics = d,
            Applied::Stopped => {
                resp.diagnostics = error(
                    "Stopped",
                    "the host asked the provider to stop before this apply was done; nothing was changed".into(),
                );
                call.cancelled().map_err(log_err)?;
                return Ok(Response::new(resp));
            }
        }
        call.end().map_err(log_err)?;
        Ok(Response::new(resp))
    }

    async fn import_resource_state(
        &self,
        req: Request<pb::import_resource_state::Request>,
    ) -> Result<Response<pb::import_resource_state::Response>, Status> {
        let req = req.into_inner();
        let mut call = self
            .log
            .start("ImportResourceState", Some(&req.type_name), None)
            .map_err(log_err)?;
        let mut resp = pb::import_resource_state::Response::default();
        if req.type_name != THING {
            resp.diagnostics = unknown_type(&req.type_name);
        } else {
            match self.objects.get(&req.id) {
                Ok(Some(found)) => {
                    call.named(name_of(Some(&found)));
                    resp.imported_resources = vec![pb::import_resource_state::ImportedResource {
                        type_name: THING.into(),
                        state: Some(thing::encode(Some(&found))),
                        ..Default::default()
                    }];
                }
                Ok(None) => {
                    resp.diagnostics = error(
                        "Cannot import non-existent remote object",
                        format!("no cdftest_thing has id {:?}", req.id),
                    );
                }
                Err(e) => resp.diagnostics = error("Import failed", e.to_string()),
            }
        }
        call.end().map_err(log_err)?;
        Ok(Response::new(resp))
    }

    async fn stop_provider(
        &self,
        _req: Request<pb::stop_provider::Request>,
    ) -> Result<Response<pb::stop_provider::Response>, Status> {
        let call = self
            .log
            .start("StopProvider", None, None)
            .map_err(log_err)?;
        self.stop.send_replace(true);
        call.end().map_err(log_err)?;
        Ok(Response::new(pb::stop_provider::Response::default()))
    }
}
