//! Model 5: `cancel` racing the delivery of the same item: exactly one of them
//! gets it (`Cmd::Cancel` in the enqueue proxy vs. the dequeue proxy's move to
//! the egress ring, both under the timers lock).
#![cfg(delayq_loom)]

use delayq::{Builder, MockClock};
use loom::thread;
use loom_tests::{model, DropLog};

/// Threads: the two proxies and main. The item is due at once, so the dequeue
/// proxy may move it to the egress ring before, while or after the enqueue proxy
/// applies main's `cancel`. Exactly one of them gets it: `cancel` returns it, or
/// it was delivered and is then in the egress ring (the move happens under the
/// timers lock that `cancel` also takes), and it is dropped exactly once.
#[test]
fn cancel_races_delivery() {
    model(|| {
        let log = DropLog::new();
        let clock = MockClock::new();
        let (tx, rx) = Builder::new().capacity(2).clock(clock.clone()).build().unwrap();
        let key = tx.send_at(log.item(1), clock.now()).unwrap();
        let cancelled = tx.cancel(key);
        let received = rx.try_recv().ok();
        assert_eq!(
            usize::from(cancelled.is_some()) + usize::from(received.is_some()),
            1,
            "cancelled {cancelled:?}, received {received:?}"
        );
        assert_eq!(tx.len(), 0);
        assert_eq!(tx.cancel(key).map(|t| t.id), None, "a second cancel found it again");
        drop((cancelled, received));
        assert_eq!(log.dropped(), vec![1]);
    });
}

/// Threads: the two proxies, a consumer blocked in `recv`, and main cancelling
/// and then closing. The consumer gets the item XOR the cancel does; the
/// consumer is released either way.
#[test]
fn cancel_races_a_blocked_receiver() {
    model(|| {
        let clock = MockClock::new();
        let (tx, rx) = Builder::new().capacity(2).clock(clock.clone()).build::<u32>().unwrap();
        let consumer = thread::spawn(move || rx.recv().ok());
        let key = tx.send_at(1, clock.now()).unwrap();
        let cancelled = tx.cancel(key);
        drop(tx); // the last sender: closes, so the consumer cannot wait forever
        let received = consumer.join().unwrap();
        assert_eq!(
            usize::from(cancelled.is_some()) + usize::from(received.is_some()),
            1,
            "cancelled {cancelled:?}, received {received:?}"
        );
    });
}
