//! Containing a panicking [`Waker`]. A waker is an executor's code, run by
//! whichever thread wakes it: the writer thread answering a commit, a Redis
//! handle's watcher thread announcing a job, a client raising a
//! [`StopSignal`](crate::StopSignal) or polling a future that rings another
//! task's deadline. One whose `wake` panics must neither kill a thread this
//! package owns nor cut that thread's work short (the wakers after it, the
//! rest of a commit's answers). The core crate does the same for its own
//! wakes, in a module private to it.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::task::Waker;

/// Wakes `w`, catching a panic in its `wake`. The panic hook has reported the
/// panic as it happened; it goes no further, and the caller goes on.
pub(crate) fn wake(w: Waker) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || w.wake())) {
        dispose(payload);
    }
}

/// Drops a caught panic's payload; one whose own `Drop` panics as well is
/// forgotten (a small leak, never an unwind).
fn dispose(payload: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}
