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
    /// Blocked threads (not tasks) that a notifier took from the list and
    /// that have not yet run: each will look at its condition before it
    /// parks again (`block_on_until`), so a notifier whose wake would only
    /// add a second look may skip it ([`Waiters::wake_one_unless_woken`]).
    woken: AtomicUsize,
    list: Mutex<List>,
}

#[derive(Debug, Default)]
struct List {
    next_id: u64,
    /// `(ticket, waker, whether a blocked thread registered it)`.
    entries: VecDeque<(u64, Waker, bool)>,
}

/// A waiter's ticket, used to unregister: its id, and whether a blocked
/// thread holds it (the list's count of woken threads counts those).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket(u64, bool);

impl Waiters {
    /// Registers a task's waker (an async front-end's).
    #[cfg_attr(not(feature = "async"), allow(dead_code))]
    pub(crate) fn register(&self, waker: &Waker) -> Ticket {
        self.enter(waker, false)
    }

    /// Registers a blocked thread's waker (`block_on_until`): counted among
    /// the woken threads from its notification until it unregisters.
    pub(crate) fn register_thread(&self, waker: &Waker) -> Ticket {
        self.enter(waker, true)
    }

    fn enter(&self, waker: &Waker, thread: bool) -> Ticket {
        let id = {
            let mut l = lock(&self.list);
            let id = l.next_id;
            l.next_id += 1;
            l.entries.push_back((id, waker.clone(), thread));
            // SeqCst: the registration half of the invariant above.
            self.len.fetch_add(1, Ordering::SeqCst);
            id
        };
        // SeqCst: the waiter's re-check must not be ordered before the registration.
        fence(Ordering::SeqCst);
        Ticket(id, thread)
    }

    /// Removes the entry; `false` if a notifier took it first (the waiter was woken).
    pub(crate) fn unregister(&self, t: Ticket) -> bool {
        let mut l = lock(&self.list);
        match l.entries.iter().position(|(id, _, _)| *id == t.0) {
            Some(i) => {
                l.entries.remove(i);
                self.len.fetch_sub(1, Ordering::SeqCst);
                true
            }
            None => {
                // Relaxed (under the list's lock, as the notifier's add): the
                // woken thread looks again before it parks, and the register
                // before that look fences (`wake_one_unless_woken`).
                // Planted bug for the loom suite: a woken thread stays
                // counted, so notifiers skip wakes that nobody covers.
                #[cfg(not(delayq_bug_woken_never_runs))]
                if t.1 {
                    self.woken.fetch_sub(1, Ordering::Relaxed);
                }
                false
            }
        }
    }

