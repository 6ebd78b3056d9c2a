//! The schedule store: what each backend keeps of a recurring schedule, and
//! the one atomic step that fires it. The schedule API
//! ([`JobQueue::schedule`](crate::JobQueue::schedule) and its neighbours) and
//! the [`Worker`](crate::Worker) are built on these primitives; the backends
//! implement them and know nothing of cron.
//!
//! A schedule is a name, an opaque definition (`def`, encoded by
//! `schedule.rs`), the next tick to fire (`None` while paused) and the last
//! tick fired. Its **tick job** is an ordinary job of kind [`TICK_KIND`] whose
//! payload is the schedule's name, due at the next tick: the backend keeps
//! exactly one *pending* tick job per schedule that is not paused, so the
//! worker that reserves it is woken at the tick by the backend's own wake-ups,
//! with no polling. The worker then calls `schedule_fire`, which stores the
//! tick's jobs and moves the schedule on in one atomic step, compare-and-set
//! on the next tick: however many workers hold a copy of the tick job, one
//! tick is fired once.

use std::time::SystemTime;

use crate::error::DurableError;

/// The kind of a schedule's tick job.
pub const TICK_KIND: &str = "delayq.schedule";

/// The longest schedule name, in bytes.
pub const MAX_SCHEDULE_NAME: usize = 200;

/// A schedule as a backend stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredSchedule {
    /// Its name (unique per queue).
    pub name: String,
    /// Its definition, opaque to the backend (`schedule.rs` encodes it).
    pub def: Vec<u8>,
    /// The next tick to fire, µs since the Unix epoch; `None` while paused.
    pub next_run_us: Option<u64>,
    /// The last tick fired, µs since the Unix epoch; `None` before the first.
    pub last_run_us: Option<u64>,
}

/// One firing of a schedule: what [`schedule_fire`](crate::JobQueue::schedule_fire)
/// stores in one atomic step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fire {
    /// Fire only if the stored next tick is this (µs) and the schedule is
    /// not paused (compare-and-set: one firing per tick).
    pub expect_next_us: u64,
    /// The new next tick (µs).
    pub next_run_us: u64,
    /// The new last tick (µs).
    pub last_run_us: u64,
    /// The jobs to store: this kind, payload and priority, one per deadline
    /// (µs since the epoch; often none, when a missed tick is skipped).
    pub kind: String,
    /// Their payload.
    pub payload: Vec<u8>,
    /// Their priority.
    pub priority: u8,
    /// One job per entry, due then.
    pub deadlines_us: Vec<u64>,
}

/// Checks a schedule's name: 1 to 200 bytes, no control characters.
pub(crate) fn check_schedule_name(name: &str) -> Result<(), DurableError> {
    if name.is_empty() {
        return Err(DurableError::InvalidArgument("a schedule name must not be empty"));
    }
    if name.len() > MAX_SCHEDULE_NAME {
        return Err(DurableError::InvalidArgument("a schedule name must be at most 200 bytes"));
    }
    if name.chars().any(char::is_control) {
        return Err(DurableError::InvalidArgument("a schedule name must not contain control characters"));
    }
    Ok(())
}

/// Checks what `schedule_store` is given, on every backend: the name, and a
/// definition at most `max_payload` + 4 KiB (the jobs' payload plus the
/// schedule's own fields).
pub(crate) fn check_store(name: &str, def: &[u8], max_payload: usize) -> Result<(), DurableError> {
    check_schedule_name(name)?;
    let max = max_payload.saturating_add(4096);
    if def.len() > max {
        return Err(DurableError::PayloadTooLarge { len: def.len(), max });
    }
    Ok(())
}

/// `t` as µs since the Unix epoch (0 before it).
pub(crate) fn to_us(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// µs since the Unix epoch as a `SystemTime`.
pub(crate) fn from_us(us: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(us)
}
