//! Model 2c: the egress side of a whole queue: the dequeue proxy pushes due items
//! into the egress ring and wakes parked consumers (`Waiters`); consumers take
//! items and, when the ring was full, ring the proxy's `Bell` for room (the
//! `Sleep::Space` plan).
//!
//! Uses `loom_api::Queue` for its two-slot egress ring (the public builder sizes
//! the ring to the capacity, so a bounded queue can never fill it).
#![cfg(delayq_loom)]

use delayq::loom_api::Queue;
use delayq::MockClock;
use loom::thread;
use loom_tests::model;
use std::sync::Arc;

/// Threads: the two proxies and main. Three items due at once through two
/// egress slots: the dequeue proxy fills the ring, plans `Space` and parks; each
/// receive makes room and the consumer's `taken` must ring the proxy's bell, or
/// the third item is stranded (loom: deadlock). Items come out in deadline order.
#[test]
fn full_ring_parks_the_proxy_until_a_receive_makes_room() {
    model(|| {
        let clock = MockClock::new();
        let q = Queue::<u32>::new(None, &clock, 2, 2);
        let t0 = q.ticks();
        for d in 0..3 {
            // Due at once: the mock clock stands at t0.
            q.send(d, t0).unwrap_or_else(|_| panic!("send {d}"));
        }
        let got: Vec<u32> = (0..3).filter_map(|_| q.recv()).collect();
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(q.len(), 0);
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
        let q = Arc::new(Queue::<u32>::new(None, &clock, 2, 2));
        let t0 = q.ticks();
        let consumer = {
            let q = q.clone();
            thread::spawn(move || std::iter::from_fn(|| q.recv()).collect::<Vec<_>>())
        };
        q.send(0, t0).unwrap_or_else(|_| panic!("send 0"));
        q.close();
        let mine: Vec<u32> = std::iter::from_fn(|| q.recv()).collect();
        let theirs = consumer.join().unwrap();
        let all: Vec<u32> = mine.iter().chain(&theirs).copied().collect();
        assert_eq!(all, vec![0], "main got {mine:?}, the other consumer {theirs:?}");
        assert_eq!(q.len(), 0);
    });
}
