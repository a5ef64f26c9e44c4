//! The binary started as `terraform` or `tofu`: find the real program and become it, or become
//! `choudoufu-live run -- <real program> ARGS` when the root has opted in.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::error::ShimError;
use super::name::ShimName;
use super::next::{MARKER_ENV, Marker, Me, check_loop, real_program};
use super::route::{Route, route};
use crate::cut::{Mechanism, cut};

/// The variables a shim turns into `run`'s flags (a driver cannot pass them on the command line).
const RUN_FLAGS: &[(&str, &str)] = &[
    ("CHOUDOUFU_WAIT", "--wait"),
    ("CHOUDOUFU_HEARTBEAT", "--heartbeat"),
    ("CHOUDOUFU_FLUSH_TIMEOUT", "--flush-timeout"),
];

/// `run`'s flags from the variables that set them, each checked as a duration first (so a bad
/// value is named as the variable, never as a flag the driver did not write).
fn run_flags(get: impl Fn(&str) -> Option<OsString>) -> Result<Vec<String>, ShimError> {
    let mut flags = Vec::new();
    if cut(Mechanism::ShimRunFlags) {
        return Ok(flags);
    }
    for (var, flag) in RUN_FLAGS {
        let Some(value) = get(var).filter(|v| !v.is_empty()) else {
            continue;
        };
        let value = value.to_string_lossy().into_owned();
        if let Err(source) = humantime::parse_duration(&value) {
            return Err(ShimError::Duration { var, value, source });
        }
        flags.push(format!("{flag}={value}"));
    }
    Ok(flags)
}

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
    let cmd = match route(args, me.is_parent()) {
        Route::PassThrough(_) => {
            let mut cmd = Command::new(&real);
            cmd.args(args).env(MARKER_ENV, Marker::Exec(pid).value());
            cmd
        }
        Route::Run => {
            let mut cmd = Command::new(me.path());
            // Its own name, so a binary copied as `terraform` does not take itself for a shim again.
            cmd.arg0("choudoufu-live")
                .arg("run")
                .args(run_flags(|var| std::env::var_os(var))?)
                .arg("--")
                .arg(&real)
                .args(args)
                .env(MARKER_ENV, Marker::Child(pid).value());
            cmd
        }
    };
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_become_runs_flags_and_a_bad_one_is_named() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |var: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == var)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert_eq!(
            run_flags(env(&[
                ("CHOUDOUFU_WAIT", "10m"),
                ("CHOUDOUFU_FLUSH_TIMEOUT", "90s"),
                ("CHOUDOUFU_HEARTBEAT", "")
            ]))
            .unwrap(),
            ["--wait=10m", "--flush-timeout=90s"]
        );
        assert!(run_flags(env(&[])).unwrap().is_empty());
        let bad = run_flags(env(&[("CHOUDOUFU_WAIT", "soon")])).unwrap_err();
        assert!(
            bad.to_string()
                .starts_with("CHOUDOUFU_WAIT=soon is no duration"),
            "{bad}"
        );
    }
}
