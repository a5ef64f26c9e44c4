//! One provider behind the door: a unix socket terraform reattaches to, and a plugin process of its own for each connection.
//!
//! Every request is forwarded as it comes, HTTP/2 frames and trailers untouched, to the
//! connection's own plugin: every RPC of tfplugin5 and tfplugin6 and go-plugin's own services
//! (`GRPCBroker`, `GRPCStdio`, `GRPCController`) pass alike, and no message is decoded, so no
//! gRPC message limit applies here (the AWS schema is about 13.6 MB). A connection's plugin is
//! killed when terraform closes the connection, and every plugin when the door closes.
//!
//! A connection's plugin is taken with its first call that needs one, from the provider's
//! [`Spares`] (started before terraform asks; the next one starts as one is taken). The schema
//! call is answered from the provider's [`SchemaCache`], which the first plugin filled before
//! any connection took it, and go-plugin's broker and stdio streams wait for the plugin, so a
//! connection that only reads the schema (one per terraform command, and one at the start of
//! each walk) holds no process at all; nor does one that only validates (the validate walk's),
//! whose calls go to the idle spare.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::client::conn::http2::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;
use tokio::net::{UnixListener, UnixStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::cut::{Mechanism, cut};

use super::cone::{ConeReads, ReadStep, is_plan_call, is_read_call};
use super::dynamic;
use super::launch::{LaunchError, Launcher, Plugin, Upstream};
use super::lockfile::ProviderAddress;
use super::marking::{self, Marking};
use super::proto::tfplugin5::configure_provider;
use super::recorder::{Recorder, is_apply_call};
use super::schema_cache::{Answer, SchemaCache, frame, framed_message, grpc_field, is_schema_call};
use super::spares::Spares;
use super::unary::{Body, BoxError};
use super::used_types::UsedTypes;
use super::validations::{Validations, is_provider_validation};

/// One configuration terraform configured a marked provider with.
#[derive(Clone)]
pub struct Configured {
    /// The provider.
    pub provider: ProviderAddress,
    /// The configuration, as JSON.
    pub config: serde_json::Value,
    /// The configure call's message as terraform sent it (before the door's `ignore_tags`), for the door's own probes.
    pub message: Bytes,
}

/// What every provider of one door shares.
pub struct Shared {
    /// What starts every plugin, and counts them.
    pub launcher: Arc<Launcher>,
    /// What records each apply call's return, while an apply runs.
    pub recorder: Mutex<Option<Arc<Recorder>>>,
    /// The estate whose live markers the door handles, unless markers are off.
    pub marking: Option<Marking>,
    /// Every distinct configuration a marked provider was configured with (it may hold credentials, so it is never logged).
    pub configs: Mutex<Vec<Configured>>,
    /// What answers resource reads outside the cone, while a cone plan runs.
    pub cone: Mutex<Option<Arc<ConeReads>>>,
    /// The types the run names, which narrow the schema answer terraform hears (none: the whole answer).
    pub used: Option<UsedTypes>,
}

impl Shared {
    /// The recorder installed now, if any.
    fn recorder(&self) -> Option<Arc<Recorder>> {
        self.recorder.lock().ok().and_then(|r| r.clone())
    }

    /// The cone plan's reads installed now, if any.
    fn cone(&self) -> Option<Arc<ConeReads>> {
        self.cone.lock().ok().and_then(|c| c.clone())
    }
}

/// What the connections of one provider share: its spare plugins, the schema answer, and (with [`Mechanism::OwnPlugin`] cut) the one plugin they all share.
struct Provider {
    spares: Arc<Spares>,
    schema: Arc<SchemaCache>,
    validations: Validations,
    shared_live: Mutex<Option<Arc<Live>>>,
}

/// One provider served through the door; its plugins end when it is dropped.
pub struct Proxied {
    plugin: Plugin,
    address: ProviderAddress,
    socket: PathBuf,
    protocol: u32,
    spares: Arc<Spares>,
    accepting: JoinHandle<()>,
}

impl Proxied {
    /// Start one plugin of `plugin` (its handshake names the protocol terraform is told, and it reads the schema for the door), then listen for terraform.
    pub async fn open(
        plugin: Plugin,
        shared: Arc<Shared>,
        validations: Validations,
    ) -> Result<Proxied, LaunchError> {
        let first = shared.launcher.start(&plugin).await?;
        let protocol = first.protocol();
        let socket = shared.launcher.sockets.join(format!(
            "door-{}-{}.sock",
            plugin.address.kind(),
            uuid::Uuid::new_v4().simple()
        ));
        let listener = UnixListener::bind(&socket).map_err(|source| LaunchError::Io {
            address: plugin.address.clone(),
            source,
        })?;
        let address = plugin.address.clone();
        let schema = Arc::new(SchemaCache::default());
        let spares = Spares::new(
            plugin.clone(),
            shared.launcher.clone(),
            first,
            schema.clone(),
        );
        let provider = Arc::new(Provider {
            spares: spares.clone(),
            schema,
            validations,
            shared_live: Mutex::new(None),
        });
        let accepting = tokio::spawn(accept(listener, plugin.clone(), shared, provider));
        Ok(Proxied {
            plugin,
            address,
            socket,
            protocol,
            spares,
            accepting,
        })
    }

    /// The provider.
    pub fn address(&self) -> &ProviderAddress {
        &self.address
    }

    /// What its plugins are started from.
    pub fn plugin(&self) -> &Plugin {
        &self.plugin
    }

    /// The socket terraform reattaches to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The plugin protocol its plugins speak (5 or 6).
    pub fn protocol(&self) -> u32 {
        self.protocol
    }

    /// Its warm plugins.
    pub fn spares(&self) -> &Spares {
        &self.spares
    }
}

impl Drop for Proxied {
    fn drop(&mut self) {
        // Ending the accept loop drops its connections, and with them their plugins (kill on drop).
        self.accepting.abort();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Accept terraform's connections until aborted; each gets a plugin of its own when it needs one.
async fn accept(
    listener: UnixListener,
    plugin: Plugin,
    shared: Arc<Shared>,
    provider: Arc<Provider>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let conn = Arc::new(Conn {
                        plugin: plugin.clone(),
                        shared: shared.clone(),
                        provider: provider.clone(),
                        live: tokio::sync::OnceCell::new(),
                        started: tokio::sync::watch::channel(false).0,
                    });
                    connections.spawn(serve(stream, conn));
                }
                Err(e) => {
                    tracing::warn!(provider = %plugin.address, error = %e, "provider door: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// A running plugin of one connection, and the HTTP/2 connection to it.
struct Live {
    upstream: Upstream,
    sender: SendRequest<Body>,
}

/// One terraform connection: its plugin, once it has one; dropping it stops the plugin.
struct Conn {
    plugin: Plugin,
    shared: Arc<Shared>,
    provider: Arc<Provider>,
    live: tokio::sync::OnceCell<Arc<Live>>,
    started: tokio::sync::watch::Sender<bool>,
}

impl Conn {
    /// The connection's plugin, taken for `call`: a spare of the provider's, of its own.
    async fn live(&self, call: &str) -> Result<&Arc<Live>, LaunchError> {
        self.live
            .get_or_try_init(|| async {
                let own = !cut(Mechanism::OwnPlugin);
                if !own
                    && let Some(shared) = self
                        .provider
                        .shared_live
                        .lock()
                        .ok()
                        .and_then(|l| l.clone())
                {
                    return Ok(shared);
                }
                let taken = self.provider.spares.take(call).await?;
                let sender = taken.upstream.connect().await?;
                let live = Arc::new(Live {
                    upstream: taken.upstream,
                    sender,
                });
                if !own && let Ok(mut shared) = self.provider.shared_live.lock() {
                    *shared = Some(live.clone());
                }
                Ok(live)
            })
            .await
            .inspect(|_| {
                self.started.send_replace(true);
            })
    }

    /// The connection's plugin once some other call started it; never, if none does.
    async fn started(&self) -> Option<&Arc<Live>> {
        let mut started = self.started.subscribe();
        let _ = started.wait_for(|s| *s).await;
        self.live.get()
    }
}

/// Serve one terraform connection until terraform closes it; its plugin stops with it.
async fn serve(stream: UnixStream, conn: Arc<Conn>) {
    let address = conn.plugin.address.clone();
    let handler = conn.clone();
    let service = hyper::service::service_fn(move |req| handle(handler.clone(), req));
    let served = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .adaptive_window(true)
        .max_frame_size(1 << 20)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(e) = served {
        tracing::debug!(provider = %address, error = %e, "terraform's connection ended");
    }
    let pid = conn.live.get().and_then(|l| l.upstream.pid());
    tracing::debug!(provider = %address, pid = pid.unwrap_or(0), "provider door: connection closed");
}

/// go-plugin's own long-lived streams, which wait for the connection's plugin.
const PLUGIN_STREAMS: &[&str] = &[
    "/plugin.GRPCBroker/StartStream",
    "/plugin.GRPCStdio/StreamStdio",
];
/// The validation calls of protocols 5 and 6: they need no configured provider and change nothing in it.
const VALIDATION_PATHS: &[&str] = &[
    "/tfplugin5.Provider/PrepareProviderConfig",
    "/tfplugin6.Provider/ValidateProviderConfig",
    "/tfplugin5.Provider/ValidateResourceTypeConfig",
    "/tfplugin6.Provider/ValidateResourceConfig",
    "/tfplugin5.Provider/ValidateDataSourceConfig",
    "/tfplugin6.Provider/ValidateDataResourceConfig",
];
/// go-plugin's Shutdown, answered at once when the connection has no plugin.
const SHUTDOWN: &str = "/plugin.GRPCController/Shutdown";

/// Answer one call of terraform's.
async fn handle(conn: Arc<Conn>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let req = req.map(|b| b.map_err(BoxError::from).boxed());
    if is_provider_validation(req.uri().path()) {
        return Ok(validate_provider(conn, req).await);
    }
    handle_call(conn, req).await
}

/// Validate a provider's configuration: the answer kept for the same request ([`Validations`]), or the plugin's (then kept).
async fn validate_provider(conn: Arc<Conn>, req: Request<Body>) -> Response<Body> {
    let path = req.uri().path().to_string();
    let (parts, body) = req.into_parts();
    let request = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return unavailable(&format!(
                "provider door: the validation call broke off: {e}"
            ));
        }
    };
    if let Some(kept) = conn.provider.validations.get(&path, &request) {
        tracing::info!(provider = %conn.plugin.address, "provider door: answered a provider configuration's validation from a kept answer");
        return whole(&ok_answer(kept));
    }
    let resp = match handle_call(
        conn.clone(),
        Request::from_parts(parts, whole_body(request.clone(), None)),
    )
    .await
    {
        Ok(resp) => resp,
        Err(never) => match never {},
    };
    match collect_answer(resp, "validation").await {
        Ok((answer, ok)) => {
            if ok {
                conn.provider
                    .validations
                    .keep(&path, &request, &answer.body);
            }
            whole(&answer)
        }
        Err(resp) => resp,
    }
}

/// Answer one call of terraform's, its body already the door's own.
async fn handle_call(conn: Arc<Conn>, req: Request<Body>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_string();
    if PLUGIN_STREAMS.contains(&path.as_str()) && conn.live.get().is_none() {
        return Ok(match conn.started().await {
            Some(live) => forward(live, req).await,
            None => unavailable("provider door: the connection closed"),
        });
    }
    if path == SHUTDOWN && conn.live.get().is_none() {
        return Ok(whole(&ok_empty()));
    }
    if conn.live.get().is_none()
        && VALIDATION_PATHS.contains(&path.as_str())
        && let Some(validator) = conn.provider.spares.validator().await
    {
        return Ok(send(&validator, req).await);
    }
    let schema = is_schema_call(&path);
    if schema && let Some(kept) = conn.provider.schema.settled().await {
        tracing::info!(provider = %conn.plugin.address, "provider door: answered a schema call from the kept answer");
        return Ok(match &conn.shared.used {
            Some(used) => whole(&used.answer(&kept).await),
            None => whole(&kept),
        });
    }
    let live = match conn.live(&path).await {
        Ok(live) => live,
        Err(e) => {
            // Terraform names the provider; the door says why in its own log.
            tracing::error!(error = %e, "provider door: cannot start a plugin for terraform");
            return Ok(unavailable(&format!("provider door: {e}")));
        }
    };
    if CONFIGURE_PATHS.contains(&path.as_str())
        && conn.shared.marking.is_some()
        && marking::marks(&conn.plugin.address.to_string())
    {
        return Ok(configure_marked(&conn, live, req).await);
    }
    if is_apply_call(&path)
        && let Some(recorder) = conn.shared.recorder()
    {
        return Ok(apply_recorded(&conn, live, req, &recorder).await);
    }
    if is_read_call(&path)
        && let Some(cone) = conn.shared.cone()
    {
        return Ok(read_in_cone(live, req, &cone).await);
    }
    if is_plan_call(&path)
        && let Some(cone) = conn.shared.cone()
    {
        return Ok(plan_in_cone(live, req, &cone).await);
    }
    if !schema {
        return Ok(forward(live, req).await);
    }
    match collect_answer(forward(live, req).await, "schema").await {
        Ok((answer, _)) => {
            conn.provider.schema.offer(&answer);
            Ok(whole(&answer))
        }
        Err(resp) => Ok(resp),
    }
}

/// Forward an apply call whole, and hold its answer until the recorder wrote what it returned.
///
/// The request and answer are collected (an apply call is one message each way); a call
/// the recorder cannot read still reaches terraform unchanged.
async fn apply_recorded(
    conn: &Conn,
    live: &Live,
    req: Request<Body>,
    recorder: &Recorder,
) -> Response<Body> {
    if cut(Mechanism::ReturnRecords) {
        return forward(live, req).await;
    }
    let (mut parts, body) = req.into_parts();
    let request = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return unavailable(&format!("provider door: the apply call broke off: {e}")),
    };
    let outgoing = framed_message(&request).map(|m| recorder.called(&conn.plugin.address, m));
    let sent = match outgoing.as_ref().and_then(|o| o.request.as_deref()) {
        Some(marked) => {
            parts.headers.remove(hyper::header::CONTENT_LENGTH);
            frame(marked)
        }
        None => request.clone(),
    };
    let req = Request::from_parts(parts, whole_body(sent, None));
    let resp = forward(live, req).await;
    let (parts, body) = resp.into_parts();
    let collected = match body.collect().await {
        Ok(collected) => collected,
        Err(e) => {
            note_crash(conn, live, recorder, outgoing.as_ref()).await;
            return unavailable(&format!("provider door: the apply answer broke off: {e}"));
        }
    };
    if grpc_field(None, &parts.headers, "grpc-status").is_some_and(|v| v.as_bytes() == b"14") {
        note_crash(conn, live, recorder, outgoing.as_ref()).await;
    }
    let trailers = collected.trailers().cloned();
    let mut answer = collected.to_bytes();
    let ok = grpc_field(trailers.as_ref(), &parts.headers, "grpc-status")
        .is_some_and(|v| v.as_bytes() == b"0");
    match (ok, outgoing, framed_message(&answer)) {
        (true, Some(outgoing), Some(message)) => {
            if let Some(changed) = recorder
                .returned(&conn.provider.schema, outgoing, message)
                .await
            {
                answer = frame(&changed);
            }
        }
        (true, _, _) => {
            tracing::warn!(provider = %conn.plugin.address, "provider door: an apply call was not one plain message; terraform's own save records it");
        }
        (false, _, _) => {}
    }
    let mut parts = parts;
    parts.headers.remove(hyper::header::CONTENT_LENGTH);
    Response::from_parts(parts, whole_body(answer, trailers))
}

/// Answer a cone plan's resource read from its record or the run's fresh read, or send it to the provider and keep the answer.
async fn read_in_cone(live: &Live, req: Request<Body>, cone: &ConeReads) -> Response<Body> {
    if cut(Mechanism::ConeReads) {
        return forward(live, req).await;
    }
    let path = req.uri().path().to_string();
    let (parts, body) = req.into_parts();
    let request = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return unavailable(&format!("provider door: the read call broke off: {e}")),
    };
    let Some(message) = framed_message(&request).map(Bytes::copy_from_slice) else {
        return forward(live, Request::from_parts(parts, whole_body(request, None))).await;
    };
    let object = match cone.read(&message, &live.sender, &path).await {
        ReadStep::Answer(answer) => return whole(&ok_answer(frame(&answer))),
        ReadStep::Provider(object) => object,
    };
    let resp = forward(live, Request::from_parts(parts, whole_body(request, None))).await;
    let Some(object) = object else {
        return resp;
    };
    let (answer, ok) = match collect_answer(resp, "read").await {
        Ok(collected) => collected,
        Err(resp) => return resp,
    };
    if ok && let Some(m) = framed_message(&answer.body) {
        cone.provider_answered(object, &message, m);
    }
    whole(&answer)
}

/// Forward a cone plan's resource plan call, and let the cone confirm its object against the cloud before terraform hears the plan.
async fn plan_in_cone(live: &Live, req: Request<Body>, cone: &ConeReads) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let request = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return unavailable(&format!("provider door: the plan call broke off: {e}")),
    };
    let resp = forward(
        live,
        Request::from_parts(parts, whole_body(request.clone(), None)),
    )
    .await;
    let (answer, ok) = match collect_answer(resp, "plan").await {
        Ok(collected) => collected,
        Err(resp) => return resp,
    };
    if ok
        && let (Some(request), Some(planned)) =
            (framed_message(&request), framed_message(&answer.body))
    {
        cone.planned(request, planned).await;
    }
    whole(&answer)
}

