//! A bounded lock-free ring after Dmitry Vyukov's bounded MPMC queue, with a close bit.
//!
//! The ingress ring: many producers push commands; one popper at a time, the
//! enqueue role's holder, pops them (`pop_exclusive`). (The egress has its own
//! ring in `egress.rs`: one pusher, many takers, deadlines readable in place.)
//!
//! Invariant: every slot carries a `stamp`. For position `pos` (which maps to slot
//! `pos & mask`), `stamp == pos` means "empty, ready for the push of `pos`" and
//! `stamp == pos + 1` means "full, holding the value pushed at `pos`". A push claims
//! `pos` by a CAS on `tail`, writes the value, then publishes `stamp = pos + 1`
//! (Release). The popper reads the value at `head`, frees the slot for the next
//! lap with `stamp = pos + capacity` (Release), then moves `head` on. The
//! claiming CAS gives a pusher the sole right to the slot until it stores the
//! stamp; being the only popper gives the popper the same.
//!
//! A push that finds its slot still held for the position one lap back, claimed
//! or full, reports `Full`; no push spins on a pusher that is off its CPU
//! between its claim and its stamp store. Such a pusher holds back the pop
//! (the head's slot is unwritten) and so every value behind it: `head_ready`
//! tells the roles' look for work whether a pop would take something.
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

    pub(crate) fn push(&self, value: T) -> Result<(), PushError<T>> {
        // Relaxed: the stamp load below (Acquire) is what orders us after the slot's
        // previous pop; `tail` only picks the position to try.
        let mut tail = self.tail.load(Ordering::Relaxed);
        let mut backoff = Backoff::default();
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
            } else if matches!(stamp.wrapping_add(self.mask + 1).wrapping_sub(tail), 0 | 1) {
                // The slot is still held for the position one lap ago: claimed
                // by a push not yet written (0), or written and not yet popped
                // (1). Either way the ring is full, unless the popper has freed
                // the slot since (then the head has moved or will). A push
                // waits for neither: a pusher preempted mid-write would keep
                // every other one spinning while it waits for a CPU.
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

    /// Takes the oldest value, if any (`None` also while the push of the head
    /// position is claimed but not yet written).
    ///
    /// # Safety
    /// No other pop may run at the same time (for the ingress ring: the caller
    /// holds the enqueue role).
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
        // SeqCst: pushers' "full" checks and the room waiters' fences order
        // against it.
        self.head.store(head + 1, Ordering::SeqCst);
        Some(value)
    }

    /// `true` if the oldest position still in the ring has been written: a
    /// pop now would take it. Any thread may ask; a pop that has just moved
    /// the head is seen here or by the popper's own next look.
    pub(crate) fn head_ready(&self) -> bool {
        // Acquire, both: the look for work after a role's release. Its
        // store-buffering pair with the pusher (stamp store, then a SeqCst
        // fence; here a SeqCst fence, then these loads) is the fences'.
        let head = self.head.load(Ordering::Acquire);
        self.slots[head & self.mask].stamp.load(Ordering::Acquire) == head + 1
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
        // SAFETY: `&mut self`: no other pop runs.
        while unsafe { self.pop_exclusive() }.is_some() {}
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
        // SAFETY: the only popper.
        let got: Vec<_> = std::iter::from_fn(|| unsafe { r.pop_exclusive() }).collect();
        assert_eq!(got, (0..8).collect::<Vec<_>>());
        assert!(r.close());
        assert!(matches!(r.push(1), Err(PushError::Closed(1))));
    }

    #[test]
    fn a_full_ring_behind_a_claimed_unwritten_head_refuses_a_push_instead_of_spinning() {
        let r = Arc::new(Ring::new(4));
        // A push that claimed position 0 and is off the CPU before writing it.
        r.tail.fetch_add(1, Ordering::SeqCst);
        for i in 1..4 {
            r.push(i).unwrap();
        }
        assert!(!r.head_ready(), "the head is claimed, not written");
        // SAFETY: the only popper.
        assert!(unsafe { r.pop_exclusive() }.is_none(), "nothing passes the unwritten head");
        // On a thread: the spinning push this replaced never returned.
        let (tx, rx) = std::sync::mpsc::channel();
        let pusher = r.clone();
        std::thread::spawn(move || {
            let _ = tx.send(matches!(pusher.push(9), Err(PushError::Full(9))));
        });
        let refused = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(refused, Ok(true), "a push into the full ring must return Full at once");
        // The claimed push completes (what `push` does after its CAS).
        // SAFETY: position 0 was claimed above and nobody else writes it.
        r.slots[0].value.with_mut(|p| unsafe { (*p).write(0) });
        r.slots[0].stamp.store(1, Ordering::Release);
        assert!(r.head_ready());
        // SAFETY: the only popper.
        assert_eq!(unsafe { r.pop_exclusive() }, Some(0));
        r.push(9).unwrap();
        // SAFETY: the only popper.
        let got: Vec<_> = std::iter::from_fn(|| unsafe { r.pop_exclusive() }).collect();
        assert_eq!(got, vec![1, 2, 3, 9]);
    }

    #[test]
    fn concurrent_pushes_reach_the_popper_once_each_in_each_producers_order() {
        const PER: usize = 20_000;
        let r = Arc::new(Ring::new(64));
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
        let mut last = [None; 2];
        let mut got = 0;
        while got < 2 * PER {
            // SAFETY: this thread is the only popper.
            match unsafe { r.pop_exclusive() } {
                Some(v) => {
                    let (p, i) = (v / PER, v % PER);
                    assert!(last[p].map_or(true, |l| l < i), "producer {p}: {i} after {last:?}");
                    last[p] = Some(i);
                    got += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(last, [Some(PER - 1); 2], "every value popped once, in order");
        // SAFETY: the only popper.
        assert!(unsafe { r.pop_exclusive() }.is_none(), "nothing more was pushed");
    }
}
