//! Model 1: the new-head signal (`src/enqueue.rs`, `src/lead.rs`), whole
//! queue: an earlier head inserted while a consumer leads for a later one
//! reaches it. The hand-offs themselves are modelled on the internals in
//! `models/lead.rs`, the proxies' bell in `models/wakeup.rs`.
#![cfg(delayq_loom)]

use loom_tests::{earlier_head_is_delivered_without_a_clock_step, model};

/// Threads: main (producer), a consumer + the two proxies.
#[test]
fn earlier_head_is_never_stranded() {
    model(earlier_head_is_delivered_without_a_clock_step);
}
