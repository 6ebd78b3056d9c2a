//! The implementations under comparison, each wired into the workload's
//! `Plumbing`: `delayq` itself and the peers a Rust user would otherwise pick.
//!
//! - `delayq`, `delayq-bounded` (capacity [`BOUNDED_CAP`]): consumers call `recv`.
//! - `delayq-nohelp`: `delayq` with `Builder::helping(false)`: client threads
//!   never perform a proxy's role, the two proxy threads do all the work (the
//!   A/B of the role design).
//! - `delayq-nice`: `delayq` with `Builder::proxy_nice(`[`NICE`]`)`: its two proxy
//!   threads at a higher scheduler weight than the 2 × P client threads. Needs
//!   `CAP_SYS_NICE` (root, or a permissive `RLIMIT_NICE`); without it the run fails
//!   with the build error. Everything else runs at the default nice value.
//! - `delayq-batch`: unbounded, consumers call `recv_many(.., 64)` and hand the
//!   items out one at a time (lateness is taken at hand-out, so time spent in the
//!   consumer's local buffer counts).
//! - `std-heap`, `pl-heap`: `Mutex<BinaryHeap>` + `Condvar` with Java
//!   `DelayQueue`'s leader/follower waiting (one consumer, the leader, sleeps
//!   until the head's deadline; the others wait untimed), with std and with
//!   parking_lot locks.
//! - `tokio-dq`: tokio-util's `DelayQueue` owned by one task on a current-thread
//!   runtime, fed by a tokio unbounded mpsc, forwarding expired items to the
//!   consumer threads over a crossbeam channel (lateness measured where the
//!   task got the item: the hop is subtracted, `unstamp`).
//! - `delayq-async`: unbounded `delayq` with tokio tasks as its consumers: one
//!   task per consumer on a current-thread runtime awaits `recv_async` and
//!   forwards each item to the consumer threads over a crossbeam channel — the
//!   same shape as `tokio-dq`, so the two compare the async front-ends (the
//!   hop subtracted from the lateness, as for `tokio-dq`).
//! - `delayq-async-direct`: unbounded `delayq` awaited on the consumer threads
//!   themselves: each consumer thread owns a current-thread runtime and
//!   `block_on`s `recv_async` for every item, so the row differs from `delayq`
//!   only in how a receiver waits (a `Waker` and the runtime's park instead of
//!   the queue's own parker). No hop: the forwarding row above pays for its
//!   crossbeam hop's consumers, which spin and yield between the trickle of
//!   items (at 100 K/s, 16 × 16, they took about half the process's CPU in a
//!   `perf record`), and that CPU is the harness's, not the front-end's.
//! - `skiplist`: crossbeam-skiplist `SkipMap<(Instant, id), Item>` polled by the
//!   consumers (spin a little, then `yield_now`).
//! - `channel`: crossbeam-channel `bounded(1024)` with NO delay semantics: the
//!   hand-off ceiling. Its "lateness" is receive time − deadline as for the
//!   others, so it is negative (counted early) whenever D > 0; the harness skips
//!   the early check for it and runs it with D = 0 for the lateness columns.

use crate::workload::{Item, Plumbing, RecvFn, SendFn};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Capacity of `delayq-bounded` (and of the overload run).
pub const BOUNDED_CAP: usize = 65_536;

/// The proxies' nice value in `delayq-nice`.
pub const NICE: i32 = -10;

/// Every implementation, in report order.
pub const ALL: &[&str] = &[
    "delayq",
    "delayq-bounded",
    "delayq-nohelp",
    "delayq-nice",
    "delayq-batch",
    "delayq-async",
    "delayq-async-direct",
    "std-heap",
    "pl-heap",
    "tokio-dq",
    "skiplist",
    "channel",
];

