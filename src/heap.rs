//! The timer index: a 4-ary min-heap of `(deadline, key)` plus a key → item table.
//!
//! Only the two proxies touch it, under one lock (`Shared::timers`). Insert and pop
//! are O(log₄ n); `cancel` and `reschedule` are O(1) table operations that leave a
//! tombstone in the heap (a node whose deadline no longer matches its entry's, or
//! whose entry is gone), which `pop` skips and `compact` sweeps once tombstones
//! outnumber live entries. Equal deadlines leave in key order: keys are handed out
//! by the send that creates the item, so for one producer that is its send order.
//! Nodes are 16 bytes, so a node's four children share one or two cache lines; the
//! table ([`Slots`]) is indexed by key directly, so no path hashes.
//!
//! A 4-ary heap halves the depth of a binary heap and keeps a node's children in
//! one cache line, which pays once the heap outgrows the caches.

use crate::slots::Slots;

const ARITY: usize = 4;

#[derive(Clone, Copy, Debug)]
struct Node {
    deadline: u64,
    key: u64,
}

impl Node {
    #[inline]
    fn before(&self, other: &Node) -> bool {
        (self.deadline, self.key) < (other.deadline, other.key)
    }
}

#[derive(Debug)]
struct Entry<T> {
    deadline: u64,
    item: T,
}

#[derive(Debug)]
pub(crate) struct Heap<T> {
    nodes: Vec<Node>,
    entries: Slots<Entry<T>>,
    /// Nodes whose entry was cancelled or rescheduled; 0 lets `pop` skip checks.
    tombstones: usize,
}

impl<T> Heap<T> {
    pub(crate) fn new() -> Self {
        Heap { nodes: Vec::new(), entries: Slots::new(), tombstones: 0 }
    }

