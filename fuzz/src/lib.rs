//! What both fuzz targets share: a payload that counts its drops, and the
//! conversion of `Instant`s to the nanosecond ticks the queue orders by.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Counts the drops of every [`Item`] it made, by id.
#[derive(Debug, Default)]
pub struct Tracker {
    drops: Mutex<Vec<u32>>,
}

impl Tracker {
    pub fn new() -> Arc<Tracker> {
        Arc::new(Tracker::default())
    }

    fn counts(&self) -> MutexGuard<'_, Vec<u32>> {
        self.drops.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A fresh item with the next id (0, 1, 2, ...).
    pub fn item(self: &Arc<Self>) -> Item {
        let mut d = self.counts();
        let id = u32::try_from(d.len()).expect("fewer than 2^32 items");
        d.push(0);
        Item { id, tracker: self.clone() }
    }

    /// How often item `id` was dropped so far.
    pub fn drops(&self, id: u32) -> u32 {
        self.counts()[id as usize]
    }

    /// Items made so far.
    pub fn made(&self) -> usize {
        self.counts().len()
    }

    /// Panics unless every item made was dropped exactly once.
    pub fn assert_each_dropped_once(&self) {
        let d = self.counts();
        let bad: Vec<(usize, u32)> =
            d.iter().enumerate().filter(|(_, &n)| n != 1).map(|(i, &n)| (i, n)).collect();
        assert!(bad.is_empty(), "items not dropped exactly once (id, drops): {bad:?}");
    }
}

/// A payload whose every drop is counted by its [`Tracker`].
#[derive(Debug)]
pub struct Item {
    pub id: u32,
    tracker: Arc<Tracker>,
}

impl Drop for Item {
    fn drop(&mut self) {
        self.tracker.counts()[self.id as usize] += 1;
    }
}

/// The tick of a deadline at or beyond the queue's horizon: never due.
pub const NEVER: u64 = u64::MAX;

/// The queue's tick arithmetic, restated as the crate documents it: nanoseconds
/// since an origin a century before the mock clock's start; a deadline at or
/// beyond the horizon (`u64::MAX` ns after the origin) is [`NEVER`] unless the
/// clock has passed it too (then it is due at once, as `NEVER - 1`); the clock's
/// own reading stops at `NEVER - 1`.
#[derive(Debug, Clone, Copy)]
pub struct Ticks {
    origin: Instant,
}

impl Ticks {
    pub fn new(start: Instant) -> Ticks {
        const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
        Ticks { origin: start.checked_sub(CENTURY).unwrap_or(start) }
    }

    /// A deadline's tick, given the clock's time when it was sent.
    pub fn deadline(&self, t: Instant, clock_now: Instant) -> u64 {
        match self.of(t) {
            NEVER if t <= clock_now => NEVER - 1,
            d => d,
        }
    }

    /// `delay` after the clock reading `now` (in ticks).
    pub fn after(now: u64, delay: Duration) -> u64 {
        u64::try_from(delay.as_nanos()).map_or(NEVER, |d| now.saturating_add(d))
    }

    /// A clock reading's tick.
    pub fn now(&self, t: Instant) -> u64 {
        self.of(t).min(NEVER - 1)
    }

    /// An instant reported by the queue (`peek_deadline`, `take_pending`).
    pub fn of(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.origin).as_nanos()).unwrap_or(NEVER)
    }
}

/// `n` years of 365 days.
pub fn years(n: u64) -> Duration {
    Duration::from_secs(365 * 24 * 3600 * n)
}

/// `n` milliseconds.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
