//! Terraform's state-store RPCs (tfplugin6, 6.10+) served from records: whole-state bytes in, per-record writes out.

use std::collections::HashMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use tokio::sync::{Mutex, RwLock};
use tonic::{Request, Response, Status, Streaming};

pub mod config;

use self::config::StoreConfig;
use super::proto::tfplugin6 as pb;
use super::proto::tfplugin6::provider_server::Provider;
use crate::engine::layout::{EstateName, Layout};
use crate::engine::program::ProgramStamp;
use crate::engine::session::{EstateDeleted, RunInfo, Session, SessionError};
use crate::engine::state::MAX_STATE_BYTES;
use crate::frontdoor::NO_LOCK;
use crate::store::{self, DynStore, SettingError, WriteGuard, list_all};

/// The state store's type name (the label of `state_store "live_records"`).
pub const STORE_TYPE: &str = "live_records";
/// The workspace that is the estate itself.
pub const DEFAULT_WORKSPACE: &str = "default";
/// The largest chunk this plugin agrees to.
pub const MAX_CHUNK: i64 = 128 << 20;

type ReadStream =
    Pin<Box<dyn Stream<Item = Result<pb::read_state_bytes::Response, Status>> + Send>>;

struct Configured {
    store: DynStore,
    guard: Option<Arc<dyn WriteGuard>>,
    estate: EstateName,
    chunk_size: usize,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

/// The provider: no resources, one state store.
pub struct StateStoreProvider {
    root: PathBuf,
    program: ProgramStamp,
    configured: RwLock<Option<Arc<Configured>>>,
}

impl StateStoreProvider {
    /// A provider whose relative local paths are taken from `root`.
    pub fn new(root: PathBuf) -> Self {
        let program = ProgramStamp::detect(&root);
        StateStoreProvider {
            root,
            program,
            configured: RwLock::new(None),
        }
    }

    async fn configured(&self) -> Result<Arc<Configured>, Vec<pb::Diagnostic>> {
        self.configured.read().await.clone().ok_or_else(|| {
            error(
                "State store not configured",
                "ConfigureStateStore was not called before this call",
            )
        })
    }

