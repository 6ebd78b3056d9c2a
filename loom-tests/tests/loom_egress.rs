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

/// Threads: the two proxies, a consumer thread and main (producer, then
/// consumer). Three due items through two egress slots; `close` then lets both
/// consumers run dry. Every item is received exactly once, each consumer sees
/// increasing deadlines, nobody is left parked.
#[test]
fn proxy_to_two_consumers_through_a_full_ring() {
    model(|| {
        let clock = MockClock::new();
        let q = Arc::new(Queue::<u64>::new(None, &clock, 2, 2));
        let t0 = q.ticks();
        let consumer = {
            let q = q.clone();
            thread::spawn(move || {
                let mut mine = Vec::new();
                while let Some(x) = q.recv() {
                    mine.push(x);
                }
                mine
            })
        };
        for d in 0..3 {
            q.send(d, t0 + d).unwrap_or_else(|_| panic!("send {d}"));
        }
        // Due now: deadlines t0, t0+1, t0+2 are in the past once the clock moves 2 ns.
        clock.advance(std::time::Duration::from_nanos(2));
        q.close();
        let mut mine = Vec::new();
        while let Some(x) = q.recv() {
            mine.push(x);
        }
        let theirs = consumer.join().unwrap();
        for seq in [&mine, &theirs] {
            assert!(seq.windows(2).all(|w| w[0] < w[1]), "out of order: {seq:?}");
        }
        let mut all: Vec<u64> = mine.iter().chain(&theirs).copied().collect();
        all.sort_unstable();
        assert_eq!(all, vec![0, 1, 2], "main got {mine:?}, the other consumer {theirs:?}");
        assert_eq!(q.len(), 0);
    });
}
