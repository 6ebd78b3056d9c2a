//! [`AsyncJobQueue`]: the durable-jobs contract as async methods (feature
//! `async`), one trait for the async clients of every backend.

use std::future::Future;
use std::time::{Duration, SystemTime};

use crate::error::DurableError;
use crate::job::{Job, JobId, Stats};
#[cfg(feature = "serde")]
use crate::kind::JobKind;
use crate::options::{SendOptions, Sent};
use crate::stop::StopSignal;

/// The [`JobQueue`](crate::JobQueue) contract as async methods: the same
/// calls, meaning the same on every backend, whose waits — for a due job, for
/// a commit or a server's reply — suspend the task instead of blocking a
/// thread. Implemented by [`AsyncDurableQueue`](crate::AsyncDurableQueue)
/// (any executor, no runtime needed) and, with the `redis-async` feature, by
/// `AsyncRedisQueue` (on tokio). Every future is `Send`.
///
/// # Cancellation
///
/// Every future may be dropped at any point. A change (send, ack, nack, …)
/// whose future is dropped may or may not have been applied, exactly as if
/// the process had stopped waiting for its reply. A dropped `reserve*`
/// future loses no job and leaves none leased to nobody for long: see each
/// backend's type for what exactly happens to a job whose lease was being
/// taken. Timeouts other than `reserve_timeout`'s are the executor's own
/// (`tokio::time::timeout`, a `select!` with a timer) and are safe by the
/// same token.
///
/// ```
/// use std::time::Duration;
/// use delayq_durable::{AsyncDurableQueue, AsyncJobQueue};
///
/// # let dir = std::env::temp_dir().join(format!("delayq-doc-async-contract-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// async fn drain_one(q: &impl AsyncJobQueue) -> Result<Option<Vec<u8>>, delayq_durable::DurableError> {
///     let Some(job) = q.reserve_timeout(Duration::from_secs(30), Duration::from_secs(1)).await? else {
///         return Ok(None);
///     };
///     q.ack(&job).await?;
///     Ok(Some(job.payload().to_vec()))
/// }
/// let q = AsyncDurableQueue::open(dir.join("async-contract.redb")).unwrap();
/// let got = futures::executor::block_on(async {
///     q.send_after(b"x", Duration::ZERO).await?;
///     drain_one(&q).await
/// });
/// assert_eq!(got.unwrap(), Some(b"x".to_vec()));
/// # drop(q); std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub trait AsyncJobQueue: Send + Sync {
    /// Stores a job due at `at`; as [`JobQueue::send_at`](crate::JobQueue::send_at).
    fn send_at(
        &self,
        payload: &[u8],
        at: SystemTime,
    ) -> impl Future<Output = Result<JobId, DurableError>> + Send;
    /// Stores a job due `delay` from now; as [`JobQueue::send_after`](crate::JobQueue::send_after).
    fn send_after(
        &self,
        payload: &[u8],
        delay: Duration,
    ) -> impl Future<Output = Result<JobId, DurableError>> + Send;
    /// As `send_at`, with a kind; as [`JobQueue::send_kind_at`](crate::JobQueue::send_kind_at).
    fn send_kind_at(
        &self,
        kind: &str,
        payload: &[u8],
        at: SystemTime,
    ) -> impl Future<Output = Result<JobId, DurableError>> + Send;
    /// As `send_after`, with a kind.
    fn send_kind_after(
        &self,
        kind: &str,
        payload: &[u8],
        delay: Duration,
    ) -> impl Future<Output = Result<JobId, DurableError>> + Send;
    /// Stores a typed job (feature `serde`); as [`JobQueue::enqueue`](crate::JobQueue::enqueue).
    #[cfg(feature = "serde")]
    fn enqueue<K: JobKind>(
        &self,
        job: &K,
        at: SystemTime,
    ) -> impl Future<Output = Result<JobId, DurableError>> + Send
    where
        Self: Sized,
    {
        let encoded = crate::kind::encode(job);
        async move { self.send_kind_at(K::KIND, &encoded?, at).await }
    }
    /// As [`enqueue`](Self::enqueue), due `delay` from now.
    #[cfg(feature = "serde")]
    fn enqueue_after<K: JobKind>(
        &self,
        job: &K,
        delay: Duration,
    ) -> impl Future<Output = Result<JobId, DurableError>> + Send
    where
        Self: Sized,
    {
        let encoded = crate::kind::encode(job);
        async move { self.send_kind_after(K::KIND, &encoded?, delay).await }
    }
    /// Stores several jobs at once, all or none.
    fn send_many(
        &self,
        jobs: &[(&[u8], SystemTime)],
    ) -> impl Future<Output = Result<Vec<JobId>, DurableError>> + Send;
    /// Waits, without blocking a thread, until a job is due; leases it to the caller.
    fn reserve(&self, lease: Duration) -> impl Future<Output = Result<Job, DurableError>> + Send;
    /// As `reserve`, `Ok(None)` after `timeout`.
    fn reserve_timeout(
        &self,
        lease: Duration,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<Job>, DurableError>> + Send;
    /// As `reserve`, `Ok(None)` once `stop` is [raised](StopSignal::raise)
    /// (at once if it is already). A job leased before the signal is returned.
    fn reserve_or_stop(
        &self,
        lease: Duration,
        stop: &StopSignal,
    ) -> impl Future<Output = Result<Option<Job>, DurableError>> + Send;
    /// Waits up to `timeout` for due jobs, then leases up to `max` of them
    /// at once; as [`JobQueue::reserve_many`](crate::JobQueue::reserve_many).
    fn reserve_many(
        &self,
        lease: Duration,
        max: usize,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<Job>, DurableError>> + Send;
    /// Deletes a job the caller holds the lease of; `Ok(false)` if the lease is not the caller's any more.
    fn ack(&self, job: &Job) -> impl Future<Output = Result<bool, DurableError>> + Send;
    /// `ack` for several jobs; the flags in order.
    fn ack_many(&self, jobs: &[Job]) -> impl Future<Output = Result<Vec<bool>, DurableError>> + Send;
    /// Retries the job at `retry_at`, or moves it to the dead set after its last attempt.
    fn nack(
        &self,
        job: &Job,
        retry_at: SystemTime,
    ) -> impl Future<Output = Result<bool, DurableError>> + Send;
    /// As `nack`, storing `error` as the job's [`Job::last_error`].
    fn nack_with_error(
        &self,
        job: &Job,
        retry_at: SystemTime,
        error: &str,
    ) -> impl Future<Output = Result<bool, DurableError>> + Send;
    /// Moves a job the caller holds the lease of to the dead set now.
    fn kill(&self, job: &Job, error: &str) -> impl Future<Output = Result<bool, DurableError>> + Send;
    /// Extends the caller's lease to `lease` from now.
    fn extend(&self, job: &Job, lease: Duration) -> impl Future<Output = Result<bool, DurableError>> + Send;
    /// Deletes a job in any state; `Ok(false)` if there is none.
    fn cancel(&self, id: JobId) -> impl Future<Output = Result<bool, DurableError>> + Send;
    /// Pending plus leased jobs.
    fn len(&self) -> impl Future<Output = Result<u64, DurableError>> + Send;
    /// Whether `len` is zero.
    fn is_empty(&self) -> impl Future<Output = Result<bool, DurableError>> + Send {
        async move { Ok(self.len().await? == 0) }
    }
    /// Jobs by state.
    fn stats(&self) -> impl Future<Output = Result<Stats, DurableError>> + Send;
    /// Up to `limit` dead jobs.
    fn dead_jobs(&self, limit: usize) -> impl Future<Output = Result<Vec<Job>, DurableError>> + Send;
    /// Moves a dead job back to pending, due at `at`.
    fn requeue_dead(
        &self,
        id: JobId,
        at: SystemTime,
    ) -> impl Future<Output = Result<bool, DurableError>> + Send;
    /// [`JobQueue::send_with`](crate::JobQueue::send_with): a kind, a
    /// priority, a uniqueness key.
    fn send_with(
        &self,
        payload: &[u8],
        at: SystemTime,
        opts: &SendOptions,
    ) -> impl Future<Output = Result<Sent, DurableError>> + Send;
}