    async fn session(
        &self,
        c: &Configured,
        state_id: &str,
    ) -> Result<Arc<Session>, Vec<pb::Diagnostic>> {
        let estate = estate_for(&c.estate, state_id).map_err(|m| {
            error(
                "Invalid workspace name",
                &format!("field `state_id` (the workspace name): {m}; nothing was read or written"),
            )
        })?;
        let mut sessions = c.sessions.lock().await;
        Ok(sessions
            .entry(state_id.to_string())
            .or_insert_with(|| {
                Arc::new(
                    Session::new(
                        c.store.clone(),
                        Layout::new(estate),
                        RunInfo::new(self.program.clone()),
                    )
                    .with_guard(c.guard.clone()),
                )
            })
            .clone())
    }
}

/// The estate a workspace lives in: `default` is the estate; workspace `w` is `<estate>@w`.
pub fn estate_for(estate: &EstateName, state_id: &str) -> Result<EstateName, String> {
    if state_id == DEFAULT_WORKSPACE {
        Ok(estate.clone())
    } else {
        estate.workspace(state_id)
    }
}

fn diag(severity: pb::diagnostic::Severity, summary: &str, detail: &str) -> pb::Diagnostic {
    pb::Diagnostic {
        severity: severity as i32,
        summary: summary.to_string(),
        detail: detail.to_string(),
        attribute: None,
    }
}

fn error(summary: &str, detail: &str) -> Vec<pb::Diagnostic> {
    vec![diag(pb::diagnostic::Severity::Error, summary, detail)]
}

fn session_error(e: &SessionError) -> Vec<pb::Diagnostic> {
    match e {
        SessionError::Conflict(c) => error("Record store write conflict", &c.to_string()),
        SessionError::State(s) => error("Invalid state document", &s.to_string()),
        SessionError::Corrupt(c) => error("Corrupted record", &c.to_string()),
        SessionError::Store(s) if s.unavailable() => {
            error("Record store unavailable", &s.to_string())
        }
        SessionError::Store(s) => error("Record store error", &s.to_string()),
        SessionError::Unchecked(u) => error("Record store safety not checked", &u.to_string()),
        SessionError::Unsafe(u) => error("Unsafe record store", &u.to_string()),
        SessionError::ClockSkew(c) => error("Clock skew", &c.to_string()),
        SessionError::LogEntry(l) => error("Write log entry refused", &l.to_string()),
    }
}

fn attribute(name: &str, ty: &str, required: bool, description: &str) -> pb::schema::Attribute {
    pb::schema::Attribute {
        name: name.to_string(),
        r#type: format!("\"{ty}\"").into_bytes(),
        description: description.to_string(),
        required,
        optional: !required,
        ..Default::default()
    }
}

/// An attribute terraform keeps out of its output and logs.
fn secret(a: pb::schema::Attribute) -> pb::schema::Attribute {
    pb::schema::Attribute {
        sensitive: true,
        ..a
    }
}

/// The state store's schema: the live block's settings as attributes.
pub fn store_schema() -> pb::Schema {
    pb::Schema {
        version: 0,
        block: Some(pb::schema::Block {
            version: 0,
            description:
                "One record per resource in a record store; every write conditional; no lock."
                    .into(),
            attributes: vec![
                attribute(
                    "estate",
                    "string",
                    true,
                    "The estate this root owns, e.g. \"prod-eu\".",
                ),
                attribute(
                    "store",
                    "string",
                    false,
                    "The record store kind: \"local\" (default), \"s3\", \"azurerm\" or \"gcs\".",
                ),
                attribute(
                    "path",
                    "string",
                    false,
                    "local: the records folder (default .live-records).",
                ),
                attribute("bucket", "string", false, "s3, gcs: the bucket."),
                attribute("region", "string", false, "s3: the region."),
                attribute(
                    "endpoint",
                    "string",
                    false,
                    "s3, azurerm, gcs: a custom endpoint (S3-compatible stores, Azurite, sovereign clouds, emulators).",
                ),
                attribute(
                    "use_path_style",
                    "bool",
                    false,
                    "s3: path-style addressing (default true with an endpoint).",
                ),
                attribute(
                    "kms_key_id",
                    "string",
                    false,
                    "s3: a KMS key for server-side encryption (aws:kms); without it records use AES256.",
                ),
                attribute(
                    "skip_bucket_checks",
                    "bool",
                    false,
                    "s3, azurerm, gcs: UNSAFE: skip the store safety check (versioning or soft delete, noncurrent-version expiry, public access) before the first write.",
                ),
                attribute(
                    "storage_account_name",
                    "string",
                    false,
                    "azurerm: the storage account (else from the connection string or AZURE_STORAGE_ACCOUNT_NAME).",
                ),
                attribute(
                    "container_name",
                    "string",
                    false,
                    "azurerm: the blob container.",
                ),
                secret(attribute(
                    "access_key",
                    "string",
                    false,
                    "azurerm: an account key (else the standard Azure credentials).",
                )),
                secret(attribute(
                    "sas_token",
                    "string",
                    false,
                    "azurerm: a SAS token.",
                )),
                secret(attribute(
                    "connection_string",
                    "string",
                    false,
                    "azurerm: a storage connection string.",
                )),
                secret(attribute(
                    "credentials",
                    "string",
                    false,
                    "gcs: a service account key, as a file path or the JSON itself (else the standard Google credentials).",
                )),
                attribute(
                    "skip_credentials",
                    "bool",
                    false,
                    "gcs: send no credentials (emulators only).",
                ),
            ],
            ..Default::default()
        }),
    }
}

fn read_config(
    dv: Option<&pb::DynamicValue>,
    allow_unknown: bool,
) -> Result<Option<StoreConfig>, Vec<pb::Diagnostic>> {
    let empty = pb::DynamicValue::default();
    let invalid = |e: SettingError| {
        let mut d = diag(
            pb::diagnostic::Severity::Error,
            "Invalid state store configuration",
            &e.message,
        );
        d.attribute = e.setting.map(|name| pb::AttributePath {
            steps: vec![pb::attribute_path::Step {
                selector: Some(pb::attribute_path::step::Selector::AttributeName(name)),
            }],
        });
        vec![d]
    };
    let attrs = config::decode(dv.unwrap_or(&empty)).map_err(invalid)?;
    config::interpret(&attrs, allow_unknown).map_err(invalid)
}

fn check_type(type_name: &str) -> Result<(), Vec<pb::Diagnostic>> {
    if type_name == STORE_TYPE {
        Ok(())
    } else {
        Err(error(
            "Unknown state store",
            &format!("this provider has one state store, {STORE_TYPE:?}, not {type_name:?}"),
        ))
    }
}

/// Cut `doc` into read responses of at most `chunk` bytes, ranges inclusive.
pub fn chunks(doc: &[u8], chunk: usize) -> Vec<pb::read_state_bytes::Response> {
    let total = doc.len() as i64;
    doc.chunks(chunk.max(1))
        .scan(0i64, |start, piece| {
            let s = *start;
            *start += piece.len() as i64;
            Some(pb::read_state_bytes::Response {
                bytes: piece.to_vec(),
                total_length: total,
                range: Some(pb::StateRange {
                    start: s,
                    end: s + piece.len() as i64 - 1,
                }),
                diagnostics: vec![],
            })
        })
        .collect()
}

#[tonic::async_trait]
impl Provider for StateStoreProvider {
    async fn get_metadata(
        &self,
        _req: Request<pb::get_metadata::Request>,
    ) -> Result<Response<pb::get_metadata::Response>, Status> {
        Ok(Response::new(pb::get_metadata::Response {
            server_capabilities: Some(pb::ServerCapabilities::default()),
            state_stores: vec![pb::get_metadata::StateStoreMetadata {
                type_name: STORE_TYPE.into(),
            }],
            ..Default::default()
        }))
    }

