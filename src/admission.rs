//! Admission: blocking sends pause while the consumers fall behind.
//!
//! Producers that never block keep the consumers waiting for a CPU (2 cores,
//! 32 client threads), due items pile up behind their deadlines, and a queue
//! that delivers in order is then late by its whole backlog. So blocking sends
//! look at a gate, shut while any reason holds ([`Reason`], one bit each):
//!
//! - **Lag**: the oldest due item in the index has waited longer than [`LAG`]
//!   while the consumers take. One blocking send in [`INGRESS_SAMPLE`] (by key)
//!   reads `index_head` and the clock after its push (`dequeue::lagging`) and
//!   shuts the gate ([`Admission::lagging`]) if the consumers took items since
//!   the last sample that found the queue lagging (absent consumers are not
//!   behind). Each round shuts or opens it by the age of the oldest item it
//!   moved, and a consumer that finds nothing left to take opens it
//!   ([`Admission::caught_up`]). A send on the thread that performed the last
//!   round does not wait for Lag ([`Admission::lag_waits`]): it is a consumer,
//!   and its pause would only delay the takes the gate waits for.
//! - **Ingress**: more than [`INGRESS_DEEP`] commands wait in front of the
//!   enqueue role. The sampling send reads the depth; whoever performs the
//!   role shuts it after a drain of more than [`INGRESS_OPEN`] commands and
//!   opens it after a shallower one.
//! - **Egress**: a round on a system clock left due items in the index for
//!   want of egress room; the next round that moves every due item clears it.
//!
//! A send that finds the gate shut waits **after** it has handed its item
//! over: the pause slows its caller's next send, not the item already sent.
//! `close`, disconnection and a send that waited [`MAX_WAIT`] in vain (the
//! consumers took nothing meanwhile) open the gate for every reason, so the
//! gate is never a capacity; a send whose pause ran out while the consumers
//! were taking goes on alone and leaves the gate shut for the others. Only the
//! blocking sends (`send_at`, `send_after`, and the `_timeout` / `_deadline`
//! forms, within their own timeout) wait; `try_send_*`, the async sends and
//! commands pass. A queue on a mock clock never shuts the gate.
//!
//! Waiting follows `waiters.rs`: register, re-check (SeqCst load), park; the
//! opener clears its bit with a SeqCst RMW, and the one that leaves no bit set
//! wakes **one** waiting send (the notifier's fence is in `Waiters::notify`);
//! each send that the open gate lets go wakes the next (a chain; a woken send
//! that gives up passes the wake-up on). `close`, disconnection and a send
//! that waited `MAX_WAIT` wake every waiter. Why each rule, and the
//! measurements behind the thresholds: `docs/ARCHITECTURE.md` (Admission) and
//! `docs/bench/README.md` (fifth, twelfth, twenty-third and twenty-fourth
//! rounds).

use crate::clock::Clock;
use crate::sync::{AtomicUsize, Ordering};
use crate::waiters::{block_on, Waiters};
use crossbeam_utils::CachePadded;
use std::time::{Duration, Instant};

/// The longest a blocking send waits at a shut gate before it opens the gate
/// itself (the consumers stopped taking).
pub(crate) const MAX_WAIT: Duration = Duration::from_millis(1);

/// Commands waiting in the ingress ring above which a blocking send that looks
/// shuts the gate ([`Reason::Ingress`]).
pub(crate) const INGRESS_DEEP: usize = 1024;

/// One blocking send in this many (by key) looks at the ingress depth: the look
/// reads the proxy's side of the ring, a cache miss the other sends skip.
pub(crate) const INGRESS_SAMPLE: u64 = 32;

/// A drain of more commands than this shuts the gate ([`Reason::Ingress`]); a
/// drain of this many or fewer opens it.
pub(crate) const INGRESS_OPEN: usize = 512;

/// Why the gate is shut: one bit per proxy, each setting and clearing its own.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reason {
    /// A deep ingress ring: commands wait to be applied.
    Ingress = 1,
    /// A dequeue round left due items in the index for want of egress room.
    Egress = 2,
    /// The oldest due item not yet taken has waited longer than [`LAG`].
    Lag = 4,
    /// Tests only: a reason that nothing clears.
    #[cfg(all(test, not(delayq_loom)))]
    Test = 8,
}

/// How long the oldest due item may wait, not yet taken, before blocking
/// sends pause ([`Reason::Lag`]).
pub(crate) const LAG: Duration = Duration::from_micros(200);