/// A plugin's answer to a `what` call collected whole, and whether its status is OK; an answer that broke off, as terraform is to hear it.
async fn collect_answer(
    resp: Response<Body>,
    what: &str,
) -> Result<(Answer, bool), Response<Body>> {
    let (mut parts, body) = resp.into_parts();
    let collected = body
        .collect()
        .await
        .map_err(|e| unavailable(&format!("provider door: the {what} answer broke off: {e}")))?;
    let trailers = collected.trailers().cloned().unwrap_or_default();
    let ok = grpc_field(Some(&trailers), &parts.headers, "grpc-status")
        .is_some_and(|v| v.as_bytes() == b"0");
    parts.headers.remove(hyper::header::CONTENT_LENGTH);
    Ok((
        Answer {
            headers: parts.headers,
            trailers,
            body: collected.to_bytes(),
        },
        ok,
    ))
}

/// The gRPC paths of the configure call, in protocols 5 (`Configure`) and 6.
const CONFIGURE_PATHS: &[&str] = &[
    "/tfplugin5.Provider/Configure",
    "/tfplugin6.Provider/ConfigureProvider",
];

/// The configure call's configuration field (tfplugin5 and 6 alike).
const CONFIGURE_CONFIG: u32 = 2;

/// Forward a marked provider's configure call with `tofu-` added to its `ignore_tags`, and keep its configuration for the marker listings.
///
/// A configuration the door cannot read goes on unchanged, and is said.
async fn configure_marked(conn: &Conn, live: &Live, req: Request<Body>) -> Response<Body> {
    let (mut parts, body) = req.into_parts();
    let request = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return unavailable(&format!("provider door: the configure call broke off: {e}"));
        }
    };
    let changed = framed_message(&request).and_then(|m| {
        match configure_provider::Request::decode(m) {
            Ok(call) => match dynamic::to_json(call.config.as_ref()) {
                Ok(config) => keep_config(
                    &conn.shared,
                    &conn.plugin.address,
                    config,
                    Bytes::copy_from_slice(m),
                ),
                Err(e) => {
                    tracing::warn!(provider = %conn.plugin.address, error = %e, "provider door: a provider configuration could not be read for the marker listings");
                }
            },
            Err(e) => {
                tracing::warn!(provider = %conn.plugin.address, error = %e, "provider door: a configure call could not be read for the marker listings");
            }
        }
        if cut(Mechanism::CreateMarkers) {
            return None;
        }
        match marking::rewrite_message(m, CONFIGURE_CONFIG, marking::ignore_markers) {
            Ok(changed) => changed.map(|c| frame(&c)),
            Err(e) => {
                tracing::warn!(provider = %conn.plugin.address, error = %e, "provider door: ignore_tags could not be added; the live markers will show in its reads");
                None
            }
        }
    });
    let sent = match changed {
        Some(c) => {
            parts.headers.remove(hyper::header::CONTENT_LENGTH);
            c
        }
        None => request,
    };
    forward(live, Request::from_parts(parts, whole_body(sent, None))).await
}

