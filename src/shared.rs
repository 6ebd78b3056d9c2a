//! The state every handle and both proxies share, and the few operations that
//! change it for everybody: releasing `len`, closing, disconnecting.
//!
//! Who owns what: producers push into the `ingress`; whoever holds the
//! enqueue role (a producer, or the enqueue proxy for what nobody was there
//! to apply) drains it into the index; whoever holds the dequeue role (the
//! consumer awake at the index's next deadline, or the dequeue proxy for
//! those who cannot wait with a timeout) moves due items from the index into
//! the `egress`; consumers take from the `egress`, one of them leading
//! (`lead`) for the index's next deadline. The index lives under the one
//! `timers` lock, which only the roles' holders take. The send path is in
//! `sender.rs` and `enqueue.rs`, the take path in `receiver.rs` and
//! `dequeue.rs`, the counters in `counter.rs`, the admission gate in
//! `admission.rs`.

use crate::admission::Admission;
use crate::clock::{Clock, Ticks, NEVER};
use crate::cmd::Cmd;
use crate::counter::Counter;
use crate::egress::Egress;
use crate::index::{Index, Kind};
use crate::ingress::Ingress;
use crate::lead::Lead;
use crate::metrics::{Metrics, Sample};
use crate::pace::Pace;
use crate::role::Role;
use crate::sync::{AtomicU64, AtomicUsize, IdCounter, Mutex, Ordering, Unparker};
use crate::tidy::Tidy;
use crate::waiters::Waiters;
use crate::wakeup::Bell;
use crossbeam_utils::CachePadded;
use std::collections::VecDeque;
use std::time::Instant;

/// What the batch lock protects (`Shared::batch`).
pub(crate) struct Batch<T> {
    /// Commands drained from the ingress, waiting for the timers lock.
    pub(crate) cmds: VecDeque<Cmd<T>>,
    /// How fast the role applies commands (`pace.rs`).
    pub(crate) pace: Pace,
}

/// What the timers lock protects: the index, and the rule that gives its
/// memory back after a burst (`tidy.rs`).
pub(crate) struct Timers<T> {
    pub(crate) index: Index<T>,
    pub(crate) tidy: Tidy,
}

/// Everything that wakes somebody.
#[derive(Debug)]
pub(crate) struct Signals {
    /// Consumers waiting for a due item (or for disconnection).
    pub(crate) consumers: Waiters,
    /// Producers waiting for room in a bounded queue.
    pub(crate) producers: Waiters,
    /// The enqueue proxy, idle with an empty ingress.
    pub(crate) enqueue: Bell,
    /// The dequeue proxy, idle with nobody asking it to lead.
    pub(crate) dequeue: Bell,
    /// The admission gate: blocking sends wait there while the queue is behind
    /// (`admission.rs`).
    pub(crate) admission: Admission,
}

/// How a queue is laid out; `Builder::build` fills it in.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) capacity: Option<usize>,
    pub(crate) ingress_slots: usize,
    pub(crate) egress_slots: usize,
    pub(crate) index: Kind,
    /// `Builder::helping`: clients perform the proxies' roles.
    pub(crate) helping: bool,
    /// `Builder::name`: the `queue` label of its metrics.
    pub(crate) name: String,
}

