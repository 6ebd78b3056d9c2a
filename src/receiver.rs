//! The consumer handle, its iterators, and the take path: pop from the egress
//! ring, release `len`, and wake whoever waited for the room or the items.

use crate::chan::Chan;
use crate::cmd::Cmd;
use crate::egress::{Due, Look};
use crate::enqueue;
use crate::error::{RecvError, RecvTimeoutError, TryRecvError};
use crate::expired::Expired;
use crate::key::Key;
use crate::oneshot;
use crate::shared::Shared;
use crate::sync::{fence, Ordering};
use crate::waiters::block_on_until;
use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A due item as it leaves the egress ring: `(deadline ticks, key, item)`.
pub(crate) type Raw<T> = Due<T>;

/// One look at the egress ring: takes the oldest entry if it is due.
fn look<T>(s: &Shared<T>) -> Look<T> {
    let took = s.egress.take(|| s.now_ticks());
    match took.look {
        Look::Item(entry) => {
            taken(s, 1);
            if s.metrics.recording() {
                s.metrics.lateness_ns(s.now_ticks().saturating_sub(entry.0));
            }
            Look::Item(entry)
        }
        other => {
            if took.skipped > 0 {
                made_room(s);
            }
            other
        }
    }
}

/// Takes due items into `buf` until `limit`, or until the oldest entry is not
/// due or the ring is empty.
pub(crate) fn take_many<T>(s: &Shared<T>, buf: &mut Vec<Raw<T>>, limit: usize) -> usize {
    let mut clock = None::<u64>;
    let (mut n, mut skipped) = (0, 0);
    while n < limit {
        let took = s.egress.take(|| *clock.get_or_insert_with(|| s.now_ticks()));
        skipped += took.skipped;
        match took.look {
            Look::Item(entry) => buf.push(entry),
            Look::NotYet(_) | Look::Empty => break,
        }
        n += 1;
    }
    if n > 0 {
        taken(s, n);
        if s.metrics.recording() {
            let now = s.now_ticks();
            for e in &buf[buf.len() - n..] {
                s.metrics.lateness_ns(now.saturating_sub(e.0));
            }
        }
    } else if skipped > 0 {
        made_room(s);
    }
    n
}

/// A consumer took `n` items from the egress ring: release them, and wake the
/// producers waiting for room, the dequeue proxy waiting for egress room, one
/// more consumer for what is left, and everyone once a closed queue is empty.
fn taken<T>(s: &Shared<T>, n: usize) {
    let left = s.counter.release(n);
    // SeqCst: one fence serves the notifier checks below (`waiters.rs`, `Bell`).
    fence(Ordering::SeqCst);
    if s.counter.capacity().is_some() {
        s.signals.producers.notify_after_fence(n);
    }
    if s.signals.dequeue.is_sleeping() && s.egress.has_room_for_batch() {
        s.signals.dequeue.ring_after_fence();
    }
    // Chain wake-up: the dequeue proxy wakes at most two consumers per round (a
    // wake is a syscall on its thread); a consumer that leaves items behind wakes
    // one more, so wake-ups spread over the consumers' threads. (If what is left
    // is not due yet, the one woken leads for it: `lead.rs`.)
    // Only for a front entry that needs a taker: a due one, or a staged one
    // that nobody leads for (waking a consumer for a staged entry with a
    // leader only made it park again: two thirds of the consumers' wake-ups
    // at 100 K items/s, docs/bench/README.md, seventh round).
    let chained = s.signals.consumers.has_waiters() && s.egress.front_needs_taker(s.lead.current());
    if chained {
        s.signals.consumers.notify_after_fence(1);
    }
    if left == 0 && s.counter.is_closed() {
        s.signals.consumers.notify_all();
    }
    // After the fence above: the taker's half of the duty's hand-over (on a
    // queue that never hands rounds over, the duty stays `NONE`: one load).
    if s.duty.claim_after_take(|| s.now_ticks(), s.stage_ahead, || s.egress.has_live_entry()) {
        crate::dequeue::perform_duty(s, chained);
    }
}

/// A consumer found nothing due (it is about to park, or the queue is
/// exhausted): the queue may have gone quiet, and no proxy round would bring
/// the metrics up to date (the staged count is what is left in the ring:
/// nothing there is due).
pub(crate) fn idle<T>(s: &Shared<T>) {
    if s.metrics.recording() {
        s.sample_metrics(s.egress.len());
    }
}

/// A take passed over recalled entries, freeing their slots: the dequeue proxy
/// may be waiting for that room.
fn made_room<T>(s: &Shared<T>) {
    s.egress.made_room(&s.signals.dequeue);
}

