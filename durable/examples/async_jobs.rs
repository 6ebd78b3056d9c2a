//! The embedded queue's async client: producer and consumer tasks on one
//! thread (`futures::executor`, no runtime), a failed attempt retried, a
//! `StopSignal` that ends the idle consumer.
//!
//! `cargo run -p delayq-durable --features async --example async_jobs`

use std::time::{Duration, SystemTime};

use delayq_durable::{AsyncDurableQueue, AsyncJobQueue, DurableError, StopSignal};
use futures::executor::block_on;
use futures::future::join;

fn main() -> Result<(), DurableError> {
    let dir = std::env::temp_dir().join(format!("delayq-async-jobs-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| DurableError::Io { context: "creating a directory".into(), source: e })?;
    let q = AsyncDurableQueue::open(dir.join("jobs.redb"))?;
    let stop = StopSignal::new();

    let producer = async {
        for n in 0..3u32 {
            q.send_after(format!("resize image {n}").as_bytes(), Duration::from_millis(20 * u64::from(n)))
                .await?;
        }
        Ok::<(), DurableError>(())
    };
    let consumer = async {
        let mut done = 0;
        // Waits without blocking the thread; ends when `stop` is raised.
        while let Some(job) = q.reserve_or_stop(Duration::from_secs(30), &stop).await? {
            let text = String::from_utf8_lossy(job.payload()).into_owned();
            if text.ends_with('1') && job.attempt() == 1 {
                println!("{text}: attempt 1 failed, retrying in 10 ms");
                q.nack(&job, SystemTime::now() + Duration::from_millis(10)).await?;
                continue;
            }
            println!("{text}: done on attempt {}", job.attempt());
            q.ack(&job).await?;
            done += 1;
            if done == 3 {
                stop.raise();
            }
        }
        Ok::<(), DurableError>(())
    };
    let (sent, consumed) = block_on(join(producer, consumer));
    sent?;
    consumed?;
    assert_eq!(block_on(q.len())?, 0);
    drop(q);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
