//! Model 2d: shutdown racing a dequeue proxy that waits for egress room. With
//! more due items than the egress ring holds and no consumer, the dequeue proxy
//! fills the ring, plans `Sleep::Space` and parks until a consumer's take rings
//! its bell. Each way of ending the wait other than a take must still get every
//! item out, or dropped, exactly once, and leave no thread parked:
//!
//! - `take_pending` (reliability defect 4) empties the ring without a take:
//!   unless it rings the bell too, the proxy sleeps on with room in the ring, and
//!   an item sent afterwards, due at once, is never moved (loom: deadlock). Built
//!   with `--cfg delayq_bug_take_pending_no_ring` (the ring removed), that model
//!   must fail: `loom_planted_bug.rs` checks that it does.
//! - `close` then receives: every item is received once, in deadline order, then
//!   `RecvError`.
//! - the last `Receiver` dropped (disconnect): the proxy must wake and exit
//!   (dropping the last `Sender` joins it), and every item — in the egress ring,
//!   in the index, or handed back by a later send — is dropped exactly once.
//!
//! Runs the public `Builder` path (its hidden `egress_slots` knob makes a
//! two-slot ring), so the model exercises the queue users run.
#![cfg(delayq_loom)]

use delayq::{Builder, MockClock, Receiver, Sender};
use loom_tests::{model, take_pending_wakes_a_proxy_waiting_for_room, DropLog, Tracked};

/// Threads: main and the two proxies.
#[test]
fn take_pending_wakes_a_dequeue_proxy_waiting_for_room() {
    model(take_pending_wakes_a_proxy_waiting_for_room);
}

/// Threads: main and the two proxies. Three items due at once through two
/// egress slots, no consumer until main calls `close()` (the proxy may be
/// anywhere from moving the first item to parked in `Space`); main's receives
/// then get all three in order and `RecvError`, and each item is dropped once.
#[test]
fn close_then_receives_drain_past_a_proxy_waiting_for_room() {
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
/// egress slots, no consumer; main drops the only `Receiver` (the proxy may be
/// anywhere from moving the first item to parked in `Space`). A later send is
/// refused with its item back; dropping the `Sender` joins both proxies (a proxy
/// left parked: loom deadlock); every item is dropped exactly once.
#[test]
fn disconnect_releases_a_proxy_waiting_for_room() {
    model(|| {
        let log = DropLog::new();
        let (tx, rx, clock) = three_due(&log);
        drop(rx);
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
