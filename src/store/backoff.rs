//! Jittered exponential backoff between the tries of one store call.

use std::time::Duration;

/// Waits between tries: before retry `n` (1, 2, ...) a random wait up to `initial` × 2^(n−1), at most `cap` (full jitter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The ceiling of the first wait.
    pub initial: Duration,
    /// The ceiling no wait exceeds.
    pub cap: Duration,
}

impl Backoff {
    /// The ceiling of the wait before retry `n`: `initial` doubled per retry, at most `cap`.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let doublings = retry.saturating_sub(1).min(20);
        self.initial.saturating_mul(1 << doublings).min(self.cap)
    }

    /// The wait before retry `n`: a random share of its ceiling.
    pub fn delay(&self, retry: u32) -> Duration {
        self.ceiling(retry).mul_f64(rand::random::<f64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap_and_stay_under_their_ceiling() {
        let b = Backoff {
            initial: Duration::from_secs(1),
            cap: Duration::from_secs(20),
        };
        let ceilings: Vec<u64> = (1..=7).map(|n| b.ceiling(n).as_secs()).collect();
        assert_eq!(ceilings, [1, 2, 4, 8, 16, 20, 20]);
        assert_eq!(b.ceiling(u32::MAX), b.cap);
        for n in 1..=7 {
            assert!(b.delay(n) <= b.ceiling(n));
        }
    }
}
