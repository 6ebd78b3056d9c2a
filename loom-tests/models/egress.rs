//! Model 2d: the egress ring (`src/egress.rs`) alone: one pusher (the dequeue
//! role's holder) refilling the slots that racing consumers free.
//!
//! Checked: every pushed item leaves exactly once, in push order for each
//! consumer, and loom flags any unsynchronised access to a slot's item (a push
//! rewriting a slot while a consumer still reads it). The planted bug
//! `--cfg delayq_bug_egress_free_before_read` (a take that frees its slot
//! before it reads the item out) must make
//! `a_refilled_slot_is_never_read_and_written_at_once` fail: `.ci/loom.sh`
//! checks it.
use super::model;
use crate::egress::Egress;
use loom::thread;
use std::sync::Arc;

/// Threads: two consumers taking once each, and main, which pushed two items
/// into a two-slot ring and pushes a third into whichever slot is freed
/// first, if one is by then. Each item comes out once.
#[test]
fn a_refilled_slot_is_never_read_and_written_at_once() {
    model(|| {
        let egress = Arc::new(Egress::<u64>::new(2));
        for k in [1, 2] {
            // SAFETY: this thread is the ring's only pusher (the model has no
            // timers lock to hold: nobody else pushes).
            unsafe { egress.push((k, k, k)) }.expect("a free slot");
        }
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let egress = egress.clone();
                thread::spawn(move || {
                    egress.take().map(|(_, key, item)| {
                        assert_eq!(key, item, "an item with another entry's key");
                        key
                    })
                })
            })
            .collect();
        // Give the consumers a chance to free a slot first.
        thread::yield_now();
        // SAFETY: as above. Refused while the ring is still full.
        let third = unsafe { egress.push((3, 3, 3)) }.is_ok();
        let mut all: Vec<u64> = consumers.into_iter().filter_map(|c| c.join().unwrap()).collect();
        all.extend(egress.take_all().into_iter().map(|(_, key, _)| key));
        all.sort_unstable();
        let want: Vec<u64> = if third { vec![1, 2, 3] } else { vec![1, 2] };
        assert_eq!(all, want, "an entry left twice or never");
    });
}

/// Threads: consumer A taking once, consumer B taking twice, and main, which
/// pushed two items into a two-slot ring and pushes a third into the slot A
/// or B frees. B's second take can find the head's slot still holding the
/// entry of one lap ago, its taker not done reading it out: nothing is pushed
/// there yet, and that take returns `None` without waiting. Each item comes
/// out once, and no take reads a slot that a push writes.
#[test]
fn a_take_behind_an_unfinished_take_of_one_lap_ago_finds_nothing() {
    model(|| {
        let egress = Arc::new(Egress::<u64>::new(2));
        for k in [1, 2] {
            // SAFETY: this thread is the ring's only pusher.
            unsafe { egress.push((k, k, k)) }.expect("a free slot");
        }
        let consumers: Vec<_> = [1, 2]
            .into_iter()
            .map(|takes| {
                let egress = egress.clone();
                thread::spawn(move || {
                    (0..takes)
                        .filter_map(|_| egress.take().map(|(_, key, item)| (key, item)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        // SAFETY: as above. Refused while the ring is still full.
        let third = unsafe { egress.push((3, 3, 3)) }.is_ok();
        let mut all: Vec<u64> = consumers
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .map(|(k, item)| {
                assert_eq!(k, item, "an item with another entry's key");
                k
            })
            .collect();
        all.extend(egress.take_all().into_iter().map(|(_, key, _)| key));
        all.sort_unstable();
        let want: Vec<u64> = if third { vec![1, 2, 3] } else { vec![1, 2] };
        assert_eq!(all, want, "an entry left twice or never");
    });
}
