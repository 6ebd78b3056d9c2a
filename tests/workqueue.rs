//! `delayq::workqueue`: client-go semantics (de-dup, processing, FIFO, delay
//! stage, shut down), the rate limiters and the metrics. Timing is decided by a
//! `MockClock`: its `advance` returns once the items it made ready are queued.

mod common;
use common::{join, ms, spawn, wait_for, Bomb, WAIT};
use delayq::workqueue::{
    default_rate_limiter, ExponentialFailure, FastSlow, MaxOf, RateLimiter, TokenBucket, WorkQueue,
};
use delayq::MockClock;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

fn mock<K: Clone + Eq + Hash + Send + Sync + 'static>() -> (WorkQueue<K>, MockClock) {
    let clock = MockClock::new();
    let q = WorkQueue::builder()
        .rate_limiter(ExponentialFailure::new(ms(5), ms(40)))
        .clock(clock.clone())
        .build()
        .unwrap();
    (q, clock)
}

fn with_limiter<K: Clone + Eq + Hash + Send + Sync + 'static>(
    clock: &MockClock,
    limiter: impl RateLimiter<K> + 'static,
) -> WorkQueue<K> {
    WorkQueue::builder().rate_limiter(limiter).clock(clock.clone()).build().unwrap()
}

/// Takes every ready item (marking each done) without blocking.
fn take_ready<K: Clone + Eq + Hash + Send + Sync + 'static>(q: &WorkQueue<K>) -> Vec<K> {
    let mut out = Vec::new();
    while !q.is_empty() {
        let item = q.get().unwrap();
        q.done(&item);
        out.push(item);
    }
    out
}

#[test]
fn add_deduplicates_items_waiting_in_the_fifo() {
    let (q, _clock) = mock();
    for x in ["a", "b", "a", "a", "b", "c"] {
        q.add(x);
    }
    assert_eq!(q.len(), 3);
    assert_eq!(q.stats().adds, 3);
    assert_eq!(take_ready(&q), ["a", "b", "c"]);
}

#[test]
fn ready_items_come_out_in_fifo_order() {
    let (q, _clock) = mock();
    for i in [5, 3, 9, 1, 7] {
        q.add(i);
    }
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(q.get().unwrap());
    }
    assert_eq!(got, [5, 3, 9, 1, 7]);
}

#[test]
fn an_item_added_while_processing_goes_back_once_on_done() {
    let (q, _clock) = mock();
    q.add("a");
    q.add("b");
    let a = q.get().unwrap();
    assert_eq!(a, "a");
    q.add("a");
    q.add("a");
    assert_eq!(q.len(), 1); // only "b": "a" is being processed, so it waits
    assert_eq!(q.stats().processing, 1);
    q.done(&a);
    assert_eq!(q.len(), 2);
    assert_eq!(take_ready(&q), ["b", "a"]); // back at the end, once
    q.done(&"a"); // not being processed: nothing happens
    assert_eq!(q.len(), 0);
}

#[test]
fn an_item_being_processed_is_never_handed_out_twice() {
    let (q, _clock) = mock();
    q.add(1);
    let one = q.get().unwrap();
    q.add(1);
    assert_eq!(q.len(), 0); // dirty, but not in the FIFO: no `get` can take it
    let done = Arc::new(AtomicBool::new(false));
    let other = {
        let (q, done) = (q.clone(), done.clone());
        spawn(move || (q.get(), done.load(Ordering::SeqCst)))
    };
    thread::yield_now();
    done.store(true, Ordering::SeqCst);
    q.done(&one); // now it may go to the other worker
    assert_eq!(join(other), (Some(1), true));
}

#[test]
fn done_without_a_new_add_does_not_requeue() {
    let (q, _clock) = mock();
    q.add("x");
    let x = q.get().unwrap();
    q.done(&x);
    assert_eq!(q.len(), 0);
    q.add("x"); // a fresh add after done is a new round
    assert_eq!(q.len(), 1);
}

#[test]
fn add_after_zero_is_add() {
    let (q, _clock) = mock();
    q.add_after("now", Duration::ZERO);
    assert_eq!(q.len(), 1);
    let s = q.stats();
    assert_eq!((s.adds, s.retries, s.delayed), (1, 1, 0));
}

