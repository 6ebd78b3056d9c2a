//! The dequeue proxy: moves due items from the timer index to the egress ring;
//! the admission rule it applies after each round; and the handshake by which a
//! mock clock's step waits for one of its rounds (the counter is `rounds.rs`).
//!
//! Each round it reads the clock once, then in ONE critical section of the timers
//! lock moves every due item (as many as the egress ring has room for), reads the
//! new head and records its sleep plan ([`Sleep`]). After unlocking it wakes
//! consumers, then parks until the new head's deadline, an earlier head, egress
//! room, a mock-clock step or shutdown.

use crate::admission::Reason;
use crate::clock::Clock;
use crate::cmd::Cmd;
use crate::shared::Shared;
use crate::sync::{lock, set_timer_slack, Parker};
use crate::waiters::block_on;
use crate::wakeup::Sleep;

/// Timer slack of the dequeue proxy's timed parks: the kernel may fire them this
/// much late (instead of its default 50 µs), so lateness stays in microseconds.
const TIMER_SLACK_NS: u64 = 2_000;

pub(crate) fn run<T>(shared: &Shared<T>, parker: &Parker) {
    set_timer_slack(TIMER_SLACK_NS);
    let mut taken_before = shared.egress.taken_so_far();
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
        let now = delivery_now(shared);
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
        if !counted {
            admit(shared, &mut taken_before, plan == Sleep::Space);
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

/// The admission rule (`admission.rs`), after a round on a system clock: shut
/// the gate when due items stay in the index for want of egress room although
/// the consumers took items since the last round (they are there, and working,
/// but not fast enough); open it after a round that moved every due item (the
/// backlog is gone), or when the consumers took nothing (holding producers back
/// would help nobody).
fn admit<T>(shared: &Shared<T>, taken_before: &mut usize, egress_full: bool) {
    let taken = shared.egress.taken_so_far();
    let progressed = taken != *taken_before;
    *taken_before = taken;
    if progressed && egress_full {
        shared.signals.admission.shut(Reason::Egress);
    } else {
        shared.signals.admission.open(Reason::Egress);
    }
}

/// The time the dequeue proxy delivers by: the mock time as of the last step
/// whose sends are applied, or the system clock's now.
fn delivery_now<T>(shared: &Shared<T>) -> u64 {
    if shared.clock.is_mock() {
        shared.rounds.mock_now()
    } else {
        shared.now_ticks()
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
        r.step_to(shared.now_ticks());
        let target = r.next_round_after_step();
        shared.signals.dequeue.force();
        block_on(r.waiters(), &Clock::default(), None, || {
            (r.finished(target) || shared.counter.is_disconnected()).then_some(())
        });
    }
    shared.signals.consumers.notify_all();
    shared.signals.producers.notify_all();
}
