//! The producer handle, and the send path: reserve a unit of `len`, push an
//! `Insert` into the ingress, perform the enqueue role if nobody does
//! (`enqueue::hand_over`).

use crate::admission::{Reason, INGRESS_DEEP, INGRESS_SAMPLE};
use crate::chan::Chan;
use crate::clock::Ticks;
use crate::cmd::Cmd;
use crate::enqueue;
use crate::error::{SendError, SendTimeoutError, TrySendError};
use crate::key::Key;
use crate::metrics::SendErrorKind;
use crate::oneshot;
use crate::shared::Shared;
use crate::waiters::block_on;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a send may wait for room in a bounded queue.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    Never,
    Until(Option<Instant>),
}

/// Why a send failed; the item comes back.
pub(crate) enum SendFail<T> {
    Full(T),
    Timeout(T),
    Disconnected(T),
}

/// Sends `item` due at `deadline` (ticks); returns its key.
///
/// Costs on the way: a read of `closed`; the reservation (one RMW on `len`, a
/// CAS loop for a bounded queue); a SeqCst fence and a second read of `closed`
/// (the `closed` handshake of `counter.rs`); a relaxed RMW for the key; the
/// ingress push (one CAS on its tail, a stamp store); a SeqCst fence and a
/// look at the enqueue role (while the enqueue proxy streams: a look at its
/// `sleeping` flag instead, and nothing more), and, if it is free, the role
/// itself (a CAS, the timers lock, the inserts of the commands waiting, a
/// fence after the release; a wake-up only for a new earliest deadline that
/// nobody leads for); and, for a blocking send, [`pace`].
fn send<T>(s: &Shared<T>, item: T, deadline: u64, wait: Wait) -> Result<u64, SendFail<T>> {
    let r = attempt_send(s, item, deadline, wait);
    if let Err(e) = &r {
        s.metrics.send_error(match e {
            SendFail::Full(_) => SendErrorKind::Full,
            SendFail::Timeout(_) => SendErrorKind::Timeout,
            SendFail::Disconnected(_) => SendErrorKind::Disconnected,
        });
    }
    r
}

/// The send itself; [`send`] counts its failures for the metrics.
fn attempt_send<T>(s: &Shared<T>, item: T, deadline: u64, wait: Wait) -> Result<u64, SendFail<T>> {
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
        Wait::Until(None) => s.ingress.push_or_wait(cmd, || enqueue::hand_over(s)),
        _ => s.ingress.push(cmd),
    };
    if let Err(cmd) = pushed {
        s.release(1);
        let Cmd::Insert { item, .. } = cmd else { unreachable!("pushed an insert") };
        return Err(SendFail::Disconnected(item));
    }
    enqueue::hand_over(s);
    if let Wait::Until(until) = wait {
        pace(s, key, until);
    }
    Ok(key)
}

/// Back-pressure for a blocking send whose item is already handed over
/// (`admission.rs`): one send in `INGRESS_SAMPLE` reads the ingress depth and
/// the age of the oldest due item in the index, and shuts the gate when
/// commands pile up in front of the enqueue role, or when due items wait too
/// long while consumers take (`Admission::lagging`); a send
/// that finds the gate shut (for Lag alone: on a thread that did not perform
/// the last dequeue round, `Admission::lag_waits`) waits there (at most `MAX_WAIT`, and never past
/// `until`) before it returns, so the pause slows its caller's next send and not
/// the item just sent. Costs one load while the gate is open.
fn pace<T>(s: &Shared<T>, key: u64, until: Option<Instant>) {
    let gate = &s.signals.admission;
    if key % INGRESS_SAMPLE == 0 && !s.clock.is_mock() {
        if s.ingress.len() > INGRESS_DEEP {
            gate.shut(Reason::Ingress);
        }
        if crate::dequeue::lagging(s) {
            gate.lagging(s.egress.taken_so_far());
        }
    }
    if gate.is_shut() && gate.lag_waits() {
        let start = s.metrics.recording().then(Instant::now);
        gate.wait(&s.clock, until, || s.counter.is_closed(), || s.egress.taken_so_far());
        if let Some(start) = start {
            s.metrics.admission_pause(start.elapsed());
        }
    }
}

