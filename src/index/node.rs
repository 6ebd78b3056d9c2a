//! What every backend of the timer index shares: the 16-byte [`Node`]s they
//! order, and the [`Entry`]s the key table holds. A leaf: it depends on no other
//! room of the index.

use super::slots::Slots;
use std::num::NonZeroU64;

/// What the backends order: a deadline in ticks and the item's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    pub(crate) deadline: u64,
    pub(crate) key: u64,
}

impl Node {
    #[inline]
    pub(crate) fn before(&self, other: &Node) -> bool {
        (self.deadline, self.key) < (other.deadline, other.key)
    }
}

/// The index's deadlines start at tick 1: tick 0 (a deadline at or before the
/// clock's origin, a century before the queue was built) is stored as 1. Both
/// backends pass every deadline through this before they make a node or an
/// entry, so the two always agree. It gives [`Entry`] a niche: `Option<Entry<T>>`,
/// what the key table stores per slot, is no larger than `Entry<T>` (16 bytes
/// for an 8-byte item, not 24).
#[inline]
pub(crate) fn index_deadline(deadline: u64) -> u64 {
    deadline.max(1)
}

/// A deadline as an entry stores it; [`index_deadline`] has made it non-zero.
fn stored(deadline: u64) -> NonZeroU64 {
    debug_assert_ne!(deadline, 0, "deadline not passed through index_deadline");
    NonZeroU64::new(deadline).unwrap_or(NonZeroU64::MIN)
}

/// What the table holds per item.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    /// Never 0 ([`index_deadline`]); the niche `Option<Entry<T>>` uses.
    at: NonZeroU64,
    pub(crate) item: T,
}

impl<T> Entry<T> {
    /// An entry due at `deadline`, which [`index_deadline`] has already seen.
    pub(crate) fn new(deadline: u64, item: T) -> Entry<T> {
        Entry { at: stored(deadline), item }
    }

    pub(crate) fn deadline(&self) -> u64 {
        self.at.get()
    }

    /// Moves the entry to `deadline`, which [`index_deadline`] has already seen.
    pub(crate) fn set_deadline(&mut self, deadline: u64) {
        self.at = stored(deadline);
    }

    pub(crate) fn is_live(entries: &Slots<Entry<T>>, n: &Node) -> bool {
        entries.get(n.key).is_some_and(|e| e.deadline() == n.deadline)
    }

    /// Empties the table, returning `(deadline, key, item)` in `(deadline, key)`
    /// order.
    pub(crate) fn drain_sorted(entries: &mut Slots<Entry<T>>) -> Vec<(u64, u64, T)> {
        let mut all: Vec<_> = entries.drain().into_iter().map(|(k, e)| (e.deadline(), k, e.item)).collect();
        all.sort_unstable_by_key(|&(d, k, _)| (d, k));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Index, Kind};

    #[test]
    fn an_optional_entry_costs_no_more_than_the_entry() {
        assert_eq!(std::mem::size_of::<Option<Entry<u64>>>(), 16);
        assert_eq!(std::mem::size_of::<Option<Entry<[u8; 24]>>>(), 32);
    }

    #[test]
    fn tick_zero_is_kept_as_tick_one_by_both_backends() {
        for kind in [Kind::Heap, Kind::Wheel] {
            let mut ix = Index::new(kind, 0);
            ix.insert(7, 0, 'a');
            ix.insert(8, 1, 'b');
            ix.insert(9, 5, 'c');
            assert_eq!(ix.peek(), Some(1), "{kind:?}");
            assert!(ix.reschedule(9, 0));
            assert_eq!(ix.pop_due(0), None, "{kind:?}: nothing is due before tick 1");
            let got: Vec<_> = std::iter::from_fn(|| ix.pop_due(1)).collect();
            assert_eq!(got, [(1, 7, 'a'), (1, 8, 'b'), (1, 9, 'c')], "{kind:?}");
            ix.insert(10, 0, 'd');
            assert_eq!(ix.cancel(10), Some((1, 'd')), "{kind:?}");
        }
    }
}
