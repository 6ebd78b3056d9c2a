//! Scale check (issue 4, item 4): 10,000,000 pending items of `T = u64`.
//!
//! 1. Send rate: `--producers` threads (default 1) send N items, deadlines uniform
//!    in [start + H, start + H + S] (H = `--horizon`, default 15 s; S = `--spread`,
//!    default 2 s), so all are pending together.
//! 2. Memory per pending item: (RSS with N pending − RSS of the empty queue) / N,
//!    and that minus `size_of::<T>()` (target ≤ 32 bytes beyond the payload).
//! 3. Drain: `--consumers` threads (default 2) `recv_many` everything once due;
//!    every item is checked: received once, never before its deadline.
//! 4. Memory after the drain (queue still alive), after `malloc_trim(0)` (what
//!    glibc keeps vs what the queue keeps), and after the queue is dropped.
//!
//!
//! With `--far-stream N` it measures instead what one never-due item costs while
//! N items stream through: one item due in a century, then N sends due at once,
//! each received (by one producer and one consumer thread). The key table's page
//! list spans the keys from the far item to the newest one; the RSS growth, and
//! the growth per million keys, are printed.
//!
//! ```text
//! cargo run --release -p delayq-bench --example scale [-- --items 10000000 --producers 1 --consumers 2 --horizon 15 --spread 2]
//! cargo run --release -p delayq-bench --example scale -- --far-stream 100000000
//! ```

#[path = "compare/sys.rs"]
mod sys;

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Payload layout: deadline (µs after start) in the high 36 bits, id in the low 28.
const ID_BITS: u32 = 28;

fn arg(args: &[String], name: &str, default: f64) -> f64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.replace('_', "").parse().unwrap_or_else(|_| panic!("bad value for {name}: {v}")))
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("cargo run --release -p delayq-bench --example scale [-- --items N --producers P --consumers C --horizon SECS --spread SECS]");
        return;
    }
    let far_stream = arg(&args, "--far-stream", 0.0) as u64;
    if far_stream > 0 {
        return stream_past_a_far_item(far_stream);
    }
    let n = arg(&args, "--items", 10_000_000.0) as u64;
    let producers = (arg(&args, "--producers", 1.0) as u64).max(1);
    let consumers = (arg(&args, "--consumers", 2.0) as usize).max(1);
    let horizon_us = (arg(&args, "--horizon", 15.0) * 1e6) as u64;
    let spread_us = ((arg(&args, "--spread", 2.0) * 1e6) as u64).max(1);
    assert!(n < 1 << ID_BITS, "--items must be below 2^{ID_BITS}");
    println!("scale: {}", sys::machine_line());

    let (tx, rx) = delayq::unbounded::<u64>();
    let rss_empty = sys::rss();
    let start = Instant::now();

    // 1. Send.
    let barrier = Arc::new(Barrier::new(producers as usize + 1));
    let senders: Vec<_> = (0..producers)
        .map(|p| {
            let tx = tx.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut x = (p + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                barrier.wait();
                for id in (p..n).step_by(producers as usize) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let due_us = horizon_us + x % spread_us;
                    tx.send_at((due_us << ID_BITS) | id, start + Duration::from_micros(due_us))
                        .expect("send");
                }
            })
        })
        .collect();
    barrier.wait();
    let t_send = Instant::now();
    for s in senders {
        s.join().expect("producer panicked");
    }
    let send_secs = t_send.elapsed().as_secs_f64();
    let _ = rx.peek_deadline(); // every insert is in the index once this is answered
    let index_secs = t_send.elapsed().as_secs_f64();
    let pending = tx.len() as u64;
    let rss_full = sys::rss();
    let per_item = rss_full.saturating_sub(rss_empty) as f64 / pending.max(1) as f64;
    let beyond = per_item - std::mem::size_of::<u64>() as f64;
    println!(
        "scale: sent {n} items from {producers} producer(s) in {send_secs:.2} s = {:.2} M sends/s \
         (all indexed after {index_secs:.2} s = {:.2} M items/s)",
        n as f64 / send_secs / 1e6,
        n as f64 / index_secs / 1e6
    );
    let came_due = start.elapsed() > Duration::from_micros(horizon_us);
    println!(
        "scale: pending {pending}; RSS empty queue {}, with {pending} pending {}: {per_item:.2} bytes per pending item, \
         {beyond:.2} beyond size_of::<u64>() = 8 (target ≤ 32): {}{}",
        sys::mib(rss_empty),
        sys::mib(rss_full),
        if beyond <= 32.0 { "PASS" } else { "FAIL" },
        if came_due { " (WARNING: the send phase outlasted the horizon; raise --horizon)" } else { "" }
    );

    // 3. Drain.
    let counts: Arc<Vec<AtomicU8>> = Arc::new((0..n).map(|_| AtomicU8::new(0)).collect());
    let early = Arc::new(AtomicU64::new(0));
    let max_late_ns = Arc::new(AtomicU64::new(0));
    let received = Arc::new(AtomicU64::new(0));
    let drainers: Vec<_> = (0..consumers)
        .map(|_| {
            let rx = rx.clone();
            let (counts, early, max_late_ns, received) =
                (counts.clone(), early.clone(), max_late_ns.clone(), received.clone());
            std::thread::spawn(move || {
                let mut buf = Vec::with_capacity(1024);
                let mut last = start;
                // Ends with RecvError once the main thread closes the drained queue.
                while rx.recv_many(&mut buf, 1024).is_ok() {
                    let now = Instant::now();
                    for v in buf.drain(..) {
                        let due = start + Duration::from_micros(v >> ID_BITS);
                        match now.checked_duration_since(due) {
                            Some(l) => {
                                max_late_ns.fetch_max(l.as_nanos() as u64, Ordering::Relaxed);
                            }
                            None => {
                                early.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        counts[(v & ((1 << ID_BITS) - 1)) as usize].fetch_add(1, Ordering::Relaxed);
                        received.fetch_add(1, Ordering::Relaxed);
                    }
                    last = now;
                }
                last
            })
        })
        .collect();
    // Wait (outside the queue) until everything is received, then close the queue.
    let give_up = Instant::now() + Duration::from_micros(horizon_us + spread_us) + Duration::from_secs(120);
    while received.load(Ordering::Relaxed) < n && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(10));
    }
    if received.load(Ordering::Relaxed) < n {
        eprintln!(
            "scale: HANG: only {} of {n} items received 120 s after the last deadline",
            received.load(Ordering::Relaxed)
        );
    }
    rx.close();
    let last = drainers.into_iter().map(|d| d.join().expect("consumer panicked")).max().unwrap_or(start);
    let first_due = start + Duration::from_micros(horizon_us);
    let last_due = first_due + Duration::from_micros(spread_us);
    let lost = counts.iter().filter(|c| c.load(Ordering::Relaxed) == 0).count();
    let dup: u64 = counts.iter().map(|c| u64::from(c.load(Ordering::Relaxed).saturating_sub(1))).sum();
    drop(counts);
    let received = received.load(Ordering::Relaxed);
    println!(
        "scale: drained {received} items with {consumers} consumer(s): last received {:.1} ms after the last deadline, \
         {:.2} M items/s over the due window; max lateness {:.1} ms; lost {lost}, duplicated {dup}, early {}",
        last.saturating_duration_since(last_due).as_secs_f64() * 1e3,
        received as f64 / last.saturating_duration_since(first_due).as_secs_f64().max(1e-9) / 1e6,
        max_late_ns.load(Ordering::Relaxed) as f64 / 1e6,
        early.load(Ordering::Relaxed)
    );

    // 4. Memory after the drain: past the 1 s for which the index must stay
    // empty before the dequeue proxy trims it (`dequeue::TRIM_AFTER`).
    std::thread::sleep(Duration::from_millis(1500));
    let rss_drained = sys::rss();
    // SAFETY: `malloc_trim` only releases free memory back to the OS.
    unsafe {
        libc::malloc_trim(0);
    }
    let rss_trimmed = sys::rss();
    drop(tx);
    drop(rx);
    // SAFETY: as above.
    unsafe {
        libc::malloc_trim(0);
    }
    let rss_dropped = sys::rss();
    let kept = |r: u64| {
        r.saturating_sub(rss_empty) as f64 / (rss_full.saturating_sub(rss_empty)).max(1) as f64 * 100.0
    };
    println!(
        "scale: RSS after the drain {} ({:.0} % of the growth kept), after malloc_trim {} ({:.0} %), \
         after dropping the queue {} ({:.0} %); peak {}",
        sys::mib(rss_drained),
        kept(rss_drained),
        sys::mib(rss_trimmed),
        kept(rss_trimmed),
        sys::mib(rss_dropped),
        kept(rss_dropped),
        sys::mib(sys::peak_rss())
    );
    if lost != 0 || dup != 0 || early.load(Ordering::Relaxed) != 0 {
        eprintln!(
            "scale: CORRECTNESS FAILURE: lost {lost}, duplicated {dup}, early {}",
            early.load(Ordering::Relaxed)
        );
        std::process::exit(1);
    }
}

