//! Durable jobs shared by several processes through Redis: this program
//! starts two worker processes (copies of itself) that take jobs from the same
//! queue, sends them a batch of typed jobs with deadlines, and waits until every
//! job is acked. A worker's failures are retried with backoff, and a job
//! redelivered says so (`attempt() > 1`).
//!
//! ```sh
//! cargo run -p delayq-durable --features redis --example redis_jobs                          # starts a private redis-server
//! cargo run -p delayq-durable --features redis --example redis_jobs -- redis://127.0.0.1:6379/  # or uses yours
//! ```

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use delayq_durable::{DurableError, RedisQueue, Typed};
use serde::{Deserialize, Serialize};

#[path = "../tests/redis_server/mod.rs"]
mod redis_server;

#[derive(Serialize, Deserialize, Debug)]
struct Thumbnail {
    image: String,
    size: u32,
}

const LEASE: Duration = Duration::from_secs(30);

fn worker(url: &str, queue: &str, me: &str) -> Result<(), DurableError> {
    let q: Typed<Thumbnail, RedisQueue> = Typed::new(RedisQueue::connect(url, queue)?);
    // Until the queue has been empty for a second.
    while let Some(job) = q.reserve_timeout(LEASE, Duration::from_secs(1))? {
        let (attempt, t) = (job.job().attempt(), job.value());
        // Every 5th image fails on its first attempt (a flaky image store).
        if attempt == 1 && t.image.ends_with('5') {
            let retry_at = SystemTime::now() + Duration::from_millis(50);
            q.nack(&job, retry_at)?;
            println!("{me}: {} failed, retry in 50 ms", t.image);
            continue;
        }
        q.ack(&job)?;
        println!("{me}: resized {} to {} px (attempt {attempt})", t.image, t.size);
    }
    Ok(())
}

fn main() -> Result<(), DurableError> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--worker") {
        return worker(&args[2], &args[3], &args[4]);
    }
    let server; // a private server if no URL was given
    let url = match args.get(1) {
        Some(url) => url.clone(),
        None => {
            if !redis_server::available() {
                return Ok(());
            }
            server = redis_server::RedisServer::start("example");
            server.url()
        }
    };
    let queue = format!("thumbnails-{}", std::process::id());
    let q: Typed<Thumbnail, RedisQueue> = Typed::new(RedisQueue::connect(&url, &queue)?);
    for i in 0..20u32 {
        let t = Thumbnail { image: format!("img-{i:02}"), size: 128 << (i % 3) };
        q.send_after(&t, Duration::from_millis(u64::from(i) * 10))?;
    }
    println!("sent 20 jobs to {queue} on {url}");
    let workers: Vec<_> = ["worker-a", "worker-b"]
        .iter()
        .map(|me| {
            Command::new(std::env::current_exe().expect("this program"))
                .args(["--worker", &url, &queue, me])
                .stdout(Stdio::inherit())
                .spawn()
                .expect("starting a worker process")
        })
        .collect();
    for mut w in workers {
        assert!(w.wait().expect("a worker").success(), "a worker failed");
    }
    let left = q.len()?;
    println!("all workers done; {left} jobs left");
    assert_eq!(left, 0);
    Ok(())
}
