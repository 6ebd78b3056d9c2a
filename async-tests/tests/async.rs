//! delayq's async front-end under real executors: tokio (multi-thread and
//! current-thread) and `futures::executor`. Nothing lost, nothing early,
//! per-producer order; `select!` against a shutdown signal; futures dropped
//! mid-wait by the thousand (cancellation safety: no lost item, no lost wakeup);
//! streams with `StreamExt`; async sends waiting for room.

use delayq::{Builder, MockClock};
use futures::stream::StreamExt;
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// How long a test waits for something that must happen.
const WAIT: Duration = Duration::from_secs(20);

/// Item: (producer, sequence number, deadline offset in µs from `start`).
type Item = (usize, u64, u64);

/// Many producer threads, many consumer tasks on `rt`: every item received
/// once, never before its deadline, each producer's equal-deadline items in its
/// send order per consumer.
fn many_tasks_many_producers(rt: tokio::runtime::Runtime, tasks: usize) {
    const PRODUCERS: usize = 4;
    const PER: u64 = 2_000;
    let (tx, rx) = delayq::bounded::<Item>(256);
    let start = Instant::now();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for i in 0..PER {
                    let off = (i * 37 + p as u64 * 11) % 3_000;
                    tx.send_at((p, i, off), start + Duration::from_micros(off)).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let got = rt.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let rx = rx.clone();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    while let Ok(item) = rx.recv_async().await {
                        let now = Instant::now();
                        got.push((item, now));
                    }
                    got
                })
            })
            .collect();
        let mut all = Vec::new();
        for h in handles {
            all.push(h.await.unwrap());
        }
        all
    });
    for p in producers {
        p.join().unwrap();
    }
    let mut seen = HashSet::new();
    for per_task in &got {
        for &((p, i, off), at) in per_task {
            assert!(at >= start + Duration::from_micros(off), "item {p}/{i} received early");
            assert!(seen.insert((p, i)), "item {p}/{i} received twice");
        }
    }
    assert_eq!(seen.len(), PRODUCERS * PER as usize, "items lost");
}

#[test]
fn tokio_multi_thread_many_tasks_many_producers() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    many_tasks_many_producers(rt, 16);
}

#[test]
fn tokio_current_thread_many_tasks_many_producers() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    many_tasks_many_producers(rt, 8);
}

#[test]
fn futures_executor_stream_next_and_take_in_deadline_order() {
    let clock = MockClock::new();
    let (tx, rx) = Builder::new().clock(clock.clone()).build::<u32>().unwrap();
    for i in (0..10u32).rev() {
        tx.send_at(i, clock.now() + Duration::from_millis(u64::from(i))).unwrap();
    }
    clock.advance(Duration::from_millis(9));
    let first_five: Vec<u32> = futures::executor::block_on(rx.stream().take(5).collect());
    assert_eq!(first_five, [0, 1, 2, 3, 4]);
    drop(tx);
    let mut s = rx.into_stream();
    let rest: Vec<u32> = futures::executor::block_on(async {
        let mut v = Vec::new();
        while let Some(x) = s.next().await {
            v.push(x);
        }
        v
    });
    assert_eq!(rest, [5, 6, 7, 8, 9], "the stream ends once the queue is exhausted");
}

#[test]
fn select_with_a_shutdown_signal_that_fires_first_loses_no_item() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let (tx, rx) = delayq::unbounded::<u32>();
    tx.send_after(7, Duration::from_secs(3600)).unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    stop_tx.send(()).unwrap();
    let outcome = rt.block_on(async {
        tokio::select! {
            biased;
            _ = stop_rx => "shutdown",
            r = rx.recv_async() => { r.map(|_| "item").unwrap_or("closed") }
        }
    });
    assert_eq!(outcome, "shutdown");
    assert_eq!(rx.len(), 1, "the pending item is still there");
    let taken: Vec<u32> = rx.take_pending().into_iter().map(|(_, x)| x).collect();
    assert_eq!(taken, [7]);
}

/// A waker that counts its wakes.
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn poll_once<F: Future + Unpin>(f: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(waker))
}

#[test]
fn a_dropped_future_passes_its_wakeup_to_the_next_waiting_one() {
    // Two futures wait; one item falls due; the notified one is dropped without
    // polling again. The other must be woken and get the item. (System clock: a
    // mock clock's step wakes every waiter, which would hide a lost wakeup.)
    let (tx, rx) = delayq::unbounded::<u32>();
    let (wa, wb) = (Arc::new(Count(AtomicUsize::new(0))), Arc::new(Count(AtomicUsize::new(0))));
    let (wa_w, wb_w) = (Waker::from(wa.clone()), Waker::from(wb.clone()));
    let mut a = rx.recv_async();
    let mut b = rx.recv_async();
    assert!(poll_once(&mut a, &wa_w).is_pending());
    assert!(poll_once(&mut b, &wb_w).is_pending());
    tx.send_at(1, Instant::now()).unwrap(); // due at once: the dequeue proxy notifies one
    let deadline = Instant::now() + WAIT;
    while wa.0.load(Ordering::SeqCst) == 0 && wb.0.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "nobody was woken");
        std::thread::yield_now();
    }
    if wa.0.load(Ordering::SeqCst) > 0 {
        drop(a); // woken, never polled again: the wakeup must pass to b
        while wb.0.load(Ordering::SeqCst) == 0 {
            assert!(Instant::now() < deadline, "the wakeup was lost with the dropped future");
            std::thread::yield_now();
        }
        assert_eq!(poll_once(&mut b, &wb_w), Poll::Ready(Ok(1)));
    } else {
        assert_eq!(poll_once(&mut b, &wb_w), Poll::Ready(Ok(1)));
        drop(a);
    }
    assert_eq!(rx.len(), 0);
}

