//! The per-run HTTP backend: terraform's `backend "http"` protocol served from one run's session.
//!
//! Every request must carry the run's own credentials (basic auth with a fresh random
//! password, handed to terraform as `TF_HTTP_USERNAME`/`TF_HTTP_PASSWORD`); any other is
//! refused with 401 before its body is read. GET assembles the state from the records (and
//! makes what it served the run's base), POST writes the changed records conditionally,
//! DELETE is refused, and LOCK/UNLOCK are answered without holding anything. The `run`
//! module is the command around it.

mod push;
mod refused_body;

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use base64::Engine;
use futures::StreamExt;
use rand::TryRngCore;
use rand::rngs::OsRng;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::cut::{Mechanism, cut};
use crate::engine::session::{Landed, Session, SessionError, WriteReport};
use crate::engine::state::MAX_STATE_BYTES;
use crate::frontdoor::NO_LOCK;
use crate::telemetry;

/// The user name a run's terraform sends; the password is what makes a request this run's.
pub const USERNAME: &str = "choudoufu-live";
/// Bytes of operating-system randomness in a run's password (256 bits).
const SECRET_BYTES: usize = 32;

/// One run's credentials for its state server: [`USERNAME`] and a fresh random password.
#[derive(Clone)]
pub struct Credentials {
    password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credentials { username: \"choudoufu-live\", password: (redacted) }")
    }
}

/// Why a request was refused with 401.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No `Authorization` header.
    NoCredentials,
    /// An `Authorization` header with other credentials, or not basic auth.
    WrongCredentials,
}

impl Refusal {
    /// The `reason` attribute of the metric.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::NoCredentials => "no_credentials",
            Refusal::WrongCredentials => "wrong_credentials",
        }
    }
}

impl Credentials {
    /// Fresh credentials: a password of 256 bits from the operating system's random source.
    pub fn generate() -> std::io::Result<Self> {
        let mut bytes = [0u8; SECRET_BYTES];
        OsRng.try_fill_bytes(&mut bytes).map_err(|e| {
            std::io::Error::other(format!(
                "no randomness from the operating system for the run's credentials: {e}"
            ))
        })?;
        Ok(Credentials {
            password: hex::encode(bytes),
        })
    }

    /// The secret itself, for a door whose protocol signs with it (the S3 door's SigV4).
    pub fn secret(&self) -> &str {
        &self.password
    }

