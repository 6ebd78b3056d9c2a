//! Model 2c: the egress side of a whole queue: the dequeue role's holder
//! pushes due items into the egress ring and wakes parked consumers
//! (`Waiters`); consumers take them, and when a round left due items for want
//! of room, the consumer that empties the ring runs the next round.
//!
//! Uses the builder's hidden `egress_slots(2)` for a two-slot egress ring (a
//! bounded queue's ring is sized to its capacity, so it could never fill).
#![cfg(delayq_loom)]

use delayq::{Builder, MockClock, Receiver, Sender};
use loom::thread;
use loom_tests::model;

/// Threads: the two proxies and main. Three items due at once through two
/// egress slots: a round fills the ring and leaves the third in the index;
/// the receive that finds the ring empty must move it (a stranded item: loom
/// deadlock). Items come out in deadline order.
#[test]
fn a_full_ring_leaves_the_rest_to_the_next_receive() {
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
/// consumer). One item due at once; whichever consumer looks first moves and
/// takes it, the other blocks; `close` then lets both run dry. The item is
/// received exactly once and nobody is left parked.
#[test]
fn one_item_two_consumers() {
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
