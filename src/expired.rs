//! `Expired<T>`: a received item with its key and deadline.

use crate::key::Key;
use std::fmt;
use std::time::Instant;

/// An item that fell due, with the [`Key`] its send returned and its deadline:
/// what the `*_entry` forms of [`Receiver`](crate::Receiver) return.
///
/// With the key, a consumer can settle a race between its own `cancel` (or
/// `reschedule`) and the delivery without putting ids into `T`; with the
/// deadline, it can measure how late the item came out.
///
/// # Examples
///
/// ```
/// use delayq::{Builder, MockClock};
/// use std::time::Duration;
///
/// let clock = MockClock::new();
/// let (tx, rx) = Builder::new().clock(clock.clone()).build().unwrap();
/// let due = clock.now() + Duration::from_secs(5);
/// let key = tx.send_at("job", due).unwrap();
/// clock.advance(Duration::from_secs(5));
/// let e = rx.try_recv_entry().unwrap();
/// assert_eq!((e.key(), e.deadline(), *e.get_ref()), (key, due, "job"));
/// assert_eq!(e.into_inner(), "job");
/// ```
pub struct Expired<T> {
    pub(crate) item: T,
    pub(crate) key: Key,
    pub(crate) deadline: Instant,
}

impl<T> Expired<T> {
    /// The key the item's send returned.
    pub fn key(&self) -> Key {
        self.key
    }

    /// The item's deadline, by the queue's clock (its last one, after a
    /// `reschedule`). Exact between the queue's origin (a century before it was
    /// built) and its horizon (about 484 years after); outside that range it is
    /// clamped to it: a deadline more than a century in the past reports the
    /// origin plus one nanosecond (the index keeps tick 0 as tick 1), and one
    /// that fell due only because a mock clock was stepped past the horizon
    /// reports the horizon.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The item.
    pub fn get_ref(&self) -> &T {
        &self.item
    }

    /// The item, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.item
    }

    /// Takes the item out.
    pub fn into_inner(self) -> T {
        self.item
    }
}

impl<T: fmt::Debug> fmt::Debug for Expired<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Expired")
            .field("item", &self.item)
            .field("key", &self.key)
            .field("deadline", &self.deadline)
            .finish()
    }
}
