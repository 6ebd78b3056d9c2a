//! A work queue in the style of Kubernetes client-go's `workqueue` package:
//! de-duplicating FIFO, delayed adds and rate-limited retries, built on the
//! delay queue.
//!
//! - [`WorkQueue`]: `add` / `get` / `done` with client-go's dirty and processing
//!   sets, `add_after` (its delay stage is a `delayq` queue), `add_rate_limited`
//!   / `forget` / `num_requeues`, `shut_down` / `shut_down_with_drain`, and
//!   [`Stats`].
//! - [`RateLimiter`]s: [`ExponentialFailure`], [`FastSlow`], [`TokenBucket`],
//!   [`MaxOf`], [`MaxWait`] and client-go's [`default_rate_limiter`].
//!
//! Differences from client-go, all documented where they apply: delayed items
//! dropped by shut down are counted ([`Stats::dropped_delayed`]); the failures
//! maps shrink after `forget` (below); `done` of an item that is not being
//! processed does nothing; a [`MockClock`](crate::MockClock) step returns once
//! the items it made ready are in the FIFO. Three parts of client-go have no
//! counterpart, by design, and neither have the Go tests of them: the
//! pluggable FIFO (`QueueConfig.Queue`) and its `Touch` hook, called when a
//! waiting item is added again (the `Touch` checks of `TestCollapse` and
//! `TestCollapseWhileProcessing`; the FIFO here is built in, and the rest of
//! those tests holds); the goroutine that refreshes the work-in-progress
//! gauges every 500 ms (`TestMetricShutdown` checks that it stops; here the
//! queue's own calls refresh them, see Metrics below, so there is no thread
//! to stop); and `ParallelizeUntil` (`TestParallelizeUntil`), a helper that
//! runs a function over `n` pieces on `workers` goroutines, which is no part
//! of a queue (`std::thread::scope` or rayon do it in Rust).
//!
//! # Metrics
//!
//! With the cargo feature `metrics`, a work queue reports client-go's seven
//! metrics through the [`metrics`](https://docs.rs/metrics) facade, with the
//! same names, meanings and label (`name`, set by
//! [`WorkQueueBuilder::name`]): `workqueue_depth`, `workqueue_adds_total`,
//! `workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds`,
//! `workqueue_unfinished_work_seconds`,
//! `workqueue_longest_running_processor_seconds` and `workqueue_retries_total`
//! (docs/METRICS.md has the table). As in client-go, an `add` of an item
//! already dirty is not an add, every `add_after` (and so every
//! `add_rate_limited`) before shut down is a retry, and the depth counts the
//! items added and not yet handed out by `get` (including items added again
//! while being processed). The two gauges of the work in progress, which
//! client-go refreshes every 500 ms from a goroutine, are refreshed by every
//! add, `get`, `done` and [`WorkQueue::stats`]: while nothing at all happens
//! they keep their last value, so an application that wants them to grow
//! during a stall calls `stats()` on its scrape schedule.
//!
//! # Failures map
//!
//! [`ExponentialFailure`] and [`FastSlow`] count failures per item in a map, as
//! client-go does, whose Go map never gives memory back (a known complaint).
//! Here [`forget`](RateLimiter::forget) removes the item's entry, and when the
//! map is at most a quarter full its storage shrinks (to twice its length, at
//! least 64 entries), so its memory follows the number of items failing *now*,
//! not the peak. An item never forgotten stays counted: call
//! [`WorkQueue::forget`] when an item succeeds or is given up on.
//!
//! ```
//! use delayq::workqueue::{ExponentialFailure, WorkQueue};
//! use delayq::MockClock;
//! use std::time::Duration;
//!
//! let ms = Duration::from_millis;
//! let clock = MockClock::new();
//! let q = WorkQueue::builder()
//!     .rate_limiter(ExponentialFailure::new(ms(5), ms(1000)))
//!     .clock(clock.clone())
//!     .build()
//!     .unwrap();
//! q.add("sync pod");
//! let item = q.get().unwrap();
//! // Processing failed: retry later, 5 ms, then 10 ms, …
//! q.add_rate_limited(item);
//! q.done(&item);
//! assert_eq!(q.len(), 0);
//! clock.advance(ms(5));
//! let item = q.get().unwrap();
//! // Success this time: forget the failures.
//! q.forget(&item);
//! q.done(&item);
//! assert_eq!(q.num_requeues(&"sync pod"), 0);
//! ```

mod builder;
mod error;
mod metrics;
mod queue;
mod rate_limiter;
mod stats;

pub use self::builder::WorkQueueBuilder;
pub use self::error::BuildError;
pub use self::queue::WorkQueue;
pub use self::rate_limiter::{
    default_rate_limiter, ExponentialFailure, FastSlow, MaxOf, MaxWait, RateLimiter, TokenBucket,
};
pub use self::stats::{Percentiles, Stats};
