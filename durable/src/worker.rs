//! [`Worker`]: the loop every user of a job queue writes — reserve, dispatch
//! on the job's kind, run the handler, ack or retry with a backoff, contain a
//! panic, keep the lease alive, stop cleanly — over any [`JobQueue`].

use std::any::Any;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use crate::contract::JobQueue;
use crate::error::DurableError;
use crate::job::{check_kind, Job, JobId};
#[cfg(feature = "serde")]
use crate::kind::JobKind;
use crate::limits::{Limit, Limiter};
use crate::retry::RetryPolicy;
use crate::schedule::fire_tick;
use crate::stop::StopSignal;
use crate::stored::TICK_KIND;

/// What a handler's failure means.
enum Failure {
    /// Retry by the policy (an error or a panic).
    Retry(String),
    /// No retry can help (a payload that does not decode): dead now.
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    Dead(String),
}

type Handler = dyn Fn(&Job, &Context<'_>) -> Result<(), Failure> + Send + Sync;

/// An async handler: makes the future that handles one job.
type AsyncHandler = dyn Fn(Job) -> Result<BoxFuture, Failure> + Send + Sync;

type BoxFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>;

/// A kind's handler, blocking (run on the handler thread) or async (a future
/// polled on the handler thread, dropped at its timeout).
#[derive(Clone)]
enum Handle {
    Blocking(Arc<Handler>),
    Async(Arc<AsyncHandler>),
}

/// What a handler is told besides its job.
pub struct Context<'a> {
    job: &'a Job,
    stopping: &'a AtomicBool,
    lease_lost: &'a AtomicBool,
    deadline: Option<Instant>,
}

impl Context<'_> {
    /// The job being handled (id, kind, attempt, last error, raw payload).
    pub fn job(&self) -> &Job {
        self.job
    }

    /// Whether the worker is shutting down: a long handler may stop early
    /// (returning an error retries the job by its policy).
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Whether an extension of this job's lease was refused: the lease ended
    /// (the worker could not reach the queue in time) and the job may already
    /// be running elsewhere. The handler may stop: its ack will be refused if
    /// another worker has the job.
    pub fn lease_lost(&self) -> bool {
        self.lease_lost.load(Ordering::Acquire)
    }

    /// Whether the kind's [timeout](WorkerBuilder::timeout_for) has passed.
    /// A blocking handler cannot be cancelled (Rust has no thread
    /// cancellation): it may check this and stop early; an `Err` it returns
    /// after its timeout is stored as "timed out after …: " and its error.
    pub fn timed_out(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// When the kind's [timeout](WorkerBuilder::timeout_for) ends, if it has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
}

impl fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context").field("job", self.job).field("stopping", &self.is_stopping()).finish()
    }
}

/// What a [`Worker`] did with a job, told to the
/// [`on_event`](WorkerBuilder::on_event) hook (for logs and metrics) after
/// the queue accepted the change.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// The handler returned `Ok` and the ack was accepted.
    Succeeded {
        /// The job (deleted now).
        job: &'a Job,
    },
    /// The attempt failed and the job is due again at `at`.
    Retrying {
        /// The job as it was handed out.
        job: &'a Job,
        /// When it is due again.
        at: SystemTime,
        /// The error stored as its last error.
        error: &'a str,
    },
    /// The job is in the dead set: out of attempts, unknown kind, or a
    /// payload that does not decode.
    Dead {
        /// The job as it was handed out.
        job: &'a Job,
        /// The error stored as its last error.
        error: &'a str,
    },
    /// The ack, nack or kill was refused: the lease was not this worker's any
    /// more (it ended and the job went to another worker, or was cancelled).
    LeaseLost {
        /// The job as it was handed out.
        job: &'a Job,
    },
    /// A queue call failed (after the backend's own retries).
    QueueError {
        /// The error.
        error: &'a DurableError,
    },
}

type Hook = dyn Fn(&Event<'_>) + Send + Sync;

/// Counts since the worker started.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct WorkerStats {
    /// Handlers that returned `Ok` and whose ack was accepted.
    pub succeeded: u64,
    /// Failed attempts given back to be retried (`nack` with the backoff).
    pub retried: u64,
    /// Jobs this worker moved to the dead set: out of attempts, unknown
    /// kind, or a payload that does not decode.
    pub killed: u64,
    /// Handlers that panicked (counted in `retried` or `killed` too).
    pub panicked: u64,
    /// Lease extensions made for handlers running past half their lease.
    pub extended: u64,
    /// Results not applied because the lease was no longer this worker's.
    pub lease_lost: u64,
    /// Queue calls that failed (after the backend's own retries); the worker
    /// backs off and goes on, and a job it held comes back at its lease end.
    pub queue_errors: u64,
    /// Jobs stored by the schedule ticks this worker fired.
    pub scheduled: u64,
}

