//! Rate limiters: how long an item waits before it is retried (client-go's
//! `default_rate_limiters.go`, in Rust).
//!
//! The per-item limiters keep a failures map; its growth policy is in the
//! `workqueue` module docs ("Failures map").

use crate::sync::{lock, Mutex};
use crate::Clock;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// Decides how long an item waits before it is retried
/// ([`WorkQueue::add_rate_limited`](super::WorkQueue::add_rate_limited)).
///
/// # Examples
///
/// A limiter that waits one second per failure so far:
///
/// ```
/// use delayq::workqueue::RateLimiter;
/// use std::collections::HashMap;
/// use std::sync::Mutex;
/// use std::time::Duration;
///
/// #[derive(Default)]
/// struct Linear(Mutex<HashMap<String, u32>>);
///
/// impl RateLimiter<String> for Linear {
///     fn when(&self, item: &String) -> Duration {
///         let mut m = self.0.lock().unwrap();
///         let n = m.entry(item.clone()).or_insert(0);
///         *n += 1;
///         Duration::from_secs(u64::from(*n))
///     }
///     fn forget(&self, item: &String) {
///         self.0.lock().unwrap().remove(item);
///     }
///     fn num_requeues(&self, item: &String) -> usize {
///         self.0.lock().unwrap().get(item).map_or(0, |&n| n as usize)
///     }
/// }
///
/// let l = Linear::default();
/// let job = "job".to_string();
/// assert_eq!(l.when(&job), Duration::from_secs(1));
/// assert_eq!(l.when(&job), Duration::from_secs(2));
/// assert_eq!(l.num_requeues(&job), 2);
/// l.forget(&job);
/// assert_eq!(l.num_requeues(&job), 0);
/// ```
pub trait RateLimiter<K>: Send + Sync {
    /// How long `item` should wait now. Each call counts as one more failure
    /// (or one more request, for a [`TokenBucket`]).
    fn when(&self, item: &K) -> Duration;
    /// Stops tracking `item` (it succeeded, or was given up on): its next
    /// [`when`](RateLimiter::when) starts afresh.
    fn forget(&self, item: &K);
    /// How many times `item` went through [`when`](RateLimiter::when) since it
    /// was last forgotten.
    fn num_requeues(&self, item: &K) -> usize;
}

impl<K, R: RateLimiter<K> + ?Sized> RateLimiter<K> for Box<R> {
    fn when(&self, item: &K) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &K) {
        (**self).forget(item)
    }
    fn num_requeues(&self, item: &K) -> usize {
        (**self).num_requeues(item)
    }
}

/// A `Duration` of `nanos` nanoseconds, saturating at `Duration::MAX`.
fn from_nanos(nanos: u128) -> Duration {
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
    if secs == u64::MAX {
        return Duration::MAX;
    }
    // The remainder of a division by 10^9 fits a u32.
    Duration::new(secs, (nanos % 1_000_000_000) as u32)
}

/// Failures per item (see the module docs for the growth policy).
struct Failures<K> {
    map: Mutex<HashMap<K, usize>>,
}

impl<K> Drop for Failures<K> {
    /// The counted items are the user's: each is dropped on its own, so that a
    /// panicking `Drop` is caught (and a second cannot abort the process
    /// mid-unwind) when the last work-queue handle drops its limiter.
    fn drop(&mut self) {
        let map = std::mem::take(&mut *lock(&self.map));
        crate::contain::drop_contained(map.into_keys());
    }
}

/// The map never shrinks below this capacity (shrinking a small map buys nothing).
const MIN_CAPACITY: usize = 64;

impl<K: Clone + Eq + Hash> Failures<K> {
    fn new() -> Self {
        Failures { map: Mutex::new(HashMap::new()) }
    }

    /// Counts one more failure of `item`; returns the count before it.
    fn bump(&self, item: &K) -> usize {
        let mut m = lock(&self.map);
        if let Some(n) = m.get_mut(item) {
            let before = *n;
            *n = n.saturating_add(1);
            return before;
        }
        m.insert(item.clone(), 1);
        0
    }

