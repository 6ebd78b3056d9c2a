//! The async receive side (feature `async`): futures and streams that wait for a
//! due item without blocking a thread, on any executor.
//!
//! A waiting future registers its task's `Waker` in the same waiter list the
//! blocking receivers use (`waiters.rs`), and is woken as they are when an
//! item falls due — no runtime timer is involved, so the futures work under
//! tokio, async-std, smol or `futures::executor` alike. A polled task
//! performs the dequeue round itself when the index holds a due item, as a
//! blocking receiver does. One difference in precision: when nothing is due
//! a blocking receiver may lead — sleep until the next deadline and move the
//! item itself — while a task cannot sleep with a timeout, so it asks the
//! dequeue proxy to lead for it (`lead.rs`): at the deadline the proxy's
//! timer fires, it moves the item and wakes the task, two wake-ups in
//! series instead of one (unless a blocking receiver leads).
//!
//! # Cancellation safety
//!
//! Every future and stream here is cancellation safe: dropping one (a `select!`
//! that took another branch, a timeout) loses no item. An item is either
//! returned by a poll that completed, or still in the queue. A future that was
//! woken for an item and is dropped before it polls again passes that wakeup on
//! to another waiting receiver, so the item is not left waiting for a receiver
//! that is gone.

use crate::egress::Due;
use crate::error::RecvError;
use crate::expired::Expired;
use crate::receiver::{take_many, Receiver};
use crate::waiters::Slot;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

impl<T> Receiver<T> {
    /// Waits, without blocking a thread, until an item is due and returns it:
    /// the async [`recv`](Receiver::recv). Cancellation safe (see [`RecvFut`]).
    ///
    /// # Errors
    ///
    /// [`RecvError`] once the queue is empty and no item can arrive any more.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// tx.send_after("soon", Duration::from_millis(2)).unwrap();
    /// drop(tx);
    /// let got = delayq::doc_block_on(async { (rx.recv_async().await, rx.recv_async().await) });
    /// assert_eq!(got, (Ok("soon"), Err(delayq::RecvError)));
    /// ```
    pub fn recv_async(&self) -> RecvFut<'_, T> {
        RecvFut { rx: self, slot: Slot::default() }
    }

    /// As [`recv_async`](Receiver::recv_async), with the item's key and deadline.
    ///
    /// # Errors
    ///
    /// As [`recv_async`](Receiver::recv_async).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// let key = tx.send_at('k', Instant::now()).unwrap();
    /// let e = delayq::doc_block_on(rx.recv_entry_async()).unwrap();
    /// assert_eq!((e.key(), e.into_inner()), (key, 'k'));
    /// ```
    pub fn recv_entry_async(&self) -> RecvEntryFut<'_, T> {
        RecvEntryFut { rx: self, slot: Slot::default() }
    }

    /// Waits until at least one item is due, then appends to `buf` the due
    /// items already waiting for consumers, up to `limit` in all (as
    /// [`Receiver::recv_many`]); returns how many. With `limit == 0` it is
    /// ready at once with `Ok(0)`. Cancellation safe: a dropped future has
    /// appended nothing.
    ///
    /// # Errors
    ///
    /// As [`recv_async`](Receiver::recv_async) (only when nothing was appended).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// for i in 0..3 {
    ///     tx.send_at(i, Instant::now()).unwrap();
    /// }
    /// let mut buf = Vec::new();
    /// while buf.len() < 3 {
    ///     delayq::doc_block_on(rx.recv_many_async(&mut buf, 10)).unwrap();
    /// }
    /// assert_eq!(buf, [0, 1, 2]);
    /// ```
    pub fn recv_many_async<'a>(&'a self, buf: &'a mut Vec<T>, limit: usize) -> RecvManyFut<'a, T> {
        RecvManyFut { rx: self, buf, limit, slot: Slot::default() }
    }

    /// A [`Stream`](futures_core::Stream) of due items, ending once the queue is
    /// empty and no item can arrive any more. Cancellation safe between items.
    ///
    /// # Examples
    ///
    /// ```
    /// use futures_core::Stream;
    /// use std::pin::Pin;
    /// use std::task::{Context, Poll};
    /// use std::time::Instant;
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// tx.send_at(1, Instant::now()).unwrap();
    /// drop(tx);
    /// let mut s = rx.stream();
    /// let next = |s: &mut delayq::RecvStream<'_, i32>| {
    ///     delayq::doc_block_on(std::future::poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)))
    /// };
    /// assert_eq!(next(&mut s), Some(1));
    /// assert_eq!(next(&mut s), None);
    /// ```
    pub fn stream(&self) -> RecvStream<'_, T> {
        RecvStream { rx: self, slot: Slot::default() }
    }

    /// As [`stream`](Receiver::stream), owning the receiver.
    ///
    /// # Examples
    ///
    /// ```
    /// let (tx, rx) = delayq::unbounded::<u8>();
    /// let s: delayq::IntoStream<u8> = rx.into_stream();
    /// drop((tx, s));
    /// ```
    pub fn into_stream(self) -> IntoStream<T> {
        IntoStream { rx: self, slot: Slot::default() }
    }

    /// One poll of a wait for a due item (or exhaustion). A task performs
    /// the dequeue round as a blocking receiver does when an item is due, but
    /// it cannot sleep until a deadline: when nothing is due it asks the
    /// dequeue proxy to lead for the next one (`lead.rs`), unless someone
    /// leads for it already.
    fn poll_raw(&self, slot: &mut Slot, cx: &mut Context<'_>) -> Poll<Result<Due<T>, RecvError>> {
        let s = self.shared();
        slot.poll(&s.signals.consumers, cx, |registered| {
            self.attempt(registered, |at| crate::dequeue::ask_proxy(s, at))
        })
    }
}

