//! The one retry policy of every store kind: bounded tries, jittered backoff, a total deadline.
//!
//! Each kind says what one try's outcome means ([`Verdict`]); the policy alone decides
//! whether and when to try again. A retried conditional write whose first answer was lost
//! is refused on its retry, and `store::put_conditional` recognises it as landed. Clients
//! that retry inside themselves (the S3 SDK, `object_store`) are configured from the same
//! policy ([`RetryPolicy::tries`], [`RetryPolicy::backoff`], [`RetryPolicy::deadline`]).

use std::future::Future;
use std::time::{Duration, Instant};

use super::backoff::Backoff;
use super::traced;

/// How many tries one store call gets by default.
pub const TRIES: u32 = 8;
/// The ceiling of the first wait between tries.
pub const INITIAL_BACKOFF: Duration = Duration::from_millis(100);
/// The ceiling no wait between tries exceeds.
pub const MAX_BACKOFF: Duration = Duration::from_secs(15);
/// No try starts once this long has passed since the first.
pub const DEADLINE: Duration = Duration::from_secs(180);
/// No try starts once this long has passed since the first, while no try has reached the store.
pub const UNREACHED: Duration = Duration::from_secs(5);
/// How long one try may take to connect to the store.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The environment variable that sets [`UNREACHED`] (e.g. `5s`, `1m`).
pub const UNREACHED_ENV: &str = "CHOUDOUFU_STORE_UNREACHABLE_TIMEOUT";
/// The environment variable that sets [`CONNECT_TIMEOUT`] (e.g. `3s`).
pub const CONNECT_TIMEOUT_ENV: &str = "CHOUDOUFU_STORE_CONNECT_TIMEOUT";

/// The duration an environment variable sets (`5s`, `1m`, `500ms`), else `default`; a value that is no duration is said once and ignored.
fn duration_env(name: &str, default: Duration) -> Duration {
    let Ok(value) = std::env::var(name) else {
        return default;
    };
    match humantime::parse_duration(value.trim()) {
        Ok(d) if !d.is_zero() => d,
        _ => {
            tracing::warn!(
                variable = name,
                "not a duration such as 5s or 1m; the default is used"
            );
            default
        }
    }
}

/// How long one try may take to connect: `CHOUDOUFU_STORE_CONNECT_TIMEOUT`, else [`CONNECT_TIMEOUT`].
pub fn connect_timeout() -> Duration {
    duration_env(CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT)
}

/// What one try's outcome says about trying again.
///
/// The retryable cases are kept apart: a try that reached no server at all gives up sooner
/// ([`RetryPolicy::unreached`]) than one a busy service or a lost answer failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The outcome stands: an answer, a refusal, or an error another try cannot mend.
    Final,
    /// The service answered that it is busy or failed (429, 5xx, S3's 409 conflict in progress).
    Busy,
    /// No answer came: the connection was reset, or the answer timed out.
    NoAnswer,
    /// No connection was made: it was refused, the name did not resolve, or connecting timed out.
    Unreached,
}

impl Verdict {
    /// Whether another try may change the outcome.
    pub fn retryable(self) -> bool {
        !matches!(self, Verdict::Final)
    }
}

/// Bounded tries with jittered backoff under a total deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries per call, the first included (at least 1).
    pub tries: u32,
    /// The waits between tries.
    pub backoff: Backoff,
    /// No try starts once this long has passed since the first.
    pub deadline: Duration,
    /// No try starts once this long has passed since the first while every try was [`Verdict::Unreached`].
    pub unreached: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            tries: TRIES,
            backoff: Backoff {
                initial: INITIAL_BACKOFF,
                cap: MAX_BACKOFF,
            },
            deadline: DEADLINE,
            unreached: UNREACHED,
        }
    }
}

impl RetryPolicy {
    /// The default policy, its unreached budget from `CHOUDOUFU_STORE_UNREACHABLE_TIMEOUT` when set.
    pub fn configured() -> Self {
        RetryPolicy {
            unreached: duration_env(UNREACHED_ENV, UNREACHED),
            ..RetryPolicy::default()
        }
    }

