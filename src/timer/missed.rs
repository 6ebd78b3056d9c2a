//! What a repeating timer does when it falls behind: the `MissedTicks` policies
//! and the arithmetic of its grid (`first + k·interval`), with no loops over
//! missed ticks, so a timer years behind costs the same as one a tick behind.

use std::time::{Duration, Instant};

/// At most this many runs of one repeating timer back to back in one
/// [`MissedTicks::Burst`] catch-up (the late run included).
pub(crate) const BURST_LIMIT: u64 = 1024;

/// What a repeating timer ([`Scheduler::schedule_every`](super::Scheduler::schedule_every))
/// does when it has fallen behind.
///
/// A timer has *fallen behind* when a run finishes at a time `now` at or after
/// the timer's next grid time (`due + interval`, where `due` is the grid time of
/// the run that just finished): a slow callback, a stalled process, busy workers
/// or a clock that jumped made it miss ticks. A run that started late but left
/// the next grid time in the future has missed nothing, and every policy keeps
/// the grid `first + k·interval` then.
///
/// The names follow tokio's `MissedTickBehavior`. The `tao` TimingWheel of seed
/// 001 has one fixed rule (a timer 10 s late or more restarts from "now"), which
/// is [`Delay`](MissedTicks::Delay) applied at any lateness.
///
/// # Examples
///
/// A timer every second, first due after one second, whose process stalls for
/// 12.5 s (the seed's case of a timer more than 10 s late):
///
/// ```
/// use delayq::timer::{MissedTicks, Scheduler};
/// use delayq::MockClock;
/// use std::sync::mpsc;
/// use std::time::Duration;
///
/// let clock = MockClock::new();
/// let s = Scheduler::builder().threads(1).clock(clock.clone()).build().unwrap();
/// let (tx, rx) = mpsc::channel();
/// let start = clock.now();
/// let c = clock.clone();
/// s.schedule_every(start + Duration::from_secs(1), Duration::from_secs(1), MissedTicks::Skip, move || {
///     tx.send(c.now() - start).unwrap();
/// });
/// clock.advance(Duration::from_millis(12_500));
/// assert_eq!(rx.recv().unwrap(), Duration::from_millis(12_500)); // one late run
///
/// // One worker runs callbacks in due order: once this one has run, the timer
/// // has planned its next run (by the time its late run returned).
/// let (done_tx, done) = mpsc::channel();
/// s.schedule_at(clock.now(), move || done_tx.send(()).unwrap());
/// done.recv().unwrap();
///
/// clock.advance(Duration::from_millis(500)); // Skip: back on the grid, at 13 s
/// assert_eq!(rx.recv().unwrap(), Duration::from_secs(13));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MissedTicks {
    /// Runs every missed tick, back to back on the same worker, then goes on
    /// with the original grid. A catch-up runs at most 1024 times in a row (the
    /// late run included); if more ticks were missed, the older ones are
    /// dropped, so a timer far behind (or a `first` far in the past) never
    /// loops for long.
    Burst,
    /// Runs once, then schedules the next run one `interval` after the time the
    /// late run finished (`now + interval`): the grid shifts.
    Delay,
    /// Runs once, then drops the missed ticks and goes on with the original grid:
    /// the next run is at the first `first + k·interval` after `now`.
    Skip,
}

/// What to do after a run of a repeating timer finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Further runs to make now, back to back (only `Burst` asks for any).
    pub(crate) extra: u64,
    /// The grid time of the next run; `None` if `Instant` cannot hold it (the
    /// timer then never runs again).
    pub(crate) next: Option<Instant>,
}

impl MissedTicks {
    /// The plan after the run due at `due` finished at `now`. `interval` is not
    /// zero (a zero interval makes a one-shot timer).
    pub(crate) fn plan(self, due: Instant, now: Instant, interval: Duration) -> Plan {
        debug_assert!(!interval.is_zero());
        let next = match due.checked_add(interval) {
            None => return Plan { extra: 0, next: None },
            Some(next) if next > now => return Plan { extra: 0, next: Some(next) },
            Some(next) => next,
        };
        // Behind: the grid points in (due, now] were missed; there are `missed` ≥ 1.
        debug_assert!(next <= now);
        let missed = (now - due).as_nanos() / interval.as_nanos();
        match self {
            MissedTicks::Burst => Plan {
                extra: u64::try_from(missed).unwrap_or(u64::MAX).min(BURST_LIMIT - 1),
                next: grid(due, interval, missed + 1),
            },
            MissedTicks::Delay => Plan { extra: 0, next: now.checked_add(interval) },
            MissedTicks::Skip => Plan { extra: 0, next: grid(due, interval, missed + 1) },
        }
    }
}

/// `from + k·interval`, or `None` if `Instant` cannot hold it.
fn grid(from: Instant, interval: Duration, k: u128) -> Option<Instant> {
    let nanos = interval.as_nanos().checked_mul(k)?;
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    // The remainder of a division by 10^9 fits a u32.
    let sub = (nanos % 1_000_000_000) as u32;
    from.checked_add(Duration::new(secs, sub))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn on_time_keeps_the_grid_for_every_policy() {
        let t0 = Instant::now();
        for p in [MissedTicks::Burst, MissedTicks::Delay, MissedTicks::Skip] {
            assert_eq!(p.plan(t0, t0 + ms(999), ms(1000)), Plan { extra: 0, next: Some(t0 + ms(1000)) });
        }
    }

    #[test]
    fn behind_by_two_and_a_half_ticks() {
        let t0 = Instant::now();
        let now = t0 + ms(2500);
        assert_eq!(MissedTicks::Burst.plan(t0, now, ms(1000)), Plan { extra: 2, next: Some(t0 + ms(3000)) });
        assert_eq!(MissedTicks::Delay.plan(t0, now, ms(1000)), Plan { extra: 0, next: Some(t0 + ms(3500)) });
        assert_eq!(MissedTicks::Skip.plan(t0, now, ms(1000)), Plan { extra: 0, next: Some(t0 + ms(3000)) });
    }

    #[test]
    fn a_grid_point_equal_to_now_is_missed() {
        let t0 = Instant::now();
        let now = t0 + ms(2000);
        assert_eq!(MissedTicks::Burst.plan(t0, now, ms(1000)), Plan { extra: 2, next: Some(t0 + ms(3000)) });
        assert_eq!(MissedTicks::Skip.plan(t0, now, ms(1000)), Plan { extra: 0, next: Some(t0 + ms(3000)) });
    }

    #[test]
    fn burst_is_capped_and_huge_gaps_do_not_overflow() {
        let t0 = Instant::now();
        let now = t0 + Duration::from_secs(100 * 365 * 24 * 3600);
        let p = MissedTicks::Burst.plan(t0, now, Duration::from_nanos(1));
        assert_eq!(p.extra, BURST_LIMIT - 1);
        assert_eq!(p.next, Some(now + Duration::from_nanos(1)));
    }

    #[test]
    fn an_unrepresentable_next_tick_is_none() {
        let t0 = Instant::now();
        assert_eq!(MissedTicks::Skip.plan(t0, t0, Duration::MAX).next, None);
    }
}
