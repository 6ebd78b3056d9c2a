//! What every backend of the timer index shares: the 16-byte [`Node`]s they
//! order, and the [`Entry`]s the key table holds. A leaf: it depends on no other
//! room of the index.

use super::slots::Slots;

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

/// What the table holds per item.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    pub(crate) deadline: u64,
    pub(crate) item: T,
}

impl<T> Entry<T> {
    pub(crate) fn is_live(entries: &Slots<Entry<T>>, n: &Node) -> bool {
        entries.get(n.key).is_some_and(|e| e.deadline == n.deadline)
    }

    /// Empties the table, returning `(deadline, key, item)` in `(deadline, key)`
    /// order.
    pub(crate) fn drain_sorted(entries: &mut Slots<Entry<T>>) -> Vec<(u64, u64, T)> {
        let mut all: Vec<_> = entries.drain().into_iter().map(|(k, e)| (e.deadline, k, e.item)).collect();
        all.sort_unstable_by_key(|&(d, k, _)| (d, k));
        all
    }
}
