//! The call log: one JSON line per call and phase, appended (O_APPEND, 0600) before the reply.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use thiserror::Error;

/// The variable naming the call log; without it nothing is logged.
pub const CALL_LOG_ENV: &str = "CDFTEST_CALL_LOG";

/// Where a call stands when its line is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The call arrived.
    Start,
    /// The call is about to be answered.
    End,
    /// The call was stopped (StopProvider, or the caller went away) before its answer.
    Cancelled,
}

/// The call log could not be written: the call is answered with an error, never silently unlogged.
#[derive(Debug, Error)]
#[error("cannot append to the call log {path}: {source}")]
pub struct CallLogError {
    /// The log file.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}

impl From<CallLogError> for tonic::Status {
    fn from(e: CallLogError) -> Self {
        tonic::Status::internal(e.to_string())
    }
}

/// One line of the log.
#[derive(Serialize)]
struct Line<'a> {
    pid: u32,
    /// Seconds since the Unix epoch (comparable across processes).
    t: f64,
    rpc: &'a str,
    #[serde(rename = "type")]
    type_name: Option<&'a str>,
    name: Option<&'a str>,
    phase: Phase,
}

/// The call log of this process (none when `CDFTEST_CALL_LOG` is unset).
#[derive(Clone, Debug, Default)]
pub struct CallLog {
    path: Option<Arc<PathBuf>>,
    lock: Arc<Mutex<()>>,
}

impl CallLog {
    /// The log `CDFTEST_CALL_LOG` names.
    pub fn from_env() -> CallLog {
        CallLog {
            path: std::env::var_os(CALL_LOG_ENV)
                .filter(|p| !p.is_empty())
                .map(|p| Arc::new(PathBuf::from(p))),
            lock: Arc::default(),
        }
    }

    /// Append one line, in one write, before the call goes on.
    pub fn note(
        &self,
        rpc: &str,
        type_name: Option<&str>,
        name: Option<&str>,
        phase: Phase,
    ) -> Result<(), CallLogError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or_default();
        let line = Line {
            pid: std::process::id(),
            t,
            rpc,
            type_name,
            name,
            phase,
        };
        let mut bytes = serde_json::to_vec(&line).map_err(|e| CallLogError {
            path: path.to_path_buf(),
            source: std::io::Error::other(e),
        })?;
        bytes.push(b'\n');
        let _one_at_a_time = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path.as_path())
            .and_then(|mut f| f.write_all(&bytes))
            .map_err(|source| CallLogError {
                path: path.to_path_buf(),
                source,
            })
    }

    /// Note the start of a call; the guard notes `cancelled` if the call is dropped before [`Call::end`].
    pub fn start(
        &self,
        rpc: &'static str,
        type_name: Option<&str>,
        name: Option<&str>,
    ) -> Result<Call, CallLogError> {
        self.note(rpc, type_name, name, Phase::Start)?;
        Ok(Call {
            log: self.clone(),
            rpc,
            type_name: type_name.map(str::to_string),
            name: name.map(str::to_string),
            open: true,
        })
    }
}

/// A call under way: its end (or cancellation) is logged once.
pub struct Call {
    log: CallLog,
    rpc: &'static str,
    type_name: Option<String>,
    name: Option<String>,
    open: bool,
}

impl Call {
    /// The thing's name, once the call has read it.
    pub fn named(&mut self, name: Option<&str>) {
        if self.name.is_none() {
            self.name = name.map(str::to_string);
        }
    }

    fn finish(&mut self, phase: Phase) -> Result<(), CallLogError> {
        self.open = false;
        self.log.note(
            self.rpc,
            self.type_name.as_deref(),
            self.name.as_deref(),
            phase,
        )
    }

    /// Note the end of the call, before its answer goes out.
    pub fn end(mut self) -> Result<(), CallLogError> {
        self.finish(Phase::End)
    }

    /// Note that the call was stopped before its answer.
    pub fn cancelled(mut self) -> Result<(), CallLogError> {
        self.finish(Phase::Cancelled)
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if self.open {
            // The caller went away mid-call: nothing to answer, so a failed line has nowhere to go.
            if let Err(e) = self.finish(Phase::Cancelled) {
                eprintln!("terraform-provider-cdftest: {e}");
            }
        }
    }
}
