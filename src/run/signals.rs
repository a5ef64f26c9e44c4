//! The run's stop token: SIGINT and SIGTERM, caught for the whole run, each taken once.
//!
//! A signal is not a sticky cancellation: terraform stops on an interrupt of its own and
//! `run` goes on to write what terraform could not save, so each signal is taken by the
//! one step waiting when it comes (or by the next step that waits, when none was), and a
//! later step waits for a later signal. Signals of one kind that come before anyone takes
//! them count as one, as the operating system's do.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A signal that reached the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caught {
    /// SIGINT (the terminal sends it to terraform too).
    Interrupt,
    /// SIGTERM (sent to `run` alone).
    Terminate,
}

/// How many signals of each kind came since the run started.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    interrupts: u64,
    terms: u64,
}

/// How many of each kind the run's steps have taken.
#[derive(Debug, Default)]
struct Taken {
    interrupts: AtomicU64,
    terms: AtomicU64,
}

/// The run's stop token: every step that can be stopped waits on it through the run's context.
#[derive(Debug)]
pub struct Signals {
    caught: watch::Receiver<Counts>,
    taken: Taken,
    task: JoinHandle<()>,
}

impl Signals {
    /// Catch SIGINT and SIGTERM from now on.
    pub fn install() -> std::io::Result<Signals> {
        let mut interrupts = signal(SignalKind::interrupt())?;
        let mut terms = signal(SignalKind::terminate())?;
        let (tx, caught) = watch::channel(Counts::default());
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    Some(()) = interrupts.recv() => tx.send_modify(|c| c.interrupts += 1),
                    Some(()) = terms.recv() => tx.send_modify(|c| c.terms += 1),
                    else => break,
                }
            }
        });
        Ok(Signals {
            caught,
            taken: Taken::default(),
            task,
        })
    }

    /// Wait for the next signal not yet taken, and take it.
    pub async fn next(&self) -> Caught {
        let mut caught = self.caught.clone();
        let taken = &self.taken;
        let counts = match caught
            .wait_for(|c| {
                c.interrupts > taken.interrupts.load(Ordering::SeqCst)
                    || c.terms > taken.terms.load(Ordering::SeqCst)
            })
            .await
        {
            Ok(counts) => *counts,
            // The catching task ended: no signal can come any more.
            Err(_) => return std::future::pending().await,
        };
        if counts.interrupts > taken.interrupts.load(Ordering::SeqCst) {
            taken.interrupts.store(counts.interrupts, Ordering::SeqCst);
            Caught::Interrupt
        } else {
            taken.terms.store(counts.terms, Ordering::SeqCst);
            Caught::Terminate
        }
    }

    /// Wait for either signal (and take it): the step waiting should stop.
    pub async fn stop(&self) {
        self.next().await;
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A token fed by hand instead of by the operating system.
    fn fed() -> (watch::Sender<Counts>, Signals) {
        let (tx, caught) = watch::channel(Counts::default());
        let signals = Signals {
            caught,
            taken: Taken::default(),
            task: tokio::spawn(async {}),
        };
        (tx, signals)
    }

    async fn next_soon(signals: &Signals) -> Option<Caught> {
        tokio::time::timeout(Duration::from_millis(50), signals.next())
            .await
            .ok()
    }

    #[tokio::test]
    async fn each_signal_is_taken_once_and_signals_not_yet_taken_count_as_one() {
        let (tx, signals) = fed();
        assert_eq!(next_soon(&signals).await, None);
        tx.send_modify(|c| c.interrupts += 2);
        assert_eq!(next_soon(&signals).await, Some(Caught::Interrupt));
        assert_eq!(next_soon(&signals).await, None, "taken once");
        tx.send_modify(|c| c.terms += 1);
        assert_eq!(next_soon(&signals).await, Some(Caught::Terminate));
        tx.send_modify(|c| c.interrupts += 1);
        signals.stop().await;
        assert_eq!(next_soon(&signals).await, None);
    }
}
