//! Deadlines for async waits without a runtime: the core `delayq` queue is
//! itself a timer, so a timed-out async `reserve` needs no tokio, no timer
//! thread of its own, and works on any executor.
//!
//! Each [`Deadline`] sends an [`Alarm`] into one core queue shared by the
//! handle's waits, due at its instant, and polls that queue's async receive
//! alongside its own work. Whichever waiting future receives a due alarm
//! rings it — its own or another's — and wakes the alarm's task. A deadline
//! is always waiting on the queue while its future is pending, so a due alarm
//! always has a receiver: at worst its owner. A dropped deadline discards its
//! alarm (`Sender::discard`); one received after its owner is gone rings
//! nobody.
//!
//! Ring protocol: `ring` sets `rung` (SeqCst) and then takes the waker under
//! the lock; a poll stores its waker under the lock and re-checks `rung`
//! after: either the poll sees the flag, or the ring finds the waker.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::error::DurableError;

/// The core queue the handle's deadlines ring through.
pub(crate) struct Alarms {
    tx: delayq::Sender<Arc<Alarm>>,
    rx: delayq::Receiver<Arc<Alarm>>,
}

impl fmt::Debug for Alarms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Alarms").field("armed", &self.tx.len()).finish()
    }
}

#[derive(Default)]
pub(crate) struct Alarm {
    rung: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Alarm {
    fn ring(&self) {
        // SeqCst: ordered before the lock below; a poll that stored its waker
        // before this reads the flag after, or its waker is taken here.
        self.rung.store(true, Ordering::SeqCst);
        let waker = self.waker.lock().unwrap_or_else(PoisonError::into_inner).take();
        // Often another task's waker, run by the task that received the
        // alarm: a panic in it must not unwind out of that task's poll.
        if let Some(waker) = waker {
            crate::contain::wake(waker);
        }
    }
}

impl Alarms {
    pub(crate) fn new() -> Result<Alarms, DurableError> {
        let (tx, rx) = delayq::Builder::new()
            .unbounded()
            .thread_name_prefix("delayq-durable-alarm")
            .build::<Arc<Alarm>>()
            .map_err(|e| DurableError::Storage(format!("starting the deadline queue: {e}")))?;
        Ok(Alarms { tx, rx })
    }

    /// A deadline at `at`; `None` (too far to represent) never rings.
    pub(crate) fn deadline(&self, at: Option<Instant>) -> Deadline<'_> {
        let alarm = Arc::new(Alarm::default());
        let key = at.and_then(|at| self.tx.send_at(alarm.clone(), at).ok());
        Deadline { alarms: self, alarm, key, recv: self.rx.recv_async() }
    }
}

/// A future that is ready at its instant (see the module docs).
pub(crate) struct Deadline<'a> {
    alarms: &'a Alarms,
    alarm: Arc<Alarm>,
    key: Option<delayq::Key>,
    recv: delayq::RecvFut<'a, Arc<Alarm>>,
}

impl Future for Deadline<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if this.key.is_none() {
            return Poll::Pending;
        }
        *this.alarm.waker.lock().unwrap_or_else(PoisonError::into_inner) = Some(cx.waker().clone());
        // Ring every alarm that is due, whosever it is; stop when the queue
        // has registered this task to be woken for the next one.
        while let Poll::Ready(Ok(due)) = Pin::new(&mut this.recv).poll(cx) {
            due.ring();
            this.recv = this.alarms.rx.recv_async();
        }
        if this.alarm.rung.load(Ordering::SeqCst) {
            this.key = None;
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Drop for Deadline<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.alarms.tx.discard(key);
        }
    }
}
