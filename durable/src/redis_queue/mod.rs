//! [`RedisQueue`]: the durable-jobs contract on a Redis server, for many
//! producer and consumer processes on many machines.

#[cfg(feature = "redis-async")]
mod aio;
mod clock;
mod metrics;
mod pool;
mod scripts;
mod watch;

#[cfg(feature = "redis-async")]
pub use self::aio::AsyncRedisQueue;

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::{FromRedisValue, ScriptInvocation, Value};

use crate::contract::JobQueue;
use crate::error::DurableError;
use crate::inspect::{Filter, JobInfo, JobState, KindCounts, Page, Sample, Throughput};
use crate::job::{check_kind, clip_error, Job, JobId, Stats};
use crate::options::{check_priority, SendOptions, Sent, UniqueStates};
use crate::stop::StopSignal;
use crate::stored::{check_schedule_name, from_us, Fire, StoredSchedule};

use self::clock::{Due, ServerClock, PROBES};
use self::metrics::{Metrics, ReserveCounts};
use self::pool::{redis_error, transient, Pool, Target};
use self::scripts::{Name, Scripts};
use self::watch::{Notifier, Source, Watch};

/// The most jobs one `reserve_many` leases (a larger `max` is taken as this):
/// each may-be-leased job carries its token in the script's arguments.
pub(crate) const MAX_RESERVE: usize = 1000;

/// The most entries one inspection script reads or changes (a listing, a
/// bulk requeue or delete goes on in further scripts): each is a few
/// milliseconds of the server's single thread at most, so a listing of
/// 200,000 jobs never stalls the server's other clients.
pub(crate) const MAX_BATCH: usize = 500;

/// The most inspection scripts one `page` call runs (a filter that keeps
/// few jobs returns fewer than asked, with a cursor to go on from).
fn listing_calls() -> usize {
    40
}

/// Durable delayed jobs in a Redis server: the same contract and calls as
/// [`DurableQueue`](crate::DurableQueue), shared by every process that connects
/// to the same server and queue name.
///
/// ```no_run
/// use std::time::Duration;
/// use delayq_durable::RedisQueue;
///
/// let q = RedisQueue::connect("redis://127.0.0.1:6379/", "emails")?;
/// q.send_after(b"welcome mail for user 7", Duration::from_secs(60))?;
/// let job = q.reserve(Duration::from_secs(30))?; // in any process, on any machine
/// assert!(q.ack(&job)?);
/// # Ok::<(), delayq_durable::DurableError>(())
/// ```
///
/// # How it works
///
/// - **One Lua script per state change**, atomic on the server: send (to the
///   `pending` sorted set), lease (due → `leased`, with a fresh token and a lease
///   end; tokens are random 64-bit numbers drawn by the client, so a stale ack
///   matches nothing even after the server lost its data and its id counter
///   started again), ack (deletes only with the matching token), nack, extend, cancel,
///   lease expiry (due again with the next attempt, or dead after the last),
///   requeue. There is no step between "take the due job" and "hand it out" in
///   which a crash loses it (the fault of a pop-then-push poller).
/// - **Priorities** (`send_with`, `0..=9`, 0 first): besides the `pending`
///   sorted set (by due time, what the inspection API lists), each pending
///   job sits in its priority's sorted set and in its (priority, kind)'s, by
///   due time then id (ids zero-padded, so equal due times go in send
///   order). A set's head is its best job, so the reserve script leases the
///   best of at most ten heads (`O(log n)` a job, exact however many jobs
///   are due), with [aging](RedisBuilder::priority_aging) applied to the
///   heads. A queue written before these sets (its jobs read as priority 0)
///   is reindexed once, O(n), by the first reserve that finds the sets'
///   counts differ from `pending`'s.
/// - **`reserve_excluding`** runs the same script over the (priority, kind)
///   sets of the kinds it may take: exact (1,000 excluded jobs ahead of one
///   it may take cost nothing), `O(pairs)` a call for the distinct
///   (priority, kind) pairs pending; with none of those due it sleeps until
///   the next one is due, a lease ends, or a wake-up announces an earlier
///   job (an excluded job's announcement wakes it for one script, no more).
/// - **Rate limits** ([`set_rate_limit`](RedisQueue::set_rate_limit)): a
///   per-kind token bucket stored in the queue, so it holds across every
///   worker and process (as BullMQ's limiter does, but per kind). The
///   reserve script refills it from `TIME` and takes a token with the lease,
///   atomically; a kind out of tokens is skipped as `reserve_excluding`
///   skips a kind, by reading the (priority, kind) sets (`O(pairs)` a call
///   while any limit is set), and a consumer with nothing else due sleeps
///   until the next token, woken by no poll.
/// - **Uniqueness**: one hash maps each key to the job holding it, its
///   covered states and the end of its period; the send script checks and
///   sets it atomically, so racing sends store one job. The entry goes when
///   its job is acked, cancelled or dead (unless its period runs on); each
///   unique send sweeps up to 20 entries whose period ended.
/// - **Schedules**: a hash per schedule (definition, next and last tick,
///   the id of its pending tick job) and a set of names; store, remove and
///   fire are one script each, fire a compare-and-set on the next tick that
///   stores the tick's jobs and replaces the tick job.
/// - **The server's clock.** Every script reads `TIME`, and a job is due when
///   the server's clock says so. `send_after(d)` goes as a delay, so a client
///   whose clock is hours off still schedules "in 5 s" as 5 s. An instant
///   (`send_at`, `nack`'s `retry_at`, `requeue_dead`) goes mapped to the
///   server's clock by one offset estimate, and the times in a [`Job`] come
///   back through the same offset, so `deadline()` is the instant the job was
///   sent with, to the microsecond. The estimate is the upper bound that the
///   fastest of five `TIME` round trips gives (never below the true offset: a
///   job is not due before its instant by this client's clock either, when
///   the clocks agree), taken at connect and again every 10 s while the
///   handle converts times; it moves only when a fresh round trip rules it
///   out (the clocks stepped or drifted apart, a failover changed the master).
/// - **No polling.** A waiting `reserve` sleeps until the earliest due time the
///   server reported, or until a message on the queue's pub/sub channel
///   announces an earlier one (the queue's watcher thread holds the
///   subscription). If the subscription drops, the watcher resubscribes and
///   wakes every waiter to re-check; a silently dead connection is found by a
///   `PING` after [`liveness`](RedisBuilder::liveness) without traffic (default
///   5 s), which must answer within `min(liveness, 1 s)`. A lost message can
///   delay a job by at most liveness + `min(liveness, 1 s)` + the reconnect
///   (at most `connect_timeout`, default 2 s): 8 s with the defaults. It
///   cannot lose one.
/// - **Reconnects.** A call that meets a dropped connection, a refused one or a
///   server still loading its data drops the handle's idle connections (they
///   are likely dead too, after a server restart) and retries on a fresh
///   connection with backoff (5 ms doubling to 500 ms) for up to
///   [`retry_for`](RedisBuilder::retry_for) (default 10 s), then returns
///   [`DurableError::Redis`]. Changes carry a nonce whose result the server
///   keeps for [`nonce_ttl`](RedisBuilder::nonce_ttl) (the retry window plus a
///   margin: 30 s by default), so a retried send is stored once. A retried
///   `reserve` whose first reply was lost leaves that job leased to no one
///   until its lease ends; it then comes back as its next attempt.
/// - **Durability** is the server's: run it with `appendonly yes` and
///   `appendfsync always` for "stored before `send` returns" (the tests do).
/// - **No eviction.** Run the server with `maxmemory-policy noeviction` (the
///   default): an evicting policy may drop a job's hash and lose the job. A
///   set entry whose hash is gone is dropped by the next script that meets it,
///   so consumers keep working; the job itself is lost.
#[derive(Clone)]
pub struct RedisQueue {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    prefix: String,
    pool: Pool,
    scripts: Scripts,
    /// The figures of the `metrics` feature, shared with the pool (which
    /// counts reconnects) and with any `AsyncRedisQueue` made from this.
    metrics: Arc<Metrics>,
    notifier: Arc<Notifier>,
    watcher: Mutex<Option<JoinHandle<()>>>,
    stop: Arc<AtomicBool>,
    control: String,
    closed: AtomicBool,
    max_attempts: u32,
    max_payload: usize,
    /// The offset estimate between this client's clock and the server's.
    clock: ServerClock,
    nonces: AtomicU64,
    nonce_base: u64,
    /// Lease tokens: SipHash of a counter under keys the standard library
    /// draws from the operating system's randomness.
    tokens: AtomicU64,
    token_keys: RandomState,
    /// Seconds the server keeps a change's result under its nonce.
    nonce_ttl: u64,
    /// The priority aging step in µs (0: no aging).
    aging_us: i64,
}

