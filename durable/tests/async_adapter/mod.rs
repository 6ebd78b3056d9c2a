//! The async clients under the blocking contract: [`BlockOn`] implements
//! `JobQueue` by running each `AsyncJobQueue` call to completion on an
//! executor, so the conformance suite (`tests/conformance/`) runs against the
//! async clients unchanged — `futures::executor::block_on` for the embedded
//! queue (no runtime), a tokio runtime for Redis.
// Each test file uses its part (the embedded one no tokio).
#![allow(dead_code)]

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, SystemTime};

use delayq_durable::{
    AsyncJobQueue, DurableError, Fire, Job, JobId, JobQueue, SendOptions, Sent, Stats, StopSignal,
    StoredSchedule,
};

/// Runs a future to completion on the calling thread.
pub trait Exec: Send + Sync + 'static {
    fn run<F: Future>(&self, f: F) -> F::Output;
}

/// `futures::executor::block_on`: no runtime at all.
pub struct Futures;

impl Exec for Futures {
    fn run<F: Future>(&self, f: F) -> F::Output {
        futures::executor::block_on(f)
    }
}

/// A tokio runtime (time and I/O drivers on), shared by every calling thread.
pub struct Tokio(pub tokio::runtime::Runtime);

impl Tokio {
    pub fn new() -> Tokio {
        Tokio(tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap())
    }
}

impl Exec for Tokio {
    fn run<F: Future>(&self, f: F) -> F::Output {
        self.0.block_on(f)
    }
}

/// An async client as a `JobQueue`; `keep` lives as long as it (a
/// temporary directory).
pub struct BlockOn<Q, E> {
    pub q: Q,
    pub exec: Arc<E>,
    pub _keep: Box<dyn Send + Sync>,
}

