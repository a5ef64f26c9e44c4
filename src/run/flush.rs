//! After terraform exits: write the state whose write failed for a store error, trying again with
//! backoff and a countdown for up to `--flush-timeout`, or leave it in a recovery file.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::terraform::Signals;
use super::{Ctx, RunError};
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
    Landed(WriteReport),
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

fn show(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// Write `session`'s unwritten state, if it has one: with backoff until `ctx`'s flush timeout, then into a recovery file.
pub async fn flush(
    ctx: &Ctx,
    session: &Session,
    signals: &mut Signals,
) -> Result<Flushed, RunError> {
    let Some(first) = session.unwritten().await else {
        return Ok(Flushed::Nothing);
    };
    if cut(Mechanism::Flush) {
        return Ok(Flushed::Nothing);
    }
    eprintln!(
        "choudoufu-live: terraform's last state write did not reach the record store: {}",
        first.last_error
    );
    eprintln!(
        "choudoufu-live: this run kept that state and writes it now, each record conditionally on the version this run read, trying for up to {} (--flush-timeout); a record another run changed meanwhile is refused by name, never overwritten. This run's claims stay in place until then.",
        show(ctx.flush_timeout)
    );
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
            _ = signals.stop() => {
                stopped = true;
                None
            }
        };
        match outcome {
            Some(Ok(Some(report))) => {
                eprintln!(
                    "choudoufu-live: the record store answered again: the state terraform could not save was written (try {tries})"
                );
                if report.conflicts.is_empty() {
                    say_errored(&ctx.cmd.dir(), true);
                }
                return Ok(Flushed::Landed(report));
            }
            Some(Ok(None)) => return Ok(Flushed::Nothing),
            Some(Err(e)) if e.store_failed() => {
                // Said again only when the store says something new (not for each record's key);
                // the first try's is what terraform's writes met, said above.
                if tries > 1 && gist(&e) != last_gist {
                    eprintln!("choudoufu-live: {e}");
                }
                last_gist = gist(&e);
                last = e.to_string();
            }
            Some(Err(e)) => {
                // Not the store's absence: trying again would not help. Keep the state.
                eprintln!("choudoufu-live: error: {e}");
                last = e.to_string();
                break;
            }
            None => {}
        }
        if stopped || Instant::now() >= deadline {
            break;
        }
        let wait = delay.min(deadline.saturating_duration_since(Instant::now()));
        if !countdown(wait, deadline, tries, signals).await {
            stopped = true;
            break;
        }
        delay = (delay * 2).min(MAX_DELAY);
    }
    if stopped {
        eprintln!(
            "choudoufu-live: stopped while writing the state terraform could not save; it goes to a recovery file"
        );
    } else {
        eprintln!(
            "choudoufu-live: the record store did not take the state within {} (--flush-timeout); the last error: {last}",
            show(ctx.flush_timeout)
        );
    }
    Ok(recover_later(ctx, session).await)
}

/// Wait `wait`, showing what is left (one line, or a line kept up to date on a terminal); false when told to stop.
async fn countdown(wait: Duration, deadline: Instant, tries: usize, signals: &mut Signals) -> bool {
    let line = |until: Instant| {
        format!(
            "choudoufu-live: the record store did not answer (try {tries}); trying again in {}, {} left before this run writes the state to a recovery file",
            show(until.saturating_duration_since(Instant::now()) + Duration::from_millis(999)),
            show(deadline.saturating_duration_since(Instant::now()))
        )
    };
    let until = Instant::now() + wait;
    let terminal = std::io::stderr().is_terminal();
    if !terminal {
        eprintln!("{}", line(until));
    }
    loop {
        let now = Instant::now();
        if now >= until {
            if terminal {
                eprintln!();
            }
            return true;
        }
        if terminal {
            eprint!("\r{}\x1b[K", line(until));
        }
        let tick = (until - now).min(Duration::from_secs(1));
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = signals.stop() => {
                if terminal {
                    eprintln!();
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
            eprintln!(
                "choudoufu-live: nothing of it is lost: the state terraform could not save, with the record versions this run read, is in the recovery file\n    {}\n  (readable by you only: it holds the records' values, secrets included). When the store answers again, write it with\n    choudoufu-live --root {} records recover {}\n  Each record is written conditionally on the version this run read, so a record another run changed meanwhile is refused by name, never overwritten.",
                path.display(),
                root.display(),
                path.display()
            );
            say_errored(&ctx.cmd.dir(), false);
            Flushed::Recovery(path)
        }
        Err(e) => {
            eprintln!(
                "choudoufu-live: error: the state terraform could not save could not be kept in a recovery file either: {e}"
            );
            Flushed::Lost
        }
    }
}

/// What terraform's errored.tfstate in `dir` is now, if terraform wrote one.
pub fn say_errored(dir: &Path, written: bool) {
    if !dir.join("errored.tfstate").is_file() {
        return;
    }
    if written {
        eprintln!(
            "choudoufu-live: terraform's errored.tfstate holds the state this run has just written: it is no longer needed. Remove it; do not `terraform state push` it, which would write it again against the records as they are then and could undo another run's changes."
        );
    } else {
        eprintln!(
            "choudoufu-live: do not `terraform state push errored.tfstate`: that writes terraform's copy against the records as they are then, and could undo another run's changes. Use `records recover` with the file above."
        );
    }
}
