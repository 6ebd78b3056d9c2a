//! [`StopSignal`]: ends a blocked [`reserve_or_stop`](crate::JobQueue::reserve_or_stop)
//! from another thread, so that an idle consumer can block without a timeout
//! and still stop at once (what a [`Worker`](crate::Worker)'s shutdown uses).
//!
//! The protocol: a waiter registers a [`Waker`] and, under the same lock,
//! checks the flag (register and re-check); `raise` sets the flag *before* it
//! takes the lock and wakes every waker registered. So a waiter either sees
//! the flag when it registers, or is registered when `raise` takes the list,
//! and is woken: no lost wake-up. Wakers are called with the lock released,
//! each contained (`contain.rs`): one that panics does not stop the rest.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Wake, Waker};
use std::thread::Thread;

/// A flag, raised once, that ends the
/// [`reserve_or_stop`](crate::JobQueue::reserve_or_stop) calls waiting on it
/// (and makes later ones return at once). Clones share the flag.
///
/// ```
/// use std::time::Duration;
/// use delayq_durable::{DurableQueue, StopSignal};
///
/// # let dir = std::env::temp_dir().join(format!("delayq-doc-stop-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let q = DurableQueue::open(dir.join("stop.redb")).unwrap();
/// let stop = StopSignal::new();
/// let raiser = stop.clone();
/// let t = std::thread::spawn(move || raiser.raise());
/// // Blocks (no job is due) until the other thread raises the signal.
/// assert_eq!(q.reserve_or_stop(Duration::from_secs(30), &stop).unwrap(), None);
/// assert!(stop.is_raised());
/// t.join().unwrap();
/// # drop(q); std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Clone, Default)]
pub struct StopSignal {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    raised: AtomicBool,
    waiters: Mutex<Waiters>,
}

#[derive(Default)]
struct Waiters {
    next: u64,
    list: Vec<(u64, Waker)>,
}

impl fmt::Debug for StopSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StopSignal").field("raised", &self.is_raised()).finish()
    }
}

impl StopSignal {
    /// A signal not raised yet.
    pub fn new() -> StopSignal {
        StopSignal::default()
    }

    /// Raises the signal: every `reserve_or_stop` waiting on it returns
    /// `Ok(None)` (one that already holds a due job returns the job), and
    /// later calls return at once. Idempotent; returns at once.
    pub fn raise(&self) {
        // SeqCst: ordered before the lock below, which every registration
        // takes; a registration after it sees `true`.
        self.inner.raised.store(true, Ordering::SeqCst);
        let woken = std::mem::take(&mut self.lock().list);
        // A panicking waker (a broken executor) neither stops the others
        // from being woken nor unwinds into the raiser.
        for (_, waker) in woken {
            crate::contain::wake(waker);
        }
    }

    /// Whether [`raise`](Self::raise) was called.
    pub fn is_raised(&self) -> bool {
        self.inner.raised.load(Ordering::SeqCst)
    }

    fn lock(&self) -> MutexGuard<'_, Waiters> {
        self.inner.waiters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `waker` to be woken by `raise`, unless the signal is raised
    /// already (`None`: do not wait). The registration ends when dropped.
    pub(crate) fn register(&self, waker: &Waker) -> Option<Registration<'_>> {
        let mut w = self.lock();
        if self.is_raised() {
            return None;
        }
        let id = w.next;
        w.next += 1;
        w.list.push((id, waker.clone()));
        Some(Registration { signal: self, id })
    }
}

/// A waker registered with a [`StopSignal`]; dropping it unregisters.
pub(crate) struct Registration<'a> {
    signal: &'a StopSignal,
    id: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.signal.lock().list.retain(|(id, _)| *id != self.id);
    }
}

/// Wakes a thread blocked waiting for a job (`DurableQueue::next_wakeup`,
/// which waits on the core queue, the parked wake-ups and a `StopSignal`
/// at once).
pub(crate) struct Unpark(pub(crate) Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}
