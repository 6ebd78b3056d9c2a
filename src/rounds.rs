//! The dequeue proxy's rounds as a mock clock's step sees them: a counter and the
//! steps waiting on it (the handshake itself, `clock_moved`, is in `dequeue.rs`).
//!
//! A step must return only once the proxy has delivered what it made due, in
//! deadline order. So (1) a step becomes visible to the proxy (`mock_now`) only
//! after every send made before it is in the index, and (2) the step then waits
//! for a round that started after that: `count` is odd while a round runs and
//! even between rounds.

use crate::sync::{AtomicU64, Ordering};
use crate::waiters::Waiters;
use crossbeam_utils::CachePadded;

#[derive(Debug)]
pub(crate) struct Rounds {
    count: CachePadded<AtomicU64>,
    /// On a mock clock, the time the dequeue proxy delivers by.
    mock_now: AtomicU64,
    /// Steps waiting for a round.
    waiters: Waiters,
}

impl Rounds {
    pub(crate) fn new(now: u64) -> Rounds {
        Rounds {
            count: CachePadded::new(AtomicU64::new(0)),
            mock_now: AtomicU64::new(now),
            waiters: Waiters::default(),
        }
    }

    /// The dequeue proxy starts a round.
    pub(crate) fn start(&self) {
        // SeqCst: pairs with the RMW in `next_round_after_step` (round start).
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// The dequeue proxy finished a round: wake the steps waiting for it.
    pub(crate) fn end(&self) {
        // SeqCst: round end, then wake anyone waiting for it.
        self.count.fetch_add(1, Ordering::SeqCst);
        self.waiters.notify_all();
    }

    /// The mock time the dequeue proxy delivers by.
    pub(crate) fn mock_now(&self) -> u64 {
        // SeqCst: pairs with the `fetch_max` in `step_to`, before its RMW.
        self.mock_now.load(Ordering::SeqCst)
    }

    /// A step's sends are all in the index: the proxy may now see time `now`.
    pub(crate) fn step_to(&self, now: u64) {
        // SeqCst: see `mock_now`.
        self.mock_now.fetch_max(now, Ordering::SeqCst);
    }

    /// After `step_to`: the count a round that read the new time ends at.
    pub(crate) fn next_round_after_step(&self) -> u64 {
        // SeqCst RMW (not a load): it reads the latest count and, if the proxy's
        // next round-start increment follows it, that round happens-after the
        // clock step, so it reads the new time.
        let e = self.count.fetch_add(0, Ordering::SeqCst);
        // Even: between rounds, the next round reads the new time. Odd: the
        // running round may have read the old time; wait for the one after.
        if e % 2 == 0 {
            e + 2
        } else {
            e + 3
        }
    }

    /// Whether the round `next_round_after_step` named has ended.
    pub(crate) fn finished(&self, target: u64) -> bool {
        // SeqCst: pairs with the increments in `end`.
        self.count.load(Ordering::SeqCst) >= target
    }

    /// Where steps wait for `end`.
    pub(crate) fn waiters(&self) -> &Waiters {
        &self.waiters
    }

    /// The queue is winding down: no step may wait for its proxy.
    pub(crate) fn disconnected(&self) {
        self.waiters.notify_all();
    }
}
