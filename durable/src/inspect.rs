//! [`Inspect`]: reading a queue's jobs by state, for operators (the
//! `delayq-jobs` CLI and dashboard) — a trait of its own beside
//! [`JobQueue`](crate::JobQueue), which stays the contract workers use.
//!
//! The reads lease nothing and change nothing, and the [`JobInfo`]s they
//! return carry no lease token (a listed job cannot be acked or nacked with
//! them). The changes are an operator's: [`requeue_dead`](Inspect::requeue_dead)
//! and [`cancel_in`](Inspect::cancel_in), which deletes a job only in the
//! states named, in one change, so an operator's command does not delete a
//! job that a worker leased after it looked; each has a batch form that
//! makes one change per batch.

use std::fmt;
use std::time::{Duration, SystemTime};

use crate::error::DurableError;
use crate::job::{JobId, Stats};
use crate::listing;
use crate::queue::DurableQueue;

/// A job's state.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum JobState {
    /// Waiting for its deadline, or due and not yet reserved.
    Pending,
    /// Handed out with a lease (an expired lease counts until the job is taken again).
    Leased,
    /// In the dead set.
    Dead,
}

impl JobState {
    /// `"pending"`, `"leased"` or `"dead"`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Leased => "leased",
            JobState::Dead => "dead",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One job as an inspector sees it: a copy, without its lease token.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct JobInfo {
    /// The job's id.
    pub id: JobId,
    /// Its state when read.
    pub state: JobState,
    /// Its kind (`""`: none).
    pub kind: String,
    /// The deadline it is (or was) due at.
    pub deadline: SystemTime,
    /// Deliveries so far.
    pub attempt: u32,
    /// When its lease ends, for a leased job.
    pub lease_deadline: Option<SystemTime>,
    /// When it died, for a dead job (where the backend knows).
    pub died_at: Option<SystemTime>,
    /// The message of the last failed attempt that gave one.
    pub last_error: Option<String>,
    /// Its priority, `0..=9` (0 first).
    pub priority: u8,
    /// The bytes it was sent with.
    pub payload: Vec<u8>,
}

/// Which jobs a listing keeps: a kind (exactly), and text in the last error
/// (ASCII case ignored). `Filter::default()` keeps every job.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Filter {
    /// Only jobs of this kind (`Some("")`: jobs without one).
    pub kind: Option<String>,
    /// Only jobs whose last error contains this text.
    pub error: Option<String>,
}

impl Filter {
    /// Whether a job with this kind and last error is kept.
    pub fn matches(&self, kind: &str, error: Option<&str>) -> bool {
        if self.kind.as_deref().is_some_and(|k| k != kind) {
            return false;
        }
        match self.error.as_deref() {
            None | Some("") => true,
            Some(needle) => error.is_some_and(|e| contains_ignoring_ascii_case(e, needle)),
        }
    }

    /// Whether it keeps every job.
    pub fn is_empty(&self) -> bool {
        self.kind.is_none() && self.error.as_deref().is_none_or(str::is_empty)
    }
}

fn contains_ignoring_ascii_case(hay: &str, needle: &str) -> bool {
    let (hay, needle) = (hay.as_bytes(), needle.as_bytes());
    needle.is_empty() || hay.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

/// One page of a listing: the jobs, and the cursor of the next page
/// (`None`: the listing is over). A page may hold fewer jobs than asked
/// for and still have a next one: a backend reads a bounded number of
/// entries per call, so that no listing holds the store for long.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Page {
    /// The jobs, in the backend's order for the state.
    pub jobs: Vec<JobInfo>,
    /// Where the next page starts (pass it as `cursor`).
    pub next: Option<u64>,
}

/// Jobs of one kind processed (acked) and failed (an attempt nacked,
/// killed, or whose lease ran out) in one minute.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Throughput {
    /// The minute's start (by the queue's clock: the server's for Redis).
    pub minute: SystemTime,
    /// The kind (`""`: none).
    pub kind: String,
    /// Jobs acked.
    pub processed: u64,
    /// Failed attempts.
    pub failed: u64,
}

/// The backlog in one minute, sampled by the queue itself (whether or not
/// anyone looks) at the minute's first reserve, before it takes anything:
/// how many jobs were pending, and how late the oldest due job was (the one
/// a reserve takes first). A minute in which nothing was reserved has no
/// sample on the embedded file (its sample is written by the first commit
/// of the minute that leases a job); on Redis and PostgreSQL a reserve that
/// finds nothing due samples too (lateness zero).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Sample {
    /// The minute's start (by the queue's clock: the server's for Redis and
    /// PostgreSQL).
    pub minute: SystemTime,
    /// Pending jobs (due or not) at the sample.
    pub pending: u64,
    /// How long past its due time the oldest due job was at the sample
    /// (zero: none was due).
    pub lateness: Duration,
}

