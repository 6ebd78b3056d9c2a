//! Stress: many producers and consumers (more threads than cores, scoped std
//! threads), with random delays, cancels and reschedules; then the invariants are
//! checked on everything that happened.
//!
//! - `system_clock_*`: real time. Exactly once (each item received once or
//!   cancelled once), never early (received no sooner than its last deadline),
//!   every item dropped once, and every thread returns. Deadline order per
//!   consumer is *not* checked here: an item whose deadline passes while its send
//!   still waits in the ingress (the enqueue proxy descheduled, which is routine
//!   with more threads than cores) leaves after later-deadline items already
//!   staged, by design; the count of such late arrivals is printed.
//! - `mock_clock_order_per_consumer`: the clock only moves while no send or
//!   reschedule is in flight (a `RwLock` gate), and every deadline is a future
//!   step of the clock, so every item is in the heap before it falls due. Then
//!   each consumer must see strictly increasing `(deadline, key)`.
//! - `drop_accounting_across_shutdowns`: every `T` dropped exactly once across the
//!   shutdown paths (all senders dropped, all receivers dropped with producers
//!   blocked or sending, `close` + `take_pending` racing with sends and receives).
//!
//! A watchdog fails a test whose threads do not all return in time (a lost
//! wakeup or a blocked thread), instead of hanging CI.
//!
//! Run: `cargo test --release --test stress -- --nocapture`. Scale:
//! `DELAYQ_STRESS_SCALE=100` (default 1, a few seconds per test on 2 cores)
//! multiplies every item count, to millions of operations. Each test prints its
//! seed; `DELAYQ_STRESS_SEED=<seed>` replays its random choices (the thread
//! interleaving is the scheduler's).

mod common;
use common::{ms, us, Rng};
use delayq::{Builder, Key, MockClock, Receiver, RecvTimeoutError, Sender};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

/// Multiplies item counts: `DELAYQ_STRESS_SCALE=100` for millions of operations.
fn stress_scale() -> usize {
    std::env::var("DELAYQ_STRESS_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1).max(1)
}

/// The test's seed: `DELAYQ_STRESS_SEED`, or a fresh one, printed either way.
fn seed(test: &str) -> u64 {
    let s = std::env::var("DELAYQ_STRESS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        t.as_nanos() as u64
    });
    println!("{test}: DELAYQ_STRESS_SEED={s} DELAYQ_STRESS_SCALE={}", stress_scale());
    s
}

/// Runs `f` on its own thread; fails if it has not returned within `limit`
/// (some thread is left blocked), and passes its panic on.
fn watchdog<R: Send + 'static>(name: &str, limit: Duration, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let h = thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let r = f();
            drop(done_tx);
            r
        })
        .expect("spawn the test body");
    match done_rx.recv_timeout(limit) {
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{name}: not finished after {limit:?}: some thread is left blocked")
        }
        _ => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
    }
}

fn limit() -> Duration {
    Duration::from_secs(120) * stress_scale() as u32
}

/// Drop counts, by item id.
type Drops = Arc<Vec<AtomicU8>>;

fn drop_table(n: usize) -> Drops {
    Arc::new((0..n).map(|_| AtomicU8::new(0)).collect())
}

/// A payload that counts its drops.
struct Counted {
    id: usize,
    drops: Drops,
}

impl Counted {
    fn new(id: usize, drops: &Drops) -> Counted {
        Counted { id, drops: drops.clone() }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        // Relaxed: read only after every thread is joined.
        self.drops[self.id].fetch_add(1, Ordering::Relaxed);
    }
}

/// Panics unless each of the first `made` items was dropped exactly once (and the
/// rest never made, so never dropped).
fn assert_dropped_once(drops: &Drops, made: impl Fn(usize) -> bool) {
    let bad: Vec<(usize, u8)> = drops
        .iter()
        .enumerate()
        .map(|(id, d)| (id, d.load(Ordering::Relaxed)))
        .filter(|&(id, d)| d != u8::from(made(id)))
        .take(20)
        .collect();
    assert!(bad.is_empty(), "items not dropped exactly once (id, drops), first 20: {bad:?}");
}