impl<Q: AsyncJobQueue, E: Exec> JobQueue for BlockOn<Q, E> {
    fn send_at(&self, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        self.exec.run(self.q.send_at(payload, at))
    }
    fn send_after(&self, payload: &[u8], delay: Duration) -> Result<JobId, DurableError> {
        self.exec.run(self.q.send_after(payload, delay))
    }
    fn send_kind_at(&self, kind: &str, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError> {
        self.exec.run(self.q.send_kind_at(kind, payload, at))
    }
    fn send_kind_after(&self, kind: &str, payload: &[u8], delay: Duration) -> Result<JobId, DurableError> {
        self.exec.run(self.q.send_kind_after(kind, payload, delay))
    }
    fn send_many(&self, jobs: &[(&[u8], SystemTime)]) -> Result<Vec<JobId>, DurableError> {
        self.exec.run(self.q.send_many(jobs))
    }
    fn reserve(&self, lease: Duration) -> Result<Job, DurableError> {
        self.exec.run(self.q.reserve(lease))
    }
    fn reserve_timeout(&self, lease: Duration, timeout: Duration) -> Result<Option<Job>, DurableError> {
        self.exec.run(self.q.reserve_timeout(lease, timeout))
    }
    fn reserve_or_stop(&self, lease: Duration, stop: &StopSignal) -> Result<Option<Job>, DurableError> {
        self.exec.run(self.q.reserve_or_stop(lease, stop))
    }
    fn reserve_many(&self, lease: Duration, max: usize, timeout: Duration) -> Result<Vec<Job>, DurableError> {
        self.exec.run(self.q.reserve_many(lease, max, timeout))
    }
    fn ack(&self, job: &Job) -> Result<bool, DurableError> {
        self.exec.run(self.q.ack(job))
    }
    fn ack_many(&self, jobs: &[Job]) -> Result<Vec<bool>, DurableError> {
        self.exec.run(self.q.ack_many(jobs))
    }
    fn nack(&self, job: &Job, retry_at: SystemTime) -> Result<bool, DurableError> {
        self.exec.run(self.q.nack(job, retry_at))
    }
    fn nack_with_error(&self, job: &Job, retry_at: SystemTime, error: &str) -> Result<bool, DurableError> {
        self.exec.run(self.q.nack_with_error(job, retry_at, error))
    }
    fn kill(&self, job: &Job, error: &str) -> Result<bool, DurableError> {
        self.exec.run(self.q.kill(job, error))
    }
    fn extend(&self, job: &Job, lease: Duration) -> Result<bool, DurableError> {
        self.exec.run(self.q.extend(job, lease))
    }
    fn cancel(&self, id: JobId) -> Result<bool, DurableError> {
        self.exec.run(self.q.cancel(id))
    }
    fn len(&self) -> Result<u64, DurableError> {
        self.exec.run(self.q.len())
    }
    fn stats(&self) -> Result<Stats, DurableError> {
        self.exec.run(self.q.stats())
    }
    fn dead_jobs(&self, limit: usize) -> Result<Vec<Job>, DurableError> {
        self.exec.run(self.q.dead_jobs(limit))
    }
    fn requeue_dead(&self, id: JobId, at: SystemTime) -> Result<bool, DurableError> {
        self.exec.run(self.q.requeue_dead(id, at))
    }
    fn send_with(&self, payload: &[u8], at: SystemTime, opts: &SendOptions) -> Result<Sent, DurableError> {
        self.exec.run(self.q.send_with(payload, at, opts))
    }
    // Not in the async contract (the worker and the schedule API are
    // blocking): the suite's tests of these run on the blocking clients.
    fn reserve_excluding(
        &self,
        _: Duration,
        _: &[String],
        _: &StopSignal,
    ) -> Result<Option<Job>, DurableError> {
        Err(DurableError::InvalidArgument("not in AsyncJobQueue"))
    }
    fn schedule_store(&self, _: &str, _: &[u8], _: Option<u64>) -> Result<(), DurableError> {
        Err(DurableError::InvalidArgument("not in AsyncJobQueue"))
    }
    fn schedule_get(&self, _: &str) -> Result<Option<StoredSchedule>, DurableError> {
        Err(DurableError::InvalidArgument("not in AsyncJobQueue"))
    }
    fn schedule_list(&self) -> Result<Vec<StoredSchedule>, DurableError> {
        Err(DurableError::InvalidArgument("not in AsyncJobQueue"))
    }
    fn schedule_remove(&self, _: &str) -> Result<bool, DurableError> {
        Err(DurableError::InvalidArgument("not in AsyncJobQueue"))
    }
    fn schedule_fire(&self, _: &str, _: &Fire) -> Result<bool, DurableError> {
        Err(DurableError::InvalidArgument("not in AsyncJobQueue"))
    }
}

/// A waker that counts its wakes (for "no busy polling" checks).
#[derive(Default)]
pub struct CountingWaker(pub AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A waker whose `wake` panics once armed (a broken executor); it counts
/// every wake, the panicking ones too.
#[derive(Default)]
pub struct PanickingWaker {
    pub woken: AtomicUsize,
    pub armed: AtomicBool,
}

impl PanickingWaker {
    /// One that panics from its first wake.
    pub fn armed() -> Arc<PanickingWaker> {
        Arc::new(PanickingWaker { woken: AtomicUsize::new(0), armed: AtomicBool::new(true) })
    }

    pub fn woken(&self) -> usize {
        self.woken.load(Ordering::SeqCst)
    }
}

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.fetch_add(1, Ordering::SeqCst);
        if self.armed.load(Ordering::SeqCst) {
            panic!("a waker panics (expected by the test)");
        }
    }
}

/// Polls `f` once with `waker`; `Some(output)` if it completed.
pub fn poll_once<F: Future>(f: std::pin::Pin<&mut F>, waker: &Waker) -> Option<F::Output> {
    match f.poll(&mut Context::from_waker(waker)) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

/// Polls a fresh future once, then drops it.
pub fn poll_once_and_drop<F: Future>(f: F, waker: &Waker) -> Option<F::Output> {
    let f = pin!(f);
    poll_once(f, waker)
}