    /// Whether an `Authorization` header carries exactly these credentials (compared in constant time).
    pub fn check(&self, authorization: Option<&HeaderValue>) -> Result<(), Refusal> {
        let Some(value) = authorization else {
            return Err(Refusal::NoCredentials);
        };
        let given = value
            .to_str()
            .ok()
            .and_then(|v| v.trim().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
            .and_then(|(_, b64)| {
                base64::engine::general_purpose::STANDARD
                    .decode(b64.trim())
                    .ok()
            })
            .unwrap_or_default();
        let expected = format!("{USERNAME}:{}", self.password);
        if bool::from(given.as_slice().ct_eq(expected.as_bytes())) {
            Ok(())
        } else {
            Err(Refusal::WrongCredentials)
        }
    }
}

/// What a run's doors served, told as it happens to the run's [`Tally`].
#[derive(Clone, Copy, Debug)]
pub enum Served<'a> {
    /// A state read.
    Read,
    /// A state write, with what it did to each record.
    Wrote(&'a WriteReport),
    /// A record the provider door wrote at a provider's return.
    Recorded {
        /// The resource instance.
        address: &'a str,
        /// What the write did.
        landed: &'a Landed,
    },
    /// An error told to terraform.
    Failed(&'a str),
    /// A request refused with 401: it did not carry the run's credentials.
    Unauthorized,
}

/// Who keeps the account of what a backend served: the run's summary.
pub trait Tally: Send + Sync + fmt::Debug {
    /// Count `what`.
    fn served(&self, what: Served<'_>);
}

/// A tally that keeps nothing: a backend served outside a run.
#[derive(Debug)]
pub struct NoTally;

impl Tally for NoTally {
    fn served(&self, _: Served<'_>) {}
}

/// Whether terraform's state requests are answered now, or wait for the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Answered as they come.
    Open,
    /// Held until the run opens or shuts the gate (an apply started before its plan's changes are claimed).
    Held,
    /// Refused: the process that asks is about to be stopped, and nothing of it may go on.
    Shut,
}

/// One run's backend: its session, and the tally it tells what it served.
#[derive(Debug)]
pub struct Backend {
    session: Session,
    tally: Arc<dyn Tally>,
    max_body: usize,
    push_guard: AtomicBool,
    gate: tokio::sync::watch::Sender<Gate>,
}

impl Backend {
    /// A backend serving `session`, telling `tally` what it served.
    pub fn new(session: Session, tally: Arc<dyn Tally>) -> Arc<Self> {
        Self::with_max_body(session, tally, MAX_STATE_BYTES)
    }

    /// A backend serving `session` that refuses state documents over `max_body` bytes.
    pub fn with_max_body(session: Session, tally: Arc<dyn Tally>, max_body: usize) -> Arc<Self> {
        Arc::new(Backend {
            session,
            tally,
            max_body,
            push_guard: AtomicBool::new(false),
            gate: tokio::sync::watch::Sender::new(Gate::Open),
        })
    }

    /// From now on, terraform's state requests wait at `gate` (held), are answered (open) or refused (shut).
    pub fn set_gate(&self, gate: Gate) {
        if gate == Gate::Held && cut(Mechanism::ApplyGate) {
            return;
        }
        self.gate.send_replace(gate);
    }

    /// Wait while the gate is held; the refusal to give terraform once it is shut.
    async fn through_gate(&self) -> Result<(), String> {
        let mut gate = self.gate.subscribe();
        match gate.wait_for(|g| *g != Gate::Held).await.map(|g| *g) {
            Ok(Gate::Open) => Ok(()),
            _ => Err("this terraform process was stopped before it read the state: nothing was applied and nothing was written".to_string()),
        }
    }

    /// The session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Tell the tally of one record the provider door wrote at a provider's return.
    pub fn note_instant(&self, address: &str, landed: &Landed) {
        self.note(Served::Recorded { address, landed });
    }

    /// Refuse a state write not made from the state served just before it ([`push`]): for `terraform state push` without `-force`.
    pub fn guard_push(&self) {
        self.push_guard.store(true, Ordering::Relaxed);
    }

    fn note(&self, what: Served<'_>) {
        self.tally.served(what);
    }

    /// Tell the tally of a request refused for its credentials (at any door).
    pub fn note_unauthorized(&self) {
        self.note(Served::Unauthorized);
    }

    /// The largest state document this backend takes, in bytes.
    pub fn max_body(&self) -> usize {
        if cut(Mechanism::BodyLimit) {
            usize::MAX
        } else {
            self.max_body
        }
    }

    /// Read the estate again and assemble its state document (it becomes the session's base); the error's message is what to tell terraform.
    pub async fn read_document(&self) -> Result<Vec<u8>, String> {
        self.through_gate().await?;
        match self.session.refresh_for_request().await {
            Ok(()) => {
                self.note(Served::Read);
                Ok(self.session.state_document().await)
            }
            Err(e) => {
                let msg = e.to_string();
                self.note(Served::Failed(&msg));
                Err(msg)
            }
        }
    }

    /// Write a state document terraform sent as records: the push guard first, then each changed record conditionally.
    pub async fn write_document(&self, body: &[u8]) -> Result<(), Refused> {
        if self.push_guard.load(Ordering::Relaxed) && !cut(Mechanism::PushGuard) {
            let served = if self.session.snapshot().await.records.is_empty() {
                None
            } else {
                self.session.served().await.map(|(_, serial)| serial)
            };
            if let Err(e) = push::check(push::serial_of(body), served) {
                return Err(self.refused(WriteRefusal::Conflict, e.to_string()));
            }
        }
        match self.session.write_state(body).await {
            Ok(report) => {
                self.note(Served::Wrote(&report));
                report.into_result().map(drop).map_err(|conflict| Refused {
                    kind: WriteRefusal::Conflict,
                    message: conflict.to_string(),
                })
            }
            Err(e) => {
                let kind = match e {
                    SessionError::State(_) => WriteRefusal::BadDocument,
                    _ => WriteRefusal::Failed,
                };
                Err(self.refused(kind, e.to_string()))
            }
        }
    }

    /// A refusal told to the tally and to terraform.
    pub fn refused(&self, kind: WriteRefusal, message: String) -> Refused {
        self.note(Served::Failed(&message));
        Refused { kind, message }
    }
}

/// Why a state write was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteRefusal {
    /// A record conflict, or a push not made from the state served.
    Conflict,
    /// The document is not a state document, or is too large.
    BadDocument,
    /// The store or the session failed.
    Failed,
}

/// A state write refused: why, and the message for terraform.
#[derive(Clone, Debug)]
pub struct Refused {
    /// Why.
    pub kind: WriteRefusal,
    /// What to tell terraform.
    pub message: String,
}

/// A running server: its address, the credentials it lets in, and how to stop it.
pub struct Server {
    /// The loopback address it listens on.
    pub addr: SocketAddr,
    credentials: Arc<Credentials>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

/// The lock address variables `run` points at its own server when the user set them.
const LOCK_VARS: [&str; 2] = ["TF_HTTP_LOCK_ADDRESS", "TF_HTTP_UNLOCK_ADDRESS"];

impl Server {
    /// The state URL to give terraform as `TF_HTTP_ADDRESS`.
    pub fn state_url(&self) -> String {
        format!("http://{}/state", self.addr)
    }

    /// Every variable terraform needs to reach this server: its address and the run's credentials.
    ///
    /// `TF_HTTP_USERNAME`/`TF_HTTP_PASSWORD` override any the user's environment carries;
    /// lock addresses the user set are pointed at this server, which holds nothing.
    pub fn terraform_env(&self) -> Vec<(&'static str, String)> {
        let url = self.state_url();
        let mut env = vec![
            ("TF_HTTP_ADDRESS", url.clone()),
            ("TF_HTTP_USERNAME", USERNAME.to_string()),
            ("TF_HTTP_PASSWORD", self.credentials.password.clone()),
        ];
        for var in LOCK_VARS {
            if std::env::var_os(var).is_some() {
                env.push((var, url.clone()));
            }
        }
        env
    }

    /// Stop serving and wait for in-flight requests.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.task.await;
    }
}

/// Serve `backend` on a free loopback port, to requests with fresh per-run credentials only.
pub async fn serve(backend: Arc<Backend>) -> std::io::Result<Server> {
    let credentials = Arc::new(Credentials::generate()?);
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    // Requests are served on tasks of their own: their spans belong to the run that serves them.
    let run_span = tracing::Span::current();
    let gate = (backend.clone(), credentials.clone());
    let app = Router::new()
        .route("/state", any(handle))
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let (backend, credentials) = gate.clone();
                async move { authorize(&backend, &credentials, req, next).await }
            },
        ))
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
        credentials,
        stop: Some(stop),
        task,
    })
}

