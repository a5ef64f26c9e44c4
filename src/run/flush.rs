//! After terraform exits: write the state whose write failed for a store error, trying again with
//! backoff and a countdown for up to `--flush-timeout`, or leave it in a recovery file.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::context::Ctx;
use super::error::RunError;
use super::say;
use super::signals::Signals;
use crate::cut::{Mechanism, cut};
use crate::engine::session::{Session, SessionError, WriteReport};

/// The longest wait between two tries.
const MAX_DELAY: Duration = Duration::from_secs(15);

/// What became of the state terraform could not save.
#[derive(Debug)]
pub enum Flushed {
    /// Every state write landed while terraform ran: nothing was left to write.
    Nothing,
    /// The state was written after terraform exited (its conflicts, if any, are in the report).
    Landed(Box<WriteReport>),
    /// The store stayed away (or the run was stopped): the state is in this recovery file.
    Recovery(PathBuf),
    /// The store stayed away and no recovery file could be written: only terraform's errored.tfstate is left.
    Lost,
}

/// What a failed try said, leaving out which record it was writing.
fn gist(e: &SessionError) -> String {
    match e {
        SessionError::Store(s) => format!("{:?} {} {}", s.reason, s.store, s.message),
        other => other.to_string(),
    }
}

/// Write `session`'s unwritten state, if it has one: with backoff until `ctx`'s flush timeout (a signal ends it), then into a recovery file.
pub async fn flush(ctx: &Ctx, session: &Session) -> Result<Flushed, RunError> {
    let Some(first) = session.unwritten().await else {
        if let Some(why) = session.refused().await {
            say_unsaved(ctx, &why);
        }
        return Ok(Flushed::Nothing);
    };
    if cut(Mechanism::Flush) {
        return Ok(Flushed::Nothing);
    }
    say::flushing(&first.last_error, ctx.flush_timeout);
    let deadline = Instant::now() + ctx.flush_timeout;
    let mut delay = Duration::from_secs(1);
    let mut last = first.last_error;
    let mut last_gist = String::new();
    let mut tries = 0;
    let mut stopped = false;
    loop {
        tries += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        let outcome = tokio::select! {
            r = tokio::time::timeout(left, session.flush()) => r.ok(),
            _ = ctx.signals.stop() => {
                stopped = true;
                None
            }
        };
        match outcome {
            Some(Ok(Some(report))) => {
                say::flushed(tries);
                if report.conflicts.is_empty() {
                    say_errored(&ctx.cmd.dir(), true);
                }
                return Ok(Flushed::Landed(Box::new(report)));
            }
            Some(Ok(None)) => return Ok(Flushed::Nothing),
            Some(Err(e)) if e.store_failed() => {
                // Said again only when the store says something new (not for each record's key);
                // the first try's is what terraform's writes met, said above.
                if tries > 1 && gist(&e) != last_gist {
                    say::flush_failed(&e);
                }
                last_gist = gist(&e);
                last = e.to_string();
            }
            Some(Err(e)) => {
                // Not the store's absence: trying again would not help. Keep the state.
                say::error(&e);
                last = e.to_string();
                break;
            }
            None => {}
        }
        if stopped || Instant::now() >= deadline {
            break;
        }
        let wait = delay.min(deadline.saturating_duration_since(Instant::now()));
        if !countdown(wait, deadline, tries, &ctx.signals).await {
            stopped = true;
            break;
        }
        delay = (delay * 2).min(MAX_DELAY);
    }
    if stopped {
        say::flush_stopped();
    } else {
        say::flush_timed_out(ctx.flush_timeout, &last);
    }
    Ok(recover_later(ctx, session).await)
}

/// Wait `wait`, showing what is left (one line, or a line kept up to date on a terminal); false when told to stop.
async fn countdown(wait: Duration, deadline: Instant, tries: usize, signals: &Signals) -> bool {
    let line = |until: Instant| {
        say::countdown(
            tries,
            until.saturating_duration_since(Instant::now()) + Duration::from_millis(999),
            deadline.saturating_duration_since(Instant::now()),
        )
    };
    let until = Instant::now() + wait;
    let terminal = std::io::stderr().is_terminal();
    if !terminal {
        say::progress(&line(until), false);
    }
    loop {
        let now = Instant::now();
        if now >= until {
            if terminal {
                say::progress_done();
            }
            return true;
        }
        if terminal {
            say::progress(&line(until), true);
        }
        let tick = (until - now).min(Duration::from_secs(1));
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = signals.stop() => {
                if terminal {
                    say::progress_done();
                }
                return false;
            }
        }
    }
}

/// Leave the unwritten state in a recovery file in the root, and say how to write it later.
async fn recover_later(ctx: &Ctx, session: &Session) -> Flushed {
    if cut(Mechanism::RecoveryFile) {
        return Flushed::Lost;
    }
    let Some(recovery) = session.recovery(&ctx.store_name).await else {
        return Flushed::Nothing;
    };
    match recovery.save(&ctx.root) {
        Ok(path) => {
            let path = std::fs::canonicalize(&path).unwrap_or(path);
            let root = std::fs::canonicalize(&ctx.root).unwrap_or_else(|_| ctx.root.clone());
            say::recovery_file(&path, &root);
            say_errored(&ctx.cmd.dir(), false);
            Flushed::Recovery(path)
        }
        Err(e) => {
            say::no_recovery_file(e);
            Flushed::Lost
        }
    }
}

/// terraform's last state write was refused for a reason trying again would not mend: if it left errored.tfstate, say how to write it once the cause is fixed.
fn say_unsaved(ctx: &Ctx, why: &str) {
    let errored = ctx.cmd.dir().join("errored.tfstate");
    if !errored.is_file() {
        return;
    }
    let errored = std::fs::canonicalize(&errored).unwrap_or(errored);
    let root = std::fs::canonicalize(&ctx.root).unwrap_or_else(|_| ctx.root.clone());
    say::unsaved_errored(why, &errored, &root);
}

/// What terraform's errored.tfstate in `dir` is now, if terraform wrote one.
pub fn say_errored(dir: &Path, written: bool) {
    if dir.join("errored.tfstate").is_file() {
        say::errored_state(written);
    }
}
