//! [`AsyncRedisQueue`]: the Redis backend's async client (feature
//! `redis-async`), on the `redis` crate's multiplexed async connection, or
//! on its async cluster connection for a queue on a Redis Cluster.

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use redis::{FromRedisValue, ScriptInvocation, Value};

use super::clock::{Due, ServerClock, PROBES};
use super::pool::{redis_error, transient, Target};
use super::scripts::Name;
use super::{parse_dead, RedisQueue, Reserved};
use crate::async_contract::AsyncJobQueue;
use crate::error::DurableError;
use crate::job::{check_kind, clip_error, Job, JobId, Stats};
use crate::options::{SendOptions, Sent};
use crate::stop::StopSignal;

/// A [`RedisQueue`] with async methods ([`AsyncJobQueue`]), its commands on
/// one multiplexed connection (the `redis` crate's
/// [`MultiplexedConnection`]: every task's commands pipelined on one socket),
/// or, for a queue opened with
/// [`connect_cluster`](crate::RedisBuilder::connect_cluster), on the `redis`
/// crate's async cluster connection
/// ([`ClusterConnection`](redis::cluster_async::ClusterConnection): one
/// multiplexed connection per node, each script routed by its key's slot to
/// the master that owns the queue's keys, redirections followed).
///
/// **It needs a tokio runtime** with its time driver (`enable_time` or
/// `enable_all`): the `redis` crate's async connection runs on tokio, and
/// waits and retry backoffs use tokio's timer. (The embedded queue's
/// [`AsyncDurableQueue`](crate::AsyncDurableQueue) needs no runtime.)
///
/// It shares the `RedisQueue` it is made from — its scripts, nonces, lease
/// tokens and wake-up watcher thread (the one subscription per handle) —
/// and behaves as it does: the same scripts, the same server clock, no
/// polling (a waiting `reserve` suspends until the earliest due time the
/// server reported or a wake-up message announces an earlier one), and the
/// same retries across a dropped connection (the connection reopened, with
/// backoff, for `retry_for`; a retried change counts once, by its nonce).
///
/// # Cancellation safety
///
/// A dropped `reserve*` future loses no job. Dropped while it waits for a
/// due job it holds none. Dropped while its reserve script is in flight, the
/// script may still run on the server and lease a job to nobody: that job is
/// due again when its lease ends, as its next attempt (attempt + 1), as with
/// a reserve whose reply was lost. A change's future dropped in flight may or
/// may not have been applied, as a call whose reply was lost.
///
/// ```no_run
/// use std::time::Duration;
/// use delayq_durable::{AsyncJobQueue, AsyncRedisQueue};
///
/// # async fn run() -> Result<(), delayq_durable::DurableError> {
/// let q = AsyncRedisQueue::connect("redis://127.0.0.1:6379/", "emails")?;
/// q.send_after(b"welcome mail for user 7", Duration::from_secs(60)).await?;
/// let job = q.reserve(Duration::from_secs(30)).await?; // suspends the task, not the thread
/// assert!(q.ack(&job).await?);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AsyncRedisQueue {
    queue: RedisQueue,
    con: Arc<Con>,
}

/// The connection, opened on first use and again after a transient failure.
struct Con {
    client: Client,
    current: Mutex<Option<Async>>,
    /// A connection was opened before: the next one opened is a reconnect.
    opened: AtomicBool,
}

/// Where the async connection goes, as the queue's [`Target`].
enum Client {
    One(redis::Client, redis::AsyncConnectionConfig),
    Cluster(redis::cluster::ClusterClient),
}

/// An async connection to a [`Client`] (cheap to clone: a handle on the
/// connection's driver task).
#[derive(Clone)]
enum Async {
    One(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl Client {
    async fn open(&self) -> redis::RedisResult<Async> {
        match self {
            Client::One(client, config) => {
                Ok(Async::One(client.get_multiplexed_async_connection_with_config(config).await?))
            }
            // The cluster client carries the connect and response timeouts
            // (`connect_cluster` set them).
            Client::Cluster(client) => Ok(Async::Cluster(client.get_async_connection().await?)),
        }
    }
}

impl Async {
    async fn invoke<T: FromRedisValue>(&mut self, inv: &ScriptInvocation<'_>) -> redis::RedisResult<T> {
        match self {
            Async::One(con) => inv.invoke_async(con).await,
            Async::Cluster(con) => inv.invoke_async(con).await,
        }
    }
}

impl fmt::Debug for AsyncRedisQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncRedisQueue").field("name", &self.queue.name()).finish()
    }
}