#[test]
fn a_delayed_item_is_ready_at_its_time_and_not_before() {
    let (q, clock) = mock();
    q.add_after("x", Duration::from_secs(10));
    assert_eq!(q.stats().delayed, 1);
    clock.advance(Duration::from_secs(10) - Duration::from_nanos(1));
    assert_eq!(q.len(), 0);
    clock.advance(Duration::from_nanos(1));
    assert_eq!(q.len(), 1);
    assert_eq!(q.stats().delayed, 0);
    assert_eq!(q.get(), Some("x"));
}

#[test]
fn delayed_items_join_the_fifo_in_the_order_they_become_ready() {
    let (q, clock) = mock();
    q.add_after("c", ms(3));
    q.add_after("a", ms(1));
    q.add_after("b1", ms(2));
    q.add_after("b2", ms(2)); // same time: in the order added
    clock.advance(ms(1));
    q.add("z");
    clock.advance(ms(2));
    assert_eq!(take_ready(&q), ["a", "z", "b1", "b2", "c"]);
}

#[test]
fn an_item_waits_in_the_delay_stage_once() {
    let (q, clock) = mock();
    for _ in 0..5 {
        q.add_after("x", ms(10));
    }
    let s = q.stats();
    assert_eq!((s.delayed, s.retries), (1, 5));
    clock.advance(ms(10));
    assert_eq!(take_ready(&q), ["x"]);
    clock.advance(ms(100));
    assert_eq!(q.len(), 0);
}

#[test]
fn the_earlier_ready_time_wins_in_the_delay_stage() {
    let (q, clock) = mock();
    q.add_after("sooner later", ms(10));
    q.add_after("sooner later", ms(5));
    q.add_after("later sooner", ms(5));
    q.add_after("later sooner", ms(10));
    clock.advance(ms(4));
    assert_eq!(q.len(), 0);
    clock.advance(ms(1));
    assert_eq!(take_ready(&q), ["sooner later", "later sooner"]);
    clock.advance(ms(10));
    assert_eq!(q.len(), 0); // neither comes again at 10 ms
    assert_eq!(q.stats().delayed, 0);
}

#[test]
fn a_delayed_item_already_ready_is_not_added_twice() {
    let (q, clock) = mock();
    q.add("x");
    q.add_after("x", ms(1));
    clock.advance(ms(1));
    assert_eq!(q.len(), 1);
    assert_eq!(q.stats().adds, 1);
}

#[test]
fn a_delayed_item_arriving_while_processing_goes_back_on_done() {
    let (q, clock) = mock();
    q.add("x");
    let x = q.get().unwrap();
    q.add_after("x", ms(1));
    clock.advance(ms(1));
    assert_eq!(q.len(), 0);
    q.done(&x);
    assert_eq!(take_ready(&q), ["x"]);
}

#[test]
fn a_delay_too_large_never_becomes_ready_and_does_not_panic() {
    let (q, clock) = mock();
    q.add_after("never", Duration::MAX);
    q.add_after("never", Duration::from_secs(3600 * 24 * 365 * 10_000));
    clock.advance(Duration::from_secs(3600 * 24 * 365 * 100));
    assert_eq!(q.len(), 0);
    assert_eq!(q.stats().delayed, 1);
    q.add_after("never", ms(1)); // earlier wins, even over "never"
    clock.advance(ms(1));
    assert_eq!(take_ready(&q), ["never"]);
    // Past the queue's horizon (about 484 years), then to the end of time: the
    // wheel once spun forever here (reliability defect 1). The far item stays
    // delayed; the queue still works on a clock at the end of time.
    q.add_after("far", Duration::MAX);
    clock.advance(Duration::from_secs(3600 * 24 * 365 * 600));
    clock.advance(Duration::MAX);
    assert_eq!(q.len(), 0);
    assert_eq!(q.stats().delayed, 1);
    q.add_after("now", Duration::ZERO);
    assert_eq!(take_ready(&q), ["now"]);
}

