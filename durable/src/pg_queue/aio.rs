//! [`AsyncPgQueue`]: the PostgreSQL backend's async client (feature
//! `postgres-async`), on any executor.

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

use super::ops::{at_us, delay_us, lease_us, Inner, OneSend, Reserved};
use super::pool::pg_error;
use super::schema::Stmt;
use super::{batch, plan, PgQueue};
use crate::async_contract::AsyncJobQueue;
use crate::error::DurableError;
use crate::job::{check_kind, clip_error, Job, JobId, Stats};
#[cfg(feature = "serde")]
use crate::kind::JobKind;
use crate::options::{SendOptions, Sent};
use crate::stop::StopSignal;

/// A [`PgQueue`] with async methods ([`AsyncJobQueue`]), on **any
/// executor**: its statements run as tasks on the runtime the queue owns
/// (which drives its connections), and a task awaits them there, so no
/// tokio runtime is needed around it (`futures::executor::block_on` will
/// do). It shares the `PgQueue` it is made from — its connections, tokens
/// and the listener — and behaves as it does: the same statements, the
/// server's clock, no polling (a waiting `reserve` suspends until the
/// earliest due time the server reported or a notification announces an
/// earlier one), the same retries.
///
/// The transactional enqueue takes what tokio-postgres gives: any
/// [`tokio_postgres::GenericClient`] (a `Transaction` or a `Client`), on the
/// application's own connection and runtime.
///
/// # Cancellation safety
///
/// A dropped `reserve*` future loses no job. Dropped while it waits for a
/// due job it holds none. Dropped while its reserve statement is in flight,
/// the statement still runs (as a task on the queue's runtime) and may lease
/// a job to nobody: that job is due again when its lease ends, as its next
/// attempt. A change's future dropped in flight may or may not have been
/// applied, as a call whose reply was lost.
///
/// ```no_run
/// use std::time::Duration;
/// use delayq_durable::{AsyncJobQueue, AsyncPgQueue};
///
/// # async fn run() -> Result<(), delayq_durable::DurableError> {
/// let q = AsyncPgQueue::connect("postgres://app@127.0.0.1/app", "emails")?;
/// q.send_after(b"welcome mail for user 7", Duration::from_secs(60)).await?;
/// let job = q.reserve(Duration::from_secs(30)).await?; // suspends the task, not the thread
/// assert!(q.ack(&job).await?);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AsyncPgQueue {
    queue: PgQueue,
}

impl fmt::Debug for AsyncPgQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncPgQueue").field("name", &self.queue.name()).finish()
    }
}

impl From<PgQueue> for AsyncPgQueue {
    fn from(queue: PgQueue) -> AsyncPgQueue {
        AsyncPgQueue { queue }
    }
}

impl AsyncPgQueue {
    /// Connects with the defaults, as [`PgQueue::connect`] (a blocking call —
    /// it migrates the schema and starts listening — meant for start-up;
    /// outside async code or in `spawn_blocking`), and makes the async client.
    pub fn connect(url: &str, name: &str) -> Result<AsyncPgQueue, DurableError> {
        Ok(AsyncPgQueue { queue: PgQueue::connect(url, name)? })
    }

    /// The async client of `queue` (made with [`PgQueue::builder`] for options).
    pub fn new(queue: PgQueue) -> AsyncPgQueue {
        AsyncPgQueue { queue }
    }

    /// The same queue with blocking calls.
    pub fn blocking(&self) -> &PgQueue {
        &self.queue
    }

    /// As [`PgQueue::close`].
    pub fn close(&self) {
        self.queue.close();
    }

    fn inner(&self) -> Arc<Inner> {
        self.queue.inner().clone()
    }

