//! Helpers shared by the integration tests (each test file includes this module;
//! not every file uses every helper).
#![allow(dead_code)]

use delayq::{Builder, MockClock, Receiver, Sender};
use std::thread;
use std::time::{Duration, Instant};

pub const HOUR: Duration = Duration::from_secs(3600);

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Multiplies iteration counts: `DELAYQ_TEST_SCALE=10 cargo test` for a heavier run.
pub fn scale() -> usize {
    std::env::var("DELAYQ_TEST_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1).max(1)
}

/// An unbounded queue on a fresh mock clock.
pub fn mock<T: Send + 'static>() -> (MockClock, Sender<T>, Receiver<T>) {
    let clock = MockClock::new();
    let (tx, rx) = Builder::new().clock(clock.clone()).build().unwrap();
    (clock, tx, rx)
}

/// A queue on a mock clock whose proxy threads are named `<prefix>-enqueue` and
/// `<prefix>-dequeue` (prefixes are unique per test: tests share the process).
pub fn mock_named<T: Send + 'static>(
    prefix: &str,
    cap: Option<usize>,
) -> (MockClock, Sender<T>, Receiver<T>) {
    let clock = MockClock::new();
    let b = Builder::new().clock(clock.clone()).thread_name_prefix(prefix);
    let b = match cap {
        Some(c) => b.capacity(c),
        None => b,
    };
    let (tx, rx) = b.build().unwrap();
    (clock, tx, rx)
}

/// How many threads of this process are named `name` (Linux truncates names to
/// 15 bytes; 0 where `/proc` is missing).
pub fn threads_named(name: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return 0 };
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

/// How many `<prefix>-enqueue` and `<prefix>-dequeue` threads run.
pub fn proxies(prefix: &str) -> (usize, usize) {
    (threads_named(&format!("{prefix}-enqueue")), threads_named(&format!("{prefix}-dequeue")))
}

/// Polls a condition that has no event to wait on (a thread naming itself or
/// leaving the kernel's task list), for at most 10 s.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        thread::sleep(ms(1));
    }
}

/// How long a test waits for an event (or `join` for a spawned thread) before
/// it fails; never reached when it passes.
pub const WAIT: Duration = Duration::from_secs(20);

/// Runs `f` on a new thread; [`join`] its result.
pub fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> std::sync::mpsc::Receiver<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || tx.send(f()).unwrap());
    rx
}

/// The result of a [`spawn`]ed thread, failing the test if it does not come
/// within [`WAIT`] (a hang fails instead of blocking the suite) or the thread
/// panicked.
pub fn join<T>(t: std::sync::mpsc::Receiver<T>) -> T {
    t.recv_timeout(WAIT).expect("the thread hung or panicked")
}

/// A value whose `Drop` panics while armed (and never during an unwind, which
/// would abort): for checking that the queue's threads survive user code.
#[derive(Clone, Debug, Default)]
pub struct Bomb(pub std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Bomb {
    /// An armed bomb.
    pub fn armed() -> Bomb {
        Bomb(std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true)))
    }

    /// Makes this bomb (and its clones) harmless.
    pub fn disarm(&self) {
        self.0.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn is_armed(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.is_armed() && !thread::panicking() {
            panic!("a user value's Drop panics");
        }
    }
}

/// A small seeded random number generator (xorshift64*), so the tests need no
/// dependency: the same seed gives the same choices.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn seed(seed: u64) -> Rng {
        // splitmix64 of the seed: no zero state, nearby seeds far apart.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `range` (which must not be empty).
    pub fn range<T: Sample>(&mut self, range: impl std::ops::RangeBounds<T>) -> T {
        use std::ops::Bound::*;
        let lo = match range.start_bound() {
            Included(&x) => x.to_u64(),
            Excluded(&x) => x.to_u64() + 1,
            Unbounded => 0,
        };
        let hi = match range.end_bound() {
            Included(&x) => x.to_u64(),
            Excluded(&x) => x.to_u64().checked_sub(1).expect("an empty range"),
            Unbounded => u64::MAX,
        };
        assert!(lo <= hi, "an empty range");
        let span = hi - lo;
        let x = if span == u64::MAX { self.next_u64() } else { self.next_u64() % (span + 1) };
        T::from_u64(lo + x)
    }

    /// `true` with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// Fisher-Yates.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.range(0..=i);
            v.swap(i, j);
        }
    }
}

/// Integers [`Rng::range`] draws.
pub trait Sample: Copy {
    fn to_u64(self) -> u64;
    fn from_u64(x: u64) -> Self;
}

impl Sample for u64 {
    fn to_u64(self) -> u64 {
        self
    }
    fn from_u64(x: u64) -> Self {
        x
    }
}

impl Sample for usize {
    fn to_u64(self) -> u64 {
        self as u64
    }
    fn from_u64(x: u64) -> Self {
        x as usize
    }
}

impl Sample for u32 {
    fn to_u64(self) -> u64 {
        u64::from(self)
    }
    fn from_u64(x: u64) -> Self {
        x as u32
    }
}

impl Sample for i32 {
    fn to_u64(self) -> u64 {
        u64::try_from(self).expect("a non-negative bound")
    }
    fn from_u64(x: u64) -> Self {
        x as i32
    }
}
