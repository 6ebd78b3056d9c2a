//! `delayq-durable`'s metrics (embedded backend, label `queue`: the file's
//! path), checked against a known sequence of sends, leases, acks, nacks, an
//! expired lease and a kill, made by one thread (so every group commit
//! carries one change), then against the counts a reopen recovers.

use delayq_durable::DurableQueue;
use delayq_metrics_tests::Recording;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, SystemTime};

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("delayq-metrics-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn embedded_counts_gauges_and_commits() {
    let dir = TempDir::new("embedded");
    let path = dir.0.join("jobs.redb");
    let label = path.display().to_string();
    let q_label = [("queue", label.as_str())];
    let rec = Recording::new();
    let q = rec.build(|| DurableQueue::open(&path).unwrap());
    let now = SystemTime::now();

    // Sends: 2 in one change, 1 an hour out, 1 more below. One job is ready
    // at a time where the order matters.
    q.send_after(b"later", Duration::from_secs(3600)).unwrap();
    q.send_many(&[(b"a".as_slice(), now), (b"b".as_slice(), now)]).unwrap();
    // Reserve and ack; a second ack finds no lease (not counted).
    let j = q.reserve(Duration::from_secs(60)).unwrap();
    assert!(q.ack(&j).unwrap());
    assert!(!q.ack(&j).unwrap());
    // Reserve, nack, reserve again (a redelivery), ack.
    let j = q.reserve(Duration::from_secs(60)).unwrap();
    assert!(q.nack(&j, SystemTime::now()).unwrap());
    let j = q.reserve(Duration::from_secs(60)).unwrap();
    assert_eq!(j.attempt(), 2);
    assert!(q.ack(&j).unwrap());
    // Reserve with a short lease and let it expire: leased again (an expired
    // lease, a redelivery), then killed (to the dead set; not a nack).
    q.send_at(b"c", now).unwrap();
    let j = q.reserve(ms(30)).unwrap();
    thread::sleep(ms(40));
    let j2 = q.reserve(Duration::from_secs(60)).unwrap();
    assert_eq!((j2.id(), j2.attempt()), (j.id(), 2));
    assert!(q.kill(&j2, "gave up").unwrap());

    let c = q.commit_stats();
    let m = rec.snapshot();
    assert_eq!(m.counter("delayq_durable_sent_total", &q_label), 4);
    assert_eq!(m.counter("delayq_durable_reserved_total", &q_label), 5);
    assert_eq!(m.counter("delayq_durable_redelivered_total", &q_label), 2);
    assert_eq!(m.counter("delayq_durable_acked_total", &q_label), 2);
    assert_eq!(m.counter("delayq_durable_nacked_total", &q_label), 1);
    assert_eq!(m.counter("delayq_durable_lease_expired_total", &q_label), 1);
    let jobs = |state| m.gauge("delayq_durable_jobs", &[("queue", label.as_str()), ("state", state)]);
    assert_eq!((jobs("pending"), jobs("reserved"), jobs("dead")), (1.0, 0.0, 1.0));
    // One caller at a time: every group commit carried one change, and there
    // was one record per commit (a lease the wall clock had not reached yet
    // is one more commit of one change, so the count is the queue's own).
    let batches = m.histogram("delayq_durable_commit_batch_ops", &q_label);
    assert!(batches.len() >= 12, "{batches:?}");
    assert_eq!(batches.len() as u64, c.commits);
    assert_eq!(batches.iter().sum::<f64>() as u64, c.ops);
    assert!(batches.iter().all(|&n| n == 1.0), "{batches:?}");
    let fsynced =
        m.histogram("delayq_durable_commit_seconds", &[("queue", label.as_str()), ("fsync", "true")]);
    assert_eq!(fsynced.len() as u64, c.durable_commits);
    assert_eq!(fsynced.len() as u64, c.commits);
    assert!(m
        .histogram("delayq_durable_commit_seconds", &[("queue", label.as_str()), ("fsync", "false")])
        .is_empty());
    // The timer queue is a core queue named after the file.
    m.find("delayq_sent_total", &[("queue", format!("durable/{label}").as_str())]);
    drop(q);

    // A reopen sets the gauges from the counts it recovered.
    let rec = Recording::new();
    let q = rec.build(|| DurableQueue::open(&path).unwrap());
    assert_eq!(q.stats().unwrap().pending, 1);
    // A round trip to the writer, which sets the gauges when it starts.
    assert_eq!(q.dead_jobs(10).unwrap().len(), 1);
    let m = rec.snapshot();
    let jobs = |state| m.gauge("delayq_durable_jobs", &[("queue", label.as_str()), ("state", state)]);
    assert_eq!((jobs("pending"), jobs("reserved"), jobs("dead")), (1.0, 0.0, 1.0));
    assert_eq!(m.counter("delayq_durable_sent_total", &q_label), 0);
}