    /// Runs `call` as a task on the queue's runtime and awaits it (from any
    /// executor). Dropped, the task runs on to its end.
    async fn run<T: Send + 'static>(
        &self,
        call: impl Future<Output = Result<T, DurableError>> + Send + 'static,
    ) -> Result<T, DurableError> {
        match self.queue.inner().handle.spawn(call).await {
            Ok(r) => r,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(DurableError::Closed),
        }
    }

    async fn send(
        &self,
        kinds: Vec<String>,
        payloads: Vec<Vec<u8>>,
        dues: Vec<i64>,
        relative: bool,
    ) -> Result<Vec<JobId>, DurableError> {
        let inner = self.inner();
        self.run(async move {
            let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
            let payloads: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
            inner.send(&kinds, &payloads, &dues, relative).await
        })
        .await
    }

    /// As the blocking client's `reserve_many_until`: one reserve
    /// statement; if nothing was due, suspend until the next due time the
    /// server reported, a notification announcing an earlier one,
    /// `deadline`, or `stop`.
    async fn reserve_until(
        &self,
        lease: Duration,
        max: usize,
        deadline: Option<Instant>,
        stop: Option<&StopSignal>,
    ) -> Result<Vec<Job>, DurableError> {
        let lease_us = lease_us(lease)?;
        let notifier = self.queue.inner().notifier.clone();
        // A raised stop wakes the handle's notifier, which wakes its tasks.
        let waker = std::task::Waker::from(notifier.clone());
        let _registered = match stop {
            Some(stop) => match stop.register(&waker) {
                Some(r) => Some(r),
                None => return Ok(Vec::new()),
            },
            None => None,
        };
        let mut held = Duration::from_millis(1);
        loop {
            self.queue.inner().check_open()?;
            let seen = notifier.generation();
            let inner = self.inner();
            let Reserved { jobs, server_now, next } =
                self.run(async move { inner.reserve(lease_us, max, &[]).await }).await?;
            if !jobs.is_empty() {
                return Ok(jobs);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) || stop.is_some_and(StopSignal::is_raised) {
                return Ok(Vec::new());
            }
            let (wake_at, pause) = plan(server_now, next, &mut held);
            let until = match (wake_at, deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let mut notified = pin!(notifier.notified(seen, if pause { None } else { next }, stop));
            // The timer is the queue's runtime's: made inside it, polled from
            // any executor.
            let mut sleep = until.map(|t| {
                let _in = self.queue.inner().handle.enter();
                Box::pin(tokio::time::sleep_until(t.into()))
            });
            poll_fn(|cx| {
                if notified.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(());
                }
                match sleep.as_mut() {
                    Some(s) => Pin::new(s).poll(cx),
                    None => Poll::Pending,
                }
            })
            .await;
            // A raised signal ends the wait at once, without another statement.
            if stop.is_some_and(StopSignal::is_raised) {
                return Ok(Vec::new());
            }
        }
    }

    /// As [`PgQueue::send_after_in`], on the application's tokio-postgres
    /// connection: the job commits with `tx`, or is gone with it.
    pub async fn send_after_in(
        &self,
        tx: &impl tokio_postgres::GenericClient,
        payload: &[u8],
        delay: Duration,
    ) -> Result<JobId, DurableError> {
        self.send_kind_after_in(tx, "", payload, delay).await
    }

    /// As [`PgQueue::send_at_in`], on a tokio-postgres connection.
    pub async fn send_at_in(
        &self,
        tx: &impl tokio_postgres::GenericClient,
        payload: &[u8],
        at: SystemTime,
    ) -> Result<JobId, DurableError> {
        self.send_kind_at_in(tx, "", payload, at).await
    }

    /// As [`PgQueue::send_kind_after_in`], on a tokio-postgres connection.
    pub async fn send_kind_after_in(
        &self,
        tx: &impl tokio_postgres::GenericClient,
        kind: &str,
        payload: &[u8],
        delay: Duration,
    ) -> Result<JobId, DurableError> {
        check_kind(kind)?;
        let due = delay_us(delay)?;
        one(self.send_in(tx, &[kind], &[payload], &[due], true).await)
    }

    /// As [`PgQueue::send_kind_at_in`], on a tokio-postgres connection.
    pub async fn send_kind_at_in(
        &self,
        tx: &impl tokio_postgres::GenericClient,
        kind: &str,
        payload: &[u8],
        at: SystemTime,
    ) -> Result<JobId, DurableError> {
        check_kind(kind)?;
        let due = at_us(at)?;
        one(self.send_in(tx, &[kind], &[payload], &[due], false).await)
    }

    /// As [`PgQueue::enqueue_in`], on a tokio-postgres connection (feature `serde`).
    #[cfg(feature = "serde")]
    pub async fn enqueue_in<K: JobKind>(
        &self,
        tx: &impl tokio_postgres::GenericClient,
        job: &K,
        at: SystemTime,
    ) -> Result<JobId, DurableError> {
        self.send_kind_at_in(tx, K::KIND, &crate::kind::encode(job)?, at).await
    }

    /// As [`PgQueue::enqueue_after_in`], on a tokio-postgres connection (feature `serde`).
    #[cfg(feature = "serde")]
    pub async fn enqueue_after_in<K: JobKind>(
        &self,
        tx: &impl tokio_postgres::GenericClient,
        job: &K,
        delay: Duration,
    ) -> Result<JobId, DurableError> {
        self.send_kind_after_in(tx, K::KIND, &crate::kind::encode(job)?, delay).await
    }

    /// As [`PgQueue::send_many_in`], on a tokio-postgres connection.
    pub async fn send_many_in(
        &self,
        tx: &impl tokio_postgres::GenericClient,
        jobs: &[(&[u8], SystemTime)],
    ) -> Result<Vec<JobId>, DurableError> {
        let (kinds, payloads, dues) = batch(jobs)?;
        self.send_in(tx, &kinds, &payloads, &dues, false).await
    }

    async fn send_in(
        &self,
        tx: &impl tokio_postgres::GenericClient,
        kinds: &[&str],
        payloads: &[&[u8]],
        dues: &[i64],
        relative: bool,
    ) -> Result<Vec<JobId>, DurableError> {
        let inner = self.queue.inner();
        inner.check_open()?;
        inner.check_payloads(payloads.iter().copied())?;
        if dues.is_empty() {
            return Ok(Vec::new());
        }
        let last = inner.max_attempts as i32;
        let rows = tx
            .query(inner.sql.text(Stmt::Send), &[&inner.name, &last, &kinds, &payloads, &dues, &relative])
            .await
            .map_err(|e| pg_error(&e, "sending in the caller's transaction"))?;
        Ok(rows.iter().map(|r| JobId(r.get::<_, i64>(0) as u64)).collect())
    }
}