fn build<T: Send + 'static>(capacity: Option<usize>, clock: Option<&MockClock>) -> (Sender<T>, Receiver<T>) {
    build_helping(capacity, clock, true)
}

/// As `build`, with `Builder::helping` set: off, every piece of work is the
/// proxies'.
fn build_helping<T: Send + 'static>(
    capacity: Option<usize>,
    clock: Option<&MockClock>,
    helping: bool,
) -> (Sender<T>, Receiver<T>) {
    let mut b = Builder::new().helping(helping);
    if let Some(c) = capacity {
        b = b.capacity(c);
    }
    if let Some(c) = clock {
        b = b.clock(c.clone());
    }
    b.build().expect("build a queue")
}

/// One of the most recent `window` keys (those most likely still pending).
fn recent(rng: &mut Rng, keys: &[(Key, usize)], window: usize) -> (Key, usize) {
    let back = rng.range(0..keys.len().min(window));
    keys[keys.len() - 1 - back]
}

/// What a producer did: deadlines in force (the last one for an id wins, a lower
/// bound for `send_after`), keys, and what it cancelled or had refused.
#[derive(Default)]
struct ProducerLog {
    deadlines: Vec<(usize, Instant)>,
    keys: Vec<(usize, Key)>,
    cancelled: Vec<usize>,
    refused: Vec<usize>,
    /// Ids `first..first + made` were made (and so must be dropped once).
    first: usize,
    made: usize,
}

/// What a consumer received, in order, with the time read just after.
type ConsumerLog = Vec<(usize, Instant)>;

/// How a consumer receives.
#[derive(Clone, Copy, Debug)]
enum Style {
    Recv,
    Many,
    Timeout,
}

const STYLES: [Style; 3] = [Style::Recv, Style::Many, Style::Timeout];

/// Receives until the queue is exhausted (or `quota` items), logging each item with
/// `now()` read after it arrived. Returns the log.
fn consume(
    rx: &Receiver<Counted>,
    style: Style,
    quota: usize,
    now: impl Fn() -> Instant,
    log: &mut ConsumerLog,
) {
    let mut buf = Vec::new();
    while log.len() < quota {
        match style {
            Style::Recv => match rx.recv() {
                Ok(item) => log.push((item.id, now())),
                Err(_) => return,
            },
            Style::Many => match rx.recv_many(&mut buf, 32.min(quota - log.len())) {
                Ok(_) => {
                    let t = now();
                    log.extend(buf.drain(..).map(|item| (item.id, t)));
                }
                Err(_) => return,
            },
            Style::Timeout => match rx.recv_timeout(ms(1)) {
                Ok(item) => log.push((item.id, now())),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            },
        }
    }
}

/// Exactly once and never early over producer and consumer logs. With
/// `all_accounted`, each sent item must be received or cancelled (or taken);
/// otherwise at most one of them (the rest was dropped by the queue). Returns the
/// deadline in force of every item, by id.
fn check_outcomes(
    producers: &[ProducerLog],
    consumers: &[ConsumerLog],
    taken: &[usize],
    total: usize,
    all_accounted: bool,
) -> Vec<Option<Instant>> {
    let mut deadline: Vec<Option<Instant>> = vec![None; total];
    let mut outcomes = vec![0u8; total];
    for p in producers {
        for &(id, d) in &p.deadlines {
            deadline[id] = Some(d);
        }
    }
    for p in producers {
        for &id in p.cancelled.iter().chain(&p.refused) {
            outcomes[id] += 1;
        }
        for &id in &p.refused {
            assert!(deadline[id].is_none(), "item {id} was both sent and refused");
        }
    }
    for &id in taken {
        outcomes[id] += 1;
    }
    for c in consumers {
        for &(id, at) in c {
            outcomes[id] += 1;
            let d = deadline[id].unwrap_or_else(|| panic!("received item {id}, which was never sent"));
            assert!(at >= d, "item {id} received {:?} before its deadline", d - at);
        }
    }
    for (id, &n) in outcomes.iter().enumerate() {
        let sent = deadline[id].is_some();
        assert!(n <= 1, "item {id} came out {n} times");
        if all_accounted && sent {
            assert_eq!(n, 1, "item {id} was sent and never came out");
        }
    }
    deadline
}

