//! The core queue's metrics (`delayq` feature `metrics`): each test builds
//! queues under a recording recorder, does a known sequence of operations on
//! a mock clock, and checks every figure against what it did.

use delayq::{Builder, MockClock};
use delayq_metrics_tests::Recording;
use std::time::{Duration, Instant};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Sends, cancels, reschedules, receives and lateness, exactly.
#[test]
fn counts_match_what_the_queue_did() {
    let rec = Recording::new();
    let clock = MockClock::new();
    let (tx, rx) = rec.build(|| Builder::new().name("orders").clock(clock.clone()).build::<u32>().unwrap());
    let t0 = clock.now();
    let mut keys = Vec::new();
    for i in 0..10u32 {
        // Deadlines 10, 20, …, 100 ms.
        keys.push(tx.send_at(i, t0 + ms(10 * u64::from(i) + 10)).unwrap());
    }
    // Two cancels that find their item, one that does not (already cancelled).
    assert_eq!(tx.cancel(keys[8]), Some(8));
    assert_eq!(tx.cancel(keys[9]), Some(9));
    assert_eq!(tx.cancel(keys[9]), None);
    // One reschedule that moves its item (0: 10 ms → 5 ms), one that does not.
    assert!(tx.reschedule(keys[0], t0 + ms(5)));
    assert!(!tx.reschedule(keys[9], t0 + ms(5)));
    // Everything left (8 items, due 5 … 80 ms) is due at 120 ms: lateness is
    // 120 − deadline, exactly, on the mock clock.
    clock.advance(ms(120));
    let mut got = Vec::new();
    while got.len() < 8 {
        got.push(rx.recv().unwrap());
    }
    assert_eq!(got, vec![0, 1, 2, 3, 4, 5, 6, 7]);
    // A consumer that finds nothing due samples the gauges (the queue is quiet).
    assert!(rx.try_recv().is_err());

    let s = rec.snapshot();
    let q = [("queue", "orders")];
    assert_eq!(s.counter("delayq_sent_total", &q), 10);
    assert_eq!(s.counter("delayq_cancelled_total", &q), 2);
    assert_eq!(s.counter("delayq_rescheduled_total", &q), 1);
    assert_eq!(s.counter("delayq_received_total", &q), 8);
    let mut lateness = s.histogram("delayq_lateness_seconds", &q);
    lateness.sort_by(f64::total_cmp);
    let want: Vec<f64> =
        [115u64, 100, 90, 80, 70, 60, 50, 40].iter().rev().map(|&m| m as f64 / 1e3).collect();
    assert_eq!(lateness.len(), 8, "one lateness per item received");
    for (got, want) in lateness.iter().zip(&want) {
        assert!((got - want).abs() < 1e-9, "lateness {got} s, expected {want} s ({lateness:?})");
    }
    assert_eq!(s.gauge("delayq_pending", &q), 0.0);
    assert_eq!(s.gauge("delayq_due", &q), 0.0);
    assert_eq!(s.gauge("delayq_ingress_depth", &q), 0.0);
    // Every command went through an enqueue batch: 10 sends, 3 cancels, 2
    // reschedules, and the mock clock's step (one sync command).
    let enq = s.histogram("delayq_proxy_batch_items", &[("queue", "orders"), ("proxy", "enqueue")]);
    assert_eq!(enq.iter().sum::<f64>(), 16.0, "commands per batch: {enq:?}");
    let deq = s.histogram("delayq_proxy_batch_items", &[("queue", "orders"), ("proxy", "dequeue")]);
    assert_eq!(deq.iter().sum::<f64>(), 8.0, "items moved per round: {deq:?}");
}

/// The gauges while items wait: pending and due, sampled by an idle consumer.
#[test]
fn gauges_show_what_waits() {
    let rec = Recording::new();
    let clock = MockClock::new();
    let (tx, rx) = rec.build(|| Builder::new().name("g").clock(clock.clone()).build::<u32>().unwrap());
    let t0 = clock.now();
    for i in 0..5 {
        tx.send_at(i, t0 + ms(10)).unwrap();
    }
    for i in 0..3 {
        tx.send_at(i, t0 + ms(1000)).unwrap();
    }
    clock.advance(ms(10));
    // Five due in the egress, three in the index: nothing received yet.
    rx.peek_deadline();
    let s = rec.snapshot();
    let q = [("queue", "g")];
    assert_eq!(s.gauge("delayq_pending", &q), 8.0);
    assert_eq!(s.gauge("delayq_due", &q), 5.0);
    assert_eq!(s.counter("delayq_sent_total", &q), 8);
    assert_eq!(s.counter("delayq_received_total", &q), 0);
    for _ in 0..5 {
        rx.recv().unwrap();
    }
    assert!(rx.try_recv().is_err());
    let s = rec.snapshot();
    assert_eq!(s.gauge("delayq_pending", &q), 3.0);
    assert_eq!(s.gauge("delayq_due", &q), 0.0);
    // Counters are handed over and reset by each snapshot of this recorder.
    assert_eq!(s.counter("delayq_received_total", &q), 5);
}