    /// Live items.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn insert(&mut self, key: u64, deadline: u64, item: T) {
        self.entries.insert(key, Entry { deadline, item });
        self.push_node(Node { deadline, key });
    }

    pub(crate) fn cancel(&mut self, key: u64) -> Option<(u64, T)> {
        let e = self.entries.remove(key)?;
        self.tombstones += 1;
        self.maybe_compact();
        Some((e.deadline, e.item))
    }

    pub(crate) fn reschedule(&mut self, key: u64, deadline: u64) -> bool {
        let Some(e) = self.entries.get_mut(key) else { return false };
        e.deadline = deadline;
        self.tombstones += 1;
        self.push_node(Node { deadline, key });
        self.maybe_compact();
        true
    }

    /// The earliest live deadline.
    pub(crate) fn peek(&mut self) -> Option<u64> {
        self.skip_tombstones();
        self.nodes.first().map(|n| n.deadline)
    }

    /// Removes the earliest item if its deadline is `<= now`.
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<(u64, T)> {
        loop {
            self.skip_tombstones();
            let top = *self.nodes.first()?;
            if top.deadline > now {
                return None;
            }
            self.pop_node();
            // With an exact tombstone count the top is live; checking anyway
            // costs one table lookup and keeps a miscount from taking a wrong item.
            if self.is_live(&top) {
                let e = self.entries.remove(top.key)?;
                self.maybe_shrink();
                return Some((e.deadline, e.item));
            }
        }
    }

    /// Removes every item, in deadline order.
    pub(crate) fn take_all(&mut self) -> Vec<(u64, T)> {
        let mut all: Vec<_> =
            self.entries.drain().into_iter().map(|(k, e)| (e.deadline, k, e.item)).collect();
        all.sort_unstable_by_key(|&(d, k, _)| (d, k));
        self.nodes = Vec::new();
        self.tombstones = 0;
        all.into_iter().map(|(d, _, item)| (d, item)).collect()
    }

    fn is_live(&self, n: &Node) -> bool {
        self.entries.get(n.key).is_some_and(|e| e.deadline == n.deadline)
    }

    fn skip_tombstones(&mut self) {
        while self.tombstones > 0 {
            match self.nodes.first() {
                Some(top) if !self.is_live(top) => {
                    self.pop_node();
                    self.tombstones -= 1;
                }
                _ => return,
            }
        }
    }

    /// Rebuilds the heap from the live entries once tombstones outnumber them.
    fn maybe_compact(&mut self) {
        if self.nodes.len() > 64 && self.nodes.len() > 2 * self.entries.len() {
            let mut nodes: Vec<Node> = Vec::with_capacity(self.entries.len());
            nodes.extend(self.entries.iter().map(|(key, e)| Node { deadline: e.deadline, key }));
            self.nodes = nodes;
            self.tombstones = 0;
            for i in (0..self.nodes.len()).rev() {
                self.sift_down(i);
            }
            self.maybe_shrink();
        }
    }

    /// Returns the memory of a drained burst.
    fn maybe_shrink(&mut self) {
        if self.nodes.capacity() > 4096 && self.nodes.len() < self.nodes.capacity() / 4 {
            self.nodes.shrink_to(self.nodes.len() * 2);
        }
    }

    fn push_node(&mut self, n: Node) {
        self.nodes.push(n);
        self.sift_up(self.nodes.len() - 1);
    }

    fn pop_node(&mut self) {
        let last = self.nodes.pop();
        if let (Some(last), false) = (last, self.nodes.is_empty()) {
            self.nodes[0] = last;
            self.sift_down(0);
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        let n = self.nodes[i];
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if !n.before(&self.nodes[parent]) {
                break;
            }
            self.nodes[i] = self.nodes[parent];
            i = parent;
        }
        self.nodes[i] = n;
    }

    fn sift_down(&mut self, mut i: usize) {
        let len = self.nodes.len();
        let n = self.nodes[i];
        loop {
            let first = i * ARITY + 1;
            if first >= len {
                break;
            }
            let mut best = first;
            for c in first + 1..(first + ARITY).min(len) {
                if self.nodes[c].before(&self.nodes[best]) {
                    best = c;
                }
            }
            if !self.nodes[best].before(&n) {
                break;
            }
            self.nodes[i] = self.nodes[best];
            i = best;
        }
        self.nodes[i] = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_deadline_then_key_order_and_skips_cancelled() {
        let mut h = Heap::new();
        for (k, d) in [(1, 50), (2, 10), (3, 50), (4, 30), (5, 10)] {
            h.insert(k, d, k * 100);
        }
        assert_eq!(h.cancel(4), Some((30, 400)));
        assert_eq!(h.cancel(4), None);
        assert!(h.reschedule(3, 5));
        assert!(!h.reschedule(9, 5));
        assert_eq!(h.pop_due(4), None);
        let mut out = vec![];
        while let Some(x) = h.pop_due(100) {
            out.push(x);
        }
        assert_eq!(out, vec![(5, 300), (10, 200), (10, 500), (50, 100)]);
        // Rescheduled back and forth: one delivery, at the last deadline.
        h.insert(7, 40, 7);
        assert!(h.reschedule(7, 60));
        assert!(h.reschedule(7, 40));
        assert!(h.reschedule(7, 40));
        assert_eq!(h.pop_due(100), Some((40, 7)));
        assert_eq!(h.pop_due(100), None);
        assert_eq!(h.len(), 0);
    }

    #[test]
    fn compacts_tombstones_and_matches_a_sorted_model() {
        let mut h = Heap::new();
        let mut model = Vec::new();
        let mut x: u64 = 12345;
        for key in 0..5000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let d = (x >> 33) % 1000;
            h.insert(key, d, key);
            model.push((d, key));
            if key % 3 == 0 {
                assert!(h.cancel(key).is_some());
                model.retain(|&(_, k)| k != key);
            }
        }
        assert!(h.nodes.len() <= 2 * h.len() + 64, "tombstones were not compacted");
        model.sort();
        let mut out = vec![];
        while let Some((d, k)) = h.pop_due(u64::MAX) {
            out.push((d, k));
        }
        assert_eq!(out, model);
    }
}
