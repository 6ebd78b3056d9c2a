//! Building a queue: `bounded`, `unbounded`, `Builder`; starting and joining the
//! two proxy threads.

use crate::clock::{Clock, Subscription};
use crate::error::BuildError;
use crate::index::Kind;
use crate::oneshot;
use crate::receiver::Receiver;
use crate::sender::Sender;
use crate::shared::{Shared, Signals};
use crate::sync::{thread, Parker};
use crate::waiters::Waiters;
use crate::wakeup::Bell;
use crate::{dequeue, enqueue};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Ingress ring slots: a batching buffer; overflow spills, it never blocks.
const INGRESS_SLOTS: usize = 4096;
/// Egress ring slots: due items staged for consumers.
const EGRESS_SLOTS: usize = 1024;

/// Creates a queue that holds at most `capacity` undelivered items.
///
/// [`send_at`](Sender::send_at) blocks while `capacity` items are pending;
/// [`try_send_at`](Sender::try_send_at) returns [`TrySendError::Full`](crate::TrySendError::Full).
///
/// # Panics
///
/// If `capacity` is 0, or if the operating system refuses to start the two proxy
/// threads. [`Builder::build`] reports both as a [`BuildError`] instead.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let (tx, rx) = delayq::bounded(1);
/// tx.send_after("first", Duration::ZERO).unwrap();
/// assert!(tx.try_send_at("second", std::time::Instant::now()).unwrap_err().is_full());
/// assert_eq!(rx.recv(), Ok("first"));
/// ```
#[track_caller]
pub fn bounded<T: Send + 'static>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    assert!(capacity > 0, "delayq::bounded: capacity must be at least 1 (got 0)");
    match Builder::new().capacity(capacity).build() {
        Ok(pair) => pair,
        Err(e) => panic!("delayq::bounded: {e}"),
    }
}

/// Creates a queue with no limit on pending items.
///
/// # Panics
///
/// If the operating system refuses to start the two proxy threads
/// ([`Builder::build`] reports that as a [`BuildError`] instead).
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let (tx, rx) = delayq::unbounded();
/// let now = Instant::now();
/// tx.send_at(2, now + Duration::from_millis(2)).unwrap();
/// tx.send_at(1, now + Duration::from_millis(1)).unwrap();
/// assert_eq!(rx.recv(), Ok(1)); // earliest deadline first
/// assert_eq!(rx.recv(), Ok(2));
/// assert!(Instant::now() >= now + Duration::from_millis(2)); // never early
/// ```
#[track_caller]
pub fn unbounded<T: Send + 'static>() -> (Sender<T>, Receiver<T>) {
    match Builder::new().build() {
        Ok(pair) => pair,
        Err(e) => panic!("delayq::unbounded: {e}"),
    }
}

