//! A bounded lock-free ring: Dmitry Vyukov's bounded MPMC queue, with a close bit.
//!
//! The ingress ring: many producers push commands, the enqueue proxy pops
//! (`pop_exclusive`). (The egress, whose entries can be recalled, has its own
//! ring in `egress.rs`.)
//!
//! Invariant: every slot carries a `stamp`. For position `pos` (which maps to slot
//! `pos & mask`), `stamp == pos` means "empty, ready for the push of `pos`" and
//! `stamp == pos + 1` means "full, holding the value pushed at `pos`". A push claims
//! `pos` by a CAS on `tail`, writes the value, then publishes `stamp = pos + 1`
//! (Release). A pop claims `pos` by a CAS on `head`, reads the value, then frees the
//! slot for the next lap with `stamp = pos + capacity` (Release). The claiming CAS
//! gives the claimer the sole right to the slot's value until it stores the stamp.
//!
//! Closing sets `CLOSED` in `tail`: every later push fails with its value handed
//! back, because its CAS on `tail` can no longer succeed.

use crate::sync::{spin, AtomicUsize, Backoff, Ordering, UnsafeCell};
use crossbeam_utils::CachePadded;
use std::mem::MaybeUninit;

/// The bit of `tail` that marks the ring closed to pushes.
const CLOSED: usize = 1 << (usize::BITS - 1);

