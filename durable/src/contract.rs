//! [`JobQueue`]: the durable-jobs contract, one trait for every backend, so that
//! code switches backend by changing how the queue is opened.

use std::time::{Duration, SystemTime};

use crate::error::DurableError;
use crate::job::{Job, JobId, Stats};
#[cfg(feature = "serde")]
use crate::kind::JobKind;
use crate::options::{SendOptions, Sent};
use crate::queue::DurableQueue;
use crate::schedule::{Schedule, ScheduleInfo};
use crate::stop::StopSignal;
use crate::stored::{Fire, StoredSchedule};

/// Durable delayed jobs, at least once: a job is stored before `send_*`
/// returns `Ok`, handed out by `reserve` with a lease, deleted only by `ack`
/// with that lease's token, and due again (as its next attempt) when the lease
/// ends without an ack; after `max_attempts` failed deliveries it is dead.
///
/// Implemented by [`DurableQueue`] (an embedded file) and, with the `redis`
/// feature, by `RedisQueue` (a Redis server). The methods mean the same on
/// both, and each type has the same methods inherently (so the trait need
/// not be imported to use one backend).
///
/// ```
/// use std::time::Duration;
/// use delayq_durable::{DurableQueue, JobQueue};
///
/// fn drain_one(q: &impl JobQueue) -> Result<Option<Vec<u8>>, delayq_durable::DurableError> {
///     let Some(job) = q.reserve_timeout(Duration::from_secs(30), Duration::from_secs(1))? else {
///         return Ok(None);
///     };
///     q.ack(&job)?;
///     Ok(Some(job.payload().to_vec()))
/// }
/// # let dir = std::env::temp_dir().join(format!("delayq-doc-contract-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let q = DurableQueue::open(dir.join("contract.redb")).unwrap();
/// JobQueue::send_after(&q, b"x", Duration::ZERO).unwrap();
/// assert_eq!(drain_one(&q).unwrap(), Some(b"x".to_vec()));
/// # drop(q); std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub trait JobQueue: Send + Sync {
    /// Stores a job due at `at` (wall clock; the server's for Redis). A deadline
    /// more than 2^52 µs (about 142.7 years) ahead is
    /// [`DeadlineOutOfRange`](DurableError::DeadlineOutOfRange) on every backend.
    fn send_at(&self, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError>;
    /// Stores a job due `delay` from now (by the queue's clock).
    fn send_after(&self, payload: &[u8], delay: Duration) -> Result<JobId, DurableError>;
    /// As `send_at`, with a kind stored beside the payload ([`Job::kind`]),
    /// what a [`Worker`](crate::Worker) dispatches on. A kind is at most 255
    /// bytes, without control characters
    /// ([`InvalidArgument`](DurableError::InvalidArgument) otherwise); `""`
    /// is no kind.
    fn send_kind_at(&self, kind: &str, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError>;
    /// As `send_after`, with a kind.
    fn send_kind_after(&self, kind: &str, payload: &[u8], delay: Duration) -> Result<JobId, DurableError>;
    /// Stores a typed job: its [`JobKind::KIND`] as the kind, the value as
    /// JSON (feature `serde`). A value whose JSON does not decode back (an
    /// `f64` NaN) is refused with [`Codec`](DurableError::Codec).
    #[cfg(feature = "serde")]
    fn enqueue<K: JobKind>(&self, job: &K, at: SystemTime) -> Result<JobId, DurableError>
    where
        Self: Sized,
    {
        self.send_kind_at(K::KIND, &crate::kind::encode(job)?, at)
    }
    /// As [`enqueue`](Self::enqueue), due `delay` from now (by the queue's clock).
    #[cfg(feature = "serde")]
    fn enqueue_after<K: JobKind>(&self, job: &K, delay: Duration) -> Result<JobId, DurableError>
    where
        Self: Sized,
    {
        self.send_kind_after(K::KIND, &crate::kind::encode(job)?, delay)
    }
    /// Stores several jobs at once, all or none.
    fn send_many(&self, jobs: &[(&[u8], SystemTime)]) -> Result<Vec<JobId>, DurableError>;
    /// Blocks until a job is due; leases it to the caller.
    fn reserve(&self, lease: Duration) -> Result<Job, DurableError>;
    /// As `reserve`, `Ok(None)` after `timeout`.
    fn reserve_timeout(&self, lease: Duration, timeout: Duration) -> Result<Option<Job>, DurableError>;
    /// As `reserve`, `Ok(None)` once `stop` is [raised](StopSignal::raise)
    /// (at once if it is already), with no timeout and no periodic wake-up:
    /// what a [`Worker`](crate::Worker)'s idle threads block in. A job leased
    /// before the signal is returned.
    fn reserve_or_stop(&self, lease: Duration, stop: &StopSignal) -> Result<Option<Job>, DurableError>;
    /// Waits up to `timeout` for due jobs, then leases up to `max` of them at
    /// once (any `max` ≥ 1, `usize::MAX` included; Redis leases at most 1000
    /// per call, the embedded file as many as are due).
    fn reserve_many(&self, lease: Duration, max: usize, timeout: Duration) -> Result<Vec<Job>, DurableError>;
    /// Deletes a job the caller holds the lease of; `Ok(false)` if the lease is not the caller's any more.
    fn ack(&self, job: &Job) -> Result<bool, DurableError>;
    /// `ack` for several jobs; the flags in order.
    fn ack_many(&self, jobs: &[Job]) -> Result<Vec<bool>, DurableError>;
    /// Retries the job at `retry_at`, or moves it to the dead set after its last attempt.
    fn nack(&self, job: &Job, retry_at: SystemTime) -> Result<bool, DurableError>;
    /// As `nack`, and stores `error` as the job's [`Job::last_error`] (cut to
    /// 4 KiB at a character boundary; `""` is stored as "(no message)").
    fn nack_with_error(&self, job: &Job, retry_at: SystemTime, error: &str) -> Result<bool, DurableError>;
    /// Moves a job the caller holds the lease of to the dead set now,
    /// whatever attempts it has left, with `error` as its last error: for a
    /// job no retry can help. `Ok(false)` if the lease is not the caller's.
    fn kill(&self, job: &Job, error: &str) -> Result<bool, DurableError>;
    /// Extends the caller's lease to `lease` from now.
    fn extend(&self, job: &Job, lease: Duration) -> Result<bool, DurableError>;
    /// Deletes a job in any state; `Ok(false)` if there is none.
    fn cancel(&self, id: JobId) -> Result<bool, DurableError>;
    /// Pending plus leased jobs.
    fn len(&self) -> Result<u64, DurableError>;
    /// Whether `len` is zero.
    fn is_empty(&self) -> Result<bool, DurableError> {
        Ok(self.len()? == 0)
    }
    /// Jobs by state.
    fn stats(&self) -> Result<Stats, DurableError>;
    /// Up to `limit` dead jobs (any `limit`; `usize::MAX` lists them all).
    fn dead_jobs(&self, limit: usize) -> Result<Vec<Job>, DurableError>;
    /// Moves a dead job back to pending, due at `at`.
    fn requeue_dead(&self, id: JobId, at: SystemTime) -> Result<bool, DurableError>;
    /// Stores a job due at `at` with [`SendOptions`]: a kind, a priority
    /// (`0..=9`, 0 reserved first among due jobs), a [uniqueness
    /// key](crate::Unique) (a job holding the key is returned as
    /// [`Sent::Existing`] and nothing is stored, atomically: racing sends of
    /// one key store one job). Bad options are
    /// [`InvalidArgument`](DurableError::InvalidArgument), naming the option,
    /// with nothing stored.
    fn send_with(&self, payload: &[u8], at: SystemTime, opts: &SendOptions) -> Result<Sent, DurableError>;
    /// A typed [`send_with`](Self::send_with): the kind is [`JobKind::KIND`]
    /// (whatever `opts` says), the value JSON (feature `serde`).
    #[cfg(feature = "serde")]
    fn enqueue_with<K: JobKind>(
        &self,
        job: &K,
        at: SystemTime,
        opts: SendOptions,
    ) -> Result<Sent, DurableError>
    where
        Self: Sized,
    {
        self.send_with(&crate::kind::encode(job)?, at, &opts.kind(K::KIND))
    }
    /// As [`reserve_or_stop`](Self::reserve_or_stop), but leases no job whose
    /// kind is in `exclude`: those stay pending, unleased, for a consumer
    /// that takes them (what a [`Worker`](crate::Worker)'s per-kind limits
    /// use). Among the due jobs it may take, the order is the usual one
    /// (priority, deadline, send order).
    fn reserve_excluding(
        &self,
        lease: Duration,
        exclude: &[String],
        stop: &StopSignal,
    ) -> Result<Option<Job>, DurableError>;
    /// The schedule store (`stored.rs`): creates or replaces the schedule
    /// `name` with definition `def` and next tick `next_run_us` (`None`:
    /// paused), keeping its last tick, and replaces its pending tick job
    /// (one due at the next tick, none while paused), in one atomic step.
    #[doc(hidden)]
    fn schedule_store(&self, name: &str, def: &[u8], next_run_us: Option<u64>) -> Result<(), DurableError>;
    /// The schedule store: one schedule.
    #[doc(hidden)]
    fn schedule_get(&self, name: &str) -> Result<Option<StoredSchedule>, DurableError>;
    /// The schedule store: every schedule, by name.
    #[doc(hidden)]
    fn schedule_list(&self) -> Result<Vec<StoredSchedule>, DurableError>;
    /// The schedule store: deletes a schedule and its pending tick job;
    /// `Ok(false)` if there was none.
    #[doc(hidden)]
    fn schedule_remove(&self, name: &str) -> Result<bool, DurableError>;
    /// The schedule store: in one atomic step, if the schedule exists, is not
    /// paused and its next tick is `fire.expect_next_us`, stores the firing's
    /// jobs and moves its next and last tick (`Ok(true)`); in every case,
    /// if it exists and is not paused and has no pending tick job, stores
    /// one due at its next tick. `Ok(false)`: not fired (another worker did,
    /// or it was paused, changed or removed).
    #[doc(hidden)]
    fn schedule_fire(&self, name: &str, fire: &Fire) -> Result<bool, DurableError>;

    /// Stores the recurring schedule `name`: at each tick of `schedule` a
    /// job of `kind` with `payload` is stored, due at the tick, exactly once
    /// per tick however many [`Worker`](crate::Worker)s run (the workers fire
    /// the ticks; see [`Schedule`] for cron, time zones and missed ticks).
    /// Storing a schedule again with the same definition changes nothing (so
    /// every process may register its schedules at start); with another
    /// definition it replaces it, keeping whether it is paused and never
    /// firing a tick twice.
    ///
    /// # Errors
    ///
    /// [`InvalidArgument`](DurableError::InvalidArgument) for a bad name (1
    /// to 200 bytes, no control characters), kind or priority;
    /// [`PayloadTooLarge`](DurableError::PayloadTooLarge); a backend error.
    /// Nothing is stored on an error.
    fn schedule_raw(
        &self,
        name: &str,
        schedule: &Schedule,
        kind: &str,
        payload: &[u8],
    ) -> Result<(), DurableError> {
        crate::schedule::store(self, name, schedule, kind, payload)
    }
    /// A typed [`schedule_raw`](Self::schedule_raw): each tick stores `job`
    /// (its [`JobKind::KIND`], its value as JSON; feature `serde`).
    #[cfg(feature = "serde")]
    fn schedule<K: JobKind>(&self, name: &str, schedule: &Schedule, job: &K) -> Result<(), DurableError>
    where
        Self: Sized,
    {
        self.schedule_raw(name, schedule, K::KIND, &crate::kind::encode(job)?)
    }
    /// Every stored schedule, by name: when it ticks, its next and last tick,
    /// whether it is paused.
    fn schedules(&self) -> Result<Vec<ScheduleInfo>, DurableError> {
        self.schedule_list()?.into_iter().map(crate::schedule::info).collect()
    }
    /// Pauses a schedule: no tick fires until it is resumed. `Ok(false)` if
    /// there is no such schedule.
    fn pause_schedule(&self, name: &str) -> Result<bool, DurableError> {
        crate::schedule::set_paused(self, name, true)
    }
    /// Resumes a paused schedule from its next tick after now (the ticks that
    /// passed while it was paused are skipped). `Ok(false)` if there is no
    /// such schedule.
    fn resume_schedule(&self, name: &str) -> Result<bool, DurableError> {
        crate::schedule::set_paused(self, name, false)
    }
    /// The largest payload this queue accepts, in bytes (its `max_payload`);
    /// what a schedule's payload is checked against when it is stored.
    fn payload_limit(&self) -> usize {
        usize::MAX
    }
    /// The queue's name in traces and logs (a Redis or PostgreSQL queue's
    /// name, the embedded file's path); `""` if it has none.
    fn queue_label(&self) -> String {
        String::new()
    }
    /// Deletes a schedule (the jobs it stored stay). `Ok(false)` if there
    /// was none.
    fn remove_schedule(&self, name: &str) -> Result<bool, DurableError> {
        crate::stored::check_schedule_name(name)?;
        self.schedule_remove(name)
    }
}

impl JobQueue for DurableQueue {
    fn send_at(&self, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        DurableQueue::send_at(self, payload, at)
    }
    fn send_after(&self, payload: &[u8], delay: Duration) -> Result<JobId, DurableError> {
        DurableQueue::send_after(self, payload, delay)
    }
    fn send_kind_at(&self, kind: &str, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        DurableQueue::send_kind_at(self, kind, payload, at)
    }
    fn send_kind_after(&self, kind: &str, payload: &[u8], delay: Duration) -> Result<JobId, DurableError> {
        DurableQueue::send_kind_after(self, kind, payload, delay)
    }
    fn send_many(&self, jobs: &[(&[u8], SystemTime)]) -> Result<Vec<JobId>, DurableError> {
        DurableQueue::send_many(self, jobs)
    }
    fn reserve(&self, lease: Duration) -> Result<Job, DurableError> {
        DurableQueue::reserve(self, lease)
    }
    fn reserve_timeout(&self, lease: Duration, timeout: Duration) -> Result<Option<Job>, DurableError> {
        DurableQueue::reserve_timeout(self, lease, timeout)
    }
    fn reserve_or_stop(&self, lease: Duration, stop: &StopSignal) -> Result<Option<Job>, DurableError> {
        DurableQueue::reserve_or_stop(self, lease, stop)
    }
    fn reserve_many(&self, lease: Duration, max: usize, timeout: Duration) -> Result<Vec<Job>, DurableError> {
        DurableQueue::reserve_many(self, lease, max, timeout)
    }
    fn ack(&self, job: &Job) -> Result<bool, DurableError> {
        DurableQueue::ack(self, job)
    }
    fn ack_many(&self, jobs: &[Job]) -> Result<Vec<bool>, DurableError> {
        DurableQueue::ack_many(self, jobs)
    }
    fn nack(&self, job: &Job, retry_at: SystemTime) -> Result<bool, DurableError> {
        DurableQueue::nack(self, job, retry_at)
    }
    fn nack_with_error(&self, job: &Job, retry_at: SystemTime, error: &str) -> Result<bool, DurableError> {
        DurableQueue::nack_with_error(self, job, retry_at, error)
    }
    fn kill(&self, job: &Job, error: &str) -> Result<bool, DurableError> {
        DurableQueue::kill(self, job, error)
    }
    fn extend(&self, job: &Job, lease: Duration) -> Result<bool, DurableError> {
        DurableQueue::extend(self, job, lease)
    }
    fn cancel(&self, id: JobId) -> Result<bool, DurableError> {
        DurableQueue::cancel(self, id)
    }
    fn len(&self) -> Result<u64, DurableError> {
        DurableQueue::len(self)
    }
    fn stats(&self) -> Result<Stats, DurableError> {
        DurableQueue::stats(self)
    }
    fn dead_jobs(&self, limit: usize) -> Result<Vec<Job>, DurableError> {
        DurableQueue::dead_jobs(self, limit)
    }
    fn requeue_dead(&self, id: JobId, at: SystemTime) -> Result<bool, DurableError> {
        DurableQueue::requeue_dead(self, id, at)
    }
    fn send_with(&self, payload: &[u8], at: SystemTime, opts: &SendOptions) -> Result<Sent, DurableError> {
        DurableQueue::send_with(self, payload, at, opts)
    }
    fn reserve_excluding(
        &self,
        lease: Duration,
        exclude: &[String],
        stop: &StopSignal,
    ) -> Result<Option<Job>, DurableError> {
        DurableQueue::reserve_excluding(self, lease, exclude, stop)
    }
    fn schedule_store(&self, name: &str, def: &[u8], next_run_us: Option<u64>) -> Result<(), DurableError> {
        DurableQueue::schedule_store(self, name, def, next_run_us)
    }
    fn schedule_get(&self, name: &str) -> Result<Option<StoredSchedule>, DurableError> {
        DurableQueue::schedule_get(self, name)
    }
    fn schedule_list(&self) -> Result<Vec<StoredSchedule>, DurableError> {
        DurableQueue::schedule_list(self)
    }
    fn schedule_remove(&self, name: &str) -> Result<bool, DurableError> {
        DurableQueue::schedule_remove(self, name)
    }
    fn schedule_fire(&self, name: &str, fire: &Fire) -> Result<bool, DurableError> {
        DurableQueue::schedule_fire(self, name, fire)
    }
    fn queue_label(&self) -> String {
        self.path().display().to_string()
    }
    fn payload_limit(&self) -> usize {
        DurableQueue::payload_limit(self)
    }
}

/// A shared queue is a queue: a [`Worker`](crate::Worker) or a test can hold
/// an `Arc` of any backend (or of `dyn JobQueue`).
impl<Q: JobQueue + ?Sized> JobQueue for std::sync::Arc<Q> {
    fn send_at(&self, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        (**self).send_at(payload, at)
    }
    fn send_after(&self, payload: &[u8], delay: Duration) -> Result<JobId, DurableError> {
        (**self).send_after(payload, delay)
    }
    fn send_kind_at(&self, kind: &str, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        (**self).send_kind_at(kind, payload, at)
    }
    fn send_kind_after(&self, kind: &str, payload: &[u8], delay: Duration) -> Result<JobId, DurableError> {
        (**self).send_kind_after(kind, payload, delay)
    }
    fn send_many(&self, jobs: &[(&[u8], SystemTime)]) -> Result<Vec<JobId>, DurableError> {
        (**self).send_many(jobs)
    }
    fn reserve(&self, lease: Duration) -> Result<Job, DurableError> {
        (**self).reserve(lease)
    }
    fn reserve_timeout(&self, lease: Duration, timeout: Duration) -> Result<Option<Job>, DurableError> {
        (**self).reserve_timeout(lease, timeout)
    }
    fn reserve_or_stop(&self, lease: Duration, stop: &StopSignal) -> Result<Option<Job>, DurableError> {
        (**self).reserve_or_stop(lease, stop)
    }
    fn reserve_many(&self, lease: Duration, max: usize, timeout: Duration) -> Result<Vec<Job>, DurableError> {
        (**self).reserve_many(lease, max, timeout)
    }
    fn ack(&self, job: &Job) -> Result<bool, DurableError> {
        (**self).ack(job)
    }
    fn ack_many(&self, jobs: &[Job]) -> Result<Vec<bool>, DurableError> {
        (**self).ack_many(jobs)
    }
    fn nack(&self, job: &Job, retry_at: SystemTime) -> Result<bool, DurableError> {
        (**self).nack(job, retry_at)
    }
    fn nack_with_error(&self, job: &Job, retry_at: SystemTime, error: &str) -> Result<bool, DurableError> {
        (**self).nack_with_error(job, retry_at, error)
    }
    fn kill(&self, job: &Job, error: &str) -> Result<bool, DurableError> {
        (**self).kill(job, error)
    }
    fn extend(&self, job: &Job, lease: Duration) -> Result<bool, DurableError> {
        (**self).extend(job, lease)
    }
    fn cancel(&self, id: JobId) -> Result<bool, DurableError> {
        (**self).cancel(id)
    }
    fn len(&self) -> Result<u64, DurableError> {
        (**self).len()
    }
    fn stats(&self) -> Result<Stats, DurableError> {
        (**self).stats()
    }
    fn dead_jobs(&self, limit: usize) -> Result<Vec<Job>, DurableError> {
        (**self).dead_jobs(limit)
    }
    fn requeue_dead(&self, id: JobId, at: SystemTime) -> Result<bool, DurableError> {
        (**self).requeue_dead(id, at)
    }
    fn send_with(&self, payload: &[u8], at: SystemTime, opts: &SendOptions) -> Result<Sent, DurableError> {
        (**self).send_with(payload, at, opts)
    }
    fn reserve_excluding(
        &self,
        lease: Duration,
        exclude: &[String],
        stop: &StopSignal,
    ) -> Result<Option<Job>, DurableError> {
        (**self).reserve_excluding(lease, exclude, stop)
    }
    fn schedule_store(&self, name: &str, def: &[u8], next_run_us: Option<u64>) -> Result<(), DurableError> {
        (**self).schedule_store(name, def, next_run_us)
    }
    fn schedule_get(&self, name: &str) -> Result<Option<StoredSchedule>, DurableError> {
        (**self).schedule_get(name)
    }
    fn schedule_list(&self) -> Result<Vec<StoredSchedule>, DurableError> {
        (**self).schedule_list()
    }
    fn schedule_remove(&self, name: &str) -> Result<bool, DurableError> {
        (**self).schedule_remove(name)
    }
    fn schedule_fire(&self, name: &str, fire: &Fire) -> Result<bool, DurableError> {
        (**self).schedule_fire(name, fire)
    }
    fn queue_label(&self) -> String {
        (**self).queue_label()
    }
    fn payload_limit(&self) -> usize {
        (**self).payload_limit()
    }
}
