//! Building a scheduler: worker threads, clock and name; starting the queue, the pool
//! and the dispatcher.

use super::metrics::Metrics;
use super::scheduler::{Inner, Scheduler};
use super::BuildError;
use crate::sync::{lock, AtomicU64, Mutex, Ordering};
use crate::{Builder, Clock};
use std::sync::Arc;

/// Configures a [`Scheduler`]: worker threads, clock and name.
///
/// # Examples
///
/// ```
/// use delayq::timer::Scheduler;
/// use delayq::MockClock;
/// use std::sync::mpsc;
/// use std::time::Duration;
///
/// let clock = MockClock::new();
/// let s = Scheduler::builder().threads(1).clock(clock.clone()).build().unwrap();
/// let (tx, rx) = mpsc::channel();
/// s.schedule_after(Duration::from_secs(5), move || tx.send(5).unwrap());
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(rx.recv().unwrap(), 5);
/// ```
#[derive(Debug, Clone, Default)]
pub struct SchedulerBuilder {
    threads: Option<usize>,
    clock: Clock,
    /// `None`: [`DEFAULT_NAME`].
    name: Option<String>,
}

/// The name of a scheduler whose builder was given none.
const DEFAULT_NAME: &str = "timer";

impl SchedulerBuilder {
    /// Runs callbacks on `n` worker threads (default: one per available CPU).
    /// `0` makes [`build`](SchedulerBuilder::build) fail.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::timer::Scheduler;
    ///
    /// assert!(Scheduler::builder().threads(3).build().is_ok());
    /// assert!(Scheduler::builder().threads(0).build().is_err());
    /// ```
    pub fn threads(mut self, n: usize) -> SchedulerBuilder {
        self.threads = Some(n);
        self
    }

    /// The clock that decides when timers are due: a
    /// [`SystemClock`](crate::SystemClock) (the default) or a
    /// [`MockClock`](crate::MockClock).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::timer::Scheduler;
    /// use delayq::MockClock;
    /// use std::time::Duration;
    ///
    /// let clock = MockClock::new();
    /// let s = Scheduler::builder().clock(clock.clone()).build().unwrap();
    /// s.schedule_after(Duration::from_secs(1), || {});
    /// assert_eq!(s.len(), 1); // the mock time has not moved
    /// ```
    pub fn clock(mut self, clock: impl Into<Clock>) -> SchedulerBuilder {
        self.clock = clock.into();
        self
    }

    /// The scheduler's name: the `scheduler` label of the `delayq_timer_*`
    /// metrics it reports with the `metrics` feature (docs/METRICS.md), so
    /// that the schedulers of one process are told apart; give each its own.
    /// `"timer"` unless set. Its queue, a core queue, reports the `delayq_*`
    /// metrics as `queue="timer/<name>"`. Without the feature the name is
    /// kept and unused.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::timer::Scheduler;
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    ///
    /// let s = Scheduler::builder().name("sessions").build().unwrap();
    /// let (tx, rx) = mpsc::channel();
    /// s.schedule_after(Duration::ZERO, move || tx.send("expired").unwrap());
    /// assert_eq!(rx.recv().unwrap(), "expired");
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> SchedulerBuilder {
        self.name = Some(name.into());
        self
    }

    /// Starts the scheduler: a `delayq` queue (threads `delayq-timer-enqueue`
    /// and `delayq-timer-dequeue`), the dispatcher (`delayq-timer-dispatch`) and
    /// the worker pool (`delayq-timer-worker-<i>`).
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroThreads`] for `threads(0)`; [`BuildError::ThreadPool`] if
    /// the pool cannot be built; [`BuildError::Queue`] if its delay queue cannot be
    /// built; [`BuildError::Spawn`] if the dispatcher cannot start.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::timer::{BuildError, Scheduler};
    ///
    /// let e = Scheduler::builder().threads(0).build().unwrap_err();
    /// assert!(matches!(e, BuildError::ZeroThreads));
    /// assert_eq!(e.to_string(), "a scheduler needs at least 1 worker thread");
    /// ```
    pub fn build(self) -> Result<Scheduler, BuildError> {
        let threads = match self.threads {
            Some(0) => return Err(BuildError::ZeroThreads),
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let name = self.name.as_deref().unwrap_or(DEFAULT_NAME);
        let metrics = Metrics::new(name);
        let panicked = Arc::new(AtomicU64::new(0));
        let counter = panicked.clone();
        let handler_metrics = metrics.clone();
        // The workers are spawned here, so that shutdown can join them (rayon
        // lets a dropped pool's threads exit on their own).
        let workers = Arc::new(Mutex::new(Vec::with_capacity(threads)));
        let spawned = workers.clone();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("delayq-timer-worker-{i}"))
            // The last line of defence (every callback and drop is contained
            // already): a panic that escapes a job is counted, never an abort,
            // which is rayon's default.
            .panic_handler(move |payload| {
                // Relaxed: a statistic, as `Scheduler::panicked`.
                counter.fetch_add(1, Ordering::Relaxed);
                handler_metrics.panicked(1);
                std::mem::forget(payload);
            })
            .spawn_handler(move |worker| {
                let mut b = crate::sync::thread::Builder::new();
                if let Some(name) = worker.name() {
                    b = b.name(name.to_owned());
                }
                if let Some(size) = worker.stack_size() {
                    b = b.stack_size(size);
                }
                lock(&spawned).push(b.spawn(|| worker.run())?);
                Ok(())
            })
            .build()
            .map_err(|e| BuildError::ThreadPool(e.to_string()))?;
        let workers = std::mem::take(&mut *lock(&workers));
        let (tx, rx) = Builder::new()
            .clock(self.clock.clone())
            .thread_name_prefix("delayq-timer")
            .name(format!("timer/{name}"))
            .build::<u64>()?;
        let inner = Arc::new(Inner::new(self.clock, tx, rx, workers, panicked, metrics));
        let me = inner.clone();
        // The dispatcher owns the pool: when it stops (shutdown), the pool's
        // threads are told to exit, and shutdown joins them.
        let dispatcher = crate::sync::thread::Builder::new()
            .name("delayq-timer-dispatch".to_owned())
            .spawn(move || me.dispatch(pool))
            .map_err(BuildError::Spawn)?;
        inner.set_dispatcher(dispatcher);
        Ok(Scheduler::from_inner(inner))
    }
}