/// Builds implementation `name` for `p` producers and `c` consumers.
pub fn build(name: &str, p: usize, c: usize) -> Plumbing {
    match name {
        "delayq" => delayq_plumbing(delayq::unbounded(), p, c, false),
        "delayq-bounded" => delayq_plumbing(delayq::bounded(BOUNDED_CAP), p, c, false),
        // `delayq-bounded-CAP`: the overload run's extra capacities.
        other if other.starts_with("delayq-bounded-") => {
            let cap = other["delayq-bounded-".len()..].parse().expect("delayq-bounded-CAPACITY");
            delayq_plumbing(delayq::bounded(cap), p, c, false)
        }
        "delayq-batch" => delayq_plumbing(delayq::unbounded(), p, c, true),
        // Every piece of work left to the proxy threads (`Builder::helping(false)`).
        "delayq-nohelp" => {
            delayq_plumbing(delayq::Builder::new().helping(false).build().expect("build"), p, c, false)
        }
        "delayq-nice" => {
            let q = delayq::Builder::new().proxy_nice(NICE).build().unwrap_or_else(|e| {
                panic!("delayq-nice: {e} (proxy_nice({NICE}) needs CAP_SYS_NICE or a permissive RLIMIT_NICE)")
            });
            delayq_plumbing(q, p, c, false)
        }
        "std-heap" => heap_plumbing(Arc::new(std_heap::HeapQueue::new()), p, c),
        "pl-heap" => heap_plumbing(Arc::new(pl_heap::HeapQueue::new()), p, c),
        "tokio-dq" => tokio_plumbing(p, c),
        "delayq-async" => delayq_async_plumbing(p, c),
        "delayq-async-direct" => delayq_async_direct_plumbing(p, c),
        "skiplist" => skiplist_plumbing(p, c),
        "channel" => channel_plumbing(p, c),
        other => panic!("unknown implementation {other:?}; known: {}", ALL.join(", ")),
    }
}

/// `p` senders, each a clone of `tx` that sends an item at its deadline.
fn delayq_senders(tx: &delayq::Sender<Item>, p: usize) -> Vec<SendFn> {
    (0..p)
        .map(|_| {
            let tx = tx.clone();
            Box::new(move |it: Item| {
                tx.send_at(it, it.deadline).expect("delayq: send failed while receivers live");
            }) as SendFn
        })
        .collect()
}

fn delayq_plumbing(
    (tx, rx): (delayq::Sender<Item>, delayq::Receiver<Item>),
    p: usize,
    c: usize,
    batch: bool,
) -> Plumbing {
    let senders = delayq_senders(&tx, p);
    let receivers = (0..c)
        .map(|_| {
            let rx = rx.clone();
            if batch {
                let (mut buf, mut pos) = (Vec::with_capacity(64), 0);
                Box::new(move || {
                    if pos == buf.len() {
                        buf.clear();
                        pos = 0;
                        rx.recv_many(&mut buf, 64).ok()?;
                    }
                    pos += 1;
                    Some(buf[pos - 1])
                }) as RecvFn
            } else {
                Box::new(move || rx.recv().ok()) as RecvFn
            }
        })
        .collect();
    // The last sender goes with the last producer closure: that closes the queue.
    drop(tx);
    Plumbing { senders, receivers, on_producers_done: Box::new(|| {}), on_finish: Box::new(move || drop(rx)) }
}