    async fn get_provider_schema(
        &self,
        _req: Request<pb::get_provider_schema::Request>,
    ) -> Result<Response<pb::get_provider_schema::Response>, Status> {
        Ok(Response::new(pb::get_provider_schema::Response {
            provider: Some(pb::Schema {
                version: 0,
                block: Some(pb::schema::Block::default()),
            }),
            server_capabilities: Some(pb::ServerCapabilities::default()),
            state_store_schemas: [(STORE_TYPE.to_string(), store_schema())]
                .into_iter()
                .collect(),
            ..Default::default()
        }))
    }

    async fn validate_provider_config(
        &self,
        _req: Request<pb::validate_provider_config::Request>,
    ) -> Result<Response<pb::validate_provider_config::Response>, Status> {
        Ok(Response::new(Default::default()))
    }

    async fn configure_provider(
        &self,
        _req: Request<pb::configure_provider::Request>,
    ) -> Result<Response<pb::configure_provider::Response>, Status> {
        Ok(Response::new(Default::default()))
    }

    async fn stop_provider(
        &self,
        _req: Request<pb::stop_provider::Request>,
    ) -> Result<Response<pb::stop_provider::Response>, Status> {
        Ok(Response::new(Default::default()))
    }

    async fn validate_state_store_config(
        &self,
        req: Request<pb::validate_state_store::Request>,
    ) -> Result<Response<pb::validate_state_store::Response>, Status> {
        let req = req.into_inner();
        let diagnostics = check_type(&req.type_name)
            .and_then(|()| read_config(req.config.as_ref(), true).map(|_| ()))
            .err()
            .unwrap_or_default();
        Ok(Response::new(pb::validate_state_store::Response {
            diagnostics,
        }))
    }