/// Real time: `producers` senders and `consumers` receivers on a pool of as many
/// threads, delays up to `max_delay`, one cancel and one reschedule per 16 sends.
fn system_clock_pipeline(capacity: Option<usize>, producers: usize, consumers: usize, per: usize) {
    system_clock_pipeline_helping(capacity, producers, consumers, per, true);
}

fn system_clock_pipeline_helping(
    capacity: Option<usize>,
    producers: usize,
    consumers: usize,
    per: usize,
    helping: bool,
) {
    let name = format!("system_clock_pipeline(capacity {capacity:?}, helping {helping})");
    let seed = seed(&name);
    let max_delay_us = 2_000;
    let total = producers * per;
    let drops = drop_table(total);
    let d2 = drops.clone();
    let started = Instant::now();
    let (plogs, clogs) = watchdog(&name, limit(), move || {
        let drops = d2;
        let (tx, rx) = build_helping::<Counted>(capacity, None, helping);
        let plogs = Mutex::new(Vec::new());
        let clogs = Mutex::new(Vec::new());
        let txs: Vec<_> = (0..producers).map(|_| tx.clone()).collect();
        let rxs: Vec<_> = (0..consumers).map(|_| rx.clone()).collect();
        drop((tx, rx));
        std::thread::scope(|s| {
            for (p, tx) in txs.into_iter().enumerate() {
                let (drops, plogs) = (&drops, &plogs);
                s.spawn(move || {
                    let mut rng = Rng::seed(seed.wrapping_add(p as u64));
                    let mut log = ProducerLog::default();
                    let mut keys = Vec::new();
                    for i in 0..per {
                        let id = p * per + i;
                        let delay = us(rng.range(0..=max_delay_us));
                        let item = Counted::new(id, drops);
                        let key = if rng.chance(0.25) {
                            let lower = Instant::now() + delay;
                            let key = tx.send_after(item, delay).expect("a receiver is alive");
                            log.deadlines.push((id, lower));
                            key
                        } else {
                            let at = Instant::now() + delay;
                            let key = tx.send_at(item, at).expect("a receiver is alive");
                            log.deadlines.push((id, at));
                            key
                        };
                        keys.push((key, id));
                        log.made += 1;
                        match rng.range(0..16) {
                            0 => {
                                let (k, id) = recent(&mut rng, &keys, 64);
                                if let Some(item) = tx.cancel(k) {
                                    assert_eq!(item.id, id, "cancel returned another item");
                                    log.cancelled.push(id);
                                }
                            }
                            1 => {
                                let (k, id) = recent(&mut rng, &keys, 64);
                                let at = Instant::now() + us(rng.range(0..=max_delay_us));
                                if tx.reschedule(k, at) {
                                    log.deadlines.push((id, at));
                                }
                            }
                            _ => {}
                        }
                    }
                    drop(tx);
                    plogs.lock().unwrap().push(log);
                });
            }
            for (c, rx) in rxs.into_iter().enumerate() {
                let clogs = &clogs;
                s.spawn(move || {
                    let mut log = ConsumerLog::new();
                    consume(&rx, STYLES[c % 3], usize::MAX, Instant::now, &mut log);
                    assert!(rx.is_empty(), "consumer saw the end with items pending");
                    clogs.lock().unwrap().push(log);
                });
            }
        });
        (plogs.into_inner().unwrap(), clogs.into_inner().unwrap())
    });
    let deadline = check_outcomes(&plogs, &clogs, &[], total, true);
    assert_dropped_once(&drops, |_| true);
    let received: usize = clogs.iter().map(Vec::len).sum();
    let (mut late_arrivals, mut max_inversion) = (0, Duration::ZERO);
    let mut max_late = Duration::ZERO;
    for c in &clogs {
        for w in c.windows(2) {
            let (a, b) = (deadline[w[0].0].unwrap(), deadline[w[1].0].unwrap());
            if b < a {
                late_arrivals += 1;
                max_inversion = max_inversion.max(a - b);
            }
        }
        for &(id, at) in c {
            max_late = max_late.max(at - deadline[id].unwrap());
        }
    }
    println!(
        "{name}: {total} items ({received} received, {} cancelled) by {producers}+{consumers} threads \
         in {:?}; max lateness {max_late:?}; {late_arrivals} received after a later deadline \
         (by at most {max_inversion:?})",
        total - received,
        started.elapsed()
    );
}

