//! [`PgQueue`]: the durable-jobs contract on PostgreSQL, for many producer
//! and consumer processes, with jobs enqueued inside the application's own
//! transaction.

#[cfg(feature = "postgres-async")]
mod aio;
mod listen;
mod ops;
mod pool;
mod schema;
mod tx;

#[cfg(feature = "postgres-async")]
pub use self::aio::AsyncPgQueue;

use std::collections::hash_map::RandomState;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::contract::JobQueue;
use crate::error::DurableError;
use crate::job::{check_kind, clip_error, Job, JobId, Stats};
use crate::notifier::Notifier;
use crate::options::{check_priority, SendOptions, Sent};
use crate::stop::StopSignal;
use crate::stored::{check_schedule_name, from_us, Fire, StoredSchedule};

use self::listen::Listen;
pub(crate) use self::ops::at_us;
use self::ops::{delay_us, lease_us, FireUs, Inner, OneSend, Reserved};
use self::pool::{call, pg_error, Pool, Retry};
use self::schema::{Sql, Stmt};

/// Durable delayed jobs in PostgreSQL: the same contract and calls as
/// [`DurableQueue`](crate::DurableQueue) and
/// [`RedisQueue`](crate::RedisQueue), shared by every process that opens
/// the same database, schema and queue name — and jobs that commit with the
/// application's own transaction ([`send_after_in`](Self::send_after_in)
/// and the other `_in` calls).
///
/// ```no_run
/// use std::time::Duration;
/// use delayq_durable::PgQueue;
///
/// let q = PgQueue::connect("postgres://app@127.0.0.1/app", "emails")?;
/// q.send_after(b"welcome mail for user 7", Duration::from_secs(60))?;
/// let job = q.reserve(Duration::from_secs(30))?; // in any process, on any machine
/// assert!(q.ack(&job)?);
/// # Ok::<(), delayq_durable::DurableError>(())
/// ```
///
/// # How it works
///
/// - **One table, one statement per state change.** Every queue of a
///   schema lives in its `jobs` table, keyed by (queue, id). Each change is
///   one statement, most of them a PL/pgSQL function the migration
///   created (send, reserve, nack, requeue), so each is one round trip and
///   atomic: there is no step between "take the due job" and "hand it out"
///   in which a crash loses it.
/// - **Reserve** selects due jobs `FOR UPDATE SKIP LOCKED` on a partial
///   index of (queue, priority, due time, id) over pending and leased jobs,
///   one range scan per priority level, most urgent first (at most 10; an
///   empty level costs one index probe), so concurrent consumers never wait
///   for each other nor take the same job, and jobs come by priority, then
///   due time, then id (FIFO among equal deadlines). A leased job's due time
///   is its lease end: when it passes, the job is handed out again as its
///   next attempt, or buried after its last one. Lease tokens are random
///   64-bit numbers drawn by the client: a stale ack matches nothing.
/// - **Priority aging** ([`priority_aging`](PgBuilder::priority_aging), off
///   by default): the effective priority of a due job is its priority less
///   one per step waited since its due time. Within a level the index is in
///   due order, so each level's oldest jobs are its most aged: the reserve
///   reads the first due jobs of each level without a lock (10 range scans
///   of at most `max + 32` entries), merges them by (effective priority,
///   due time, id), then locks them in that order by primary key, `SKIP
///   LOCKED`. Cost: 10 index scans and a sort of at most `10 * (max + 32)`
///   ids per reserve, whatever the backlog. A job whose lease ran out ages
///   from its lease's end.
/// - **Uniqueness keys** live in a `unique_keys` table (queue, key, the
///   job, the states covered, the end of the period). A send with a key
///   inserts its row `ON CONFLICT DO NOTHING`, or locks the existing one
///   `FOR UPDATE`, before it decides, so racing sends of one key — threads,
///   processes, machines — are serialized on that row and store one job.
///   A job's deletion or death releases its key (a row trigger that jobs
///   without a key never call), unless its period still runs; each unique
///   send sweeps up to 16 rows whose period ran out.
/// - **Excluded kinds** ([`reserve_excluding`](Self::reserve_excluding)):
///   the reserve finds the kinds of the pending and leased jobs by a skip
///   scan of an index of (queue, kind, priority, due time, id) — one probe
///   per kind — and reads, for each kind it may take and each level, the
///   first due jobs, merged and locked as with aging; the next due time a
///   waiter sleeps until is the earliest among those kinds. So due jobs of
///   an excluded kind are never read, never leased, and do not keep the
///   waiter awake (a notification of one wakes it to re-check once). Cost:
///   about 11 index probes per kind present, whatever the backlog, and one
///   more index to maintain on every state change.
/// - **Schedules** are rows of a `schedules` table (queue, name, definition,
///   next and last tick, the id of the pending tick job). Each schedule call
///   is one SQL function; a fire locks the schedule's row and fires only if
///   its next tick is the one expected (compare-and-set), storing the
///   tick's jobs and replacing the tick job in that transaction.
/// - **The server's clock.** Due times are compared with
///   `clock_timestamp()` on the server, and `send_after(d)` and leases are
///   delays added there, so a client whose clock is off still schedules "in
///   5 s" as 5 s. An instant (`send_at`, a nack's `retry_at`,
///   `requeue_dead`) is sent as it is, in microseconds (rounded up): keep
///   the clocks of the server and its clients in step (NTP), as the
///   instant is the client's. A job's `deadline()` is that instant, to the
///   microsecond.
/// - **No polling.** A waiting `reserve` sleeps until the earliest due time
///   the server reported, or until a notification on the queue's channel
///   (`LISTEN`, held by one task per handle; every statement that makes a
///   job pending calls `pg_notify` with its due time, delivered at commit)
///   announces an earlier one. If the listening connection drops, the task
///   listens again and wakes every waiter to re-check; a silently dead one
///   is found by a `SELECT 1` after every [`liveness`](PgBuilder::liveness)
///   interval (default 5 s), which must answer within `min(liveness, 1 s)`.
///   A lost notification can delay a job by at most liveness +
///   `min(liveness, 1 s)` + the reconnect (at most `connect_timeout`,
///   default 2 s): 8 s with the defaults. It cannot lose one. Only when a
///   due job is held by another transaction (a consumer leasing it that
///   moment) does a waiter look again after a short pause (1 ms doubling to
///   100 ms).
/// - **Reconnects.** A call that cannot connect is retried with backoff for
///   [`retry_for`](PgBuilder::retry_for) (default 10 s), then fails with
///   [`DurableError::Postgres`]; so does a call whose server does not answer
///   within [`io_timeout`](PgBuilder::io_timeout). A statement whose
///   connection broke after it was sent is retried on a fresh connection,
///   except a send: whether it was stored is unknown, so it fails at once
///   and says so (retrying could store the job twice).
/// - **Durability** is the server's: a send returns after its commit, which
///   with `fsync = on` and `synchronous_commit = on` (the defaults) is on
///   disk.
/// - **Threads.** Each queue handle owns a small tokio runtime (two worker
///   threads) that drives its connections and the listener; the blocking
///   calls run their statements on the calling thread. Do not call them from
///   async code (they block): use [`AsyncPgQueue`](crate::AsyncPgQueue) there
///   (feature `postgres-async`).
///
/// The schema is created, or brought to this version, when the queue is
/// opened: see [`PgBuilder::connect`]. Version 2 (priorities, uniqueness,
/// schedules) adds columns with constant defaults (no table rewrite), an
/// index, two tables and functions; handles opened before the upgrade keep
/// working (version 1's reserve is kept, in priority order).
#[derive(Clone)]
pub struct PgQueue {
    inner: Arc<Inner>,
}