/// Keep `config` (and the `message` that carried it) among the provider's configurations, once.
fn keep_config(
    shared: &Shared,
    provider: &ProviderAddress,
    config: serde_json::Value,
    message: Bytes,
) {
    if let Ok(mut configs) = shared.configs.lock()
        && !configs
            .iter()
            .any(|c| c.provider == *provider && c.config == config)
    {
        configs.push(Configured {
            provider: provider.clone(),
            config,
            message,
        });
    }
}

/// A body of `data`, then `trailers` if any.
fn whole_body(data: Bytes, trailers: Option<hyper::HeaderMap>) -> Body {
    let mut frames = vec![Ok::<_, BoxError>(Frame::data(data))];
    if let Some(t) = trailers {
        frames.push(Ok(Frame::trailers(t)));
    }
    StreamBody::new(futures::stream::iter(frames)).boxed()
}

/// Send one request on to the plugin, and its answer back as it comes.
async fn forward(live: &Live, req: Request<Body>) -> Response<Body> {
    send(&live.sender, req).await
}

/// Send one request on `sender`, and its answer back as it comes.
async fn send(sender: &SendRequest<Body>, mut req: Request<Body>) -> Response<Body> {
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    match hyper::Uri::builder()
        .scheme("https")
        .authority("localhost")
        .path_and_query(path)
        .build()
    {
        Ok(uri) => *req.uri_mut() = uri,
        Err(e) => return unavailable(&format!("provider door: {e}")),
    }
    match sender.clone().send_request(req).await {
        Ok(resp) => resp.map(|b| b.map_err(BoxError::from).boxed()),
        Err(e) => unavailable(&format!(
            "provider door: the provider plugin did not answer: {e}"
        )),
    }
}