#[test]
fn shut_down_ignores_adds_hands_out_what_is_ready_and_counts_dropped_delayed_items() {
    let (q, _clock) = mock();
    q.add("a");
    q.add("b");
    q.add_after("c", Duration::from_secs(1));
    q.add_after("d", Duration::from_secs(2));
    let a = q.get().unwrap();
    q.shut_down();
    assert!(q.is_shutting_down());
    q.add("e");
    q.add_after("f", Duration::ZERO);
    q.add_rate_limited("g");
    assert_eq!(q.num_requeues(&"g"), 0); // the limiter was not asked
    assert_eq!(q.get(), Some("b"));
    assert_eq!(q.get(), None);
    q.done(&a);
    q.done(&"b");
    let s = q.stats();
    assert_eq!((s.dropped_delayed, s.delayed, s.adds, s.retries), (2, 0, 2, 2));
    q.shut_down(); // idempotent
    assert_eq!(q.stats().dropped_delayed, 2);
}

#[test]
fn shut_down_keeps_the_requeue_of_an_item_dirty_while_processing() {
    let (q, _clock) = mock();
    q.add("x");
    let x = q.get().unwrap();
    q.add("x");
    q.shut_down();
    assert_eq!(q.len(), 0);
    q.done(&x);
    assert_eq!(q.get(), Some("x"));
    assert_eq!(q.get(), None);
}

#[test]
fn shut_down_wakes_blocked_getters() {
    let (q, _clock) = mock::<u32>();
    let getters: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            spawn(move || q.get())
        })
        .collect();
    q.shut_down();
    for g in getters {
        assert_eq!(join(g), None);
    }
}

#[test]
fn get_blocks_until_an_item_is_added() {
    let (q, _clock) = mock();
    let q2 = q.clone();
    let getter = spawn(move || q2.get());
    q.add(42);
    assert_eq!(join(getter), Some(42));
}

#[test]
fn shut_down_with_drain_waits_until_handed_out_items_are_done() {
    let (q, _clock) = mock();
    q.add("a");
    q.add("b");
    let a = q.get().unwrap();
    let b = q.get().unwrap();
    let finished = Arc::new(AtomicUsize::new(0));
    let drainer = {
        let (q, finished) = (q.clone(), finished.clone());
        spawn(move || {
            q.shut_down_with_drain();
            finished.load(Ordering::SeqCst) // how many were done when it returned
        })
    };
    wait_for("the drain has begun", || q.is_shutting_down());
    finished.fetch_add(1, Ordering::SeqCst);
    q.done(&a);
    finished.fetch_add(1, Ordering::SeqCst);
    q.done(&b);
    assert_eq!(join(drainer), 2);
}

#[test]
fn shut_down_with_drain_with_nothing_processing_returns_and_leaves_ready_items() {
    let (q, _clock) = mock();
    q.add(1);
    q.add(2);
    q.shut_down_with_drain();
    assert_eq!(q.get(), Some(1));
    assert_eq!(q.get(), Some(2));
    assert_eq!(q.get(), None);
}

#[test]
fn shut_down_ends_a_drain_in_progress() {
    let (q, _clock) = mock();
    q.add("stuck");
    let _stuck = q.get().unwrap();
    let drainer = {
        let q = q.clone();
        spawn(move || q.shut_down_with_drain())
    };
    wait_for("the drain has begun", || q.is_shutting_down());
    q.shut_down();
    join(drainer);
    assert_eq!(q.stats().processing, 1);
}

#[test]
fn a_drain_ends_when_the_last_item_is_done_even_if_it_is_requeued() {
    let (q, _clock) = mock();
    q.add("x");
    let x = q.get().unwrap();
    q.add("x"); // dirty while processing: `done` puts it back in the FIFO
    let drainer = {
        let q = q.clone();
        spawn(move || q.shut_down_with_drain())
    };
    wait_for("the drain has begun", || q.is_shutting_down());
    // No event says the drainer is blocked; give it the time to get there, or
    // this test could not catch a `done` that fails to wake it.
    thread::sleep(ms(50));
    q.done(&x);
    join(drainer); // nothing is being processed, though "x" is ready again
    assert_eq!(q.get(), Some("x"));
    assert_eq!(q.get(), None);
}