impl fmt::Debug for PgQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgQueue").field("schema", &self.inner.schema).field("name", &self.inner.name).finish()
    }
}

/// Options for [`PgQueue`]: `PgQueue::builder().schema("jobs").max_attempts(5).connect(url, name)`.
#[derive(Clone, Debug)]
pub struct PgBuilder {
    schema: String,
    max_attempts: u32,
    max_payload: usize,
    retry_for: Duration,
    connect_timeout: Duration,
    io_timeout: Duration,
    liveness: Duration,
    aging: Option<Duration>,
}

impl Default for PgBuilder {
    fn default() -> Self {
        PgBuilder::new()
    }
}

impl PgBuilder {
    /// The defaults: schema `delayq`, 25 attempts, payloads up to 1 MiB,
    /// retries for 10 s, connect timeout 2 s, a call's statements answered
    /// within 30 s, liveness 5 s.
    pub fn new() -> PgBuilder {
        PgBuilder {
            schema: "delayq".to_string(),
            max_attempts: 25,
            max_payload: 1 << 20,
            retry_for: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(2),
            io_timeout: Duration::from_secs(30),
            liveness: Duration::from_secs(5),
            aging: None,
        }
    }

    /// The schema the queue's table and functions live in (created if
    /// missing): letters, digits and `_`, at most 48 bytes, not starting
    /// with a digit. Every queue name in one schema shares its table.
    pub fn schema(mut self, schema: &str) -> PgBuilder {
        self.schema = schema.to_string();
        self
    }

