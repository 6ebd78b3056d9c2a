//! The dequeue proxy: moves due items from the timer index to the egress ring;
//! and the handshake by which a mock clock's step waits for one of its rounds.
//!
//! Each round it reads the clock once, then in ONE critical section of the timers
//! lock moves every due item (as many as the egress ring has room for), reads the
//! new head and records its sleep plan ([`Sleep`]). After unlocking it wakes
//! consumers, then parks until the new head's deadline, an earlier head, egress
//! room, a mock-clock step or shutdown.

use crate::clock::Clock;
use crate::cmd::Cmd;
use crate::shared::Shared;
use crate::sync::{lock, set_timer_slack, AtomicU64, Ordering, Parker};
use crate::waiters::{block_on, Waiters};
use crate::wakeup::Sleep;
use crossbeam_utils::CachePadded;

/// Timer slack of the dequeue proxy's timed parks: the kernel may fire them this
/// much late (instead of its default 50 µs), so lateness stays in microseconds.
const TIMER_SLACK_NS: u64 = 2_000;

pub(crate) fn run<T>(shared: &Shared<T>, parker: &Parker) {
    set_timer_slack(TIMER_SLACK_NS);
    loop {
        if shared.counter.is_disconnected() {
            // The enqueue proxy drops what is pending.
            return;
        }
        // Only mock-clock steps wait for rounds.
        let counted = shared.clock.is_mock();
        if counted {
            shared.rounds.start();
        }
        let now = shared.rounds.delivery_now(shared);
        let (moved, plan) = {
            let mut t = lock(&shared.timers);
            let mut moved = 0;
            let mut full = false;
            loop {
                if shared.egress.is_full() {
                    full = t.index.next_wake().is_some_and(|d| d <= now);
                    break;
                }
                let Some(entry) = t.index.pop_due(now) else { break };
                // SAFETY: we are the dequeue proxy, the egress's only pusher, and
                // hold the timers lock.
                if unsafe { shared.egress.push(entry) }.is_err() {
                    unreachable!("egress ring refused a push below capacity");
                }
                moved += 1;
            }
            let plan = Sleep::plan(t.index.next_wake(), full);
            #[cfg(not(delayq_bug_lost_wakeup))]
            {
                t.sleep = plan;
            }
            (moved, plan)
        };
        // Planted bug for the loom suite: publishing the plan in a second critical
        // section opens the "looked at the head, then slept" window that the Go
        // timing-wheel library's delay queue describes in its comments.
        #[cfg(delayq_bug_lost_wakeup)]
        {
            lock(&shared.timers).sleep = plan;
        }
        if moved > 0 {
            // Two, not `moved`: each consumer that leaves items wakes the next
            // (`receiver::taken`), so the syscalls spread over the consumers.
            shared.signals.consumers.notify(moved.min(2));
        }
        if counted {
            shared.rounds.end();
        }
        match plan {
            Sleep::Space => {
                let bell = &shared.signals.dequeue;
                bell.prepare_sleep();
                if !shared.egress.has_room_for_batch() && !shared.counter.is_disconnected() {
                    parker.park(None);
                }
                bell.awake();
            }
            Sleep::Until(t) => shared.clock.park(parker, Some(shared.ticks.instant(t))),
            Sleep::Forever => shared.clock.park(parker, None),
            Sleep::Awake => {}
        }
    }
}

/// The dequeue proxy's rounds as a mock clock's step sees them.
///
/// A step must return only once the proxy has delivered what it made due, in
/// deadline order. So (1) a step becomes visible to the proxy (`mock_now`) only
/// after every send made before it is in the index, and (2) the step then waits
/// for a round that started after that: `count` is odd while a round runs and
/// even between rounds.
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

    fn start(&self) {
        // SeqCst: pairs with the RMW in `clock_moved` (round start).
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    fn end(&self) {
        // SeqCst: round end, then wake anyone waiting for it.
        self.count.fetch_add(1, Ordering::SeqCst);
        self.waiters.notify_all();
    }

    /// The time the dequeue proxy delivers by: the mock time as of the last step
    /// whose sends are applied, or the system clock's now.
    fn delivery_now<T>(&self, shared: &Shared<T>) -> u64 {
        if shared.clock.is_mock() {
            // SeqCst: pairs with the `fetch_max` in `clock_moved`, before its RMW.
            self.mock_now.load(Ordering::SeqCst)
        } else {
            shared.now_ticks()
        }
    }

    /// The queue is winding down: no step may wait for its proxy.
    pub(crate) fn disconnected(&self) {
        self.waiters.notify_all();
    }
}

/// A mock clock moved. Returns once every command sent before the step is
/// applied and the dequeue proxy has finished a round that read the new time, so
/// that whatever the step made due is in the egress ring (room permitting), in
/// deadline order, when `advance` returns. Then blocked clients re-check their
/// deadlines.
pub(crate) fn clock_moved<T>(shared: &Shared<T>) {
    let r = &shared.rounds;
    let (answer, reply) = crate::oneshot::pair();
    if shared.command(Cmd::Sync { answer }) && reply.wait().is_some() {
        // Every earlier send is in the index: now the proxy may see the step.
        // SeqCst: see `delivery_now`.
        r.mock_now.fetch_max(shared.now_ticks(), Ordering::SeqCst);
        // SeqCst RMW (not a load): it reads the latest count and, if the proxy's
        // next round-start increment follows it, that round happens-after the
        // clock step, so it reads the new time.
        let e = r.count.fetch_add(0, Ordering::SeqCst);
        // Even: between rounds, the next round reads the new time. Odd: the
        // running round may have read the old time; wait for the one after.
        let target = if e % 2 == 0 { e + 2 } else { e + 3 };
        shared.signals.dequeue.force();
        block_on(&r.waiters, &Clock::default(), None, || {
            // SeqCst: pairs with the increments in `end`.
            (r.count.load(Ordering::SeqCst) >= target || shared.counter.is_disconnected()).then_some(())
        });
    }
    shared.signals.consumers.notify_all();
    shared.signals.producers.notify_all();
}