/// An item that is its `id` to the queue (`Eq`, `Hash`), carrying `_with`
/// along: something whose drop the test watches.
#[derive(Clone, Debug)]
struct Item<W> {
    id: u32,
    _with: W,
}

impl<W> PartialEq for Item<W> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl<W> Eq for Item<W> {}
impl<W> Hash for Item<W> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.id.hash(h)
    }
}

#[test]
fn dropping_the_last_handle_shuts_down_and_drops_delayed_items() {
    let (q, _clock) = mock();
    let token = Arc::new(());
    q.add_after(Item { id: 1, _with: token.clone() }, Duration::from_secs(60));
    q.add(Item { id: 2, _with: token.clone() });
    let q2 = q.clone();
    drop(q);
    assert!(!q2.is_shutting_down()); // a clone remains
    join(spawn(move || drop(q2)));
    wait_for("every item is dropped", || Arc::strong_count(&token) == 1);
}

/// A queue of items that can hold its last handle.
type OwnQueue = WorkQueue<Item<LastHandle>>;

/// The last handle of an [`OwnQueue`], and who to tell once it is dropped.
type Slot = Arc<Mutex<Option<(OwnQueue, mpsc::Sender<()>)>>>;

/// Maybe a [`Slot`], emptied by the first drop of any copy.
#[derive(Clone, Debug, Default)]
struct LastHandle(Option<Slot>);

impl Drop for LastHandle {
    fn drop(&mut self) {
        let Some(slot) = &self.0 else { return };
        let taken = slot.lock().unwrap().take();
        if let Some((q, dropped)) = taken {
            drop(q); // shuts the queue down: takes its lock
            dropped.send(()).unwrap();
        }
    }
}

#[test]
fn an_item_whose_drop_drops_the_last_handle_does_not_deadlock_the_mover() {
    let clock = MockClock::new();
    let q: OwnQueue = WorkQueue::builder().clock(clock.clone()).build().unwrap();
    q.add(Item { id: 1, _with: LastHandle::default() });
    let slot = Arc::new(Mutex::new(None));
    // A duplicate of a ready item: the mover drops it (and its delay-stage copy).
    q.add_after(Item { id: 1, _with: LastHandle(Some(slot.clone())) }, ms(1));
    let (dropped_tx, dropped) = mpsc::channel();
    *slot.lock().unwrap() = Some((q, dropped_tx));
    let step = spawn(move || clock.advance(ms(1)));
    dropped.recv_timeout(WAIT).expect("dropping the last handle from an item's drop deadlocked");
    join(step);
}

#[test]
fn exponential_failure_doubles_from_5ms_up_to_its_cap() {
    let l = ExponentialFailure::new(ms(5), ms(40));
    let waits: Vec<_> = (0..6).map(|_| l.when(&"a")).collect();
    assert_eq!(waits, [ms(5), ms(10), ms(20), ms(40), ms(40), ms(40)]);
    assert_eq!(l.num_requeues(&"a"), 6);
    assert_eq!(l.when(&"b"), ms(5)); // per item
}

#[test]
fn exponential_failure_never_overflows() {
    let l = ExponentialFailure::new(Duration::from_secs(1), Duration::MAX);
    let waits: Vec<_> = (0..300).map(|_| l.when(&0)).collect();
    assert_eq!(waits[10], Duration::from_secs(1024));
    assert_eq!(waits[299], Duration::MAX);
    let huge = ExponentialFailure::new(Duration::MAX, Duration::from_secs(7));
    assert_eq!(huge.when(&0), Duration::from_secs(7));
    let zero = ExponentialFailure::new(Duration::ZERO, Duration::from_secs(7));
    assert!((0..300).all(|_| zero.when(&0) == Duration::ZERO));
}

#[test]
fn rate_limited_retries_back_off_5_10_20_ms_capped_on_the_clock() {
    let (q, clock) = mock();
    for wait in [5, 10, 20, 40, 40] {
        q.add_rate_limited("job");
        clock.advance(ms(wait - 1));
        assert_eq!(q.len(), 0, "before {wait} ms");
        clock.advance(ms(1));
        assert_eq!(take_ready(&q), ["job"], "at {wait} ms");
    }
    assert_eq!(q.num_requeues(&"job"), 5);
}

