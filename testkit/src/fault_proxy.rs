//! A loopback fault proxy between a store client and its peer (moto, azurite, the GCS
//! emulator): it forwards each HTTP request, or answers the service's own 500 / 503 itself, resets the connection, or forwards the request
//! and then loses the answer (the subtle one: the write landed, its answer did not).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::http1::{forward, keep_alive, read_request};

/// What the proxy does with one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Pass,
    Internal500,
    SlowDown503,
    Reset,
    LostAnswer,
}

/// Counts of what was injected.
#[derive(Debug, Default)]
pub struct Counts {
    pub requests: AtomicUsize,
    pub internal: AtomicUsize,
    pub slowdown: AtomicUsize,
    pub reset: AtomicUsize,
    pub lost: AtomicUsize,
    /// Request bytes (head and body) forwarded to the store.
    pub bytes_up: AtomicUsize,
    /// Requests forwarded to the store, by method.
    pub puts: AtomicUsize,
    /// Bytes (head and body) of the write requests forwarded: PUT, POST, DELETE.
    pub bytes_written: AtomicUsize,
}

impl Counts {
    pub fn injected(&self) -> usize {
        self.internal.load(Ordering::SeqCst)
            + self.slowdown.load(Ordering::SeqCst)
            + self.reset.load(Ordering::SeqCst)
            + self.lost.load(Ordering::SeqCst)
    }
}

/// A running proxy.
pub struct Proxy {
    pub endpoint: String,
    pub counts: Arc<Counts>,
}

/// Whose error answers the proxy injects: each kind's service's own 500 and 503.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// S3: XML `InternalError`, `SlowDown`.
    S3,
    /// Azure Blob: XML `InternalError`, `ServerBusy`, with `x-ms-error-code`.
    Azure,
    /// GCS JSON API: `backendError` 500, 503.
    Gcs,
}

/// Start a proxy in front of `upstream` (host:port); `fault_rate` in percent, seeded; S3's error answers.
pub async fn start(upstream: String, fault_rate: u32, seed: u64) -> Proxy {
    start_as(upstream, fault_rate, seed, Dialect::S3).await
}

/// Start a proxy in front of `upstream` (host:port) that injects `dialect`'s error answers.
pub async fn start_as(upstream: String, fault_rate: u32, seed: u64, dialect: Dialect) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let counts = Arc::new(Counts::default());
    let c = counts.clone();
    let rng = Arc::new(std::sync::Mutex::new(seed));
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            let (upstream, counts, rng) = (upstream.clone(), c.clone(), rng.clone());
            tokio::spawn(async move {
                let _ = serve(sock, &upstream, &counts, &rng, fault_rate, dialect).await;
            });
        }
    });
    Proxy { endpoint, counts }
}

fn next(rng: &std::sync::Mutex<u64>) -> u64 {
    let mut s = rng.lock().unwrap();
    // xorshift64*: a small seeded generator, so a failing run can be replayed.
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    s.wrapping_mul(0x2545F4914F6CDD1D)
}

fn choose(rng: &std::sync::Mutex<u64>, rate: u32) -> Fault {
    let roll = (next(rng) % 100) as u32;
    if roll >= rate {
        return Fault::Pass;
    }
    match next(rng) % 4 {
        0 => Fault::Internal500,
        1 => Fault::SlowDown503,
        2 => Fault::Reset,
        _ => Fault::LostAnswer,
    }
}

/// The 500 or 503 answer (`busy`) of `dialect`'s service.
fn injected_answer(dialect: Dialect, busy: bool) -> Vec<u8> {
    match (dialect, busy) {
        (Dialect::S3, false) => error_answer("500 Internal Server Error", "InternalError"),
        (Dialect::S3, true) => error_answer("503 Slow Down", "SlowDown"),
        (Dialect::Azure, busy) => {
            let (status, code, message) = if busy {
                (
                    "503 Service Unavailable",
                    "ServerBusy",
                    "The server is currently unable to receive requests. Please retry your request.",
                )
            } else {
                (
                    "500 Internal Server Error",
                    "InternalError",
                    "The server encountered an internal error. Please retry the request.",
                )
            };
            let body = format!(
                "\u{feff}<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
            );
            format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/xml\r\nx-ms-error-code: {code}\r\nx-ms-version: 2021-08-06\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        }
        (Dialect::Gcs, busy) => {
            let (status, code, message) = if busy {
                (
                    "503 Service Unavailable",
                    503,
                    "We encountered an internal error. Please try again.",
                )
            } else {
                (
                    "500 Internal Server Error",
                    500,
                    "We encountered an internal error. Please try again.",
                )
            };
            let body = format!(
                "{{\"error\":{{\"code\":{code},\"message\":\"{message}\",\"errors\":[{{\"message\":\"{message}\",\"domain\":\"global\",\"reason\":\"backendError\"}}]}}}}"
            );
            format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/json; charset=UTF-8\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        }
    }
}