/// How many jobs of one kind are in each state.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct KindCounts {
    /// The kind (`""`: jobs sent without one).
    pub kind: String,
    /// Pending jobs of this kind.
    pub pending: u64,
    /// Leased jobs of this kind.
    pub leased: u64,
    /// Dead jobs of this kind.
    pub dead: u64,
}

/// Reads a queue's jobs by state, and makes the few changes an operator
/// makes (requeue a dead job, delete a job only in the state seen).
/// Implemented by [`DurableQueue`] (reads in a read transaction on the
/// caller's thread, beside the writer), [`OfflineFile`](crate::OfflineFile)
/// (a file no process holds, opened read-only) and (feature `redis`)
/// `RedisQueue` (reads in bounded scripts).
///
/// ```
/// use std::time::Duration;
/// use delayq_durable::{DurableQueue, Filter, Inspect, JobState};
///
/// # let dir = std::env::temp_dir().join(format!("delayq-doc-inspect-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let q = DurableQueue::open(dir.join("inspect.redb")).unwrap();
/// let id = q.send_kind_after("email.send", b"{}", Duration::from_secs(60)).unwrap();
/// let pending = q.jobs(JobState::Pending, 10).unwrap();
/// assert_eq!(pending.len(), 1);
/// assert_eq!((pending[0].id, pending[0].kind.as_str()), (id, "email.send"));
/// assert_eq!(q.job(id).unwrap().unwrap().state, JobState::Pending);
/// let other = Filter { kind: Some("report".into()), error: None };
/// assert!(q.page(JobState::Pending, &other, 0, 10).unwrap().jobs.is_empty());
/// # drop(q); std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub trait Inspect: Send + Sync {
    /// Jobs by state.
    fn stats(&self) -> Result<Stats, DurableError>;
    /// One page of the jobs in `state` that `filter` keeps, from `cursor`
    /// (0: the first page), at most `limit` jobs: by id on the embedded
    /// file; on Redis by due time (pending), lease end (leased), time of
    /// death (dead). Each call reads a bounded number of entries.
    fn page(&self, state: JobState, filter: &Filter, cursor: u64, limit: usize)
        -> Result<Page, DurableError>;
    /// Up to `limit` jobs in `state`, page after page.
    fn jobs(&self, state: JobState, limit: usize) -> Result<Vec<JobInfo>, DurableError> {
        let mut out = Vec::new();
        let mut cursor = 0;
        while out.len() < limit {
            let page = self.page(state, &Filter::default(), cursor, (limit - out.len()).min(1000))?;
            out.extend(page.jobs);
            match page.next {
                Some(next) => cursor = next,
                None => break,
            }
        }
        Ok(out)
    }
    /// The job with this id, in whatever state; `None` if there is none.
    fn job(&self, id: JobId) -> Result<Option<JobInfo>, DurableError>;
    /// The earliest deadline of a pending job (`None`: no pending job). When
    /// it is in the past, the queue is that late. O(jobs) on the embedded
    /// file, O(1) on Redis.
    fn oldest_due(&self) -> Result<Option<SystemTime>, DurableError>;
    /// Counts by state per kind (O(jobs) on the embedded file; on Redis a
    /// bounded script per 1,000 jobs).
    fn kinds(&self) -> Result<Vec<KindCounts>, DurableError>;
    /// Jobs processed and failed per minute and kind since `since` (the
    /// minutes with any), oldest first: kept 24 hours, across restarts (the
    /// embedded file writes them in the commits that change them; Redis
    /// counts them in the scripts, one hash per minute). Empty where a
    /// backend does not count them.
    fn throughput(&self, since: SystemTime) -> Result<Vec<Throughput>, DurableError> {
        let _ = since;
        Ok(Vec::new())
    }
    /// The backlog samples (one per minute, [`Sample`]) since `since`,
    /// oldest first: kept 24 hours, written by the queue as it reserves (the
    /// embedded writer in the minute's first commit that leases a job; the
    /// Redis reserve script; PostgreSQL's reserve, at most once a minute per
    /// handle), so they are there whether or not a dashboard was open.
    fn samples(&self, since: SystemTime) -> Result<Vec<Sample>, DurableError>;
    /// The recurring schedules stored in the queue, by name
    /// ([`JobQueue::schedules`](crate::JobQueue::schedules)).
    fn schedules(&self) -> Result<Vec<crate::ScheduleInfo>, DurableError>;
    /// Deletes the job only if it is in one of `states`, in one atomic
    /// change: `Ok(false)` if there is no such job or it is in another
    /// state (so a job leased meanwhile is not deleted by a command that
    /// checked it was not).
    fn cancel_in(&self, id: JobId, states: &[JobState]) -> Result<bool, DurableError> {
        Ok(self.cancel_many_in(&[id], states)?.first().copied().unwrap_or(false))
    }
    /// As `cancel_in` for each job, in one change (embedded: one
    /// transaction; Redis: one script per 1,000 jobs); a flag per job.
    fn cancel_many_in(&self, ids: &[JobId], states: &[JobState]) -> Result<Vec<bool>, DurableError>;
    /// Moves a dead job back to pending, due at `at`; `Ok(false)` if it is
    /// not dead.
    fn requeue_dead(&self, id: JobId, at: SystemTime) -> Result<bool, DurableError> {
        Ok(self.requeue_dead_many(&[id], at)?.first().copied().unwrap_or(false))
    }
    /// As `requeue_dead` for each job, in one change (as `cancel_many_in`).
    fn requeue_dead_many(&self, ids: &[JobId], at: SystemTime) -> Result<Vec<bool>, DurableError>;
    /// Whether no process can hold a lease now: the embedded file opened
    /// while no application has it ([`OfflineFile`](crate::OfflineFile)),
    /// so a leased job's holder is gone (the job is due again, as its next
    /// attempt, when the application opens the file).
    fn holders_gone(&self) -> bool {
        false
    }
    /// What the queue is, for display: the file's path or `redis queue NAME`.
    fn describe(&self) -> String;
}

