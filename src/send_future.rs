//! The async send side (feature `async`): a send that waits for room in a
//! bounded queue without blocking a thread.
//!
//! Cancellation safety: a [`SendFut`] dropped before it completed has not sent
//! its item; the item is dropped with the future, exactly once. A wakeup for
//! room that it received and did not use passes to another waiting sender.

use crate::clock::Ticks;
use crate::error::SendError;
use crate::key::Key;
use crate::sender::{SendFail, Sender, Wait};
use crate::waiters::Slot;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

impl<T> Sender<T> {
    /// Sends `item` due at `deadline`, waiting without blocking a thread while a
    /// bounded queue is full: the async [`send_at`](Sender::send_at). On an
    /// unbounded queue it is ready at the first poll.
    ///
    /// # Errors
    ///
    /// [`SendError`] with the item if the queue takes no more sends.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    ///
    /// let (tx, rx) = delayq::bounded(1);
    /// delayq::doc_block_on(tx.send_at_async("a", Instant::now())).unwrap();
    /// // Full: the second send waits until the receive below makes room.
    /// let tx2 = tx.clone();
    /// let t = std::thread::spawn(move || delayq::doc_block_on(tx2.send_at_async("b", Instant::now())));
    /// assert_eq!(rx.recv(), Ok("a"));
    /// assert!(t.join().unwrap().is_ok());
    /// assert_eq!(rx.recv(), Ok("b"));
    /// ```
    pub fn send_at_async(&self, item: T, deadline: Instant) -> SendFut<'_, T> {
        let d = self.shared().deadline_ticks(deadline);
        SendFut { tx: self, item: Some(item), deadline: d, slot: Slot::default() }
    }

    /// As [`send_at_async`](Sender::send_at_async), due `delay` from now (the
    /// deadline is fixed when this is called, not when the room appears).
    ///
    /// # Errors
    ///
    /// As [`send_at_async`](Sender::send_at_async).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// delayq::doc_block_on(tx.send_after_async(5, Duration::ZERO)).unwrap();
    /// assert_eq!(rx.recv(), Ok(5));
    /// ```
    pub fn send_after_async(&self, item: T, delay: Duration) -> SendFut<'_, T> {
        let d = Ticks::after(self.shared().now_ticks(), delay);
        SendFut { tx: self, item: Some(item), deadline: d, slot: Slot::default() }
    }
}

/// The future of [`Sender::send_at_async`] and [`Sender::send_after_async`]:
/// `Output = Result<Key, SendError<T>>`.
///
/// Cancellation safe: dropped before it completed, it has not sent its item,
/// which is dropped with it (exactly once).
#[must_use = "futures do nothing unless polled"]
pub struct SendFut<'a, T> {
    tx: &'a Sender<T>,
    item: Option<T>,
    deadline: u64,
    slot: Slot,
}

// The item is never pinned: the future only moves it in and out of its `Option`.
impl<T> Unpin for SendFut<'_, T> {}

impl<T> Future for SendFut<'_, T> {
    type Output = Result<Key, SendError<T>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let SendFut { tx, item, deadline, slot } = &mut *self;
        let deadline = *deadline;
        slot.poll(&tx.shared().signals.producers, cx, |_| {
            let it = item.take()?;
            match tx.send_ticks(it, deadline, Wait::Never) {
                Ok(key) => Some(Ok(key)),
                Err(SendFail::Full(it) | SendFail::Timeout(it)) => {
                    *item = Some(it);
                    None
                }
                Err(SendFail::Disconnected(it)) => Some(Err(SendError(it))),
            }
        })
    }
}

impl<T> Drop for SendFut<'_, T> {
    fn drop(&mut self) {
        self.slot.leave(&self.tx.shared().signals.producers);
    }
}

impl<T> fmt::Debug for SendFut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendFut").field("sent", &self.item.is_none()).finish()
    }
}
