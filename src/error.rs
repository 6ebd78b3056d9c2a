//! Errors, shaped like crossbeam-channel's: send errors give the item back, and no
//! error needs `T: Debug` to be printed.

use std::error::Error;
use std::fmt;

/// The queue takes no more sends: it was [`close`](crate::Receiver::close)d (or
/// every [`Sender`](crate::Sender) was dropped), or every
/// [`Receiver`](crate::Receiver) is gone. The item is handed back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

/// Why [`try_send_at`](crate::Sender::try_send_at) failed. The item is handed back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    /// The queue is bounded and holds `capacity` items.
    Full(T),
    /// The queue takes no more sends (as for [`SendError`]). The variant keeps
    /// crossbeam-channel's name; the message says "closed".
    Disconnected(T),
}

/// Why [`send_at_timeout`](crate::Sender::send_at_timeout) failed. The item is handed back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum SendTimeoutError<T> {
    /// The queue stayed full until the timeout.
    Timeout(T),
    /// The queue takes no more sends (as for [`SendError`]).
    Disconnected(T),
}

/// [`recv`](crate::Receiver::recv) failed: the queue is empty and no item can
/// arrive any more (every [`Sender`](crate::Sender) is gone or the queue was closed).
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub struct RecvError;

/// Why [`try_recv`](crate::Receiver::try_recv) returned nothing.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub enum TryRecvError {
    /// No item is due now (items may be pending with later deadlines).
    Empty,
    /// The queue is empty and no item can arrive any more.
    Disconnected,
}

/// Why [`recv_timeout`](crate::Receiver::recv_timeout) or
/// [`recv_deadline`](crate::Receiver::recv_deadline) returned nothing.
#[derive(PartialEq, Eq, Clone, Copy, Debug)]
pub enum RecvTimeoutError {
    /// No item fell due before the timeout.
    Timeout,
    /// The queue is empty and no item can arrive any more.
    Disconnected,
}

/// Why [`Builder::build`](crate::Builder::build) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// `capacity(0)` was asked for: a queue that can hold nothing cannot deliver anything.
    ZeroCapacity,
    /// The thread name prefix holds a NUL byte, which thread names cannot carry.
    InvalidThreadName,
    /// The operating system refused to start a proxy thread.
    Spawn(std::io::Error),
    /// [`Builder::proxy_nice`](crate::Builder::proxy_nice) could not be applied:
    /// a value outside -20..=19 (`InvalidInput`), a raise of priority without
    /// the privilege for it (`PermissionDenied`), or a system without
    /// per-thread nice values (`Unsupported`). No thread is left running.
    ProxyNice(std::io::Error),
}

impl<T> SendError<T> {
    /// Returns the item that could not be sent.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> TrySendError<T> {
    /// Returns the item that could not be sent.
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(t) | TrySendError::Disconnected(t) => t,
        }
    }
    /// `true` if the queue was full.
    pub fn is_full(&self) -> bool {
        matches!(self, TrySendError::Full(_))
    }
    /// `true` if the queue was disconnected or closed.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, TrySendError::Disconnected(_))
    }
}

impl<T> SendTimeoutError<T> {
    /// Returns the item that could not be sent.
    pub fn into_inner(self) -> T {
        match self {
            SendTimeoutError::Timeout(t) | SendTimeoutError::Disconnected(t) => t,
        }
    }
    /// `true` if the send timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, SendTimeoutError::Timeout(_))
    }
    /// `true` if the queue was disconnected or closed.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, SendTimeoutError::Disconnected(_))
    }
}

impl TryRecvError {
    /// `true` if nothing was due.
    pub fn is_empty(&self) -> bool {
        matches!(self, TryRecvError::Empty)
    }
    /// `true` if the queue is empty and disconnected.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, TryRecvError::Disconnected)
    }
}

impl RecvTimeoutError {
    /// `true` if the receive timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, RecvTimeoutError::Timeout)
    }
    /// `true` if the queue is empty and disconnected.
    pub fn is_disconnected(&self) -> bool {
        matches!(self, RecvTimeoutError::Disconnected)
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError { .. }")
    }
}
impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a closed delay queue")
    }
}
impl<T> Error for SendError<T> {}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}
impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("sending on a full delay queue"),
            TrySendError::Disconnected(_) => f.write_str("sending on a closed delay queue"),
        }
    }
}
impl<T> Error for TrySendError<T> {}

impl<T> fmt::Debug for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => f.write_str("Timeout(..)"),
            SendTimeoutError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}
impl<T> fmt::Display for SendTimeoutError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendTimeoutError::Timeout(_) => f.write_str("timed out waiting on a full delay queue"),
            SendTimeoutError::Disconnected(_) => f.write_str("sending on a closed delay queue"),
        }
    }
}
impl<T> Error for SendTimeoutError<T> {}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on an empty and disconnected delay queue")
    }
}
impl Error for RecvError {}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("no item of the delay queue is due"),
            TryRecvError::Disconnected => f.write_str("receiving on an empty and disconnected delay queue"),
        }
    }
}
impl Error for TryRecvError {}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvTimeoutError::Timeout => f.write_str("timed out waiting for a due item"),
            RecvTimeoutError::Disconnected => {
                f.write_str("receiving on an empty and disconnected delay queue")
            }
        }
    }
}
impl Error for RecvTimeoutError {}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroCapacity => f.write_str("a delay queue needs a capacity of at least 1"),
            BuildError::InvalidThreadName => f.write_str("thread name prefix contains a NUL byte"),
            BuildError::Spawn(e) => write!(f, "could not start a proxy thread: {e}"),
            BuildError::ProxyNice(e) => write!(f, "could not set the proxy threads' nice value: {e}"),
        }
    }
}
impl Error for BuildError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            BuildError::Spawn(e) | BuildError::ProxyNice(e) => Some(e),
            _ => None,
        }
    }
}

impl<T> From<SendError<T>> for TrySendError<T> {
    fn from(e: SendError<T>) -> Self {
        TrySendError::Disconnected(e.0)
    }
}
impl<T> From<SendError<T>> for SendTimeoutError<T> {
    fn from(e: SendError<T>) -> Self {
        SendTimeoutError::Disconnected(e.0)
    }
}
impl From<RecvError> for TryRecvError {
    fn from(_: RecvError) -> Self {
        TryRecvError::Disconnected
    }
}
impl From<RecvError> for RecvTimeoutError {
    fn from(_: RecvError) -> Self {
        RecvTimeoutError::Disconnected
    }
}
