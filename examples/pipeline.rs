//! The main job: a high-contention pipeline through one `delayq` queue.
//!
//! Many producers send items with random delays; many consumers receive them.
//! Prints throughput, lateness (receive time − deadline) percentiles and the
//! checks `lost: N`, `duplicated: N` and `early: N`, which must all be 0 (the
//! process exits with status 1 otherwise).
//!
//! ```text
//! cargo run --release --example pipeline -- [--producers 16] [--consumers 16]
//!     [--items 1000000] [--max-delay-ms 10] [--capacity N]
//! ```

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

struct Args {
    producers: usize,
    consumers: usize,
    items: usize,
    max_delay: Duration,
    capacity: Option<usize>,
}

fn parse_args() -> Args {
    let mut a = Args {
        producers: 16,
        consumers: 16,
        items: 1_000_000,
        max_delay: Duration::from_millis(10),
        capacity: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || -> u64 {
            let v = it.next().unwrap_or_else(|| die(&format!("{flag} needs a value")));
            v.parse().unwrap_or_else(|_| die(&format!("{flag}: not a number: {v}")))
        };
        match flag.as_str() {
            "--producers" => a.producers = value().max(1) as usize,
            "--consumers" => a.consumers = value().max(1) as usize,
            "--items" => a.items = value() as usize,
            "--max-delay-ms" => a.max_delay = Duration::from_millis(value()),
            "--capacity" => a.capacity = Some(value().max(1) as usize),
            "--help" | "-h" => {
                println!("options: --producers N --consumers N --items N --max-delay-ms N --capacity N");
                std::process::exit(0);
            }
            other => die(&format!("unknown option {other} (try --help)")),
        }
    }
    a
}

fn die(msg: &str) -> ! {
    eprintln!("pipeline: {msg}");
    std::process::exit(2)
}

/// A cheap per-thread random source (xorshift), so the producers measure the queue.
fn next_rand(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let args = parse_args();
    let builder = delayq::Builder::new().thread_name_prefix("pipeline");
    let builder = match args.capacity {
        Some(c) => builder.capacity(c),
        None => builder,
    };
    let (tx, rx) = builder.build::<(u32, Instant)>().unwrap_or_else(|e| die(&e.to_string()));
    let seen: Arc<Vec<AtomicU8>> = Arc::new((0..args.items).map(|_| AtomicU8::new(0)).collect());
    let start = Arc::new(Barrier::new(args.producers + args.consumers + 1));
    let max_delay_ns = args.max_delay.as_nanos() as u64;

    let producers: Vec<_> = (0..args.producers)
        .map(|p| {
            let (tx, start) = (tx.clone(), start.clone());
            let (n, k) = (args.items, args.producers);
            thread::spawn(move || {
                let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (p as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
                start.wait();
                for id in (p..n).step_by(k) {
                    let delay = if max_delay_ns == 0 { 0 } else { next_rand(&mut rng) % (max_delay_ns + 1) };
                    let deadline = Instant::now() + Duration::from_nanos(delay);
                    if tx.send_at((id as u32, deadline), deadline).is_err() {
                        die("send failed on a live queue");
                    }
                }
            })
        })
        .collect();
    drop(tx);

    let consumers: Vec<_> = (0..args.consumers)
        .map(|_| {
            let (rx, start, seen) = (rx.clone(), start.clone(), seen.clone());
            thread::spawn(move || {
                let mut lateness = Vec::new();
                let (mut early, mut duplicated) = (0u64, 0u64);
                let mut buf = Vec::with_capacity(64);
                start.wait();
                while rx.recv_many(&mut buf, 64).is_ok() {
                    let now = Instant::now();
                    for (id, deadline) in buf.drain(..) {
                        if now < deadline {
                            early += 1;
                        }
                        lateness.push(now.saturating_duration_since(deadline).as_nanos() as u64);
                        if seen[id as usize].fetch_add(1, Ordering::Relaxed) != 0 {
                            duplicated += 1;
                        }
                    }
                }
                (lateness, early, duplicated)
            })
        })
        .collect();
    drop(rx);

    start.wait();
    let t0 = Instant::now();
    for p in producers {
        p.join().expect("producer panicked");
    }
    let mut lateness = Vec::with_capacity(args.items);
    let (mut early, mut duplicated) = (0, 0);
    for c in consumers {
        let (l, e, d) = c.join().expect("consumer panicked");
        lateness.extend(l);
        early += e;
        duplicated += d;
    }
    let elapsed = t0.elapsed();
    let lost = seen.iter().filter(|s| s.load(Ordering::Relaxed) == 0).count();
    lateness.sort_unstable();
    let us = |ns: u64| ns as f64 / 1000.0;

    println!(
        "delayq pipeline: {} producers x {} consumers, {} items, delay uniform[0, {:?}], {}",
        args.producers,
        args.consumers,
        args.items,
        args.max_delay,
        match args.capacity {
            Some(c) => format!("bounded({c})"),
            None => "unbounded".to_owned(),
        }
    );
    println!("elapsed: {:.3} s", elapsed.as_secs_f64());
    println!("throughput: {:.0} items/s", args.items as f64 / elapsed.as_secs_f64());
    println!(
        "lateness (us): p50 {:.1}  p99 {:.1}  p999 {:.1}  max {:.1}",
        us(percentile(&lateness, 0.50)),
        us(percentile(&lateness, 0.99)),
        us(percentile(&lateness, 0.999)),
        us(lateness.last().copied().unwrap_or(0)),
    );
    println!("lost: {lost}");
    println!("duplicated: {duplicated}");
    println!("early: {early}");
    if lost != 0 || duplicated != 0 || early != 0 {
        std::process::exit(1);
    }
}
