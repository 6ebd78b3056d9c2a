//! `delayq-durable`: delayed jobs that survive a crash, delivered at least once.
//!
//! In-memory timers vanish when the process dies. Here a job is stored before
//! the producer is told "sent", handed out with a lease, deleted only on
//! acknowledgement, and due again when a lease expires — the contract the job
//! systems converge on (Beanstalkd's reserved-with-TTR jobs, Sidekiq's
//! scheduled set, Faktory's retries and dead set, Oban's and River's rescue of
//! orphaned jobs).
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use delayq_durable::DurableQueue;
//!
//! # let dir = std::env::temp_dir().join(format!("delayq-doc-lib-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! let q = DurableQueue::builder().max_attempts(3).open(dir.join("jobs.redb")).unwrap();
//! q.send_after(b"charge order 12", Duration::from_millis(10)).unwrap();
//!
//! let job = q.reserve(Duration::from_secs(30)).unwrap();
//! assert_eq!(job.attempt(), 1);
//! // The charge failed: retry in 5 ms (a worker would back off exponentially).
//! q.nack(&job, SystemTime::now() + Duration::from_millis(5)).unwrap();
//! let job = q.reserve(Duration::from_secs(30)).unwrap();
//! assert_eq!(job.attempt(), 2); // a redelivery says so
//! assert!(q.ack(&job).unwrap());
//! # drop(q); std::fs::remove_dir_all(&dir).unwrap();
//! ```
//!
//! # Backends
//!
//! | type | where the jobs live | for |
//! | --- | --- | --- |
//! | [`DurableQueue`] | one [redb] file (pure Rust, ACID, copy-on-write B-tree) | one process; no server to run (the default) |
//! | `RedisQueue` (feature `redis`) | a Redis server: sorted sets, one Lua script per state change | many processes on many machines |
//! | `PgQueue` (feature `postgres`) | a PostgreSQL database: one table, one statement per state change, `SKIP LOCKED` reserves, `LISTEN`/`NOTIFY` wake-ups | many processes; jobs enqueued in the application's own transaction (`send_after_in`, …) |
//!
//! Each implements [`JobQueue`], the contract; [`Typed`] (feature `serde`, on by
//! default) carries any `Serialize + DeserializeOwned` payload as JSON over
//! either.
//!
//! # Async clients
//!
//! [`AsyncJobQueue`] is the contract as async methods, whose waits suspend a
//! task instead of blocking a thread (feature `async`):
//! [`AsyncDurableQueue`] on any executor with no runtime (commits awaited on
//! the writer's reply, `reserve` on the core queue's async receive, timeouts
//! from a core queue too), and `AsyncRedisQueue` (feature `redis-async`,
//! which brings tokio: the `redis` crate's multiplexed async connection runs
//! on it). A dropped `reserve` future loses no job; see each type for what
//! happens to a lease that was being taken for it.
//!
//! # The worker runtime
//!
//! [`Worker`] is the loop around the queue: handler threads that reserve
//! jobs, dispatch on their [kind](Job::kind) (typed [`JobKind`] jobs, feature
//! `serde`), ack on success, retry errors and panics by a [`RetryPolicy`]
//! (the message kept as [`Job::last_error`]), bury unknown kinds and payloads
//! that do not decode, keep leases alive while a handler runs, and
//! [shut down](Worker::shutdown) with a grace period — on either backend.
//!
//! # Schedules, unique jobs, priorities, limits, tracing
//!
//! On every backend: [`JobQueue::schedule`] stores a recurring [`Schedule`]
//! (cron expressions in IANA time zones, or fixed intervals; a
//! [missed-tick policy](Missed)) whose ticks the workers fire, one job per
//! tick however many run (a tick job per schedule, fired by a
//! compare-and-set in the backend); [`JobQueue::send_with`] takes a
//! priority (`0..=9`, 0 first among due jobs; aging opt-in on each builder)
//! and a [`Unique`] key (a job holding it is returned, atomically); the
//! [`Worker`] limits handlers per kind ([`WorkerBuilder::concurrency_for`],
//! [`WorkerBuilder::rate_limit_for`]) without leasing what it cannot start
//! ([`JobQueue::reserve_excluding`]), runs async handlers with
//! [timeouts](WorkerBuilder::timeout_for), and opens a `tracing` span per
//! job (feature `tracing`). On Redis, `RedisQueue::set_rate_limit` is a
//! per-kind limit shared by every worker of the queue.
//!
//! # Timing
//!
//! Deadlines are wall-clock ([`SystemTime`](std::time::SystemTime)): an
//! `Instant` means nothing after a restart. The embedded queue keeps an
//! in-memory `delayq` queue of timers — each pending job's deadline and each
//! leased job's lease end — rebuilt from the file on open, so `reserve` wakes
//! at the deadline, with no polling and no periodic tick, and checks the wall
//! clock before handing a job out: never early by the wall clock.
//!
//! # Durability and throughput
//!
//! By default every call returns after its change is fsync'd. One writer
//! thread gathers every change waiting (sends, leases, acks, …) into one
//! transaction and one fsync (group commit), so concurrent callers share the
//! cost; `send_many`, `reserve_many` and `ack_many` put a whole batch in one
//! change. [`Durability::Window`] trades the last few milliseconds of changes
//! on a crash for fewer fsyncs, as Beanstalkd's `-f`.
//!
//! # Why a package of its own
//!
//! `delayq` (the core) stays small: one dependency and Rust 1.75. This package
//! adds redb (which needs Rust 1.90) and serde, and builds on the core's public
//! API only.
//!
//! [redb]: https://www.redb.org

