//! What the queues hand out: a job's id, its payload, its deadline, which
//! delivery this is, and the lease that proves the holder may ack it.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::DurableError;

/// A job's id: unique within one queue (database file or Redis queue name) for
/// the queue's whole life, never reused — unless a Redis server loses its data
/// (`FLUSHALL`, a restart without persistence): its id counter then starts
/// again. Lease tokens are random, so a stale ack still matches nothing.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job {}", self.0)
    }
}

/// A job handed out by `reserve` (leased to the caller) or listed from the dead
/// set (leased to no one).
///
/// The lease token inside it is what [`ack`](crate::JobQueue::ack),
/// [`nack`](crate::JobQueue::nack) and [`extend`](crate::JobQueue::extend)
/// check: once the lease has expired *and* the job was handed to someone else,
/// this `Job` no longer matches and those calls return `Ok(false)`.
#[derive(Clone, PartialEq, Eq)]
pub struct Job {
    pub(crate) id: JobId,
    pub(crate) payload: Vec<u8>,
    pub(crate) deadline: u64,
    pub(crate) attempt: u32,
    pub(crate) token: u64,
    pub(crate) lease_until: u64,
    pub(crate) kind: String,
    pub(crate) last_error: Option<String>,
    /// `0..=9`, 0 first among due jobs ([`SendOptions::priority`](crate::SendOptions::priority)).
    pub(crate) priority: u8,
}

impl Job {
    /// The job's id.
    pub fn id(&self) -> JobId {
        self.id
    }

    /// The kind it was sent with (`send_kind_at`, or a typed
    /// `enqueue`): what the
    /// [`Worker`](crate::Worker) dispatches on. `""` for a job sent without one.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// Its priority, `0..=9` (0, the default, is reserved first among due
    /// jobs; [`SendOptions::priority`](crate::SendOptions::priority)).
    pub fn priority(&self) -> u8 {
        self.priority
    }

    /// The message of the last failed attempt that gave one (a handler's
    /// error or panic, stored by [`nack_with_error`](crate::JobQueue::nack_with_error)
    /// or [`kill`](crate::JobQueue::kill); `"lease expired (attempt N)"` when
    /// attempt N's lease ran out without an ack, on either backend), at most
    /// 4 KiB; `None` if no attempt failed with a message.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// The bytes it was sent with.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// Takes the payload out.
    pub fn into_payload(self) -> Vec<u8> {
        self.payload
    }

    /// The deadline it was due at: the one it was sent with, or the `retry_at`
    /// of the last [`nack`](crate::JobQueue::nack). A redelivery after a lease
    /// expired keeps the deadline it was first due at.
    pub fn deadline(&self) -> SystemTime {
        from_nanos(self.deadline)
    }

    /// Which delivery this is: 1 the first time, more on each redelivery (after
    /// a nack, an expired lease, or a crash while it was leased). A job never
    /// reaches a consumer twice with the same attempt number, so `attempt() > 1`
    /// is how a redelivery declares itself.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// When the lease ends, if this job is leased (`None` for a dead job).
    /// After this instant the queue may hand the job to another consumer.
    pub fn lease_deadline(&self) -> Option<SystemTime> {
        (self.token != 0).then(|| from_nanos(self.lease_until))
    }
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("id", &self.id.0)
            .field("kind", &self.kind)
            .field("payload_len", &self.payload.len())
            .field("deadline", &self.deadline())
            .field("attempt", &self.attempt)
            .field("priority", &self.priority)
            .field("leased", &(self.token != 0))
            .field("last_error", &self.last_error)
            .finish()
    }
}

/// How many jobs a queue holds, by state.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Stats {
    /// Waiting for their deadline, or due and not yet reserved.
    pub pending: u64,
    /// Handed out and neither acked nor expired (an expired lease counts here
    /// until a consumer takes the job again).
    pub leased: u64,
    /// Moved to the dead set after `max_attempts` deliveries.
    pub dead: u64,
}

/// The furthest ahead a deadline may be, on every backend: 2^52 µs, about
/// 142.7 years. Redis keeps times as µs in Lua's doubles, exact below 2^53,
/// and takes a deadline as a delay from its own now; the file could go to
/// 2554, but then a job accepted by one backend would be refused by the other.
pub(crate) const MAX_AHEAD: Duration = Duration::from_micros(1 << 52);

/// A deadline `at` as nanoseconds since the Unix epoch; a time before the
/// epoch is 0 (due at once), one more than [`MAX_AHEAD`] from now is an error.
pub(crate) fn to_nanos(at: SystemTime) -> Result<u64, DurableError> {
    if SystemTime::now().checked_add(MAX_AHEAD).is_some_and(|last| at > last) {
        return Err(DurableError::DeadlineOutOfRange);
    }
    epoch_nanos(at)
}

/// `at` as nanoseconds since the Unix epoch (0 before it).
fn epoch_nanos(at: SystemTime) -> Result<u64, DurableError> {
    match at.duration_since(UNIX_EPOCH) {
        Ok(d) => u64::try_from(d.as_nanos()).map_err(|_| DurableError::DeadlineOutOfRange),
        Err(_) => Ok(0),
    }
}

pub(crate) fn from_nanos(nanos: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(nanos)
}

/// Wall-clock now in nanoseconds (a clock before 1970 reads as 0).
pub(crate) fn now_nanos() -> u64 {
    epoch_nanos(SystemTime::now()).unwrap_or(u64::MAX)
}

/// `now + delay` in nanoseconds, or an error for a delay over [`MAX_AHEAD`].
pub(crate) fn after_nanos(delay: Duration) -> Result<u64, DurableError> {
    if delay > MAX_AHEAD {
        return Err(DurableError::DeadlineOutOfRange);
    }
    let at = SystemTime::now().checked_add(delay).ok_or(DurableError::DeadlineOutOfRange)?;
    epoch_nanos(at)
}

/// Checks a kind: at most 255 bytes, no control characters.
pub(crate) fn check_kind(kind: &str) -> Result<(), DurableError> {
    if kind.len() > MAX_KIND {
        return Err(DurableError::InvalidArgument("a job kind must be at most 255 bytes"));
    }
    if kind.chars().any(char::is_control) {
        return Err(DurableError::InvalidArgument("a job kind must not contain control characters"));
    }
    Ok(())
}

/// The longest kind, in bytes (on both backends).
pub(crate) const MAX_KIND: usize = 255;
/// The longest stored error message, in bytes; longer ones are cut (at a
/// character boundary) when stored, on both backends.
pub(crate) const MAX_ERROR: usize = 4096;

/// `msg` cut to at most [`MAX_ERROR`] bytes at a character boundary; an
/// empty message becomes a placeholder (an empty one reads as "no error").
pub(crate) fn clip_error(msg: &str) -> String {
    if msg.is_empty() {
        return "(no message)".to_string();
    }
    let mut end = msg.len().min(MAX_ERROR);
    while !msg.is_char_boundary(end) {
        end -= 1;
    }
    msg[..end].to_string()
}
