//! The staging duty: the dequeue proxy's next round, handed to the consumers
//! that are awake anyway.
//!
//! At a steady rate the dequeue proxy wakes once per `stage_ahead` of
//! deadlines to stage the next items (`dequeue.rs`), while a consumer wakes at
//! every staged item's deadline to take it (`lead.rs`). At 20 K items/s on
//! the benchmark VM the proxy's timer wake-ups were most of the CPU delayq
//! spent beyond a `Mutex<BinaryHeap>` (docs/bench/README.md, ninth round). So
//! when the proxy would park on its timer while staged entries wait in the
//! ring for a leader, it hands the round to their takers instead and parks
//! without a timeout: `at` holds the tick by which the round is wanted (the
//! proxy's planned wake-up), [`NONE`] when nobody holds the duty.
//!
//! **Who sets it**: only the dequeue role's holder, under the timers lock, at
//! the end of a round (the proxy's, or a consumer's performing the duty).
//! **Who clears it**: anyone, with a swap, and whoever swaps a tick out owns
//! the round: a taker that finds the round due (within `stage_ahead` of
//! `at`) or the ring without another live entry performs it; the proxy takes
//! it back whenever it wakes; a recall or `take_pending` under the timers
//! lock takes it back and wakes the proxy (the entry whose taker was to run
//! the round may be gone).
//!
//! **Invariant**: while `at` holds a tick, the ring holds a live entry (due or
//! staged, neither taken nor recalled) whose taker will look at `at` after its
//! take, or the duty's owner is running the round. The handing-over is a
//! store-buffering pair: the holder stores `at`, fences, then looks for a live
//! entry (and takes the duty back if there is none); a taker claims its entry,
//! fences (`receiver::taken`), then reads `at`. Either the holder sees no live
//! entry, or the last taker sees the duty (loom: `models/duty.rs`, with the
//! planted bug `delayq_bug_duty_no_fence`).

use crate::sync::{fence, AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

/// Nobody holds the duty.
pub(crate) const NONE: u64 = u64::MAX;

#[derive(Debug)]
pub(crate) struct Duty {
    at: CachePadded<AtomicU64>,
    /// Whether the proxy may hand its rounds over at all: helping on, a
    /// system clock (a mock clock's steps wait for the proxy's own rounds),
    /// staging on.
    on: bool,
}

impl Duty {
    pub(crate) fn new(on: bool) -> Duty {
        Duty { at: CachePadded::new(AtomicU64::new(NONE)), on }
    }

    /// Whether rounds are ever handed over on this queue.
    pub(crate) fn is_on(&self) -> bool {
        self.on
    }

    /// The dequeue role's holder, under the timers lock, hands the round due
    /// at `at` to the takers of the ring's live entries. Returns `false` if
    /// there is none (`live` said so after the fence) and the caller got the
    /// duty back: it must see to the round itself.
    pub(crate) fn hand_over(&self, at: u64, live: impl FnOnce() -> bool) -> bool {
        debug_assert!(at != NONE);
        // SeqCst (the swap and the fence): the holder's half of the
        // store-buffering pair with the takers (module docs). A swap: every
        // write of `at` is an RMW, ordered after the swaps that cleared it.
        self.at.swap(at, Ordering::SeqCst);
        #[cfg(not(delayq_bug_duty_no_fence))]
        fence(Ordering::SeqCst);
        let live = live();
        // A taker may have swapped it out meanwhile: it runs the round.
        live || !self.take_back()
    }

    /// Whether someone holds the duty (a look: only the dequeue role's
    /// holder sets it, so to that holder `false` stays `false`).
    pub(crate) fn is_held(&self) -> bool {
        // Relaxed: read by the dequeue role's holder, after the role's Acquire.
        self.at.load(Ordering::Relaxed) != NONE
    }

    /// Clears the duty. Returns whether the caller cleared a tick: it now
    /// owns the round.
    pub(crate) fn take_back(&self) -> bool {
        // Relaxed load first: the common case (nobody holds it) writes
        // nothing shared. SeqCst swap: exactly one owner.
        self.at.load(Ordering::Relaxed) != NONE && self.at.swap(NONE, Ordering::SeqCst) != NONE
    }

    /// A taker, after its take and a SeqCst fence: claims the duty if its
    /// round is due by `now + ahead` or no other live entry is left (`live`)
    /// to bring a later taker here. `now` and `live` are asked only while
    /// someone holds the duty. Returns whether the caller owns the round.
    pub(crate) fn claim_after_take(
        &self,
        now: impl FnOnce() -> u64,
        ahead: u64,
        live: impl FnOnce() -> bool,
    ) -> bool {
        // Relaxed: read after the taker's fence (the pair's other half).
        let at = self.at.load(Ordering::Relaxed);
        if at == NONE || (now().saturating_add(ahead) < at && live()) {
            return false;
        }
        self.take_back()
    }
}

#[cfg(all(test, not(delayq_loom)))]
mod tests {
    use super::*;

    #[test]
    fn one_owner_per_hand_over() {
        let d = Duty::new(true);
        assert!(!d.take_back(), "nobody holds it");
        assert!(d.hand_over(100, || true));
        assert!(!d.claim_after_take(|| 10, 5, || true), "not due, and a later taker will come");
        assert!(d.claim_after_take(|| 10, 5, || false), "the last live entry's taker runs it");
        assert!(!d.claim_after_take(|| 200, 5, || false), "already claimed");
        assert!(d.hand_over(100, || true));
        assert!(d.claim_after_take(|| 95, 5, || true), "due within `ahead`");
        assert!(!d.hand_over(100, || false), "no live entry: the holder keeps it");
        assert!(!d.take_back());
    }
}
