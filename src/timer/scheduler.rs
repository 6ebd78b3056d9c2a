//! The scheduler: its handle, its timer table, the dispatcher thread and the
//! runs on the worker pool.
//!
//! Invariants, all under the `state` lock:
//! - A timer is *live* while its id is in `timers`; `len()` counts them. Cancel
//!   and shutdown remove ids; nothing else does, except the end of a one-shot's
//!   run (or a repeating timer whose queue is gone).
//! - A one-shot is *claimed* (`started`) by its run under the lock, in the same
//!   critical section that finds it live, before its callback is called; cancel
//!   never removes a claimed one-shot (it answers `false`). So for a one-shot
//!   exactly one of "cancel returned `true`" and "its callback started" holds.
//! - A live timer is either *pending* (`task` is `Some`; `key` names its id in the
//!   delay queue, or is `None` if its time is not representable and it never
//!   falls due) or *running* (`task` is `None`: a worker owns the callback).
//!   Only the dispatcher moves pending → running, only the run's worker moves it
//!   back (re-arming) or ends it, so a timer never runs concurrently with itself.
//! - `running` counts runs that passed the start check and have not finished;
//!   once `shut_down` is set no run passes the start check, so `shutdown` waits
//!   for `running` to drain and nothing starts after it returns.
//! - `stuck` counts the runs blocked in a `shutdown` called from inside their
//!   own callback (they cannot finish before it returns); `shutdown` waits while
//!   `running > stuck`, so two callbacks shutting down at once do not wait for
//!   each other forever.
//!
//! This layer uses the core through its public API, and the crate's `sync`
//! facade for its own locks and condition variable (it is not one of the
//! loom-checked protocols).

use super::metrics::Metrics;
use super::missed::MissedTicks;
use crate::contain::{dispose, drop_contained};
use crate::shrink::Shrink;
use crate::sync::{lock, thread::JoinHandle, AtomicU64, Condvar, IdCounter, Mutex, Ordering};
use crate::{Clock, Key, Receiver, Sender};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Ids handed to the dispatcher in one batch at most.
const BATCH: usize = 256;

/// Process-wide scheduler numbers, so that a `TimerId` of one scheduler never
/// names a timer of another.
static SCHEDULER_IDS: IdCounter = IdCounter::new();

thread_local! {
    /// The schedulers whose callbacks run on this thread right now (a callback
    /// that calls `shutdown` must not wait for itself).
    static RUNNING_HERE: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Names one timer of one [`Scheduler`], for [`cancel`](Scheduler::cancel).
///
/// Ids are never reused: each scheduler numbers its timers with a 64-bit counter
/// and has its own number, so a stale id never names another timer.
///
/// # Examples
///
/// ```
/// use delayq::timer::Scheduler;
/// use std::time::Duration;
///
/// let s = Scheduler::new();
/// let a = s.schedule_after(Duration::from_secs(60), || {});
/// let b = s.schedule_after(Duration::from_secs(60), || {});
/// assert_ne!(a, b);
/// assert!(s.cancel(a));
/// assert!(!s.cancel(a)); // stale: never another timer
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimerId {
    scheduler: u64,
    seq: u64,
}

impl fmt::Debug for TimerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TimerId({}:{})", self.scheduler, self.seq)
    }
}

