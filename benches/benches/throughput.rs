//! Multi-thread throughput of `delayq`: P producers and P consumers, P ∈ {1, 4,
//! 16}, move `DELAYQ_BENCH_ITEMS` items (default 100,000) through one queue,
//! producers unthrottled, deadline = send time + uniform[0, D].
//!
//! Groups: `unbounded_d0` (D = 0), `unbounded_d1ms` and `bounded65536_d1ms`
//! (D = 1 ms). One criterion iteration is one whole run: a fresh queue, threads
//! released by a `Barrier`, timed until the last consumer has seen the queue
//! closed and drained. The side-by-side comparison with other queues is
//! `cargo run --release -p delayq-bench --example compare` (docs/bench/).
//!
//! `cargo bench -p delayq-bench --bench throughput`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

fn items() -> u64 {
    std::env::var("DELAYQ_BENCH_ITEMS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
}

/// One run: `p` producers and `p` consumers, `n` items; returns the time from the
/// barrier until every consumer is done.
fn run_once(p: usize, n: u64, max_delay: Duration, capacity: Option<usize>) -> Duration {
    let (tx, rx) = match capacity {
        Some(c) => delayq::bounded::<u64>(c),
        None => delayq::unbounded::<u64>(),
    };
    let barrier = Arc::new(Barrier::new(2 * p + 1));
    let d = max_delay.as_nanos() as u64;
    let producers: Vec<_> = (0..p as u64)
        .map(|k| {
            let tx = tx.clone();
            let barrier = barrier.clone();
            thread::spawn(move || {
                let mut x = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                barrier.wait();
                for i in (k..n).step_by(p) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let jitter = if d == 0 { 0 } else { x % (d + 1) };
                    tx.send_at(i, Instant::now() + Duration::from_nanos(jitter)).expect("send");
                }
            })
        })
        .collect();
    drop(tx);
    let consumers: Vec<_> = (0..p)
        .map(|_| {
            let rx = rx.clone();
            let barrier = barrier.clone();
            thread::spawn(move || {
                barrier.wait();
                let mut got = 0u64;
                while rx.recv().is_ok() {
                    got += 1;
                }
                got
            })
        })
        .collect();
    drop(rx);
    barrier.wait();
    let start = Instant::now();
    for t in producers {
        t.join().expect("producer");
    }
    let got: u64 = consumers.into_iter().map(|t| t.join().expect("consumer")).sum();
    let elapsed = start.elapsed();
    assert_eq!(got, n, "items lost or duplicated");
    elapsed
}

fn throughput(c: &mut Criterion) {
    let n = items();
    let configs: [(&str, Duration, Option<usize>); 3] = [
        ("unbounded_d0", Duration::ZERO, None),
        ("unbounded_d1ms", Duration::from_millis(1), None),
        ("bounded65536_d1ms", Duration::from_millis(1), Some(65_536)),
    ];
    for (name, d, cap) in configs {
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Elements(n));
        for p in [1usize, 4, 16] {
            g.bench_function(BenchmarkId::new("threads", p), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| run_once(p, n, d, cap)).sum())
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = throughput
}
criterion_main!(benches);
