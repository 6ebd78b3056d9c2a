//! Model 2f: the staging duty's hand-over (`src/duty.rs`) alone: the dequeue
//! role's holder handing its next round to the takers of the ring's live
//! entries, racing the take of the last one.
//!
//! The pair is a store-buffering one: the holder stores the duty, fences and
//! looks for a live entry (`Duty::hand_over`); the taker claims its entry,
//! fences (`receiver::taken`'s fence) and reads the duty
//! (`Duty::claim_after_take`). Exactly one of them must own the round: the
//! holder (no live entry seen, duty taken back) or the taker. The outcome in
//! which the holder sees the entry still live *and* the taker sees no duty
//! leaves the round with nobody, and the dequeue proxy parked without a
//! timer. The planted bug `--cfg delayq_bug_duty_no_fence` (the hand-over
//! without its fence) makes loom find that outcome: `.ci/loom.sh` checks it.
use super::model;
use crate::duty::Duty;
use crate::egress::{Egress, Look};
use crate::sync::{fence, Ordering};
use loom::thread;
use std::sync::Arc;

/// Threads: the holder (main: one staged entry due at 5 already pushed,
/// hands the round due at 100 over) and the taker, which takes that entry
/// with a clock reading of 5 and then looks at the duty.
#[test]
fn the_last_take_and_a_hand_over_never_miss_each_other() {
    model(|| {
        let egress = Arc::new(Egress::<u64>::new(2));
        let duty = Arc::new(Duty::new(true));
        // SAFETY: this thread is the ring's only pusher, and no recall runs
        // (the model has no timers lock to hold: nobody else pushes or recalls).
        unsafe { egress.push((5, 1, 1), true) }.expect("a free slot");
        let taker = {
            let (egress, duty) = (egress.clone(), duty.clone());
            thread::spawn(move || {
                assert!(matches!(egress.take(|| 5).look, Look::Item(_)));
                // `receiver::taken`'s fence, the taker's half of the pair.
                fence(Ordering::SeqCst);
                duty.claim_after_take(|| 5, 0, || egress.has_live_entry())
            })
        };
        let handed = duty.hand_over(100, || egress.has_live_entry());
        let claimed = taker.join().unwrap();
        assert!(
            !(handed && !claimed),
            "stranded: the round was handed over and the last taker did not see it"
        );
        assert!(!(!handed && claimed), "two owners of one round");
    });
}
