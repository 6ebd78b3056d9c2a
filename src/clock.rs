//! Clocks: where time enters the queue.
//!
//! The queue reads time only through its [`Clock`]. With [`SystemClock`] (the
//! default) deadlines are real `Instant`s and sleepers park with a timeout. With
//! [`MockClock`] time stands still until the test calls
//! [`advance`](MockClock::advance) or [`set`](MockClock::set), which wakes every
//! queue built on that clock so that it re-reads the time: tests (and loom models)
//! decide timing exactly, with no sleeps.

use crate::sync::{lock, Mutex, Parker};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The clock a queue reads: a [`SystemClock`] or a [`MockClock`].
///
/// Build one with `Clock::from(SystemClock)` / `Clock::from(mock.clone())`, or pass
/// either clock to [`Builder::clock`](crate::Builder::clock) directly.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    kind: Kind,
}

#[derive(Clone, Debug, Default)]
enum Kind {
    #[default]
    System,
    Mock(MockClock),
}

/// The operating system's monotonic clock (`Instant::now()`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SystemClock;

impl SystemClock {
    /// The current instant.
    pub fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that moves only when told to; for deterministic tests.
///
/// Clones share one time. Every queue built on the clock is woken by
/// [`advance`](MockClock::advance) and [`set`](MockClock::set), so an item falls due
/// exactly when the mock time passes its deadline.
///
/// # Examples
///
/// ```
/// use delayq::{Builder, MockClock};
/// use std::time::Duration;
///
/// let clock = MockClock::new();
/// let (tx, rx) = Builder::new().clock(clock.clone()).build::<&str>().unwrap();
/// tx.send_after("tea", Duration::from_secs(180)).unwrap();
/// assert!(rx.try_recv().is_err()); // not due: the mock time has not moved
/// clock.advance(Duration::from_secs(180));
/// assert_eq!(rx.recv(), Ok("tea"));
/// ```
#[derive(Clone)]
pub struct MockClock {
    inner: Arc<MockInner>,
}

struct MockInner {
    now: Mutex<Instant>,
    listeners: Mutex<Listeners>,
}

#[derive(Default)]
struct Listeners {
    next_id: u64,
    list: Vec<(u64, Arc<dyn Fn() + Send + Sync>)>,
}

impl MockClock {
    /// A mock clock that reads the real `Instant::now()` once, then stands still.
    pub fn new() -> MockClock {
        MockClock::starting_at(Instant::now())
    }

    /// A mock clock that stands at `start`.
    pub fn starting_at(start: Instant) -> MockClock {
        MockClock {
            inner: Arc::new(MockInner {
                now: Mutex::new(start),
                listeners: Mutex::new(Listeners::default()),
            }),
        }
    }

    /// The mock time.
    pub fn now(&self) -> Instant {
        *lock(&self.inner.now)
    }

    /// Moves the time forward by `by` and wakes every queue on this clock. A step
    /// that would overflow `Instant` is shortened to the largest one that does not.
    ///
    /// Returns once every queue on the clock has applied the sends made before the
    /// call and moved the items the step made due to its consumers' ring, so a
    /// `try_recv` right after `advance` sees them (as far as the ring has room).
    pub fn advance(&self, by: Duration) {
        {
            let mut now = lock(&self.inner.now);
            let mut step = by;
            *now = loop {
                match now.checked_add(step) {
                    Some(t) => break t,
                    None => step /= 2,
                }
            };
        }
        self.notify();
    }

    /// Sets the time to `to` and wakes every queue on this clock, returning as
    /// [`advance`](MockClock::advance) does. Time never runs backwards: a `to`
    /// earlier than the current mock time leaves it unchanged.
    pub fn set(&self, to: Instant) {
        {
            let mut now = lock(&self.inner.now);
            if to > *now {
                *now = to;
            }
        }
        self.notify();
    }

