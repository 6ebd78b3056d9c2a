//! Model 7: staging (`Builder::stage_ahead`), on the whole queue: items the
//! dequeue proxy moved into the egress ring before their deadline can still be
//! cancelled there, and an item with an earlier deadline goes in front of them
//! (the staged ones go back to the index) — whatever the proxies are doing
//! meanwhile. The race of a consumer's take with a recall of the same entry is
//! model 2d (`models/egress.rs`), on the ring alone.
#![cfg(delayq_loom)]

use delayq::{Builder, MockClock, Receiver, Sender, TryRecvError};
use loom_tests::{model, ms};

/// Threads: the two proxies and main. An item staged 5 ms ahead (stage_ahead
/// 10 ms) is cancelled while the dequeue proxy may be mid-round; a second one
/// comes out when due, not before.
#[test]
fn a_staged_item_is_cancelled_or_delivered_once_due() {
    model(|| {
        let clock = MockClock::new();
        let (tx, rx) = staged::<u32>(&clock);
        let a = tx.send_at(1, clock.now() + ms(5)).unwrap();
        tx.send_at(2, clock.now() + ms(6)).unwrap();
        // Returns after a dequeue round that read the clock: both are staged.
        clock.advance(ms(0));
        assert_eq!(tx.cancel(a), Some(1), "a staged item is still pending");
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "never early");
        clock.advance(ms(6));
        assert_eq!(rx.try_recv(), Ok(2));
        assert_eq!(rx.len(), 0);
    });
}

/// Threads: the two proxies and main. "b" is staged when "a", due earlier,
/// arrives: "b" goes back to the index, so "a" comes out at its deadline,
/// before "b" is due (left behind "b", it would wait for "b"). (With a consumer
/// thread blocked in `recv` as a fourth thread, the exploration took more than
/// 13 minutes at preemption bound 2.)
#[test]
fn an_earlier_item_overtakes_a_staged_one() {
    model(|| {
        let clock = MockClock::new();
        let (tx, rx) = staged::<&str>(&clock);
        let t0 = clock.now();
        tx.send_at("b", t0 + ms(6)).unwrap();
        clock.advance(ms(0));
        tx.send_at("a", t0 + ms(3)).unwrap();
        clock.advance(ms(3));
        assert_eq!(rx.try_recv(), Ok("a"), "stuck behind the staged item");
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "never early");
        clock.advance(ms(3));
        assert_eq!(rx.try_recv(), Ok("b"));
    });
}

/// A bounded queue (2) with two-slot rings on `clock`, staging 10 ms ahead.
fn staged<T: Send + 'static>(clock: &MockClock) -> (Sender<T>, Receiver<T>) {
    Builder::new()
        .capacity(2)
        .ingress_slots(2)
        .egress_slots(2)
        .clock(clock.clone())
        .stage_ahead(ms(10))
        .build()
        .unwrap()
}
