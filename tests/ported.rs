//! Behaviours that peer projects' suites check, ported to delayq's API (written
//! here, not copied): Java's JSR-166 TCK `DelayQueueTest` (`jsr_*`),
//! crossbeam-channel's channel tests (`cb_*`) and tokio-util's `DelayQueue`
//! tests (`tokio_*`). Each test's doc comment names the peer test it ports, and
//! says where delayq's documented semantics differ and the test follows delayq.
//!
//! Timing is decided by a `MockClock` wherever a deadline or a timeout is
//! checked; the system clock only where the behaviour is about blocking and
//! wake-ups, with generous bounds. A call that a bug could leave blocked for
//! ever runs under [`guarded`], so that a hang fails the test instead of the run.

mod common;
use common::*;
use delayq::{
    BuildError, Builder, Key, MockClock, Receiver, RecvError, RecvTimeoutError, SendError, SendTimeoutError,
    Sender, TryRecvError, TrySendError,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

fn ns(n: u64) -> Duration {
    Duration::from_nanos(n)
}

/// Runs `f` on its own thread and returns its result, failing the test if it
/// does not finish within [`WAIT`] (a blocking call that never returns) or if it
/// panicked.
fn guarded<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    join(spawn(f))
}

/// A bounded queue on a fresh mock clock.
fn mock_bounded<T: Send + 'static>(cap: usize) -> (MockClock, Sender<T>, Receiver<T>) {
    let clock = MockClock::new();
    let (tx, rx) = Builder::new().capacity(cap).clock(clock.clone()).build().unwrap();
    (clock, tx, rx)
}

/// Checks that the call running on `h` has not returned: it can fail only if the
/// call returned early (a passing run waits a moment here; nothing is decided
/// by the time a correct call takes).
fn still_blocked<R>(h: &thread::JoinHandle<R>, what: &str) {
    thread::sleep(ms(30));
    assert!(!h.is_finished(), "{what} returned before its release");
}

/// Steps `clock` by `step` until the thread `h` has finished: for a thread that
/// computes a relative timeout from a mock time the test cannot see.
fn step_until_finished<R>(clock: &MockClock, step: Duration, h: &thread::JoinHandle<R>) {
    let end = Instant::now() + WAIT;
    while !h.is_finished() {
        assert!(Instant::now() < end, "the thread never finished while the clock moved");
        clock.advance(step);
        thread::sleep(ms(1));
    }
}

/// How often each item was dropped, by id (crossbeam-channel's `DropCounter`,
/// one counter per item so that "exactly once" is checked item by item).
struct Ledger(Vec<AtomicUsize>);

impl Ledger {
    fn new(n: usize) -> Arc<Ledger> {
        Arc::new(Ledger((0..n).map(|_| AtomicUsize::new(0)).collect()))
    }

    fn drops(&self, id: usize) -> usize {
        self.0[id].load(Ordering::SeqCst)
    }

    fn total(&self) -> usize {
        (0..self.0.len()).map(|i| self.drops(i)).sum()
    }

    /// Ids dropped a number of times other than `times`.
    fn not_dropped(&self, times: usize) -> Vec<usize> {
        (0..self.0.len()).filter(|&i| self.drops(i) != times).collect()
    }
}

/// An item whose `Drop` is counted in its ledger.
struct Tracked {
    id: usize,
    ledger: Arc<Ledger>,
}

impl Tracked {
    fn new(id: usize, ledger: &Arc<Ledger>) -> Tracked {
        Tracked { id, ledger: ledger.clone() }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.ledger.0[self.id].fetch_add(1, Ordering::SeqCst);
    }
}

/// The farthest instant this platform's `Instant` can represent from `from`.
fn farthest_instant(from: Instant) -> Instant {
    let (mut t, mut step) = (from, Duration::MAX);
    while step > Duration::ZERO {
        match t.checked_add(step) {
            Some(later) => t = later,
            None => step /= 2,
        }
    }
    t
}

// ---------------------------------------------------------------------------
// JSR-166 TCK `DelayQueueTest`
// ---------------------------------------------------------------------------

/// JSR-166 TCK DelayQueueTest: testEmpty, testPoll / testPeek on an empty queue,
/// testTimedPoll0 on an empty queue, testRemainingCapacity of the unbounded
/// queue (delayq: `capacity() == None`, never full).
#[test]
fn jsr_empty_queue_has_nothing_to_poll_peek_or_count() {
    let (clock, tx, rx) = mock::<u32>();
    assert!(rx.is_empty() && tx.is_empty());
    assert_eq!((rx.len(), tx.len()), (0, 0));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(rx.peek_deadline(), None);
    assert_eq!(rx.recv_timeout(Duration::ZERO), Err(RecvTimeoutError::Timeout));
    assert_eq!(rx.recv_deadline(clock.now()), Err(RecvTimeoutError::Timeout));
    assert_eq!((rx.capacity(), tx.capacity()), (None, None));
    assert!(!rx.is_full() && !tx.is_full());
    clock.advance(HOUR);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "time passing makes nothing appear");

    // testEmpty: one item makes it non-empty; taking it empties it again.
    tx.send_at(1, clock.now()).unwrap();
    assert!(!rx.is_empty() && !tx.is_empty());
    clock.advance(Duration::ZERO);
    assert_eq!(rx.try_recv(), Ok(1));
    assert!(rx.is_empty() && tx.is_empty());
    assert_eq!(rx.peek_deadline(), None);
}

/// JSR-166 TCK DelayQueueTest: testPoll, testTake, testPeek, testElement,
/// testRemove on a populated queue (elements added in shuffled order): each
/// take returns the element with the earliest deadline; peek shows the head's
/// deadline without removing it (delayq's peek is `peek_deadline`, which
/// reports the earliest deadline of an item not yet received, due or not).
#[test]
fn jsr_populated_queue_gives_earliest_first_and_peek_removes_nothing() {
    let (clock, tx, rx) = mock::<u64>();
    let t0 = clock.now();
    let mut order: Vec<u64> = (0..20).collect();
    Rng::seed(166).shuffle(&mut order);
    for &i in &order {
        tx.send_at(i, t0 + ms(i + 1)).unwrap();
    }
    assert_eq!(rx.len(), 20);
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(1)));
    clock.advance(ms(20)); // every element is due
    for i in 0..20u64 {
        assert_eq!(rx.peek_deadline(), Some(t0 + ms(i + 1)), "peek before take {i}");
        assert_eq!(rx.len(), 20 - i as usize, "peek removed an element");
        let got = if i % 2 == 0 { rx.try_recv().ok() } else { guarded_recv(&rx) };
        assert_eq!(got, Some(i));
    }
    assert_eq!(rx.peek_deadline(), None);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert!(rx.is_empty());
}

/// `recv` under [`guarded`]: the item, or `None` on `RecvError`.
fn guarded_recv<T: Send + 'static>(rx: &Receiver<T>) -> Option<T> {
    let rx = rx.clone();
    guarded(move || rx.recv().ok())
}

/// JSR-166 TCK DelayQueueTest: testPollDelayed, testPeekDelayed — an element
/// whose delay has not expired cannot be polled, but peek reports it; it
/// becomes available exactly when its delay has elapsed, not a nanosecond before.
#[test]
fn jsr_element_is_not_available_before_its_delay() {
    let (clock, tx, rx) = mock::<u32>();
    let t0 = clock.now();
    tx.send_at(7, t0 + secs(10)).unwrap();
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(rx.peek_deadline(), Some(t0 + secs(10)));
    assert_eq!(rx.len(), 1);
    clock.advance(secs(10) - ns(1));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "delivered 1 ns early");
    assert_eq!(rx.recv_timeout(Duration::ZERO), Err(RecvTimeoutError::Timeout));
    assert_eq!(rx.peek_deadline(), Some(t0 + secs(10)));
    clock.advance(ns(1));
    let e = rx.try_recv_entry().expect("due at its deadline");
    assert_eq!((*e.get_ref(), e.deadline()), (7, t0 + secs(10)));
    assert!(rx.is_empty());
}

/// JSR-166 TCK DelayQueueTest: testTimedPoll (an empty queue and one whose
/// only element is not due: the timed poll returns null after its timeout, and
/// no sooner). delayq's timeouts run on the queue's clock ("Waits at most
/// `timeout` (by the queue's clock)", `Receiver::recv_timeout`), so here on mock time.
#[test]
fn jsr_timed_poll_times_out_after_its_timeout_in_mock_time() {
    for pending in [false, true] {
        let (clock, tx, rx) = mock::<u32>();
        if pending {
            tx.send_after(1, HOUR).unwrap();
        }
        let (c, r) = (clock.clone(), rx.clone());
        let h = thread::spawn(move || {
            let start = c.now();
            let got = r.recv_timeout(ms(100));
            (got, c.now() - start)
        });
        step_until_finished(&clock, ms(5), &h);
        let (got, waited) = h.join().unwrap();
        assert_eq!(got, Err(RecvTimeoutError::Timeout), "pending: {pending}");
        assert!(waited >= ms(100), "timed out after {waited:?} of mock time");
        assert_eq!(rx.len(), usize::from(pending), "a timed-out poll takes nothing");
    }
}

/// JSR-166 TCK DelayQueueTest: testTimedPoll0 — a timed poll with a zero
/// timeout returns the expired elements, in order, and then times out.
#[test]
fn jsr_timed_poll_with_zero_timeout_returns_expired_elements() {
    let (clock, tx, rx) = mock::<u32>();
    let t0 = clock.now();
    for i in [2, 0, 1] {
        tx.send_at(i, t0 + ms(u64::from(i))).unwrap();
    }
    tx.send_at(9, t0 + secs(1)).unwrap();
    clock.advance(ms(2));
    for i in 0..3 {
        assert_eq!(rx.recv_timeout(Duration::ZERO), Ok(i));
    }
    assert_eq!(rx.recv_timeout(Duration::ZERO), Err(RecvTimeoutError::Timeout));
    assert_eq!(rx.recv_deadline(t0), Err(RecvTimeoutError::Timeout), "a deadline in the past");
    assert_eq!(rx.len(), 1);
}