    fn notify(&self) {
        // Call the listeners with no lock held: they take the queues' own locks.
        let listeners: Vec<_> = lock(&self.inner.listeners).list.iter().map(|(_, f)| f.clone()).collect();
        for f in listeners {
            f();
        }
    }
}

impl Default for MockClock {
    fn default() -> Self {
        MockClock::new()
    }
}

impl fmt::Debug for MockClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockClock").field("now", &self.now()).finish()
    }
}

impl From<SystemClock> for Clock {
    fn from(_: SystemClock) -> Clock {
        Clock { kind: Kind::System }
    }
}

impl From<MockClock> for Clock {
    fn from(m: MockClock) -> Clock {
        Clock { kind: Kind::Mock(m) }
    }
}

impl Clock {
    /// The current instant by this clock.
    pub fn now(&self) -> Instant {
        match &self.kind {
            Kind::System => Instant::now(),
            Kind::Mock(m) => m.now(),
        }
    }

    /// `true` for a [`MockClock`].
    pub fn is_mock(&self) -> bool {
        matches!(self.kind, Kind::Mock(_))
    }

    /// Parks until unparked or until `deadline` by this clock. On a mock clock the
    /// park is untimed: the clock's `advance` unparks every subscribed sleeper.
    pub(crate) fn park(&self, parker: &Parker, deadline: Option<Instant>) {
        match &self.kind {
            Kind::System => parker.park(deadline),
            Kind::Mock(_) => parker.park(None),
        }
    }

    /// As [`park`](Clock::park), for a consumer that leads for a deadline:
    /// a system clock's timed park fires within `LEAD_TIMER_SLACK_NS` of it.
    pub(crate) fn park_lead(&self, parker: &Parker, deadline: Option<Instant>) {
        match (&self.kind, deadline) {
            (Kind::System, Some(d)) => {
                crate::sync::park_with_slack(parker, d, crate::sync::LEAD_TIMER_SLACK_NS)
            }
            _ => self.park(parker, deadline),
        }
    }

    /// Calls `listener` after every step of a mock clock ([`MockClock::advance`]
    /// or [`MockClock::set`]), on the stepping thread, until the returned
    /// [`Subscription`] is dropped. A system clock never calls it.
    ///
    /// Listeners run in subscription order, and the step returns once all have
    /// returned. Every queue subscribes when it is built (its listener returns
    /// once the step's due items are in its consumers' ring), so a layer that
    /// builds its queue first and subscribes second can wait, in its listener,
    /// for its own threads to handle what the step made due — as
    /// `delayq::workqueue` does, so that `advance` returns with the ready items
    /// counted.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::{Clock, MockClock};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let mock = MockClock::new();
    /// let steps = Arc::new(AtomicUsize::new(0));
    /// let seen = steps.clone();
    /// let sub = Clock::from(mock.clone()).subscribe(move || {
    ///     seen.fetch_add(1, Ordering::SeqCst);
    /// });
    /// mock.advance(Duration::from_secs(1));
    /// assert_eq!(steps.load(Ordering::SeqCst), 1);
    /// drop(sub);
    /// mock.advance(Duration::from_secs(1));
    /// assert_eq!(steps.load(Ordering::SeqCst), 1); // unsubscribed
    /// ```
    pub fn subscribe(&self, listener: impl Fn() + Send + Sync + 'static) -> Subscription {
        match &self.kind {
            Kind::System => Subscription { clock: None, id: 0 },
            Kind::Mock(m) => {
                let mut l = lock(&m.inner.listeners);
                let id = l.next_id;
                l.next_id += 1;
                l.list.push((id, Arc::new(listener)));
                Subscription { clock: Some(m.clone()), id }
            }
        }
    }
}

/// A clock listener, from [`Clock::subscribe`]; dropping it unsubscribes.
#[must_use = "dropping the subscription unsubscribes at once"]
pub struct Subscription {
    clock: Option<MockClock>,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(m) = &self.clock {
            lock(&m.inner.listeners).list.retain(|(id, _)| *id != self.id);
        }
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription").field("id", &self.id).finish()
    }
}