/// Runs callbacks at given times, once or repeatedly, on a worker pool.
///
/// `Clone + Send + Sync`: clones share one scheduler. Dropping the last handle
/// is [`shutdown`](Scheduler::shutdown).
///
/// # How it works
///
/// A `Scheduler` is a `delayq` queue of timer ids, a dispatcher thread and a
/// [`rayon::ThreadPool`]:
///
/// ```text
/// schedule_* ──send_at(id)──▶ delayq queue ──recv──▶ dispatcher ──spawn──▶ rayon pool
///     ▲            (index, 2 proxy threads)         (id → callback)       (runs it)
///     └──────────────── a repeating run re-arms its id when it returns ◀─────┘
/// ```
///
/// - Scheduling is a map insert and one [`Sender::send_at`] (O(1) in the
///   queue's timing wheel, done by its proxy); cancelling is a map remove and one
///   [`Sender::cancel`] (O(1)).
/// - The dispatcher only looks ids up and hands callbacks to the pool, in the
///   order the queue delivers them (earliest time first); callbacks never run on
///   the queue's threads or the dispatcher, so a slow callback delays no other
///   timer, as long as the pool has a free worker ("task execution must not slow
///   the timer", as the persistent Go timing-wheel delay queue puts it). This is
///   the `tao` TimingWheel's `AddTimerInPool`, with a timer index the callers
///   never lock.
/// - Runs start in the order the queue delivers their ids (earliest time first;
///   exact on a [`MockClock`](crate::MockClock), where a step delivers everything
///   it made due in `(time, schedule order)`): with one worker thread they also
///   finish in that order.
/// - A one-shot's run claims the timer, under the scheduler's lock, before its
///   callback starts: from then on [`cancel`](Scheduler::cancel) answers `false`,
///   so `cancel`'s answer tells the caller whether the callback's side effects
///   can still happen.
/// - A repeating timer's next run is armed when its current run returns, so it
///   never runs concurrently with itself; what it does when it fell behind is its
///   [`MissedTicks`].
///
/// # Edge cases
///
/// - A `when` in the past is due at once. A `when` (or `now + delay`) too far in
///   the future for `Instant` (or beyond the queue's horizon, about 484 years
///   after the scheduler was built) never falls due: the timer stays pending, counted by [`len`](Scheduler::len), until
///   cancelled or shut down. Nothing panics and nothing spins.
/// - [`schedule_every`](Scheduler::schedule_every) with a zero `interval` makes a
///   one-shot timer (as `tao`'s `AddTimer` with `interval == 0`): it runs once at
///   `first`. A repeating timer whose next grid time `Instant` cannot hold stays
///   pending forever, like a far `when`.
/// - A panicking callback is caught and counted ([`panicked`](Scheduler::panicked));
///   a repeating timer whose callback panicked stays scheduled. So is a panic in
///   the `Drop` of a callback (of what it captured), wherever the scheduler drops
///   it: after its last run, on `cancel`, at shutdown. No panic of user code
///   reaches the pool's workers, the dispatcher, or the caller of `cancel` and
///   `shutdown`; the threads the scheduler owns survive all of them. (A closure
///   that panics *and* whose captures panic while that panic unwinds aborts the
///   process: Rust allows no second panic during an unwind.)
/// - After [`shutdown`](Scheduler::shutdown), `schedule_*` return an id that never
///   runs and is not counted.
///
/// # Examples
///
/// ```
/// use delayq::timer::Scheduler;
/// use std::sync::mpsc;
/// use std::time::Duration;
///
/// let s = Scheduler::new();
/// let (tx, rx) = mpsc::channel();
/// let tx2 = tx.clone();
/// s.schedule_after(Duration::from_millis(20), move || tx.send("later").unwrap());
/// s.schedule_after(Duration::from_millis(5), move || tx2.send("sooner").unwrap());
/// assert_eq!(rx.recv().unwrap(), "sooner");
/// assert_eq!(rx.recv().unwrap(), "later");
/// s.shutdown();
/// assert_eq!(s.len(), 0);
/// ```
#[derive(Clone)]
pub struct Scheduler {
    handle: Arc<Handle>,
}

/// Shared by the user's handles only: its drop is "the last handle dropped".
struct Handle {
    inner: Arc<Inner>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.inner.shutdown();
    }
}

