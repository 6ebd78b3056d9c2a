//! A work queue's metrics (client-go's `queueMetrics` and `retryMetrics`), read
//! as one snapshot.

use std::collections::VecDeque;
use std::time::Duration;

/// Durations kept for percentiles: the latest this many.
pub(crate) const WINDOW: usize = 1024;

/// A snapshot of a [`WorkQueue`](super::WorkQueue)'s metrics, from
/// [`stats`](super::WorkQueue::stats). Durations are measured on the queue's
/// clock, so a [`MockClock`](crate::MockClock) makes them exact.
///
/// # Examples
///
/// ```
/// use delayq::workqueue::WorkQueue;
/// use delayq::MockClock;
/// use std::time::Duration;
///
/// let clock = MockClock::new();
/// let q = WorkQueue::builder().clock(clock.clone()).build().unwrap();
/// q.add("a");
/// q.add("a"); // de-duplicated: not counted
/// q.add_after("b", Duration::from_secs(60));
/// clock.advance(Duration::from_millis(3));
/// let a = q.get().unwrap();
/// clock.advance(Duration::from_millis(7));
/// let s = q.stats();
/// assert_eq!((s.depth, s.delayed, s.processing), (0, 1, 1));
/// assert_eq!((s.adds, s.retries), (1, 1));
/// assert_eq!(s.queue_latency.max, Duration::from_millis(3));
/// assert_eq!(s.unfinished_work, Duration::from_millis(7));
/// assert_eq!(s.longest_running, Duration::from_millis(7));
/// q.done(&a);
/// assert_eq!(q.stats().work_duration.p50, Duration::from_millis(7));
/// q.shut_down();
/// assert_eq!(q.stats().dropped_delayed, 1); // "b" was still waiting
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Ready items: waiting for a [`get`](super::WorkQueue::get) (as `len()`).
    pub depth: usize,
    /// Items in the delay stage (added with a delay, not yet ready).
    pub delayed: usize,
    /// Items handed out by `get` and not yet `done`.
    pub processing: usize,
    /// Items added (not counting an `add` of an item already waiting).
    pub adds: u64,
    /// Calls to `add_after` and `add_rate_limited` before shut down.
    pub retries: u64,
    /// Delayed items dropped by shut down before they were ready.
    pub dropped_delayed: u64,
    /// From an item's add to its `get`.
    pub queue_latency: Percentiles,
    /// From an item's `get` to its `done`.
    pub work_duration: Percentiles,
    /// The sum of the time items being processed have spent since their `get`
    /// (client-go's "unfinished work").
    pub unfinished_work: Duration,
    /// The longest time any item being processed has spent since its `get`.
    pub longest_running: Duration,
    /// Panics of user code (an item's `Drop`, `Hash`, `Eq` or `Clone`) caught on
    /// the queue's own paths: the mover thread and shut down. An item whose
    /// `Hash` or `Eq` panicked in the mover could not be added; it stays in the
    /// delay stage's count until shut down drops it.
    pub panics: u64,
}

/// A summary of a series of durations: its count and, over the latest 1024 of
/// them, nearest-rank percentiles and the maximum. All zero when empty.
///
/// # Examples
///
/// ```
/// use delayq::workqueue::Percentiles;
///
/// let p = Percentiles::default();
/// assert_eq!(p.count, 0);
/// assert_eq!(p.p99, std::time::Duration::ZERO);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Percentiles {
    /// How many durations were recorded in all.
    pub count: u64,
    /// The median.
    pub p50: Duration,
    /// The 90th percentile.
    pub p90: Duration,
    /// The 99th percentile.
    pub p99: Duration,
    /// The largest.
    pub max: Duration,
}

/// The latest `WINDOW` durations of a series, and its count.
#[derive(Debug, Default)]
pub(crate) struct Samples {
    latest: VecDeque<Duration>,
    count: u64,
}

impl Samples {
    pub(crate) fn record(&mut self, d: Duration) {
        if self.latest.len() == WINDOW {
            self.latest.pop_front();
        }
        self.latest.push_back(d);
        self.count += 1;
    }

    pub(crate) fn summary(&self) -> Percentiles {
        let mut sorted: Vec<Duration> = self.latest.iter().copied().collect();
        sorted.sort_unstable();
        let rank = |p: usize| -> Duration {
            if sorted.is_empty() {
                return Duration::ZERO;
            }
            // Nearest rank: the smallest value with at least p% of the values at or below it.
            let i = (p * sorted.len()).div_ceil(100).max(1) - 1;
            sorted[i]
        };
        Percentiles {
            count: self.count,
            p50: rank(50),
            p90: rank(90),
            p99: rank(99),
            max: sorted.last().copied().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_over_the_window() {
        let mut s = Samples::default();
        for i in 1..=100 {
            s.record(Duration::from_millis(i));
        }
        let p = s.summary();
        assert_eq!(p.count, 100);
        assert_eq!(p.p50, Duration::from_millis(50));
        assert_eq!(p.p90, Duration::from_millis(90));
        assert_eq!(p.p99, Duration::from_millis(99));
        assert_eq!(p.max, Duration::from_millis(100));
        for _ in 0..WINDOW {
            s.record(Duration::from_secs(1));
        }
        let p = s.summary();
        assert_eq!(p.count, 100 + WINDOW as u64);
        assert_eq!(p.p50, Duration::from_secs(1));
    }

    #[test]
    fn one_sample() {
        let mut s = Samples::default();
        s.record(Duration::from_millis(7));
        let p = s.summary();
        assert_eq!(
            (p.p50, p.p99, p.max),
            (Duration::from_millis(7), Duration::from_millis(7), Duration::from_millis(7))
        );
    }
}
