//! Model 3: a producer blocked on a full bounded queue is woken when a consumer
//! receives (the `producers` waiter list, `waiters::block_on`, `Shared::taken`).
#![cfg(delayq_loom)]

use delayq::loom_api::{block_on, Waiters};
use delayq::{Builder, Clock, MockClock};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use loom_tests::model;
use std::sync::Arc;

/// Whole queue, public API. Threads: the two proxies, a producer whose send finds
/// `bounded(1)` full and blocks, and main, which receives the first item (that
/// must wake the producer) and then the second.
#[test]
fn blocked_sender_is_woken_by_a_receive() {
    model(|| {
        let clock = MockClock::new();
        let (tx, rx) = Builder::new().capacity(1).clock(clock.clone()).build::<u32>().unwrap();
        tx.send_at(1, clock.now()).unwrap();
        let producer = {
            let (tx, now) = (tx.clone(), clock.now());
            thread::spawn(move || tx.send_at(2, now).is_ok())
        };
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(rx.recv(), Ok(2));
        assert!(producer.join().unwrap(), "the blocked send failed");
        assert_eq!(tx.len(), 0);
    });
}

/// The blocking loop alone, on a one-permit semaphore shaped like
/// `Shared::reserve` / `Shared::taken`. Threads: two waiters that each need a
/// permit, and main, which hands out two permits one at a time and notifies one
/// waiter per permit. Both waiters must get through (a lost notification parks
/// one forever: loom reports a deadlock).
#[test]
fn block_on_never_loses_a_notification() {
    model(|| {
        let waiters = Arc::new(Waiters::new());
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
                            // SeqCst: as `Shared::reserve`.
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
            // SeqCst: as `Shared::taken` releasing a unit.
            permits.fetch_add(1, Ordering::SeqCst);
            waiters.notify(1);
        }
        for t in threads {
            assert_eq!(t.join().unwrap(), Some(()));
        }
        assert_eq!(permits.load(Ordering::SeqCst), 0);
    });
}
