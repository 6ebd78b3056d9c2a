//! Crash test for the embedded durable queue: child processes that produce and
//! consume jobs are killed with SIGKILL at random points, over and over; then a
//! last child drains the queue, and the log of everything the children were
//! told is checked against the contract.
//!
//! ```sh
//! cargo run --release -p delayq-durable --features async --example crash_test -- --secs 60
//! # the checks can fail: with a durability window, a kill loses recent changes
//! cargo run --release -p delayq-durable --example crash_test -- --secs 10 --window-ms 300
//! ```
//!
//! Each child opens the same database file (one process owns it at a time, so
//! children run one after another) and runs producer threads, consumers (the
//! worker runtime, [`Worker`], with a handler that fails one delivery in ten),
//! or both; with the `async` feature, some children consume with the async
//! client instead (`AsyncDurableQueue`: three consumer tasks on one thread
//! under `futures::executor::block_on`, nacking one delivery in ten), so that
//! async consumers are killed mid-reserve, mid-lease and mid-ack too. Every event is appended to one log file with one `write`
//! per line *after* the call it reports returned (`S` sent, `D` delivered, `N`
//! nacked, `A` acked), and an ack's intent (`a`) *before* the call. A SIGKILL
//! leaves the page cache, so the log survives it exactly as written.
//!
//! Checked at the end (exit status 1 on any violation):
//! - every job whose send returned `Ok` was acked exactly once — or its ack
//!   was in flight when its consumer was killed (an `a` with no `A`), and it
//!   was never delivered again, so that ack committed;
//! - no job was delivered before its deadline by the wall clock: the deadline
//!   its producer asked for (logged with `S`), or, for a later attempt, the
//!   `retry_at` of an earlier attempt's nack that returned `Ok` (logged with
//!   `N`) — never the deadline the queue reports, which is what is being
//!   checked;
//! - no job was delivered after its ack;
//! - no job reached a consumer twice with the same attempt number (each
//!   redelivery declares itself with a higher `attempt()`);
//! - the database opened cleanly after every kill, and is empty at the end.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use delayq_durable::{Durability, DurableQueue, Event, RetryPolicy, Worker};

const LEASE: Duration = Duration::from_secs(3);

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// Prints the first few violations of each kind (all are counted).
fn report(printed: &mut HashMap<&'static str, u32>, kind: &'static str, what: String) {
    let n = printed.entry(kind).or_default();
    *n += 1;
    if *n <= 5 {
        eprintln!("{kind}: {what}");
    }
}

fn log(file: &File, line: String) {
    // One write per line, O_APPEND: lines never interleave.
    (&*file).write_all(line.as_bytes()).expect("writing the event log");
}

// ------------------------------------------------------------------ child

