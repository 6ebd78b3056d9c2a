//! Recurring schedules, unique jobs, priorities, per-kind limits and handler
//! timeouts on the embedded queue (the same calls work on Redis and
//! PostgreSQL): `cargo run -p delayq-durable --example job_features`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use delayq_durable::{
    DurableQueue, JobKind, JobQueue, Missed, RetryPolicy, Schedule, SendOptions, Sent, Unique, Worker,
};

#[derive(serde::Serialize, serde::Deserialize)]
struct Report {
    name: String,
}
impl JobKind for Report {
    const KIND: &'static str = "report";
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Email {
    to: String,
}
impl JobKind for Email {
    const KIND: &'static str = "email";
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("delayq-job-features-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let queue = DurableQueue::open(dir.join("jobs.redb"))?;

    // 1. Recurring schedules, stored in the queue: every process may
    //    register them at start (the same definition changes nothing), and
    //    each tick becomes one job however many workers run.
    queue.schedule(
        "nightly-report",
        &Schedule::cron("30 2 * * *")?.in_zone("Europe/Berlin")?.missed(Missed::Once),
        &Report { name: "nightly".into() },
    )?;
    queue.schedule(
        "heartbeat",
        &Schedule::every(Duration::from_millis(500))?.missed(Missed::All(10)),
        &Report { name: "heartbeat".into() },
    )?;
    for s in queue.schedules()? {
        println!("schedule {:<15} {:<32} next {:?}", s.name, s.spec, s.next_run);
    }

    // 2. Unique jobs: a second send of a held key returns the first job.
    let at = SystemTime::now();
    let welcome = || SendOptions::new().kind(Email::KIND).unique(Unique::new("welcome:ana@example.com"));
    let payload = serde_json::to_vec(&Email { to: "ana@example.com".into() })?;
    let first = queue.send_with(&payload, at, &welcome())?;
    let again = queue.send_with(&payload, at, &welcome())?;
    assert_eq!(again, Sent::Existing(first.id()));
    println!("unique: {first:?}, then {again:?}");

    // 3. Priorities: among due jobs, 0 first (then deadline, then send order).
    for (i, p) in [5u8, 0, 9, 0].into_iter().enumerate() {
        let to = format!("user{i}@example.com");
        queue.enqueue_with(&Email { to }, at, SendOptions::new().priority(p))?;
    }

    // 4. Per-kind limits and 5. handler timeouts, in the worker.
    let emails = Arc::new(AtomicUsize::new(0));
    let reports = Arc::new(AtomicUsize::new(0));
    let worker = {
        let (emails, reports) = (emails.clone(), reports.clone());
        Worker::builder(queue.clone())
            .handle(move |job: Email, ctx| {
                println!("email to {} (priority {})", job.to, ctx.job().priority());
                emails.fetch_add(1, Ordering::Relaxed);
                Ok::<(), String>(())
            })
            .handle_async(move |job: Report| {
                let reports = reports.clone();
                async move {
                    println!("report {}", job.name);
                    reports.fetch_add(1, Ordering::Relaxed);
                    Ok::<(), String>(())
                }
            })
            .concurrency(4)
            .concurrency_for(Email::KIND, 1) // one email at a time
            .rate_limit_for(Email::KIND, 50, Duration::from_secs(1)) // and at most 50 a second
            .timeout_for(Report::KIND, Duration::from_secs(10)) // an async report is dropped at 10 s
            .retry_for(Report::KIND, RetryPolicy::exponential(Duration::from_secs(1)).max_attempts(3))
            .start()?
    };
    std::thread::sleep(Duration::from_millis(1600));
    let report = worker.shutdown(Duration::from_secs(5));
    println!(
        "handled {} emails and {} reports; the worker fired {} scheduled jobs",
        emails.load(Ordering::Relaxed),
        reports.load(Ordering::Relaxed),
        report.stats.scheduled
    );
    assert_eq!(emails.load(Ordering::Relaxed), 5);
    assert!(reports.load(Ordering::Relaxed) >= 2, "the heartbeat ticks every 500 ms");
    drop(queue);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