/// JSR-166 TCK DelayQueueTest: testTimedPollWithOffer, testTimedPollDelayed,
/// testPollInExecutor — a consumer blocked in a timed poll gets an element
/// offered while it waits, once the element's delay expires before the timeout.
#[test]
fn jsr_timed_poll_succeeds_when_an_item_falls_due_before_the_timeout() {
    let (clock, tx, rx) = mock::<&str>();
    let t0 = clock.now();
    let (c, r) = (clock.clone(), rx.clone());
    let h = thread::spawn(move || (r.recv_deadline(t0 + secs(10)), c.now()));
    still_blocked(&h, "a timed poll on an empty queue");
    tx.send_at("offered", t0 + secs(2)).unwrap();
    clock.advance(secs(1));
    still_blocked(&h, "a timed poll for an item not due");
    clock.advance(secs(1));
    let (got, at) = join_within(h);
    assert_eq!(got, Ok("offered"));
    assert_eq!(at, t0 + secs(2), "received at the item's deadline, before the timeout");
    assert!(rx.is_empty());
}

/// Joins `h`, failing if it has not finished within [`WAIT`].
fn join_within<R>(h: thread::JoinHandle<R>) -> R {
    let end = Instant::now() + WAIT;
    while !h.is_finished() {
        assert!(Instant::now() < end, "the thread hung");
        thread::sleep(ms(1));
    }
    h.join().expect("the thread panicked")
}

/// JSR-166 TCK DelayQueueTest: testBlockingTake / testTake — `take` blocks
/// while the head's delay has not expired and returns it once it has, with
/// the deadline and key it was sent with (`recv_entry`).
#[test]
fn jsr_take_blocks_until_the_head_is_due() {
    let (clock, tx, rx) = mock::<u32>();
    let t0 = clock.now();
    let r = rx.clone();
    let h = thread::spawn(move || r.recv_entry().map(|e| (e.key(), e.deadline(), e.into_inner())));
    let key = tx.send_at(5, t0 + secs(5)).unwrap();
    clock.advance(secs(4));
    still_blocked(&h, "take of an element not due");
    clock.advance(secs(1));
    assert_eq!(join_within(h), Ok((key, t0 + secs(5), 5)));
    assert!(rx.is_empty());
}

/// JSR-166 TCK DelayQueueTest: testSize, testRemoveElement — `size` goes up
/// by one per offer and down by one per take or remove (delayq: `cancel`),
/// whether or not elements are due; a reschedule changes nothing; removing an
/// element leaves the others in order.
#[test]
fn jsr_size_tracks_offers_takes_and_removes() {
    let (clock, tx, rx) = mock::<u64>();
    let t0 = clock.now();
    let mut keys = Vec::new();
    for i in 0..10u64 {
        keys.push(tx.send_at(i, t0 + ms(10 * (i + 1))).unwrap());
        assert_eq!((tx.len(), rx.len()), (i as usize + 1, i as usize + 1));
    }
    for (n, i) in [1usize, 4, 7].into_iter().enumerate() {
        assert_eq!(tx.cancel(keys[i]), Some(i as u64));
        assert_eq!(rx.len(), 9 - n);
    }
    assert!(tx.reschedule(keys[9], t0 + ms(5)));
    assert_eq!(rx.len(), 7, "a reschedule neither adds nor removes");
    clock.advance(ms(100));
    let mut left = 7;
    for want in [9, 0, 2, 3, 5, 6, 8] {
        assert_eq!(rx.try_recv(), Ok(want));
        left -= 1;
        assert_eq!(rx.len(), left);
    }
    assert!(rx.is_empty());
}

/// JSR-166 TCK DelayQueueTest: testDrainTo, testDrainToN — draining moves the
/// expired elements only, in order, and at most N of them. delayq's drains:
/// `try_iter` (every item due now) and `recv_many(buf, n)`.
#[test]
fn jsr_drain_takes_only_expired_elements_and_at_most_n() {
    let (clock, tx, rx) = mock::<u64>();
    let t0 = clock.now();
    for i in (0..10u64).rev() {
        tx.send_at(i, t0 + ms(i)).unwrap();
    }
    clock.advance(ms(4));
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    assert_eq!(rx.len(), 5, "unexpired elements stay");
    assert_eq!(rx.try_iter().count(), 0);

    clock.advance(ms(5));
    let mut buf = vec![100];
    assert_eq!(rx.recv_many(&mut buf, 0), Ok(0));
    assert_eq!(rx.recv_many(&mut buf, 2), Ok(2));
    assert_eq!(buf, [100, 5, 6], "appended, earliest first, at most 2");
    assert_eq!(rx.recv_many(&mut buf, 10), Ok(3));
    assert_eq!(buf, [100, 5, 6, 7, 8, 9]);
    assert!(rx.is_empty());
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
}

/// JSR-166 TCK DelayQueueTest: testDrainToWithActivePut — draining while
/// another thread keeps offering loses and duplicates nothing; one producer's
/// equal deadlines leave in its send order (delayq crate docs, "Order").
#[test]
fn jsr_drain_while_a_producer_offers_loses_nothing() {
    let n = 2000 * scale() as u64;
    let (clock, tx, rx) = mock::<u64>();
    let at = clock.now();
    let producer = thread::spawn(move || {
        for i in 0..n {
            tx.send_at(i, at).unwrap(); // due at once
        }
    });
    let got = guarded(move || {
        let mut got = Vec::new();
        while (got.len() as u64) < n {
            let before = got.len();
            got.extend(rx.try_iter());
            if got.len() == before {
                // Nothing due now: wait for the next one (due at once when it arrives).
                got.push(rx.recv().expect("the producer is still sending"));
            }
        }
        (got, rx.recv())
    });
    producer.join().unwrap();
    assert_eq!(got.1, Err(RecvError), "the producer is gone and the queue drained");
    assert_eq!(got.0, (0..n).collect::<Vec<_>>());
}

/// JSR-166 TCK DelayQueueTest: testRemainingCapacity (for a bounded queue:
/// capacity − size), testOffer on a full bounded queue (refused, item handed
/// back).
#[test]
fn jsr_remaining_capacity_of_a_bounded_queue() {
    let (clock, tx, rx) = mock_bounded::<u32>(5);
    let remaining = |rx: &Receiver<u32>| rx.capacity().unwrap() - rx.len();
    for i in 0..5 {
        assert_eq!(remaining(&rx), 5 - i as usize);
        tx.try_send_at(i, clock.now() + ms(u64::from(i))).unwrap();
    }
    assert_eq!(remaining(&rx), 0);
    assert!(rx.is_full() && tx.is_full());
    assert_eq!(tx.try_send_at(5, clock.now()), Err(TrySendError::Full(5)));
    clock.advance(ms(4));
    for i in 0..5 {
        assert_eq!(rx.try_recv(), Ok(i));
        assert_eq!(remaining(&rx), i as usize + 1);
    }
    assert!(!tx.is_full());
}

/// JSR-166 TCK DelayQueueTest: testTakeFromEmptyBlocksInterruptibly,
/// testInterruptedTimedPoll, testBlockingTake (the interrupt at the end) —
/// a consumer blocked in take returns with an error when it is stopped.
/// delayq has no interrupt; its stop is `close` (then `take_pending` to drop
/// the items not due): "every blocked `recv()` returns `RecvError`" (README,
/// "Waiting on the queue and a shutdown signal"); `close` alone still lets
/// pending items out when due (`Receiver::close`), so it releases a blocked
/// take only once nothing is pending.
#[test]
fn jsr_close_releases_consumers_blocked_in_take_and_timed_poll() {
    // Nothing pending: close releases every kind of blocked receive at once.
    let (_clock, tx, rx) = mock::<u32>();
    let (r1, r2, r3) = (rx.clone(), rx.clone(), rx.clone());
    let take = thread::spawn(move || r1.recv());
    let timed = thread::spawn(move || r2.recv_timeout(HOUR));
    let many = thread::spawn(move || r3.recv_many(&mut Vec::new(), 4));
    still_blocked(&take, "take on an empty queue");
    rx.close();
    assert_eq!(join_within(take), Err(RecvError));
    assert_eq!(join_within(timed), Err(RecvTimeoutError::Disconnected));
    assert_eq!(join_within(many), Err(RecvError));
    assert!(tx.is_disconnected());
    assert_eq!(tx.send_at(1, Instant::now()), Err(SendError(1)), "a closed queue refuses sends");

    // An element pending, not due: close, then take_pending, releases the take.
    let (clock, tx, rx) = mock::<u32>();
    tx.send_after(7, HOUR).unwrap();
    let r = rx.clone();
    let take = thread::spawn(move || r.recv());
    rx.close();
    still_blocked(&take, "take with an element pending after close");
    let pending = rx.take_pending();
    assert_eq!(pending, [(clock.now() + HOUR, 7)]);
    assert_eq!(join_within(take), Err(RecvError));
    assert_eq!(rx.len(), 0);
}

