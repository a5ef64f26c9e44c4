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

/// What one try's outcome says about trying again.
///
/// The two retryable cases are kept apart so a policy can later treat them apart (a
/// refused connection, say, giving up sooner than a busy service).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The outcome stands: an answer, a refusal, or an error another try cannot mend.
    Final,
    /// The service answered that it is busy or failed (429, 5xx, S3's 409 conflict in progress).
    Busy,
    /// No answer came: the connection failed, was reset, or timed out.
    NoAnswer,
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
        }
    }
}

impl RetryPolicy {
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
        loop {
            let outcome = call().await;
            if !verdict(&outcome).retryable() || tried >= self.tries {
                return outcome;
            }
            let wait = self.backoff.delay(tried);
            if start.elapsed() + wait >= self.deadline {
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
