//! The per-run S3 door: terraform's own `backend "s3"` served from the records, one door per
//! run on loopback, with every workspace an estate of its own.
//!
//! Only terraform is pointed at it (`AWS_ENDPOINT_URL_S3` and `AWS_ENDPOINT_URL_STS`, and
//! `HTTP_PROXY` for the virtual-hosted names `<bucket>.127.0.0.1`, with the run's own access key and a fresh random secret); every request must carry a SigV4 signature
//! made with that secret, checked by `s3s`, and anything else gets 403 before the door reads it.
//! The state objects are served by [`service::Door`]; STS `GetCallerIdentity` by [`sts`].

pub mod adopted;
pub mod estates;
pub mod keys;
pub mod service;
pub mod sts;
pub mod upload;

use std::convert::Infallible;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::SimpleAuth;
use s3s::host::SingleDomain;
use s3s::service::{S3Service, S3ServiceBuilder};
use s3s::{S3Result, s3_error};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cut::{Mechanism, cut};
use crate::frontdoor::http::{Backend, Credentials};
use crate::telemetry;

pub use estates::{Estates, OpenSession};
pub use keys::StateKeys;
pub use service::Door;

/// The access key a run's terraform signs with; the secret is what makes a request this run's.
pub const ACCESS_KEY: &str = "choudoufu-live-run";

/// Variables of the user's environment taken out of terraform's, so that terraform signs with
/// the run's own credentials and nothing else (the providers keep them: the provider door starts
/// them with the user's environment).
pub const CLEARED_ENV: [&str; 5] = [
    "AWS_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
];

/// A running door: its address, the secret it lets in, and how to stop it.
pub struct Server {
    /// The loopback address it listens on.
    pub addr: SocketAddr,
    credentials: Arc<Credentials>,
    /// terraform's own shared config and credentials files, private to the run: the run's credentials under every profile terraform may ask for.
    files: tempfile::TempDir,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// The endpoint to give terraform.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every variable terraform needs to reach this door: its endpoint for S3 and STS, and the run's credentials.
    pub fn terraform_env(&self) -> Vec<(&'static str, String)> {
        let url = self.endpoint();
        vec![
            ("AWS_ENDPOINT_URL_S3", url.clone()),
            ("AWS_ENDPOINT_URL_STS", url.clone()),
            // Virtual-hosted requests (`<bucket>.127.0.0.1:<port>`) name no host that resolves:
            // terraform sends them to the door as its HTTP proxy (loopback itself is never proxied).
            ("HTTP_PROXY", url.clone()),
            ("http_proxy", url),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_string()),
            (
                "AWS_SECRET_ACCESS_KEY",
                self.credentials.secret().to_string(),
            ),
            (
                "AWS_SHARED_CREDENTIALS_FILE",
                self.files
                    .path()
                    .join(CREDENTIALS_FILE)
                    .display()
                    .to_string(),
            ),
            (
                "AWS_CONFIG_FILE",
                self.files.path().join(CONFIG_FILE).display().to_string(),
            ),
        ]
    }

    /// Stop serving: no new connection, and each open one ended once its request is answered.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Lets a request through only with credentials (a valid signature); unsigned ones get 403.
struct SignedOnly;

#[async_trait::async_trait]
impl S3Access for SignedOnly {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        if cx.credentials().is_some() || cut(Mechanism::S3Signature) {
            Ok(())
        } else {
            Err(s3_error!(
                AccessDenied,
                "this door answers only the terraform that `choudoufu-live run` started, which signs with the run's own secret; the request was not signed. Nothing was read or written."
            ))
        }
    }
}

/// The names of terraform's shared credentials and config files in the run's private folder.
const CREDENTIALS_FILE: &str = "credentials";
const CONFIG_FILE: &str = "config";

/// terraform's shared files: the run's credentials as the default profile and as `profile`
/// (the backend block's, which terraform then reads), and no other setting of the user's.
fn shared_files(
    credentials: &Credentials,
    profile: Option<&str>,
) -> std::io::Result<tempfile::TempDir> {
    let files = crate::store::private_folder::create("choudoufu-live-s3door-")?;
    let mut creds = String::new();
    let mut config = String::new();
    for name in std::iter::once("default").chain(profile.filter(|p| *p != "default")) {
        creds.push_str(&format!(
            "[{name}]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {}\n",
            credentials.secret()
        ));
        let section = if name == "default" {
            name.to_string()
        } else {
            format!("profile {name}")
        };
        config.push_str(&format!("[{section}]\n"));
    }
    for (file, text) in [(CREDENTIALS_FILE, creds), (CONFIG_FILE, config)] {
        crate::store::private_file::write_new(&files.path().join(file), text.as_bytes())
            .map_err(std::io::Error::other)?;
    }
    Ok(files)
}

/// Serve `door` on a free loopback port, to requests signed with a fresh per-run secret only;
/// `main` is told of each refused request. `profile` is the backend block's, which terraform's
/// shared files then name.
pub async fn serve(
    door: Door,
    main: Arc<Backend>,
    profile: Option<&str>,
) -> std::io::Result<Server> {
    let credentials = Arc::new(Credentials::generate()?);
    let files = shared_files(&credentials, profile)?;
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let mut builder = S3ServiceBuilder::new(door);
    builder.set_auth(SimpleAuth::from_single(ACCESS_KEY, credentials.secret()));
    builder.set_access(SignedOnly);
    builder.set_route(sts::Sts {
        access_key: ACCESS_KEY,
        credentials: credentials.clone(),
    });
    let domain = addr.to_string();
    builder.set_host(
        SingleDomain::new(&domain)
            .map_err(|e| std::io::Error::other(format!("the S3 door's address {domain}: {e}")))?,
    );
    let service = builder.build();
    let (stop, stopped) = watch::channel(false);
    let run_span = tracing::Span::current();
    let task = tokio::spawn(accept(listener, service, main, stopped, run_span));
    Ok(Server {
        addr,
        credentials,
        files,
        stop,
        task,
    })
}

async fn accept(
    listener: TcpListener,
    service: S3Service,
    main: Arc<Backend>,
    mut stopped: watch::Receiver<bool>,
    run_span: tracing::Span,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.changed() => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "the S3 door could not accept a connection");
                continue;
            }
        };
        let service = service.clone();
        let main = main.clone();
        let mut stopped = stopped.clone();
        let span = run_span.clone();
        connections.spawn(async move {
            let answer = service_fn(move |req: hyper::Request<Incoming>| {
                let service = service.clone();
                let main = main.clone();
                let span = tracing::info_span!(
                    parent: &span,
                    "s3.request",
                    http.request.method = %req.method(),
                    http.response.status_code = tracing::field::Empty,
                );
                async move {
                    let method = req.method().clone();
                    let response = match hyper::service::Service::call(&service, req).await {
                        Ok(response) => response,
                        Err(e) => {
                            tracing::error!(error = ?e, "the S3 door failed a request");
                            let mut response = hyper::Response::new(s3s::Body::empty());
                            *response.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
                            response
                        }
                    };
                    span.record("http.response.status_code", response.status().as_u16());
                    if response.status() == hyper::StatusCode::FORBIDDEN {
                        main.note_unauthorized();
                        telemetry::metrics().unauthorized("not_signed_by_run");
                        tracing::warn!(method = %method, "refused an S3 request not signed with this run's secret; nothing was read or written");
                    }
                    Ok::<_, Infallible>(response)
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), answer);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stopped.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    while connections.join_next().await.is_some() {}
}
