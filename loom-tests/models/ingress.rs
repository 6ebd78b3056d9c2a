//! Model 2b: the ingress (`src/ingress.rs`): the ring plus its locked spill.
//!
//! Checked: a producer's commands reach the proxy in the order it issued them
//! across the ring → spill → ring transitions (so a `cancel` never overtakes its
//! own `send`), none lost or duplicated, and `close` + `drain_closed` account for
//! every push (accepted → drained once, refused → handed back).
use super::model;
use crate::ingress::Ingress;
use loom::thread;
use std::sync::Arc;

/// Threads: producer A (three commands through a two-slot ring: the third may
/// spill), producer B (one command), and the proxy (main), which drains in
/// batches of two as `enqueue::run` does: three rounds, each followed by a yield,
/// while they run, then the rest after joining them. Nothing is lost or
/// duplicated and A's commands come out in A's order.
#[test]
fn spill_keeps_each_producers_order() {
    model(|| {
        let ingress = Arc::new(Ingress::<(u32, u32)>::new(2));
        let producers: Vec<_> = [(0u32, 3u32), (1, 1)]
            .into_iter()
            .map(|(who, n)| {
                let ingress = ingress.clone();
                thread::spawn(move || {
                    for seq in 0..n {
                        ingress.push((who, seq)).expect("open ingress");
                    }
                })
            })
            .collect();
        let mut got = Vec::new();
        for _ in 0..3 {
            ingress.drain_into(&mut got, 2);
            // Rounds while the producers run: one may find a claimed,
            // unwritten slot and stop there.
            thread::yield_now();
        }
        for p in producers {
            p.join().unwrap();
        }
        ingress.drain_into(&mut got, usize::MAX);
        // A proxy round may stop short of the spill (e.g. a claimed slot is still
        // being written); later rounds take it.
        ingress.drain_into(&mut got, usize::MAX);
        assert!(ingress.is_empty(), "left behind after draining: {got:?}");
        let a: Vec<u32> = got.iter().filter(|c| c.0 == 0).map(|c| c.1).collect();
        let b: Vec<u32> = got.iter().filter(|c| c.0 == 1).map(|c| c.1).collect();
        assert_eq!((a, b), (vec![0, 1, 2], vec![0]), "order or count broken: {got:?}");
    });
}

/// Threads: two producers (two commands each, so the two-slot ring overflows
/// into the spill) + the closer (main), which closes and then `drain_closed`s as
/// `enqueue::wind_down` does.
#[test]
fn close_accounts_for_every_push() {
    model(|| {
        let ingress = Arc::new(Ingress::<(u32, u32)>::new(2));
        let producers: Vec<_> = (0..2u32)
            .map(|who| {
                let ingress = ingress.clone();
                thread::spawn(move || {
                    let mut refused = Vec::new();
                    for seq in 0..2 {
                        if let Err(c) = ingress.push((who, seq)) {
                            refused.push(c);
                        }
                    }
                    refused
                })
            })
            .collect();
        assert!(ingress.close());
        let mut got = Vec::new();
        ingress.drain_closed(&mut got);
        assert!(ingress.push((9, 9)).is_err(), "push after close");
        let mut refused = Vec::new();
        for p in producers {
            refused.extend(p.join().unwrap());
        }
        let mut after = Vec::new();
        ingress.drain_into(&mut after, usize::MAX);
        assert!(after.is_empty(), "accepted after the closed drain: {after:?}");
        for who in 0..2 {
            let mine: Vec<u32> = got.iter().filter(|c| c.0 == who).map(|c| c.1).collect();
            assert!(mine.windows(2).all(|w| w[0] < w[1]), "producer {who} reordered: {got:?}");
        }
        let mut all: Vec<(u32, u32)> = got.iter().chain(&refused).copied().collect();
        all.sort_unstable();
        assert_eq!(all, vec![(0, 0), (0, 1), (1, 0), (1, 1)], "accepted {got:?}, refused {refused:?}");
    });
}
