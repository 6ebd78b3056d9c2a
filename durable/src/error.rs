//! The one error type of the durable queues. Every variant says what went wrong in
//! words a user can act on; none of them is a panic, and none loses a job: an
//! operation that fails left the store as it was before the call.

use std::error::Error;
use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why a durable queue operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum DurableError {
    /// Another process (or another `DurableQueue` in this one) has the database
    /// file open. One process owns a file at a time: the in-memory timer index
    /// that wakes `reserve` at each deadline lives in that process.
    Locked {
        /// The database file.
        path: PathBuf,
    },
    /// The file is not a database this crate can read: not a redb file, a
    /// truncated or altered one, or a record that does not decode. Nothing was
    /// changed; no job was dropped to make the file open.
    Corrupt {
        /// The database file (empty for a Redis backend).
        path: PathBuf,
        /// What was found.
        detail: String,
    },
    /// The operating system refused: permission denied, disk full, a missing
    /// directory, an I/O error.
    Io {
        /// What was being done ("opening /var/lib/jobs.redb", "committing").
        context: String,
        /// The error the system gave.
        source: io::Error,
    },
    /// A payload over the queue's configured limit
    /// ([`Builder::max_payload`](crate::Builder::max_payload)). Nothing was stored.
    PayloadTooLarge {
        /// The payload's length in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// A deadline more than 2^52 µs (about 142.7 years) from now, the furthest
    /// every backend represents exactly (Redis keeps times as µs in Lua's
    /// doubles); both backends accept the same range. Nothing was stored.
    DeadlineOutOfRange,
    /// An argument out of range (a zero lease, a zero `max_attempts`, a batch
    /// limit of zero); the message names it.
    InvalidArgument(&'static str),
    /// The queue was closed, or its writer thread is gone.
    Closed,
    /// A typed payload did not encode or decode (the [`Typed`](crate::Typed) wrapper).
    Codec(String),
    /// The storage engine failed for a reason not covered above.
    Storage(String),
    /// The Redis backend: a connection, protocol or script error, with the
    /// server's message.
    Redis(String),
    /// The PostgreSQL backend: a connection or statement error (after
    /// retrying, where a retry is safe), with the server's message.
    Postgres(String),
}

impl fmt::Display for DurableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurableError::Locked { path } => {
                write!(f, "database {} is locked: another process (or queue) has it open", path.display())
            }
            DurableError::Corrupt { path, detail } => {
                write!(f, "database {} is corrupt or not a delayq database: {detail}", path.display())
            }
            DurableError::Io { context, source } => write!(f, "{context}: {source}"),
            DurableError::PayloadTooLarge { len, max } => {
                write!(f, "payload of {len} bytes is over the limit of {max} bytes")
            }
            DurableError::DeadlineOutOfRange => f.write_str(
                "deadline is more than 2^52 µs (about 142 years) from now, the furthest a queue accepts",
            ),
            DurableError::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            DurableError::Closed => f.write_str("the durable queue is closed"),
            DurableError::Codec(msg) => write!(f, "payload codec: {msg}"),
            DurableError::Storage(msg) => write!(f, "storage engine: {msg}"),
            DurableError::Redis(msg) => write!(f, "redis: {msg}"),
            DurableError::Postgres(msg) => write!(f, "postgres: {msg}"),
        }
    }
}

impl Error for DurableError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            DurableError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl DurableError {
    /// Whether this is [`DurableError::Locked`].
    pub fn is_locked(&self) -> bool {
        matches!(self, DurableError::Locked { .. })
    }

    /// Whether this is [`DurableError::Corrupt`].
    pub fn is_corrupt(&self) -> bool {
        matches!(self, DurableError::Corrupt { .. })
    }

    /// Whether this is [`DurableError::Closed`].
    pub fn is_closed(&self) -> bool {
        matches!(self, DurableError::Closed)
    }

    /// A copy for every caller of a failed group commit (an `io::Error` is not
    /// `Clone`, so its kind and message are kept).
    pub(crate) fn duplicate(&self) -> DurableError {
        match self {
            DurableError::Locked { path } => DurableError::Locked { path: path.clone() },
            DurableError::Corrupt { path, detail } => {
                DurableError::Corrupt { path: path.clone(), detail: detail.clone() }
            }
            DurableError::Io { context, source } => DurableError::Io {
                context: context.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
            DurableError::PayloadTooLarge { len, max } => {
                DurableError::PayloadTooLarge { len: *len, max: *max }
            }
            DurableError::DeadlineOutOfRange => DurableError::DeadlineOutOfRange,
            DurableError::InvalidArgument(what) => DurableError::InvalidArgument(what),
            DurableError::Closed => DurableError::Closed,
            DurableError::Codec(msg) => DurableError::Codec(msg.clone()),
            DurableError::Storage(msg) => DurableError::Storage(msg.clone()),
            DurableError::Redis(msg) => DurableError::Redis(msg.clone()),
            DurableError::Postgres(msg) => DurableError::Postgres(msg.clone()),
        }
    }
}
