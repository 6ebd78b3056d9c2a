//! Model 2e: the lead hand-off (`src/lead.rs`) alone: the dequeue role's push
//! of a staged entry racing the leading consumer's give-up.
//!
//! The pair is a store-buffering one: the pusher pushes, fences and reads
//! `lead` (`Lead::after_push`); the leader gives up (`Lead::give_up`: a CAS to
//! 0, then a fence) and looks at the ring. Either the pusher sees nobody
//! leading (and then wakes a consumer or plans its own wake-up for the entry),
//! or the old leader's look finds the entry. The outcome in which the pusher
//! still sees the leader *and* the leader finds the ring empty strands the
//! entry with nobody to look at it by its deadline. The planted bug
//! `--cfg delayq_bug_lead_no_fence` (the give-up without its fence) makes
//! loom find that outcome: `.ci/loom.sh` checks it. (Before this model, the
//! fence could be deleted with every model passing: the whole-queue models of
//! staging have no consumer leading while the proxy pushes.)
use super::model;
use crate::egress::{Egress, Look};
use crate::lead::Lead;
use loom::thread;
use std::sync::Arc;

/// Threads: the pusher (main: pushes one staged entry due at 5, then reads
/// the lead) and the leader, which led for an entry due at 10 and now gives
/// the lead up and looks at the ring with a clock reading of 0.
#[test]
fn a_give_up_and_a_push_never_miss_each_other() {
    model(|| {
        let egress = Arc::new(Egress::<u64>::new(2));
        let lead = Arc::new(Lead::default());
        assert!(lead.take(10));
        let leader = {
            let (egress, lead) = (egress.clone(), lead.clone());
            thread::spawn(move || {
                let gave = lead.give_up(10);
                assert!(gave, "nobody else takes the lead in this model");
                matches!(egress.take(|| 0).look, Look::Empty)
            })
        };
        // SAFETY: this thread is the ring's only pusher, and no recall runs
        // (the model has no timers lock to hold: nobody else pushes or recalls).
        unsafe { egress.push((5, 1, 1), true) }.expect("a free slot");
        let seen = lead.after_push();
        let leader_saw_nothing = leader.join().unwrap();
        assert!(
            !(seen == Some(10) && leader_saw_nothing),
            "stranded: the pusher saw a leader and the leader saw no entry"
        );
        // Drain the staged entry so the ring drops clean.
        assert!(matches!(egress.take(|| 5).look, Look::Item(_)));
    });
}