/// Configures a queue: capacity, clock and thread names.
///
/// # Examples
///
/// ```
/// use delayq::{Builder, MockClock};
/// use std::time::Duration;
///
/// let clock = MockClock::new();
/// let (tx, rx) = Builder::new()
///     .capacity(100)
///     .clock(clock.clone())
///     .thread_name_prefix("jobs")
///     .build::<u32>()
///     .unwrap();
/// tx.send_after(7, Duration::from_secs(5)).unwrap();
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(rx.recv(), Ok(7));
/// assert_eq!(tx.capacity(), Some(100));
///
/// assert!(Builder::new().capacity(0).build::<u32>().is_err());
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    capacity: Option<usize>,
    clock: Clock,
    prefix: String,
    index: Kind,
    egress_slots: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// An unbounded queue on the system clock, threads named `delayq-enqueue` and
    /// `delayq-dequeue`.
    pub fn new() -> Builder {
        Builder {
            capacity: None,
            clock: Clock::default(),
            prefix: "delayq".to_owned(),
            index: Kind::default(),
            egress_slots: EGRESS_SLOTS,
        }
    }

    /// Bounds the queue to `capacity` undelivered items (0 makes `build` fail).
    pub fn capacity(mut self, capacity: usize) -> Builder {
        self.capacity = Some(capacity);
        self
    }

    /// Makes the queue unbounded (the default).
    pub fn unbounded(mut self) -> Builder {
        self.capacity = None;
        self
    }

    /// The clock that decides when items are due: a [`SystemClock`](crate::SystemClock)
    /// (the default) or a [`MockClock`](crate::MockClock).
    pub fn clock(mut self, clock: impl Into<Clock>) -> Builder {
        self.clock = clock.into();
        self
    }

    /// Names the proxy threads `<prefix>-enqueue` and `<prefix>-dequeue`.
    pub fn thread_name_prefix(mut self, prefix: impl Into<String>) -> Builder {
        self.prefix = prefix.into();
        self
    }

    /// Selects the timer index backend: `"wheel"` (the default, a hierarchical
    /// timing wheel) or `"heap"` (a 4-ary heap). For benchmarks comparing the two;
    /// an unknown name keeps the default.
    #[doc(hidden)]
    pub fn timer_index(mut self, name: &str) -> Builder {
        self.index = match name {
            "heap" => Kind::Heap,
            _ => Kind::Wheel,
        };
        self
    }

    /// Sizes the egress ring (due items staged for consumers; default 1024, at
    /// least 2, rounded up to a power of two, and never above a bounded queue's
    /// capacity). For tests and loom models that need a full ring with due items
    /// left behind it, which a default-sized ring reaches only past 1024 items.
    #[doc(hidden)]
    pub fn egress_slots(mut self, slots: usize) -> Builder {
        self.egress_slots = slots;
        self
    }

    /// Starts the two proxy threads and returns the queue's first handles.
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroCapacity`] for `capacity(0)`, [`BuildError::InvalidThreadName`]
    /// for a prefix with a NUL byte, [`BuildError::Spawn`] if a thread cannot start.
    pub fn build<T: Send + 'static>(self) -> Result<(Sender<T>, Receiver<T>), BuildError> {
        if self.capacity == Some(0) {
            return Err(BuildError::ZeroCapacity);
        }
        if self.prefix.contains('\0') {
            return Err(BuildError::InvalidThreadName);
        }
        let cap = self.capacity.unwrap_or(usize::MAX);
        let enqueue_parker = Parker::new();
        let dequeue_parker = Parker::new();
        let signals = Arc::new(Signals {
            consumers: Waiters::default(),
            producers: Waiters::default(),
            enqueue: Bell::new(enqueue_parker.unparker()),
            dequeue: Bell::new(dequeue_parker.unparker()),
            rounds: Waiters::default(),
        });
        let shared = Arc::new(Shared::with_index(
            self.capacity,
            self.clock.clone(),
            signals,
            INGRESS_SLOTS.min(cap),
            self.egress_slots.min(cap),
            self.index,
        ));
        let weak = Arc::downgrade(&shared);
        let subscription = self.clock.subscribe(Arc::new(move || {
            if let Some(s) = weak.upgrade() {
                s.clock_moved();
            }
        }));
        let mut chan = Chan { shared: shared.clone(), threads: Vec::new(), _subscription: subscription };
        // On an error below, dropping `chan` disconnects and joins what started.
        // Each proxy reports once it runs (its OS thread name is set by then).
        let (up_enqueue, enqueue_running) = oneshot::pair();
        let (up_dequeue, dequeue_running) = oneshot::pair();
        let s = shared.clone();
        chan.threads.push(spawn(format!("{}-enqueue", self.prefix), shared.clone(), move || {
            up_enqueue.send(());
            enqueue::run(&s, &enqueue_parker)
        })?);
        let s = shared.clone();
        chan.threads.push(spawn(format!("{}-dequeue", self.prefix), shared, move || {
            up_dequeue.send(());
            dequeue::run(&s, &dequeue_parker)
        })?);
        enqueue_running.wait();
        dequeue_running.wait();
        let chan = Arc::new(chan);
        Ok((Sender::new(chan.clone()), Receiver::new(chan)))
    }
}

/// Starts a proxy thread. A panic inside it (a bug, or a panicking `Drop` we
/// failed to contain) disconnects the queue, so no client waits forever.
fn spawn<T: Send + 'static>(
    name: String,
    shared: Arc<Shared<T>>,
    body: impl FnOnce() + Send + 'static,
) -> Result<thread::JoinHandle<()>, BuildError> {
    thread::Builder::new()
        .name(name)
        .spawn(move || {
            if catch_unwind(AssertUnwindSafe(body)).is_err() {
                shared.disconnect();
            }
        })
        .map_err(BuildError::Spawn)
}

/// What the handles share: the queue, its threads and its clock subscription.
/// Dropped with the last handle: disconnects and joins both proxies.
pub(crate) struct Chan<T> {
    pub(crate) shared: Arc<Shared<T>>,
    threads: Vec<thread::JoinHandle<()>>,
    _subscription: Subscription,
}

impl<T> Drop for Chan<T> {
    fn drop(&mut self) {
        self.shared.disconnect();
        let me = thread::current().id();
        for t in self.threads.drain(..) {
            // The last handle can die on a proxy thread (inside an item's `Drop`);
            // a thread cannot join itself, and it is about to exit anyway.
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }
}

impl<T> std::fmt::Debug for Chan<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chan").field("threads", &self.threads.len()).finish()
    }
}
