//! Model 2d: `take_pending` racing a dequeue proxy that waits for egress room
//! (reliability defect 4). With more due items than the egress ring holds and no
//! consumer, the dequeue proxy fills the ring, plans `Sleep::Space` and parks
//! until a consumer's take rings its bell. `take_pending` empties the ring
//! without a take: unless it rings the bell too, the proxy sleeps on with room in
//! the ring, and an item sent afterwards, due at once, is never moved (loom:
//! deadlock). Built with `--cfg delayq_bug_take_pending_no_ring` (the ring
//! removed), this model must fail: `loom_planted_bug.rs` checks that it does.
//!
//! Runs the public `Builder` path (its hidden `egress_slots` knob makes a
//! two-slot ring), so the model exercises the queue users run.
#![cfg(delayq_loom)]

use loom_tests::{model, take_pending_wakes_a_proxy_waiting_for_room};

/// Threads: main and the two proxies.
#[test]
fn take_pending_wakes_a_dequeue_proxy_waiting_for_room() {
    model(take_pending_wakes_a_proxy_waiting_for_room);
}