/// JSR-166 TCK DelayQueueTest: testPutWithTake, testOffer, testAdd, and the
/// ordering checks of testPoll — many elements with random delays all come
/// out, each once, never before their delay, in nondecreasing deadline order
/// (equal deadlines in send order for one producer).
#[test]
fn jsr_offer_many_then_take_all_in_deadline_order() {
    let n = 5000 * scale();
    let (clock, tx, rx) = mock::<usize>();
    let t0 = clock.now();
    let mut rng = Rng::seed(5000);
    let mut deadline = Vec::with_capacity(n);
    let mut keys = Vec::with_capacity(n);
    for i in 0..n {
        let d = t0 + ms(rng.range(0..1000u64)); // 1 ms apart at most: many equal deadlines
        deadline.push(d);
        keys.push(tx.send_at(i, d).unwrap());
    }
    assert_eq!(rx.len(), n);
    let mut got: Vec<(Instant, Key, usize)> = Vec::with_capacity(n);
    for _ in 0..10 {
        clock.advance(ms(100));
        let now = clock.now();
        while let Ok(e) = rx.try_recv_entry() {
            assert!(e.deadline() <= now, "item {} came out early", e.get_ref());
            got.push((e.deadline(), e.key(), e.into_inner()));
        }
        let due = deadline.iter().filter(|&&d| d <= now).count();
        assert_eq!(got.len(), due, "every item due by {:?} came out", now - t0);
    }
    assert!(rx.is_empty());
    assert!(got.windows(2).all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)), "not in (deadline, key) order");
    let mut ids: Vec<usize> = got.iter().map(|g| g.2).collect();
    for g in &got {
        assert_eq!((g.0, g.1), (deadline[g.2], keys[g.2]), "item {} with another's deadline or key", g.2);
    }
    ids.sort_unstable();
    assert_eq!(ids, (0..n).collect::<Vec<_>>());
}

/// JSR-166 TCK DelayQueueTest: testClear — clearing the queue (delayq:
/// `take_pending`, which also hands the items back) leaves it empty, with
/// nothing to peek, and the queue goes on working.
#[test]
fn jsr_clear_empties_the_queue_and_it_still_works() {
    let (clock, tx, rx) = mock::<u32>();
    let t0 = clock.now();
    for i in 0..5 {
        tx.send_at(i, t0 + ms(10 - u64::from(i))).unwrap();
    }
    clock.advance(ms(7)); // 3 and 4 are due (in the consumers' ring), the rest not
    let cleared: Vec<u32> = rx.take_pending().into_iter().map(|(_, x)| x).collect();
    assert_eq!(cleared, [4, 3, 2, 1, 0]);
    assert!(rx.is_empty());
    assert_eq!(rx.peek_deadline(), None);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    clock.advance(ms(10));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "a cleared item came out");
    tx.send_at(9, clock.now() + ms(1)).unwrap();
    clock.advance(ms(1));
    assert_eq!(rx.try_recv(), Ok(9));
}

/// JSR-166 TCK DelayQueueTest: testPoll — "poll returns null only if no
/// element's delay has expired" — with more expired elements than delayq's
/// consumers' ring holds (1024 by default). `TryRecvError::Empty` is
/// documented as "No item is due now", and `try_iter` as "the items due now".
/// (Before `try_recv` caught up with the index, `try_iter` stopped at the
/// ring's worth — 1024 to 1536 of the 3000 — while the rest waited there.)
#[test]
fn jsr_poll_finds_every_expired_element_even_beyond_the_consumers_ring() {
    let (clock, tx, rx) = mock::<u32>();
    for i in 0..3000 {
        tx.send_after(i, ms(1)).unwrap();
    }
    clock.advance(ms(1));
    let polled: Vec<u32> = rx.try_iter().collect();
    assert_eq!(polled.len(), 3000, "poll returned nothing while {} expired items were queued", rx.len());
    assert_eq!(polled, (0..3000).collect::<Vec<_>>());
}

/// JSR-166 TCK DelayQueueTest: testPoll on a queue populated with already
/// expired elements (its `populatedQueue` helper), tokio-util's
/// single_immediate_delay, crossbeam-channel's linearizable (a `try_recv` right
/// after a `send` on the same thread finds the message): an item sent with a
/// deadline in the past is "due at once" (`Sender::send_at`) and counted by
/// `len` from the moment the send returns, so a `try_recv` after the send
/// must not report `Empty` ("No item is due now", `TryRecvError::Empty`).
/// (Before `try_recv` caught up with commands still upstream of the ring, the
/// first poll after such a send found nothing in 359 of 1000 tries on the
/// system clock and 26 to 222 of 1000 on a mock clock.)
#[test]
fn jsr_poll_right_after_offering_an_expired_element_finds_it() {
    // Mock clock: one past-deadline send, then one poll, many times.
    let (clock, tx, rx) = mock::<u32>();
    let mut empty = Vec::new();
    for i in 0..1000 {
        tx.send_at(i, clock.now() - ms(1)).unwrap();
        match rx.try_recv() {
            Ok(x) => assert_eq!(x, i),
            Err(e) => {
                empty.push((i, e, rx.len()));
                assert_eq!(guarded_recv(&rx), Some(i));
            }
        }
    }
    // System clock: populate with five expired elements, then drain by polls.
    let (tx, rx2) = delayq::unbounded::<u32>();
    let past = Instant::now().checked_sub(ms(1)).unwrap_or_else(Instant::now);
    for i in 0..5 {
        tx.send_at(i, past).unwrap();
    }
    let polled: Vec<u32> = rx2.try_iter().collect();
    assert_eq!(
        (empty.len(), polled),
        (0, vec![0, 1, 2, 3, 4]),
        "mock: polls that found nothing (item, error, len): {:?}",
        &empty[..empty.len().min(5)]
    );
}

// ---------------------------------------------------------------------------
// crossbeam-channel
// ---------------------------------------------------------------------------

/// crossbeam-channel `tests/array.rs`: len_empty_full — `len`, `is_empty`,
/// `is_full` and `capacity` of a bounded(2) channel through sends and receives,
/// seen from both handles.
#[test]
fn cb_len_empty_full_of_a_bounded_queue() {
    let (clock, tx, rx) = mock_bounded::<u32>(2);
    let state = |tx: &Sender<u32>, rx: &Receiver<u32>| {
        assert_eq!((tx.len(), tx.is_empty(), tx.is_full()), (rx.len(), rx.is_empty(), rx.is_full()));
        (rx.len(), rx.is_empty(), rx.is_full())
    };
    assert_eq!((tx.capacity(), rx.capacity()), (Some(2), Some(2)));
    assert_eq!(state(&tx, &rx), (0, true, false));
    tx.send_at(1, clock.now()).unwrap();
    assert_eq!(state(&tx, &rx), (1, false, false));
    tx.send_at(2, clock.now()).unwrap();
    assert_eq!(state(&tx, &rx), (2, false, true));
    clock.advance(Duration::ZERO);
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(state(&tx, &rx), (1, false, false));
    assert_eq!(rx.try_recv(), Ok(2));
    assert_eq!(state(&tx, &rx), (0, true, false));
}

/// crossbeam-channel `tests/list.rs` and `tests/array.rs`: try_recv — `Empty`
/// while a sender lives, `Disconnected` once every sender is gone and the
/// channel is drained. Adapted: delayq reports `Empty`, not `Disconnected`,
/// while undelivered items are pending ("receivers get every pending item when
/// due, then `RecvError`", crate docs, "Shutdown").
#[test]
fn cb_try_recv_empty_versus_disconnected() {
    let (clock, tx, rx) = mock::<u32>();
    let tx2 = tx.clone();
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    tx.send_after(1, ms(10)).unwrap();
    drop(tx);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "a sender clone is alive");
    drop(tx2);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "an item is pending, not due");
    clock.advance(ms(10));
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(rx.recv_timeout(HOUR), Err(RecvTimeoutError::Disconnected));
    assert_eq!(rx.recv(), Err(RecvError));
}

/// crossbeam-channel `tests/list.rs`: recv_timeout — a timed receive times out
/// on an empty channel, then gets an item sent by another thread, then reports
/// `Disconnected` when the sender goes. On the system clock (this is about
/// wake-ups), generous bounds, no sleep deciding the result.
#[test]
fn cb_recv_timeout_times_out_then_wakes_for_an_item_then_sees_disconnect() {
    let (tx, rx) = delayq::unbounded::<u32>();
    let (go, wait_go) = mpsc::channel::<()>();
    let producer = thread::spawn(move || {
        wait_go.recv().unwrap();
        tx.send_after(7, ms(5)).unwrap();
        wait_go.recv().unwrap();
        drop(tx);
    });
    let start = Instant::now();
    assert_eq!(rx.recv_timeout(ms(20)), Err(RecvTimeoutError::Timeout));
    assert!(start.elapsed() >= ms(20), "timed out after {:?}", start.elapsed());
    go.send(()).unwrap();
    assert_eq!(rx.recv_timeout(secs(10)), Ok(7));
    go.send(()).unwrap();
    let start = Instant::now();
    assert_eq!(rx.recv_timeout(secs(10)), Err(RecvTimeoutError::Disconnected));
    assert!(start.elapsed() < secs(5), "the disconnect took {:?}", start.elapsed());
    producer.join().unwrap();
}

/// crossbeam-channel `tests/list.rs`: recv_after_disconnect — items sent
/// before every sender went are still received, in order, then `RecvError`.
#[test]
fn cb_items_sent_before_the_senders_went_are_still_received() {
    let (clock, tx, rx) = mock::<u32>();
    let t0 = clock.now();
    for i in 1..=3 {
        tx.send_at(i, t0 + ms(u64::from(i))).unwrap();
    }
    drop(tx);
    clock.advance(ms(3));
    let rx2 = rx.clone();
    assert_eq!(
        guarded(move || (rx2.recv(), rx2.recv(), rx2.recv(), rx2.recv())),
        (Ok(1), Ok(2), Ok(3), Err(RecvError))
    );
    assert_eq!(rx.iter().next(), None);
}

