//! A one-shot reply from the writer thread to the caller waiting on a group commit.
//!
//! The caller either parks on a condvar ([`Waiting::wait`]) or, from async
//! code, awaits [`Waiting`] as a future: the writer's fill wakes both (the
//! condvar, and the task's [`Waker`] if one is registered), so an async caller
//! waits without blocking a thread. If the writer drops a `Reply` without
//! filling it (it panicked, or shut down with the op still queued), the drop
//! fills it with [`DurableError::Closed`], so a caller can never wait forever
//! on a reply that will not come.
//!
//! A caller that gives up — drops its `Waiting` unfilled, as a dropped future
//! does — marks the slot abandoned; the writer checks that before it applies
//! a lease (`Reply::is_abandoned`), so a lease nobody will receive is not
//! taken (see `async_queue.rs` on cancellation).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use crate::error::DurableError;

type Outcome<T> = Result<T, DurableError>;

struct Slot<T> {
    state: Mutex<State<T>>,
    filled: Condvar,
    /// Set when the caller's half is dropped before it took the value.
    abandoned: AtomicBool,
}

struct State<T> {
    value: Option<Outcome<T>>,
    /// The task to wake when the value arrives (async callers only).
    waker: Option<Waker>,
    /// The value was taken by the caller.
    taken: bool,
}

impl<T> Slot<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The writer's half: fill it once.
pub(crate) struct Reply<T> {
    slot: Option<Arc<Slot<T>>>,
}

/// The caller's half: wait for the value, blocking ([`wait`](Self::wait)) or
/// as a future.
pub(crate) struct Waiting<T> {
    slot: Arc<Slot<T>>,
}

pub(crate) fn reply<T>() -> (Reply<T>, Waiting<T>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State { value: None, waker: None, taken: false }),
        filled: Condvar::new(),
        abandoned: AtomicBool::new(false),
    });
    (Reply { slot: Some(slot.clone()) }, Waiting { slot })
}

impl<T> Reply<T> {
    pub(crate) fn send(self, value: Outcome<T>) {
        self.deliver(value);
    }

    /// As `send`, but gives the value back if the caller has given up (its
    /// half was dropped unfilled): decided under the slot's lock, so exactly
    /// one of the two sides owns the value.
    pub(crate) fn deliver(mut self, value: Outcome<T>) -> Option<Outcome<T>> {
        self.slot.take().and_then(|slot| fill(&slot, value))
    }

    /// Whether the caller has given up waiting (dropped its half unfilled).
    pub(crate) fn is_abandoned(&self) -> bool {
        // Acquire: pairs with the Release in `Waiting::drop`; a late answer
        // only costs a lease that expires, so no stronger order is needed.
        self.slot.as_ref().is_some_and(|s| s.abandoned.load(Ordering::Acquire))
    }
}

/// Stores the value and wakes the caller; returns it if the caller is gone.
fn fill<T>(slot: &Slot<T>, value: Outcome<T>) -> Option<Outcome<T>> {
    let mut guard = slot.lock();
    if guard.value.is_some() || guard.taken {
        return None;
    }
    // Relaxed: `abandoned` is only stored under this lock.
    if slot.abandoned.load(Ordering::Relaxed) {
        return Some(value);
    }
    guard.value = Some(value);
    let waker = guard.waker.take();
    drop(guard);
    slot.filled.notify_one();
    // Woken with the lock released, and contained: this is mostly the writer
    // thread answering a commit, whose other answers must still go out.
    if let Some(waker) = waker {
        crate::contain::wake(waker);
    }
    None
}

impl<T> Drop for Reply<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            let _ = fill(&slot, Err(DurableError::Closed));
        }
    }
}

impl<T> Waiting<T> {
    /// A reply that is already there (an answer known without the writer).
    pub(crate) fn ready(value: Outcome<T>) -> Waiting<T> {
        let (r, w) = reply();
        r.send(value);
        w
    }

    /// Blocks the calling thread until the writer answers.
    pub(crate) fn wait(self) -> Outcome<T> {
        let mut guard = self.slot.lock();
        loop {
            if let Some(value) = guard.value.take() {
                guard.taken = true;
                return value;
            }
            guard = self.slot.filled.wait(guard).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Gives up waiting: the value, if it has arrived (it is the caller's
    /// now); else `None`, with the slot marked abandoned, so that the
    /// writer's `deliver` hands its value back. Both are decided in one hold
    /// of the slot's lock: a look, then a drop that marks it, left a window
    /// in which a fill landed unseen and a leased job went with the slot
    /// until its lease ran out (`embedded_async`'s
    /// `a_reserve_dropped_while_its_lease_commits_…` caught it once in CI).
    #[cfg(feature = "async")]
    pub(crate) fn abandon(self) -> Option<Outcome<T>> {
        let mut guard = self.slot.lock();
        let value = guard.value.take();
        if value.is_some() {
            guard.taken = true;
        } else {
            // Release: as in `drop`; `fill` reads it under this lock.
            self.slot.abandoned.store(true, Ordering::Release);
        }
        value
    }
}

/// Awaiting a reply: registers the task's waker under the slot's lock and
/// checks the value under the same lock (register and re-check), so a fill
/// either is seen here or finds the waker and wakes it.
impl<T> Future for Waiting<T> {
    type Output = Outcome<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome<T>> {
        let mut guard = self.slot.lock();
        if let Some(value) = guard.value.take() {
            guard.taken = true;
            return Poll::Ready(value);
        }
        match &mut guard.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Drop for Waiting<T> {
    fn drop(&mut self) {
        let mut guard = self.slot.lock();
        if !guard.taken && guard.value.is_none() {
            // Release: seen by the writer's `is_abandoned` (Acquire); `fill`
            // reads it under this lock.
            self.slot.abandoned.store(true, Ordering::Release);
        }
        guard.waker = None;
    }
}

#[cfg(all(test, feature = "async"))]
mod tests {
    use super::*;

    #[test]
    fn an_abandoned_reply_hands_a_later_value_back_and_a_filled_one_to_the_caller() {
        let (r, w) = reply::<u32>();
        assert!(w.abandon().is_none(), "nothing arrived yet");
        assert!(matches!(r.deliver(Ok(5)), Some(Ok(5))), "the writer keeps what nobody will take");

        let (r, w) = reply::<u32>();
        assert!(r.deliver(Ok(7)).is_none(), "the caller still waits");
        assert!(matches!(w.abandon(), Some(Ok(7))), "the caller gets what arrived");
    }
}
