//! Model 1b: the proxies' bell (`src/wakeup.rs`) on the internals: work is
//! never left behind a parked proxy, whatever the interleaving of
//! `prepare_sleep` / re-check / `ring`.

use super::model;
use crate::sync::Parker;
use crate::wakeup::Bell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use std::sync::Arc;

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
