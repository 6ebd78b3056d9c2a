//! The main job: a high-contention pipeline through a `delayq` queue, in two
//! phases.
//!
//! 1. **Throughput.** Many producers send as fast as `send_at` returns, with
//!    random delays, into a bounded queue; many consumers receive. How many items
//!    per second get through, and how late they come out while the producers
//!    push as hard as they can.
//! 2. **Precision.** The same pipeline with the producers paced at half the rate
//!    phase 1 measured (or `--rate`): how late items come out when the queue is
//!    not saturated.
//!
//! Each phase prints its lateness (receive time − deadline) percentiles and the
//! CPU time of the whole process per item (producers, consumers and the queue's
//! two threads; Linux only). At the end come the checks over both phases,
//! `lost: N`, `duplicated: N` and `early: N`, which must all be 0 (the process
//! exits with status 1 otherwise).
//!
//! ```text
//! cargo run --release --example pipeline -- [--producers 16] [--consumers 16]
//!     [--items 1000000] [--max-delay-ms 10] [--capacity 65536] [--unbounded]
//!     [--rate ITEMS_PER_S] [--paced-secs 1] [--no-helping]
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
    rate: Option<f64>,
    paced_secs: f64,
    /// `Builder::helping`: producers may perform the enqueue proxy's role.
    helping: bool,
}

const HELP: &str = "options: --producers N --consumers N --items N --max-delay-ms N \
--capacity N | --unbounded --rate ITEMS_PER_S --paced-secs S --no-helping";

