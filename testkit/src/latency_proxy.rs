//! A loopback proxy for the bench's S3 latency model: it holds every HTTP request for a fixed
//! delay before forwarding it to the peer, and logs each call (method, path, bytes each way,
//! when it arrived and when its answer left), so a read's requests, bytes and sequential
//! round trips can be counted for both sides alike. Its gated mode holds the requests of chosen
//! AWS actions (the `X-Amz-Target` header, e.g. `AmazonSSM.PutParameter`, or a Query body's
//! `Action=`, e.g. `RevokeSecurityGroupEgress`) until the test opens the gate, so a test can
//! keep one run's cloud call in flight for as long as it needs.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::http1::{forward, head_end, keep_alive, read_request};

/// One request through the proxy.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    pub path: String,
    /// The AWS JSON action (`X-Amz-Target`), when the request names one.
    pub target: Option<String>,
    /// The AWS Query action (`Action=` of a form body, as IAM sends), when the request names one.
    pub action: Option<String>,
    /// The request's header names, lowercased.
    pub headers: Vec<String>,
    /// Request bytes (head and body).
    pub up: usize,
    /// Answer bytes (head and body).
    pub down: usize,
    /// When the whole request had arrived.
    pub start: Instant,
    /// When the whole answer had been sent back.
    pub end: Instant,
}

/// A running proxy and its call log.
pub struct Proxy {
    pub endpoint: String,
    log: Arc<Mutex<Vec<Call>>>,
    gate: Arc<Gate>,
}

/// A request as it arrived, before the proxy forwards (or holds) it.
#[derive(Clone, Debug)]
pub struct Arrival {
    /// The AWS JSON action (`X-Amz-Target`), else the Query action (`Action=`), when the request names one.
    pub target: Option<String>,
    /// When the whole request had arrived.
    pub at: Instant,
}

/// The actions a gated proxy holds, the arrivals it has seen, and whether its gate is open.
struct Gate {
    targets: Vec<String>,
    open: watch::Sender<bool>,
    /// Every request that has arrived (answered or not), in order.
    arrived: Mutex<Vec<Arrival>>,
}

impl Gate {
    fn new(targets: &[&str]) -> Gate {
        Gate {
            targets: targets.iter().map(|t| t.to_string()).collect(),
            open: watch::channel(targets.is_empty()).0,
            arrived: Mutex::new(Vec::new()),
        }
    }

    /// Wait until a request of `target` may pass.
    async fn pass(&self, target: Option<&str>) {
        if target.is_none_or(|t| !self.targets.iter().any(|h| h == t)) {
            return;
        }
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|o| *o).await;
    }
}

/// What a set of calls cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Account {
    pub requests: usize,
    pub bytes: usize,
    /// The longest chain of calls each of which started after the one before it ended.
    pub round_trips: usize,
}

impl Proxy {
    /// Forget every call logged so far.
    pub fn reset(&self) {
        self.log.lock().unwrap().clear();
    }

    /// The calls logged since the last reset (and reset).
    pub fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    /// How many requests of `target` have arrived so far, answered or still held (never reset).
    pub fn arrived(&self, target: &str) -> usize {
        self.gate
            .arrived
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.target.as_deref() == Some(target))
            .count()
    }

    /// Every request that has arrived so far, answered or still held, in order (never reset).
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.gate.arrived.lock().unwrap().clone()
    }

    /// Let every held request through, and every later one (a proxy without a gate is open).
    pub fn open(&self) {
        self.gate.open.send_replace(true);
    }
}

/// Requests, bytes and sequential round trips of `calls`.
pub fn account(calls: &[Call]) -> Account {
    // The longest chain of calls that do not overlap: take the earliest-ending call, then the
    // earliest-ending one that starts after it, and so on (maximal by the exchange argument).
    let mut by_end: Vec<&Call> = calls.iter().collect();
    by_end.sort_by_key(|c| c.end);
    let mut chain = 0;
    let mut free_at: Option<Instant> = None;
    for c in by_end {
        if free_at.is_none_or(|t| c.start >= t) {
            chain += 1;
            free_at = Some(c.end);
        }
    }
    Account {
        requests: calls.len(),
        bytes: calls.iter().map(|c| c.up + c.down).sum(),
        round_trips: chain,
    }
}

/// Start a proxy in front of `upstream` (host:port) holding each request for `delay`.
pub async fn start(upstream: String, delay: Duration) -> Proxy {
    serve_all(upstream, delay, Gate::new(&[])).await
}

/// Start a proxy in front of `upstream` (host:port) that holds each request of `targets` (AWS
/// JSON actions, e.g. `AmazonSSM.PutParameter`, or Query actions, e.g.
/// `RevokeSecurityGroupEgress`) until [`Proxy::open`], and forwards the others at once.
pub async fn start_gated(upstream: String, targets: &[&str]) -> Proxy {
    serve_all(upstream, Duration::ZERO, Gate::new(targets)).await
}

async fn serve_all(upstream: String, delay: Duration, gate: Gate) -> Proxy {
    let gate = Arc::new(gate);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let (l, g) = (log.clone(), gate.clone());
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            let _ = sock.set_nodelay(true);
            let (upstream, log, gate) = (upstream.clone(), l.clone(), g.clone());
            tokio::spawn(async move {
                let _ = serve(sock, &upstream, delay, &log, &gate).await;
            });
        }
    });
    Proxy {
        endpoint,
        log,
        gate,
    }
}

/// The request's headers, as (lowercased name, trimmed value).
fn headers(request: &[u8]) -> Vec<(String, String)> {
    let head = String::from_utf8_lossy(&request[..head_end(request)]);
    head.split("\r\n")
        .skip(1)
        .filter_map(|line| {
            let (name, value) = line.split_once(':')?;
            Some((name.trim().to_ascii_lowercase(), value.trim().to_string()))
        })
        .collect()
}

/// The request's `X-Amz-Target` header, if it has one.
fn amz_target(headers: &[(String, String)]) -> Option<String> {
    headers
        .iter()
        .find_map(|(name, value)| (name == "x-amz-target").then(|| value.clone()))
}

/// The request's Query action (`Action=...` in its form body), if it has one.
fn query_action(request: &[u8]) -> Option<String> {
    let body = String::from_utf8_lossy(&request[head_end(request)..]);
    body.split('&')
        .find_map(|kv| kv.strip_prefix("Action=").map(str::to_string))
}

async fn serve(
    mut sock: TcpStream,
    upstream: &str,
    delay: Duration,
    log: &Mutex<Vec<Call>>,
    gate: &Gate,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while let Some(request) = read_request(&mut sock, &mut buf).await? {
        let start = Instant::now();
        let line = String::from_utf8_lossy(&request[..request.len().min(2048)]);
        let mut words = line.split_whitespace();
        let method = words.next().unwrap_or_default().to_string();
        let path = words.next().unwrap_or_default().to_string();
        let headers = headers(&request);
        let target = amz_target(&headers);
        let action = query_action(&request);
        let named = target.clone().or_else(|| action.clone());
        gate.arrived.lock().unwrap().push(Arrival {
            target: named.clone(),
            at: start,
        });
        gate.pass(named.as_deref()).await;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let answer = keep_alive(forward(upstream, &request).await?, &request);
        sock.write_all(&answer).await?;
        log.lock().unwrap().push(Call {
            headers: headers.into_iter().map(|(name, _)| name).collect(),
            up: request.len(),
            down: answer.len(),
            method,
            path,
            target,
            action,
            start,
            end: Instant::now(),
        });
    }
    Ok(())
}
