//! The state every handle and both proxies share, and the few operations that
//! change it for everybody: releasing `len`, closing, disconnecting, and handing
//! a command to the enqueue proxy.
//!
//! Who owns what: producers push into the `ingress`; the enqueue proxy pops it
//! and writes the index; the dequeue proxy moves items due within `stage_ahead`
//! from the index into the `egress`; consumers take what is due from the
//! `egress`, one of them leading (`lead`) while the oldest is not due yet. The
//! index, the dequeue proxy's sleep plan and the list of staged entries live
//! under the one `timers` lock, which only the two proxies take. The send path
//! is in `sender.rs`, the take path in `receiver.rs`, the counters in
//! `counter.rs`, the mock-clock round handshake in `dequeue.rs` (its counter in
//! `rounds.rs`), the admission gate in `admission.rs`.

use crate::admission::Admission;
use crate::clock::{Clock, Ticks, NEVER};
use crate::cmd::Cmd;
use crate::counter::Counter;
use crate::duty::Duty;
use crate::egress::Egress;
use crate::index::{Index, Kind};
use crate::ingress::Ingress;
use crate::lead::Lead;
use crate::metrics::{Metrics, Sample};
use crate::role::Role;
use crate::rounds::Rounds;
use crate::staging::Staged;
use crate::sync::{AtomicU64, IdCounter, Mutex, Ordering, Unparker};
use crate::waiters::Waiters;
use crate::wakeup::{Bell, Sleep};
use crossbeam_utils::CachePadded;
use std::time::{Duration, Instant};

/// What the timers lock protects: the index, the dequeue proxy's sleep plan,
/// and the list of entries staged ahead of their deadline.
pub(crate) struct Timers<T> {
    pub(crate) index: Index<T>,
    pub(crate) sleep: Sleep,
    pub(crate) staged: Staged,
    /// The clock reading of the last dequeue round (whoever performed it).
    pub(crate) last_round: u64,
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
    /// The dequeue proxy: its bell for egress room, and `force` for the rest.
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
    /// `Builder::stage_ahead`, if set.
    pub(crate) stage_ahead: Option<Duration>,
    /// `Builder::helping`: clients may perform the proxies' roles.
    pub(crate) helping: bool,
    /// `Builder::name`: the `queue` label of its metrics.
    pub(crate) name: String,
}

/// How far ahead of their deadline the dequeue proxy stages items on a system
/// clock, unless the builder says otherwise (`Builder::stage_ahead`).
pub(crate) const STAGE_AHEAD: Duration = Duration::from_micros(100);

pub(crate) struct Shared<T> {
    /// This queue's id, carried in every `Key`.
    pub(crate) id: u64,
    pub(crate) counter: Counter,
    next_key: CachePadded<AtomicU64>,
    pub(crate) ingress: Ingress<Cmd<T>>,
    pub(crate) egress: Egress<T>,
    pub(crate) timers: Mutex<Timers<T>>,
    pub(crate) signals: Signals,
    pub(crate) clock: Clock,
    pub(crate) ticks: Ticks,
    /// The dequeue proxy's rounds, as a mock clock's steps wait for them.
    pub(crate) rounds: Rounds,
    /// Ticks ahead of its deadline at which an item is staged (0: only when due).
    pub(crate) stage_ahead: u64,
    /// The consumer that waits for the oldest staged entry (`lead.rs`).
    pub(crate) lead: Lead,
    /// The proxies' roles (`role.rs`): whoever holds one performs it.
    pub(crate) roles: Roles,
    /// `Builder::helping`: clients may take a role.
    pub(crate) helping: bool,
    /// A lower bound on the earliest deadline in the index (`NEVER`: empty),
    /// written under the timers lock — lowered by every enqueue batch that
    /// inserts, set by every dequeue round — and read without it by a
    /// `try_recv` that found nothing due (`dequeue::catch_up`). Boxed, as
    /// `metrics`, so that it moves no hot field.
    pub(crate) index_head: Box<CachePadded<AtomicU64>>,
    /// The dequeue proxy's next round, when it handed it to the consumers
    /// (`duty.rs`); boxed, as `index_head`.
    pub(crate) duty: Box<Duty>,
    /// What it reports through the `metrics` facade (`metrics.rs`); boxed,
    /// so that the handles do not move the hot fields around them.
    pub(crate) metrics: Box<Metrics>,
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
        let default_stage = if clock.is_mock() { Duration::ZERO } else { STAGE_AHEAD };
        let stage_ahead = Ticks::after(0, layout.stage_ahead.unwrap_or(default_stage));
        Shared {
            id: next_queue_id(),
            counter: Counter::new(layout.capacity),
            next_key: CachePadded::new(AtomicU64::new(1)),
            ingress: Ingress::new(layout.ingress_slots),
            egress: Egress::new(layout.egress_slots),
            roles: Roles { enqueue: Role::new(enqueue.clone()), dequeue: Role::new(dequeue.clone()) },
            helping: layout.helping,
            metrics: Box::new(Metrics::new(&layout.name)),
            index_head: Box::new(CachePadded::new(AtomicU64::new(NEVER))),
            duty: Box::new(Duty::new(layout.helping && !clock.is_mock() && stage_ahead != 0)),
            timers: Mutex::new(Timers {
                index: Index::new(layout.index, now),
                sleep: Sleep::Awake,
                staged: Staged::default(),
                last_round: 0,
            }),
            signals: Signals {
                consumers: Waiters::default(),
                producers: Waiters::default(),
                enqueue: Bell::new(enqueue),
                dequeue: Bell::new(dequeue),
                admission: Admission::default(),
            },
            clock,
            ticks,
            rounds: Rounds::new(now),
            stage_ahead,
            lead: Lead::default(),
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

    /// Brings the metrics' gauges and the received count up to date, given
    /// the number of entries staged in the egress ring (`metrics.rs`).
    pub(crate) fn sample_metrics(&self, staged: usize) {
        // The head first, then what left the ring otherwise: a sample can
        // only undercount the receives (`Egress::received_so_far`).
        let received = self.egress.received_so_far();
        let in_ring = self.egress.len();
        self.metrics.sample(&Sample {
            pending: self.len(),
            staged,
            due: in_ring.saturating_sub(staged),
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
        // A clock step waiting for a dequeue round must not wait for a proxy that
        // is winding down.
        self.rounds.disconnected();
    }
}

/// A process-wide id for each queue, so that keys of different queues differ.
fn next_queue_id() -> u64 {
    static QUEUE_IDS: IdCounter = IdCounter::new();
    QUEUE_IDS.next()
}
