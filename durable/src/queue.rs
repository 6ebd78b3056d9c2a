//! [`DurableQueue`]: durable delayed jobs in one redb file.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use redb::{Database, ReadableTable};

use crate::builder::{Builder, Durability};
use crate::error::DurableError;
use crate::job::{after_nanos, check_kind, clip_error, now_nanos, to_nanos, Job, JobId, Stats};
use crate::options::{SendOptions, Sent};
use crate::record::{Record, State};
use crate::stop::{StopSignal, Unpark};
use crate::stored::{check_schedule_name, from_us, Fire, StoredSchedule};
use crate::writer::parked::Parked;

use crate::reply::{reply, Reply, Waiting};
use crate::writer::{
    self, storage_error, Counters, Mailbox, NewJob, Op, Ready, SharedDb, Timer, Writer, JOBS, META,
};

/// Durable delayed jobs in one embedded database file ([redb]): a job is on
/// disk before `send_*` returns, handed out with a lease by `reserve`, deleted
/// by `ack`, and due again if its lease runs out — the contract of Beanstalkd,
/// Sidekiq, Faktory and River, with no server to run.
///
/// ```
/// use std::time::Duration;
/// use delayq_durable::DurableQueue;
///
/// let dir = std::env::temp_dir().join(format!("delayq-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("queue-doc.redb");
/// # let _ = std::fs::remove_file(&path);
/// let q = DurableQueue::open(&path).unwrap();
/// let id = q.send_after(b"resize image 7", Duration::from_millis(20)).unwrap();
///
/// let job = q.reserve(Duration::from_secs(30)).unwrap(); // blocks until due
/// assert_eq!((job.id(), job.payload(), job.attempt()), (id, &b"resize image 7"[..], 1));
/// assert!(q.ack(&job).unwrap());
/// assert_eq!(q.len().unwrap(), 0);
/// # drop(q); std::fs::remove_dir_all(&dir).unwrap();
/// ```
///
/// # How it works
///
/// - **Storage**: one redb table maps each job id to its record (state,
///   deadline, attempt, lease); ids grow, so sends append at the B-tree's right
///   edge and acks delete near its left edge.
/// - **Group commit**: every change goes to one writer thread, which applies
///   all the changes waiting in one write transaction and one fsync, then
///   answers their callers (see [`Durability`](crate::Durability)).
/// - **Timing** comes from the core: an in-memory `delayq` queue holds one
///   timer per job — its deadline while pending, its lease end while leased —
///   rebuilt from the file on open. `reserve` waits on it, so it wakes at the
///   deadline with no polling loop and no periodic tick, and an idle queue uses
///   no CPU. A due timer is checked against the record and the wall clock
///   before the job is leased, so a job is never handed out before its
///   deadline by the wall clock.
/// - **Wall-clock steps**: a timer is armed as a monotonic delay, `due − now`
///   by the wall clock when it is armed. A step *back* is caught by that check
///   (the timer is re-armed for the rest: never early). A step *forward* by X
///   is not seen by timers already armed: each fires up to X late by the new
///   wall clock (on time by elapsed time), never early. Timers armed after the
///   step (sends, nacks, leases, extends) are on time, and reopening the queue
///   re-arms every timer from the wall clock. Checking for steps would need a
///   periodic wake-up, which an idle queue does not have.
/// - **Priorities**: the writer keeps an index of the pending jobs in
///   memory (ten priority levels, each ordered by deadline then id, and the
///   same per kind), rebuilt from the file on open. A timer falling due is a
///   wake-up: the consumer that gets it leases the *best* due job — the
///   lowest priority number (less one per aging step it has waited, with
///   [`Builder::priority_aging`]), then the earliest deadline, then the
///   lowest id — which is the best of at most ten level heads: O(log n) per
///   send and lease on top of the B-tree write.
/// - **Excluded kinds** ([`reserve_excluding`](DurableQueue::reserve_excluding)):
///   a wake-up that reaches a consumer excluding its job's kind, with nothing
///   else due for it, is parked under the kind (`writer/parked.rs`), not
///   re-armed; every reserve takes a parked wake-up of a kind it accepts
///   before it blocks, and a blocked one is woken when one is parked. So no
///   busy loop and no stranded job; one extra round trip to the writer per
///   excluded job that reaches an excluding consumer (no commit: a batch
///   that leases nothing writes nothing).
/// - **Uniqueness keys**: a redb table maps each key to the job holding it
///   (and its period); the writer checks and stores in the same transaction,
///   so racing sends of one key store one job. A mapping goes with its job
///   (ack, cancel, death) unless its period runs; those are swept a few at a
///   time by later unique sends (`writer/unique.rs`).
/// - **Schedules**: a redb table of schedules, each with the id of its
///   pending tick job (an ordinary job of kind
///   [`TICK_KIND`](crate::TICK_KIND)); storing, removing and firing one
///   changes the schedule and its tick job in one commit
///   (`writer/schedules.rs`).
/// - **Leases**: `reserve` gives the job a fresh lease token; `ack`, `nack`
///   and `extend` act only with the current token, so a worker whose lease
///   expired and whose job went to another worker cannot ack it (`Ok(false)`).
/// - **Attempts**: a delivery is counted on disk before the job is handed out,
///   so a redelivery after a crash says so (`attempt() > 1`). After
///   `max_attempts` deliveries a job that fails (nack or lease expiry) moves
///   to the dead set, where [`dead_jobs`](DurableQueue::dead_jobs) lists it and
///   [`requeue_dead`](DurableQueue::requeue_dead) brings it back.
/// - **One process per file**: redb locks the file; a second opener gets
///   [`DurableError::Locked`]. Share the queue between threads by `Clone`
///   (it is an `Arc`); share between processes with the Redis backend.
///
/// Dropping the last clone stops the writer after it has committed everything
/// handed to it, and joins it and the timer threads.
///
/// [redb]: https://www.redb.org
#[derive(Clone)]
pub struct DurableQueue {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    /// The writer's database, which the inspection API reads beside it.
    db: SharedDb,
    mailbox: Arc<Mailbox>,
    counters: Arc<Counters>,
    timers: delayq::Receiver<Timer>,
    /// Wake-ups parked by consumers that exclude their job's kind
    /// (`writer/parked.rs`).
    parked: Arc<Parked>,
    writer: Mutex<Option<JoinHandle<()>>>,
    closed: AtomicBool,
    max_payload: usize,
}