fn parse_args() -> Args {
    let mut a = Args {
        producers: 16,
        consumers: 16,
        items: 1_000_000,
        max_delay: Duration::from_millis(10),
        capacity: Some(65_536),
        rate: None,
        paced_secs: 1.0,
        helping: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            println!("{HELP}");
            std::process::exit(0);
        }
        if flag == "--unbounded" {
            a.capacity = None;
            continue;
        }
        if flag == "--no-helping" {
            a.helping = false;
            continue;
        }
        let v = it.next().unwrap_or_else(|| die(&format!("{flag} needs a value")));
        let num = || -> f64 {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .unwrap_or_else(|| die(&format!("{flag}: not a non-negative number: {v}")))
        };
        match flag.as_str() {
            "--producers" => a.producers = (num() as usize).max(1),
            "--consumers" => a.consumers = (num() as usize).max(1),
            "--items" => a.items = (num() as usize).max(1),
            "--max-delay-ms" => a.max_delay = Duration::from_secs_f64(num() / 1e3),
            "--capacity" => a.capacity = Some((num() as usize).max(1)),
            "--rate" => a.rate = Some(num()).filter(|r| *r > 0.0),
            "--paced-secs" => a.paced_secs = num(),
            other => die(&format!("unknown option {other} (try --help)")),
        }
    }
    if a.items > u32::MAX as usize {
        die("--items: at most 2^32 - 1");
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

/// User + system CPU time of this process so far (every thread, the exited ones
/// too), from `/proc/self/stat`; `None` where there is no such file.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name;
    // in clock ticks of 1/100 s (USER_HZ, 100 on every Linux architecture).
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// What one phase measured.
struct Phase {
    items: usize,
    elapsed: Duration,
    lateness: Vec<u64>,
    cpu: Option<Duration>,
    lost: usize,
    duplicated: u64,
    early: u64,
}

/// One phase: `items` items through a fresh queue; producers unthrottled
/// (`rate` None) or paced at `rate` items/s in total.
fn run_phase(args: &Args, items: usize, rate: Option<f64>) -> Phase {
    let builder = delayq::Builder::new().thread_name_prefix("pipeline").helping(args.helping);
    let builder = match args.capacity {
        Some(c) => builder.capacity(c),
        None => builder,
    };
    let (tx, rx) = builder.build::<(u32, Instant)>().unwrap_or_else(|e| die(&e.to_string()));
    let seen: Arc<Vec<AtomicU8>> = Arc::new((0..items).map(|_| AtomicU8::new(0)).collect());
    let start = Arc::new(Barrier::new(args.producers + args.consumers + 1));
    let t0_cell = Arc::new(std::sync::OnceLock::<Instant>::new());
    let max_delay_ns = args.max_delay.as_nanos() as u64;

    let producers: Vec<_> = (0..args.producers)
        .map(|p| {
            let (tx, start, t0_cell) = (tx.clone(), start.clone(), t0_cell.clone());
            let k = args.producers;
            thread::spawn(move || {
                let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (p as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
                start.wait();
                let t0 = *t0_cell.get().expect("set before the barrier");
                for id in (p..items).step_by(k) {
                    if let Some(r) = rate {
                        // Item `id` goes at its slot of one global schedule.
                        let at = t0 + Duration::from_secs_f64(id as f64 / r);
                        let now = Instant::now();
                        if at > now {
                            thread::sleep(at - now);
                        }
                    }
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

    let cpu0 = process_cpu();
    let t0 = Instant::now();
    let _ = t0_cell.set(t0);
    start.wait();
    for p in producers {
        p.join().expect("producer panicked");
    }
    let mut lateness = Vec::with_capacity(items);
    let (mut early, mut duplicated) = (0, 0);
    for c in consumers {
        let (l, e, d) = c.join().expect("consumer panicked");
        lateness.extend(l);
        early += e;
        duplicated += d;
    }
    let elapsed = t0.elapsed();
    let cpu = process_cpu().zip(cpu0).map(|(b, a)| b.saturating_sub(a));
    let lost = seen.iter().filter(|s| s.load(Ordering::Relaxed) == 0).count();
    lateness.sort_unstable();
    Phase { items, elapsed, lateness, cpu, lost, duplicated, early }
}

fn report(name: &str, p: &Phase) {
    let us = |ns: u64| ns as f64 / 1000.0;
    let secs = p.elapsed.as_secs_f64();
    println!("{name}: {} items in {secs:.3} s, {:.2} M items/s", p.items, p.items as f64 / secs / 1e6);
    println!(
        "  lateness (us): p50 {:.1}  p99 {:.1}  p999 {:.1}  max {:.1}",
        us(percentile(&p.lateness, 0.50)),
        us(percentile(&p.lateness, 0.99)),
        us(percentile(&p.lateness, 0.999)),
        us(p.lateness.last().copied().unwrap_or(0)),
    );
    match p.cpu {
        Some(cpu) => println!(
            "  CPU: {:.2} us per item, {:.2} cores busy",
            cpu.as_secs_f64() * 1e6 / p.items as f64,
            cpu.as_secs_f64() / secs
        ),
        None => println!("  CPU: not measured (no /proc/self/stat)"),
    }
}

fn main() {
    let args = parse_args();
    println!(
        "delayq pipeline: {} producers x {} consumers, delay uniform[0, {:?}], {}",
        args.producers,
        args.consumers,
        args.max_delay,
        match args.capacity {
            Some(c) => format!("bounded({c})"),
            None => "unbounded".to_owned(),
        }
    );

    let fast = run_phase(&args, args.items, None);
    report("phase 1, throughput (producers unthrottled)", &fast);

    let rate = args.rate.unwrap_or(fast.items as f64 / fast.elapsed.as_secs_f64() / 2.0);
    let paced_items = ((rate * args.paced_secs) as usize).clamp(1, args.items);
    let paced = run_phase(&args, paced_items, Some(rate));
    let how = if args.rate.is_some() { "--rate" } else { "half of phase 1" };
    report(&format!("phase 2, precision (paced at {:.0} items/s, {how})", rate), &paced);

    let lost = fast.lost + paced.lost;
    let duplicated = fast.duplicated + paced.duplicated;
    let early = fast.early + paced.early;
    println!("lost: {lost}");
    println!("duplicated: {duplicated}");
    println!("early: {early}");
    if lost != 0 || duplicated != 0 || early != 0 {
        std::process::exit(1);
    }
}
