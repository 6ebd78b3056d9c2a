//! Scheduled callbacks: one-shot and repeating timers on a worker pool, built
//! on the delay queue.
//!
//! This is what the TimingWheel of the `tao` network framework (Go) offers —
//! timers with an id, an expiration and a repeat interval, cancel by id, a size
//! query, callbacks handed to a worker pool — with what it lacks: a timer index
//! no caller locks (the `delayq` core), callbacks that never delay the timer thread, a choice of
//! [`MissedTicks`] instead of the fixed "more than 10 s late" rule, caught
//! panics, a clean [`shutdown`](Scheduler::shutdown), and a [`MockClock`]
//! for deterministic tests.
//!
//! With the cargo feature `metrics`, a scheduler reports through the
//! [`metrics`](https://docs.rs/metrics) facade, labelled `scheduler` (its
//! [`SchedulerBuilder::name`]): timers scheduled, fired and cancelled, caught
//! panics (counters), and each run's lateness and callback duration
//! (histograms, measured on the scheduler's clock). docs/METRICS.md has the
//! table.
//!
//! [`MockClock`]: crate::MockClock
//!
//! ```
//! use delayq::timer::{MissedTicks, Scheduler};
//! use delayq::MockClock;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::{mpsc, Arc};
//! use std::time::Duration;
//!
//! let clock = MockClock::new();
//! // One worker: runs start, and finish, in due order.
//! let s = Scheduler::builder().threads(1).clock(clock.clone()).build().unwrap();
//! let (tx, rx) = mpsc::channel();
//! let ticks = Arc::new(AtomicUsize::new(0));
//! let t = ticks.clone();
//! let first = clock.now() + Duration::from_secs(1);
//! let every = s.schedule_every(first, Duration::from_secs(1), MissedTicks::Skip, move || {
//!     t.fetch_add(1, Ordering::SeqCst);
//! });
//! s.schedule_after(Duration::from_secs(10), move || tx.send("ten seconds").unwrap());
//! let never = s.schedule_after(Duration::from_secs(5), || unreachable!());
//! assert!(s.cancel(never));
//! clock.advance(Duration::from_secs(10)); // one step: 9 ticks fall due at once
//! assert_eq!(rx.recv().unwrap(), "ten seconds");
//! // `Skip`: the late tick ran once (before the one-shot due after it), and
//! // the missed ones were dropped.
//! assert_eq!(ticks.load(Ordering::SeqCst), 1);
//! assert!(s.cancel(every));
//! s.shutdown();
//! assert_eq!(s.len(), 0);
//! ```

mod builder;
mod error;
mod metrics;
mod missed;
mod scheduler;

pub use self::builder::SchedulerBuilder;
pub use self::error::BuildError;
pub use self::missed::MissedTicks;
pub use self::scheduler::{Scheduler, TimerId};