/// `--far-stream N`: one never-due item, then N items streamed through.
fn stream_past_a_far_item(n: u64) {
    const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
    println!("scale: {}", sys::machine_line());
    let (tx, rx) = delayq::unbounded::<u64>();
    tx.send_after(u64::MAX, YEAR * 100).expect("send the far item");
    let _ = rx.peek_deadline();
    // SAFETY: `malloc_trim` only releases free memory back to the OS.
    unsafe {
        libc::malloc_trim(0);
    }
    let rss_before = sys::rss();
    let t = Instant::now();
    let consumer = std::thread::spawn(move || {
        let mut buf = Vec::with_capacity(1024);
        let mut got = 0u64;
        while got < n {
            got += rx.recv_many(&mut buf, 1024).expect("receive") as u64;
            buf.clear();
        }
        rx
    });
    let now = Instant::now();
    for i in 0..n {
        tx.send_at(i, now).expect("send");
    }
    let rx = consumer.join().expect("consumer panicked");
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(rx.len(), 1, "only the far item is left");
    // SAFETY: as above.
    unsafe {
        libc::malloc_trim(0);
    }
    let rss_after = sys::rss();
    let growth = rss_after.saturating_sub(rss_before);
    println!(
        "scale: one never-due item, then {n} items streamed through in {secs:.1} s ({:.2} M items/s): \
         RSS {} before, {} after: +{} ({:.1} bytes per million keys)",
        n as f64 / secs / 1e6,
        sys::mib(rss_before),
        sys::mib(rss_after),
        sys::mib(growth),
        growth as f64 / (n as f64 / 1e6)
    );
}
