//! Single-thread costs of one `delayq` queue holding 1 K / 1 M pending items (and
//! 10 M with `DELAYQ_BENCH_10M=1`: ~1.5 GB and ~10 s of filling, so opt-in).
//!
//! Pending items are due 1–2 h from now, so they stay pending for the whole run;
//! each benchmark keeps their number constant:
//! - `pair`: send one item due now, then `recv` it: one round trip through both
//!   proxies (producer → enqueue proxy → heap → dequeue proxy → consumer), the
//!   new item sorting before every pending one.
//! - `pair_batch`: the same, amortised: bursts of 1024 sends, then `recv_many`.
//!   This is the "send+recv pair ≤ 300 ns amortised at 10 M pending".
//! - `cancel`: `Sender::cancel` of a random pending item (a synchronous command
//!   to the enqueue proxy); an untimed re-send keeps the count constant.
//! - `reschedule`: `Sender::reschedule` of a random pending item to a new far
//!   deadline.
//! - `binary_heap_hold`: the baseline: a plain `std` `BinaryHeap` pop+push ("hold"
//!   model) at the same size, on this thread, no queue around it.
//!
//! `cargo bench -p delayq-bench --bench ops` (add `DELAYQ_BENCH_10M=1` for the 10 M case).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::time::{Duration, Instant};

struct Filled {
    label: &'static str,
    tx: delayq::Sender<u64>,
    rx: delayq::Receiver<u64>,
    keys: Vec<delayq::Key>,
    far: Instant,
}

fn sizes() -> Vec<(usize, &'static str)> {
    let mut v = vec![(1_000, "1K"), (1_000_000, "1M")];
    if std::env::var_os("DELAYQ_BENCH_10M").is_some_and(|v| v != "0") {
        v.push((10_000_000, "10M"));
    }
    v
}

fn fill(n: usize, label: &'static str) -> Filled {
    let (tx, rx) = delayq::unbounded();
    let far = Instant::now() + Duration::from_secs(3600);
    let mut rng = rand::rngs::StdRng::seed_from_u64(n as u64);
    let keys = (0..n)
        .map(|i| {
            let d = far + Duration::from_nanos(rng.gen_range(0..3_600_000_000_000));
            tx.send_at(i as u64, d).expect("send")
        })
        .collect();
    // A command travels the ingress behind every insert: once answered, all are in.
    let _ = rx.peek_deadline();
    Filled { label, tx, rx, keys, far }
}

fn bench_pair(c: &mut Criterion, queues: &[Filled]) {
    let mut g = c.benchmark_group("pair");
    g.throughput(Throughput::Elements(1));
    for q in queues {
        g.bench_function(BenchmarkId::new("pending", q.label), |b| {
            b.iter(|| {
                q.tx.send_at(7, Instant::now()).expect("send");
                black_box(q.rx.recv().expect("recv"))
            })
        });
    }
    g.finish();
}

fn bench_pair_batch(c: &mut Criterion, queues: &[Filled]) {
    const BURST: u64 = 1024;
    let mut g = c.benchmark_group("pair_batch");
    g.throughput(Throughput::Elements(1));
    for q in queues {
        g.bench_function(BenchmarkId::new("pending", q.label), |b| {
            let mut buf = Vec::with_capacity(BURST as usize);
            b.iter_custom(|iters| {
                let start = Instant::now();
                let mut done = 0;
                while done < iters {
                    let k = BURST.min(iters - done);
                    let now = Instant::now();
                    for i in 0..k {
                        q.tx.send_at(i, now).expect("send");
                    }
                    let mut got = 0;
                    while got < k {
                        got += q.rx.recv_many(&mut buf, (k - got) as usize).expect("recv") as u64;
                    }
                    buf.clear();
                    done += k;
                }
                start.elapsed()
            })
        });
    }
    g.finish();
}

fn bench_cancel(c: &mut Criterion, queues: &mut [Filled]) {
    let mut g = c.benchmark_group("cancel");
    g.throughput(Throughput::Elements(1));
    for q in queues.iter_mut() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let Filled { label, tx, keys, far, .. } = q;
        g.bench_function(BenchmarkId::new("pending", *label), |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let i = rng.gen_range(0..keys.len());
                    let t0 = Instant::now();
                    let item = tx.cancel(keys[i]);
                    spent += t0.elapsed();
                    let item = item.expect("cancel of a pending item returned None");
                    keys[i] = tx
                        .send_at(item, *far + Duration::from_nanos(rng.gen_range(0..3_600_000_000_000)))
                        .expect("send");
                }
                spent
            })
        });
    }
    g.finish();
}

fn bench_reschedule(c: &mut Criterion, queues: &[Filled]) {
    let mut g = c.benchmark_group("reschedule");
    g.throughput(Throughput::Elements(1));
    for q in queues {
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        g.bench_function(BenchmarkId::new("pending", q.label), |b| {
            b.iter(|| {
                let k = q.keys[rng.gen_range(0..q.keys.len())];
                let d = q.far + Duration::from_nanos(rng.gen_range(0..3_600_000_000_000));
                assert!(q.tx.reschedule(k, d), "reschedule of a pending item returned false");
            })
        });
    }
    g.finish();
}

fn bench_heap(c: &mut Criterion) {
    let mut g = c.benchmark_group("binary_heap_hold");
    g.throughput(Throughput::Elements(1));
    for (n, label) in sizes() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut heap: BinaryHeap<Reverse<(u64, u64)>> =
            (0..n as u64).map(|i| Reverse((rng.gen_range(0..1u64 << 40), i))).collect();
        g.bench_function(BenchmarkId::new("pending", label), |b| {
            b.iter(|| {
                let Reverse((t, i)) = heap.pop().expect("nonempty");
                heap.push(Reverse((t + rng.gen_range(0..1u64 << 30), i)));
            })
        });
    }
    g.finish();
}

fn ops(c: &mut Criterion) {
    let mut queues: Vec<Filled> = sizes().into_iter().map(|(n, l)| fill(n, l)).collect();
    bench_pair(c, &queues);
    bench_pair_batch(c, &queues);
    bench_cancel(c, &mut queues);
    bench_reschedule(c, &queues);
    for q in &queues {
        assert_eq!(q.tx.len(), q.keys.len(), "pending count drifted");
    }
    drop(queues);
    bench_heap(c);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = ops
}
criterion_main!(benches);
