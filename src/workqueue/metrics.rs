//! What a work queue reports through the [`metrics`](https://docs.rs/metrics)
//! facade (cargo feature `metrics`): client-go's seven workqueue metrics, with
//! its names, meanings and label (`name`, the
//! [`WorkQueueBuilder::name`](super::WorkQueueBuilder::name)). Without the
//! feature `Metrics` is an empty type whose methods do nothing.
//!
//! `Metrics` lives in the queue's `State`, so every figure is recorded under
//! the lock that `add`, `get` and `done` take anyway, and from the state it
//! describes:
//! - **adds** and **retries** are reported as the growth of `State::adds` and
//!   `State::retries` since the last report: the mover reports a whole batch of
//!   arrivals at once, and an add whose item's `Hash` panicked half-way is
//!   reported by the next one, never twice, never lost;
//! - **depth** is `dirty.len()`: client-go's gauge goes up on each counted add
//!   and down on each `get`, so it counts the items added and not yet handed
//!   out, including items added again while being processed (they wait for
//!   `done`) — which [`WorkQueue::len`](super::WorkQueue::len) does not;
//! - **unfinished work** and **longest running processor**, which client-go
//!   refreshes from a goroutine every 500 ms, are refreshed by every add
//!   (arrivals included), `get`, `done` and
//!   [`stats`](super::WorkQueue::stats), from a running sum of the start times
//!   of the items being processed and an ordered multiset of those times:
//!   O(log n) per refresh, no thread, no scan.

use std::time::{Duration, Instant};

#[cfg(feature = "metrics")]
pub(super) use on::Metrics;

#[cfg(not(feature = "metrics"))]
pub(super) use off::Metrics;

#[cfg(not(feature = "metrics"))]
mod off {
    use super::{Duration, Instant};

    /// The feature is off: nothing is recorded, nothing is held.
    #[derive(Debug)]
    pub(in crate::workqueue) struct Metrics;

    impl Metrics {
        #[inline(always)]
        pub(in crate::workqueue) fn new(_name: &str, _origin: Instant) -> Metrics {
            Metrics
        }
        #[inline(always)]
        pub(in crate::workqueue) fn added(&mut self, _adds: u64, _depth: usize, _now: Instant) {}
        #[inline(always)]
        pub(in crate::workqueue) fn retried(&mut self, _retries: u64) {}
        #[inline(always)]
        pub(in crate::workqueue) fn got(&mut self, _waited: Option<Duration>, _depth: usize, _now: Instant) {}
        #[inline(always)]
        pub(in crate::workqueue) fn started(&mut self, _at: Instant) {}
        #[inline(always)]
        pub(in crate::workqueue) fn finished(&mut self, _started: Instant) {}
        #[inline(always)]
        pub(in crate::workqueue) fn done(&mut self, _started: Instant, _now: Instant) {}
        #[inline(always)]
        pub(in crate::workqueue) fn refresh(&mut self, _now: Instant) {}
    }
}

#[cfg(feature = "metrics")]
mod on {
    use super::{Duration, Instant};
    use metrics::{Counter, Gauge, Histogram, Unit};
    use std::collections::BTreeMap;

    /// The queue's handles, registered with the recorder installed when the
    /// queue was built, and what the gauges are computed from.
    pub(in crate::workqueue) struct Metrics {
        depth: Gauge,
        adds: Counter,
        queue_duration: Histogram,
        work_duration: Histogram,
        unfinished_work: Gauge,
        longest_running: Gauge,
        retries: Counter,
        /// `State::adds` and `State::retries` as last reported.
        reported_adds: u64,
        reported_retries: u64,
        running: Running,
    }