struct Slot<T> {
    stamp: AtomicUsize,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// Why a push failed; the value comes back.
#[derive(Debug)]
pub(crate) enum PushError<T> {
    Full(T),
    Closed(T),
}

pub(crate) struct Ring<T> {
    head: CachePadded<AtomicUsize>,
    tail: CachePadded<AtomicUsize>,
    slots: Box<[Slot<T>]>,
    mask: usize,
}

// SAFETY: the ring hands each value from the thread that pushed it to exactly one
// thread that pops it (see the invariant above), so `T: Send` is all it needs.
unsafe impl<T: Send> Send for Ring<T> {}
// SAFETY: as for `Send`; shared access only goes through the stamp protocol.
unsafe impl<T: Send> Sync for Ring<T> {}

impl<T> Ring<T> {
    /// A ring of `capacity.next_power_of_two()` slots (at least 2).
    pub(crate) fn new(capacity: usize) -> Ring<T> {
        let cap = capacity.clamp(2, 1 << 30).next_power_of_two();
        let slots = (0..cap)
            .map(|i| Slot { stamp: AtomicUsize::new(i), value: UnsafeCell::new(MaybeUninit::uninit()) })
            .collect();
        Ring {
            head: CachePadded::new(AtomicUsize::new(0)),
            tail: CachePadded::new(AtomicUsize::new(0)),
            slots,
            mask: cap - 1,
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.mask + 1
    }

    pub(crate) fn push(&self, value: T) -> Result<(), PushError<T>> {
        // Relaxed: the stamp load below (Acquire) is what orders us after the slot's
        // previous pop; `tail` only picks the position to try.
        let mut tail = self.tail.load(Ordering::Relaxed);
        let mut backoff = Backoff::new();
        loop {
            if tail & CLOSED != 0 {
                return Err(PushError::Closed(value));
            }
            let slot = &self.slots[tail & self.mask];
            // Acquire: pairs with the Release stamp store of the pop that freed the slot.
            let stamp = slot.stamp.load(Ordering::Acquire);
            if stamp == tail {
                // SeqCst: claims belong to the total order that the wake-up checks
                // (fences in `wakeup` and `waiters`) reason about.
                match self.tail.compare_exchange_weak(tail, tail + 1, Ordering::SeqCst, Ordering::Relaxed) {
                    Ok(_) => {
                        // SAFETY: the CAS gave us position `tail`; the stamp said the
                        // slot is empty for it, so no one else reads or writes it.
                        slot.value.with_mut(|p| unsafe { (*p).write(value) });
                        // Release: publishes the value to the pop of this position.
                        slot.stamp.store(tail + 1, Ordering::Release);
                        return Ok(());
                    }
                    Err(t) => tail = t,
                }
            } else if stamp.wrapping_add(self.mask + 1) == tail + 1 {
                // The slot still holds the value of one lap ago. Full if no pop has
                // claimed it; otherwise a consumer is mid-read and frees it soon.
                // SeqCst: the verdict must not be older than the pop a blocked
                // caller then waits for (see `wakeup::Bell`).
                if self.head.load(Ordering::SeqCst).wrapping_add(self.mask + 1) == tail {
                    return Err(PushError::Full(value));
                }
                backoff.snooze();
                tail = self.tail.load(Ordering::Relaxed);
            } else {
                spin();
                tail = self.tail.load(Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn pop(&self) -> Option<T> {
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[head & self.mask];
            // Acquire: pairs with the Release stamp store of the push of `head`.
            let stamp = slot.stamp.load(Ordering::Acquire);
            if stamp == head + 1 {
                // SeqCst: see `push`.
                match self.head.compare_exchange_weak(head, head + 1, Ordering::SeqCst, Ordering::Relaxed) {
                    Ok(_) => {
                        // SAFETY: the CAS gave us position `head`, whose stamp says
                        // the value was fully written; we move it out exactly once.
                        let value = slot.value.with(|p| unsafe { (*p).assume_init_read() });
                        // Release: hands the emptied slot to the push one lap on.
                        slot.stamp.store(head + self.mask + 1, Ordering::Release);
                        return Some(value);
                    }
                    Err(h) => head = h,
                }
            } else if stamp == head {
                // Nothing pushed at `head` yet (or a push claimed it and is mid-write).
                return None;
            } else {
                spin();
                head = self.head.load(Ordering::Relaxed);
            }
        }
    }

    /// `pop` for a ring with one consumer: the position is ours without a CAS.
    ///
    /// # Safety
    /// The caller must be the ring's only popper for as long as the ring lives
    /// (the enqueue proxy for the ingress ring).
    pub(crate) unsafe fn pop_exclusive(&self) -> Option<T> {
        // Relaxed: only we write `head`.
        let head = self.head.load(Ordering::Relaxed);
        let slot = &self.slots[head & self.mask];
        // Acquire: pairs with the Release stamp store of the push of `head`.
        if slot.stamp.load(Ordering::Acquire) != head + 1 {
            return None;
        }
        debug_assert_eq!(self.head.load(Ordering::Relaxed), head, "a second popper");
        // SAFETY: the stamp says the push of `head` completed, and no other thread
        // pops (the caller's duty), so position `head` and its value are ours.
        let value = slot.value.with(|p| unsafe { (*p).assume_init_read() });
        // Release: hands the emptied slot to the push one lap on.
        slot.stamp.store(head + self.mask + 1, Ordering::Release);
        // SeqCst: as the CAS in `pop`; pushers' "full" checks and the room
        // waiters' fences order against it.
        self.head.store(head + 1, Ordering::SeqCst);
        Some(value)
    }

    /// Closes the ring to pushes. Returns `false` if it was already closed.
    pub(crate) fn close(&self) -> bool {
        // SeqCst: a push that sees the bit fails; one that claimed before it is
        // drained by the closer (`is_drained`).
        self.tail.fetch_or(CLOSED, Ordering::SeqCst) & CLOSED == 0
    }

    /// `true` when every claimed push has been popped (so nothing is mid-write).
    pub(crate) fn is_drained(&self) -> bool {
        let tail = self.tail.load(Ordering::SeqCst) & !CLOSED;
        self.head.load(Ordering::SeqCst) == tail
    }

    /// Items in the ring (approximate while others push or pop).
    pub(crate) fn len(&self) -> usize {
        let tail = self.tail.load(Ordering::SeqCst) & !CLOSED;
        let head = self.head.load(Ordering::SeqCst);
        tail.saturating_sub(head)
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

impl<T> std::fmt::Debug for Ring<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring").field("len", &self.len()).field("capacity", &self.capacity()).finish()
    }
}

#[cfg(all(test, not(delayq_loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn pops_in_order_and_a_full_ring_refuses() {
        let r = Ring::new(8);
        for i in 0..8 {
            r.push(i).unwrap();
        }
        assert!(matches!(r.push(99), Err(PushError::Full(99))));
        let got: Vec<_> = std::iter::from_fn(|| r.pop()).collect();
        assert_eq!(got, (0..8).collect::<Vec<_>>());
        assert!(r.close());
        assert!(matches!(r.push(1), Err(PushError::Closed(1))));
    }

    #[test]
    fn concurrent_pushes_and_pops_lose_and_duplicate_nothing() {
        use std::sync::atomic::AtomicUsize;
        const PER: usize = 20_000;
        let r = Arc::new(Ring::new(64));
        let taken = Arc::new(AtomicUsize::new(0));
        let producers: Vec<_> = (0..2)
            .map(|p| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for i in 0..PER {
                        let mut v = p * PER + i;
                        while let Err(PushError::Full(back)) = r.push(v) {
                            v = back;
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let (r, taken) = (r.clone(), taken.clone());
                std::thread::spawn(move || {
                    let mut got = vec![];
                    while taken.load(std::sync::atomic::Ordering::SeqCst) < 2 * PER {
                        let n = r.pop().map_or(0, |v| {
                            got.push(v);
                            1
                        });
                        taken.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
                        if n == 0 {
                            std::thread::yield_now();
                        }
                    }
                    got
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        let mut all: Vec<usize> = consumers.into_iter().flat_map(|c| c.join().unwrap()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..2 * PER).collect::<Vec<_>>());
    }
}