    fn get(&self, item: &K) -> usize {
        lock(&self.map).get(item).copied().unwrap_or(0)
    }

    fn forget(&self, item: &K) {
        let mut m = lock(&self.map);
        if m.remove(item).is_some() && m.capacity() > MIN_CAPACITY && m.len() * 4 <= m.capacity() {
            let target = (m.len() * 2).max(MIN_CAPACITY);
            m.shrink_to(target);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.map).len()
    }

    #[cfg(test)]
    fn capacity(&self) -> usize {
        lock(&self.map).capacity()
    }
}

/// Per-item exponential backoff: `base · 2^failures`, capped at `max` (client-go's
/// `ItemExponentialFailureRateLimiter`). The first [`when`](RateLimiter::when) of
/// an item is `base`. Huge failure counts give `max`; nothing overflows.
///
/// Keeps one entry per item that failed and was not forgotten; see
/// [Failures map](super#failures-map).
///
/// # Examples
///
/// ```
/// use delayq::workqueue::{ExponentialFailure, RateLimiter};
/// use std::time::Duration;
///
/// let ms = Duration::from_millis;
/// let l = ExponentialFailure::new(ms(5), ms(30));
/// let waits: Vec<_> = (0..5).map(|_| l.when(&"a")).collect();
/// assert_eq!(waits, [ms(5), ms(10), ms(20), ms(30), ms(30)]);
/// assert_eq!(l.num_requeues(&"a"), 5);
/// l.forget(&"a");
/// assert_eq!(l.when(&"a"), ms(5));
/// ```
pub struct ExponentialFailure<K> {
    base: Duration,
    max: Duration,
    failures: Failures<K>,
}

impl<K: Clone + Eq + Hash> ExponentialFailure<K> {
    /// Waits `base`, `2·base`, `4·base`, … per item, never more than `max`.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::{ExponentialFailure, RateLimiter};
    /// use std::time::Duration;
    ///
    /// let l = ExponentialFailure::new(Duration::from_secs(1), Duration::MAX);
    /// for _ in 0..1000 {
    ///     l.when(&7); // no overflow, however many failures
    /// }
    /// assert_eq!(l.when(&7), Duration::MAX);
    /// ```
    pub fn new(base: Duration, max: Duration) -> Self {
        ExponentialFailure { base, max, failures: Failures::new() }
    }
}

impl<K: Clone + Eq + Hash + Send> RateLimiter<K> for ExponentialFailure<K> {
    fn when(&self, item: &K) -> Duration {
        let exp = self.failures.bump(item);
        let factor = u32::try_from(exp).ok().and_then(|e| 1u128.checked_shl(e));
        let wait = match factor.and_then(|f| self.base.as_nanos().checked_mul(f)) {
            Some(nanos) => from_nanos(nanos),
            None if self.base.is_zero() => Duration::ZERO,
            None => self.max,
        };
        wait.min(self.max)
    }
    fn forget(&self, item: &K) {
        self.failures.forget(item)
    }
    fn num_requeues(&self, item: &K) -> usize {
        self.failures.get(item)
    }
}

impl<K> fmt::Debug for ExponentialFailure<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExponentialFailure").field("base", &self.base).field("max", &self.max).finish()
    }
}

/// Per-item two-speed retries: `fast` for the first `max_fast_attempts` of an
/// item, `slow` after that (client-go's `ItemFastSlowRateLimiter`).
///
/// # Examples
///
/// ```
/// use delayq::workqueue::{FastSlow, RateLimiter};
/// use std::time::Duration;
///
/// let (fast, slow) = (Duration::from_millis(10), Duration::from_secs(10));
/// let l = FastSlow::new(fast, slow, 2);
/// assert_eq!(l.when(&"a"), fast);
/// assert_eq!(l.when(&"a"), fast);
/// assert_eq!(l.when(&"a"), slow);
/// assert_eq!(l.when(&"b"), fast);
/// l.forget(&"a");
/// assert_eq!(l.when(&"a"), fast);
/// ```
pub struct FastSlow<K> {
    fast: Duration,
    slow: Duration,
    max_fast_attempts: usize,
    failures: Failures<K>,
}