/// crossbeam-channel `tests/list.rs` / `tests/array.rs`: disconnect_wakes_receiver
/// — receivers blocked in `recv`, `recv_timeout` and `recv_many` on an empty
/// channel return an error when the last sender goes, not when one clone goes.
#[test]
fn cb_blocked_receivers_see_the_last_sender_go() {
    let (_clock, tx, rx) = mock::<u32>();
    let tx2 = tx.clone();
    let (r1, r2, r3) = (rx.clone(), rx.clone(), rx.clone());
    let a = thread::spawn(move || r1.recv());
    let b = thread::spawn(move || r2.recv_timeout(HOUR));
    let c = thread::spawn(move || r3.recv_many(&mut Vec::new(), 8));
    drop(tx);
    still_blocked(&a, "recv after one of two senders went");
    drop(tx2);
    assert_eq!(join_within(a), Err(RecvError));
    assert_eq!(join_within(b), Err(RecvTimeoutError::Disconnected));
    assert_eq!(join_within(c), Err(RecvError));
}

/// crossbeam-channel `tests/list.rs`: send_after_disconnect (and
/// `tests/array.rs`: try_send, send_timeout after disconnect) — with every
/// receiver gone each send form fails with the item handed back, and the item
/// is not dropped by the queue.
#[test]
fn cb_every_send_form_hands_the_item_back_once_the_receivers_are_gone() {
    let ledger = Ledger::new(8);
    let item = |i| Tracked::new(i, &ledger);
    let (clock, tx, rx) = mock_bounded::<Tracked>(4);
    drop(rx);
    assert!(tx.is_disconnected());
    let now = clock.now();
    let back = [
        tx.send_at(item(0), now).map_err(|SendError(t)| t),
        tx.send_after(item(1), ms(1)).map_err(SendError::into_inner),
        tx.try_send_at(item(2), now).map_err(|e| match e {
            TrySendError::Disconnected(t) => t,
            TrySendError::Full(_) => panic!("Full from a disconnected queue"),
        }),
        tx.try_send_after(item(3), ms(1)).map_err(|e| {
            assert!(e.is_disconnected());
            e.into_inner()
        }),
        tx.send_at_timeout(item(4), now, HOUR).map_err(|e| match e {
            SendTimeoutError::Disconnected(t) => t,
            SendTimeoutError::Timeout(_) => panic!("Timeout from a disconnected queue"),
        }),
        tx.send_after_timeout(item(5), ms(1), HOUR).map_err(|e| {
            assert!(e.is_disconnected());
            e.into_inner()
        }),
        tx.send_at_deadline(item(6), now, now + HOUR).map_err(|e| {
            assert!(e.is_disconnected());
            e.into_inner()
        }),
    ];
    let ids: Vec<usize> = back.into_iter().map(|r| r.expect_err("a send succeeded").id).collect();
    assert_eq!(ids, [0, 1, 2, 3, 4, 5, 6]);
    // Dropped once, by us, after we got each back.
    assert_eq!(ledger.not_dropped(1), [7]);
    assert_eq!(tx.len(), 0);
}

/// crossbeam-channel `tests/array.rs`: disconnect_wakes_sender — senders
/// blocked on a full channel (`send_at`, and `send_at_timeout` with a long
/// timeout) fail with their item when the last receiver goes.
#[test]
fn cb_blocked_senders_see_the_last_receiver_go() {
    let (clock, tx, rx) = mock_bounded::<u32>(1);
    tx.send_after(0, HOUR).unwrap();
    let (t1, t2) = (tx.clone(), tx.clone());
    let now = clock.now();
    let a = thread::spawn(move || t1.send_at(1, now).map_err(SendError::into_inner));
    let b = thread::spawn(move || t2.send_at_timeout(2, now, HOUR));
    still_blocked(&a, "send on a full queue");
    let rx2 = rx.clone();
    drop(rx);
    still_blocked(&a, "send on a full queue with a receiver left");
    drop(rx2);
    assert_eq!(join_within(a), Err(1));
    assert_eq!(join_within(b), Err(SendTimeoutError::Disconnected(2)));
}

/// crossbeam-channel `tests/array.rs`: send_timeout — on a full channel a
/// timed send times out with its item (the length unchanged), and a timed
/// send gets through when a receive makes room before its timeout. Timeouts on
/// the queue's (mock) clock.
#[test]
fn cb_send_timeout_on_a_full_bounded_queue() {
    let (clock, tx, rx) = mock_bounded::<u32>(1);
    let t0 = clock.now();
    tx.send_at(1, t0 + secs(1)).unwrap();
    let (c, t) = (clock.clone(), tx.clone());
    let h = thread::spawn(move || {
        let start = c.now();
        (t.send_at_timeout(2, start, ms(100)), c.now() - start)
    });
    step_until_finished(&clock, ms(5), &h);
    let (got, waited) = h.join().unwrap();
    assert_eq!(got, Err(SendTimeoutError::Timeout(2)));
    assert!(waited >= ms(100), "timed out after {waited:?} of mock time");
    assert_eq!(tx.len(), 1);
    assert_eq!(tx.try_send_at(3, t0), Err(TrySendError::Full(3)));
    // send_deadline with a deadline already passed: an immediate timeout.
    assert_eq!(tx.send_at_deadline(5, t0, t0), Err(SendTimeoutError::Timeout(5)));

    // Room appears before the timeout: the send gets through.
    let t = tx.clone();
    let h = thread::spawn(move || t.send_at_timeout(4, t0, HOUR).is_ok());
    still_blocked(&h, "a timed send on a full queue");
    clock.set(t0 + secs(1));
    assert_eq!(rx.try_recv(), Ok(1));
    assert!(join_within(h));
    assert_eq!(guarded_recv(&rx), Some(4));
}

/// crossbeam-channel `tests/list.rs` / `tests/array.rs`: drops — whatever
/// mix of sends, receives and handle drops, every item's `Drop` runs exactly
/// once: items received are dropped by the receiver's owner, items left in the
/// channel by the channel when its last handle goes. Here items are left in
/// each place delayq has: not due (timer index), due and not received (the
/// consumers' ring), cancelled, rescheduled, and the last handle to go is a
/// sender or a receiver.
#[test]
fn cb_items_left_in_the_queue_are_dropped_exactly_once() {
    let mut rng = Rng::seed(0xd409);
    for rep in 0..20 {
        let (received, due, later, cancelled) =
            (rng.range(0..50usize), rng.range(0..50usize), rng.range(0..50usize), rng.range(0..10usize));
        let total = received + due + later + cancelled;
        let ledger = Ledger::new(total);
        let clock = MockClock::new();
        let b = Builder::new().clock(clock.clone());
        let b = if rep % 2 == 0 { b } else { b.capacity(total.max(1)) };
        let (tx, rx) = b.build::<Tracked>().unwrap();
        let t0 = clock.now();
        let mut id = 0..total;
        for _ in 0..received + due {
            tx.send_at(Tracked::new(id.next().unwrap(), &ledger), t0 + ms(1)).unwrap();
        }
        let mut keys = Vec::new();
        for _ in 0..later + cancelled {
            keys.push(tx.send_at(Tracked::new(id.next().unwrap(), &ledger), t0 + HOUR).unwrap());
        }
        for k in keys.iter().take(later).step_by(2) {
            assert!(tx.reschedule(*k, t0 + HOUR * 2));
        }
        for k in keys.iter().skip(later) {
            drop(tx.cancel(*k).expect("pending"));
        }
        clock.advance(ms(1));
        for _ in 0..received {
            drop(rx.try_recv().expect("due"));
        }
        assert_eq!(ledger.total(), received + cancelled, "rep {rep}: the queue dropped an item it holds");
        assert_eq!(rx.len(), due + later);
        let (tx2, rx2) = (tx.clone(), rx.clone());
        let handles: (Vec<Sender<Tracked>>, Vec<Receiver<Tracked>>) = (vec![tx, tx2], vec![rx, rx2]);
        guarded(move || {
            let (mut txs, mut rxs) = handles;
            // Drop the four handles in an order that depends on the rep.
            while !txs.is_empty() || !rxs.is_empty() {
                if ((rep + txs.len() + rxs.len()) % 3 == 0 && !txs.is_empty()) || rxs.is_empty() {
                    txs.pop();
                } else {
                    rxs.pop();
                }
            }
        });
        assert_eq!(ledger.not_dropped(1), Vec::<usize>::new(), "rep {rep}: items dropped other than once");
    }
}

/// crossbeam-channel `tests/array.rs`: a capacity-1 channel (its smallest
/// buffered one) — `try_send` reports `Full` with the item, every blocking send
/// waits for the previous item's receive, the length never exceeds 1, nothing
/// is lost or reordered in a ping-pong between two threads.
#[test]
fn cb_capacity_one_ping_pong() {
    let (tx, rx) = delayq::bounded::<u32>(1);
    tx.try_send_after(0, Duration::ZERO).unwrap();
    assert_eq!(tx.try_send_after(1, Duration::ZERO), Err(TrySendError::Full(1)));
    assert_eq!(rx.recv_timeout(secs(10)), Ok(0));
    let n = 500 * scale() as u32;
    let producer = thread::spawn(move || {
        for i in 0..n {
            tx.send_after(i, Duration::ZERO).unwrap();
            assert!(tx.len() <= 1, "len {} above the capacity", tx.len());
        }
    });
    let mut got = Vec::new();
    while let Ok(x) = rx.recv_timeout(secs(10)) {
        assert!(rx.len() <= 1);
        got.push(x);
    }
    producer.join().unwrap();
    assert_eq!(got, (0..n).collect::<Vec<_>>());
}

