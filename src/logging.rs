//! Log output: hclog JSON on stderr in plugin mode (what a go-plugin host reads), human text in the CLI.

use std::fmt;
use std::io::IsTerminal;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The environment variable that sets the log level (`warn`, `info`, `debug`, or a filter).
pub const LOG_ENV: &str = "CHOUDOUFU_LOG";

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Human,
    /// One JSON object per line.
    Json,
    /// hclog JSON (`@level`, `@message`, `@timestamp`), as go-plugin hosts expect.
    Hclog,
}

fn filter(default: &str) -> EnvFilter {
    EnvFilter::try_from_env(LOG_ENV).unwrap_or_else(|_| EnvFilter::new(default))
}

/// Install the process-wide logger writing to stderr, and OTLP export when `OTEL_*` asks for it.
///
/// Call it inside the async runtime (OTLP export runs its client there); `CHOUDOUFU_LOG` sets
/// what reaches stderr only, never what is exported (see `telemetry`).
pub fn init(format: LogFormat) {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    type Boxed = Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync>;
    let base = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour(std::io::stderr().is_terminal()));
    let stderr: Boxed = match format {
        LogFormat::Human => base.with_filter(filter("warn")).boxed(),
        LogFormat::Json => base.json().with_filter(filter("warn")).boxed(),
        LogFormat::Hclog => base.event_format(Hclog).with_filter(filter("info")).boxed(),
    };
    let mut layers = vec![stderr];
    if let Some(export) = crate::telemetry::layer() {
        layers.push(export);
    }
    let _ = tracing_subscriber::registry().with(layers).try_init();
}

/// Whether a stream may carry ANSI colour: only a terminal, and never under `NO_COLOR` or terraform's `-no-color`.
///
/// `-no-color` counts on the command line and in `TF_CLI_ARGS` or `TF_CLI_ARGS_<command>`,
/// where terraform itself takes it from.
pub fn colour(terminal: bool) -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    colour_for(terminal, &args, |k| std::env::var(k).ok())
}

/// [`colour`] for these arguments (after the program's name) and this environment.
pub fn colour_for(terminal: bool, args: &[String], env: impl Fn(&str) -> Option<String>) -> bool {
    if crate::cut::cut(crate::cut::Mechanism::NoColour) {
        return true;
    }
    if !terminal || env("NO_COLOR").is_some_and(|v| !v.is_empty()) {
        return false;
    }
    let mut words: Vec<String> = args.to_vec();
    let mut vars = vec!["TF_CLI_ARGS".to_string()];
    if let Some(sub) = terraform_subcommand(args) {
        vars.push(format!("TF_CLI_ARGS_{sub}"));
    }
    for var in vars {
        if let Some(value) = env(&var) {
            words.extend(value.split_whitespace().map(str::to_string));
        }
    }
    !words.iter().any(|w| no_color_flag(w))
}

/// Whether `word` is terraform's `-no-color` (or `-no-color=true`).
fn no_color_flag(word: &str) -> bool {
    let body = word.trim_matches(|c| c == '"' || c == '\'');
    let Some(body) = body.strip_prefix("--").or_else(|| body.strip_prefix('-')) else {
        return false;
    };
    matches!(body, "no-color" | "no-color=true")
}

/// The terraform subcommand of `run [OPTIONS] [--] PROGRAM [GLOBAL] SUBCOMMAND ...`, if these are such arguments.
fn terraform_subcommand(args: &[String]) -> Option<&str> {
    let after = match args.iter().position(|a| a == "--") {
        Some(i) => &args[i + 1..],
        None => {
            let run = args.iter().position(|a| a == "run")?;
            let rest = &args[run + 1..];
            let program = rest.iter().position(|a| !a.starts_with('-'))?;
            &rest[program..]
        }
    };
    let (_program, rest) = after.split_first()?;
    rest.iter()
        .find(|a| !a.starts_with('-'))
        .map(String::as_str)
}

/// hclog's JSON line format.
pub struct Hclog;

struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(key(field), Value::String(value.to_string()));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(key(field), Value::Bool(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(key(field), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(key(field), Value::from(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(key(field), Value::String(format!("{value:?}")));
    }
}

fn key(field: &Field) -> String {
    match field.name() {
        "message" => "@message".to_string(),
        other => other.to_string(),
    }
}

/// Now as hclog writes it: microseconds, UTC (`2006-01-02T15:04:05.000000Z07:00` in Go's layout).
pub fn hclog_timestamp() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.microsecond()
    )
}

fn level(l: &Level) -> &'static str {
    match *l {
        Level::TRACE => "trace",
        Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warn",
        Level::ERROR => "error",
    }
}

impl<S, N> FormatEvent<S, N> for Hclog
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        let mut line = fields.0;
        line.insert(
            "@level".into(),
            Value::String(level(event.metadata().level()).into()),
        );
        line.entry("@message")
            .or_insert(Value::String(String::new()));
        line.insert("@timestamp".into(), Value::String(hclog_timestamp()));
        line.insert("@module".into(), Value::String("choudoufu-live".into()));
        let text = serde_json::to_string(&Value::Object(line)).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

#[cfg(test)]
mod tests {
    use super::colour_for;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    fn colour(terminal: bool, line: &str, env: &[(&str, &str)]) -> bool {
        colour_for(terminal, &words(line), |k| {
            env.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        let apply = "run -- terraform apply";
        assert!(colour(true, apply, &[]));
        assert!(!colour(false, apply, &[]));
        assert!(!colour(true, apply, &[("NO_COLOR", "1")]));
        assert!(colour(true, apply, &[("NO_COLOR", "")]));
        assert!(!colour(true, "run -- terraform apply -no-color", &[]));
        assert!(!colour(
            true,
            "run -- terraform -chdir=x plan --no-color",
            &[]
        ));
        assert!(!colour(
            true,
            apply,
            &[("TF_CLI_ARGS", "-input=false -no-color")]
        ));
        assert!(!colour(true, apply, &[("TF_CLI_ARGS_apply", "-no-color")]));
        assert!(colour(true, apply, &[("TF_CLI_ARGS_plan", "-no-color")]));
        assert!(!colour(
            true,
            "run terraform -chdir=x plan",
            &[("TF_CLI_ARGS_plan", "-no-color")]
        ));
        assert!(colour(
            true,
            "records ls",
            &[("TF_CLI_ARGS_plan", "-no-color")]
        ));
        assert!(!colour(true, "records ls", &[("TF_CLI_ARGS", "-no-color")]));
    }
}
