//! Why a [`Scheduler`](super::Scheduler) could not be built.

use std::error::Error;
use std::fmt;

/// Why [`SchedulerBuilder::build`](super::SchedulerBuilder::build) failed.
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
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// `threads(0)` was asked for: nothing would run the callbacks.
    ZeroThreads,
    /// The worker thread pool could not be built (the message says why).
    ThreadPool(String),
    /// The scheduler's delay queue could not be built.
    Queue(crate::BuildError),
    /// The operating system refused to start the dispatcher thread.
    Spawn(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroThreads => f.write_str("a scheduler needs at least 1 worker thread"),
            BuildError::ThreadPool(why) => write!(f, "could not build the worker pool: {why}"),
            BuildError::Queue(e) => write!(f, "could not build the scheduler's queue: {e}"),
            BuildError::Spawn(e) => write!(f, "could not start the dispatcher thread: {e}"),
        }
    }
}

impl Error for BuildError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            BuildError::Queue(e) => Some(e),
            BuildError::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

impl From<crate::BuildError> for BuildError {
    fn from(e: crate::BuildError) -> Self {
        BuildError::Queue(e)
    }
}
