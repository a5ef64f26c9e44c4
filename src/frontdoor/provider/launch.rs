//! Starting one provider plugin as go-plugin's client does, and one HTTP/2 connection to it.
//!
//! The plugin gets terraform's magic cookie, `PLUGIN_PROTOCOL_VERSIONS=5,6`, our client
//! certificate (`PLUGIN_CLIENT_CERT`, AutoMTLS) and a private socket folder; it answers one line
//! on stdout, `1|5|unix|/path|grpc|<its certificate, base64 DER>`, and then serves gRPC over TLS
//! there. It gets a parent-death signal, so it ends with `run` whatever ends `run`.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use nix::sys::signal::Signal;
use thiserror::Error;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

use super::client_tls::ClientIdentity;
use super::lockfile::ProviderAddress;
use crate::cut::{Mechanism, cut};
use crate::frontdoor::plugin::handshake::{MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE};

/// How long a plugin may take to answer its handshake line (go-plugin's own default).
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The plugin protocol versions the door offers, as terraform does.
pub const OFFERED_VERSIONS: &str = "5,6";
/// How many of a plugin's last stderr lines an error quotes.
const TAIL_LINES: usize = 12;

/// Why a provider plugin could not be started or reached.
#[derive(Debug, Error)]
pub enum LaunchError {
    /// The executable could not be started.
    #[error("cannot start provider {address} ({path}): {source}")]
    Spawn {
        /// The provider.
        address: ProviderAddress,
        /// Its executable.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// It ended before its handshake line.
    #[error("provider {address} exited ({status}) before its handshake{tail}")]
    Exited {
        /// The provider.
        address: ProviderAddress,
        /// How it ended.
        status: String,
        /// Its last stderr lines, if any.
        tail: String,
    },
    /// It gave no handshake line in time.
    #[error("provider {address} gave no handshake line within {} s", START_TIMEOUT.as_secs())]
    Timeout {
        /// The provider.
        address: ProviderAddress,
    },
    /// Its handshake line is not one the door can use.
    #[error("provider {address} answered a handshake the door cannot use: {why}")]
    Handshake {
        /// The provider.
        address: ProviderAddress,
        /// What is wrong with it.
        why: String,
    },
    /// Its socket or stdout failed.
    #[error("provider {address}: {source}")]
    Io {
        /// The provider.
        address: ProviderAddress,
        /// The cause.
        source: std::io::Error,
    },
    /// TLS could not be set up or was refused.
    #[error("TLS with provider {address}: {source}")]
    Tls {
        /// The provider.
        address: ProviderAddress,
        /// The cause.
        source: rustls::Error,
    },
    /// HTTP/2 could not be set up.
    #[error("HTTP/2 with provider {address}: {source}")]
    Http {
        /// The provider.
        address: ProviderAddress,
        /// The cause.
        source: hyper::Error,
    },
    /// The door's client certificate could not be made.
    #[error("provider door: cannot make a client certificate: {0}")]
    Cert(#[from] rcgen::Error),
    /// Making the client certificate stopped.
    #[error("provider door: making a client certificate stopped: {0}")]
    CertStopped(#[from] tokio::task::JoinError),
}

/// Where a plugin listens, as its handshake line names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// A unix socket.
    Unix(PathBuf),
    /// A TCP address on loopback.
    Tcp(std::net::SocketAddr),
}

/// What a plugin's handshake line says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handshake {
    /// The plugin protocol it speaks (5 or 6).
    pub protocol: u32,
    /// Where it listens.
    pub listen: Listen,
    /// Its TLS certificate, DER.
    pub cert: Vec<u8>,
}

/// Read `CORE|APP|NETWORK|ADDRESS|grpc|CERT`; an error says what is wrong.
pub fn parse_line(line: &str) -> Result<Handshake, String> {
    let parts: Vec<&str> = line.trim().split('|').collect();
    let [core, app, network, address, protocol, cert] = parts.as_slice() else {
        return Err(format!("{} fields, not 6", parts.len()));
    };
    if *core != "1" {
        return Err(format!("go-plugin core protocol {core:?}, not 1"));
    }
    let protocol_version = match *app {
        "5" => 5,
        "6" => 6,
        other => return Err(format!("plugin protocol {other:?}, neither 5 nor 6")),
    };
    if *protocol != "grpc" {
        return Err(format!("RPC protocol {protocol:?}, not grpc"));
    }
    let listen = match *network {
        "unix" => Listen::Unix(PathBuf::from(address)),
        "tcp" => {
            let addr: std::net::SocketAddr = address
                .parse()
                .map_err(|e| format!("TCP address {address:?}: {e}"))?;
            if !addr.ip().is_loopback() {
                return Err(format!("TCP address {addr} is not on loopback"));
            }
            Listen::Tcp(addr)
        }
        other => return Err(format!("network {other:?}, neither unix nor tcp")),
    };
    if cert.is_empty() {
        return Err("no server certificate: the plugin did not take up AutoMTLS".into());
    }
    let cert = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(cert.trim_end_matches('='))
        .map_err(|e| format!("the certificate is not base64: {e}"))?;
    Ok(Handshake {
        protocol: protocol_version,
        listen,
        cert,
    })
}

/// Have the process `cmd` starts get `signal` when this process ends (Linux's parent-death signal).
///
/// The signal follows the thread that starts the child: `run` starts its children from the
/// async runtime's worker threads, which live as long as it does.
pub fn die_with_parent(cmd: &mut Command, signal: Signal) {
    if cut(Mechanism::ParentDeath) {
        return;
    }
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the child between fork and exec. It only makes two system
    // calls (prctl, getppid), both async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(signal).map_err(std::io::Error::from)?;
            // The parent may have died before the signal was asked for.
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::from(nix::errno::Errno::ESRCH));
            }
            Ok(())
        });
    }
}

