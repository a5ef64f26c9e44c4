//! `terraform show -json` of a plan that is still being made: started beside the plan process, held before it reads anything, let go once the plan is written.
//!
//! Terraform reads its CLI configuration first, before it looks at its arguments. The process
//! started ahead reads it from a FIFO, so it waits there, and its start-up (loading the program,
//! tens of milliseconds) is spent while the plan runs instead of after it. Once the plan is
//! written, the FIFO carries the very file terraform would have read itself; a plain file with
//! the same bytes takes the FIFO's name first, for terraform reads it more than once. Where that
//! file cannot be told for certain (see [`effective_cli_config`]), `show` starts after the plan.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use thiserror::Error;

use super::error::RunError;
use super::terraform::{PlanDir, Terraform};
use crate::cut::{Mechanism, cut};
use crate::engine::plan::Plan;
use crate::frontdoor::provider::launch::die_with_parent;

/// How long the process started ahead may take to reach its CLI configuration once the plan is written.
const REACH: Duration = Duration::from_secs(5);

/// The environment variable that names terraform's (and tofu's) CLI configuration file.
const CONFIG_ENV: &str = "TF_CLI_CONFIG_FILE";

/// Why the `show` started ahead could not be let go (it is stopped, and `show` runs after the plan instead).
#[derive(Debug, Error)]
pub enum ShowAheadError {
    /// The process ended, or did not reach its CLI configuration in time.
    #[error("the show started ahead did not wait for its CLI configuration")]
    NotWaiting,
    /// Writing its CLI configuration, or reading its output, failed.
    #[error("the show started ahead could not be let go: {0}")]
    Io(#[from] std::io::Error),
    /// The task writing the configuration died.
    #[error("the show started ahead could not be let go: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// A `show -json` started before its plan was written, waiting for its CLI configuration; dropped before it is let go, it is killed.
pub struct ShowAhead {
    child: tokio::process::Child,
    fifo: PathBuf,
    config: Vec<u8>,
}

/// The CLI configuration `program` reads itself, given the environment (`var`): its bytes and whether it is JSON; none when it cannot be told for certain.
///
/// - [`CONFIG_ENV`] (or, for terraform, `TERRAFORM_CONFIG`) set to an absolute path: that file
///   (a missing one reads as empty, as terraform reads it); a relative path: none.
/// - Else, for terraform only: `$HOME/.terraformrc`, when `$HOME/.terraform.d` holds no
///   `*.tfrc` files, which terraform would merge in.
pub fn effective_cli_config(
    program: &str,
    var: impl Fn(&str) -> Option<String>,
) -> Option<(Vec<u8>, bool)> {
    let terraform = Path::new(program)
        .file_name()
        .is_some_and(|n| n == "terraform");
    let named = var(CONFIG_ENV)
        .filter(|v| !v.is_empty())
        .or_else(|| terraform.then(|| var("TERRAFORM_CONFIG")).flatten())
        .filter(|v| !v.is_empty());
    let path = match named {
        Some(named) => PathBuf::from(named),
        None if terraform => {
            let home = PathBuf::from(var("HOME").filter(|h| !h.is_empty())?);
            if merges_config_dir(&home.join(".terraform.d"))? {
                return None;
            }
            home.join(".terraformrc")
        }
        None => return None,
    };
    if !path.is_absolute() {
        return None;
    }
    let json = path.extension().is_some_and(|e| e == "json");
    match std::fs::read(&path) {
        Ok(bytes) => Some((bytes, json)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some((Vec::new(), json)),
        Err(_) => None,
    }
}

/// Whether terraform merges files of its CLI configuration folder `dir` in (`*.tfrc`, `*.tfrc.json`); none when it cannot be read.
fn merges_config_dir(dir: &Path) -> Option<bool> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(false),
        Err(_) => return None,
    };
    for entry in entries {
        let name = entry.ok()?.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".tfrc") || name.ends_with(".tfrc.json") {
            return Some(true);
        }
    }
    Some(false)
}