    /// Wakes one waiting thread unless `bound()` threads already woken have
    /// not run yet (0: none wanted): each will look before it parks again, so
    /// another wake would only add a runnable thread (a consumer's take that
    /// leaves items behind: `receiver::taken`; tokio's scheduler bounds its
    /// searching workers alike). `bound` runs only when someone waits. Called
    /// after the caller's SeqCst fence, which follows its change of the state.
    ///
    /// Why nothing is left behind, for any wanted bound: a woken thread leaves
    /// the count (`unregister`), looks, and if it finds nothing registers again
    /// (a SeqCst fence) and looks once more before it parks. Either the
    /// caller's fence comes first in the SeqCst order, and that last look sees
    /// its change, or the woken thread's, and the caller reads the count
    /// without it. Loom: `models/blocking.rs`
    /// (`a_woken_consumer_covers_a_take_that_leaves_items`, planted bug
    /// `delayq_bug_woken_never_runs`).
    pub(crate) fn wake_one_unless_woken(&self, bound: impl FnOnce() -> usize) {
        // Relaxed: ordered by the caller's fence, as above (`len` is a hint;
        // `notify_after_fence` decides under the lock).
        if self.len.load(Ordering::Relaxed) != 0 && self.woken.load(Ordering::Relaxed) < bound() {
            self.notify_after_fence(1);
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
        let mut l = lock(&self.list);
        let k = n.min(l.entries.len());
        self.len.fetch_sub(k, Ordering::SeqCst);
        if k == 1 {
            // One waiter, the usual case: no list of wakers to allocate.
            let (_, w, thread) = l.entries.pop_front().expect("k == 1");
            if thread {
                self.woken.fetch_add(1, Ordering::Relaxed);
            }
            drop(l);
            crate::contain::wake(w);
            return;
        }
        let woken: Vec<Waker> = l
            .entries
            .drain(..k)
            .map(|(_, w, thread)| {
                if thread {
                    self.woken.fetch_add(1, Ordering::Relaxed);
                }
                w
            })
            .collect();
        drop(l);
        // Wake with the lock released; a panicking waker wakes the rest.
        woken.into_iter().for_each(crate::contain::wake);
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
    let expired = |clock: &Clock| deadline.is_some_and(|d| clock.now() >= d);
    with_thread_parker(|parker, waker| {
        loop {
            let ticket = waiters.register_thread(waker);
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
            if again.is_some() {
                clock.park_lead(parker, until);
            } else {
                clock.park(parker, until);
            }
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
    })
}

/// Runs `f` with this thread's parker and its waker, made once per thread
/// (a blocking call would otherwise allocate both: two `Arc`s, made and
/// freed per blocked receive). A nested block — an item's `Drop`, run
/// inside an attempt, that blocks again — finds the pair taken and makes
/// its own, so the outer block's unpark token is never consumed by the
/// inner one. A token left over from an earlier block only makes the next
/// park return at once, which the loop treats as a spurious wake-up. Under
/// loom, a fresh pair per call.
fn with_thread_parker<R>(f: impl FnOnce(&Parker, &Waker) -> R) -> R {
    let fresh = || {
        let parker = Parker::new();
        let waker = ThreadWaker::waker(&parker);
        (parker, waker)
    };
    #[cfg(not(delayq_loom))]
    {
        thread_local! {
            static PAIR: std::cell::Cell<Option<(Parker, Waker)>> = const { std::cell::Cell::new(None) };
        }
        let (parker, waker) = PAIR.try_with(std::cell::Cell::take).ok().flatten().unwrap_or_else(fresh);
        let r = f(&parker, &waker);
        // Put back (a panic in `f` drops the pair instead; the next block makes one).
        let _ = PAIR.try_with(|p| p.set(Some((parker, waker))));
        r
    }
    #[cfg(delayq_loom)]
    {
        let (parker, waker) = fresh();
        f(&parker, &waker)
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
    fn a_thread_reuses_its_parker_and_a_nested_block_gets_its_own() {
        let outer = with_thread_parker(|_, w| w.clone());
        let again = with_thread_parker(|_, w| w.clone());
        assert!(again.will_wake(&outer), "one pair per thread");
        with_thread_parker(|_, w| {
            let nested = with_thread_parker(|_, n| n.clone());
            assert!(!nested.will_wake(w), "a nested block must not share the outer one's token");
        });
        // A token left by a late notifier only makes the next park spurious:
        // the block still lasts until its deadline.
        outer.wake_by_ref();
        let w = Waiters::default();
        let start = Instant::now();
        let deadline = start + std::time::Duration::from_millis(20);
        let r: Option<()> = block_on(&w, &Clock::default(), Some(deadline), || None);
        assert_eq!(r, None);
        assert!(Instant::now() >= deadline, "a stale token ended the block early");
        assert_eq!(w.len(), 0);
    }

    struct Nop;

    impl Wake for Nop {
        fn wake(self: Arc<Self>) {}
    }

    #[test]
    fn wake_one_unless_woken_stops_at_its_bound_and_a_woken_threads_look_frees_a_place() {
        let w = Waiters::default();
        // Five blocked threads' entries; each wake takes one off the list.
        let mut tickets: Vec<Ticket> =
            (0..5).map(|_| w.register_thread(&Waker::from(Arc::new(Nop)))).collect();
        let woken = |w: &Waiters| 5 - w.len();
        for (b, n) in [(1, 1), (1, 1), (0, 1), (3, 2), (3, 3), (3, 3)] {
            w.wake_one_unless_woken(|| b);
            assert_eq!(woken(&w), n, "bound {b}");
        }
        // The oldest woken thread runs: its unregister finds its entry taken
        // and leaves the count of woken threads, so a place is free again.
        assert!(!w.unregister(tickets.remove(0)), "a wake took the oldest entry");
        w.wake_one_unless_woken(|| 3);
        assert_eq!(woken(&w), 4);
    }

    #[test]
    fn times_out_on_a_past_deadline_without_parking() {
        let w = Waiters::default();
        let r: Option<()> = block_on(&w, &Clock::default(), Some(Instant::now()), || None);
        assert_eq!(r, None);
        assert_eq!(w.len(), 0);
    }
}