/// Group-commit figures since the queue was opened.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct CommitStats {
    /// Write transactions committed (or attempted).
    pub commits: u64,
    /// Of those, the ones that were fsync'd.
    pub durable_commits: u64,
    /// Changes those commits carried (one per call; a `send_many` is one).
    pub ops: u64,
}

impl fmt::Debug for DurableQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DurableQueue").field("path", &self.inner.path).field("stats", &self.counts()).finish()
    }
}

impl DurableQueue {
    /// Opens (creating or recovering) the queue in the file at `path`, with the
    /// [`Builder`]'s defaults. See [`Builder::open`] for recovery and errors.
    pub fn open(path: impl AsRef<Path>) -> Result<DurableQueue, DurableError> {
        Builder::new().open(path)
    }

    /// Options: `DurableQueue::builder().max_attempts(5).open(path)`.
    pub fn builder() -> Builder {
        Builder::new()
    }

    fn open_with(options: Builder, path: &Path) -> Result<DurableQueue, DurableError> {
        let db = panic::catch_unwind(AssertUnwindSafe(|| {
            let mut b = redb::Builder::new();
            b.set_check_integrity_on_open(options.verify_on_open);
            if let Some(bytes) = options.cache_size {
                b.set_cache_size(bytes);
            }
            b.create(path)
        }))
        .map_err(|_| DurableError::Corrupt {
            path: path.to_path_buf(),
            detail: "the storage engine failed reading it (it panicked)".into(),
        })?
        .map_err(|e| storage_error(path, e.into(), "opening"))?;
        let step = options.priority_aging.map_or(0, |s| u64::try_from(s.as_nanos()).unwrap_or(u64::MAX));
        let recovered =
            panic::catch_unwind(AssertUnwindSafe(|| recover(&db, path, step))).map_err(|_| {
                DurableError::Corrupt {
                    path: path.to_path_buf(),
                    detail: "the storage engine failed reading it (it panicked)".into(),
                }
            })??;

        let (timers_tx, timers_rx) = delayq::Builder::new()
            .unbounded()
            .thread_name_prefix("delayq-durable")
            .name(format!("durable/{}", path.display()))
            .build::<Timer>()
            .map_err(|e| DurableError::Storage(format!("starting the timer queue: {e}")))?;
        let counters = Arc::new(Counters::default());
        counters.pending.store(recovered.counts[State::Pending as usize], Ordering::Relaxed);
        counters.leased.store(recovered.counts[State::Leased as usize], Ordering::Relaxed);
        counters.dead.store(recovered.counts[State::Dead as usize], Ordering::Relaxed);
        let mut keys = HashMap::with_capacity(recovered.timers.len());
        let now = now_nanos();
        for (id, gen, due) in recovered.timers {
            let delay = Duration::from_nanos(due.saturating_sub(now));
            if let Ok(key) = timers_tx.send_after((id, gen), delay) {
                keys.insert(id, key);
            }
        }
        let mailbox = Arc::new(Mailbox::default());
        let parked = Arc::new(Parked::default());
        let db: SharedDb = Arc::new(std::sync::RwLock::new(Some(db)));
        let writer = Writer {
            db: db.clone(),
            path: path.to_path_buf(),
            mailbox: mailbox.clone(),
            counters: counters.clone(),
            timers: timers_tx,
            keys,
            next_id: recovered.next_id,
            max_attempts: options.max_attempts,
            durability: options.durability,
            expect: 0,
            last_commit: Duration::ZERO,
            metrics: crate::metrics::Metrics::new(&path.display().to_string()),
            sampled: 0,
            ready: recovered.ready,
            ready_stale: false,
            parked: parked.clone(),
        };
        let handle = std::thread::Builder::new()
            .name("delayq-durable-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| DurableError::Io { context: "starting the writer thread".into(), source: e })?;
        Ok(DurableQueue {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                db,
                mailbox,
                counters,
                timers: timers_rx,
                parked,
                writer: Mutex::new(Some(handle)),
                closed: AtomicBool::new(false),
                max_payload: options.max_payload,
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Stores a job due at `at` (wall clock) and returns its id once it is on
    /// disk. A time in the past is due at once.
    ///
    /// # Errors
    ///
    /// [`DurableError::PayloadTooLarge`], [`DurableError::DeadlineOutOfRange`]
    /// (more than about 142 years ahead), [`DurableError::Closed`], or a storage error — in each case
    /// nothing was stored.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// # let dir = std::env::temp_dir().join(format!("delayq-doc-send-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let q = delayq_durable::DurableQueue::open(dir.join("send.redb")).unwrap();
    /// let at = SystemTime::now() + Duration::from_secs(3600);
    /// let id = q.send_at(b"in an hour", at).unwrap();
    /// assert_eq!(q.len().unwrap(), 1);
    /// assert_eq!(q.reserve_timeout(Duration::from_secs(1), Duration::from_millis(10)).unwrap(), None);
    /// assert!(q.cancel(id).unwrap());
    /// # drop(q); std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn send_at(&self, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        self.send_kind_at("", payload, at)
    }

    /// Stores a job due `delay` from now (wall clock); as [`send_at`](Self::send_at).
    pub fn send_after(&self, payload: &[u8], delay: Duration) -> Result<JobId, DurableError> {
        self.send_kind_after("", payload, delay)
    }

    /// As [`send_at`](Self::send_at), with a kind stored beside the payload
    /// ([`Job::kind`]): what a [`Worker`](crate::Worker) dispatches on.
    ///
    /// # Errors
    ///
    /// As `send_at`; [`DurableError::InvalidArgument`] for a kind over 255
    /// bytes or with control characters.
    pub fn send_kind_at(&self, kind: &str, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        first(self.begin_send_kind_at(kind, payload, at)?.wait())
    }

    pub(crate) fn begin_send_kind_at(
        &self,
        kind: &str,
        payload: &[u8],
        at: SystemTime,
    ) -> Result<Waiting<Vec<JobId>>, DurableError> {
        check_kind(kind)?;
        let at = to_nanos(at)?;
        self.send_nanos(vec![NewJob::plain(kind.to_string(), self.checked(payload)?.to_vec(), at)])
    }

    /// As [`send_after`](Self::send_after), with a kind; as [`send_kind_at`](Self::send_kind_at).
    pub fn send_kind_after(
        &self,
        kind: &str,
        payload: &[u8],
        delay: Duration,
    ) -> Result<JobId, DurableError> {
        first(self.begin_send_kind_after(kind, payload, delay)?.wait())
    }

    pub(crate) fn begin_send_kind_after(
        &self,
        kind: &str,
        payload: &[u8],
        delay: Duration,
    ) -> Result<Waiting<Vec<JobId>>, DurableError> {
        check_kind(kind)?;
        let at = after_nanos(delay)?;
        self.send_nanos(vec![NewJob::plain(kind.to_string(), self.checked(payload)?.to_vec(), at)])
    }

    /// Stores several jobs in one commit, all or none, and returns their ids in
    /// order. For producers that have a batch at hand, this is the cheapest way
    /// in: one fsync for the lot, whatever else is going on.
    pub fn send_many(&self, jobs: &[(&[u8], SystemTime)]) -> Result<Vec<JobId>, DurableError> {
        self.begin_send_many(jobs)?.wait()
    }

    pub(crate) fn begin_send_many(
        &self,
        jobs: &[(&[u8], SystemTime)],
    ) -> Result<Waiting<Vec<JobId>>, DurableError> {
        let mut batch = Vec::with_capacity(jobs.len());
        for (payload, at) in jobs {
            batch.push(NewJob::plain(String::new(), self.checked(payload)?.to_vec(), to_nanos(*at)?));
        }
        if batch.is_empty() {
            return Ok(Waiting::ready(Ok(Vec::new())));
        }
        self.send_nanos(batch)
    }

    /// The largest payload accepted ([`Builder::max_payload`]).
    pub(crate) fn payload_limit(&self) -> usize {
        self.inner.max_payload
    }

    fn checked<'p>(&self, payload: &'p [u8]) -> Result<&'p [u8], DurableError> {
        if payload.len() > self.inner.max_payload {
            return Err(DurableError::PayloadTooLarge { len: payload.len(), max: self.inner.max_payload });
        }
        Ok(payload)
    }

    fn send_nanos(&self, jobs: Vec<NewJob>) -> Result<Waiting<Vec<JobId>>, DurableError> {
        self.check_open()?;
        self.begin(|reply| Op::Send { jobs, reply })
    }

    /// Posts one op to the writer; its answer is to be waited on or awaited.
    fn begin<T>(&self, op: impl FnOnce(Reply<T>) -> Op) -> Result<Waiting<T>, DurableError> {
        let (r, waiting) = reply();
        self.inner.mailbox.post([op(r)])?;
        Ok(waiting)
    }

    /// `Err(Closed)` once the queue is closed (sends and reserves only).
    pub(crate) fn check_open(&self) -> Result<(), DurableError> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(DurableError::Closed);
        }
        Ok(())
    }

    /// The core queue of timers that `reserve` waits on.
    #[cfg(feature = "async")]
    pub(crate) fn timers(&self) -> &delayq::Receiver<Timer> {
        &self.inner.timers
    }

    /// Wake-ups parked for consumers that take their kind.
    #[cfg(feature = "async")]
    pub(crate) fn parked(&self) -> &Parked {
        &self.inner.parked
    }

    /// Asks the writer for a lease on the best due job not of a kind in
    /// `exclude`, with the wake-up (timer) a consumer received.
    pub(crate) fn begin_lease(
        &self,
        (id, gen): Timer,
        lease_ns: u64,
        exclude: Option<&Arc<[String]>>,
    ) -> Result<Waiting<Option<Job>>, DurableError> {
        let exclude = exclude.cloned();
        self.begin(|reply| Op::Lease { id, gen, lease: lease_ns, exclude, reply })
    }

    /// Gives back a lease whose job never reached its caller (the delivery
    /// uncounted); the answer is not waited for.
    #[cfg(feature = "async")]
    pub(crate) fn release(&self, job: &Job) {
        let (r, _) = reply();
        let _ = self.inner.mailbox.post([Op::Release { id: job.id.0, token: job.token, reply: r }]);
    }

    /// Blocks until a job is due, leases it to the caller for `lease`, and
    /// returns it. Among due jobs the lowest priority number comes out
    /// first, then the earliest deadline, then the first sent.
    ///
    /// # Errors
    ///
    /// [`DurableError::Closed`] once the queue is [`close`](Self::close)d;
    /// [`DurableError::InvalidArgument`] for a zero lease; a storage error if
    /// the lease could not be committed (the job is offered again shortly).
    pub fn reserve(&self, lease: Duration) -> Result<Job, DurableError> {
        loop {
            if let Some(job) = self.reserve_until(lease, None, None, None)? {
                return Ok(job);
            }
        }
    }

    /// As [`reserve`](Self::reserve), but gives up after `timeout` with `Ok(None)`.
    pub fn reserve_timeout(&self, lease: Duration, timeout: Duration) -> Result<Option<Job>, DurableError> {
        self.reserve_until(lease, Some(Instant::now().checked_add(timeout)), None, None)
    }

    /// As [`reserve`](Self::reserve), but returns `Ok(None)` once `stop` is
    /// [raised](StopSignal::raise) (at once if it is already): the thread
    /// waits on the timer queue and the signal together, with no timeout and
    /// no periodic wake-up. A job whose timer was taken before the signal is
    /// still leased and returned.
    pub fn reserve_or_stop(&self, lease: Duration, stop: &StopSignal) -> Result<Option<Job>, DurableError> {
        self.reserve_until(lease, None, Some(stop), None)
    }

    /// Waits up to `timeout` for a due job, then leases as many due jobs as are
    /// ready, up to `max`, in one commit. An empty `Vec` means the timeout
    /// passed.
    pub fn reserve_many(
        &self,
        lease: Duration,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Job>, DurableError> {
        if max == 0 {
            return Err(DurableError::InvalidArgument("reserve_many needs max >= 1"));
        }
        let lease_ns = lease_nanos(lease)?;
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let first = match self.next_wakeup(Some(deadline), None, None)? {
                Some(t) => t,
                None => return Ok(Vec::new()),
            };
            let mut timers = vec![first];
            while timers.len() < max {
                match self.inner.timers.try_recv().ok().or_else(|| self.inner.parked.take(None)) {
                    Some(t) => timers.push(t),
                    None => break,
                }
            }
            let mut waits = Vec::with_capacity(timers.len());
            let ops: Vec<Op> = timers
                .into_iter()
                .map(|(id, gen)| {
                    let (r, w) = reply();
                    waits.push(w);
                    Op::Lease { id, gen, lease: lease_ns, exclude: None, reply: r }
                })
                .collect();
            self.inner.mailbox.post(ops)?;
            let mut jobs = Vec::new();
            let mut first_err = None;
            for w in waits {
                match w.wait() {
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

    /// `deadline`: `None` blocks forever; `Some(None)` is a timeout too far to
    /// represent, which also blocks forever.
    /// `stop`: also return `Ok(None)` once it is raised.
    /// `exclude`: kinds not to lease (`reserve_excluding`).
    fn reserve_until(
        &self,
        lease: Duration,
        deadline: Option<Option<Instant>>,
        stop: Option<&StopSignal>,
        exclude: Option<&Arc<[String]>>,
    ) -> Result<Option<Job>, DurableError> {
        let lease_ns = lease_nanos(lease)?;
        loop {
            let Some(timer) = self.next_wakeup(deadline, stop, exclude)? else {
                return Ok(None);
            };
            if let Some(job) = self.begin_lease(timer, lease_ns, exclude)?.wait()? {
                return Ok(Some(job));
            }
            // A stale timer (the job changed since it was armed), one due by
            // the monotonic clock but not yet by the wall clock, or one of an
            // excluded kind (parked for another consumer): wait on.
        }
    }

    /// The next wake-up for this consumer: a due timer from the core queue,
    /// or a wake-up parked for a kind it takes (`writer/parked.rs`);
    /// `Ok(None)` at `deadline` (`None`: none; `Some(None)`: too far to
    /// represent, none either) or once `stop` is raised.
    ///
    /// Without waiting first; then the core queue's async receive, the
    /// parked board and the stop signal, all three registered with one
    /// waker that unparks this thread (register, re-check, then park). No
    /// polling and no periodic wake-up.
    fn next_wakeup(
        &self,
        deadline: Option<Option<Instant>>,
        stop: Option<&StopSignal>,
        exclude: Option<&Arc<[String]>>,
    ) -> Result<Option<Timer>, DurableError> {
        let inner = &self.inner;
        if inner.closed.load(Ordering::Acquire) {
            return Err(DurableError::Closed);
        }
        if stop.is_some_and(StopSignal::is_raised) {
            return Ok(None);
        }
        match inner.timers.try_recv() {
            Ok(t) => return Ok(Some(t)),
            Err(delayq::TryRecvError::Disconnected) => return Err(DurableError::Closed),
            Err(delayq::TryRecvError::Empty) => {}
        }
        if let Some(t) = inner.parked.take(exclude.map(|e| &e[..])) {
            return Ok(Some(t));
        }
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let _stop_registration = match stop {
            Some(stop) => match stop.register(&waker) {
                Some(r) => Some(r),
                None => return Ok(None),
            },
            None => None,
        };
        let mut cx = Context::from_waker(&waker);
        let mut recv = pin!(inner.timers.recv_async());
        let mut registered = None;
        loop {
            if let Poll::Ready(r) = recv.as_mut().poll(&mut cx) {
                return r.map(Some).map_err(|_| DurableError::Closed);
            }
            drop(registered.take());
            match inner.parked.take_or_register(&waker, exclude) {
                Ok(t) => return Ok(Some(t)),
                Err(r) => registered = Some(r),
            }
            // Raised after the registration: seen here, or its wake-up
            // unparks the park below.
            if stop.is_some_and(StopSignal::is_raised) {
                return Ok(None);
            }
            match deadline {
                Some(Some(at)) => {
                    let now = Instant::now();
                    if now >= at {
                        return Ok(None);
                    }
                    std::thread::park_timeout(at - now);
                }
                // A stray unpark only makes another turn of the loop.
                _ => std::thread::park(),
            }
        }
    }

    /// Deletes a job the caller holds the lease of. `Ok(false)` if the lease is
    /// no longer the caller's (it expired and the job was handed to another
    /// worker, moved to the dead set, or was cancelled): a stale ack never
    /// deletes a job leased to someone else. An ack after the lease ran out but
    /// before anyone else took the job still succeeds.
    pub fn ack(&self, job: &Job) -> Result<bool, DurableError> {
        self.begin_ack(job)?.wait()
    }

    pub(crate) fn begin_ack(&self, job: &Job) -> Result<Waiting<bool>, DurableError> {
        if job.token == 0 {
            return Ok(Waiting::ready(Ok(false)));
        }
        self.begin(|reply| Op::Ack { id: job.id.0, token: job.token, reply })
    }

    /// Acks several jobs in one commit; `Ok(flags)` as for [`ack`](Self::ack), in order.
    pub fn ack_many(&self, jobs: &[Job]) -> Result<Vec<bool>, DurableError> {
        self.begin_ack_many(jobs)?.into_iter().map(|w| w.wait()).collect()
    }

    pub(crate) fn begin_ack_many(&self, jobs: &[Job]) -> Result<Vec<Waiting<bool>>, DurableError> {
        let mut waits = Vec::with_capacity(jobs.len());
        let ops: Vec<Op> = jobs
            .iter()
            .map(|job| {
                let (r, w) = reply();
                waits.push(w);
                Op::Ack { id: job.id.0, token: job.token, reply: r }
            })
            .collect();
        self.inner.mailbox.post(ops)?;
        Ok(waits)
    }

    /// Gives a leased job back to be retried at `retry_at` (the next delivery
    /// is the next attempt), or, if this was its last allowed attempt, moves it
    /// to the dead set. `Ok(false)` if the lease is no longer the caller's.
    pub fn nack(&self, job: &Job, retry_at: SystemTime) -> Result<bool, DurableError> {
        self.begin_nack(job, retry_at, None)?.wait()
    }

    pub(crate) fn begin_nack(
        &self,
        job: &Job,
        retry_at: SystemTime,
        error: Option<&str>,
    ) -> Result<Waiting<bool>, DurableError> {
        let retry_at = to_nanos(retry_at)?;
        if job.token == 0 {
            return Ok(Waiting::ready(Ok(false)));
        }
        let error = error.map(clip_error);
        self.begin(|reply| Op::Nack { id: job.id.0, token: job.token, retry_at, error, reply })
    }

    /// As [`nack`](Self::nack), and stores `error` as the job's
    /// [`last_error`](Job::last_error) (cut to 4 KiB at a character boundary).
    pub fn nack_with_error(
        &self,
        job: &Job,
        retry_at: SystemTime,
        error: &str,
    ) -> Result<bool, DurableError> {
        self.begin_nack(job, retry_at, Some(error))?.wait()
    }

    /// Moves a job the caller holds the lease of to the dead set now, whatever
    /// attempts it has left, with `error` as its
    /// [`last_error`](Job::last_error): for a job no retry can help (an
    /// unknown kind, a payload that does not decode). `Ok(false)` if the lease
    /// is no longer the caller's.
    pub fn kill(&self, job: &Job, error: &str) -> Result<bool, DurableError> {
        self.begin_kill(job, error)?.wait()
    }

    pub(crate) fn begin_kill(&self, job: &Job, error: &str) -> Result<Waiting<bool>, DurableError> {
        if job.token == 0 {
            return Ok(Waiting::ready(Ok(false)));
        }
        let error = clip_error(error);
        self.begin(|reply| Op::Kill { id: job.id.0, token: job.token, error, reply })
    }

    /// Extends the caller's lease to `lease` from now. `Ok(false)` if the lease
    /// is no longer the caller's.
    pub fn extend(&self, job: &Job, lease: Duration) -> Result<bool, DurableError> {
        self.begin_extend(job, lease)?.wait()
    }

    pub(crate) fn begin_extend(&self, job: &Job, lease: Duration) -> Result<Waiting<bool>, DurableError> {
        let lease = lease_nanos(lease)?;
        if job.token == 0 {
            return Ok(Waiting::ready(Ok(false)));
        }
        self.begin(|reply| Op::Extend { id: job.id.0, token: job.token, lease, reply })
    }

    /// Deletes a job whatever its state (pending, leased or dead). `Ok(false)`
    /// if there is no such job (acked, cancelled, or never sent). A worker
    /// holding a cancelled job's lease gets `Ok(false)` from its ack.
    pub fn cancel(&self, id: JobId) -> Result<bool, DurableError> {
        self.begin_cancel(id)?.wait()
    }

    pub(crate) fn begin_cancel(&self, id: JobId) -> Result<Waiting<bool>, DurableError> {
        self.begin(|reply| Op::Cancel { id: id.0, reply })
    }

    /// Moves a dead job back to pending, due at `at`, with a fresh allowance of
    /// `max_attempts` deliveries (its attempt count goes on from where it was,
    /// so its next delivery still reads as a redelivery). `Ok(false)` if it is
    /// not in the dead set.
    pub fn requeue_dead(&self, id: JobId, at: SystemTime) -> Result<bool, DurableError> {
        self.begin_requeue_dead(id, at)?.wait()
    }

    pub(crate) fn begin_requeue_dead(
        &self,
        id: JobId,
        at: SystemTime,
    ) -> Result<Waiting<bool>, DurableError> {
        let at = to_nanos(at)?;
        self.begin(|reply| Op::Requeue { id: id.0, at, reply })
    }

    /// Up to `limit` dead jobs, by id. A read: it waits for the writer's
    /// current commit, and commits nothing.
    pub fn dead_jobs(&self, limit: usize) -> Result<Vec<Job>, DurableError> {
        self.begin_dead_jobs(limit)?.wait()
    }

    pub(crate) fn begin_dead_jobs(&self, limit: usize) -> Result<Waiting<Vec<Job>>, DurableError> {
        self.begin(|reply| Op::Dead { limit, reply })
    }

    /// Runs `f` in a read transaction begun on the caller's thread (the
    /// inspection API, `inspect.rs`): it sees the last commit and neither
    /// waits for the writer nor holds it up. The storage engine's panic on a
    /// damaged file is an error, as on the writer.
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&redb::ReadTransaction, &Path) -> Result<T, DurableError>,
    ) -> Result<T, DurableError> {
        let path = &self.inner.path;
        panic::catch_unwind(AssertUnwindSafe(|| f(&writer::begin_read(&self.inner.db, path)?, path)))
            .unwrap_or_else(|_| {
                Err(DurableError::Corrupt {
                    path: path.clone(),
                    detail: "the storage engine panicked reading it".into(),
                })
            })
    }

    /// Deletes each job only if its state is one of `states` (indexed by
    /// `State as usize`), all in one commit (the inspection API, `inspect.rs`).
    pub(crate) fn cancel_many_in(&self, ids: &[JobId], states: [bool; 3]) -> Result<Vec<bool>, DurableError> {
        self.many(ids.iter().map(|id| move |reply| Op::CancelIn { id: id.0, states, reply }))
    }

    /// As [`requeue_dead`](Self::requeue_dead) for each job, in one commit.
    pub fn requeue_dead_many(&self, ids: &[JobId], at: SystemTime) -> Result<Vec<bool>, DurableError> {
        let at = to_nanos(at)?;
        self.many(ids.iter().map(|id| move |reply| Op::Requeue { id: id.0, at, reply }))
    }

    /// Posts the ops together (the writer takes them in one batch: one
    /// commit) and waits for every answer.
    fn many<F: FnOnce(Reply<bool>) -> Op>(
        &self,
        ops: impl Iterator<Item = F>,
    ) -> Result<Vec<bool>, DurableError> {
        let mut waits = Vec::new();
        let ops: Vec<Op> = ops
            .map(|op| {
                let (r, w) = reply();
                waits.push(w);
                op(r)
            })
            .collect();
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        self.inner.mailbox.post(ops)?;
        waits.into_iter().map(|w| w.wait()).collect()
    }

    /// Jobs not yet acked and not dead: pending plus leased.
    pub fn len(&self) -> Result<u64, DurableError> {
        let s = self.counts();
        Ok(s.pending + s.leased)
    }

    /// Whether [`len`](Self::len) is zero.
    pub fn is_empty(&self) -> Result<bool, DurableError> {
        Ok(self.len()? == 0)
    }

    /// Jobs by state, as of the last commit. It reads counters in memory and
    /// does not fail; it returns a `Result` so that its signature is
    /// [`RedisQueue::stats`](crate::JobQueue::stats)'s and the trait's.
    pub fn stats(&self) -> Result<Stats, DurableError> {
        Ok(self.counts())
    }

    fn counts(&self) -> Stats {
        let c = &self.inner.counters;
        Stats {
            pending: c.pending.load(Ordering::Relaxed),
            leased: c.leased.load(Ordering::Relaxed),
            dead: c.dead.load(Ordering::Relaxed),
        }
    }

    /// Group-commit figures since open: how many commits, how many fsync'd,
    /// how many changes they carried.
    pub fn commit_stats(&self) -> CommitStats {
        let c = &self.inner.counters;
        CommitStats {
            commits: c.commits.load(Ordering::Relaxed),
            durable_commits: c.durable_commits.load(Ordering::Relaxed),
            ops: c.ops.load(Ordering::Relaxed),
        }
    }

    /// Stops taking sends and reserves: both fail with
    /// [`DurableError::Closed`], and every `reserve` blocked now returns it.
    /// Jobs stay in the file for the next open. `ack`, `nack`, `extend` and
    /// `cancel` still work, so workers can finish what they hold. Idempotent.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        self.inner.timers.close();
        // Wakes blocked receivers: the timer queue is closed and now empty.
        drop(self.inner.timers.take_pending());
    }
}