/// Shared by the handles, the dispatcher and the pool's jobs.
pub(super) struct Inner {
    id: u64,
    clock: Clock,
    tx: Sender<u64>,
    rx: Receiver<u64>,
    /// The pool's worker threads (the pool itself belongs to the dispatcher),
    /// joined by the first shutdown that may join them.
    workers: Mutex<Vec<JoinHandle<()>>>,
    /// Their ids, kept after the handles are taken.
    worker_ids: Vec<crate::sync::thread::ThreadId>,
    state: Mutex<State>,
    /// Signalled when `running` drops, `stuck` rises or the workers are joined.
    idle: Condvar,
    /// Runs handed out by the dispatcher, in due order; each pool job takes the
    /// front one, so runs start in this order whatever order the pool picks
    /// its jobs in.
    runs: Mutex<VecDeque<Run>>,
    next_seq: AtomicU64,
    /// Shared with the pool's panic handler.
    panicked: Arc<AtomicU64>,
    /// What goes to the `metrics` facade (nothing without the feature); its
    /// handles are shared with the pool's panic handler.
    metrics: Metrics,
    dispatcher: Mutex<Option<JoinHandle<()>>>,
}

struct State {
    timers: HashMap<u64, Entry>,
    running: usize,
    /// Runs blocked in `shutdown` from inside their own callback.
    stuck: usize,
    shut_down: bool,
    /// A shutdown joined the pool's workers.
    workers_joined: bool,
}

impl State {
    /// Takes a timer out; the map gives back a burst's memory (`shrink.rs`;
    /// its keys are `u64`s: no user `Hash` runs).
    fn remove(&mut self, seq: u64) -> Option<Entry> {
        let e = self.timers.remove(&seq);
        self.timers.shrink_after_burst();
        e
    }
}

struct Entry {
    /// `None` while a worker runs it.
    task: Option<Task>,
    /// Its id's key in the delay queue, while pending there.
    key: Option<Key>,
    /// The grid time of its next run (`None`: never).
    due: Option<Instant>,
    /// A one-shot whose run has passed the start check: its callback is being
    /// called, and `cancel` can no longer prevent it.
    started: bool,
    /// `interval` (not zero) and policy of a repeating timer.
    every: Option<(Duration, MissedTicks)>,
}

enum Task {
    Once(Box<dyn FnOnce() + Send>),
    Every(Box<dyn FnMut() + Send>),
}

/// One run handed to the pool.
struct Run {
    seq: u64,
    due: Instant,
    every: Option<(Duration, MissedTicks)>,
    task: Task,
}

/// Counts a run as finished when dropped, however `execute` ends.
struct RunEnd<'a>(&'a Inner);

impl Drop for RunEnd<'_> {
    fn drop(&mut self) {
        lock(&self.0.state).running -= 1;
        self.0.idle.notify_all();
    }
}

/// Marks this thread as running a callback of scheduler `id` until dropped.
struct RunningHere(u64);

impl RunningHere {
    fn enter(id: u64) -> RunningHere {
        RUNNING_HERE.with(|r| r.borrow_mut().push(id));
        RunningHere(id)
    }

    /// How many callbacks of scheduler `id` this thread is inside.
    fn count(id: u64) -> usize {
        RUNNING_HERE.with(|r| r.borrow().iter().filter(|&&x| x == id).count())
    }
}

impl Drop for RunningHere {
    fn drop(&mut self) {
        RUNNING_HERE.with(|r| {
            let mut r = r.borrow_mut();
            if let Some(i) = r.iter().rposition(|&x| x == self.0) {
                r.remove(i);
            }
        });
    }
}

impl Inner {
    pub(super) fn new(
        clock: Clock,
        tx: Sender<u64>,
        rx: Receiver<u64>,
        workers: Vec<JoinHandle<()>>,
        panicked: Arc<AtomicU64>,
        metrics: Metrics,
    ) -> Inner {
        Inner {
            // Process-wide unique, so that a `TimerId` of one scheduler never
            // names a timer of another.
            id: SCHEDULER_IDS.next(),
            clock,
            tx,
            rx,
            worker_ids: workers.iter().map(|w| w.thread().id()).collect(),
            workers: Mutex::new(workers),
            state: Mutex::new(State {
                timers: HashMap::new(),
                running: 0,
                stuck: 0,
                shut_down: false,
                workers_joined: false,
            }),
            idle: Condvar::new(),
            runs: Mutex::new(VecDeque::new()),
            next_seq: AtomicU64::new(0),
            panicked,
            metrics,
            dispatcher: Mutex::new(None),
        }
    }