/// One leader/follower heap queue, generic over the lock flavour by macro (the
/// std and parking_lot APIs differ only in poisoning and how `wait` takes the
/// guard). Java's `DelayQueue.take()`:
///
/// ```text
/// lock; loop {
///   first = peek; if none: if closed return None; await
///   delay = first.deadline - now; if delay <= 0: return poll()
///   if leader != null: await                 // a follower
///   else: leader = me; awaitNanos(delay); if leader == me: leader = null
/// } finally { if leader == null && peek != null: signal }
/// ```
/// and `offer()` signals when the new item became the head (and clears the leader).
macro_rules! heap_queue {
    ($modname:ident, $lock:ident, $wait:ident, $wait_timeout:ident, $mutex:ty, $condvar:ty) => {
        pub mod $modname {
            use crate::workload::Item;
            use std::cmp::Reverse;
            use std::collections::BinaryHeap;
            use std::time::Instant;

            #[derive(PartialEq, Eq, PartialOrd, Ord)]
            struct Entry(Instant, u32);

            struct State {
                heap: BinaryHeap<Reverse<Entry>>,
                leader: Option<u64>,
                closed: bool,
            }

            pub struct HeapQueue {
                state: $mutex,
                available: $condvar,
            }

            impl HeapQueue {
                pub fn new() -> Self {
                    HeapQueue {
                        state: <$mutex>::new(State { heap: BinaryHeap::new(), leader: None, closed: false }),
                        available: <$condvar>::new(),
                    }
                }

                pub fn offer(&self, it: Item) {
                    let mut s = $lock!(&self.state);
                    s.heap.push(Reverse(Entry(it.deadline, it.id)));
                    if s.heap.peek().is_some_and(|Reverse(e)| e.1 == it.id) {
                        s.leader = None;
                        self.available.notify_one();
                    }
                }

                pub fn close(&self) {
                    let mut s = $lock!(&self.state);
                    s.closed = true;
                    self.available.notify_all();
                }

                /// Blocks until the head is due; `None` once closed and empty.
                pub fn take(&self, me: u64) -> Option<Item> {
                    let mut s = $lock!(&self.state);
                    let got = loop {
                        let Some(Reverse(first)) = s.heap.peek() else {
                            if s.closed {
                                break None;
                            }
                            s = $wait!(&self.available, s);
                            continue;
                        };
                        let now = Instant::now();
                        if first.0 <= now {
                            let Reverse(Entry(deadline, id)) = s.heap.pop().expect("peeked");
                            break Some(Item { deadline, id });
                        }
                        let delay = first.0 - now;
                        if s.leader.is_some() {
                            s = $wait!(&self.available, s);
                        } else {
                            s.leader = Some(me);
                            s = $wait_timeout!(&self.available, s, delay);
                            if s.leader == Some(me) {
                                s.leader = None;
                            }
                        }
                    };
                    // Java's `finally`, plus one addition for the harness's
                    // `close()`: once closed, each returning consumer passes the
                    // signal on, so untimed followers also see "closed and empty".
                    if s.leader.is_none() && (!s.heap.is_empty() || s.closed) {
                        self.available.notify_one();
                    }
                    got
                }
            }
        }
    };
}

macro_rules! std_lock {
    ($m:expr) => {
        $m.lock().unwrap()
    };
}
macro_rules! std_wait {
    ($cv:expr, $g:expr) => {
        $cv.wait($g).unwrap()
    };
}
macro_rules! std_wait_timeout {
    ($cv:expr, $g:expr, $d:expr) => {
        $cv.wait_timeout($g, $d).unwrap().0
    };
}
macro_rules! pl_lock {
    ($m:expr) => {
        $m.lock()
    };
}
macro_rules! pl_wait {
    ($cv:expr, $g:expr) => {{
        let mut g = $g;
        $cv.wait(&mut g);
        g
    }};
}
macro_rules! pl_wait_timeout {
    ($cv:expr, $g:expr, $d:expr) => {{
        let mut g = $g;
        $cv.wait_for(&mut g, $d);
        g
    }};
}

heap_queue!(std_heap, std_lock, std_wait, std_wait_timeout, std::sync::Mutex<State>, std::sync::Condvar);
heap_queue!(pl_heap, pl_lock, pl_wait, pl_wait_timeout, parking_lot::Mutex<State>, parking_lot::Condvar);

trait HeapLike: Send + Sync + 'static {
    fn offer(&self, it: Item);
    fn take(&self, me: u64) -> Option<Item>;
    fn close(&self);
}

impl HeapLike for std_heap::HeapQueue {
    fn offer(&self, it: Item) {
        std_heap::HeapQueue::offer(self, it)
    }
    fn take(&self, me: u64) -> Option<Item> {
        std_heap::HeapQueue::take(self, me)
    }
    fn close(&self) {
        std_heap::HeapQueue::close(self)
    }
}

impl HeapLike for pl_heap::HeapQueue {
    fn offer(&self, it: Item) {
        pl_heap::HeapQueue::offer(self, it)
    }
    fn take(&self, me: u64) -> Option<Item> {
        pl_heap::HeapQueue::take(self, me)
    }
    fn close(&self) {
        pl_heap::HeapQueue::close(self)
    }
}

