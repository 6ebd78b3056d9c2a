//! The wake-up state a backend's waiting consumers share: a generation
//! counter and the due times that recent messages announced (a Redis
//! pub/sub message, a PostgreSQL notification), so that a consumer sleeps
//! until the earliest due time it knows of, or until a message announces an
//! earlier one. Fed by the backend's watcher (`redis_queue/watch.rs`,
//! `pg_queue/listen.rs`).
//!
//! The lost-wakeup rule: a consumer reads the [`Notifier`]'s generation
//! *before* it asks the server for a job, and sleeps only while no message
//! newer than that generation announces a due time earlier than its plan. A
//! job made pending after the server answered announces itself after that,
//! so its message is newer. A watcher that (re)connects announces `None`:
//! whatever was sent while it was not listening is unknown, so every waiter
//! re-checks.

use std::collections::VecDeque;
#[cfg(any(feature = "redis-async", feature = "postgres-async"))]
use std::future::Future;
#[cfg(any(feature = "redis-async", feature = "postgres-async"))]
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
#[cfg(any(feature = "redis-async", feature = "postgres-async"))]
use std::task::{Context, Poll};
use std::task::{Wake, Waker};
use std::time::Instant;

use crate::stop::StopSignal;

/// Messages remembered for waiters that have not looked yet.
const KEEP: usize = 256;

#[derive(Default)]
pub(crate) struct Notifier {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    gen: u64,
    /// `(generation, due µs)`; `None`: anything may have changed (re-check).
    recent: VecDeque<(u64, Option<i64>)>,
    closed: bool,
    /// Async waiters (`AsyncRedisQueue`, `AsyncPgQueue`), by registration id: woken, and the
    /// list emptied, by every announcement, close and stop signal.
    wakers: Vec<(u64, Waker)>,
    #[cfg(any(feature = "redis-async", feature = "postgres-async"))]
    next_waker: u64,
}

impl State {
    /// Whether a waiter that saw generation `seen`, planning to wake at
    /// `plan`, must re-check now (the handle closed, or a message it has not
    /// seen announces an earlier due time); moves `seen` on otherwise.
    fn must_recheck(&self, seen: &mut u64, plan: Option<i64>) -> bool {
        if self.closed {
            return true;
        }
        if self.gen > *seen {
            let oldest = self.recent.front().map_or(self.gen + 1, |&(g, _)| g);
            if oldest > *seen + 1 {
                return true; // some messages were dropped from `recent`: re-check
            }
            let relevant =
                self.recent.iter().filter(|&&(g, _)| g > *seen).any(|&(_, due)| match (due, plan) {
                    (None, _) | (_, None) => true,
                    (Some(due), Some(plan)) => due < plan,
                });
            if relevant {
                return true;
            }
            *seen = self.gen;
        }
        false
    }

    fn take_wakers(&mut self) -> Vec<(u64, Waker)> {
        std::mem::take(&mut self.wakers)
    }
}

/// Wakes every waker, each contained: run on the watcher thread (an
/// announcement), a closing client or a raiser of a stop signal, none of which
/// a panicking waker may stop or cut short.
fn wake_all(wakers: Vec<(u64, Waker)>) {
    for (_, w) in wakers {
        crate::contain::wake(w);
    }
}

impl Notifier {
    pub(crate) fn generation(&self) -> u64 {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).gen
    }

    /// A job became pending, due at `due` (server µs); `None`: re-check all.
    pub(crate) fn announce(&self, due: Option<i64>) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.gen += 1;
        let gen = s.gen;
        s.recent.push_back((gen, due));
        if s.recent.len() > KEEP {
            s.recent.pop_front();
        }
        let wakers = s.take_wakers();
        drop(s);
        self.changed.notify_all();
        wake_all(wakers);
    }

    pub(crate) fn close(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.closed = true;
        let wakers = s.take_wakers();
        drop(s);
        self.changed.notify_all();
        wake_all(wakers);
    }

    /// The async `wait`, without its time limit (the caller races it with a
    /// timer): ready when a waiter that saw `seen` and plans to wake at
    /// `plan` must re-check, or `stop` is raised. Registers the task's waker
    /// and checks under the state lock (register and re-check), so an
    /// announcement is either seen or wakes the task.
    #[cfg(any(feature = "redis-async", feature = "postgres-async"))]
    pub(crate) fn notified<'a>(
        &'a self,
        seen: u64,
        plan: Option<i64>,
        stop: Option<&'a StopSignal>,
    ) -> Notified<'a> {
        Notified { notifier: self, seen, plan, stop, id: None }
    }

    /// Sleeps until `until` (`None`: no limit), unless a message newer than
    /// `seen` announces a due time before `plan` (server µs; `None`: the
    /// waiter knows of no due time, so any message counts), the handle
    /// closes, or `stop` is raised (its caller registered this notifier's
    /// waker with it: see `Wake for Notifier`).
    pub(crate) fn wait(
        &self,
        mut seen: u64,
        plan: Option<i64>,
        until: Option<Instant>,
        stop: Option<&StopSignal>,
    ) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            // Checked under the state lock, which the wake below takes before
            // it notifies: a raise is either seen here or wakes the wait.
            if stop.is_some_and(StopSignal::is_raised) || s.must_recheck(&mut seen, plan) {
                return;
            }
            match until {
                None => s = self.changed.wait(s).unwrap_or_else(PoisonError::into_inner),
                Some(t) => {
                    let left = t.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return;
                    }
                    s = self.changed.wait_timeout(s, left).unwrap_or_else(PoisonError::into_inner).0;
                }
            }
        }
    }
}

/// A [`StopSignal`] raised wakes the notifier's waiters so that those
/// waiting on that signal return. Taking the state lock before notifying
/// orders the wake after any waiter's check of the signal.
impl Wake for Notifier {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let wakers = self.state.lock().unwrap_or_else(PoisonError::into_inner).take_wakers();
        self.changed.notify_all();
        wake_all(wakers);
    }
}

/// The future of [`Notifier::notified`]; its registration ends when dropped.
#[cfg(any(feature = "redis-async", feature = "postgres-async"))]
pub(crate) struct Notified<'a> {
    notifier: &'a Notifier,
    seen: u64,
    plan: Option<i64>,
    stop: Option<&'a StopSignal>,
    id: Option<u64>,
}

#[cfg(any(feature = "redis-async", feature = "postgres-async"))]
impl Future for Notified<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let mut s = this.notifier.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(id) = this.id.take() {
            s.wakers.retain(|(i, _)| *i != id);
        }
        // The stop signal's waker (registered by the caller) is this
        // notifier, whose wake takes this lock: a raise is seen here or wakes.
        if this.stop.is_some_and(StopSignal::is_raised) || s.must_recheck(&mut this.seen, this.plan) {
            return Poll::Ready(());
        }
        let id = s.next_waker;
        s.next_waker += 1;
        s.wakers.push((id, cx.waker().clone()));
        this.id = Some(id);
        Poll::Pending
    }
}

#[cfg(any(feature = "redis-async", feature = "postgres-async"))]
impl Drop for Notified<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.notifier
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .wakers
                .retain(|(i, _)| *i != id);
        }
    }
}
