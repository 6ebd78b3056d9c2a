//! Model 2a: the Vyukov bounded ring with a close bit (`src/ring.rs`), alone.
//!
//! The ring's one shape: producers push, one popper at a time pops
//! (`pop_exclusive`, the enqueue role's holder on the ingress ring). Checked: no
//! value lost, duplicated or torn (each value is two words that must agree; loom
//! also flags any unsynchronised access to a slot's `UnsafeCell`), per-producer
//! FIFO, a `Full` verdict never older than a pop that happened before the push,
//! and `close` racing pushes (every accepted push is popped once, every refused
//! one comes back).
use super::model;
use crate::ring::{PushError, Ring};
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use std::sync::Arc;

/// `pop_exclusive` for a model in which no two pops run at once.
fn pop(ring: &Ring<Val>) -> Option<Val> {
    // SAFETY: each model pops from one thread at a time (see the model).
    unsafe { ring.pop_exclusive() }
}

/// Two words that must agree: a torn read shows up as a mismatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Val {
    who: u32,
    seq: u32,
    check: u64,
}

fn val(who: u32, seq: u32) -> Val {
    Val { who, seq, check: !(u64::from(who) << 32 | u64::from(seq)) }
}

fn intact(v: &Val) -> bool {
    v.check == !(u64::from(v.who) << 32 | u64::from(v.seq))
}

/// Ingress shape. Threads: two producers (two values each, no retry: a `Full`
/// push keeps its value) + the consumer (main), which pops three times while
/// they run and drains the rest after joining them. Four values, two slots: every
/// value is popped once or refused, never both; each producer's accepted values
/// come out in its order.
#[test]
fn producers_to_one_consumer() {
    model(|| {
        let ring = Arc::new(Ring::<Val>::new(2));
        let producers: Vec<_> = (0..2)
            .map(|who| {
                let ring = ring.clone();
                thread::spawn(move || {
                    let mut refused = Vec::new();
                    for seq in 0..2 {
                        match ring.push(val(who, seq)) {
                            Ok(()) => {}
                            Err(PushError::Full(v)) => refused.push(v),
                            Err(PushError::Closed(_)) => panic!("never closed"),
                        }
                    }
                    refused
                })
            })
            .collect();
        let mut got: Vec<Val> = (0..3).filter_map(|_| pop(&ring)).collect();
        let mut refused = Vec::new();
        for p in producers {
            refused.extend(p.join().unwrap());
        }
        got.extend(std::iter::from_fn(|| pop(&ring)));
        assert!(got.iter().chain(&refused).all(intact), "torn value in {got:?} / {refused:?}");
        assert!(got.len() >= 2, "two free slots accept at least two of four pushes: {got:?}");
        for who in 0..2 {
            let mine: Vec<u32> = got.iter().filter(|v| v.who == who).map(|v| v.seq).collect();
            assert!(mine.windows(2).all(|w| w[0] < w[1]), "producer {who} reordered: {got:?}");
        }
        let mut all: Vec<(u32, u32)> = got.iter().chain(&refused).map(|v| (v.who, v.seq)).collect();
        all.sort_unstable();
        assert_eq!(all, vec![(0, 0), (0, 1), (1, 0), (1, 1)], "popped {got:?}, refused {refused:?}");
    });
}