pub(crate) struct Shared<T> {
    /// This queue's id, carried in every `Key`.
    pub(crate) id: u64,
    pub(crate) counter: Counter,
    next_key: CachePadded<AtomicU64>,
    pub(crate) ingress: Ingress<Cmd<T>>,
    pub(crate) egress: Egress<T>,
    /// The timer index. Its lock word is written by every batch and round:
    /// a line of its own, so that the fields every send and take reads
    /// (`clock`, `ticks`) do not share it.
    pub(crate) timers: CachePadded<Mutex<Timers<T>>>,
    /// The enqueue role's batch: commands drained from the ingress before the
    /// timers lock is taken, so that the lock is held for the inserts alone
    /// (the ring's slots, written on the producers' cores, are read outside
    /// it). Only the role's holder locks it; padded as `timers` is.
    pub(crate) batch: CachePadded<Mutex<Batch<T>>>,
    pub(crate) signals: Signals,
    pub(crate) clock: Clock,
    pub(crate) ticks: Ticks,
    /// On a mock clock, the time the dequeue role delivers by: the time of
    /// the last step whose sends were all applied (`dequeue::clock_moved`).
    pub(crate) mock_now: AtomicU64,
    /// Who waits for the index's next deadline (`lead.rs`).
    pub(crate) lead: Lead,
    /// The proxies' roles (`role.rs`): whoever holds one performs it.
    pub(crate) roles: Roles,
    /// `Builder::helping`: clients take the roles.
    pub(crate) helping: bool,
    /// A lower bound on the earliest deadline in the index (`NEVER`: nothing
    /// there can fall due), written under the timers lock — lowered by every
    /// insert, set by every dequeue round — and read without it by consumers
    /// that found the egress empty. Its own cache line: consumers read it
    /// while the roles write it.
    pub(crate) index_head: CachePadded<AtomicU64>,
    /// Whether, and why, the enqueue proxy streams (`enqueue::Stream`): it
    /// performs the enqueue role for the pushes, and a send only pushes and
    /// rings it (`enqueue.rs`, "Under load"). Set by a client's batch of
    /// `STREAM_AT` commands or more (`BURST`), or by a fast window of the
    /// role's pace (`LONE`, `pace.rs`); cleared by the proxy after
    /// `STREAM_BACK` small batches in a row; a hint only (either way a push
    /// is handed over). Read by every send, written rarely: its own cache
    /// line.
    pub(crate) streaming: CachePadded<AtomicUsize>,
    /// What it reports through the `metrics` facade (`metrics.rs`); boxed,
    /// so that the handles do not move the hot fields around them.
    pub(crate) metrics: Box<Metrics>,
    /// When the memory rule wants its next look (`tidy.rs`), in nanoseconds
    /// of real time after `born`; 0: none. The dequeue proxy parks until then
    /// at the latest.
    pub(crate) tidy_at: AtomicU64,
    /// The real time the queue was built: `tidy_at`'s origin.
    pub(crate) born: Instant,
}

/// The two proxies' roles.
#[derive(Debug)]
pub(crate) struct Roles {
    /// Draining the ingress into the index.
    pub(crate) enqueue: Role,
    /// Moving due items from the index into the egress.
    pub(crate) dequeue: Role,
}

impl<T> Shared<T> {
    /// A queue with nothing in it; the proxies' parkers are woken through
    /// `enqueue` and `dequeue`.
    pub(crate) fn new(layout: &Layout, clock: Clock, enqueue: Unparker, dequeue: Unparker) -> Self {
        let ticks = Ticks::new(clock.now());
        let now = ticks.now(clock.now());
        Shared {
            id: QUEUE_IDS.next(),
            counter: Counter::new(layout.capacity),
            next_key: CachePadded::new(AtomicU64::new(1)),
            ingress: Ingress::new(layout.ingress_slots),
            egress: Egress::new(layout.egress_slots),
            roles: Roles { enqueue: Role::new(enqueue.clone()), dequeue: Role::new(dequeue.clone()) },
            helping: layout.helping,
            metrics: Box::new(Metrics::new(&layout.name)),
            index_head: CachePadded::new(AtomicU64::new(NEVER)),
            streaming: CachePadded::new(AtomicUsize::new(crate::enqueue::Stream::Off as usize)),
            timers: CachePadded::new(Mutex::new(Timers {
                index: Index::new(layout.index, now),
                tidy: Tidy::default(),
            })),
            batch: CachePadded::new(Mutex::new(Batch { cmds: VecDeque::new(), pace: Pace::default() })),
            signals: Signals {
                consumers: Waiters::default(),
                producers: Waiters::default(),
                enqueue: Bell::new(enqueue),
                dequeue: Bell::new(dequeue),
                admission: Admission::default(),
            },
            clock,
            ticks,
            mock_now: AtomicU64::new(now),
            lead: Lead::default(),
            tidy_at: AtomicU64::new(0),
            born: Instant::now(),
        }
    }

    /// A fresh key for a send (keys are never reused).
    pub(crate) fn next_key(&self) -> u64 {
        // Relaxed: keys only need to be distinct.
        self.next_key.fetch_add(1, Ordering::Relaxed)
    }

    /// A deadline in ticks: `NEVER` beyond the horizon, unless the clock is past
    /// it too (a mock clock moved by centuries), where a deadline that has passed
    /// is due at once, like any other.
    pub(crate) fn deadline_ticks(&self, deadline: Instant) -> u64 {
        match self.ticks.of(deadline) {
            NEVER if deadline <= self.clock.now() => NEVER - 1,
            d => d,
        }
    }

