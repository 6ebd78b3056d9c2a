//! [`RetryPolicy`]: when a [`Worker`](crate::Worker) retries a failed job.
//!
//! Modelled on `delayq::workqueue`'s `ExponentialFailure` (`base · 2^n`,
//! capped, nothing overflows), with two differences: the failure count is the
//! job's own [`attempt`](crate::Job::attempt), stored with it, so the policy
//! keeps no per-item map and survives restarts; and it adds jitter, so jobs
//! that failed together do not retry together.

use std::time::Duration;

/// Exponential backoff with jitter, a cap and a number of attempts:
/// after failed attempt `n` (1 on the first delivery) the job is retried
/// [`base_delay(n)`](Self::base_delay) = `min(base · 2^(n−1), cap)` later,
/// plus up to `jitter · base_delay(n)` at random, never more than `cap` in
/// all; after attempt `max_attempts` it is dead. The jitter only adds: a
/// retry is never earlier than `base_delay(n)`.
///
/// ```
/// use std::time::Duration;
/// use delayq_durable::RetryPolicy;
///
/// let ms = Duration::from_millis;
/// let p = RetryPolicy::exponential(ms(100)).cap(ms(350)).jitter(0.0).max_attempts(5);
/// let waits: Vec<_> = (1..=4).map(|n| p.base_delay(n)).collect();
/// assert_eq!(waits, [ms(100), ms(200), ms(350), ms(350)]);
/// assert!(!p.gives_up_after(4));
/// assert!(p.gives_up_after(5));
/// ```
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct RetryPolicy {
    base: Duration,
    cap: Duration,
    max_attempts: u32,
    jitter: f64,
}

impl Default for RetryPolicy {
    /// 1 s, 2 s, 4 s, … capped at 1 h, 25 % jitter, 25 attempts (Sidekiq's and
    /// Faktory's count).
    fn default() -> Self {
        RetryPolicy::exponential(Duration::from_secs(1))
    }
}

impl RetryPolicy {
    /// `base`, `2·base`, `4·base`, …; with the defaults for the rest: capped at
    /// one hour, 25 % jitter, 25 attempts.
    pub fn exponential(base: Duration) -> RetryPolicy {
        RetryPolicy { base, cap: Duration::from_secs(3600), max_attempts: 25, jitter: 0.25 }
    }

    /// The longest wait before a retry, jitter included.
    pub fn cap(mut self, cap: Duration) -> RetryPolicy {
        self.cap = cap;
        self
    }

    /// Deliveries before the job is dead (at least 1; 0 is taken as 1). The
    /// queue's own `max_attempts` still applies: whichever is smaller wins.
    pub fn max_attempts(mut self, n: u32) -> RetryPolicy {
        self.max_attempts = n.max(1);
        self
    }

    /// The random part, as a fraction of the delay: `0.25` adds up to 25 %.
    /// Clamped to `0.0..=1.0` (NaN is 0).
    pub fn jitter(mut self, fraction: f64) -> RetryPolicy {
        self.jitter = if fraction.is_nan() { 0.0 } else { fraction.clamp(0.0, 1.0) };
        self
    }

    /// The configured attempts.
    pub fn attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The wait after failed attempt `attempt`, before jitter:
    /// `min(base · 2^(attempt−1), cap)` (attempt 0 is taken as 1).
    pub fn base_delay(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(63);
        let nanos = self.base.as_nanos().saturating_mul(1u128 << exp);
        let cap = self.cap.as_nanos();
        duration_from_nanos(nanos.min(cap))
    }

    /// The wait after failed attempt `attempt` with jitter drawn from `unit`
    /// (a random `u64`, taken as a fraction of 2^64): between
    /// [`base_delay`](Self::base_delay) and `base_delay · (1 + jitter)`,
    /// never more than the cap (nor less than `base_delay`).
    pub fn delay(&self, attempt: u32, unit: u64) -> Duration {
        let d = self.base_delay(attempt);
        let frac = self.jitter * (unit as f64 / (u64::MAX as f64 + 1.0));
        let extra = d.as_secs_f64() * frac;
        let total = d.saturating_add(Duration::try_from_secs_f64(extra).unwrap_or(Duration::ZERO));
        total.min(self.cap).max(d)
    }

    /// Whether a job whose attempt `attempt` failed is dead rather than retried.
    pub fn gives_up_after(&self, attempt: u32) -> bool {
        attempt >= self.max_attempts
    }
}

/// A `Duration` of `nanos` nanoseconds, saturating at `Duration::MAX`.
fn duration_from_nanos(nanos: u128) -> Duration {
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
    if secs == u64::MAX {
        return Duration::MAX;
    }
    Duration::new(secs, (nanos % 1_000_000_000) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_jitter_only_adds_within_it() {
        let ms = Duration::from_millis;
        let p = RetryPolicy::exponential(ms(10)).cap(ms(1000)).jitter(0.5);
        assert_eq!(p.base_delay(0), ms(10));
        assert_eq!(p.base_delay(1), ms(10));
        assert_eq!(p.base_delay(4), ms(80));
        assert_eq!(p.base_delay(u32::MAX), ms(1000), "no overflow, capped");
        for (attempt, unit) in [(1, 0), (1, u64::MAX), (3, 1 << 63), (7, u64::MAX), (40, u64::MAX)] {
            let d = p.delay(attempt, unit);
            let base = p.base_delay(attempt);
            assert!(d >= base, "attempt {attempt}: {d:?} < {base:?}");
            assert!(
                d <= base.mul_f64(1.5).min(ms(1000)) + Duration::from_nanos(1),
                "attempt {attempt}: {d:?}"
            );
        }
        assert_eq!(p.delay(1, 0), ms(10));
        assert!(p.delay(1, u64::MAX) > ms(14), "the jitter is used: {:?}", p.delay(1, u64::MAX));
        assert_eq!(p.delay(10, u64::MAX), ms(1000), "jitter never passes the cap");
        let huge = RetryPolicy::exponential(Duration::MAX).cap(Duration::MAX);
        assert_eq!(huge.delay(64, u64::MAX), Duration::MAX);
        assert_eq!(RetryPolicy::default().jitter(f64::NAN).delay(1, u64::MAX), Duration::from_secs(1));
        assert_eq!(RetryPolicy::default().max_attempts(0).attempts(), 1);
    }
}
