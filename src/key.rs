//! Keys: the handle to one sent item, for `cancel` and `reschedule`.

use std::fmt;

/// Names one sent item of one queue, for [`cancel`](crate::Sender::cancel) and
/// [`reschedule`](crate::Sender::reschedule).
///
/// Keys are never reused: each queue numbers its items with a 64-bit counter and
/// each queue has its own 64-bit id, so a stale key (of a delivered or cancelled
/// item) or a key of another queue never names some other item.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let (tx, _rx) = delayq::unbounded();
/// let a = tx.send_after("a", Duration::from_secs(60)).unwrap();
/// let b = tx.send_after("b", Duration::from_secs(60)).unwrap();
/// assert_ne!(a, b);
/// assert_eq!(tx.cancel(a), Some("a"));
/// assert_eq!(tx.cancel(a), None); // stale: never another item
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub(crate) queue: u64,
    pub(crate) seq: u64,
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({}:{})", self.queue, self.seq)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.queue, self.seq)
    }
}