/// Let a request through only with this run's credentials; refuse any other before its body is read.
async fn authorize(
    backend: &Backend,
    credentials: &Credentials,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let checked = credentials.check(req.headers().get(header::AUTHORIZATION));
    let refusal = match checked {
        Ok(()) => return next.run(req).await,
        Err(_) if cut(Mechanism::RunCredentials) => return next.run(req).await,
        Err(refusal) => refusal,
    };
    // Nothing of the request is used: its body is dropped unread.
    let method = req.method().clone();
    drop(req);
    backend.note(Served::Unauthorized);
    telemetry::metrics().unauthorized(refusal.as_str());
    tracing::warn!(
        method = %method,
        reason = refusal.as_str(),
        "refused a state request without this run's credentials; nothing was read or written"
    );
    let why = match refusal {
        Refusal::NoCredentials => "it carried no credentials",
        Refusal::WrongCredentials => "its credentials are not this run's",
    };
    let mut response = text(
        StatusCode::UNAUTHORIZED,
        format!(
            "401 Unauthorized: this state server answers only the terraform that `choudoufu-live run` started, which sends the run's own credentials (TF_HTTP_USERNAME and TF_HTTP_PASSWORD, fresh for each run); {why}. Nothing was read or written.\n"
        ),
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"choudoufu-live run\", charset=\"UTF-8\""),
    );
    response
}