    pub(super) fn set_dispatcher(&self, handle: JoinHandle<()>) {
        *lock(&self.dispatcher) = Some(handle);
    }

    /// The dispatcher thread: due ids in, runs out to the pool, until shutdown
    /// closes and empties the queue; then it drops the pool, whose threads
    /// exit once their queued jobs are done.
    pub(super) fn dispatch(self: Arc<Self>, pool: rayon::ThreadPool) {
        let mut ids = Vec::with_capacity(BATCH);
        let mut runs = Vec::with_capacity(BATCH);
        while self.rx.recv_many(&mut ids, BATCH).is_ok() {
            {
                let mut st = lock(&self.state);
                if !st.shut_down {
                    for seq in ids.iter() {
                        let Some(e) = st.timers.get_mut(seq) else { continue }; // cancelled
                        let (Some(due), Some(_)) = (e.due, e.key) else { continue };
                        let Some(task) = e.task.take() else { continue };
                        e.key = None;
                        runs.push(Run { seq: *seq, due, every: e.every, task });
                    }
                }
            }
            ids.clear();
            let n = runs.len();
            lock(&self.runs).extend(runs.drain(..));
            for _ in 0..n {
                let me = self.clone();
                pool.spawn(move || me.run_next());
            }
        }
    }

    fn run_next(&self) {
        let run = {
            let mut runs = lock(&self.runs);
            let run = runs.pop_front();
            runs.shrink_after_burst();
            run
        };
        if let Some(run) = run {
            self.execute(run);
        }
    }

    /// `true` if timer `seq` may (still) run: live and not shut down.
    fn may_run(st: &State, seq: u64) -> bool {
        !st.shut_down && st.timers.contains_key(&seq)
    }

    fn execute(&self, run: Run) {
        {
            let mut st = lock(&self.state);
            if !Inner::may_run(&st, run.seq) {
                drop(st);
                self.drop_contained([run]); // the callback's drop is user code: no lock held
                return;
            }
            if let Task::Once(_) = run.task {
                // The claim: from here on `cancel` answers `false`, as the
                // callback is about to start (decided under the same lock).
                if let Some(e) = st.timers.get_mut(&run.seq) {
                    e.started = true;
                }
            }
            st.running += 1;
        }
        // Ends the run's count even if something below unwinds (nothing should:
        // user code runs under `call` and `drop_contained`).
        let _running = RunEnd(self);
        let here = RunningHere::enter(self.id);
        let leftover = match run.task {
            Task::Once(f) => {
                self.call(Some(run.due), f);
                lock(&self.state).remove(run.seq)
            }
            Task::Every(f) => {
                let (interval, missed) = run.every.expect("a repeating run has an interval");
                self.repeat(run.seq, run.due, interval, missed, f)
            }
        };
        // Before leaving the callback's count: a leftover that owns the last
        // handle shuts down from here, and must count this run as its own.
        self.drop_contained(leftover);
        drop(here);
    }

    /// Runs a repeating timer due at `due` (and its `Burst` catch-up), then
    /// re-arms it. Returns what is to be dropped with no lock held.
    fn repeat(
        &self,
        seq: u64,
        due: Instant,
        interval: Duration,
        missed: MissedTicks,
        mut f: Box<dyn FnMut() + Send>,
    ) -> Option<Entry> {
        self.call(Some(due), &mut f);
        let plan = missed.plan(due, self.clock.now(), interval);
        for k in 1..=plan.extra {
            if !Inner::may_run(&lock(&self.state), seq) {
                break;
            }
            // The missed grid time this catch-up run stands for (`extra` is
            // below `BURST_LIMIT`, so `k` fits a `u32`).
            let tick = u32::try_from(k).ok().and_then(|k| interval.checked_mul(k));
            self.call(tick.and_then(|d| due.checked_add(d)), &mut f);
        }
        let mut st = lock(&self.state);
        if !Inner::may_run(&st, seq) {
            return Some(Entry {
                task: Some(Task::Every(f)),
                key: None,
                due: None,
                started: false,
                every: None,
            });
        }
        // Sent under the lock, so that the dispatcher finds `key` set.
        let key = match plan.next {
            Some(t) => match self.tx.send_at(seq, t) {
                Ok(k) => Some(k),
                Err(_) => return st.remove(seq), // the queue is gone
            },
            None => None,
        };
        let e = st.timers.get_mut(&seq).expect("checked live above");
        *e = Entry {
            task: Some(Task::Every(f)),
            key,
            due: plan.next,
            started: false,
            every: Some((interval, missed)),
        };
        None
    }

