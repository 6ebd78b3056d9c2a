//! Memory back after a burst, for the timer index: the buffers a burst grew
//! (the key table's pages, the wheel's slot buffers) go back once the index
//! has stayed small for two whole windows of [`WINDOW`], with or without
//! traffic, on any clock.
//!
//! **The rule.** Time is cut into windows of `WINDOW` of real time (the
//! monotonic clock, whatever clock the queue delivers by: this is memory, not
//! delivery). At the end of each window the index's `need` is the largest
//! size it reached in that window and the one before, and its buffers give
//! back what they hold beyond room for it (`Index::release_beyond`: the
//! spare pages beyond those `need` would fill; the wheel's slot buffers once
//! the need is [`FLOOR`] or less). So a working set that swings
//! within two windows keeps its buffers (no reallocation per swing), and a
//! drained burst is given back at the end of the second whole window after
//! the one its last item left in: within three windows (600 ms), under a
//! trickle or none.
//!
//! **Who looks.** Whoever changes the index under the timers lock: every
//! dequeue round, and every enqueue batch that removed items. With no
//! traffic nobody would, so a look that saw a large index in this window or
//! the last asks for the next one ([`Tidy::after_change`] returns its time),
//! and the dequeue proxy parks until then (`dequeue::run`): a few timed
//! wake-ups after a burst, none while the queue stays small or idle.
//! Amortised, a look costs a comparison and a clock reading; the work of a
//! release (a pass over the slots and pages) comes at most once a window.

use crate::index::Index;
use std::time::{Duration, Instant};

/// The length of a window of the occupancy rule.
pub(crate) const WINDOW: Duration = Duration::from_millis(200);

/// Items the index keeps room for however small it gets, and the size below
/// which a window asks for no look.
pub(crate) const FLOOR: usize = 4096;

/// The occupancy rule's state (module docs), under the timers lock.
#[derive(Debug, Default)]
pub(crate) struct Tidy {
    /// When the current window started.
    start: Option<Instant>,
    /// The largest size seen in the current window.
    peak: usize,
    /// The largest size seen in the window before.
    prev: usize,
    /// The need the buffers were last cut to (room may be held for it).
    kept: usize,
}

impl Tidy {
    /// After a change of `index` (or a look at it), at real time `now`: ends
    /// the window if it is over, releasing what the buffers hold beyond the
    /// need. Returns when the next look is wanted, if this window or the last
    /// saw a large index, or the buffers still hold room for one (a burst not
    /// given back yet), or `None`.
    pub(crate) fn after_change<T>(&mut self, index: &mut Index<T>, now: Instant) -> Option<Instant> {
        let len = index.len();
        self.peak = self.peak.max(len);
        let start = *self.start.get_or_insert(now);
        if now.saturating_duration_since(start) >= WINDOW {
            self.kept = self.peak.max(self.prev);
            index.release_beyond(self.kept);
            self.prev = self.peak;
            self.peak = len;
            self.start = Some(now);
        }
        (self.peak.max(self.prev).max(self.kept) > FLOOR).then(|| self.start.unwrap_or(now) + WINDOW)
    }
}

#[cfg(all(test, not(delayq_loom)))]
mod tests {
    use super::*;
    use crate::index::Kind;

    fn filled(n: u64) -> Index<u64> {
        let mut ix = Index::new(Kind::Wheel, 0);
        for k in 0..n {
            ix.insert(k, 1_000_000 + k * 997 % 50_000_000, k);
        }
        ix
    }

    #[test]
    fn a_drained_burst_goes_back_after_two_quiet_windows() {
        let mut ix = filled(200_000);
        let mut tidy = Tidy::default();
        let t0 = Instant::now();
        assert!(tidy.after_change(&mut ix, t0).is_some(), "a large index wants a look");
        while ix.pop_due(u64::MAX).is_some() {}
        let full = ix.room();
        // The window that saw the burst ends, then the next: still kept.
        tidy.after_change(&mut ix, t0 + WINDOW);
        assert_eq!(ix.room(), full, "released at the end of the window that saw the burst");
        tidy.after_change(&mut ix, t0 + WINDOW * 2);
        assert_eq!(ix.room(), full, "released while the burst is in the window before");
        // Two whole windows without it: given back.
        let next = tidy.after_change(&mut ix, t0 + WINDOW * 3);
        assert!(ix.room() < FLOOR, "kept room for {} items", ix.room());
        assert!(next.is_none(), "a small index wants no more looks");
    }

    #[test]
    fn a_swinging_working_set_keeps_its_buffers() {
        let mut ix = filled(100_000);
        let mut tidy = Tidy::default();
        let mut t = Instant::now();
        tidy.after_change(&mut ix, t);
        let mut key = 100_000;
        for _ in 0..10 {
            // Down to nothing and back up, once a window.
            while ix.pop_due(u64::MAX).is_some() {}
            t += WINDOW;
            tidy.after_change(&mut ix, t);
            let room = ix.room();
            for _ in 0..100_000 {
                ix.insert(key, 1_000_000 + key * 997 % 50_000_000, key);
                key += 1;
            }
            tidy.after_change(&mut ix, t);
            assert!(room >= 100_000, "a swing lost its buffers: room for {room}");
        }
    }
}