    impl std::fmt::Debug for Metrics {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Metrics").field("running", &self.running.count).finish_non_exhaustive()
        }
    }

    /// The start times of the items being processed: their count, their sum
    /// (nanoseconds past `origin`) and how many started at each instant.
    ///
    /// Invariant: it holds exactly the values of `State::processing` — every
    /// insert there is `start`ed here, every removal `finish`ed.
    struct Running {
        origin: Instant,
        count: u64,
        sum: u128,
        starts: BTreeMap<Instant, u64>,
    }

    impl Running {
        fn since_origin(&self, t: Instant) -> u128 {
            t.saturating_duration_since(self.origin).as_nanos()
        }

        fn start(&mut self, at: Instant) {
            self.count += 1;
            self.sum += self.since_origin(at);
            *self.starts.entry(at).or_insert(0) += 1;
        }

        fn finish(&mut self, started: Instant) {
            let Some(n) = self.starts.get_mut(&started) else { return };
            *n -= 1;
            if *n == 0 {
                self.starts.remove(&started);
            }
            self.count -= 1;
            self.sum -= self.since_origin(started);
        }

        /// (Σ (now − start), max (now − start)) in seconds.
        fn ages(&self, now: Instant) -> (f64, f64) {
            let total = (self.count as u128 * self.since_origin(now)).saturating_sub(self.sum);
            let longest =
                self.starts.keys().next().map_or(Duration::ZERO, |&t| now.saturating_duration_since(t));
            (total as f64 / 1e9, longest.as_secs_f64())
        }
    }

    fn describe() {
        use metrics::{describe_counter, describe_gauge, describe_histogram};
        describe_gauge!("workqueue_depth", Unit::Count, "Current depth of workqueue");
        describe_counter!("workqueue_adds_total", Unit::Count, "Total number of adds handled by workqueue");
        describe_histogram!(
            "workqueue_queue_duration_seconds",
            Unit::Seconds,
            "How long in seconds an item stays in workqueue before being requested."
        );
        describe_histogram!(
            "workqueue_work_duration_seconds",
            Unit::Seconds,
            "How long in seconds processing an item from workqueue takes."
        );
        describe_gauge!(
            "workqueue_unfinished_work_seconds",
            Unit::Seconds,
            "How many seconds of work has done that is in progress and hasn't been observed by \
             work_duration. Large values indicate stuck threads. One can deduce the number of stuck \
             threads by observing the rate at which this increases."
        );
        describe_gauge!(
            "workqueue_longest_running_processor_seconds",
            Unit::Seconds,
            "How many seconds has the longest running processor for workqueue been running."
        );
        describe_counter!(
            "workqueue_retries_total",
            Unit::Count,
            "Total number of retries handled by workqueue"
        );
    }

    impl Metrics {
        pub(in crate::workqueue) fn new(name: &str, origin: Instant) -> Metrics {
            use metrics::{counter, gauge, histogram};
            describe();
            let n = name.to_owned();
            Metrics {
                depth: gauge!("workqueue_depth", "name" => n.clone()),
                adds: counter!("workqueue_adds_total", "name" => n.clone()),
                queue_duration: histogram!("workqueue_queue_duration_seconds", "name" => n.clone()),
                work_duration: histogram!("workqueue_work_duration_seconds", "name" => n.clone()),
                unfinished_work: gauge!("workqueue_unfinished_work_seconds", "name" => n.clone()),
                longest_running: gauge!("workqueue_longest_running_processor_seconds", "name" => n.clone()),
                retries: counter!("workqueue_retries_total", "name" => n),
                reported_adds: 0,
                reported_retries: 0,
                running: Running { origin, count: 0, sum: 0, starts: BTreeMap::new() },
            }
        }

        /// After one add or a batch of them: `adds` is `State::adds`, `depth`
        /// is `dirty.len()`.
        pub(in crate::workqueue) fn added(&mut self, adds: u64, depth: usize, now: Instant) {
            let new = adds.saturating_sub(self.reported_adds);
            if new > 0 {
                self.reported_adds = adds;
                self.adds.increment(new);
                self.depth.set(depth as f64);
            }
            self.refresh(now);
        }

        /// After `add_after`: `retries` is `State::retries`.
        pub(in crate::workqueue) fn retried(&mut self, retries: u64) {
            let new = retries.saturating_sub(self.reported_retries);
            if new > 0 {
                self.reported_retries = retries;
                self.retries.increment(new);
            }
        }

        /// After a `get` (whose item waited `waited` since its add) has
        /// inserted its item into `processing` (and `started` it here).
        pub(in crate::workqueue) fn got(&mut self, waited: Option<Duration>, depth: usize, now: Instant) {
            if let Some(w) = waited {
                self.queue_duration.record(w.as_secs_f64());
            }
            self.depth.set(depth as f64);
            self.refresh(now);
        }

        /// An item went into `processing` at `at`.
        pub(in crate::workqueue) fn started(&mut self, at: Instant) {
            self.running.start(at);
        }

        /// An item that went into `processing` at `started` left it.
        pub(in crate::workqueue) fn finished(&mut self, started: Instant) {
            self.running.finish(started);
        }

        /// After `done` of an item that `get` handed out at `started`.
        pub(in crate::workqueue) fn done(&mut self, started: Instant, now: Instant) {
            self.running.finish(started);
            self.work_duration.record(now.saturating_duration_since(started).as_secs_f64());
            self.refresh(now);
        }

        /// The two gauges of the work in progress, as of `now`.
        pub(in crate::workqueue) fn refresh(&mut self, now: Instant) {
            let (total, longest) = self.running.ages(now);
            self.unfinished_work.set(total);
            self.longest_running.set(longest);
        }
    }
}