/// Options for [`RedisQueue`]: `RedisQueue::builder().max_attempts(5).connect(url, name)`.
#[derive(Clone, Debug)]
pub struct RedisBuilder {
    max_attempts: u32,
    max_payload: usize,
    retry_for: Duration,
    connect_timeout: Duration,
    io_timeout: Duration,
    liveness: Duration,
    skew_ns: i64,
    aging: Option<Duration>,
}

impl Default for RedisBuilder {
    fn default() -> Self {
        RedisBuilder::new()
    }
}

impl RedisBuilder {
    /// The defaults: 25 attempts, payloads up to 1 MiB, retries for 10 s,
    /// connect timeout 2 s, reads and writes time out after 10 s, liveness 5 s.
    pub fn new() -> RedisBuilder {
        RedisBuilder {
            max_attempts: 25,
            max_payload: 1 << 20,
            retry_for: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(2),
            io_timeout: Duration::from_secs(10),
            liveness: Duration::from_secs(5),
            skew_ns: 0,
            aging: None,
        }
    }

    /// Deliveries before a failing job is dead (at least 1). Applies to jobs
    /// this handle sends and requeues.
    pub fn max_attempts(mut self, n: u32) -> RedisBuilder {
        self.max_attempts = n;
        self
    }

    /// The largest payload `send_*` accepts, in bytes (at most 512 MiB, Redis's limit).
    pub fn max_payload(mut self, bytes: usize) -> RedisBuilder {
        self.max_payload = bytes;
        self
    }

    /// How long a call keeps retrying a lost connection before it fails.
    ///
    /// It also sets how long the server keeps each change's result under its
    /// nonce (see [`nonce_ttl`](Self::nonce_ttl)).
    pub fn retry_for(mut self, d: Duration) -> RedisBuilder {
        self.retry_for = d;
        self
    }

    /// Timeout for opening a connection.
    pub fn connect_timeout(mut self, d: Duration) -> RedisBuilder {
        self.connect_timeout = d;
        self
    }

    /// Timeout for one command's write and reply.
    pub fn io_timeout(mut self, d: Duration) -> RedisBuilder {
        self.io_timeout = d;
        self
    }

    /// How long the notification connection may stay silent before the
    /// watcher checks it with a `PING`, which must answer within
    /// `min(liveness, 1 s)`. A lost notification delays a job by at most
    /// liveness + `min(liveness, 1 s)` + the reconnect (`connect_timeout`).
    pub fn liveness(mut self, d: Duration) -> RedisBuilder {
        self.liveness = d;
        self
    }

    /// Priority aging (off by default): a due job's effective priority is
    /// its priority less one for every `step` it has been due (not below
    /// 0), so a job of priority `p` waits at most `p * step` behind a stream
    /// of more urgent ones. Reserves order due jobs by effective priority,
    /// then deadline, then id. A step under 1 ms is
    /// [`InvalidArgument`](DurableError::InvalidArgument) at connect. It
    /// applies to this handle's reserves (set it alike on every consumer).
    pub fn priority_aging(mut self, step: Duration) -> RedisBuilder {
        self.aging = Some(step);
        self
    }

    /// For tests: pretend this client's clock is off by `offset` (ahead if
    /// `ahead`, else behind), to show that deadlines follow the server's clock.
    #[doc(hidden)]
    pub fn client_clock_offset(mut self, offset: Duration, ahead: bool) -> RedisBuilder {
        let ns = i64::try_from(offset.as_nanos()).unwrap_or(i64::MAX);
        self.skew_ns = if ahead { ns } else { -ns };
        self
    }

    /// How long the server keeps a change's result under its nonce (`r:<nonce>`,
    /// so that a call retried after its reply was lost is not applied twice):
    /// the longest a retry can come after the first try — `retry_for`, then a
    /// last connect and write (`connect_timeout + io_timeout`) — plus 8 s, in
    /// whole seconds. 30 s with the defaults. The cache holds one small key
    /// per change made in that window, and no more.
    ///
    /// ```
    /// use std::time::Duration;
    /// use delayq_durable::RedisQueue;
    ///
    /// assert_eq!(RedisQueue::builder().nonce_ttl(), Duration::from_secs(30));
    /// let b = RedisQueue::builder().retry_for(Duration::from_secs(60));
    /// assert_eq!(b.nonce_ttl(), Duration::from_secs(80));
    /// ```
    pub fn nonce_ttl(&self) -> Duration {
        let d = self.retry_for.saturating_add(self.connect_timeout).saturating_add(self.io_timeout);
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0) + 8;
        // Redis takes `EX` up to about 2^63 ms; a year is more than any retry needs.
        Duration::from_secs(secs.min(365 * 86_400))
    }

    /// Connects to the server at `url` (`redis://host:port/db`, see the
    /// `redis` crate) and opens the queue `name` there (created by its first
    /// send; any number of handles in any number of processes may open it).
    ///
    /// # Errors
    ///
    /// [`DurableError::Redis`] if the server cannot be reached or the URL is
    /// malformed; [`DurableError::InvalidArgument`] for an empty name or zero
    /// `max_attempts`.
    pub fn connect(self, url: &str, name: &str) -> Result<RedisQueue, DurableError> {
        let client = redis::Client::open(url).map_err(|e| redis_error(e, &format!("opening {url}")))?;
        self.open_on(Target::One(client.clone()), Source::One(client), url, name)
    }

    /// Opens the queue `name` on a Redis Cluster, given the addresses of
    /// some of its nodes (`redis://host:port`; one reachable node is
    /// enough). Every key of the queue is under one hash tag,
    /// `delayq:{name}:`, so each script runs on the one master that owns
    /// that slot; different queues spread over the masters by their names.
    /// Wake-ups subscribe on that master (found with `CLUSTER SLOTS`, again
    /// after every reconnection). The guarantees are those of one server
    /// with the master's persistence settings, except across a failover:
    /// replication is asynchronous, so a change acknowledged by a master
    /// that fails before its replica received it is lost with the master
    /// (a sent job vanishes, an acked job comes back, a lease is forgotten).
    /// A master restarted from its own AOF (`appendfsync always`) loses
    /// nothing.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect); [`DurableError::InvalidArgument`] for
    /// no address, or a name starting with `}` (the hash tag would be empty).
    pub fn connect_cluster(self, urls: &[&str], name: &str) -> Result<RedisQueue, DurableError> {
        if urls.is_empty() {
            return Err(DurableError::InvalidArgument("a cluster needs at least one node address"));
        }
        // `delayq:{}…`: an empty hash tag, so each key would hash whole, to
        // slots of its own, and every script would fail as cross-slot.
        if name.starts_with('}') {
            return Err(DurableError::InvalidArgument(
                "a queue name on a cluster must not start with '}' (its keys would not share a slot)",
            ));
        }
        let mut nodes = Vec::with_capacity(urls.len());
        for url in urls {
            nodes.push(redis::Client::open(*url).map_err(|e| redis_error(e, &format!("opening {url}")))?);
        }
        let client = redis::cluster::ClusterClientBuilder::new(urls.iter().copied())
            .connection_timeout(self.connect_timeout)
            .response_timeout(self.io_timeout)
            .build()
            .map_err(|e| redis_error(e, "opening the cluster"))?;
        let key = format!("delayq:{{{name}}}:");
        let what = format!("the cluster at {}", urls.join(", "));
        self.open_on(Target::Cluster(Box::new(client)), Source::Cluster { nodes, key }, &what, name)
    }

    fn open_on(
        self,
        target: Target,
        source: Source,
        url: &str,
        name: &str,
    ) -> Result<RedisQueue, DurableError> {
        if name.is_empty() {
            return Err(DurableError::InvalidArgument("a queue name must not be empty"));
        }
        if self.max_attempts == 0 {
            return Err(DurableError::InvalidArgument("max_attempts must be at least 1"));
        }
        if self.max_payload > 512 << 20 {
            return Err(DurableError::InvalidArgument("max_payload must be at most 512 MiB"));
        }
        if self.liveness.is_zero() || self.io_timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(DurableError::InvalidArgument("timeouts must be longer than zero"));
        }
        let aging_us = match self.aging {
            None => 0,
            Some(step) if step < Duration::from_millis(1) => {
                return Err(DurableError::InvalidArgument("a priority aging step must be at least 1 ms"))
            }
            Some(step) => i64::try_from(step.as_micros()).unwrap_or(i64::MAX),
        };
        let metrics = Arc::new(Metrics::new(name));
        let pool =
            Pool::new(target, self.connect_timeout, Some(self.io_timeout), self.retry_for, metrics.clone());
        // Reach the server now, so a wrong address is reported here.
        pool.run(&format!("connecting to {url}"), |con| redis::cmd("PING").query::<String>(con))?;
        let prefix = format!("delayq:{{{name}}}:");
        let nonce_base = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
            ^ (u64::from(std::process::id()) << 32);
        let control = format!("{prefix}control:{nonce_base:x}");
        let nonce_ttl = self.nonce_ttl().as_secs();
        let notifier = Arc::new(Notifier::default());
        let stop = Arc::new(AtomicBool::new(false));
        let watcher = Watch {
            source,
            channel: format!("{prefix}wake"),
            control: control.clone(),
            notifier: notifier.clone(),
            stop: stop.clone(),
            liveness: self.liveness,
            connect_timeout: self.connect_timeout,
        }
        .start()
        .map_err(|e| redis_error(e, &format!("subscribing to {url}")))?;
        let queue = RedisQueue {
            inner: Arc::new(Inner {
                name: name.to_string(),
                prefix,
                pool,
                scripts: Scripts::new(),
                metrics,
                notifier,
                watcher: Mutex::new(Some(watcher)),
                stop,
                control,
                closed: AtomicBool::new(false),
                max_attempts: self.max_attempts,
                max_payload: self.max_payload,
                clock: ServerClock::new(self.skew_ns),
                nonces: AtomicU64::new(0),
                nonce_base,
                tokens: AtomicU64::new(0),
                token_keys: RandomState::new(),
                nonce_ttl,
                aging_us,
            }),
        };
        // The first offset estimate, before any call converts a time.
        queue.clock();
        Ok(queue)
    }
}

