//! Retries with back-off on tokio, with `delayq` as the retry queue: failed jobs
//! are re-sent with a growing delay; a worker task waits on the queue *and* a
//! shutdown signal with `tokio::select!` (no runtime timer behind the queue: the
//! dequeue proxy wakes the task when a retry is due).
//!
//! ```text
//! cargo run -p async-tests --example async_retry
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug)]
struct Job {
    id: u32,
    attempt: u32,
}

/// Job `id` fails until its attempt number reaches `id % 4 + 1`.
fn run(job: &Job) -> Result<(), String> {
    if job.attempt > job.id % 4 {
        Ok(())
    } else {
        Err(format!("job {} failed on attempt {}", job.id, job.attempt))
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (tx, rx) = delayq::unbounded::<Job>();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let start = Instant::now();
    for id in 0..8 {
        tx.send_after(Job { id, attempt: 1 }, Duration::ZERO).unwrap();
    }
    let finished = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let worker = {
        let (tx, finished) = (tx.clone(), finished.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    job = rx.recv_async() => {
                        let Ok(job) = job else { break };
                        let late = start.elapsed();
                        match run(&job) {
                            Ok(()) => {
                                println!("{:>7.1} ms  job {} done on attempt {}", late.as_secs_f64() * 1e3, job.id, job.attempt);
                                finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            }
                            Err(why) => {
                                // Exponential back-off: 5, 10, 20 ms...
                                let delay = Duration::from_millis(5 << (job.attempt - 1));
                                println!("{:>7.1} ms  {why}; retry in {delay:?}", late.as_secs_f64() * 1e3);
                                tx.send_after(Job { attempt: job.attempt + 1, ..job }, delay).unwrap();
                            }
                        }
                    }
                    _ = stop_rx.changed() => break,
                }
            }
            rx
        })
    };
    while finished.load(std::sync::atomic::Ordering::SeqCst) < 8 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop_tx.send(true).unwrap();
    let rx = worker.await.unwrap();
    assert_eq!(rx.len(), 0, "nothing left behind");
    println!("all 8 jobs done in {:.1} ms", start.elapsed().as_secs_f64() * 1e3);
}
