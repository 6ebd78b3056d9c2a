//! [`AsyncDurableQueue`]: the embedded queue's async client (feature `async`),
//! on any executor, with no runtime.

use std::fmt;
use std::future::{poll_fn, Future};
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use crate::alarm::Alarms;
use crate::async_contract::AsyncJobQueue;
use crate::error::DurableError;
use crate::job::{Job, JobId, Stats};
use crate::options::{SendOptions, Sent};
use crate::queue::{first, lease_nanos, DurableQueue};
use crate::reply::Waiting;
use crate::stop::{Registration, StopSignal};
use crate::writer::Timer;

/// The embedded queue ([`DurableQueue`]) with async methods
/// ([`AsyncJobQueue`]): the same file, writer thread and timers, shared — a
/// `DurableQueue` and its async client are two views of one queue, and
/// either can be made from the other ([`From`], [`blocking`](Self::blocking)).
///
/// No runtime is needed: it works under tokio, async-std, smol or
/// `futures::executor` alike.
///
/// - **Changes** (sends, acks, nacks, extends, cancels) go to the writer
///   thread as the blocking calls do, and the task awaits the writer's reply
///   (a one-shot slot that wakes the task's `Waker` when the group commit is
///   done): no thread is blocked waiting for the fsync.
/// - **`reserve`** awaits the core `delayq` queue's async receive of the job
///   timers (its dequeue proxy wakes the task when a timer falls due), then
///   the commit of the lease. An idle consumer costs nothing: no polling, no
///   periodic wake-up.
/// - **`reserve_timeout`** and **`reserve_many`**'s timeout need a timer
///   without a runtime: a second core queue (started on first use) holds the
///   deadlines and wakes the task at them. `reserve` under the executor's own
///   timeout (`tokio::time::timeout`) works as well.
/// - **`reserve_or_stop`** returns `Ok(None)` once its [`StopSignal`] is
///   raised, which wakes the task.
///
/// # Cancellation safety
///
/// A `reserve` future (any of the `reserve*` calls) may be dropped at any
/// point without losing a job or leaving one leased to nobody:
///
/// - while it waits for a due job, it holds none (the core queue's receive is
///   cancellation safe: a timer is either returned or still queued);
/// - once it received a due timer it asks the writer for the lease in the
///   same poll (no suspension point between), and if it is dropped before the
///   lease is committed the writer does not lease the job: its timer is armed
///   again and another consumer gets it, as the same attempt;
/// - if it is dropped after the lease was committed but before the job was
///   handed to it, the lease is given back in the writer's next commit: the
///   job is pending again, at once, with the delivery uncounted (the same
///   attempt number);
/// - should the process stop before that give-back commits, the job is a
///   lease whose holder is gone, due again when the file is reopened as its
///   next attempt (attempt + 1), as any job leased at a crash.
///
/// A change's future dropped before its reply may or may not have been
/// applied (it is in the writer's mailbox): the same as a crash after the
/// call.
///
/// ```
/// use std::time::Duration;
/// use delayq_durable::{AsyncDurableQueue, AsyncJobQueue};
///
/// # let dir = std::env::temp_dir().join(format!("delayq-doc-async-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let q = AsyncDurableQueue::open(dir.join("async.redb")).unwrap();
/// futures::executor::block_on(async {
///     let id = q.send_after(b"resize image 7", Duration::from_millis(20)).await.unwrap();
///     let job = q.reserve(Duration::from_secs(30)).await.unwrap(); // suspends until due
///     assert_eq!((job.id(), job.attempt()), (id, 1));
///     assert!(q.ack(&job).await.unwrap());
///     assert_eq!(q.reserve_timeout(Duration::from_secs(30), Duration::from_millis(10)).await.unwrap(), None);
/// });
/// # drop(q); std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Clone)]
pub struct AsyncDurableQueue {
    queue: DurableQueue,
    alarms: Arc<OnceLock<Result<Alarms, DurableError>>>,
}

impl fmt::Debug for AsyncDurableQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncDurableQueue").field("queue", &self.queue).finish()
    }
}

impl From<DurableQueue> for AsyncDurableQueue {
    fn from(queue: DurableQueue) -> Self {
        AsyncDurableQueue { queue, alarms: Arc::new(OnceLock::new()) }
    }
}

impl AsyncDurableQueue {
    /// Opens the queue at `path` with the defaults, as [`DurableQueue::open`]
    /// (a blocking call: it reads the file and recovers it; open once, at
    /// start-up). For options, open a `DurableQueue` with its builder and
    /// convert it (`AsyncDurableQueue::from(queue)`).
    pub fn open(path: impl AsRef<Path>) -> Result<AsyncDurableQueue, DurableError> {
        DurableQueue::open(path).map(AsyncDurableQueue::from)
    }