    /// Deliveries before a failing job is dead (at least 1). Applies to jobs
    /// this handle sends and requeues.
    pub fn max_attempts(mut self, n: u32) -> PgBuilder {
        self.max_attempts = n;
        self
    }

    /// The largest payload `send_*` accepts, in bytes (at most 256 MiB).
    pub fn max_payload(mut self, bytes: usize) -> PgBuilder {
        self.max_payload = bytes;
        self
    }

    /// How long a call keeps retrying a server it cannot reach before it fails.
    pub fn retry_for(mut self, d: Duration) -> PgBuilder {
        self.retry_for = d;
        self
    }

    /// Timeout for opening a connection.
    pub fn connect_timeout(mut self, d: Duration) -> PgBuilder {
        self.connect_timeout = d;
        self
    }

    /// The longest one try of a call may wait for the server's answer.
    pub fn io_timeout(mut self, d: Duration) -> PgBuilder {
        self.io_timeout = d;
        self
    }

    /// How often the listening connection is checked with a `SELECT 1`,
    /// which must answer within `min(liveness, 1 s)`. A lost notification
    /// delays a job by at most liveness + `min(liveness, 1 s)` + the
    /// reconnect (`connect_timeout`).
    pub fn liveness(mut self, d: Duration) -> PgBuilder {
        self.liveness = d;
        self
    }

    /// Ages priorities (off by default): a due job's effective priority is
    /// its [priority](SendOptions::priority) less one per `step` it has
    /// waited since its due time (never below 0), and reserves take the
    /// lowest effective priority first, then the earliest due time, then
    /// the lowest id. So a job of priority `p` waits at most `p * step`
    /// behind a stream of more urgent ones. A step under 1 ms is
    /// [`InvalidArgument`](DurableError::InvalidArgument) at
    /// [`connect`](Self::connect). Applies to this handle's reserves.
    pub fn priority_aging(mut self, step: Duration) -> PgBuilder {
        self.aging = Some(step);
        self
    }

    /// Connects to the database at `url` (`postgres://user:password@host:port/db`
    /// or `host=… user=… dbname=…`, as tokio-postgres reads them; no TLS)
    /// and opens the queue `name` in the builder's schema, any number of
    /// handles in any number of processes at once.
    ///
    /// Opening migrates the schema: in one transaction, under an advisory
    /// lock (concurrent openers wait for each other), it creates the schema
    /// and applies the migrations after the version recorded in its
    /// `delayq_schema` table. So the user needs the right to create them the
    /// first time. A schema recorded by a newer version of this crate is
    /// refused.
    ///
    /// A blocking call (it connects and starts listening), meant for
    /// start-up; not from async code.
    ///
    /// # Errors
    ///
    /// [`DurableError::Postgres`] if the server cannot be reached within
    /// `retry_for`, the URL is malformed, or the migration fails;
    /// [`DurableError::InvalidArgument`] for an empty name, a bad schema
    /// name or zero `max_attempts`.
    pub fn connect(self, url: &str, name: &str) -> Result<PgQueue, DurableError> {
        if name.is_empty() {
            return Err(DurableError::InvalidArgument("a queue name must not be empty"));
        }
        let schema_ok = !self.schema.is_empty()
            && self.schema.len() <= 48
            && !self.schema.starts_with(|c: char| c.is_ascii_digit())
            && self.schema.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !schema_ok {
            return Err(DurableError::InvalidArgument(
                "a schema name is letters, digits and '_', at most 48 bytes, not starting with a digit",
            ));
        }
        if self.max_attempts == 0 || self.max_attempts > i32::MAX as u32 {
            return Err(DurableError::InvalidArgument("max_attempts must be at least 1"));
        }
        if self.max_payload > 256 << 20 {
            return Err(DurableError::InvalidArgument("max_payload must be at most 256 MiB"));
        }
        if self.liveness.is_zero() || self.io_timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(DurableError::InvalidArgument("timeouts must be longer than zero"));
        }
        let aging_us = match self.aging {
            None => 0,
            Some(step) if step < Duration::from_millis(1) => {
                return Err(DurableError::InvalidArgument("a priority aging step must be at least 1 ms"));
            }
            Some(step) => i64::try_from(step.as_micros()).unwrap_or(i64::MAX),
        };
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|e| pg_error(&e, &format!("reading the URL {url:?}")))?;
        config.connect_timeout(self.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name("delayq");
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("delayq-pg")
            .enable_all()
            .build()
            .map_err(|e| DurableError::Io { context: "starting the queue's runtime".into(), source: e })?;
        let handle = runtime.handle().clone();
        let pool = Pool::new(config.clone(), handle.clone(), self.retry_for, self.io_timeout);
        let sql = Sql::new(&self.schema);
        handle.block_on(migrate(&pool, &self.schema, &sql))?;
        let channel = handle.block_on(async {
            call!(pool, "reading the channel", Retry::Safe, |conn| {
                let st = conn.stmt(&sql, Stmt::Channel).await?;
                Ok(conn.client.query_one(&st, &[&name]).await?.get::<_, String>(0))
            })
        })?;
        let notifier = Arc::new(Notifier::default());
        let mut listening = config;
        // Named, so an operator (and a test) can tell it in pg_stat_activity.
        listening.application_name("delayq listen");
        let listener = Listen {
            config: listening,
            channel: schema::quote_ident(&channel),
            notifier: notifier.clone(),
            liveness: self.liveness,
        }
        .start(&handle)
        .map_err(|e| pg_error(&e, &format!("listening at {}", pool.target)))?;
        Ok(PgQueue {
            inner: Arc::new(Inner {
                name: name.to_string(),
                schema: self.schema,
                sql,
                pool,
                notifier,
                listener,
                runtime: Some(runtime),
                handle,
                closed: AtomicBool::new(false),
                max_attempts: self.max_attempts,
                max_payload: self.max_payload,
                aging_us,
                tokens: AtomicU64::new(0),
                token_keys: RandomState::new(),
                sampled: AtomicU64::new(0),
            }),
        })
    }
}

