//! Which terraform commands a shim runs through `run`, and which it passes to the real program untouched.

use std::ffi::OsString;
use std::path::Path;

use crate::config::LIVE_FILE;
use crate::config::backend_s3::S3Backend;
use crate::cut::{Mechanism, cut};
use crate::run::TfCommand;

/// What a shim does with one command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `choudoufu-live run -- <real program> ARGS`.
    Run,
    /// The real program, untouched, for this reason.
    PassThrough(Untouched),
}

/// Why a command passes through untouched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Untouched {
    /// The root (`-chdir`, else the current folder) has no `live.hcl` and no `backend "s3"`: it has not opted in.
    NotLive,
    /// The command never reads or writes state.
    Stateless,
    /// `choudoufu-live run` started the shim as its terraform: the run serves the state already.
    InsideRun,
}

/// The route of `args` (the words after the program's name), run in the current folder;
/// `inside_run` when `choudoufu-live run` started this shim as its terraform.
pub fn route(args: &[OsString], inside_run: bool) -> Route {
    let words: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let cmd = TfCommand::parse(&words);
    if cut(Mechanism::ShimRun) {
        return Route::PassThrough(Untouched::NotLive);
    }
    if inside_run && !cut(Mechanism::ShimInsideRun) {
        return Route::PassThrough(Untouched::InsideRun);
    }
    if !is_live(&cmd.dir()) && !cut(Mechanism::ShimPassThrough) {
        return Route::PassThrough(Untouched::NotLive);
    }
    if stateless(&cmd) && !cut(Mechanism::ShimStateless) {
        return Route::PassThrough(Untouched::Stateless);
    }
    Route::Run
}

/// The subcommands that never read or write state (terraform 1.11 and tofu 1.x).
pub const STATELESS: &[&str] = &[
    "version", "fmt", "validate", "get", "test", "login", "logout", "metadata", "modules", "help",
];

/// Whether terraform runs this command without configuring the backend.
fn stateless(cmd: &TfCommand) -> bool {
    let help = |a: &String| matches!(a.as_str(), "-help" | "-h" | "--help");
    if cmd.global.iter().any(help) || cmd.args.iter().any(help) {
        return true;
    }
    let first = cmd
        .args
        .iter()
        .find(|a| !a.starts_with('-'))
        .map(String::as_str);
    match cmd.sub() {
        // `terraform`, `terraform -version`: help or the version.
        None => true,
        Some(sub) if STATELESS.contains(&sub) => true,
        Some("providers") => matches!(first, Some("lock" | "mirror")),
        Some("workspace") => first == Some("show"),
        Some("init") => cmd
            .args
            .iter()
            .any(|a| matches!(a.as_str(), "-backend=false" | "--backend=false")),
        Some(_) => false,
    }
}

/// Whether `dir` is a root that has opted in: it holds `live.hcl`, or its backend is `s3`
/// (served by `run`'s S3 door, which refuses a root whose stock state was never adopted).
pub fn is_live(dir: &Path) -> bool {
    dir.join(LIVE_FILE).is_file()
        || (!cut(Mechanism::ShimS3) && matches!(S3Backend::find(dir), Ok(Some(_))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route_in(dir: &Path, words: &str) -> Route {
        let chdir = format!("-chdir={}", dir.display());
        let mut args: Vec<OsString> = vec![chdir.into()];
        args.extend(words.split_whitespace().map(OsString::from));
        route(&args, false)
    }

    #[test]
    fn only_state_commands_of_live_roots_go_through_run() {
        let live = tempfile::tempdir().unwrap();
        std::fs::write(live.path().join(LIVE_FILE), "live {}\n").unwrap();
        let plain = tempfile::tempdir().unwrap();
        for words in [
            "apply -auto-approve",
            "plan -out=p",
            "output -json",
            "show -json p",
            "init",
            "console",
            "graph",
            "providers",
            "providers schema -json",
            "workspace list",
            "state list",
        ] {
            assert_eq!(route_in(live.path(), words), Route::Run, "{words}");
            assert_eq!(
                route_in(plain.path(), words),
                Route::PassThrough(Untouched::NotLive),
                "{words}"
            );
        }
        for words in [
            "",
            "-version",
            "version -json",
            "fmt -check",
            "validate",
            "get",
            "test",
            "providers lock",
            "providers mirror d",
            "workspace show",
            "init -backend=false",
            "apply -help",
            "plan -h",
            "metadata functions -json",
        ] {
            assert_eq!(
                route_in(live.path(), words),
                Route::PassThrough(Untouched::Stateless),
                "{words}"
            );
        }
        assert!(is_live(live.path()) && !is_live(plain.path()));
        let chdir = format!("-chdir={}", live.path().display());
        assert_eq!(
            route(&[chdir.into(), "apply".into()], true),
            Route::PassThrough(Untouched::InsideRun)
        );
    }
}
