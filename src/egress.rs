//! The egress: dequeue proxy → consumers. Due items wait here as
//! `(deadline, key, item)` in the order the dequeue proxy moved them.
//!
//! A bounded [`Ring`] with one pusher that never closes it:
//! - **Exclusive push.** Only the dequeue proxy pushes, and only while it holds
//!   the timers lock. So the push needs no CAS, and anyone else holding that lock
//!   (the enqueue proxy answering `peek_deadline` or `take_pending`) sees a ring
//!   that no one is filling.
//! - **Takes** are the ring's lock-free pops: one CAS per item, or one per batch
//!   (`take_many`, for `recv_many`).
//! - **Room.** The dequeue proxy stops at a full ring and waits for room
//!   (`Sleep::Space`); whoever makes room rings its bell once
//!   [`has_room_for_batch`](Egress::has_room_for_batch) holds — half the ring
//!   free — so that it moves a batch per wake-up, not one item.

use crate::ring::Ring;

/// A due item: `(deadline ticks, key, item)`.
pub(crate) type Due<T> = (u64, u64, T);

pub(crate) struct Egress<T> {
    ring: Ring<Due<T>>,
}

impl<T> Egress<T> {
    /// A ring of `slots.next_power_of_two()` slots (at least 2, at most 2^30).
    pub(crate) fn new(slots: usize) -> Egress<T> {
        Egress { ring: Ring::new(slots) }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// Items waiting (approximate while others take).
    pub(crate) fn len(&self) -> usize {
        self.ring.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn is_full(&self) -> bool {
        self.ring.is_full()
    }

    /// At least half the ring is free: enough for the dequeue proxy to move a
    /// batch. The proxy re-checks it before parking for room, and takers check it
    /// before ringing the proxy's bell; the two must agree.
    pub(crate) fn has_room_for_batch(&self) -> bool {
        self.len() <= self.capacity() / 2
    }

    /// Stages a due item for the consumers. Fails (handing it back) only when full.
    ///
    /// # Safety
    /// The caller is the dequeue proxy, the only pusher, and holds the timers lock.
    pub(crate) unsafe fn push(&self, entry: Due<T>) -> Result<(), Due<T>> {
        // SAFETY: the caller is the only pusher (its duty), and nothing closes the
        // egress ring (this type offers no `close`).
        unsafe { self.ring.push_exclusive(entry) }
    }

    /// The earliest deadline waiting here (the ring is in delivery order, not
    /// always deadline order: an item that reached the index already due follows
    /// the ones moved before it).
    ///
    /// # Safety
    /// The caller holds the timers lock, so no push runs.
    pub(crate) unsafe fn earliest_deadline(&self) -> Option<u64> {
        let mut min = None::<u64>;
        // SAFETY: no push runs (the caller's duty); we read only the `u64` deadline
        // field through the pointer, never a reference to the item.
        unsafe {
            self.ring.scan(|p| {
                let d = std::ptr::addr_of!((*p).0).read();
                min = Some(min.map_or(d, |m| m.min(d)));
            })
        };
        min
    }

    /// How many items consumers have taken so far, in all (wraps; compare for
    /// change only). A hint: others may be taking.
    pub(crate) fn taken_so_far(&self) -> usize {
        self.ring.popped()
    }

    /// Takes the oldest due item.
    pub(crate) fn take(&self) -> Option<Due<T>> {
        self.ring.pop()
    }

    /// Takes up to `max` due items, oldest first, into `out`, with one CAS per
    /// run of published items. Returns how many.
    pub(crate) fn take_many(&self, out: &mut Vec<Due<T>>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let got = self.ring.pop_many(max - n, out);
            if got == 0 {
                break;
            }
            n += got;
        }
        n
    }

    /// Takes everything waiting (`take_pending`, shutdown).
    pub(crate) fn take_all(&self) -> Vec<Due<T>> {
        let mut all = Vec::new();
        while let Some(x) = self.ring.pop() {
            all.push(x);
        }
        all
    }
}

impl<T> std::fmt::Debug for Egress<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress").field("ring", &self.ring).finish()
    }
}