/// The plugin of one provider: what to start and where.
#[derive(Clone, Debug)]
pub struct Plugin {
    /// The provider.
    pub address: ProviderAddress,
    /// The executable.
    pub executable: PathBuf,
    /// Its working folder (the root, as terraform starts it).
    pub cwd: PathBuf,
}

/// What every plugin of one door is started with: the certificate, the private socket folder, and the count of plugins started.
pub struct Launcher {
    /// The certificate every plugin is given, made when the first one starts (a root of built-in providers alone never pays for it).
    identity: tokio::sync::OnceCell<Arc<ClientIdentity>>,
    /// The private folder of every socket (0700).
    pub sockets: PathBuf,
    /// How many plugin processes the door started.
    pub launches: std::sync::atomic::AtomicUsize,
}

impl Launcher {
    /// A launcher whose plugins' sockets are in `sockets`.
    pub fn new(sockets: PathBuf) -> Launcher {
        Launcher {
            identity: tokio::sync::OnceCell::new(),
            sockets,
            launches: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The certificate every plugin is given, made on a blocking thread the first time it is asked for (key generation seeds the crypto library's random source, milliseconds of CPU).
    pub async fn identity(&self) -> Result<Arc<ClientIdentity>, LaunchError> {
        let identity = self
            .identity
            .get_or_try_init(|| async {
                let made = tokio::task::spawn_blocking(ClientIdentity::generate).await??;
                Ok::<_, LaunchError>(Arc::new(made))
            })
            .await?;
        Ok(identity.clone())
    }

    /// Start one plugin of `plugin`, counted.
    pub async fn start(&self, plugin: &Plugin) -> Result<Upstream, LaunchError> {
        let identity = self.identity().await?;
        let upstream = Upstream::launch(plugin, identity, &self.sockets).await?;
        self.launches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(upstream)
    }
}

/// One running plugin process; killed when dropped.
#[derive(Debug)]
pub struct Upstream {
    address: ProviderAddress,
    pid: Option<u32>,
    handshake: Handshake,
    /// The certificate it was given, presented on every connection to it.
    identity: Arc<ClientIdentity>,
    /// How the process ended on its own (a signal, or a failing status), once it did.
    ended: tokio::sync::watch::Receiver<Option<String>>,
    /// Dropped with the upstream: the watcher then kills the process.
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// How a plugin's exit reads, when it was not a clean one (a plugin asked to shut down exits 0).
fn died(status: &std::process::ExitStatus) -> Option<String> {
    use std::os::unix::process::ExitStatusExt;
    if let Some(signal) = status.signal() {
        let name = Signal::try_from(signal).map_or_else(|_| signal.to_string(), |s| s.to_string());
        return Some(format!("killed by signal {signal} ({name})"));
    }
    match status.code() {
        Some(0) | None => None,
        Some(code) => Some(format!("exited with status {code}")),
    }
}

/// Own `child` until it ends or `stop` fires (then kill it); tell `ended` how it died when it died on its own.
fn watch(
    mut child: Child,
    address: ProviderAddress,
    stop: tokio::sync::oneshot::Receiver<()>,
    ended: tokio::sync::watch::Sender<Option<String>>,
) {
    tokio::spawn(async move {
        let pid = child.id().unwrap_or(0);
        tokio::select! {
            status = child.wait() => {
                let how = match &status {
                    Ok(status) => died(status),
                    Err(e) => Some(format!("could not be waited for: {e}")),
                };
                if let Some(how) = how.filter(|_| !cut(Mechanism::ProviderCrash)) {
                    tracing::warn!(provider = %address, pid, "provider door: the provider plugin {address} (pid {pid}) died: {how}");
                    ended.send_replace(Some(how));
                }
            }
            _ = stop => {
                let _ = child.kill().await;
            }
        }
    });
}

type Tail = Arc<Mutex<VecDeque<String>>>;

/// Whether the user asked terraform for provider logs (`TF_LOG`, `TF_LOG_PROVIDER`), which then reach `run`'s stderr as terraform would show them.
fn provider_logs_wanted() -> bool {
    ["TF_LOG_PROVIDER", "TF_LOG"]
        .iter()
        .any(|k| std::env::var(k).is_ok_and(|v| !v.is_empty() && !v.eq_ignore_ascii_case("off")))
}

/// Read every line of `from`: never logged (a provider's log lines can hold attribute values),
/// passed to stderr only when the user asked terraform for provider logs, and the last lines
/// that are not log records (a panic, a plain message) kept in `tail`.
fn drain<R: AsyncRead + Unpin + Send + 'static>(from: R, tail: Option<Tail>) {
    let passed = provider_logs_wanted();
    tokio::spawn(async move {
        let mut lines = BufReader::new(from).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if passed {
                eprintln!("{line}");
            }
            if line.trim_start().starts_with('{') {
                continue;
            }
            if let Some(tail) = &tail
                && let Ok(mut t) = tail.lock()
            {
                if t.len() == TAIL_LINES {
                    t.pop_front();
                }
                t.push_back(line);
            }
        }
    });
}

impl Upstream {
    /// Start `plugin` with its sockets in `sockets` (a folder only this user opens) and read its handshake.
    pub async fn launch(
        plugin: &Plugin,
        identity: Arc<ClientIdentity>,
        sockets: &Path,
    ) -> Result<Upstream, LaunchError> {
        let address = plugin.address.clone();
        let mut cmd = Command::new(&plugin.executable);
        cmd.current_dir(&plugin.cwd)
            .env_remove("TF_REATTACH_PROVIDERS")
            .env(MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE)
            .env("PLUGIN_PROTOCOL_VERSIONS", OFFERED_VERSIONS)
            .env("PLUGIN_MIN_PORT", "10000")
            .env("PLUGIN_MAX_PORT", "25000")
            .env("PLUGIN_UNIX_SOCKET_DIR", sockets)
            .env("PLUGIN_CLIENT_CERT", identity.cert_pem())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        die_with_parent(&mut cmd, Signal::SIGKILL);
        let mut child = cmd.spawn().map_err(|source| LaunchError::Spawn {
            address: address.clone(),
            path: plugin.executable.clone(),
            source,
        })?;
        let tail: Tail = Arc::default();
        if let Some(err) = child.stderr.take() {
            drain(err, Some(tail.clone()));
        }
        let Some(out) = child.stdout.take() else {
            return Err(LaunchError::Io {
                address,
                source: std::io::Error::other("no stdout"),
            });
        };
        let mut out = BufReader::new(out);
        let mut line = String::new();
        let read = tokio::time::timeout(START_TIMEOUT, out.read_line(&mut line)).await;
        match read {
            Err(_) => return Err(LaunchError::Timeout { address }),
            Ok(Err(source)) => return Err(LaunchError::Io { address, source }),
            Ok(Ok(0)) => {
                let status = match child.wait().await {
                    Ok(s) => s.to_string(),
                    Err(e) => e.to_string(),
                };
                // Let the stderr reader catch up with what the plugin said as it ended.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let tail = tail
                    .lock()
                    .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
                    .unwrap_or_default();
                let tail = if tail.is_empty() {
                    String::new()
                } else {
                    format!(":\n{tail}")
                };
                return Err(LaunchError::Exited {
                    address,
                    status,
                    tail,
                });
            }
            Ok(Ok(_)) => {}
        }
        let handshake = parse_line(&line).map_err(|why| LaunchError::Handshake {
            address: address.clone(),
            why,
        })?;
        drain(out.into_inner(), None);
        tracing::info!(
            provider = %address,
            pid = child.id().unwrap_or(0),
            protocol = handshake.protocol,
            "provider door: started a provider plugin"
        );
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let (ended_tx, ended) = tokio::sync::watch::channel(None);
        let pid = child.id();
        watch(child, address.clone(), stopped, ended_tx);
        Ok(Upstream {
            address,
            pid,
            handshake,
            identity,
            ended,
            _stop: stop,
        })
    }

    /// How the process died on its own, waiting up to `within` for it to be seen (none: it lives, or ended cleanly).
    pub async fn died_within(&self, within: Duration) -> Option<String> {
        let mut ended = self.ended.clone();
        match tokio::time::timeout(within, ended.wait_for(Option::is_some)).await {
            Ok(Ok(how)) => how.clone(),
            _ => None,
        }
    }

    /// The plugin protocol it speaks.
    pub fn protocol(&self) -> u32 {
        self.handshake.protocol
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.pid.filter(|_| self.ended.borrow().is_none())
    }

    /// Open one TLS and HTTP/2 connection to it; requests go through the returned sender.
    pub async fn connect<B>(&self) -> Result<SendRequest<B>, LaunchError>
    where
        B: hyper::body::Body + Send + Unpin + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let address = &self.address;
        let io_err = |source| LaunchError::Io {
            address: address.clone(),
            source,
        };
        let config = self
            .identity
            .config(self.handshake.cert.clone())
            .map_err(|source| LaunchError::Tls {
                address: address.clone(),
                source,
            })?;
        let connector = tokio_rustls::TlsConnector::from(config);
        let name = rustls::pki_types::ServerName::try_from("localhost")
            .map_err(|e| io_err(std::io::Error::other(e)))?;
        let tls: Box<dyn Stream> = match &self.handshake.listen {
            Listen::Unix(path) => {
                let raw = tokio::net::UnixStream::connect(path)
                    .await
                    .map_err(io_err)?;
                Box::new(connector.connect(name, raw).await.map_err(io_err)?)
            }
            Listen::Tcp(addr) => {
                let raw = tokio::net::TcpStream::connect(addr).await.map_err(io_err)?;
                let _ = raw.set_nodelay(true);
                Box::new(connector.connect(name, raw).await.map_err(io_err)?)
            }
        };
        let (sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .adaptive_window(true)
            .max_frame_size(1 << 20)
            .handshake(TokioIo::new(tls))
            .await
            .map_err(|source| LaunchError::Http {
                address: address.clone(),
                source,
            })?;
        let who = address.clone();
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(provider = %who, error = %e, "provider connection ended");
            }
        });
        Ok(sender)
    }
}

