//! The heap backend of the timer index: a 4-ary min-heap of 16-byte nodes.
//!
//! [`NodeHeap`] is the bare heap (also the timing wheel's "ready" set);
//! [`HeapIndex`] is a whole index: every node in one heap, O(log₄ n) insert and
//! pop. A 4-ary heap halves the depth of a binary one and keeps a node's children
//! within one or two cache lines. It is the simplest backend and the fastest for
//! small queues; past a few hundred thousand pending items its pops miss the
//! caches at every level, which is what the wheel avoids.

use super::node::{index_deadline, Entry, Node};
use super::slots::Slots;
use crate::clock::NEVER;

const ARITY: usize = 4;

/// A 4-ary min-heap of nodes, ordered by `(deadline, key)`.
#[derive(Debug, Default)]
pub(crate) struct NodeHeap {
    nodes: Vec<Node>,
}

impl NodeHeap {
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    pub(crate) fn peek(&self) -> Option<Node> {
        self.nodes.first().copied()
    }

    pub(crate) fn push(&mut self, n: Node) {
        self.nodes.push(n);
        self.sift_up(self.nodes.len() - 1);
    }

    pub(crate) fn pop(&mut self) -> Option<Node> {
        let top = self.peek()?;
        let last = self.nodes.pop().expect("non-empty");
        if !self.nodes.is_empty() {
            self.nodes[0] = last;
            self.sift_down(0);
        }
        Some(top)
    }

    /// Nodes the buffer has room for.
    #[cfg_attr(not(all(test, not(delayq_loom))), allow(dead_code))]
    pub(crate) fn capacity(&self) -> usize {
        self.nodes.capacity()
    }

    /// Gives back the buffer's room beyond twice its nodes (and `floor`).
    pub(crate) fn shrink_beyond(&mut self, floor: usize) {
        if self.nodes.capacity() > (2 * self.nodes.len()).max(floor) {
            self.nodes.shrink_to((2 * self.nodes.len()).max(floor));
        }
    }

    pub(crate) fn clear(&mut self) {
        self.nodes = Vec::new();
    }

    /// Replaces the contents by `nodes`, heapified in O(n).
    pub(crate) fn rebuild(&mut self, nodes: Vec<Node>) {
        self.nodes = nodes;
        for i in (0..self.nodes.len()).rev() {
            self.sift_down(i);
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

/// The whole index as one heap. Cancel and reschedule leave tombstones (nodes
/// whose entry is gone or has another deadline), skipped on pop and swept once
/// they outnumber the live entries.
#[derive(Debug)]
pub(crate) struct HeapIndex<T> {
    heap: NodeHeap,
    entries: Slots<Entry<T>>,
    tombstones: usize,
}

impl<T> HeapIndex<T> {
    pub(crate) fn new() -> Self {
        HeapIndex { heap: NodeHeap::default(), entries: Slots::new(), tombstones: 0 }
    }

    pub(crate) fn insert(&mut self, key: u64, deadline: u64, item: T) {
        let deadline = index_deadline(deadline);
        self.entries.insert(key, Entry::new(deadline, item));
        self.heap.push(Node { deadline, key });
    }

    pub(crate) fn cancel(&mut self, key: u64) -> Option<(u64, T)> {
        let e = self.entries.remove(key)?;
        self.tombstones += 1;
        self.maybe_compact();
        Some((e.deadline(), e.item))
    }

    pub(crate) fn reschedule(&mut self, key: u64, deadline: u64) -> bool {
        let deadline = index_deadline(deadline);
        let Some(e) = self.entries.get_mut(key) else { return false };
        e.set_deadline(deadline);
        self.tombstones += 1;
        self.heap.push(Node { deadline, key });
        self.maybe_compact();
        true
    }

    /// The earliest live deadline (exact).
    pub(crate) fn peek(&mut self) -> Option<u64> {
        self.skip_tombstones();
        self.heap.peek().map(|n| n.deadline)
    }

    /// Removes the earliest item if its deadline is `<= now` (never one whose
    /// deadline is [`NEVER`]).
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<(u64, u64, T)> {
        loop {
            self.skip_tombstones();
            let top = self.heap.peek()?;
            if top.deadline > now || top.deadline == NEVER {
                return None;
            }
            self.heap.pop();
            // With an exact tombstone count the top is live; checking anyway
            // costs one table lookup and keeps a miscount from taking a wrong item.
            if Entry::is_live(&self.entries, &top) {
                let e = self.entries.remove(top.key)?;
                return Some((e.deadline(), top.key, e.item));
            }
        }
    }

    /// Removes every item, in deadline order.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// No item held: every node is dead; drop them and every buffer.
    pub(crate) fn trim(&mut self) {
        self.heap.clear();
        self.tombstones = 0;
        self.entries.release_buffers();
    }

    /// Entries and nodes the buffers have room for.
    #[cfg(all(test, not(delayq_loom)))]
    pub(crate) fn room(&self) -> usize {
        self.heap.capacity() + self.entries.room()
    }

    /// Gives back what the buffers hold beyond room for `need` items.
    pub(crate) fn release_beyond(&mut self, need: usize) {
        if self.entries.len() == 0 && need == 0 {
            self.trim();
            return;
        }
        // Twice the need: a working set that swings keeps the room it grows
        // to (`tidy.rs`).
        self.heap.shrink_beyond(2 * need.max(crate::tidy::FLOOR));
        self.entries.release_beyond(need);
    }

    pub(crate) fn take_all(&mut self) -> Vec<(u64, u64, T)> {
        self.heap.clear();
        self.tombstones = 0;
        Entry::drain_sorted(&mut self.entries)
    }

    fn skip_tombstones(&mut self) {
        while self.tombstones > 0 {
            match self.heap.peek() {
                Some(top) if !Entry::is_live(&self.entries, &top) => {
                    self.heap.pop();
                    self.tombstones -= 1;
                }
                _ => return,
            }
        }
    }

    /// Rebuilds the heap from the live entries once tombstones outnumber them.
    fn maybe_compact(&mut self) {
        if self.heap.len() > 64 && self.heap.len() > 2 * self.entries.len() {
            let nodes = self.entries.iter().map(|(key, e)| Node { deadline: e.deadline(), key }).collect();
            self.heap.rebuild(nodes);
            self.tombstones = 0;
        }
    }

    #[cfg(test)]
    fn node_count(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check_against_model, check_basic_semantics, NARROW, WIDE};
    use super::*;

    #[test]
    fn basic_semantics() {
        check_basic_semantics(&mut super::super::Index::Heap(HeapIndex::new()));
    }

    #[test]
    fn matches_a_sorted_model_and_compacts_tombstones() {
        for spreads in [WIDE, NARROW] {
            let mut h = HeapIndex::new();
            check_against_model(spreads, &mut |op| super::super::tests::apply_heap(&mut h, op));
            assert!(h.node_count() <= 2 * h.entries.len() + 64, "tombstones were not compacted");
        }
    }
}