impl Builder {
    /// Opens the queue at `path`, creating the file if it does not exist, and
    /// recovers it: every pending job gets its timer back, and every job that
    /// was leased when the previous owner stopped is due again at once (its
    /// holder is gone: one process owns a file at a time), as its next attempt.
    ///
    /// # Errors
    ///
    /// [`DurableError::Locked`] if another process or queue has the file open;
    /// [`DurableError::Corrupt`] if it is not a delayq database or fails its
    /// checks; [`DurableError::Io`] if the system refuses (permission, disk
    /// full, missing directory); [`DurableError::InvalidArgument`] for a zero
    /// `max_attempts`, `max_payload` over 1 GiB or a zero durability window.
    pub fn open(self, path: impl AsRef<Path>) -> Result<DurableQueue, DurableError> {
        if self.max_attempts == 0 {
            return Err(DurableError::InvalidArgument("max_attempts must be at least 1"));
        }
        if self.max_payload > 1 << 30 {
            return Err(DurableError::InvalidArgument("max_payload must be at most 1 GiB"));
        }
        if self.priority_aging.is_some_and(|step| step < Duration::from_millis(1)) {
            return Err(DurableError::InvalidArgument("a priority aging step must be at least 1 ms"));
        }
        if self.durability == Durability::Window(Duration::ZERO) {
            return Err(DurableError::InvalidArgument(
                "a durability window must be longer than zero (use Durability::Immediate)",
            ));
        }
        DurableQueue::open_with(self, path.as_ref())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.mailbox.close();
        let handle = self.writer.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

/// The one id of a one-job send.
pub(crate) fn first(ids: Result<Vec<JobId>, DurableError>) -> Result<JobId, DurableError> {
    ids?.first().copied().ok_or_else(|| DurableError::Storage("internal: a send returned no id".into()))
}

pub(crate) fn lease_nanos(lease: Duration) -> Result<u64, DurableError> {
    if lease.is_zero() {
        return Err(DurableError::InvalidArgument("a lease must be longer than zero"));
    }
    u64::try_from(lease.as_nanos())
        .map_err(|_| DurableError::InvalidArgument("a lease must be under 584 years"))
}

struct Recovered {
    timers: Vec<(u64, u64, u64)>,
    ready: Ready,
    counts: [u64; 3],
    next_id: u64,
}

/// Reads every record (a record that does not decode fails the open: no job
/// is skipped) and rearms the timers. Jobs leased by the previous owner are
/// orphans — one process owns the file, and it is gone — so their leases end
/// now, in one commit, and each is due again as its next attempt.
fn recover(db: &Database, path: &Path, aging_step: u64) -> Result<Recovered, DurableError> {
    let err = |e: redb::Error| storage_error(path, e, "recovering");
    let mut txn = db.begin_write().map_err(|e| err(e.into()))?;
    txn.set_durability(redb::Durability::Immediate).map_err(|e| DurableError::Storage(e.to_string()))?;
    let mut out = Recovered { timers: Vec::new(), ready: Ready::new(aging_step), counts: [0; 3], next_id: 1 };
    {
        let mut meta = txn.open_table(META).map_err(|e| err(e.into()))?;
        let format = meta.get(writer::META_FORMAT).map_err(|e| err(e.into()))?.map(|v| v.value());
        match format {
            Some(writer::FORMAT) => {}
            Some(other) => {
                return Err(DurableError::Corrupt {
                    path: path.to_path_buf(),
                    detail: format!("delayq format {other}, this version reads {}", writer::FORMAT),
                })
            }
            None => {
                meta.insert(writer::META_FORMAT, writer::FORMAT).map_err(|e| err(e.into()))?;
            }
        }
        let next = meta.get(writer::META_NEXT_ID).map_err(|e| err(e.into()))?.map(|v| v.value());
        out.next_id = next.unwrap_or(1).max(1);
        let mut jobs = txn.open_table(JOBS).map_err(|e| err(e.into()))?;
        let now = now_nanos();
        let mut orphans = Vec::new();
        for entry in jobs.iter().map_err(|e| err(e.into()))? {
            let (id, value) = entry.map_err(|e| err(e.into()))?;
            let id = id.value();
            let mut rec = Record::decode(value.value()).map_err(|detail| DurableError::Corrupt {
                path: path.to_path_buf(),
                detail: format!("job {id}: {detail}"),
            })?;
            out.next_id = out.next_id.max(id.saturating_add(1));
            out.counts[rec.state as usize] += 1;
            if rec.state == State::Leased {
                rec.gen += 1;
                rec.lease_until = now;
                orphans.push((id, rec.encode()));
            }
            if let Some(due) = rec.due() {
                out.timers.push((id, rec.gen, due));
            }
            out.ready.insert(id, &rec);
        }
        for (id, bytes) in orphans {
            jobs.insert(id, bytes.as_slice()).map_err(|e| err(e.into()))?;
        }
    }
    txn.commit().map_err(|e| err(e.into()))?;
    Ok(out)
}

/// Issue 33's primitives: `send_with` (priorities, uniqueness keys), `reserve_excluding`, the schedule store.
impl DurableQueue {
    /// Stores a job with options ([`JobQueue::send_with`](crate::JobQueue::send_with)).
    ///
    /// A job holds its key while it is in a state its send's
    /// [`UniqueStates`](crate::UniqueStates) covers and, with a period,
    /// until the period from its send has passed; the check and the store
    /// are one step of the writer (one commit), so racing sends of one key
    /// store one job.
    ///
    /// # Errors
    ///
    /// As [`send_kind_at`](Self::send_kind_at); [`DurableError::InvalidArgument`]
    /// for a bad option, naming it. Nothing is stored on an error.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::SystemTime;
    /// use delayq_durable::{SendOptions, Sent, Unique};
    /// # let dir = std::env::temp_dir().join(format!("delayq-doc-send-with-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let q = delayq_durable::DurableQueue::open(dir.join("send-with.redb")).unwrap();
    /// let opts = SendOptions::new().kind("invoice").priority(2).unique(Unique::new("invoice-7"));
    /// let first = q.send_with(b"7", SystemTime::now(), &opts).unwrap();
    /// assert!(first.created());
    /// assert_eq!(q.send_with(b"7", SystemTime::now(), &opts).unwrap(), Sent::Existing(first.id()));
    /// let job = q.reserve(std::time::Duration::from_secs(30)).unwrap();
    /// assert_eq!((job.id(), job.priority()), (first.id(), 2));
    /// # drop(q); std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn send_with(
        &self,
        payload: &[u8],
        at: SystemTime,
        opts: &SendOptions,
    ) -> Result<Sent, DurableError> {
        self.begin_send_with(payload, at, opts)?.wait()
    }

    pub(crate) fn begin_send_with(
        &self,
        payload: &[u8],
        at: SystemTime,
        opts: &SendOptions,
    ) -> Result<Waiting<Sent>, DurableError> {
        opts.check()?;
        let deadline = to_nanos(at)?;
        let payload = self.checked(payload)?.to_vec();
        self.check_open()?;
        let unique = opts.unique.as_ref().map(|u| (u.key.clone(), u.states, u.period_nanos()));
        let job = NewJob { kind: opts.kind.clone(), payload, deadline, priority: opts.priority, unique };
        self.begin(|reply| Op::SendWith { job, reply })
    }
    /// As [`reserve_or_stop`](Self::reserve_or_stop), but leases no job
    /// whose kind is in `exclude`: those stay pending, unleased, their
    /// attempts uncounted, for a consumer that takes them. Among the due
    /// jobs it may take, the usual order (priority, deadline, send order).
    ///
    /// A due job it excludes that reaches it (a timer goes to whichever
    /// consumer receives it) is parked for the consumers that take its kind,
    /// and wakes those already blocked, plain `reserve`s included; with only
    /// excluded jobs due, it sleeps (no CPU) until a job it may take is due
    /// or `stop` is raised.
    pub fn reserve_excluding(
        &self,
        lease: Duration,
        exclude: &[String],
        stop: &StopSignal,
    ) -> Result<Option<Job>, DurableError> {
        if exclude.is_empty() {
            return self.reserve_or_stop(lease, stop);
        }
        let exclude: Arc<[String]> = exclude.into();
        self.reserve_until(lease, None, Some(stop), Some(&exclude))
    }
    #[doc(hidden)]
    pub fn schedule_store(
        &self,
        name: &str,
        def: &[u8],
        next_run_us: Option<u64>,
    ) -> Result<(), DurableError> {
        crate::stored::check_store(name, def, self.inner.max_payload)?;
        if let Some(next) = next_run_us {
            to_nanos(from_us(next))?;
        }
        self.check_open()?;
        let (name, def) = (name.to_string(), def.to_vec());
        self.begin(|reply| Op::ScheduleStore { name, def, next_us: next_run_us, reply })?.wait().map(drop)
    }
    /// The schedule store: one schedule, as of the last commit.
    #[doc(hidden)]
    pub fn schedule_get(&self, name: &str) -> Result<Option<StoredSchedule>, DurableError> {
        check_schedule_name(name)?;
        Ok(self.read(|txn, path| writer::schedules::read(txn, path, Some(name)))?.pop())
    }
    /// The schedule store: every schedule, by name, as of the last commit.
    #[doc(hidden)]
    pub fn schedule_list(&self) -> Result<Vec<StoredSchedule>, DurableError> {
        self.read(|txn, path| writer::schedules::read(txn, path, None))
    }
    /// The schedule store: deletes a schedule and its pending tick job.
    #[doc(hidden)]
    pub fn schedule_remove(&self, name: &str) -> Result<bool, DurableError> {
        check_schedule_name(name)?;
        let name = name.to_string();
        self.begin(|reply| Op::ScheduleRemove { name, reply })?.wait()
    }
    /// The schedule store: fires one tick, compare-and-set on its next tick.
    #[doc(hidden)]
    pub fn schedule_fire(&self, name: &str, fire: &Fire) -> Result<bool, DurableError> {
        check_schedule_name(name)?;
        check_kind(&fire.kind)?;
        crate::options::check_priority(fire.priority)?;
        self.checked(&fire.payload)?;
        for us in fire.deadlines_us.iter().chain([&fire.next_run_us]) {
            to_nanos(from_us(*us))?;
        }
        self.check_open()?;
        let (name, fire) = (name.to_string(), fire.clone());
        self.begin(|reply| Op::ScheduleFire { name, fire, reply })?.wait()
    }
}