#[derive(Default)]
struct Counters {
    succeeded: AtomicU64,
    retried: AtomicU64,
    killed: AtomicU64,
    panicked: AtomicU64,
    extended: AtomicU64,
    lease_lost: AtomicU64,
    queue_errors: AtomicU64,
    scheduled: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Registers handlers and options, then [`start`](WorkerBuilder::start)s a
/// [`Worker`]. From [`Worker::builder`].
pub struct WorkerBuilder {
    queue: Arc<dyn JobQueue>,
    handlers: HashMap<String, Handle>,
    retry: RetryPolicy,
    retry_for: HashMap<String, RetryPolicy>,
    timeouts: HashMap<String, Duration>,
    limits: HashMap<String, Limit>,
    concurrency: usize,
    lease: Duration,
    thread_name_prefix: String,
    on_event: Option<Arc<Hook>>,
    error: Option<DurableError>,
}

impl fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kinds: Vec<_> = self.handlers.keys().collect();
        kinds.sort();
        f.debug_struct("WorkerBuilder")
            .field("kinds", &kinds)
            .field("concurrency", &self.concurrency)
            .field("lease", &self.lease)
            .field("retry", &self.retry)
            .finish()
    }
}

impl WorkerBuilder {
    fn add(mut self, kind: &str, handler: Handle) -> WorkerBuilder {
        if let Err(e) = check_kind(kind) {
            self.error.get_or_insert(e);
        } else if kind == TICK_KIND {
            self.error.get_or_insert(DurableError::InvalidArgument(
                "the kind delayq.schedule is the worker's own (schedule ticks)",
            ));
        } else if self.handlers.insert(kind.to_string(), handler).is_some() {
            self.error.get_or_insert(DurableError::InvalidArgument("a job kind has two handlers"));
        }
        self
    }

    /// Handles jobs of kind `K`: the payload is decoded from JSON and passed
    /// with a [`Context`]. `Ok` acks the job; `Err(e)` (any `Display`) or a
    /// panic retries it by the kind's [`RetryPolicy`], with `e` (or the panic
    /// message) stored as its [`last_error`](Job::last_error). A payload that
    /// does not decode as `K` is dead at once, with the decoding error: no
    /// retry would decode it. (Feature `serde`.)
    #[cfg(feature = "serde")]
    pub fn handle<K, E, F>(self, handler: F) -> WorkerBuilder
    where
        K: JobKind,
        E: fmt::Display,
        F: Fn(K, &Context<'_>) -> Result<(), E> + Send + Sync + 'static,
    {
        let h = move |job: &Job, ctx: &Context<'_>| {
            let value: K = serde_json::from_slice(job.payload()).map_err(|e| {
                Failure::Dead(format!("the payload does not decode as a {:?} job: {e}", K::KIND))
            })?;
            handler(value, ctx).map_err(|e| Failure::Retry(e.to_string()))
        };
        self.add(K::KIND, Handle::Blocking(Arc::new(h)))
    }

    /// Handles jobs of kind `K` with an async function: the future it
    /// returns is polled on a handler thread (no runtime needed: its waker
    /// unparks the thread), so it may await anything that does not need a
    /// particular runtime's reactor — for a future that does (tokio's I/O or
    /// timers), enter that runtime inside it, or spawn on it and await the
    /// join handle. With a [timeout](Self::timeout_for) the future is
    /// dropped when it runs out and the job retried, with "timed out after
    /// …" as its last error. Otherwise as [`handle`](Self::handle).
    /// (Feature `serde`.)
    #[cfg(feature = "serde")]
    pub fn handle_async<K, E, Fut, F>(self, handler: F) -> WorkerBuilder
    where
        K: JobKind,
        E: fmt::Display,
        Fut: std::future::Future<Output = Result<(), E>> + Send + 'static,
        F: Fn(K) -> Fut + Send + Sync + 'static,
    {
        let h = move |job: Job| -> Result<BoxFuture, Failure> {
            let value: K = serde_json::from_slice(job.payload()).map_err(|e| {
                Failure::Dead(format!("the payload does not decode as a {:?} job: {e}", K::KIND))
            })?;
            let fut = handler(value);
            Ok(Box::pin(async move { fut.await.map_err(|e| e.to_string()) }))
        };
        self.add(K::KIND, Handle::Async(Arc::new(h)))
    }

    /// As [`handle_async`](Self::handle_async) with the raw [`Job`].
    pub fn handle_raw_async<E, Fut, F>(self, kind: &str, handler: F) -> WorkerBuilder
    where
        E: fmt::Display,
        Fut: std::future::Future<Output = Result<(), E>> + Send + 'static,
        F: Fn(Job) -> Fut + Send + Sync + 'static,
    {
        let h = move |job: Job| -> Result<BoxFuture, Failure> {
            let fut = handler(job);
            Ok(Box::pin(async move { fut.await.map_err(|e| e.to_string()) }))
        };
        self.add(kind, Handle::Async(Arc::new(h)))
    }