impl<K: Clone + Eq + Hash> FastSlow<K> {
    /// `fast` for the first `max_fast_attempts` of each item, then `slow`.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::{FastSlow, RateLimiter};
    /// use std::time::Duration;
    ///
    /// let l = FastSlow::new(Duration::ZERO, Duration::from_secs(1), 0);
    /// assert_eq!(l.when(&1), Duration::from_secs(1)); // no fast attempts
    /// ```
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: usize) -> Self {
        FastSlow { fast, slow, max_fast_attempts, failures: Failures::new() }
    }
}

impl<K: Clone + Eq + Hash + Send> RateLimiter<K> for FastSlow<K> {
    fn when(&self, item: &K) -> Duration {
        if self.failures.bump(item) < self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }
    fn forget(&self, item: &K) {
        self.failures.forget(item)
    }
    fn num_requeues(&self, item: &K) -> usize {
        self.failures.get(item)
    }
}

impl<K> fmt::Debug for FastSlow<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FastSlow")
            .field("fast", &self.fast)
            .field("slow", &self.slow)
            .field("max_fast_attempts", &self.max_fast_attempts)
            .finish()
    }
}

/// One bucket for all items: `burst` requests at once, then `qps` per second
/// (client-go's `BucketRateLimiter`, a `golang.org/x/time/rate` limiter whose
/// every `when` reserves a token).
///
/// Implemented as the equivalent GCRA (generic cell rate algorithm): one
/// "theoretical arrival time" instead of a token count, so that waits are exact
/// integer nanoseconds. Each `when` reserves the next slot `1/qps` after the
/// last one (or now, if the bucket refilled); it waits for whatever of that slot
/// lies beyond `burst` slots from now. The arrival time is kept as a debt in
/// `u128` nanoseconds past the last call, so no rate overflows an `Instant`:
/// however low `qps`, the first `burst` calls never wait (a `1/qps` beyond
/// `Duration::MAX` counts as `Duration::MAX`). It tracks no items: `forget`
/// does nothing and `num_requeues` is 0.
///
/// # Examples
///
/// ```
/// use delayq::workqueue::{RateLimiter, TokenBucket};
/// use delayq::MockClock;
/// use std::time::Duration;
///
/// let clock = MockClock::new();
/// let l = TokenBucket::with_clock(10.0, 2, clock.clone());
/// let waits: Vec<_> = (0..4).map(|i| l.when(&i)).collect();
/// let ms = Duration::from_millis;
/// assert_eq!(waits, [ms(0), ms(0), ms(100), ms(200)]);
/// clock.advance(Duration::from_secs(1)); // the bucket refills, up to `burst`
/// assert_eq!(l.when(&0), ms(0));
/// ```
pub struct TokenBucket {
    qps: f64,
    burst: usize,
    clock: Clock,
    /// Nanoseconds between two tokens: `1/qps`, at most `Duration::MAX`.
    every: u128,
    /// `burst · every`: how far ahead of now reservations run free.
    tolerance: u128,
    /// The time of the latest `when`, and how far past it the latest reserved
    /// slot ends (nanoseconds): the theoretical arrival time, overflow-free.
    debt: Mutex<(Instant, u128)>,
}