impl AsyncRedisQueue {
    /// Connects with the defaults, as [`RedisQueue::connect`] (a blocking
    /// call — it reaches the server and starts the watcher — meant for
    /// start-up; call it outside async code or in `spawn_blocking`), and
    /// makes the async client.
    pub fn connect(url: &str, name: &str) -> Result<AsyncRedisQueue, DurableError> {
        AsyncRedisQueue::new(RedisQueue::connect(url, name)?)
    }

    /// Opens the queue on a Redis Cluster with the defaults, as
    /// [`RedisQueue::connect_cluster`] (a blocking call, meant for start-up,
    /// as [`connect`](Self::connect)), and makes the async client.
    pub fn connect_cluster(urls: &[&str], name: &str) -> Result<AsyncRedisQueue, DurableError> {
        AsyncRedisQueue::new(RedisQueue::connect_cluster(urls, name)?)
    }

    /// The async client of `queue` (made with [`RedisQueue::builder`] for
    /// options; on one server or a cluster); its connection opens on first
    /// use.
    ///
    /// # Errors
    ///
    /// None at present (a cluster queue was refused before the async
    /// client supported clusters); the `Result` is kept for that API.
    pub fn new(queue: RedisQueue) -> Result<AsyncRedisQueue, DurableError> {
        let pool = &queue.inner.pool;
        let client = match &pool.target {
            Target::One(client) => {
                let config = redis::AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(pool.connect_timeout))
                    .set_response_timeout(pool.io_timeout);
                Client::One(client.clone(), config)
            }
            Target::Cluster(client) => Client::Cluster((**client).clone()),
        };
        let con = Con { client, current: Mutex::new(None), opened: AtomicBool::new(false) };
        Ok(AsyncRedisQueue { queue, con: Arc::new(con) })
    }

    /// The same queue with blocking calls.
    pub fn blocking(&self) -> &RedisQueue {
        &self.queue
    }

    /// As [`RedisQueue::close`].
    pub fn close(&self) {
        self.queue.close();
    }

    async fn connection(&self) -> redis::RedisResult<Async> {
        let current = self.con.current.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if let Some(con) = current {
            return Ok(con);
        }
        let con = self.con.client.open().await?;
        // Relaxed: a flag for a counter, ordering nothing else.
        if self.con.opened.swap(true, Ordering::Relaxed) {
            self.queue.inner.metrics.reconnect();
        }
        *self.con.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(con.clone());
        Ok(con)
    }

    /// Runs a script, retrying transient failures on a fresh connection
    /// with backoff (5 ms doubling to 500 ms) for `retry_for`, as the
    /// blocking client's pool does; records its round trip (once per
    /// attempt the server answered).
    async fn run<T: FromRedisValue>(
        &self,
        doing: &str,
        name: Name,
        inv: &ScriptInvocation<'_>,
    ) -> Result<T, DurableError> {
        let retry_for = self.queue.inner.pool.retry_for;
        let start = Instant::now();
        let mut backoff = Duration::from_millis(5);
        loop {
            let result = match self.connection().await {
                Ok(mut con) => {
                    let sent = Instant::now();
                    let r = con.invoke(inv).await;
                    if !r.as_ref().is_err_and(transient) {
                        self.queue.inner.metrics.script(name, sent.elapsed());
                    }
                    r
                }
                Err(e) => Err(e),
            };
            match result {
                Ok(v) => return Ok(v),
                Err(e) if transient(&e) && start.elapsed() < retry_for => {
                    *self.con.current.lock().unwrap_or_else(PoisonError::into_inner) = None;
                    tokio::time::sleep(backoff.min(retry_for.saturating_sub(start.elapsed()))).await;
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                }
                Err(e) if transient(&e) => {
                    return Err(redis_error(
                        e,
                        &format!("{doing} (gave up after retrying for {retry_for:?})"),
                    ))
                }
                Err(e) => return Err(redis_error(e, doing)),
            }
        }
    }

    async fn flag(&self, doing: &str, name: Name, args: &[String]) -> Result<bool, DurableError> {
        let inv = self.queue.flag_invocation(name, args);
        let r: i64 = self.run(doing, name, &inv).await?;
        Ok(self.queue.flagged(name, r == 1))
    }

    /// The queue's offset estimate, measured again first if it is due, as
    /// the blocking client's `clock` does, on this client's connection (a
    /// measurement cut short by a dropped future leaves the estimate as it
    /// was, for the next caller).
    async fn clock(&self) -> &ServerClock {
        let q = &self.queue;
        let clock = &q.inner.clock;
        if let Some(refresh) = clock.claim_refresh() {
            let mut probes = Vec::with_capacity(PROBES);
            for _ in 0..PROBES {
                let Ok(mut con) = self.connection().await else { break };
                let inv = clock.probe(&q.inner.prefix);
                let sent_ns = clock.now_ns();
                match con.invoke::<(i64, i64)>(&inv).await {
                    Ok(time) => probes.push(clock.probe_answered(sent_ns, time)),
                    Err(_) => break,
                }
            }
            refresh.apply(&probes);
        }
        clock
    }

    /// `at` on the server's clock, for a script.
    async fn due_at(&self, at: SystemTime) -> Result<Due, DurableError> {
        self.clock().await.at(at)
    }

    async fn send_due(&self, jobs: &[(&str, &[u8], Due)]) -> Result<Vec<JobId>, DurableError> {
        let q = &self.queue;
        q.open()?;
        for (_, payload, _) in jobs {
            if payload.len() > q.inner.max_payload {
                return Err(DurableError::PayloadTooLarge { len: payload.len(), max: q.inner.max_payload });
            }
        }
        let mut inv = q.invocation(Name::Send);
        inv.arg(q.nonce()).arg(q.inner.nonce_ttl).arg(q.inner.max_attempts).arg(jobs.len());
        for (kind, payload, due) in jobs {
            inv.arg(due.arg()).arg(*kind).arg(*payload);
        }
        let ids: Vec<i64> = self.run("sending", Name::Send, &inv).await?;
        q.inner.metrics.sent(ids.len());
        Ok(ids.into_iter().map(|id| JobId(id as u64)).collect())
    }

    /// As the blocking client's `reserve_many_until`: run the reserve script;
    /// if nothing was due, suspend until the next due time the server
    /// reported, a wake-up announcing an earlier one, `deadline`, or `stop`.
    async fn reserve_until(
        &self,
        lease: Duration,
        max: usize,
        deadline: Option<Instant>,
        stop: Option<&StopSignal>,
    ) -> Result<Vec<Job>, DurableError> {
        let q = &self.queue;
        let lease_us = RedisQueue::lease_us(lease)?;
        // A raised stop wakes the handle's notifier, which wakes its tasks.
        let waker = std::task::Waker::from(q.inner.notifier.clone());
        let _registered = match stop {
            Some(stop) => match stop.register(&waker) {
                Some(r) => Some(r),
                None => return Ok(Vec::new()),
            },
            None => None,
        };
        loop {
            q.open()?;
            let seen = q.inner.notifier.generation();
            // Measured again first if due: the reply's times map through it.
            self.clock().await;
            let inv = q.reserve_invocation(lease_us, max, &[]);
            let reply: Value = self.run("reserving", Name::Reserve, &inv).await?;
            let Reserved { server_now_us, jobs, next, .. } = q.reserved(reply)?;
            if !jobs.is_empty() {
                return Ok(jobs);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) || stop.is_some_and(StopSignal::is_raised) {
                return Ok(Vec::new());
            }
            let plan = next.and_then(|due| {
                let wait = Duration::from_micros(due.saturating_sub(server_now_us).max(0) as u64);
                Instant::now().checked_add(wait)
            });
            let until = match (plan, deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let mut notified = pin!(q.inner.notifier.notified(seen, next, stop));
            let mut sleep = until.map(|t| Box::pin(tokio::time::sleep_until(t.into())));
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
            // A raised signal ends the wait at once, without another script.
            if stop.is_some_and(StopSignal::is_raised) {
                return Ok(Vec::new());
            }
        }
    }
}

