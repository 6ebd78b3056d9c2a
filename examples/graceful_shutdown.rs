//! Waiting on a delay queue *and* a shutdown signal from plain threads, with no
//! helper thread and no polling.
//!
//! Workers block in `recv()`. The shutdown path calls `close()` (no new sends)
//! and `take_pending()` (every item not yet received, returned to it): once the
//! queue is closed and empty, every blocked `recv()` returns `RecvError`, so the
//! workers wake up and exit at once, however far away the next deadline was. The
//! items taken back are the shutdown path's to persist or re-send; none is lost.
//!
//! ```text
//! cargo run --example graceful_shutdown
//! ```

use std::thread;
use std::time::{Duration, Instant};

fn main() {
    let (tx, rx) = delayq::unbounded::<String>();
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let rx = rx.clone();
            thread::spawn(move || {
                let mut done = 0;
                // Blocks until an item is due, or until shutdown: no timeout loop.
                while let Ok(job) = rx.recv() {
                    println!("worker {w}: {job}");
                    done += 1;
                }
                done
            })
        })
        .collect();
    for i in 0..3 {
        tx.send_after(format!("job {i} (due now)"), Duration::ZERO).unwrap();
    }
    for i in 3..8 {
        tx.send_after(format!("job {i} (due in an hour)"), Duration::from_secs(3600)).unwrap();
    }
    thread::sleep(Duration::from_millis(50)); // the due jobs run

    // The shutdown signal arrives.
    let asked = Instant::now();
    rx.close();
    let leftovers = rx.take_pending();
    let done: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    println!(
        "shutdown: workers stopped {:.1} ms after the signal, ran {done} jobs; {} jobs handed back:",
        asked.elapsed().as_secs_f64() * 1e3,
        leftovers.len()
    );
    for (deadline, job) in &leftovers {
        println!("  {job}, due in {:.0} s", deadline.saturating_duration_since(Instant::now()).as_secs_f64());
    }
    assert_eq!(done + leftovers.len(), 8, "every job ran or came back");
    assert!(tx.send_after("late".to_string(), Duration::ZERO).is_err(), "closed: no new sends");
}
