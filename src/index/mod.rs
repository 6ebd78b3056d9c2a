//! The timer index the two proxies share: which backend, and what they have in
//! common.
//!
//! Both backends store items in a key-indexed table ([`Slots`](slots::Slots))
//! and order 16-byte [`Node`](node::Node)s `(deadline, key)`. A node is live
//! while the table holds an entry for its key with the same deadline; `cancel`
//! removes the entry and `reschedule` changes its deadline and adds a node, so
//! stale nodes become tombstones that the backends skip and sweep. Equal
//! deadlines leave in key order.
//!
//! Files: `node.rs` (the [`Node`](node::Node)s and [`Entry`](node::Entry)s
//! every backend shares, a leaf), `slots.rs` (the key → entry table), and one
//! file per backend behind the [`Index`] enum: `heap.rs` ([`HeapIndex`], a
//! 4-ary heap) and `wheel.rs` ([`WheelIndex`], a hierarchical timing wheel
//! with exact order, the default; see `wheel.rs` for why). This file only
//! dispatches.

mod heap;
mod node;
mod slots;
mod wheel;

use self::heap::HeapIndex;
use self::wheel::WheelIndex;
use crate::clock::NEVER;

/// Which timer index a queue uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Kind {
    Heap,
    #[default]
    Wheel,
}

#[derive(Debug)]
pub(crate) enum Index<T> {
    Heap(HeapIndex<T>),
    Wheel(WheelIndex<T>),
}

impl<T> Index<T> {
    pub(crate) fn new(kind: Kind, now: u64) -> Self {
        match kind {
            Kind::Heap => Index::Heap(HeapIndex::new()),
            Kind::Wheel => Index::Wheel(WheelIndex::new(now)),
        }
    }

    pub(crate) fn insert(&mut self, key: u64, deadline: u64, item: T) {
        match self {
            Index::Heap(i) => i.insert(key, deadline, item),
            Index::Wheel(i) => i.insert(key, deadline, item),
        }
    }

    pub(crate) fn cancel(&mut self, key: u64) -> Option<(u64, T)> {
        match self {
            Index::Heap(i) => i.cancel(key),
            Index::Wheel(i) => i.cancel(key),
        }
    }

    pub(crate) fn reschedule(&mut self, key: u64, deadline: u64) -> bool {
        match self {
            Index::Heap(i) => i.reschedule(key, deadline),
            Index::Wheel(i) => i.reschedule(key, deadline),
        }
    }

    /// The earliest live deadline, exactly.
    pub(crate) fn peek(&mut self) -> Option<u64> {
        match self {
            Index::Heap(i) => i.peek(),
            Index::Wheel(i) => i.peek(),
        }
    }

    /// A time no later than the earliest live deadline, at which the dequeue
    /// proxy should look again (cheaper than `peek` for the wheel); `None` if
    /// nothing can fall due (never-due items only, or none).
    pub(crate) fn next_wake(&mut self) -> Option<u64> {
        match self {
            Index::Heap(i) => i.peek().filter(|&t| t != NEVER),
            Index::Wheel(i) => i.next_wake(),
        }
    }

    /// Removes the earliest item if its deadline is `<= now`: `(deadline, key, item)`.
    /// An item whose deadline is [`NEVER`] is never due.
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<(u64, u64, T)> {
        match self {
            Index::Heap(i) => i.pop_due(now),
            Index::Wheel(i) => i.pop_due(now),
        }
    }

    /// Removes every item, in `(deadline, key)` order: `(deadline, key, item)`.
    pub(crate) fn take_all(&mut self) -> Vec<(u64, u64, T)> {
        match self {
            Index::Heap(i) => i.take_all(),
            Index::Wheel(i) => i.take_all(),
        }
    }

    /// Items held (what `trim` waits for to be none).
    pub(crate) fn len(&self) -> usize {
        match self {
            Index::Heap(i) => i.len(),
            Index::Wheel(i) => i.len(),
        }
    }

