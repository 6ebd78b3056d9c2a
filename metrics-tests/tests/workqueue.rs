//! `delayq::workqueue`'s metrics: client-go's seven `workqueue_*` names with
//! the label `name`, checked against a known sequence of adds, gets, dones and
//! retries on a `MockClock` (so every duration is exact).

use delayq::workqueue::{ExponentialFailure, WorkQueue};
use delayq::MockClock;
use delayq_metrics_tests::Recording;
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn queue<K: Clone + Eq + Hash + Send + Sync + 'static>(
    rec: &Recording,
    name: &str,
    clock: &MockClock,
) -> WorkQueue<K> {
    rec.build(|| {
        WorkQueue::builder()
            .name(name)
            .rate_limiter(ExponentialFailure::new(ms(5), ms(1000)))
            .clock(clock.clone())
            .build()
            .unwrap()
    })
}

const PODS: &[(&str, &str)] = &[("name", "pods")];

#[test]
fn seven_metrics_follow_adds_gets_and_dones() {
    let rec = Recording::new();
    let clock = MockClock::new();
    let q = queue(&rec, "pods", &clock);

    // t = 0: "a" and "b" added; the second "a" is de-duplicated (not counted).
    q.add("a");
    q.add("b");
    q.add("a");
    clock.advance(ms(3));
    let a = q.get().unwrap(); // waited 3 ms
    q.add("a"); // added again while processing: counted, waits for `done`
    clock.advance(ms(7));
    let b = q.get().unwrap(); // waited 10 ms
    clock.advance(ms(2));
    q.add("b"); // t = 12: the same, for "b"
                // t = 12: "a" has run 9 ms, "b" 2 ms; `stats` refreshes the gauges.
    q.stats();
    let s = rec.snapshot();
    assert_eq!(
        s.names(),
        [
            "delayq_admission_pause_seconds",
            "delayq_cancelled_total",
            "delayq_due",
            "delayq_ingress_depth",
            "delayq_lateness_seconds",
            "delayq_pending",
            "delayq_proxy_batch_items",
            "delayq_proxy_rounds_total",
            "delayq_received_total",
            "delayq_rescheduled_total",
            "delayq_send_errors_total",
            "delayq_sent_total",
            "workqueue_adds_total",
            "workqueue_depth",
            "workqueue_longest_running_processor_seconds",
            "workqueue_queue_duration_seconds",
            "workqueue_retries_total",
            "workqueue_unfinished_work_seconds",
            "workqueue_work_duration_seconds",
        ]
    );
    assert_eq!(s.counter("workqueue_adds_total", PODS), 4);
    assert_eq!(s.counter("workqueue_retries_total", PODS), 0);
    // client-go's depth: added and not yet handed out ("a" and "b", waiting
    // for their `done`), where `len` counts the FIFO only.
    assert_eq!(s.gauge("workqueue_depth", PODS), 2.0);
    assert_eq!(q.len(), 0);
    assert_eq!(s.histogram("workqueue_queue_duration_seconds", PODS), [secs(ms(3)), secs(ms(10))]);
    assert_eq!(s.histogram("workqueue_work_duration_seconds", PODS), Vec::<f64>::new());
    assert_eq!(s.gauge("workqueue_unfinished_work_seconds", PODS), secs(ms(11)));
    assert_eq!(s.gauge("workqueue_longest_running_processor_seconds", PODS), secs(ms(9)));

    // A snapshot hands counters and histograms over and resets them (and the
    // gauges): what follows is counted from here.
    // t = 12: "a" done (9 ms of work) goes back to the FIFO; t = 16: "b" done
    // (6 ms), back to the FIFO too; "a" handed out again, 13 ms after its add
    // at t = 3; "z" added.
    q.done(&a);
    clock.advance(ms(4));
    q.done(&b);
    let a = q.get().unwrap();
    q.add("z");
    clock.advance(ms(1));
    let _b = q.get().unwrap(); // t = 17, 5 ms after its add at t = 12
    clock.advance(ms(2));
    q.done(&a); // t = 19: 3 ms; "b" has run 2 ms
    q.add("y"); // "z" and "y" wait
    let s = rec.snapshot();
    assert_eq!(s.counter("workqueue_adds_total", PODS), 2);
    assert_eq!(s.histogram("workqueue_work_duration_seconds", PODS), [secs(ms(9)), secs(ms(6)), secs(ms(3))]);
    assert_eq!(s.histogram("workqueue_queue_duration_seconds", PODS), [secs(ms(13)), secs(ms(5))]);
    assert_eq!(s.gauge("workqueue_depth", PODS), 2.0);
    assert_eq!(s.gauge("workqueue_unfinished_work_seconds", PODS), secs(ms(2)));
    assert_eq!(s.gauge("workqueue_longest_running_processor_seconds", PODS), secs(ms(2)));
}

