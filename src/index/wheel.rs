//! The timing-wheel backend of the timer index: a hierarchical wheel with exact
//! order (Varghese & Lauck's hierarchical timing wheels, laid out like tokio's
//! time driver), plus a small heap for the items of the granules being delivered.
//!
//! Ticks are nanoseconds. Level 0 has 64 slots of `GRANULE` (1,024 ns); each level
//! above has 64 slots 64 times wider, 9 levels covering all of `u64`. A node goes to
//! the level of the highest 6-bit digit in which its deadline differs from
//! `elapsed`, in the slot of that digit — insert is O(1), a push onto the slot's
//! `Vec`. Delivering takes the earliest occupied slot (a bitmap scan per level):
//! a higher-level slot is "cascaded" (its nodes re-placed one level lower or more),
//! a level-0 slot moves into `ready`, a [`NodeHeap`] that orders the few nodes of
//! that granule exactly by `(deadline, key)`. Each node moves at most once per
//! level, and the slot `Vec`s are walked sequentially, so a backlog of millions
//! costs no more per item than a short queue — unlike a heap, whose pops miss the
//! caches at every level once it outgrows them.
//!
//! Invariants:
//! - every wheel node has `deadline >= elapsed`; a node inserted with an earlier
//!   deadline goes straight to `ready`;
//! - a node at level `l > 0` shares all digits above `l` with `elapsed`, and its
//!   digit at `l` is *above* `elapsed`'s (no slot above level 0 contains
//!   `elapsed`), so the lowest occupied level holds the earliest nodes, and within
//!   it the first occupied slot at or after `elapsed`'s digit. Opening the last
//!   level-0 slot of a rotation carries `elapsed` into the next slot of a higher
//!   level; `open` cascades that slot at once, which keeps this true (an earlier
//!   version opened it lazily, and `peek` reported its nodes ahead of earlier
//!   level-0 ones);
//! - nodes with a [`NEVER`] deadline are kept out of the wheel, in `never`: they
//!   never fall due, so they must never sit in a slot that the end of the tick
//!   range makes due (which once spun the proxy forever);
//! - every `ready` node is earlier than `elapsed`, hence than every wheel node:
//!   `elapsed` only moves to the start of the earliest occupied slot (the end of
//!   its granule for level 0) or, with the wheel empty, to `now`. So `ready`'s top
//!   is the earliest node of all, and `pop_due` opens a slot only when `ready` is
//!   empty and the slot is due: `ready` stays a granule or so small even under a
//!   large backlog.

use super::heap::NodeHeap;
use super::node::{index_deadline, Entry, Node};
use super::slots::Slots;
use crate::clock::NEVER;

const GRANULE_BITS: u32 = 10;
const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
const LEVELS: usize = 9;

#[derive(Debug)]
pub(crate) struct WheelIndex<T> {
    /// Every wheel node is at or after this tick.
    elapsed: u64,
    /// `LEVELS * SLOTS` slots.
    slots: Vec<Vec<Node>>,
    occupied: [u64; LEVELS],
    ready: NodeHeap,
    /// Nodes whose deadline is [`NEVER`].
    never: Vec<Node>,
    entries: Slots<Entry<T>>,
    /// Nodes in the wheel, `ready` and `never`, live or not.
    nodes: usize,
    /// A reusable buffer for the slot being opened.
    scratch: Vec<Node>,
}

/// The first bit of level `l`'s digit.
fn shift(level: usize) -> u32 {
    GRANULE_BITS + SLOT_BITS * level as u32
}

fn digit(t: u64, level: usize) -> usize {
    ((t >> shift(level)) as usize) & (SLOTS - 1)
}

impl<T> WheelIndex<T> {
    pub(crate) fn new(now: u64) -> Self {
        WheelIndex {
            elapsed: now,
            slots: (0..LEVELS * SLOTS).map(|_| Vec::new()).collect(),
            occupied: [0; LEVELS],
            ready: NodeHeap::default(),
            never: Vec::new(),
            entries: Slots::new(),
            nodes: 0,
            scratch: Vec::new(),
        }
    }

    pub(crate) fn insert(&mut self, key: u64, deadline: u64, item: T) {
        let deadline = index_deadline(deadline);
        self.entries.insert(key, Entry::new(deadline, item));
        self.place(Node { deadline, key });
        self.nodes += 1;
    }

    pub(crate) fn cancel(&mut self, key: u64) -> Option<(u64, T)> {
        let e = self.entries.remove(key)?;
        self.maybe_compact();
        Some((e.deadline(), e.item))
    }

    pub(crate) fn reschedule(&mut self, key: u64, deadline: u64) -> bool {
        let deadline = index_deadline(deadline);
        let Some(e) = self.entries.get_mut(key) else { return false };
        e.set_deadline(deadline);
        self.place(Node { deadline, key });
        self.nodes += 1;
        self.maybe_compact();
        true
    }

