//! Model 1: the proxy wakeup protocol (`src/wakeup.rs`), whole queue: an
//! earlier head inserted by the enqueue proxy while the dequeue proxy plans its
//! sleep is never stranded (mechanism 1). The rest of the protocol — no wakeup
//! for a later head, the `Bell` — is modelled on the internals in
//! `models/wakeup.rs`.
#![cfg(delayq_loom)]

use loom_tests::{earlier_head_is_delivered_without_a_clock_step, model};

/// Threads: main (producer and consumer) + the two proxies.
#[test]
fn earlier_head_is_never_stranded() {
    model(earlier_head_is_delivered_without_a_clock_step);
}
