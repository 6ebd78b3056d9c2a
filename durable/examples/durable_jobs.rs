//! A worker pool over durable jobs: typed payloads, retries with exponential
//! backoff and jitter, a dead set for jobs that keep failing, and a restart
//! that finds everything where it was.
//!
//! ```sh
//! cargo run -p delayq-durable --example durable_jobs
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime};

use delayq_durable::{DurableError, DurableQueue, Typed, TypedJob};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, Clone)]
struct Webhook {
    url: String,
    body: String,
}

const LEASE: Duration = Duration::from_secs(10);
const MAX_ATTEMPTS: u32 = 4;

/// The retry delay after a failed attempt: 20 ms, 40 ms, 80 ms, … with up to
/// 25 % jitter (so that jobs that failed together do not retry together).
fn backoff(attempt: u32, salt: u64) -> Duration {
    let base = Duration::from_millis(20) * 2u32.pow(attempt.saturating_sub(1).min(10));
    let jitter = (salt.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) % 250; // per mille of base / 4
    base + base * jitter as u32 / 1000
}

/// A pretend HTTP call: `flaky-N` fails on its first N attempts, `down` always fails.
fn deliver(hook: &Webhook, attempt: u32) -> Result<(), String> {
    if hook.url.contains("down") {
        return Err("connection refused".into());
    }
    if let Some(n) =
        hook.url.split("flaky-").nth(1).and_then(|s| s.split('/').next()).and_then(|s| s.parse::<u32>().ok())
    {
        if attempt <= n {
            return Err(format!("503 on attempt {attempt}"));
        }
    }
    Ok(())
}

fn work(q: &Typed<Webhook>, job: TypedJob<Webhook>, log: &Mutex<Vec<String>>) -> Result<(), DurableError> {
    let attempt = job.job().attempt();
    match deliver(job.value(), attempt) {
        Ok(()) => {
            q.ack(&job)?;
            log.lock().unwrap().push(format!("delivered {} (attempt {attempt})", job.value().url));
        }
        Err(why) => {
            let retry_at = SystemTime::now() + backoff(attempt, job.job().id().0);
            q.nack(&job, retry_at)?;
            let fate = if attempt >= MAX_ATTEMPTS { "dead" } else { "will retry" };
            log.lock()
                .unwrap()
                .push(format!("failed {} (attempt {attempt}: {why}); {fate}", job.value().url));
        }
    }
    Ok(())
}

fn main() -> Result<(), DurableError> {
    let dir = std::env::temp_dir().join(format!("delayq-durable-jobs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let path = dir.join("webhooks.redb");
    let queue = DurableQueue::builder().max_attempts(MAX_ATTEMPTS).open(&path)?;
    let q: Typed<Webhook> = Typed::new(queue.clone());

    let urls = [
        "https://a.example/ok",
        "https://b.example/flaky-1/x",
        "https://c.example/flaky-2/y",
        "https://d.example/down",
    ];
    for (i, url) in urls.iter().cycle().take(12).enumerate() {
        let hook = Webhook { url: format!("{url}#{i}"), body: format!("{{\"event\":{i}}}") };
        q.send_after(&hook, Duration::from_millis(10 * i as u64))?;
    }
    println!("sent {} webhooks to {}", queue.len()?, path.display());

    let log = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (q, log) = (q.clone(), log.clone());
            thread::spawn(move || -> Result<(), DurableError> {
                // Work until nothing is pending or leased (dead jobs do not count).
                while q.len()? > 0 {
                    if let Some(job) = q.reserve_timeout(LEASE, Duration::from_millis(100))? {
                        work(&q, job, &log)?;
                    }
                }
                Ok(())
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a worker panicked")?;
    }
    let log = log.lock().unwrap();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for line in log.iter() {
        *counts.entry(line.split(' ').next().unwrap()).or_default() += 1;
    }
    for line in log.iter().filter(|l| l.contains("flaky-2/y#2") || l.contains("down#3")) {
        println!("  {line}");
    }
    println!("attempts: {} delivered, {} failed", counts["delivered"], counts["failed"]);
    assert_eq!(counts["delivered"], 9, "every job but the dead ones is delivered");

    // A restart: the dead set is in the file.
    drop(q);
    drop(queue);
    let queue = DurableQueue::open(&path)?;
    let dead = queue.dead_jobs(100)?;
    println!("after a restart: {} pending, {} dead:", queue.len()?, dead.len());
    for job in &dead {
        let hook: Webhook = serde_json::from_slice(job.payload()).expect("a webhook");
        println!("  {} after {} attempts", hook.url, job.attempt());
    }
    assert_eq!(dead.len(), 3);
    assert!(dead.iter().all(|j| j.attempt() == MAX_ATTEMPTS));
    // The endpoint is back: requeue one dead job, for now.
    assert!(queue.requeue_dead(dead[0].id(), SystemTime::now())?);
    let job = queue.reserve(LEASE)?;
    println!("requeued {} and delivered it as attempt {}", job.id(), job.attempt());
    assert!(queue.ack(&job)?);
    drop(queue);
    std::fs::remove_dir_all(&dir).expect("removing the temp dir");
    Ok(())
}