    /// Handles jobs of kind `kind` with the raw [`Job`] (its payload as
    /// bytes); as `handle` otherwise. `""` handles jobs sent
    /// without a kind.
    pub fn handle_raw<E, F>(self, kind: &str, handler: F) -> WorkerBuilder
    where
        E: fmt::Display,
        F: Fn(&Job, &Context<'_>) -> Result<(), E> + Send + Sync + 'static,
    {
        let h =
            move |job: &Job, ctx: &Context<'_>| handler(job, ctx).map_err(|e| Failure::Retry(e.to_string()));
        self.add(kind, Handle::Blocking(Arc::new(h)))
    }

    /// The retry policy of every kind without its own
    /// ([`RetryPolicy::default`]: 1 s doubling to 1 h, 25 % jitter, 25 attempts).
    pub fn retry(mut self, policy: RetryPolicy) -> WorkerBuilder {
        self.retry = policy;
        self
    }

    /// The retry policy of one kind.
    pub fn retry_for(mut self, kind: &str, policy: RetryPolicy) -> WorkerBuilder {
        self.retry_for.insert(kind.to_string(), policy);
        self
    }

    /// A timeout for the handlers of `kind` (at least 1 ms). An async
    /// handler's future is dropped when it runs out, and the job retried by
    /// its policy with "timed out after …" as its last error. A blocking
    /// handler cannot be cancelled: [`Context::timed_out`] tells it, and an
    /// error it returns after the timeout says so.
    pub fn timeout_for(mut self, kind: &str, timeout: Duration) -> WorkerBuilder {
        if timeout < Duration::from_millis(1) {
            self.error
                .get_or_insert(DurableError::InvalidArgument("a handler timeout must be at least 1 ms"));
        }
        self.timeouts.insert(kind.to_string(), timeout);
        self
    }

    /// Runs at most `n` handlers of `kind` at once on this worker (`n` >= 1).
    /// The other threads go on with other kinds: a job of a kind at its
    /// limit is not reserved (so not leased and held) until a handler of that
    /// kind finishes ([`JobQueue::reserve_excluding`]).
    pub fn concurrency_for(mut self, kind: &str, n: usize) -> WorkerBuilder {
        if n == 0 {
            self.error
                .get_or_insert(DurableError::InvalidArgument("a per-kind concurrency must be at least 1"));
        }
        self.limits.entry(kind.to_string()).or_default().max = Some(n);
        self
    }

    /// Starts at most `n` handlers of `kind` per `per`, on this worker (a
    /// token bucket of `n` tokens refilled evenly over `per`, full at start).
    /// As with [`concurrency_for`](Self::concurrency_for), a job of a kind
    /// out of tokens is not reserved until a token is due, and other kinds
    /// go on. The limit is per worker: `k` workers start up to `k * n` per
    /// `per` between them.
    pub fn rate_limit_for(mut self, kind: &str, n: u32, per: Duration) -> WorkerBuilder {
        if n == 0 || per < Duration::from_millis(1) {
            self.error.get_or_insert(DurableError::InvalidArgument(
                "a rate limit needs at least 1 start per at least 1 ms",
            ));
        }
        self.limits.entry(kind.to_string()).or_default().rate = Some((n, per));
        self
    }

    /// Handler threads: how many jobs run at once (default 1, at most 1024).
    pub fn concurrency(mut self, threads: usize) -> WorkerBuilder {
        self.concurrency = threads;
        self
    }

    /// The lease each job is reserved with (default 30 s). A handler running
    /// longer than half of it has it extended, by another `lease` from then,
    /// every half lease, until it returns; so `lease` bounds how long a job
    /// whose worker died waits before another worker gets it.
    pub fn lease(mut self, lease: Duration) -> WorkerBuilder {
        self.lease = lease;
        self
    }

    /// The names of the worker's threads: `{prefix}-{slot}` for the handler
    /// threads (slot 0 up), `{prefix}-keeper` for the lease keeper (default
    /// `"delayq-worker"`). Linux shows the first 15 bytes of a name.
    pub fn thread_name_prefix(mut self, prefix: impl Into<String>) -> WorkerBuilder {
        self.thread_name_prefix = prefix.into();
        self
    }

    /// Calls `hook` with every [`Event`], on the handler thread, after the
    /// queue call it reports. A panic in it is caught (and ignored).
    pub fn on_event(mut self, hook: impl Fn(&Event<'_>) + Send + Sync + 'static) -> WorkerBuilder {
        self.on_event = Some(Arc::new(hook));
        self
    }

    /// Starts the lease keeper and the handler threads.
    ///
    /// # Errors
    ///
    /// [`DurableError::InvalidArgument`] for no handler, a kind registered
    /// twice or not valid, a concurrency of 0 or over 1024, a zero lease, a
    /// thread name prefix with a NUL; [`DurableError::Io`] if a thread cannot be started (those
    /// already started are stopped and joined).
    pub fn start(self) -> Result<Worker, DurableError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.handlers.is_empty() {
            return Err(DurableError::InvalidArgument("a worker needs at least one handler"));
        }
        if self.concurrency == 0 || self.concurrency > 1024 {
            return Err(DurableError::InvalidArgument("a worker's concurrency must be 1 to 1024"));
        }
        if self.lease.is_zero() {
            return Err(DurableError::InvalidArgument("a worker's lease must be longer than zero"));
        }
        for kind in self.retry_for.keys().chain(self.timeouts.keys()).chain(self.limits.keys()) {
            check_kind(kind)?;
        }
        if self.limits.contains_key(TICK_KIND) || self.timeouts.contains_key(TICK_KIND) {
            return Err(DurableError::InvalidArgument(
                "the kind delayq.schedule is the worker's own (schedule ticks): it takes no limit or timeout",
            ));
        }
        if self.thread_name_prefix.contains('\0') {
            return Err(DurableError::InvalidArgument("a worker's thread name prefix may not contain NUL"));
        }
        let label = self.queue.queue_label();
        let shared = Arc::new(Shared {
            label,
            queue: self.queue,
            handlers: self.handlers,
            retry: self.retry,
            retry_for: self.retry_for,
            timeouts: self.timeouts,
            limiter: Limiter::new(self.limits),
            lease: self.lease,
            on_event: self.on_event,
            stopping: AtomicBool::new(false),
            stop_signal: StopSignal::new(),
            stop: Mutex::new(Stop { grace: None }),
            keeper_off: AtomicBool::new(false),
            stop_cv: Condvar::new(),
            running: Mutex::new(HashMap::new()),
            running_cv: Condvar::new(),
            live: AtomicUsize::new(0),
            live_lock: Mutex::new(()),
            live_cv: Condvar::new(),
            counters: Counters::default(),
            random: RandomState::new(),
            draws: AtomicU64::new(0),
        });
        let mut worker = Worker { shared: shared.clone(), threads: Vec::new(), keeper: None, refill: None };
        let keeper = {
            let shared = shared.clone();
            thread::Builder::new()
                .name(format!("{}-keeper", self.thread_name_prefix))
                .spawn(move || shared.keep_leases())
        };
        worker.keeper = Some(keeper.map_err(|e| spawn_error(&shared, e))?);
        if shared.limiter.as_ref().is_some_and(Limiter::has_rates) {
            let s = shared.clone();
            let refill =
                thread::Builder::new().name(format!("{}-limits", self.thread_name_prefix)).spawn(move || {
                    if let Some(l) = &s.limiter {
                        l.refill_loop();
                    }
                });
            worker.refill = Some(refill.map_err(|e| spawn_error(&shared, e))?);
        }
        for slot in 0..self.concurrency {
            let s = shared.clone();
            shared.live.fetch_add(1, Ordering::AcqRel);
            let t = thread::Builder::new()
                .name(format!("{}-{slot}", self.thread_name_prefix))
                .spawn(move || s.work(slot));
            match t {
                Ok(t) => worker.threads.push(t),
                Err(e) => {
                    shared.live.fetch_sub(1, Ordering::AcqRel);
                    let err = spawn_error(&shared, e);
                    drop(worker); // stops and joins what was started
                    return Err(err);
                }
            }
        }
        Ok(worker)
    }
}

fn spawn_error(shared: &Shared, e: std::io::Error) -> DurableError {
    shared.request_stop(Duration::ZERO);
    DurableError::Io { context: "starting a worker thread".into(), source: e }
}

/// The worker runtime: handler threads that reserve jobs from a
/// [`JobQueue`], dispatch on their [kind](Job::kind), and ack, retry with a
/// backoff, or bury them — on either backend.
///
/// ```
/// use std::time::Duration;
/// use delayq_durable::{DurableQueue, JobKind, JobQueue, RetryPolicy, Worker};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct SendEmail { to: String }
/// impl JobKind for SendEmail { const KIND: &'static str = "email.send"; }
///
/// # let dir = std::env::temp_dir().join(format!("delayq-doc-worker-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let q = DurableQueue::open(dir.join("jobs.redb")).unwrap();
/// let (done, seen) = std::sync::mpsc::channel();
/// let worker = Worker::builder(q.clone())
///     .handle(move |job: SendEmail, _ctx| {
///         // send it; an Err (any Display) or a panic retries by the policy
///         done.send(job.to).map_err(|e| e.to_string())
///     })
///     .retry(RetryPolicy::exponential(Duration::from_secs(1)).max_attempts(10))
///     .concurrency(4)
///     .start()
///     .unwrap();
/// q.enqueue_after(&SendEmail { to: "ana@example.com".into() }, Duration::ZERO).unwrap();
/// assert_eq!(seen.recv().unwrap(), "ana@example.com");
/// let report = worker.shutdown(Duration::from_secs(5)); // stop reserving, let handlers finish
/// assert!(report.abandoned.is_empty());
/// # drop(q); std::fs::remove_dir_all(&dir).unwrap();
/// ```
///
/// # What happens to a job
///
/// | the handler | the job |
/// | --- | --- |
/// | returns `Ok` | acked (deleted) |
/// | returns `Err(e)` or panics, attempts left | `nack`ed to retry after the kind's backoff, `e` (or "panicked: …") stored as its [`last_error`](Job::last_error) |
/// | returns `Err(e)` or panics, on its last attempt | dead ([`kill`](JobQueue::kill)), with the error |
/// | — : no handler for its kind | dead at once: `no handler for kind "…"` |
/// | — : its payload does not decode (`handle::<K>`) | dead at once, with the decoding error |
/// | runs past half its lease | the lease is extended, every half lease, while it runs |
/// | its worker dies | due again when its lease ends, as the next attempt |
///
/// A panic is caught (`catch_unwind`; the panic hook still prints it) and
/// the thread goes on: every thread the worker starts lives until shutdown.
///
/// # Shutdown
///
/// [`shutdown(grace)`](Worker::shutdown) (or a [`ShutdownHandle`] from
/// another thread, ending [`run`](Worker::run)): the threads stop reserving
/// (an idle one, blocked in [`reserve_or_stop`](JobQueue::reserve_or_stop)
/// on the worker's [`StopSignal`], returns at once; idle threads never wake
/// otherwise), handlers running are waited for up to `grace`, their results applied, and
/// the threads joined. A handler still running after `grace` cannot be
/// stopped (Rust has no thread cancellation): its lease is no longer
/// extended, so its job is due again when the lease ends, as its next
/// attempt; its id is in [`Shutdown::abandoned`], and its thread is left to
/// end with the handler (its late ack is refused if the job went to someone
/// else). Dropping a `Worker` is `shutdown(Duration::ZERO)`.
pub struct Worker {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    keeper: Option<JoinHandle<()>>,
    /// The rate limits' refill thread, if any kind has a rate limit.
    refill: Option<JoinHandle<()>>,
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker").field("threads", &self.threads.len()).field("stats", &self.stats()).finish()
    }
}

