//! The per-run HTTP backend: terraform's `backend "http"` protocol served from one run's session.
//!
//! GET assembles the state from the records (and makes what it served the run's base),
//! POST writes the changed records conditionally, DELETE is refused, and LOCK/UNLOCK are
//! answered without holding anything. `run` is the command around it.

pub mod run;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::engine::session::{RecordConflict, Session, SessionError, WriteReport};
use crate::engine::state::MAX_STATE_BYTES;
use crate::frontdoor::NO_LOCK;

/// What the run's writes did, over all of terraform's POSTs.
#[derive(Clone, Debug, Default)]
pub struct RunSummary {
    /// State reads served.
    pub reads: usize,
    /// State writes received.
    pub writes: usize,
    /// Addresses created.
    pub created: BTreeSet<String>,
    /// Addresses updated.
    pub updated: BTreeSet<String>,
    /// Addresses deleted.
    pub deleted: BTreeSet<String>,
    /// Records unchanged by the last write.
    pub unchanged: usize,
    /// Records a saved plan does not change, skipped because another run moved them.
    pub skipped: BTreeSet<String>,
    /// Named conflicts, the latest per address.
    pub conflicts: BTreeMap<String, RecordConflict>,
    /// Other errors, as told to terraform.
    pub errors: Vec<String>,
}

impl RunSummary {
    fn absorb(&mut self, report: &WriteReport) {
        self.writes += 1;
        self.created.extend(report.created.iter().cloned());
        self.updated.extend(report.updated.iter().cloned());
        self.deleted.extend(report.deleted.iter().cloned());
        self.deleted.extend(report.already_gone.iter().cloned());
        self.unchanged = report.unchanged;
        self.skipped.extend(report.skipped.iter().cloned());
        for c in &report.conflicts {
            self.conflicts.insert(c.address.clone(), c.clone());
        }
    }
}

/// One run's backend: its session and what it has done.
#[derive(Debug)]
pub struct Backend {
    session: Session,
    summary: Mutex<RunSummary>,
}

impl Backend {
    /// A backend serving `session`.
    pub fn new(session: Session) -> Arc<Self> {
        Arc::new(Backend {
            session,
            summary: Mutex::new(RunSummary::default()),
        })
    }

    /// The session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// A copy of the summary so far.
    pub fn summary(&self) -> RunSummary {
        self.summary.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn note(&self, f: impl FnOnce(&mut RunSummary)) {
        if let Ok(mut s) = self.summary.lock() {
            f(&mut s);
        }
    }
}

/// A running server: its address and how to stop it.
pub struct Server {
    /// The loopback address it listens on.
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Server {
    /// The state URL to give terraform as `TF_HTTP_ADDRESS`.
    pub fn state_url(&self) -> String {
        format!("http://{}/state", self.addr)
    }

    /// Stop serving and wait for in-flight requests.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.task.await;
    }
}

/// Serve `backend` on a free loopback port.
pub async fn serve(backend: Arc<Backend>) -> std::io::Result<Server> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    // Requests are served on tasks of their own: their spans belong to the run that serves them.
    let run_span = tracing::Span::current();
    let app = Router::new()
        .route("/state", any(handle))
        .layer(DefaultBodyLimit::max(MAX_STATE_BYTES))
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                trace_request(run_span.clone(), req, next)
            },
        ))
        .with_state(backend);
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the state server stopped");
        }
    });
    Ok(Server {
        addr,
        stop: Some(stop),
        task,
    })
}

fn text(status: StatusCode, body: String) -> Response {
    (
        status,
        [("content-type", "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

async fn handle(State(backend): State<Arc<Backend>>, method: Method, body: Bytes) -> Response {
    match method.as_str() {
        "GET" => get(&backend).await,
        "POST" => post(&backend, &body).await,
        "LOCK" | "UNLOCK" => {
            tracing::info!(method = %method, "lock request answered; nothing is held");
            text(StatusCode::OK, format!("{NO_LOCK}\n"))
        }
        "DELETE" => text(
            StatusCode::METHOD_NOT_ALLOWED,
            "choudoufu-live never deletes an estate whole through a state call; nothing was deleted\n"
                .into(),
        ),
        other => text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {other} is not part of the HTTP state protocol\n"),
        ),
    }
}

async fn get(backend: &Backend) -> Response {
    match backend.session.refresh().await {
        Ok(()) => {
            backend.note(|s| s.reads += 1);
            let doc = backend.session.state_document().await;
            (StatusCode::OK, [("content-type", "application/json")], doc).into_response()
        }
        Err(e) => {
            let msg = e.to_string();
            backend.note(|s| s.errors.push(msg.clone()));
            text(StatusCode::INTERNAL_SERVER_ERROR, format!("{msg}\n"))
        }
    }
}

async fn post(backend: &Backend, body: &[u8]) -> Response {
    match backend.session.write_state(body).await {
        Ok(report) => {
            backend.note(|s| s.absorb(&report));
            match report.into_result() {
                Ok(_) => StatusCode::OK.into_response(),
                Err(conflict) => text(StatusCode::CONFLICT, format!("{conflict}\n")),
            }
        }
        Err(e) => {
            let msg = e.to_string();
            backend.note(|s| s.errors.push(msg.clone()));
            let status = match e {
                SessionError::State(_) => StatusCode::BAD_REQUEST,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            text(status, format!("{msg}\n"))
        }
    }
}

/// One span per state request: its method and status, never its body.
async fn trace_request(
    parent: tracing::Span,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    use tracing::Instrument;
    let span = tracing::info_span!(
        parent: &parent,
        "http.request",
        http.request.method = %req.method(),
        http.route = %req.uri().path(),
        http.request.body.size = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    if let Some(len) = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
    {
        span.record("http.request.body.size", len);
    }
    let response = next.run(req).instrument(span.clone()).await;
    let status = response.status();
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    response
}