    /// The earliest live deadline, exactly: `ready`'s top, or else the earliest
    /// live node of the earliest occupied slot (dead nodes found there are
    /// dropped), or else [`NEVER`] if a never-due item is pending.
    pub(crate) fn peek(&mut self) -> Option<u64> {
        self.skip_dead_ready();
        if let Some(n) = self.ready.peek() {
            return Some(n.deadline);
        }
        loop {
            let Some((level, slot, _)) = self.next_slot() else { return self.peek_never() };
            let i = level * SLOTS + slot;
            let before = self.slots[i].len();
            let entries = &self.entries;
            self.slots[i].retain(|n| Entry::is_live(entries, n));
            self.nodes -= before - self.slots[i].len();
            match self.slots[i].iter().map(|n| n.deadline).min() {
                Some(m) => return Some(m),
                None => self.occupied[level] &= !(1 << slot),
            }
        }
    }

    /// No later than the earliest live deadline: `ready`'s top, or else the start
    /// of the earliest occupied slot. `None` if nothing can fall due (the wheel
    /// holds no node, or only never-due ones).
    pub(crate) fn next_wake(&mut self) -> Option<u64> {
        self.skip_dead_ready();
        match self.ready.peek() {
            Some(n) => Some(n.deadline),
            None => self.next_slot().map(|(_, _, start)| start),
        }
    }

    pub(crate) fn pop_due(&mut self, now: u64) -> Option<(u64, u64, T)> {
        loop {
            self.skip_dead_ready();
            if let Some(n) = self.ready.peek() {
                debug_assert!(n.deadline < self.elapsed, "a ready node is not before the wheel");
                return self.take_ready(n, now);
            }
            match self.next_slot() {
                Some((level, slot, start)) if start <= now => self.open(level, slot, start),
                Some(_) => return None,
                None => {
                    // Empty: restart the wheel at `now`, so new nodes sit low.
                    self.elapsed = self.elapsed.max(now);
                    return None;
                }
            }
        }
    }

