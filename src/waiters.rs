//! Lists of blocked clients (consumers waiting for a due item, producers waiting
//! for room), and the one blocking loop they all use.
//!
//! An entry is a `std::task::Waker`: a thread registers a waker that unparks it,
//! and an async front-end can register its task's waker in the same list.
//!
//! Invariant (no lost wakeup): a waiter registers (SeqCst RMW on `len`, then a
//! SeqCst fence) *before* it re-checks its condition; a notifier makes the
//! condition true, then issues a SeqCst fence, *then* reads `len`. Either the
//! waiter's re-check sees the new state, or the notifier sees the registration.
//! Notifiers read `len` before taking the lock, so the hot path with nobody
//! waiting costs one fence and one load.

use crate::clock::Clock;
use crate::sync::{fence, lock, AtomicUsize, Mutex, Ordering, Parker, Unparker};
use std::collections::VecDeque;
use std::sync::Arc;
#[cfg(feature = "async")]
use std::task::{Context, Poll};
use std::task::{Wake, Waker};
use std::time::Instant;

#[derive(Debug, Default)]
pub(crate) struct Waiters {
    len: AtomicUsize,
    list: Mutex<List>,
}

#[derive(Debug, Default)]
struct List {
    next_id: u64,
    entries: VecDeque<(u64, Waker)>,
}

/// A waiter's ticket, used to unregister.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket(u64);

impl Waiters {
    pub(crate) fn register(&self, waker: &Waker) -> Ticket {
        let id = {
            let mut l = lock(&self.list);
            let id = l.next_id;
            l.next_id += 1;
            l.entries.push_back((id, waker.clone()));
            // SeqCst: the registration half of the invariant above.
            self.len.fetch_add(1, Ordering::SeqCst);
            id
        };
        // SeqCst: the waiter's re-check must not be ordered before the registration.
        fence(Ordering::SeqCst);
        Ticket(id)
    }