/// crossbeam-channel `tests/zero.rs` (capacity zero). delayq refuses a zero
/// capacity by design ("If `capacity` is 0" under `bounded`'s `# Panics`;
/// `BuildError::ZeroCapacity`): the test checks the refusal is clear.
#[test]
fn cb_zero_capacity_is_refused_with_a_clear_error() {
    let panic = std::panic::catch_unwind(|| delayq::bounded::<u8>(0)).expect_err("bounded(0) built a queue");
    let msg = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(msg.contains("capacity must be at least 1"), "unclear panic: {msg:?}");
    let err = Builder::new().capacity(0).build::<u8>().expect_err("capacity(0) built a queue");
    assert!(matches!(err, BuildError::ZeroCapacity));
    assert_eq!(err.to_string(), "a delay queue needs a capacity of at least 1");
}

/// crossbeam-channel `tests/mpmc.rs` / `tests/list.rs`: mpmc and stress_oneshot
/// — several senders and receivers on a bounded channel, every value received
/// exactly once. Here on the system clock (blocking sends and wake-ups), with
/// small random delays, and each item never received before its deadline.
#[test]
fn cb_many_senders_and_receivers_exact_accounting() {
    const SENDERS: usize = 4;
    const RECEIVERS: usize = 4;
    let per = 1000 * scale();
    let (tx, rx) = delayq::bounded::<usize>(64);
    let seen: Arc<Vec<AtomicUsize>> = Arc::new((0..SENDERS * per).map(|_| AtomicUsize::new(0)).collect());
    let early = Arc::new(AtomicUsize::new(0));
    let receivers: Vec<_> = (0..RECEIVERS)
        .map(|_| {
            let (rx, seen, early) = (rx.clone(), seen.clone(), early.clone());
            thread::spawn(move || {
                let mut n = 0;
                while let Ok(e) = rx.recv_entry() {
                    if Instant::now() < e.deadline() {
                        early.fetch_add(1, Ordering::SeqCst);
                    }
                    seen[e.into_inner()].fetch_add(1, Ordering::SeqCst);
                    n += 1;
                }
                n
            })
        })
        .collect();
    drop(rx);
    let senders: Vec<_> = (0..SENDERS)
        .map(|s| {
            let tx = tx.clone();
            thread::spawn(move || {
                let mut rng = Rng::seed(s as u64);
                for i in 0..per {
                    tx.send_after(s * per + i, us(rng.range(0..2000u64))).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let finished = guarded(move || {
        for s in senders {
            s.join().unwrap();
        }
        receivers.into_iter().map(|r| r.join().unwrap()).sum::<usize>()
    });
    assert_eq!(finished, SENDERS * per);
    let wrong: Vec<usize> = (0..SENDERS * per).filter(|&i| seen[i].load(Ordering::SeqCst) != 1).collect();
    assert!(
        wrong.is_empty(),
        "{} values not received exactly once, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    assert_eq!(early.load(Ordering::SeqCst), 0, "items received before their deadline");
}

/// crossbeam-channel `tests/mpmc.rs` (several receivers blocked at once) on a
/// mock clock — receivers blocked while the clock steps each get only due
/// items, every item exactly once, and all are released when the senders go.
#[test]
fn cb_many_receivers_on_a_stepping_mock_clock_exact_accounting() {
    const RECEIVERS: usize = 4;
    let n = 2000 * scale();
    let (clock, tx, rx) = mock::<usize>();
    let t0 = clock.now();
    let mut rng = Rng::seed(77);
    for i in 0..n {
        tx.send_at(i, t0 + ms(rng.range(1..=100u64))).unwrap();
    }
    let early = Arc::new(AtomicUsize::new(0));
    let receivers: Vec<_> = (0..RECEIVERS)
        .map(|_| {
            let (rx, clock, early) = (rx.clone(), clock.clone(), early.clone());
            thread::spawn(move || {
                let mut got = Vec::new();
                while let Ok(e) = rx.recv_entry() {
                    if e.deadline() > clock.now() {
                        early.fetch_add(1, Ordering::SeqCst);
                    }
                    got.push(e.into_inner());
                }
                got
            })
        })
        .collect();
    for _ in 0..100 {
        clock.advance(ms(1));
    }
    drop(tx);
    let mut all: Vec<usize> =
        guarded(move || receivers.into_iter().flat_map(|r| r.join().unwrap()).collect());
    assert_eq!(early.load(Ordering::SeqCst), 0, "items received before their deadline");
    all.sort_unstable();
    assert_eq!(all, (0..n).collect::<Vec<_>>());
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
}

/// crossbeam-channel `tests/array.rs`: stress_timeout_two_threads — a sender
/// that retries a timed send on a small bounded channel and a receiver that
/// retries a timed receive lose nothing and reorder nothing (one producer,
/// items due at once: its send order). System clock: this is about timed
/// waits and their wake-ups; the 30 s bound is never approached when it passes.
#[test]
fn cb_stress_timeouts_two_threads() {
    let n = 1000 * scale() as u32;
    let (tx, rx) = delayq::bounded::<u32>(2);
    let producer = thread::spawn(move || {
        for i in 0..n {
            loop {
                match tx.send_after_timeout(i, Duration::ZERO, us(300)) {
                    Ok(_) => break,
                    Err(SendTimeoutError::Timeout(back)) => assert_eq!(back, i),
                    Err(SendTimeoutError::Disconnected(_)) => panic!("disconnected while the receiver lives"),
                }
            }
        }
    });
    let start = Instant::now();
    let mut got = Vec::new();
    loop {
        match rx.recv_timeout(us(300)) {
            Ok(x) => got.push(x),
            Err(RecvTimeoutError::Timeout) => {
                assert!(start.elapsed() < secs(30), "stuck after {} items", got.len())
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    producer.join().unwrap();
    assert_eq!(got, (0..n).collect::<Vec<_>>());
}

/// crossbeam-channel `tests/mpmc.rs` (several producers) with JSR-166 TCK
/// DelayQueueTest's ordering checks — items with one deadline from several
/// producers, all sent before the step that makes them due, leave in key
/// order ("equal deadlines in key order (keys are numbered by the send)",
/// crate docs, "Order").
#[test]
fn cb_equal_deadlines_from_several_producers_leave_in_key_order() {
    let (clock, tx, rx) = mock::<usize>();
    let at = clock.now() + ms(1);
    let producers: Vec<_> = (0..4)
        .map(|p| {
            let tx = tx.clone();
            thread::spawn(move || {
                (0..500).map(|i| tx.send_at(p * 1000 + i, at).unwrap()).collect::<Vec<Key>>()
            })
        })
        .collect();
    let mut sent: Vec<Key> = producers.into_iter().flat_map(|p| p.join().unwrap()).collect();
    clock.advance(ms(1));
    drop(tx);
    let got: Vec<Key> = guarded(move || {
        let mut got = Vec::new();
        while let Ok(e) = rx.recv_entry() {
            got.push(e.key());
        }
        got
    });
    sent.sort_unstable();
    assert_eq!(got, sent);
}

/// crossbeam-channel `tests/iter.rs`: iter, try_iter, into_iter — the
/// blocking iterator ends when the channel is disconnected and drained,
/// `try_iter` yields what is available now and stops.
#[test]
fn cb_iterators_yield_due_items_and_end_on_disconnect() {
    let (clock, tx, rx) = mock::<u32>();
    let t0 = clock.now();
    for i in [3, 1, 2, 4] {
        tx.send_at(i, t0 + ms(u64::from(i))).unwrap();
    }
    clock.advance(ms(2));
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), [1, 2]);
    assert_eq!(rx.try_iter().next(), None);
    let r = rx.clone();
    let iter = thread::spawn(move || r.iter().collect::<Vec<_>>());
    clock.advance(ms(1));
    clock.advance(ms(1));
    drop(tx);
    assert_eq!(join_within(iter), [3, 4]);
    assert_eq!(rx.into_iter().next(), None);
}

// ---------------------------------------------------------------------------
// tokio-util `DelayQueue`
// ---------------------------------------------------------------------------

/// tokio-util `tests/time_delay_queue.rs`: remove_entry — an item inserted
/// then removed by its key comes back, the queue's length drops, and it never
/// expires.
#[test]
fn tokio_insert_then_remove_by_key_returns_the_item() {
    let (clock, tx, rx) = mock::<&str>();
    let key = tx.send_after("foo", ms(10)).unwrap();
    let other = tx.send_after("bar", ms(10)).unwrap();
    assert_eq!(rx.len(), 2);
    assert_eq!(tx.cancel(key), Some("foo"));
    assert_eq!(rx.len(), 1);
    clock.advance(ms(10));
    assert_eq!(rx.try_recv_entry().map(|e| e.key()), Ok(other));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "the removed item expired anyway");
    assert!(rx.is_empty());
}

/// tokio-util `tests/time_delay_queue.rs`: remove_after_compact,
/// remove_after_compact_poll, and `remove` of a key that is no longer in the
/// queue (tokio panics on an invalid key; delayq documents `None` / `false`
/// for "cancelled or taken before ... if `key` belongs to another queue",
/// `Sender::cancel`, `Sender::reschedule`): a removed, an expired-and-taken
/// or a foreign key names nothing, and never another item.
#[test]
fn tokio_remove_of_an_unknown_removed_or_delivered_key_names_nothing() {
    let (clock, tx, rx) = mock::<u32>();
    let keys: Vec<Key> = (0..100).map(|i| tx.send_after(i, ms(1 + u64::from(i % 10))).unwrap()).collect();
    for (i, k) in keys.iter().enumerate().filter(|(i, _)| i % 2 == 1) {
        assert_eq!(tx.cancel(*k), Some(i as u32));
    }
    for k in keys.iter().skip(1).step_by(2) {
        assert_eq!(tx.cancel(*k), None, "a second remove");
        assert!(!tx.reschedule(*k, clock.now()), "reschedule of a removed key");
    }
    clock.advance(ms(10));
    let mut got: Vec<u32> = rx.try_iter().collect();
    got.sort_unstable();
    assert_eq!(got, (0..100).step_by(2).collect::<Vec<_>>());
    for k in keys.iter().step_by(2) {
        assert_eq!(tx.cancel(*k), None, "remove of a delivered key");
        assert!(!tx.reschedule(*k, clock.now() + HOUR), "reschedule of a delivered key");
    }
    // A key of another queue with the same sequence number as a pending key
    // of this one (both queues number their sends alike).
    let (_clock2, tx2, _rx2) = mock::<u32>();
    for i in 0..100 {
        tx2.send_after(i, HOUR).unwrap();
    }
    let foreign = tx2.send_after(7, HOUR).unwrap();
    let mine = tx.send_after(8, HOUR).unwrap();
    assert_eq!(tx.cancel(foreign), None, "a foreign key named an item of this queue");
    assert!(!tx.reschedule(foreign, clock.now()));
    assert_eq!(tx2.cancel(mine), None);
    assert_eq!((tx.cancel(mine), tx2.cancel(foreign)), (Some(8), Some(7)));
}

/// tokio-util `tests/time_delay_queue.rs`: remove_expired_item — tokio's
/// `remove` hands back an item that expired but was not polled. delayq: the
/// same while the item waits in the timer index ("also once its deadline has
/// passed", `Sender::cancel`); once a clock step moved it to the consumers'
/// ring it counts as delivered ("`None` once it was handed to the consumers'
/// ring as due", `Sender::cancel`; `MockClock::advance` returns after that
/// move). Both cases, the first made deterministic by a full ring.
#[test]
fn tokio_remove_of_an_expired_item_not_yet_received() {
    // Handed to the consumers' ring by the step: delivered, not removable.
    let (clock, tx, rx) = mock::<&str>();
    let key = tx.send_after("foo", ms(10)).unwrap();
    clock.advance(ms(10));
    assert_eq!(tx.cancel(key), None);
    assert_eq!(rx.try_recv(), Ok("foo"));

    // Still in the index because the ring is full of earlier items: removable.
    let fillers = 2048;
    let (clock, tx, rx) = mock::<u32>();
    let t0 = clock.now();
    for i in 0..fillers {
        tx.send_at(i, t0 + ms(1)).unwrap();
    }
    let key = tx.send_at(u32::MAX, t0 + ms(2)).unwrap();
    clock.advance(ms(2));
    assert_eq!(tx.cancel(key), Some(u32::MAX), "an expired item still in the index");
    assert_eq!(rx.len(), fillers as usize);
    drop(tx);
    let got = guarded(move || rx.iter().collect::<Vec<_>>());
    assert_eq!(got, (0..fillers).collect::<Vec<_>>());
}

/// tokio-util `tests/time_delay_queue.rs`: reset_inserted_expired,
/// repeatedly_reset_entry_inserted_as_expired — an item that expired while
/// nobody took it can be reset to a later deadline, repeatedly, and then
/// expires only at the last one. (Kept in the index by a full consumers' ring,
/// as above, so the reset is not racing the move to the ring.)
#[test]
fn tokio_reset_an_expired_item_repeatedly() {
    let fillers = 2048;
    let (clock, tx, rx) = mock::<u32>();
    let t0 = clock.now();
    for i in 0..fillers {
        tx.send_at(i, t0).unwrap();
    }
    let key = tx.send_at(u32::MAX, t0).unwrap(); // inserted already expired
    clock.advance(Duration::ZERO);
    for later in [secs(30), secs(10), secs(50), secs(20)] {
        assert!(tx.reschedule(key, t0 + later), "reset to +{later:?}");
    }
    let rx2 = rx.clone();
    let got = guarded(move || (0..fillers).map(|_| rx2.recv().unwrap()).collect::<Vec<_>>());
    assert_eq!(got, (0..fillers).collect::<Vec<_>>());
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "the reset item came out before its new deadline");
    assert_eq!(rx.peek_deadline(), Some(t0 + secs(20)));
    clock.advance(secs(20) - ns(1));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    clock.advance(ns(1));
    assert_eq!(rx.try_recv(), Ok(u32::MAX));
    assert!(!tx.reschedule(key, t0 + HOUR), "reset after it was taken");
}

/// tokio-util `tests/time_delay_queue.rs`: reset_inserted_expired without a
/// full ring — the reset races the move of the already-due item to the
/// consumers' ring; whichever side wins, the item comes out exactly once, and
/// a successful reset is honoured (`Sender::reschedule`: `true` if pending,
/// `false` if "handed to the consumers' ring as due").
#[test]
fn tokio_reset_racing_the_expiry_of_an_item_inserted_expired() {
    for _ in 0..50 {
        let (clock, tx, rx) = mock::<u8>();
        let t0 = clock.now();
        let key = tx.send_at(1, t0).unwrap();
        let moved = tx.reschedule(key, t0 + secs(5));
        clock.advance(Duration::ZERO);
        if moved {
            assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "a reset item came out at its old deadline");
            clock.advance(secs(5));
        }
        assert_eq!(rx.try_recv(), Ok(1), "reset answered {moved}");
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        assert!(rx.is_empty());
    }
}

/// tokio-util `tests/time_delay_queue.rs`: reset_entry, reset_much_later,
/// reset_twice, multi_reset, reset_first_expiring_item_to_expire_later,
/// reset_earlier_after_slot_starts, reset_later_after_slot_starts — resets to
/// earlier and later deadlines, repeatedly and after time has started to
/// pass, decide the expiry (the last one counts) and the order.
#[test]
fn tokio_reset_to_earlier_and_later_deadlines() {
    // reset_earlier_after_slot_starts / reset_later_after_slot_starts.
    let (clock, tx, rx) = mock::<&str>();
    let t0 = clock.now();
    let a = tx.send_at("a", t0 + ms(100)).unwrap();
    let b = tx.send_at("b", t0 + ms(100)).unwrap();
    clock.advance(ms(50));
    assert!(tx.reschedule(a, t0 + ms(80)));
    assert!(tx.reschedule(b, t0 + ms(200)));
    clock.advance(ms(29));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    clock.advance(ms(1));
    assert_eq!(rx.try_recv(), Ok("a"));
    clock.advance(ms(119)); // t0 + 199 ms: past b's first deadline
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "b came out at its old deadline");
    clock.advance(ms(1));
    assert_eq!(rx.try_recv(), Ok("b"));

    // reset_twice / multi_reset: the last reset counts; the length stays 1.
    let t1 = clock.now();
    let c = tx.send_at("c", t1 + ms(100)).unwrap();
    for (to, len) in [(ms(50), 1), (ms(300), 1), (ms(10), 1), (ms(200), 1)] {
        assert!(tx.reschedule(c, t1 + to));
        assert_eq!(rx.len(), len);
    }
    assert!(tx.reschedule_after(c, ms(150)));
    for _ in 0..149 {
        clock.advance(ms(1));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "c early at {:?}", clock.now() - t1);
    }
    clock.advance(ms(1));
    assert_eq!(rx.try_recv(), Ok("c"));

    // reset_first_expiring_item_to_expire_later, reset_much_later.
    let t2 = clock.now();
    let d = tx.send_at("d", t2 + ms(100)).unwrap();
    tx.send_at("e", t2 + ms(200)).unwrap();
    assert!(tx.reschedule(d, t2 + ms(300)));
    assert_eq!(rx.peek_deadline(), Some(t2 + ms(200)));
    clock.advance(ms(200));
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["e"]);
    assert!(tx.reschedule(d, t2 + YEAR * 3));
    clock.advance(YEAR * 3 - ms(200) - ns(1));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    clock.advance(ns(1));
    assert_eq!(rx.try_recv(), Ok("d"));

    // A reset away and back keeps the item's rank among equal deadlines
    // ("The key stays valid, and so does its rank among equal deadlines",
    // `Sender::reschedule`).
    let t3 = clock.now() + ms(10);
    let keys: Vec<Key> = ["g", "h", "i"].into_iter().map(|x| tx.send_at(x, t3).unwrap()).collect();
    assert!(tx.reschedule(keys[0], t3 + ms(1)));
    assert!(tx.reschedule(keys[0], t3));
    clock.advance(ms(10));
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["g", "h", "i"]);

    // reset_entry: the key stays valid after a reset, for a removal.
    let f = tx.send_after("f", ms(10)).unwrap();
    assert!(tx.reschedule_after(f, ms(20)));
    assert_eq!(tx.cancel(f), Some("f"));
    clock.advance(ms(20));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert!(rx.is_empty());
}

