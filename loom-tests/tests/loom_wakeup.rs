//! Model 1: the proxy wakeup protocol (`src/wakeup.rs`).
//!
//! - An earlier head inserted by the enqueue proxy while the dequeue proxy plans
//!   its sleep is never stranded (mechanism 1, whole queue).
//! - A head that did not move earlier causes no wakeup (mechanism 1, probed
//!   through `loom_api::Queue::plan`).
//! - The `Bell` (mechanism 2): a producer's work is never left behind a parked
//!   proxy, whatever the interleaving of `prepare_sleep` / re-check / `ring`.
#![cfg(delayq_loom)]

use delayq::loom_api::{Bell, Parker, Plan, Queue};
use delayq::MockClock;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use loom_tests::{earlier_head_is_delivered_without_a_clock_step, model, ms};
use std::sync::Arc;
use std::time::Duration;

/// Threads: main (producer and consumer) + the two proxies.
#[test]
fn earlier_head_is_never_stranded() {
    model(earlier_head_is_delivered_without_a_clock_step);
}

/// Threads: main + the two proxies. Once the dequeue proxy has published its
/// plan for a head due at t+10 (`Until(w)` with `w <= t+10`: the index may round
/// the wake-up down to a slot boundary), inserting a later item (t+20) must leave
/// that plan alone: the enqueue proxy sets `Awake` exactly when it unparks the
/// dequeue proxy. (The earlier-head half is `earlier_head_is_never_stranded`.)
#[test]
fn later_head_sends_no_wakeup() {
    model(|| {
        let clock = MockClock::new();
        let q = Queue::<u32>::new(None, &clock, 2, 2);
        let t0 = q.ticks();
        let at = |d: Duration| t0 + d.as_nanos() as u64;
        q.send(10, at(ms(10))).unwrap();
        // A zero step returns once a dequeue round that started after the send
        // was applied has published its plan.
        clock.advance(Duration::ZERO);
        let planned = q.plan();
        assert!(
            matches!(planned, Plan::Until(w) if w <= at(ms(10))),
            "plan {planned:?} for a head at {}",
            at(ms(10))
        );
        q.send(20, at(ms(20))).unwrap();
        assert!(q.sync());
        assert_eq!(q.plan(), planned, "woken although the head did not move");
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
            parker.park();
            bell.awake();
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(done, total);
    });
}