/// The sending half of a delay queue. `Clone + Send + Sync`.
///
/// A send reserves a unit of the queue's length (the only step that can block,
/// on a full bounded queue), pushes a command into the lock-free ingress ring,
/// and then performs the enqueue role if nobody does: it applies the commands
/// waiting in the ring (its own and other producers', a bounded batch) to the
/// timer index under the role's token. If another producer holds the role,
/// the send returns at once: that holder applies its command. So the index
/// sees one producer at a time, and no send waits for a proxy thread. Under
/// load (a producer's batch held 64 commands or more) a send only pushes and
/// rings the enqueue proxy, which applies the commands in batches until they
/// are few again.
///
/// When the last `Sender` is dropped, receivers still get every pending item when
/// it falls due, then [`RecvError`](crate::RecvError).
///
/// Its methods need nothing of `T`, as crossbeam-channel's; building a queue needs
/// `T: Send + 'static` (the proxy threads own the items), so a queue of borrowed
/// data cannot be made.
pub struct Sender<T> {
    chan: Arc<Chan<T>>,
}

impl<T> Sender<T> {
    pub(crate) fn new(chan: Arc<Chan<T>>) -> Self {
        Sender { chan }
    }

    /// The queue's internals (the async front-end).
    #[cfg_attr(not(feature = "async"), allow(dead_code))]
    pub(crate) fn shared(&self) -> &Shared<T> {
        &self.chan.shared
    }

    pub(crate) fn send_ticks(&self, item: T, deadline: u64, wait: Wait) -> Result<Key, SendFail<T>> {
        let s = &self.chan.shared;
        send(s, item, deadline, wait).map(|seq| Key { queue: s.id, seq })
    }

    /// Waits for room without a deadline, so it fails only on disconnection.
    fn send_blocking(&self, item: T, deadline: u64) -> Result<Key, SendError<T>> {
        self.send_ticks(item, deadline, Wait::Until(None))
            .map_err(|(SendFail::Disconnected(t) | SendFail::Full(t) | SendFail::Timeout(t))| SendError(t))
    }