/// The tick of every deadline at or beyond the horizon: never due.
///
/// No clock reading maps to it ([`Ticks::now`] stops one tick short), so an item
/// with this deadline can only leave by `cancel`, `take_pending` or shutdown,
/// however far the clock runs.
pub(crate) const NEVER: u64 = u64::MAX;

/// Converts between `Instant`s and the `u64` nanosecond ticks the proxies order by.
///
/// The origin lies a century before the queue was built (or as far back as the
/// platform's `Instant` reaches), so past deadlines keep their exact value
/// (older ones are all "the origin", due at once, in key order; the index keeps
/// them at tick 1). Ticks run out `u64::MAX` nanoseconds after the origin, about 484 years
/// after the queue was built: the *horizon*.
///
/// - A deadline at or beyond the horizon becomes [`NEVER`]: it never falls due.
/// - A clock reading at or beyond the horizon becomes `NEVER - 1`: the clock stops
///   there, so every deadline before the horizon falls due in order, and no
///   `NEVER` deadline ever does. Saturating both to one value (as an earlier
///   version did) made centuries-away items due at once, in key order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ticks {
    origin: Instant,
}

impl Ticks {
    /// The origin a century before `now`, or as far back as the platform's
    /// `Instant` reaches (on some it cannot go back before boot): never `now`
    /// itself unless it cannot go back even 1 ns, so a clock reading is at least
    /// tick 1, where the index's deadlines start (`index::node::index_deadline`).
    pub(crate) fn new(now: Instant) -> Ticks {
        const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
        let mut back = CENTURY;
        let origin = loop {
            if let Some(o) = now.checked_sub(back) {
                break o;
            }
            if back <= Duration::from_nanos(1) {
                break now;
            }
            back /= 2;
        };
        Ticks { origin }
    }

    /// A deadline in ticks: [`NEVER`] at or beyond the horizon.
    pub(crate) fn of(&self, deadline: Instant) -> u64 {
        let d = deadline.saturating_duration_since(self.origin);
        u64::try_from(d.as_nanos()).unwrap_or(NEVER)
    }

    /// `delay` after the tick `from`: [`NEVER`] at or beyond the horizon.
    pub(crate) fn after(from: u64, delay: Duration) -> u64 {
        u64::try_from(delay.as_nanos()).map_or(NEVER, |d| from.saturating_add(d))
    }

    /// A clock reading in ticks: at most `NEVER - 1`, so it never reaches a
    /// `NEVER` deadline.
    pub(crate) fn now(&self, now: Instant) -> u64 {
        self.of(now).min(NEVER - 1)
    }

    /// The instant of a tick; [`NEVER`] reads as the horizon itself.
    pub(crate) fn instant(&self, ticks: u64) -> Instant {
        let d = Duration::from_nanos(ticks);
        self.origin.checked_add(d).unwrap_or(self.origin + Duration::from_nanos(ticks / 2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_stops_short_of_never_and_far_deadlines_become_never() {
        let t0 = Instant::now();
        let t = Ticks::new(t0);
        let year = Duration::from_secs(365 * 24 * 3600);
        assert_eq!(t.of(t0 + year * 600), NEVER);
        assert_eq!(t.of(t0 + year * 500), NEVER);
        assert!(t.of(t0 + year * 480) < NEVER);
        assert_eq!(t.now(t0 + year * 600), NEVER - 1);
        assert!(t.now(t0 + year * 490) < t.of(t0 + year * 500));
        assert_eq!(Ticks::after(t.now(t0), Duration::MAX), NEVER);
        assert_eq!(Ticks::after(NEVER - 1, Duration::from_nanos(1)), NEVER);
        assert_eq!(Ticks::after(5, Duration::from_nanos(1)), 6);
        // Round trips, and the past before the origin is the origin.
        assert_eq!(t.instant(t.of(t0)), t0);
        assert_eq!(t.of(t0 - Duration::from_secs(1)) + 1_000_000_000, t.of(t0));
        assert!(t.instant(NEVER) > t0 + year * 480);
    }
}
