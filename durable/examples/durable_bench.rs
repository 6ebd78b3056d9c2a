//! Throughput of the embedded durable queue, and the storage engine's costs
//! for this access pattern.
//!
//! ```sh
//! cargo run --release -p delayq-durable --example durable_bench            # everything, 5 repeats
//! cargo run --release -p delayq-durable --example durable_bench -- engine  # redb alone: append vs delete-at-head
//! cargo run --release -p delayq-durable --example durable_bench -- queue --repeats 3 --jobs 20000
//! ```
//!
//! `queue` measures, with fsync on every commit (`Durability::Immediate`):
//! one sender (one fsync per job, the baseline), 16 concurrent senders (group
//! commit), 16 senders with `send_many`, and end to end — 16 producers and 16
//! consumers, each job sent, reserved and acked — per job and batched. Every
//! figure is jobs per second, min / median / max over the repeats, with the
//! fsync'd commits per 1,000 jobs (the queue's own count of durable commits).
//! Files go to `$DELAYQ_BENCH_DIR` or the system temp directory.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use delayq_durable::DurableQueue;
use redb::{Database, TableDefinition};

const PAYLOAD: usize = 100;
const LEASE: Duration = Duration::from_secs(60);

struct Args {
    what: String,
    repeats: usize,
    jobs: u64,
}

fn args() -> Args {
    let mut a = Args { what: "all".into(), repeats: 5, jobs: 40_000 };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--repeats" => a.repeats = it.next().and_then(|v| v.parse().ok()).expect("--repeats N"),
            "--jobs" => a.jobs = it.next().and_then(|v| v.parse().ok()).expect("--jobs N"),
            "engine" | "queue" | "all" => a.what = arg,
            "--help" | "-h" => {
                println!("durable_bench [engine|queue|all] [--repeats N] [--jobs N]");
                std::process::exit(0);
            }
            other => panic!("unknown argument {other:?} (try --help)"),
        }
    }
    a
}

