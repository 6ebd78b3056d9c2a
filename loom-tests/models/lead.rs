//! Model 2e: the lead's hand-offs (`src/lead.rs`) on the real `Lead` and
//! waiter list: whoever waits for the index's next deadline must never miss
//! an earlier one, and must never leave the followers asleep.
//!
//! - **A new earliest deadline** against a consumer that registers and leads
//!   for the old one: the inserter lowers `index_head`, fences and reads the
//!   lead (`Lead::after_insert`), then wakes a consumer if the lead is later
//!   (or nobody leads); the consumer registers, fences (in `register`), reads
//!   `index_head` and takes the lead. Planted bug
//!   `delayq_bug_new_head_no_fence` (`after_insert` without its fence): loom
//!   finds the consumer asleep, leading for the old deadline, with the new one
//!   due.
//! - **The leader leaves** against a follower that registers: the leader
//!   gives up (`Lead::give_up`: CAS to 0, fence), then looks for waiters and
//!   wakes one (`receiver::taken`'s `Waiters::wake_one_unless_woken`); the follower registers, fences and
//!   reads the lead. Planted bug `delayq_bug_lead_no_fence` (the give-up
//!   without its fence): loom finds the follower asleep with nobody leading.
use super::model;
use crate::clock::Clock;
use crate::lead::Lead;
use crate::sync::{AtomicU64, Ordering};
use crate::waiters::{block_on_until, Waiters};
use loom::thread;
use std::sync::Arc;

/// Threads: the inserter (lowers the head from 10 to 5, which is due: the
/// model's clock reads 5) and a consumer (main) that waits until it sees a
/// due head, leading for the head it sees otherwise (its park is untimed
/// under loom: only a wake-up ends it). A lost wake-up is a loom deadlock.
#[test]
fn a_new_earliest_deadline_reaches_a_consumer_leading_for_a_later_one() {
    model(|| {
        let head = Arc::new(AtomicU64::new(10));
        let lead = Arc::new(Lead::default());
        let consumers = Arc::new(Waiters::default());
        let inserter = {
            let (head, lead, consumers) = (head.clone(), lead.clone(), consumers.clone());
            thread::spawn(move || {
                // The enqueue role: the insert lowers the head (`enqueue::apply`),
                // then, after the role's release, the signal (`enqueue::new_head`).
                if crate::lead::lower_head(&head, 5) && lead.after_insert(5).is_some() {
                    consumers.notify_after_fence(1);
                }
            })
        };
        let mut led = None;
        let got = block_on_until(&consumers, &Clock::default(), None, |registered| {
            if let Some(v) = led.take() {
                lead.give_up(v);
            }
            let h = head.load(Ordering::SeqCst);
            if h <= 5 {
                return Ok(h);
            }
            if registered {
                led = lead.take(h, false);
            }
            Err(None)
        });
        assert_eq!(got, Some(5));
        inserter.join().unwrap();
    });
}

/// Threads: the leader (it leads for 10; it gives the lead up, and then, as
/// `receiver::taken` does after its take, wakes a waiting consumer if nobody
/// leads and the index is not empty) and a follower (main) that waits until
/// it can lead. A follower left asleep with nobody leading is a loom
/// deadlock.
#[test]
fn a_leader_that_leaves_wakes_a_follower() {
    model(|| {
        let lead = Arc::new(Lead::default());
        let consumers = Arc::new(Waiters::default());
        let v = lead.take(10, false).expect("nobody leads yet");
        let leader = {
            let (lead, consumers) = (lead.clone(), consumers.clone());
            thread::spawn(move || {
                assert!(lead.give_up(v));
                // The index still holds the item due at 10 (`index_head`).
                consumers.wake_one_unless_woken(|| usize::from(lead.current().is_none()));
            })
        };
        let got = block_on_until(&consumers, &Clock::default(), None, |registered| {
            if !registered {
                return Err(None);
            }
            match lead.take(10, false) {
                Some(v) => Ok(v),
                None => Err(None),
            }
        });
        assert!(got.is_some(), "the follower never led");
        leader.join().unwrap();
    });
}
