//! Model 6: the async front-end's waker registration (`waiters::Slot`, used by
//! `recv_async`) racing a delivery and a future's drop. Built with
//! `--cfg delayq_bug_async_drop_no_pass_on` (a dropped future leaves the waiter
//! list without passing on a wakeup it got), this model must fail:
//! `loom_planted_bug.rs` checks that it does.
#![cfg(delayq_loom)]

use loom_tests::{dropped_future_passes_its_wakeup_on, model};

/// Threads: main (future A), task B's thread, and the two proxies.
#[test]
fn a_dropped_future_passes_its_wakeup_on() {
    model(dropped_future_passes_its_wakeup_on);
}