    /// Runs a callback due at `due` (its grid time), catching and counting a
    /// panic; the metrics see it fire and return either way.
    fn call(&self, due: Option<Instant>, f: impl FnOnce()) {
        let fire = self.metrics.fire(&self.clock, due);
        let result = catch_unwind(AssertUnwindSafe(f));
        self.metrics.returned(&self.clock, fire);
        if let Err(payload) = result {
            self.count_panic(payload);
        }
    }

    /// Drops user values (callbacks and what they capture), catching and
    /// counting a panicking `Drop`: on a pool worker an escaped panic would abort
    /// the process (rayon's default), and on any path it would skip the rest of
    /// the bookkeeping (a run never counted as finished wedges `shutdown`).
    fn drop_contained<I: IntoIterator>(&self, values: I) {
        let panics = drop_contained(values);
        // Relaxed: a statistic, read on its own.
        self.panicked.fetch_add(panics, Ordering::Relaxed);
        self.metrics.panicked(panics);
    }

    fn count_panic(&self, payload: Box<dyn std::any::Any + Send>) {
        // Relaxed: a statistic, read on its own.
        self.panicked.fetch_add(1, Ordering::Relaxed);
        self.metrics.panicked(1);
        dispose(payload);
    }

    fn schedule(&self, when: Option<Instant>, task: Task, every: Option<(Duration, MissedTicks)>) -> TimerId {
        // Relaxed: a unique number is all we need.
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let id = TimerId { scheduler: self.id, seq };
        let mut st = lock(&self.state);
        if st.shut_down {
            drop(st);
            self.drop_contained([task]);
            return id;
        }
        // Sent under the lock, so that the dispatcher finds the entry.
        let key = match when.map(|t| self.tx.send_at(seq, t)) {
            Some(Ok(k)) => Some(k),
            Some(Err(_)) => {
                drop(st);
                self.drop_contained([task]);
                return id;
            }
            None => None,
        };
        st.timers.insert(seq, Entry { task: Some(task), key, due: when, started: false, every });
        drop(st);
        self.metrics.scheduled();
        id
    }

    fn cancel(&self, id: TimerId) -> bool {
        if id.scheduler != self.id {
            return false;
        }
        let entry = {
            let mut st = lock(&self.state);
            match st.timers.get(&id.seq) {
                // A one-shot whose callback has started: nothing left to prevent.
                Some(e) if e.started => return false,
                Some(_) => st.remove(id.seq),
                None => None,
            }
        };
        match entry {
            None => false,
            Some(e) => {
                self.metrics.cancelled();
                if let Some(key) = e.key {
                    // Frees the queue's slot; if the id was already delivered, the
                    // dispatcher finds no entry and skips it.
                    let _ = self.tx.cancel(key);
                }
                self.drop_contained([e]);
                true
            }
        }
    }

