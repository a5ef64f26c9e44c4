//! Plugin mode: the go-plugin gRPC server terraform launches (handshake, AutoMTLS, services).

pub mod goplugin;
pub mod handshake;
pub mod live;
pub mod proto;
pub mod state_store;
pub mod tls;

use std::io::Write;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{Notify, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Server;
use tonic::transport::server::{Connected, Router};

use handshake::{HostEnv, Listen};
use proto::live::live_server::LiveServer;
use proto::plugin::grpc_broker_server::GrpcBrokerServer;
use proto::plugin::grpc_controller_server::GrpcControllerServer;
use proto::plugin::grpc_stdio_server::GrpcStdioServer;
use proto::tfplugin6::provider_server::ProviderServer;

/// The largest gRPC message accepted or sent (terraform uses 256 MiB for state chunks).
pub const MAX_MESSAGE: usize = 256 << 20;
/// How long after Shutdown the process stays before it exits regardless.
pub const SHUTDOWN_GRACE: Duration = Duration::from_millis(1500);

/// Why plugin mode could not serve.
#[derive(Debug, Error)]
pub enum PluginError {
    /// No port in the host's range could be bound.
    #[error("no free port in {0}..{1} on 127.0.0.1")]
    NoPort(u16, u16),
    /// A socket or file error.
    #[error("plugin transport: {0}")]
    Io(#[from] std::io::Error),
    /// The server certificate could not be made.
    #[error("server certificate: {0}")]
    Cert(#[from] rcgen::Error),
    /// TLS could not be set up.
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// The gRPC server failed.
    #[error("gRPC server: {0}")]
    Grpc(#[from] tonic::transport::Error),
}

trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

/// One accepted connection, plain or TLS, over TCP or a unix socket.
struct Conn(Pin<Box<dyn Io>>);

impl Connected for Conn {
    type ConnectInfo = ();
    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        self.0.as_mut().poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.0.as_mut().poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.0.as_mut().poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.0.as_mut().poll_shutdown(cx)
    }
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, std::path::PathBuf),
}

impl Listener {
    async fn accept(&self) -> std::io::Result<Pin<Box<dyn Io>>> {
        match self {
            Listener::Tcp(l) => {
                let (s, _) = l.accept().await?;
                let _ = s.set_nodelay(true);
                Ok(Box::pin(s))
            }
            Listener::Unix(l, _) => Ok(Box::pin(l.accept().await?.0)),
        }
    }
}

async fn bind(env: &HostEnv) -> Result<(Listener, Listen), PluginError> {
    if let Some(dir) = &env.unix_dir {
        let path = dir.join(format!(
            "choudoufu-live-{}.sock",
            uuid::Uuid::new_v4().simple()
        ));
        let l = UnixListener::bind(&path)?;
        return Ok((Listener::Unix(l, path.clone()), Listen::Unix(path)));
    }
    let span = u32::from(env.max_port - env.min_port) + 1;
    let offset = rand::random::<u32>() % span;
    for i in 0..span {
        let port = env.min_port as u32 + (offset + i) % span;
        if let Ok(l) = TcpListener::bind(("127.0.0.1", port as u16)).await {
            let addr = l.local_addr()?;
            return Ok((Listener::Tcp(l), Listen::Tcp(addr)));
        }
    }
    Err(PluginError::NoPort(env.min_port, env.max_port))
}

/// Serve the plugin until the host asks it to stop.
pub async fn serve(env: HostEnv) -> Result<(), PluginError> {
    let root = std::env::current_dir()?;
    let live = LiveServer::new(live::LiveService::new(root.clone()))
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    let provider = ProviderServer::new(state_store::StateStoreProvider::new(root))
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    serve_services(env, move |router| {
        router.add_service(provider).add_service(live)
    })
    .await
}

/// Serve go-plugin's own services (handshake, AutoMTLS, Shutdown) and those `add` puts on the router, until the host asks it to stop.
pub async fn serve_services(
    env: HostEnv,
    add: impl FnOnce(Router) -> Router,
) -> Result<(), PluginError> {
    // The host stops the plugin with Shutdown; interrupts from the terminal are for the host.
    if let Ok(mut sigint) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
    {
        tokio::spawn(async move { while sigint.recv().await.is_some() {} });
    }
    let (listener, listen) = bind(&env).await?;
    let tls = match &env.client_cert {
        Some(client) => {
            let identity = tls::server_identity()?;
            let config = tls::server_config(&identity, client.clone())?;
            Some((TlsAcceptor::from(Arc::new(config)), identity.cert_der))
        }
        None => None,
    };
    let stop = Arc::new(Notify::new());
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_service_status("plugin", tonic_health::ServingStatus::Serving)
        .await;
    let router = add(Server::builder()
        .trace_fn(grpc_span)
        .add_service(health_service)
        .add_service(GrpcControllerServer::new(goplugin::Controller {
            stop: stop.clone(),
        }))
        .add_service(GrpcStdioServer::new(goplugin::Stdio))
        .add_service(GrpcBrokerServer::new(goplugin::Broker)));

    let (tx, rx) = mpsc::channel::<std::io::Result<Conn>>(16);
    let acceptor = tls.as_ref().map(|(a, _)| a.clone());
    let listener = Arc::new(listener);
    let accepting = listener.clone();
    tokio::spawn(async move {
        loop {
            let raw = match accepting.accept().await {
                Ok(raw) => raw,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            };
            let tx = tx.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let conn = match acceptor {
                    None => Conn(raw),
                    Some(acceptor) => match acceptor.accept(raw).await {
                        Ok(tls) => Conn(Box::pin(tls)),
                        Err(e) => {
                            tracing::warn!(error = %e, "refused a connection: TLS handshake failed");
                            return;
                        }
                    },
                };
                let _ = tx.send(Ok(conn)).await;
            });
        }
    });

    let line = handshake::line(&listen, tls.as_ref().map(|(_, der)| der.as_slice()));
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")?;
        out.flush()?;
    }
    tracing::info!(address = ?listen, tls = tls.is_some(), "plugin serving");
    let stopping = stop.clone();
    let served = router
        .serve_with_incoming_shutdown(ReceiverStream::new(rx), async move {
            stopping.notified().await;
            // Long-lived streams (stdio, broker) would hold a graceful stop: bound it.
            tokio::spawn(async {
                tokio::time::sleep(SHUTDOWN_GRACE).await;
                // Send the last spans and metrics before the hard exit, within go-plugin's patience.
                let _ = tokio::task::spawn_blocking(|| {
                    crate::telemetry::shutdown(crate::telemetry::PLUGIN_FLUSH)
                })
                .await;
                std::process::exit(0);
            });
        })
        .await;
    if let Listener::Unix(_, path) = listener.as_ref() {
        let _ = std::fs::remove_file(path);
    }
    served?;
    Ok(())
}

/// One span per gRPC call: the service and method, never the message.
fn grpc_span(req: &axum::http::Request<()>) -> tracing::Span {
    let path = req.uri().path().trim_start_matches('/');
    let (service, method) = path.split_once('/').unwrap_or(("", path));
    tracing::info_span!(
        "grpc",
        otel.name = %format!("{service}/{method}"),
        rpc.system = "grpc",
        rpc.service = %service,
        rpc.method = %method,
    )
}
