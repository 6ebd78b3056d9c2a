//! The planted bugs stay findable. Each is compiled in by its own cfg, and the
//! whole-queue model that guards against it must then fail:
//!
//! - `--cfg delayq_bug_async_drop_no_pass_on`: a dropped async receive leaves
//!   the waiter list without passing on a wakeup meant for it (see
//!   `src/waiters.rs`). The model of `loom_async.rs` must fail.
//! - `--cfg delayq_bug_catch_up_no_look`: `try_recv`'s catch-up releases the
//!   enqueue role without looking at the ingress again (`src/dequeue.rs`):
//!   the model `a_command_sent_during_a_try_recv_is_applied` must deadlock.
//! - `--cfg delayq_bug_catch_up_no_sync` and `--cfg delayq_bug_catch_up_no_move`:
//!   `try_recv`'s catch-up skips applying the commands still in the ingress,
//!   or the move of the index's due items (see `src/dequeue.rs`). The model
//!   of `loom_try_recv.rs` must fail (an assertion, not a deadlock).
//!
//! (The planted bugs of the component models, `models/`, are checked by
//! `.ci/loom.sh` on the crate's own tests: among them
//! `delayq_bug_new_head_no_fence`, which the whole-queue earlier-head model
//! of `loom_wakeup.rs` does not reach at preemption bound 2 — its
//! store-buffering pair has too many steps around it — and
//! `models/lead.rs` does.)
//!
//! A loom failure cannot be caught in-process (its deadlock panic unwinds through
//! the queue's destructors, which call loom again: the process aborts), so the
//! test re-runs itself as a child process and asserts that the child failed with
//! loom's report. Run (as `.ci/loom.sh` does):
//!
//! ```text
//! RUSTFLAGS="--cfg delayq_loom --cfg delayq_bug_catch_up_no_move" CARGO_TARGET_DIR=target/loom-bug \
//!     cargo test -p loom-tests --release --test loom_planted_bug
//! ```
#![cfg(all(
    delayq_loom,
    any(
        delayq_bug_async_drop_no_pass_on,
        delayq_bug_catch_up_no_sync,
        delayq_bug_catch_up_no_move,
        delayq_bug_catch_up_no_look
    )
))]

use loom_tests::model;
use std::process::Command;
use std::time::Instant;

const CHILD: &str = "DELAYQ_LOOM_PLANTED_CHILD";
const NAME: &str = "loom_finds_the_planted_bug";

/// The planted bug this build carries, the model that must find it, and what
/// the failing model's report must say.
fn planted() -> (&'static str, fn(), &'static str) {
    #[cfg(delayq_bug_async_drop_no_pass_on)]
    return (
        "a dropped future keeping its wakeup",
        loom_tests::dropped_future_passes_its_wakeup_on,
        "deadlock",
    );
    #[cfg(all(
        any(delayq_bug_catch_up_no_sync, delayq_bug_catch_up_no_move),
        not(delayq_bug_async_drop_no_pass_on)
    ))]
    return (
        "try_recv not catching up",
        loom_tests::try_iter_gets_every_due_item_sent_before_it,
        "try_recv missed a due item",
    );
    #[cfg(delayq_bug_catch_up_no_look)]
    return (
        "a command left behind by try_recv's catch-up",
        loom_tests::a_command_sent_during_a_try_recv_is_applied,
        "deadlock",
    );
}

#[test]
fn loom_finds_the_planted_bug() {
    let (bug, scenario, report) = planted();
    if std::env::var_os(CHILD).is_some() {
        model(scenario);
        return;
    }
    let start = Instant::now();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("re-run the test binary");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "loom explored the model and missed the planted bug ({bug}):\n{text}");
    assert!(text.contains(report), "the model failed, but its report does not say {report:?}:\n{text}");
    let line = text.lines().find(|l| l.contains(report)).unwrap_or_default();
    eprintln!("loom found the planted bug ({bug}) in {:.1} s: {line}", start.elapsed().as_secs_f64());
}
