//! `model`: one thread drives a queue on a `MockClock` through a sequence of
//! public-API operations and checks every result against a plain model.
//!
//! The model is the sorted `Vec` of the house style, made exact for the one
//! source of nondeterminism a single client still sees: the hand-off from the
//! enqueue proxy to the dequeue proxy runs on their own threads. An item that is
//! due when it arrives (a past deadline, a reschedule into the past) moves to the
//! consumers' ring at some moment the client cannot observe, and a send may still
//! be unapplied when the clock moves. So the model keeps the *set* of queue states
//! the real queue may be in (egress ring as a `Vec` in ring order, heap as a sorted
//! set, how many sends the enqueue proxy has applied), closes it under the two
//! proxy steps (apply the next send; move the next due item in `(deadline, key)`
//! order: a round publishes its moves one by one, and a consumer may take from
//! it in between) and keeps, after each observation, only the states that
//! explain it. An
//! empty set is a bug. Every operation that synchronises (cancel, reschedule,
//! peek, take_pending, a clock step) collapses the unapplied part, and receives
//! collapse the rest, so the set stays small.
//!
//! Checked at every step: each result (item ids, `None`/`false`, `Empty`,
//! `Disconnected`, deadlines), never early, exactly once, `len()` exact, every
//! pending item not yet dropped; at the end every item dropped exactly once.

#![no_main]

use arbitrary::Arbitrary;
use delayq::{Builder, Key, MockClock, Receiver, Sender, TryRecvError, TrySendError};
use delayq_fuzz::{ms, years, Item, Ticks, Tracker, NEVER};
use libfuzzer_sys::fuzz_target;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Queue states kept at once before an input is given up as too ambiguous.
const MAX_STATES: usize = 2048;
/// Pending items at most on an unbounded queue: more than its 1024-slot egress
/// ring holds, so that a clock step can leave due items behind a full ring (and
/// the dequeue proxy waiting for room).
const MAX_PENDING: usize = 2400;
/// The egress ring of an unbounded queue (a bounded one here holds at most 32
/// items, which its ring always has room for).
const EGRESS: usize = 1024;
/// Deadlines and clock steps in years: 0..700, across the queue's horizon (about
/// 484 years after it was built).
const MAX_YEARS: u16 = 700;
/// Handles of each kind alive at once.
const MAX_HANDLES: usize = 8;

/// Deadlines and delays: 0..40 ms, few enough values that equal deadlines and
/// deadlines on a clock step are common.
fn deadline_ms(n: u8) -> Duration {
    ms(u64::from(n % 40))
}

/// Less than a millisecond, in nanoseconds.
fn sub_ms(ns: u32) -> Duration {
    Duration::from_nanos(u64::from(ns % 1_000_000))
}

/// Clock steps: 0..20 ms, so that items fall due a few at a time.
fn step_ms(n: u8) -> Duration {
    ms(u64::from(n % 20))
}

