//! What a scheduler reports through the [`metrics`](https://docs.rs/metrics)
//! facade (cargo feature `metrics`), with the label `scheduler` (the
//! [`SchedulerBuilder::name`](super::SchedulerBuilder::name)). Without the
//! feature `Metrics` is an empty type whose methods do nothing and read no
//! clock.
//!
//! Where each figure is recorded:
//! - **scheduled**: by `schedule_*`, once the timer is in the table (not
//!   after shut down, when the id never runs);
//! - **cancelled**: by a `cancel` that answers `true`;
//! - **fired**, **lateness** and **callback duration**: around each call of a
//!   callback on a pool worker — one clock reading before it (fire time −
//!   grid time is the lateness) and one after it, whether it returned or
//!   panicked. A [`Burst`](super::MissedTicks::Burst) catch-up's extra runs
//!   are fired runs too, each late against its own grid time;
//! - **panics**: wherever the scheduler catches one (a callback, the `Drop`
//!   of a callback, the pool's last-resort handler), the same events as
//!   [`Scheduler::panicked`](super::Scheduler::panicked), a batch of drops
//!   as one increment.

use crate::Clock;
use std::time::Instant;

#[cfg(feature = "metrics")]
pub(super) use on::Metrics;

#[cfg(not(feature = "metrics"))]
pub(super) use off::Metrics;

#[cfg(not(feature = "metrics"))]
mod off {
    use super::{Clock, Instant};

    /// The feature is off: nothing is recorded, nothing is held.
    #[derive(Debug, Clone)]
    pub(in crate::timer) struct Metrics;

    /// A run in progress: nothing to remember.
    pub(in crate::timer) struct Fire;

    impl Metrics {
        #[inline(always)]
        pub(in crate::timer) fn new(_name: &str) -> Metrics {
            Metrics
        }
        #[inline(always)]
        pub(in crate::timer) fn scheduled(&self) {}
        #[inline(always)]
        pub(in crate::timer) fn cancelled(&self) {}
        #[inline(always)]
        pub(in crate::timer) fn panicked(&self, _n: u64) {}
        #[inline(always)]
        pub(in crate::timer) fn fire(&self, _clock: &Clock, _due: Option<Instant>) -> Fire {
            Fire
        }
        #[inline(always)]
        pub(in crate::timer) fn returned(&self, _clock: &Clock, _fire: Fire) {}
    }
}

#[cfg(feature = "metrics")]
mod on {
    use super::{Clock, Instant};
    use metrics::{Counter, Histogram, Unit};

    /// The scheduler's handles, registered with the recorder installed when
    /// it was built. Clones share them (the pool's panic handler holds one).
    #[derive(Clone)]
    pub(in crate::timer) struct Metrics {
        scheduled: Counter,
        fired: Counter,
        cancelled: Counter,
        panics: Counter,
        lateness: Histogram,
        callback: Histogram,
    }

    impl std::fmt::Debug for Metrics {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Metrics").finish_non_exhaustive()
        }
    }

    /// A run in progress: when its callback was called.
    pub(in crate::timer) struct Fire(Instant);

    fn describe() {
        use metrics::{describe_counter, describe_histogram};
        describe_counter!("delayq_timer_scheduled_total", Unit::Count, "Timers scheduled.");
        describe_counter!(
            "delayq_timer_fired_total",
            Unit::Count,
            "Callback runs started (each run of a repeating timer counts)."
        );
        describe_counter!("delayq_timer_cancelled_total", Unit::Count, "Cancels that prevented a run.");
        describe_counter!(
            "delayq_timer_panics_total",
            Unit::Count,
            "Panics of callbacks and of their drops, caught."
        );
        describe_histogram!(
            "delayq_timer_lateness_seconds",
            Unit::Seconds,
            "Time a callback was called minus the time it was due."
        );
        describe_histogram!(
            "delayq_timer_callback_duration_seconds",
            Unit::Seconds,
            "How long a callback ran (until it returned or panicked)."
        );
    }

    impl Metrics {
        pub(in crate::timer) fn new(name: &str) -> Metrics {
            use metrics::{counter, histogram};
            describe();
            let n = name.to_owned();
            Metrics {
                scheduled: counter!("delayq_timer_scheduled_total", "scheduler" => n.clone()),
                fired: counter!("delayq_timer_fired_total", "scheduler" => n.clone()),
                cancelled: counter!("delayq_timer_cancelled_total", "scheduler" => n.clone()),
                panics: counter!("delayq_timer_panics_total", "scheduler" => n.clone()),
                lateness: histogram!("delayq_timer_lateness_seconds", "scheduler" => n.clone()),
                callback: histogram!("delayq_timer_callback_duration_seconds", "scheduler" => n),
            }
        }

        pub(in crate::timer) fn scheduled(&self) {
            self.scheduled.increment(1);
        }

        pub(in crate::timer) fn cancelled(&self) {
            self.cancelled.increment(1);
        }

        pub(in crate::timer) fn panicked(&self, n: u64) {
            if n > 0 {
                self.panics.increment(n);
            }
        }

        /// A callback due at `due` (its grid time; `None` if unknown) is
        /// about to be called.
        pub(in crate::timer) fn fire(&self, clock: &Clock, due: Option<Instant>) -> Fire {
            let now = clock.now();
            self.fired.increment(1);
            if let Some(due) = due {
                self.lateness.record(now.saturating_duration_since(due).as_secs_f64());
            }
            Fire(now)
        }

        /// The callback of `fire` returned (or panicked).
        pub(in crate::timer) fn returned(&self, clock: &Clock, fire: Fire) {
            self.callback.record(clock.now().saturating_duration_since(fire.0).as_secs_f64());
        }
    }
}
