//! The inspection API on the embedded file: its reads run beside the writer
//! thread (a redb read transaction on the caller's thread), so an operator's
//! dashboard never holds up the application's sends.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use delayq_durable::{DurableQueue, Inspect};

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("delayq-inspect-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn sends_complete_while_a_full_table_read_runs() {
    let dir = temp_dir("beside");
    let q = DurableQueue::open(dir.join("jobs.redb")).unwrap();
    let later = SystemTime::now() + Duration::from_secs(3600);
    let payload = [7u8; 32];
    let jobs: Vec<(&[u8], SystemTime)> = (0..10_000).map(|_| (&payload[..], later)).collect();
    for _ in 0..10 {
        q.send_many(&jobs).unwrap();
    }
    // Three reads of the whole table (`oldest_due` reads every pending job),
    // and sends from this thread meanwhile: how many sends began and ended
    // inside one read?
    let reads = Mutex::new(Vec::new());
    let mut sends = Vec::new();
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            for _ in 0..3 {
                let start = Instant::now();
                assert!(q.oldest_due().unwrap().is_some());
                reads.lock().unwrap().push((start, Instant::now()));
            }
        });
        while !reader.is_finished() {
            let start = Instant::now();
            q.send_after(b"app", Duration::from_secs(3600)).unwrap();
            sends.push((start, Instant::now()));
        }
    });
    let reads = reads.into_inner().unwrap();
    let inside = sends.iter().filter(|(s, e)| reads.iter().any(|(rs, re)| s > rs && e < re)).count();
    let longest = reads.iter().map(|(s, e)| *e - *s).max().unwrap();
    eprintln!("{inside} of {} sends ran inside a read (longest read {longest:?})", sends.len());
    // On the writer thread a send waited for the read to end: none inside.
    assert!(inside >= 10, "{inside} sends completed during the reads; the reads held the writer");
    drop(q);
    std::fs::remove_dir_all(&dir).unwrap();
}