#[derive(Arbitrary, Debug)]
struct Input {
    /// The timer index: the 4-ary heap, or the timing wheel (the default).
    heap: bool,
    /// `None`: unbounded; `Some(c)`: bounded to `c % 32 + 1`.
    capacity: Option<u8>,
    /// `Builder::helping(false)`: the proxies alone perform their roles
    /// (otherwise clients that find a proxy parked or late perform them).
    no_help: bool,
    ops: Vec<Op>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Delay {
    Zero,
    Ms(u8),
    /// `Duration::MAX`: saturates, never due.
    Far,
    /// `years % MAX_YEARS` years.
    Years(u16),
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// `send_at(start + deadline_ms(at_ms))`; skipped where it would block (bounded
    /// and full).
    SendAt {
        tx: u8,
        at_ms: u8,
    },
    SendAfter {
        tx: u8,
        delay: Delay,
    },
    TrySendAt {
        tx: u8,
        at_ms: u8,
    },
    /// `cancel` of the `key % n`-th key ever returned.
    Cancel {
        tx: u8,
        key: u8,
    },
    Reschedule {
        tx: u8,
        key: u8,
        at_ms: u8,
    },
    Advance {
        ms: u8,
    },
    /// `advance(years % MAX_YEARS)`.
    AdvanceYears {
        years: u16,
    },
    /// `advance(Duration::MAX)`: the mock clock jumps past the horizon.
    AdvanceMax,
    /// `send_at(start + deadline_ms(at_ms) + ns % 1 ms)`: deadlines between the
    /// timing wheel's 1,024 ns granules and 65,536 ns rotations.
    SendAtNs {
        tx: u8,
        at_ms: u8,
        ns: u32,
    },
    /// `MockClock::set(start + at_ms % 160 ms + ns % 1 ms)`.
    SetNs {
        at_ms: u16,
        ns: u32,
    },
    /// `send_at(start + years % MAX_YEARS)`.
    SendAtYears {
        tx: u8,
        years: u16,
    },
    RescheduleYears {
        tx: u8,
        key: u8,
        years: u16,
    },
    /// `(n % 160 + 1) * 8` sends due `at_ms % 40 + 1` ms after the clock's now:
    /// with a step, more due items than the egress ring holds.
    Burst {
        tx: u8,
        at_ms: u8,
        n: u8,
    },
    /// `MockClock::set(start + at_ms % 160 ms)`; earlier than now leaves the time
    /// alone.
    Set {
        at_ms: u16,
    },
    TryRecv {
        rx: u8,
    },
    /// Only when something is due (or the queue is exhausted), so it never blocks.
    RecvMany {
        rx: u8,
        limit: u8,
    },
    PeekDeadline {
        rx: u8,
    },
    Close {
        rx: u8,
    },
    TakePending {
        rx: u8,
    },
    CloneSender {
        tx: u8,
    },
    DropSender {
        tx: u8,
    },
    CloneReceiver {
        rx: u8,
    },
    DropReceiver {
        rx: u8,
    },
    Len,
}

/// One possible state of the real queue.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct State {
    /// Item ids in the egress ring, oldest first.
    egress: VecDeque<u32>,
    /// `(deadline, send order, id)` of the items in the heap.
    heap: BTreeSet<(u64, u64, u32)>,
    /// How many of `Model::unapplied` the enqueue proxy has inserted.
    applied: usize,
}

#[derive(Clone, Copy, Debug)]
struct Meta {
    deadline: u64,
    seq: u64,
}

struct Model {
    ticks: Ticks,
    now: u64,
    capacity: Option<usize>,
    /// Items the egress ring holds.
    egress_cap: usize,
    /// Sent and not yet received, cancelled or taken.
    pending: BTreeMap<u32, Meta>,
    /// Every item ever sent, with its latest deadline (read for unapplied sends).
    metas: HashMap<u32, Meta>,
    /// Sends since the last synchronising operation, in send order.
    unapplied: Vec<u32>,
    states: HashSet<State>,
    /// Send order, which is key order: equal deadlines leave in it.
    next_seq: u64,
    closed: bool,
    /// Every receiver is gone: pending items are dropped by the queue.
    disconnected: bool,
    /// Pending when the last receiver went: the queue must drop each once.
    doomed: Vec<u32>,
    gave_up: bool,
}

impl Model {
    fn new(ticks: Ticks, now: u64, capacity: Option<usize>) -> Model {
        let start = State { egress: VecDeque::new(), heap: BTreeSet::new(), applied: 0 };
        Model {
            ticks,
            now,
            capacity,
            egress_cap: if capacity.is_some() { usize::MAX } else { EGRESS },
            pending: BTreeMap::new(),
            metas: HashMap::new(),
            unapplied: Vec::new(),
            states: HashSet::from([start]),
            next_seq: 0,
            closed: false,
            disconnected: false,
            doomed: Vec::new(),
            gave_up: false,
        }
    }

    fn meta(&self, id: u32) -> Meta {
        self.metas[&id]
    }

    fn set_meta(&mut self, id: u32, m: Meta) {
        self.pending.insert(id, m);
        self.metas.insert(id, m);
    }