/// A byte stream to a plugin, whichever socket carries it.
trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Stream for T {}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_certificate_is_made_once_and_only_when_asked_for() {
        let launcher = Launcher::new(PathBuf::from("/nonexistent"));
        assert!(!launcher.identity.initialized());
        let first = launcher.identity().await.unwrap();
        let again = launcher.identity().await.unwrap();
        assert!(Arc::ptr_eq(&first, &again));
    }

    #[test]
    fn handshake_lines() {
        let h = parse_line("1|5|unix|/tmp/x/plugin1|grpc|AQIDBA\n").unwrap();
        assert_eq!(h.protocol, 5);
        assert_eq!(h.listen, Listen::Unix("/tmp/x/plugin1".into()));
        assert_eq!(h.cert, vec![1, 2, 3, 4]);
        // Padding is tolerated.
        assert_eq!(
            parse_line("1|6|tcp|127.0.0.1:10001|grpc|AQIDBA==")
                .unwrap()
                .protocol,
            6
        );
        for bad in [
            "1|4|unix|/x|grpc|AQID",
            "2|5|unix|/x|grpc|AQID",
            "1|5|unix|/x|netrpc|AQID",
            "1|5|unix|/x|grpc|",
            "1|5|tcp|10.0.0.1:1|grpc|AQID",
            "1|5|unix|/x|grpc",
            "not a handshake",
        ] {
            assert!(parse_line(bad).is_err(), "{bad}");
        }
    }
}