#[test]
fn forget_resets_the_backoff() {
    let (q, clock) = mock();
    for _ in 0..3 {
        q.add_rate_limited("job");
    }
    assert_eq!(q.num_requeues(&"job"), 3);
    clock.advance(ms(5));
    assert_eq!(take_ready(&q), ["job"]);
    q.forget(&"job");
    assert_eq!(q.num_requeues(&"job"), 0);
    q.add_rate_limited("job");
    clock.advance(ms(4));
    assert_eq!(q.len(), 0);
    clock.advance(ms(1));
    assert_eq!(take_ready(&q), ["job"]); // 5 ms again, not 40
}

#[test]
fn fast_slow_is_fast_for_the_first_attempts_then_slow() {
    let clock = MockClock::new();
    let q = with_limiter(&clock, FastSlow::new(ms(1), ms(100), 2));
    let mut waits = Vec::new();
    for _ in 0..4 {
        q.add_rate_limited("x");
        let mut waited = 0;
        while q.is_empty() {
            clock.advance(ms(1));
            waited += 1;
        }
        take_ready(&q);
        waits.push(waited);
    }
    assert_eq!(waits, [1, 1, 100, 100]);
    q.forget(&"x");
    assert_eq!(q.num_requeues(&"x"), 0);
    let l = FastSlow::new(ms(1), ms(100), 2);
    assert_eq!([l.when(&1), l.when(&1), l.when(&1), l.when(&2)], [ms(1), ms(1), ms(100), ms(1)]);
}

#[test]
fn token_bucket_allows_a_burst_then_qps() {
    let clock = MockClock::new();
    let l = TokenBucket::with_clock(10.0, 3, clock.clone());
    let waits: Vec<_> = (0..6).map(|i| l.when(&i)).collect();
    assert_eq!(waits, [ms(0), ms(0), ms(0), ms(100), ms(200), ms(300)]);
    clock.advance(ms(300)); // pays the three reservations off, no more
    assert_eq!(l.when(&0), ms(100));
    clock.advance(Duration::from_secs(60)); // refills up to the burst only
    let waits: Vec<_> = (0..4).map(|i| l.when(&i)).collect();
    assert_eq!(waits, [ms(0), ms(0), ms(0), ms(100)]);
    assert_eq!(l.num_requeues(&0), 0);
}

#[test]
fn a_token_bucket_limits_a_burst_of_rate_limited_adds() {
    let clock = MockClock::new();
    let q = with_limiter(&clock, TokenBucket::with_clock(10.0, 3, clock.clone()));
    for i in 0..5 {
        q.add_rate_limited(i);
    }
    assert_eq!(take_ready(&q), [0, 1, 2]);
    clock.advance(ms(99));
    assert_eq!(q.len(), 0);
    clock.advance(ms(1));
    assert_eq!(take_ready(&q), [3]);
    clock.advance(ms(100));
    assert_eq!(take_ready(&q), [4]);
}

#[test]
fn a_token_bucket_of_a_tiny_rate_still_allows_its_burst() {
    let l = TokenBucket::with_clock(1e-30, 3, MockClock::new());
    let waits: Vec<_> = (0..5).map(|_| l.when(&())).collect();
    assert_eq!(waits, [Duration::ZERO, Duration::ZERO, Duration::ZERO, Duration::MAX, Duration::MAX]);
    let unlimited = TokenBucket::with_clock(f64::INFINITY, 1, MockClock::new());
    assert!((0..100).all(|_| unlimited.when(&()) == Duration::ZERO));
}

#[test]
#[should_panic(expected = "qps must be positive")]
fn a_token_bucket_needs_a_positive_rate() {
    TokenBucket::new(f64::NAN, 1);
}