/// The receiving half of a delay queue. `Clone + Send + Sync`.
///
/// Receiving never touches the timer index: items wait in a lock-free egress ring,
/// filled in deadline order by the dequeue proxy up to 100 µs before they are due
/// ([`Builder::stage_ahead`](crate::Builder::stage_ahead)); a receiver takes only
/// what is due, and one with nothing due parks — until the proxy hands it an
/// item, or, if the oldest item there is not due yet, until that item's deadline.
///
/// When the last `Receiver` is dropped, sends fail with the item handed back,
/// pending items are dropped, and the proxy threads exit.
///
/// Its methods need nothing of `T` (generic code written against crossbeam's
/// `Receiver<T>` compiles against this one); building a queue needs
/// `T: Send + 'static`, because the proxy threads own the items.
pub struct Receiver<T> {
    chan: Arc<Chan<T>>,
}

impl<T> Receiver<T> {
    pub(crate) fn new(chan: Arc<Chan<T>>) -> Self {
        Receiver { chan }
    }

    /// One attempt: a due item, "exhausted", or nothing yet; `not_yet` hears
    /// the deadline of an oldest entry that is not due.
    pub(crate) fn attempt(&self, not_yet: impl FnOnce(u64)) -> Option<Result<Raw<T>, RecvError>> {
        let s = &self.chan.shared;
        match look(s) {
            Look::Item(entry) => return Some(Ok(entry)),
            Look::NotYet(at) => not_yet(at),
            Look::Empty => {}
        }
        idle(s);
        s.counter.is_exhausted().then_some(Err(RecvError))
    }

    /// Blocks until an item is due (or the queue is exhausted), or until
    /// `deadline`: `None`. A consumer that finds the oldest entry not due yet
    /// leads for it (`lead.rs`) and parks until its deadline, or parks untimed
    /// if another consumer leads for one no later.
    fn wait(&self, deadline: Option<Instant>) -> Option<Result<Raw<T>, RecvError>> {
        let s = &self.chan.shared;
        let led = Cell::new(None::<u64>);
        let got = block_on_until(&s.signals.consumers, &s.clock, deadline, || {
            if let Some(at) = led.take() {
                // Give the lead up before the take, whose chain wake-up then
                // reaches the next consumer (`lead.rs`).
                s.lead.give_up(at);
            }
            match look(s) {
                Look::Item(entry) => Ok(Ok(entry)),
                Look::NotYet(at) if s.lead.take(at) => {
                    led.set(Some(at));
                    Err(Some(s.ticks.instant(at)))
                }
                Look::NotYet(_) | Look::Empty => {
                    idle(s);
                    if s.counter.is_exhausted() {
                        Ok(Err(RecvError))
                    } else {
                        Err(None)
                    }
                }
            }
        });
        if let Some(at) = led.get() {
            // Leaving without the item (a timeout): someone else must lead.
            if s.lead.give_up(at) {
                s.signals.consumers.notify(1);
            }
        }
        got
    }

    fn recv_raw(&self) -> Result<Raw<T>, RecvError> {
        self.wait(None).unwrap_or(Err(RecvError))
    }

    /// One look; if nothing is due, one catch-up (`dequeue::catch_up`: a due
    /// item sent before this call may still be upstream of the ring) and
    /// one more look.
    fn try_recv_raw(&self) -> Result<Raw<T>, TryRecvError> {
        let mut caught_up = false;
        loop {
            match self.attempt(|_| {}) {
                Some(Ok(t)) => return Ok(t),
                Some(Err(_)) => return Err(TryRecvError::Disconnected),
                None if !caught_up && crate::dequeue::catch_up(&self.chan.shared) => caught_up = true,
                None => return Err(TryRecvError::Empty),
            }
        }
    }

    fn recv_raw_deadline(&self, deadline: Instant) -> Result<Raw<T>, RecvTimeoutError> {
        match self.wait(Some(deadline)) {
            Some(Ok(t)) => Ok(t),
            Some(Err(_)) => Err(RecvTimeoutError::Disconnected),
            // Timed out: as `try_recv`, a due item still upstream counts.
            None => self.try_recv_raw().map_err(|e| match e {
                TryRecvError::Empty => RecvTimeoutError::Timeout,
                TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
            }),
        }
    }

    fn recv_raw_timeout(&self, timeout: Duration) -> Result<Raw<T>, RecvTimeoutError> {
        match self.chan.shared.clock.now().checked_add(timeout) {
            Some(deadline) => self.recv_raw_deadline(deadline),
            None => self.recv_raw().map_err(RecvTimeoutError::from),
        }
    }

