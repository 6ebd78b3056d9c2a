//! Model 2g: an early insert's round (`dequeue::stage_early`) alone: the
//! enqueue role's holder, instead of waking the dequeue proxy for an insert
//! due before the proxy's planned wake-up, performs that round itself under
//! the dequeue role, and then decides whether the proxy may sleep on
//! (`dequeue::proxy_sleeps_on`).
//!
//! The proxy here has handed its next round to the takers of the ring's live
//! entries (`duty.rs`) and parked without a timer. Racing it: the applier's
//! round (which hands nothing on, so it takes the duty back) and the last
//! taker, which claims the duty after its take if it is still there and then
//! performs the round or, finding the role held, wakes the proxy. Whatever
//! the interleaving, somebody must wake the proxy: the round is nobody's once
//! the applier took the duty back. The planted bug
//! `--cfg delayq_bug_early_ignores_hand_over` (the decision takes the parked
//! proxy for one on its timer) leaves it asleep: loom reports the deadlock,
//! and `.ci/loom.sh` checks that it does.
use super::model;
use crate::dequeue::proxy_sleeps_on;
use crate::duty::Duty;
use crate::egress::{Egress, Look};
use crate::role::Role;
use crate::sync::{fence, Ordering, Parker};
use crate::wakeup::{Bell, Sleep};
use loom::thread;
use std::sync::Arc;

/// Threads: the proxy (main: handed the round due at 100 over, then parks
/// without a timer), the applier (an insert was due before 100: the round it
/// runs plans the same wake-up and hands nothing over) and the taker of the
/// ring's one live entry, due at 5.
#[test]
fn an_early_round_never_leaves_a_handed_over_proxy_asleep() {
    model(|| {
        let parker = Parker::new();
        let role = Arc::new(Role::new(parker.unparker()));
        let bell = Arc::new(Bell::new(parker.unparker()));
        let egress = Arc::new(Egress::<u64>::new(2));
        let duty = Arc::new(Duty::new(true));
        // SAFETY: this thread is the ring's only pusher, and no recall runs
        // (the model has no timers lock to hold: nobody else pushes or recalls).
        unsafe { egress.push((5, 1, 1), true) }.expect("a free slot");
        assert!(duty.hand_over(100, || egress.has_live_entry()), "the entry is live");
        let applier = {
            let (role, bell, duty) = (role.clone(), bell.clone(), duty.clone());
            thread::spawn(move || {
                let Some(held) = role.try_acquire() else {
                    bell.force();
                    return;
                };
                let handed_before = duty.is_held();
                // The round: nothing handed on, so it takes the duty back.
                duty.take_back();
                drop(held);
                if !proxy_sleeps_on(100, handed_before, false, Sleep::Until(100), None) {
                    bell.force();
                }
            })
        };
        let taker = {
            let (role, bell, duty, egress) = (role.clone(), bell.clone(), duty.clone(), egress.clone());
            thread::spawn(move || {
                assert!(matches!(egress.take(|| 5).look, Look::Item(_)));
                // `receiver::taken`'s fence.
                fence(Ordering::SeqCst);
                if duty.claim_after_take(|| 5, 0, || egress.has_live_entry()) {
                    // `perform_duty`: the round if the role is free (it hands
                    // nothing on here), the proxy's otherwise.
                    if let Some(held) = role.try_acquire() {
                        duty.take_back();
                        drop(held);
                    }
                    bell.force();
                }
            })
        };
        // The proxy, parked without a timer: only an unpark wakes it.
        parker.park(None);
        applier.join().unwrap();
        taker.join().unwrap();
    });
}
