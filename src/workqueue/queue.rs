//! The work queue: its handle, the ready FIFO with its dirty and processing
//! sets, and the delay stage (a `delayq` queue drained by the mover thread).
//!
//! Invariants, all under the `state` lock (client-go's, plus the delay stage):
//! - `dirty` holds every item that needs processing; `queue` holds, in FIFO
//!   order, each dirty item that is not being processed, once.
//! - `processing` holds the items handed out by `get` and not yet `done`; an
//!   item both dirty and processing goes back to `queue` on `done`.
//! - `waiting` holds each item of the delay stage once, with its key in the
//!   delay queue and its ready time; only the mover (an item arrived) and shut
//!   down (all dropped, counted) remove entries, so every delayed item ends up
//!   added or counted in `dropped_delayed`.
//! - No item is dropped under the lock: an item's `Drop` is user code, and may
//!   even drop the last handle (which takes the lock to shut down). Copies that
//!   are not kept are collected and dropped once the lock is released.
//!
//! This layer uses the core through its public API (including
//! [`Clock::subscribe`](crate::Clock::subscribe), whose listeners run in
//! subscription order: the queue's own flush first), and the crate's `sync`
//! facade for its locks and condition variables (it is not one of the
//! loom-checked protocols).

use super::metrics::Metrics;
use super::rate_limiter::RateLimiter;
use super::stats::{Samples, Stats};
use crate::clock::NEVER;
use crate::contain::{dispose, drop_contained};
use crate::shrink::Shrink;
use crate::sync::{lock, thread::JoinHandle, Condvar, Mutex, MutexGuard};
use crate::{Clock, Key, Receiver, Sender};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Due items the mover takes from the delay queue at a time.
const BATCH: usize = 256;

/// How long (real time) a mock clock's `advance` waits for the mover before it
/// gives up; reached only if the core fails to deliver a due item.
const MOCK_PATIENCE: Duration = Duration::from_secs(10);

/// A work queue in the style of Kubernetes client-go's `workqueue`: a FIFO of
/// items to process that de-duplicates, never hands one item to two workers at
/// once, delays items and rate-limits retries.
///
/// `Clone + Send + Sync`: clones share one queue. Dropping the last handle is
/// [`shut_down`](WorkQueue::shut_down).
///
/// # How it works
///
/// ```text
/// add ─────────────────────────────────────────────┐
/// add_after / add_rate_limited ─▶ delay stage ──────┤  (de-dup via `dirty`)
///        (delayq queue: send_at, reschedule;  mover ▼
///         one entry per item)                ready FIFO ──get──▶ processing ──done──┐
///                                                 ▲                                 │
///                                                 └──── if added again meanwhile ◀──┘
/// ```
///
/// - [`add`](WorkQueue::add): an item already *dirty* (waiting in the FIFO, or
///   added again while processing) is not added twice; an item being processed
///   is marked dirty and goes back to the end of the FIFO when it is `done`.
///   Items come out of [`get`](WorkQueue::get) in the order they became ready.
/// - The delay stage is a `delayq` queue of items and one *mover* thread that
///   receives due items and adds them. [`add_after`](WorkQueue::add_after) with
///   a zero delay is `add`; for an item already in the delay stage the earlier
///   ready time wins ([`Sender::reschedule`]), and it stays there once. An
///   item may be both ready and in the delay stage; when it arrives, `add`
///   de-duplicates it.
/// - Costs: `add`, `get`, `done` are O(1) under one lock; `add_after` adds one
///   `send_at` (O(1) in the core's timing wheel, applied by its proxy thread) or
///   one `reschedule` round trip to that proxy.
///
/// # Shut down
///
/// After [`shut_down`](WorkQueue::shut_down) `add`, `add_after` and
/// `add_rate_limited` are ignored; `get` returns the remaining ready items (and
/// items re-queued by `done`), then `None`. Items still in the delay stage are
/// dropped, as client-go drops them, but never silently: they are counted in
/// [`Stats::dropped_delayed`]. [`shut_down_with_drain`](WorkQueue::shut_down_with_drain)
/// does the same and then waits until every item handed out by `get` is `done`.
///
/// # Mock clock
///
/// On a [`MockClock`](crate::MockClock), `advance` returns once the items it
/// made ready are in the FIFO, so `len()` right after it counts them.
///
/// # Panicking items
///
/// An item's `Drop`, `Hash`, `Eq` or `Clone` that panics on the queue's own paths
/// (the mover thread, shut down, the last handle's drop) is caught and counted in
/// [`Stats::panics`]; the mover thread survives it and goes on with the next item,
/// and shut down completes. An item whose `Hash` or `Eq` panicked in the mover is
/// not added; it stays counted in [`Stats::delayed`] until shut down drops it. On
/// your own thread (`add`, `get`, `done`, ...) such a panic reaches you, after the
/// queue's state is consistent again. (A value whose `Drop` panics while another
/// panic unwinds aborts the process: Rust allows no second panic then.)
///
/// # Examples
///
/// ```
/// use delayq::workqueue::WorkQueue;
/// use std::thread;
///
/// let q = WorkQueue::new();
/// for job in ["a", "b", "a"] {
///     q.add(job.to_string());
/// }
/// assert_eq!(q.len(), 2); // "a" is waiting already
/// let worker = {
///     let q = q.clone();
///     thread::spawn(move || {
///         let mut seen = Vec::new();
///         while let Some(job) = q.get() {
///             seen.push(job.clone());
///             q.done(&job);
///         }
///         seen
///     })
/// };
/// q.shut_down_with_drain();
/// assert_eq!(worker.join().unwrap(), ["a", "b"]);
/// ```
pub struct WorkQueue<K> {
    handle: Arc<Handle<K>>,
}