    /// Sends `item`, due at `deadline` by the queue's clock. A deadline in the past
    /// is due at once. Blocks while a bounded queue is full. While the queue is
    /// behind (unthrottled producers), it may also pause for up to 1 ms *after*
    /// handing the item over, before it returns: back-pressure that slows the
    /// caller's next send, never this item's delivery.
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
        self.send_blocking(item, d)
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
        let d = Ticks::after(self.chan.shared.now_ticks(), delay);
        self.send_blocking(item, d)
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
        self.try_send_ticks(item, d)
    }

    fn try_send_ticks(&self, item: T, deadline: u64) -> Result<Key, TrySendError<T>> {
        match self.send_ticks(item, deadline, Wait::Never) {
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
        self.send_ticks_until(item, s.deadline_ticks(deadline), s.clock.now().checked_add(timeout))
    }

    /// A send waiting for room until `until` (`None`: forever).
    fn send_ticks_until(
        &self,
        item: T,
        deadline: u64,
        until: Option<Instant>,
    ) -> Result<Key, SendTimeoutError<T>> {
        match self.send_ticks(item, deadline, Wait::Until(until)) {
            Ok(k) => Ok(k),
            Err(SendFail::Full(t) | SendFail::Timeout(t)) => Err(SendTimeoutError::Timeout(t)),
            Err(SendFail::Disconnected(t)) => Err(SendTimeoutError::Disconnected(t)),
        }
    }

    /// Sends `item` due `delay` from now if that can be done without blocking.
    ///
    /// # Errors
    ///
    /// As [`try_send_at`](Sender::try_send_at).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let (tx, _rx) = delayq::bounded(1);
    /// tx.try_send_after('a', Duration::from_secs(60)).unwrap();
    /// assert!(tx.try_send_after('b', Duration::ZERO).unwrap_err().is_full());
    /// ```
    pub fn try_send_after(&self, item: T, delay: Duration) -> Result<Key, TrySendError<T>> {
        let d = Ticks::after(self.chan.shared.now_ticks(), delay);
        self.try_send_ticks(item, d)
    }

    /// Sends `item` due `delay` from now, waiting at most `timeout` (by the
    /// queue's clock) for room in a bounded queue. A timeout too large for
    /// `Instant` waits forever.
    ///
    /// # Errors
    ///
    /// As [`send_at_timeout`](Sender::send_at_timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let (tx, _rx) = delayq::bounded(1);
    /// tx.send_after_timeout('a', Duration::from_secs(60), Duration::ZERO).unwrap();
    /// let e = tx.send_after_timeout('b', Duration::ZERO, Duration::from_millis(5)).unwrap_err();
    /// assert!(e.is_timeout());
    /// ```
    pub fn send_after_timeout(
        &self,
        item: T,
        delay: Duration,
        timeout: Duration,
    ) -> Result<Key, SendTimeoutError<T>> {
        let s = &self.chan.shared;
        let d = Ticks::after(s.now_ticks(), delay);
        self.send_ticks_until(item, d, s.clock.now().checked_add(timeout))
    }

    /// Sends `item` due at `at`, waiting until `deadline` (by the queue's clock)
    /// for room in a bounded queue: crossbeam-channel's `send_deadline`.
    ///
    /// # Errors
    ///
    /// [`SendTimeoutError::Timeout`] if no room appeared by `deadline`;
    /// [`SendTimeoutError::Disconnected`] as for [`send_at`](Sender::send_at).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let (tx, rx) = delayq::bounded(1);
    /// let now = Instant::now();
    /// tx.send_at_deadline(1, now, now + Duration::from_secs(1)).unwrap();
    /// let e = tx.send_at_deadline(2, now, Instant::now() + Duration::from_millis(5)).unwrap_err();
    /// assert_eq!(e.into_inner(), 2);
    /// assert_eq!(rx.recv(), Ok(1));
    /// ```
    pub fn send_at_deadline(
        &self,
        item: T,
        at: Instant,
        deadline: Instant,
    ) -> Result<Key, SendTimeoutError<T>> {
        let d = self.chan.shared.deadline_ticks(at);
        self.send_ticks_until(item, d, Some(deadline))
    }

    /// Moves a pending item to `delay` from now: [`reschedule`](Sender::reschedule)
    /// with a relative deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// use delayq::{Builder, MockClock};
    /// use std::time::Duration;
    ///
    /// let clock = MockClock::new();
    /// let (tx, rx) = Builder::new().clock(clock.clone()).build().unwrap();
    /// let key = tx.send_after("x", Duration::from_secs(60)).unwrap();
    /// assert!(tx.reschedule_after(key, Duration::from_secs(1)));
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(rx.try_recv(), Ok("x"));
    /// ```
    pub fn reschedule_after(&self, key: Key, delay: Duration) -> bool {
        let s = &self.chan.shared;
        self.reschedule_ticks(key, Ticks::after(s.now_ticks(), delay))
    }

    /// Removes a pending item and returns it: `Some` while the item waits in
    /// the timer index — **also once its deadline has passed**, as long as it
    /// has not been handed to the consumers' ring (tokio-util's
    /// `DelayQueue::remove` and Java's `DelayQueue.remove` likewise hand back
    /// an expired item that nobody took). `None` once it was handed to the
    /// consumers' ring as due, whether or not anyone has received it yet:
    /// from then on it counts as delivered.
    ///
    /// So for an item whose deadline has passed, the answer depends on a race
    /// with the move into the ring (by the dequeue proxy, or by a consumer
    /// that helps it): exactly one of "`cancel` returned it" and "a consumer
    /// receives it" happens, never both, never neither.
    ///
    /// Also `None` if it was cancelled or taken before, if `key` belongs to another
    /// queue, or if the queue is disconnected. Waits for the enqueue role to
    /// answer (commands apply in order, so a `cancel` never overtakes its own
    /// `send`).
    /// Why items in the ring are final once due: consumers take due items from a
    /// lock-free ring without asking the proxies, with one CAS on the ring's head
    /// and no per-entry check; [`Receiver::recv_entry`](crate::Receiver::recv_entry)
    /// tells a consumer the key of what it got, to settle a cancel/deliver race.
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
        if !enqueue::command(s, Cmd::Cancel { key: key.seq, answer }) {
            return None;
        }
        reply.wait().flatten()
    }

    /// Cancels without waiting: like [`cancel`](Sender::cancel), but returns at
    /// once, without the item. If the item is still pending when the enqueue
    /// proxy reaches this command, it is removed and dropped there (a panic in
    /// its `Drop` is contained); if it is already due, nothing happens. Commands
    /// apply in the order this thread issued them, so a `discard` never
    /// overtakes its own `send`, and a `recv` can still return the item until
    /// the proxy has applied it (so can `len` count it).
    ///
    /// For a caller that cancels often and does not need the item back (a
    /// timer it no longer wants): `cancel` waits for the proxy's answer, a
    /// round trip between threads; `discard` costs one command.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = delayq::unbounded();
    /// let key = tx.send_after("stale timer", Duration::from_millis(20)).unwrap();
    /// tx.send_after("live timer", Duration::from_millis(30)).unwrap();
    /// tx.discard(key);
    /// assert_eq!(rx.recv(), Ok("live timer"));
    /// assert_eq!(rx.len(), 0);
    /// ```
    pub fn discard(&self, key: Key) {
        let s = &self.chan.shared;
        if key.queue == s.id {
            enqueue::command(s, Cmd::Discard { key: key.seq });
        }
    }

    /// Moves a pending item to a new deadline. `true` if it was pending — by
    /// the same rule as [`cancel`](Sender::cancel): in the timer index, also
    /// once its deadline has passed — and
    /// `false` if it was handed to the consumers' ring as due (delivered, or
    /// about to be), cancelled, taken, unknown to this queue, or the queue is
    /// disconnected. The key stays valid, and so does its rank among equal
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
        self.reschedule_ticks(key, self.chan.shared.deadline_ticks(deadline))
    }

    pub(crate) fn reschedule_ticks(&self, key: Key, deadline: u64) -> bool {
        let s = &self.chan.shared;
        if key.queue != s.id {
            return false;
        }
        let (answer, reply) = oneshot::pair();
        let cmd = Cmd::Reschedule { key: key.seq, deadline, answer };
        enqueue::command(s, cmd) && reply.wait().unwrap_or(false)
    }

    /// `true` if sends fail: every receiver is gone or the queue was closed.
    pub fn is_disconnected(&self) -> bool {
        self.chan.shared.counter.is_closed()
    }
}

