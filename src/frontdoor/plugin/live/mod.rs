//! The choudoufu.live.v1 service: the record-level protocol for the patched tofu, translated to the engine.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use tokio::sync::{Mutex, OnceCell, RwLock};
use tonic::{Request, Response, Status};

pub mod settings;
mod unrecorded;
pub mod validate;
mod wire;

use super::proto::live as pb;
use super::proto::live::live_server::Live;
use crate::cloud::aws::markers as markers_aws;
use crate::engine::claims::{self, Liveness};
use crate::engine::digest::value_digest;
use crate::engine::layout::Layout;
use crate::engine::log_writer::LogWriter;
use crate::engine::markers::{self, Timing};
use crate::engine::plan_stamp::{PlanStamp, UnstampedPlanError};
use crate::engine::program::ProgramStamp;
use crate::engine::read::read_snapshot;
use crate::engine::session::{self, BaseRef, RunInfo, SessionError, Snapshot, initial_lineage};
use crate::engine::write::records::{self as record_writes, Kind, Outcome};
use crate::frontdoor::NO_LOCK;
use crate::store::{self, DynStore, Version, WriteGuard};
use wire::{diag, error, invalid, live_object, provider_config, to_pb};

type EntryStream = Pin<Box<dyn Stream<Item = Result<pb::RecordEntry, Status>> + Send>>;

/// How many store calls one request makes at once.
const PARALLEL: usize = 32;

struct LiveRun {
    store: DynStore,
    store_name: String,
    layout: Layout,
    run: RunInfo,
    log: LogWriter,
    liveness: Arc<Liveness>,
    guard: Option<Arc<dyn WriteGuard>>,
    guard_passed: OnceCell<()>,
    marks: Mutex<HashMap<String, Version>>,
    last_read: Mutex<Option<BTreeMap<String, BaseRef>>>,
}

/// The service: one configured run per plugin process.
pub struct LiveService {
    root: PathBuf,
    run: RwLock<Option<Arc<LiveRun>>>,
}

impl LiveService {
    /// A service whose relative local paths are taken from `root`.
    pub fn new(root: PathBuf) -> Self {
        LiveService {
            root,
            run: RwLock::new(None),
        }
    }

    async fn current(&self) -> Result<Arc<LiveRun>, Status> {
        self.run.read().await.clone().ok_or_else(|| {
            Status::failed_precondition("Configure was not called: the run has no estate yet")
        })
    }
}

#[tonic::async_trait]
impl Live for LiveService {
    async fn configure(
        &self,
        req: Request<pb::ConfigureRequest>,
    ) -> Result<Response<pb::ConfigureResponse>, Status> {
        let req = req.into_inner();
        let fail = |m: String| {
            Ok(Response::new(pb::ConfigureResponse {
                diagnostics: error("Invalid configuration", &m),
                run_id: String::new(),
            }))
        };
        let estate = match validate::configure(&req) {
            Ok(e) => e,
            Err(e) => return fail(e.to_string()),
        };
        let settings = match settings::settings(req.store) {
            Ok(s) => s,
            Err(e) => {
                return fail(match e.setting {
                    Some(name) => format!("field `store.{name}`: {}", e.message),
                    None => format!("field `store`: {}", e.message),
                });
            }
        };
        let store = store::open(&settings, &self.root).await;
        let layout = Layout::new(estate);
        let program = match req.program {
            Some(p) if !p.commit.is_empty() || !p.time.is_empty() => ProgramStamp {
                commit: p.commit,
                time: p.time,
            },
            _ => ProgramStamp::detect(&self.root),
        };
        let run_id = if req.run_id.is_empty() {
            uuid::Uuid::new_v4().to_string()
        } else {
            req.run_id
        };
        let beat = if req.heartbeat_millis == 0 {
            claims::DEFAULT_HEARTBEAT
        } else {
            Duration::from_millis(u64::from(req.heartbeat_millis))
        };
        let liveness = Liveness::start(
            store.clone(),
            layout.clone(),
            &run_id,
            program.clone(),
            beat,
        );
        let guard = store::guard_for(&settings);
        tracing::info!(estate = %layout.estate(), run = %run_id, "choudoufu run configured");
        *self.run.write().await = Some(Arc::new(LiveRun {
            store_name: store.describe(),
            log: LogWriter::new(store.clone(), layout.clone(), &run_id),
            store,
            layout,
            run: RunInfo {
                run_id: run_id.clone(),
                program,
            },
            liveness,
            guard,
            guard_passed: OnceCell::new(),
            marks: Mutex::new(HashMap::new()),
            last_read: Mutex::new(None),
        }));
        Ok(Response::new(pb::ConfigureResponse {
            diagnostics: vec![],
            run_id,
        }))
    }

