//! The state every handle and both proxies share, the commands that cross the
//! ingress, and the client-side halves of send and receive.
//!
//! Counters (the accounting that makes "exactly once" checkable):
//! - `len` counts items sent and not yet received, cancelled, taken or dropped. A
//!   send reserves its unit *before* its command enters the ingress, so `len` is
//!   exact from the moment `send` returns; whoever removes an item releases it.
//! - `closed` (set by `close()` or by the last `Sender` going): no new sends.
//!   Consumers report "disconnected" once `closed && len == 0`. A send increments
//!   `len` and then re-reads `closed` (both SeqCst); a consumer reads `closed` and
//!   then `len`. So a consumer that sees `closed` and `len == 0` cannot miss a send
//!   that succeeded.
//! - `disconnected` (set when the last `Receiver` goes, or a proxy dies): the
//!   ingress ring is closed, the proxies wind down, pending items are dropped.

use crate::clock::{Clock, Ticks, NEVER};
use crate::index::{Index, Kind};
use crate::ingress::Ingress;
use crate::oneshot::Answer;
use crate::ring::Ring;
use crate::sync::{fence, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering};
use crate::waiters::{block_on, Waiters};
use crate::wakeup::{Bell, Sleep};
use crossbeam_utils::CachePadded;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

/// A request from a client to the enqueue proxy.
pub(crate) enum Cmd<T> {
    Insert {
        key: u64,
        deadline: u64,
        item: T,
    },
    Cancel {
        key: u64,
        answer: Answer<Option<T>>,
    },
    Reschedule {
        key: u64,
        deadline: u64,
        answer: Answer<bool>,
    },
    Peek {
        answer: Answer<Option<u64>>,
    },
    TakePending {
        answer: Answer<Vec<(u64, T)>>,
    },
    /// Answered once every earlier command is applied (a mock clock's flush).
    Sync {
        answer: Answer<()>,
    },
}

/// What the timers lock protects: the index and the dequeue proxy's sleep plan.
pub(crate) struct Timers<T> {
    pub(crate) index: Index<T>,
    pub(crate) sleep: Sleep,
}

/// Everything that wakes somebody; not generic, so a clock can hold it.
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
    /// Threads waiting for the dequeue proxy to finish a round (mock clock steps).
    pub(crate) rounds: Waiters,
}

/// How long a send may wait for room.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    Never,
    Until(Option<Instant>),
}

/// Why a send failed; the item comes back.
pub(crate) enum SendFail<T> {
    Full(T),
    Timeout(T),
    Disconnected(T),
}

pub(crate) struct Shared<T> {
    /// This queue's id, carried in every `Key`.
    pub(crate) id: u64,
    pub(crate) len: CachePadded<AtomicUsize>,
    pub(crate) capacity: Option<usize>,
    next_key: CachePadded<AtomicU64>,
    pub(crate) senders: AtomicUsize,
    pub(crate) receivers: AtomicUsize,
    pub(crate) closed: AtomicBool,
    pub(crate) disconnected: AtomicBool,
    pub(crate) ingress: Ingress<Cmd<T>>,
    /// Due items: `(deadline, key, item)`, in the order the dequeue proxy moved them.
    pub(crate) egress: Ring<(u64, u64, T)>,
    pub(crate) timers: Mutex<Timers<T>>,
    pub(crate) signals: Arc<Signals>,
    pub(crate) clock: Clock,
    pub(crate) ticks: Ticks,
    /// Dequeue proxy rounds on a mock clock, counted twice: odd while a round
    /// runs, even between (a system clock has no steps to wait for them).
    pub(crate) rounds: CachePadded<AtomicU64>,
    /// On a mock clock, the time the dequeue proxy delivers by: a step becomes
    /// visible to it only after every send made before the step is applied, so
    /// items sent before a step leave in deadline order after it.
    mock_now: AtomicU64,
}

impl<T> Shared<T> {
    #[cfg_attr(not(delayq_loom), allow(dead_code))] // the loom models build queues with it
    pub(crate) fn new(
        capacity: Option<usize>,
        clock: Clock,
        signals: Arc<Signals>,
        ingress_slots: usize,
        egress_slots: usize,
    ) -> Self {
        Self::with_index(capacity, clock, signals, ingress_slots, egress_slots, Kind::default())
    }