/// tokio-util `tests/time_delay_queue.rs`: reset of an item that already
/// expired and was handed out (`expire_first_key_when_reset_to_expire_earlier`
/// and the `remove`/`reset` of a polled key). delayq: `false`, "handed to the
/// consumers' ring as due (delivered, or about to be)" (`Sender::reschedule`),
/// and the item still comes out, once.
#[test]
fn tokio_reset_of_an_item_already_handed_out() {
    let (clock, tx, rx) = mock::<&str>();
    let key = tx.send_after("x", ms(10)).unwrap();
    clock.advance(ms(10));
    assert!(!tx.reschedule(key, clock.now() + HOUR));
    assert!(!tx.reschedule_after(key, ms(1)));
    assert_eq!(rx.try_recv(), Ok("x"));
    assert!(!tx.reschedule(key, clock.now()));
    assert!(rx.is_empty());
}

/// tokio-util `tests/time_delay_queue.rs`: multi_immediate_delays,
/// insert_after_ready_poll, and many entries sharing one expiration — many
/// items with the SAME deadline are all delivered, once each, in send order for
/// one producer (crate docs, "Order"), also more than the consumers' ring holds.
#[test]
fn tokio_many_items_with_the_same_deadline_are_all_delivered() {
    let n = 5000 * scale() as u32;
    let (clock, tx, rx) = mock::<u32>();
    let at = clock.now() + ms(5);
    tx.send_at(u32::MAX, at - ns(1)).unwrap();
    for i in 0..n {
        tx.send_at(i, at).unwrap();
    }
    tx.send_at(u32::MAX - 1, at + ns(1)).unwrap();
    clock.advance(ms(5));
    assert_eq!(rx.try_recv(), Ok(u32::MAX));
    // More due items were made due after the first poll (insert_after_ready_poll).
    for i in 0..3 {
        tx.send_at(n + i, at).unwrap();
    }
    let rx2 = rx.clone();
    let got = guarded(move || (0..n + 3).map(|_| rx2.recv().unwrap()).collect::<Vec<_>>());
    assert_eq!(got, (0..n + 3).collect::<Vec<_>>());
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "an item one nanosecond later came out");
    clock.advance(ns(1));
    assert_eq!(rx.try_recv(), Ok(u32::MAX - 1));
    assert!(rx.is_empty());
}

