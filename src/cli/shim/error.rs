//! What a shim, or the `shim` command, reports when it cannot go on.

use std::path::PathBuf;

use thiserror::Error;

/// Why a shim could not run the real program, or `shim DIR` could not write the shims.
#[derive(Debug, Error)]
pub enum ShimError {
    /// The binary's own path could not be read.
    #[error("cannot find this binary's own path: {0}")]
    OwnPath(#[source] std::io::Error),
    /// No program of that name on PATH but the shim itself.
    #[error(
        "no {program} on PATH other than this shim ({shim}): put the real {program} on PATH after the shim's folder, or name it in {env}"
    )]
    NotFound {
        /// terraform or tofu.
        program: &'static str,
        /// The shim's binary.
        shim: PathBuf,
        /// The variable that names the real program.
        env: &'static str,
    },
    /// The variable names the shim itself.
    #[error(
        "{env}={named} is this shim itself ({shim}), not the real {program}: a loop, refused; name the real {program} there"
    )]
    NamesItself {
        /// The variable.
        env: &'static str,
        /// What it names.
        named: PathBuf,
        /// The shim's binary.
        shim: PathBuf,
        /// terraform or tofu.
        program: &'static str,
    },
    /// A shim started this shim as its real program.
    #[error(
        "{called} is a choudoufu-live shim, and the shim that ran it took it for the real {program}: a loop, refused; put the real {program} on PATH after the shim's folder, or name it in {env}"
    )]
    Loop {
        /// The name this shim was started by.
        called: PathBuf,
        /// terraform or tofu.
        program: &'static str,
        /// The variable that names the real program.
        env: &'static str,
    },
    /// The program could not be started.
    #[error("cannot start {program}: {source}")]
    Exec {
        /// The program.
        program: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A variable that sets one of `run`'s durations holds none.
    #[error("{var}={value} is no duration ({source}): give one such as 90s, 10m or 1h30m")]
    Duration {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// Why it is none.
        #[source]
        source: humantime::DurationError,
    },
    /// A file of that name is in the folder and is not a shim of this binary.
    #[error(
        "{0} exists and is not a choudoufu-live shim: nothing was written; give shim a folder of its own"
    )]
    Occupied(PathBuf),
    /// The folder or a link could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}