    /// Entries and nodes the index's buffers have room for (O(pages + slots)).
    #[cfg(all(test, not(delayq_loom)))]
    pub(crate) fn room(&self) -> usize {
        match self {
            Index::Heap(i) => i.room(),
            Index::Wheel(i) => i.room(),
        }
    }

    /// Gives back what the buffers hold beyond room for `need` items
    /// (`tidy.rs` decides `need`); with no item held and none needed, all of
    /// it (`trim`).
    pub(crate) fn release_beyond(&mut self, need: usize) {
        match self {
            Index::Heap(i) => i.release_beyond(need),
            Index::Wheel(i) => i.release_beyond(need),
        }
    }

    /// With no item held: hands back every buffer a burst left behind (node
    /// vectors, spare pages), so that an empty index holds what a new one
    /// does.
    pub(crate) fn trim(&mut self) {
        if self.len() != 0 {
            return;
        }
        match self {
            Index::Heap(i) => i.trim(),
            Index::Wheel(i) => i.trim(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Semantics every backend must have, on a tiny scenario with exact results.
    pub(crate) fn check_basic_semantics(ix: &mut Index<u64>) {
        for (k, d) in [(1, 50), (2, 10), (3, 50), (4, 30), (5, 10)] {
            ix.insert(k, d, k * 100);
        }
        assert_eq!(ix.peek(), Some(10));
        assert_eq!(ix.cancel(4), Some((30, 400)));
        assert_eq!(ix.cancel(4), None);
        assert!(ix.reschedule(3, 5));
        assert!(!ix.reschedule(9, 5));
        assert_eq!(ix.peek(), Some(5));
        assert!(ix.next_wake().is_some_and(|w| w <= 5));
        assert!(ix.pop_due(4).is_none());
        let mut out = vec![];
        while let Some((d, _, item)) = ix.pop_due(100) {
            out.push((d, item));
        }
        assert_eq!(out, vec![(5, 300), (10, 200), (10, 500), (50, 100)]);
        // Rescheduled back and forth: one delivery, at the last deadline.
        ix.insert(7, 40, 7);
        assert!(ix.reschedule(7, 60));
        assert!(ix.reschedule(7, 40));
        assert!(ix.reschedule(7, 40));
        assert_eq!(ix.pop_due(100), Some((40, 7, 7)));
        assert_eq!(ix.pop_due(u64::MAX), None);
        assert_eq!(ix.peek(), None);
        // Past deadlines (before anything popped) and take_all order.
        ix.insert(8, 3, 8);
        ix.insert(9, 1_000_000_000, 9);
        ix.insert(10, 2, 10);
        ix.insert(11, u64::MAX, 11);
        assert_eq!(ix.take_all(), vec![(2, 10, 10), (3, 8, 8), (1_000_000_000, 9, 9), (u64::MAX, 11, 11)]);
        assert_eq!(ix.pop_due(u64::MAX), None);
    }

    pub(crate) enum Op {
        Insert(u64, u64),
        Cancel(u64),
        Reschedule(u64, u64),
        PopDue(u64),
        /// Answered as `Some((earliest deadline, 0))`.
        Peek,
    }

    pub(crate) fn apply_heap(h: &mut HeapIndex<u64>, op: Op) -> Option<(u64, u64)> {
        match op {
            Op::Insert(k, d) => {
                h.insert(k, d, k);
                None
            }
            Op::Cancel(k) => h.cancel(k),
            Op::Reschedule(k, d) => h.reschedule(k, d).then_some((d, k)),
            Op::PopDue(now) => h.pop_due(now).map(|(d, _, item)| (d, item)),
            Op::Peek => h.peek().map(|d| (d, 0)),
        }
    }

    pub(crate) fn apply_wheel(w: &mut WheelIndex<u64>, op: Op) -> Option<(u64, u64)> {
        let r = match op {
            Op::Insert(k, d) => {
                w.insert(k, d, k);
                None
            }
            Op::Cancel(k) => w.cancel(k),
            Op::Reschedule(k, d) => w.reschedule(k, d).then_some((d, k)),
            Op::PopDue(now) => w.pop_due(now).map(|(d, _, item)| (d, item)),
            Op::Peek => w.peek().map(|d| (d, 0)),
        };
        w.check_invariants();
        r
    }

    /// Deadline spreads reaching every level of the wheel.
    pub(crate) const WIDE: &[u64] = &[1 << 8, 1 << 14, 1 << 22, 1 << 32, 1 << 42];
    /// Deadline spreads around one rotation of the wheel's lowest level.
    pub(crate) const NARROW: &[u64] = &[1 << 10, 1 << 16, 1 << 17];

    /// Drives a backend and a sorted-`Vec` model with the same pseudo-random ops
    /// (deadlines spread from nanoseconds to hours around a moving "now", a few
    /// never-due or at the very end of the tick range, and a jump of "now" to the
    /// end of the range near the finish) and asserts identical results at every
    /// step.
    ///
    /// `spreads` are the deadline spreads drawn from: wide ones reach every wheel
    /// level, narrow ones (around a wheel rotation, 2^16 ns) revisit rotation
    /// carries often.
    pub(crate) fn check_against_model(spreads: &[u64], apply: &mut dyn FnMut(Op) -> Option<(u64, u64)>) {
        const STEPS: u64 = 60_000;
        let mut model: Vec<(u64, u64)> = Vec::new(); // (deadline, key)
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut now: u64 = 1 << 40;
        let mut next_key = 1;
        for step in 0..STEPS {
            if step == STEPS - 5_000 {
                now = NEVER - (1 << 41); // the last stretch runs at the end of time
            }
            let r = rnd();
            let spread = spreads[(r % spreads.len() as u64) as usize];
            let deadline = match rnd() % 64 {
                0 => NEVER,
                1 => NEVER - 1 - rnd() % 4096,
                _ => now.saturating_add(rnd() % spread).saturating_sub(spread / 4).min(NEVER - 1),
            };
            match r % 17 {
                0..=6 => {
                    apply(Op::Insert(next_key, deadline));
                    model.push((deadline, next_key));
                    next_key += 1;
                }
                7 | 8 => {
                    let k = 1 + rnd() % next_key;
                    let want = model.iter().position(|&(_, mk)| mk == k).map(|i| model.remove(i));
                    assert_eq!(apply(Op::Cancel(k)), want, "cancel {k} at step {step}");
                }
                9 => {
                    let k = 1 + rnd() % next_key;
                    let want = match model.iter_mut().find(|(_, mk)| *mk == k) {
                        Some(e) => {
                            e.0 = deadline;
                            Some((deadline, k))
                        }
                        None => None,
                    };
                    assert_eq!(apply(Op::Reschedule(k, deadline)), want, "reschedule {k} at step {step}");
                }
                10 => {
                    let want = model.iter().map(|&(d, _)| d).min().map(|d| (d, 0));
                    assert_eq!(apply(Op::Peek), want, "peek at step {step}");
                }
                _ => {
                    now = now.saturating_add(rnd() % (spread / 2 + 1)).min(NEVER - 1);
                    model.sort_unstable();
                    let due = model.iter().take_while(|&&(d, _)| d <= now).count();
                    for (i, &want) in model[..due].iter().enumerate() {
                        let got = apply(Op::PopDue(now));
                        assert_eq!(got, Some(want), "pop {i} of {due} due at step {step}");
                    }
                    model.drain(..due);
                    assert_eq!(apply(Op::PopDue(now)), None, "nothing more due at step {step}");
                }
            }
        }
        model.sort_unstable();
        for &want in model.iter().filter(|&&(d, _)| d != NEVER) {
            assert_eq!(apply(Op::PopDue(u64::MAX)), Some(want));
        }
        assert_eq!(apply(Op::PopDue(u64::MAX)), None, "a never-due item fell due");
        let never = model.iter().filter(|&&(d, _)| d == NEVER).count();
        assert!(never > 0, "the model reached no never-due item");
        assert_eq!(apply(Op::Peek), Some((NEVER, 0)));
    }
}