#[test]
fn system_clock_unbounded_many_producers_and_consumers() {
    system_clock_pipeline(None, 8, 8, 40_000 * stress_scale());
}

#[test]
fn system_clock_bounded_many_producers_and_consumers() {
    system_clock_pipeline(Some(64), 8, 8, 12_000 * stress_scale());
}

/// The same pipelines with `Builder::helping(false)`: the proxies alone.
#[test]
fn system_clock_pipelines_without_helping() {
    system_clock_pipeline_helping(None, 8, 8, 20_000 * stress_scale(), false);
    system_clock_pipeline_helping(Some(64), 8, 8, 6_000 * stress_scale(), false);
}

/// Mock time, advanced by a driver thread while producers, cancellers and
/// consumers run: strict per-consumer order.
#[test]
fn mock_clock_order_per_consumer() {
    let name = "mock_clock_order_per_consumer";
    let seed = seed(name);
    let (producers, consumers) = (6, 6);
    let per = 40_000 * stress_scale();
    let total = producers * per;
    let step = ms(1);
    let drops = drop_table(total);
    let d2 = drops.clone();
    let clock = MockClock::new();
    let start = clock.now();
    let c2 = clock.clone();
    let started = Instant::now();
    let (plogs, clogs, steps) = watchdog(name, limit(), move || {
        let (drops, clock) = (d2, c2);
        let (tx, rx) = build::<Counted>(None, Some(&clock));
        // Sends and reschedules hold it shared; the clock steps hold it exclusively.
        let gate = RwLock::new(());
        let done = AtomicUsize::new(0);
        let plogs = Mutex::new(Vec::new());
        let clogs = Mutex::new(Vec::new());
        let mut steps = 0u64;
        let txs: Vec<_> = (0..producers).map(|_| tx.clone()).collect();
        let rxs: Vec<_> = (0..consumers).map(|_| rx.clone()).collect();
        drop(tx);
        std::thread::scope(|s| {
            for (p, tx) in txs.into_iter().enumerate() {
                let (drops, plogs, gate, done, clock) = (&drops, &plogs, &gate, &done, &clock);
                s.spawn(move || {
                    let mut rng = Rng::seed(seed.wrapping_add(p as u64));
                    let mut log = ProducerLog::default();
                    let mut keys = Vec::new();
                    for i in 0..per {
                        let id = p * per + i;
                        {
                            let _shared = gate.read().unwrap();
                            let at = clock.now() + step * rng.range(1..=8);
                            let key = tx.send_at(Counted::new(id, drops), at).expect("receivers alive");
                            log.deadlines.push((id, at));
                            log.keys.push((id, key));
                            keys.push((key, id));
                        }
                        if i % 32 == 0 {
                            // Let the clock move between bursts, so steps and sends interleave.
                            thread::yield_now();
                        }
                        match rng.range(0..16) {
                            0 => {
                                let (k, id) = recent(&mut rng, &keys, 64);
                                if let Some(item) = tx.cancel(k) {
                                    assert_eq!(item.id, id, "cancel returned another item");
                                    log.cancelled.push(id);
                                }
                            }
                            1 => {
                                let (k, id) = recent(&mut rng, &keys, 64);
                                let _shared = gate.read().unwrap();
                                let at = clock.now() + step * rng.range(1..=8);
                                if tx.reschedule(k, at) {
                                    log.deadlines.push((id, at));
                                }
                            }
                            _ => {}
                        }
                    }
                    drop(tx);
                    plogs.lock().unwrap().push(log);
                    done.fetch_add(1, Ordering::SeqCst);
                });
            }
            for (c, rx) in rxs.into_iter().enumerate() {
                let (clogs, clock) = (&clogs, &clock);
                s.spawn(move || {
                    let mut log = ConsumerLog::new();
                    let style = [Style::Recv, Style::Many][c % 2];
                    consume(&rx, style, usize::MAX, || clock.now(), &mut log);
                    clogs.lock().unwrap().push(log);
                });
            }
            let (gate, done, clock, steps) = (&gate, &done, &clock, &mut steps);
            s.spawn(move || {
                // Until every producer is done and every item is out.
                while done.load(Ordering::SeqCst) < producers || !rx.is_empty() {
                    {
                        let _exclusive = gate.write().unwrap();
                        clock.advance(step);
                    }
                    *steps += 1;
                    thread::yield_now();
                }
            });
        });
        (plogs.into_inner().unwrap(), clogs.into_inner().unwrap(), steps)
    });
    let deadline = check_outcomes(&plogs, &clogs, &[], total, true);
    assert_dropped_once(&drops, |_| true);
    let key: HashMap<usize, Key> = plogs.iter().flat_map(|p| p.keys.iter().copied()).collect();
    for (c, log) in clogs.iter().enumerate() {
        for w in log.windows(2) {
            let (a, b) = (w[0].0, w[1].0);
            assert!(
                (deadline[a], key[&a]) < (deadline[b], key[&b]),
                "consumer {c} received item {b} (deadline {:?}, {:?}) after item {a} ({:?}, {:?})",
                deadline[b].unwrap() - start,
                key[&b],
                deadline[a].unwrap() - start,
                key[&a],
            );
        }
    }
    let received: usize = clogs.iter().map(Vec::len).sum();
    println!(
        "{name}: {total} items ({received} received, {} cancelled) by {producers}+{consumers}+1 threads, \
         {steps} clock steps, in {:?}",
        total - received,
        started.elapsed()
    );
}

