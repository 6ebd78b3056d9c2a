//! Model 3: a producer blocked on a full bounded queue is woken when a consumer
//! receives (the `producers` waiter list, `waiters::block_on`, the take path in
//! `receiver.rs`). The blocking loop alone is modelled in `models/blocking.rs`.
#![cfg(delayq_loom)]

use delayq::{Builder, MockClock};
use loom::thread;
use loom_tests::model;

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