    pub(crate) fn with_index(
        capacity: Option<usize>,
        clock: Clock,
        signals: Arc<Signals>,
        ingress_slots: usize,
        egress_slots: usize,
        index: Kind,
    ) -> Self {
        let ticks = Ticks::new(clock.now());
        let now = ticks.now(clock.now());
        Shared {
            id: crate::sync::next_queue_id(),
            len: CachePadded::new(AtomicUsize::new(0)),
            capacity,
            next_key: CachePadded::new(AtomicU64::new(1)),
            senders: AtomicUsize::new(1),
            receivers: AtomicUsize::new(1),
            closed: AtomicBool::new(false),
            disconnected: AtomicBool::new(false),
            ingress: Ingress::new(ingress_slots),
            egress: Ring::new(egress_slots),
            timers: Mutex::new(Timers { index: Index::new(index, now), sleep: Sleep::Awake }),
            signals,
            clock,
            ticks,
            rounds: CachePadded::new(AtomicU64::new(0)),
            mock_now: AtomicU64::new(now),
        }
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

    /// The time the dequeue proxy delivers by (see `mock_now`).
    pub(crate) fn delivery_now(&self) -> u64 {
        if self.clock.is_mock() {
            // SeqCst: pairs with the store in `clock_moved`, before its round RMW.
            self.mock_now.load(Ordering::SeqCst)
        } else {
            self.now_ticks()
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::SeqCst)
    }

    /// Items can no longer come out: the receivers' "disconnected".
    pub(crate) fn is_exhausted(&self) -> bool {
        // SeqCst, `closed` before `len` with a fence between: see the module docs.
        self.disconnected.load(Ordering::SeqCst)
            || (self.closed.load(Ordering::SeqCst) && {
                fence(Ordering::SeqCst);
                self.len.load(Ordering::SeqCst) == 0
            })
    }

    /// Reserves one unit of `len`; fails only when a bounded queue is full.
    fn reserve(&self) -> bool {
        match self.capacity {
            None => {
                // SeqCst: see the module docs (increment, then re-read `closed`).
                self.len.fetch_add(1, Ordering::SeqCst);
                true
            }
            Some(cap) => {
                let mut l = self.len.load(Ordering::Relaxed);
                loop {
                    if l >= cap {
                        return false;
                    }
                    // SeqCst: as above, and a producer's re-check in `block_on`.
                    match self.len.compare_exchange_weak(l, l + 1, Ordering::SeqCst, Ordering::Relaxed) {
                        Ok(_) => return true,
                        Err(now) => l = now,
                    }
                }
            }
        }
    }

    /// `n` items left the queue some way other than through the egress ring.
    pub(crate) fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        // SeqCst: the notifier side of the producers' and consumers' re-checks.
        let left = self.len.fetch_sub(n, Ordering::SeqCst) - n;
        if self.capacity.is_some() {
            self.signals.producers.notify(n);
        }
        if left == 0 && self.closed.load(Ordering::SeqCst) {
            self.signals.consumers.notify_all();
        }
    }

    /// A consumer took `n` items from the egress ring.
    fn taken(&self, n: usize) {
        // SeqCst: as in `release`.
        let left = self.len.fetch_sub(n, Ordering::SeqCst) - n;
        // SeqCst: one fence serves the two notifier checks below.
        fence(Ordering::SeqCst);
        if self.capacity.is_some() {
            self.signals.producers.notify_after_fence(n);
        }
        // The dequeue proxy waits for half the ring to be free, not one slot, so it
        // moves a batch per wakeup.
        if self.signals.dequeue.is_sleeping() && self.egress.len() <= self.egress.capacity() / 2 {
            self.signals.dequeue.ring_after_fence();
        }
        // Chain wake-up: the dequeue proxy wakes at most two consumers per round (a
        // wake is a syscall on its thread); a consumer that leaves items behind
        // wakes one more, so wake-ups spread over the consumers' threads.
        if self.signals.consumers.has_waiters() && self.egress.len() > 0 {
            self.signals.consumers.notify_after_fence(1);
        }
        if left == 0 && self.closed.load(Ordering::SeqCst) {
            self.signals.consumers.notify_all();
        }
    }

