//! Model 5: `cancel` racing the delivery of the same item: exactly one of them
//! gets it (`Cmd::Cancel` in the enqueue proxy vs. the dequeue proxy's move to
//! the egress ring, both under the timers lock).
#![cfg(delayq_loom)]

use delayq::{Builder, MockClock};
use loom::thread;
use loom_tests::{model, ms, DropLog};

/// Threads: the two proxies, a thread that steps the clock so the item falls due
/// and then tries to receive, and main cancelling the item. Afterwards `close`
/// drains what is left: the item is cancelled XOR received, once, and dropped
/// exactly once.
#[test]
fn cancel_races_delivery() {
    model(|| {
        let log = DropLog::new();
        let clock = MockClock::new();
        let (tx, rx) = Builder::new().capacity(2).clock(clock.clone()).build().unwrap();
        let key = tx.send_at(log.item(1), clock.now() + ms(1)).unwrap();
        let stepper = {
            let (clock, rx) = (clock.clone(), rx.clone());
            thread::spawn(move || {
                clock.advance(ms(1));
                rx.try_recv().ok()
            })
        };
        let cancelled = tx.cancel(key);
        let mut received: Vec<_> = stepper.join().unwrap().into_iter().collect();
        rx.close();
        while let Ok(x) = rx.recv() {
            received.push(x);
        }
        assert_eq!(
            usize::from(cancelled.is_some()) + received.len(),
            1,
            "cancelled {cancelled:?}, received {received:?}"
        );
        assert_eq!(tx.len(), 0);
        drop((cancelled, received));
        assert_eq!(log.dropped(), vec![1]);
    });
}