#[test]
fn max_of_takes_the_longest_and_forgets_everywhere() {
    let clock = MockClock::new();
    let l = MaxOf::new(vec![
        Box::new(ExponentialFailure::new(ms(5), ms(1000))),
        Box::new(TokenBucket::with_clock(10.0, 2, clock.clone())),
        Box::new(FastSlow::new(ms(1), ms(30), 3)),
    ]);
    // exp 5, 10, 20, 40; bucket 0, 0, 100, 200; fast-slow 1, 1, 1, 30
    let waits: Vec<_> = (0..4).map(|_| l.when(&"a")).collect();
    assert_eq!(waits, [ms(5), ms(10), ms(100), ms(200)]);
    assert_eq!(l.num_requeues(&"a"), 4);
    l.forget(&"a");
    assert_eq!(l.num_requeues(&"a"), 0);
    clock.advance(Duration::from_secs(1));
    assert_eq!(l.when(&"a"), ms(5));
}

#[test]
fn the_default_rate_limiter_is_client_gos() {
    let made = Instant::now();
    let l = default_rate_limiter::<u32>();
    assert_eq!([l.when(&0), l.when(&0), l.when(&0)], [ms(5), ms(10), ms(20)]);
    for i in 1..98 {
        assert_eq!(l.when(&i), ms(5));
    }
    // The 101st request in a burst waits for the bucket: 100 ms, less the
    // (system) time since the limiter was made.
    let w = l.when(&1000);
    let since = made.elapsed();
    assert!(w <= ms(100) && w >= ms(100).saturating_sub(since).max(ms(5)), "{w:?} after {since:?}");
    for _ in 0..40 {
        l.when(&7);
    }
    assert_eq!(l.when(&7), Duration::from_secs(1000)); // the exponential cap
}

#[test]
fn stats_measure_latency_and_work_on_the_queue_clock() {
    let (q, clock) = mock();
    q.add("a");
    q.add("b");
    q.add_after("c", ms(100));
    clock.advance(ms(2));
    let a = q.get().unwrap(); // waited 2 ms
    clock.advance(ms(3));
    let b = q.get().unwrap(); // waited 5 ms
    clock.advance(ms(4));
    let s = q.stats();
    assert_eq!((s.depth, s.delayed, s.processing, s.adds, s.retries), (0, 1, 2, 2, 1));
    assert_eq!(s.unfinished_work, ms(7 + 4));
    assert_eq!(s.longest_running, ms(7));
    assert_eq!((s.queue_latency.count, s.queue_latency.p50, s.queue_latency.max), (2, ms(2), ms(5)));
    q.done(&a); // worked 7 ms
    clock.advance(ms(1));
    q.done(&b); // worked 5 ms
    let w = q.stats().work_duration;
    assert_eq!((w.count, w.p50, w.p90, w.max), (2, ms(5), ms(7), ms(7)));
    assert_eq!(q.stats().unfinished_work, Duration::ZERO);
}

#[test]
fn workers_never_process_one_item_concurrently() {
    let q = WorkQueue::builder().rate_limiter(ExponentialFailure::new(ms(0), ms(0))).build().unwrap();
    let busy = Arc::new(Mutex::new(HashSet::new()));
    let overlap = Arc::new(AtomicBool::new(false));
    let processed = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (q, busy, overlap, processed) = (q.clone(), busy.clone(), overlap.clone(), processed.clone());
            spawn(move || {
                while let Some(item) = q.get() {
                    if !busy.lock().unwrap().insert(item) {
                        overlap.store(true, Ordering::SeqCst);
                    }
                    thread::yield_now();
                    busy.lock().unwrap().remove(&item);
                    processed.fetch_add(1, Ordering::SeqCst);
                    q.done(&item);
                }
            })
        })
        .collect();
    for round in 0..200u32 {
        q.add(round % 8);
        q.add_after(round % 5, ms(u64::from(round % 3)));
    }
    wait_for("some items are processed", || processed.load(Ordering::SeqCst) >= 8);
    q.shut_down_with_drain();
    for w in workers {
        join(w);
    }
    assert!(!overlap.load(Ordering::SeqCst));
}

#[test]
fn system_clock_add_after_becomes_ready_in_time() {
    let q = WorkQueue::new();
    let start = Instant::now();
    q.add_after("later", ms(20));
    q.add_after("sooner", ms(5));
    assert_eq!(q.get(), Some("sooner"));
    assert_eq!(q.get(), Some("later"));
    assert!(start.elapsed() >= ms(20));
}