    async fn read_records(
        &self,
        _req: Request<pb::ReadRecordsRequest>,
    ) -> Result<Response<EntryStream>, Status> {
        let r = self.current().await?;
        let entries = record_writes::read_entries(&r.store, &r.layout, PARALLEL)
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        let marks = claims::read_marks(&r.store, &r.layout)
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        let mut by_address: BTreeMap<String, (claims::Mark, bool)> = marks
            .into_iter()
            .map(|(m, a)| (m.address.clone(), (m, a)))
            .collect();
        let pending_of = |m: &(claims::Mark, bool)| pb::PendingOperation {
            run_id: m.0.run_id.clone(),
            operation: m.0.operation.to_string(),
            since: m.0.since.clone(),
            run_alive: m.1,
        };
        let mut read = BTreeMap::new();
        let mut out = Vec::new();
        for e in entries {
            let key = match e.kind {
                Kind::Resource => r.layout.resource_key(&e.address),
                Kind::Output => r.layout.output_key(&e.address),
                Kind::Provider => r.layout.provider_key(&e.address),
            };
            read.insert(
                key.into_string(),
                BaseRef {
                    address: e.address.clone(),
                    version: e.version.clone(),
                    digest: value_digest(&e.content),
                },
            );
            let pending = if e.kind == Kind::Resource {
                by_address.remove(&e.address)
            } else {
                None
            };
            out.push(Ok(pb::RecordEntry {
                address: e.address,
                kind: match e.kind {
                    Kind::Resource => pb::RecordKind::Resource,
                    Kind::Output => pb::RecordKind::Output,
                    Kind::Provider => pb::RecordKind::Provider,
                } as i32,
                version: Some(to_pb(&e.version)),
                program: Some(pb::ProgramStamp {
                    commit: e.program.commit,
                    time: e.program.time,
                }),
                content: serde_json::to_vec(&e.content).unwrap_or_default(),
                pending: pending.as_ref().map(pending_of),
                pending_only: false,
            }));
        }
        for (address, m) in by_address {
            out.push(Ok(pb::RecordEntry {
                address,
                kind: pb::RecordKind::Resource as i32,
                pending: Some(pending_of(&m)),
                pending_only: true,
                ..Default::default()
            }));
        }
        *r.last_read.lock().await = Some(read);
        Ok(Response::new(Box::pin(futures::stream::iter(out))))
    }