fn error_answer(status: &str, code: &str) -> Vec<u8> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>injected by the fault proxy</Message></Error>"
    );
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

async fn serve(
    mut sock: TcpStream,
    upstream: &str,
    counts: &Counts,
    rng: &std::sync::Mutex<u64>,
    rate: u32,
    dialect: Dialect,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while let Some(request) = read_request(&mut sock, &mut buf).await? {
        counts.requests.fetch_add(1, Ordering::SeqCst);
        let fault = choose(rng, rate);
        if matches!(fault, Fault::Pass | Fault::LostAnswer) {
            counts.bytes_up.fetch_add(request.len(), Ordering::SeqCst);
            if request.starts_with(b"PUT ") || request.starts_with(b"POST ") {
                counts.puts.fetch_add(1, Ordering::SeqCst);
            }
            if request.starts_with(b"PUT ")
                || request.starts_with(b"POST ")
                || request.starts_with(b"DELETE ")
            {
                counts
                    .bytes_written
                    .fetch_add(request.len(), Ordering::SeqCst);
            }
        }
        match fault {
            Fault::Pass => {
                let answer = forward(upstream, &request).await?;
                sock.write_all(&keep_alive(answer, &request)).await?;
            }
            Fault::Internal500 => {
                counts.internal.fetch_add(1, Ordering::SeqCst);
                sock.write_all(&injected_answer(dialect, false)).await?;
            }
            Fault::SlowDown503 => {
                counts.slowdown.fetch_add(1, Ordering::SeqCst);
                sock.write_all(&injected_answer(dialect, true)).await?;
            }
            Fault::Reset => {
                counts.reset.fetch_add(1, Ordering::SeqCst);
                return Ok(());
            }
            Fault::LostAnswer => {
                counts.lost.fetch_add(1, Ordering::SeqCst);
                // The store applies the request; the client never hears.
                let _ = forward(upstream, &request).await?;
                return Ok(());
            }
        }
    }
    Ok(())
}

/// A proxy that forwards every request as it is, but holds the first PUT until released.
pub struct Gated {
    pub endpoint: String,
    /// Notified when the first PUT arrived and is held.
    pub held: Arc<tokio::sync::Notify>,
    /// Notify to let the held PUT go on to the store.
    pub release: Arc<tokio::sync::Notify>,
}

