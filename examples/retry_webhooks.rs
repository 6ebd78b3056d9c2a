//! Webhook delivery with rate-limited retries: a `delayq::workqueue::WorkQueue`
//! fed with webhook ids, four workers, and a simulated flaky endpoint that
//! fails some deliveries a few times before they go through (and one always).
//! Failures are retried with exponential backoff (2 ms, 4 ms, 8 ms, … capped at
//! 50 ms) under an overall token bucket; after 6 failures a webhook is given up
//! on. Finishes in well under a second.
//!
//! Run with `cargo run --example retry_webhooks`.

use delayq::workqueue::{ExponentialFailure, MaxOf, TokenBucket, WorkQueue};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const WEBHOOKS: u32 = 24;
const WORKERS: usize = 4;
const MAX_FAILURES: usize = 6;

/// The endpoint: webhook `id` fails its first `id % 4` attempts, and webhook 13
/// always fails. Deterministic, so every run tells the same story.
struct FlakyEndpoint {
    attempts: Mutex<HashMap<u32, u32>>,
}

impl FlakyEndpoint {
    fn deliver(&self, id: u32) -> Result<(), String> {
        let attempt = {
            let mut a = self.attempts.lock().unwrap();
            let n = a.entry(id).or_insert(0);
            *n += 1;
            *n
        };
        thread::sleep(Duration::from_micros(300)); // the request
        if id == 13 || attempt <= id % 4 {
            Err(format!("503 on attempt {attempt}"))
        } else {
            Ok(())
        }
    }
}

fn main() {
    let limiter = MaxOf::new(vec![
        Box::new(ExponentialFailure::new(Duration::from_millis(2), Duration::from_millis(50))),
        Box::new(TokenBucket::new(2_000.0, 50)),
    ]);
    let queue = WorkQueue::builder().rate_limiter(limiter).build().expect("start the queue");
    let endpoint = Arc::new(FlakyEndpoint { attempts: Mutex::new(HashMap::new()) });
    let finished = Arc::new(AtomicUsize::new(0));
    let delivered = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();

    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (queue, endpoint) = (queue.clone(), endpoint.clone());
            let (finished, delivered) = (finished.clone(), delivered.clone());
            thread::spawn(move || {
                while let Some(id) = queue.get() {
                    match endpoint.deliver(id) {
                        Ok(()) => {
                            let retries = queue.num_requeues(&id);
                            println!("worker {w}: webhook {id:>2} delivered after {retries} retries");
                            queue.forget(&id);
                            delivered.fetch_add(1, Ordering::SeqCst);
                            finished.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) if queue.num_requeues(&id) < MAX_FAILURES => {
                            println!("worker {w}: webhook {id:>2} failed ({e}), retrying");
                            queue.add_rate_limited(id);
                        }
                        Err(e) => {
                            println!("worker {w}: webhook {id:>2} failed ({e}), giving up");
                            queue.forget(&id);
                            finished.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    queue.done(&id);
                }
            })
        })
        .collect();

    for id in 0..WEBHOOKS {
        queue.add(id);
    }
    queue.add(7); // a duplicate while 7 is still waiting: not delivered twice

    let deadline = start + Duration::from_secs(10);
    while finished.load(Ordering::SeqCst) < WEBHOOKS as usize && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    queue.shut_down_with_drain();
    for w in workers {
        w.join().unwrap();
    }

    let stats = queue.stats();
    println!(
        "\n{} of {WEBHOOKS} webhooks delivered in {:?}; {} adds, {} retries, {} dropped while delayed",
        delivered.load(Ordering::SeqCst),
        start.elapsed(),
        stats.adds,
        stats.retries,
        stats.dropped_delayed,
    );
    println!(
        "queue latency p50 {:?} p99 {:?}; work p50 {:?} max {:?}",
        stats.queue_latency.p50, stats.queue_latency.p99, stats.work_duration.p50, stats.work_duration.max
    );
    assert_eq!(finished.load(Ordering::SeqCst), WEBHOOKS as usize);
    assert_eq!(delivered.load(Ordering::SeqCst), WEBHOOKS as usize - 1); // all but 13
}
