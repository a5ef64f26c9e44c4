//! `run`'s own flags (before `--`), as clap reads them.

use std::time::Duration;

use clap::Args;

use thiserror::Error;

use crate::engine::cone::{RefreshMode, RefreshModeError};

/// The variable a shim (or any caller) sets `--refresh` with.
pub const REFRESH_ENV: &str = "CHOUDOUFU_REFRESH";

/// A `CHOUDOUFU_REFRESH` that names no refresh mode.
#[derive(Debug, Error)]
#[error("{REFRESH_ENV}={value}: {source}; nothing was run")]
pub struct RefreshEnvError {
    /// The variable's value.
    pub value: String,
    /// Why it names no mode.
    #[source]
    pub source: RefreshModeError,
}

/// How a plan refreshes: `--refresh`, else `CHOUDOUFU_REFRESH` (`env`; empty is unset), else the live block's `refresh` (`config`).
pub fn refresh_mode(
    flag: Option<RefreshSwitch>,
    env: Option<String>,
    config: RefreshMode,
) -> Result<RefreshMode, RefreshEnvError> {
    if let Some(flag) = flag {
        return Ok(flag.into());
    }
    match env.filter(|v| !v.trim().is_empty()) {
        Some(value) => {
            RefreshMode::parse(&value).map_err(|source| RefreshEnvError { value, source })
        }
        None => Ok(config),
    }
}

/// How long `run` keeps trying to write the state terraform could not save, unless `--flush-timeout` says otherwise.
pub const DEFAULT_FLUSH_TIMEOUT: Duration = Duration::from_secs(300);
/// How often `run` proves it is alive while it holds claims, unless `--heartbeat` says otherwise.
pub const DEFAULT_RUN_HEARTBEAT: Duration = Duration::from_secs(5);

fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("{e}: give a duration such as 90s, 10m or 1h30m"))
}

/// `--provider-door`: whether `run` starts the providers itself and puts its door between them and terraform.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DoorSwitch {
    /// Through the door.
    On,
    /// As terraform starts them.
    Off,
}

/// `--refresh`: what a plan through `run` reads from the cloud.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RefreshSwitch {
    /// Every resource, as terraform does alone.
    Full,
    /// Only the change cone: what the plan changes, what depends on it, what it reads, and every record older than `refresh_max_age`.
    Cone,
}

impl From<RefreshSwitch> for RefreshMode {
    fn from(s: RefreshSwitch) -> RefreshMode {
        match s {
            RefreshSwitch::Full => RefreshMode::Full,
            RefreshSwitch::Cone => RefreshMode::Cone,
        }
    }
}

/// Run terraform or tofu with the state served from the estate's records.
///
/// Starts a loopback HTTP backend for this one run, points the root's empty
/// `backend "http" {}` at it through TF_HTTP_ADDRESS, and runs the command with its
/// input and output passed through. An `apply` or `destroy` is planned first, approved
/// as terraform asks, and every change of the plan is claimed before terraform applies
/// it, so no two runs make the same change at once. For plan, apply, destroy, refresh
/// and import, `run` starts the root's locked providers itself, each checked against the
/// lock file's hashes, and hands terraform a proxy for each (--provider-door), so a killed
/// run takes terraform and every provider call with it. Prints what was written and every
/// named conflict. When the record store does not answer and terraform cannot save its
/// state, `run` keeps that state and writes it once terraform exits, conditionally on the
/// versions it read, for up to --flush-timeout; past that, it leaves it in a recovery file
/// for `records recover`. Exits with terraform's status, or 3 when a saved plan's changes
/// moved, 4 when a record conflicted, 5 when another live run holds one of the plan's
/// changes, 6 when the state terraform could not save is in a recovery file.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// When another live run holds one of the plan's changes (or a resource they depend on), wait up to DURATION for it (e.g. 10m), then plan again; without it, stop at once with status 5.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub wait: Option<Duration>,

    /// How often this run's heartbeat proves it alive while it holds claims; a killed run's claims are taken over after three missed beats.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "5s")]
    pub heartbeat: Duration,

    /// When the record store does not answer and terraform could not save its state, keep trying to write that state for up to DURATION after terraform exits; then leave it in a recovery file (exit status 6) for `records recover`.
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "5m")]
    pub flush_timeout: Duration,

    /// `off`: let terraform start its providers itself, as without `run` (a killed apply then loses the records of what terraform created since its last save). The default is the root's live block `provider_door`, else on.
    #[arg(long, value_name = "on|off", value_enum)]
    pub provider_door: Option<DoorSwitch>,

    /// `cone`: a plan refreshes only what it changes, what depends on it, what it reads, and every record not refreshed for `refresh_max_age` (live block, default 24h); every other resource is answered from its record, and its drift is not seen. `full` refreshes every resource. The default is the root's live block `refresh`, else full. Terraform's own -refresh=false and -refresh-only keep their meaning.
    #[arg(long, value_name = "full|cone", value_enum)]
    pub refresh: Option<RefreshSwitch>,

    /// The command and its arguments, after `--`: e.g. `-- terraform apply -auto-approve`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_then_the_variable_then_the_live_block() {
        let full = RefreshMode::Full;
        assert_eq!(
            refresh_mode(
                Some(RefreshSwitch::Full),
                Some("cone".into()),
                RefreshMode::Cone
            )
            .unwrap(),
            full
        );
        assert_eq!(
            refresh_mode(None, Some("cone".into()), full).unwrap(),
            RefreshMode::Cone
        );
        assert_eq!(
            refresh_mode(None, Some(String::new()), RefreshMode::Cone).unwrap(),
            RefreshMode::Cone
        );
        assert_eq!(refresh_mode(None, None, full).unwrap(), full);
        let e = refresh_mode(None, Some("some".into()), full).unwrap_err();
        assert!(e.to_string().starts_with("CHOUDOUFU_REFRESH=some: "), "{e}");
    }
}
