//! Where one apply's time goes, phase by phase: the milestones terraform's own log gives
//! (`TF_LOG=info`, every terraform process of the apply appending to one file) and, through
//! `run`, the provider door's own (its plugins started and taken), on one timeline from the
//! apply's start to its end.

use std::path::Path;
use std::process::Command;
use std::time::{Instant, SystemTime};

/// One milestone: seconds since the apply started, and what happened.
pub struct Milestone {
    /// Seconds since the command started.
    pub at: f64,
    /// What happened.
    pub what: String,
}

/// The milestones of one line of terraform's log, if it is one.
fn terraform_milestone(line: &str, sub: &mut String) -> Option<String> {
    if let Some(rest) = line.split("CLI command args: []string{\"").nth(1) {
        *sub = rest.split('"').next().unwrap_or("").to_string();
        return Some(format!("terraform {sub}: started, CLI configuration read"));
    }
    let pairs: &[(&str, &str)] = &[
        (
            "starting Plan operation",
            "configuration and state loaded, the plan operation starts",
        ),
        (
            "starting Apply operation",
            "configuration and state loaded, the apply operation starts",
        ),
        (
            "provider: configuring client automatic mTLS",
            "a provider plugin is being started (terraform's own)",
        ),
        (
            "provider: plugin process exited",
            "a provider plugin exited",
        ),
        (
            "calling Plan",
            "schema and validation done; the refresh and plan walk starts",
        ),
        ("calling Apply", "the apply walk starts"),
        ("Starting apply for", "a resource's apply call"),
    ];
    // Through `run` the apply starts while `show -json` runs: their lines interleave, and the
    // apply's own milestones name the process that has them.
    let apply_only = [
        "starting Apply operation",
        "calling Apply",
        "Starting apply for",
    ];
    pairs
        .iter()
        .find(|(needle, _)| line.contains(needle))
        .map(|(needle, what)| {
            let by = if apply_only.contains(needle) && sub == "show" {
                "apply"
            } else {
                sub.as_str()
            };
            format!("terraform {by}: {what}")
        })
}

/// The milestones of one line of the door's log (`CHOUDOUFU_LOG=...provider=info`), if it is one.
fn door_milestone(line: &str) -> Option<String> {
    if line.contains("provider door: started a provider plugin") {
        return Some("door: a provider plugin started (handshake read)".into());
    }
    if line.contains("provider door: a terraform connection took a plugin") {
        let field = |name: &str| {
            line.split(&format!("{name}="))
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or("?")
                .trim_matches('"')
                .to_string()
        };
        return Some(format!(
            "door: a terraform connection took a plugin (warm={}, waited {} ms, for {})",
            field("warm"),
            field("waited_ms"),
            field("call").rsplit('/').next().unwrap_or("?")
        ));
    }
    if line.contains("provider door: stopped an idle spare") {
        return Some("door: the idle spare stopped".into());
    }
    let run: &[(&str, &str)] = &[
        ("serving state for this run", "run: its state server serves"),
        (
            "planned apply: the plan is read",
            "run: the plan is read (show -json ended)",
        ),
        (
            "planned apply: the plan's changes are claimed",
            "run: the plan's changes are claimed",
        ),
        (
            "the plan's own changes have not moved",
            "run: the changes have not moved since the plan; the apply starts",
        ),
    ];
    run.iter()
        .find(|(needle, _)| line.contains(needle))
        .map(|(_, what)| what.to_string())
}

/// The time a log line starts with (RFC 3339, UTC), if it does.
fn stamp(line: &str) -> Option<SystemTime> {
    let first = line.split_whitespace().next()?;
    humantime::parse_rfc3339_weak(first.trim_end_matches('Z'))
        .ok()
        .or_else(|| humantime::parse_rfc3339(first).ok())
}

/// Run `cmd` once with terraform's log (and the door's) on, and give its milestones, the last
/// being its end; `scratch` holds terraform's log file.
pub fn timeline(cmd: &mut Command, scratch: &Path) -> Vec<Milestone> {
    let log = scratch.join("tf-phases.log");
    let _ = std::fs::remove_file(&log);
    cmd.env("TF_LOG", "info").env("TF_LOG_PATH", &log).env(
        "CHOUDOUFU_LOG",
        "choudoufu_live::frontdoor::provider=info,choudoufu_live::run=info",
    );
    // CHOUDOUFU_BENCH_RUNLOG=1: the run's whole debug log is printed, each line's time from the start.
    let runlog = std::env::var_os("CHOUDOUFU_BENCH_RUNLOG").is_some();
    if runlog {
        cmd.env("CHOUDOUFU_LOG", "choudoufu_live=debug");
    }
    let wall = SystemTime::now();
    let t = Instant::now();
    let out = cmd.output().expect("the timed command starts");
    let total = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "phases: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let since = |s: SystemTime| s.duration_since(wall).map_or(0.0, |d| d.as_secs_f64());
    let mut got = Vec::new();
    let mut sub = String::new();
    for line in std::fs::read_to_string(&log).unwrap_or_default().lines() {
        if let (Some(at), Some(what)) = (stamp(line), terraform_milestone(line, &mut sub)) {
            got.push(Milestone {
                at: since(at),
                what,
            });
        }
    }
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        if runlog && let Some(at) = stamp(line) {
            let text: String = line.chars().take(900).collect();
            eprintln!("runlog {:.3} {text}", since(at));
        }
        if let (Some(at), Some(what)) = (stamp(line), door_milestone(line)) {
            got.push(Milestone {
                at: since(at),
                what,
            });
        }
    }
    got.sort_by(|a, b| a.at.total_cmp(&b.at));
    got.push(Milestone {
        at: total,
        what: "the command ended".into(),
    });
    got
}

/// A markdown table of `milestones`: each one's time and the time since the one before.
pub fn table(title: &str, milestones: &[Milestone]) -> String {
    let mut md = format!(
        "\n**{title}**\n\n| at (s) | since the one before (s) | milestone |\n|---|---|---|\n"
    );
    let mut before = 0.0;
    for m in milestones {
        md.push_str(&format!(
            "| {:.2} | {:.2} | {} |\n",
            m.at,
            m.at - before,
            m.what
        ));
        before = m.at;
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milestones_of_terraform_and_the_door() {
        let mut sub = String::new();
        let line = "2026-12-07T00:26:56.556Z [INFO]  CLI command args: []string{\"apply\", \"-auto-approve\"}";
        assert!(terraform_milestone(line, &mut sub).is_some());
        assert_eq!(sub, "apply");
        assert!(stamp(line).is_some());
        let door = "2026-12-07T00:16:28.891081Z  INFO choudoufu_live::frontdoor::provider::spares: provider door: a terraform connection took a plugin provider=x pid=657 warm=true call=\"/tfplugin5.Provider/PrepareProviderConfig\" waited_ms=12";
        let what = door_milestone(door).unwrap();
        assert!(
            what.contains("warm=true")
                && what.contains("12 ms")
                && what.contains("PrepareProviderConfig"),
            "{what}"
        );
        assert!(stamp(door).is_some());
    }
}