    pub(super) fn shutdown(&self) {
        let timers = {
            let mut st = lock(&self.state);
            st.shut_down = true;
            std::mem::take(&mut st.timers)
        };
        self.drop_contained(timers.into_values()); // user code: no lock held
        self.rx.close();
        drop(self.rx.take_pending());
        // Join the dispatcher before emptying `runs`, so that no run it hands
        // out afterwards keeps a callback alive past this call.
        let dispatcher = lock(&self.dispatcher).take();
        let mut on_dispatcher = false;
        if let Some(d) = dispatcher {
            on_dispatcher = d.thread().id() == crate::sync::thread::current().id();
            if !on_dispatcher {
                let _ = d.join();
            }
        }
        let queued: Vec<Run> = lock(&self.runs).drain(..).collect();
        self.drop_contained(queued);
        // A callback that shuts its own scheduler down cannot wait for itself,
        // nor for another callback doing the same (it waits for us): both count
        // as `stuck`, and we wait for the runs that are not.
        let mine = RunningHere::count(self.id);
        let mut st = lock(&self.state);
        if mine > 0 {
            st.stuck += mine;
            drop(st);
            self.idle.notify_all(); // the others may stop waiting for us
            st = lock(&self.state);
        }
        while st.running > st.stuck {
            st = self.idle.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.stuck -= mine;
        let others_stuck = st.stuck > 0;
        drop(st);
        // The dispatcher dropped the pool as it stopped: its threads exit once
        // their queued jobs (which find `runs` empty, and whatever a callback
        // handed to `rayon::spawn`) are done, and are joined here. Not on one
        // of them or the dispatcher (it would wait for itself), nor while a
        // callback of ours is inside its own shutdown (it may wait for this
        // caller once it returns): then they exit on their own. A second
        // caller waits for the first one's join.
        let me = crate::sync::thread::current().id();
        if on_dispatcher || others_stuck || mine > 0 || self.worker_ids.contains(&me) {
            return;
        }
        let workers = std::mem::take(&mut *lock(&self.workers));
        if workers.is_empty() {
            let mut st = lock(&self.state);
            while !st.workers_joined {
                st = self.idle.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            return;
        }
        for w in workers {
            let _ = w.join();
        }
        lock(&self.state).workers_joined = true;
        self.idle.notify_all();
    }
}

impl Scheduler {
    pub(super) fn from_inner(inner: Arc<Inner>) -> Scheduler {
        Scheduler { handle: Arc::new(Handle { inner }) }
    }

    fn inner(&self) -> &Inner {
        &self.handle.inner
    }

    /// A scheduler with one worker thread per available CPU, on the system clock.
    ///
    /// # Panics
    ///
    /// If the operating system refuses to start its threads
    /// ([`SchedulerBuilder::build`](super::SchedulerBuilder::build) reports that
    /// as a [`BuildError`](super::BuildError) instead).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::timer::Scheduler;
    ///
    /// let s = Scheduler::new();
    /// assert_eq!(s.len(), 0);
    /// assert_eq!(s.panicked(), 0);
    /// ```
    #[track_caller]
    pub fn new() -> Scheduler {
        match Scheduler::builder().build() {
            Ok(s) => s,
            Err(e) => panic!("delayq::timer::Scheduler::new: {e}"),
        }
    }

    /// A [`SchedulerBuilder`](super::SchedulerBuilder): worker threads, clock and name.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::timer::{BuildError, Scheduler};
    /// use delayq::MockClock;
    ///
    /// let s = Scheduler::builder().threads(2).clock(MockClock::new()).build().unwrap();
    /// assert_eq!(s.len(), 0);
    /// assert!(matches!(Scheduler::builder().threads(0).build(), Err(BuildError::ZeroThreads)));
    /// ```
    pub fn builder() -> super::SchedulerBuilder {
        super::SchedulerBuilder::default()
    }

    /// Runs `f` once at `when` (by the scheduler's clock) on a worker thread.
    /// A `when` in the past runs at once; one too far in the future never runs
    /// (see [Edge cases](Scheduler#edge-cases)). Never blocks.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::timer::Scheduler;
    /// use delayq::MockClock;
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    ///
    /// let clock = MockClock::new();
    /// let s = Scheduler::builder().clock(clock.clone()).build().unwrap();
    /// let (tx, rx) = mpsc::channel();
    /// s.schedule_at(clock.now() + Duration::from_secs(30), move || tx.send("ding").unwrap());
    /// assert_eq!(s.len(), 1);
    /// clock.advance(Duration::from_secs(30));
    /// assert_eq!(rx.recv().unwrap(), "ding");
    /// ```
    pub fn schedule_at(&self, when: Instant, f: impl FnOnce() + Send + 'static) -> TimerId {
        self.inner().schedule(Some(when), Task::Once(Box::new(f)), None)
    }

    /// Runs `f` once, `delay` from now (by the scheduler's clock). A delay too
    /// large for `Instant` never runs. Never blocks.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::timer::Scheduler;
    /// use std::sync::mpsc;
    /// use std::time::{Duration, Instant};
    ///
    /// let s = Scheduler::new();
    /// let (tx, rx) = mpsc::channel();
    /// let start = Instant::now();
    /// s.schedule_after(Duration::from_millis(10), move || tx.send(start.elapsed()).unwrap());
    /// assert!(rx.recv().unwrap() >= Duration::from_millis(10));
    ///
    /// let never = s.schedule_after(Duration::MAX, || unreachable!()); // never due; no panic
    /// assert!(s.cancel(never)); // it was pending
    /// ```
    pub fn schedule_after(&self, delay: Duration, f: impl FnOnce() + Send + 'static) -> TimerId {
        let when = self.inner().clock.now().checked_add(delay);
        self.inner().schedule(when, Task::Once(Box::new(f)), None)
    }

    /// Runs `f` at `first`, then every `interval` (`first + k·interval`), until
    /// cancelled or shut down; `missed` says what happens when it falls behind.
    /// The next run is armed when the current one returns, so runs of one timer
    /// never overlap. A zero `interval` runs `f` once. Never blocks.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::timer::{MissedTicks, Scheduler};
    /// use delayq::MockClock;
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    ///
    /// let clock = MockClock::new();
    /// let s = Scheduler::builder().clock(clock.clone()).build().unwrap();
    /// let (tx, rx) = mpsc::channel();
    /// let mut n = 0;
    /// let first = clock.now() + Duration::from_secs(1);
    /// s.schedule_every(first, Duration::from_secs(1), MissedTicks::Skip, move || {
    ///     n += 1;
    ///     tx.send(n).unwrap();
    /// });
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(rx.recv().unwrap(), 1);
    /// assert_eq!(s.len(), 1); // still scheduled
    /// ```
    pub fn schedule_every(
        &self,
        first: Instant,
        interval: Duration,
        missed: MissedTicks,
        f: impl FnMut() + Send + 'static,
    ) -> TimerId {
        if interval.is_zero() {
            return self.inner().schedule(Some(first), Task::Once(Box::new(f)), None);
        }
        self.inner().schedule(Some(first), Task::Every(Box::new(f)), Some((interval, missed)))
    }

    /// As [`schedule_every`](Scheduler::schedule_every), with the first run
    /// `first_delay` from now (by the scheduler's clock) instead of at an
    /// `Instant`. A delay too large for `Instant` never runs.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::timer::{MissedTicks, Scheduler};
    /// use delayq::MockClock;
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    ///
    /// let clock = MockClock::new();
    /// let s = Scheduler::builder().threads(1).clock(clock.clone()).build().unwrap();
    /// let (tx, rx) = mpsc::channel();
    /// let secs = Duration::from_secs;
    /// s.schedule_every_after(secs(2), secs(1), MissedTicks::Skip, move || tx.send(()).unwrap());
    /// clock.advance(secs(1));
    /// assert!(rx.try_recv().is_err()); // the first run is 2 s out
    /// clock.advance(secs(1));
    /// rx.recv().unwrap();
    /// ```
    pub fn schedule_every_after(
        &self,
        first_delay: Duration,
        interval: Duration,
        missed: MissedTicks,
        f: impl FnMut() + Send + 'static,
    ) -> TimerId {
        let first = self.inner().clock.now().checked_add(first_delay);
        if interval.is_zero() {
            return self.inner().schedule(first, Task::Once(Box::new(f)), None);
        }
        self.inner().schedule(first, Task::Every(Box::new(f)), Some((interval, missed)))
    }

    /// Cancels a timer: `true` if a run was prevented — for a one-shot, its
    /// callback will never start; for a repeating timer, no future run starts.
    ///
    /// - **One-shot**: `true` means its callback has not started and never will
    ///   (it is dropped); `false` means it has started (it may be running now,
    ///   and is counted by [`len`](Scheduler::len) until it returns) or
    ///   finished. Exactly one of "`cancel` returned `true`" and "the callback
    ///   started" holds, whatever the race: the run claims the timer under the
    ///   scheduler's lock before calling it (Go's `Timer.Stop`, Netty's
    ///   `HashedWheelTimeout.cancel`). From inside its own callback: `false`.
    /// - **Repeating**: `true` if a future run was prevented, which is whenever it
    ///   was live (pending or running): it is never re-armed. A run already
    ///   running, or past its start check at that instant (at most one), is not
    ///   interrupted; no other run starts. Works from inside its own callback.
    ///
    /// `false` also if the timer was cancelled before, belongs to another
    /// scheduler, or the scheduler is shut down. Waits only for the queue's proxy
    /// to drop the timer's entry.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::timer::Scheduler;
    /// use std::time::Duration;
    ///
    /// let s = Scheduler::new();
    /// let id = s.schedule_after(Duration::from_secs(60), || unreachable!());
    /// assert_eq!(s.len(), 1);
    /// assert!(s.cancel(id));
    /// assert_eq!(s.len(), 0);
    /// assert!(!s.cancel(id));
    /// ```
    pub fn cancel(&self, id: TimerId) -> bool {
        self.inner().cancel(id)
    }

    /// Timers scheduled and not finished or cancelled: pending ones (however
    /// far), running one-shots and repeating timers.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::timer::Scheduler;
    /// use std::time::Duration;
    ///
    /// let s = Scheduler::new();
    /// assert!(s.is_empty());
    /// s.schedule_after(Duration::from_secs(60), || {});
    /// assert_eq!(s.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        lock(&self.inner().state).timers.len()
    }

    /// `len() == 0`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(delayq::timer::Scheduler::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many callbacks, or drops of callbacks, have panicked so far (each
    /// panic is caught; the worker, the timer and the others go on).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::timer::Scheduler;
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    ///
    /// // One worker runs callbacks in due order: once the second has run, the
    /// // first has panicked and been counted.
    /// let s = Scheduler::builder().threads(1).build().unwrap();
    /// s.schedule_after(Duration::ZERO, || panic!("boom"));
    /// let (tx, rx) = mpsc::channel();
    /// s.schedule_after(Duration::from_millis(1), move || tx.send(()).unwrap());
    /// rx.recv().unwrap();
    /// assert_eq!(s.panicked(), 1);
    /// ```
    pub fn panicked(&self) -> u64 {
        // Relaxed: a statistic; a run's count is visible once `len` shows it ended.
        self.inner().panicked.load(Ordering::Relaxed)
    }

    /// Stops the scheduler: drops every pending timer (and its callback), waits
    /// for the callbacks running now to return, joins the scheduler's threads
    /// (its dispatcher and the pool's workers, so it also waits for work a
    /// callback handed to `rayon::spawn`, which runs on that pool), and
    /// returns; after that no callback starts. Idempotent; from inside a
    /// callback it waits for the other running callbacks only, and leaves the
    /// pool's threads to exit on their own (as does a call from any of the
    /// pool's threads, or one made while such a callback is inside its own
    /// shutdown). Dropping the last handle calls it.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::timer::Scheduler;
    /// use std::time::Duration;
    ///
    /// let s = Scheduler::new();
    /// s.schedule_after(Duration::from_secs(60), || unreachable!());
    /// s.shutdown();
    /// s.shutdown(); // idempotent
    /// assert_eq!(s.len(), 0);
    /// s.schedule_after(Duration::ZERO, || unreachable!()); // never runs
    /// assert_eq!(s.len(), 0);
    /// ```
    pub fn shutdown(&self) {
        self.inner().shutdown();
    }
}

impl Default for Scheduler {
    /// [`Scheduler::new`].
    fn default() -> Self {
        Scheduler::new()
    }
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = lock(&self.inner().state);
        f.debug_struct("Scheduler")
            .field("len", &st.timers.len())
            .field("running", &st.running)
            .field("shut_down", &st.shut_down)
            .field("panicked", &self.panicked())
            .finish()
    }
}
