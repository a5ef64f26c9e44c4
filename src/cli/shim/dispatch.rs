//! The binary started as `terraform` or `tofu`: find the real program and become it, or become
//! `choudoufu-live run -- <real program> ARGS` when the root has opted in.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::error::ShimError;
use super::name::ShimName;
use super::next::{MARKER_ENV, Marker, Me, check_loop, real_program};
use super::route::{Route, route};

/// The variables a shim turns into `run`'s flags (a driver cannot pass them on the command line).
const RUN_FLAGS: &[(&str, &str)] = &[
    ("CHOUDOUFU_WAIT", "--wait"),
    ("CHOUDOUFU_HEARTBEAT", "--heartbeat"),
    ("CHOUDOUFU_FLUSH_TIMEOUT", "--flush-timeout"),
];

/// The shim name this process was started by, if any.
pub fn called_as() -> Option<ShimName> {
    ShimName::from_arg0(&std::env::args_os().next()?)
}

/// Become the real program, or `run` around it; returns only when that cannot be started.
///
/// Nothing here starts the async runtime or reads the store: a command that passes through
/// costs one PATH search and one `exec`.
pub fn dispatch(name: ShimName) -> ShimError {
    let mut argv = std::env::args_os();
    let called = argv.next().unwrap_or_else(|| name.program().into());
    let args: Vec<OsString> = argv.collect();
    match prepare(name, &called, &args) {
        Ok(mut cmd) => {
            let program = cmd.get_program().into();
            ShimError::Exec {
                program,
                source: cmd.exec(),
            }
        }
        Err(e) => e,
    }
}

/// The command this shim becomes.
fn prepare(name: ShimName, called: &OsStr, args: &[OsString]) -> Result<Command, ShimError> {
    check_loop(name, called, std::env::var_os(MARKER_ENV).as_deref())?;
    let me = Me::current()?;
    let real = real_program(
        name,
        &me,
        std::env::var_os(name.env()),
        std::env::var_os("PATH"),
    )?;
    let pid = std::process::id();
    let cmd = match route(args) {
        Route::PassThrough(_) => {
            let mut cmd = Command::new(&real);
            cmd.args(args).env(MARKER_ENV, Marker::Exec(pid).value());
            cmd
        }
        Route::Run => {
            let mut cmd = Command::new(me.path());
            // Its own name, so a binary copied as `terraform` does not take itself for a shim again.
            cmd.arg0("choudoufu-live").arg("run");
            for (var, flag) in RUN_FLAGS {
                if let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty()) {
                    let mut arg = OsString::from(format!("{flag}="));
                    arg.push(value);
                    cmd.arg(arg);
                }
            }
            cmd.arg("--")
                .arg(&real)
                .args(args)
                .env(MARKER_ENV, Marker::Child(pid).value());
            cmd
        }
    };
    Ok(cmd)
}