    /// The same queue with blocking calls (for a [`Worker`](crate::Worker),
    /// the inspection API, or a thread).
    pub fn blocking(&self) -> &DurableQueue {
        &self.queue
    }

    /// As [`DurableQueue::close`].
    pub fn close(&self) {
        self.queue.close();
    }

    fn alarms(&self) -> Result<&Alarms, DurableError> {
        self.alarms.get_or_init(Alarms::new).as_ref().map_err(DurableError::duplicate)
    }

    /// The next due timer; `Ok(None)` at `deadline` or once `stop` is raised.
    async fn next_timer(
        &self,
        deadline: Option<Option<Instant>>,
        stop: Option<&StopSignal>,
    ) -> Result<Option<Timer>, DurableError> {
        self.queue.check_open()?;
        let mut alarm = match deadline {
            Some(at) => Some(self.alarms()?.deadline(at)),
            None => None,
        };
        if let Some(t) = self.queue.parked().take(None) {
            return Ok(Some(t));
        }
        let mut recv = self.queue.timers().recv_async();
        let mut registered: Option<Registration<'_>> = None;
        let mut parked = None;
        poll_fn(|cx| {
            // The signal first: once it is raised, no job is taken, even a
            // due one (as the blocking `reserve_or_stop`).
            if let Some(stop) = stop {
                // Registered anew with this poll's waker, then checked.
                drop(registered.take());
                registered = stop.register(cx.waker());
                if registered.is_none() {
                    return Poll::Ready(Ok(None));
                }
            }
            if let Poll::Ready(r) = Pin::new(&mut recv).poll(cx) {
                return Poll::Ready(r.map(Some).map_err(|_| DurableError::Closed));
            }
            // A wake-up parked by a consumer that excludes its kind (this
            // one takes every kind): taken, or registered for (`writer/parked.rs`).
            drop(parked.take());
            match self.queue.parked().take_or_register(cx.waker(), None) {
                Ok(t) => return Poll::Ready(Ok(Some(t))),
                Err(r) => parked = Some(r),
            }
            if let Some(alarm) = alarm.as_mut() {
                if Pin::new(alarm).poll(cx).is_ready() {
                    return Poll::Ready(Ok(None));
                }
            }
            Poll::Pending
        })
        .await
    }

    async fn reserve_until(
        &self,
        lease: Duration,
        deadline: Option<Option<Instant>>,
        stop: Option<&StopSignal>,
    ) -> Result<Option<Job>, DurableError> {
        let lease_ns = lease_nanos(lease)?;
        loop {
            let Some(timer) = self.next_timer(deadline, stop).await? else {
                return Ok(None);
            };
            // No suspension point between taking the timer and posting its
            // lease: a drop cannot come between them.
            let mut lease = LeaseGuard {
                queue: &self.queue,
                waiting: Some(self.queue.begin_lease(timer, lease_ns, None)?),
            };
            if let Some(job) = lease.wait().await? {
                return Ok(Some(job));
            }
            // A stale timer, or one not yet due by the wall clock: wait on.
        }
    }
}

/// A lease being committed for a `reserve` future: dropped before it handed
/// its job over, it gives the job back (see "Cancellation safety").
struct LeaseGuard<'a> {
    queue: &'a DurableQueue,
    waiting: Option<Waiting<Option<Job>>>,
}

impl LeaseGuard<'_> {
    async fn wait(&mut self) -> Result<Option<Job>, DurableError> {
        let out = poll_fn(|cx: &mut Context<'_>| match self.waiting.as_mut() {
            Some(w) => Pin::new(w).poll(cx),
            None => Poll::Ready(Err(DurableError::Closed)),
        })
        .await;
        self.waiting = None;
        out
    }
}

impl Drop for LeaseGuard<'_> {
    fn drop(&mut self) {
        if let Some(waiting) = self.waiting.take() {
            // Unfilled, it is marked abandoned, so the writer skips the
            // lease or gives it back (`writer.rs`); filled, we give it back.
            if let Some(Ok(Some(job))) = waiting.abandon() {
                self.queue.release(&job);
            }
        }
    }
}