/// The shutdown paths whose drop accounting is checked.
#[derive(Clone, Copy, Debug)]
enum Shutdown {
    /// Producers send everything and drop their senders; consumers drain.
    AllSendersDropped,
    /// Consumers drop their receivers after a random share, while producers send
    /// (or block on a full bounded queue); later sends fail with the item back.
    AllReceiversDropped,
    /// A closer calls `close` then `take_pending` while producers send and
    /// consumers receive; later sends fail with the item back.
    CloseThenTakePending,
}

#[test]
fn drop_accounting_across_shutdowns() {
    let name = "drop_accounting_across_shutdowns";
    let seed = seed(name);
    let rounds = 24 * stress_scale();
    let started = Instant::now();
    let mut rng = Rng::seed(seed);
    let mut totals: HashMap<&'static str, (usize, usize)> = HashMap::new();
    for round in 0..rounds {
        let how =
            [Shutdown::AllSendersDropped, Shutdown::AllReceiversDropped, Shutdown::CloseThenTakePending]
                [round % 3];
        let producers = rng.range(2..=6);
        let consumers = rng.range(2..=6);
        let per = rng.range(200..=2_000);
        let capacity = rng.chance(0.5).then(|| rng.range(1..=32));
        let seed = rng.next_u64();
        let label =
            format!("{name} round {round}: {how:?}, {producers}+{consumers} threads, capacity {capacity:?}");
        let (received, dropped_by_queue) =
            watchdog(&label, limit(), move || shutdown_round(how, producers, consumers, per, capacity, seed));
        let e = totals.entry(match how {
            Shutdown::AllSendersDropped => "all senders dropped",
            Shutdown::AllReceiversDropped => "all receivers dropped",
            Shutdown::CloseThenTakePending => "close + take_pending",
        });
        let t = e.or_default();
        t.0 += received;
        t.1 += dropped_by_queue;
    }
    println!(
        "{name}: {rounds} rounds in {:?}; (received, dropped by the queue): {totals:?}",
        started.elapsed()
    );
}