#![warn(missing_docs, missing_debug_implementations, unreachable_pub, rust_2018_idioms)]
#![forbid(unsafe_code)]

#[cfg(feature = "async")]
mod alarm;
#[cfg(feature = "async")]
mod async_contract;
#[cfg(feature = "async")]
mod async_queue;
mod builder;
mod contain;
mod contract;
mod error;
mod inspect;
mod job;
#[cfg(feature = "serde")]
mod kind;
mod limits;
mod listing;
mod metrics;
#[cfg(any(feature = "redis", feature = "postgres"))]
mod notifier;
mod offline;
mod options;
#[cfg(feature = "postgres")]
mod pg_queue;
mod queue;
mod record;
#[cfg(feature = "redis")]
mod redis_queue;
mod reply;
mod retry;
mod schedule;
mod stop;
mod stored;
#[cfg(feature = "serde")]
mod typed;
mod worker;
mod writer;

#[cfg(feature = "async")]
pub use crate::async_contract::AsyncJobQueue;
#[cfg(feature = "async")]
pub use crate::async_queue::AsyncDurableQueue;
pub use crate::builder::{Builder, Durability};
pub use crate::contract::JobQueue;
pub use crate::error::DurableError;
pub use crate::inspect::{Filter, Inspect, JobInfo, JobState, KindCounts, Page, Sample, Throughput};
pub use crate::job::{Job, JobId, Stats};
#[cfg(feature = "serde")]
pub use crate::kind::JobKind;
pub use crate::offline::OfflineFile;
pub use crate::options::{
    SendOptions, Sent, Unique, UniqueStates, MAX_UNIQUE_KEY, PRIORITY_HIGHEST, PRIORITY_LOWEST,
};
#[cfg(feature = "postgres-async")]
pub use crate::pg_queue::AsyncPgQueue;
#[cfg(feature = "postgres")]
pub use crate::pg_queue::{PgBuilder, PgQueue};
pub use crate::queue::{CommitStats, DurableQueue};
#[cfg(feature = "redis-async")]
pub use crate::redis_queue::AsyncRedisQueue;
#[cfg(feature = "redis")]
pub use crate::redis_queue::{RedisBuilder, RedisQueue};
pub use crate::retry::RetryPolicy;
pub use crate::schedule::{fire_tick, Missed, Schedule, ScheduleInfo, MAX_CATCH_UP};
pub use crate::stop::StopSignal;
pub use crate::stored::{Fire, StoredSchedule, MAX_SCHEDULE_NAME, TICK_KIND};
#[cfg(feature = "serde")]
pub use crate::typed::{Typed, TypedJob};
pub use crate::worker::{Context, Event, Shutdown, ShutdownHandle, Worker, WorkerBuilder, WorkerStats};
