//! The dequeue proxy: moves due items from the timer index to the egress ring.
//!
//! Each round it reads the clock once, then in ONE critical section of the timers
//! lock moves every due item (as many as the egress ring has room for), reads the
//! new head and records its sleep plan ([`Sleep`]). After unlocking it wakes as
//! many consumers as it moved items, then parks until the new head's deadline, an
//! earlier head, egress room, a mock-clock step or shutdown.

use crate::shared::Shared;
use crate::sync::{lock, set_timer_slack, Ordering, Parker};
use crate::wakeup::Sleep;

/// Timer slack of the dequeue proxy's timed parks: the kernel may fire them this
/// much late (instead of its default 50 µs), so lateness stays in microseconds.
const TIMER_SLACK_NS: u64 = 2_000;

pub(crate) fn run<T>(shared: &Shared<T>, parker: &Parker) {
    set_timer_slack(TIMER_SLACK_NS);
    loop {
        if shared.disconnected.load(Ordering::SeqCst) {
            // The enqueue proxy drops what is pending.
            return;
        }
        // Only mock-clock steps wait for rounds (`Shared::clock_moved`).
        let counted = shared.clock.is_mock();
        if counted {
            // SeqCst: pairs with the RMW in `Shared::clock_moved` (round start).
            shared.rounds.fetch_add(1, Ordering::SeqCst);
        }
        let now = shared.delivery_now();
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
                // Cannot fail: we are the only pusher and the ring is not full.
                // SAFETY: the dequeue proxy is the egress ring's only pusher, and
                // nothing closes the egress ring.
                if unsafe { shared.egress.push_exclusive(entry) }.is_err() {
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
        // section opens the "looked at the head, then slept" window of seed 000.
        #[cfg(delayq_bug_lost_wakeup)]
        {
            lock(&shared.timers).sleep = plan;
        }
        if moved > 0 {
            // Two, not `moved`: each consumer that leaves items wakes the next
            // (`Shared::taken`), so the syscalls spread over the consumers.
            shared.signals.consumers.notify(moved.min(2));
        }
        if counted {
            // SeqCst: round end, then wake anyone waiting for it (`clock_moved`).
            shared.rounds.fetch_add(1, Ordering::SeqCst);
            shared.signals.rounds.notify_all();
        }
        match plan {
            Sleep::Space => {
                let bell = &shared.signals.dequeue;
                bell.prepare_sleep();
                let room = shared.egress.len() <= shared.egress.capacity() / 2;
                if !room && !shared.disconnected.load(Ordering::SeqCst) {
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