/// One shutdown scenario; returns (items received, items the queue dropped).
fn shutdown_round(
    how: Shutdown,
    producers: usize,
    consumers: usize,
    per: usize,
    capacity: Option<usize>,
    seed: u64,
) -> (usize, usize) {
    let total = producers * per;
    let drops = drop_table(total);
    let (tx, rx) = build::<Counted>(capacity, None);
    let plogs = Mutex::new(Vec::new());
    let clogs = Mutex::new(Vec::new());
    let taken = Mutex::new(Vec::new());
    let txs: Vec<_> = (0..producers).map(|_| tx.clone()).collect();
    let rxs: Vec<_> = (0..consumers).map(|_| rx.clone()).collect();
    let closer = matches!(how, Shutdown::CloseThenTakePending).then(|| rx.clone());
    drop((tx, rx));
    std::thread::scope(|s| {
        for (p, tx) in txs.into_iter().enumerate() {
            let (drops, plogs) = (&drops, &plogs);
            s.spawn(move || {
                let mut rng = Rng::seed(seed.wrapping_add(p as u64));
                let mut log = ProducerLog { first: p * per, ..ProducerLog::default() };
                let mut keys = Vec::new();
                for i in 0..per {
                    let id = p * per + i;
                    log.made += 1;
                    let at = Instant::now() + us(rng.range(0..=300));
                    match tx.send_at(Counted::new(id, drops), at) {
                        Ok(key) => {
                            log.deadlines.push((id, at));
                            keys.push((key, id));
                        }
                        Err(e) => {
                            let item = e.into_inner();
                            assert_eq!(item.id, id, "a failed send handed back another item");
                            log.refused.push(id);
                            break;
                        }
                    }
                    if rng.range(0..8) == 0 {
                        let (k, id) = recent(&mut rng, &keys, 16);
                        if let Some(item) = tx.cancel(k) {
                            assert_eq!(item.id, id, "cancel returned another item");
                            log.cancelled.push(id);
                        }
                    }
                }
                drop(tx);
                plogs.lock().unwrap().push(log);
            });
        }
        for (c, rx) in rxs.into_iter().enumerate() {
            let clogs = &clogs;
            s.spawn(move || {
                let mut rng = Rng::seed(seed.wrapping_add(1000 + c as u64));
                let quota = match how {
                    Shutdown::AllReceiversDropped => rng.range(0..=total / consumers),
                    _ => usize::MAX,
                };
                let mut log = ConsumerLog::new();
                consume(&rx, STYLES[c % 3], quota, Instant::now, &mut log);
                drop(rx);
                clogs.lock().unwrap().push(log);
            });
        }
        if let Some(rx) = closer {
            let taken = &taken;
            s.spawn(move || {
                let mut rng = Rng::seed(seed.wrapping_add(2000));
                thread::sleep(us(rng.range(0..=3_000)));
                rx.close();
                let more: Vec<usize> = rx.take_pending().into_iter().map(|(_, item)| item.id).collect();
                taken.lock().unwrap().extend(more);
            });
        }
    });
    // Every handle is gone: both proxies are joined, everything is dropped.
    let plogs = plogs.into_inner().unwrap();
    let clogs = clogs.into_inner().unwrap();
    let taken = taken.into_inner().unwrap();
    let all_accounted = !matches!(how, Shutdown::AllReceiversDropped);
    check_outcomes(&plogs, &clogs, &taken, total, all_accounted);
    let mut made = vec![false; total];
    for log in &plogs {
        made[log.first..log.first + log.made].fill(true);
    }
    assert_dropped_once(&drops, |id| made[id]);
    let received: usize = clogs.iter().map(Vec::len).sum();
    let accounted =
        received + taken.len() + plogs.iter().map(|p| p.cancelled.len() + p.refused.len()).sum::<usize>();
    let made_n = made.iter().filter(|&&m| m).count();
    (received, made_n - accounted)
}
