//! Model 3b: the blocking loop (`waiters::block_on`) and its waiter list alone.

use super::model;
use crate::clock::Clock;
use crate::waiters::{block_on, Waiters};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use std::sync::Arc;

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
                thread::spawn(move || {
                    block_on(&waiters, &Clock::default(), None, || {
                        let mut p = permits.load(Ordering::Relaxed);
                        loop {
                            if p == 0 {
                                return None;
                            }
                            // SeqCst: as `Counter::reserve`.
                            match permits.compare_exchange(p, p - 1, Ordering::SeqCst, Ordering::Relaxed) {
                                Ok(_) => return Some(()),
                                Err(now) => p = now,
                            }
                        }
                    })
                })
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
