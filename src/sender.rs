//! The producer handle, and the send path: reserve a unit of `len`, push an
//! `Insert` into the ingress, ring the enqueue proxy's bell.

use crate::chan::Chan;
use crate::clock::Ticks;
use crate::cmd::Cmd;
use crate::error::{SendError, SendTimeoutError, TrySendError};
use crate::key::Key;
use crate::oneshot;
use crate::shared::Shared;
use crate::waiters::block_on;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a send may wait for room in a bounded queue.
#[derive(Clone, Copy, Debug)]
enum Wait {
    Never,
    Until(Option<Instant>),
}

/// Why a send failed; the item comes back.
enum SendFail<T> {
    Full(T),
    Timeout(T),
    Disconnected(T),
}

/// Sends `item` due at `deadline` (ticks); returns its key.
///
/// Costs on the way: a read of `closed`; the reservation (one RMW on `len`, a CAS
/// loop for a bounded queue); a SeqCst fence and a second read of `closed` (the
/// `closed` handshake of `counter.rs`); a relaxed RMW for the key; the ingress
/// push (one CAS on its tail, a stamp store); and the enqueue bell's SeqCst fence
/// and load (an RMW and a syscall only when the proxy sleeps).
fn send<T>(s: &Shared<T>, item: T, deadline: u64, wait: Wait) -> Result<u64, SendFail<T>> {
    if s.counter.is_closed() {
        return Err(SendFail::Disconnected(item));
    }
    if !s.counter.reserve() {
        let Wait::Until(until) = wait else { return Err(SendFail::Full(item)) };
        let got = block_on(&s.signals.producers, &s.clock, until, || {
            if s.counter.is_closed() {
                Some(false)
            } else {
                s.counter.reserve().then_some(true)
            }
        });
        match got {
            Some(true) => {}
            Some(false) => return Err(SendFail::Disconnected(item)),
            None => return Err(SendFail::Timeout(item)),
        }
    }
    if s.counter.closed_after_reserve() {
        s.release(1);
        return Err(SendFail::Disconnected(item));
    }
    let key = s.next_key();
    let cmd = Cmd::Insert { key, deadline, item };
    // Only a send that may block forever waits for ring room (back-pressure);
    // the others spill, so they never report a timeout or "full" for it.
    let pushed = match wait {
        Wait::Until(None) => s.ingress.push_or_wait(cmd),
        _ => s.ingress.push(cmd),
    };
    if let Err(cmd) = pushed {
        s.release(1);
        let Cmd::Insert { item, .. } = cmd else { unreachable!("pushed an insert") };
        return Err(SendFail::Disconnected(item));
    }
    s.signals.enqueue.ring();
    Ok(key)
}

/// The sending half of a delay queue. `Clone + Send + Sync`.
///
/// Sending never touches the timer index: it reserves a unit of the queue's length (the
/// only step that can block, on a full bounded queue), pushes a command into the
/// lock-free ingress ring and, if the enqueue proxy sleeps, unparks it.
///
/// When the last `Sender` is dropped, receivers still get every pending item when
/// it falls due, then [`RecvError`](crate::RecvError).
pub struct Sender<T> {
    chan: Arc<Chan<T>>,
}