    pub(crate) fn take_all(&mut self) -> Vec<(u64, u64, T)> {
        self.clear_nodes();
        Entry::drain_sorted(&mut self.entries)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// No item held: every node is dead; drop them and every buffer.
    pub(crate) fn trim(&mut self) {
        self.clear_nodes();
        self.scratch = Vec::new();
        self.entries.release_buffers();
    }

    /// Entries and nodes the buffers have room for.
    #[cfg(all(test, not(delayq_loom)))]
    pub(crate) fn room(&self) -> usize {
        let nodes: usize = self.slots.iter().map(Vec::capacity).sum();
        nodes + self.ready.capacity() + self.never.capacity() + self.scratch.capacity() + self.entries.room()
    }

    /// Gives back what the buffers hold beyond room for `need` items: the
    /// ready heap's room beyond twice the need (and its nodes); the slots'
    /// buffers beyond twice their nodes and the scratch buffer, once the need
    /// is small (`tidy::FLOOR` or less: the slots a working set
    /// fills move with the wheel's rotation, so a large one keeps them all);
    /// the key table's spare pages beyond those `need` entries would fill
    /// (`tidy.rs`); everything, with no item held and none needed.
    pub(crate) fn release_beyond(&mut self, need: usize) {
        if self.entries.len() == 0 && need == 0 {
            self.trim();
            return;
        }
        // The slots a working set uses move with the wheel's rotation, so
        // their buffers are cut only once the need itself is small: a queue
        // swinging around a large working set keeps them.
        if need <= crate::tidy::FLOOR {
            for s in &mut self.slots {
                if s.capacity() > 2 * s.len() {
                    s.shrink_to(2 * s.len());
                }
            }
            self.scratch = Vec::new();
            self.never.shrink_to(2 * self.never.len());
        }
        self.ready.shrink_beyond(2 * need);
        self.entries.release_beyond(need);
    }

    fn clear_nodes(&mut self) {
        for s in &mut self.slots {
            *s = Vec::new();
        }
        self.occupied = [0; LEVELS];
        self.ready.clear();
        self.never = Vec::new();
        self.nodes = 0;
    }

    /// `Some(NEVER)` if a never-due item is pending (dead nodes are dropped).
    fn peek_never(&mut self) -> Option<u64> {
        let before = self.never.len();
        let entries = &self.entries;
        self.never.retain(|n| Entry::is_live(entries, n));
        self.nodes -= before - self.never.len();
        (!self.never.is_empty()).then_some(NEVER)
    }

    fn take_ready(&mut self, n: Node, now: u64) -> Option<(u64, u64, T)> {
        if n.deadline > now {
            return None;
        }
        self.ready.pop();
        self.nodes -= 1;
        // `skip_dead_ready` ran just before: the top is live.
        let e = self.entries.remove(n.key)?;
        Some((e.deadline(), n.key, e.item))
    }

    fn skip_dead_ready(&mut self) {
        while let Some(top) = self.ready.peek() {
            if Entry::is_live(&self.entries, &top) {
                return;
            }
            self.ready.pop();
            self.nodes -= 1;
        }
    }

    /// Puts a node where the invariants say it belongs.
    fn place(&mut self, n: Node) {
        if n.deadline == NEVER {
            self.never.push(n);
            return;
        }
        if n.deadline < self.elapsed {
            self.ready.push(n);
            return;
        }
        // The highest differing digit decides the level; `| (SLOTS - 1)` makes
        // equal ticks land on level 0.
        let masked = ((n.deadline ^ self.elapsed) >> GRANULE_BITS) | (SLOTS as u64 - 1);
        let level = ((63 - masked.leading_zeros()) / SLOT_BITS) as usize;
        let slot = digit(n.deadline, level);
        self.slots[level * SLOTS + slot].push(n);
        self.occupied[level] |= 1 << slot;
    }

    /// The earliest occupied slot: `(level, slot, start tick)`. The lowest
    /// occupied level holds the earliest nodes (module invariants), in its first
    /// occupied slot at or after `elapsed`'s digit.
    fn next_slot(&self) -> Option<(usize, usize, u64)> {
        for level in 0..LEVELS {
            let occ = self.occupied[level];
            if occ == 0 {
                continue;
            }
            let ahead = occ & (u64::MAX << digit(self.elapsed, level));
            debug_assert!(ahead != 0, "a wheel slot fell behind `elapsed`");
            let slot = if ahead != 0 { ahead.trailing_zeros() } else { occ.trailing_zeros() } as usize;
            return Some((level, slot, self.slot_start(level, slot)));
        }
        None
    }

    /// The first tick of `slot` at `level`, in `elapsed`'s rotation of that level.
    fn slot_start(&self, level: usize, slot: usize) -> u64 {
        let width = shift(level);
        let rotation = width + SLOT_BITS;
        let base = if rotation >= 64 { 0 } else { self.elapsed & !((1u64 << rotation) - 1) };
        base + ((slot as u64) << width)
    }

    /// Opens the earliest slot (due at `start`): a level-0 slot moves into
    /// `ready`; a higher one cascades into lower levels.
    fn open(&mut self, level: usize, slot: usize, start: u64) {
        // Past the end of a level-0 granule, `elapsed` may carry into the next
        // slot of higher levels; at the very end of the tick range it saturates
        // at `NEVER`, where only `never` nodes could follow, and those are kept
        // out of the wheel.
        let end = if level == 0 { start.saturating_add(1 << GRANULE_BITS) } else { start };
        self.elapsed = self.elapsed.max(end);
        self.replace(level, slot);
        if level == 0 {
            // Cascade every slot that now contains `elapsed`, highest first (its
            // nodes land below it, in slots ahead of `elapsed`), so that no slot
            // above level 0 contains `elapsed`.
            for l in (1..LEVELS).rev() {
                let d = digit(self.elapsed, l);
                if self.occupied[l] & (1 << d) != 0 {
                    self.replace(l, d);
                }
            }
        }
    }

    /// Empties a slot and places its live nodes again for the current `elapsed`.
    fn replace(&mut self, level: usize, slot: usize) {
        let i = level * SLOTS + slot;
        std::mem::swap(&mut self.scratch, &mut self.slots[i]);
        self.occupied[level] &= !(1 << slot);
        let mut nodes = std::mem::take(&mut self.scratch);
        for n in nodes.drain(..) {
            if Entry::is_live(&self.entries, &n) {
                self.place(n);
            } else {
                self.nodes -= 1;
            }
        }
        // Keep the buffer for the next slot, whatever its size: a working set
        // that swings refills slots of the same size, and the occupancy rule
        // gives it back once the index's need is small (`tidy.rs`,
        // `release_beyond`).
        self.scratch = nodes;
    }

    /// Rebuilds the wheel from the live entries once dead nodes outnumber them.
    fn maybe_compact(&mut self) {
        if self.nodes > 64 && self.nodes > 2 * self.entries.len() {
            self.clear_nodes();
            let live: Vec<Node> =
                self.entries.iter().map(|(key, e)| Node { deadline: e.deadline(), key }).collect();
            self.nodes = live.len();
            for n in live {
                self.place(n);
            }
        }
    }
}

#[cfg(test)]
impl<T> WheelIndex<T> {
    /// Asserts the invariants of the module docs.
    pub(crate) fn check_invariants(&self) {
        let mut counted = self.ready.len() + self.never.len();
        assert!(self.never.iter().all(|n| n.deadline == NEVER), "a due-able node among the never-due");
        for (i, slot) in self.slots.iter().enumerate() {
            let (level, d) = (i / SLOTS, i % SLOTS);
            assert_eq!(slot.is_empty(), self.occupied[level] & (1 << d) == 0, "occupied bit of {level}/{d}");
            if level > 0 && !slot.is_empty() {
                assert_ne!(
                    d,
                    digit(self.elapsed, level),
                    "slot {level}/{d} contains elapsed {}",
                    self.elapsed
                );
            }
            assert!(slot.iter().all(|n| n.deadline != NEVER), "a never-due node in slot {level}/{d}");
            counted += slot.len();
            for n in slot.iter().filter(|n| Entry::is_live(&self.entries, n)) {
                assert!(n.deadline >= self.elapsed, "live wheel node {n:?} before elapsed {}", self.elapsed);
                assert_eq!(digit(n.deadline, level), d, "node {n:?} in the wrong slot");
            }
        }
        assert_eq!(counted, self.nodes, "node count");
        if let Some(n) = self.ready.peek() {
            assert!(
                n.deadline < self.elapsed || !Entry::is_live(&self.entries, &n),
                "ready top {n:?} not before elapsed"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{apply_wheel, check_against_model, check_basic_semantics, NARROW, WIDE};
    use super::super::Index;
    use super::*;

    #[test]
    fn basic_semantics() {
        check_basic_semantics(&mut Index::Wheel(WheelIndex::new(0)));
        check_basic_semantics(&mut Index::Wheel(WheelIndex::new(1 << 50)));
    }

    #[test]
    fn matches_a_sorted_model_and_compacts_dead_nodes() {
        for spreads in [WIDE, NARROW] {
            let mut w = WheelIndex::new(1 << 40);
            check_against_model(spreads, &mut |op| apply_wheel(&mut w, op));
            assert!(w.nodes <= 2 * w.entries.len() + 64, "dead nodes were not compacted");
        }
    }

    #[test]
    fn peek_after_a_rotation_carry_sees_earlier_lower_nodes() {
        // `a` ends the last granule of a level-0 rotation; `b` waits in the next
        // level-1 slot, which then contains `elapsed`; `c`, added after, sits
        // below it and is the earliest.
        let base = 1u64 << 40;
        let mut w = WheelIndex::new(base);
        let (a, b, c) = (base + 65_535, base + 65_536 + 50_000, base + 65_536 + 600);
        w.insert(1, a, 'a');
        w.insert(2, b, 'b');
        assert_eq!(w.pop_due(a), Some((a, 1, 'a')));
        w.check_invariants();
        w.insert(3, c, 'c');
        assert_eq!(w.peek(), Some(c));
        assert!(w.next_wake().is_some_and(|t| t <= c));
        assert_eq!(w.pop_due(b), Some((c, 3, 'c')));
        assert_eq!(w.pop_due(b), Some((b, 2, 'b')));
    }

    #[test]
    fn never_due_nodes_stay_out_of_the_wheel_at_the_end_of_time() {
        let mut w = WheelIndex::new(NEVER - 5_000);
        w.insert(1, NEVER, 1);
        w.insert(2, NEVER - 1, 2);
        w.insert(3, NEVER - 3_000, 3);
        assert_eq!(w.peek(), Some(NEVER - 3_000));
        assert_eq!(w.pop_due(NEVER - 1), Some((NEVER - 3_000, 3, 3)));
        assert_eq!(w.pop_due(NEVER - 1), Some((NEVER - 1, 2, 2)));
        assert_eq!(w.pop_due(u64::MAX), None, "a never-due item fell due");
        w.check_invariants();
        assert_eq!(w.peek(), Some(NEVER));
        assert_eq!(w.next_wake(), None, "nothing can fall due: no wake-up");
        assert!(w.reschedule(1, NEVER - 2));
        assert_eq!(w.pop_due(NEVER - 1), Some((NEVER - 2, 1, 1)));
        assert_eq!(w.peek(), None);
    }

    #[test]
    fn a_large_backlog_keeps_ready_small() {
        let mut w = WheelIndex::new(0);
        for k in 0..100_000u64 {
            w.insert(k, k * 37 % 1_000_000, k);
        }
        let mut last = (0, 0);
        for i in 0..100_000 {
            let (d, k, _) = w.pop_due(u64::MAX).expect("item");
            assert!((d, k) >= last, "out of order at {i}");
            last = (d, k);
            assert!(w.ready.len() < 1000, "ready grew to {}", w.ready.len());
        }
        assert_eq!(w.pop_due(u64::MAX), None);
    }
}
