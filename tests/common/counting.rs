//! A global allocator that counts, for the memory tests: bytes live,
//! allocations, and allocations of `BIG` bytes or more. Included by each
//! memory test file (`#[path]`): a test binary has one global allocator, and
//! it counts the whole process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Counting;

pub static LIVE: AtomicI64 = AtomicI64::new(0);
pub static ALLOCS: AtomicU64 = AtomicU64::new(0);
/// Allocations of `BIG` bytes or more: the index's pages and node buffers.
pub static BIG_ALLOCS: AtomicU64 = AtomicU64::new(0);
pub const BIG: usize = 64 << 10;

// SAFETY: every method forwards to the system allocator with the caller's
// arguments unchanged; the counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as i64, Ordering::Relaxed);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BIG_ALLOCS.fetch_add(u64::from(l.size() >= BIG), Ordering::Relaxed);
        // SAFETY: the caller's duties are `System.alloc`'s.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as i64, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as i64 - l.size() as i64, Ordering::Relaxed);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BIG_ALLOCS.fetch_add(u64::from(new >= BIG), Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The tests of one file run one at a time: the counters are process-wide.
pub static TEST_LOCK: Mutex<()> = Mutex::new(());

pub const MIB: i64 = 1 << 20;

pub fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

/// Waits (at most 10 s) until the bytes live are within `slack` of `base`:
/// the queues hand memory back on their own threads (the dequeue proxy trims
/// its index once it has stayed empty 1 s).
pub fn settles_to(base: i64, slack: i64) -> i64 {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let l = live();
        if l - base <= slack || Instant::now() > until {
            return l;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for the bytes live to come back within 1 MiB of `before` (see
/// [`settles_to`]), prints before / peak / after for `what`, and fails if
/// they do not.
#[track_caller]
pub fn assert_returned(what: &str, before: i64, peak: i64) {
    let after = settles_to(before, MIB);
    let mib = |b: i64| b as f64 / MIB as f64;
    eprintln!(
        "{what}: live bytes before {before}, peak {peak} (+{:.1} MiB), after {after} (+{:.1} KiB)",
        mib(peak - before),
        (after - before) as f64 / 1024.0
    );
    assert!(
        after - before <= MIB,
        "{what}: kept {:.2} MiB after the burst (peak +{:.1} MiB)",
        mib(after - before),
        mib(peak - before)
    );
}
