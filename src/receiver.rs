//! The consumer handle, its iterators, and the take path: take from the
//! egress ring; when it is empty and the index holds a due item, perform the
//! dequeue round (`dequeue.rs`); when nothing is due, lead for the index's
//! next deadline or wait for the leader (`lead.rs`); release `len` and wake
//! whoever waits for the room or the items.

use crate::chan::Chan;
use crate::clock::NEVER;
use crate::cmd::Cmd;
use crate::dequeue::{after_round, ask_proxy, round};
use crate::egress::Due;
use crate::enqueue;
use crate::error::{RecvError, RecvTimeoutError, TryRecvError};
use crate::expired::Expired;
use crate::key::Key;
use crate::oneshot;
use crate::role::{Want, WANTED_BY_CONSUMER};
use crate::shared::Shared;
use crate::sync::{fence, Ordering};
use crate::waiters::block_on_until;
use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one look found (`step`).
pub(crate) enum Step<T> {
    /// A due item, now the caller's.
    Item(Due<T>),
    /// Nothing due yet: the index's earliest deadline (a lower bound), or,
    /// for a caller that performs no rounds, a due one.
    NotYet(u64),
    /// The dequeue role is held while an item is due; the caller (registered)
    /// asked its release to wake it.
    Busy,
    /// Nothing in the ring, nothing in the index that can fall due.
    Empty,
}

/// One look at the egress ring: takes the oldest entry.
fn look<T>(s: &Shared<T>) -> Option<Due<T>> {
    let entry = s.egress.take()?;
    taken(s, 1);
    if s.metrics.recording() {
        s.metrics.lateness_ns(s.now_ticks().saturating_sub(entry.0));
    }
    Some(entry)
}

/// A consumer's look: an item from the ring; else, if the index holds a due
/// item and the caller may perform rounds (`rounds`: helping on), the dequeue
/// round, then another look; else why not (`Step`). A `registered` caller
/// that finds the role held asks its release to wake it (`Step::Busy`).
pub(crate) fn step<T>(s: &Shared<T>, rounds: bool, registered: bool) -> Step<T> {
    loop {
        if let Some(e) = look(s) {
            return Step::Item(e);
        }
        // SeqCst: after the look (the egress's claims), as the roles write
        // them: a round pushes, then lowers or raises it.
        let head = s.index_head.load(Ordering::SeqCst);
        if head == NEVER {
            s.signals.admission.caught_up();
            return Step::Empty;
        }
        let now = s.delivery_now();
        if head > now || !rounds {
            return Step::NotYet(head);
        }
        if let Some(held) = s.roles.dequeue.try_acquire_for(&s.signals.consumers) {
            let r = round(s, now);
            drop(held);
            after_round(s, &r, true);
            continue;
        }
        if !registered {
            return Step::Busy;
        }
        if s.roles.dequeue.want(WANTED_BY_CONSUMER) == Want::Marked {
            return Step::Busy;
        }
    }
}

/// `first`, then the due items behind it in the ring, up to `limit` in all.
pub(crate) fn take_many<T>(s: &Shared<T>, first: Due<T>, limit: usize) -> Vec<Due<T>> {
    let mut all = Vec::with_capacity(limit.min(s.egress.capacity()));
    all.push(first);
    while all.len() < limit {
        match s.egress.take() {
            Some(entry) => all.push(entry),
            None => break,
        }
    }
    if all.len() > 1 {
        taken(s, all.len() - 1);
        if s.metrics.recording() {
            let now = s.now_ticks();
            for e in &all[1..] {
                s.metrics.lateness_ns(now.saturating_sub(e.0));
            }
        }
    }
    all
}

/// The most consumers woken by the chain wake-up (`taken`) and not yet run:
/// a take wakes another only while fewer than this, and fewer than the items
/// left in the egress, are in flight. No bound made every consumer runnable under
/// load; one left the head overdue while that one waited for a CPU
/// (`docs/bench/README.md`, thirteenth and twentieth rounds; 2 vCPUs).
pub(crate) const WOKEN_IN_FLIGHT: usize = 3;

