//! Why a [`WorkQueue`](super::WorkQueue) could not be built.

use std::error::Error;
use std::fmt;

/// Why [`WorkQueueBuilder::build`](super::WorkQueueBuilder::build) failed.
///
/// # Examples
///
/// ```
/// use delayq::workqueue::BuildError;
///
/// let e = BuildError::from(delayq::BuildError::ZeroCapacity);
/// assert_eq!(e.to_string(), "could not build the delay stage: a delay queue needs a capacity of at least 1");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// The delay stage's queue could not be built.
    Queue(crate::BuildError),
    /// The operating system refused to start the mover thread.
    Spawn(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Queue(e) => write!(f, "could not build the delay stage: {e}"),
            BuildError::Spawn(e) => write!(f, "could not start the mover thread: {e}"),
        }
    }
}

impl Error for BuildError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            BuildError::Queue(e) => Some(e),
            BuildError::Spawn(e) => Some(e),
        }
    }
}

impl From<crate::BuildError> for BuildError {
    fn from(e: crate::BuildError) -> Self {
        BuildError::Queue(e)
    }
}
