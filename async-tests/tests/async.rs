//! delayq's async front-end under real executors: tokio (multi-thread and
//! current-thread) and `futures::executor` (its `ThreadPool` and `block_on`).
//! Nothing lost, nothing early, deadline order per consumer (for items that were
//! in the index before they fell due); `select!` racing a receive against a
//! shutdown signal; futures dropped mid-wait by the thousand (cancellation
//! safety: no lost item, no lost wakeup); streams with `StreamExt`; async sends
//! waiting for room; a waker that panics when woken.

use delayq::{Builder, MockClock};
use futures::future::BoxFuture;
use futures::stream::StreamExt;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// How long a test waits for something that must happen.
const WAIT: Duration = Duration::from_secs(20);

/// `n` microseconds.
fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

/// Item: (producer, sequence number, deadline). A sequence number of
/// `u64::MAX` marks a producer's probe.
type Item = (usize, u64, Instant);

/// What one consumer task received: each item and when.
type Received = Vec<(Item, Instant)>;

/// Many producer threads, many consumer tasks run by `run` (which drives the
/// futures it is given to completion on some executor and returns their
/// outputs, in order): every item received once, never before its deadline, and
/// in order per consumer.
///
/// Order (crate docs, "Order"): among items that were in the index before they
/// fell due, each consumer sees nondecreasing deadlines, and one producer's
/// equal deadlines in its send order. Each producer sends batches with
/// nondecreasing deadlines (pairs of equal ones) about 10 ms ahead, then a probe
/// item it cancels at once: `cancel` answers after the enqueue proxy applied
/// every earlier command of this producer, so if it returns before the batch's
/// first deadline, the whole batch was in the index before falling due. The
/// order check covers exactly those batches (on a loaded machine a batch can
/// miss; at least half must qualify, or the check would say little).
fn many_tasks_many_producers(
    tasks: usize,
    run: impl FnOnce(Vec<BoxFuture<'static, Received>>) -> Vec<Received>,
) {
    const PRODUCERS: usize = 4;
    const BATCHES: u64 = 80;
    const BATCH: u64 = 25;
    const LEAD: Duration = Duration::from_millis(10);
    // At most about two batches per producer are pending: the sends never block
    // on the capacity, which would make a batch miss its deadlines.
    let (tx, rx) = delayq::bounded::<Item>(256);
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut last = Instant::now();
                let mut indexed = Vec::new(); // per batch: in the index before due
                for b in 0..BATCHES {
                    let base = (Instant::now() + LEAD).max(last);
                    for k in 0..BATCH {
                        let at = base + us(k / 2 * 40 + p as u64 * 10);
                        tx.send_at((p, b * BATCH + k, at), at).unwrap();
                        last = at;
                    }
                    let probe = tx.send_at((p, u64::MAX, base), base + WAIT).unwrap();
                    assert!(tx.cancel(probe).is_some(), "the probe was delivered");
                    indexed.push(Instant::now() < base);
                    // Let the batches overlap a little: the next starts 5 ms
                    // before this one falls due.
                    if let Some(wait) = (base - LEAD / 2).checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                }
                indexed
            })
        })
        .collect();
    drop(tx);
    let consumers = (0..tasks)
        .map(|_| {
            let rx = rx.clone();
            let task: BoxFuture<'static, Received> = Box::pin(async move {
                let mut got = Vec::new();
                while let Ok(item) = rx.recv_async().await {
                    got.push((item, Instant::now()));
                }
                got
            });
            task
        })
        .collect();
    let got = run(consumers);
    let indexed: Vec<Vec<bool>> = producers.into_iter().map(|p| p.join().unwrap()).collect();
    let qualified = indexed.iter().flatten().filter(|&&b| b).count();
    assert!(
        qualified * 2 >= PRODUCERS * BATCHES as usize,
        "only {qualified} of {} batches were in the index before falling due",
        PRODUCERS * BATCHES as usize
    );
    eprintln!("{qualified} of {} batches in the index before falling due", PRODUCERS * BATCHES as usize);
    let mut seen = HashSet::new();
    for per_task in &got {
        let mut last_deadline = None;
        let mut last_of = HashMap::new();
        for &((p, i, at), when) in per_task {
            assert!(when >= at, "item {p}/{i} received early");
            assert!(seen.insert((p, i)), "item {p}/{i} received twice");
            if !indexed[p][(i / BATCH) as usize] {
                continue;
            }
            assert!(last_deadline <= Some(at), "item {p}/{i} received after a later deadline");
            last_deadline = Some(at);
            if let Some(prev) = last_of.insert(p, (at, i)) {
                assert!(prev < (at, i), "producer {p}: item {i} received after {prev:?}");
            }
        }
    }
    assert_eq!(seen.len(), PRODUCERS * (BATCHES * BATCH) as usize, "items lost");
}

