//! Idle check (issue 4, item 3): a queue holding 1,000,000 items due an hour from
//! now, with consumers blocked in `recv`, must cost (almost) no CPU: no ticks, no
//! polling. Reports the whole process's CPU time over a 10 s window (target:
//! under 1 ms) and each thread's state, CPU time and context switches.
//!
//! ```text
//! cargo run --release -p delayq-bench --example idle [-- --items 1000000 --secs 10 --consumers 2]
//! ```
//!
//! Exit status 1 when the process used 1 ms of CPU or more in the window.

#[path = "compare/sys.rs"]
mod sys;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

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
        println!("cargo run --release -p delayq-bench --example idle [-- --items N --secs S --consumers C]");
        return;
    }
    let n = arg(&args, "--items", 1_000_000.0) as u64;
    let secs = arg(&args, "--secs", 10.0);
    let consumers = arg(&args, "--consumers", 2.0) as usize;
    println!("idle: {}", sys::machine_line());

    let (tx, rx) = delayq::unbounded::<u64>();
    let far = Instant::now() + Duration::from_secs(3600);
    let t0 = Instant::now();
    for i in 0..n {
        tx.send_at(i, far + Duration::from_nanos(i * 1000)).expect("send");
    }
    // Answered by the enqueue proxy after every insert before it: all are in.
    let head = rx.peek_deadline();
    println!(
        "idle: {n} items pending (sent and indexed in {:.2} s), head due in {:.0} s, RSS {}",
        t0.elapsed().as_secs_f64(),
        head.map_or(f64::NAN, |h| h.saturating_duration_since(Instant::now()).as_secs_f64()),
        sys::mib(sys::rss())
    );
    let blocked: Vec<_> = (0..consumers)
        .map(|i| {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("consumer-{i}"))
                .spawn(move || rx.recv().err())
                .expect("spawn consumer")
        })
        .collect();

    // Let every thread settle into its park.
    std::thread::sleep(Duration::from_secs(1));
    let before: BTreeMap<u32, sys::ThreadInfo> = sys::threads().into_iter().map(|t| (t.tid, t)).collect();
    let cpu0 = sys::process_cpu_ns();
    let w0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let cpu1 = sys::process_cpu_ns();
    let window = w0.elapsed();
    let after = sys::threads();
    let used = Duration::from_nanos(cpu1.saturating_sub(cpu0));

    println!("\nthread              state          CPU in window   voluntary / involuntary switches");
    for t in &after {
        let b = before.get(&t.tid);
        let cpu = t.cpu_ns.saturating_sub(b.map_or(0, |b| b.cpu_ns));
        let vol = t.voluntary_switches.saturating_sub(b.map_or(0, |b| b.voluntary_switches));
        let inv = t.involuntary_switches.saturating_sub(b.map_or(0, |b| b.involuntary_switches));
        println!("{:<19} {:<14} {:>10.1} µs   {vol} / {inv}", t.name, t.state, cpu as f64 / 1e3);
    }
    let ok = used < Duration::from_millis(1);
    println!(
        "\nidle: process CPU over {:.1} s with {n} pending and {consumers} consumers blocked in recv: {:.1} µs \
         (target < 1000 µs): {}",
        window.as_secs_f64(),
        used.as_nanos() as f64 / 1e3,
        if ok { "PASS" } else { "FAIL" }
    );
    println!("idle: (the window includes the main thread's own sleep syscalls; per-thread figures are from /proc/self/task/*/schedstat)");

    // Tear down: take everything pending, then close; blocked consumers see RecvError.
    let taken = rx.take_pending();
    assert_eq!(taken.len() as u64, n, "take_pending returned a different count");
    drop(tx);
    rx.close();
    for c in blocked {
        assert!(c.join().expect("consumer panicked").is_some(), "a consumer received an item");
    }
    if !ok {
        std::process::exit(1);
    }
}