/// A key whose `Drop`, `Hash` or `Eq` panics once armed (identity is `id`).
#[derive(Clone, Debug)]
struct Touchy {
    id: u32,
    on_drop: Bomb,
    on_hash: Arc<AtomicBool>,
    on_eq: Arc<AtomicBool>,
}

impl Touchy {
    fn new(id: u32) -> Touchy {
        let off = || Arc::new(AtomicBool::new(false));
        let on_drop = Bomb::armed();
        on_drop.disarm();
        Touchy { id, on_drop, on_hash: off(), on_eq: off() }
    }

    fn disarm(&self) {
        self.on_drop.disarm();
        self.on_hash.store(false, Ordering::SeqCst);
        self.on_eq.store(false, Ordering::SeqCst);
    }
}

impl PartialEq for Touchy {
    fn eq(&self, other: &Touchy) -> bool {
        // Both armed: the panic hits the mover comparing two copies of one key,
        // never a lookup of another key that shares a hash tag.
        if self.on_eq.load(Ordering::SeqCst) && other.on_eq.load(Ordering::SeqCst) {
            panic!("a key's Eq panics");
        }
        self.id == other.id
    }
}

impl Eq for Touchy {}

impl Hash for Touchy {
    fn hash<H: Hasher>(&self, h: &mut H) {
        if self.on_hash.load(Ordering::SeqCst) {
            panic!("a key's Hash panics");
        }
        self.id.hash(h)
    }
}

#[test]
fn the_mover_survives_a_key_whose_drop_panics() {
    // Reliability defect 6: the mover thread died on the first panicking drop,
    // and later delayed items never became ready.
    let (q, clock) = mock::<Touchy>();
    let one = Touchy::new(1);
    q.add_after(one.clone(), Duration::from_secs(1));
    one.on_drop.0.store(true, Ordering::SeqCst); // every copy now panics when dropped
    clock.advance(Duration::from_secs(1));
    let two = Touchy::new(2);
    q.add_after(two.clone(), Duration::from_secs(1));
    clock.advance(Duration::from_secs(1));
    assert_eq!(q.len(), 2, "the mover died");
    one.disarm();
    let got: Vec<u32> = (0..2).map(|_| q.get().unwrap().id).collect();
    assert_eq!(got, [1, 2]);
    assert!(q.stats().panics >= 1, "contained panics are counted");
    join(spawn(move || drop(q)));
}

#[test]
fn the_mover_survives_keys_whose_hash_or_eq_panics() {
    for which in ["hash", "eq"] {
        let (q, clock) = mock::<Touchy>();
        let bad = Touchy::new(1);
        q.add_after(bad.clone(), Duration::from_secs(1));
        match which {
            "hash" => bad.on_hash.store(true, Ordering::SeqCst),
            _ => bad.on_eq.store(true, Ordering::SeqCst),
        }
        let start = Instant::now();
        clock.advance(Duration::from_secs(1));
        assert!(start.elapsed() < Duration::from_secs(5), "{which}: the step waited for a dead mover");
        let good = Touchy::new(2);
        q.add_after(good, Duration::from_secs(1));
        clock.advance(Duration::from_secs(1));
        assert_eq!(q.get().map(|k| k.id), Some(2), "{which}");
        assert!(q.stats().panics >= 1, "{which}");
        bad.disarm();
        join(spawn(move || drop(q)));
    }
}

#[test]
fn shut_down_survives_delayed_keys_whose_drop_panics() {
    let (q, _clock) = mock::<Touchy>();
    let keys: Vec<Touchy> = (0..3).map(Touchy::new).collect();
    for k in &keys {
        q.add_after(k.clone(), Duration::from_secs(60));
    }
    q.add(Touchy::new(9));
    for k in &keys {
        k.on_drop.0.store(true, Ordering::SeqCst);
    }
    let q2 = q.clone();
    join(spawn(move || q2.shut_down()));
    assert_eq!(q.stats().dropped_delayed, 3);
    assert_eq!(q.get().map(|k| k.id), Some(9));
    assert_eq!(q.get(), None);
    for k in &keys {
        k.disarm();
    }
    join(spawn(move || drop(q)));
}