fn child(dir: &Path, role: &str, seed: u64, window_ms: u64) {
    let durability = if window_ms == 0 {
        Durability::Immediate
    } else {
        Durability::Window(Duration::from_millis(window_ms))
    };
    let q = match DurableQueue::builder().durability(durability).open(dir.join("jobs.redb")) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("child: open failed: {e}");
            std::process::exit(3);
        }
    };
    let file = Arc::new(OpenOptions::new().create(true).append(true).open(dir.join("events.log")).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let (producers, consumers) = match role {
        "produce" => (3, 0),
        "consume" | "drain" => (0, 3usize),
        "async" => (3, 0),
        _ => (3, 3),
    };
    for p in 0..producers {
        let (q, file, stop) = (q.clone(), file.clone(), stop.clone());
        threads.push(thread::spawn(move || {
            let mut rng = Rng::new(seed ^ ((p + 1) * 0x9e37_79b9));
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let batch = if rng.below(4) == 0 { 5 } else { 1 };
                let jobs: Vec<(u64, SystemTime)> = (0..batch)
                    .map(|_| {
                        n += 1;
                        let nonce = (seed << 24) ^ (p << 20) ^ n;
                        (nonce, SystemTime::now() + Duration::from_millis(rng.below(300)))
                    })
                    .collect();
                let payloads: Vec<[u8; 8]> = jobs.iter().map(|(nonce, _)| nonce.to_le_bytes()).collect();
                let ids = if batch == 1 {
                    vec![q.send_at(&payloads[0], jobs[0].1).unwrap()]
                } else {
                    let b: Vec<(&[u8], SystemTime)> =
                        payloads.iter().zip(&jobs).map(|(p, (_, at))| (p.as_slice(), *at)).collect();
                    q.send_many(&b).unwrap()
                };
                for (id, (nonce, at)) in ids.iter().zip(&jobs) {
                    log(&file, format!("S {} {nonce} {}\n", id.0, nanos(*at)));
                }
                thread::sleep(Duration::from_micros(rng.below(3000)));
            }
        }));
    }
    // Consumers: the worker runtime. The handler logs each delivery and an
    // ack's intent (`a`, just before the runtime acks); the runtime's events
    // log what the queue accepted: `A` acked, `N` nacked (with its retry_at),
    // `F` refused (lease lost).
    let drain = role == "drain";
    let worker = (consumers > 0).then(|| {
        let rng = Mutex::new(Rng::new(seed ^ 0x85eb_ca6b));
        let events = file.clone();
        let handler_log = file.clone();
        Worker::builder(q.clone())
            .handle_raw("", move |job, _ctx| {
                let now = nanos(SystemTime::now());
                let (id, attempt) = (job.id().0, job.attempt());
                log(&handler_log, format!("D {id} {attempt} {now}\n"));
                let (pause, fail) = {
                    let mut rng = rng.lock().unwrap();
                    (rng.below(2000), !drain && rng.below(10) == 0)
                };
                thread::sleep(Duration::from_micros(pause));
                if fail {
                    return Err("a random failure");
                }
                log(&handler_log, format!("a {id} {attempt}\n"));
                Ok(())
            })
            .on_event(move |e| match e {
                Event::Succeeded { job } => log(&events, format!("A {} {}\n", job.id().0, job.attempt())),
                Event::Retrying { job, at, .. } => {
                    log(&events, format!("N {} {} {}\n", job.id().0, job.attempt(), nanos(*at)))
                }
                Event::LeaseLost { job } => log(&events, format!("F {} {}\n", job.id().0, job.attempt())),
                Event::Dead { job, error } => eprintln!("child: {} dead: {error}", job.id()),
                _ => {}
            })
            .retry(RetryPolicy::exponential(Duration::from_millis(20)).cap(Duration::from_millis(100)))
            .lease(LEASE)
            .concurrency(consumers)
            .start()
            .expect("starting the worker")
    });
    #[cfg(feature = "async")]
    if role == "async" {
        async_consumers(&q, &file, seed);
    }
    if role == "drain" {
        while q.len().unwrap() > 0 {
            thread::sleep(Duration::from_millis(100));
        }
        let report = worker.expect("a drain has consumers").shutdown(Duration::from_secs(10));
        assert!(report.abandoned.is_empty(), "{report:?}");
        println!("drained: len {}, stats {:?}", q.len().unwrap(), q.stats());
        return;
    }
    // Killed by the parent long before this.
    thread::sleep(Duration::from_secs(3600));
    stop.store(true, Ordering::Relaxed);
}

/// Three consumer tasks on this thread, on the async client, logging as the
/// worker's handler and events do; they run until the child is killed.
#[cfg(feature = "async")]
fn async_consumers(q: &DurableQueue, file: &File, seed: u64) {
    use delayq_durable::{AsyncDurableQueue, AsyncJobQueue};

    let q = AsyncDurableQueue::from(q.clone());
    let rng = Mutex::new(Rng::new(seed ^ 0xc2b2_ae35));
    let consumer = || async {
        loop {
            let job = q.reserve(LEASE).await.expect("an async reserve");
            let (id, attempt) = (job.id().0, job.attempt());
            log(file, format!("D {id} {attempt} {}\n", nanos(SystemTime::now())));
            if rng.lock().unwrap().below(10) == 0 {
                let at = SystemTime::now() + Duration::from_millis(20);
                match q.nack(&job, at).await {
                    Ok(true) => log(file, format!("N {id} {attempt} {}\n", nanos(at))),
                    _ => log(file, format!("F {id} {attempt}\n")),
                }
                continue;
            }
            log(file, format!("a {id} {attempt}\n"));
            match q.ack(&job).await {
                Ok(true) => log(file, format!("A {id} {attempt}\n")),
                _ => log(file, format!("F {id} {attempt}\n")),
            }
        }
    };
    futures::executor::block_on(futures::future::join3(consumer(), consumer(), consumer()));
}

