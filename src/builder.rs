//! Building a queue: `bounded`, `unbounded`, `Builder` (options and their
//! checks; `chan::start` assembles the queue).

use crate::chan;
use crate::clock::Clock;
use crate::error::BuildError;
use crate::index::Kind;
use crate::receiver::Receiver;
use crate::sender::Sender;
use crate::shared::Layout;

/// Ingress ring slots: a batching buffer; overflow spills, it never blocks.
const INGRESS_SLOTS: usize = 4096;
/// Egress ring slots: due items staged for consumers.
const EGRESS_SLOTS: usize = 1024;

/// The nice values Linux knows.
const NICE_RANGE: std::ops::RangeInclusive<i32> = -20..=19;

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
    ingress_slots: usize,
    egress_slots: usize,
    nice: Option<i32>,
    helping: bool,
    name: String,
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
            ingress_slots: INGRESS_SLOTS,
            egress_slots: EGRESS_SLOTS,
            nice: None,
            helping: true,
            name: "delayq".to_owned(),
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

    /// Runs both proxy threads at nice value `nice` (Linux only; -20 is the
    /// highest priority, 19 the lowest, 0 the default). Without it they inherit
    /// the nice value of the thread that calls `build`.
    ///
    /// Why: under Linux's fair scheduler every runnable thread gets an equal
    /// share of the CPU, and every item passes through both proxies. On a
    /// machine with more busy client threads than cores, the two proxies get
    /// two shares among many and become the pipeline's bottleneck; a lower
    /// nice value gives them a larger share. It is a trade, not a free gain:
    /// on this project's 2-core benchmark machine, nice -10 raised throughput
    /// with 16 producers and 16 consumers by a fifth to a third and cut the
    /// median lateness at paced rates of 400 K items/s and more to a third,
    /// but it cost a third of the throughput with one producer and one
    /// consumer, and with unthrottled producers the backlog (and the lateness)
    /// grew ten times, the proxies now outrunning the consumers
    /// (`docs/bench/README.md`). A positive value does the opposite, for a
    /// queue that must stay in the background. A value below the calling
    /// thread's own needs `CAP_SYS_NICE` or a `RLIMIT_NICE` that allows it.
    ///
    /// # Errors
    ///
    /// `build` fails with [`BuildError::ProxyNice`] if the value is outside
    /// -20..=19 or the system is not Linux (no thread is started then), or if
    /// the system refuses it (no privilege: both threads, started, are joined
    /// before `build` returns).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::Builder;
    ///
    /// // The lowest priority needs no privilege.
    /// # #[cfg(target_os = "linux")] {
    /// let (tx, rx) = Builder::new().proxy_nice(19).build::<u32>().unwrap();
    /// tx.send_at(1, std::time::Instant::now()).unwrap();
    /// assert_eq!(rx.recv(), Ok(1));
    /// # }
    /// let err = Builder::new().proxy_nice(20).build::<u32>().unwrap_err();
    /// assert!(matches!(err, delayq::BuildError::ProxyNice(_)));
    /// ```
    pub fn proxy_nice(mut self, nice: i32) -> Builder {
        self.nice = Some(nice);
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

    /// Sizes the ingress ring (commands on their way to the enqueue proxy;
    /// default 4096, at least 2, rounded up to a power of two, never above a
    /// bounded queue's capacity; a full ring spills, it never refuses). For loom
    /// models, where every slot is a modelled atomic.
    #[doc(hidden)]
    pub fn ingress_slots(mut self, slots: usize) -> Builder {
        self.ingress_slots = slots;
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

    /// Whether client threads perform the proxies' roles (the default:
    /// `true`).
    ///
    /// With helping on, whoever is present performs a role: a send applies
    /// the commands waiting in the ingress (its own and other producers', a
    /// bounded batch) to the timer index unless another producer is doing so;
    /// a receiver that finds the consumers' ring empty while an item is due
    /// moves the due items itself, and the receiver that waits for the next
    /// deadline does so when its timer fires. Each takes the role with a
    /// try-acquire that never waits. The proxy threads perform only what
    /// nobody is there for: commands a producer left behind after its share,
    /// and the rounds async receivers (which cannot wait with a timeout) ask
    /// them for. Under load (a producer's batch held 64 commands or more) the
    /// enqueue proxy streams: sends only push and ring it until its batches
    /// are small again.
    ///
    /// `false` leaves every piece of work to the two proxy threads: producers
    /// only push and ring, consumers only take and wait, the dequeue proxy
    /// sleeps until each next deadline. Delivery order, "never early" and
    /// exactly-once are the same either way (for comparisons and tests).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = delayq::Builder::new().helping(false).build().unwrap();
    /// tx.send_after("x", Duration::from_millis(1)).unwrap();
    /// assert_eq!(rx.recv(), Ok("x"));
    /// ```
    pub fn helping(mut self, on: bool) -> Builder {
        self.helping = on;
        self
    }

    /// The queue's name: the `queue` label on every metric it reports with the
    /// `metrics` feature (docs/METRICS.md), so that the queues of one process
    /// are told apart. `"delayq"` unless set. Without the feature it is kept
    /// and unused.
    ///
    /// ```
    /// let (tx, rx) = delayq::Builder::new().name("webhooks").build().unwrap();
    /// tx.send_after(1, std::time::Duration::ZERO).unwrap();
    /// assert_eq!(rx.recv(), Ok(1));
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.name = name.into();
        self
    }

    /// Starts the two proxy threads and returns the queue's first handles.
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroCapacity`] for `capacity(0)`, [`BuildError::InvalidThreadName`]
    /// for a prefix with a NUL byte, [`BuildError::Spawn`] if a thread cannot start,
    /// [`BuildError::ProxyNice`] if [`proxy_nice`](Builder::proxy_nice) cannot be applied.
    pub fn build<T: Send + 'static>(self) -> Result<(Sender<T>, Receiver<T>), BuildError> {
        if self.capacity == Some(0) {
            return Err(BuildError::ZeroCapacity);
        }
        if self.prefix.contains('\0') {
            return Err(BuildError::InvalidThreadName);
        }
        if let Some(n) = self.nice {
            use std::io::{Error, ErrorKind};
            if !NICE_RANGE.contains(&n) {
                let why = format!("nice value {n} is outside {}..={}", NICE_RANGE.start(), NICE_RANGE.end());
                return Err(BuildError::ProxyNice(Error::new(ErrorKind::InvalidInput, why)));
            }
            if !cfg!(target_os = "linux") {
                let why = "per-thread nice values need Linux";
                return Err(BuildError::ProxyNice(Error::new(ErrorKind::Unsupported, why)));
            }
        }
        let cap = self.capacity.unwrap_or(usize::MAX);
        let layout = Layout {
            capacity: self.capacity,
            ingress_slots: self.ingress_slots.min(cap),
            egress_slots: self.egress_slots.min(cap),
            index: self.index,
            helping: self.helping,
            name: self.name,
        };
        let chan = chan::start(&layout, self.clock, &self.prefix, self.nice)?;
        Ok((Sender::new(chan.clone()), Receiver::new(chan)))
    }
}
