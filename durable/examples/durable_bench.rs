//! Throughput of the embedded durable queue, and the storage engine's costs
//! for this access pattern.
//!
//! ```sh
//! cargo run --release -p delayq-durable --example durable_bench            # everything, 5 repeats
//! cargo run --release -p delayq-durable --example durable_bench -- engine  # redb alone: append vs delete-at-head
//! cargo run --release -p delayq-durable --example durable_bench -- queue --repeats 3 --jobs 20000
//! cargo run --release -p delayq-durable --features redis --example durable_bench -- compare  # against Redis
//! cargo run --release -p delayq-durable --features redis,postgres --example durable_bench -- backends --jobs 40000  # redb, Redis, PostgreSQL
//! cargo run --release -p delayq-durable --example durable_bench -- worker --repeats 3  # the runtime vs a hand loop
//! cargo run --release -p delayq-durable --features redis-async --example durable_bench -- async --repeats 3
//! ```
//!
//! `async` (feature `async`; the Redis rows with `redis-async` and
//! `redis-server` on the PATH; not part of `all`): end to end per job, the
//! blocking clients on 16 producer + 16 consumer threads against the async
//! clients (`AsyncDurableQueue`, `AsyncRedisQueue`) on 16 producer + 16
//! consumer tasks of a tokio runtime with one worker thread per core, the
//! same loop (`send_at`; `reserve_timeout` 20 ms, `ack`), interleaved, with
//! the ratio of the medians.
//!
//! `worker` (not part of `all`): end to end per job, 16 producers, 16
//! consumer threads, embedded, fsync on every commit — the consumers either
//! the hand-written loop (`reserve_timeout`, `ack`) or the worker runtime
//! (`Worker` with 16 threads and a handler that does nothing), interleaved.
//!
//! `compare` (feature `redis`; needs `redis-server` on the PATH) starts a
//! private server on a free loopback port (AOF, `appendfsync always`) and runs
//! the end-to-end workloads and a paced lateness run on both backends,
//! interleaved.
//!
//! `backends` (features `redis` and `postgres`; needs `redis-server` on the
//! PATH and PostgreSQL under `/usr/lib/postgresql/*/bin`; not part of
//! `all`) runs the end-to-end workloads (16 producers, 16 consumers, per job
//! and in batches of 64) and the paced lateness run on the three backends,
//! interleaved, each with fsync on every commit: redb (`Durability::
//! Immediate`), a private `redis-server` (AOF, `appendfsync always`) and a
//! private PostgreSQL (`initdb`'d, `fsync = on`, `synchronous_commit = on`),
//! both on free loopback ports. Commits per 1,000 jobs: redb's durable
//! commits; PostgreSQL's committed transactions (`pg_stat_database`) and WAL
//! fsyncs (`pg_stat_wal.wal_sync`); Redis does not count its AOF fsyncs.
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

use delayq_durable::{DurableQueue, Event, JobQueue, Worker};

#[cfg(feature = "postgres")]
#[path = "../tests/pg_server/mod.rs"]
mod pg_server;
#[cfg(feature = "redis")]
#[path = "../tests/redis_server/mod.rs"]
mod redis_server;
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
            "engine" | "queue" | "compare" | "backends" | "worker" | "async" | "all" => a.what = arg,
            "--help" | "-h" => {
                println!(
                    "durable_bench [engine|queue|compare|backends|worker|async|all] [--repeats N] [--jobs N]"
                );
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
    let run = end_to_end_on(q.clone(), threads, jobs, batch, || q.commit_stats().durable_commits);
    drop(q);
    let _ = std::fs::remove_file(path);
    run
}

