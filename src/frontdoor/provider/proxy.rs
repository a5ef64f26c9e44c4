//! One provider behind the door: a unix socket terraform reattaches to, and a plugin process of its own for each connection.
//!
//! Every request is forwarded as it comes, HTTP/2 frames and trailers untouched, to the
//! connection's own plugin: every RPC of tfplugin5 and tfplugin6 and go-plugin's own services
//! (`GRPCBroker`, `GRPCStdio`, `GRPCController`) pass alike, and no message is decoded, so no
//! gRPC message limit applies here (the AWS schema is about 13.6 MB). A connection's plugin is
//! killed when terraform closes the connection, and every plugin when the door closes.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use http_body_util::{Either, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http2::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::{JoinHandle, JoinSet};

use super::client_tls::ClientIdentity;
use super::launch::{LaunchError, Plugin, Upstream};
use super::lockfile::ProviderAddress;

/// What every provider of one door shares.
pub struct Shared {
    /// The certificate every plugin is given.
    pub identity: ClientIdentity,
    /// The private folder of every socket (0700).
    pub sockets: PathBuf,
    /// How many plugin processes the door started.
    pub launches: AtomicUsize,
}

/// The body of an answer: the plugin's own, or none (an error the door gives itself).
type Body = Either<Incoming, Empty<Bytes>>;

/// One provider served through the door; its plugins end when it is dropped.
pub struct Proxied {
    address: ProviderAddress,
    socket: PathBuf,
    protocol: u32,
    accepting: JoinHandle<()>,
}

impl Proxied {
    /// Start one plugin of `plugin` (its handshake names the protocol terraform is told), then listen for terraform.
    pub async fn open(plugin: Plugin, shared: Arc<Shared>) -> Result<Proxied, LaunchError> {
        let first = Upstream::launch(&plugin, &shared.identity, &shared.sockets).await?;
        shared.launches.fetch_add(1, Ordering::Relaxed);
        let protocol = first.protocol();
        let socket = shared.sockets.join(format!(
            "door-{}-{}.sock",
            plugin.address.kind(),
            uuid::Uuid::new_v4().simple()
        ));
        let listener = UnixListener::bind(&socket).map_err(|source| LaunchError::Io {
            address: plugin.address.clone(),
            source,
        })?;
        let address = plugin.address.clone();
        let spare = Arc::new(Mutex::new(Some(first)));
        let accepting = tokio::spawn(accept(listener, plugin, shared, spare));
        Ok(Proxied {
            address,
            socket,
            protocol,
            accepting,
        })
    }

    /// The provider.
    pub fn address(&self) -> &ProviderAddress {
        &self.address
    }

    /// The socket terraform reattaches to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The plugin protocol its plugins speak (5 or 6).
    pub fn protocol(&self) -> u32 {
        self.protocol
    }
}

impl Drop for Proxied {
    fn drop(&mut self) {
        // Ending the accept loop drops its connections, and with them their plugins (kill on drop).
        self.accepting.abort();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Accept terraform's connections until aborted; each gets a plugin of its own.
async fn accept(
    listener: UnixListener,
    plugin: Plugin,
    shared: Arc<Shared>,
    spare: Arc<Mutex<Option<Upstream>>>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let upstream = spare.lock().ok().and_then(|mut s| s.take());
                    connections.spawn(serve(stream, plugin.clone(), shared.clone(), upstream));
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

/// Serve one terraform connection with its own plugin (`ready`, or one started now) until terraform closes it.
async fn serve(stream: UnixStream, plugin: Plugin, shared: Arc<Shared>, ready: Option<Upstream>) {
    let upstream = match ready {
        Some(up) => up,
        None => match Upstream::launch(&plugin, &shared.identity, &shared.sockets).await {
            Ok(up) => {
                shared.launches.fetch_add(1, Ordering::Relaxed);
                up
            }
            Err(e) => {
                // Terraform sees its connection close and names the provider.
                tracing::error!(error = %e, "provider door: cannot start a plugin for terraform");
                return;
            }
        },
    };
    let sender: SendRequest<Incoming> = match upstream.connect(&shared.identity).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "provider door: cannot reach the plugin");
            return;
        }
    };
    let service = hyper::service::service_fn(move |req| forward(sender.clone(), req));
    let served = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .adaptive_window(true)
        .max_frame_size(1 << 20)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(e) = served {
        tracing::debug!(provider = %plugin.address, error = %e, "terraform's connection ended");
    }
    tracing::debug!(provider = %plugin.address, pid = upstream.pid().unwrap_or(0), "provider door: connection closed, plugin stopped");
    drop(upstream);
}

/// Send one request on to the plugin, and its answer back as it comes.
async fn forward(
    mut sender: SendRequest<Incoming>,
    mut req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
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
        Err(e) => return Ok(unavailable(&format!("provider door: {e}"))),
    }
    match sender.send_request(req).await {
        Ok(resp) => Ok(resp.map(Either::Left)),
        Err(e) => Ok(unavailable(&format!(
            "provider door: the provider plugin did not answer: {e}"
        ))),
    }
}

/// A trailers-only gRPC answer: UNAVAILABLE, with `message`.
fn unavailable(message: &str) -> Response<Body> {
    let encoded =
        percent_encoding::utf8_percent_encode(message, percent_encoding::NON_ALPHANUMERIC)
            .to_string();
    let mut resp = Response::new(Either::Right(Empty::new()));
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
