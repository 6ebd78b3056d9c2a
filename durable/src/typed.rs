//! [`Typed`]: payloads as any serde type, stored as JSON.

use std::fmt;
use std::marker::PhantomData;
use std::time::{Duration, SystemTime};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::contract::JobQueue;
use crate::error::DurableError;
use crate::job::{Job, JobId};
use crate::queue::DurableQueue;

/// A [`JobQueue`] whose payloads are values of `T`, encoded as JSON (readable
/// in the file or in Redis, and stable across versions of this crate).
///
/// `send_*` refuse, with [`DurableError::Codec`] and nothing stored, a value
/// whose JSON does not decode back as `T`: JSON has no NaN or infinity (they
/// would be written as `null`), so an `f64` field holding one is refused. (An
/// `Option<f64>` holding NaN does decode back, as `None`.) Each send decodes
/// its own encoding once to check this.
///
/// A job whose payload does not decode as `T` (sent by other code, or by an
/// older `T`) makes `reserve` return [`DurableError::Codec`]; its lease is left
/// to expire, so it is retried and, after `max_attempts`, lands in the dead
/// set, where the raw queue ([`queue`](Typed::queue)) can inspect it.
///
/// ```
/// use std::time::Duration;
/// use delayq_durable::{DurableQueue, Typed};
///
/// #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
/// struct Email { to: String, attempt_note: u32 }
///
/// # let dir = std::env::temp_dir().join(format!("delayq-doc-typed-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let q: Typed<Email> = Typed::new(DurableQueue::open(dir.join("typed.redb")).unwrap());
/// q.send_after(&Email { to: "ana@example.com".into(), attempt_note: 0 }, Duration::ZERO).unwrap();
/// let job = q.reserve(Duration::from_secs(30)).unwrap();
/// assert_eq!(job.value().to, "ana@example.com");
/// assert!(q.ack(&job).unwrap());
/// # drop(q); std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub struct Typed<T, Q = DurableQueue> {
    queue: Q,
    _items: PhantomData<fn(T) -> T>,
}

/// A leased job and its decoded payload.
pub struct TypedJob<T> {
    job: Job,
    value: T,
}

impl<T> TypedJob<T> {
    /// The decoded payload.
    pub fn value(&self) -> &T {
        &self.value
    }
    /// Takes the decoded payload.
    pub fn into_value(self) -> T {
        self.value
    }
    /// The job: id, deadline, attempt, lease.
    pub fn job(&self) -> &Job {
        &self.job
    }
}

impl<T: fmt::Debug> fmt::Debug for TypedJob<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedJob").field("job", &self.job).field("value", &self.value).finish()
    }
}

impl<T, Q: fmt::Debug> fmt::Debug for Typed<T, Q> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Typed").field("queue", &self.queue).finish()
    }
}

impl<T, Q: Clone> Clone for Typed<T, Q> {
    fn clone(&self) -> Self {
        Typed { queue: self.queue.clone(), _items: PhantomData }
    }
}

impl<T: Serialize + DeserializeOwned, Q: JobQueue> Typed<T, Q> {
    /// Wraps a queue.
    pub fn new(queue: Q) -> Self {
        Typed { queue, _items: PhantomData }
    }

    /// The raw queue underneath.
    pub fn queue(&self) -> &Q {
        &self.queue
    }

    /// The value as JSON, checked to decode as `T` again: JSON has no NaN or
    /// infinity (serde_json writes `null`), and a `Serialize` and a
    /// `Deserialize` that disagree would store a job no `reserve` can read.
    /// Such a value is refused here, before anything is stored.
    fn encode(value: &T) -> Result<Vec<u8>, DurableError> {
        let bytes = serde_json::to_vec(value).map_err(|e| DurableError::Codec(e.to_string()))?;
        if let Err(e) = serde_json::from_slice::<T>(&bytes) {
            return Err(DurableError::Codec(format!(
                "the value would be stored as JSON that does not decode back (NaN and \
                 infinite floats become null): {e}"
            )));
        }
        Ok(bytes)
    }

    fn decode(job: Job) -> Result<TypedJob<T>, DurableError> {
        let value = serde_json::from_slice(job.payload())
            .map_err(|e| DurableError::Codec(format!("{} does not decode: {e}", job.id())))?;
        Ok(TypedJob { job, value })
    }

    /// [`JobQueue::send_at`] for a value.
    pub fn send_at(&self, value: &T, at: SystemTime) -> Result<JobId, DurableError> {
        self.queue.send_at(&Self::encode(value)?, at)
    }

    /// [`JobQueue::send_after`] for a value.
    pub fn send_after(&self, value: &T, delay: Duration) -> Result<JobId, DurableError> {
        self.queue.send_after(&Self::encode(value)?, delay)
    }

    /// [`JobQueue::reserve`], decoded.
    pub fn reserve(&self, lease: Duration) -> Result<TypedJob<T>, DurableError> {
        Self::decode(self.queue.reserve(lease)?)
    }

    /// [`JobQueue::reserve_timeout`], decoded.
    pub fn reserve_timeout(
        &self,
        lease: Duration,
        timeout: Duration,
    ) -> Result<Option<TypedJob<T>>, DurableError> {
        self.queue.reserve_timeout(lease, timeout)?.map(Self::decode).transpose()
    }

    /// [`JobQueue::ack`].
    pub fn ack(&self, job: &TypedJob<T>) -> Result<bool, DurableError> {
        self.queue.ack(&job.job)
    }

    /// [`JobQueue::nack`].
    pub fn nack(&self, job: &TypedJob<T>, retry_at: SystemTime) -> Result<bool, DurableError> {
        self.queue.nack(&job.job, retry_at)
    }

    /// [`JobQueue::extend`].
    pub fn extend(&self, job: &TypedJob<T>, lease: Duration) -> Result<bool, DurableError> {
        self.queue.extend(&job.job, lease)
    }

    /// [`JobQueue::cancel`].
    pub fn cancel(&self, id: JobId) -> Result<bool, DurableError> {
        self.queue.cancel(id)
    }

    /// [`JobQueue::len`].
    pub fn len(&self) -> Result<u64, DurableError> {
        self.queue.len()
    }

    /// [`JobQueue::is_empty`].
    pub fn is_empty(&self) -> Result<bool, DurableError> {
        self.queue.is_empty()
    }
}