impl<T: Send + 'static> Sender<T> {
    pub(crate) fn new(chan: Arc<Chan<T>>) -> Self {
        Sender { chan }
    }

    fn send_ticks(&self, item: T, deadline: u64, wait: Wait) -> Result<Key, SendFail<T>> {
        let s = &self.chan.shared;
        send(s, item, deadline, wait).map(|seq| Key { queue: s.id, seq })
    }

    /// Sends `item`, due at `deadline` by the queue's clock. A deadline in the past
    /// is due at once. Blocks while a bounded queue is full.
    ///
    /// # Errors
    ///
    /// [`SendError`] with the item if every receiver is gone or the queue was
    /// [`close`](crate::Receiver::close)d.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// let key = tx.send_at("hello", Instant::now() + Duration::from_millis(5)).unwrap();
    /// assert_eq!(rx.recv(), Ok("hello"));
    /// assert_eq!(tx.cancel(key), None); // already delivered
    /// drop(rx);
    /// assert_eq!(tx.send_at("late", Instant::now()).unwrap_err().into_inner(), "late");
    /// ```
    pub fn send_at(&self, item: T, deadline: Instant) -> Result<Key, SendError<T>> {
        let d = self.chan.shared.deadline_ticks(deadline);
        match self.send_ticks(item, d, Wait::Until(None)) {
            Ok(k) => Ok(k),
            Err(SendFail::Disconnected(t) | SendFail::Full(t) | SendFail::Timeout(t)) => Err(SendError(t)),
        }
    }

    /// Sends `item`, due `delay` from now by the queue's clock. A deadline at or
    /// beyond the queue's horizon (about 484 years after it was built, see the
    /// crate docs), such as `Duration::MAX`, is never due; it does not panic.
    /// Blocks while a bounded queue is full.
    ///
    /// # Errors
    ///
    /// As [`send_at`](Sender::send_at).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// tx.send_after(1, Duration::MAX).unwrap(); // beyond the horizon: never due
    /// tx.send_after(2, Duration::ZERO).unwrap();
    /// assert_eq!(rx.recv(), Ok(2));
    /// assert_eq!(rx.len(), 1);
    /// ```
    pub fn send_after(&self, item: T, delay: Duration) -> Result<Key, SendError<T>> {
        let s = &self.chan.shared;
        let d = Ticks::after(s.now_ticks(), delay);
        match self.send_ticks(item, d, Wait::Until(None)) {
            Ok(k) => Ok(k),
            Err(SendFail::Disconnected(t) | SendFail::Full(t) | SendFail::Timeout(t)) => Err(SendError(t)),
        }
    }

    /// Sends `item` due at `deadline` if that can be done without blocking.
    ///
    /// # Errors
    ///
    /// [`TrySendError::Full`] if a bounded queue holds `capacity` items (an
    /// unbounded queue never reports `Full`); [`TrySendError::Disconnected`] as for
    /// [`send_at`](Sender::send_at). The item comes back in both.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::TrySendError;
    /// use std::time::Instant;
    ///
    /// let (tx, rx) = delayq::bounded(1);
    /// tx.try_send_at(1, Instant::now()).unwrap();
    /// assert_eq!(tx.try_send_at(2, Instant::now()), Err(TrySendError::Full(2)));
    /// assert_eq!(rx.recv(), Ok(1));
    /// ```
    pub fn try_send_at(&self, item: T, deadline: Instant) -> Result<Key, TrySendError<T>> {
        let d = self.chan.shared.deadline_ticks(deadline);
        match self.send_ticks(item, d, Wait::Never) {
            Ok(k) => Ok(k),
            Err(SendFail::Full(t) | SendFail::Timeout(t)) => Err(TrySendError::Full(t)),
            Err(SendFail::Disconnected(t)) => Err(TrySendError::Disconnected(t)),
        }
    }

    /// Sends `item` due at `deadline`, waiting at most `timeout` (by the queue's
    /// clock) for room in a bounded queue. A timeout too large for `Instant` waits
    /// forever.
    ///
    /// # Errors
    ///
    /// [`SendTimeoutError::Timeout`] if no room appeared in time;
    /// [`SendTimeoutError::Disconnected`] as for [`send_at`](Sender::send_at).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::SendTimeoutError;
    /// use std::time::{Duration, Instant};
    ///
    /// let (tx, _rx) = delayq::bounded(1);
    /// let far = Instant::now() + Duration::from_secs(3600);
    /// tx.send_at("a", far).unwrap();
    /// let e = tx.send_at_timeout("b", far, Duration::from_millis(10)).unwrap_err();
    /// assert_eq!(e, SendTimeoutError::Timeout("b"));
    /// ```
    pub fn send_at_timeout(
        &self,
        item: T,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Key, SendTimeoutError<T>> {
        let s = &self.chan.shared;
        let until = s.clock.now().checked_add(timeout);
        match self.send_ticks(item, s.deadline_ticks(deadline), Wait::Until(until)) {
            Ok(k) => Ok(k),
            Err(SendFail::Full(t) | SendFail::Timeout(t)) => Err(SendTimeoutError::Timeout(t)),
            Err(SendFail::Disconnected(t)) => Err(SendTimeoutError::Disconnected(t)),
        }
    }

    /// Removes a pending item and returns it: `Some(item)` if it had not been
    /// delivered yet, `None` if it was delivered (handed to the consumers' ring
    /// once due), cancelled or taken before, if `key` belongs to another queue, or
    /// if the queue is disconnected. Waits for the enqueue proxy to answer (it
    /// applies commands in order, so a `cancel` never overtakes its own `send`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// let key = tx.send_after("job", Duration::from_secs(60)).unwrap();
    /// assert_eq!(rx.len(), 1);
    /// assert_eq!(tx.cancel(key), Some("job"));
    /// assert_eq!(rx.len(), 0);
    /// ```
    pub fn cancel(&self, key: Key) -> Option<T> {
        let s = &self.chan.shared;
        if key.queue != s.id {
            return None;
        }
        let (answer, reply) = oneshot::pair();
        if !s.command(Cmd::Cancel { key: key.seq, answer }) {
            return None;
        }
        reply.wait().flatten()
    }

    /// Moves a pending item to a new deadline. `true` if it was pending; `false`
    /// if it was delivered, cancelled, taken, unknown to this queue, or the queue
    /// is disconnected. The key stays valid, and so does its rank among equal
    /// deadlines (key order, see the crate docs).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// let key = tx.send_after("soon", Duration::from_secs(3600)).unwrap();
    /// assert!(tx.reschedule(key, Instant::now()));
    /// assert_eq!(rx.recv(), Ok("soon"));
    /// assert!(!tx.reschedule(key, Instant::now()));
    /// ```
    pub fn reschedule(&self, key: Key, deadline: Instant) -> bool {
        let s = &self.chan.shared;
        if key.queue != s.id {
            return false;
        }
        let (answer, reply) = oneshot::pair();
        let cmd = Cmd::Reschedule { key: key.seq, deadline: s.deadline_ticks(deadline), answer };
        s.command(cmd) && reply.wait().unwrap_or(false)
    }
}

impl<T> Sender<T> {
    /// Items sent and not yet received, cancelled or taken (exact once `send`
    /// returns, whether or not they are due).
    pub fn len(&self) -> usize {
        self.chan.shared.len()
    }

    /// `len() == 0`.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `true` if a bounded queue holds `capacity` items; always `false` unbounded.
    pub fn is_full(&self) -> bool {
        self.capacity().is_some_and(|c| self.len() >= c)
    }

    /// The bound given at creation; `None` for an unbounded queue.
    pub fn capacity(&self) -> Option<usize> {
        self.chan.shared.counter.capacity()
    }

    /// `true` if sends fail: every receiver is gone or the queue was closed.
    pub fn is_disconnected(&self) -> bool {
        self.chan.shared.counter.is_closed()
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.chan.shared.counter.add_sender();
        Sender { chan: self.chan.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if self.chan.shared.counter.remove_sender() {
            self.chan.shared.close();
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").field("len", &self.len()).field("capacity", &self.capacity()).finish()
    }
}