fn text(status: StatusCode, body: String) -> Response {
    (
        status,
        [("content-type", "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

async fn handle(
    State(backend): State<Arc<Backend>>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match method.as_str() {
        "GET" => get(&backend).await,
        "POST" => match read_body(&backend, &headers, body).await {
            Ok(bytes) => post(&backend, &bytes).await,
            Err(refused) => refused,
        },
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
    match backend.read_document().await {
        Ok(doc) => (StatusCode::OK, [("content-type", "application/json")], doc).into_response(),
        Err(msg) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{msg}\n")),
    }
}

/// The request body, or the answer refusing it: over the limit (413), or cut short (400).
///
/// A body over the limit but under twice it is read to its end and thrown away before the
/// answer, so the client, still writing, is not cut off and hears why; a declared length
/// beyond that is answered before a byte of the body is read.
async fn read_body(
    backend: &Backend,
    headers: &HeaderMap,
    body: Body,
) -> Result<Vec<u8>, Response> {
    let limit = if cut(Mechanism::BodyLimit) {
        usize::MAX
    } else {
        backend.max_body
    };
    let refuse = |status: StatusCode, msg: String| {
        backend.note(Served::Failed(&msg));
        text(status, format!("{msg}\n"))
    };
    let too_large = |size: String| {
        refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "state document of {size} is over the {limit}-byte limit of this state server; nothing was written"
            ),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut stream = body.into_data_stream();
    if let Some(len) = declared
        && len > limit as u64
    {
        if refused_body::worth_draining(len, limit) {
            refused_body::discard(&mut stream, refused_body::drain_cap(limit)).await;
        }
        return Err(too_large(format!("{len} bytes")));
    }
    let mut bytes = Vec::with_capacity(declared.map_or(0, |n| n.min(1 << 20) as usize));
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(chunk) if bytes.len() + chunk.len() > limit => {
                let read = (bytes.len() + chunk.len()) as u64;
                drop(bytes);
                refused_body::discard(
                    &mut stream,
                    refused_body::drain_cap(limit).saturating_sub(read),
                )
                .await;
                return Err(too_large(format!("more than {limit} bytes")));
            }
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(e) => {
                return Err(refuse(
                    StatusCode::BAD_REQUEST,
                    format!("the state document did not arrive whole ({e}); nothing was written"),
                ));
            }
        }
    }
    Ok(bytes)
}

async fn post(backend: &Backend, body: &[u8]) -> Response {
    match backend.write_document(body).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(refused) => {
            let status = match refused.kind {
                WriteRefusal::Conflict => StatusCode::CONFLICT,
                WriteRefusal::BadDocument => StatusCode::BAD_REQUEST,
                WriteRefusal::Failed => StatusCode::INTERNAL_SERVER_ERROR,
            };
            text(status, format!("{}\n", refused.message))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::layout::{EstateName, Layout};
    use crate::engine::program::ProgramStamp;
    use crate::engine::session::RunInfo;
    use crate::store::local::LocalStore;

    fn basic(user: &str, password: &str) -> HeaderValue {
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        HeaderValue::from_str(&format!("Basic {b64}")).unwrap()
    }

    #[test]
    fn only_the_exact_credentials_pass() {
        let c = Credentials::generate().unwrap();
        assert_eq!(c.password.len(), 2 * SECRET_BYTES);
        assert_eq!(c.check(Some(&basic(USERNAME, &c.password))), Ok(()));
        let lower = HeaderValue::from_str(&format!(
            "basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{USERNAME}:{}", c.password))
        ))
        .unwrap();
        assert_eq!(
            c.check(Some(&lower)),
            Ok(()),
            "the scheme is case-insensitive"
        );
        assert_eq!(c.check(None), Err(Refusal::NoCredentials));
        let prefix = &c.password[..c.password.len() - 1];
        for wrong in [
            basic(USERNAME, prefix),
            basic(USERNAME, &format!("{}0", c.password)),
            basic("someone", &c.password),
            basic(USERNAME, ""),
            HeaderValue::from_static("Bearer abc"),
            HeaderValue::from_static("Basic %%%not-base64"),
            HeaderValue::from_static("Basic"),
        ] {
            assert_eq!(
                c.check(Some(&wrong)),
                Err(Refusal::WrongCredentials),
                "{wrong:?}"
            );
        }
        assert!(
            !format!("{c:?}").contains(&c.password),
            "Debug never shows the password"
        );
    }

    #[tokio::test]
    async fn each_server_has_its_own_password() {
        let dir = tempfile::tempdir().unwrap();
        let backend = || {
            Backend::new(
                Session::new(
                    Arc::new(LocalStore::new(dir.path())),
                    Layout::new(EstateName::parse("e").unwrap()),
                    RunInfo::new(ProgramStamp::default()),
                ),
                Arc::new(NoTally),
            )
        };
        let (a, b) = (
            serve(backend()).await.unwrap(),
            serve(backend()).await.unwrap(),
        );
        let password = |s: &Server| {
            s.terraform_env()
                .into_iter()
                .find(|(k, _)| *k == "TF_HTTP_PASSWORD")
                .map(|(_, v)| v)
                .unwrap()
        };
        let (pa, pb) = (password(&a), password(&b));
        assert_ne!(pa, pb);
        assert_eq!(pa.len(), 64, "256 bits, hex");
        let env: Vec<&str> = a.terraform_env().iter().map(|(k, _)| *k).collect();
        for var in ["TF_HTTP_ADDRESS", "TF_HTTP_USERNAME", "TF_HTTP_PASSWORD"] {
            assert!(env.contains(&var), "{env:?}");
        }
        a.stop().await;
        b.stop().await;
    }
}
