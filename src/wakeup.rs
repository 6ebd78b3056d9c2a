//! The proxy threads' bell: how a thread that performs a role's work wakes a
//! proxy parked with nothing to do.
//!
//! The proxies park when idle: the enqueue proxy with an empty ingress, the
//! dequeue proxy when nobody asked it to lead (`lead.rs`). Two ways wake one:
//!
//! 1. **Work arrived** (a holder of the enqueue role left commands behind; a
//!    receiver took the lead for the dequeue proxy): a [`Bell`]. The sleeper
//!    sets its `sleeping` flag, issues a SeqCst fence, re-checks for work,
//!    then parks; the waker makes work visible, issues a SeqCst fence, then
//!    reads the flag and unparks only a sleeper whose flag it swapped back to
//!    `false`. Either the re-check sees the work or the waker sees the flag
//!    (the store-buffering litmus test, forbidden by SeqCst fences). The Go
//!    timing-wheel library's `DelayQueue` spells out the race this closes in
//!    its comments ("I looked at the head, then I went to sleep").
//! 2. **Unconditional** (a `MockClock` moved, shutdown, an earlier deadline
//!    for the proxy's lead): a plain unpark, whose token the next park
//!    consumes.

use crate::sync::{fence, AtomicBool, Ordering, Unparker};

/// A sleeping flag and the sleeper's unparker (way 1 above).
#[derive(Debug)]
pub(crate) struct Bell {
    sleeping: AtomicBool,
    unparker: Unparker,
}

impl Bell {
    pub(crate) fn new(unparker: Unparker) -> Bell {
        Bell { sleeping: AtomicBool::new(false), unparker }
    }

    /// Sleeper: announce the intent to park. Re-check for work after this.
    pub(crate) fn prepare_sleep(&self) {
        // SeqCst (swap and fence): the sleeper's half of the store-buffering pair.
        // A swap, not a store: every write to the flag is an RMW, so it is ordered
        // after the wakers' swaps (loom cannot order a plain store after an RMW it
        // never read; found by `bell_never_loses_a_second_ring`).
        self.sleeping.swap(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Sleeper: woke up, or found work on the re-check.
    pub(crate) fn awake(&self) {
        // Relaxed: a stale `true` seen by a waker costs one spurious unpark, which
        // the parker tolerates. A swap for the reason given in `prepare_sleep`.
        self.sleeping.swap(false, Ordering::Relaxed);
    }

    /// Waker: work was just made visible; unpark the sleeper if it is parked.
    pub(crate) fn ring(&self) {
        // SeqCst: the waker's half of the store-buffering pair.
        fence(Ordering::SeqCst);
        self.ring_after_fence();
    }

    /// As `ring`, for a caller that has just issued a SeqCst fence itself.
    pub(crate) fn ring_after_fence(&self) {
        // Relaxed load first: the common case (proxy awake) writes nothing shared.
        // SeqCst swap: exactly one waker wins the right to unpark.
        if self.sleeping.load(Ordering::Relaxed) && self.sleeping.swap(false, Ordering::SeqCst) {
            self.unparker.unpark();
        }
    }

    /// Whether the sleeper has announced that it parks (or is parked): a hint
    /// for a waker choosing between two paths that both hand its work over
    /// (`enqueue::hand_over`).
    pub(crate) fn is_sleeping(&self) -> bool {
        self.sleeping.load(Ordering::Relaxed)
    }

    /// Unparks the sleeper whatever its state (way 2 above).
    pub(crate) fn force(&self) {
        self.unparker.unpark();
    }
}

#[cfg(all(test, not(delayq_loom)))]
mod tests {
    use super::*;
    use crate::sync::Parker;

    #[test]
    fn a_ring_reaches_a_sleeper_and_skips_an_awake_one() {
        let parker = Parker::new();
        let bell = Bell::new(parker.unparker());
        bell.ring();
        assert!(!bell.sleeping.load(Ordering::SeqCst));
        bell.prepare_sleep();
        assert!(bell.sleeping.load(Ordering::SeqCst));
        bell.ring();
        assert!(!bell.sleeping.load(Ordering::SeqCst), "the ring took the flag");
        // The unpark left a token: this park returns at once.
        parker.park(None);
        bell.awake();
    }
}