fn heap_plumbing<Q: HeapLike>(q: Arc<Q>, p: usize, c: usize) -> Plumbing {
    let senders = (0..p)
        .map(|_| {
            let q = q.clone();
            Box::new(move |it: Item| q.offer(it)) as SendFn
        })
        .collect();
    let receivers = (0..c)
        .map(|i| {
            let q = q.clone();
            Box::new(move || q.take(i as u64)) as RecvFn
        })
        .collect();
    Plumbing {
        senders,
        receivers,
        on_producers_done: Box::new(move || q.close()),
        on_finish: Box::new(|| {}),
    }
}

/// An item forwarded by an async row's task to the consumer threads, with
/// when the task got it.
type Stamped = (Item, Instant);

fn stamp(it: Item) -> Stamped {
    (it, Instant::now())
}

/// The hop from the task to a consumer thread is the harness's, not the
/// front-end's: the deadline moves later by the hop, so the lateness the
/// consumer records (its receive time − deadline) is the task's, and an item
/// the task got early still counts as early. (CPU per item still includes the
/// hop.)
fn unstamp((it, got): Stamped) -> Item {
    Item { deadline: it.deadline + got.elapsed(), id: it.id }
}

fn delayq_async_plumbing(p: usize, c: usize) -> Plumbing {
    let (tx, rx) = delayq::unbounded::<Item>();
    let (fwd, out) = crossbeam_channel::unbounded::<Stamped>();
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
    let driver = std::thread::Builder::new()
        .name("delayq-async".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().build().expect("tokio runtime");
            rt.block_on(async move {
                let tasks: Vec<_> = (0..c)
                    .map(|_| {
                        let (rx, fwd) = (rx.clone(), fwd.clone());
                        tokio::spawn(async move {
                            while let Ok(it) = rx.recv_async().await {
                                let _ = fwd.send(stamp(it));
                            }
                        })
                    })
                    .collect();
                drop((rx, fwd));
                for t in tasks {
                    let _ = t.await;
                }
            });
            let _ = stop_rx.recv();
        })
        .expect("spawn delayq-async driver");
    let senders = delayq_senders(&tx, p);
    drop(tx);
    let receivers = (0..c)
        .map(|_| {
            let out = out.clone();
            Box::new(move || out.recv().ok().map(unstamp)) as RecvFn
        })
        .collect();
    drop(out);
    Plumbing {
        senders,
        receivers,
        on_producers_done: Box::new(|| {}),
        on_finish: Box::new(move || {
            drop(stop_tx);
            let _ = driver.join();
        }),
    }
}

fn delayq_async_direct_plumbing(p: usize, c: usize) -> Plumbing {
    let (tx, rx) = delayq::unbounded::<Item>();
    let senders = delayq_senders(&tx, p);
    drop(tx);
    let receivers = (0..c)
        .map(|_| {
            let rx = rx.clone();
            // Built on the consumer thread at its first call: a runtime belongs
            // to the thread that drives it.
            let mut rt: Option<tokio::runtime::Runtime> = None;
            Box::new(move || {
                let rt = rt.get_or_insert_with(|| {
                    tokio::runtime::Builder::new_current_thread().build().expect("tokio runtime")
                });
                rt.block_on(rx.recv_async()).ok()
            }) as RecvFn
        })
        .collect();
    drop(rx);
    Plumbing { senders, receivers, on_producers_done: Box::new(|| {}), on_finish: Box::new(|| {}) }
}

