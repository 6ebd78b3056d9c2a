//! Webhook delivery with rate-limited retries: a `delayq::workqueue::WorkQueue`
//! fed with webhook ids, four workers, and a simulated flaky endpoint that
//! fails some deliveries a few times before they go through (and one always).
//! Failures are retried with exponential backoff (2 ms, 4 ms, 8 ms, … capped at
//! 50 ms) under an overall token bucket; a webhook that fails again after 6
//! retries is given up on. Finishes in well under a second.
//!
//! Run with `cargo run --example retry_webhooks`.

use delayq::workqueue::{ExponentialFailure, MaxOf, TokenBucket, WorkQueue};
use std::collections::HashMap;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const WEBHOOKS: u32 = 24;
const WORKERS: usize = 4;
const MAX_RETRIES: usize = 6;

/// How a webhook ended.
#[derive(Debug, PartialEq)]
enum Outcome {
    Delivered,
    GaveUp,
}

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
    let start = Instant::now();

    // Queued before any worker runs, so 7 is surely still waiting when its
    // duplicate comes: de-duplicated, not delivered twice.
    for id in 0..WEBHOOKS {
        queue.add(id);
    }
    queue.add(7);
    assert_eq!(queue.len(), WEBHOOKS as usize);

    let (outcomes_tx, outcomes) = mpsc::channel();
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (queue, endpoint, outcomes) = (queue.clone(), endpoint.clone(), outcomes_tx.clone());
            thread::spawn(move || {
                while let Some(id) = queue.get() {
                    match endpoint.deliver(id) {
                        Ok(()) => {
                            let retries = queue.num_requeues(&id);
                            println!("worker {w}: webhook {id:>2} delivered after {retries} retries");
                            queue.forget(&id);
                            outcomes.send((id, Outcome::Delivered)).unwrap();
                        }
                        Err(e) if queue.num_requeues(&id) < MAX_RETRIES => {
                            println!("worker {w}: webhook {id:>2} failed ({e}), retrying");
                            queue.add_rate_limited(id);
                        }
                        Err(e) => {
                            println!("worker {w}: webhook {id:>2} failed ({e}), giving up");
                            queue.forget(&id);
                            outcomes.send((id, Outcome::GaveUp)).unwrap();
                        }
                    }
                    queue.done(&id);
                }
            })
        })
        .collect();
    drop(outcomes_tx);

    // Wait for every webhook's outcome (blocking, no polling), 10 s at most.
    let deadline = start + Duration::from_secs(10);
    let mut ended = HashMap::new();
    while ended.len() < WEBHOOKS as usize {
        let left = deadline.saturating_duration_since(Instant::now());
        match outcomes.recv_timeout(left) {
            Ok((id, outcome)) => assert!(ended.insert(id, outcome).is_none(), "webhook {id} ended twice"),
            Err(e) => panic!("{} of {WEBHOOKS} webhooks ended by the deadline: {e}", ended.len()),
        }
    }
    queue.shut_down_with_drain();
    for w in workers {
        w.join().unwrap();
    }

    let stats = queue.stats();
    let delivered = ended.values().filter(|&o| *o == Outcome::Delivered).count();
    println!(
        "\n{delivered} of {WEBHOOKS} webhooks delivered in {:?}; {} adds, {} retries, {} dropped while delayed",
        start.elapsed(),
        stats.adds,
        stats.retries,
        stats.dropped_delayed,
    );
    println!(
        "queue latency p50 {:?} p99 {:?}; work p50 {:?} max {:?}",
        stats.queue_latency.p50, stats.queue_latency.p99, stats.work_duration.p50, stats.work_duration.max
    );
    // Webhook `id` is retried `id % 4` times, 13 until it is given up on; every
    // retry is one more add (the duplicate 7 was not one).
    let retries: u64 =
        (0..WEBHOOKS).map(|id| if id == 13 { MAX_RETRIES as u64 } else { u64::from(id % 4) }).sum();
    assert_eq!((stats.adds, stats.retries), (u64::from(WEBHOOKS) + retries, retries));
    assert_eq!(delivered, WEBHOOKS as usize - 1);
    assert_eq!(ended[&13], Outcome::GaveUp); // it always fails
    assert_eq!(stats.dropped_delayed, 0); // every retry ran before the shut down
}