/// Shared by the user's handles only: its drop is "the last handle dropped".
struct Handle<K> {
    inner: Arc<Inner<K>>,
    /// `inner.shut_down(false)`, callable without `K`'s bounds.
    shut_down: Box<dyn Fn() + Send + Sync>,
    mover: Mutex<Option<JoinHandle<()>>>,
    _subscription: crate::Subscription,
}

impl<K> Drop for Handle<K> {
    fn drop(&mut self) {
        (self.shut_down)();
        let mover = lock(&self.mover).take();
        if let Some(m) = mover {
            // An item's `Drop` on the mover could drop the last handle.
            if m.thread().id() != crate::sync::thread::current().id() {
                let _ = m.join();
            }
        }
        // Nobody can `get` or `done` any more: the FIFO's items and the dirty
        // and processing sets' copies are dropped here, each on its own, so
        // that a panicking `Drop` is caught and counted rather than thrown out
        // of this drop (and a second one abort the process mid-unwind).
        let (queue, dirty, processing) = {
            let mut st = lock(&self.inner.state);
            let st = &mut *st;
            (std::mem::take(&mut st.queue), std::mem::take(&mut st.dirty), std::mem::take(&mut st.processing))
        };
        let panics = drop_contained(queue)
            + drop_contained(dirty.into_keys())
            + drop_contained(processing.into_keys());
        if panics > 0 {
            lock(&self.inner.state).panics += panics;
        }
    }
}

pub(super) struct Inner<K> {
    clock: Clock,
    limiter: Box<dyn RateLimiter<K>>,
    tx: Sender<K>,
    rx: Receiver<K>,
    state: Mutex<State<K>>,
    /// `get` waiters: an item is ready, or shut down.
    ready: Condvar,
    /// `shut_down_with_drain` waiters: nothing is processing, or the drain was cancelled.
    idle: Condvar,
    /// A mock clock's `advance`: the mover moved items.
    moved: Condvar,
}

