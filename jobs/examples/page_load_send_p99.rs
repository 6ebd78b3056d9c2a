//! Measures what an open dashboard costs the application: the p99 of an
//! embedded `DurableQueue`'s `send_after` (each one committed with fsync)
//! while nothing reads the queue, and while the dashboard's overview is
//! loaded every 0.5 s (issue 35, defect 7: 4-10 ms became 80 ms when the
//! reads ran on the writer thread). The two conditions alternate, RUNS
//! times each, SECONDS seconds a run; it prints each run's p99 and the
//! min / median / max of each condition's p99s.
//!
//! ```text
//! cargo run --release -p delayq-jobs --example page_load_send_p99 -- [SECONDS] [RUNS] [JOBS]
//! ```
//!
//! Defaults: 20 s runs, 5 of each, 200,000 pending jobs in the file (so
//! that a page load reads something: the counts by kind and the oldest due
//! job read every job). Run it on an otherwise idle machine: it measures
//! the machine as much as the queue.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use delayq_durable::DurableQueue;
use delayq_jobs::dashboard::{self, Options};

fn arg(i: usize, default: u64) -> u64 {
    std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

/// One page load: `GET /`, read to the end.
fn load(addr: SocketAddr) -> std::io::Result<usize> {
    let mut s = TcpStream::connect(addr)?;
    write!(s, "GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut body = Vec::new();
    s.read_to_end(&mut body)?;
    Ok(body.len())
}

/// Sends for `seconds` (one at a time, as a request handler would) and
/// returns the p99 of their latencies, with a page load every 0.5 s
/// meanwhile if `pages` is given.
fn run(q: &DurableQueue, seconds: u64, pages: Option<SocketAddr>) -> (Duration, usize, usize) {
    let stop = Arc::new(AtomicBool::new(false));
    let loader = pages.map(|addr| {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut loads = 0;
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                load(addr).expect("a page load");
                loads += 1;
                std::thread::sleep(Duration::from_millis(500).saturating_sub(started.elapsed()));
            }
            loads
        })
    });
    let mut took = Vec::new();
    let end = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < end {
        let started = Instant::now();
        q.send_after(b"{\"to\":\"user@example.com\"}", Duration::from_secs(3600)).unwrap();
        took.push(started.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    let loads = loader.map_or(0, |l| l.join().unwrap());
    took.sort_unstable();
    let p99 = took[(took.len() * 99 / 100).min(took.len() - 1)];
    (p99, took.len(), loads)
}

fn summary(p99s: &mut [Duration]) -> String {
    p99s.sort_unstable();
    format!("min {:?} median {:?} max {:?}", p99s[0], p99s[p99s.len() / 2], p99s[p99s.len() - 1])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (seconds, runs, jobs) = (arg(1, 20), arg(2, 5).max(1), arg(3, 200_000));
    let dir = std::env::temp_dir().join(format!("delayq-page-load-p99-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let q = DurableQueue::open(dir.join("jobs.redb"))?;
    let later = SystemTime::now() + Duration::from_secs(3600);
    let mut left = jobs;
    while left > 0 {
        let n = left.min(10_000);
        let batch: Vec<(&[u8], SystemTime)> = (0..n).map(|_| (&b"{}"[..], later)).collect();
        q.send_many(&batch)?;
        left -= n;
    }
    let server = dashboard::serve(Arc::new(q.clone()), "127.0.0.1:0".parse()?, Options::default())?;
    println!("{jobs} pending jobs; {runs} runs of {seconds} s each, alternating");
    let (mut quiet, mut loaded) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let (p99, sends, _) = run(&q, seconds, None);
        println!("run {i} without page loads: send p99 {p99:?} ({sends} sends)");
        quiet.push(p99);
        let (p99, sends, loads) = run(&q, seconds, Some(server.addr()));
        println!("run {i} with a page load every 0.5 s: send p99 {p99:?} ({sends} sends, {loads} loads)");
        loaded.push(p99);
    }
    println!("send p99 without page loads: {}", summary(&mut quiet));
    println!("send p99 with page loads:    {}", summary(&mut loaded));
    server.shutdown();
    drop(q);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