/// The future of [`Receiver::recv_async`]: `Output = Result<T, RecvError>`.
///
/// Cancellation safe: dropping it loses no item, and a wakeup it received and
/// did not use passes to another waiting receiver.
#[must_use = "futures do nothing unless polled"]
pub struct RecvFut<'a, T> {
    rx: &'a Receiver<T>,
    slot: Slot,
}

impl<T> Future for RecvFut<'_, T> {
    type Output = Result<T, RecvError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        this.rx.poll_raw(&mut this.slot, cx).map(|r| r.map(|(_, _, item)| item))
    }
}

/// The future of [`Receiver::recv_entry_async`]: `Output = Result<Expired<T>, RecvError>`.
/// Cancellation safe, as [`RecvFut`].
#[must_use = "futures do nothing unless polled"]
pub struct RecvEntryFut<'a, T> {
    rx: &'a Receiver<T>,
    slot: Slot,
}

impl<T> Future for RecvEntryFut<'_, T> {
    type Output = Result<Expired<T>, RecvError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        this.rx.poll_raw(&mut this.slot, cx).map(|r| r.map(|raw| this.rx.entry(raw)))
    }
}

/// The future of [`Receiver::recv_many_async`]: `Output = Result<usize, RecvError>`.
/// Cancellation safe, as [`RecvFut`]: items are appended only by the poll that
/// completes.
#[must_use = "futures do nothing unless polled"]
pub struct RecvManyFut<'a, T> {
    rx: &'a Receiver<T>,
    buf: &'a mut Vec<T>,
    limit: usize,
    slot: Slot,
}

impl<T> Future for RecvManyFut<'_, T> {
    type Output = Result<usize, RecvError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if this.limit == 0 {
            return Poll::Ready(Ok(0));
        }
        let first = match this.rx.poll_raw(&mut this.slot, cx) {
            Poll::Ready(Ok(first)) => first,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        let all = take_many(this.rx.shared(), first, this.limit);
        let n = all.len();
        this.buf.extend(all.into_iter().map(|(_, _, item)| item));
        Poll::Ready(Ok(n))
    }
}

/// The stream of [`Receiver::stream`]: due items, until the queue is exhausted.
/// Cancellation safe between items, as [`RecvFut`].
#[must_use = "streams do nothing unless polled"]
pub struct RecvStream<'a, T> {
    rx: &'a Receiver<T>,
    slot: Slot,
}

impl<T> futures_core::Stream for RecvStream<'_, T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = &mut *self;
        this.rx.poll_raw(&mut this.slot, cx).map(|r| r.ok().map(|(_, _, item)| item))
    }
}

/// The stream of [`Receiver::into_stream`], owning its receiver.
#[must_use = "streams do nothing unless polled"]
pub struct IntoStream<T> {
    rx: Receiver<T>,
    slot: Slot,
}

impl<T> futures_core::Stream for IntoStream<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = &mut *self;
        this.rx.poll_raw(&mut this.slot, cx).map(|r| r.ok().map(|(_, _, item)| item))
    }
}

/// Each future and stream leaves the consumers' waiter list when dropped (a
/// wake-up it received and did not use passes on), and prints as its name.
macro_rules! leave_on_drop {
    ($($name:ident $(<$lt:lifetime>)?),*) => {$(
        impl<T> Drop for $name<$($lt,)? T> {
            fn drop(&mut self) {
                self.slot.leave(&self.rx.shared().signals.consumers);
            }
        }

        impl<T> fmt::Debug for $name<$($lt,)? T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(concat!(stringify!($name), " { .. }"))
            }
        }
    )*};
}

leave_on_drop!(RecvFut<'_>, RecvEntryFut<'_>, RecvManyFut<'_>, RecvStream<'_>, IntoStream);

/// Runs `f` to completion on this thread, parking it between polls: a minimal
/// executor for the examples in these docs (any executor does; this one keeps the
/// crate free of dependencies).
#[doc(hidden)]
pub fn doc_block_on<F: Future>(f: F) -> F::Output {
    let parker = crate::sync::Parker::new();
    let waker = crate::waiters::ThreadWaker::waker(&parker);
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
        parker.park(None);
    }
}