/// The one id of a one-job send.
fn one(ids: Result<Vec<JobId>, DurableError>) -> Result<JobId, DurableError> {
    ids?.first().copied().ok_or_else(|| DurableError::Postgres("a send returned no id".into()))
}

impl AsyncJobQueue for AsyncPgQueue {
    async fn send_at(&self, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        self.send_kind_at("", payload, at).await
    }
    async fn send_after(&self, payload: &[u8], delay: Duration) -> Result<JobId, DurableError> {
        self.send_kind_after("", payload, delay).await
    }
    async fn send_kind_at(&self, kind: &str, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        check_kind(kind)?;
        let due = at_us(at)?;
        one(self.send(vec![kind.to_string()], vec![payload.to_vec()], vec![due], false).await)
    }
    async fn send_kind_after(
        &self,
        kind: &str,
        payload: &[u8],
        delay: Duration,
    ) -> Result<JobId, DurableError> {
        check_kind(kind)?;
        let due = delay_us(delay)?;
        one(self.send(vec![kind.to_string()], vec![payload.to_vec()], vec![due], true).await)
    }
    async fn send_many(&self, jobs: &[(&[u8], SystemTime)]) -> Result<Vec<JobId>, DurableError> {
        let (kinds, payloads, dues) = batch(jobs)?;
        let kinds = kinds.into_iter().map(str::to_string).collect();
        let payloads = payloads.into_iter().map(<[u8]>::to_vec).collect();
        self.send(kinds, payloads, dues, false).await
    }
    async fn reserve(&self, lease: Duration) -> Result<Job, DurableError> {
        loop {
            if let Some(job) = self.reserve_until(lease, 1, None, None).await?.pop() {
                return Ok(job);
            }
        }
    }
    async fn reserve_timeout(&self, lease: Duration, timeout: Duration) -> Result<Option<Job>, DurableError> {
        Ok(self.reserve_until(lease, 1, Instant::now().checked_add(timeout), None).await?.pop())
    }
    async fn reserve_or_stop(&self, lease: Duration, stop: &StopSignal) -> Result<Option<Job>, DurableError> {
        lease_us(lease)?; // a bad lease is an error, raised signal or not
        Ok(self.reserve_until(lease, 1, None, Some(stop)).await?.pop())
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
        self.reserve_until(lease, max, Instant::now().checked_add(timeout), None).await
    }
    async fn ack(&self, job: &Job) -> Result<bool, DurableError> {
        let (inner, id, token) = (self.inner(), job.id, job.token);
        self.run(async move { inner.ack(id, token).await }).await
    }
    async fn ack_many(&self, jobs: &[Job]) -> Result<Vec<bool>, DurableError> {
        let inner = self.inner();
        let pairs: Vec<(JobId, u64)> = jobs.iter().map(|j| (j.id, j.token)).collect();
        self.run(async move { inner.ack_many(&pairs).await }).await
    }
    async fn nack(&self, job: &Job, retry_at: SystemTime) -> Result<bool, DurableError> {
        let due = at_us(retry_at)?;
        let (inner, id, token) = (self.inner(), job.id, job.token);
        self.run(async move { inner.nack(id, token, due, None).await }).await
    }
    async fn nack_with_error(
        &self,
        job: &Job,
        retry_at: SystemTime,
        error: &str,
    ) -> Result<bool, DurableError> {
        let due = at_us(retry_at)?;
        let (inner, id, token, error) = (self.inner(), job.id, job.token, clip_error(error));
        self.run(async move { inner.nack(id, token, due, Some(error)).await }).await
    }
    async fn kill(&self, job: &Job, error: &str) -> Result<bool, DurableError> {
        let (inner, id, token, error) = (self.inner(), job.id, job.token, clip_error(error));
        self.run(async move { inner.kill(id, token, error).await }).await
    }
    async fn extend(&self, job: &Job, lease: Duration) -> Result<bool, DurableError> {
        let lease = lease_us(lease)?;
        let (inner, id, token) = (self.inner(), job.id, job.token);
        self.run(async move { inner.extend(id, token, lease).await }).await
    }
    async fn cancel(&self, id: JobId) -> Result<bool, DurableError> {
        let inner = self.inner();
        self.run(async move { inner.cancel(id).await }).await
    }
    async fn len(&self) -> Result<u64, DurableError> {
        let s = self.stats().await?;
        Ok(s.pending + s.leased)
    }
    async fn stats(&self) -> Result<Stats, DurableError> {
        let inner = self.inner();
        self.run(async move { inner.stats().await }).await
    }
    async fn dead_jobs(&self, limit: usize) -> Result<Vec<Job>, DurableError> {
        let inner = self.inner();
        self.run(async move { inner.dead(limit).await }).await
    }
    async fn requeue_dead(&self, id: JobId, at: SystemTime) -> Result<bool, DurableError> {
        let at = at_us(at)?;
        let inner = self.inner();
        Ok(self.run(async move { inner.requeue(&[id], at).await }).await?[0])
    }
    async fn send_with(
        &self,
        payload: &[u8],
        at: SystemTime,
        opts: &SendOptions,
    ) -> Result<Sent, DurableError> {
        opts.check()?;
        let inner = self.inner();
        inner.check_payloads([payload])?;
        let due = at_us(at)?;
        let (payload, opts) = (payload.to_vec(), opts.clone());
        let (id, created) = self
            .run(async move {
                let job = OneSend {
                    kind: opts.get_kind(),
                    payload: &payload,
                    due,
                    priority: opts.get_priority(),
                    unique: opts.get_unique(),
                };
                inner.send_with(job).await
            })
            .await?;
        Ok(if created { Sent::Created(id) } else { Sent::Existing(id) })
    }
}