#[test]
fn the_last_handles_drop_contains_panicking_drops_of_ready_processing_and_failed_items() {
    // Found by an adversarial review: these copies were dropped by the maps'
    // own drop glue (and the rate limiter's), so the first panic came out of
    // `drop(q)` (and a second, of a `Drop` that panics even while unwinding,
    // aborted the process).
    for shut_first in [false, true] {
        let (q, _clock) = mock::<Touchy>();
        let keys: Vec<Touchy> = (1..=3).map(Touchy::new).collect();
        for k in &keys {
            q.add(k.clone());
        }
        let handed_out = q.get().unwrap(); // its copy stays in the processing set
        q.add(keys[0].clone()); // dirty while processing
        q.add_rate_limited(keys[2].clone()); // a copy in the limiter's failure counts
        for k in &keys {
            k.on_drop.0.store(true, Ordering::SeqCst);
        }
        std::mem::forget(handed_out);
        if shut_first {
            q.shut_down();
        }
        let dropped = thread::spawn(move || drop(q)).join();
        for k in &keys {
            k.disarm();
        }
        assert!(dropped.is_ok(), "shut_first {shut_first}: a panicking Drop escaped the last handle's drop");
    }
}

#[test]
fn a_ready_time_past_the_horizon_never_becomes_ready_and_does_not_stall_a_step() {
    // Found by an adversarial review: 490 years fits an `Instant` but lies past
    // the core queue's horizon (about 484 years), where no deadline falls due;
    // every step past it waited the mover's patience (10 s) for the item.
    let year = Duration::from_secs(365 * 24 * 3600);
    let (q, clock) = mock::<&str>();
    q.add_after("far", year * 490);
    let start = Instant::now();
    clock.advance(year * 491);
    assert!(start.elapsed() < Duration::from_secs(5), "the step waited for an item that is never due");
    assert_eq!((q.len(), q.stats().delayed), (0, 1));
    // The clock is past the horizon now: a short delay from here ends past it too.
    q.add_after("after", Duration::from_secs(1));
    let start = Instant::now();
    clock.advance(Duration::from_secs(2));
    assert!(start.elapsed() < Duration::from_secs(5), "the step waited for an item that is never due");
    assert_eq!(q.len(), 0);
    q.add_after("now", Duration::ZERO);
    assert_eq!(take_ready(&q), ["now"]);
}

/// A key whose `Hash` panics for every key but the one `REHASH_SAFE` names,
/// while `REHASH_ARMED` is set: what a rehash of the whole map meets.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rehash(u32);

static REHASH_ARMED: AtomicBool = AtomicBool::new(false);
static REHASH_SAFE: AtomicUsize = AtomicUsize::new(0);

impl Hash for Rehash {
    fn hash<H: Hasher>(&self, h: &mut H) {
        if REHASH_ARMED.load(Ordering::SeqCst) && self.0 as usize != REHASH_SAFE.load(Ordering::SeqCst) {
            panic!("a key's Hash panics in a rehash");
        }
        self.0.hash(h)
    }
}

/// The maps give a burst's memory back as items leave (`shrink.rs`), which
/// rehashes their keys: a `Hash` that panics there is caught and counted, the
/// call that removed the item still returns it, and nothing is lost.
#[test]
fn a_hash_panicking_while_the_maps_shrink_loses_nothing() {
    let q: WorkQueue<Rehash> = WorkQueue::new();
    for i in 0..2_000 {
        q.add(Rehash(i));
    }
    REHASH_ARMED.store(true, Ordering::SeqCst);
    for i in 0..2_000u32 {
        // Only the key being handed out is hashed by `get` and `done`
        // themselves; a shrink of the dirty set rehashes the others.
        REHASH_SAFE.store(i as usize, Ordering::SeqCst);
        assert_eq!(q.get(), Some(Rehash(i)));
        q.done(&Rehash(i));
    }
    REHASH_ARMED.store(false, Ordering::SeqCst);
    assert_eq!(q.len(), 0);
    assert_eq!(q.stats().panics, 1, "one caught panic, then no more shrinking");
    q.add(Rehash(7));
    assert_eq!(q.get(), Some(Rehash(7)));
}