impl Terraform {
    /// Start `show -json` of `plan` (a file in `dir` that a plan is about to write), held until [`Terraform::show_started`]; none when its CLI configuration cannot be told for certain or the process cannot be started.
    pub fn show_ahead(&self, dir: &PlanDir, plan: &Path) -> Option<ShowAhead> {
        if cut(Mechanism::ShowAhead) {
            return None;
        }
        if !plan.is_absolute() {
            return None;
        }
        let (config, json) = effective_cli_config(&self.program, |k| std::env::var(k).ok())?;
        let fifo = dir.file(if json { "cli.tfrc.json" } else { "cli.tfrc" });
        let _ = std::fs::remove_file(&fifo);
        if let Err(e) = nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU) {
            tracing::debug!(error = %e, "show -json starts after the plan: no FIFO");
            return None;
        }
        let mut cmd = self.show_command(plan);
        cmd.env(CONFIG_ENV, &fifo)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // A run killed outright does not leave it waiting on the FIFO.
        die_with_parent(&mut cmd, Signal::SIGKILL);
        match cmd.spawn() {
            Ok(child) => Some(ShowAhead {
                child,
                fifo,
                config,
            }),
            Err(e) => {
                tracing::debug!(error = %e, "show -json starts after the plan");
                None
            }
        }
    }

    /// The plan at `plan`, read by the `show` started ahead (`ahead`) when there is one and it can be let go, else by a `show -json` started now.
    pub async fn show_started(
        &self,
        ahead: Option<ShowAhead>,
        plan: &Path,
    ) -> Result<Plan, RunError> {
        if let Some(ahead) = ahead {
            match ahead.let_go().await {
                Ok(out) => {
                    tracing::debug!("show -json, started ahead, read the plan");
                    return self.shown(plan, out);
                }
                Err(e) => tracing::debug!(error = %e, "show -json starts now"),
            }
        }
        self.show_json(plan).await
    }
}

impl ShowAhead {
    /// Write its CLI configuration to the FIFO it waits on, and wait for it to end.
    async fn let_go(mut self) -> Result<std::process::Output, ShowAheadError> {
        let started = Instant::now();
        // Opened without waiting: ENXIO until terraform has opened its end.
        let file = loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(nix::libc::O_NONBLOCK)
                .open(&self.fifo)
            {
                Ok(file) => break file,
                Err(e) if e.raw_os_error() == Some(nix::libc::ENXIO) => {
                    if self.child.try_wait()?.is_some() || started.elapsed() > REACH {
                        return Err(ShowAheadError::NotWaiting);
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Err(e) => return Err(e.into()),
            }
        };
        // Terraform may open its CLI configuration again: a file with the same bytes takes the
        // FIFO's name before they are written, so that any later open reads that file.
        let config = std::mem::take(&mut self.config);
        let fifo = self.fifo.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            use nix::fcntl::{FcntlArg, OFlag, fcntl};
            let mut plain = fifo.clone().into_os_string();
            plain.push(".file");
            let plain = PathBuf::from(plain);
            let _ = std::fs::remove_file(&plain);
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&plain)?
                .write_all(&config)?;
            std::fs::rename(&plain, &fifo)?;
            fcntl(&file, FcntlArg::F_SETFL(OFlag::empty())).map_err(std::io::Error::from)?;
            let mut file = file;
            // Closed at the end of this block: terraform reads to its end.
            file.write_all(&config)
        })
        .await??;
        Ok(self.child.wait_with_output().await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn a_named_file_is_read_as_terraform_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cli.tfrc");
        std::fs::write(&file, "plugin_cache_dir = \"/x\"\n").unwrap();
        let named = file.to_string_lossy().to_string();
        let got = effective_cli_config("terraform", env(&[(CONFIG_ENV, &named)]));
        assert_eq!(got, Some((b"plugin_cache_dir = \"/x\"\n".to_vec(), false)));
        // tofu honours the same variable.
        let got = effective_cli_config("/usr/bin/tofu", env(&[(CONFIG_ENV, &named)]));
        assert!(got.is_some());
        // A missing file reads as empty; a JSON one is said to be JSON.
        let missing = dir
            .path()
            .join("none.tfrc.json")
            .to_string_lossy()
            .to_string();
        let got = effective_cli_config("terraform", env(&[(CONFIG_ENV, &missing)]));
        assert_eq!(got, Some((Vec::new(), true)));
        // TERRAFORM_CONFIG is terraform's older name for it.
        let got = effective_cli_config("terraform", env(&[("TERRAFORM_CONFIG", &named)]));
        assert!(got.is_some());
    }

    #[test]
    fn what_cannot_be_told_for_certain_starts_show_after_the_plan() {
        // A relative path depends on where terraform resolves it.
        assert_eq!(
            effective_cli_config("terraform", env(&[(CONFIG_ENV, "cli.tfrc")])),
            None
        );
        // tofu's default files are its own.
        assert_eq!(effective_cli_config("tofu", env(&[("HOME", "/h")])), None);
        // No HOME: terraform's default file is not known.
        assert_eq!(effective_cli_config("terraform", env(&[])), None);
        // Files terraform merges in from its folder.
        let home = tempfile::tempdir().unwrap();
        let h = home.path().to_string_lossy().to_string();
        std::fs::create_dir(home.path().join(".terraform.d")).unwrap();
        std::fs::write(home.path().join(".terraformrc"), "x = 1\n").unwrap();
        let got = effective_cli_config("terraform", env(&[("HOME", &h)]));
        assert_eq!(got, Some((b"x = 1\n".to_vec(), false)));
        std::fs::write(home.path().join(".terraform.d/extra.tfrc"), "").unwrap();
        assert_eq!(
            effective_cli_config("terraform", env(&[("HOME", &h)])),
            None
        );
    }
}
