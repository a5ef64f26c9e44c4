//! Span and metric export over OTLP/gRPC: set up from the `OTEL_*` variables, flushed at exit.

use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;

use super::scope::SERVICE;

/// How long the CLI waits at exit for the last spans and metrics to be sent.
pub const EXIT_FLUSH: Duration = Duration::from_secs(5);

/// How long plugin mode waits after Shutdown for the last spans and metrics (go-plugin kills at 2 s).
pub const PLUGIN_FLUSH: Duration = Duration::from_millis(400);

const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
const METRICS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";

/// Which signals the environment asks to export.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wanted {
    /// Spans, over OTLP/gRPC.
    pub traces: bool,
    /// Metrics, over OTLP/gRPC.
    pub metrics: bool,
}

impl Wanted {
    /// Nothing to export.
    pub fn none(&self) -> bool {
        !self.traces && !self.metrics
    }
}

/// What the `OTEL_*` variables (read through `get`) ask for.
pub fn wanted_from(get: &dyn Fn(&str) -> Option<String>) -> Wanted {
    let set = |k: &str| get(k).is_some_and(|v| !v.trim().is_empty());
    let off = |k: &str| get(k).is_some_and(|v| v.trim().eq_ignore_ascii_case("none"));
    if get("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Wanted::default();
    }
    Wanted {
        traces: (set(ENDPOINT) || set(TRACES_ENDPOINT)) && !off("OTEL_TRACES_EXPORTER"),
        metrics: (set(ENDPOINT) || set(METRICS_ENDPOINT)) && !off("OTEL_METRICS_EXPORTER"),
    }
}

/// What this process's environment asks for.
pub fn wanted() -> Wanted {
    wanted_from(&|k| std::env::var(k).ok())
}

struct Providers {
    traces: Option<SdkTracerProvider>,
    metrics: Option<SdkMeterProvider>,
}

static PROVIDERS: Mutex<Option<Providers>> = Mutex::new(None);

fn resource() -> Resource {
    let builder = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_some() {
        builder.build()
    } else {
        builder.with_service_name(SERVICE).build()
    }
}

fn warn(what: &str) {
    eprintln!("choudoufu-live: telemetry: {what}; continuing without it");
}

/// Set up export as the environment asks and return the tracing layer that feeds it.
///
/// `None` (and nothing set up) when no OTLP endpoint is set. Must be called inside a
/// Tokio runtime, which must outlive [`shutdown`]: the gRPC client runs on it.
pub fn layer<S>() -> Option<Box<dyn Layer<S> + Send + Sync + 'static>>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let wanted = wanted();
    if wanted.none() {
        return None;
    }
    if tokio::runtime::Handle::try_current().is_err() {
        warn("OTLP export needs the async runtime, which is not running yet");
        return None;
    }
    if let Ok(p) = std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL")
        && !p.trim().eq_ignore_ascii_case("grpc")
    {
        warn(&format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={p} is not supported, only grpc; exporting over gRPC"
        ));
    }
    let resource = resource();
    let mut providers = Providers {
        traces: None,
        metrics: None,
    };
    if wanted.metrics {
        match opentelemetry_otlp::MetricExporter::builder()
            .with_tonic()
            .build()
        {
            Ok(exporter) => {
                let provider = SdkMeterProvider::builder()
                    .with_periodic_exporter(exporter)
                    .with_resource(resource.clone())
                    .build();
                opentelemetry::global::set_meter_provider(provider.clone());
                providers.metrics = Some(provider);
            }
            Err(e) => warn(&format!("cannot set up the OTLP metric exporter: {e}")),
        }
    }
    let mut layer = None;
    if wanted.traces {
        match opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .build()
        {
            Ok(exporter) => {
                let provider = SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(resource)
                    .build();
                let tracer = provider.tracer(SERVICE);
                // Only this crate's spans: never the exporter's own gRPC client (a feedback
                // loop), never the SDKs' internals, and no log events (their text stays on stderr).
                let only_ours = filter_fn(|meta| {
                    meta.is_span()
                        && meta.target().starts_with("choudoufu_live")
                        && *meta.level() <= tracing::Level::INFO
                });
                layer = Some(
                    tracing_opentelemetry::layer()
                        .with_tracer(tracer)
                        .with_filter(only_ours)
                        .boxed(),
                );
                providers.traces = Some(provider);
            }
            Err(e) => warn(&format!("cannot set up the OTLP span exporter: {e}")),
        }
    }
    if providers.traces.is_none() && providers.metrics.is_none() {
        return None;
    }
    if let Ok(mut slot) = PROVIDERS.lock() {
        *slot = Some(providers);
    }
    // A layer that does nothing when only metrics are exported.
    Some(layer.unwrap_or_else(|| tracing_subscriber::layer::Identity::new().boxed()))
}

/// Whether export was set up in this process.
pub fn active() -> bool {
    PROVIDERS.lock().map(|p| p.is_some()).unwrap_or(false)
}

/// Send the last spans and metrics and stop the exporters, waiting at most `budget`.
///
/// Call it from outside the runtime's worker threads (or in `spawn_blocking`), while the
/// runtime still runs. A second call does nothing.
pub fn shutdown(budget: Duration) {
    let Some(providers) = PROVIDERS.lock().ok().and_then(|mut p| p.take()) else {
        return;
    };
    let (done, finished) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .name("otel-shutdown".into())
        .spawn(move || {
            if let Some(t) = &providers.traces {
                let _ = t.shutdown_with_timeout(budget);
            }
            if let Some(m) = &providers.metrics {
                let _ = m.shutdown_with_timeout(budget);
            }
            let _ = done.send(());
        });
    if worker.is_ok() && finished.recv_timeout(budget).is_err() {
        warn("the last spans and metrics could not be sent in time");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn nothing_is_exported_without_an_endpoint() {
        assert!(wanted_from(&env(&[])).none());
        assert!(wanted_from(&env(&[(ENDPOINT, "")])).none());
        assert!(wanted_from(&env(&[("OTEL_SERVICE_NAME", "x")])).none());
        assert!(
            wanted_from(&env(&[
                (ENDPOINT, "http://127.0.0.1:4317"),
                ("OTEL_SDK_DISABLED", "true")
            ]))
            .none()
        );
    }

    #[test]
    fn endpoints_choose_signals() {
        let both = wanted_from(&env(&[(ENDPOINT, "http://127.0.0.1:4317")]));
        assert_eq!(
            both,
            Wanted {
                traces: true,
                metrics: true
            }
        );
        let traces = wanted_from(&env(&[(TRACES_ENDPOINT, "http://127.0.0.1:4317")]));
        assert_eq!(
            traces,
            Wanted {
                traces: true,
                metrics: false
            }
        );
        let no_metrics = wanted_from(&env(&[
            (ENDPOINT, "http://127.0.0.1:4317"),
            ("OTEL_METRICS_EXPORTER", "none"),
        ]));
        assert_eq!(
            no_metrics,
            Wanted {
                traces: true,
                metrics: false
            }
        );
    }

    #[test]
    fn no_layer_and_no_providers_without_an_endpoint() {
        if !wanted().none() {
            return; // the environment running the tests asks for export
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _in = rt.enter();
        assert!(layer::<tracing_subscriber::Registry>().is_none());
        assert!(!active());
    }
}