/// 16 producers and 16 consumers on any backend; `fsyncs` reads the backend's
/// durable-commit count (0 where it has none).
fn end_to_end_on<Q: JobQueue + Clone + 'static>(
    q: Q,
    threads: u64,
    jobs: u64,
    batch: usize,
    fsyncs: impl Fn() -> u64,
) -> Run {
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
    let before = fsyncs();
    barrier.wait();
    let start = Instant::now();
    for w in workers {
        w.join().unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let after = fsyncs();
    assert_eq!(acked.load(Ordering::Relaxed), total);
    assert_eq!(q.len().unwrap(), 0);
    Run { jobs_per_s: total as f64 / secs, fsyncs_per_1000: (after - before) as f64 * 1000.0 / total as f64 }
}

/// As `end_to_end(16, jobs, 1)`, with the worker runtime as the consumers:
/// 16 handler threads, a handler that does nothing; timed from the start of
/// the sends to the last ack the runtime reports.
fn end_to_end_worker(threads: u64, jobs: u64) -> Run {
    let (q, path) = fresh("e2e-worker");
    let per = jobs / threads;
    let total = per * threads;
    let acked = Arc::new(AtomicU64::new(0));
    let (done_tx, done) = std::sync::mpsc::sync_channel(1);
    let counter = acked.clone();
    let worker = Worker::builder(q.clone())
        .handle_raw("", |_, _| -> Result<(), String> { Ok(()) })
        .on_event(move |e| {
            if let Event::Succeeded { .. } = e {
                if counter.fetch_add(1, Ordering::Relaxed) + 1 == total {
                    let _ = done_tx.send(());
                }
            }
        })
        .concurrency(threads as usize)
        .lease(LEASE)
        .start()
        .unwrap();
    let barrier = Arc::new(Barrier::new(threads as usize + 1));
    let producers: Vec<_> = (0..threads)
        .map(|_| {
            let (q, barrier) = (q.clone(), barrier.clone());
            thread::spawn(move || {
                let payload = vec![1u8; PAYLOAD];
                barrier.wait();
                for _ in 0..per {
                    q.send_at(&payload, SystemTime::now()).unwrap();
                }
            })
        })
        .collect();
    let before = q.commit_stats().durable_commits;
    barrier.wait();
    let start = Instant::now();
    for p in producers {
        p.join().unwrap();
    }
    done.recv().unwrap();
    let secs = start.elapsed().as_secs_f64();
    let after = q.commit_stats().durable_commits;
    let report = worker.shutdown(Duration::from_secs(10));
    assert_eq!((report.stats.succeeded, report.stats.retried, report.stats.lease_lost), (total, 0, 0));
    assert_eq!(q.len().unwrap(), 0);
    drop(q);
    let _ = std::fs::remove_file(path);
    Run { jobs_per_s: total as f64 / secs, fsyncs_per_1000: (after - before) as f64 * 1000.0 / total as f64 }
}

/// The worker runtime against the hand-written loop, interleaved.
fn worker_vs_loop(repeats: usize, jobs: u64) {
    println!("## worker runtime vs hand-written loop: end to end, 16 producers + 16 consumer threads, embedded, fsync per commit, {PAYLOAD}-byte payloads, {jobs} jobs per run");
    println!("(jobs/s min / median / max of {repeats}, interleaved; fsync'd commits per 1,000 jobs, median)");
    let mut hand = Vec::new();
    let mut rt = Vec::new();
    for r in 0..repeats {
        hand.push(end_to_end(16, jobs, 1));
        rt.push(end_to_end_worker(16, jobs));
        eprintln!("repeat {} done, load {}", r + 1, loadavg());
    }
    for (name, runs) in [("hand-written loop", hand), ("Worker runtime", rt)] {
        let mut f: Vec<f64> = runs.iter().map(|r| r.fsyncs_per_1000).collect();
        f.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "  {name:<20} {}  {:>7.1} fsyncs/1000",
            summary(runs.iter().map(|r| r.jobs_per_s).collect()),
            f[f.len() / 2]
        );
    }
}

/// Lateness of a paced run: p50, p99, max (µs) and early deliveries.
#[cfg(feature = "redis")]
type Lateness = (u64, u64, u64, u64);

