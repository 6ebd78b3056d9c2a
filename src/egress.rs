//! The egress: the dequeue role → consumers. Items wait here as
//! `(deadline, key, item)`, every one of them due: the dequeue role moves an
//! item out of the index only once its deadline has passed (`dequeue.rs`).
//!
//! A bounded ring after Dmitry Vyukov's bounded MPMC queue, with one pusher:
//! - **Exclusive push.** Only the dequeue role's holder pushes, and only while
//!   it holds the timers lock. So the push needs no CAS, and anyone else
//!   holding that lock (the enqueue role answering `peek_deadline` or
//!   `take_pending`) sees a ring that no one is filling.
//! - **Takes.** A consumer claims the oldest entry with one CAS on `head`, as
//!   in Vyukov's queue, without reading the clock (everything here is due). An
//!   item in the ring is final: `cancel` and `reschedule` no longer reach it.
//!
//! Invariant of a slot, for the position `pos` it holds: `stamp == pos` means
//! empty, ready for the push of `pos`; `stamp == pos + 1` means the push of `pos`
//! is complete and its `at` and `key` are those of that push; a consumer that
//! claimed `pos` (the CAS on `head`) writes `stamp = pos + capacity` when it is
//! done with the slot. No memory is freed while another thread may read it: the
//! entries are the ring's slots, rewritten only by pushes.
//!
//! **Room.** The round that finds the ring full leaves the rest of the due
//! items in the index; the consumers that empty the ring run the next round
//! themselves (`receiver.rs`), so nobody waits for room, but the dequeue
//! proxy with `helping(false)` (`dequeue::wait_for_room`).

use crate::sync::{spin, AtomicU64, AtomicUsize, Backoff, Ordering, UnsafeCell};
use crossbeam_utils::CachePadded;
use std::mem::MaybeUninit;

/// An item on its way out: `(deadline ticks, key, item)`.
pub(crate) type Due<T> = (u64, u64, T);

struct Slot<T> {
    stamp: AtomicUsize,
    /// Deadline ticks and key: written before the stamp is published.
    at: AtomicU64,
    key: AtomicU64,
    item: UnsafeCell<MaybeUninit<T>>,
}

pub(crate) struct Egress<T> {
    head: CachePadded<AtomicUsize>,
    tail: CachePadded<AtomicUsize>,
    /// Positions that left the ring some way other than a consumer's take
    /// (`take_all`'s). Counted *before* the head can move past them, so that
    /// `received_so_far` never counts one as received. Read for the metrics.
    bypassed: AtomicUsize,
    slots: Box<[Slot<T>]>,
    mask: usize,
}

// SAFETY: each item goes from the pusher to exactly one thread, the consumer
// that claimed its position; so `T: Send` is all it needs.
unsafe impl<T: Send> Send for Egress<T> {}
// SAFETY: as for `Send`; shared access goes through the stamp protocol.
unsafe impl<T: Send> Sync for Egress<T> {}

