//! Durable jobs with the worker runtime: a typed job, a handler, a retry
//! policy, a dead set for jobs that keep failing, a shutdown, and a restart
//! that finds everything where it was.
//!
//! ```sh
//! cargo run -p delayq-durable --example durable_jobs
//! ```

use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use delayq_durable::{DurableError, DurableQueue, Event, JobKind, JobQueue, RetryPolicy, Worker};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug)]
struct Webhook {
    url: String,
    body: String,
}

impl JobKind for Webhook {
    const KIND: &'static str = "webhook.deliver";
}

/// A pretend HTTP call: `flaky-N` fails on its first N attempts, `down` always fails.
fn deliver(hook: &Webhook, attempt: u32) -> Result<(), String> {
    if hook.url.contains("down") {
        return Err("connection refused".into());
    }
    let flaky = hook.url.split("flaky-").nth(1).and_then(|s| s[..1].parse::<u32>().ok());
    match flaky {
        Some(n) if attempt <= n => Err(format!("503 on attempt {attempt}")),
        _ => Ok(()),
    }
}

fn main() -> Result<(), DurableError> {
    let dir = std::env::temp_dir().join(format!("delayq-durable-jobs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let path = dir.join("webhooks.redb");
    let queue = DurableQueue::open(&path)?;

    // The runtime: a handler per kind, a retry policy, four threads.
    let (settled, events) = mpsc::channel();
    let worker = Worker::builder(queue.clone())
        .handle(|hook: Webhook, ctx| deliver(&hook, ctx.job().attempt()))
        .retry_for(Webhook::KIND, RetryPolicy::exponential(Duration::from_millis(20)).max_attempts(4))
        .concurrency(4)
        .on_event(move |e| match e {
            Event::Succeeded { job } => {
                drop(settled.send(format!("delivered {} (attempt {})", job.id(), job.attempt())))
            }
            Event::Dead { job, error } => {
                drop(settled.send(format!("dead: {} after {}: {error}", job.id(), job.attempt())))
            }
            _ => {}
        })
        .start()?;

    let urls = [
        "https://a.example/ok",
        "https://b.example/flaky-1/x",
        "https://c.example/flaky-2/y",
        "https://d.example/down",
    ];
    for (i, url) in urls.iter().cycle().take(12).enumerate() {
        let hook = Webhook { url: format!("{url}#{i}"), body: format!("{{\"event\":{i}}}") };
        queue.enqueue_after(&hook, Duration::from_millis(10 * i as u64))?;
    }
    println!("sent 12 webhooks to {}", path.display());
    let lines: Vec<String> = (0..12).map(|_| events.recv().expect("the worker runs")).collect();
    let delivered = lines.iter().filter(|l| l.starts_with("delivered")).count();
    println!(
        "{delivered} delivered, {} dead; e.g. {}",
        12 - delivered,
        lines.iter().find(|l| l.starts_with("dead")).unwrap()
    );
    assert_eq!(delivered, 9, "every job but the `down` ones is delivered");

    // Stop reserving; wait up to 5 s for running handlers; join the threads.
    let report = worker.shutdown(Duration::from_secs(5));
    println!("shut down: {:?}", report.stats);

    // A restart: the dead set, with each job's kind and last error, is in the file.
    drop(queue);
    let queue = DurableQueue::open(&path)?;
    let dead = queue.dead_jobs(100)?;
    assert_eq!((queue.len()?, dead.len()), (0, 3));
    for job in &dead {
        println!("  {} ({}): {}", job.id(), job.kind(), job.last_error().unwrap_or("-"));
    }
    assert!(dead
        .iter()
        .all(|j| j.attempt() == 4 && j.last_error() == Some("connection refused (attempt 4 of 4)")));
    // The endpoint is back: requeue one dead job, for now.
    assert!(queue.requeue_dead(dead[0].id(), SystemTime::now())?);
    let job = queue.reserve(Duration::from_secs(10))?;
    println!("requeued {} and delivered it as attempt {}", job.id(), job.attempt());
    assert!(queue.ack(&job)?);
    drop(queue);
    std::fs::remove_dir_all(&dir).expect("removing the temp dir");
    Ok(())
}