fn dir() -> PathBuf {
    let base = std::env::var_os("DELAYQ_BENCH_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let d = base.join(format!("delayq-durable-bench-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn summary(mut xs: Vec<f64>) -> String {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    format!("{:>9.0} / {:>9.0} / {:>9.0}", xs[0], xs[xs.len() / 2], xs[xs.len() - 1])
}

// ---------------------------------------------------------------- engine

const T: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("t");

/// redb alone, in the queue's pattern: ids grow, so sends append at the
/// B-tree's right edge and acks delete at its left edge (the oldest ids).
fn engine(repeats: usize) {
    println!("## redb alone: 100 ops per commit, {PAYLOAD}-byte values, 100,000 rows live");
    println!(
        "(µs per commit, min / median / max of {repeats}; each repeat 50 commits of each kind, interleaved)"
    );
    let d = dir();
    let payload = vec![7u8; PAYLOAD];
    let mut results: Vec<(&str, redb::Durability, Vec<f64>)> = vec![
        ("append at the tail", redb::Durability::Immediate, vec![]),
        ("delete at the head", redb::Durability::Immediate, vec![]),
        ("delete at random", redb::Durability::Immediate, vec![]),
        ("append at the tail, no fsync", redb::Durability::None, vec![]),
        ("delete at the head, no fsync", redb::Durability::None, vec![]),
        ("delete at random, no fsync", redb::Durability::None, vec![]),
    ];
    for _ in 0..repeats {
        let path = d.join("engine.redb");
        let _ = std::fs::remove_file(&path);
        let db = Database::create(&path).unwrap();
        let (mut head, mut tail) = (0u64, 0u64);
        {
            let txn = db.begin_write().unwrap();
            {
                let mut t = txn.open_table(T).unwrap();
                while tail < 100_000 {
                    t.insert(tail, payload.as_slice()).unwrap();
                    tail += 1;
                }
            }
            txn.commit().unwrap();
        }
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..50 {
            for (kind, durability, times) in results.iter_mut() {
                let start = Instant::now();
                let mut txn = db.begin_write().unwrap();
                txn.set_durability(*durability).unwrap();
                {
                    let mut t = txn.open_table(T).unwrap();
                    for _ in 0..100 {
                        if kind.starts_with("append") {
                            t.insert(tail, payload.as_slice()).unwrap();
                            tail += 1;
                        } else if kind.starts_with("delete at the head") {
                            t.remove(head).unwrap();
                            head += 1;
                        } else {
                            rng ^= rng << 13;
                            rng ^= rng >> 7;
                            rng ^= rng << 17;
                            // A key between head and tail (rarely one already gone).
                            t.remove(head + rng % (tail - head)).unwrap();
                        }
                    }
                }
                txn.commit().unwrap();
                if round >= 5 {
                    times.push(start.elapsed().as_secs_f64() * 1e6);
                }
            }
        }
    }
    for (kind, _, times) in &results {
        let mut xs = times.clone();
        xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!("  {kind:<32} {:>8.0} / {:>8.0} / {:>8.0}", xs[0], xs[xs.len() / 2], xs[xs.len() - 1]);
    }
    let _ = std::fs::remove_dir_all(&d);
}

// ---------------------------------------------------------------- queue

struct Run {
    jobs_per_s: f64,
    fsyncs_per_1000: f64,
}

fn fresh(tag: &str) -> (DurableQueue, PathBuf) {
    let path = dir().join(format!("{tag}.redb"));
    let _ = std::fs::remove_file(&path);
    (DurableQueue::open(&path).unwrap(), path)
}

fn sends(threads: u64, jobs: u64, batch: usize) -> Run {
    let (q, path) = fresh("send");
    let per = jobs / threads;
    let barrier = Arc::new(Barrier::new(threads as usize + 1));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (q, barrier) = (q.clone(), barrier.clone());
            thread::spawn(move || {
                let payload = vec![1u8; PAYLOAD];
                let at = SystemTime::now() + Duration::from_secs(3600);
                barrier.wait();
                let mut sent = 0;
                while sent < per {
                    if batch == 1 {
                        q.send_at(&payload, at).unwrap();
                        sent += 1;
                    } else {
                        let n = (per - sent).min(batch as u64) as usize;
                        let b: Vec<(&[u8], SystemTime)> = (0..n).map(|_| (payload.as_slice(), at)).collect();
                        q.send_many(&b).unwrap();
                        sent += n as u64;
                    }
                }
            })
        })
        .collect();
    let before = q.commit_stats();
    barrier.wait();
    let start = Instant::now();
    for w in workers {
        w.join().unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let after = q.commit_stats();
    let total = per * threads;
    assert_eq!(q.len().unwrap(), total);
    drop(q);
    let _ = std::fs::remove_file(path);
    Run {
        jobs_per_s: total as f64 / secs,
        fsyncs_per_1000: (after.durable_commits - before.durable_commits) as f64 * 1000.0 / total as f64,
    }
}

fn end_to_end(threads: u64, jobs: u64, batch: usize) -> Run {
    let (q, path) = fresh("e2e");
    let per = jobs / threads;
    let total = per * threads;
    let acked = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(2 * threads as usize + 1));
    let mut workers = Vec::new();
    for _ in 0..threads {
        let (qp, bp) = (q.clone(), barrier.clone());
        workers.push(thread::spawn(move || {
            let (q, barrier) = (qp, bp);
            let payload = vec![1u8; PAYLOAD];
            barrier.wait();
            let mut sent = 0;
            while sent < per {
                let n = (per - sent).min(batch as u64) as usize;
                if n == 1 {
                    q.send_at(&payload, SystemTime::now()).unwrap();
                } else {
                    let now = SystemTime::now();
                    let b: Vec<(&[u8], SystemTime)> = (0..n).map(|_| (payload.as_slice(), now)).collect();
                    q.send_many(&b).unwrap();
                }
                sent += n as u64;
            }
        }));
        let (q, barrier, acked) = (q.clone(), barrier.clone(), acked.clone());
        workers.push(thread::spawn(move || {
            barrier.wait();
            while acked.load(Ordering::Relaxed) < total {
                if batch == 1 {
                    if let Some(job) = q.reserve_timeout(LEASE, Duration::from_millis(20)).unwrap() {
                        assert!(q.ack(&job).unwrap());
                        acked.fetch_add(1, Ordering::Relaxed);
                    }
                } else {
                    let jobs = q.reserve_many(LEASE, batch, Duration::from_millis(20)).unwrap();
                    let flags = q.ack_many(&jobs).unwrap();
                    assert!(flags.iter().all(|&f| f));
                    acked.fetch_add(jobs.len() as u64, Ordering::Relaxed);
                }
            }
        }));
    }
    let before = q.commit_stats();
    barrier.wait();
    let start = Instant::now();
    for w in workers {
        w.join().unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let after = q.commit_stats();
    assert_eq!(acked.load(Ordering::Relaxed), total);
    assert_eq!(q.len().unwrap(), 0);
    drop(q);
    let _ = std::fs::remove_file(path);
    Run {
        jobs_per_s: total as f64 / secs,
        fsyncs_per_1000: (after.durable_commits - before.durable_commits) as f64 * 1000.0 / total as f64,
    }
}

fn queue(repeats: usize, jobs: u64) {
    println!("## DurableQueue, fsync on every commit, {PAYLOAD}-byte payloads");
    println!("(jobs/s min / median / max of {repeats}, interleaved; fsync'd commits per 1,000 jobs, median)");
    type Case = (&'static str, Box<dyn Fn() -> Run>);
    let baseline_jobs = (jobs / 10).max(500);
    let cases: Vec<Case> = vec![
        ("1 sender, one fsync per job (baseline)", Box::new(move || sends(1, baseline_jobs, 1))),
        ("16 senders, send_at (group commit)", Box::new(move || sends(16, jobs, 1))),
        ("16 senders, send_many of 64", Box::new(move || sends(16, jobs * 4, 64))),
        ("end to end 16+16, per job", Box::new(move || end_to_end(16, jobs, 1))),
        ("end to end 16+16, batches of 64", Box::new(move || end_to_end(16, jobs * 4, 64))),
    ];
    let mut runs: Vec<Vec<Run>> = cases.iter().map(|_| Vec::new()).collect();
    for r in 0..repeats {
        for (i, (_, run)) in cases.iter().enumerate() {
            runs[i].push(run());
        }
        eprintln!("repeat {} done, load {}", r + 1, loadavg());
    }
    let base_median = {
        let mut xs: Vec<f64> = runs[0].iter().map(|r| r.jobs_per_s).collect();
        xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
        xs[xs.len() / 2]
    };
    for ((name, _), rs) in cases.iter().zip(&runs) {
        let jps: Vec<f64> = rs.iter().map(|r| r.jobs_per_s).collect();
        let mut f: Vec<f64> = rs.iter().map(|r| r.fsyncs_per_1000).collect();
        f.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let mut sorted = jps.clone();
        sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "  {name:<40} {}  ({:>5.1}x baseline)  {:>7.1} fsyncs/1000",
            summary(jps),
            sorted[sorted.len() / 2] / base_median,
            f[f.len() / 2]
        );
    }
}

fn main() {
    let a = args();
    println!(
        "machine: {} cores; load average before: {}",
        thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        loadavg()
    );
    if a.what == "engine" || a.what == "all" {
        engine(a.repeats);
    }
    if a.what == "queue" || a.what == "all" {
        queue(a.repeats, a.jobs);
    }
    println!("load average after: {}", loadavg());
    let _ = std::fs::remove_dir_all(dir());
}
