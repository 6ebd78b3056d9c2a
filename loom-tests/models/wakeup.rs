//! Model 1b: the proxy wakeup protocol (`src/wakeup.rs`) on the internals.
//!
//! - A head that did not move earlier causes no wakeup (mechanism 1): the
//!   dequeue proxy's published plan, read under the timers lock.
//! - The `Bell` (mechanism 2): a producer's work is never left behind a parked
//!   proxy, whatever the interleaving of `prepare_sleep` / re-check / `ring`.

use super::model;
use crate::sync::{lock, Parker};
use crate::wakeup::{Bell, Sleep};
use crate::{Builder, MockClock};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use std::sync::Arc;
use std::time::Duration;

/// Threads: main + the two proxies. Once the dequeue proxy has published its
/// plan for a head due at t+10 (`Until(w)` with `w <= t+10`: the index may round
/// the wake-up down to a slot boundary), inserting a later item (t+20) must leave
/// that plan alone: the enqueue proxy sets `Awake` exactly when it unparks the
/// dequeue proxy. (The earlier-head half is `earlier_head_is_never_stranded`.)
#[test]
fn later_head_sends_no_wakeup() {
    model(|| {
        let clock = MockClock::new();
        let (tx, rx) =
            Builder::new().ingress_slots(2).egress_slots(2).clock(clock.clone()).build::<u32>().unwrap();
        let shared = rx.shared();
        let t10 = clock.now() + Duration::from_millis(10);
        let head = shared.ticks.of(t10);
        tx.send_at(10, t10).unwrap();
        // A zero step returns once a dequeue round that started after the send
        // was applied has published its plan.
        clock.advance(Duration::ZERO);
        let planned = lock(&shared.timers).sleep;
        assert!(matches!(planned, Sleep::Until(w) if w <= head), "plan {planned:?} for a head at {head}");
        tx.send_at(20, clock.now() + Duration::from_millis(20)).unwrap();
        // A command: answered once the send before it is applied.
        assert_eq!(rx.peek_deadline(), Some(t10));
        assert_eq!(lock(&shared.timers).sleep, planned, "woken although the head did not move");
    });
}

/// Threads: a sleeper running the enqueue proxy's idle loop on a `Bell`, and two
/// producers that each publish one unit of work and ring. The sleeper must
/// consume both units (a lost wakeup parks it forever: loom reports a deadlock).
#[test]
fn bell_never_loses_a_ring() {
    bell_model(2, 1);
}

/// As above with one producer ringing twice: its second `ring` must see the
/// sleeper's second `prepare_sleep` although its own first `ring` wrote the flag.
#[test]
fn bell_never_loses_a_second_ring() {
    bell_model(1, 2);
}

fn bell_model(producers: usize, rings_each: usize) {
    model(move || {
        let parker = Parker::new();
        let bell = Arc::new(Bell::new(parker.unparker()));
        let work = Arc::new(AtomicUsize::new(0));
        let total = producers * rings_each;
        let producers: Vec<_> = (0..producers)
            .map(|_| {
                let (bell, work) = (bell.clone(), work.clone());
                thread::spawn(move || {
                    for _ in 0..rings_each {
                        // SeqCst as the ingress ring's claim: part of the total order.
                        work.fetch_add(1, Ordering::SeqCst);
                        bell.ring();
                    }
                })
            })
            .collect();
        let mut done = 0;
        while done < total {
            // The enqueue proxy's loop: take work; else register, re-check, park.
            let n = work.swap(0, Ordering::SeqCst);
            if n > 0 {
                done += n;
                continue;
            }
            bell.prepare_sleep();
            if work.load(Ordering::SeqCst) > 0 {
                bell.awake();
                continue;
            }
            parker.park(None);
            bell.awake();
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(done, total);
    });
}