/// One producer sends `rate` jobs/s, each due `delay` later, for `secs`; four
/// consumers reserve and ack. Lateness = when `reserve` returned − the deadline
/// the producer computed (its clock before the send, plus `delay`; carried in
/// the payload). Not `job.deadline()`: Redis's is the server's deadline mapped
/// with a clock reading taken before the reserve, so it could never count an
/// early delivery. Server and client share this host's clock. Returns (p50,
/// p99, max) in µs and the count of early deliveries.
#[cfg(feature = "redis")]
fn paced<Q: JobQueue + Clone + 'static>(q: Q, rate: u64, delay: Duration, secs: u64) -> Lateness {
    let total = rate * secs;
    let lateness = Arc::new(std::sync::Mutex::new(Vec::with_capacity(total as usize)));
    let early = Arc::new(AtomicU64::new(0));
    let got = Arc::new(AtomicU64::new(0));
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let (q, lateness, early, got) = (q.clone(), lateness.clone(), early.clone(), got.clone());
            thread::spawn(move || {
                while got.load(Ordering::Relaxed) < total {
                    let Some(job) = q.reserve_timeout(LEASE, Duration::from_millis(50)).unwrap() else {
                        continue;
                    };
                    let now = SystemTime::now();
                    let ns = u64::from_le_bytes(job.payload()[..8].try_into().unwrap());
                    let deadline = SystemTime::UNIX_EPOCH + Duration::from_nanos(ns);
                    match now.duration_since(deadline) {
                        Ok(late) => lateness.lock().unwrap().push(late.as_micros() as u64),
                        Err(_) => {
                            early.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    assert!(q.ack(&job).unwrap());
                    got.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut payload = [0u8; PAYLOAD];
    let start = Instant::now();
    for i in 0..total {
        let at = start + Duration::from_nanos(i * 1_000_000_000 / rate);
        if let Some(wait) = at.checked_duration_since(Instant::now()) {
            thread::sleep(wait);
        }
        let deadline = SystemTime::now() + delay;
        let ns = deadline.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos() as u64;
        payload[..8].copy_from_slice(&ns.to_le_bytes());
        q.send_after(&payload, delay).unwrap();
    }
    for c in consumers {
        c.join().unwrap();
    }
    let mut l = lateness.lock().unwrap().clone();
    l.sort_unstable();
    let pick =
        |f: f64| l.get(((l.len() as f64 * f) as usize).min(l.len().saturating_sub(1))).copied().unwrap_or(0);
    (pick(0.5), pick(0.99), l.last().copied().unwrap_or(0), early.load(Ordering::Relaxed))
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

/// The embedded queue against Redis (a private `redis-server`, AOF with
/// `appendfsync always`, on loopback), in one run, interleaved.
#[cfg(feature = "redis")]
fn compare(repeats: usize, jobs: u64) {
    let server = redis_server::RedisServer::start("bench");
    let redis_q = |tag: &str| {
        delayq_durable::RedisQueue::connect(&server.url(), &format!("bench-{tag}-{}", std::process::id()))
            .unwrap()
    };
    println!("## embedded (redb) vs Redis {} (AOF, appendfsync always), same run", redis_version());
    println!(
        "(jobs/s sent + reserved + acked, 16 producers + 16 consumers; min / median / max of {repeats})"
    );
    let mut e2e: Vec<(&str, Vec<f64>)> =
        ["embedded, per job", "redis, per job", "embedded, batches of 64", "redis, batches of 64"]
            .into_iter()
            .map(|n| (n, Vec::new()))
            .collect();
    let mut lateness: Vec<(&str, Vec<Lateness>)> = vec![("embedded", Vec::new()), ("redis", Vec::new())];
    for r in 0..repeats {
        e2e[0].1.push(end_to_end(16, jobs, 1).jobs_per_s);
        e2e[1].1.push(end_to_end_on(redis_q(&format!("e{r}")), 16, jobs, 1, || 0).jobs_per_s);
        e2e[2].1.push(end_to_end(16, jobs * 4, 64).jobs_per_s);
        e2e[3].1.push(end_to_end_on(redis_q(&format!("b{r}")), 16, jobs * 4, 64, || 0).jobs_per_s);
        let (q, path) = fresh("paced");
        lateness[0].1.push(paced(q, 1000, Duration::from_millis(20), 3));
        let _ = std::fs::remove_file(path);
        lateness[1].1.push(paced(redis_q(&format!("p{r}")), 1000, Duration::from_millis(20), 3));
        eprintln!("repeat {} done, load {}", r + 1, loadavg());
    }
    for (name, xs) in e2e {
        println!("  {name:<28} {}", summary(xs));
    }
    println!("paced: 1,000 jobs/s for 3 s, each due 20 ms after its send, 4 consumers; lateness µs (reserve returned − the producer's deadline)");
    println!("(per repeat: p50 / p99 / max, early)");
    for (name, runs) in lateness {
        let cells: Vec<String> =
            runs.iter().map(|(p50, p99, max, early)| format!("{p50}/{p99}/{max}, {early}")).collect();
        println!("  {name:<10} {}", cells.join("  |  "));
    }
}

/// As `end_to_end_on(q, threads, jobs, 1)`, on the async client: `threads`
/// producer and `threads` consumer tasks on `rt`. Returns jobs/s.
#[cfg(feature = "async")]
fn end_to_end_async<Q: delayq_durable::AsyncJobQueue + Clone + 'static>(
    rt: &tokio::runtime::Runtime,
    q: Q,
    threads: u64,
    jobs: u64,
) -> f64 {
    let per = jobs / threads;
    let total = per * threads;
    let acked = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..threads {
            let q2 = q.clone();
            tasks.push(tokio::spawn(async move {
                let payload = vec![1u8; PAYLOAD];
                for _ in 0..per {
                    q2.send_at(&payload, SystemTime::now()).await.unwrap();
                }
            }));
            let (q, acked) = (q.clone(), acked.clone());
            tasks.push(tokio::spawn(async move {
                while acked.load(Ordering::Relaxed) < total {
                    if let Some(job) = q.reserve_timeout(LEASE, Duration::from_millis(20)).await.unwrap() {
                        assert!(q.ack(&job).await.unwrap());
                        acked.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(acked.load(Ordering::Relaxed), total);
    assert_eq!(rt.block_on(q.len()).unwrap(), 0);
    total as f64 / secs
}

/// The blocking clients against the async ones, end to end, interleaved.
#[cfg(feature = "async")]
fn sync_vs_async(repeats: usize, jobs: u64) {
    let cores = thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(cores).enable_all().build().unwrap();
    #[cfg(feature = "redis-async")]
    let server = redis_server::RedisServer::start("bench-async");
    #[cfg(feature = "redis-async")]
    let redis_q = |tag: &str| {
        delayq_durable::RedisQueue::connect(&server.url(), &format!("bench-{tag}-{}", std::process::id()))
            .unwrap()
    };
    println!("## blocking vs async clients: end to end per job, 16 producers + 16 consumers (threads, or tasks on a {cores}-thread tokio runtime), {PAYLOAD}-byte payloads, {jobs} jobs per run");
    println!("(jobs/s min / median / max of {repeats}, interleaved; embedded fsync per commit; Redis AOF appendfsync always)");
    let mut rows: Vec<(&str, Vec<f64>)> =
        vec![("embedded, blocking threads", Vec::new()), ("embedded, async tasks", Vec::new())];
    #[cfg(feature = "redis-async")]
    rows.extend([("redis, blocking threads", Vec::new()), ("redis, async tasks", Vec::new())]);
    for r in 0..repeats {
        rows[0].1.push(end_to_end(16, jobs, 1).jobs_per_s);
        let (q, path) = fresh("e2e-async");
        rows[1].1.push(end_to_end_async(&rt, delayq_durable::AsyncDurableQueue::from(q), 16, jobs));
        let _ = std::fs::remove_file(path);
        #[cfg(feature = "redis-async")]
        {
            rows[2].1.push(end_to_end_on(redis_q(&format!("s{r}")), 16, jobs, 1, || 0).jobs_per_s);
            let aq = delayq_durable::AsyncRedisQueue::new(redis_q(&format!("a{r}"))).unwrap();
            rows[3].1.push(end_to_end_async(&rt, aq, 16, jobs));
        }
        eprintln!("repeat {} done, load {}", r + 1, loadavg());
    }
    let median = |xs: &[f64]| {
        let mut v = xs.to_vec();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    for pair in rows.chunks(2) {
        println!("  {:<28} {}", pair[0].0, summary(pair[0].1.clone()));
        println!(
            "  {:<28} {}   async / blocking (medians): {:.2}",
            pair[1].0,
            summary(pair[1].1.clone()),
            median(&pair[1].1) / median(&pair[0].1)
        );
    }
}

/// The server's counters of committed transactions and WAL fsyncs.
#[cfg(all(feature = "redis", feature = "postgres"))]
fn pg_counters(url: &str) -> (u64, u64) {
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let commits: i64 = c
        .query_one("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()", &[])
        .unwrap()
        .get(0);
    let syncs: i64 = c.query_one("SELECT wal_sync FROM pg_stat_wal", &[]).unwrap().get(0);
    (commits as u64, syncs as u64)
}

/// redb, Redis and PostgreSQL in one run, interleaved (see the file's doc).
#[cfg(all(feature = "redis", feature = "postgres"))]
fn backends(repeats: usize, jobs: u64) {
    let redis = redis_server::RedisServer::start("bench3");
    let pg = pg_server::PgServer::start("bench3");
    let pg_version = {
        let mut c = postgres::Client::connect(&pg.url(), postgres::NoTls).unwrap();
        c.query_one("SHOW server_version", &[]).unwrap().get::<_, String>(0)
    };
    let tag = |t: &str, r: usize| format!("bench-{t}{r}-{}", std::process::id());
    let redis_q = |t: &str, r: usize| delayq_durable::RedisQueue::connect(&redis.url(), &tag(t, r)).unwrap();
    let pg_q = |t: &str, r: usize| delayq_durable::PgQueue::connect(&pg.url(), &tag(t, r)).unwrap();
    println!(
        "## redb vs Redis {} (AOF, appendfsync always) vs PostgreSQL {pg_version} (fsync on), same run",
        redis_version()
    );
    println!("(jobs/s sent + reserved + acked, 16 producers + 16 consumers, {jobs} jobs per job-at-a-time run, {} in batches; min / median / max of {repeats}; commits / WAL fsyncs per 1,000 jobs, median)", jobs * 4);
    let names = [
        "redb, per job",
        "redis, per job",
        "postgres, per job",
        "redb, batches of 64",
        "redis, batches of 64",
        "postgres, batches of 64",
    ];
    let mut e2e: Vec<Vec<f64>> = names.iter().map(|_| Vec::new()).collect();
    // Per row: (commits, fsyncs) per 1,000 jobs, per repeat.
    let mut per_k: Vec<Vec<(f64, f64)>> = names.iter().map(|_| Vec::new()).collect();
    let mut lateness: Vec<(&str, Vec<Lateness>)> =
        vec![("redb", Vec::new()), ("redis", Vec::new()), ("postgres", Vec::new())];
    for r in 0..repeats {
        for (row, batch, n) in [(0, 1, jobs), (3, 64, jobs * 4)] {
            let run = end_to_end(16, n, batch);
            e2e[row].push(run.jobs_per_s);
            per_k[row].push((run.fsyncs_per_1000, run.fsyncs_per_1000));
            e2e[row + 1].push(end_to_end_on(redis_q(&format!("e{batch}"), r), 16, n, batch, || 0).jobs_per_s);
            let (c0, s0) = pg_counters(&pg.url());
            let run = end_to_end_on(pg_q(&format!("e{batch}"), r), 16, n, batch, || 0);
            let (c1, s1) = pg_counters(&pg.url());
            e2e[row + 2].push(run.jobs_per_s);
            let k = n as f64 / 1000.0;
            per_k[row + 2].push(((c1 - c0) as f64 / k, (s1 - s0) as f64 / k));
        }
        let (q, path) = fresh("paced");
        lateness[0].1.push(paced(q, 1000, Duration::from_millis(20), 3));
        let _ = std::fs::remove_file(path);
        lateness[1].1.push(paced(redis_q("p", r), 1000, Duration::from_millis(20), 3));
        lateness[2].1.push(paced(pg_q("p", r), 1000, Duration::from_millis(20), 3));
        eprintln!("repeat {} done, load {}", r + 1, loadavg());
    }
    for ((name, xs), ks) in names.iter().zip(e2e).zip(per_k) {
        let counts = if name.starts_with("redis") {
            "(not counted)".to_string()
        } else {
            let med = |f: fn(&(f64, f64)) -> f64| {
                let mut v: Vec<f64> = ks.iter().map(f).collect();
                v.sort_by(|a, b| a.partial_cmp(b).unwrap());
                v[v.len() / 2]
            };
            if name.starts_with("redb") {
                format!("{:.1} durable commits (each one fsync)", med(|k| k.0))
            } else {
                format!("{:.1} commits, {:.1} WAL fsyncs", med(|k| k.0), med(|k| k.1))
            }
        };
        println!("  {name:<26} {}   per 1,000 jobs: {counts}", summary(xs));
    }
    println!("paced: 1,000 jobs/s for 3 s, each due 20 ms after its send, 4 consumers; lateness µs (reserve returned − the producer's deadline)");
    println!("(per repeat: p50 / p99 / max, early)");
    for (name, runs) in lateness {
        let cells: Vec<String> =
            runs.iter().map(|(p50, p99, max, early)| format!("{p50}/{p99}/{max}, {early}")).collect();
        println!("  {name:<10} {}", cells.join("  |  "));
    }
}

#[cfg(feature = "redis")]
fn redis_version() -> String {
    let out = std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .map(|o| o.stdout)
        .unwrap_or_default();
    String::from_utf8_lossy(&out)
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .unwrap_or("?")
        .to_string()
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
    if a.what == "worker" {
        worker_vs_loop(a.repeats, a.jobs);
    }
    #[cfg(feature = "redis")]
    if a.what == "compare" || a.what == "all" {
        compare(a.repeats, a.jobs);
    }
    #[cfg(all(feature = "redis", feature = "postgres"))]
    if a.what == "backends" {
        backends(a.repeats, a.jobs);
    }
    #[cfg(not(all(feature = "redis", feature = "postgres")))]
    if a.what == "backends" {
        eprintln!("`backends` needs the redis and postgres features: --features redis,postgres");
    }
    #[cfg(feature = "async")]
    if a.what == "async" {
        sync_vs_async(a.repeats, a.jobs);
    }
    #[cfg(not(feature = "async"))]
    if a.what == "async" {
        eprintln!("`async` needs the async feature: --features async (or redis-async for the Redis rows)");
    }
    #[cfg(not(feature = "redis"))]
    if a.what == "compare" {
        eprintln!("`compare` needs the redis feature: --features redis");
    }
    println!("load average after: {}", loadavg());
    let _ = std::fs::remove_dir_all(dir());
}