    /// Removes the entry; `false` if a notifier took it first (the waiter was woken).
    pub(crate) fn unregister(&self, t: Ticket) -> bool {
        let mut l = lock(&self.list);
        match l.entries.iter().position(|(id, _)| *id == t.0) {
            Some(i) => {
                l.entries.remove(i);
                self.len.fetch_sub(1, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    /// Wakes up to `n` waiters, oldest first.
    pub(crate) fn notify(&self, n: usize) {
        // SeqCst: the notifier half of the invariant; the caller changed the state.
        fence(Ordering::SeqCst);
        self.notify_after_fence(n);
    }

    /// As `notify`, for a caller that has just issued the SeqCst fence itself.
    pub(crate) fn notify_after_fence(&self, n: usize) {
        if n == 0 || self.len.load(Ordering::Relaxed) == 0 {
            return;
        }
        let woken: Vec<Waker> = {
            let mut l = lock(&self.list);
            let k = n.min(l.entries.len());
            self.len.fetch_sub(k, Ordering::SeqCst);
            l.entries.drain(..k).map(|(_, w)| w).collect()
        };
        // Wake with the lock released; a panicking waker wakes the rest.
        woken.into_iter().for_each(crate::contain::wake);
    }

    /// Whether anyone waits (a hint; read it after the notifier's fence).
    pub(crate) fn has_waiters(&self) -> bool {
        // Relaxed: a hint; `notify_after_fence` decides under the lock.
        self.len.load(Ordering::Relaxed) != 0
    }

    pub(crate) fn notify_all(&self) {
        self.notify(usize::MAX);
    }

    #[cfg(all(test, not(delayq_loom)))]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::SeqCst)
    }
}

/// A future's place in a waiter list, between its polls.
///
/// A poll tries, registers the task's waker, and tries again (the re-check that
/// prevents the lost wakeup, as in `block_on`). A future dropped while registered
/// leaves the list, and if a notifier had already taken its entry — a wakeup
/// meant for it that it will never use — passes the notification on to the next
/// waiter (async-channel's rule; without it a dropped future can strand an item
/// that another waiting task should get).
#[cfg(feature = "async")]
#[derive(Debug, Default)]
pub(crate) struct Slot {
    ticket: Option<Ticket>,
}

#[cfg(feature = "async")]
impl Slot {
    /// One poll of a future waiting in `list` until `attempt` returns `Some`
    /// (its argument: whether the task is registered in `list` then).
    pub(crate) fn poll<R>(
        &mut self,
        list: &Waiters,
        cx: &mut Context<'_>,
        mut attempt: impl FnMut(bool) -> Option<R>,
    ) -> Poll<R> {
        // Leave the list first: a notification we got is used by this attempt
        // (if the attempt fails, what we were woken for was taken by another).
        if let Some(t) = self.ticket.take() {
            list.unregister(t);
        }
        if let Some(r) = attempt(false) {
            return Poll::Ready(r);
        }
        let t = list.register(cx.waker());
        if let Some(r) = attempt(true) {
            if !list.unregister(t) {
                // Woken meanwhile for something the re-check did not take: pass it on.
                list.notify(1);
            }
            return Poll::Ready(r);
        }
        self.ticket = Some(t);
        Poll::Pending
    }

    /// The future is dropped (or done with the list): leave it, passing on a
    /// notification taken for us and not used.
    pub(crate) fn leave(&mut self, list: &Waiters) {
        if let Some(t) = self.ticket.take() {
            #[cfg(not(delayq_bug_async_drop_no_pass_on))]
            if !list.unregister(t) {
                list.notify(1);
            }
            // Planted bug for the loom suite: leave without passing a
            // notification on.
            #[cfg(delayq_bug_async_drop_no_pass_on)]
            list.unregister(t);
        }
    }
}

/// A `Waker` that unparks a thread: how a blocked thread sits in a waiter list
/// (`block_on`) or waits for a proxy's answer (`oneshot`).
pub(crate) struct ThreadWaker(Unparker);

impl ThreadWaker {
    /// A waker for the thread that parks on `parker`.
    pub(crate) fn waker(parker: &Parker) -> Waker {
        Waker::from(Arc::new(ThreadWaker(parker.unparker())))
    }
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Blocks the calling thread until `attempt` returns `Some`, or until `deadline`
/// (by `clock`) passes, which returns `None`.
///
/// The loop is: try; register; try again (the re-check that prevents the lost
/// wakeup); park. `attempt` must return `Some` for every final outcome (including
/// "disconnected"). A waiter that was notified but gives up on a timeout passes the
/// notification on, so the thing it was woken for is never stranded.
pub(crate) fn block_on<R>(
    waiters: &Waiters,
    clock: &Clock,
    deadline: Option<Instant>,
    mut attempt: impl FnMut() -> Option<R>,
) -> Option<R> {
    block_on_until(waiters, clock, deadline, |_| attempt().ok_or(None))
}

/// As [`block_on`], for an `attempt` that fails with a time to try again at
/// (`Err(Some(t))`, a consumer leading for the index's next deadline): the
/// thread then parks until `t` at the latest, still registered, so a
/// notification wakes it sooner. `Err(None)` parks until notified (or
/// `deadline`). `attempt`'s argument says whether the thread is registered
/// in `waiters` during that attempt (a consumer takes the lead, or asks a
/// role's holder to wake it, only then).
pub(crate) fn block_on_until<R>(
    waiters: &Waiters,
    clock: &Clock,
    deadline: Option<Instant>,
    mut attempt: impl FnMut(bool) -> Result<R, Option<Instant>>,
) -> Option<R> {
    if let Ok(r) = attempt(false) {
        return Some(r);
    }
    let parker = Parker::new();
    let waker = ThreadWaker::waker(&parker);
    let expired = |clock: &Clock| deadline.is_some_and(|d| clock.now() >= d);
    loop {
        let ticket = waiters.register(&waker);
        // The last attempt's answer decides how long to park.
        let again = match attempt(true) {
            Ok(r) => {
                if !waiters.unregister(ticket) {
                    // A notifier took our entry meanwhile, for something other
                    // than what the re-check found: pass the notification on
                    // (found by loom: `block_on_never_loses_a_notification`).
                    waiters.notify(1);
                }
                return Some(r);
            }
            Err(t) => t,
        };
        if expired(clock) {
            if !waiters.unregister(ticket) {
                waiters.notify(1);
            }
            return None;
        }
        let until = match (deadline, again) {
            (Some(d), Some(t)) => Some(d.min(t)),
            (d, t) => d.or(t),
        };
        clock.park(&parker, until);
        let notified = !waiters.unregister(ticket);
        if let Ok(r) = attempt(false) {
            return Some(r);
        }
        if expired(clock) {
            if notified {
                // We were woken for something we will not take: pass it on.
                waiters.notify(1);
            }
            return None;
        }
    }
}

#[cfg(all(test, not(delayq_loom)))]
mod tests {
    use super::*;
    use crate::sync::AtomicBool;

    #[test]
    fn notify_wakes_a_registered_thread_and_unregister_reports_it() {
        let w = Arc::new(Waiters::default());
        let flag = Arc::new(AtomicBool::new(false));
        let (w2, f2) = (w.clone(), flag.clone());
        let t = std::thread::spawn(move || {
            block_on(&w2, &Clock::default(), None, || f2.load(Ordering::SeqCst).then_some(7))
        });
        while w.len() == 0 {
            std::thread::yield_now();
        }
        flag.store(true, Ordering::SeqCst);
        w.notify(1);
        assert_eq!(t.join().unwrap(), Some(7));
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn times_out_on_a_past_deadline_without_parking() {
        let w = Waiters::default();
        let r: Option<()> = block_on(&w, &Clock::default(), Some(Instant::now()), || None);
        assert_eq!(r, None);
        assert_eq!(w.len(), 0);
    }
}