    /// Whether a call whose tries so far all reached no server, the first `elapsed` ago, gives up rather than wait `wait` for another.
    pub fn gives_up_unreached(&self, elapsed: Duration, wait: Duration) -> bool {
        !crate::cut::cut(crate::cut::Mechanism::UnreachedBudget) && elapsed + wait >= self.unreached
    }

    /// The same policy with `tries` tries per call (at least 1).
    pub fn with_tries(mut self, tries: u32) -> Self {
        self.tries = tries.max(1);
        self
    }

    /// Make `call` until its outcome is final, the tries are spent or the deadline is near; the last outcome.
    ///
    /// `verdict` reads each outcome; every retry is noted on the current `store.call` span.
    pub async fn run<T, F, Fut>(&self, mut call: F, verdict: impl Fn(&T) -> Verdict) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = T>,
    {
        let start = Instant::now();
        let mut tried = 1;
        let mut all_unreached = true;
        loop {
            let outcome = call().await;
            let verdict = verdict(&outcome);
            all_unreached &= verdict == Verdict::Unreached;
            if !verdict.retryable() || tried >= self.tries {
                return outcome;
            }
            let wait = self.backoff.delay(tried);
            if start.elapsed() + wait >= self.deadline
                || (all_unreached && self.gives_up_unreached(start.elapsed(), wait))
            {
                return outcome;
            }
            tokio::time::sleep(wait).await;
            tried += 1;
            traced::attempt(tried);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn quick(tries: u32) -> RetryPolicy {
        RetryPolicy {
            tries,
            backoff: Backoff {
                initial: Duration::from_millis(1),
                cap: Duration::from_millis(2),
            },
            deadline: Duration::from_secs(5),
            unreached: Duration::from_secs(5),
        }
    }

    #[tokio::test]
    async fn a_call_is_tried_until_final_or_its_tries_are_spent() {
        let n = AtomicU32::new(0);
        let out = quick(8)
            .run(
                || async { n.fetch_add(1, Ordering::SeqCst) + 1 },
                |&k| if k < 3 { Verdict::Busy } else { Verdict::Final },
            )
            .await;
        assert_eq!((out, n.load(Ordering::SeqCst)), (3, 3));
        let n = AtomicU32::new(0);
        let out = quick(4)
            .run(
                || async { n.fetch_add(1, Ordering::SeqCst) + 1 },
                |_| Verdict::NoAnswer,
            )
            .await;
        assert_eq!(out, 4, "the last outcome of the tries");
    }

    #[tokio::test]
    async fn a_store_never_reached_is_given_up_on_its_shorter_budget() {
        let mut policy = quick(1000);
        policy.unreached = Duration::from_millis(30);
        let n = AtomicU32::new(0);
        let started = Instant::now();
        policy
            .run(
                || async { n.fetch_add(1, Ordering::SeqCst) },
                |_| Verdict::Unreached,
            )
            .await;
        assert!(n.load(Ordering::SeqCst) < 1000, "gave up early");
        assert!(started.elapsed() < Duration::from_secs(2));
        // Once a try reached the store, the call keeps its full tries.
        let n = AtomicU32::new(0);
        policy
            .run(
                || async { n.fetch_add(1, Ordering::SeqCst) + 1 },
                |&k| {
                    if k == 1 {
                        Verdict::Busy
                    } else if k < 40 {
                        Verdict::Unreached
                    } else {
                        Verdict::Final
                    }
                },
            )
            .await;
        assert_eq!(n.load(Ordering::SeqCst), 40);
    }

    #[tokio::test]
    async fn no_try_starts_past_the_deadline() {
        let mut policy = quick(100);
        policy.backoff = Backoff {
            initial: Duration::from_millis(40),
            cap: Duration::from_millis(40),
        };
        policy.deadline = Duration::from_millis(1);
        let n = AtomicU32::new(0);
        policy
            .run(
                || async { n.fetch_add(1, Ordering::SeqCst) },
                |_| Verdict::Busy,
            )
            .await;
        assert!(n.load(Ordering::SeqCst) < 100);
    }
}
