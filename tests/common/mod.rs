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

/// How long `join` waits for a spawned thread before failing the test.
pub const JOIN_WAIT: Duration = Duration::from_secs(20);

/// Runs `f` on a new thread; [`join`] its result.
pub fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> std::sync::mpsc::Receiver<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || tx.send(f()).unwrap());
    rx
}

/// The result of a [`spawn`]ed thread, failing the test if it does not come
/// within `JOIN_WAIT` (a hang fails instead of blocking the suite) or the thread
/// panicked.
pub fn join<T>(t: std::sync::mpsc::Receiver<T>) -> T {
    t.recv_timeout(JOIN_WAIT).expect("the thread hung or panicked")
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