/// Start a gated proxy in front of `upstream` (host:port).
pub async fn start_gated(upstream: String) -> Gated {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let held = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (h, r) = (held.clone(), release.clone());
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let (upstream, h, r, first) = (upstream.clone(), h.clone(), r.clone(), first.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                while let Ok(Some(request)) = read_request(&mut sock, &mut buf).await {
                    if request.starts_with(b"PUT ") && first.swap(false, Ordering::SeqCst) {
                        h.notify_one();
                        r.notified().await;
                    }
                    let Ok(answer) = forward(&upstream, &request).await else {
                        return;
                    };
                    if sock.write_all(&keep_alive(answer, &request)).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Gated {
        endpoint,
        held,
        release,
    }
}

/// A proxy that forwards every request until told the store is away: then it refuses every
/// connection (it stops listening, and closes the connections it holds) until the outage ends.
pub struct Outage {
    pub endpoint: String,
    /// Requests forwarded to the store.
    pub forwarded: Arc<AtomicUsize>,
    /// Requests and connections turned away while the store was away.
    pub refused: Arc<AtomicUsize>,
    down: tokio::sync::watch::Sender<Option<std::time::Instant>>,
    deny: Arc<std::sync::atomic::AtomicBool>,
    stall: Arc<std::sync::atomic::AtomicBool>,
}

impl Outage {
    /// The store hangs from now until [`Outage::up`]: every request is read and never answered (its connection is closed when the store is up again).
    pub fn stall(&self) {
        self.stall.store(true, Ordering::SeqCst);
    }

    /// The store is away from now for `window`.
    pub fn down_for(&self, window: std::time::Duration) {
        self.down
            .send_replace(Some(std::time::Instant::now() + window));
    }

    /// The store is away from now until [`Outage::up`].
    pub fn down(&self) {
        self.down_for(std::time::Duration::from_secs(365 * 24 * 3600));
    }

    /// The store answers again (and takes the credentials again).
    pub fn up(&self) {
        self.deny.store(false, Ordering::SeqCst);
        self.stall.store(false, Ordering::SeqCst);
        self.down.send_replace(None);
    }

    /// The store answers every request 403 `ExpiredToken`, as to a credential that expired, until [`Outage::up`].
    pub fn deny(&self) {
        self.deny.store(true, Ordering::SeqCst);
    }

    /// Whether the store is away now.
    pub fn is_down(&self) -> bool {
        is_down(&self.down.borrow())
    }
}

fn is_down(until: &Option<std::time::Instant>) -> bool {
    until.is_some_and(|t| t > std::time::Instant::now())
}

/// Start an outage proxy in front of `upstream` (host:port); it forwards until [`Outage::down_for`].
pub async fn start_outage(upstream: String) -> Outage {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (down, watch) = tokio::sync::watch::channel(None::<std::time::Instant>);
    let forwarded = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let deny = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stall = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (f, r, d, st) = (
        forwarded.clone(),
        refused.clone(),
        deny.clone(),
        stall.clone(),
    );
    tokio::spawn(async move {
        let mut listener = Some(listener);
        let mut watch = watch;
        loop {
            let until = *watch.borrow_and_update();
            if is_down(&until) {
                // Not listening: every connection is refused, as by a host that is away.
                listener = None;
                let deadline = until.map(tokio::time::Instant::from_std);
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)) => {}
                    changed = watch.changed() => if changed.is_err() { return },
                }
                continue;
            }
            let l = match &listener {
                Some(l) => l,
                None => {
                    // Listen again on the same port (SO_REUSEADDR is set by tokio on unix).
                    let mut tries = 0;
                    loop {
                        match TcpListener::bind(addr).await {
                            Ok(l) => break listener.insert(l),
                            Err(e) if tries < 50 => {
                                tries += 1;
                                let _ = e;
                                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                            }
                            Err(e) => panic!("the outage proxy cannot listen on {addr} again: {e}"),
                        }
                    }
                }
            };
            tokio::select! {
                accepted = l.accept() => {
                    let Ok((sock, _)) = accepted else { return };
                    let (upstream, watch, f, r, d, st) = (upstream.clone(), watch.clone(), f.clone(), r.clone(), d.clone(), st.clone());
                    tokio::spawn(async move {
                        let _ = serve_outage(sock, &upstream, watch, &f, &r, (&d, &st)).await;
                    });
                }
                changed = watch.changed() => if changed.is_err() { return },
            }
        }
    });
    Outage {
        endpoint: format!("http://{addr}"),
        forwarded,
        refused,
        down,
        deny,
        stall,
    }
}

async fn serve_outage(
    mut sock: TcpStream,
    upstream: &str,
    watch: tokio::sync::watch::Receiver<Option<std::time::Instant>>,
    forwarded: &AtomicUsize,
    refused: &AtomicUsize,
    (deny, stall): (
        &std::sync::atomic::AtomicBool,
        &std::sync::atomic::AtomicBool,
    ),
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while let Some(request) = read_request(&mut sock, &mut buf).await? {
        if stall.load(Ordering::SeqCst) {
            // A store that hangs: the request is never answered; its connection ends with the stall.
            refused.fetch_add(1, Ordering::SeqCst);
            while stall.load(Ordering::SeqCst) {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            return Ok(());
        }
        if deny.load(Ordering::SeqCst) {
            refused.fetch_add(1, Ordering::SeqCst);
            sock.write_all(&error_answer("403 Forbidden", "ExpiredToken"))
                .await?;
            continue;
        }
        if is_down(&watch.borrow()) {
            // A connection held from before the outage: closed, its request unanswered.
            refused.fetch_add(1, Ordering::SeqCst);
            return Ok(());
        }
        forwarded.fetch_add(1, Ordering::SeqCst);
        let answer = forward(upstream, &request).await?;
        if is_down(&watch.borrow()) {
            refused.fetch_add(1, Ordering::SeqCst);
            return Ok(());
        }
        sock.write_all(&keep_alive(answer, &request)).await?;
    }
    Ok(())
}