/// Brings the schema to [`schema::VERSION`] in one transaction (see
/// [`PgBuilder::connect`]).
async fn migrate(pool: &Pool, name: &str, sql: &Sql) -> Result<(), DurableError> {
    let found = call!(pool, "migrating the schema", Retry::Safe, |conn| {
        let tx = conn.client.transaction().await?;
        tx.batch_execute(&schema::prelude(name)).await?;
        let version: i32 = tx.query_opt(sql.text(Stmt::Version), &[]).await?.map_or(0, |r| r.get(0));
        if version > schema::VERSION {
            return Ok(Some(version));
        }
        for i in version as usize..schema::VERSION as usize {
            tx.batch_execute(&schema::migration(name, i)).await?;
        }
        if version == 0 {
            tx.execute(
                &format!("INSERT INTO {}.delayq_schema VALUES ($1)", schema::quote_ident(name)),
                &[&schema::VERSION],
            )
            .await?;
        } else if version < schema::VERSION {
            tx.execute(
                &format!("UPDATE {}.delayq_schema SET version = $1", schema::quote_ident(name)),
                &[&schema::VERSION],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(None)
    })?;
    match found {
        Some(v) => Err(DurableError::Postgres(format!(
            "schema {name} is at version {v}, newer than this version of delayq-durable reads ({})",
            schema::VERSION
        ))),
        None => Ok(()),
    }
}

impl PgQueue {
    /// Connects with the defaults; see [`PgBuilder::connect`].
    pub fn connect(url: &str, name: &str) -> Result<PgQueue, DurableError> {
        PgBuilder::new().connect(url, name)
    }

    /// Options.
    pub fn builder() -> PgBuilder {
        PgBuilder::new()
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The schema its table lives in.
    pub fn schema(&self) -> &str {
        &self.inner.schema
    }

    /// Runs one of the queue's calls on this thread.
    fn block<T>(&self, f: impl Future<Output = T>) -> T {
        self.inner.handle.block_on(f)
    }

    /// Stores a job due at `at` (an instant of the client's clock, sent in
    /// microseconds rounded up); returns once it is committed.
    pub fn send_at(&self, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        self.send_kind_at("", payload, at)
    }

    /// Stores a job due `delay` from the server's now.
    pub fn send_after(&self, payload: &[u8], delay: Duration) -> Result<JobId, DurableError> {
        self.send_kind_after("", payload, delay)
    }

    /// As [`send_at`](Self::send_at), with a kind stored beside the payload
    /// ([`Job::kind`]); a kind is at most 255 bytes, without control characters.
    pub fn send_kind_at(&self, kind: &str, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        check_kind(kind)?;
        let due = at_us(at)?;
        Ok(self.block(self.inner.send(&[kind], &[payload], &[due], false))?[0])
    }

    /// As [`send_after`](Self::send_after), with a kind.
    pub fn send_kind_after(
        &self,
        kind: &str,
        payload: &[u8],
        delay: Duration,
    ) -> Result<JobId, DurableError> {
        check_kind(kind)?;
        let due = delay_us(delay)?;
        Ok(self.block(self.inner.send(&[kind], &[payload], &[due], true))?[0])
    }

    /// Stores several jobs in one statement (one round trip, one commit),
    /// all or none; their ids in order.
    pub fn send_many(&self, jobs: &[(&[u8], SystemTime)]) -> Result<Vec<JobId>, DurableError> {
        let (kinds, payloads, dues) = batch(jobs)?;
        self.block(self.inner.send(&kinds, &payloads, &dues, false))
    }

    /// Blocks until a job is due by the server's clock, leases it, returns it.
    pub fn reserve(&self, lease: Duration) -> Result<Job, DurableError> {
        loop {
            if let Some(job) = self.reserve_many_until(lease, 1, None, None, &[])?.pop() {
                return Ok(job);
            }
        }
    }

    /// As [`reserve`](Self::reserve); `Ok(None)` after `timeout`.
    pub fn reserve_timeout(&self, lease: Duration, timeout: Duration) -> Result<Option<Job>, DurableError> {
        let deadline = Instant::now().checked_add(timeout);
        Ok(self.reserve_many_until(lease, 1, deadline, None, &[])?.pop())
    }

    /// As [`reserve`](Self::reserve), but returns `Ok(None)` once `stop` is
    /// [raised](StopSignal::raise) (at once if it is already): the thread
    /// sleeps on the handle's notifier, which the signal also wakes, with no
    /// timeout and no periodic wake-up. A job leased before the signal is
    /// returned.
    pub fn reserve_or_stop(&self, lease: Duration, stop: &StopSignal) -> Result<Option<Job>, DurableError> {
        lease_us(lease)?; // a bad lease is an error, raised signal or not
        let waker = std::task::Waker::from(self.inner.notifier.clone());
        let Some(_registered) = stop.register(&waker) else {
            return Ok(None);
        };
        Ok(self.reserve_many_until(lease, 1, None, Some(stop), &[])?.pop())
    }

    /// Waits up to `timeout` for due jobs and leases up to `max` of them in
    /// one statement; at most 1000 a call (a larger `max`, `usize::MAX`
    /// included, is taken as 1000).
    pub fn reserve_many(
        &self,
        lease: Duration,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Job>, DurableError> {
        if max == 0 {
            return Err(DurableError::InvalidArgument("reserve_many needs max >= 1"));
        }
        let deadline = Instant::now().checked_add(timeout);
        self.reserve_many_until(lease, max, deadline, None, &[])
    }

    /// Leases up to `max` jobs whose kind is not in `excluded`, waiting for
    /// one until `until` (`None`: no limit) or until `stop` is raised; empty
    /// only then.
    fn reserve_many_until(
        &self,
        lease: Duration,
        max: usize,
        until: Option<Instant>,
        stop: Option<&StopSignal>,
        excluded: &[String],
    ) -> Result<Vec<Job>, DurableError> {
        let lease_us = lease_us(lease)?;
        let mut held = Duration::from_millis(1);
        loop {
            // Read the generation before the statement: a job made pending
            // after it ran notifies with a newer one.
            let seen = self.inner.notifier.generation();
            let Reserved { jobs, server_now, next } =
                self.block(self.inner.reserve(lease_us, max, excluded))?;
            if !jobs.is_empty() {
                return Ok(jobs);
            }
            if until.is_some_and(|d| Instant::now() >= d) || stop.is_some_and(StopSignal::is_raised) {
                return Ok(Vec::new());
            }
            let (plan, pause) = plan(server_now, next, &mut held);
            let wake = match (plan, until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // During a pause any notification ends the wait (`None`).
            self.inner.notifier.wait(seen, if pause { None } else { next }, wake, stop);
            self.inner.check_open()?;
        }
    }

    /// Deletes a job the caller holds the lease of; `Ok(false)` if the lease
    /// is not the caller's any more (the job was leased to someone else,
    /// moved to the dead set, or cancelled).
    pub fn ack(&self, job: &Job) -> Result<bool, DurableError> {
        self.block(self.inner.ack(job.id, job.token))
    }

    /// Acks several jobs in one statement; `Ok(flags)` in order, as for [`ack`](Self::ack).
    pub fn ack_many(&self, jobs: &[Job]) -> Result<Vec<bool>, DurableError> {
        let pairs: Vec<(JobId, u64)> = jobs.iter().map(|j| (j.id, j.token)).collect();
        self.block(self.inner.ack_many(&pairs))
    }

    /// Retries the job at `retry_at`, or moves it to the dead set after its
    /// last attempt.
    pub fn nack(&self, job: &Job, retry_at: SystemTime) -> Result<bool, DurableError> {
        let due = at_us(retry_at)?;
        self.block(self.inner.nack(job.id, job.token, due, None))
    }

    /// As [`nack`](Self::nack), and stores `error` as the job's
    /// [`last_error`](Job::last_error) (cut to 4 KiB at a character boundary).
    pub fn nack_with_error(
        &self,
        job: &Job,
        retry_at: SystemTime,
        error: &str,
    ) -> Result<bool, DurableError> {
        let due = at_us(retry_at)?;
        self.block(self.inner.nack(job.id, job.token, due, Some(clip_error(error))))
    }

    /// Moves a job the caller holds the lease of to the dead set now, with
    /// `error` as its last error. `Ok(false)` if the lease is not the caller's.
    pub fn kill(&self, job: &Job, error: &str) -> Result<bool, DurableError> {
        self.block(self.inner.kill(job.id, job.token, clip_error(error)))
    }

    /// Extends the caller's lease to `lease` from the server's now.
    pub fn extend(&self, job: &Job, lease: Duration) -> Result<bool, DurableError> {
        let lease = lease_us(lease)?;
        self.block(self.inner.extend(job.id, job.token, lease))
    }

    /// Deletes a job in any state; `Ok(false)` if there is none.
    pub fn cancel(&self, id: JobId) -> Result<bool, DurableError> {
        self.block(self.inner.cancel(id))
    }

    /// Moves a dead job back to pending, due at `at`, with `max_attempts`
    /// more deliveries.
    pub fn requeue_dead(&self, id: JobId, at: SystemTime) -> Result<bool, DurableError> {
        let at = at_us(at)?;
        Ok(self.block(self.inner.requeue(&[id], at))?[0])
    }

    /// Jobs by state.
    pub fn stats(&self) -> Result<Stats, DurableError> {
        self.block(self.inner.stats())
    }

    /// Pending plus leased jobs.
    pub fn len(&self) -> Result<u64, DurableError> {
        let s = self.stats()?;
        Ok(s.pending + s.leased)
    }

    /// Whether [`len`](Self::len) is zero.
    pub fn is_empty(&self) -> Result<bool, DurableError> {
        Ok(self.len()? == 0)
    }

    /// Up to `limit` dead jobs, oldest death first (`usize::MAX`: all of them).
    pub fn dead_jobs(&self, limit: usize) -> Result<Vec<Job>, DurableError> {
        self.block(self.inner.dead(limit))
    }

    /// Whether the queue has any job: a queue name without one is most
    /// likely a typo (the CLI refuses it).
    pub fn exists(&self) -> Result<bool, DurableError> {
        self.block(self.inner.exists())
    }

    /// Stops sends and reserves from this handle (they fail with
    /// [`DurableError::Closed`]; blocked reserves return it). Jobs stay in
    /// the database; acks still work.
    pub fn close(&self) {
        // Release: a call that sees the flag sees the handle closed.
        self.inner.closed.store(true, Ordering::Release);
        self.inner.notifier.close();
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// Runs an inspection call (`inspect.rs`) on this thread.
    pub(crate) fn inspect<'a, T, F: Future<Output = Result<T, DurableError>> + 'a>(
        &'a self,
        call: impl FnOnce(&'a Inner) -> F,
    ) -> Result<T, DurableError> {
        self.block(call(&self.inner))
    }
}

/// When a waiter with nothing leased wakes by itself: at the next due time
/// the server reported (`next`, server µs; its `server_now` was then), or
/// — when that job is due already, held by another transaction — after a
/// pause of `held` (doubled, up to 100 ms, for the next). The flag says it
/// is such a pause (any notification then ends the wait).
pub(crate) fn plan(server_now: i64, next: Option<i64>, held: &mut Duration) -> (Option<Instant>, bool) {
    match next {
        None => {
            *held = Duration::from_millis(1);
            (None, false)
        }
        Some(due) if due <= server_now => {
            let pause = *held;
            *held = (*held * 2).min(Duration::from_millis(100));
            (Instant::now().checked_add(pause), true)
        }
        Some(due) => {
            *held = Duration::from_millis(1);
            let wait = Duration::from_micros(due.saturating_sub(server_now) as u64);
            (Instant::now().checked_add(wait), false)
        }
    }
}

/// The send statement's arrays: kinds, payloads, due times.
pub(crate) type Batch<'a> = (Vec<&'static str>, Vec<&'a [u8]>, Vec<i64>);

/// A `send_many` batch as the send statement's arrays (no kinds).
pub(crate) fn batch<'a>(jobs: &[(&'a [u8], SystemTime)]) -> Result<Batch<'a>, DurableError> {
    let mut dues = Vec::with_capacity(jobs.len());
    for (_, at) in jobs {
        dues.push(at_us(*at)?);
    }
    Ok((vec![""; jobs.len()], jobs.iter().map(|(p, _)| *p).collect(), dues))
}

impl JobQueue for PgQueue {
    fn payload_limit(&self) -> usize {
        self.inner.max_payload
    }
    fn queue_label(&self) -> String {
        self.name().to_string()
    }
    fn send_at(&self, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        PgQueue::send_at(self, payload, at)
    }
    fn send_after(&self, payload: &[u8], delay: Duration) -> Result<JobId, DurableError> {
        PgQueue::send_after(self, payload, delay)
    }
    fn send_kind_at(&self, kind: &str, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        PgQueue::send_kind_at(self, kind, payload, at)
    }
    fn send_kind_after(&self, kind: &str, payload: &[u8], delay: Duration) -> Result<JobId, DurableError> {
        PgQueue::send_kind_after(self, kind, payload, delay)
    }
    fn send_many(&self, jobs: &[(&[u8], SystemTime)]) -> Result<Vec<JobId>, DurableError> {
        PgQueue::send_many(self, jobs)
    }
    fn reserve(&self, lease: Duration) -> Result<Job, DurableError> {
        PgQueue::reserve(self, lease)
    }
    fn reserve_timeout(&self, lease: Duration, timeout: Duration) -> Result<Option<Job>, DurableError> {
        PgQueue::reserve_timeout(self, lease, timeout)
    }
    fn reserve_or_stop(&self, lease: Duration, stop: &StopSignal) -> Result<Option<Job>, DurableError> {
        PgQueue::reserve_or_stop(self, lease, stop)
    }
    fn reserve_many(&self, lease: Duration, max: usize, timeout: Duration) -> Result<Vec<Job>, DurableError> {
        PgQueue::reserve_many(self, lease, max, timeout)
    }
    fn ack(&self, job: &Job) -> Result<bool, DurableError> {
        PgQueue::ack(self, job)
    }
    fn ack_many(&self, jobs: &[Job]) -> Result<Vec<bool>, DurableError> {
        PgQueue::ack_many(self, jobs)
    }
    fn nack(&self, job: &Job, retry_at: SystemTime) -> Result<bool, DurableError> {
        PgQueue::nack(self, job, retry_at)
    }
    fn nack_with_error(&self, job: &Job, retry_at: SystemTime, error: &str) -> Result<bool, DurableError> {
        PgQueue::nack_with_error(self, job, retry_at, error)
    }
    fn kill(&self, job: &Job, error: &str) -> Result<bool, DurableError> {
        PgQueue::kill(self, job, error)
    }
    fn extend(&self, job: &Job, lease: Duration) -> Result<bool, DurableError> {
        PgQueue::extend(self, job, lease)
    }
    fn cancel(&self, id: JobId) -> Result<bool, DurableError> {
        PgQueue::cancel(self, id)
    }
    fn len(&self) -> Result<u64, DurableError> {
        PgQueue::len(self)
    }
    fn stats(&self) -> Result<Stats, DurableError> {
        PgQueue::stats(self)
    }
    fn dead_jobs(&self, limit: usize) -> Result<Vec<Job>, DurableError> {
        PgQueue::dead_jobs(self, limit)
    }
    fn requeue_dead(&self, id: JobId, at: SystemTime) -> Result<bool, DurableError> {
        PgQueue::requeue_dead(self, id, at)
    }
    fn send_with(&self, payload: &[u8], at: SystemTime, opts: &SendOptions) -> Result<Sent, DurableError> {
        PgQueue::send_with(self, payload, at, opts)
    }
    fn reserve_excluding(
        &self,
        lease: Duration,
        exclude: &[String],
        stop: &StopSignal,
    ) -> Result<Option<Job>, DurableError> {
        PgQueue::reserve_excluding(self, lease, exclude, stop)
    }
    fn schedule_store(&self, name: &str, def: &[u8], next_run_us: Option<u64>) -> Result<(), DurableError> {
        PgQueue::schedule_store(self, name, def, next_run_us)
    }
    fn schedule_get(&self, name: &str) -> Result<Option<StoredSchedule>, DurableError> {
        PgQueue::schedule_get(self, name)
    }
    fn schedule_list(&self) -> Result<Vec<StoredSchedule>, DurableError> {
        PgQueue::schedule_list(self)
    }
    fn schedule_remove(&self, name: &str) -> Result<bool, DurableError> {
        PgQueue::schedule_remove(self, name)
    }
    fn schedule_fire(&self, name: &str, fire: &Fire) -> Result<bool, DurableError> {
        PgQueue::schedule_fire(self, name, fire)
    }
}

/// Issue 33's primitives: options on a send, reserves that exclude kinds,
/// the schedule store.
impl PgQueue {
    /// Stores a job due at `at` with [`SendOptions`] (a kind, a priority, a
    /// uniqueness key), in one statement: see
    /// [`JobQueue::send_with`](crate::JobQueue::send_with). A send with a key
    /// inserts or locks the key's row first, so racing sends of one key
    /// (from any process) are serialized on it and store one job.
    pub fn send_with(
        &self,
        payload: &[u8],
        at: SystemTime,
        opts: &SendOptions,
    ) -> Result<Sent, DurableError> {
        opts.check()?;
        self.inner.check_payloads([payload])?;
        let due = at_us(at)?;
        let job = OneSend {
            kind: opts.get_kind(),
            payload,
            due,
            priority: opts.get_priority(),
            unique: opts.get_unique(),
        };
        let (id, created) = self.block(self.inner.send_with(job))?;
        Ok(if created { Sent::Created(id) } else { Sent::Existing(id) })
    }

    /// As [`reserve_or_stop`](Self::reserve_or_stop), leasing no job whose
    /// kind is in `exclude`: those stay pending, unleased, their attempts
    /// uncounted. The wait sleeps until the next due time of a job it may
    /// take (or a notification of an earlier one), with no polling: a due
    /// job of an excluded kind does not wake it again and again.
    pub fn reserve_excluding(
        &self,
        lease: Duration,
        exclude: &[String],
        stop: &StopSignal,
    ) -> Result<Option<Job>, DurableError> {
        lease_us(lease)?; // a bad lease is an error, raised signal or not
        let waker = std::task::Waker::from(self.inner.notifier.clone());
        let Some(_registered) = stop.register(&waker) else {
            return Ok(None);
        };
        Ok(self.reserve_many_until(lease, 1, None, Some(stop), exclude)?.pop())
    }

    #[doc(hidden)]
    pub fn schedule_store(
        &self,
        name: &str,
        def: &[u8],
        next_run_us: Option<u64>,
    ) -> Result<(), DurableError> {
        crate::stored::check_store(name, def, self.inner.max_payload)?;
        let next = next_run_us.map(server_us).transpose()?;
        self.inner.check_open()?;
        self.block(self.inner.schedule_store(name, def, next))
    }

    #[doc(hidden)]
    pub fn schedule_get(&self, name: &str) -> Result<Option<StoredSchedule>, DurableError> {
        check_schedule_name(name)?;
        self.block(self.inner.schedule_get(name))
    }

    #[doc(hidden)]
    pub fn schedule_list(&self) -> Result<Vec<StoredSchedule>, DurableError> {
        self.block(self.inner.schedule_list())
    }

    #[doc(hidden)]
    pub fn schedule_remove(&self, name: &str) -> Result<bool, DurableError> {
        check_schedule_name(name)?;
        self.block(self.inner.schedule_remove(name))
    }

    #[doc(hidden)]
    pub fn schedule_fire(&self, name: &str, fire: &Fire) -> Result<bool, DurableError> {
        check_schedule_name(name)?;
        check_kind(&fire.kind)?;
        check_priority(fire.priority)?;
        self.inner.check_payloads([fire.payload.as_slice()])?;
        let deadlines = fire.deadlines_us.iter().map(|&d| server_us(d)).collect::<Result<Vec<_>, _>>()?;
        let fire = FireUs {
            expect: i64::try_from(fire.expect_next_us).map_err(|_| DurableError::DeadlineOutOfRange)?,
            next: server_us(fire.next_run_us)?,
            last: i64::try_from(fire.last_run_us).map_err(|_| DurableError::DeadlineOutOfRange)?,
            kind: &fire.kind,
            payload: &fire.payload,
            priority: fire.priority,
            deadlines,
        };
        self.inner.check_open()?;
        self.block(self.inner.schedule_fire(name, &fire))
    }
}

/// A time the schedule store was given (µs since the epoch) as the server
/// µs a job is due at; more than 2^52 µs ahead is out of range.
fn server_us(us: u64) -> Result<i64, DurableError> {
    at_us(from_us(us))
}
