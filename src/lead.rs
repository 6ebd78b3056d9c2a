//! The lead: who waits for the index's next deadline on everyone's behalf.
//!
//! Java's `DelayQueue` has a *leader*, the one thread that waits for the
//! head's deadline with a timeout while the others wait without one; `delayq`
//! has the same, over the timer index's earliest deadline (`index_head`). The
//! leader is a waiting consumer — it sleeps until that deadline and then runs
//! the dequeue round itself (`receiver.rs`) — or the dequeue proxy, for
//! receivers that cannot sleep with a timeout (async tasks) and for a queue
//! built with `helping(false)`: they take the lead *for* the proxy and ring it
//! (`dequeue.rs`).
//!
//! `lead` holds 0 (nobody leads) or the deadline led for, rounded down to an
//! even tick, with bit 0 set when the proxy is the leader. (Rounding down by a
//! nanosecond makes a leader wake no later than the deadline, never early for
//! an item: it only looks.)
//!
//! **Invariant:** while a consumer waits and the index holds an item that can
//! fall due, someone leads for a deadline no later than the index's earliest,
//! or someone is about to look: a role holder's round (which wakes consumers
//! for what it moved), or a consumer woken for it. Three hand-offs keep it,
//! each a store-buffering pair of SeqCst accesses with a SeqCst fence between
//! each side's write and read:
//! - **A new earliest deadline** (the enqueue role, after an insert): it
//!   lowers `index_head` ([`lower_head`]; an insert no earlier than the head
//!   changes nothing here and signals nothing), fences, then reads the lead
//!   ([`Lead::after_insert`]);
//!   a waiting consumer registers, fences, reads `index_head`, then takes the
//!   lead. Either the consumer sees the new head, or the inserter sees a lead
//!   later than it (or none) and wakes a consumer (or the proxy, if it leads).
//! - **The leader leaves** (at its deadline, or on a timeout): it gives the
//!   lead up ([`Lead::give_up`]: CAS to 0, fence), then looks at the queue and
//!   its waiters; a consumer registers, fences, then reads the lead. Either
//!   the follower sees nobody leading (and leads), or the old leader sees the
//!   follower (and wakes one: `receiver::taken`, and the timeout path).
//! - **Async receivers** take the lead for the proxy and ring it; the proxy
//!   reads the lead after every wake-up.
//!
//! Loom: `loom-tests/models/lead.rs`, with the planted bug
//! `delayq_bug_lead_no_fence`.