impl fmt::Debug for RedisQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisQueue").field("name", &self.inner.name).finish()
    }
}

/// The reserve script's reply, as [`parse_reserve`] reads it.
struct Reserved {
    /// The server's now when the script ran (µs).
    server_now_us: i64,
    jobs: Vec<Job>,
    /// With no job: the next due time (µs, server clock), if any.
    next: Option<i64>,
    /// The trailing counts, for the metrics (zeros and `None` if absent).
    counts: ReserveCounts,
}

/// The reserve script's reply, its times mapped to this client's clock by
/// `clock`. The four counts after the jobs (or the next due time) are
/// optional: a reply without them reads as no expiry and no job counts.
fn parse_reserve(reply: Value, clock: &ServerClock) -> Result<Reserved, DurableError> {
    let mut items = array(reply)?.into_iter();
    let mut next = || items.next().ok_or_else(|| DurableError::Redis("short reply to reserve".into()));
    let server_now_us = int(&next()?)?;
    let n = int(&next()?)?;
    let mut jobs = Vec::with_capacity(n.max(0) as usize);
    let mut due = None;
    if n == 0 {
        let at = int(&next()?)?;
        due = (at >= 0).then_some(at);
    }
    for _ in 0..n {
        let id = int(&next()?)? as u64;
        let attempt = int(&next()?)?;
        let token = token(&next()?)?;
        let lease_until = int(&next()?)?;
        let deadline = int(&next()?)?;
        let payload = bytes(next()?);
        let kind = text(next()?);
        let error = text(next()?);
        let priority = priority(&next()?)?;
        jobs.push(Job {
            id: JobId(id),
            payload,
            deadline: clock.client_ns(deadline),
            attempt: u32::try_from(attempt).unwrap_or(u32::MAX),
            token,
            lease_until: clock.client_ns(lease_until),
            kind,
            last_error: (!error.is_empty()).then_some(error),
            priority,
        });
    }
    let tail: Vec<u64> = items.map(|v| int(&v).map(|n| n.max(0) as u64)).collect::<Result<_, _>>()?;
    let counts = match tail[..] {
        [expired, pending, leased, dead, ..] => {
            ReserveCounts { expired, jobs: Some((pending, leased, dead)) }
        }
        [expired, ..] => ReserveCounts { expired, jobs: None },
        [] => ReserveCounts::default(),
    };
    Ok(Reserved { server_now_us, jobs, next: due, counts })
}

/// The dead-set listing's reply, its times mapped by `clock`.
fn parse_dead(reply: Value, clock: &ServerClock) -> Result<Vec<Job>, DurableError> {
    let mut items = array(reply)?.into_iter();
    items.next(); // the server's now: not needed
    let mut out = Vec::new();
    while let (Some(id), Some(attempt), Some(deadline), Some(payload), Some(kind), Some(error), Some(prio)) =
        (items.next(), items.next(), items.next(), items.next(), items.next(), items.next(), items.next())
    {
        let error = text(error);
        out.push(Job {
            kind: text(kind),
            last_error: (!error.is_empty()).then_some(error),
            priority: priority(&prio)?,
            id: JobId(int(&id)? as u64),
            payload: bytes(payload),
            deadline: clock.client_ns(int(&deadline)?),
            attempt: u32::try_from(int(&attempt)?).unwrap_or(u32::MAX),
            token: 0,
            lease_until: 0,
        });
    }
    Ok(out)
}

/// The stats script's reply.
fn parse_stats(v: &[i64]) -> Stats {
    let n = |i: usize| v.get(i).copied().unwrap_or(0).max(0) as u64;
    Stats { pending: n(1), leased: n(2), dead: n(3) }
}

fn int(v: &Value) -> Result<i64, DurableError> {
    match v {
        Value::Int(n) => Ok(*n),
        Value::BulkString(b) => {
            std::str::from_utf8(b).ok().and_then(|s| s.parse::<f64>().ok()).map(|f| f as i64).ok_or_else(
                || DurableError::Redis(format!("expected a number, got {:?}", String::from_utf8_lossy(b))),
            )
        }
        Value::SimpleString(s) => {
            s.parse::<i64>().map_err(|_| DurableError::Redis(format!("expected a number, got {s:?}")))
        }
        other => Err(DurableError::Redis(format!("expected a number, got {other:?}"))),
    }
}

/// A lease token: a decimal string (never through `f64`, which would round it).
fn token(v: &Value) -> Result<u64, DurableError> {
    let text = match v {
        Value::Int(n) => return u64::try_from(*n).map_err(|_| DurableError::Redis(format!("bad token {n}"))),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => return Err(DurableError::Redis(format!("expected a token, got {other:?}"))),
    };
    text.parse().map_err(|_| DurableError::Redis(format!("expected a token, got {text:?}")))
}

/// A priority field (`0..=9`; a job stored before priorities reads as 0).
fn priority(v: &Value) -> Result<u8, DurableError> {
    let n = int(v)?;
    u8::try_from(n)
        .ok()
        .filter(|p| *p <= crate::options::PRIORITY_LOWEST)
        .ok_or_else(|| DurableError::Redis(format!("a job's priority is {n}, not in 0..=9")))
}

fn bytes(v: Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b,
        Value::SimpleString(s) => s.into_bytes(),
        _ => Vec::new(),
    }
}

/// A string field (lossy UTF-8; kinds and errors are stored from `&str`).
fn text(v: Value) -> String {
    String::from_utf8_lossy(&bytes(v)).into_owned()
}

fn array(v: Value) -> Result<Vec<Value>, DurableError> {
    match v {
        Value::Array(items) => Ok(items),
        other => Err(DurableError::Redis(format!("expected an array, got {other:?}"))),
    }
}

impl RedisQueue {
    /// Connects with the defaults; see [`RedisBuilder::connect`].
    pub fn connect(url: &str, name: &str) -> Result<RedisQueue, DurableError> {
        RedisBuilder::new().connect(url, name)
    }

