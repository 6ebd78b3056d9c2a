//! Model 2d: `take_pending`, `close` and the last receiver's drop against a
//! queue holding more due items than its egress ring: each way of ending
//! must get every item out, or dropped, exactly once, and leave no thread
//! parked.
//!
//! - `take_pending` returns everything, in deadline order, wherever it is; a
//!   send afterwards, due at once, reaches `recv`.
//! - `close` then receives: every item is received once, in deadline order,
//!   then `RecvError` (the receives run the rounds the full ring left).
//! - the last `Receiver` dropped (disconnect): every item — in the egress
//!   ring, in the index, or handed back by a later send — is dropped exactly
//!   once, and dropping the `Sender` joins both proxies.
//!
//! Runs the public `Builder` path (its hidden `egress_slots` knob makes a
//! two-slot ring), so the model exercises the queue users run.
#![cfg(delayq_loom)]

use delayq::{Builder, MockClock, Receiver, Sender};
use loom_tests::{model, take_pending_takes_everything_and_the_queue_goes_on, DropLog, Tracked};

/// Threads: main and the two proxies.
#[test]
fn take_pending_takes_everything_and_the_queue_goes_on_model() {
    model(take_pending_takes_everything_and_the_queue_goes_on);
}

/// Threads: main and the two proxies. Three items due at once through two
/// egress slots, no consumer until main calls `close()`; main's receives
/// then get all three in order and `RecvError`, and each item is dropped once.
#[test]
fn close_then_receives_drain_a_full_ring() {
    model(|| {
        let log = DropLog::new();
        let (tx, rx, _clock) = three_due(&log);
        rx.close();
        let mut got = Vec::new();
        // At most 3 items, then `RecvError`: the loop is bounded.
        while let Ok(item) = rx.recv() {
            got.push(item.id);
        }
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(rx.len(), 0);
        assert_eq!(log.dropped(), vec![0, 1, 2], "each received item dropped once");
        drop((tx, rx));
        assert_eq!(log.dropped(), vec![0, 1, 2], "nothing dropped twice at shutdown");
    });
}

/// Threads: main and the two proxies. Three items due at once through two
/// egress slots, no consumer; main drops the only `Receiver`, which drops
/// every pending item before it returns. A later send is refused with its
/// item back; dropping the `Sender` joins both proxies (a proxy left parked:
/// loom deadlock); every item is dropped exactly once.
#[test]
fn disconnect_drops_everything_once() {
    model(|| {
        let log = DropLog::new();
        let (tx, rx, clock) = three_due(&log);
        drop(rx);
        assert_eq!(log.dropped(), vec![0, 1, 2], "dropped before the last receiver's drop returned");
        let refused = tx.send_at(log.item(3), clock.now()).map(|_| ()).map_err(|e| e.into_inner().id);
        assert_eq!(refused, Err(3), "a send after the last receiver was accepted");
        drop(tx); // the last handle: joins both proxies
        assert_eq!(log.dropped(), vec![0, 1, 2, 3], "each item dropped exactly once");
    });
}

/// An unbounded queue with two-slot rings on a mock clock, holding three items
/// (ids 0, 1, 2) due at once: one more than the egress ring holds.
fn three_due(log: &DropLog) -> (Sender<Tracked>, Receiver<Tracked>, MockClock) {
    let clock = MockClock::new();
    let (tx, rx) = Builder::new().ingress_slots(2).egress_slots(2).clock(clock.clone()).build().unwrap();
    for i in 0..3 {
        // Due at once: the mock clock stands still.
        tx.send_at(log.item(i), clock.now()).unwrap();
    }
    (tx, rx, clock)
}
