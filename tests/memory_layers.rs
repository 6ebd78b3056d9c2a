//! The layers' maps give their memory back after a burst (issue 23): a
//! counting global allocator measures the bytes live before a burst of
//! timers (`delayq::timer`) or keys (`delayq::workqueue`) and after it is
//! done, with the scheduler or work queue alive throughout.

#[path = "common/counting.rs"]
mod counting;

use counting::{assert_returned, live, settles_to, TEST_LOCK};
use delayq::timer::Scheduler;
use delayq::workqueue::WorkQueue;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn burst() -> u64 {
    let default = if cfg!(debug_assertions) { 100_000 } else { 1_000_000 };
    std::env::var("DELAYQ_BURST").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn a_burst_of_timers_gives_its_memory_back() {
    let _g = TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let n = burst();
    let sched = Scheduler::new();
    let fired = Arc::new(AtomicU64::new(0));
    // Warm up: the pool's threads and buffers.
    let f = fired.clone();
    sched.schedule_after(Duration::ZERO, move || {
        f.fetch_add(1, Ordering::Relaxed);
    });
    while fired.load(Ordering::Relaxed) < 1 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let before = settles_to(live(), 0);
    // Half fire, half are cancelled.
    let mut ids = Vec::with_capacity(n as usize / 2);
    for i in 0..n {
        let f = fired.clone();
        let id = sched.schedule_after(Duration::from_millis(200 + i % 300), move || {
            f.fetch_add(1, Ordering::Relaxed);
        });
        if i % 2 == 1 {
            ids.push(id);
        }
    }
    let peak = live();
    let cancelled = ids.into_iter().filter(|id| sched.cancel(*id)).count() as u64;
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while fired.load(Ordering::Relaxed) + cancelled < n + 1 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(fired.load(Ordering::Relaxed) + cancelled, n + 1, "every timer fired or was cancelled");
    assert_returned(&format!("{n} timers"), before, peak);
}

#[test]
fn a_burst_of_keys_gives_its_memory_back() {
    let _g = TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let n = burst();
    let q: WorkQueue<u64> = WorkQueue::new();
    q.add(u64::MAX);
    let k = q.get().unwrap();
    q.done(&k);
    let before = settles_to(live(), 0);
    // Half straight in, half through the delay stage; all processed.
    for i in 0..n {
        if i % 2 == 0 {
            q.add(i);
        } else {
            q.add_after(i, Duration::from_millis(50));
        }
    }
    let peak = live();
    for _ in 0..n {
        let k = q.get().expect("an item");
        q.done(&k);
    }
    assert_eq!(q.len(), 0);
    assert_returned(&format!("{n} work-queue keys"), before, peak);
}
