//! OpenTelemetry export, seen by a real OTLP receiver: the run's spans and metrics arrive,
//! a conflict is named in them, no state value ever does; and with no endpoint nothing connects.

use testkit as common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::tf::{Records, Root, text, turn, wait};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use tokio_stream::StreamExt;

/// Every OTEL_* variable a parent environment might carry: the runs here choose their own.
const OTEL_VARS: &[&str] = &[
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
];

#[derive(Clone, Default)]
struct Received {
    traces: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    metrics: Arc<Mutex<Vec<ExportMetricsServiceRequest>>>,
}

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.traces.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.metrics.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

/// An OTLP/gRPC receiver on loopback, on its own runtime, counting every connection made to it.
struct Receiver {
    addr: SocketAddr,
    received: Received,
    connections: Arc<AtomicUsize>,
    rt: Option<tokio::runtime::Runtime>,
}

impl Receiver {
    fn start(addr: &str) -> std::io::Result<Receiver> {
        let std_listener = std::net::TcpListener::bind(addr)?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let received = Received::default();
        let connections = Arc::new(AtomicUsize::new(0));
        let (r, c) = (received.clone(), connections.clone());
        rt.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(move |s| {
                c.fetch_add(1, Ordering::SeqCst);
                s
            });
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(r.clone()))
                .add_service(MetricsServiceServer::new(r))
                .serve_with_incoming(incoming)
                .await
                .unwrap();
        });
        Ok(Receiver {
            addr,
            received,
            connections,
            rt: Some(rt),
        })
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn spans(&self) -> Vec<Span> {
        let traces = self.received.traces.lock().unwrap();
        traces
            .iter()
            .flat_map(|r| &r.resource_spans)
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| s.spans.clone())
            .collect()
    }

    fn metric_names(&self) -> Vec<String> {
        let metrics = self.received.metrics.lock().unwrap();
        metrics
            .iter()
            .flat_map(|r| &r.resource_metrics)
            .flat_map(|r| &r.scope_metrics)
            .flat_map(|s| s.metrics.iter().map(|m| m.name.clone()))
            .collect()
    }

    /// Everything received, as the bytes of the protos and their debug text: every string is in both.
    fn everything(&self) -> (Vec<u8>, String) {
        let mut bytes = Vec::new();
        let mut debug = String::new();
        for t in self.received.traces.lock().unwrap().iter() {
            bytes.extend(t.encode_to_vec());
            debug.push_str(&format!("{t:?}"));
        }
        for m in self.received.metrics.lock().unwrap().iter() {
            bytes.extend(m.encode_to_vec());
            debug.push_str(&format!("{m:?}"));
        }
        (bytes, debug)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

fn attrs(span: &Span) -> BTreeMap<String, String> {
    span.attributes
        .iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => s.clone(),
                Some(Value::IntValue(i)) => i.to_string(),
                Some(Value::BoolValue(b)) => b.to_string(),
                Some(Value::DoubleValue(d)) => d.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), v)
        })
        .collect()
}

fn with_otel(mut c: Command, endpoint: Option<&str>) -> Command {
    for v in OTEL_VARS {
        c.env_remove(v);
    }
    if let Some(e) = endpoint {
        c.env("OTEL_EXPORTER_OTLP_ENDPOINT", e);
    }
    c
}

fn spawn(root: &Root, args: &[&str], endpoint: &str) -> Child {
    use std::os::unix::process::CommandExt;
    let mut c = with_otel(root.run_cmd(args), Some(endpoint));
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    c.spawn().unwrap()
}