use crate::sync::{fence, AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

/// Bit 0 of `lead`: the dequeue proxy leads.
const PROXY: u64 = 1;

/// Who leads, as read from the lead (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Leader {
    /// The deadline led for (rounded down to an even tick).
    pub(crate) at: u64,
    /// The dequeue proxy leads (for async receivers, or without helping).
    pub(crate) proxy: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Lead {
    v: CachePadded<AtomicU64>,
}

pub(crate) fn encode(at: u64, proxy: bool) -> u64 {
    // At least 2: tick 0 and 1 would read as "nobody" or a bare flag.
    (at & !PROXY).max(2) | u64::from(proxy)
}

fn decode(v: u64) -> Option<Leader> {
    (v != 0).then_some(Leader { at: v & !PROXY, proxy: v & PROXY != 0 })
}

impl Lead {
    /// Who leads, if anyone.
    pub(crate) fn current(&self) -> Option<Leader> {
        // SeqCst: read after a fence, as the reader's half of a hand-off.
        decode(self.v.load(Ordering::SeqCst))
    }

    /// Leads for deadline `at` (the proxy, if `proxy`) unless someone leads
    /// for one no later. Returns the lead's value if the caller (or the
    /// proxy, for whom it acted) now leads: what [`give_up`](Lead::give_up)
    /// takes.
    pub(crate) fn take(&self, at: u64, proxy: bool) -> Option<u64> {
        let new = encode(at, proxy);
        let mut cur = self.v.load(Ordering::SeqCst);
        loop {
            if cur != 0 && cur & !PROXY <= new & !PROXY {
                return None;
            }
            // SeqCst: in the total order with the inserters' reads (module docs).
            match self.v.compare_exchange_weak(cur, new, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return Some(new),
                Err(now) => cur = now,
            }
        }
    }

    /// Stops leading (`v` from [`take`](Lead::take)), then fences, so that the
    /// caller's next look at the queue and its waiters is ordered after it.
    /// Returns `false` if another leader had taken the lead over.
    pub(crate) fn give_up(&self, v: u64) -> bool {
        // SeqCst: the leader's half of the hand-off with the followers.
        let gave = self.v.compare_exchange(v, 0, Ordering::SeqCst, Ordering::Relaxed).is_ok();
        // Planted bug for the loom suite (`models/lead.rs`): without the fence
        // the old leader's look at the waiters can miss a follower that still
        // saw it leading.
        #[cfg(not(delayq_bug_lead_no_fence))]
        fence(Ordering::SeqCst);
        gave
    }

    /// After an insert that lowered `index_head` to `earliest`: the fence
    /// (the inserter's half of the hand-off), then who must be woken — the
    /// leader, if it leads for a later deadline; `Some(None)` if nobody
    /// leads (a waiting consumer must look); `None` if someone leads for a
    /// deadline no later.
    pub(crate) fn after_insert(&self, earliest: u64) -> Option<Option<Leader>> {
        // SeqCst: the inserter's half of the store-buffering pair.
        #[cfg(not(delayq_bug_new_head_no_fence))]
        fence(Ordering::SeqCst);
        // Planted bug for the loom suite (`models/lead.rs`): without the
        // fence, a consumer that registers and reads the old head can lead
        // for it while we read the lead before its take.
        match self.current() {
            None => Some(None),
            Some(l) if l.at > earliest => Some(Some(l)),
            Some(_) => None,
        }
    }
}

/// An insert (under the timers lock) lowers `Shared::index_head` to
/// `earliest`: `true` if that made a new head, to signal after the role's
/// release ([`Lead::after_insert`]). One no earlier than the head needs no
/// signal, as Java's `offer` signals only for a new head: the invariant
/// holds for the head, so whoever leads for it or is about to look covers it.
pub(crate) fn lower_head(head: &AtomicU64, earliest: u64) -> bool {
    // SeqCst: read by consumers that found the egress empty, and the
    // inserter's first half of the new-head hand-off.
    head.fetch_min(earliest, Ordering::SeqCst) > earliest
}

#[cfg(all(test, not(delayq_loom)))]
mod tests {
    use super::*;

    #[test]
    fn an_earlier_deadline_takes_the_lead_over_and_a_later_one_does_not() {
        let l = Lead::default();
        assert_eq!(l.current(), None);
        let a = l.take(10, false).unwrap();
        assert!(l.take(10, true).is_none(), "one leader per deadline");
        assert!(l.take(11, false).is_none());
        let b = l.take(5, true).unwrap();
        assert_eq!(l.current(), Some(Leader { at: 4, proxy: true }), "rounded down, never later");
        assert!(!l.give_up(a), "the old leader lost it");
        assert_eq!(l.after_insert(3), Some(Some(Leader { at: 4, proxy: true })));
        assert_eq!(l.after_insert(4), None);
        assert!(l.give_up(b));
        assert_eq!(l.current(), None);
        assert_eq!(l.after_insert(100), Some(None));
    }

    #[test]
    fn only_an_insert_earlier_than_the_head_is_a_new_head() {
        let head = AtomicU64::new(10);
        assert!(!lower_head(&head, 10), "equal: the head's leader covers it");
        assert!(!lower_head(&head, 11));
        assert_eq!(head.load(Ordering::SeqCst), 10);
        assert!(lower_head(&head, 9));
        assert_eq!(head.load(Ordering::SeqCst), 9);
        let empty = AtomicU64::new(crate::clock::NEVER);
        assert!(lower_head(&empty, 5), "the first item in an empty index is a new head");
    }
}