#[test]
fn retries_count_add_after_and_add_rate_limited_as_client_go_does() {
    let rec = Recording::new();
    let clock = MockClock::new();
    let q = queue(&rec, "pods", &clock);
    // Retries (client-go counts every `AddAfter`, which `AddRateLimited`
    // calls): 5. Adds: "now" at once, "c" and "d" when they arrive, and "d"
    // twice in the delay stage is one item: 3.
    q.add_rate_limited("c"); // 5 ms
    q.add_rate_limited("c"); // in the delay stage already (the earlier time wins)
    q.add_after("now", Duration::ZERO);
    q.add_after("d", ms(20));
    q.add_after("d", ms(8));
    clock.advance(ms(5));
    let s = rec.snapshot();
    assert_eq!(s.counter("workqueue_retries_total", PODS), 5);
    assert_eq!(s.counter("workqueue_adds_total", PODS), 2);
    assert_eq!(s.gauge("workqueue_depth", PODS), 2.0);
    // Each snapshot resets the counters: from here, one more add ("d").
    clock.advance(ms(3));
    let s = rec.snapshot();
    assert_eq!(s.counter("workqueue_adds_total", PODS), 1);
    assert_eq!(s.counter("workqueue_retries_total", PODS), 0);
    assert_eq!(s.gauge("workqueue_depth", PODS), 3.0);
    // After shut down nothing counts (client-go returns before its metrics).
    q.shut_down();
    q.add("late");
    q.add_rate_limited("late");
    let s = rec.snapshot();
    assert_eq!(s.counter("workqueue_adds_total", PODS), 0);
    assert_eq!(s.counter("workqueue_retries_total", PODS), 0);
    assert_eq!(q.stats().adds, 3);
    assert_eq!(q.stats().retries, 5);
}

#[test]
fn queues_are_told_apart_by_name_and_their_delay_stages_by_queue() {
    let rec = Recording::new();
    let clock = MockClock::new();
    let pods = queue(&rec, "pods", &clock);
    let nodes = queue(&rec, "nodes", &clock);
    for i in 0..4 {
        pods.add(i);
    }
    nodes.add(7);
    nodes.add_after(8, ms(1));
    nodes.add_after(9, ms(1));
    clock.advance(ms(1));
    let s = rec.snapshot();
    assert_eq!(s.counter("workqueue_adds_total", PODS), 4);
    assert_eq!(s.counter("workqueue_adds_total", &[("name", "nodes")]), 3);
    assert_eq!(s.counter("workqueue_retries_total", &[("name", "nodes")]), 2);
    // The delay stage is a core queue named after its work queue.
    assert_eq!(s.counter("delayq_sent_total", &[("queue", "workqueue/nodes")]), 2);
    assert_eq!(s.counter("delayq_sent_total", &[("queue", "workqueue/pods")]), 0);
}

/// A key whose `Hash` panics once its fuse has burnt down (shared by clones).
#[derive(Clone)]
struct Fused {
    id: u32,
    fuse: Arc<AtomicI32>,
}

impl Hash for Fused {
    fn hash<H: Hasher>(&self, state: &mut H) {
        if self.fuse.fetch_sub(1, Ordering::SeqCst) == 0 {
            panic!("hash of {} panicked", self.id);
        }
        self.id.hash(state);
    }
}

impl PartialEq for Fused {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for Fused {}

#[test]
fn an_add_cut_short_by_a_panicking_hash_is_reported_by_the_next_one() {
    let rec = Recording::new();
    let clock = MockClock::new();
    let q = queue::<Fused>(&rec, "pods", &clock);
    let key = |id, fuse| Fused { id, fuse: Arc::new(AtomicI32::new(fuse)) };
    // One item processing, one dirty: `add` hashes its item for both sets.
    q.add(key(1, i32::MAX));
    q.add(key(2, i32::MAX));
    let one = q.get().unwrap();
    // `add` hashes the item to look it up in the dirty set (fine), counts the
    // add, then hashes it again for the processing set (panics).
    let unwound = catch_unwind(AssertUnwindSafe(|| q.add(key(3, 1))));
    assert!(unwound.is_err());
    assert_eq!(q.stats().adds, 3);
    q.add(key(4, i32::MAX));
    q.done(&one);
    let s = rec.snapshot();
    assert_eq!(q.stats().adds, 4);
    assert_eq!(s.counter("workqueue_adds_total", PODS), 4);
    assert_eq!(s.gauge("workqueue_depth", PODS), 2.0);
    assert_eq!(s.histogram("workqueue_work_duration_seconds", PODS), [0.0]);
}
