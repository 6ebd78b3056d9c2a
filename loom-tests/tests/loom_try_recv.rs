//! Model 8: `try_recv` catches up (`dequeue::catch_up`): a poll after sends of
//! due items finds every one of them, whether they are still in the ingress
//! (a `Sync` round trip through the enqueue role), in the index (the caller
//! moves them under the dequeue role) or behind a full egress ring. Planted
//! bugs (`loom_planted_bug.rs`): `delayq_bug_catch_up_no_sync` skips the round
//! trip, `delayq_bug_catch_up_no_move` skips the move; each fails this model.
#![cfg(delayq_loom)]

use loom_tests::{model, try_iter_gets_every_due_item_sent_before_it};

/// Whole queue, public API. Threads: the two proxies and main.
#[test]
fn try_iter_gets_every_due_item_sent_before_it_model() {
    model(try_iter_gets_every_due_item_sent_before_it);
}