#[test]
fn thousands_of_futures_dropped_mid_wait_lose_no_item_and_no_wakeup() {
    // Two tasks await items; a third thread keeps registering futures and
    // dropping them after one poll (`now_or_never`), thousands of times, so that
    // wakeups meant for them must pass on to the awaiting tasks. Every item is
    // received once, and the awaiting tasks never hang.
    use futures::FutureExt;
    const ITEMS: u32 = 3_000;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    let (tx, rx) = delayq::unbounded::<u32>();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dropper = {
        let (rx, done) = (rx.clone(), done.clone());
        std::thread::spawn(move || {
            let (mut got, mut dropped) = (Vec::new(), 0u64);
            while !done.load(Ordering::SeqCst) {
                match rx.recv_async().now_or_never() {
                    Some(Ok(x)) => got.push(x),
                    Some(Err(_)) => break,
                    None => dropped += 1, // registered, polled once, dropped
                }
            }
            (got, dropped)
        })
    };
    let received = rt.block_on(async {
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let rx = rx.clone();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    while let Ok(x) = rx.recv_async().await {
                        got.push(x);
                    }
                    got
                })
            })
            .collect();
        let producer = tokio::task::spawn_blocking(move || {
            for i in 0..ITEMS {
                tx.send_after(i, Duration::from_micros(u64::from(i % 500))).unwrap();
                if i % 32 == 0 {
                    std::thread::sleep(Duration::from_micros(300));
                }
            }
        });
        producer.await.unwrap();
        let mut all = Vec::new();
        for c in consumers {
            all.extend(tokio::time::timeout(WAIT, c).await.expect("a consumer hung: lost wakeup").unwrap());
        }
        all
    });
    done.store(true, Ordering::SeqCst);
    let (by_dropper, dropped) = dropper.join().unwrap();
    assert!(dropped >= 1_000, "only {dropped} futures were dropped mid-wait");
    let mut all: Vec<u32> = received.into_iter().chain(by_dropper).collect();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "an item was received twice");
    assert_eq!(all, (0..ITEMS).collect::<Vec<_>>(), "items were lost");
}

#[test]
fn async_sends_wait_for_room_and_a_dropped_send_drops_its_item_once() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let (tx, rx) = delayq::bounded::<Arc<()>>(1);
    let token = Arc::new(());
    rt.block_on(async {
        tx.send_at_async(token.clone(), Instant::now()).await.unwrap();
        // Full: this send waits; cut it short. Its item must be dropped, not sent.
        let cut =
            tokio::time::timeout(Duration::from_millis(5), tx.send_at_async(token.clone(), Instant::now()));
        assert!(cut.await.is_err(), "a send on a full queue completed");
        assert_eq!(Arc::strong_count(&token), 2, "the dropped send's item was not dropped");
        // Room appears: a waiting send completes.
        let rx2 = rx.clone();
        let receiver = tokio::spawn(async move { rx2.recv_async().await.unwrap() });
        tx.send_at_async(token.clone(), Instant::now()).await.unwrap();
        drop(receiver.await.unwrap());
    });
    assert_eq!(tx.len(), 1);
    drop(tx);
    drop(rx);
    assert_eq!(Arc::strong_count(&token), 1, "every item dropped exactly once");
}

#[test]
fn recv_many_async_takes_what_is_due_and_entries_carry_keys() {
    let clock = MockClock::new();
    let (tx, rx) = Builder::new().clock(clock.clone()).build::<u32>().unwrap();
    let keys: Vec<_> = (0..5).map(|i| tx.send_at(i, clock.now()).unwrap()).collect();
    clock.advance(Duration::ZERO);
    let mut buf = Vec::new();
    let n = futures::executor::block_on(rx.recv_many_async(&mut buf, 3)).unwrap();
    assert_eq!((n, buf.clone()), (3, vec![0, 1, 2]));
    let e = futures::executor::block_on(rx.recv_entry_async()).unwrap();
    assert_eq!((e.key(), *e.get_ref()), (keys[3], 3));
    assert_eq!(futures::executor::block_on(rx.recv_many_async(&mut buf, 0)), Ok(0));
}