fn mask(states: &[JobState]) -> [bool; 3] {
    let mut mask = [false; 3];
    for s in states {
        mask[listing::state_for(*s) as usize] = true;
    }
    mask
}

impl Inspect for DurableQueue {
    fn schedules(&self) -> Result<Vec<crate::ScheduleInfo>, DurableError> {
        crate::JobQueue::schedules(self)
    }

    fn stats(&self) -> Result<Stats, DurableError> {
        DurableQueue::stats(self)
    }

    fn page(
        &self,
        state: JobState,
        filter: &Filter,
        cursor: u64,
        limit: usize,
    ) -> Result<Page, DurableError> {
        self.read(|txn, path| listing::page(txn, path, state, filter, cursor, limit))
    }

    fn job(&self, id: JobId) -> Result<Option<JobInfo>, DurableError> {
        self.read(|txn, path| listing::one(txn, path, id.0))
    }

    fn oldest_due(&self) -> Result<Option<SystemTime>, DurableError> {
        let census = self.read(listing::census)?;
        Ok(census.oldest_due.map(crate::job::from_nanos))
    }

    fn kinds(&self) -> Result<Vec<KindCounts>, DurableError> {
        Ok(listing::kind_counts(self.read(listing::census)?.kinds))
    }

    fn throughput(&self, since: SystemTime) -> Result<Vec<Throughput>, DurableError> {
        self.read(|txn, path| listing::throughput(txn, path, since))
    }

    fn samples(&self, since: SystemTime) -> Result<Vec<Sample>, DurableError> {
        self.read(|txn, path| listing::samples(txn, path, since))
    }

    fn cancel_many_in(&self, ids: &[JobId], states: &[JobState]) -> Result<Vec<bool>, DurableError> {
        DurableQueue::cancel_many_in(self, ids, mask(states))
    }

    fn requeue_dead_many(&self, ids: &[JobId], at: SystemTime) -> Result<Vec<bool>, DurableError> {
        DurableQueue::requeue_dead_many(self, ids, at)
    }

    fn describe(&self) -> String {
        self.path().display().to_string()
    }
}

#[cfg(feature = "redis")]
impl Inspect for crate::redis_queue::RedisQueue {
    fn schedules(&self) -> Result<Vec<crate::ScheduleInfo>, DurableError> {
        crate::JobQueue::schedules(self)
    }

    fn stats(&self) -> Result<Stats, DurableError> {
        crate::redis_queue::RedisQueue::stats(self)
    }

    fn page(
        &self,
        state: JobState,
        filter: &Filter,
        cursor: u64,
        limit: usize,
    ) -> Result<Page, DurableError> {
        self.inspect_page(state, filter, cursor, limit)
    }

    fn job(&self, id: JobId) -> Result<Option<JobInfo>, DurableError> {
        self.inspect_job(id)
    }

    fn oldest_due(&self) -> Result<Option<SystemTime>, DurableError> {
        Ok(self.page(JobState::Pending, &Filter::default(), 0, 1)?.jobs.first().map(|j| j.deadline))
    }

    fn kinds(&self) -> Result<Vec<KindCounts>, DurableError> {
        self.inspect_kinds()
    }

    fn throughput(&self, since: SystemTime) -> Result<Vec<Throughput>, DurableError> {
        self.inspect_throughput(since)
    }

    fn samples(&self, since: SystemTime) -> Result<Vec<Sample>, DurableError> {
        self.inspect_samples(since)
    }