impl TokenBucket {
    /// `burst` at once, then `qps` per second, on the system clock.
    ///
    /// # Panics
    ///
    /// If `qps` is not positive (or is NaN), or `burst` is 0: such a bucket
    /// would never let anything through. An infinite `qps` never waits; a tiny
    /// one lets `burst` through, then waits (up to `Duration::MAX`).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::{RateLimiter, TokenBucket};
    /// use std::time::{Duration, Instant};
    ///
    /// let made = Instant::now();
    /// let l = TokenBucket::new(1.0, 1);
    /// assert_eq!(l.when(&"a"), Duration::ZERO);
    /// let wait = l.when(&"b"); // a second, less the time since `new`
    /// let second = Duration::from_secs(1);
    /// assert!(wait <= second && wait >= second.saturating_sub(made.elapsed()));
    /// assert_eq!(l.num_requeues(&"a"), 0);
    /// ```
    #[track_caller]
    pub fn new(qps: f64, burst: usize) -> TokenBucket {
        TokenBucket::with_clock(qps, burst, Clock::default())
    }

    /// As [`new`](TokenBucket::new), on `clock` (a [`MockClock`](crate::MockClock)
    /// for tests).
    ///
    /// # Panics
    ///
    /// As [`new`](TokenBucket::new).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::{RateLimiter, TokenBucket};
    /// use delayq::MockClock;
    /// use std::time::Duration;
    ///
    /// let l = TokenBucket::with_clock(2.0, 1, MockClock::new());
    /// assert_eq!(l.when(&()), Duration::ZERO);
    /// assert_eq!(l.when(&()), Duration::from_millis(500));
    /// assert_eq!(l.when(&()), Duration::from_millis(1000));
    ///
    /// let glacial = TokenBucket::with_clock(1e-30, 2, MockClock::new());
    /// assert_eq!(glacial.when(&()), Duration::ZERO); // the burst, however low the rate
    /// assert_eq!(glacial.when(&()), Duration::ZERO);
    /// assert_eq!(glacial.when(&()), Duration::MAX);
    /// ```
    #[track_caller]
    pub fn with_clock(qps: f64, burst: usize, clock: impl Into<Clock>) -> TokenBucket {
        assert!(qps > 0.0, "TokenBucket: qps must be positive (got {qps})");
        assert!(burst > 0, "TokenBucket: burst must be at least 1");
        let clock = clock.into();
        let every = Duration::try_from_secs_f64(1.0 / qps).unwrap_or(Duration::MAX).as_nanos();
        let tolerance = every.saturating_mul(burst as u128);
        let now = clock.now();
        TokenBucket { qps, burst, clock, every, tolerance, debt: Mutex::new((now, 0)) }
    }
}

impl<K> RateLimiter<K> for TokenBucket {
    fn when(&self, _item: &K) -> Duration {
        let now = self.clock.now();
        let mut debt = lock(&self.debt);
        let (then, owed) = *debt;
        // Time pays the debt off; a refilled bucket owes nothing.
        let paid = now.saturating_duration_since(then).as_nanos();
        let owed = owed.saturating_sub(paid).saturating_add(self.every);
        *debt = (then.max(now), owed);
        from_nanos(owed.saturating_sub(self.tolerance))
    }
    fn forget(&self, _item: &K) {}
    fn num_requeues(&self, _item: &K) -> usize {
        0
    }
}

impl fmt::Debug for TokenBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenBucket").field("qps", &self.qps).field("burst", &self.burst).finish()
    }
}

/// The longest wait of several limiters (client-go's `MaxOfRateLimiter`).
/// [`when`](RateLimiter::when) asks every limiter (each counts the request);
/// [`forget`](RateLimiter::forget) goes to all; [`num_requeues`](RateLimiter::num_requeues)
/// is the largest. With no limiters it never waits.
///
/// # Examples
///
/// ```
/// use delayq::workqueue::{ExponentialFailure, FastSlow, MaxOf, RateLimiter};
/// use std::time::Duration;
///
/// let ms = Duration::from_millis;
/// let l = MaxOf::new(vec![
///     Box::new(ExponentialFailure::new(ms(1), ms(1000))),
///     Box::new(FastSlow::new(ms(3), ms(500), 2)),
/// ]);
/// let waits: Vec<_> = (0..4).map(|_| l.when(&"x")).collect();
/// assert_eq!(waits, [ms(3), ms(3), ms(500), ms(500)]);
/// assert_eq!(l.num_requeues(&"x"), 4);
/// ```
pub struct MaxOf<K> {
    limiters: Vec<Box<dyn RateLimiter<K>>>,
}