/// A consumer took `n` items from the egress ring: release them, and wake the
/// producers waiting for room, one more consumer for what is left (or to lead
/// for the index's next deadline, if nobody does), and everyone once a closed
/// queue is empty.
fn taken<T>(s: &Shared<T>, n: usize) {
    let left = s.counter.release(n);
    // SeqCst: one fence serves the notifier checks below (`waiters.rs`), and
    // is the leaving leader's half of the lead hand-off (`lead.rs`: its
    // give-up came before the take).
    fence(Ordering::SeqCst);
    if s.counter.capacity().is_some() {
        s.signals.producers.notify_after_fence(n);
    }
    if !s.helping {
        // The dequeue proxy may wait for room (`dequeue::wait_for_room`).
        s.signals.dequeue.ring_after_fence();
    }
    // Chain wake-up: a round wakes at most two consumers (a wake is a
    // syscall on the performer's thread); a consumer that leaves items behind
    // wakes one more, so wake-ups spread over the consumers' threads. With
    // the ring empty, one wakes to lead for the index's next deadline if
    // nobody leads (Java `DelayQueue.take`'s `finally`). Unless consumers
    // woken before, one per item left (at most WOKEN_IN_FLIGHT), have not run
    // yet: they will look at both first.
    s.signals.consumers.wake_one_unless_woken(|| match s.egress.len() {
        // SeqCst: after the fence, with the lead's other accesses.
        0 => usize::from(s.lead.current().is_none() && s.index_head.load(Ordering::SeqCst) != NEVER),
        left => left.min(WOKEN_IN_FLIGHT),
    });
    if left == 0 && s.counter.is_closed() {
        s.signals.consumers.notify_all();
    }
}