/// What [`Worker::shutdown`] left behind.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Shutdown {
    /// Jobs whose handlers were still running when the grace period ended:
    /// each is due again at its lease end (no longer extended).
    pub abandoned: Vec<JobId>,
    /// The worker's counts at the end.
    pub stats: WorkerStats,
}

/// Asks a [`Worker`] to shut down, from any thread (a signal handler's
/// thread, a supervisor); [`Worker::run`] then returns.
#[derive(Clone)]
pub struct ShutdownHandle {
    shared: Arc<Shared>,
}

impl fmt::Debug for ShutdownHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShutdownHandle")
            .field("stopping", &self.shared.stopping.load(Ordering::Relaxed))
            .finish()
    }
}

impl ShutdownHandle {
    /// Stops reserving now and lets [`Worker::run`] finish the shutdown with
    /// `grace` for the running handlers. Returns at once; the first call's
    /// grace counts.
    pub fn shutdown(&self, grace: Duration) {
        self.shared.request_stop(grace);
    }
}

impl Worker {
    /// A worker over `queue` (any backend, or an `Arc` of one): register
    /// handlers, then [`start`](WorkerBuilder::start).
    pub fn builder(queue: impl JobQueue + 'static) -> WorkerBuilder {
        WorkerBuilder {
            queue: Arc::new(queue),
            handlers: HashMap::new(),
            retry: RetryPolicy::default(),
            retry_for: HashMap::new(),
            timeouts: HashMap::new(),
            limits: HashMap::new(),
            concurrency: 1,
            lease: Duration::from_secs(30),
            thread_name_prefix: "delayq-worker".into(),
            on_event: None,
            error: None,
        }
    }

