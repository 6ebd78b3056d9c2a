//! The lead: which consumer waits for the deadline of a staged item.
//!
//! The dequeue proxy moves items into the egress up to `stage_ahead` before
//! their deadline (`dequeue.rs`); a consumer that finds the oldest one not yet
//! due parks until its deadline. So that one thread, not every waiting consumer,
//! wakes at that time, the consumers elect a *leader*: `at` holds the deadline
//! the leader waits for (0: nobody leads). A consumer that sees an earlier
//! deadline than the leader's takes the lead over; the old leader finds out when
//! it wakes.
//!
//! Invariant (no stranded staged item): while a consumer waits and the oldest
//! staged entry is not due, someone will look at the ring again no later than
//! that entry's deadline:
//! - the leader, parked (still registered among the waiting consumers) until its
//!   `at`, which is no later than the oldest entry it saw; or
//! - the dequeue proxy, which includes the oldest entry's deadline in its own
//!   wake-up whenever it finds nobody leading (and is rung by an async consumer,
//!   which cannot park with a timeout, when that consumer finds nobody leading);
//! - a leader that leaves without the item (a timeout) gives the lead up and
//!   wakes one waiting consumer, which takes the lead or rings the proxy; a
//!   leader that takes an item gives the lead up *before* the take, whose
//!   chain wake-up (`receiver::taken`) then reaches the next consumer.
//!
//! Both sides of each hand-off are SeqCst with a fence between the write and
//! the read (the store-buffering pair of `wakeup.rs`): the proxy pushes, fences,
//! then reads `at`; a leader gives up, fences, then looks at the ring. Either the
//! proxy sees nobody leading (and wakes a consumer), or the old leader sees the
//! new entry.
//!
//! A give-up is a CAS from the leader's own deadline to 0. Two leaders in turn
//! with the same deadline can make the first one's give-up clear the second's
//! lead: that only makes more threads wake (nobody leads, so the proxy plans for
//! the entry and a consumer may lead again), never fewer.

use crate::sync::{fence, AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

#[derive(Debug, Default)]
pub(crate) struct Lead {
    at: CachePadded<AtomicU64>,
}

impl Lead {
    /// The deadline the leader waits for, if anyone leads.
    pub(crate) fn current(&self) -> Option<u64> {
        // SeqCst: read after a fence, as the reader's half of a hand-off.
        Some(self.at.load(Ordering::SeqCst)).filter(|&at| at != 0)
    }

    /// Leads for deadline `at` (at least 1) unless someone leads for one no
    /// later. Returns whether the caller now leads.
    pub(crate) fn take(&self, at: u64) -> bool {
        debug_assert!(at != 0, "tick 0 means nobody leads");
        let mut cur = self.at.load(Ordering::SeqCst);
        loop {
            if cur != 0 && cur <= at {
                return false;
            }
            // SeqCst: in the total order with the proxy's read of `at`.
            match self.at.compare_exchange_weak(cur, at, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Stops leading for `at`, then fences, so that the caller's next look at
    /// the ring is ordered after it. Returns `false` if another consumer had
    /// taken the lead over.
    pub(crate) fn give_up(&self, at: u64) -> bool {
        // SeqCst: the leader's half of the hand-off with the dequeue proxy.
        let gave = self.at.compare_exchange(at, 0, Ordering::SeqCst, Ordering::Relaxed).is_ok();
        // Planted bug for the loom suite (`models/lead.rs`): without the fence
        // the old leader's look at the ring can miss an entry pushed by a
        // proxy that still saw it leading.
        #[cfg(not(delayq_bug_lead_no_fence))]
        fence(Ordering::SeqCst);
        gave
    }

    /// The deadline the leader waits for, read by the dequeue role after its
    /// pushes into the egress: the fence first (the pusher's half of the
    /// hand-off), so that either this read sees a leader's give-up or that
    /// leader's next look sees the pushes.
    pub(crate) fn after_push(&self) -> Option<u64> {
        // SeqCst: the pusher's half of the store-buffering pair.
        fence(Ordering::SeqCst);
        self.current()
    }
}

#[cfg(all(test, not(delayq_loom)))]
mod tests {
    use super::*;

    #[test]
    fn an_earlier_deadline_takes_the_lead_over_and_a_later_one_does_not() {
        let l = Lead::default();
        assert_eq!(l.current(), None);
        assert!(l.take(10));
        assert!(!l.take(10), "one leader per deadline");
        assert!(!l.take(11));
        assert!(l.take(5));
        assert!(!l.give_up(10), "the old leader lost it");
        assert_eq!(l.current(), Some(5));
        assert!(l.give_up(5));
        assert_eq!(l.current(), None);
    }
}