impl<T> Egress<T> {
    /// A ring of `slots.next_power_of_two()` slots (at least 2, at most 2^30).
    pub(crate) fn new(slots: usize) -> Egress<T> {
        let cap = slots.clamp(2, 1 << 30).next_power_of_two();
        let slots = (0..cap)
            .map(|i| Slot {
                stamp: AtomicUsize::new(i),
                at: AtomicU64::new(0),
                key: AtomicU64::new(0),
                item: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect();
        Egress {
            head: CachePadded::new(AtomicUsize::new(0)),
            tail: CachePadded::new(AtomicUsize::new(0)),
            bypassed: AtomicUsize::new(0),
            slots,
            mask: cap - 1,
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Entries waiting (approximate while others take).
    pub(crate) fn len(&self) -> usize {
        // SeqCst: the take path's and the rounds' checks order against the
        // claims and pushes (the fences in `receiver.rs` and `waiters.rs`).
        let tail = self.tail.load(Ordering::SeqCst);
        let head = self.head.load(Ordering::SeqCst);
        tail.saturating_sub(head)
    }

    pub(crate) fn is_full(&self) -> bool {
        self.len() >= self.capacity()
    }

    /// Items consumers have taken so far: the head, less the positions that
    /// left otherwise. Read in this order it can only undercount (a position
    /// is counted as bypassed before the head can pass it), so a series of
    /// readings, each kept as a maximum, converges on the exact count once
    /// the ring is quiet (`metrics.rs`).
    pub(crate) fn received_so_far(&self) -> usize {
        // SeqCst: the head first, then `bypassed` (see the field).
        let head = self.head.load(Ordering::SeqCst);
        head.saturating_sub(self.bypassed.load(Ordering::SeqCst))
    }

    /// How many positions consumers have claimed so far, in all (wraps;
    /// compare for change only). A hint: others may be taking.
    pub(crate) fn taken_so_far(&self) -> usize {
        // Relaxed: a progress hint for the admission rule (a paused send
        // whose `MAX_WAIT` ran out).
        self.head.load(Ordering::Relaxed)
    }

    /// Hands a due item to the consumers, or hands it back when the ring is
    /// full.
    ///
    /// # Safety
    /// The caller holds the dequeue role (it is the only pusher) and the
    /// timers lock.
    pub(crate) unsafe fn push(&self, (at, key, item): Due<T>) -> Result<(), Due<T>> {
        // Relaxed: only we write `tail`.
        let tail = self.tail.load(Ordering::Relaxed);
        let slot = &self.slots[tail & self.mask];
        let mut backoff = Backoff::default();
        loop {
            // Acquire: pairs with the Release stamp store of the take that freed it.
            let stamp = slot.stamp.load(Ordering::Acquire);
            if stamp == tail {
                break;
            }
            // The slot holds the entry of one lap ago: full, unless a consumer has
            // claimed it and is finishing (then it is free in a moment).
            // SeqCst: the claims' total order.
            if self.head.load(Ordering::SeqCst).wrapping_add(self.mask + 1) == tail {
                return Err((at, key, item));
            }
            // Yields after a few spins: that consumer may be off its CPU.
            backoff.snooze();
        }
        // Relaxed: published by the stamp's Release store below.
        slot.at.store(at, Ordering::Relaxed);
        slot.key.store(key, Ordering::Relaxed);
        // SAFETY: the stamp says the slot is empty for position `tail`, and no
        // other thread pushes (the caller's duty), so the slot is ours to write.
        slot.item.with_mut(|p| unsafe { (*p).write(item) });
        // Release: publishes the entry to whoever reads this stamp.
        slot.stamp.store(tail + 1, Ordering::Release);
        // SeqCst: claims and the take path's checks read `tail` in the total
        // order that the wake-up checks reason about.
        self.tail.store(tail + 1, Ordering::SeqCst);
        Ok(())
    }

    /// Takes the oldest entry, if any.
    pub(crate) fn take(&self) -> Option<Due<T>> {
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[head & self.mask];
            // Acquire: pairs with the Release stamp store of the push of `head`.
            let stamp = slot.stamp.load(Ordering::Acquire);
            // Planted bug for the loom suite: a take that claims a slot whose
            // take of one lap ago is not done.
            #[cfg(delayq_bug_egress_take_unfinished)]
            let stamp = if (stamp.wrapping_sub(head) as isize) < 0 { head + 1 } else { stamp };
            if stamp == head + 1 {
                // SeqCst: claims belong to the total order that the wake-up
                // checks (fences in `receiver` and `waiters`) reason about.
                if let Err(h) =
                    self.head.compare_exchange_weak(head, head + 1, Ordering::SeqCst, Ordering::Relaxed)
                {
                    head = h;
                    continue;
                }
                // Planted bug for the loom suite: the slot handed to the next
                // lap's push before we read it out.
                #[cfg(delayq_bug_egress_free_before_read)]
                slot.stamp.store(head + self.mask + 1, Ordering::Release);
                // Relaxed: published with the stamp we read (Acquire).
                let at = slot.at.load(Ordering::Relaxed);
                let key = slot.key.load(Ordering::Relaxed);
                // SAFETY: we claimed position `head`, whose push completed (the
                // stamp): no one else moves the item out, and no push rewrites
                // the slot before our stamp store below.
                let item = slot.item.with(|p| unsafe { (*p).assume_init_read() });
                // Release: hands the emptied slot to the push one lap on.
                #[cfg(not(delayq_bug_egress_free_before_read))]
                slot.stamp.store(head + self.mask + 1, Ordering::Release);
                return Some((at, key, item));
            } else if stamp.wrapping_sub(head) as isize <= 0 {
                // Nothing pushed at `head` yet: the push waits for the slot, or
                // for its take of one lap ago to finish. No spin: that taker
                // may be off its CPU (`docs/bench/README.md`, 21st round).
                return None;
            } else {
                // Another consumer claimed `head` meanwhile.
                spin();
                head = self.head.load(Ordering::Relaxed);
            }
        }
    }

    /// The earliest deadline waiting here. (Entries are in deadline order
    /// except where an item reached the index already due: it follows what
    /// was moved before it arrived.)
    pub(crate) fn earliest_deadline(&self) -> Option<u64> {
        // SeqCst: as in `len`; orders the stamp reads after the positions.
        let head = self.head.load(Ordering::SeqCst);
        let tail = self.tail.load(Ordering::SeqCst);
        (head..tail)
            .filter_map(|pos| {
                let slot = &self.slots[pos & self.mask];
                // Acquire: pairs with the Release stamp store of the push of
                // `pos` (an entry taken meanwhile may or may not be seen).
                // Relaxed: the deadline is published with the stamp.
                (slot.stamp.load(Ordering::Acquire) == pos + 1).then(|| slot.at.load(Ordering::Relaxed))
            })
            .min()
    }

    /// Takes every waiting entry (`take_pending`, shutdown).
    pub(crate) fn take_all(&self) -> Vec<Due<T>> {
        let mut all = Vec::new();
        loop {
            // Counted before the take moves the head (the field's rule).
            // SeqCst: `received_so_far` reads it after the head.
            self.bypassed.fetch_add(1, Ordering::SeqCst);
            let Some(x) = self.take() else { break };
            all.push(x);
        }
        self.bypassed.fetch_sub(1, Ordering::SeqCst);
        all
    }
}

impl<T> Drop for Egress<T> {
    fn drop(&mut self) {
        while self.take().is_some() {}
    }
}

#[cfg(all(test, not(delayq_loom)))]
mod tests {
    use super::*;

    fn push(e: &Egress<u32>, at: u64, key: u64) -> Result<(), Due<u32>> {
        // SAFETY: this test is the only pusher.
        unsafe { e.push((at, key, key as u32)) }
    }

    #[test]
    fn takes_in_push_order_and_refuses_a_push_when_full() {
        let e = Egress::new(2);
        push(&e, 20, 1).unwrap();
        push(&e, 10, 2).unwrap();
        assert!(e.is_full());
        assert_eq!(push(&e, 30, 3).unwrap_err().1, 3, "full: the item comes back");
        assert_eq!(e.earliest_deadline(), Some(10));
        assert_eq!(e.take().map(|x| x.2), Some(1));
        push(&e, 30, 3).unwrap();
        assert_eq!(e.take().map(|x| x.2), Some(2));
        assert_eq!(e.take().map(|x| x.2), Some(3));
        assert!(e.take().is_none());
        assert_eq!(e.received_so_far(), 3);
    }

    #[test]
    fn take_all_is_not_counted_as_received() {
        let e = Egress::new(4);
        push(&e, 1, 1).unwrap();
        push(&e, 2, 2).unwrap();
        assert_eq!(e.take().map(|x| x.2), Some(1));
        assert_eq!(e.take_all().len(), 1);
        assert_eq!(e.received_so_far(), 1);
        assert_eq!(e.len(), 0);
    }

    #[test]
    fn dropping_the_ring_drops_what_it_holds() {
        let e = Egress::new(4);
        let item = std::sync::Arc::new(());
        // SAFETY: the only pusher.
        unsafe { e.push((1, 1, item.clone())) }.unwrap();
        assert_eq!(std::sync::Arc::strong_count(&item), 2);
        drop(e);
        assert_eq!(std::sync::Arc::strong_count(&item), 1);
    }
}
