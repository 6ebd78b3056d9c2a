//! Containing panics of user code on the library's own threads and paths: an
//! item's (or a callback's, or a key's) `Drop` that panics, or a `Waker` whose
//! `wake` panics (a broken executor), must neither kill a thread the library
//! owns nor cut its bookkeeping short.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Waker;

/// Drops `values` one by one, catching a panicking `Drop`; returns how many
/// panicked. Every value is dropped, whatever the others do.
pub(crate) fn drop_contained<I: IntoIterator>(values: I) -> u64 {
    let mut panics = 0;
    for v in values {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(v))) {
            panics += 1;
            dispose(payload);
        }
    }
    panics
}

/// Wakes `w`, catching a panic in the waker (the executor's code, run on
/// whichever thread notifies: a proxy, or a client in the middle of a take).
/// The panic is reported by the panic hook as it happens and goes no further:
/// the waiters after it are still woken and the notifier's work goes on.
pub(crate) fn wake(w: Waker) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || w.wake())) {
        dispose(payload);
    }
}

/// Disposes of a caught panic's payload, whose own `Drop` may panic too (then
/// it is forgotten: a small leak, never an unwind).
pub(crate) fn dispose(payload: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}
