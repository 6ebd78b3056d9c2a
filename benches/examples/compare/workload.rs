//! The one workload every implementation runs, and the checks applied to it.
//!
//! P producers send N items in total (producer `p` sends ids `p, p+P, …`), each
//! with deadline = (time of its send) + uniform[0, D]; C consumers receive until
//! the queue reports it is closed and drained. Every consumer records, per item,
//! the lateness (receive time − deadline) in a log-linear histogram and the id it
//! got; afterwards the ids are counted, so a lost or duplicated item is found
//! whichever implementation produced it.
//!
//! An implementation is a set of boxed closures: one `send` per producer, one
//! `recv` per consumer (returning `None` once closed and drained), and an
//! `on_producers_done` hook (for the peers that need an explicit close). The
//! boxed call costs the same few ns for every implementation.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// The payload: 24 bytes (an `Instant` and an id).
#[derive(Clone, Copy, Debug)]
pub struct Item {
    pub deadline: Instant,
    pub id: u32,
}

/// How producers offer items.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// As fast as `send` returns.
    Unthrottled,
    /// This many items per second in total, spread evenly over the producers.
    Rate(f64),
}

#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub producers: usize,
    pub consumers: usize,
    pub items: usize,
    pub max_delay: Duration,
    pub pace: Pace,
}

/// A tiny xorshift generator (no rand features needed; each producer seeds its own).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Uniform in `[0, n]`.
    pub fn upto(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % (n + 1)
        }
    }
}

/// Log-linear histogram of nanosecond values: 32 sub-buckets per power of two
/// (≤ 3 % relative error), exact below 32 ns, plus the exact maximum.
#[derive(Clone, Debug)]
pub struct Hist {
    counts: Vec<u64>,
    pub total: u64,
    pub max: u64,
}

const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;

impl Default for Hist {
    fn default() -> Self {
        Hist { counts: vec![0; (64 - SUB_BITS as usize + 1) * SUB as usize], total: 0, max: 0 }
    }
}

impl Hist {
    fn index(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let e = 63 - v.leading_zeros(); // >= SUB_BITS
        let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
        ((e - SUB_BITS + 1) as u64 * SUB + sub) as usize
    }

    /// The smallest value that falls in bucket `i`.
    fn low(i: usize) -> u64 {
        let i = i as u64;
        if i < SUB {
            return i;
        }
        let e = i / SUB + u64::from(SUB_BITS) - 1;
        if e >= 64 {
            return u64::MAX;
        }
        let sub = i % SUB;
        (1 << e) | (sub << (e - u64::from(SUB_BITS)))
    }

    pub fn record(&mut self, v: u64) {
        self.counts[Self::index(v)] += 1;
        self.total += 1;
        self.max = self.max.max(v);
    }

    pub fn merge(&mut self, o: &Hist) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.total += o.total;
        self.max = self.max.max(o.max);
    }

    /// The value at quantile `q` (0..=1): the midpoint of its bucket, capped by max.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        if q >= 1.0 {
            return self.max;
        }
        let rank = ((q * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let lo = Self::low(i);
                let hi = Self::low(i + 1);
                return (lo + (hi - lo) / 2).min(self.max);
            }
        }
        self.max
    }
}

/// What one consumer saw.
#[derive(Default)]
pub struct Seen {
    pub ids: Vec<u32>,
    pub late: Hist,
    pub early: u64,
    pub earliest_ns: u64,
    pub last: Option<Instant>,
}

/// The checked, timed result of one run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub wall: Duration,
    pub cpu: Duration,
    pub received: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub early: u64,
    /// How early the earliest early item was, ns.
    pub earliest_ns: u64,
    pub late: Hist,
    pub peak_rss: u64,
    /// CPU time of the implementation's own threads (delayq's proxies, the tokio
    /// driver), from `/proc/self/task/*/schedstat`; zero for the peers without any.
    pub helper_cpu: Duration,
}

pub type SendFn = Box<dyn FnMut(Item) + Send>;
pub type RecvFn = Box<dyn FnMut() -> Option<Item> + Send>;

/// An implementation wired up for one run.
pub struct Plumbing {
    pub senders: Vec<SendFn>,
    pub receivers: Vec<RecvFn>,
    /// Called on the main thread after every producer has returned (and dropped
    /// its `send`): close the queue so that consumers end once it is drained.
    pub on_producers_done: Box<dyn FnOnce()>,
    /// Called after every consumer has returned: join helper threads and so on.
    pub on_finish: Box<dyn FnOnce()>,
}