crate::chan::handle!(Sender);

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

#[cfg(all(test, not(delayq_loom)))]
mod tests {
    use crate::admission::tests::with_max_wait;
    use crate::admission::Reason;
    use std::time::{Duration, Instant};

    /// Takes the enqueue role as a client would, waiting out the proxy, which
    /// holds it for a moment now and then (its first round, an empty round
    /// after a ring).
    fn hold_enqueue_role<T>(s: &crate::shared::Shared<T>) -> crate::role::Held<'_> {
        let patience = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(held) = s.roles.enqueue.try_acquire() {
                return held;
            }
            assert!(Instant::now() < patience, "the proxy kept the enqueue role");
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_paused_send_has_already_handed_its_item_over() {
        // The gate held shut by a reason no proxy clears, and a minute's
        // patience: a send that paused before its push would deliver nothing
        // for a minute; one that pauses after it delivers at once.
        let (tx, rx) = with_max_wait(Duration::from_secs(60), crate::unbounded::<u32>);
        let gate = tx.clone();
        gate.shared().signals.admission.shut(Reason::Test);
        let sending = std::thread::spawn(move || {
            tx.send_at(7, Instant::now()).unwrap();
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(7), "the item waited with its sender");
        assert!(!sending.is_finished(), "the send did not pause at the shut gate");
        // Every reason: on a loaded machine the round that moved the item may
        // have found it due for longer than `LAG` and shut the gate for `Lag`
        // too, which only a later round would open (seen: a minute's wait).
        gate.shared().signals.admission.open_all();
        sending.join().unwrap();
    }

    #[test]
    fn a_consumer_that_finds_nothing_left_opens_a_gate_shut_for_lag() {
        // A round that moved an old item shut the gate for Lag, and the
        // consumers took everything: no round would open it, and a paused
        // send would wait out its pause (a minute here) with them idle.
        let (tx, rx) = with_max_wait(Duration::from_secs(60), crate::unbounded::<u32>);
        let gate = &tx.shared().signals.admission;
        gate.shut(Reason::Lag);
        assert_eq!(rx.try_recv(), Err(crate::TryRecvError::Empty));
        assert!(!gate.is_shut(), "try_recv on an empty queue left the gate shut");
        // A blocking recv that finds nothing left opens it before it parks.
        gate.shut(Reason::Lag);
        let rx2 = rx.clone();
        let waiting = std::thread::spawn(move || rx2.recv());
        let patience = Instant::now() + Duration::from_secs(20);
        while gate.is_shut() {
            assert!(Instant::now() < patience, "a recv with nothing left left the gate shut");
            std::thread::sleep(Duration::from_millis(1));
        }
        tx.send_after(2, Duration::ZERO).unwrap();
        assert_eq!(waiting.join().unwrap(), Ok(2));
        gate.shut(Reason::Test);
        gate.shut(Reason::Lag);
        assert_eq!(rx.try_recv(), Err(crate::TryRecvError::Empty));
        assert!(gate.is_shut(), "only Lag is the consumers' to open");
        gate.open_all();
    }

    #[test]
    fn a_long_batch_hands_the_enqueue_role_to_its_proxy_and_small_ones_hand_it_back() {
        use crate::enqueue::Stream;
        let (tx, rx) = crate::unbounded::<u32>();
        let s = tx.shared();
        let now = Instant::now();
        // A batch's worth of sends while the role is held: each finds it held
        // and leaves its command to the holder.
        let first = crate::enqueue::STREAM_AT as u32 + 8;
        let held = hold_enqueue_role(s);
        for i in 0..first {
            tx.send_at(i, now).unwrap();
        }
        drop(held);
        // The holder's look after its release performs one batch of them all.
        crate::enqueue::look_after_release(s);
        assert_eq!(Stream::of(s), Stream::Burst, "a batch of {first} commands did not hand the role over");
        assert!(s.ingress.is_empty());
        // Now each send is left to the proxy, one at a time: made while the
        // test holds the role (so neither the send nor a proxy that woke for
        // nothing applies it, whatever the proxy's state), then the release
        // and a ring, the handshake a left-behind push relies on. Each is a
        // small batch of its own, until enough in a row hand the role back.
        // (Ringing before an unheld send raced: on a loaded machine the proxy
        // woke, found nothing and parked again, and the send, seeing it
        // parked, performed the role itself; seen in CI.)
        let patience = Instant::now() + Duration::from_secs(30);
        let mut sent = first;
        while Stream::of(s) != Stream::Off {
            assert!(
                sent < first + 2 * crate::enqueue::STREAM_BACK && Instant::now() < patience,
                "small batches never handed the role back"
            );
            let held = hold_enqueue_role(s);
            tx.send_at(sent, now).unwrap();
            sent += 1;
            assert!(!s.ingress.is_empty(), "the send performed a held role");
            drop(held);
            s.signals.enqueue.ring();
            while !s.ingress.is_empty() {
                assert!(Instant::now() < patience, "the streaming proxy left a send in the ingress");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert!(sent - first >= crate::enqueue::STREAM_BACK, "handed back after {} sends", sent - first);
        tx.send_at(sent, now).unwrap();
        sent += 1;
        let mut got: Vec<u32> =
            (0..sent).map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, (0..sent).collect::<Vec<_>>());
    }

    #[test]
    fn a_push_performs_the_role_itself_while_a_bursts_proxy_is_parked() {
        use crate::enqueue::Stream;
        let (tx, rx) = crate::unbounded::<u32>();
        let s = tx.shared();
        let later = Instant::now() + Duration::from_secs(3600);
        let first = crate::enqueue::STREAM_AT as u32;
        let held = hold_enqueue_role(s);
        for i in 0..first {
            tx.send_at(i, later).unwrap();
        }
        drop(held);
        crate::enqueue::look_after_release(s);
        assert_eq!(Stream::of(s), Stream::Burst);
        // An idle proxy parks (its bell says so before it does).
        let patience = Instant::now() + Duration::from_secs(30);
        while !s.signals.enqueue.is_sleeping() {
            assert!(Instant::now() < patience, "the idle enqueue proxy never parked");
            std::thread::sleep(Duration::from_millis(1));
        }
        // The send applies its command itself: the ingress is empty when it
        // returns, and the proxy was not rung (a ring clears the flag).
        tx.send_at(first, later).unwrap();
        assert!(s.ingress.is_empty(), "the send left its command to a parked proxy");
        assert!(s.signals.enqueue.is_sleeping(), "the send rang the parked proxy");
        assert_eq!(Stream::of(s), Stream::Burst, "a lone command is not a fast window");
        assert_eq!(tx.len(), first as usize + 1);
        drop(rx);
    }

    #[test]
    fn a_lone_producer_at_a_fast_pace_hands_the_enqueue_role_to_its_proxy() {
        use crate::enqueue::Stream;
        use crate::pace::{WINDOW, WINDOW_NS};
        use crate::sync::lock;
        let (tx, rx) = crate::unbounded::<u32>();
        let s = tx.shared();
        let later = Instant::now() + Duration::from_secs(3600);
        // Let the proxy's first round pass: a send that found the role held
        // by it would leave its command in the ingress for a moment.
        let patience = Instant::now() + Duration::from_secs(30);
        while !s.signals.enqueue.is_sleeping() {
            assert!(Instant::now() < patience, "the idle enqueue proxy never parked");
            std::thread::sleep(Duration::from_millis(1));
        }
        // A window that began long ago ends slow: the producer applies its
        // command itself and keeps the role.
        lock(&s.batch).pace.prime(WINDOW - 1, s.now_ticks() - 2 * WINDOW_NS);
        tx.send_at(0, later).unwrap();
        assert_eq!(Stream::of(s), Stream::Off, "a slow window handed the role over");
        assert!(s.ingress.is_empty(), "the producer left its command in the ingress");
        // One that began just now ends fast (unless this thread was off its
        // CPU for the whole window: then the try does not count).
        let mut sent = 1;
        loop {
            let began = Instant::now();
            lock(&s.batch).pace.prime(WINDOW - 1, s.now_ticks());
            tx.send_at(sent, later).unwrap();
            sent += 1;
            if began.elapsed() < Duration::from_nanos(WINDOW_NS) {
                break;
            }
            assert!(sent < 100, "no send ended its window in time");
        }
        assert_eq!(Stream::of(s), Stream::Lone, "a fast window did not hand the role over");
        // Nothing lost on the way: every send is pending.
        while !s.ingress.is_empty() {
            assert!(Instant::now() < patience, "the streaming proxy left a send in the ingress");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(tx.len(), sent as usize);
        drop(rx);
    }
}