impl AsyncJobQueue for AsyncRedisQueue {
    async fn send_at(&self, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        self.send_kind_at("", payload, at).await
    }
    async fn send_after(&self, payload: &[u8], delay: Duration) -> Result<JobId, DurableError> {
        self.send_kind_after("", payload, delay).await
    }
    async fn send_kind_at(&self, kind: &str, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        check_kind(kind)?;
        let due = self.due_at(at).await?;
        one(self.send_due(&[(kind, payload, due)]).await)
    }
    async fn send_kind_after(
        &self,
        kind: &str,
        payload: &[u8],
        delay: Duration,
    ) -> Result<JobId, DurableError> {
        check_kind(kind)?;
        let due = Due::In(RedisQueue::delay_us(delay)?);
        one(self.send_due(&[(kind, payload, due)]).await)
    }
    async fn send_many(&self, jobs: &[(&[u8], SystemTime)]) -> Result<Vec<JobId>, DurableError> {
        let mut due = Vec::with_capacity(jobs.len());
        for (payload, at) in jobs {
            due.push(("", *payload, self.due_at(*at).await?));
        }
        if due.is_empty() {
            return Ok(Vec::new());
        }
        self.send_due(&due).await
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
        RedisQueue::lease_us(lease)?; // a bad lease is an error, raised signal or not
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
        if job.token == 0 {
            return Ok(false);
        }
        self.flag("acking", Name::Ack, &[job.id.0.to_string(), job.token.to_string()]).await
    }
    async fn ack_many(&self, jobs: &[Job]) -> Result<Vec<bool>, DurableError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let inv = self.queue.ack_many_invocation(jobs);
        let flags: Vec<i64> = self.run("acking", Name::AckMany, &inv).await?;
        Ok(self.queue.acked_many(&flags))
    }
    async fn nack(&self, job: &Job, retry_at: SystemTime) -> Result<bool, DurableError> {
        let due = self.due_at(retry_at).await?;
        if job.token == 0 {
            return Ok(false);
        }
        let args = [job.id.0.to_string(), job.token.to_string(), due.arg(), String::new()];
        self.flag("nacking", Name::Nack, &args).await
    }
    async fn nack_with_error(
        &self,
        job: &Job,
        retry_at: SystemTime,
        error: &str,
    ) -> Result<bool, DurableError> {
        let due = self.due_at(retry_at).await?;
        if job.token == 0 {
            return Ok(false);
        }
        let args = [job.id.0.to_string(), job.token.to_string(), due.arg(), clip_error(error)];
        self.flag("nacking", Name::Nack, &args).await
    }
    async fn kill(&self, job: &Job, error: &str) -> Result<bool, DurableError> {
        if job.token == 0 {
            return Ok(false);
        }
        let args = [job.id.0.to_string(), job.token.to_string(), clip_error(error)];
        self.flag("killing", Name::Kill, &args).await
    }
    async fn extend(&self, job: &Job, lease: Duration) -> Result<bool, DurableError> {
        let lease = RedisQueue::lease_us(lease)?;
        if job.token == 0 {
            return Ok(false);
        }
        let args = [job.id.0.to_string(), job.token.to_string(), lease.to_string()];
        self.flag("extending", Name::Extend, &args).await
    }
    async fn cancel(&self, id: JobId) -> Result<bool, DurableError> {
        self.flag("cancelling", Name::Cancel, &[id.0.to_string()]).await
    }
    async fn len(&self) -> Result<u64, DurableError> {
        let s = self.stats().await?;
        Ok(s.pending + s.leased)
    }
    async fn stats(&self) -> Result<Stats, DurableError> {
        let inv = self.queue.invocation(Name::Stats);
        let v: Vec<i64> = self.run("counting", Name::Stats, &inv).await?;
        Ok(self.queue.counted(&v))
    }
    async fn dead_jobs(&self, limit: usize) -> Result<Vec<Job>, DurableError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let clock = self.clock().await;
        let last = limit.min(i64::MAX as usize) - 1;
        let mut inv = self.queue.invocation(Name::Dead);
        inv.arg(last);
        let reply: Value = self.run("listing dead jobs", Name::Dead, &inv).await?;
        parse_dead(reply, clock)
    }
    async fn requeue_dead(&self, id: JobId, at: SystemTime) -> Result<bool, DurableError> {
        let due = self.due_at(at).await?;
        let args = [id.0.to_string(), due.arg(), self.queue.inner.max_attempts.to_string()];
        self.flag("requeueing", Name::Requeue, &args).await
    }
    async fn send_with(
        &self,
        payload: &[u8],
        at: SystemTime,
        opts: &SendOptions,
    ) -> Result<Sent, DurableError> {
        let q = &self.queue;
        opts.check()?;
        q.check_payload(payload.len())?;
        let due = self.due_at(at).await?;
        q.open()?;
        let inv = q.send_with_invocation(payload, due, opts);
        let reply: (i64, i64) = self.run("sending", Name::SendWith, &inv).await?;
        Ok(q.sent_with(reply))
    }
}

/// The one id of a one-job send.
fn one(ids: Result<Vec<JobId>, DurableError>) -> Result<JobId, DurableError> {
    ids?.first().copied().ok_or_else(|| DurableError::Redis("a send returned no id".into()))
}