    fn cancel_many_in(&self, ids: &[JobId], states: &[JobState]) -> Result<Vec<bool>, DurableError> {
        let letters: String = states
            .iter()
            .map(|s| match s {
                JobState::Pending => 'p',
                JobState::Leased => 'l',
                JobState::Dead => 'd',
            })
            .collect();
        crate::redis_queue::RedisQueue::cancel_many_in(self, ids, &letters)
    }

    fn requeue_dead_many(&self, ids: &[JobId], at: SystemTime) -> Result<Vec<bool>, DurableError> {
        crate::redis_queue::RedisQueue::requeue_dead_many(self, ids, at)
    }

    fn describe(&self) -> String {
        format!("redis queue {}", self.name())
    }
}

#[cfg(feature = "postgres")]
impl Inspect for crate::pg_queue::PgQueue {
    fn schedules(&self) -> Result<Vec<crate::ScheduleInfo>, DurableError> {
        crate::JobQueue::schedules(self)
    }

    fn stats(&self) -> Result<Stats, DurableError> {
        crate::pg_queue::PgQueue::stats(self)
    }

    fn page(
        &self,
        state: JobState,
        filter: &Filter,
        cursor: u64,
        limit: usize,
    ) -> Result<Page, DurableError> {
        self.inspect(|q| q.page(state, filter, cursor, limit))
    }

    fn job(&self, id: JobId) -> Result<Option<JobInfo>, DurableError> {
        self.inspect(|q| q.one(id))
    }

    fn oldest_due(&self) -> Result<Option<SystemTime>, DurableError> {
        self.inspect(|q| q.oldest_due())
    }

    fn kinds(&self) -> Result<Vec<KindCounts>, DurableError> {
        self.inspect(|q| q.kinds())
    }

    fn throughput(&self, since: SystemTime) -> Result<Vec<Throughput>, DurableError> {
        self.inspect(|q| q.throughput(since))
    }

    fn samples(&self, since: SystemTime) -> Result<Vec<Sample>, DurableError> {
        self.inspect(|q| q.samples(since))
    }

    fn cancel_many_in(&self, ids: &[JobId], states: &[JobState]) -> Result<Vec<bool>, DurableError> {
        self.inspect(|q| q.cancel_in(ids, states))
    }

    fn requeue_dead_many(&self, ids: &[JobId], at: SystemTime) -> Result<Vec<bool>, DurableError> {
        let at = crate::pg_queue::at_us(at)?;
        self.inspect(|q| q.requeue(ids, at))
    }

    fn describe(&self) -> String {
        format!("postgres queue {} (schema {})", self.name(), self.schema())
    }
}

/// A shared queue inspects as the queue it shares.
impl<Q: Inspect + ?Sized> Inspect for std::sync::Arc<Q> {
    fn stats(&self) -> Result<Stats, DurableError> {
        (**self).stats()
    }
    fn page(
        &self,
        state: JobState,
        filter: &Filter,
        cursor: u64,
        limit: usize,
    ) -> Result<Page, DurableError> {
        (**self).page(state, filter, cursor, limit)
    }
    fn jobs(&self, state: JobState, limit: usize) -> Result<Vec<JobInfo>, DurableError> {
        (**self).jobs(state, limit)
    }
    fn job(&self, id: JobId) -> Result<Option<JobInfo>, DurableError> {
        (**self).job(id)
    }
    fn oldest_due(&self) -> Result<Option<SystemTime>, DurableError> {
        (**self).oldest_due()
    }
    fn kinds(&self) -> Result<Vec<KindCounts>, DurableError> {
        (**self).kinds()
    }
    fn throughput(&self, since: SystemTime) -> Result<Vec<Throughput>, DurableError> {
        (**self).throughput(since)
    }
    fn samples(&self, since: SystemTime) -> Result<Vec<Sample>, DurableError> {
        (**self).samples(since)
    }
    fn schedules(&self) -> Result<Vec<crate::ScheduleInfo>, DurableError> {
        (**self).schedules()
    }
    fn cancel_in(&self, id: JobId, states: &[JobState]) -> Result<bool, DurableError> {
        (**self).cancel_in(id, states)
    }
    fn cancel_many_in(&self, ids: &[JobId], states: &[JobState]) -> Result<Vec<bool>, DurableError> {
        (**self).cancel_many_in(ids, states)
    }
    fn requeue_dead(&self, id: JobId, at: SystemTime) -> Result<bool, DurableError> {
        (**self).requeue_dead(id, at)
    }
    fn requeue_dead_many(&self, ids: &[JobId], at: SystemTime) -> Result<Vec<bool>, DurableError> {
        (**self).requeue_dead_many(ids, at)
    }
    fn holders_gone(&self) -> bool {
        (**self).holders_gone()
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}
