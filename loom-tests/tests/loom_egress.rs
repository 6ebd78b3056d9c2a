//! Model 2c: the egress side of a whole queue: the dequeue proxy pushes due items
//! into the egress ring and wakes parked consumers (`Waiters`); consumers take
//! items and, when the ring was full, ring the proxy's `Bell` for room (the
//! `Sleep::Space` plan).
//!
//! Uses the builder's hidden `egress_slots(2)` for a two-slot egress ring (a
//! bounded queue's ring is sized to its capacity, so it could never fill).
#![cfg(delayq_loom)]

use delayq::{Builder, MockClock, Receiver, Sender};
use loom::thread;
use loom_tests::model;

/// Threads: the two proxies and main. Three items due at once through two
/// egress slots: the dequeue proxy fills the ring, plans `Space` and parks; each
/// receive makes room and the consumer's `taken` must ring the proxy's bell, or
/// the third item is stranded (loom: deadlock). Items come out in deadline order.
#[test]
fn full_ring_parks_the_proxy_until_a_receive_makes_room() {
    model(|| {
        let clock = MockClock::new();
        let (tx, rx) = small::<u32>(&clock);
        for d in 0..3 {
            // Due at once: the mock clock stands still.
            tx.send_at(d, clock.now()).unwrap();
        }
        let got: Vec<u32> = (0..3).filter_map(|_| rx.recv().ok()).collect();
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(rx.len(), 0);
    });
}

/// Threads: the two proxies, a consumer thread and main (producer, then
/// consumer). One item due at once; both consumers block in `recv` until the
/// dequeue proxy moves it and notifies; `close` then lets both run dry. The item
/// is received exactly once and nobody is left parked.
#[test]
fn proxy_to_two_blocked_consumers() {
    model(|| {
        let clock = MockClock::new();
        let (tx, rx) = small::<u32>(&clock);
        let consumer = {
            let rx = rx.clone();
            thread::spawn(move || rx.iter().collect::<Vec<_>>())
        };
        tx.send_at(0, clock.now()).unwrap();
        rx.close();
        let mine: Vec<u32> = rx.iter().collect();
        let theirs = consumer.join().unwrap();
        let all: Vec<u32> = mine.iter().chain(&theirs).copied().collect();
        assert_eq!(all, vec![0], "main got {mine:?}, the other consumer {theirs:?}");
        assert_eq!(rx.len(), 0);
    });
}

/// An unbounded queue with two-slot rings, on `clock`.
fn small<T: Send + 'static>(clock: &MockClock) -> (Sender<T>, Receiver<T>) {
    Builder::new().ingress_slots(2).egress_slots(2).clock(clock.clone()).build().unwrap()
}