impl<K> MaxOf<K> {
    /// Combines `limiters`.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::{MaxOf, RateLimiter};
    /// use std::time::Duration;
    ///
    /// let none = MaxOf::<u8>::new(Vec::new());
    /// assert_eq!(none.when(&1), Duration::ZERO);
    /// ```
    pub fn new(limiters: Vec<Box<dyn RateLimiter<K>>>) -> Self {
        MaxOf { limiters }
    }
}

impl<K> RateLimiter<K> for MaxOf<K> {
    fn when(&self, item: &K) -> Duration {
        self.limiters.iter().map(|l| l.when(item)).max().unwrap_or(Duration::ZERO)
    }
    fn forget(&self, item: &K) {
        for l in &self.limiters {
            l.forget(item);
        }
    }
    fn num_requeues(&self, item: &K) -> usize {
        self.limiters.iter().map(|l| l.num_requeues(item)).max().unwrap_or(0)
    }
}

impl<K> fmt::Debug for MaxOf<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaxOf").field("limiters", &self.limiters.len()).finish()
    }
}

/// Another limiter's wait, never longer than `max` (client-go's
/// `WithMaxWaitRateLimiter`). [`when`](RateLimiter::when) asks the wrapped
/// limiter (which counts the request as usual) and returns the shorter of its
/// wait and `max`; [`forget`](RateLimiter::forget) and
/// [`num_requeues`](RateLimiter::num_requeues) are the wrapped limiter's. A
/// bound on how long any retry can be put off, whatever the backoff says.
///
/// # Examples
///
/// ```
/// use delayq::workqueue::{ExponentialFailure, MaxWait, RateLimiter};
/// use std::time::Duration;
///
/// let ms = Duration::from_millis;
/// let l = MaxWait::new(ExponentialFailure::new(ms(5), ms(1000)), ms(15));
/// let waits: Vec<_> = (0..4).map(|_| l.when(&"a")).collect();
/// assert_eq!(waits, [ms(5), ms(10), ms(15), ms(15)]);
/// assert_eq!(l.num_requeues(&"a"), 4);
/// l.forget(&"a");
/// assert_eq!(l.when(&"a"), ms(5));
/// ```
pub struct MaxWait<R> {
    limiter: R,
    max: Duration,
}

impl<R> MaxWait<R> {
    /// Caps `limiter`'s waits at `max`.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::{MaxWait, RateLimiter, TokenBucket};
    /// use delayq::MockClock;
    /// use std::time::Duration;
    ///
    /// // A bucket of one token a minute, but nobody waits more than a second.
    /// let bucket = TokenBucket::with_clock(1.0 / 60.0, 1, MockClock::new());
    /// let l = MaxWait::new(bucket, Duration::from_secs(1));
    /// assert_eq!(l.when(&"a"), Duration::ZERO);
    /// assert_eq!(l.when(&"b"), Duration::from_secs(1));
    /// ```
    pub fn new(limiter: R, max: Duration) -> Self {
        MaxWait { limiter, max }
    }
}

impl<K, R: RateLimiter<K>> RateLimiter<K> for MaxWait<R> {
    fn when(&self, item: &K) -> Duration {
        self.limiter.when(item).min(self.max)
    }
    fn forget(&self, item: &K) {
        self.limiter.forget(item)
    }
    fn num_requeues(&self, item: &K) -> usize {
        self.limiter.num_requeues(item)
    }
}

impl<R> fmt::Debug for MaxWait<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaxWait").field("max", &self.max).finish_non_exhaustive()
    }
}

