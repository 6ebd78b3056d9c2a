//! Model 3b: the blocking loop (`waiters::block_on`) and its waiter list alone;
//! and the bound on woken consumers (`Waiters::wake_one_unless_woken`): a take
//! that leaves items behind skips its wake while a woken consumer has not run
//! yet, and nothing is left behind. Planted bug `delayq_bug_woken_never_runs`
//! (a woken thread never leaves the count): loom finds a consumer asleep with
//! an item left.

use super::model;
use crate::clock::Clock;
use crate::waiters::{block_on, Waiters};
use loom::sync::atomic::fence;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use std::sync::Arc;

/// Takes one unit if there is one: a semaphore's acquire, shaped like
/// `Counter::reserve` and the egress's claim (SeqCst, as both).
fn take_one(units: &AtomicUsize) -> Option<()> {
    let mut n = units.load(Ordering::Relaxed);
    loop {
        if n == 0 {
            return None;
        }
        // SeqCst: as `Counter::reserve` and the egress's claim.
        match units.compare_exchange(n, n - 1, Ordering::SeqCst, Ordering::Relaxed) {
            Ok(_) => return Some(()),
            Err(now) => n = now,
        }
    }
}

/// The blocking loop alone, on a one-permit semaphore shaped like
/// `Counter::reserve` / the take path. Threads: two waiters that each need a
/// permit, and main, which hands out two permits one at a time and notifies one
/// waiter per permit. Both waiters must get through (a lost notification parks
/// one forever: loom reports a deadlock).
#[test]
fn block_on_never_loses_a_notification() {
    model(|| {
        let waiters = Arc::new(Waiters::default());
        let permits = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (waiters, permits) = (waiters.clone(), permits.clone());
                thread::spawn(move || block_on(&waiters, &Clock::default(), None, || take_one(&permits)))
            })
            .collect();
        for _ in 0..2 {
            // SeqCst: as a take releasing a unit.
            permits.fetch_add(1, Ordering::SeqCst);
            waiters.notify(1);
        }
        for t in threads {
            assert_eq!(t.join().unwrap(), Some(()));
        }
        assert_eq!(permits.load(Ordering::SeqCst), 0);
    });
}

/// Threads: two consumers (each blocks until it takes one item, then, as
/// `receiver::taken`, fences and wakes one more if items are left), and main,
/// a round's performer that first wakes a consumer for nothing it will find
/// (as a role's release may), then moves three items, takes one itself and
/// wakes one more if items are left. Every item must be taken: a consumer
/// asleep with an item left is a loom deadlock. The bound on woken threads in
/// flight is one, so that the skip is taken; the queue's is one per item
/// left in the egress, at most `receiver::WOKEN_IN_FLIGHT` (three), for
/// which the argument is the same.
#[test]
fn a_woken_consumer_covers_a_take_that_leaves_items() {
    model(|| {
        let waiters = Arc::new(Waiters::default());
        let items = Arc::new(AtomicUsize::new(0));
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let (waiters, items) = (waiters.clone(), items.clone());
                thread::spawn(move || {
                    block_on(&waiters, &Clock::default(), None, || take_one(&items)).expect("untimed");
                    // SeqCst: `receiver::taken`'s fence.
                    fence(Ordering::SeqCst);
                    waiters.wake_one_unless_woken(|| usize::from(items.load(Ordering::SeqCst) > 0));
                })
            })
            .collect();
        waiters.notify(1);
        items.fetch_add(3, Ordering::SeqCst);
        take_one(&items).expect("three were moved");
        fence(Ordering::SeqCst);
        waiters.wake_one_unless_woken(|| usize::from(items.load(Ordering::SeqCst) > 0));
        for c in consumers {
            c.join().unwrap();
        }
        assert_eq!(items.load(Ordering::SeqCst), 0);
    });
}