    /// A handle that shuts this worker down from another thread.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle { shared: self.shared.clone() }
    }

    /// Counts since start.
    pub fn stats(&self) -> WorkerStats {
        let c = &self.shared.counters;
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        WorkerStats {
            succeeded: n(&c.succeeded),
            retried: n(&c.retried),
            killed: n(&c.killed),
            panicked: n(&c.panicked),
            extended: n(&c.extended),
            lease_lost: n(&c.lease_lost),
            queue_errors: n(&c.queue_errors),
            scheduled: n(&c.scheduled),
        }
    }

    /// Blocks until a [`ShutdownHandle`] asks for a shutdown, then shuts down
    /// with the grace it gave.
    pub fn run(mut self) -> Shutdown {
        let grace = {
            let mut stop = self.shared.lock_stop();
            loop {
                if let Some(grace) = stop.grace {
                    break grace;
                }
                stop = self.shared.stop_cv.wait(stop).unwrap_or_else(PoisonError::into_inner);
            }
        };
        self.finish(grace)
    }

    /// Stops reserving, waits up to `grace` for the running handlers (their
    /// results are applied), joins the threads, and reports what was still
    /// running (see [Shutdown](Worker#shutdown)).
    pub fn shutdown(mut self, grace: Duration) -> Shutdown {
        self.shared.request_stop(grace);
        let grace = self.shared.lock_stop().grace.unwrap_or(grace);
        self.finish(grace)
    }

    fn finish(&mut self, grace: Duration) -> Shutdown {
        let until = Instant::now().checked_add(grace);
        {
            let mut guard = self.shared.live_lock.lock().unwrap_or_else(PoisonError::into_inner);
            while self.shared.live.load(Ordering::Acquire) > 0 {
                let left = match until {
                    None => Duration::from_secs(3600),
                    Some(until) => match until.checked_duration_since(Instant::now()) {
                        Some(left) if !left.is_zero() => left,
                        _ => break,
                    },
                };
                guard =
                    self.shared.live_cv.wait_timeout(guard, left).unwrap_or_else(PoisonError::into_inner).0;
            }
        }
        let mut abandoned: Vec<JobId> = self.shared.lock_running().values().map(|r| r.job.id()).collect();
        abandoned.sort();
        // Stop extending: an abandoned job comes back at its lease end.
        {
            let _running = self.shared.lock_running();
            self.shared.keeper_off.store(true, Ordering::Release);
        }
        self.shared.running_cv.notify_all();
        if let Some(k) = self.keeper.take() {
            let _ = k.join();
        }
        if let Some(r) = self.refill.take() {
            let _ = r.join();
        }
        for t in self.threads.drain(..) {
            if t.is_finished() {
                let _ = t.join();
            }
            // else: its handler outran the grace period; the thread ends with it.
        }
        Shutdown { abandoned, stats: self.stats() }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.keeper.is_some() {
            self.shared.request_stop(Duration::ZERO);
            self.finish(Duration::ZERO);
        }
    }
}