    /// Opens the queue on a Redis Cluster with the defaults; see
    /// [`RedisBuilder::connect_cluster`].
    pub fn connect_cluster(urls: &[&str], name: &str) -> Result<RedisQueue, DurableError> {
        RedisBuilder::new().connect_cluster(urls, name)
    }

    /// Options.
    pub fn builder() -> RedisBuilder {
        RedisBuilder::new()
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// For tests: this client's clock steps by `by` (ahead if `ahead`) after
    /// the offset to the server's was measured, as an NTP step would; the
    /// estimate stays off by `by` until the next measurement.
    #[doc(hidden)]
    pub fn step_client_clock(&self, by: Duration, ahead: bool) {
        let ns = i64::try_from(by.as_nanos()).unwrap_or(i64::MAX);
        self.inner.clock.step(if ahead { ns } else { -ns });
    }

    /// The offset estimate, measured again first if it is due
    /// ([`REFRESH`](clock::REFRESH) old, and no other caller is measuring):
    /// [`PROBES`] round trips, each tried once (an error ends the
    /// measurement, and the estimate stays).
    fn clock(&self) -> &ServerClock {
        let clock = &self.inner.clock;
        if let Some(refresh) = clock.claim_refresh() {
            let mut probes = Vec::with_capacity(PROBES);
            for _ in 0..PROBES {
                let inv = clock.probe(&self.inner.prefix);
                match self.inner.pool.once(|con| clock.probe_with(|| inv.invoke(con))) {
                    Ok(p) => probes.push(p),
                    Err(_) => break,
                }
            }
            refresh.apply(&probes);
        }
        clock
    }

    /// `at` on the server's clock, for a script.
    fn due_at(&self, at: SystemTime) -> Result<Due, DurableError> {
        self.clock().at(at)
    }

    fn delay_us(delay: Duration) -> Result<i64, DurableError> {
        let us = delay.as_nanos().div_ceil(1000);
        if us > 1 << 52 {
            return Err(DurableError::DeadlineOutOfRange);
        }
        Ok(us as i64)
    }

    fn lease_us(lease: Duration) -> Result<i64, DurableError> {
        if lease.is_zero() {
            return Err(DurableError::InvalidArgument("a lease must be longer than zero"));
        }
        Self::delay_us(lease).map_err(|_| DurableError::InvalidArgument("a lease must be under 142 years"))
    }

    /// A fresh lease token: random, 64 bits, never 0 (0 means "no lease").
    fn token(&self) -> u64 {
        let n = self.inner.tokens.fetch_add(1, Ordering::Relaxed);
        let mut h = self.inner.token_keys.build_hasher();
        h.write_u64(n);
        h.finish().max(1)
    }

    fn nonce(&self) -> String {
        let n = self.inner.nonces.fetch_add(1, Ordering::Relaxed);
        format!("{:x}.{n:x}", self.inner.nonce_base)
    }

    fn open(&self) -> Result<(), DurableError> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(DurableError::Closed);
        }
        Ok(())
    }

    /// Stores a job due at `at` (mapped to the server's clock by the offset
    /// estimate: see [How it works](RedisQueue#how-it-works)); returns once
    /// the server has it.
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
        let due = self.due_at(at)?;
        Ok(self.send_due(&[(kind, payload, due)])?[0])
    }

    /// As [`send_after`](Self::send_after), with a kind.
    pub fn send_kind_after(
        &self,
        kind: &str,
        payload: &[u8],
        delay: Duration,
    ) -> Result<JobId, DurableError> {
        check_kind(kind)?;
        let due = Due::In(Self::delay_us(delay)?);
        Ok(self.send_due(&[(kind, payload, due)])?[0])
    }

    /// Stores several jobs in one script, all or none.
    pub fn send_many(&self, jobs: &[(&[u8], SystemTime)]) -> Result<Vec<JobId>, DurableError> {
        let mut due = Vec::with_capacity(jobs.len());
        for (payload, at) in jobs {
            due.push(("", *payload, self.due_at(*at)?));
        }
        if due.is_empty() {
            return Ok(Vec::new());
        }
        self.send_due(&due)
    }

    fn send_due(&self, jobs: &[(&str, &[u8], Due)]) -> Result<Vec<JobId>, DurableError> {
        self.open()?;
        for (_, payload, _) in jobs {
            if payload.len() > self.inner.max_payload {
                return Err(DurableError::PayloadTooLarge {
                    len: payload.len(),
                    max: self.inner.max_payload,
                });
            }
        }
        let mut inv = self.invocation(Name::Send);
        inv.arg(self.nonce()).arg(self.inner.nonce_ttl).arg(self.inner.max_attempts).arg(jobs.len());
        for (kind, payload, due) in jobs {
            inv.arg(due.arg()).arg(*kind).arg(*payload);
        }
        let ids: Vec<i64> = self.run("sending", Name::Send, &inv)?;
        self.inner.metrics.sent(ids.len());
        Ok(ids.into_iter().map(|id| JobId(id as u64)).collect())
    }

    /// The script `name` on this queue's keys, its arguments to add.
    fn invocation(&self, name: Name) -> ScriptInvocation<'_> {
        self.inner.scripts.get(name).key(&self.inner.prefix)
    }

    /// Runs a script through the pool (retrying transient failures) and
    /// records its round trip: once per attempt the server answered.
    fn run<T: FromRedisValue>(
        &self,
        doing: &str,
        name: Name,
        inv: &ScriptInvocation<'_>,
    ) -> Result<T, DurableError> {
        let metrics = &self.inner.metrics;
        self.inner.pool.run(doing, |con| {
            let start = Instant::now();
            let r = inv.invoke(con);
            if !r.as_ref().is_err_and(transient) {
                metrics.script(name, start.elapsed());
            }
            r
        })
    }

    /// The reserve script's invocation, leasing up to `max` jobs (at most
    /// [`MAX_RESERVE`]) for `lease_us`, none of a kind in `exclude`.
    fn reserve_invocation(&self, lease_us: i64, max: usize, exclude: &[String]) -> ScriptInvocation<'_> {
        let max = max.min(MAX_RESERVE);
        let tokens: Vec<u64> = (0..max).map(|_| self.token()).collect();
        let mut inv = self.invocation(Name::Reserve);
        inv.arg(lease_us).arg(max).arg(self.inner.aging_us);
        inv.arg(if exclude.is_empty() { "" } else { "x" }).arg(exclude.len());
        for kind in exclude {
            inv.arg(kind);
        }
        inv.arg(&tokens);
        inv
    }

    /// Reads the reserve script's reply and records what it reports.
    fn reserved(&self, reply: Value) -> Result<Reserved, DurableError> {
        let r = parse_reserve(reply, &self.inner.clock)?;
        self.inner.metrics.reserved(&r.jobs, &r.counts);
        Ok(r)
    }

    /// Runs the reserve script.
    fn reserve_once(&self, lease_us: i64, max: usize, exclude: &[String]) -> Result<Reserved, DurableError> {
        // Measured again first if due: the reply's times map through it.
        self.clock();
        let inv = self.reserve_invocation(lease_us, max, exclude);
        let reply: Value = self.run("reserving", Name::Reserve, &inv)?;
        self.reserved(reply)
    }

    /// Blocks until a job is due by the server's clock, leases it, returns it.
    pub fn reserve(&self, lease: Duration) -> Result<Job, DurableError> {
        loop {
            if let Some(job) = self.reserve_until(lease, None)?.pop() {
                return Ok(job);
            }
        }
    }

    /// As [`reserve`](Self::reserve); `Ok(None)` after `timeout`.
    pub fn reserve_timeout(&self, lease: Duration, timeout: Duration) -> Result<Option<Job>, DurableError> {
        let deadline = Instant::now().checked_add(timeout);
        Ok(self.reserve_until(lease, Some(deadline))?.pop())
    }

    /// As [`reserve`](Self::reserve), but returns `Ok(None)` once `stop` is
    /// [raised](StopSignal::raise) (at once if it is already): the thread
    /// sleeps on the handle's notifier, which the signal also wakes, with no
    /// timeout and no periodic wake-up. A job the script leased before the
    /// signal is returned.
    pub fn reserve_or_stop(&self, lease: Duration, stop: &StopSignal) -> Result<Option<Job>, DurableError> {
        Self::lease_us(lease)?; // a bad lease is an error, raised signal or not
        let waker = std::task::Waker::from(self.inner.notifier.clone());
        let Some(_registered) = stop.register(&waker) else {
            return Ok(None);
        };
        Ok(self.reserve_many_until(lease, 1, None, Some(stop), &[])?.pop())
    }

    /// Waits up to `timeout` for due jobs and leases up to `max` of them in one
    /// script; at most 1000 a call (a larger `max`, `usize::MAX` included, is
    /// taken as 1000).
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
        self.reserve_many_until(lease, max, Some(deadline), None, &[])
    }

    fn reserve_until(
        &self,
        lease: Duration,
        deadline: Option<Option<Instant>>,
    ) -> Result<Vec<Job>, DurableError> {
        self.reserve_many_until(lease, 1, deadline, None, &[])
    }

    /// `deadline`: `None` or `Some(None)` waits without limit. `stop`: also
    /// returns nothing once it is raised (its caller registered the notifier
    /// with it, so raising it wakes the wait). `exclude`: kinds not to lease
    /// (the wait plans for the next due job of another kind).
    fn reserve_many_until(
        &self,
        lease: Duration,
        max: usize,
        deadline: Option<Option<Instant>>,
        stop: Option<&StopSignal>,
        exclude: &[String],
    ) -> Result<Vec<Job>, DurableError> {
        let lease_us = Self::lease_us(lease)?;
        let deadline = deadline.flatten();
        loop {
            self.open()?;
            // Read the generation before the script: a job made pending after
            // the script ran announces itself with a newer one.
            let seen = self.inner.notifier.generation();
            let Reserved { server_now_us, jobs, next, .. } = self.reserve_once(lease_us, max, exclude)?;
            if !jobs.is_empty() {
                return Ok(jobs);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) || stop.is_some_and(StopSignal::is_raised) {
                return Ok(Vec::new());
            }
            let plan = next.map(|due| {
                let wait = Duration::from_micros(due.saturating_sub(server_now_us).max(0) as u64);
                Instant::now().checked_add(wait)
            });
            let until = match (plan.flatten(), deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            self.inner.notifier.wait(seen, next, until, stop);
        }
    }

    /// The invocation of a change's script `name` answered by a flag: its
    /// nonce, the nonce TTL, then `args`.
    fn flag_invocation(&self, name: Name, args: &[String]) -> ScriptInvocation<'_> {
        let mut inv = self.invocation(name);
        inv.arg(self.nonce()).arg(self.inner.nonce_ttl);
        for a in args {
            inv.arg(a);
        }
        inv
    }

    /// Records what a change's flag says it did.
    fn flagged(&self, name: Name, done: bool) -> bool {
        match (name, done) {
            (Name::Ack, true) => self.inner.metrics.acked(1),
            (Name::Nack, true) => self.inner.metrics.nacked(),
            _ => {}
        }
        done
    }

    fn flag(&self, doing: &str, name: Name, args: &[String]) -> Result<bool, DurableError> {
        let r: i64 = self.run(doing, name, &self.flag_invocation(name, args))?;
        Ok(self.flagged(name, r == 1))
    }

    /// Deletes a job the caller holds the lease of; `Ok(false)` if the lease is
    /// not the caller's any more (the job was leased to someone else, moved to
    /// the dead set, or cancelled).
    pub fn ack(&self, job: &Job) -> Result<bool, DurableError> {
        if job.token == 0 {
            return Ok(false);
        }
        self.flag("acking", Name::Ack, &[job.id.0.to_string(), job.token.to_string()])
    }

    /// Acks several jobs in one script; `Ok(flags)` in order, as for [`ack`](Self::ack).
    pub fn ack_many(&self, jobs: &[Job]) -> Result<Vec<bool>, DurableError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let flags: Vec<i64> = self.run("acking", Name::AckMany, &self.ack_many_invocation(jobs))?;
        Ok(self.acked_many(&flags))
    }

    fn ack_many_invocation(&self, jobs: &[Job]) -> ScriptInvocation<'_> {
        let mut inv = self.invocation(Name::AckMany);
        inv.arg(self.nonce()).arg(self.inner.nonce_ttl).arg(jobs.len());
        for job in jobs {
            inv.arg(job.id.0).arg(job.token);
        }
        inv
    }

    /// The ack-many script's flags, recorded.
    fn acked_many(&self, flags: &[i64]) -> Vec<bool> {
        let flags: Vec<bool> = flags.iter().map(|&f| f == 1).collect();
        self.inner.metrics.acked(flags.iter().filter(|&&f| f).count());
        flags
    }

    /// Retries the job at `retry_at` (mapped to the server's clock as
    /// [`send_at`](Self::send_at)'s instant), or moves it to the dead set
    /// after its last attempt.
    pub fn nack(&self, job: &Job, retry_at: SystemTime) -> Result<bool, DurableError> {
        let due = self.due_at(retry_at)?;
        if job.token == 0 {
            return Ok(false);
        }
        let args = [job.id.0.to_string(), job.token.to_string(), due.arg(), String::new()];
        self.flag("nacking", Name::Nack, &args)
    }

    /// As [`nack`](Self::nack), and stores `error` as the job's
    /// [`last_error`](Job::last_error) (cut to 4 KiB at a character boundary).
    pub fn nack_with_error(
        &self,
        job: &Job,
        retry_at: SystemTime,
        error: &str,
    ) -> Result<bool, DurableError> {
        let due = self.due_at(retry_at)?;
        if job.token == 0 {
            return Ok(false);
        }
        let args = [job.id.0.to_string(), job.token.to_string(), due.arg(), clip_error(error)];
        self.flag("nacking", Name::Nack, &args)
    }

    /// Moves a job the caller holds the lease of to the dead set now, with
    /// `error` as its last error. `Ok(false)` if the lease is not the caller's.
    pub fn kill(&self, job: &Job, error: &str) -> Result<bool, DurableError> {
        if job.token == 0 {
            return Ok(false);
        }
        let args = [job.id.0.to_string(), job.token.to_string(), clip_error(error)];
        self.flag("killing", Name::Kill, &args)
    }

    /// Extends the caller's lease to `lease` from the server's now.
    pub fn extend(&self, job: &Job, lease: Duration) -> Result<bool, DurableError> {
        let lease = Self::lease_us(lease)?;
        if job.token == 0 {
            return Ok(false);
        }
        let args = [job.id.0.to_string(), job.token.to_string(), lease.to_string()];
        self.flag("extending", Name::Extend, &args)
    }

    /// Deletes a job in any state; `Ok(false)` if there is none.
    pub fn cancel(&self, id: JobId) -> Result<bool, DurableError> {
        self.flag("cancelling", Name::Cancel, &[id.0.to_string()])
    }

    /// Moves a dead job back to pending, due at `at`, with `max_attempts` more deliveries.
    pub fn requeue_dead(&self, id: JobId, at: SystemTime) -> Result<bool, DurableError> {
        let due = self.due_at(at)?;
        self.flag(
            "requeueing",
            Name::Requeue,
            &[id.0.to_string(), due.arg(), self.inner.max_attempts.to_string()],
        )
    }

    /// Jobs by state.
    pub fn stats(&self) -> Result<Stats, DurableError> {
        let v: Vec<i64> = self.run("counting", Name::Stats, &self.invocation(Name::Stats))?;
        Ok(self.counted(&v))
    }

    /// The stats script's reply, recorded.
    fn counted(&self, v: &[i64]) -> Stats {
        let s = parse_stats(v);
        self.inner.metrics.stats(&s);
        s
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
        if limit == 0 {
            return Ok(Vec::new());
        }
        let clock = self.clock();
        // ZRANGE's last index; Redis takes at most `i64::MAX`.
        let last = limit.min(i64::MAX as usize) - 1;
        let mut inv = self.invocation(Name::Dead);
        inv.arg(last);
        let reply: Value = self.run("listing dead jobs", Name::Dead, &inv)?;
        parse_dead(reply, clock)
    }

    /// The inspection API's guarded delete (`inspect.rs`): each job only if
    /// its state letter is in `letters`; one script per [`MAX_BATCH`] ids.
    pub(crate) fn cancel_many_in(&self, ids: &[JobId], letters: &str) -> Result<Vec<bool>, DurableError> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(MAX_BATCH) {
            let mut inv = self.invocation(Name::CancelIn);
            inv.arg(self.nonce()).arg(self.inner.nonce_ttl).arg(letters).arg(chunk.len());
            for id in chunk {
                inv.arg(id.0);
            }
            let flags: Vec<i64> = self.run("cancelling", Name::CancelIn, &inv)?;
            out.extend(flags.into_iter().map(|f| f == 1));
        }
        Ok(out)
    }

    /// The inspection API's bulk requeue (`inspect.rs`): each dead job back to
    /// pending, due at `at`; one script per [`MAX_BATCH`] ids.
    pub(crate) fn requeue_dead_many(&self, ids: &[JobId], at: SystemTime) -> Result<Vec<bool>, DurableError> {
        let due = self.due_at(at)?;
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(MAX_BATCH) {
            let mut inv = self.invocation(Name::RequeueMany);
            inv.arg(self.nonce()).arg(self.inner.nonce_ttl).arg(due.arg()).arg(self.inner.max_attempts);
            inv.arg(chunk.len());
            for id in chunk {
                inv.arg(id.0);
            }
            let flags: Vec<i64> = self.run("requeueing", Name::RequeueMany, &inv)?;
            out.extend(flags.into_iter().map(|f| f == 1));
        }
        Ok(out)
    }

    /// The inspection API's listing (`inspect.rs`): from index `cursor` of
    /// the state's set, scripts of at most [`MAX_BATCH`] entries each until
    /// `limit` jobs matched or the set ended. The lease token is never read.
    pub(crate) fn inspect_page(
        &self,
        state: JobState,
        filter: &Filter,
        cursor: u64,
        limit: usize,
    ) -> Result<Page, DurableError> {
        let mut page = Page { jobs: Vec::new(), next: Some(cursor) };
        // A bound on the scripts of one call, as the embedded file's budget.
        let mut calls = listing_calls();
        while let (Some(from), true, true) = (page.next, page.jobs.len() < limit, calls > 0) {
            calls -= 1;
            let mut inv = self.invocation(Name::Inspect);
            inv.arg("set").arg(state.as_str()).arg(from).arg(MAX_BATCH).arg(limit - page.jobs.len());
            match &filter.kind {
                Some(kind) => inv.arg("1").arg(kind),
                None => inv.arg("0").arg(""),
            };
            inv.arg(filter.error.as_deref().unwrap_or("").to_ascii_lowercase());
            let (jobs, next) = self.inspected(&inv)?;
            page.jobs.extend(jobs);
            page.next = next;
        }
        Ok(page)
    }

    /// The inspection API's read of one job (`inspect.rs`).
    pub(crate) fn inspect_job(&self, id: JobId) -> Result<Option<JobInfo>, DurableError> {
        let mut inv = self.invocation(Name::Inspect);
        inv.arg("job").arg(id.0);
        Ok(self.inspected(&inv)?.0.into_iter().next())
    }

    /// Runs the inspect script: the jobs, and the index to read on from.
    fn inspected(&self, inv: &ScriptInvocation<'_>) -> Result<(Vec<JobInfo>, Option<u64>), DurableError> {
        let clock = self.clock();
        let reply: Value = self.run("inspecting jobs", Name::Inspect, inv)?;
        let mut items = array(reply)?.into_iter();
        items.next(); // the server's now: not needed
        let next = int(&items.next().unwrap_or(Value::Int(-1)))?;
        let time = |v: &Value| int(v).ok().map(|us| crate::job::from_nanos(clock.client_ns(us)));
        let mut out = Vec::new();
        while let Some(id) = items.next() {
            let f: Vec<Value> = items.by_ref().take(9).collect();
            let [state, attempt, deadline, payload, kind, error, lease_until, score, prio] =
                <[Value; 9]>::try_from(f)
                    .map_err(|_| DurableError::Redis("inspecting jobs: a short reply".into()))?;
            let state = match bytes(state).first() {
                Some(b'l') => JobState::Leased,
                Some(b'd') => JobState::Dead,
                _ => JobState::Pending,
            };
            let error = text(error);
            out.push(JobInfo {
                id: JobId(int(&id)? as u64),
                state,
                kind: text(kind),
                deadline: crate::job::from_nanos(clock.client_ns(int(&deadline)?)),
                attempt: u32::try_from(int(&attempt)?).unwrap_or(u32::MAX),
                lease_deadline: if state == JobState::Leased { time(&lease_until) } else { None },
                died_at: if state == JobState::Dead { time(&score) } else { None },
                last_error: (!error.is_empty()).then_some(error),
                priority: priority(&prio)?,
                payload: bytes(payload),
            });
        }
        Ok((out, u64::try_from(next).ok()))
    }

    /// The inspection API's counts by kind (`inspect.rs`): each set read in
    /// scripts of at most [`MAX_BATCH`] entries.
    pub(crate) fn inspect_kinds(&self) -> Result<Vec<KindCounts>, DurableError> {
        let mut kinds: std::collections::BTreeMap<String, [u64; 3]> = Default::default();
        for (slot, set) in ["pending", "leased", "dead"].into_iter().enumerate() {
            let mut from = 0i64;
            while from >= 0 {
                let mut inv = self.invocation(Name::Kinds);
                inv.arg(set).arg(from).arg(MAX_BATCH);
                let reply: Value = self.run("counting kinds", Name::Kinds, &inv)?;
                let mut items = array(reply)?.into_iter();
                from = int(&items.next().unwrap_or(Value::Int(-1)))?;
                while let (Some(kind), Some(n)) = (items.next(), items.next()) {
                    kinds.entry(text(kind)).or_default()[slot] += int(&n)?.max(0) as u64;
                }
            }
        }
        Ok(kinds
            .into_iter()
            .map(|(kind, c)| KindCounts { kind, pending: c[0], leased: c[1], dead: c[2] })
            .collect())
    }

    /// The inspection API's throughput (`inspect.rs`): the minutes from
    /// `since` to the server's now (at most the last 24 hours), one script.
    pub(crate) fn inspect_throughput(&self, since: SystemTime) -> Result<Vec<Throughput>, DurableError> {
        let clock = self.clock();
        let back = SystemTime::now().duration_since(since).map_or(0, |d| d.as_secs() / 60);
        let mut inv = self.invocation(Name::Throughput);
        inv.arg(back.min(24 * 60) + 1);
        let reply: Value = self.run("reading the throughput", Name::Throughput, &inv)?;
        let mut by: std::collections::BTreeMap<(i64, String), (u64, u64)> = Default::default();
        let mut items = array(reply)?.into_iter();
        while let (Some(minute), Some(field), Some(n)) = (items.next(), items.next(), items.next()) {
            let field = text(field);
            let n = int(&n)?.max(0) as u64;
            let Some((what, kind)) = field.split_once(':') else { continue };
            let slot = by.entry((int(&minute)?, kind.to_string())).or_default();
            if what == "ok" {
                slot.0 += n;
            } else {
                slot.1 += n;
            }
        }
        Ok(by
            .into_iter()
            .map(|((minute, kind), (processed, failed))| Throughput {
                minute: crate::job::from_nanos(clock.client_ns(minute * 60_000_000)),
                kind,
                processed,
                failed,
            })
            .collect())
    }

    /// The inspection API's backlog samples (`inspect.rs`): the minutes
    /// from `since` to the server's now (at most the last 24 hours), one
    /// script.
    pub(crate) fn inspect_samples(&self, since: SystemTime) -> Result<Vec<Sample>, DurableError> {
        let clock = self.clock();
        let back = SystemTime::now().duration_since(since).map_or(0, |d| d.as_secs() / 60);
        let mut inv = self.invocation(Name::Samples);
        inv.arg(back.min(24 * 60) + 1);
        let reply: Value = self.run("reading the backlog samples", Name::Samples, &inv)?;
        let mut out = Vec::new();
        let mut items = array(reply)?.into_iter();
        while let (Some(minute), Some(value)) = (items.next(), items.next()) {
            let value = text(value);
            let mut parts = value.split(' ').map(|n| n.parse::<u64>().ok());
            let (Some(Some(pending)), Some(Some(late))) = (parts.next(), parts.next()) else { continue };
            out.push(Sample {
                minute: crate::job::from_nanos(clock.client_ns(int(&minute)? * 60_000_000)),
                pending,
                lateness: Duration::from_micros(late),
            });
        }
        Ok(out)
    }

    /// Whether a job was ever sent to this queue (its id counter exists): a
    /// queue name with no keys is most likely a typo.
    pub fn exists(&self) -> Result<bool, DurableError> {
        let key = format!("{}seq", self.inner.prefix);
        let n: i64 =
            self.inner.pool.run("looking for the queue", |con| redis::cmd("EXISTS").arg(&key).query(con))?;
        Ok(n > 0)
    }

    /// Stops sends and reserves from this handle (they fail with
    /// [`DurableError::Closed`]; blocked reserves return it). Jobs stay on the
    /// server; acks still work.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        self.inner.notifier.close();
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.notifier.close();
        // Interrupt the watcher's blocking read (best effort: if the server is
        // gone, its connection has failed and it sees `stop` anyway).
        let _ = self.pool.once(|con| redis::cmd("PUBLISH").arg(&self.control).arg("stop").query::<i64>(con));
        let handle = self.watcher.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(handle) = handle {
            handle.thread().unpark();
            let _ = handle.join();
        }
    }
}