/// One producer racing the popper, the slot it frees refilled. Threads: the
/// popper (twice) + the producer (main: three values into two slots, no
/// retry), which pops the rest after joining the popper. Every value is popped
/// once, in order, untorn, or refused: the stamp's Release publishes each
/// value to the pop that reads it, and the pop's publishes the freed slot to
/// the push that refills it.
#[test]
fn one_producer_refills_what_the_popper_frees() {
    model(|| {
        let ring = Arc::new(Ring::<Val>::new(2));
        let popper = {
            let ring = ring.clone();
            thread::spawn(move || (0..2).filter_map(|_| pop(&ring)).collect::<Vec<_>>())
        };
        let mut refused = Vec::new();
        for seq in 0..3 {
            match ring.push(val(0, seq)) {
                Ok(()) => {}
                Err(PushError::Full(v)) => refused.push(v),
                Err(PushError::Closed(_)) => panic!("never closed"),
            }
        }
        let mut got = popper.join().unwrap();
        got.extend(std::iter::from_fn(|| pop(&ring)));
        assert!(got.iter().chain(&refused).all(intact), "torn value in {got:?} / {refused:?}");
        assert!(got.windows(2).all(|w| w[0].seq < w[1].seq), "popped {got:?}: not FIFO");
        assert!(refused.len() <= 1, "three pushes, two slots: at most one refusal ({refused:?})");
        let mut seqs: Vec<u32> = got.iter().chain(&refused).map(|v| v.seq).collect();
        seqs.sort_unstable();
        assert_eq!(seqs, vec![0, 1, 2], "lost or duplicated: popped {got:?}, refused {refused:?}");
    });
}

/// `Full` is a current verdict: a push that starts after a pop has completed
/// (it saw the popper's flag) must find the freed slot. Threads: a popper + the
/// pusher (main) on a full two-slot ring; main pops only after joining the
/// popper.
#[test]
fn full_is_never_stale_after_a_pop() {
    model(|| {
        let ring = Arc::new(Ring::<Val>::new(2));
        ring.push(val(0, 0)).unwrap();
        ring.push(val(0, 1)).unwrap();
        let popped = Arc::new(AtomicBool::new(false));
        let popper = {
            let (ring, popped) = (ring.clone(), popped.clone());
            thread::spawn(move || {
                let v = pop(&ring).expect("the ring is full");
                // Release: the pusher that sees the flag sees the pop.
                popped.store(true, Ordering::Release);
                v
            })
        };
        let seen = popped.load(Ordering::Acquire);
        let pushed = ring.push(val(0, 2));
        if seen {
            assert!(pushed.is_ok(), "Full although a pop had completed: {pushed:?}");
        }
        assert_eq!(popper.join().unwrap(), val(0, 0));
        let mut rest = Vec::new();
        while let Some(v) = pop(&ring) {
            rest.push(v.seq);
        }
        match pushed {
            Ok(()) => assert_eq!(rest, vec![1, 2]),
            Err(PushError::Full(v)) => {
                assert_eq!(v, val(0, 2));
                assert_eq!(rest, vec![1]);
            }
            Err(PushError::Closed(_)) => unreachable!(),
        }
    });
}

/// `close` racing two pushes and a pop. Every push either lands (then it is
/// popped exactly once, possibly after waiting out a claimed, mid-write slot with
/// `is_drained`) or fails with its value back. A push that starts after `close`
/// returned always fails. Threads: two producers + the closer/drainer (main).
#[test]
fn close_races_pushes() {
    model(|| {
        let ring = Arc::new(Ring::<Val>::new(2));
        let producers: Vec<_> = (0..2)
            .map(|who| {
                let ring = ring.clone();
                thread::spawn(move || match ring.push(val(who, 0)) {
                    Ok(()) => None,
                    Err(PushError::Closed(v)) => Some(v),
                    Err(PushError::Full(_)) => panic!("two pushes cannot fill two slots"),
                })
            })
            .collect();
        let mut got = Vec::new();
        if let Some(v) = pop(&ring) {
            got.push(v);
        }
        assert!(ring.close(), "first close");
        assert!(!ring.close(), "second close");
        // As `Ingress::drain_closed`: pop until every claimed push is popped.
        loop {
            while let Some(v) = pop(&ring) {
                got.push(v);
            }
            if ring.is_drained() {
                break;
            }
            thread::yield_now();
        }
        assert!(matches!(ring.push(val(9, 9)), Err(PushError::Closed(_))), "push after close");
        let mut refused = Vec::new();
        for p in producers {
            refused.extend(p.join().unwrap());
        }
        assert!(pop(&ring).is_none(), "a push landed after the drain");
        let mut all: Vec<u32> = got.iter().chain(&refused).map(|v| v.who).collect();
        all.sort_unstable();
        assert_eq!(all, vec![0, 1], "accepted {got:?}, refused {refused:?}");
    });
}