fn tokio_plumbing(p: usize, c: usize) -> Plumbing {
    use std::future::poll_fn;
    use std::task::Poll;
    use tokio_util::time::DelayQueue;

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Item>();
    let (fwd, out) = crossbeam_channel::unbounded::<Stamped>();
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
    let driver = std::thread::Builder::new()
        .name("tokio-dq".into())
        .spawn(move || {
            let rt =
                tokio::runtime::Builder::new_current_thread().enable_time().build().expect("tokio runtime");
            rt.block_on(async move {
                let mut dq: DelayQueue<Item> = DelayQueue::new();
                let mut input_open = true;
                poll_fn(|cx| {
                    // Take everything the producers sent (tokio's coop budget may
                    // cut this short; it then wakes us again).
                    while input_open {
                        match rx.poll_recv(cx) {
                            Poll::Ready(Some(it)) => {
                                dq.insert_at(it, tokio::time::Instant::from_std(it.deadline));
                            }
                            Poll::Ready(None) => input_open = false,
                            Poll::Pending => break,
                        }
                    }
                    // Forward everything expired.
                    loop {
                        match dq.poll_expired(cx) {
                            Poll::Ready(Some(e)) => {
                                let _ = fwd.send(stamp(e.into_inner()));
                            }
                            Poll::Ready(None) if !input_open => return Poll::Ready(()),
                            Poll::Ready(None) | Poll::Pending => return Poll::Pending,
                        }
                    }
                })
                .await;
            });
            // `fwd` dropped with the future: consumers see the disconnect once
            // drained. Stay alive until `on_finish` so the harness can read this
            // thread's CPU time.
            let _ = stop_rx.recv();
        })
        .expect("spawn tokio driver");
    let senders = (0..p)
        .map(|_| {
            let tx = tx.clone();
            Box::new(move |it: Item| tx.send(it).expect("tokio driver alive")) as SendFn
        })
        .collect();
    drop(tx);
    let receivers = (0..c)
        .map(|_| {
            let out = out.clone();
            Box::new(move || out.recv().ok().map(unstamp)) as RecvFn
        })
        .collect();
    drop(out);
    Plumbing {
        senders,
        receivers,
        on_producers_done: Box::new(|| {}),
        on_finish: Box::new(move || {
            drop(stop_tx);
            driver.join().expect("tokio driver panicked")
        }),
    }
}

fn skiplist_plumbing(p: usize, c: usize) -> Plumbing {
    use crossbeam_skiplist::SkipMap;
    let map: Arc<SkipMap<(Instant, u32), Item>> = Arc::new(SkipMap::new());
    let done = Arc::new(AtomicBool::new(false));
    let senders = (0..p)
        .map(|_| {
            let map = map.clone();
            Box::new(move |it: Item| {
                map.insert((it.deadline, it.id), it);
            }) as SendFn
        })
        .collect();
    let receivers = (0..c)
        .map(|_| {
            let map = map.clone();
            let done = done.clone();
            Box::new(move || {
                let mut spins = 0u32;
                loop {
                    match map.front() {
                        Some(e) if e.key().0 <= Instant::now() => {
                            // Only one consumer's `remove` wins the entry.
                            if e.remove() {
                                return Some(*e.value());
                            }
                            continue;
                        }
                        // Acquire: pairs with the release store after the
                        // producers joined, so an empty map then is final.
                        None if done.load(Ordering::Acquire) && map.is_empty() => return None,
                        _ => {}
                    }
                    if spins < 16 {
                        std::hint::spin_loop();
                        spins += 1;
                    } else {
                        std::thread::yield_now();
                    }
                }
            }) as RecvFn
        })
        .collect();
    Plumbing {
        senders,
        receivers,
        on_producers_done: Box::new(move || done.store(true, Ordering::Release)),
        on_finish: Box::new(|| {}),
    }
}

fn channel_plumbing(p: usize, c: usize) -> Plumbing {
    let (tx, rx) = crossbeam_channel::bounded::<Item>(1024);
    let senders = (0..p)
        .map(|_| {
            let tx = tx.clone();
            Box::new(move |it: Item| tx.send(it).expect("receivers alive")) as SendFn
        })
        .collect();
    drop(tx);
    let receivers = (0..c)
        .map(|_| {
            let rx = rx.clone();
            Box::new(move || rx.recv().ok()) as RecvFn
        })
        .collect();
    drop(rx);
    Plumbing { senders, receivers, on_producers_done: Box::new(|| {}), on_finish: Box::new(|| {}) }
}
