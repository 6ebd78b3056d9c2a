//! Model 2d: the egress ring's entry states (`src/egress.rs`), alone: a
//! consumer's take racing a recall of the same staged entry.
//!
//! The pusher and the recaller hold one mutex (the timers lock); consumers take
//! without it. Checked: every staged item leaves exactly once — taken by one
//! consumer or recalled, never both (the STAGED → TAKEN / STAGED → RECALLED
//! CAS decides), a recalled entry's slot is passed over and freed, and loom
//! flags any unsynchronised access to a slot's item (a push rewriting a slot
//! while a recaller still reads it). The planted bug
//! `--cfg delayq_bug_take_ignores_recall` (a consumer that takes a staged entry
//! without the CAS) must make `take_races_recall` fail: `.ci/loom.sh` checks it.
use super::model;
use crate::egress::{Egress, Look};
use crate::sync::{lock, Mutex, Parker};
use crate::wakeup::Bell;
use loom::thread;
use std::sync::Arc;

/// Threads: a consumer taking twice (its clock reads 10: both entries due) +
/// main, which staged two entries (due at 5 and 6) under the lock and then
/// recalls the first one under the lock, and pushes a third (due) entry into
/// the slot that the recalled one frees. Each key comes out once.
#[test]
fn take_races_recall() {
    model(|| {
        let (timers, egress, first) = two_staged();
        let consumer = {
            let egress = egress.clone();
            thread::spawn(move || {
                let mut got = Vec::new();
                for _ in 0..2 {
                    if let Look::Item((_, key, item)) = egress.take(|| 10).look {
                        assert_eq!(key, item, "an item with another entry's key");
                        got.push(key);
                    }
                }
                got
            })
        };
        let recalled = {
            let _t = lock(&timers);
            // SAFETY: we hold the lock; no push runs.
            let back = unsafe { egress.recall(first) }.map(|(_, key, _)| key);
            // SAFETY: the only pusher, holding the lock. Refused if the ring is
            // still full (the consumer has not freed a slot yet).
            let third = unsafe { egress.push((7, 3, 3), false) }.is_ok();
            (back, third)
        };
        let mut all = consumer.join().unwrap();
        all.extend(recalled.0);
        all.extend(egress.take_all().into_iter().map(|(_, key, _)| key));
        all.sort_unstable();
        let mut want = vec![1, 2];
        if recalled.1 {
            want.push(3);
        }
        assert_eq!(all, want, "an entry left twice or never (recalled: {:?})", recalled.0);
    });
}

/// Threads: two consumers taking once each (clock 10) + main recalling the
/// first staged entry. Whoever claims the recalled entry's position passes over
/// it to the next one; no item is taken twice or lost.
#[test]
fn two_consumers_pass_over_a_recalled_entry() {
    model(|| {
        let (timers, egress, first) = two_staged();
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let egress = egress.clone();
                thread::spawn(move || match egress.take(|| 10).look {
                    Look::Item((_, key, _)) => Some(key),
                    _ => None,
                })
            })
            .collect();
        let back = {
            let _t = lock(&timers);
            // SAFETY: we hold the lock; no push runs.
            unsafe { egress.recall(first) }.map(|(_, key, _)| key)
        };
        let mut all: Vec<u64> = consumers.into_iter().filter_map(|c| c.join().unwrap()).collect();
        all.extend(back);
        all.extend(egress.take_all().into_iter().map(|(_, key, _)| key));
        all.sort_unstable();
        assert_eq!(all, vec![1, 2], "an entry left twice or never");
    });
}

/// Threads: a consumer whose take (clock 0) passes over the recalled first
/// entry and finds the second not due, then rings for the room it made
/// (`Egress::made_room`), and main as the dequeue proxy waiting for room for
/// a batch (one free slot of two): register (`Bell::prepare_sleep`),
/// re-check, park. The proxy must not sleep through the room (a lost ring is
/// a loom deadlock). Deleting the SeqCst fence in `made_room` fails this
/// model (`.ci/fence_audit.sh`); before it, no model did.
#[test]
fn passing_a_recalled_entry_wakes_a_proxy_waiting_for_room() {
    model(|| {
        let (timers, egress, first) = two_staged();
        {
            let _t = lock(&timers);
            // SAFETY: we hold the lock; no push runs.
            let back = unsafe { egress.recall(first) };
            assert!(back.is_some(), "nobody took the staged entry yet");
        }
        let parker = Parker::new();
        let bell = Arc::new(Bell::new(parker.unparker()));
        let consumer = {
            let (egress, bell) = (egress.clone(), bell.clone());
            thread::spawn(move || {
                let took = egress.take(|| 0);
                assert!(matches!(took.look, Look::NotYet(6)), "the second entry is not due at 0");
                assert_eq!(took.skipped, 1, "the take passes over the recalled entry");
                egress.made_room(&bell);
            })
        };
        // The dequeue proxy's wait for room (`dequeue::run`, `Sleep::Space`).
        loop {
            bell.prepare_sleep();
            if egress.has_room_for_batch() {
                bell.awake();
                break;
            }
            parker.park(None);
            bell.awake();
        }
        consumer.join().unwrap();
        assert!(matches!(egress.take(|| 6).look, Look::Item((6, 2, 2))));
    });
}

/// A two-slot egress ring holding two staged entries (keys and items 1 and 2,
/// due at 5 and 6), pushed under the stand-in timers lock; and the first one's
/// position.
fn two_staged() -> (Arc<Mutex<()>>, Arc<Egress<u64>>, usize) {
    let timers = Arc::new(Mutex::new(()));
    let egress = Arc::new(Egress::<u64>::new(2));
    let first = {
        let _t = lock(&timers);
        // SAFETY: the only pusher, holding the lock.
        let first = unsafe { egress.push((5, 1, 1), true) }.unwrap();
        // SAFETY: as above.
        unsafe { egress.push((6, 2, 2), true) }.unwrap();
        first
    };
    (timers, egress, first)
}