    fn bump(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    fn apply_next(&self, s: &mut State) {
        let id = self.unapplied[s.applied];
        s.applied += 1;
        let m = self.meta(id);
        s.heap.insert((m.deadline, m.seq, id));
    }

    fn has_due(&self, s: &State) -> bool {
        s.egress.len() < self.egress_cap && s.heap.first().is_some_and(|&(d, _, _)| d <= self.now)
    }

    /// One step of a dequeue proxy's round: the next due item, if the egress ring
    /// has room for it.
    fn move_next(&self, s: &mut State) {
        if let Some(&(d, seq, id)) = s.heap.first() {
            if d <= self.now && s.egress.len() < self.egress_cap {
                s.heap.remove(&(d, seq, id));
                s.egress.push_back(id);
            }
        }
    }

    /// The dequeue proxy's round: every due item, in `(deadline, seq)` order, as
    /// far as the egress ring has room (a clock step waits for a whole round).
    fn round(&self, s: &mut State) {
        while let Some(&(d, seq, id)) = s.heap.first() {
            if d > self.now || s.egress.len() >= self.egress_cap {
                break;
            }
            s.heap.remove(&(d, seq, id));
            s.egress.push_back(id);
        }
    }

    /// Closes the state set under the proxies' steps. `full`: also apply sends that
    /// are not due (which changes nothing observable until the clock moves or a
    /// command reads the heap, so by default only the ones that must be applied
    /// before a due send are).
    fn settle(&mut self, full: bool) {
        if self.disconnected || self.gave_up {
            return;
        }
        let last_due = self.unapplied.iter().rposition(|&id| self.meta(id).deadline <= self.now);
        let mut seen: HashSet<State> = HashSet::new();
        let mut work: Vec<State> = self.states.drain().collect();
        while let Some(s) = work.pop() {
            if seen.contains(&s) {
                continue;
            }
            let limit = if full { self.unapplied.len() } else { last_due.map_or(0, |i| i + 1) };
            if s.applied < limit {
                // A send that is not due commutes with the dequeue proxy's rounds
                // (they move due items only), so a run of them is one step: the
                // states in between would differ only in how many were applied.
                let not_due = |n: &State| self.meta(self.unapplied[n.applied]).deadline > self.now;
                let mut n = s.clone();
                let run = not_due(&n);
                self.apply_next(&mut n);
                while run && n.applied < limit && not_due(&n) {
                    self.apply_next(&mut n);
                }
                work.push(n);
            }
            if self.has_due(&s) {
                // One move, not the whole round: the dequeue proxy publishes each
                // push on its own, so a consumer can take the first item of a round
                // and find the ring empty before the second is pushed (the fuzzer
                // found the model's atomic rounds too strict: `recv_many` returned
                // the earlier of two due items alone).
                let mut n = s.clone();
                self.move_next(&mut n);
                work.push(n);
            }
            seen.insert(s);
            if seen.len() > MAX_STATES {
                self.gave_up = true;
                break;
            }
        }
        self.states = seen;
    }

    /// Keeps the states that explain an observation; panics if none does.
    fn keep(&mut self, what: &str, mut f: impl FnMut(&mut State) -> bool) {
        if self.gave_up {
            return; // the state set is incomplete: nothing to conclude
        }
        let before = self.states.len();
        let kept: HashSet<State> = self.states.drain().filter_map(|mut s| f(&mut s).then_some(s)).collect();
        assert!(!kept.is_empty(), "{what}: no queue state explains it ({before} candidates)");
        self.states = kept;
    }

    /// A command that the enqueue proxy answers: every earlier send is applied.
    fn synchronise(&mut self) {
        self.settle(true);
        let all = self.unapplied.len();
        self.keep("command", |s| s.applied == all);
        self.unapplied.clear();
        self.states = self.states.drain().map(|s| State { applied: 0, ..s }).collect();
    }

    /// A clock step to `now`: returns with every send applied and every due item
    /// in the egress ring, as far as it has room. The queue makes a step visible
    /// to its dequeue proxy only once every earlier send is applied, so the sends
    /// settle at the old time, and the round at the new time follows.
    fn clock_step(&mut self, now: u64) {
        if !self.disconnected && !self.gave_up {
            self.settle(true);
            let all = self.unapplied.len();
            self.keep("clock step: sends applied", |s| s.applied == all);
            self.unapplied.clear();
        }
        self.now = now;
        if self.disconnected || self.gave_up {
            return;
        }
        let cap = self.egress_cap;
        let states: Vec<State> = self.states.drain().collect();
        for mut s in states {
            s.applied = 0;
            self.round(&mut s);
            self.states.insert(s);
        }
        let due_left = |s: &State| s.heap.first().is_some_and(|&(d, _, _)| d <= now);
        if self.states.iter().all(|s| s.egress.len() >= cap && due_left(s)) {
            // The dequeue proxy now waits for room in the egress ring.
            REACHED.space.fetch_add(1, Ordering::Relaxed);
        }
        if now == NEVER - 1 {
            REACHED.end_of_time.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn received(&mut self, id: u32) {
        let Some(m) = self.pending.get(&id).copied() else {
            panic!("received item {id}, which is not pending (duplicate or never sent)");
        };
        assert!(
            m.deadline <= self.now,
            "item {id} received early: deadline {} > now {}",
            m.deadline,
            self.now
        );
        self.settle(false);
        self.keep(&format!("received {id}"), |s| {
            if s.egress.front() == Some(&id) {
                s.egress.pop_front();
                true
            } else {
                false
            }
        });
        self.pending.remove(&id);
        self.settle(false);
    }

    fn saw_empty(&mut self) {
        self.settle(false);
        self.keep("try_recv Empty", |s| s.egress.is_empty());
    }

    fn exhausted(&self) -> bool {
        self.closed && self.pending.is_empty()
    }

    fn something_due(&self) -> bool {
        self.pending.values().any(|m| m.deadline <= self.now)
    }

    /// The documented order of `take_pending`: deadline, then key (send) order.
    fn sorted_pending(&self) -> Vec<(u64, u64, u32)> {
        let mut v: Vec<_> = self.pending.iter().map(|(&id, m)| (m.deadline, m.seq, id)).collect();
        v.sort_unstable();
        v
    }
}

struct Harness {
    clock: MockClock,
    start: Instant,
    tracker: Arc<Tracker>,
    txs: Vec<Sender<Item>>,
    rxs: Vec<Receiver<Item>>,
    keys: Vec<(Key, u32)>,
    key_set: HashSet<Key>,
    m: Model,
}

fn pick<T>(v: &[T], i: u8) -> Option<&T> {
    (!v.is_empty()).then(|| &v[usize::from(i) % v.len()])
}

enum How {
    At(Instant),
    After(Duration),
    TryAt(Instant),
}

impl Harness {
    fn check_drops(&self) {
        for &id in self.m.pending.keys() {
            assert_eq!(self.tracker.drops(id), 0, "pending item {id} was dropped");
        }
    }

    fn deadline_of(&self, how: &How) -> u64 {
        let d = match *how {
            How::At(t) | How::TryAt(t) => self.m.ticks.deadline(t, self.clock.now()),
            How::After(d) => Ticks::after(self.m.now, d),
        };
        if d == NEVER {
            REACHED.never_due.fetch_add(1, Ordering::Relaxed);
        }
        d
    }

    fn send(&mut self, tx: u8, how: How) {
        self.send_quietly(tx, how);
        self.m.settle(false);
    }

    /// A send, without closing the state set under the proxies' steps (a burst
    /// settles once, after its last send: hashing states of a thousand items per
    /// send made bursts quadratic).
    fn send_quietly(&mut self, tx: u8, how: How) {
        let Some(tx) = pick(&self.txs, tx).cloned() else { return };
        let full = self.m.capacity.is_some_and(|c| self.m.pending.len() >= c);
        let refused = self.m.closed || self.m.disconnected;
        if !refused && !matches!(how, How::TryAt(_)) && full {
            return; // would block forever: nobody else runs
        }
        if !refused && !full && self.m.capacity.is_none() && self.m.pending.len() >= MAX_PENDING {
            return;
        }
        let deadline = self.deadline_of(&how);
        let item = self.tracker.item();
        let id = item.id;
        let r = match how {
            How::At(t) => tx.send_at(item, t).map_err(|e| (false, e.into_inner())),
            How::After(d) => tx.send_after(item, d).map_err(|e| (false, e.into_inner())),
            How::TryAt(t) => tx.try_send_at(item, t).map_err(|e| match e {
                TrySendError::Full(x) => (true, x),
                TrySendError::Disconnected(x) => (false, x),
            }),
        };
        match r {
            Ok(key) => {
                assert!(!refused && !full, "send of {id} succeeded on a closed or full queue");
                assert!(self.key_set.insert(key), "key {key:?} reused");
                let seq = self.m.bump();
                self.m.set_meta(id, Meta { deadline, seq });
                self.m.unapplied.push(id);
                self.keys.push((key, id));
            }
            Err((was_full, back)) => {
                assert_eq!(back.id, id, "a failed send handed back another item");
                if refused {
                    assert!(!was_full, "send of {id} on a closed queue reported Full, not Disconnected");
                } else {
                    assert!(
                        full && was_full,
                        "send of {id} failed (full: {was_full}) on an open queue with room"
                    );
                }
            }
        }
    }

    fn cancel(&mut self, tx: u8, key: u8) {
        let Some(tx) = pick(&self.txs, tx).cloned() else { return };
        let Some(&(key, id)) = pick(&self.keys, key) else { return };
        let r = tx.cancel(key);
        if self.m.disconnected {
            assert!(r.is_none(), "cancel of {id} after disconnection returned an item");
            return;
        }
        self.m.synchronise();
        match r {
            Some(item) => {
                assert_eq!(item.id, id, "cancel returned another item");
                let m = self
                    .m
                    .pending
                    .get(&id)
                    .copied()
                    .unwrap_or_else(|| panic!("cancel returned {id}, not pending"));
                self.m.keep(&format!("cancel({id}) = Some"), |s| s.heap.remove(&(m.deadline, m.seq, id)));
                self.m.pending.remove(&id);
            }
            None => {
                if let Some(m) = self.m.pending.get(&id).copied() {
                    self.m.keep(&format!("cancel({id}) = None"), |s| {
                        !s.heap.contains(&(m.deadline, m.seq, id))
                    });
                }
            }
        }
        self.m.settle(false);
    }

    fn reschedule(&mut self, tx: u8, key: u8, at: Instant) {
        let Some(tx) = pick(&self.txs, tx).cloned() else { return };
        let Some(&(key, id)) = pick(&self.keys, key) else { return };
        let r = tx.reschedule(key, at);
        if self.m.disconnected {
            assert!(!r, "reschedule of {id} after disconnection returned true");
            return;
        }
        self.m.synchronise();
        let deadline = self.m.ticks.deadline(at, self.clock.now());
        match (r, self.m.pending.get(&id).copied()) {
            (true, None) => panic!("reschedule of {id} returned true, but it is not pending"),
            (true, Some(m)) => {
                // The item keeps its key, and so its rank among equal deadlines.
                self.m.keep(&format!("reschedule({id}) = true"), |s| {
                    s.heap.remove(&(m.deadline, m.seq, id)) && s.heap.insert((deadline, m.seq, id))
                });
                self.m.set_meta(id, Meta { deadline, seq: m.seq });
            }
            (false, Some(m)) => {
                self.m.keep(&format!("reschedule({id}) = false"), |s| {
                    !s.heap.contains(&(m.deadline, m.seq, id))
                });
            }
            (false, None) => {}
        }
        self.m.settle(false);
    }

    fn step_clock(&mut self, to: Option<Instant>, by: Duration) {
        match to {
            Some(t) => self.clock.set(t),
            None => self.clock.advance(by),
        }
        let now = self.m.ticks.now(self.clock.now());
        assert!(now >= self.m.now, "the mock clock ran backwards");
        if by >= years(1) {
            REACHED.century_steps.fetch_add(1, Ordering::Relaxed);
        }
        self.m.clock_step(now);
    }

    fn try_recv(&mut self, rx: u8) {
        let Some(rx) = pick(&self.rxs, rx).cloned() else { return };
        let exhausted = self.m.exhausted();
        match rx.try_recv() {
            Ok(item) => {
                assert!(!exhausted, "try_recv returned {} from an exhausted queue", item.id);
                self.receive(item);
            }
            Err(TryRecvError::Empty) => {
                assert!(!exhausted, "try_recv: Empty on a closed, empty queue (want Disconnected)");
                self.m.saw_empty();
            }
            Err(TryRecvError::Disconnected) => {
                assert!(
                    exhausted,
                    "try_recv: Disconnected with {} pending, closed: {}",
                    self.m.pending.len(),
                    self.m.closed
                );
            }
        }
    }

    fn receive(&mut self, item: Item) {
        assert_eq!(self.tracker.drops(item.id), 0, "received item {} was already dropped", item.id);
        self.m.received(item.id);
    }

    fn recv_many(&mut self, rx: u8, limit: u8) {
        let Some(rx) = pick(&self.rxs, rx).cloned() else { return };
        let limit = usize::from(limit % 8);
        let exhausted = self.m.exhausted();
        if limit > 0 && !exhausted && !self.m.something_due() {
            return; // would block until a clock step nobody makes
        }
        let mut buf = Vec::new();
        match rx.recv_many(&mut buf, limit) {
            Ok(n) => {
                assert_eq!(n, buf.len(), "recv_many's count disagrees with the items appended");
                assert!(n <= limit, "recv_many returned {n} > limit {limit}");
                assert!(
                    limit == 0 || (n >= 1 && !exhausted),
                    "recv_many returned {n} (exhausted: {exhausted})"
                );
                for item in buf {
                    self.receive(item);
                }
                if n < limit {
                    self.m.saw_empty();
                }
            }
            Err(_) => assert!(exhausted && limit > 0, "recv_many: RecvError on a live queue"),
        }
    }

    fn peek(&mut self, rx: u8) {
        let Some(rx) = pick(&self.rxs, rx).cloned() else { return };
        let got = rx.peek_deadline().map(|t| self.m.ticks.of(t));
        self.m.synchronise();
        let want = self.m.pending.values().map(|m| m.deadline).min();
        assert_eq!(got, want, "peek_deadline: not the earliest pending deadline");
        self.m.settle(false);
    }

    fn take_pending(&mut self, rx: u8) {
        let Some(rx) = pick(&self.rxs, rx).cloned() else { return };
        if !self.m.closed && !self.m.pending.is_empty() {
            REACHED.take_pending_open.fetch_add(1, Ordering::Relaxed);
        }
        let got = rx.take_pending();
        self.m.synchronise();
        let got: Vec<(u64, u32)> = got.into_iter().map(|(t, item)| (self.m.ticks.of(t), item.id)).collect();
        let want: Vec<(u64, u32)> = self.m.sorted_pending().into_iter().map(|(d, _, id)| (d, id)).collect();
        assert_eq!(got, want, "take_pending: not every pending item in deadline order");
        self.m.pending.clear();
        self.m.keep("take_pending", |s| {
            s.egress.clear();
            s.heap.clear();
            true
        });
    }

    fn check_len(&self) {
        let Some(tx) = self.txs.first() else { return };
        let disc = self.m.closed || self.m.disconnected;
        assert_eq!(tx.is_disconnected(), disc, "is_disconnected");
        assert_eq!(tx.capacity(), self.m.capacity);
        if let Some(rx) = self.rxs.first() {
            assert_eq!(rx.capacity(), self.m.capacity);
        }
        if self.m.disconnected {
            return; // the enqueue proxy drops what was pending in its own time
        }
        let n = self.m.pending.len();
        assert_eq!(tx.len(), n, "len()");
        assert_eq!(tx.is_empty(), n == 0);
        assert_eq!(tx.is_full(), self.m.capacity.is_some_and(|c| n >= c));
    }

    fn run(&mut self, op: &Op) {
        let at = |n: u8| self.start + deadline_ms(n);
        match *op {
            Op::SendAt { tx, at_ms } => self.send(tx, How::At(at(at_ms))),
            Op::SendAfter { tx, delay } => {
                let d = match delay {
                    Delay::Zero => Duration::ZERO,
                    Delay::Ms(n) => deadline_ms(n),
                    Delay::Far => Duration::MAX,
                    Delay::Years(y) => years(u64::from(y % MAX_YEARS)),
                };
                self.send(tx, How::After(d))
            }
            Op::TrySendAt { tx, at_ms } => self.send(tx, How::TryAt(at(at_ms))),
            Op::Cancel { tx, key } => self.cancel(tx, key),
            Op::Reschedule { tx, key, at_ms } => self.reschedule(tx, key, at(at_ms)),
            Op::Advance { ms: n } => self.step_clock(None, step_ms(n)),
            Op::SendAtNs { tx, at_ms, ns } => self.send(tx, How::At(at(at_ms) + sub_ms(ns))),
            Op::SetNs { at_ms, ns } => {
                let to = self.start + ms(u64::from(at_ms % 160)) + sub_ms(ns);
                self.step_clock(Some(to), Duration::ZERO)
            }
            Op::AdvanceYears { years: y } => self.step_clock(None, years(u64::from(y % MAX_YEARS))),
            Op::AdvanceMax => self.step_clock(None, Duration::MAX),
            Op::SendAtYears { tx, years: y } => {
                self.send(tx, How::At(self.start + years(u64::from(y % MAX_YEARS))))
            }
            Op::RescheduleYears { tx, key, years: y } => {
                self.reschedule(tx, key, self.start + years(u64::from(y % MAX_YEARS)))
            }
            Op::Burst { tx, at_ms, n } => {
                let at = self.clock.now() + ms(u64::from(at_ms % 40) + 1);
                for _ in 0..(usize::from(n % 160) + 1) * 8 {
                    self.send_quietly(tx, How::At(at));
                }
                self.m.settle(false);
            }
            Op::Set { at_ms } => {
                self.step_clock(Some(self.start + ms(u64::from(at_ms % 160))), Duration::ZERO)
            }
            Op::TryRecv { rx } => self.try_recv(rx),
            Op::RecvMany { rx, limit } => self.recv_many(rx, limit),
            Op::PeekDeadline { rx } => self.peek(rx),
            Op::Close { rx } => {
                let Some(rx) = pick(&self.rxs, rx) else { return };
                rx.close();
                self.m.closed = true;
            }
            Op::TakePending { rx } => self.take_pending(rx),
            Op::CloneSender { tx } => {
                if self.txs.len() < MAX_HANDLES {
                    if let Some(t) = pick(&self.txs, tx).cloned() {
                        self.txs.push(t);
                    }
                }
            }
            Op::CloneReceiver { rx } => {
                if self.rxs.len() < MAX_HANDLES {
                    if let Some(r) = pick(&self.rxs, rx).cloned() {
                        self.rxs.push(r);
                    }
                }
            }
            Op::DropSender { tx } => {
                if !self.txs.is_empty() {
                    let i = usize::from(tx) % self.txs.len();
                    drop(self.txs.swap_remove(i));
                    if self.txs.is_empty() {
                        self.m.closed = true;
                    }
                }
            }
            Op::DropReceiver { rx } => {
                if !self.rxs.is_empty() {
                    let i = usize::from(rx) % self.rxs.len();
                    drop(self.rxs.swap_remove(i));
                    if self.rxs.is_empty() {
                        self.m.closed = true;
                        self.m.disconnected = true;
                        let doomed: Vec<u32> = self.m.pending.keys().copied().collect();
                        self.m.doomed.extend(doomed);
                        self.m.pending.clear();
                        self.m.states.clear();
                    }
                }
            }
            Op::Len => {}
        }
        self.check_len();
        self.check_drops();
    }
}

/// How often inputs reached the regions the reliability issue named (printed
/// every few thousand inputs, so a run shows that it got there).
struct Reached {
    inputs: AtomicU64,
    space: AtomicU64,
    take_pending_open: AtomicU64,
    never_due: AtomicU64,
    century_steps: AtomicU64,
    end_of_time: AtomicU64,
}

static REACHED: Reached = Reached {
    inputs: AtomicU64::new(0),
    space: AtomicU64::new(0),
    take_pending_open: AtomicU64::new(0),
    never_due: AtomicU64::new(0),
    century_steps: AtomicU64::new(0),
    end_of_time: AtomicU64::new(0),
};

impl Reached {
    fn report(&self) {
        let n = self.inputs.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() || n.is_multiple_of(8192) {
            let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
            eprintln!(
                "reached after {n} inputs: egress full with due items left {}, take_pending while open {}, \
                 never-due sends {}, clock steps of a year or more {}, clock at the horizon {}",
                r(&self.space),
                r(&self.take_pending_open),
                r(&self.never_due),
                r(&self.century_steps),
                r(&self.end_of_time),
            );
        }
    }
}

fuzz_target!(|input: Input| {
    REACHED.report();
    let capacity = input.capacity.map(|c| usize::from(c % 32) + 1);
    let clock = MockClock::new();
    let start = clock.now();
    let mut b = Builder::new().clock(clock.clone()).timer_index(if input.heap { "heap" } else { "wheel" });
    if let Some(c) = capacity {
        b = b.capacity(c);
    }
    b = b.helping(!input.no_help);
    let (tx, rx) = b.build::<Item>().expect("build");
    let ticks = Ticks::new(start);
    let tracker = Tracker::new();
    let mut h = Harness {
        clock: clock.clone(),
        start,
        tracker: tracker.clone(),
        txs: vec![tx],
        rxs: vec![rx],
        keys: Vec::new(),
        key_set: HashSet::new(),
        m: Model::new(ticks, ticks.now(start), capacity),
    };
    for op in &input.ops {
        if h.txs.is_empty() && h.rxs.is_empty() {
            break;
        }
        h.run(op);
        if h.m.gave_up {
            break;
        }
    }
    // The last handle joins both proxies: everything is dropped by then.
    h.txs.clear();
    h.rxs.clear();
    let Harness { m, .. } = h;
    for id in m.pending.keys().chain(&m.doomed) {
        assert_eq!(tracker.drops(*id), 1, "item {id} pending at shutdown was not dropped exactly once");
    }
    tracker.assert_each_dropped_once();
});