/// Runs the futures as tasks on the tokio runtime `rt`.
fn on_tokio(rt: tokio::runtime::Runtime) -> impl FnOnce(Vec<BoxFuture<'static, Received>>) -> Vec<Received> {
    move |tasks| {
        rt.block_on(async {
            let handles: Vec<_> = tasks.into_iter().map(tokio::spawn).collect();
            let mut all = Vec::new();
            for h in handles {
                all.push(h.await.unwrap());
            }
            all
        })
    }
}

#[test]
fn tokio_multi_thread_many_tasks_many_producers() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    many_tasks_many_producers(16, on_tokio(rt));
}

#[test]
fn tokio_current_thread_many_tasks_many_producers() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    many_tasks_many_producers(8, on_tokio(rt));
}

#[test]
fn futures_thread_pool_many_tasks_many_producers() {
    use futures::task::SpawnExt;
    let pool = futures::executor::ThreadPool::builder().pool_size(2).create().unwrap();
    many_tasks_many_producers(16, move |tasks| {
        let handles: Vec<_> = tasks.into_iter().map(|t| pool.spawn_with_handle(t).unwrap()).collect();
        futures::executor::block_on(futures::future::join_all(handles))
    });
}

#[test]
fn futures_block_on_threads_many_tasks_many_producers() {
    // No executor at all: each consumer is `block_on` on a thread of its own.
    many_tasks_many_producers(4, |tasks| {
        let threads: Vec<_> =
            tasks.into_iter().map(|t| std::thread::spawn(move || futures::executor::block_on(t))).collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
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
fn select_racing_a_receive_against_a_shutdown_loses_no_item_and_duplicates_none() {
    // Each round: an item due in 2 ms; a receive future polled (registered and
    // waiting) in `select!` against a shutdown signal fired by another thread
    // somewhere from 1 ms before to 1 ms after the deadline. Whichever wins, the
    // item is exactly one of: received by the select, or still in the queue
    // (`take_pending` returns it). Never lost with the dropped future, never both.
    const ROUNDS: u64 = 200;
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let (tx, rx) = delayq::unbounded::<u64>();
    let (mut received, mut left) = (0, 0);
    for i in 0..ROUNDS {
        let due = Instant::now() + us(2_000);
        tx.send_at(i, due).unwrap();
        let fire_at = due - us(1_000) + us(i * 2_000 / ROUNDS);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let stopper = std::thread::spawn(move || {
            if let Some(wait) = fire_at.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let _ = stop_tx.send(()); // refused if the item won: the select is over
        });
        let got = rt.block_on(async {
            tokio::select! {
                r = rx.recv_async() => Some(r.expect("the queue is open")),
                _ = stop_rx => None,
            }
        });
        stopper.join().unwrap();
        let rest: Vec<u64> = rx.take_pending().into_iter().map(|(_, x)| x).collect();
        match got {
            Some(x) => {
                assert_eq!((x, rest), (i, vec![]), "round {i}: received, and yet still in the queue");
                received += 1;
            }
            None => {
                assert_eq!(rest, [i], "round {i}: the shutdown won and the item was lost");
                left += 1;
            }
        }
        assert_eq!(rx.len(), 0);
    }
    eprintln!("{ROUNDS} rounds: received {received}, left in the queue {left}");
    // Both outcomes, or the race was not run.
    assert!(received > 0 && left > 0, "received {received}, left in the queue {left}");
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
    // Rounds. In each, while the queue is empty, main registers 4 futures (polled
    // once) — the oldest waiters, so the dequeue proxy's notifications go to
    // them first; then two consumer tasks each start awaiting one item; two
    // items fall due within 300 µs; and main drops its 4 futures, unpolled, at
    // some point in that window. A notification taken by a dropped future must
    // pass on to a consumer. Nothing else wakes a consumer (no close, no polling
    // thread taking items, no further sends until the round is done): a lost
    // wakeup leaves a consumer hanging and the round times out.
    const ROUNDS: u64 = 1_000;
    const DOOMED: usize = 4;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let (tx, rx) = delayq::unbounded::<u64>();
    let (out_tx, out) = mpsc::channel::<u64>();
    let (gos, consumers): (Vec<_>, Vec<_>) = (0..2)
        .map(|_| {
            let (go, mut round) = tokio::sync::mpsc::unbounded_channel::<()>();
            let (rx, out_tx) = (rx.clone(), out_tx.clone());
            let task = rt.spawn(async move {
                while round.recv().await.is_some() {
                    out_tx.send(rx.recv_async().await.unwrap()).unwrap();
                }
            });
            (go, task)
        })
        .unzip();
    let woken = Arc::new(Count(AtomicUsize::new(0)));
    let waker = Waker::from(woken.clone());
    let mut got = Vec::new();
    for r in 0..ROUNDS {
        let mut doomed: Vec<_> = (0..DOOMED).map(|_| rx.recv_async()).collect();
        for f in &mut doomed {
            assert!(poll_once(f, &waker).is_pending(), "round {r}: an item was left over");
        }
        for go in &gos {
            go.send(()).unwrap();
        }
        let due = us(r % 4 * 100);
        tx.send_after(2 * r, due).unwrap();
        tx.send_after(2 * r + 1, due).unwrap();
        let drop_at = Instant::now() + us(r * 37 % 300);
        while Instant::now() < drop_at {
            std::hint::spin_loop();
        }
        drop(doomed);
        for _ in 0..2 {
            got.push(
                out.recv_timeout(WAIT).unwrap_or_else(|_| {
                    panic!("round {r}: a consumer hung: a dropped future kept its wakeup")
                }),
            );
        }
    }
    drop(gos);
    rt.block_on(async {
        for c in consumers {
            c.await.unwrap();
        }
    });
    got.sort_unstable();
    assert_eq!(got, (0..2 * ROUNDS).collect::<Vec<_>>(), "items lost or received twice");
    assert_eq!(rx.len(), 0);
    drop(tx);
    // The pass-on ran: some notifications went to the futures that were dropped.
    let passed_on = woken.0.load(Ordering::SeqCst);
    eprintln!("{passed_on} wakeups of {ROUNDS} rounds went to futures then dropped");
    assert!(passed_on > 0, "no dropped future was ever notified: nothing was passed on");
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

/// A waker whose `wake` panics (a broken executor), after counting.
struct Boom(AtomicUsize);

impl Wake for Boom {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
        panic!("a waker panics (expected by the test)");
    }
}

#[test]
fn a_panicking_waker_kills_no_thread_of_the_queue_and_loses_no_wakeup() {
    // The oldest waiting future's waker panics when the item falls due: the
    // thread that wakes it (a proxy, or a helping client) survives, the
    // future then dropped unpolled passes the wake-up on, and the queue goes
    // on working. (Before wakes were contained, the dequeue proxy died on it
    // and the queue disconnected.)
    let (tx, rx) = delayq::unbounded::<u32>();
    let (wa, wb) = (Arc::new(Boom(AtomicUsize::new(0))), Arc::new(Count(AtomicUsize::new(0))));
    let (wa_w, wb_w) = (Waker::from(wa.clone()), Waker::from(wb.clone()));
    let mut a = rx.recv_async();
    assert!(poll_once(&mut a, &wa_w).is_pending());
    let mut b = rx.recv_async();
    assert!(poll_once(&mut b, &wb_w).is_pending());
    tx.send_at(1, Instant::now()).expect("a panicking waker cannot fail this send");
    let deadline = Instant::now() + WAIT;
    while wa.0.load(Ordering::SeqCst) == 0 && wb.0.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "nobody was woken");
        std::thread::yield_now();
    }
    drop(a); // its executor never polls it again
    while wb.0.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the wake-up was lost with the panicking waker's future");
        std::thread::yield_now();
    }
    assert_eq!(poll_once(&mut b, &wb_w), Poll::Ready(Ok(1)));
    // Both proxies still run: a due send and a later one come out, in order.
    // One base instant: two clock reads could be 5 ms apart on a loaded
    // machine, and then 3 would be due first.
    let now = Instant::now();
    tx.send_at(3, now + Duration::from_millis(5)).expect("the queue is still connected");
    tx.send_at(2, now).expect("the queue is still connected");
    assert_eq!(rx.recv_timeout(WAIT), Ok(2));
    assert_eq!(rx.recv_timeout(WAIT), Ok(3));
    assert_eq!(rx.len(), 0);
}