/// Runs the workload through `plumbing` and checks the result.
pub fn run(cfg: &Config, plumbing: Plumbing) -> Outcome {
    let Plumbing { senders, receivers, on_producers_done, on_finish } = plumbing;
    assert_eq!(senders.len(), cfg.producers);
    assert_eq!(receivers.len(), cfg.consumers);
    let barrier = Arc::new(Barrier::new(cfg.producers + cfg.consumers + 1));
    let start_cell = Arc::new(std::sync::OnceLock::<Instant>::new());
    let per_consumer = cfg.items / cfg.consumers + 1;

    let mut consumers = Vec::new();
    for mut recv in receivers {
        let barrier = barrier.clone();
        let name = format!("consumer-{}", consumers.len());
        consumers.push(
            thread::Builder::new()
                .name(name)
                .spawn(move || {
                    let mut s = Seen { ids: Vec::with_capacity(per_consumer), ..Seen::default() };
                    barrier.wait();
                    while let Some(item) = recv() {
                        let now = Instant::now();
                        match now.checked_duration_since(item.deadline) {
                            Some(l) => s.late.record(l.as_nanos() as u64),
                            None => {
                                s.early += 1;
                                s.earliest_ns = s.earliest_ns.max((item.deadline - now).as_nanos() as u64);
                            }
                        }
                        s.ids.push(item.id);
                        s.last = Some(now);
                    }
                    drop(recv);
                    s
                })
                .expect("spawn consumer"),
        );
    }

    let mut producers = Vec::new();
    for (p, mut send) in senders.into_iter().enumerate() {
        let barrier = barrier.clone();
        let start_cell = start_cell.clone();
        let cfg = *cfg;
        producers.push(
            thread::Builder::new()
                .name(format!("producer-{p}"))
                .spawn(move || {
                    let mut rng = Rng::new(p as u64 + 1);
                    let d = cfg.max_delay.as_nanos() as u64;
                    barrier.wait();
                    // Set before the barrier by the main thread.
                    let start = *start_cell.get().expect("start time set before the barrier");
                    let mut id = p;
                    let mut k = 0u64;
                    while id < cfg.items {
                        if let Pace::Rate(r) = cfg.pace {
                            // Item k of producer p goes at slot k·P + p of the global schedule.
                            let slot = (k * cfg.producers as u64 + p as u64) as f64;
                            let at = start + Duration::from_secs_f64(slot / r);
                            let now = Instant::now();
                            if at > now {
                                thread::sleep(at - now);
                            }
                        }
                        let deadline = Instant::now() + Duration::from_nanos(rng.upto(d));
                        send(Item { deadline, id: id as u32 });
                        id += cfg.producers;
                        k += 1;
                    }
                    drop(send);
                })
                .expect("spawn producer"),
        );
    }

    let cpu0 = crate::sys::rusage_cpu();
    let start = Instant::now();
    let _ = start_cell.set(start);
    barrier.wait();
    for p in producers {
        p.join().expect("a producer panicked");
    }
    on_producers_done();
    let seen: Vec<Seen> = consumers.into_iter().map(|c| c.join().expect("a consumer panicked")).collect();
    let end = seen.iter().filter_map(|s| s.last).max().unwrap_or(start);
    // Read before `on_finish`, which lets the helper threads exit.
    let helper_ns: u64 = crate::sys::threads()
        .iter()
        .filter(|t| matches!(t.name.as_str(), "delayq-enqueue" | "delayq-dequeue" | "tokio-dq"))
        .map(|t| t.cpu_ns)
        .sum();
    on_finish();
    let cpu = crate::sys::rusage_cpu().saturating_sub(cpu0);

    let mut counts = vec![0u8; cfg.items];
    let mut late = Hist::default();
    let (mut received, mut early, mut earliest_ns, mut duplicated, mut invalid) = (0u64, 0, 0, 0u64, 0u64);
    for s in &seen {
        late.merge(&s.late);
        early += s.early;
        earliest_ns = earliest_ns.max(s.earliest_ns);
        for &id in &s.ids {
            received += 1;
            match counts.get_mut(id as usize) {
                Some(c) => {
                    if *c >= 1 {
                        duplicated += 1;
                    }
                    *c = c.saturating_add(1);
                }
                None => invalid += 1,
            }
        }
    }
    let lost = counts.iter().filter(|&&c| c == 0).count() as u64;
    Outcome {
        wall: end.saturating_duration_since(start),
        cpu,
        received,
        lost,
        duplicated: duplicated + invalid,
        early,
        earliest_ns,
        late,
        peak_rss: crate::sys::peak_rss(),
        helper_cpu: Duration::from_nanos(helper_ns),
    }
}

/// The floor of lateness on this machine at a paced rate: one thread sleeping
/// (`thread::sleep`, the default timer slack, like every consumer thread of
/// the workload) until evenly spaced deadlines at one consumer's share of the
/// offered rate (`rate / cfg.consumers`, `cfg.items / cfg.consumers` of them:
/// the same run length), each lateness recorded as a consumer records an
/// item's. A consumer that sleeps until an item is due cannot get it sooner
/// than its thread wakes up (Debian's `cyclictest` measures the same thing),
/// so a paced lateness reads as × this; a queue whose consumers are often
/// awake (busy) when an item falls due can do better than a lone sleeper
/// (whose idle vCPU also lets the full 50 µs timer slack apply). Throughput
/// is the offered rate by construction.
pub fn floor(cfg: &Config) -> Outcome {
    let Pace::Rate(rate) = cfg.pace else { panic!("floor: a paced rate is needed") };
    let per_thread = rate / cfg.consumers as f64;
    let n = (cfg.items / cfg.consumers).max(1);
    let mut late = Hist::default();
    let cpu0 = crate::sys::rusage_cpu();
    let start = Instant::now();
    // The first deadline 1 ms out, so the first sleep is a real one.
    let first = start + Duration::from_millis(1);
    for i in 0..n {
        let deadline = first + Duration::from_secs_f64(i as f64 / per_thread);
        let now = Instant::now();
        if deadline > now {
            thread::sleep(deadline - now);
        }
        late.record(Instant::now().saturating_duration_since(deadline).as_nanos() as u64);
    }
    Outcome {
        wall: start.elapsed(),
        cpu: crate::sys::rusage_cpu().saturating_sub(cpu0),
        // The run stands for the offered items (throughput = offered rate);
        // its lateness histogram holds the floor thread's `n` wake-ups.
        received: cfg.items as u64,
        lost: 0,
        duplicated: 0,
        early: 0,
        earliest_ns: 0,
        late,
        peak_rss: crate::sys::peak_rss(),
        helper_cpu: Duration::ZERO,
    }
}