struct Stop {
    /// Set by the first shutdown request.
    grace: Option<Duration>,
}

/// A job a handler is running, for the lease keeper.
struct Running {
    job: Job,
    next_extend: Instant,
    lost: Arc<AtomicBool>,
}

struct Shared {
    /// The queue's name for traces.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    label: String,
    queue: Arc<dyn JobQueue>,
    handlers: HashMap<String, Handle>,
    retry: RetryPolicy,
    retry_for: HashMap<String, RetryPolicy>,
    timeouts: HashMap<String, Duration>,
    /// Per-kind concurrency and rate limits (`None`: none set).
    limiter: Option<Limiter>,
    lease: Duration,
    on_event: Option<Arc<Hook>>,
    stopping: AtomicBool,
    /// Raised with `stopping`: ends the idle threads' `reserve_or_stop`.
    stop_signal: StopSignal,
    stop: Mutex<Stop>,
    stop_cv: Condvar,
    /// The lease keeper ends (set under `running`'s lock).
    keeper_off: AtomicBool,
    /// By handler slot.
    running: Mutex<HashMap<usize, Running>>,
    running_cv: Condvar,
    /// Handler threads not yet out of their loop.
    live: AtomicUsize,
    live_lock: Mutex<()>,
    live_cv: Condvar,
    counters: Counters,
    random: RandomState,
    draws: AtomicU64,
}

/// Ends a handler thread's life in the count `finish` waits on, however the
/// thread ends.
struct Live<'a>(&'a Shared);

impl Drop for Live<'_> {
    fn drop(&mut self) {
        let _guard = self.0.live_lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.0.live.fetch_sub(1, Ordering::AcqRel);
        self.0.live_cv.notify_all();
    }
}

fn panic_text(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "a non-string panic payload"
    }
}

impl Shared {
    fn lock_stop(&self) -> MutexGuard<'_, Stop> {
        self.stop.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_running(&self) -> MutexGuard<'_, HashMap<usize, Running>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn request_stop(&self, grace: Duration) {
        self.stopping.store(true, Ordering::Release);
        let mut stop = self.lock_stop();
        stop.grace.get_or_insert(grace);
        drop(stop);
        self.stop_cv.notify_all();
        self.stop_signal.raise();
        if let Some(l) = &self.limiter {
            l.close();
        }
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// A random `u64` for the jitter.
    fn draw(&self) -> u64 {
        let mut h = self.random.build_hasher();
        h.write_u64(self.draws.fetch_add(1, Ordering::Relaxed));
        h.finish()
    }