#[derive(Debug)]
pub(crate) struct Admission {
    /// The `Reason` bits that hold the gate shut (0: open). Read by every
    /// blocking send, written a few times per backlog: a line of its own, so
    /// that the counters' traffic does not evict it.
    shut: CachePadded<AtomicUsize>,
    waiters: Waiters,
    /// `MAX_WAIT`, except in tests.
    max_wait: Duration,
    /// The egress's taken counter at the last sampling send that found the
    /// queue lagging (`lagging`).
    taken_seen: AtomicUsize,
    /// The thread that performed the last dequeue round (`this_thread`).
    last_round_by: AtomicUsize,
}

/// A number for the calling thread, distinct among live threads: the address
/// of a thread-local byte.
fn this_thread() -> usize {
    std::thread_local!(static MARK: u8 = const { 0 });
    MARK.with(|m| m as *const u8 as usize)
}

impl Default for Admission {
    fn default() -> Self {
        #[cfg(all(test, not(delayq_loom)))]
        if let Some(w) = tests::MAX_WAIT_HERE.get() {
            return Admission::with_max_wait(w);
        }
        Admission::with_max_wait(MAX_WAIT)
    }
}

impl Admission {
    fn with_max_wait(max_wait: Duration) -> Self {
        Admission {
            shut: CachePadded::new(AtomicUsize::new(0)),
            waiters: Waiters::default(),
            max_wait,
            taken_seen: AtomicUsize::new(0),
            last_round_by: AtomicUsize::new(0),
        }
    }

    /// The enqueue role drained `drained` commands in one batch: a deep
    /// drain shuts the gate, a shallow one opens it.
    pub(crate) fn after_drain(&self, drained: usize) {
        self.set(Reason::Ingress, drained > INGRESS_OPEN);
    }

    /// A dequeue round on a system clock: `due_left` if it left due items in
    /// the index for want of egress room; `lag` how long the oldest item it
    /// moved (or found due) had been due. Records the calling thread as the
    /// last to perform a round (`lag_waits`).
    pub(crate) fn after_round(&self, due_left: bool, lag: Duration) {
        let me = this_thread();
        // Relaxed: a hint for `lag_waits`; the load first keeps a line that
        // one consumer keeps rewriting from being dirtied.
        if self.last_round_by.load(Ordering::Relaxed) != me {
            self.last_round_by.store(me, Ordering::Relaxed);
        }
        self.set(Reason::Egress, due_left);
        self.set(Reason::Lag, lag > LAG);
    }

    /// A consumer found nothing left to take: whatever lagged has been
    /// taken, so [`Reason::Lag`] no longer holds (module docs). One load
    /// unless it is set.
    pub(crate) fn caught_up(&self) {
        self.open(Reason::Lag);
    }

    fn set(&self, why: Reason, shut: bool) {
        if shut {
            self.shut(why);
        } else {
            self.open(why);
        }
    }

    /// A sampling send found the oldest due item older than [`LAG`]
    /// (`dequeue::lagging`): shuts the gate for [`Reason::Lag`] if the
    /// consumers took items since the last such look (`taken`: the egress's
    /// taken counter). Consumers that are absent are not behind: producers
    /// that send while nobody receives must not pause.
    pub(crate) fn lagging(&self, taken: usize) {
        // Relaxed: a hint; a stale value costs one look's decision.
        if self.taken_seen.swap(taken, Ordering::Relaxed) != taken {
            self.shut(Reason::Lag);
        }
    }

    /// Whether a send that found the gate shut should wait: not if
    /// [`Reason::Lag`] alone shuts it and the calling thread performed the
    /// last dequeue round. That thread is a consumer (it sent a burst and
    /// receives it itself, or it is a stage that takes and re-sends), and its
    /// pause would only delay the takes the gate waits for.
    pub(crate) fn lag_waits(&self) -> bool {
        // Relaxed: hints, as `is_shut`.
        self.shut.load(Ordering::Relaxed) != Reason::Lag as usize
            || self.last_round_by.load(Ordering::Relaxed) != this_thread()
    }

    /// Whether a blocking send should wait (the hot path: one load).
    pub(crate) fn is_shut(&self) -> bool {
        // Relaxed: a hint; `wait` re-checks with SeqCst after registering.
        self.shut.load(Ordering::Relaxed) != 0
    }