    /// The clock's reading in ticks (it stops one short of `NEVER`).
    pub(crate) fn now_ticks(&self) -> u64 {
        self.ticks.now(self.clock.now())
    }

    pub(crate) fn len(&self) -> usize {
        self.counter.len()
    }

    /// The time the dequeue role delivers by: the mock time as of the last
    /// step whose sends are applied, or the system clock's now.
    pub(crate) fn delivery_now(&self) -> u64 {
        if self.clock.is_mock() {
            // SeqCst: pairs with the `fetch_max` of `dequeue::clock_moved`.
            self.mock_now.load(Ordering::SeqCst)
        } else {
            self.now_ticks()
        }
    }

    /// After a look of the memory rule (`tidy.rs`) that wants the next one
    /// at `at`: records it and, the first time that time is asked for, wakes
    /// the dequeue proxy to park until then (nobody else may look).
    pub(crate) fn tidy_later(&self, at: Option<Instant>) {
        let want = at.map_or(0, |at| (at.saturating_duration_since(self.born).as_nanos() as u64).max(1));
        // Relaxed: a hint for the proxy's park; the force below makes it re-read.
        // The load first: every round and batch calls this, and a store to a
        // line every send and take reads would make them miss it.
        if self.tidy_at.load(Ordering::Relaxed) != want
            && self.tidy_at.swap(want, Ordering::Relaxed) != want
            && want != 0
        {
            self.signals.dequeue.force();
        }
    }

    /// When the memory rule wants its next look, if it does.
    pub(crate) fn tidy_instant(&self) -> Option<Instant> {
        // Relaxed: a hint (see `tidy_later`).
        let at = self.tidy_at.load(Ordering::Relaxed);
        (at != 0).then(|| self.born + std::time::Duration::from_nanos(at))
    }

    /// A look of the memory rule, at real time now, under the timers lock
    /// (`t`); none under loom (a real-time hint would make a model's paths
    /// differ between runs).
    pub(crate) fn tidy(&self, t: &mut Timers<T>) -> Option<Instant> {
        if cfg!(delayq_loom) {
            return None;
        }
        t.tidy.after_change(&mut t.index, Instant::now())
    }

    /// Brings the metrics' gauges and the received count up to date
    /// (`metrics.rs`), if they are recorded.
    pub(crate) fn sample_metrics(&self) {
        if !self.metrics.recording() {
            return;
        }
        // The head first, then what left the ring otherwise: a sample can
        // only undercount the receives (`Egress::received_so_far`).
        let received = self.egress.received_so_far();
        self.metrics.sample(&Sample {
            pending: self.len(),
            due: self.egress.len(),
            ingress: self.ingress.len(),
            received,
        });
    }

    /// `n` items left the queue some way other than through a consumer's take
    /// (cancel, `take_pending`, shutdown, a send that failed after reserving).
    pub(crate) fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        let left = self.counter.release(n);
        if self.counter.capacity().is_some() {
            self.signals.producers.notify(n);
        }
        if left == 0 && self.counter.is_closed() {
            self.signals.consumers.notify_all();
        }
    }

    /// No new sends; pending items are still delivered.
    pub(crate) fn close(&self) {
        self.counter.close();
        self.signals.admission.open_all();
        self.signals.producers.notify_all();
        self.signals.consumers.notify_all();
    }

    /// No receivers (or a dead proxy): refuse commands, wind the proxies down.
    pub(crate) fn disconnect(&self) {
        // Close first, then publish `disconnected`: whoever sees `disconnected`
        // (the proxies winding down) must also see `closed` and a closed ingress,
        // or a blocked send admitted by their `release` could slip in after them
        // (found by loom: `last_receiver_drop_releases_a_blocked_sender`).
        self.counter.close();
        self.ingress.close();
        if !self.counter.disconnect() {
            return;
        }
        self.signals.enqueue.force();
        self.signals.dequeue.force();
        self.signals.admission.open_all();
        self.signals.producers.notify_all();
        self.signals.consumers.notify_all();
    }
}

/// A process-wide id for each queue, so that keys of different queues differ.
static QUEUE_IDS: IdCounter = IdCounter::new();