struct State<K> {
    queue: VecDeque<K>,
    /// Dirty items, with the time they were added (for the queue latency).
    dirty: HashMap<K, Instant>,
    /// Items being processed, with the time `get` handed them out.
    processing: HashMap<K, Instant>,
    waiting: HashMap<K, Waiting>,
    shutting_down: bool,
    drain: bool,
    adds: u64,
    retries: u64,
    dropped_delayed: u64,
    /// User code that panicked on the mover or in shut down, caught.
    panics: u64,
    latency: Samples,
    work: Samples,
    /// What goes to the `metrics` facade (nothing without the feature).
    metrics: Metrics,
    /// A user `Hash` panicked while the maps were shrunk: they are not
    /// shrunk any more (`State::shrink`).
    no_shrink: bool,
}

impl<K: Hash + Eq> State<K> {
    /// After removals: the FIFO and the maps give back a burst's memory
    /// (`shrink.rs`). Shrinking a map rehashes its keys; a `Hash` that panics
    /// there is caught (the map stays valid) and counted, and the queue stops
    /// shrinking rather than fail the call that removed an item.
    fn shrink(&mut self) {
        if self.no_shrink {
            return;
        }
        self.queue.shrink_after_burst();
        let (dirty, processing, waiting) = (&mut self.dirty, &mut self.processing, &mut self.waiting);
        let shrunk = catch_unwind(AssertUnwindSafe(|| {
            dirty.shrink_after_burst();
            processing.shrink_after_burst();
            waiting.shrink_after_burst();
        }));
        if shrunk.is_err() {
            self.panics += 1;
            self.no_shrink = true;
        }
    }
}

/// An item in the delay stage.
struct Waiting {
    key: Key,
    /// `None`: never ready (too far for `Instant`, or at or past the core
    /// queue's horizon, where its deadline never falls due).
    ready: Option<Instant>,
}

fn wait<'a, T>(cv: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cv.wait(guard).unwrap_or_else(|p| p.into_inner())
}