impl AsyncJobQueue for AsyncDurableQueue {
    async fn send_at(&self, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        first(self.queue.begin_send_kind_at("", payload, at)?.await)
    }
    async fn send_after(&self, payload: &[u8], delay: Duration) -> Result<JobId, DurableError> {
        first(self.queue.begin_send_kind_after("", payload, delay)?.await)
    }
    async fn send_kind_at(&self, kind: &str, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        first(self.queue.begin_send_kind_at(kind, payload, at)?.await)
    }
    async fn send_kind_after(
        &self,
        kind: &str,
        payload: &[u8],
        delay: Duration,
    ) -> Result<JobId, DurableError> {
        first(self.queue.begin_send_kind_after(kind, payload, delay)?.await)
    }
    async fn send_many(&self, jobs: &[(&[u8], SystemTime)]) -> Result<Vec<JobId>, DurableError> {
        self.queue.begin_send_many(jobs)?.await
    }
    async fn reserve(&self, lease: Duration) -> Result<Job, DurableError> {
        loop {
            if let Some(job) = self.reserve_until(lease, None, None).await? {
                return Ok(job);
            }
        }
    }
    async fn reserve_timeout(&self, lease: Duration, timeout: Duration) -> Result<Option<Job>, DurableError> {
        lease_nanos(lease)?;
        self.reserve_until(lease, Some(Instant::now().checked_add(timeout)), None).await
    }
    async fn reserve_or_stop(&self, lease: Duration, stop: &StopSignal) -> Result<Option<Job>, DurableError> {
        self.reserve_until(lease, None, Some(stop)).await
    }
    async fn reserve_many(
        &self,
        lease: Duration,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Job>, DurableError> {
        if max == 0 {
            return Err(DurableError::InvalidArgument("reserve_many needs max >= 1"));
        }
        let lease_ns = lease_nanos(lease)?;
        let deadline = Some(Instant::now().checked_add(timeout));
        loop {
            let Some(first) = self.next_timer(deadline, None).await? else {
                return Ok(Vec::new());
            };
            let mut timers = vec![first];
            while timers.len() < max {
                match self.queue.timers().try_recv().ok().or_else(|| self.queue.parked().take(None)) {
                    Some(t) => timers.push(t),
                    None => break,
                }
            }
            // Every lease posted before the first suspension point.
            let mut guards = Vec::with_capacity(timers.len());
            let mut post_err = None;
            for timer in timers {
                match self.queue.begin_lease(timer, lease_ns, None) {
                    Ok(w) => guards.push(LeaseGuard { queue: &self.queue, waiting: Some(w) }),
                    Err(e) => post_err = post_err.or(Some(e)),
                }
            }
            let mut jobs = Vec::new();
            let mut first_err = post_err;
            for guard in &mut guards {
                match guard.wait().await {
                    Ok(Some(job)) => jobs.push(job),
                    Ok(None) => {}
                    Err(e) => first_err = first_err.or(Some(e)),
                }
            }
            if !jobs.is_empty() {
                return Ok(jobs);
            }
            if let Some(e) = first_err {
                return Err(e);
            }
        }
    }
    async fn ack(&self, job: &Job) -> Result<bool, DurableError> {
        self.queue.begin_ack(job)?.await
    }
    async fn ack_many(&self, jobs: &[Job]) -> Result<Vec<bool>, DurableError> {
        let waits = self.queue.begin_ack_many(jobs)?;
        let mut flags = Vec::with_capacity(waits.len());
        for w in waits {
            flags.push(w.await?);
        }
        Ok(flags)
    }
    async fn nack(&self, job: &Job, retry_at: SystemTime) -> Result<bool, DurableError> {
        self.queue.begin_nack(job, retry_at, None)?.await
    }
    async fn nack_with_error(
        &self,
        job: &Job,
        retry_at: SystemTime,
        error: &str,
    ) -> Result<bool, DurableError> {
        self.queue.begin_nack(job, retry_at, Some(error))?.await
    }
    async fn kill(&self, job: &Job, error: &str) -> Result<bool, DurableError> {
        self.queue.begin_kill(job, error)?.await
    }
    async fn extend(&self, job: &Job, lease: Duration) -> Result<bool, DurableError> {
        self.queue.begin_extend(job, lease)?.await
    }
    async fn cancel(&self, id: JobId) -> Result<bool, DurableError> {
        self.queue.begin_cancel(id)?.await
    }
    async fn len(&self) -> Result<u64, DurableError> {
        self.queue.len()
    }
    async fn stats(&self) -> Result<Stats, DurableError> {
        self.queue.stats()
    }
    async fn dead_jobs(&self, limit: usize) -> Result<Vec<Job>, DurableError> {
        self.queue.begin_dead_jobs(limit)?.await
    }
    async fn requeue_dead(&self, id: JobId, at: SystemTime) -> Result<bool, DurableError> {
        self.queue.begin_requeue_dead(id, at)?.await
    }
    async fn send_with(
        &self,
        payload: &[u8],
        at: SystemTime,
        opts: &SendOptions,
    ) -> Result<Sent, DurableError> {
        self.queue.begin_send_with(payload, at, opts)?.await
    }
}