    /// A proxy found a backlog: blocking sends wait until it clears.
    pub(crate) fn shut(&self, why: Reason) {
        let bit = why as usize;
        // Relaxed load first: a gate already shut for this reason costs no RMW.
        if self.shut.load(Ordering::Relaxed) & bit == 0 {
            // Relaxed: shutting a little late or early changes the pace, nothing
            // else; waiters are released only by the RMWs of `open`.
            self.shut.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// The backlog `why` names cleared: once no reason is left, the waiting
    /// sends go (this wakes one, which wakes the next: `wait`).
    pub(crate) fn open(&self, why: Reason) {
        let bit = why as usize;
        // SeqCst RMW: the waiter protocol's state change; the caller that
        // cleared the last bit notifies, so an open gate costs a load.
        if self.shut.load(Ordering::Relaxed) & bit != 0 && self.shut.fetch_and(!bit, Ordering::SeqCst) == bit
        {
            self.waiters.notify(1);
        }
    }

    /// The queue closed, or a send waited `MAX_WAIT` in vain (the consumers
    /// stopped taking): open for every reason.
    pub(crate) fn open_all(&self) {
        // SeqCst RMW: as in `open`.
        if self.is_shut() && self.shut.swap(0, Ordering::SeqCst) != 0 {
            self.waiters.notify_all();
        }
    }

    /// A blocking send, its item handed over, found the gate shut: waits until
    /// it opens, `until` passes, `closed()` holds, or `MAX_WAIT` passes. After
    /// `MAX_WAIT` it goes on alone if `taken()` (the consumers' progress
    /// counter) moved meanwhile, and opens the gate for everyone if it did not
    /// (the consumers stopped: a bit may be left set with no round to clear it).
    /// A send that the gate lets go wakes the next waiting one (a chain:
    /// module docs). Returns at once on a mock clock, which never shuts it.
    pub(crate) fn wait(
        &self,
        clock: &Clock,
        until: Option<Instant>,
        closed: impl Fn() -> bool,
        taken: impl Fn() -> usize,
    ) {
        if clock.is_mock() {
            return;
        }
        let taken_before = taken();
        let limit = clock.now() + self.max_wait;
        let deadline = until.map_or(limit, |u| u.min(limit));
        let passed = block_on(&self.waiters, clock, Some(deadline), || {
            // SeqCst: the waiter's re-check after registering (`waiters.rs`).
            (self.shut.load(Ordering::SeqCst) == 0 || closed()).then_some(())
        });
        if passed.is_some() {
            // Pass the opening on to the next (`open` woke only one of us).
            // With nobody waiting this is a fence and a relaxed load.
            self.waiters.notify(1);
        } else if deadline == limit && taken() == taken_before {
            self.open_all();
        }
    }
}

#[cfg(all(test, not(delayq_loom)))]
pub(crate) mod tests {
    use super::*;
    use std::cell::Cell;
    use std::sync::Arc;

    thread_local! {
        /// `MAX_WAIT` for the queues this thread builds (see `with_max_wait`).
        pub(crate) static MAX_WAIT_HERE: Cell<Option<Duration>> = const { Cell::new(None) };
    }

    /// Runs `build` with `max_wait` in place of `MAX_WAIT` for the queues it
    /// builds on this thread (other tests' queues keep theirs).
    pub(crate) fn with_max_wait<R>(max_wait: Duration, build: impl FnOnce() -> R) -> R {
        MAX_WAIT_HERE.set(Some(max_wait));
        let r = build();
        MAX_WAIT_HERE.set(None);
        r
    }

    #[test]
    fn an_open_gate_does_not_wait() {
        let a = Admission::default();
        let t0 = Instant::now();
        a.wait(&Clock::default(), None, || false, || 0);
        assert!(!a.is_shut());
        assert!(t0.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_shut_gate_opens_itself_after_max_wait() {
        let a = Admission::default();
        a.shut(Reason::Egress);
        assert!(a.is_shut());
        let t0 = Instant::now();
        a.wait(&Clock::default(), None, || false, || 0);
        assert!(t0.elapsed() >= MAX_WAIT, "returned before MAX_WAIT: {:?}", t0.elapsed());
        assert!(!a.is_shut(), "a send that waited MAX_WAIT in vain opens the gate");
    }

    #[test]
    fn a_send_that_waited_while_consumers_took_goes_alone() {
        // The consumers' counter moves during the wait: the queue is working,
        // so the expired send leaves the gate shut for the others.
        let a = Admission::default();
        a.shut(Reason::Egress);
        let taken = AtomicUsize::new(0);
        let t0 = Instant::now();
        a.wait(&Clock::default(), None, || false, || taken.fetch_add(1, Ordering::Relaxed));
        assert!(t0.elapsed() >= MAX_WAIT, "returned before MAX_WAIT: {:?}", t0.elapsed());
        assert!(a.is_shut(), "a send whose pause ran out while consumers took must not open the gate");
    }

    #[test]
    fn a_shorter_deadline_ends_the_wait_and_leaves_the_gate_shut() {
        let a = Admission::default();
        a.shut(Reason::Egress);
        a.wait(&Clock::default(), Some(Instant::now()), || false, || 0);
        assert!(a.is_shut());
    }

    #[test]
    fn opening_releases_a_waiting_send() {
        // A minute's patience: only `open` can release the waiter in time.
        let a = Arc::new(Admission::with_max_wait(Duration::from_secs(60)));
        a.shut(Reason::Egress);
        let a2 = a.clone();
        let t = std::thread::spawn(move || {
            let t0 = Instant::now();
            a2.wait(&Clock::default(), None, || false, || 0);
            t0.elapsed()
        });
        while a.waiters.len() == 0 {
            std::thread::yield_now();
        }
        a.open(Reason::Egress);
        let waited = t.join().unwrap();
        assert!(!a.is_shut());
        assert!(waited < Duration::from_secs(30), "released by open, not by the wait limit: {waited:?}");
    }

    #[test]
    fn one_opening_releases_every_waiting_send() {
        // `open` wakes one waiter and each released one wakes the next: all of
        // them must go, long before the minute after which they would open the
        // gate themselves.
        let a = Arc::new(Admission::with_max_wait(Duration::from_secs(60)));
        a.shut(Reason::Ingress);
        let waiting: Vec<_> = (0..6)
            .map(|_| {
                let a = a.clone();
                std::thread::spawn(move || {
                    let t0 = Instant::now();
                    a.wait(&Clock::default(), None, || false, || 0);
                    t0.elapsed()
                })
            })
            .collect();
        while a.waiters.len() < 6 {
            std::thread::yield_now();
        }
        a.open(Reason::Ingress);
        for t in waiting {
            let waited = t.join().unwrap();
            assert!(waited < Duration::from_secs(30), "a waiter missed the opening: {waited:?}");
        }
        assert_eq!(a.waiters.len(), 0);
    }

    #[test]
    fn the_thread_that_performed_the_last_round_does_not_wait_for_lag() {
        let a = Arc::new(Admission::default());
        a.after_round(false, LAG * 2);
        assert!(a.is_shut());
        assert!(!a.lag_waits(), "the round's performer is a consumer: no pause for Lag");
        let other = Arc::clone(&a);
        assert!(std::thread::spawn(move || other.lag_waits()).join().unwrap(), "a producer waits");
        a.shut(Reason::Ingress);
        assert!(a.lag_waits(), "another reason holds it shut: the performer waits too");
        a.open(Reason::Ingress);
        let other = Arc::clone(&a);
        std::thread::spawn(move || other.after_round(false, LAG * 2)).join().unwrap();
        assert!(a.lag_waits(), "another thread performed the last round");
    }

    #[test]
    fn the_gate_opens_only_when_every_reason_has_cleared() {
        let a = Admission::default();
        a.shut(Reason::Ingress);
        a.shut(Reason::Egress);
        a.open(Reason::Egress);
        assert!(a.is_shut(), "the ingress backlog still holds it shut");
        a.open(Reason::Egress);
        assert!(a.is_shut(), "opening a reason twice clears nothing else");
        a.open(Reason::Ingress);
        assert!(!a.is_shut());
        a.shut(Reason::Egress);
        a.shut(Reason::Ingress);
        a.open_all();
        assert!(!a.is_shut(), "close and a send that waited in vain clear every reason");
    }

    #[test]
    fn a_closed_queue_passes_a_shut_gate() {
        let a = Admission::default();
        a.shut(Reason::Egress);
        a.wait(&Clock::default(), None, || true, || 0);
        assert!(a.is_shut(), "closed() ended the wait; the gate itself did not change");
    }

    #[test]
    fn a_mock_clock_never_waits() {
        let a = Admission::default();
        a.shut(Reason::Egress);
        a.wait(&Clock::from(crate::MockClock::new()), None, || false, || 0);
        assert!(a.is_shut());
    }
}