    async fn write_records(
        &self,
        req: Request<pb::WriteRecordsRequest>,
    ) -> Result<Response<pb::WriteRecordsResponse>, Status> {
        let r = self.current().await?;
        let writes = match validate::write_records(req.into_inner()) {
            Ok(writes) => writes,
            Err(e) => {
                return Ok(Response::new(pb::WriteRecordsResponse {
                    results: vec![],
                    diagnostics: invalid(&e),
                }));
            }
        };
        if let Some(guard) = &r.guard
            && let Err(e) = r.guard_passed.get_or_try_init(|| guard.check()).await
        {
            return Ok(Response::new(pb::WriteRecordsResponse {
                results: vec![],
                diagnostics: error(
                    match e {
                        store::GuardError::Unsafe(_) => "Unsafe record store",
                        store::GuardError::Unchecked(_) => "Record store safety not checked",
                    },
                    &e.to_string(),
                ),
            }));
        }
        let kinds: Vec<Kind> = writes.iter().map(|w| w.kind).collect();
        let results = match record_writes::write_records(
            &r.store, &r.layout, &r.run, &r.log, writes, PARALLEL,
        )
        .await
        {
            Ok(results) => results,
            Err(SessionError::ClockSkew(e)) => {
                return Ok(Response::new(pb::WriteRecordsResponse {
                    results: vec![],
                    diagnostics: error("Clock skew", &e.to_string()),
                }));
            }
            Err(e) => return Err(Status::internal(e.to_string())),
        };
        let mut out = Vec::new();
        let mut diagnostics = Vec::new();
        for ((address, outcome), kind) in results.into_iter().zip(kinds) {
            use pb::record_result::Outcome as O;
            let mut res = pb::RecordResult {
                address: address.clone(),
                ..Default::default()
            };
            match outcome {
                Outcome::Written(v) => {
                    crate::telemetry::metrics().records_written("write", 1);
                    res.outcome = O::Written as i32;
                    res.new_version = v.as_ref().map(to_pb);
                    if kind == Kind::Resource {
                        // The record write clears this run's mark.
                        if let Some(mark) = r.marks.lock().await.remove(&address)
                            && let Err(e) =
                                claims::clear_mark(&r.store, &r.layout, &address, &mark).await
                        {
                            tracing::warn!(error = %e, address = %address, "could not clear a pending mark");
                        }
                    }
                }
                Outcome::Conflict(c) => {
                    crate::telemetry::metrics()
                        .conflicts(crate::telemetry::ConflictKind::Record, 1);
                    res.outcome = O::Conflict as i32;
                    res.expected = c.expected.as_ref().map(to_pb);
                    res.stored = c.stored.as_ref().map(to_pb);
                    res.message = format!(
                        "Record store write conflict (RecordConflictError): {c}. Nothing was overwritten."
                    );
                    diagnostics.push(diag(
                        pb::diagnostic::Severity::Error,
                        "Record store write conflict",
                        &res.message,
                        &address,
                    ));
                }
                Outcome::Kept(m) => {
                    res.outcome = O::Kept as i32;
                    diagnostics.push(diag(
                        pb::diagnostic::Severity::Warning,
                        "Resource kept",
                        &m,
                        &address,
                    ));
                    res.message = m;
                }
                Outcome::Refused(m) => {
                    res.outcome = O::Refused as i32;
                    diagnostics.push(diag(
                        pb::diagnostic::Severity::Error,
                        "Record write refused",
                        &m,
                        &address,
                    ));
                    res.message = m;
                }
                Outcome::AlreadyGone => res.outcome = O::AlreadyGone as i32,
            }
            out.push(res);
        }
        Ok(Response::new(pb::WriteRecordsResponse {
            results: out,
            diagnostics,
        }))
    }

    async fn lock(
        &self,
        _req: Request<pb::LockRequest>,
    ) -> Result<Response<pb::LockResponse>, Status> {
        Ok(Response::new(pb::LockResponse {
            diagnostics: error(
                NO_LOCK,
                "There is no lock to take: every record write is conditional. Nothing was held or changed.",
            ),
        }))
    }

    async fn unlock(
        &self,
        _req: Request<pb::UnlockRequest>,
    ) -> Result<Response<pb::UnlockResponse>, Status> {
        Ok(Response::new(pb::UnlockResponse {
            diagnostics: error(
                NO_LOCK,
                "There is no lock to release: a stopped run leaves nothing held. Nothing was changed.",
            ),
        }))
    }

    async fn inject_markers(
        &self,
        req: Request<pb::InjectMarkersRequest>,
    ) -> Result<Response<pb::InjectMarkersResponse>, Status> {
        let r = self.current().await?;
        let req = req.into_inner();
        if let Err(e) = validate::inject_markers(&req) {
            return Ok(Response::new(pb::InjectMarkersResponse {
                diagnostics: invalid(&e),
                ..Default::default()
            }));
        }
        let config: serde_json::Value = serde_json::from_slice(&req.config_json)
            .map_err(|e| Status::invalid_argument(format!("config_json is not JSON: {e}")))?;
        match markers::inject(
            &req.provider,
            &req.resource_type,
            &req.address,
            r.layout.estate().as_str(),
            config,
        ) {
            Ok(inj) => {
                use pb::inject_markers_response::Timing as T;
                let (timing, follow_up) = match inj.timing {
                    Timing::AtCreate => (T::AtCreate, String::new()),
                    Timing::AfterCreate(f) => (T::AfterCreate, f),
                    Timing::NotMarked => (T::NotMarked, String::new()),
                };
                Ok(Response::new(pb::InjectMarkersResponse {
                    config_json: serde_json::to_vec(&inj.config).unwrap_or_default(),
                    timing: timing as i32,
                    follow_up,
                    attribute: inj.attribute.to_string(),
                    diagnostics: vec![],
                }))
            }
            Err(e) => Ok(Response::new(pb::InjectMarkersResponse {
                diagnostics: vec![diag(
                    pb::diagnostic::Severity::Error,
                    "Live marker refused",
                    &e.to_string(),
                    &req.address,
                )],
                ..Default::default()
            })),
        }
    }