// ----------------------------------------------------------------- parent

#[derive(Default)]
struct JobLog {
    sent: bool,
    /// The deadline the producer asked for (ns), once its `S` line is read.
    deadline: Option<u64>,
    /// (attempt, position) of each delivery.
    deliveries: Vec<(u32, usize)>,
    /// (attempt, time ns) of each delivery.
    delivered_at: Vec<(u32, u64)>,
    /// (attempt, retry_at ns) of each nack that returned `Ok`.
    retries: Vec<(u32, u64)>,
    acks: Vec<usize>,
    intents: Vec<usize>,
    nacks: u32,
}

fn spawn_child(dir: &Path, role: &str, seed: u64, window_ms: u64) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--child", role, "--dir", dir.to_str().unwrap(), "--seed", &seed.to_string()])
        .args(["--window-ms", &window_ms.to_string()])
        .spawn()
        .expect("spawning a child")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let dir = get("--dir").map(PathBuf::from);
    // `--window-ms N`: children use `Durability::Window(N ms)`, which may lose
    // the last N ms of changes on a crash — the checks must then fail (this
    // is how to see that they can).
    let window_ms: u64 = get("--window-ms").and_then(|s| s.parse().ok()).unwrap_or(0);
    if let Some(role) = get("--child") {
        let seed = get("--seed").and_then(|s| s.parse().ok()).unwrap_or(1);
        child(&dir.expect("--dir"), &role, seed, window_ms);
        return;
    }
    let secs: u64 = get("--secs").and_then(|s| s.parse().ok()).unwrap_or(60);
    let dir =
        dir.unwrap_or_else(|| std::env::temp_dir().join(format!("delayq-crash-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = Rng::new(nanos(SystemTime::now()));
    let start = Instant::now();
    let (mut kills, mut clean_opens) = (0u64, 0u64);
    let mut roles: HashMap<&str, u64> = HashMap::new();
    while start.elapsed() < Duration::from_secs(secs) {
        let roles_here: &[&str] = if cfg!(feature = "async") {
            &["both", "both", "async", "produce", "consume"]
        } else {
            &["both", "both", "both", "produce", "consume"]
        };
        let role = roles_here[rng.below(roles_here.len() as u64) as usize];
        *roles.entry(role).or_default() += 1;
        let mut child = spawn_child(&dir, role, rng.next() >> 24, window_ms);
        // From "still opening" to "well into the work".
        thread::sleep(Duration::from_millis(10 + rng.below(700)));
        child.kill().expect("SIGKILL");
        let status = child.wait().unwrap();
        if status.code() == Some(3) {
            eprintln!("FAIL: a child could not open the database after kill {kills}");
            std::process::exit(1);
        }
        kills += 1;
        // The file must open cleanly after every kill.
        match DurableQueue::open(dir.join("jobs.redb")) {
            Ok(q) => {
                clean_opens += 1;
                drop(q);
            }
            Err(e) => {
                eprintln!("FAIL: the database did not open after kill {kills}: {e}");
                std::process::exit(1);
            }
        }
    }
    let mut drain = spawn_child(&dir, "drain", rng.next() >> 24, 0);
    let status = drain.wait().unwrap();
    assert!(status.success(), "the drain child failed: {status}");

    // --- check the log
    let text = std::fs::read_to_string(dir.join("events.log")).unwrap();
    let mut jobs: HashMap<u64, JobLog> = HashMap::new();
    let (mut early, mut failed_acks, mut lines) = (0u64, 0u64, 0usize);
    let mut printed = HashMap::new();
    for (pos, line) in text.lines().enumerate() {
        lines += 1;
        let f: Vec<&str> = line.split(' ').collect();
        let id: u64 = f[1].parse().unwrap_or_else(|_| panic!("bad log line {line:?}"));
        let j = jobs.entry(id).or_default();
        match f[0] {
            "S" => {
                j.sent = true;
                j.deadline = Some(f[3].parse().unwrap());
            }
            "D" => {
                let (attempt, now): (u32, u64) = (f[2].parse().unwrap(), f[3].parse().unwrap());
                j.deliveries.push((attempt, pos));
                j.delivered_at.push((attempt, now));
            }
            "a" => j.intents.push(pos),
            "A" => j.acks.push(pos),
            "N" => {
                j.nacks += 1;
                j.retries.push((f[2].parse().unwrap(), f[3].parse().unwrap()));
            }
            "F" => failed_acks += 1,
            other => panic!("bad log tag {other:?}"),
        }
    }
    let (
        mut sent,
        mut unlogged_sends,
        mut acked,
        mut in_flight,
        mut lost,
        mut twice,
        mut after_ack,
        mut same_attempt,
    ) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut deliveries, mut redeliveries, mut nacks) = (0u64, 0u64, 0u64);
    for (id, j) in &jobs {
        // Lines of one job may be logged out of order (a consumer can log a
        // delivery before its producer logs the send), so check once all are in.
        for &(attempt, now) in &j.delivered_at {
            let retry = j.retries.iter().filter(|&&(a, _)| a < attempt).map(|&(_, at)| at).max();
            let Some(due) = j.deadline.max(retry) else { continue };
            if now < due {
                early += 1;
                report(
                    &mut printed,
                    "EARLY",
                    format!("job {id} attempt {attempt}, {} ns before its deadline", due - now),
                );
            }
        }
        sent += u64::from(j.sent);
        unlogged_sends += u64::from(!j.sent);
        deliveries += j.deliveries.len() as u64;
        redeliveries += j.deliveries.iter().filter(|(a, _)| *a > 1).count() as u64;
        nacks += u64::from(j.nacks);
        if j.deliveries.windows(2).any(|w| w[1].0 <= w[0].0) {
            same_attempt += 1;
            report(
                &mut printed,
                "UNDECLARED REDELIVERY",
                format!("job {id}: (attempt, log line) {:?}", j.deliveries),
            );
        }
        match j.acks.len() {
            1 => {
                acked += 1;
                if j.deliveries.iter().any(|&(_, p)| p > j.acks[0]) {
                    after_ack += 1;
                    report(&mut printed, "DELIVERED AFTER ACK", format!("job {id}"));
                }
            }
            0 => {
                // Acceptable only if an ack was in flight at a kill and the job
                // never came back: that ack committed.
                let last_intent = j.intents.last().copied();
                match last_intent {
                    Some(p) if j.deliveries.iter().all(|&(_, d)| d < p) => in_flight += 1,
                    _ => {
                        lost += 1;
                        report(
                            &mut printed,
                            "LOST",
                            format!("job {id} (send logged: {}), deliveries {:?}", j.sent, j.deliveries),
                        );
                    }
                }
            }
            _ => {
                twice += 1;
                report(&mut printed, "ACKED TWICE", format!("job {id}"));
            }
        }
    }
    let q = DurableQueue::open(dir.join("jobs.redb")).expect("the final open");
    let left = q.len().unwrap();
    let dead = q.stats().unwrap().dead;
    drop(q);
    println!("crash test: {secs} s, {kills} children killed with SIGKILL at random points ({roles:?}), a drain child to finish");
    println!("  database opened cleanly after {clean_opens} of {kills} kills");
    println!("  log lines: {lines}");
    println!("  jobs sent (Ok logged): {sent}; sends that committed but were killed before logging: {unlogged_sends}");
    println!("  deliveries: {deliveries}, of which declared redeliveries (attempt > 1): {redeliveries}; nacks: {nacks}");
    println!("  acked exactly once: {acked}; ack in flight at a kill, never redelivered: {in_flight}");
    println!("  lost: {lost}");
    println!("  acked twice: {twice}");
    println!("  delivered after its ack: {after_ack}");
    println!("  undeclared redeliveries (same attempt twice): {same_attempt}");
    println!("  early deliveries (wall clock): {early}");
    println!("  acks refused (lease lost): {failed_acks}");
    println!("  left in the database: {left} (dead {dead})");
    let ok = lost == 0
        && twice == 0
        && after_ack == 0
        && same_attempt == 0
        && early == 0
        && left == 0
        && dead == 0
        && clean_opens == kills
        && acked + in_flight == sent + unlogged_sends;
    let _ = std::fs::remove_dir_all(&dir);
    if !ok {
        println!("crash test: FAILED");
        std::process::exit(1);
    }
    println!("crash test: passed");
}