/// The receiving half of a delay queue. `Clone + Send + Sync`.
///
/// Due items wait in a lock-free egress ring, in deadline order; a receiver
/// takes from it with one CAS. When the ring is empty and an item in the
/// timer index is due, the receiver performs the dequeue role: it moves every
/// due item into the ring (under the role's token, so the index still sees
/// two contenders) and takes one. When nothing is due, one waiting receiver
/// leads: it sleeps until the index's next deadline and then moves what is
/// due itself; the others sleep until woken. So an item due while a receiver
/// waits costs one wake-up, that receiver's own timer, as in Java's
/// `DelayQueue`. (On Linux the leader's timed wait runs with the thread's
/// timer slack lowered to 25 µs, so that the kernel's default of 50 µs is
/// not added to the lateness; when the wait ends the thread gets back the
/// slack it had at its first lead.)
///
/// When the last `Receiver` is dropped, sends fail with the item handed back,
/// and the pending items are dropped before its `drop` returns (on that
/// thread; a panic in an item's `Drop` is contained); then the proxy threads
/// exit.
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

    /// One attempt of a waiting receiver: a due item, "exhausted", or
    /// nothing yet (`None`); `not_yet` hears the deadline the caller would
    /// wait for when nothing is due (only when `registered`: see `step`).
    pub(crate) fn attempt(
        &self,
        registered: bool,
        not_yet: impl FnOnce(u64),
    ) -> Option<Result<Due<T>, RecvError>> {
        let s = &self.chan.shared;
        match step(s, s.helping, registered) {
            Step::Item(entry) => return Some(Ok(entry)),
            Step::NotYet(at) if registered => not_yet(at),
            Step::NotYet(_) | Step::Busy | Step::Empty => {}
        }
        // Nothing due: the queue may have gone quiet, and no round would
        // bring the metrics up to date.
        s.sample_metrics();
        s.counter.is_exhausted().then_some(Err(RecvError))
    }

    /// Blocks until an item is due (or the queue is exhausted), or until
    /// `deadline`: `None`. A consumer that finds nothing due leads for the
    /// index's next deadline (`lead.rs`) and parks until then, to run the
    /// round itself; or parks untimed if another leads for one no later.
    /// Without helping it asks the dequeue proxy to lead instead.
    fn wait(&self, deadline: Option<Instant>) -> Option<Result<Due<T>, RecvError>> {
        let s = &self.chan.shared;
        // The lead's value while this consumer leads; whether the last
        // attempt gave the lead up.
        let led = Cell::new(None::<u64>);
        let gave_up = Cell::new(false);
        let got = block_on_until(&s.signals.consumers, &s.clock, deadline, |registered| {
            // Give the lead up before looking: our take's chain wake-up (or
            // our leaving) then reaches the next leader (`lead.rs`).
            gave_up.set(led.take().is_some_and(|v| s.lead.give_up(v)));
            let mut park_until = None;
            let got = self.attempt(registered, |at| {
                if !s.helping {
                    ask_proxy(s, at);
                } else if let Some(v) = s.lead.take(at, false) {
                    led.set(Some(v));
                    park_until = Some(s.ticks.instant(at));
                }
            });
            got.ok_or(park_until)
        });
        if got.is_none() {
            // Leaving without an item (a timeout) after leading: someone else
            // must lead (after the give-up's fence: the hand-off's pair).
            // (A mock clock's step wakes every waiter, which a loom model
            // cannot get past; `tests/deadlines.rs`,
            // `a_leader_that_times_out_hands_the_lead_on`, fails without this.)
            let still = led.get().is_some_and(|v| s.lead.give_up(v));
            if still || gave_up.get() {
                s.signals.consumers.notify_after_fence(1);
            }
        }
        got
    }

    fn recv_raw(&self) -> Result<Due<T>, RecvError> {
        self.wait(None).unwrap_or(Err(RecvError))
    }

    /// A look; then, while items are pending and the ring is empty, a
    /// catch-up (`dequeue::catch_up`) that moves what is due or proves that
    /// nothing is, and another look.
    fn try_recv_raw(&self) -> Result<Due<T>, TryRecvError> {
        let s = &self.chan.shared;
        loop {
            if let Some(e) = look(s) {
                return Ok(e);
            }
            if s.counter.is_exhausted() {
                return Err(TryRecvError::Disconnected);
            }
            // Nothing pending at all: a true "nothing is due" at this read.
            let none = s.len() == 0;
            if none {
                s.signals.admission.caught_up();
            }
            if none || crate::dequeue::catch_up(s) {
                s.sample_metrics();
                return Err(TryRecvError::Empty);
            }
        }
    }

    fn recv_raw_deadline(&self, deadline: Instant) -> Result<Due<T>, RecvTimeoutError> {
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

    fn recv_raw_timeout(&self, timeout: Duration) -> Result<Due<T>, RecvTimeoutError> {
        match self.chan.shared.clock.now().checked_add(timeout) {
            Some(deadline) => self.recv_raw_deadline(deadline),
            None => self.recv_raw().map_err(RecvTimeoutError::from),
        }
    }

    /// Blocks for the first item, then appends what else is due to `buf`, up
    /// to `limit` in all, each as `f` makes it.
    fn recv_many_with<U>(
        &self,
        buf: &mut Vec<U>,
        limit: usize,
        f: impl FnMut(Due<T>) -> U,
    ) -> Result<usize, RecvError> {
        if limit == 0 {
            return Ok(0);
        }
        let all = take_many(&self.chan.shared, self.recv_raw()?, limit);
        let n = all.len();
        buf.extend(all.into_iter().map(f));
        Ok(n)
    }

    /// The queue's internals (the async front-end).
    #[cfg_attr(not(feature = "async"), allow(dead_code))]
    pub(crate) fn shared(&self) -> &Shared<T> {
        &self.chan.shared
    }

    pub(crate) fn entry(&self, (deadline, seq, item): Due<T>) -> Expired<T> {
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
    /// use std::time::{Duration, Instant};
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// let now = Instant::now();
    /// tx.send_at("b", now + Duration::from_millis(2)).unwrap();
    /// tx.send_at("a", now + Duration::from_millis(1)).unwrap();
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
    /// `Empty` is a linearizable answer, as crossbeam-channel's `try_recv`
    /// is: it is returned only if, at some instant during the call, no item
    /// that was due had been sent and not yet received or cancelled. When
    /// the consumers' ring is empty while items are pending, `try_recv`
    /// catches up: it applies the commands still on their way to the index
    /// and moves what is due, waiting for a role's holder if one is at work
    /// (a bounded piece of work; never for a parked thread, never until an
    /// item falls due). So a poll after a send of a due item finds it, and
    /// `try_iter` drains every due item, not only a ring's worth. (Called
    /// from an item's `Drop` that the queue itself runs, it cannot wait for
    /// the roles and answers from the ring alone.)
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
    /// many it appended. With `limit == 0` it returns `Ok(0)` at once. (An
    /// item that another thread's round is moving at this very moment may
    /// come with the next call instead.)
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
        self.recv_many_with(buf, limit, |(_, _, item)| item)
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
        self.recv_many_with(buf, limit, |r| self.entry(r))
    }

    /// A blocking iterator: [`recv`](Receiver::recv) until it fails.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// let now = Instant::now();
    /// for i in [3, 1, 2] {
    ///     tx.send_at(i, now + Duration::from_millis(i)).unwrap();
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
    /// if nothing is pending. A command through the enqueue role, so every
    /// send that returned before the call is counted.
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
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.chan.shared.counter.add_receiver();
        Receiver { chan: self.chan.clone() }
    }
}

impl<T> Drop for Receiver<T> {
    /// The last receiver disconnects the queue and drops every pending item
    /// before it returns (unless it is dropped by an item's `Drop` that the
    /// queue runs: the enqueue proxy drops them then, as it winds down).
    fn drop(&mut self) {
        let s = &self.chan.shared;
        if s.counter.remove_receiver() {
            // No new sends, then everything pending dropped here, then the
            // proxies told (their wind-down finds nothing left).
            s.close();
            s.ingress.close();
            enqueue::drop_pending(s);
            s.disconnect();
        }
    }
}

crate::chan::handle!(Receiver);

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
