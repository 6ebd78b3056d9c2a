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

#[test]
fn throughput_is_stored_in_the_file_and_survives_a_restart() {
    use delayq_durable::OfflineFile;
    let dir = temp_dir("throughput");
    let path = dir.join("jobs.redb");
    let since = SystemTime::now() - Duration::from_secs(120);
    {
        let q = DurableQueue::open(&path).unwrap();
        for kind in ["email.send", "email.send", "report.daily"] {
            q.send_kind_after(kind, b"{}", Duration::ZERO).unwrap();
        }
        for _ in 0..3 {
            let job = q.reserve(Duration::from_secs(60)).unwrap();
            if job.kind() == "report.daily" {
                assert!(q.kill(&job, "boom").unwrap());
            } else {
                assert!(q.ack(&job).unwrap());
            }
        }
    }
    let q = DurableQueue::open(&path).unwrap();
    let sum = |rows: &[delayq_durable::Throughput], kind: &str| {
        rows.iter().filter(|r| r.kind == kind).fold((0, 0), |(p, f), r| (p + r.processed, f + r.failed))
    };
    let rows = q.throughput(since).unwrap();
    assert_eq!((sum(&rows, "email.send"), sum(&rows, "report.daily")), ((2, 0), (0, 1)), "{rows:?}");
    drop(q);
    let rows = OfflineFile::open(&path).unwrap().throughput(since).unwrap();
    assert_eq!(sum(&rows, "email.send"), (2, 0), "the CLI reads the same: {rows:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