    pub(crate) fn send(&self, item: T, deadline: u64, wait: Wait) -> Result<u64, SendFail<T>> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(SendFail::Disconnected(item));
        }
        if !self.reserve() {
            let Wait::Until(until) = wait else { return Err(SendFail::Full(item)) };
            let got = block_on(&self.signals.producers, &self.clock, until, || {
                if self.closed.load(Ordering::SeqCst) {
                    Some(false)
                } else {
                    self.reserve().then_some(true)
                }
            });
            match got {
                Some(true) => {}
                Some(false) => return Err(SendFail::Disconnected(item)),
                None => return Err(SendFail::Timeout(item)),
            }
        }
        // SeqCst fence: re-read `closed` only after the reservation is globally
        // visible (module docs; loom models the fence, not the SeqCst accesses).
        fence(Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            self.release(1);
            return Err(SendFail::Disconnected(item));
        }
        // Relaxed: keys only need to be distinct.
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let cmd = Cmd::Insert { key, deadline, item };
        // Only a send that may block forever waits for ring room (back-pressure);
        // the others spill, so they never report a timeout or "full" for it.
        let pushed = match wait {
            Wait::Until(None) => self.ingress.push_or_wait(cmd),
            _ => self.ingress.push(cmd),
        };
        if let Err(cmd) = pushed {
            self.release(1);
            let Cmd::Insert { item, .. } = cmd else { unreachable!("pushed an insert") };
            return Err(SendFail::Disconnected(item));
        }
        self.signals.enqueue.ring();
        Ok(key)
    }

    /// Sends a command that expects an answer; `false` if the queue is disconnected.
    pub(crate) fn command(&self, cmd: Cmd<T>) -> bool {
        match self.ingress.push(cmd) {
            Ok(()) => {
                self.signals.enqueue.ring();
                true
            }
            Err(_) => false,
        }
    }

    /// Takes one due item, `(deadline, key, item)`, if the egress ring has one.
    pub(crate) fn try_take(&self) -> Option<(u64, u64, T)> {
        let entry = self.egress.pop()?;
        self.taken(1);
        Some(entry)
    }

    /// Takes due items, `(deadline, key, item)`, into `buf` until `limit` or the
    /// ring is empty.
    pub(crate) fn take_many(&self, buf: &mut Vec<(u64, u64, T)>, limit: usize) -> usize {
        let mut n = 0;
        while n < limit {
            let got = self.egress.pop_many(limit - n, buf);
            if got == 0 {
                break;
            }
            n += got;
        }
        if n > 0 {
            self.taken(n);
        }
        n
    }

    /// No new sends; pending items are still delivered.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.signals.producers.notify_all();
        self.signals.consumers.notify_all();
    }

    /// A mock clock moved. Returns once every command sent before the step is
    /// applied and the dequeue proxy has finished a round that read the new time,
    /// so that whatever the step made due is in the egress ring (room permitting),
    /// in deadline order, when `advance` returns. Then blocked clients re-check
    /// their deadlines.
    pub(crate) fn clock_moved(&self) {
        let (answer, reply) = crate::oneshot::pair();
        if self.command(Cmd::Sync { answer }) && reply.wait().is_some() {
            // Every earlier send is in the index: now the proxy may see the step.
            // SeqCst: see `delivery_now`.
            self.mock_now.fetch_max(self.now_ticks(), Ordering::SeqCst);
            // SeqCst RMW (not a load): it reads the latest count and, if the proxy's
            // next round-start increment follows it, that round happens-after the
            // clock step, so it reads the new time.
            let e = self.rounds.fetch_add(0, Ordering::SeqCst);
            // Even: between rounds, the next round reads the new time. Odd: the
            // running round may have read the old time; wait for the one after.
            let target = if e % 2 == 0 { e + 2 } else { e + 3 };
            self.signals.dequeue.force();
            block_on(&self.signals.rounds, &Clock::default(), None, || {
                (self.rounds.load(Ordering::SeqCst) >= target || self.disconnected.load(Ordering::SeqCst))
                    .then_some(())
            });
        }
        self.signals.consumers.notify_all();
        self.signals.producers.notify_all();
    }

    /// No receivers (or a dead proxy): refuse commands, wind the proxies down.
    pub(crate) fn disconnect(&self) {
        // Close first, then publish `disconnected`: whoever sees `disconnected`
        // (the proxies winding down) must also see `closed` and a closed ingress,
        // or a blocked send admitted by their `release` could slip in after them
        // (found by loom: `last_receiver_drop_releases_a_blocked_sender`).
        self.closed.store(true, Ordering::SeqCst);
        self.ingress.close();
        if self.disconnected.swap(true, Ordering::SeqCst) {
            return;
        }
        self.signals.enqueue.force();
        self.signals.dequeue.force();
        self.signals.producers.notify_all();
        self.signals.consumers.notify_all();
        // A clock step waiting for a dequeue round must not wait for a proxy that
        // is winding down.
        self.signals.rounds.notify_all();
    }
}

/// Drops items on a proxy thread; a panicking `Drop` must not kill the proxy.
pub(crate) fn drop_quietly<I: IntoIterator>(items: I) {
    for item in items {
        let _ = catch_unwind(AssertUnwindSafe(move || drop(item)));
    }
}