    async fn begin_change(
        &self,
        req: Request<pb::BeginChangeRequest>,
    ) -> Result<Response<pb::BeginChangeResponse>, Status> {
        let r = self.current().await?;
        let req = req.into_inner();
        use pb::begin_change_response::Outcome as O;
        let operation = match validate::begin_change(&req).and_then(|()| validate::operation(&req))
        {
            Ok(operation) => operation,
            Err(e) => {
                return Ok(Response::new(pb::BeginChangeResponse {
                    outcome: O::Unspecified as i32,
                    taken_over: vec![],
                    diagnostics: invalid(&e),
                }));
            }
        };
        match claims::begin_change(
            &r.store,
            &r.layout,
            &r.liveness,
            &req.address,
            operation,
            &req.dependencies,
        )
        .await
        {
            Ok(Ok(marked)) => {
                r.marks
                    .lock()
                    .await
                    .insert(req.address.clone(), marked.version);
                let diagnostics = claims::takeover_messages(&marked.taken_over)
                    .into_iter()
                    .map(|m| {
                        diag(
                            pb::diagnostic::Severity::Warning,
                            "Took over a pending operation",
                            &m,
                            &req.address,
                        )
                    })
                    .collect();
                let taken_over = marked
                    .taken_over
                    .into_iter()
                    .map(|t| pb::TakenOver {
                        address: t.address,
                        run_id: t.holder.run_id,
                        operation: t.holder.operation.to_string(),
                        since: t.holder.since,
                    })
                    .collect();
                Ok(Response::new(pb::BeginChangeResponse {
                    outcome: O::Marked as i32,
                    taken_over,
                    diagnostics,
                }))
            }
            Ok(Err(refused)) => {
                crate::telemetry::metrics().conflicts(crate::telemetry::ConflictKind::InFlight, 1);
                Ok(Response::new(pb::BeginChangeResponse {
                    outcome: O::Refused as i32,
                    taken_over: vec![],
                    diagnostics: vec![diag(
                        pb::diagnostic::Severity::Error,
                        refused.name(),
                        &refused.to_string(),
                        &req.address,
                    )],
                }))
            }
            Err(e) => Err(Status::internal(e.to_string())),
        }
    }

    async fn end_run(
        &self,
        _req: Request<pb::EndRunRequest>,
    ) -> Result<Response<pb::EndRunResponse>, Status> {
        let r = self.current().await?;
        let diagnostics = match r.liveness.end().await {
            Ok(()) => vec![],
            Err(e) => error("Could not record the run's end", &e.to_string()),
        };
        Ok(Response::new(pb::EndRunResponse { diagnostics }))
    }

    async fn stamp_plan(
        &self,
        _req: Request<pb::StampPlanRequest>,
    ) -> Result<Response<pb::StampPlanResponse>, Status> {
        let r = self.current().await?;
        let Some(read) = r.last_read.lock().await.clone() else {
            return Ok(Response::new(pb::StampPlanResponse {
                stamp: vec![],
                diagnostics: error(
                    "Nothing read",
                    "call ReadRecords before StampPlan: a stamp names the versions the plan read",
                ),
            }));
        };
        let snapshot = read_snapshot(&r.store, &r.layout, PARALLEL)
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        let lineage = snapshot
            .estate
            .map(|(m, _)| m.lineage)
            .unwrap_or_else(|| initial_lineage(&r.layout));
        let serial = session::serial_of(&lineage, &Snapshot::default());
        let stamp = PlanStamp::new(&r.layout, &r.store_name, b"", (lineage, serial), read);
        Ok(Response::new(pb::StampPlanResponse {
            stamp: serde_json::to_vec(&stamp).unwrap_or_default(),
            diagnostics: vec![],
        }))
    }