    async fn configure_state_store(
        &self,
        req: Request<pb::configure_state_store::Request>,
    ) -> Result<Response<pb::configure_state_store::Response>, Status> {
        let req = req.into_inner();
        let config = match check_type(&req.type_name)
            .and_then(|()| read_config(req.config.as_ref(), false))
        {
            Ok(Some(c)) => c,
            Ok(None) => {
                return Ok(Response::new(pb::configure_state_store::Response {
                    diagnostics: error(
                        "Invalid state store configuration",
                        "some settings are not known yet",
                    ),
                    capabilities: None,
                }));
            }
            Err(diagnostics) => {
                return Ok(Response::new(pb::configure_state_store::Response {
                    diagnostics,
                    capabilities: None,
                }));
            }
        };
        let proposed = req.capabilities.map(|c| c.chunk_size).unwrap_or(0);
        let chunk_size = if proposed > 0 {
            proposed.min(MAX_CHUNK)
        } else {
            8 << 20
        };
        let store = store::open(&config.store, &self.root).await;
        let guard = store::guard_for(&config.store);
        tracing::info!(estate = %config.estate, store = %store.describe(), chunk_size, "state store configured");
        *self.configured.write().await = Some(Arc::new(Configured {
            store,
            guard,
            estate: config.estate,
            chunk_size: chunk_size as usize,
            sessions: Mutex::new(HashMap::new()),
        }));
        Ok(Response::new(pb::configure_state_store::Response {
            diagnostics: vec![],
            capabilities: Some(pb::StateStoreServerCapabilities { chunk_size }),
        }))
    }

    async fn read_state_bytes(
        &self,
        req: Request<pb::read_state_bytes::Request>,
    ) -> Result<Response<ReadStream>, Status> {
        let req = req.into_inner();
        let failed = |diagnostics: Vec<pb::Diagnostic>| -> Result<Response<ReadStream>, Status> {
            let one = pb::read_state_bytes::Response {
                bytes: vec![],
                total_length: 0,
                range: Some(pb::StateRange { start: 0, end: 0 }),
                diagnostics,
            };
            Ok(Response::new(Box::pin(futures::stream::iter(vec![Ok(
                one,
            )]))))
        };
        if let Err(d) = check_type(&req.type_name) {
            return failed(d);
        }
        let c = match self.configured().await {
            Ok(c) => c,
            Err(d) => return failed(d),
        };
        let session = match self.session(&c, &req.state_id).await {
            Ok(s) => s,
            Err(d) => return failed(d),
        };
        if let Err(e) = session.refresh().await {
            return failed(session_error(&e));
        }
        let snapshot = session.snapshot().await;
        if snapshot.estate.is_none() && snapshot.records.is_empty() {
            // No state yet: an empty stream.
            return Ok(Response::new(Box::pin(futures::stream::empty())));
        }
        let doc = session.state_document().await;
        let out: Vec<Result<_, Status>> = chunks(&doc, c.chunk_size).into_iter().map(Ok).collect();
        Ok(Response::new(Box::pin(futures::stream::iter(out))))
    }

    async fn write_state_bytes(
        &self,
        req: Request<Streaming<pb::write_state_bytes::RequestChunk>>,
    ) -> Result<Response<pb::write_state_bytes::Response>, Status> {
        let mut stream = req.into_inner();
        let mut meta = None;
        let mut bytes = Vec::new();
        let mut total = 0i64;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            if meta.is_none() {
                meta = chunk.meta;
            }
            total = total.max(chunk.total_length);
            if bytes.len() + chunk.bytes.len() > MAX_STATE_BYTES {
                return Ok(Response::new(pb::write_state_bytes::Response {
                    diagnostics: error(
                        "State too large",
                        "the state is over the size limit; nothing was written",
                    ),
                }));
            }
            bytes.extend_from_slice(&chunk.bytes);
        }
        let reply = |diagnostics| {
            Ok(Response::new(pb::write_state_bytes::Response {
                diagnostics,
            }))
        };
        let Some(meta) = meta else {
            return reply(error(
                "Invalid state write",
                "the first chunk carried no type and workspace; nothing was written",
            ));
        };
        if total != bytes.len() as i64 {
            return reply(error(
                "Incomplete state write",
                &format!(
                    "received {} of {total} bytes; nothing was written",
                    bytes.len()
                ),
            ));
        }
        if let Err(d) = check_type(&meta.type_name) {
            return reply(d);
        }
        let c = match self.configured().await {
            Ok(c) => c,
            Err(d) => return reply(d),
        };
        let session = match self.session(&c, &meta.state_id).await {
            Ok(s) => s,
            Err(d) => return reply(d),
        };
        match session.write_state(&bytes).await {
            Ok(report) => {
                tracing::info!(
                    created = report.created.len(),
                    updated = report.updated.len(),
                    deleted = report.deleted.len(),
                    unchanged = report.unchanged,
                    conflicts = report.conflicts.len(),
                    "state written as records"
                );
                match report.into_result() {
                    Ok(_) => reply(vec![]),
                    Err(conflict) => reply(session_error(&SessionError::Conflict(conflict))),
                }
            }
            Err(e) => reply(session_error(&e)),
        }
    }