fn ok(out: std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

const SECRET: &str = "s3cr3t-otel-Qx81-never-exported";
const DB_A: &str = "otel-db-7f3a91";
const DB_B: &str = "otel-db-9c2b44";

/// An apply whose record a `state rm` removed meanwhile, and an apply refused by the first one's claim, exported
/// to a receiver: the conflict and the refusal named; no value anywhere.
#[test]
fn a_conflicting_run_is_traced_by_name_and_never_by_value() {
    let receiver = Receiver::start("127.0.0.1:0").unwrap();
    let endpoint = receiver.endpoint();
    let root = Root::new("demo", "otel-demo", &Records::Local);
    std::fs::write(
        root.path().join("secret.tf"),
        format!("variable \"password\" {{\n  type      = string\n  sensitive = true\n  default   = \"{SECRET}\"\n}}\n\nresource \"terraform_data\" \"password\" {{\n  input = var.password\n}}\n\noutput \"password\" {{\n  value     = var.password\n  sensitive = true\n}}\n"),
    )
    .unwrap();
    let _turn = turn();
    ok(
        with_otel(root.run_cmd(&["init", "-input=false"]), Some(&endpoint))
            .output()
            .unwrap(),
        "init",
    );
    ok(
        with_otel(
            root.run_cmd(&["apply", "-auto-approve", "-input=false"]),
            Some(&endpoint),
        )
        .output()
        .unwrap(),
        "first apply",
    );
    let trace = root.path().join("trace");
    let tv = format!("trace_file={}", trace.display());
    let apply = |value: &str| {
        spawn(
            &root,
            &[
                "apply",
                "-auto-approve",
                "-input=false",
                "-target=terraform_data.db",
                "-var",
                &format!("db_version={value}"),
                "-var",
                "sleep_seconds=5",
                "-var",
                &tv,
            ],
            &endpoint,
        )
    };
    // A applies db; while it is in its provider call, B's apply of db is refused by its claim,
    // and a `state rm` (which claims nothing) removes db's record, so A's write conflicts.
    let a = apply(DB_A);
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(&trace)
        .unwrap_or_default()
        .contains("db start")
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "A never applied"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let b = apply(DB_B);
    let rm = spawn(&root, &["state", "rm", "terraform_data.db"], &endpoint);
    let (a, b, rm) = (
        wait(a, Duration::from_secs(120)),
        wait(b, Duration::from_secs(120)),
        wait(rm, Duration::from_secs(120)),
    );
    assert_eq!(
        [a.status.code(), b.status.code(), rm.status.code()],
        [Some(4), Some(5), Some(0)],
        "A's write conflicts, B is refused by its claim\nA: {}\nB: {}\nrm: {}",
        text(&a.stderr),
        text(&b.stderr),
        text(&rm.stderr)
    );
    for out in [&a, &b, &rm] {
        assert!(
            !text(&out.stderr).contains("telemetry:"),
            "export complained: {}",
            text(&out.stderr)
        );
    }

    // The runs flushed before they exited: everything is here now.
    let spans = receiver.spans();
    let named = |name: &str| -> Vec<BTreeMap<String, String>> {
        spans.iter().filter(|s| s.name == name).map(attrs).collect()
    };
    let runs = named("run");
    assert!(
        runs.len() >= 4,
        "a run span per run (init, apply, two applies): {runs:?}"
    );
    assert!(
        runs.iter()
            .all(|r| r.get("estate").map(String::as_str) == Some("otel-demo")
                && r.get("run_id").is_some_and(|id| id.len() == 36))
    );
    for code in ["4", "5"] {
        assert!(
            runs.iter()
                .any(|r| r.get("exit_code").map(String::as_str) == Some(code)),
            "a run span with exit_code {code}: {runs:?}"
        );
    }
    let writes = named("session.write_state");
    assert!(
        writes
            .iter()
            .any(|w| w.get("outcome").map(String::as_str) == Some("conflict")
                && w.get("conflict.addresses").map(String::as_str) == Some("terraform_data.db")),
        "a write span with the conflict: {writes:?}"
    );
    assert!(!named("session.refresh").is_empty());
    let http = named("http.request");
    assert!(http.iter().any(
        |h| h.get("http.request.method").map(String::as_str) == Some("POST")
            && h.get("http.response.status_code").map(String::as_str) == Some("409")
    ));
    let store_calls: Vec<_> = spans
        .iter()
        .filter(|s| s.name.starts_with("store."))
        .map(attrs)
        .collect();
    let conflict = store_calls
        .iter()
        .find(|s| {
            s.get("outcome").map(String::as_str) == Some("conflict")
                && s.get("conflict.address").map(String::as_str) == Some("terraform_data.db")
        })
        .unwrap_or_else(|| {
            panic!("a store call with outcome conflict naming the address: {store_calls:?}")
        });
    for attr in [
        "key",
        "store.kind",
        "store.op",
        "latency_ms",
        "expected.version",
    ] {
        assert!(conflict.contains_key(attr), "{attr} in {conflict:?}");
    }
    assert_eq!(
        conflict.get("store.kind").map(String::as_str),
        Some("local")
    );
    assert!(
        store_calls
            .iter()
            .any(|s| s.get("outcome").map(String::as_str) == Some("written")
                && s.contains_key("attempt"))
    );
    // Spans nest: the store call belongs to a write, which belongs to a request, within the run.
    let by_id: BTreeMap<&[u8], &Span> = spans.iter().map(|s| (s.span_id.as_slice(), s)).collect();
    let conflict_span = spans
        .iter()
        .find(|s| attrs(s).contains_key("conflict.address"))
        .unwrap();
    let mut chain = vec![conflict_span.name.clone()];
    let mut at = conflict_span;
    while let Some(parent) = by_id.get(at.parent_span_id.as_slice()) {
        chain.push(parent.name.clone());
        at = parent;
    }
    assert!(
        chain.ends_with(&[
            "session.write_state".into(),
            "http.request".into(),
            "run".into()
        ]),
        "{chain:?}"
    );

    let metrics = receiver.metric_names();
    for name in [
        "choudoufu.records.read",
        "choudoufu.records.written",
        "choudoufu.records.unchanged",
        "choudoufu.conflicts",
        "choudoufu.store.call.duration",
        "choudoufu.store.bytes.read",
        "choudoufu.store.bytes.written",
    ] {
        assert!(metrics.iter().any(|m| m == name), "{name} in {metrics:?}");
    }

    // The values are in the records (terraform needs them), never in what was exported.
    let records = std::fs::read_dir(root.path().join(".live-records/tofu-records/otel-demo/r"))
        .unwrap()
        .count();
    assert!(
        records >= 2,
        "dns and password (db was removed by the state rm)"
    );
    let (bytes, debug) = receiver.everything();
    assert!(bytes.len() > 1000, "something substantial was received");
    for value in [SECRET, DB_A, DB_B] {
        assert!(!debug.contains(value), "the value {value} was exported");
        assert!(
            !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
            "the value {value} is in the exported bytes"
        );
    }
}

/// With no OTLP endpoint set, a run makes no connection to a collector, not even the SDK's default one.
#[test]
fn no_endpoint_no_connection() {
    // The SDK's default gRPC endpoint is 127.0.0.1:4317: listen there when it is free, and also
    // on a port of our own named in every OTEL_* variable except the endpoints.
    let default_port = Receiver::start("127.0.0.1:4317").ok();
    let own = Receiver::start("127.0.0.1:0").unwrap();
    let root = Root::new("demo", "otel-off", &Records::Local);
    let _turn = turn();
    let configure = |c: Command| {
        let mut c = with_otel(c, None);
        c.env("OTEL_SERVICE_NAME", "choudoufu-live-test")
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
            .env(
                "OTEL_RESOURCE_ATTRIBUTES",
                format!("receiver={}", own.endpoint()),
            )
            .env("OTEL_EXPORTER_OTLP_TIMEOUT", "1000");
        c
    };
    ok(
        configure(root.run_cmd(&["init", "-input=false"]))
            .output()
            .unwrap(),
        "init",
    );
    let out = configure(root.run_cmd(&["apply", "-auto-approve", "-input=false"]))
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    ok(out, "apply");
    assert!(!stderr.contains("telemetry:"), "{stderr}");
    assert_eq!(own.connections.load(Ordering::SeqCst), 0);
    assert!(own.spans().is_empty() && own.metric_names().is_empty());
    if let Some(default_port) = default_port {
        assert_eq!(
            default_port.connections.load(Ordering::SeqCst),
            0,
            "a run without an endpoint connected to the default collector port"
        );
    }
}

/// Plugin mode: each gRPC call is a span, and the spans reach the receiver after the host's
/// Shutdown, before the process exits (within go-plugin's 2 s).
#[test]
fn plugin_mode_sends_its_spans_after_shutdown() {
    use std::io::{BufRead, BufReader};
    let receiver = Receiver::start("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_choudoufu-live"));
    cmd.current_dir(dir.path())
        .env(
            "TF_PLUGIN_MAGIC_COOKIE",
            "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2",
        )
        .env("PLUGIN_PROTOCOL_VERSIONS", "6")
        .env("PLUGIN_MIN_PORT", "10000")
        .env("PLUGIN_MAX_PORT", "25000")
        .env_remove("PLUGIN_CLIENT_CERT")
        .env_remove("PLUGIN_UNIX_SOCKET_DIR");
    let mut child = with_otel(cmd, Some(&receiver.endpoint()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split('|')
        .nth(3)
        .expect("an address in the handshake line")
        .to_string();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let stopped_in = rt.block_on(async {
        let channel = tonic::transport::Endpoint::try_from(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut provider =
            choudoufu_live::frontdoor::plugin::proto::tfplugin6::provider_client::ProviderClient::new(channel.clone());
        provider
            .get_metadata(choudoufu_live::frontdoor::plugin::proto::tfplugin6::get_metadata::Request {})
            .await
            .unwrap();
        let mut ctl =
            choudoufu_live::frontdoor::plugin::proto::plugin::grpc_controller_client::GrpcControllerClient::new(
                channel,
            );
        let t = std::time::Instant::now();
        ctl.shutdown(choudoufu_live::frontdoor::plugin::proto::plugin::Empty {})
            .await
            .unwrap();
        t
    });
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(
            stopped_in.elapsed() < Duration::from_secs(5),
            "the plugin did not exit after Shutdown"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        stopped_in.elapsed() < Duration::from_secs(2),
        "exit took {:?} after Shutdown",
        stopped_in.elapsed()
    );
    let names: Vec<String> = receiver.spans().iter().map(|s| s.name.clone()).collect();
    assert!(
        names.iter().any(|n| n == "tfplugin6.Provider/GetMetadata"),
        "the gRPC call's span was sent before exit: {names:?}"
    );
}