impl JobQueue for RedisQueue {
    fn payload_limit(&self) -> usize {
        self.inner.max_payload
    }
    fn queue_label(&self) -> String {
        self.name().to_string()
    }
    fn send_at(&self, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        RedisQueue::send_at(self, payload, at)
    }
    fn send_after(&self, payload: &[u8], delay: Duration) -> Result<JobId, DurableError> {
        RedisQueue::send_after(self, payload, delay)
    }
    fn send_kind_at(&self, kind: &str, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        RedisQueue::send_kind_at(self, kind, payload, at)
    }
    fn send_kind_after(&self, kind: &str, payload: &[u8], delay: Duration) -> Result<JobId, DurableError> {
        RedisQueue::send_kind_after(self, kind, payload, delay)
    }
    fn send_many(&self, jobs: &[(&[u8], SystemTime)]) -> Result<Vec<JobId>, DurableError> {
        RedisQueue::send_many(self, jobs)
    }
    fn reserve(&self, lease: Duration) -> Result<Job, DurableError> {
        RedisQueue::reserve(self, lease)
    }
    fn reserve_timeout(&self, lease: Duration, timeout: Duration) -> Result<Option<Job>, DurableError> {
        RedisQueue::reserve_timeout(self, lease, timeout)
    }
    fn reserve_or_stop(&self, lease: Duration, stop: &StopSignal) -> Result<Option<Job>, DurableError> {
        RedisQueue::reserve_or_stop(self, lease, stop)
    }
    fn reserve_many(&self, lease: Duration, max: usize, timeout: Duration) -> Result<Vec<Job>, DurableError> {
        RedisQueue::reserve_many(self, lease, max, timeout)
    }
    fn ack(&self, job: &Job) -> Result<bool, DurableError> {
        RedisQueue::ack(self, job)
    }
    fn ack_many(&self, jobs: &[Job]) -> Result<Vec<bool>, DurableError> {
        RedisQueue::ack_many(self, jobs)
    }
    fn nack(&self, job: &Job, retry_at: SystemTime) -> Result<bool, DurableError> {
        RedisQueue::nack(self, job, retry_at)
    }
    fn nack_with_error(&self, job: &Job, retry_at: SystemTime, error: &str) -> Result<bool, DurableError> {
        RedisQueue::nack_with_error(self, job, retry_at, error)
    }
    fn kill(&self, job: &Job, error: &str) -> Result<bool, DurableError> {
        RedisQueue::kill(self, job, error)
    }
    fn extend(&self, job: &Job, lease: Duration) -> Result<bool, DurableError> {
        RedisQueue::extend(self, job, lease)
    }
    fn cancel(&self, id: JobId) -> Result<bool, DurableError> {
        RedisQueue::cancel(self, id)
    }
    fn len(&self) -> Result<u64, DurableError> {
        RedisQueue::len(self)
    }
    fn stats(&self) -> Result<Stats, DurableError> {
        RedisQueue::stats(self)
    }
    fn dead_jobs(&self, limit: usize) -> Result<Vec<Job>, DurableError> {
        RedisQueue::dead_jobs(self, limit)
    }
    fn requeue_dead(&self, id: JobId, at: SystemTime) -> Result<bool, DurableError> {
        RedisQueue::requeue_dead(self, id, at)
    }
    fn send_with(&self, payload: &[u8], at: SystemTime, opts: &SendOptions) -> Result<Sent, DurableError> {
        RedisQueue::send_with(self, payload, at, opts)
    }
    fn reserve_excluding(
        &self,
        lease: Duration,
        exclude: &[String],
        stop: &StopSignal,
    ) -> Result<Option<Job>, DurableError> {
        RedisQueue::reserve_excluding(self, lease, exclude, stop)
    }
    fn schedule_store(&self, name: &str, def: &[u8], next_run_us: Option<u64>) -> Result<(), DurableError> {
        RedisQueue::schedule_store(self, name, def, next_run_us)
    }
    fn schedule_get(&self, name: &str) -> Result<Option<StoredSchedule>, DurableError> {
        RedisQueue::schedule_get(self, name)
    }
    fn schedule_list(&self) -> Result<Vec<StoredSchedule>, DurableError> {
        RedisQueue::schedule_list(self)
    }
    fn schedule_remove(&self, name: &str) -> Result<bool, DurableError> {
        RedisQueue::schedule_remove(self, name)
    }
    fn schedule_fire(&self, name: &str, fire: &Fire) -> Result<bool, DurableError> {
        RedisQueue::schedule_fire(self, name, fire)
    }
}

