//! [`Inspect`]: reading a queue's jobs by state, for operators (the
//! `delayq-jobs` CLI and dashboard) — a trait of its own beside
//! [`JobQueue`], which stays the contract workers use.
//!
//! Every call but [`cancel_in`](Inspect::cancel_in) is a read: nothing is
//! leased, nothing changes, and the [`JobInfo`]s it returns carry no lease
//! token (a listed job cannot be acked or nacked with them). `cancel_in`
//! deletes a job only in the states named, in one change, so an operator's
//! command does not delete a job that a worker leased after it looked.

use std::fmt;
use std::time::SystemTime;

use crate::contract::JobQueue;
use crate::error::DurableError;
use crate::job::{Job, JobId};
use crate::queue::DurableQueue;
use crate::record::State;
use crate::writer::Scan;

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
    /// The message of the last failed attempt that gave one.
    pub last_error: Option<String>,
    /// The bytes it was sent with.
    pub payload: Vec<u8>,
}

impl JobInfo {
    fn new(state: JobState, job: Job) -> JobInfo {
        JobInfo {
            state,
            lease_deadline: if state == JobState::Leased {
                Some(crate::job::from_nanos(job.lease_until))
            } else {
                None
            },
            id: job.id,
            kind: job.kind,
            deadline: crate::job::from_nanos(job.deadline),
            attempt: job.attempt,
            last_error: job.last_error,
            payload: job.payload,
        }
    }
}

/// Reads a queue's jobs by state, for operators. Implemented by
/// [`DurableQueue`] and (feature `redis`) `RedisQueue`.
///
/// ```
/// use std::time::Duration;
/// use delayq_durable::{DurableQueue, Inspect, JobState};
///
/// # let dir = std::env::temp_dir().join(format!("delayq-doc-inspect-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let q = DurableQueue::open(dir.join("inspect.redb")).unwrap();
/// let id = q.send_kind_after("email.send", b"{}", Duration::from_secs(60)).unwrap();
/// let pending = q.jobs(JobState::Pending, 10).unwrap();
/// assert_eq!(pending.len(), 1);
/// assert_eq!((pending[0].id, pending[0].kind.as_str()), (id, "email.send"));
/// assert_eq!(q.job(id).unwrap().unwrap().state, JobState::Pending);
/// # drop(q); std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub trait Inspect: JobQueue {
    /// Up to `limit` jobs in `state`: by id on the embedded file; on Redis by
    /// due time (pending), lease end (leased), time of death (dead). The
    /// embedded file reads its whole table to find them (O(jobs)).
    fn jobs(&self, state: JobState, limit: usize) -> Result<Vec<JobInfo>, DurableError>;
    /// The job with this id, in whatever state; `None` if there is none.
    fn job(&self, id: JobId) -> Result<Option<JobInfo>, DurableError>;
    /// The earliest deadline of a pending job (`None`: no pending job). When
    /// it is in the past, the queue is that late. O(pending jobs) on the
    /// embedded file, O(1) on Redis.
    fn oldest_due(&self) -> Result<Option<SystemTime>, DurableError>;
    /// Deletes the job only if it is in one of `states`, in one atomic
    /// change: `Ok(false)` if there is no such job or it is in another
    /// state (so a job leased meanwhile is not deleted by a command that
    /// checked it was not).
    fn cancel_in(&self, id: JobId, states: &[JobState]) -> Result<bool, DurableError>;
    /// What the queue is, for display: the file's path or `redis queue NAME`.
    fn describe(&self) -> String;
}

fn state_of(state: State) -> JobState {
    match state {
        State::Pending => JobState::Pending,
        State::Leased => JobState::Leased,
        State::Dead => JobState::Dead,
    }
}

impl Inspect for DurableQueue {
    fn jobs(&self, state: JobState, limit: usize) -> Result<Vec<JobInfo>, DurableError> {
        let state = match state {
            JobState::Pending => State::Pending,
            JobState::Leased => State::Leased,
            JobState::Dead => State::Dead,
        };
        let jobs = self.scan(Scan::State(state), limit)?;
        Ok(jobs.into_iter().map(|(s, job)| JobInfo::new(state_of(s), job)).collect())
    }

    fn job(&self, id: JobId) -> Result<Option<JobInfo>, DurableError> {
        let jobs = self.scan(Scan::Id(id.0), 1)?;
        Ok(jobs.into_iter().next().map(|(s, job)| JobInfo::new(state_of(s), job)))
    }

    fn oldest_due(&self) -> Result<Option<SystemTime>, DurableError> {
        let jobs = self.scan(Scan::State(State::Pending), usize::MAX)?;
        Ok(jobs.iter().map(|(_, job)| job.deadline).min().map(crate::job::from_nanos))
    }

    fn cancel_in(&self, id: JobId, states: &[JobState]) -> Result<bool, DurableError> {
        let mut mask = [false; 3];
        for s in states {
            mask[match s {
                JobState::Pending => State::Pending,
                JobState::Leased => State::Leased,
                JobState::Dead => State::Dead,
            } as usize] = true;
        }
        DurableQueue::cancel_in(self, id, mask)
    }

    fn describe(&self) -> String {
        self.path().display().to_string()
    }
}

#[cfg(feature = "redis")]
impl Inspect for crate::redis_queue::RedisQueue {
    fn jobs(&self, state: JobState, limit: usize) -> Result<Vec<JobInfo>, DurableError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let last = limit.min(i64::MAX as usize) - 1;
        let jobs = self.inspect(&["set".into(), state.as_str().into(), last.to_string()])?;
        Ok(jobs.into_iter().map(|(s, job)| JobInfo::new(redis_state(s), job)).collect())
    }

    fn job(&self, id: JobId) -> Result<Option<JobInfo>, DurableError> {
        let jobs = self.inspect(&["job".into(), id.0.to_string()])?;
        Ok(jobs.into_iter().next().map(|(s, job)| JobInfo::new(redis_state(s), job)))
    }

    fn oldest_due(&self) -> Result<Option<SystemTime>, DurableError> {
        Ok(self.jobs(JobState::Pending, 1)?.first().map(|j| j.deadline))
    }

    fn cancel_in(&self, id: JobId, states: &[JobState]) -> Result<bool, DurableError> {
        let letters: String = states
            .iter()
            .map(|s| match s {
                JobState::Pending => 'p',
                JobState::Leased => 'l',
                JobState::Dead => 'd',
            })
            .collect();
        crate::redis_queue::RedisQueue::cancel_in(self, id, &letters)
    }

    fn describe(&self) -> String {
        format!("redis queue {}", self.name())
    }
}

#[cfg(feature = "redis")]
fn redis_state(letter: u8) -> JobState {
    match letter {
        b'l' => JobState::Leased,
        b'd' => JobState::Dead,
        _ => JobState::Pending,
    }
}

/// A shared queue inspects as the queue it shares.
impl<Q: Inspect + ?Sized> Inspect for std::sync::Arc<Q> {
    fn jobs(&self, state: JobState, limit: usize) -> Result<Vec<JobInfo>, DurableError> {
        (**self).jobs(state, limit)
    }
    fn job(&self, id: JobId) -> Result<Option<JobInfo>, DurableError> {
        (**self).job(id)
    }
    fn oldest_due(&self) -> Result<Option<SystemTime>, DurableError> {
        (**self).oldest_due()
    }
    fn cancel_in(&self, id: JobId, states: &[JobState]) -> Result<bool, DurableError> {
        (**self).cancel_in(id, states)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}