/// `a` is strictly earlier than `b`, where `None` is "never".
fn earlier(a: Option<Instant>, b: Option<Instant>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a < b,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> Inner<K> {
    pub(super) fn new(
        clock: Clock,
        limiter: Box<dyn RateLimiter<K>>,
        tx: Sender<K>,
        rx: Receiver<K>,
        name: &str,
    ) -> Self {
        let metrics = Metrics::new(name, clock.now());
        Inner {
            clock,
            limiter,
            tx,
            rx,
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashMap::new(),
                processing: HashMap::new(),
                waiting: HashMap::new(),
                shutting_down: false,
                drain: false,
                adds: 0,
                retries: 0,
                dropped_delayed: 0,
                panics: 0,
                latency: Samples::default(),
                work: Samples::default(),
                metrics,
                no_shrink: false,
            }),
            ready: Condvar::new(),
            idle: Condvar::new(),
            moved: Condvar::new(),
        }
    }

    /// The mover thread: due items out of the delay queue, into the FIFO, until
    /// shut down closes and empties the delay queue.
    ///
    /// Every step that runs user code (the item's `Hash` and `Eq` in the maps,
    /// `Clone`, `Drop`) is caught, one item at a time: the mover survives them all
    /// and goes on with the next item (reliability: a panicking `Drop` once
    /// killed it, and later delayed items never became ready).
    pub(super) fn run_mover(self: Arc<Self>) {
        let mut due = Vec::with_capacity(BATCH);
        let mut unused = Vec::new();
        while self.rx.recv_many_entries(&mut due, BATCH).is_ok() {
            let mut added = 0;
            {
                let mut st = lock(&self.state);
                let now = self.clock.now();
                for entry in due.drain(..) {
                    let key = entry.key();
                    let arrived = catch_unwind(AssertUnwindSafe(|| {
                        Inner::arrive(&mut st, entry.into_inner(), now, &mut unused)
                    }));
                    match arrived {
                        Ok(true) => added += 1,
                        Ok(false) => {}
                        Err(payload) => {
                            st.panics += 1;
                            dispose(payload);
                            // Its entry could not be found by hashing: mark it by
                            // its delay-queue key (no user code), so that clock
                            // steps stop waiting for it. Shut down drops it.
                            for w in st.waiting.values_mut().filter(|w| w.key == key) {
                                w.ready = None;
                            }
                        }
                    }
                }
                // The whole batch at once (and any add a panic cut short).
                let (adds, depth) = (st.adds, st.dirty.len());
                st.metrics.added(adds, depth, now);
            }
            self.wake_getters(added);
            self.moved.notify_all();
            // With no lock held; this may drop the last handle (see `Handle`).
            let panics = drop_contained(unused.drain(..));
            if panics > 0 {
                lock(&self.state).panics += panics;
            }
        }
    }

    /// An item arrived from the delay stage: out of `waiting`, into the FIFO
    /// (`add`). `true` if the FIFO grew.
    fn arrive(st: &mut State<K>, item: K, now: Instant, unused: &mut Vec<K>) -> bool {
        match st.waiting.remove_entry(&item) {
            Some((copy, _)) => {
                st.shrink();
                unused.push(copy);
                Inner::add_locked(st, item, now, unused)
            }
            // Shut down dropped (and counted) it already.
            None => {
                unused.push(item);
                false
            }
        }
    }

    /// A mock clock moved: waits until the mover has moved every item the
    /// step made ready (the queue's own listener, subscribed first, has put
    /// them in its consumers' ring already).
    pub(super) fn clock_moved(&self) {
        let now = self.clock.now();
        let give_up = Instant::now() + MOCK_PATIENCE;
        let mut st = lock(&self.state);
        while !st.shutting_down && st.waiting.values().any(|w| w.ready.is_some_and(|r| r <= now)) {
            let left = give_up.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st = self.moved.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// client-go's `Add`, under the lock. `true` if the FIFO grew. An item not
    /// kept (shutting down, or dirty already) goes to `unused`, for the caller
    /// to drop once the lock is released.
    fn add_locked(st: &mut State<K>, item: K, now: Instant, unused: &mut Vec<K>) -> bool {
        if st.shutting_down || st.dirty.contains_key(&item) {
            unused.push(item);
            return false;
        }
        st.adds += 1;
        if st.processing.contains_key(&item) {
            st.dirty.insert(item, now); // `done` re-queues it
            return false;
        }
        st.dirty.insert(item.clone(), now);
        st.queue.push_back(item);
        true
    }

    fn wake_getters(&self, n: usize) {
        match n {
            0 => {}
            1 => self.ready.notify_one(),
            _ => self.ready.notify_all(),
        }
    }

    fn add(&self, item: K) {
        let mut unused = Vec::new();
        let added = {
            let mut st = lock(&self.state);
            let now = self.clock.now();
            let added = Inner::add_locked(&mut st, item, now, &mut unused);
            let (adds, depth) = (st.adds, st.dirty.len());
            st.metrics.added(adds, depth, now);
            added
        };
        self.wake_getters(usize::from(added));
        drop(unused);
    }

    fn add_after(&self, item: K, delay: Duration) {
        let mut unused = Vec::new();
        let mut st = lock(&self.state);
        if st.shutting_down {
            drop(st);
            return;
        }
        st.retries += 1;
        let retries = st.retries;
        st.metrics.retried(retries);
        let now = self.clock.now();
        if delay.is_zero() {
            let added = Inner::add_locked(&mut st, item, now, &mut unused);
            let (adds, depth) = (st.adds, st.dirty.len());
            st.metrics.added(adds, depth, now);
            drop(st);
            self.wake_getters(usize::from(added));
            return;
        }
        // The core never delivers a deadline at or past its horizon: neither
        // may a clock step wait for one (`clock_moved`).
        let ready = now.checked_add(delay).filter(|&t| self.tx.shared().deadline_ticks(t) != NEVER);
        if let Some(w) = st.waiting.get_mut(&item) {
            if let (true, Some(t)) = (earlier(ready, w.ready), ready) {
                // `false`: the item was delivered already and the mover is
                // adding it: readier than asked.
                if self.tx.reschedule(w.key, t) {
                    w.ready = ready;
                }
            }
            drop(st);
            return;
        }
        // Sent under the lock, so that the mover finds the entry. An unbounded
        // queue does not block a send; a delay past `Instant` or the horizon
        // is never due.
        let sent = match ready {
            Some(t) => self.tx.send_at(item.clone(), t),
            None => self.tx.send_after(item.clone(), delay),
        };
        match sent {
            Ok(key) => {
                st.waiting.insert(item, Waiting { key, ready });
            }
            // Closed: only by shut down, checked above.
            Err(e) => {
                st.dropped_delayed += 1;
                unused.extend([item, e.0]);
            }
        }
        drop(st);
        drop(unused);
    }

    fn get(&self) -> Option<K> {
        let mut st = lock(&self.state);
        loop {
            if let Some(item) = st.queue.pop_front() {
                let now = self.clock.now();
                // The dirty set's copy moves to the processing set: no clone,
                // and nothing dropped under the lock. (Every queued item is dirty.)
                let (copy, waited) = match st.dirty.remove_entry(&item) {
                    Some((copy, added)) => {
                        let waited = now.saturating_duration_since(added);
                        st.latency.record(waited);
                        (copy, Some(waited))
                    }
                    None => (item.clone(), None),
                };
                if let Some(before) = st.processing.insert(copy, now) {
                    st.metrics.finished(before);
                }
                st.metrics.started(now);
                let depth = st.dirty.len();
                st.metrics.got(waited, depth, now);
                st.shrink();
                return Some(item);
            }
            if st.shutting_down {
                return None;
            }
            st = wait(&self.ready, st);
        }
    }

    fn done(&self, item: &K) {
        let mut st = lock(&self.state);
        let Some((copy, started)) = st.processing.remove_entry(item) else { return };
        let now = self.clock.now();
        st.work.record(now.saturating_duration_since(started));
        st.metrics.done(started, now);
        // The processing set's copy goes back to the FIFO, or is dropped
        // once the lock is released.
        let (requeued, unused) = if st.dirty.contains_key(&copy) {
            st.queue.push_back(copy);
            (true, None)
        } else {
            (false, Some(copy))
        };
        // Whether or not it was re-queued: a drain waits for `processing` only.
        let idle = st.processing.is_empty();
        st.shrink();
        drop(st);
        if requeued {
            self.ready.notify_one();
        }
        if idle {
            self.idle.notify_all();
        }
        drop(unused);
    }

    pub(super) fn shut_down(&self, drain: bool) {
        let dropped = {
            let mut st = lock(&self.state);
            st.shutting_down = true;
            st.drain = drain;
            let dropped = std::mem::take(&mut st.waiting);
            st.dropped_delayed += dropped.len() as u64;
            dropped
        };
        self.ready.notify_all();
        self.idle.notify_all();
        self.moved.notify_all();
        // User code: a panicking `Drop` must not cut shut down short (the mover
        // would never be told to stop, and the last handle's join would hang).
        let mut panics = drop_contained(dropped.into_keys());
        // The mover drops (uncounted again) whatever was due already, then stops.
        self.rx.close();
        panics += drop_contained(self.rx.take_pending().into_iter().map(|(_, item)| item));
        if panics > 0 {
            lock(&self.state).panics += panics;
        }
        if drain {
            let mut st = lock(&self.state);
            while st.drain && !st.processing.is_empty() {
                st = wait(&self.idle, st);
            }
        }
    }

    fn stats(&self) -> Stats {
        let mut st = lock(&self.state);
        let now = self.clock.now();
        st.metrics.refresh(now);
        let running = st.processing.values().map(|&t| now.saturating_duration_since(t));
        let (unfinished, longest) = running
            .fold((Duration::ZERO, Duration::ZERO), |(sum, max), d| (sum.saturating_add(d), max.max(d)));
        Stats {
            depth: st.queue.len(),
            delayed: st.waiting.len(),
            processing: st.processing.len(),
            adds: st.adds,
            retries: st.retries,
            dropped_delayed: st.dropped_delayed,
            panics: st.panics,
            queue_latency: st.latency.summary(),
            work_duration: st.work.summary(),
            unfinished_work: unfinished,
            longest_running: longest,
        }
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<K> {
    pub(super) fn from_parts(
        inner: Arc<Inner<K>>,
        mover: JoinHandle<()>,
        subscription: crate::Subscription,
    ) -> Self {
        let me = inner.clone();
        let shut_down = Box::new(move || me.shut_down(false));
        let mover = Mutex::new(Some(mover));
        WorkQueue { handle: Arc::new(Handle { inner, shut_down, mover, _subscription: subscription }) }
    }

    fn inner(&self) -> &Inner<K> {
        &self.handle.inner
    }

    /// A work queue with [`default_rate_limiter`](super::default_rate_limiter),
    /// on the system clock.
    ///
    /// # Panics
    ///
    /// If the operating system refuses to start its threads
    /// ([`WorkQueueBuilder::build`](super::WorkQueueBuilder::build) reports that
    /// as a [`BuildError`](super::BuildError) instead).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::WorkQueue;
    ///
    /// let q = WorkQueue::<u32>::new();
    /// assert_eq!(q.len(), 0);
    /// assert!(!q.is_shutting_down());
    /// ```
    #[track_caller]
    pub fn new() -> Self {
        match WorkQueue::builder().build() {
            Ok(q) => q,
            Err(e) => panic!("delayq::workqueue::WorkQueue::new: {e}"),
        }
    }

    /// A [`WorkQueueBuilder`](super::WorkQueueBuilder): rate limiter, clock and name.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::{FastSlow, WorkQueue};
    /// use delayq::MockClock;
    /// use std::time::Duration;
    ///
    /// let q = WorkQueue::builder()
    ///     .rate_limiter(FastSlow::new(Duration::from_millis(1), Duration::from_secs(1), 3))
    ///     .clock(MockClock::new())
    ///     .build()
    ///     .unwrap();
    /// q.add_rate_limited(1u64);
    /// assert_eq!(q.num_requeues(&1), 1);
    /// ```
    pub fn builder() -> super::WorkQueueBuilder<K> {
        super::WorkQueueBuilder::default()
    }

    /// Adds `item` for processing: to the end of the FIFO, unless it is waiting
    /// there already (then nothing happens) or is being processed (then it goes
    /// back to the FIFO when it is [`done`](WorkQueue::done)). Ignored after shut
    /// down. Never blocks (beyond the queue's lock).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::WorkQueue;
    ///
    /// let q = WorkQueue::new();
    /// q.add(1);
    /// q.add(1);
    /// assert_eq!(q.len(), 1);
    /// let one = q.get().unwrap();
    /// q.add(1); // being processed: marked, not queued
    /// assert_eq!(q.len(), 0);
    /// q.done(&one);
    /// assert_eq!(q.len(), 1); // back for another round
    /// ```
    pub fn add(&self, item: K) {
        self.inner().add(item)
    }

    /// Adds `item` once `delay` has passed (by the queue's clock). A zero delay
    /// is [`add`](WorkQueue::add). If `item` is in the delay stage already, it
    /// stays there once, with the earlier of the two ready times. A delay too
    /// large for `Instant`, or one that ends at or past the queue's horizon
    /// (about 484 years after it was built, as for [`Sender::send_at`]), never
    /// makes it ready. Ignored after shut down.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::WorkQueue;
    /// use delayq::MockClock;
    /// use std::time::Duration;
    ///
    /// let clock = MockClock::new();
    /// let q = WorkQueue::builder().clock(clock.clone()).build().unwrap();
    /// q.add_after("x", Duration::from_secs(10));
    /// q.add_after("x", Duration::from_secs(5)); // earlier wins
    /// q.add_after("x", Duration::from_secs(8)); // later loses
    /// clock.advance(Duration::from_secs(4));
    /// assert_eq!(q.len(), 0);
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(q.len(), 1);
    /// clock.advance(Duration::from_secs(10));
    /// assert_eq!(q.len(), 1); // only once
    /// ```
    pub fn add_after(&self, item: K, delay: Duration) {
        self.inner().add_after(item, delay)
    }

    /// `add_after(item, limiter.when(&item))`: retries `item` after the wait its
    /// rate limiter asks for (counting a failure). Ignored after shut down (the
    /// limiter is not asked then).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::{ExponentialFailure, WorkQueue};
    /// use delayq::MockClock;
    /// use std::time::Duration;
    ///
    /// let clock = MockClock::new();
    /// let ms = Duration::from_millis;
    /// let q = WorkQueue::builder()
    ///     .rate_limiter(ExponentialFailure::new(ms(5), ms(1000)))
    ///     .clock(clock.clone())
    ///     .build()
    ///     .unwrap();
    /// q.add_rate_limited("job"); // waits 5 ms
    /// clock.advance(ms(4));
    /// assert_eq!(q.len(), 0);
    /// clock.advance(ms(1));
    /// assert_eq!(q.len(), 1);
    /// assert_eq!(q.num_requeues(&"job"), 1);
    /// ```
    pub fn add_rate_limited(&self, item: K) {
        if self.is_shutting_down() {
            return;
        }
        let delay = self.inner().limiter.when(&item);
        self.inner().add_after(item, delay)
    }

    /// Tells the rate limiter that `item` is finished with (it succeeded, or you
    /// gave up on it): its failures are forgotten and its entry removed. It does
    /// not remove the item from the queue.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::WorkQueue;
    ///
    /// let q = WorkQueue::new();
    /// q.add_rate_limited(9);
    /// q.add_rate_limited(9);
    /// assert_eq!(q.num_requeues(&9), 2);
    /// q.forget(&9);
    /// assert_eq!(q.num_requeues(&9), 0);
    /// ```
    pub fn forget(&self, item: &K) {
        self.inner().limiter.forget(item)
    }

    /// How many times `item` was rate-limited since it was last forgotten.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::WorkQueue;
    ///
    /// let q = WorkQueue::<&str>::new();
    /// assert_eq!(q.num_requeues(&"never seen"), 0);
    /// ```
    pub fn num_requeues(&self, item: &K) -> usize {
        self.inner().limiter.num_requeues(item)
    }

    /// Blocks until an item is ready, takes it from the front of the FIFO and
    /// marks it as being processed: call [`done`](WorkQueue::done) with it when
    /// finished. Returns `None` once the queue is shutting down and no ready
    /// item is left.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::WorkQueue;
    ///
    /// let q = WorkQueue::new();
    /// q.add("first");
    /// q.add("second");
    /// q.shut_down();
    /// assert_eq!(q.get(), Some("first"));
    /// assert_eq!(q.get(), Some("second"));
    /// assert_eq!(q.get(), None);
    /// ```
    pub fn get(&self) -> Option<K> {
        self.inner().get()
    }

    /// Marks `item` as processed. If it was added again meanwhile, it goes back
    /// to the end of the FIFO. Does nothing for an item that is not being
    /// processed.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::WorkQueue;
    ///
    /// let q = WorkQueue::new();
    /// q.add('a');
    /// let a = q.get().unwrap();
    /// assert_eq!(q.stats().processing, 1);
    /// q.done(&a);
    /// assert_eq!(q.stats().processing, 0);
    /// assert_eq!(q.len(), 0);
    /// ```
    pub fn done(&self, item: &K) {
        self.inner().done(item)
    }

    /// Ready items: in the FIFO, not delayed, not being processed (client-go's
    /// `Len`).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::WorkQueue;
    /// use std::time::Duration;
    ///
    /// let q = WorkQueue::new();
    /// q.add(1);
    /// q.add_after(2, Duration::from_secs(60));
    /// assert_eq!(q.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        lock(&self.inner().state).queue.len()
    }

    /// `len() == 0`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(delayq::workqueue::WorkQueue::<u8>::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shuts the queue down: later adds are ignored, items in the delay stage
    /// are dropped (and counted in [`Stats::dropped_delayed`]), blocked `get`s
    /// return the remaining ready items, then `None`. Does not wait for items
    /// being processed; cancels a [`shut_down_with_drain`](WorkQueue::shut_down_with_drain)
    /// in progress (it returns). Idempotent.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::WorkQueue;
    /// use std::time::Duration;
    ///
    /// let q = WorkQueue::new();
    /// q.add("ready");
    /// q.add_after("later", Duration::from_secs(60));
    /// q.shut_down();
    /// q.add("ignored");
    /// assert!(q.is_shutting_down());
    /// assert_eq!(q.get(), Some("ready"));
    /// assert_eq!(q.get(), None);
    /// assert_eq!(q.stats().dropped_delayed, 1);
    /// ```
    pub fn shut_down(&self) {
        self.inner().shut_down(false)
    }

    /// As [`shut_down`](WorkQueue::shut_down), then blocks until every item
    /// handed out by `get` is [`done`](WorkQueue::done) (client-go's
    /// `ShutDownWithDrain`: it waits for the items being processed, and
    /// returns at once if there are none; workers that go on calling `get`
    /// still receive the remaining ready items, and keep it waiting while they
    /// process them). It returns as soon as nothing is being processed, even if
    /// a `done` put an item that was added again meanwhile back in the FIFO. A
    /// later `shut_down` makes it return. Called by a worker that holds an item
    /// it has not marked `done`, it waits for itself forever (as in client-go).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::WorkQueue;
    /// use std::thread;
    ///
    /// let q = WorkQueue::new();
    /// q.add(1);
    /// let one = q.get().unwrap();
    /// let worker = {
    ///     let q = q.clone();
    ///     thread::spawn(move || q.done(&one))
    /// };
    /// q.shut_down_with_drain(); // returns once `done(&1)` ran
    /// assert_eq!(q.stats().processing, 0);
    /// worker.join().unwrap();
    /// ```
    pub fn shut_down_with_drain(&self) {
        self.inner().shut_down(true)
    }

    /// `true` once `shut_down` or `shut_down_with_drain` was called.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::WorkQueue;
    ///
    /// let q = WorkQueue::<u8>::new();
    /// assert!(!q.is_shutting_down());
    /// q.shut_down();
    /// assert!(q.is_shutting_down());
    /// ```
    pub fn is_shutting_down(&self) -> bool {
        lock(&self.inner().state).shutting_down
    }

    /// A snapshot of the queue's metrics: see [`Stats`].
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::WorkQueue;
    ///
    /// let q = WorkQueue::new();
    /// q.add("a");
    /// q.add("b");
    /// let s = q.stats();
    /// assert_eq!((s.depth, s.adds, s.retries), (2, 2, 0));
    /// ```
    pub fn stats(&self) -> Stats {
        self.inner().stats()
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> Default for WorkQueue<K> {
    /// [`WorkQueue::new`].
    fn default() -> Self {
        WorkQueue::new()
    }
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        WorkQueue { handle: self.handle.clone() }
    }
}

impl<K> fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = lock(&self.handle.inner.state);
        f.debug_struct("WorkQueue")
            .field("len", &st.queue.len())
            .field("delayed", &st.waiting.len())
            .field("processing", &st.processing.len())
            .field("shutting_down", &st.shutting_down)
            .finish()
    }
}