    async fn check_plan(
        &self,
        req: Request<pb::CheckPlanRequest>,
    ) -> Result<Response<pb::CheckPlanResponse>, Status> {
        let r = self.current().await?;
        let req = req.into_inner();
        use pb::check_plan_response::Outcome as O;
        if let Err(e) = validate::check_plan(&req) {
            return Ok(Response::new(pb::CheckPlanResponse {
                outcome: O::Unspecified as i32,
                diagnostics: invalid(&e),
            }));
        }
        let refuse = |outcome: O, text: String| {
            crate::telemetry::metrics().conflicts(
                if outcome == O::Moved {
                    crate::telemetry::ConflictKind::PlanMoved
                } else {
                    crate::telemetry::ConflictKind::Unstamped
                },
                1,
            );
            Ok(Response::new(pb::CheckPlanResponse {
                outcome: outcome as i32,
                diagnostics: error("The approved plan no longer matches the live system", &text),
            }))
        };
        let stamp: PlanStamp = match serde_json::from_slice(&req.stamp) {
            Ok(s) => s,
            Err(e) => {
                return refuse(
                    O::Unstamped,
                    UnstampedPlanError {
                        reason: format!("the plan's stamp is missing or unreadable ({e})"),
                    }
                    .to_string(),
                );
            }
        };
        if stamp.estate != r.layout.estate().as_str() || stamp.store != r.store_name {
            return refuse(
                O::Unstamped,
                UnstampedPlanError {
                    reason: format!(
                        "the stamp is for estate {:?} in {}, not estate {:?} in {}",
                        stamp.estate,
                        stamp.store,
                        r.layout.estate().as_str(),
                        r.store_name
                    ),
                }
                .to_string(),
            );
        }
        let mut changes: BTreeSet<String> = req
            .changed_addresses
            .iter()
            .map(|a| r.layout.resource_key(a).into_string())
            .collect();
        changes.extend(
            req.changed_outputs
                .iter()
                .map(|o| r.layout.output_key(o).into_string()),
        );
        let current = read_snapshot(&r.store, &r.layout, PARALLEL)
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        match stamp.check(&changes, &current) {
            Ok(_) => Ok(Response::new(pb::CheckPlanResponse {
                outcome: O::Ok as i32,
                diagnostics: vec![],
            })),
            Err(moved) => refuse(O::Moved, moved.to_string()),
        }
    }

    async fn find_by_markers(
        &self,
        req: Request<pb::FindByMarkersRequest>,
    ) -> Result<Response<pb::FindByMarkersResponse>, Status> {
        let r = self.current().await?;
        let req = req.into_inner();
        use pb::find_by_markers_response::Outcome as O;
        if let Err(e) = validate::find_by_markers(&req) {
            return Ok(Response::new(pb::FindByMarkersResponse {
                outcome: O::NotListed as i32,
                diagnostics: invalid(&e),
                ..Default::default()
            }));
        }
        let estate = r.layout.estate().as_str().to_string();
        let not_listed = |severity, summary: &str, detail: String| {
            Ok(Response::new(pb::FindByMarkersResponse {
                outcome: O::NotListed as i32,
                diagnostics: vec![diag(severity, summary, &detail, &req.address)],
                ..Default::default()
            }))
        };
        if markers::Family::of(&req.provider, &req.resource_type) != Some(markers::Family::Aws) {
            return not_listed(
                pb::diagnostic::Severity::Warning,
                "No marker listing",
                format!(
                    "{}: no live-marker lister is built for this provider family yet (only AWS); nothing was listed",
                    req.address
                ),
            );
        }
        let config = provider_config(&req.provider_config_json);
        let lister = match markers_aws::AwsLister::from_json(&config).await {
            Ok(l) => l,
            Err(e) => {
                return not_listed(
                    pb::diagnostic::Severity::Error,
                    "No marker listing",
                    format!("{}: {e}", req.address),
                );
            }
        };
        let listing = format!(
            "aws: tagging:GetResources ({})",
            markers_aws::type_filter(&req.resource_type).unwrap_or("no type filter")
        );
        let found = match lister
            .with_markers(&estate, &req.resource_type, &req.address)
            .await
        {
            Ok(found) => found,
            Err(e) => {
                return not_listed(
                    pb::diagnostic::Severity::Error,
                    "Marker listing failed",
                    format!("{}: {e}", req.address),
                );
            }
        };
        let objects: Vec<pb::LiveObject> = found.iter().cloned().map(live_object).collect();
        let (outcome, diagnostics) = match markers_aws::decide(&estate, &req.address, found) {
            Ok(None) => (O::NotFound, vec![]),
            Ok(Some(_)) => (O::Bind, vec![]),
            Err(c) => (
                O::Collision,
                vec![diag(
                    pb::diagnostic::Severity::Error,
                    "CollisionError",
                    &c.to_string(),
                    &req.address,
                )],
            ),
        };
        Ok(Response::new(pb::FindByMarkersResponse {
            outcome: outcome as i32,
            objects,
            listing,
            empty_proves_absent: false,
            diagnostics,
        }))
    }

    async fn list_unrecorded(
        &self,
        req: Request<pb::ListUnrecordedRequest>,
    ) -> Result<Response<pb::ListUnrecordedResponse>, Status> {
        let r = self.current().await?;
        unrecorded::list(&r.store, &r.layout, PARALLEL, req.into_inner())
            .await
            .map(Response::new)
    }
}
