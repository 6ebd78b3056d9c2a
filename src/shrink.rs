//! Memory back after a burst, for the layers' maps and queues: a collection at
//! most an eighth full shrinks to twice its length, never below [`FLOOR`]
//! entries. Like a `Vec`'s growth, the cost is amortised O(1) per removal.
//! The hysteresis: a hash map's capacity rounds up (to 7/8 of a power of two
//! buckets), so after a shrink it holds at most ~3.6 × its length, and it
//! must lose more than half its entries before it shrinks again — a working
//! set swinging by less keeps its buffer. The core's timer index has its own
//! rule (`index::Index::trim`).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash};

/// Entries a collection keeps room for, however empty.
pub(crate) const FLOOR: usize = 64;

/// A collection that can give back unused capacity.
pub(crate) trait Shrink {
    /// Shrinks to twice the length if at most an eighth of the capacity is used.
    /// A map rehashes its keys: a `Hash` that panics does so from here (the
    /// map stays valid; callers holding user keys catch it).
    fn shrink_after_burst(&mut self);
}

impl<K: Hash + Eq, V, S: BuildHasher> Shrink for HashMap<K, V, S> {
    fn shrink_after_burst(&mut self) {
        if self.capacity() > FLOOR && self.len() * 8 <= self.capacity() {
            self.shrink_to((self.len() * 2).max(FLOOR));
        }
    }
}

impl<T> Shrink for VecDeque<T> {
    fn shrink_after_burst(&mut self) {
        if self.capacity() > FLOOR && self.len() * 8 <= self.capacity() {
            self.shrink_to((self.len() * 2).max(FLOOR));
        }
    }
}

#[cfg(all(test, not(delayq_loom)))]
mod tests {
    use super::*;

    #[test]
    fn shrinks_an_eighth_full_map_and_keeps_a_working_set() {
        let mut m: HashMap<u64, u64> = (0..100_000).map(|i| (i, i)).collect();
        let full = m.capacity();
        for i in 0..99_000 {
            m.remove(&i);
            m.shrink_after_burst();
        }
        assert!(m.capacity() <= full / 8, "kept {} of {full}", m.capacity());
        assert_eq!(m.len(), 1_000);
        // A working set that loses less than half of its entries keeps its
        // buffer, right after a shrink too.
        let mut w: HashMap<u64, u64> = (0..4_000).map(|i| (i, i)).collect();
        for i in 0..3_500 {
            w.remove(&i);
            w.shrink_after_burst();
        }
        let cap = w.capacity();
        for i in 3_500..3_700 {
            w.remove(&i);
            w.shrink_after_burst();
        }
        // (Not exactly `cap`: a removal that leaves a tombstone takes one
        // from the room a hash map reports.)
        assert_eq!(w.len(), 300);
        assert!(w.capacity() * 2 > cap, "shrank from {cap} to {}", w.capacity());
        m.clear();
        m.shrink_after_burst();
        assert!(m.capacity() >= FLOOR && m.capacity() < 2 * FLOOR + 64, "{}", m.capacity());
    }

    #[test]
    fn shrinks_an_eighth_full_deque() {
        let mut q: VecDeque<u32> = (0..10_000).collect();
        while q.len() > 10 {
            q.pop_front();
            q.shrink_after_burst();
        }
        assert!(q.capacity() <= 2 * FLOOR, "{}", q.capacity());
    }
}