    async fn lock_state(
        &self,
        req: Request<pb::lock_state::Request>,
    ) -> Result<Response<pb::lock_state::Response>, Status> {
        let req = req.into_inner();
        tracing::info!(workspace = %req.state_id, operation = %req.operation, "lock asked for; nothing is held");
        Ok(Response::new(pb::lock_state::Response {
            lock_id: String::new(),
            diagnostics: vec![diag(
                pb::diagnostic::Severity::Warning,
                "No lock taken",
                NO_LOCK,
            )],
        }))
    }

    async fn unlock_state(
        &self,
        _req: Request<pb::unlock_state::Request>,
    ) -> Result<Response<pb::unlock_state::Response>, Status> {
        Ok(Response::new(pb::unlock_state::Response {
            diagnostics: error(
                NO_LOCK,
                "There is no lock to release: a stopped run leaves nothing held. Nothing was changed.",
            ),
        }))
    }

    async fn get_states(
        &self,
        req: Request<pb::get_states::Request>,
    ) -> Result<Response<pb::get_states::Response>, Status> {
        let req = req.into_inner();
        let reply = |state_id, diagnostics| {
            Ok(Response::new(pb::get_states::Response {
                state_id,
                diagnostics,
            }))
        };
        if let Err(d) = check_type(&req.type_name) {
            return reply(vec![], d);
        }
        let c = match self.configured().await {
            Ok(c) => c,
            Err(d) => return reply(vec![], d),
        };
        let prefix = format!("{}{}@", crate::engine::layout::ROOT_PREFIX, c.estate);
        let mut ids = vec![DEFAULT_WORKSPACE.to_string()];
        match list_all(c.store.as_ref(), &prefix).await {
            Ok(keys) => {
                for k in keys {
                    if let Some(ws) = k
                        .key
                        .strip_prefix(&prefix)
                        .and_then(|r| r.strip_suffix("/_estate"))
                    {
                        ids.push(ws.to_string());
                    }
                }
            }
            Err(e) => return reply(vec![], error("Record store error", &e.to_string())),
        }
        ids.sort();
        ids.dedup();
        reply(ids, vec![])
    }

    async fn delete_state(
        &self,
        req: Request<pb::delete_state::Request>,
    ) -> Result<Response<pb::delete_state::Response>, Status> {
        let req = req.into_inner();
        let reply = |diagnostics| Ok(Response::new(pb::delete_state::Response { diagnostics }));
        if let Err(d) = check_type(&req.type_name) {
            return reply(d);
        }
        if req.state_id == DEFAULT_WORKSPACE {
            return reply(error(
                "The default workspace is the estate",
                "choudoufu-live never deletes an estate whole through a state call; destroy its resources instead. Nothing was deleted.",
            ));
        }
        let c = match self.configured().await {
            Ok(c) => c,
            Err(d) => return reply(d),
        };
        let session = match self.session(&c, &req.state_id).await {
            Ok(s) => s,
            Err(d) => return reply(d),
        };
        match session.delete_estate().await {
            Ok(EstateDeleted::Deleted) => {}
            Ok(EstateDeleted::HoldsRecords(n)) => {
                return reply(error(
                    "Workspace still has records",
                    &format!(
                        "workspace {:?} still holds {n} record(s); destroy its resources first. Nothing was deleted.",
                        req.state_id
                    ),
                ));
            }
            Ok(EstateDeleted::Changed) => {
                return reply(error(
                    "Workspace changed",
                    &format!(
                        "another run wrote workspace {:?}'s estate record after this one read it. Nothing was deleted.",
                        req.state_id
                    ),
                ));
            }
            Err(e) => return reply(session_error(&e)),
        }
        c.sessions.lock().await.remove(&req.state_id);
        reply(vec![])
    }
}