/// Send errors, one per kind, labelled by kind; two queues told apart.
#[test]
fn send_errors_by_kind_and_queues_by_name() {
    let rec = Recording::new();
    let (tx, rx) = rec.build(|| Builder::new().name("small").capacity(1).build::<u32>().unwrap());
    let (tx2, rx2) = rec.build(|| Builder::new().name("other").build::<u32>().unwrap());
    tx.send_after(1, Duration::from_secs(60)).unwrap();
    assert!(tx.try_send_after(2, Duration::ZERO).unwrap_err().is_full());
    assert!(tx.try_send_after(3, Duration::ZERO).unwrap_err().is_full());
    assert!(tx.send_after_timeout(4, Duration::ZERO, ms(1)).unwrap_err().is_timeout());
    tx2.send_after(6, Duration::ZERO).unwrap();
    tx2.send_after(7, Duration::ZERO).unwrap();
    // A round trip through each enqueue role: every send before it is applied.
    rx.peek_deadline();
    rx2.peek_deadline();
    rx.close();
    assert!(tx.send_after(5, Duration::ZERO).is_err());
    let s = rec.snapshot();
    let err = |queue, kind| s.counter("delayq_send_errors_total", &[("queue", queue), ("error", kind)]);
    assert_eq!(err("small", "full"), 2);
    assert_eq!(err("small", "timeout"), 1);
    assert_eq!(err("small", "disconnected"), 1);
    assert_eq!(err("other", "full"), 0);
    assert_eq!(s.counter("delayq_sent_total", &[("queue", "small")]), 1);
    assert_eq!(s.counter("delayq_sent_total", &[("queue", "other")]), 2);
}

/// Whoever is present performs the roles (`src/role.rs`), on a system clock:
/// a stream of sends at least 100 µs apart, each due 2 ms after it is sent,
/// two blocking consumers. With helping on (the default) the proxy threads
/// perform nothing (`delayq_proxy_rounds_total` stays 0: every batch is a
/// producer's, every round a consumer's); with helping off they perform
/// everything. Either way every item comes out once, and none before its
/// deadline.
#[test]
fn a_paced_stream_leaves_the_proxy_threads_idle_with_helping_on() {
    const N: u32 = 1000;
    for helping in [true, false] {
        let rec = Recording::new();
        let name = if helping { "help-on" } else { "help-off" };
        let (tx, rx) = rec.build(|| Builder::new().name(name).helping(helping).build::<u32>().unwrap());
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let rx = rx.clone();
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    while let Ok(e) = rx.recv_entry() {
                        assert!(Instant::now() >= e.deadline(), "an item left before its deadline");
                        got.push(e.into_inner());
                    }
                    got
                })
            })
            .collect();
        drop(rx);
        for i in 0..N {
            // At least 100 µs after the last send, never a catch-up burst: a
            // lone producer sending flat out hands the role to the proxy
            // (`src/pace.rs`).
            std::thread::sleep(Duration::from_micros(100));
            tx.send_after(i, ms(2)).unwrap();
        }
        drop(tx);
        let mut all: Vec<u32> = consumers.into_iter().flat_map(|c| c.join().unwrap()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..N).collect::<Vec<_>>(), "helping {helping}: lost or duplicated items");
        let s = rec.snapshot();
        let proxy = |p| s.counter("delayq_proxy_rounds_total", &[("queue", name), ("proxy", p)]);
        if helping {
            assert_eq!(proxy("enqueue"), 0, "the enqueue proxy applied batches a producer was there for");
            assert_eq!(proxy("dequeue"), 0, "the dequeue proxy ran rounds a consumer was there for");
        } else {
            assert!(proxy("enqueue") > 0, "helping off: the enqueue proxy applied nothing");
            assert!(proxy("dequeue") > 0, "helping off: the dequeue proxy ran no round");
        }
    }
}

/// An async receiver cannot wait with a timeout: it asks the dequeue proxy to
/// lead for the next deadline, and the proxy runs that round
/// (`delayq_proxy_rounds_total{proxy="dequeue"}`), on a system clock.
#[test]
fn an_async_receiver_has_the_dequeue_proxy_run_the_round() {
    let rec = Recording::new();
    let (tx, rx) = rec.build(|| Builder::new().name("async").build::<u32>().unwrap());
    let at = Instant::now() + ms(20);
    tx.send_at(1, at).unwrap();
    assert_eq!(delayq::doc_block_on(rx.recv_async()), Ok(1));
    assert!(Instant::now() >= at, "early");
    let s = rec.snapshot();
    let rounds = s.counter("delayq_proxy_rounds_total", &[("queue", "async"), ("proxy", "dequeue")]);
    assert!(rounds >= 1, "the proxy did not run the round the task asked for");
}