/// Options, uniqueness, exclusion and the schedule store.
impl RedisQueue {
    /// Stores a job due at `at` with [`SendOptions`] (a kind, a priority, a
    /// uniqueness key), in one script: with a key, the script returns the
    /// job that holds it ([`Sent::Existing`]) and stores nothing, or stores
    /// the job, which then holds the key ([`Sent::Created`]); racing sends
    /// of one key, from any number of processes, store one job.
    /// ([`JobQueue::send_with`](crate::JobQueue::send_with).)
    pub fn send_with(
        &self,
        payload: &[u8],
        at: SystemTime,
        opts: &SendOptions,
    ) -> Result<Sent, DurableError> {
        opts.check()?;
        self.check_payload(payload.len())?;
        let due = self.due_at(at)?;
        self.open()?;
        let inv = self.send_with_invocation(payload, due, opts);
        let reply: (i64, i64) = self.run("sending", Name::SendWith, &inv)?;
        Ok(self.sent_with(reply))
    }

    /// `PayloadTooLarge` for a payload over the handle's limit.
    fn check_payload(&self, len: usize) -> Result<(), DurableError> {
        if len > self.inner.max_payload {
            return Err(DurableError::PayloadTooLarge { len, max: self.inner.max_payload });
        }
        Ok(())
    }

