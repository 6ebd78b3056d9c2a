//! Model 8: `try_recv` catches up (`dequeue::catch_up`): a poll after sends of
//! due items finds every one of them, whether they are still in the ingress
//! (the caller applies them under the enqueue role), in the index (it moves
//! them under the dequeue role) or behind a full egress ring. Planted
//! bugs (`loom_planted_bug.rs`): `delayq_bug_catch_up_no_sync` skips the
//! commands, `delayq_bug_catch_up_no_move` skips the move; each fails the
//! first model; `delayq_bug_catch_up_no_look` (the catch-up does not look
//! at the ingress after its release of the enqueue role) fails the third.
#![cfg(delayq_loom)]

use loom_tests::{
    a_command_sent_during_a_try_recv_is_applied, model, try_iter_gets_every_due_item,
    try_iter_gets_every_due_item_sent_before_it,
};

/// Whole queue, public API, the roles left to the proxies. Threads: the two
/// proxies and main.
#[test]
fn try_iter_gets_every_due_item_sent_before_it_model() {
    model(try_iter_gets_every_due_item_sent_before_it);
}

/// With helping: three items through a two-slot egress ring; the polls move
/// what the full ring left in the index.
#[test]
fn try_iter_moves_what_a_full_ring_left_model() {
    model(|| try_iter_gets_every_due_item(true, 3));
}

/// A `take_pending` racing a `try_recv`: the command its push left to the
/// catch-up (which held the enqueue role) is applied after the release.
#[test]
fn a_command_sent_during_a_try_recv_is_applied_model() {
    model(a_command_sent_during_a_try_recv_is_applied);
}
