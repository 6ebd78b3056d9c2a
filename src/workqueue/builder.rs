//! Building a work queue: rate limiter and clock; starting the delay stage.

use super::queue::{Inner, WorkQueue};
use super::rate_limiter::{default_rate_limiter, RateLimiter};
use super::BuildError;
use crate::{Builder, Clock};
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

/// Configures a [`WorkQueue`]: rate limiter, clock and name.
///
/// # Examples
///
/// ```
/// use delayq::workqueue::{TokenBucket, WorkQueue};
/// use delayq::MockClock;
/// use std::time::Duration;
///
/// let clock = MockClock::new();
/// let q = WorkQueue::builder()
///     .rate_limiter(TokenBucket::with_clock(1.0, 1, clock.clone()))
///     .clock(clock.clone())
///     .build()
///     .unwrap();
/// q.add_rate_limited("a"); // the burst: ready at once
/// q.add_rate_limited("b"); // one second later
/// assert_eq!(q.len(), 1);
/// clock.advance(Duration::from_secs(1));
/// assert_eq!(q.len(), 2);
/// ```
pub struct WorkQueueBuilder<K> {
    limiter: Option<Box<dyn RateLimiter<K>>>,
    clock: Clock,
    name: String,
}

/// The name of a work queue whose builder was given none.
const DEFAULT_NAME: &str = "workqueue";

impl<K> Default for WorkQueueBuilder<K> {
    fn default() -> Self {
        WorkQueueBuilder { limiter: None, clock: Clock::default(), name: DEFAULT_NAME.to_owned() }
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> WorkQueueBuilder<K> {
    /// The limiter of [`add_rate_limited`](WorkQueue::add_rate_limited) (default:
    /// [`default_rate_limiter`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::{ExponentialFailure, WorkQueue};
    /// use std::time::Duration;
    ///
    /// let q = WorkQueue::builder()
    ///     .rate_limiter(ExponentialFailure::new(Duration::from_secs(1), Duration::from_secs(60)))
    ///     .build()
    ///     .unwrap();
    /// q.add_rate_limited('x');
    /// assert_eq!(q.len(), 0); // ready in a second
    /// assert_eq!(q.num_requeues(&'x'), 1);
    /// ```
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<K> + 'static) -> Self {
        self.limiter = Some(Box::new(limiter));
        self
    }

    /// The clock of the delay stage and of the metrics: a
    /// [`SystemClock`](crate::SystemClock) (the default) or a
    /// [`MockClock`](crate::MockClock).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::WorkQueue;
    /// use delayq::MockClock;
    /// use std::time::Duration;
    ///
    /// let clock = MockClock::new();
    /// let q = WorkQueue::builder().clock(clock.clone()).build().unwrap();
    /// q.add_after(1, Duration::from_secs(3600));
    /// clock.advance(Duration::from_secs(3600));
    /// assert_eq!(q.get(), Some(1));
    /// ```
    pub fn clock(mut self, clock: impl Into<Clock>) -> Self {
        self.clock = clock.into();
        self
    }

    /// The queue's name: the `name` label of the `workqueue_*` metrics it
    /// reports with the `metrics` feature (client-go's `name`; see
    /// docs/METRICS.md), so that the work queues of one process are told
    /// apart; give each its own. `"workqueue"` unless set. Its delay stage, a
    /// core queue, reports the `delayq_*` metrics as `queue="workqueue/<name>"`.
    /// Without the feature the name is kept and unused.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::WorkQueue;
    ///
    /// let q = WorkQueue::builder().name("pods").build().unwrap();
    /// q.add("default/web-0");
    /// assert_eq!(q.get(), Some("default/web-0"));
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Starts the queue: its delay stage (a `delayq` queue, threads
    /// `delayq-workqueue-enqueue` and `delayq-workqueue-dequeue`) and its mover
    /// thread (`delayq-workqueue-mover`).
    ///
    /// # Errors
    ///
    /// [`BuildError::Queue`] if the delay stage's queue cannot be built;
    /// [`BuildError::Spawn`] if the mover thread cannot start.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::workqueue::WorkQueue;
    ///
    /// let q = WorkQueue::<String>::builder().build().unwrap();
    /// assert!(q.is_empty());
    /// ```
    pub fn build(self) -> Result<WorkQueue<K>, BuildError> {
        let limiter = self.limiter.unwrap_or_else(|| Box::new(default_rate_limiter()));
        let (tx, rx) = Builder::new()
            .clock(self.clock.clone())
            .thread_name_prefix("delayq-workqueue")
            .name(format!("workqueue/{}", self.name))
            .build::<K>()?;
        let inner = Arc::new(Inner::new(self.clock.clone(), limiter, tx, rx, &self.name));
        // After the delay queue's own listener (subscribed when it was built),
        // which puts the items a mock step made due in its consumers' ring.
        let weak = Arc::downgrade(&inner);
        let subscription = self.clock.subscribe(move || {
            if let Some(inner) = weak.upgrade() {
                inner.clock_moved();
            }
        });
        let me = inner.clone();
        let mover = crate::sync::thread::Builder::new()
            .name("delayq-workqueue-mover".to_owned())
            .spawn(move || me.run_mover())
            .map_err(BuildError::Spawn)?;
        Ok(WorkQueue::from_parts(inner, mover, subscription))
    }
}

impl<K> fmt::Debug for WorkQueueBuilder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueueBuilder")
            .field("rate_limiter", &self.limiter.as_ref().map(|_| ".."))
            .field("clock", &self.clock)
            .field("name", &self.name)
            .finish()
    }
}