/// tokio-util `tests/time_delay_queue.rs`: insert_in_past_fires_immediately,
/// single_immediate_delay — an item whose deadline is already past is
/// delivered at once, with no clock step (mock) or wait (system clock).
#[test]
fn tokio_insert_in_the_past_fires_immediately() {
    let (clock, tx, rx) = mock::<&str>();
    let t0 = clock.now();
    clock.advance(secs(1));
    let key = tx.send_at("past", t0).unwrap();
    let e = guarded(move || rx.recv_entry().map(|e| (e.key(), e.deadline(), e.into_inner())));
    assert_eq!(e, Ok((key, t0, "past")));

    let (tx, rx) = delayq::unbounded::<&str>();
    let start = Instant::now();
    tx.send_at("past", start.checked_sub(secs(1)).unwrap_or(start)).unwrap();
    tx.send_after("now", Duration::ZERO).unwrap();
    assert_eq!(rx.recv_timeout(secs(10)), Ok("past"));
    assert_eq!(rx.recv_timeout(secs(10)), Ok("now"));
    assert!(start.elapsed() < secs(5), "took {:?}", start.elapsed());
}

/// tokio-util `tests/time_delay_queue.rs`: item_expiry_greater_than_wheel,
/// multi_delay_at_start, remove_at_timer_wheel_threshold — deadlines on
/// every level of a timing wheel (delayq's: 1024 ns granules, 64 slots a
/// level, 9 levels) and just either side of each level's span come out exactly
/// at their deadline, in order; items removed near a level threshold come
/// back. tokio panics past its wheel's ~2 years; delayq holds any deadline
/// below its horizon (~484 years, crate docs "Horizon").
#[test]
fn tokio_deadlines_on_every_wheel_level_expire_exactly_on_time() {
    let (clock, tx, rx) = mock::<u64>();
    let t0 = clock.now();
    let mut delays: Vec<u64> = vec![1, 999, 1_000_000, 17_000_000_000];
    for level in 0..10u32 {
        let span = 1u64 << (10 + 6 * level).min(63);
        delays.extend([span - 1, span, span + 1]);
    }
    delays.extend([100 * YEAR.as_nanos() as u64, 480 * YEAR.as_nanos() as u64]);
    delays.sort_unstable();
    delays.dedup();
    // Send in a scrambled order; remember keys for the removals.
    let mut send_order = delays.clone();
    Rng::seed(64).shuffle(&mut send_order);
    let mut keys = std::collections::HashMap::new();
    for &d in &send_order {
        keys.insert(d, tx.send_at(d, t0 + ns(d)).unwrap());
    }
    // remove_at_timer_wheel_threshold: remove two items when the clock is
    // 1 ns short of them, on a level threshold.
    let removed = [1u64 << 22, (1u64 << 40) + 1];
    let mut now = 0u64;
    for &d in &delays {
        if removed.contains(&d) {
            // The clock stands 1 ns before it (the previous deadline).
            assert_eq!(tx.cancel(keys[&d]), Some(d), "remove of the item at {d} ns");
            continue;
        }
        clock.advance(ns(d - 1 - now));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "the item at {d} ns came out 1 ns early");
        clock.advance(ns(1));
        now = d;
        assert_eq!(rx.try_recv_entry().map(|e| (e.deadline(), e.into_inner())), Ok((t0 + ns(d), d)));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    }
    assert!(rx.is_empty());
}

/// tokio-util `tests/time_delay_queue.rs` (deadlines beyond the wheel) and
/// crossbeam-channel's `Duration::MAX` timeouts — very far deadlines
/// (`Duration::MAX`, the farthest `Instant`, +600 years) never panic and are
/// held, never delivered early: "A deadline at or beyond that horizon
/// (`send_after(Duration::MAX)`, `Instant` + 600 years) is *never* due" (README,
/// "Horizon"); they stay cancellable, reschedulable and counted by `len`, and
/// `peek_deadline` reports the horizon. Timeouts too large for `Instant` wait
/// for ever (`recv_timeout`, `send_at_timeout`).
#[test]
fn tokio_very_far_deadlines_are_held_not_delivered_and_never_panic() {
    let (clock, tx, rx) = mock_bounded::<&str>(16);
    let t0 = clock.now();
    let k_max = tx.send_after("duration max", Duration::MAX).unwrap();
    let k_far = tx.send_at("farthest instant", farthest_instant(t0)).unwrap();
    let k_600 = tx.send_at("+600 y", t0 + YEAR * 600).unwrap();
    let k_try = tx.try_send_after("try max", Duration::MAX).unwrap();
    let k_timed = tx.send_after_timeout("timed max", Duration::MAX, Duration::MAX).unwrap();
    tx.send_at_timeout("near", t0 + secs(1), Duration::MAX).unwrap();
    assert_eq!(rx.len(), 6);
    let peek = rx.peek_deadline().expect("items pending");
    assert_eq!(peek, t0 + secs(1));

    // A receive with a `Duration::MAX` timeout waits (in mock time) for the near item.
    let r = rx.clone();
    let h = thread::spawn(move || r.recv_timeout(Duration::MAX));
    still_blocked(&h, "recv_timeout(Duration::MAX) with nothing due");
    clock.advance(secs(1));
    assert_eq!(join_within(h), Ok("near"));

    for step in [YEAR * 100, YEAR * 300, YEAR * 1000, Duration::MAX] {
        clock.advance(step);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "a far item came out after a {step:?} step");
    }
    assert_eq!(rx.len(), 5);
    let horizon = rx.peek_deadline().expect("far items pending");
    assert!(horizon > t0 + YEAR * 480, "peek reports {:?} after t0", horizon - t0);
    assert!(tx.reschedule_after(k_try, Duration::MAX), "a far item reschedules to Duration::MAX");
    assert!(tx.reschedule(k_timed, clock.now()), "a far item reschedules to now");
    clock.advance(Duration::ZERO);
    assert_eq!(rx.try_recv(), Ok("timed max"));
    let mut cancelled: Vec<&str> =
        [k_max, k_far, k_600].iter().map(|k| tx.cancel(*k).expect("pending")).collect();
    cancelled.sort_unstable();
    assert_eq!(cancelled, ["+600 y", "duration max", "farthest instant"]);
    assert_eq!(rx.take_pending().into_iter().map(|(_, x)| x).collect::<Vec<_>>(), ["try max"]);
    assert!(rx.is_empty());
}

/// tokio-util `tests/time_delay_queue.rs`: delay_queue_poll_expired_when_empty,
/// and reuse after draining (insert after the queue emptied) — a queue drained
/// by receives, by removals, or by `take_pending`, then reused, behaves like a
/// new one: deadlines relative to the new time, earliest first.
#[test]
fn tokio_a_drained_queue_is_reused() {
    let (clock, tx, rx) = mock::<u32>();
    for round in 0..3u32 {
        let t = clock.now();
        let keys: Vec<Key> = (0..5)
            .map(|i| tx.send_at(round * 10 + i, t + ms(u64::from(5 - i))))
            .map(Result::unwrap)
            .collect();
        match round {
            0 => {
                clock.advance(ms(5));
                assert_eq!(rx.try_iter().collect::<Vec<_>>(), [4, 3, 2, 1, 0]);
            }
            1 => {
                for (i, k) in keys.iter().enumerate() {
                    assert_eq!(tx.cancel(*k), Some(10 + i as u32));
                }
            }
            _ => assert_eq!(rx.take_pending().len(), 5),
        }
        assert!(rx.is_empty(), "round {round}");
        assert_eq!(rx.peek_deadline(), None);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        clock.advance(ms(10));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "round {round}: a drained item came back");
    }
    let t = clock.now();
    tx.send_at(100, t + ms(2)).unwrap();
    tx.send_at(101, t + ms(1)).unwrap();
    clock.advance(ms(2));
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), [101, 100]);
}

/// tokio-util `tests/time_delay_queue.rs`: insert_before_first_after_poll,
/// expires_before_last_insert — an item inserted after time has passed, with
/// a deadline before the current head's, comes out first.
#[test]
fn tokio_insert_before_the_head_after_time_passed() {
    let (clock, tx, rx) = mock::<&str>();
    let t0 = clock.now();
    tx.send_at("a", t0 + ms(100)).unwrap();
    tx.send_at("b", t0 + ms(600)).unwrap();
    clock.advance(ms(100));
    assert_eq!(rx.try_recv(), Ok("a"));
    clock.advance(ms(200)); // t0 + 300
    tx.send_after("c", ms(100)).unwrap(); // t0 + 400, before b
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(400)));
    clock.advance(ms(99));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    clock.advance(ms(1));
    assert_eq!(rx.try_recv(), Ok("c"));
    clock.advance(ms(199));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    clock.advance(ms(1));
    assert_eq!(rx.try_recv(), Ok("b"));
}

