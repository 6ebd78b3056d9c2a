//! Where delayq at zero delay must behave as crossbeam-channel does (issue 36,
//! items 0 and 0b): `try_recv` says `Empty` only when, at some instant during
//! the call, no due item was sent and not yet received (crossbeam-channel's
//! `tests/array.rs` and `tests/list.rs` `linearizable`, written here for
//! delayq); the handles are unwind safe; and the items left in a queue are
//! dropped before the last receiver's `drop` returns.

mod common;
use common::*;
use delayq::{Receiver, Sender};
use std::panic::{catch_unwind, RefUnwindSafe, UnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// crossbeam-channel's `linearizable`: `threads` threads, each `n` times
/// sending one item due now (or, with `past`, every other one due a second
/// ago) and then `try_recv().unwrap()`. Whichever thread took this thread's
/// item had sent one of its own first, so at every instant during the
/// `try_recv` at least one due item has been sent and not received: `Empty`
/// is never a linearizable answer.
fn linearizable(tx: Sender<usize>, rx: Receiver<usize>, threads: usize, n: usize, past: bool) {
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (tx, rx, barrier) = (tx.clone(), rx.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                for i in 0..n {
                    let at = if past && (i + t) % 2 == 0 {
                        Instant::now().checked_sub(Duration::from_secs(1)).unwrap_or_else(Instant::now)
                    } else {
                        Instant::now()
                    };
                    tx.send_at(i, at).unwrap();
                    if let Err(e) = rx.try_recv() {
                        panic!("thread {t}, round {i}: try_recv said {e:?} with {} items pending", rx.len());
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(rx.len(), 0);
}

fn rounds() -> usize {
    25_000 * scale() / if cfg!(debug_assertions) { 10 } else { 1 }
}

#[test]
fn linearizable_bounded() {
    let (tx, rx) = delayq::bounded(4);
    linearizable(tx, rx, 4, rounds(), false);
}

#[test]
fn linearizable_unbounded() {
    let (tx, rx) = delayq::unbounded();
    linearizable(tx, rx, 4, rounds(), false);
}

/// Sixteen threads, deadlines due now and a second past, mixed.
#[test]
fn linearizable_sixteen_threads_past_and_zero_deadlines() {
    let (tx, rx) = delayq::unbounded();
    linearizable(tx, rx, 16, rounds() / 8, true);
}

/// The same without helping: every send leaves its item to the proxy
/// threads, so `try_recv` must apply the commands and move the items itself.
#[test]
fn linearizable_without_helping() {
    let (tx, rx) = delayq::Builder::new().helping(false).build().unwrap();
    linearizable(tx, rx, 4, rounds() / 4, false);
}

/// crossbeam-channel's handles are unwind safe on purpose (its
/// `tests/ready.rs` and `select.rs` move them into `catch_unwind`), whatever
/// the item type.
#[test]
fn handles_are_unwind_safe() {
    fn unwind_safe<T: UnwindSafe + RefUnwindSafe>(_: &T) {}
    // `Cell` is neither `RefUnwindSafe` nor `Sync`: the handles still are.
    let (tx, rx) = delayq::unbounded::<std::cell::Cell<u8>>();
    unwind_safe(&tx);
    unwind_safe(&rx);
    let r = catch_unwind(move || drop(rx));
    assert!(r.is_ok());
    assert!(tx.send_after(std::cell::Cell::new(1), Duration::ZERO).is_err(), "no receiver left");
    let (tx, rx) = delayq::unbounded::<u32>();
    let caught = catch_unwind(|| {
        tx.send_after(1, Duration::ZERO).unwrap();
        panic!("a caller's panic between a send and its receive");
    });
    assert!(caught.is_err());
    assert_eq!(rx.recv(), Ok(1), "the queue is usable after a caught panic");
}

/// Counts the drops of its items; each drop can be made slow.
#[derive(Debug)]
struct Counted(Arc<AtomicUsize>, Duration);

impl Drop for Counted {
    fn drop(&mut self) {
        if !self.1.is_zero() {
            thread::sleep(self.1);
        }
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// crossbeam-channel: "messages should be dropped immediately when the last
/// receiver is destroyed". Pending items (far in the future, due, and still
/// on their way to the index) are dropped, with a slow `Drop` too, before the
/// last receiver's `drop` returns; a receiver that is not the last drops
/// nothing.
#[test]
fn pending_items_are_dropped_before_the_last_receiver_is() {
    for slow in [Duration::ZERO, ms(2)] {
        let dropped = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = delayq::unbounded();
        let n = if slow.is_zero() { 1000 } else { 20 };
        for i in 0..n {
            let at = if i % 2 == 0 { Instant::now() } else { Instant::now() + Duration::from_secs(3600) };
            tx.send_at(Counted(dropped.clone(), slow), at).unwrap();
        }
        let other = rx.clone();
        drop(other);
        assert_eq!(dropped.load(Ordering::SeqCst), 0, "a receiver that is not the last dropped items");
        drop(rx);
        assert_eq!(dropped.load(Ordering::SeqCst), n, "items left for later (slow drop: {slow:?})");
        assert_eq!(tx.len(), 0);
    }
}