    /// The send-with script's invocation (options checked by the caller).
    fn send_with_invocation(&self, payload: &[u8], due: Due, opts: &SendOptions) -> ScriptInvocation<'_> {
        let mut inv = self.invocation(Name::SendWith);
        inv.arg(self.nonce()).arg(self.inner.nonce_ttl).arg(self.inner.max_attempts);
        inv.arg(due.arg()).arg(opts.get_kind()).arg(payload).arg(opts.get_priority());
        match opts.get_unique() {
            Some(u) => {
                let states = match u.get_states() {
                    UniqueStates::Pending => "p",
                    UniqueStates::Leased => "l",
                    UniqueStates::Both => "b",
                };
                inv.arg(u.key()).arg(states).arg(u.period_nanos().div_ceil(1000))
            }
            None => inv.arg("").arg("b").arg(0),
        };
        inv
    }

    /// The send-with script's reply `{created, id}`, recorded.
    fn sent_with(&self, (created, id): (i64, i64)) -> Sent {
        let id = JobId(id as u64);
        if created == 1 {
            self.inner.metrics.sent(1);
            Sent::Created(id)
        } else {
            Sent::Existing(id)
        }
    }

    /// As [`reserve_or_stop`](Self::reserve_or_stop), but leases no job whose
    /// kind is in `exclude`: they stay pending, unleased, attempt uncounted
    /// ([`JobQueue::reserve_excluding`](crate::JobQueue::reserve_excluding)).
    /// Exact: the script compares the heads of the per-(priority, kind) sets
    /// of the kinds not excluded, so however many excluded jobs are due, the
    /// best job it may take is found in one script, and with none due it
    /// sleeps until the next one of those is due (or a wake-up, or `stop`).
    pub fn reserve_excluding(
        &self,
        lease: Duration,
        exclude: &[String],
        stop: &StopSignal,
    ) -> Result<Option<Job>, DurableError> {
        Self::lease_us(lease)?;
        let waker = std::task::Waker::from(self.inner.notifier.clone());
        let Some(_registered) = stop.register(&waker) else {
            return Ok(None);
        };
        Ok(self.reserve_many_until(lease, 1, None, Some(stop), exclude)?.pop())
    }

    /// Limits `kind` to at most `n` leases per `per`, across every handle,
    /// worker and process of this queue: a token bucket of `n` tokens,
    /// refilled evenly over `per` (one token every `per / n`), full when set
    /// (setting it again refills it). The limit and the bucket are stored in
    /// the queue (hashes `rl` and `rb`), and the reserve script takes a token
    /// in the same script as the lease, so the limit holds however many
    /// consumers race. A job of a kind with no token left is skipped like an
    /// excluded kind: it stays pending, unleased, its attempt uncounted,
    /// while other kinds flow; a consumer with nothing else to take sleeps
    /// until the next token comes due (no polling). `reserve_many` takes at
    /// most as many jobs of the kind as there are tokens.
    ///
    /// `InvalidArgument` for a bad kind, `n == 0`, or `per` under 1 ms or
    /// over 2^52 µs. Kinds without a limit, and queues without any, are
    /// served as before (the reserve script then reads the per-priority
    /// sets, not the per-(priority, kind) ones).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use delayq_durable::RedisQueue;
    ///
    /// let q = RedisQueue::connect("redis://127.0.0.1:6379/", "emails")?;
    /// q.set_rate_limit("smtp", 10, Duration::from_secs(1))?; // 10 a second, all workers together
    /// assert_eq!(q.rate_limits()?, vec![("smtp".to_string(), 10, Duration::from_secs(1))]);
    /// assert!(q.clear_rate_limit("smtp")?);
    /// # Ok::<(), delayq_durable::DurableError>(())
    /// ```
    pub fn set_rate_limit(&self, kind: &str, n: u32, per: Duration) -> Result<(), DurableError> {
        check_kind(kind)?;
        if n == 0 {
            return Err(DurableError::InvalidArgument("a rate limit needs n >= 1"));
        }
        if per < Duration::from_millis(1) || per.as_micros() > 1 << 52 {
            return Err(DurableError::InvalidArgument("a rate limit's period must be 1 ms to 2^52 µs"));
        }
        self.open()?;
        let args = [kind.to_string(), n.to_string(), per.as_micros().to_string()];
        self.flag("setting a rate limit", Name::RateLimit, &args)?;
        Ok(())
    }

    /// Removes `kind`'s rate limit and its bucket; its due jobs go out at
    /// once (waiting consumers are woken). `Ok(false)` if it had none.
    pub fn clear_rate_limit(&self, kind: &str) -> Result<bool, DurableError> {
        check_kind(kind)?;
        self.open()?;
        let args = [kind.to_string(), String::new(), String::new()];
        self.flag("clearing a rate limit", Name::RateLimit, &args)
    }

    /// Every rate limit of this queue, by kind: `(kind, n, per)`.
    pub fn rate_limits(&self) -> Result<Vec<(String, u32, Duration)>, DurableError> {
        let key = format!("{}rl", self.inner.prefix);
        let all: Vec<(String, String)> =
            self.inner.pool.run("reading rate limits", |con| redis::cmd("HGETALL").arg(&key).query(con))?;
        let mut out = Vec::with_capacity(all.len());
        for (kind, v) in all {
            let parsed = v.split_once(' ').and_then(|(n, per)| Some((n.parse().ok()?, per.parse().ok()?)));
            let Some((n, per)) = parsed else {
                return Err(DurableError::Redis(format!("kind {kind:?}'s rate limit is {v:?}")));
            };
            out.push((kind, n, Duration::from_micros(per)));
        }
        out.sort();
        Ok(out)
    }

    /// The schedule store: creates or replaces a schedule and its pending
    /// tick job, in one script.
    #[doc(hidden)]
    pub fn schedule_store(
        &self,
        name: &str,
        def: &[u8],
        next_run_us: Option<u64>,
    ) -> Result<(), DurableError> {
        crate::stored::check_store(name, def, self.inner.max_payload)?;
        let due = match next_run_us {
            Some(us) => self.due_at(from_us(us))?.arg(),
            None => String::new(),
        };
        self.open()?;
        let mut inv = self.invocation(Name::SchedStore);
        inv.arg(self.nonce()).arg(self.inner.nonce_ttl).arg(name).arg(def);
        inv.arg(next_run_us.map_or(String::new(), |us| us.to_string())).arg(due).arg(self.inner.max_attempts);
        let _: i64 = self.run("storing a schedule", Name::SchedStore, &inv)?;
        Ok(())
    }

    /// The schedule store: one schedule.
    #[doc(hidden)]
    pub fn schedule_get(&self, name: &str) -> Result<Option<StoredSchedule>, DurableError> {
        check_schedule_name(name)?;
        Ok(self.schedules_read(name)?.pop())
    }

    /// The schedule store: every schedule, by name.
    #[doc(hidden)]
    pub fn schedule_list(&self) -> Result<Vec<StoredSchedule>, DurableError> {
        let mut all = self.schedules_read("")?;
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    }

    fn schedules_read(&self, name: &str) -> Result<Vec<StoredSchedule>, DurableError> {
        let mut inv = self.invocation(Name::SchedRead);
        inv.arg(name);
        let reply: Value = self.run("reading schedules", Name::SchedRead, &inv)?;
        let mut items = array(reply)?.into_iter();
        let mut out = Vec::new();
        let us = |v: Value| -> Result<Option<u64>, DurableError> {
            let t = text(v);
            if t.is_empty() {
                return Ok(None);
            }
            t.parse().map(Some).map_err(|_| DurableError::Redis(format!("a schedule's time is {t:?}")))
        };
        while let (Some(name), Some(def), Some(next), Some(last)) =
            (items.next(), items.next(), items.next(), items.next())
        {
            out.push(StoredSchedule {
                name: text(name),
                def: bytes(def),
                next_run_us: us(next)?,
                last_run_us: us(last)?,
            });
        }
        Ok(out)
    }

    /// The schedule store: deletes a schedule and its pending tick job.
    #[doc(hidden)]
    pub fn schedule_remove(&self, name: &str) -> Result<bool, DurableError> {
        check_schedule_name(name)?;
        self.flag("removing a schedule", Name::SchedRemove, &[name.to_string()])
    }

    /// The schedule store: fires one tick, compare-and-set on the next tick,
    /// in one script.
    #[doc(hidden)]
    pub fn schedule_fire(&self, name: &str, fire: &Fire) -> Result<bool, DurableError> {
        check_schedule_name(name)?;
        check_kind(&fire.kind)?;
        check_priority(fire.priority)?;
        self.check_payload(fire.payload.len())?;
        let clock = self.clock();
        let mut dues = Vec::with_capacity(fire.deadlines_us.len());
        for &us in &fire.deadlines_us {
            dues.push(clock.at(from_us(us))?.arg());
        }
        let next_due = clock.at(from_us(fire.next_run_us))?.arg();
        self.open()?;
        let mut inv = self.invocation(Name::SchedFire);
        inv.arg(self.nonce()).arg(self.inner.nonce_ttl).arg(name);
        inv.arg(fire.expect_next_us.to_string())
            .arg(fire.next_run_us.to_string())
            .arg(fire.last_run_us.to_string());
        inv.arg(next_due).arg(clock.offset_us());
        inv.arg(&fire.kind).arg(&fire.payload[..]).arg(fire.priority).arg(self.inner.max_attempts);
        inv.arg(dues.len());
        for due in &dues {
            inv.arg(due);
        }
        let r: i64 = self.run("firing a schedule", Name::SchedFire, &inv)?;
        if r == 1 {
            self.inner.metrics.sent(dues.len());
        }
        Ok(r == 1)
    }
}