/// tokio-util `tests/time_delay_queue.rs`: insert_before_first_after_poll,
/// expires_before_last_insert — after the queue has looked at its head, an
/// item inserted later with an earlier deadline, before the head falls due,
/// must still come out first: "On a `MockClock` everything sent before a
/// clock step is in the index before the step takes effect" and due items
/// leave "in nondecreasing deadline order" (README, "Order"). (When items
/// were staged ahead of their deadline, a step could make both due before
/// the round that recalled the later one, and "later" came out first in most
/// repetitions; nothing is moved before its deadline now.)
#[test]
fn tokio_insert_before_a_staged_head_comes_out_first() {
    for rep in 0..20 {
        let clock = MockClock::new();
        let (tx, rx) = Builder::new().clock(clock.clone()).build::<&str>().unwrap();
        let t0 = clock.now();
        tx.send_at("later", t0 + ms(9)).unwrap();
        clock.advance(ms(1)); // a round has looked at "later"
        tx.send_at("earlier", t0 + ms(8)).unwrap(); // not due: arrives 7 ms ahead
        assert_eq!(rx.peek_deadline(), Some(t0 + ms(8)));
        clock.set(t0 + ms(9));
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["earlier", "later"], "rep {rep}");
    }
}

/// The same as [`tokio_insert_before_a_staged_head_comes_out_first`] on the
/// system clock, when the proxy threads get little CPU
/// (`Builder::proxy_nice(19)`, four spinning threads on this 2-core machine):
/// the earlier item, sent 10 ms before its deadline, must still come out
/// first. (With staging, before the enqueue role recalled the later staged
/// entries at the insert, it came out after the later one, 15 ms late, in 4
/// to 9 rounds of 10.) Only rounds where the send returned well before the
/// earlier deadline count.
#[cfg(target_os = "linux")]
#[test]
fn tokio_insert_before_a_staged_head_with_a_busy_machine() {
    use std::sync::atomic::AtomicBool;
    let mut inverted = Vec::new();
    for round in 0..10 {
        let (tx, rx) = Builder::new().proxy_nice(19).build::<&str>().unwrap();
        let t0 = Instant::now();
        tx.send_at("later", t0 + ms(30)).unwrap();
        thread::sleep(ms(5));
        let stop = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..4)
            .map(|_| {
                let stop = stop.clone();
                thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        tx.send_at("earlier", t0 + ms(15)).unwrap();
        let sent = t0.elapsed();
        let first = rx.recv_timeout(secs(5));
        let second = rx.recv_timeout(secs(5));
        stop.store(true, Ordering::Relaxed);
        for s in spinners {
            s.join().unwrap();
        }
        assert_eq!(rx.len(), 0);
        if sent < ms(12) && first == Ok("later") {
            inverted.push((round, sent, second));
        }
    }
    assert!(inverted.is_empty(), "rounds where \"later\" came out first: {inverted:?}");
}

/// tokio-util `tests/time_delay_queue.rs`: multi_reset, remove_entry,
/// insert_before_first_after_poll, multi_delay_at_start, all at once — a
/// seeded random sequence of inserts, removes, resets (of live, removed and
/// delivered keys) and clock steps of every scale (1 ns to hours), checked
/// after every step against a plain model (a sorted map): exactly the items
/// due come out, in (deadline, key) order, and `cancel`, `reschedule`, `len`
/// and `peek_deadline` answer as the model does. Both timer index backends.
#[test]
fn tokio_random_inserts_removes_resets_and_steps_against_a_model() {
    for index in ["wheel", "heap"] {
        for seed in 0..4 * scale() as u64 {
            model_run(index, seed, 1500);
        }
    }
}

fn model_run(index: &str, seed: u64, ops: usize) {
    let clock = MockClock::new();
    let (tx, rx) = Builder::new().clock(clock.clone()).timer_index(index).build::<u64>().unwrap();
    let mut rng = Rng::seed(seed);
    // (deadline, key) -> item; key -> deadline for the live items; keys gone.
    let mut model: BTreeMap<(Instant, Key), u64> = BTreeMap::new();
    let mut live: HashMap<Key, Instant> = HashMap::new();
    let mut gone: Vec<Key> = Vec::new();
    let mut next = 0u64;
    // A strictly future delay of any scale, so that every item is in the index
    // before the step that makes it due (the order guarantee's case).
    let delay = |rng: &mut Rng| {
        let bits = rng.range(0..44u32);
        ns(rng.range(1..=1u64 << bits))
    };
    let pick = |rng: &mut Rng, live: &HashMap<Key, Instant>, gone: &[Key]| -> Option<Key> {
        let mut keys: Vec<Key> = live.keys().copied().collect();
        keys.sort_unstable();
        if !gone.is_empty() && (keys.is_empty() || rng.chance(0.2)) {
            Some(gone[rng.range(0..gone.len())])
        } else if keys.is_empty() {
            None
        } else {
            Some(keys[rng.range(0..keys.len())])
        }
    };
    for op in 0..ops {
        let at = |rng: &mut Rng| clock.now() + delay(rng);
        match rng.range(0..10u32) {
            0..=3 if live.len() < 400 => {
                let d = at(&mut rng);
                let k = tx.send_at(next, d).unwrap();
                model.insert((d, k), next);
                live.insert(k, d);
                next += 1;
            }
            4 => {
                let Some(k) = pick(&mut rng, &live, &gone) else { continue };
                let want = live.remove(&k).map(|d| {
                    gone.push(k);
                    model.remove(&(d, k)).unwrap()
                });
                assert_eq!(tx.cancel(k), want, "{index} seed {seed} op {op}: remove");
            }
            5 | 6 => {
                let Some(k) = pick(&mut rng, &live, &gone) else { continue };
                let d = at(&mut rng);
                assert_eq!(tx.reschedule(k, d), live.contains_key(&k), "{index} seed {seed} op {op}: reset");
                if let Some(old) = live.get_mut(&k) {
                    let item = model.remove(&(*old, k)).unwrap();
                    *old = d;
                    model.insert((d, k), item);
                }
            }
            _ => {
                clock.advance(delay(&mut rng));
                let now = clock.now();
                let mut got = Vec::new();
                while let Ok(e) = rx.try_recv_entry() {
                    got.push((e.deadline(), e.key(), e.into_inner()));
                }
                let mut want = Vec::new();
                while let Some(((d, _), _)) = model.first_key_value() {
                    if *d > now {
                        break;
                    }
                    let ((d, k), item) = model.pop_first().unwrap();
                    live.remove(&k);
                    gone.push(k);
                    want.push((d, k, item));
                }
                assert_eq!(got, want, "{index} seed {seed} op {op}: what a step made due");
                assert_eq!(rx.len(), model.len(), "{index} seed {seed} op {op}: len");
                let head = model.keys().next().map(|(d, _)| *d);
                assert_eq!(rx.peek_deadline(), head, "{index} seed {seed} op {op}: peek");
            }
        }
    }
}

/// tokio-util `tests/time_delay_queue.rs`: wake_after_remove_last — removing
/// the only item a consumer waits for must not hand it the item. tokio's poll
/// then yields `None` (empty); delayq's `recv` waits on while a sender lives
/// and returns `RecvError` when the last one goes ("receivers get every pending
/// item when due, then `RecvError`", crate docs "Shutdown").
#[test]
fn tokio_removing_the_last_item_while_a_consumer_waits() {
    let (clock, tx, rx) = mock::<&str>();
    let key = tx.send_after("only", ms(10)).unwrap();
    let r = rx.clone();
    let h = thread::spawn(move || r.recv());
    still_blocked(&h, "recv of an item not due");
    assert_eq!(tx.cancel(key), Some("only"));
    clock.advance(ms(10));
    still_blocked(&h, "recv after its item was removed");
    drop(tx);
    assert_eq!(join_within(h), Err(RecvError));
    assert!(rx.is_empty());
}

/// tokio-util `tests/time_delay_queue.rs`: peek — the next expiring entry
/// follows inserts, removals and resets, and stays reported until it is taken
/// (`peek_deadline`: "The earliest deadline of an item not yet received (due
/// or not)").
#[test]
fn tokio_peek_follows_inserts_removals_resets_and_expiry() {
    let (clock, tx, rx) = mock::<u32>();
    let t0 = clock.now();
    assert_eq!(rx.peek_deadline(), None);
    let a = tx.send_at(1, t0 + ms(30)).unwrap();
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(30)));
    let b = tx.send_at(2, t0 + ms(20)).unwrap();
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(20)));
    assert_eq!(tx.cancel(b), Some(2));
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(30)));
    let c = tx.send_at(3, t0 + ms(50)).unwrap();
    assert!(tx.reschedule(c, t0 + ms(10)));
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(10)));
    assert!(tx.reschedule(a, t0 + ms(5)));
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(5)));
    clock.advance(ms(10)); // both due, in the consumers' ring, not received
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(5)), "a due item not yet received");
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(10)));
    assert_eq!(rx.try_recv(), Ok(3));
    assert_eq!(rx.peek_deadline(), None);
}

/// crossbeam-channel `tests/list.rs`: recv_after_disconnect, with the
/// inspection calls a receiver keeps once every sender is gone — `len`,
/// `peek_deadline` and `take_pending` still see the pending items ("receivers
/// get every pending item when due", crate docs "Shutdown"; `take_pending`:
/// "Removes and returns every item not yet received").
#[test]
fn cb_inspection_after_every_sender_went() {
    let (clock, tx, rx) = mock::<u32>();
    let t0 = clock.now();
    tx.send_at(2, t0 + HOUR * 2).unwrap();
    tx.send_at(1, t0 + HOUR).unwrap();
    drop(tx);
    assert_eq!(rx.len(), 2);
    assert_eq!(rx.peek_deadline(), Some(t0 + HOUR));
    assert_eq!(rx.take_pending(), [(t0 + HOUR, 1), (t0 + HOUR * 2, 2)]);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(rx.recv(), Err(RecvError));
}