    /// Waits up to `d`, or less if a shutdown is asked for.
    fn pause(&self, d: Duration) {
        let stop = self.lock_stop();
        if stop.grace.is_none() {
            let _ = self.stop_cv.wait_timeout(stop, d);
        }
    }

    /// A handler thread: reserve, run, settle, until shutdown.
    fn work(&self, slot: usize) {
        let _live = Live(self);
        let mut backoff = Duration::from_millis(50);
        while !self.stopping() {
            let reserved = match &self.limiter {
                None => self.queue.reserve_or_stop(self.lease, &self.stop_signal),
                Some(limiter) => {
                    let ticket = limiter.begin();
                    let r = self.queue.reserve_excluding(self.lease, &ticket.exclude, &ticket.interrupt);
                    limiter.end(ticket, r.as_ref().ok().and_then(Option::as_ref).map(Job::kind));
                    r
                }
            };
            match reserved {
                Ok(Some(job)) => {
                    backoff = Duration::from_millis(50);
                    // Leased already: run it even if a shutdown began meanwhile.
                    self.process(slot, job);
                }
                Ok(None) => {}
                Err(DurableError::Closed) => break,
                Err(error) => {
                    bump(&self.counters.queue_errors);
                    self.tell(&Event::QueueError { error: &error });
                    self.pause(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    fn process(&self, slot: usize, job: Job) {
        if job.kind() == TICK_KIND {
            return self.fire(&job);
        }
        // A limited kind's handler counts as running until this returns.
        struct Running<'a>(&'a Limiter, &'a str);
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                self.0.done(self.1);
            }
        }
        let _running = self.limiter.as_ref().filter(|l| l.limits(job.kind())).map(|l| Running(l, job.kind()));
        #[cfg(feature = "tracing")]
        let span = tracing::info_span!(
            "delayq.job",
            queue = %self.label,
            kind = job.kind(),
            id = job.id().0,
            attempt = job.attempt(),
            outcome = tracing::field::Empty,
        );
        #[cfg(feature = "tracing")]
        let _entered = span.enter();
        self.run(slot, &job);
    }

    fn run(&self, slot: usize, job: &Job) {
        let job = job.clone();
        let Some(handler) = self.handlers.get(job.kind()) else {
            let why = format!("no handler for kind \"{}\"", job.kind());
            return self.bury(&job, &why);
        };
        let policy = self.retry_for.get(job.kind()).unwrap_or(&self.retry);
        let lost = Arc::new(AtomicBool::new(false));
        self.lock_running().insert(
            slot,
            Running { job: job.clone(), next_extend: Instant::now() + self.lease / 2, lost: lost.clone() },
        );
        self.running_cv.notify_all();
        let timeout = self.timeouts.get(job.kind()).copied();
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let ctx = Context { job: &job, stopping: &self.stopping, lease_lost: &lost, deadline };
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| match handler {
            Handle::Blocking(h) => match h(&job, &ctx) {
                Err(Failure::Retry(why)) if ctx.timed_out() => {
                    Err(Failure::Retry(format!("timed out after {:?}: {why}", timeout.unwrap_or_default())))
                }
                other => other,
            },
            Handle::Async(h) => run_future(h(job.clone())?, deadline, timeout),
        }));
        // Out of the keeper's list before acting, so it does not extend a
        // lease being given up (an extend racing the ack is refused anyway).
        self.lock_running().remove(&slot);
        let failure = match outcome {
            Ok(Ok(())) => {
                let r = self.queue.ack(&job);
                return self.settle(&job, r, &self.counters.succeeded, Event::Succeeded { job: &job });
            }
            Ok(Err(f)) => f,
            Err(payload) => {
                bump(&self.counters.panicked);
                Failure::Retry(format!("panicked: {}", panic_text(payload.as_ref())))
            }
        };
        match failure {
            Failure::Dead(why) => self.bury(&job, &why),
            Failure::Retry(why) if policy.gives_up_after(job.attempt()) => {
                self.bury(&job, &format!("{why} (attempt {} of {})", job.attempt(), policy.attempts()))
            }
            Failure::Retry(why) => {
                let at = SystemTime::now() + policy.delay(job.attempt(), self.draw());
                let r = self.queue.nack_with_error(&job, at, &why);
                self.settle(&job, r, &self.counters.retried, Event::Retrying { job: &job, at, error: &why })
            }
        }
    }

    /// Fires a schedule's tick job ([`fire_tick`]); on an error the tick job
    /// is retried in a second (a transient backend error must not hold the
    /// schedule up for a lease).
    fn fire(&self, job: &Job) {
        match fire_tick(&*self.queue, job) {
            Ok(n) => {
                self.counters.scheduled.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(error) => {
                bump(&self.counters.queue_errors);
                self.tell(&Event::QueueError { error: &error });
                let _ = self.queue.nack_with_error(
                    job,
                    SystemTime::now() + Duration::from_secs(1),
                    &error.to_string(),
                );
            }
        }
    }

    /// Moves the job to the dead set with `why`.
    fn bury(&self, job: &Job, why: &str) {
        let r = self.queue.kill(job, why);
        self.settle(job, r, &self.counters.killed, Event::Dead { job, error: why })
    }

    /// Counts the result of an ack, nack or kill and tells the hook.
    fn settle(&self, job: &Job, result: Result<bool, DurableError>, counter: &AtomicU64, done: Event<'_>) {
        match result {
            Ok(true) => {
                bump(counter);
                self.tell(&done);
            }
            Ok(false) => {
                bump(&self.counters.lease_lost);
                self.tell(&Event::LeaseLost { job });
            }
            Err(error) => {
                bump(&self.counters.queue_errors);
                self.tell(&Event::QueueError { error: &error });
            }
        }
    }

    fn tell(&self, event: &Event<'_>) {
        #[cfg(feature = "tracing")]
        trace(event);
        if let Some(hook) = &self.on_event {
            let _ = panic::catch_unwind(AssertUnwindSafe(|| hook(event)));
        }
    }

    /// The lease keeper: extends the lease of every job whose handler runs
    /// past half of it, every half lease, until shutdown ends it.
    fn keep_leases(&self) {
        loop {
            let due: Vec<(usize, Job)> = {
                let mut running = self.lock_running();
                if self.keeper_off.load(Ordering::Acquire) {
                    return;
                }
                let now = Instant::now();
                let due: Vec<_> = running
                    .iter()
                    .filter(|(_, r)| r.next_extend <= now)
                    .map(|(s, r)| (*s, r.job.clone()))
                    .collect();
                if due.is_empty() {
                    // Nothing running: no timeout (an idle keeper never wakes).
                    running = match running.values().map(|r| r.next_extend).min() {
                        None => self.running_cv.wait(running).unwrap_or_else(PoisonError::into_inner),
                        Some(next) => {
                            let wait = next.saturating_duration_since(now);
                            self.running_cv
                                .wait_timeout(running, wait)
                                .unwrap_or_else(PoisonError::into_inner)
                                .0
                        }
                    };
                    drop(running);
                    continue;
                }
                due
            };
            for (slot, job) in due {
                let result = self.queue.extend(&job, self.lease);
                let mut running = self.lock_running();
                let Some(r) = running.get_mut(&slot).filter(|r| r.job.id() == job.id()) else { continue };
                match result {
                    Ok(true) => {
                        bump(&self.counters.extended);
                        r.next_extend = Instant::now() + self.lease / 2;
                    }
                    Ok(false) => {
                        r.lost.store(true, Ordering::Release);
                        // Never again: the lease is someone else's.
                        r.next_extend = Instant::now() + Duration::from_secs(365 * 24 * 3600);
                    }
                    Err(_) => {
                        bump(&self.counters.queue_errors);
                        r.next_extend = Instant::now() + self.lease / 10;
                    }
                }
            }
        }
    }
}

/// Polls `fut` on this thread until it is ready, or until `deadline`, when
/// it is dropped (an async handler's timeout). Its waker unparks the thread.
fn run_future(
    mut fut: BoxFuture,
    deadline: Option<Instant>,
    timeout: Option<Duration>,
) -> Result<(), Failure> {
    struct Unpark(thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    loop {
        if let std::task::Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
            return r.map_err(Failure::Retry);
        }
        match deadline {
            None => thread::park(),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    drop(fut); // cancels it (a panic in its drop is caught by the caller)
                    return Err(Failure::Retry(format!("timed out after {:?}", timeout.unwrap_or_default())));
                }
                thread::park_timeout(d - now);
            }
        }
    }
}

/// The outcome of a job run as `tracing` events inside its span (feature
/// `tracing`), and as the span's `outcome` field.
#[cfg(feature = "tracing")]
fn trace(event: &Event<'_>) {
    let span = tracing::Span::current();
    match event {
        Event::Succeeded { .. } => {
            span.record("outcome", "succeeded");
            tracing::info!(outcome = "succeeded", "job succeeded");
        }
        Event::Retrying { at, error, .. } => {
            span.record("outcome", "retrying");
            tracing::warn!(outcome = "retrying", error = %error, retry_at = ?at, "job failed; retrying");
        }
        Event::Dead { error, .. } => {
            span.record("outcome", "dead");
            tracing::error!(outcome = "dead", error = %error, "job failed; dead");
        }
        Event::LeaseLost { .. } => {
            span.record("outcome", "lease_lost");
            tracing::warn!(outcome = "lease_lost", "the job's lease was no longer this worker's");
        }
        Event::QueueError { error } => {
            tracing::error!(error = %error, "queue error");
        }
    }
}
