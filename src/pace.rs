//! The pace of the enqueue role: how fast commands are being applied, the
//! second reason for the proxy to stream (`enqueue.rs`, "Under load").
//!
//! The first reason, a client batch of `STREAM_AT` commands, needs commands
//! to pile up while the role is held, which happens only when several
//! producers push at once. One producer sending flat out never sees it: each
//! of its pushes finds the role free and applies its own command, a batch of
//! one, paying the role's CAS, the timers lock and the fences per item where
//! the streaming proxy would pay them once per batch, on the other core
//! (1 × 1 unthrottled, D = 1 ms: 1.48 → 3.51 M items/s and 1.1 → 0.5 µs of
//! CPU per item, `docs/bench/README.md`, sixteenth round). So the role's
//! holder also counts the commands it applies and reads the clock once per
//! [`WINDOW`] of them: a window of batches of one command each (nobody's
//! pushes were combined with another's: one producer) applied in less than
//! [`WINDOW_NS`] — a command per microsecond or faster, kept up for the whole
//! window — makes the proxy stream; it hands the role back by the usual rule.
//! At that pace a proxy rung by the first push of a batch finds the next ones
//! waiting when it wakes, so its wake-ups are shared by many items; at a
//! slower pace (paced runs up to 400 K items/s in all) they are not, and the
//! producer keeps the role. Several producers are left to the batch rule: a
//! pace rule for them too streamed more often at 1 M items/s (16 × 16) and
//! raised the p99 there (141 → 186 µs, 154 → 170, 133 → 158 and 211 → 291 in
//! four A/Bs).

/// Commands per window of the gauge: one clock reading per window.
pub(crate) const WINDOW: usize = 256;

/// A window applied in less than this (ns) is fast.
pub(crate) const WINDOW_NS: u64 = 256_000;

/// Counts the commands the enqueue role applies; only the role's holder
/// touches it (it lives under the batch lock).
#[derive(Debug, Default)]
pub(crate) struct Pace {
    /// Commands applied since the window began.
    counted: usize,
    /// The clock (ticks) when the window began; 0 before the first one ends.
    since: u64,
    /// A batch of the window held more than one command.
    shared: bool,
}

impl Pace {
    /// Counts `n` more applied commands; when they complete a window, reads
    /// the clock (`now`, in ticks). Says whether they completed a fast one.
    /// The first window is never fast: it has no start.
    pub(crate) fn applied(&mut self, n: usize, now: impl FnOnce() -> u64) -> bool {
        self.counted += n;
        self.shared |= n > 1;
        if self.counted < WINDOW {
            return false;
        }
        self.counted = 0;
        let now = now();
        let since = std::mem::replace(&mut self.since, now);
        let lone = !std::mem::take(&mut self.shared);
        lone && since != 0 && now.saturating_sub(since) < WINDOW_NS
    }

    /// Tests only: the window holds `counted` commands and began at `since`.
    #[cfg(all(test, not(delayq_loom)))]
    pub(crate) fn prime(&mut self, counted: usize, since: u64) {
        self.counted = counted;
        self.since = since;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: u64) -> impl FnOnce() -> u64 {
        move || t
    }

    #[test]
    fn a_window_is_fast_only_when_it_is_applied_within_its_time() {
        let mut pace = Pace::default();
        let mut reads = 0;
        let inside = || -> u64 { panic!("read the clock inside a window") };
        // Below a window: no clock reading.
        assert!(!pace.applied(WINDOW - 1, inside));
        // The first window ends: it has no start, so it is not fast.
        assert!(!pace.applied(1, at(1_000_000)));
        // A window of batches of one command each, applied in less than
        // WINDOW_NS, is fast; only the batch that ends it says so.
        for _ in 0..WINDOW - 1 {
            assert!(!pace.applied(1, inside));
        }
        assert!(pace.applied(1, at(1_000_000 + WINDOW_NS - 1)));
        // One that takes WINDOW_NS or longer is not fast.
        for _ in 0..WINDOW - 1 {
            assert!(!pace.applied(1, inside));
        }
        assert!(!pace.applied(1, at(1_000_000 + 2 * WINDOW_NS)));
        // Nor is one in which a batch held two commands: producers combine.
        assert!(!pace.applied(2, inside));
        for _ in 0..WINDOW - 3 {
            assert!(!pace.applied(1, inside));
        }
        assert!(!pace.applied(1, at(1_000_000 + 2 * WINDOW_NS + 1)));
        // The next window of single commands is fast again: the rule looks
        // at one window at a time.
        for _ in 0..WINDOW - 1 {
            assert!(!pace.applied(1, inside));
        }
        assert!(pace.applied(1, || {
            reads += 1;
            1_000_000 + 2 * WINDOW_NS + 2
        }));
        assert_eq!(reads, 1);
    }
}