    /// Blocks for the first item, then takes what else is due, up to `limit`.
    fn recv_many_raw(&self, limit: usize) -> Result<Vec<Raw<T>>, RecvError> {
        let first = self.recv_raw()?;
        let mut all = Vec::with_capacity(limit.min(self.chan.shared.egress.capacity()));
        all.push(first);
        take_many(&self.chan.shared, &mut all, limit - 1);
        Ok(all)
    }

    /// The queue's internals (the async front-end; the loom models).
    #[cfg_attr(not(any(feature = "async", all(test, delayq_loom))), allow(dead_code))]
    pub(crate) fn shared(&self) -> &Shared<T> {
        &self.chan.shared
    }

    pub(crate) fn entry(&self, (deadline, seq, item): Raw<T>) -> Expired<T> {
        let s = &self.chan.shared;
        Expired { item, key: Key { queue: s.id, seq }, deadline: s.ticks.instant(deadline) }
    }

    /// Blocks until an item is due and returns it (earliest deadline first).
    ///
    /// # Errors
    ///
    /// [`RecvError`] once the queue is empty and no item can arrive any more:
    /// every [`Sender`](crate::Sender) is gone, or the queue was
    /// [`close`](Receiver::close)d.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// tx.send_after("b", Duration::from_millis(2)).unwrap();
    /// tx.send_after("a", Duration::from_millis(1)).unwrap();
    /// drop(tx);
    /// assert_eq!(rx.recv(), Ok("a"));
    /// assert_eq!(rx.recv(), Ok("b"));
    /// assert_eq!(rx.recv(), Err(delayq::RecvError));
    /// ```
    pub fn recv(&self) -> Result<T, RecvError> {
        self.recv_raw().map(|(_, _, item)| item)
    }