/// client-go's default: the longer of a per-item [`ExponentialFailure`] from
/// 5 ms up to 1000 s and an overall [`TokenBucket`] of 10 per second with a
/// burst of 100.
///
/// # Examples
///
/// ```
/// use delayq::workqueue::{default_rate_limiter, RateLimiter};
/// use std::time::Duration;
///
/// let l = default_rate_limiter::<&str>();
/// assert_eq!(l.when(&"a"), Duration::from_millis(5));
/// assert_eq!(l.when(&"a"), Duration::from_millis(10));
/// assert_eq!(l.when(&"b"), Duration::from_millis(5));
/// assert_eq!(l.num_requeues(&"a"), 2);
/// ```
pub fn default_rate_limiter<K: Clone + Eq + Hash + Send + Sync + 'static>() -> MaxOf<K> {
    MaxOf::new(vec![
        Box::new(ExponentialFailure::new(Duration::from_millis(5), Duration::from_secs(1000))),
        Box::new(TokenBucket::new(10.0, 100)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgotten_items_do_not_keep_the_failures_map_large() {
        let l = ExponentialFailure::new(Duration::from_millis(1), Duration::from_secs(1));
        for i in 0..100_000u32 {
            l.when(&i);
        }
        let peak = l.failures.capacity();
        assert!(peak >= 100_000);
        for i in 0..100_000u32 {
            l.forget(&i);
        }
        assert_eq!(l.failures.len(), 0);
        assert!(l.failures.capacity() <= 4 * MIN_CAPACITY, "capacity {}", l.failures.capacity());
    }

    /// client-go's `StepRateLimiter` (default_rate_limiters_test.go): `base`
    /// for the first `threshold` calls, whatever the item, then `max`.
    struct Step {
        calls: Mutex<usize>,
        threshold: usize,
        base: Duration,
        max: Duration,
    }

    impl RateLimiter<u32> for Step {
        fn when(&self, _item: &u32) -> Duration {
            let mut calls = lock(&self.calls);
            *calls += 1;
            if *calls <= self.threshold {
                self.base
            } else {
                self.max
            }
        }
        fn forget(&self, _item: &u32) {}
        fn num_requeues(&self, _item: &u32) -> usize {
            0
        }
    }

    /// client-go's `TestWithMaxWaitRateLimiter`: a step limiter of 5 ms for
    /// 100 calls, then 1000 s, capped at 500 s.
    #[test]
    fn max_wait_caps_the_wrapped_limiter_s_wait() {
        let step = Step {
            calls: Mutex::new(0),
            threshold: 100,
            base: Duration::from_millis(5),
            max: Duration::from_secs(1000),
        };
        let l = MaxWait::new(step, Duration::from_secs(500));
        for i in 0..100 {
            assert_eq!(l.when(&i), Duration::from_millis(5), "call {i}");
        }
        for i in 100..200 {
            assert_eq!(l.when(&i), Duration::from_secs(500), "call {i}");
        }
    }

    #[test]
    fn max_wait_passes_forget_and_num_requeues_through() {
        let l = MaxWait::new(ExponentialFailure::new(Duration::from_secs(1), Duration::MAX), Duration::ZERO);
        assert_eq!(l.when(&"a"), Duration::ZERO);
        assert_eq!(l.when(&"a"), Duration::ZERO);
        assert_eq!(l.num_requeues(&"a"), 2);
        l.forget(&"a");
        assert_eq!(l.num_requeues(&"a"), 0);
        let boxed: Box<dyn RateLimiter<&str>> = Box::new(l);
        let outer = MaxWait::new(boxed, Duration::from_secs(3));
        assert_eq!(outer.when(&"a"), Duration::ZERO, "the inner cap still holds");
        assert_eq!(outer.num_requeues(&"a"), 1);
    }

    #[test]
    fn from_nanos_saturates() {
        assert_eq!(from_nanos(u128::MAX), Duration::MAX);
        assert_eq!(from_nanos(1_500_000_000), Duration::from_millis(1500));
    }
}
