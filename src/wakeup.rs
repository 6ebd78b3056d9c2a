//! The wakeup protocol of the two proxy threads.
//!
//! Three ways a proxy is woken, and what keeps each one from being lost:
//!
//! 1. **An earlier head** (enqueue proxy → sleeping dequeue proxy). The dequeue
//!    proxy's plan, [`Sleep`], lives *inside the timers lock*. In one critical
//!    section the dequeue proxy pops what is due, reads the new head and records
//!    `Sleep::Until(wake)` — the head's deadline, or `stage_ahead` before it
//!    when staging is on, the time it will wake to stage the head — (or
//!    `Forever`); it parks only after unlocking. The enqueue proxy inserts and reads `Sleep` in one critical section of the same
//!    lock, and unparks when the new head is earlier than the planned wake-up
//!    (or runs that round itself: `dequeue::stage_early`).
//!
//!    **Invariant:** whenever the lock is free, either the dequeue proxy is awake
//!    (`Awake`: it will re-read the heap before it sleeps again), or it plans to
//!    wake — or has handed that round to the consumers (`duty.rs`) — no later
//!    than the earliest deadline in the heap (`Until(t)` with
//!    `t <= head`, or `Forever` for an empty heap), or it waits for egress room
//!    (`Space`: it will re-read the heap when room appears).
//!
//!    The race that the Go timing-wheel library's `DelayQueue` spells out in its
//!    comments ("I looked at the head, then I went to sleep") is closed
//!    because looking and publishing the plan are one critical section, and the
//!    parker keeps an unpark that arrives between unlock and park as a token. No
//!    wakeup is sent when the head did not move earlier than the plan.
//!
//! 2. **Work arrived** (producer → idle enqueue proxy; egress room → dequeue proxy
//!    waiting for it): a [`Bell`]. The sleeper sets its `sleeping` flag, issues a
//!    SeqCst fence, re-checks for work, then parks; the waker makes work visible,
//!    issues a SeqCst fence, then reads the flag and unparks only a sleeper whose
//!    flag it swapped back to `false`. Either the re-check sees the work or the
//!    waker sees the flag (the store-buffering litmus test, forbidden by SeqCst
//!    fences). *Every* path that empties the egress ring rings the dequeue bell:
//!    a consumer's take (`receiver::taken`) and `take_pending` (the enqueue proxy,
//!    after its pops); a path that forgot it once left the proxy asleep with
//!    room in the ring and due items in the index.
//!
//! 3. **Unconditional** (a `MockClock` moved, shutdown): a plain unpark, whose token
//!    the next park consumes.

use crate::clock::NEVER;
use crate::sync::{fence, AtomicBool, Ordering, Unparker};

/// What the dequeue proxy will do once it releases the timers lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sleep {
    /// Running, or already unparked: it re-reads the heap before sleeping.
    Awake,
    /// Parked until this tick (or an unpark): no later than the head's
    /// deadline, `stage_ahead` before it when staging is on.
    Until(u64),
    /// Parked with an empty heap.
    Forever,
    /// Parked until consumers make room in the egress ring.
    Space,
}

impl Sleep {
    /// The dequeue proxy's plan after a round: `next` is the heap's new head.
    pub(crate) fn plan(next: Option<u64>, egress_full: bool) -> Sleep {
        match (egress_full, next) {
            (true, _) => Sleep::Space,
            (false, Some(t)) => Sleep::Until(t),
            (false, None) => Sleep::Forever,
        }
    }

    /// Whether an item at `added` ends the planned sleep (`must_wake_for`
    /// without marking the proxy awake).
    pub(crate) fn would_wake_for(&self, added: Option<u64>) -> bool {
        match (*self, added) {
            (Sleep::Until(t), Some(h)) => h < t,
            // A never-due item cannot end a sleep.
            (Sleep::Forever, Some(h)) => h != NEVER,
            _ => false,
        }
    }

    /// Called by the enqueue proxy under the timers lock after it changed the
    /// index, with the earliest deadline it added (the only way the head can move
    /// earlier). Returns `true` if it must unpark the dequeue proxy, and then marks
    /// it `Awake` so that later batches do not unpark it again.
    pub(crate) fn must_wake_for(&mut self, added: Option<u64>) -> bool {
        let wake = self.would_wake_for(added);
        if wake {
            *self = Sleep::Awake;
        }
        wake
    }
}

/// A sleeping flag and the sleeper's unparker (mechanism 2 above).
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

    /// Whether the sleeper announced a park (a hint: read after the waker's fence).
    pub(crate) fn is_sleeping(&self) -> bool {
        // Relaxed: a hint only; `ring_after_fence` decides with a swap.
        self.sleeping.load(Ordering::Relaxed)
    }

    /// Unparks the sleeper whatever its state (mechanism 3).
    pub(crate) fn force(&self) {
        self.unparker.unpark();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_earlier_head_wakes_a_sleeper_once_and_a_later_one_never() {
        let mut s = Sleep::plan(Some(100), false);
        assert!(!s.must_wake_for(Some(100)), "same head: no wakeup needed");
        assert!(!s.must_wake_for(Some(150)));
        assert!(s.must_wake_for(Some(99)));
        assert_eq!(s, Sleep::Awake);
        assert!(!s.must_wake_for(Some(1)), "already woken");
        let mut f = Sleep::plan(None, false);
        assert!(!f.must_wake_for(Some(NEVER)), "a never-due item wakes nobody");
        assert!(f.must_wake_for(Some(NEVER - 1)));
        let mut sp = Sleep::plan(Some(5), true);
        assert!(!sp.must_wake_for(Some(0)), "waits for room, will re-read the heap");
    }
}
