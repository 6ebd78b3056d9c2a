//! [`SendOptions`]: what a send can say beyond its payload and deadline — a
//! kind, a [priority](SendOptions::priority), a [uniqueness key](Unique) —
//! and [`Sent`], what it answers.

use std::time::Duration;

use crate::error::DurableError;
use crate::job::{check_kind, JobId};

/// The most urgent priority: among due jobs, priority 0 is reserved first.
pub const PRIORITY_HIGHEST: u8 = 0;
/// The least urgent priority (priorities are `0..=9`, as Oban's).
pub const PRIORITY_LOWEST: u8 = 9;
/// The longest uniqueness key, in bytes.
pub const MAX_UNIQUE_KEY: usize = 255;

/// Options of [`send_with`](crate::JobQueue::send_with).
///
/// ```
/// use std::time::Duration;
/// use delayq_durable::{SendOptions, Unique};
///
/// let opts = SendOptions::new()
///     .kind("invoice.email")
///     .priority(1)
///     .unique(Unique::new("invoice-1042").period(Duration::from_secs(3600)));
/// assert_eq!(opts.get_priority(), 1);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SendOptions {
    pub(crate) kind: String,
    pub(crate) priority: u8,
    pub(crate) unique: Option<Unique>,
}

impl SendOptions {
    /// No kind, priority 0 (the most urgent, the default of every send), not unique.
    pub fn new() -> SendOptions {
        SendOptions::default()
    }

    /// The job's kind ([`Job::kind`](crate::Job::kind)): at most 255 bytes,
    /// no control characters.
    pub fn kind(mut self, kind: impl Into<String>) -> SendOptions {
        self.kind = kind.into();
        self
    }

    /// The job's priority, `0..=9`: among jobs that are due, a lower number
    /// is reserved first (0 is the most urgent, as in Oban; River and BullMQ
    /// also put their smallest number first); equal priorities go by
    /// deadline, then in the order sent. Never early still holds: a priority
    /// orders due jobs only. Out of range is
    /// [`InvalidArgument`](DurableError::InvalidArgument) at the send.
    pub fn priority(mut self, priority: u8) -> SendOptions {
        self.priority = priority;
        self
    }

    /// Makes the send unique: see [`Unique`].
    pub fn unique(mut self, unique: Unique) -> SendOptions {
        self.unique = Some(unique);
        self
    }

    /// The kind set (`""`: none).
    pub fn get_kind(&self) -> &str {
        &self.kind
    }

    /// The priority set.
    pub fn get_priority(&self) -> u8 {
        self.priority
    }

    /// The uniqueness set, if any.
    pub fn get_unique(&self) -> Option<&Unique> {
        self.unique.as_ref()
    }

    /// Checks every option; the error names the one that is wrong.
    pub(crate) fn check(&self) -> Result<(), DurableError> {
        check_kind(&self.kind)?;
        check_priority(self.priority)?;
        if let Some(u) = &self.unique {
            u.check()?;
        }
        Ok(())
    }
}

/// `priority` in `0..=9`, or the error that says so.
pub(crate) fn check_priority(priority: u8) -> Result<(), DurableError> {
    if priority > PRIORITY_LOWEST {
        return Err(DurableError::InvalidArgument("a priority must be in 0..=9 (0 is reserved first)"));
    }
    Ok(())
}

/// Which states of an existing job with the same key make a send return that
/// job instead of storing a new one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum UniqueStates {
    /// Waiting for its deadline or due, not yet reserved.
    Pending,
    /// Leased to a consumer (running).
    Leased,
    /// Pending or leased: until the job is acked, cancelled or dead (the default).
    #[default]
    Both,
}

impl UniqueStates {
    /// Whether a job in state pending (`leased == false`) or leased counts.
    pub fn covers(self, leased: bool) -> bool {
        match self {
            UniqueStates::Pending => !leased,
            UniqueStates::Leased => leased,
            UniqueStates::Both => true,
        }
    }
}

/// A uniqueness key: a send with a key that an existing job holds returns
/// that job's id ([`Sent::Existing`]) and stores nothing; two racing sends of
/// the same key store one job, on every backend (Sidekiq Enterprise's unique
/// jobs, BullMQ's deduplication id, Oban's and River's unique jobs).
///
/// A job holds its key while it is in one of the covered [`states`](Self::states)
/// (default: pending or leased) and, with a [`period`](Self::period), also
/// until the period from its send has passed, whatever became of it (acked,
/// cancelled, dead) — BullMQ's deduplication TTL, Oban's `period`. A dead
/// job holds its key only through a period. Keys are one namespace per queue:
/// put the kind in the key to make it per kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Unique {
    pub(crate) key: String,
    pub(crate) states: UniqueStates,
    pub(crate) period: Option<Duration>,
}

impl Unique {
    /// A key (1 to 255 bytes), held while the job is pending or leased.
    pub fn new(key: impl Into<String>) -> Unique {
        Unique { key: key.into(), states: UniqueStates::Both, period: None }
    }

    /// Which states of the existing job hold the key.
    pub fn states(mut self, states: UniqueStates) -> Unique {
        self.states = states;
        self
    }

    /// Also holds the key for `period` from the send that stored the job,
    /// whatever happens to the job (at least 1 ms, at most 2^52 µs).
    pub fn period(mut self, period: Duration) -> Unique {
        self.period = Some(period);
        self
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The covered states.
    pub fn get_states(&self) -> UniqueStates {
        self.states
    }

    /// The period, if any.
    pub fn get_period(&self) -> Option<Duration> {
        self.period
    }

    /// The period in nanoseconds (0: none).
    pub(crate) fn period_nanos(&self) -> u64 {
        self.period.map_or(0, |p| u64::try_from(p.as_nanos()).unwrap_or(u64::MAX))
    }

    pub(crate) fn check(&self) -> Result<(), DurableError> {
        if self.key.is_empty() {
            return Err(DurableError::InvalidArgument("a uniqueness key must not be empty"));
        }
        if self.key.len() > MAX_UNIQUE_KEY {
            return Err(DurableError::InvalidArgument("a uniqueness key must be at most 255 bytes"));
        }
        if let Some(p) = self.period {
            if p < Duration::from_millis(1) {
                return Err(DurableError::InvalidArgument("a uniqueness period must be at least 1 ms"));
            }
            if p > crate::job::MAX_AHEAD {
                return Err(DurableError::InvalidArgument("a uniqueness period must be at most 2^52 us"));
            }
        }
        Ok(())
    }
}

/// What [`send_with`](crate::JobQueue::send_with) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sent {
    /// Stored a new job.
    Created(JobId),
    /// Stored nothing: this job holds the [uniqueness key](Unique).
    Existing(JobId),
}

impl Sent {
    /// The id, new or existing.
    pub fn id(self) -> JobId {
        match self {
            Sent::Created(id) | Sent::Existing(id) => id,
        }
    }

    /// Whether a new job was stored.
    pub fn created(self) -> bool {
        matches!(self, Sent::Created(_))
    }
}