/// A whole answer, sent again: its headers, its body, its trailers.
fn whole(answer: &Answer) -> Response<Body> {
    let mut resp = Response::new(whole_body(
        answer.body.clone(),
        Some(answer.trailers.clone()),
    ));
    *resp.headers_mut() = answer.headers.clone();
    resp
}

/// An empty message with status OK (go-plugin's `Empty`).
fn ok_empty() -> Answer {
    ok_answer(Bytes::from_static(&[0, 0, 0, 0, 0]))
}

/// A whole gRPC answer with status OK and `body`, one framed message.
fn ok_answer(body: Bytes) -> Answer {
    let mut headers = hyper::HeaderMap::new();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/grpc"),
    );
    let mut trailers = hyper::HeaderMap::new();
    trailers.insert("grpc-status", hyper::header::HeaderValue::from_static("0"));
    Answer {
        headers,
        body,
        trailers,
    }
}

/// A trailers-only gRPC answer: UNAVAILABLE, with `message`.
fn unavailable(message: &str) -> Response<Body> {
    let encoded =
        percent_encoding::utf8_percent_encode(message, percent_encoding::NON_ALPHANUMERIC)
            .to_string();
    let mut resp = Response::new(Empty::new().map_err(BoxError::from).boxed());
    let headers = resp.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/grpc"),
    );
    headers.insert("grpc-status", hyper::header::HeaderValue::from_static("14"));
    if let Ok(v) = hyper::header::HeaderValue::from_str(&encoded) {
        headers.insert("grpc-message", v);
    }
    resp
}

/// How long an apply call that broke off waits to learn whether its plugin died.
const DEATH_SEEN_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// An apply call broke off: when its plugin died, the recorder names the plugin and the call in flight.
async fn note_crash(
    conn: &Conn,
    live: &Live,
    recorder: &Recorder,
    outgoing: Option<&super::recorder::Outgoing>,
) {
    if let Some(how) = live.upstream.died_within(DEATH_SEEN_WITHIN).await {
        recorder.crashed(&conn.plugin.address, outgoing, how);
    }
}