    /// Returns a due item if there is one now, without waiting for one to
    /// fall due.
    ///
    /// An item that is due and was sent before the call (on this thread, or
    /// on one whose send is ordered before it) is found, even if the proxies
    /// have not yet moved it to the consumers' ring: when the ring holds
    /// nothing due while items are pending, `try_recv` first catches up — a
    /// round trip through the enqueue role if commands may be in flight, then
    /// it moves the index's due items itself (the dequeue role, once a proxy
    /// mid-round hands it back). That can take microseconds, never until an
    /// item falls due. So `try_iter` drains every due item, not only a ring's
    /// worth.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if nothing is due (items may be pending);
    /// [`TryRecvError::Disconnected`] as for [`recv`](Receiver::recv).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::TryRecvError;
    /// use std::time::{Duration, Instant};
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// tx.send_after(1, Duration::from_secs(60)).unwrap();
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    /// // Due at once: the next poll finds it.
    /// tx.send_at(2, Instant::now()).unwrap();
    /// assert_eq!(rx.try_recv(), Ok(2));
    /// ```
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.try_recv_raw().map(|(_, _, item)| item)
    }

    /// Waits at most `timeout` (by the queue's clock) for a due item. A timeout
    /// too large for `Instant` waits forever. When it runs out, it looks once
    /// more as [`try_recv`](Receiver::try_recv) does, so a zero timeout finds
    /// a due item sent before the call.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] if nothing fell due in time;
    /// [`RecvTimeoutError::Disconnected`] as for [`recv`](Receiver::recv).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::RecvTimeoutError;
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// tx.send_after(1, Duration::from_secs(60)).unwrap();
    /// assert_eq!(rx.recv_timeout(Duration::from_millis(5)), Err(RecvTimeoutError::Timeout));
    /// ```
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_raw_timeout(timeout).map(|(_, _, item)| item)
    }

    /// Waits until `deadline` (by the queue's clock) for a due item.
    ///
    /// # Errors
    ///
    /// As [`recv_timeout`](Receiver::recv_timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::{Builder, MockClock, RecvTimeoutError};
    /// use std::time::Duration;
    ///
    /// let clock = MockClock::new();
    /// let (tx, rx) = Builder::new().clock(clock.clone()).build().unwrap();
    /// tx.send_after('x', Duration::from_secs(10)).unwrap();
    /// let soon = clock.now() + Duration::from_secs(5);
    /// clock.advance(Duration::from_secs(5));
    /// assert_eq!(rx.recv_deadline(soon), Err(RecvTimeoutError::Timeout));
    /// clock.advance(Duration::from_secs(5));
    /// assert_eq!(rx.recv_deadline(clock.now() + Duration::from_secs(1)), Ok('x'));
    /// ```
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        self.recv_raw_deadline(deadline).map(|(_, _, item)| item)
    }

    /// Blocks until at least one item is due, then appends to `buf` the due
    /// items already waiting for consumers, up to `limit` in all. Returns how
    /// many it appended. With `limit == 0` it returns `Ok(0)` at once. (The
    /// dequeue proxy hands over due items one by one: one that it is moving at
    /// this very moment may come with the next call instead.)
    ///
    /// # Errors
    ///
    /// As [`recv`](Receiver::recv) (only when nothing was appended).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// let now = Instant::now();
    /// for i in 0..5 {
    ///     tx.send_at(i, now).unwrap();
    /// }
    /// let mut buf = Vec::new();
    /// let mut got = 0;
    /// while got < 5 {
    ///     got += rx.recv_many(&mut buf, 10).unwrap();
    /// }
    /// assert_eq!(buf, vec![0, 1, 2, 3, 4]);
    /// ```
    pub fn recv_many(&self, buf: &mut Vec<T>, limit: usize) -> Result<usize, RecvError> {
        if limit == 0 {
            return Ok(0);
        }
        let all = self.recv_many_raw(limit)?;
        let n = all.len();
        buf.extend(all.into_iter().map(|(_, _, item)| item));
        Ok(n)
    }

    /// As [`recv`](Receiver::recv), with the item's key and deadline.
    ///
    /// # Errors
    ///
    /// As [`recv`](Receiver::recv).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// let at = Instant::now() + Duration::from_millis(2);
    /// let key = tx.send_at('a', at).unwrap();
    /// let e = rx.recv_entry().unwrap();
    /// assert_eq!((e.key(), e.deadline()), (key, at));
    /// assert!(Instant::now() >= e.deadline()); // never early
    /// assert_eq!(e.into_inner(), 'a');
    /// ```
    pub fn recv_entry(&self) -> Result<Expired<T>, RecvError> {
        self.recv_raw().map(|r| self.entry(r))
    }

    /// As [`try_recv`](Receiver::try_recv), with the item's key and deadline.
    ///
    /// # Errors
    ///
    /// As [`try_recv`](Receiver::try_recv).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// assert!(rx.try_recv_entry().unwrap_err().is_empty());
    /// let key = tx.send_at(1, Instant::now()).unwrap();
    /// let e = rx.recv_entry().unwrap();
    /// assert_eq!(e.key(), key);
    /// ```
    pub fn try_recv_entry(&self) -> Result<Expired<T>, TryRecvError> {
        self.try_recv_raw().map(|r| self.entry(r))
    }

    /// As [`recv_timeout`](Receiver::recv_timeout), with the item's key and
    /// deadline.
    ///
    /// # Errors
    ///
    /// As [`recv_timeout`](Receiver::recv_timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// let key = tx.send_at("x", Instant::now()).unwrap();
    /// let e = rx.recv_entry_timeout(Duration::from_secs(10)).unwrap();
    /// assert_eq!((e.key(), e.into_inner()), (key, "x"));
    /// assert!(rx.recv_entry_timeout(Duration::from_millis(1)).unwrap_err().is_timeout());
    /// ```
    pub fn recv_entry_timeout(&self, timeout: Duration) -> Result<Expired<T>, RecvTimeoutError> {
        self.recv_raw_timeout(timeout).map(|r| self.entry(r))
    }

    /// As [`recv_deadline`](Receiver::recv_deadline), with the item's key and
    /// deadline.
    ///
    /// # Errors
    ///
    /// As [`recv_timeout`](Receiver::recv_timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let (tx, rx) = delayq::unbounded::<u8>();
    /// let soon = Instant::now() + Duration::from_millis(1);
    /// assert!(rx.recv_entry_deadline(soon).unwrap_err().is_timeout());
    /// ```
    pub fn recv_entry_deadline(&self, deadline: Instant) -> Result<Expired<T>, RecvTimeoutError> {
        self.recv_raw_deadline(deadline).map(|r| self.entry(r))
    }

    /// As [`recv_many`](Receiver::recv_many), with each item's key and deadline.
    ///
    /// # Errors
    ///
    /// As [`recv`](Receiver::recv) (only when nothing was appended).
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::{Builder, MockClock};
    /// use std::time::Duration;
    ///
    /// let clock = MockClock::new();
    /// let (tx, rx) = Builder::new().clock(clock.clone()).build().unwrap();
    /// let a = tx.send_after('a', Duration::from_secs(2)).unwrap();
    /// let b = tx.send_after('b', Duration::from_secs(1)).unwrap();
    /// clock.advance(Duration::from_secs(2));
    /// let mut buf = Vec::new();
    /// assert_eq!(rx.recv_many_entries(&mut buf, 10), Ok(2));
    /// let keys: Vec<_> = buf.iter().map(|e| e.key()).collect();
    /// assert_eq!(keys, [b, a]); // earliest deadline first
    /// ```
    pub fn recv_many_entries(&self, buf: &mut Vec<Expired<T>>, limit: usize) -> Result<usize, RecvError> {
        if limit == 0 {
            return Ok(0);
        }
        let all = self.recv_many_raw(limit)?;
        let n = all.len();
        buf.extend(all.into_iter().map(|r| self.entry(r)));
        Ok(n)
    }

    /// A blocking iterator: [`recv`](Receiver::recv) until it fails.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// for i in [3, 1, 2] {
    ///     tx.send_after(i, Duration::from_millis(i)).unwrap();
    /// }
    /// drop(tx);
    /// assert_eq!(rx.iter().collect::<Vec<_>>(), vec![1, 2, 3]);
    /// ```
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// A non-blocking iterator over the items due now.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// tx.send_after(1, Duration::from_secs(60)).unwrap();
    /// assert_eq!(rx.try_iter().count(), 0);
    /// ```
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { rx: self }
    }

    /// The earliest deadline of an item not yet received (due or not), or `None`
    /// if nothing is pending. Asks the enqueue proxy, so every send that returned
    /// before the call is counted.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// assert_eq!(rx.peek_deadline(), None);
    /// let at = Instant::now() + Duration::from_secs(60);
    /// tx.send_at((), at + Duration::from_secs(1)).unwrap();
    /// tx.send_at((), at).unwrap();
    /// assert_eq!(rx.peek_deadline(), Some(at));
    /// ```
    pub fn peek_deadline(&self) -> Option<Instant> {
        let s = &self.chan.shared;
        let (answer, reply) = oneshot::pair();
        if !enqueue::command(s, Cmd::Peek { answer }) {
            return None;
        }
        reply.wait().flatten().map(|t| s.ticks.instant(t))
    }

    /// Closes the queue to new sends (they fail with `Disconnected`); pending
    /// items are still delivered when due, then receivers get
    /// [`RecvError`]. Like client-go's `ShutDownWithDrain`. Idempotent.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// tx.send_at(1, Instant::now()).unwrap();
    /// rx.close();
    /// assert!(tx.send_at(2, Instant::now()).is_err());
    /// assert_eq!(rx.recv(), Ok(1));
    /// assert!(rx.recv().is_err());
    /// ```
    pub fn close(&self) {
        self.chan.shared.close();
    }

    /// Removes and returns every item not yet received, in deadline order, with
    /// its deadline. After [`close`](Receiver::close) this is "shut down now,
    /// lose nothing".
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// let t = Instant::now() + Duration::from_secs(60);
    /// tx.send_at("b", t + Duration::from_secs(1)).unwrap();
    /// tx.send_at("a", t).unwrap();
    /// rx.close();
    /// let items: Vec<_> = rx.take_pending().into_iter().map(|(_, x)| x).collect();
    /// assert_eq!(items, vec!["a", "b"]);
    /// assert!(rx.recv().is_err());
    /// ```
    pub fn take_pending(&self) -> Vec<(Instant, T)> {
        let s = &self.chan.shared;
        let (answer, reply) = oneshot::pair();
        if !enqueue::command(s, Cmd::TakePending { answer }) {
            return Vec::new();
        }
        let all = reply.wait().unwrap_or_default();
        all.into_iter().map(|(t, item)| (s.ticks.instant(t), item)).collect()
    }

    /// Items sent and not yet received, cancelled or taken.
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
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.chan.shared.counter.add_receiver();
        Receiver { chan: self.chan.clone() }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        if self.chan.shared.counter.remove_receiver() {
            self.chan.shared.disconnect();
        }
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").field("len", &self.len()).field("capacity", &self.capacity()).finish()
    }
}

/// Blocking iterator of [`Receiver::iter`]; ends when the queue is exhausted.
pub struct Iter<'a, T> {
    rx: &'a Receiver<T>,
}

/// Non-blocking iterator of [`Receiver::try_iter`]; ends when nothing is due.
pub struct TryIter<'a, T> {
    rx: &'a Receiver<T>,
}

/// Owning blocking iterator of `Receiver<T>: IntoIterator`.
pub struct IntoIter<T> {
    rx: Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.try_recv().ok()
    }
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;
    fn into_iter(self) -> IntoIter<T> {
        IntoIter { rx: self }
    }
}

impl<T> fmt::Debug for Iter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Iter { .. }")
    }
}
impl<T> fmt::Debug for TryIter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TryIter { .. }")
    }
}
impl<T> fmt::Debug for IntoIter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IntoIter { .. }")
    }
}
