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

#[test]
fn backlog_samples_are_stored_in_the_file_and_survive_a_restart() {
    use delayq_durable::OfflineFile;
    let dir = temp_dir("samples");
    let path = dir.join("jobs.redb");
    let since = SystemTime::now() - Duration::from_secs(120);
    {
        let q = DurableQueue::open(&path).unwrap();
        let past = SystemTime::now() - Duration::from_secs(5);
        for _ in 0..3 {
            q.send_at(b"due", past).unwrap();
        }
        q.send_after(b"later", Duration::from_secs(3600)).unwrap();
        for _ in 0..2 {
            let job = q.reserve(Duration::from_secs(30)).unwrap();
            assert!(q.ack(&job).unwrap());
        }
    }
    // No dashboard was open: the samples are the queue's own.
    let q = DurableQueue::open(&path).unwrap();
    let rows = delayq_durable::Inspect::samples(&q, since).unwrap();
    // The two reserves fall in one minute, or in two.
    assert!(!rows.is_empty() && rows.len() <= 2, "{rows:?}");
    assert_eq!(rows[0].pending, 4, "the count before the minute's first reserve took anything: {rows:?}");
    assert!(rows[0].lateness >= Duration::from_millis(4900), "the oldest due job was 5 s late: {rows:?}");
    assert!(rows[0].lateness < Duration::from_secs(60), "{rows:?}");
    drop(q);
    let offline = OfflineFile::open(&path).unwrap().samples(since).unwrap();
    assert_eq!(offline, rows, "the CLI reads the same");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(feature = "metrics")]
mod held_writer;

/// Defect 7's regression test, without a clock: the writer thread is held
/// in a commit (by the metrics hook above) and every inspection read still
/// answers, so the reads do not go through the writer. Were any of them
/// queued to the writer, it would wait until the gate opens, which it does
/// only after the reads (or the 60 s limit, a failure).
#[cfg(feature = "metrics")]
#[test]
fn inspection_reads_answer_while_the_writer_thread_is_held_in_a_commit() {
    use std::sync::{mpsc, Arc};

    use delayq_durable::{Filter, JobId, JobState};

    let dir = temp_dir("held");
    let gate = Arc::new(held_writer::Gate::default());
    let recorder = held_writer::GateRecorder(gate.clone());
    let q = metrics::with_local_recorder(&recorder, || DurableQueue::open(dir.join("jobs.redb"))).unwrap();
    let first = q.send_kind_after("email.send", b"{}", Duration::ZERO).unwrap();
    let job = q.reserve(Duration::from_secs(60)).unwrap();
    assert!(q.ack(&job).unwrap());
    q.send_kind_after("report.daily", b"{}", Duration::from_secs(3600)).unwrap();

    gate.shut();
    let sender = {
        let q = q.clone();
        std::thread::spawn(move || q.send_after(b"held", Duration::from_secs(3600)))
    };
    assert!(gate.wait_held(Duration::from_secs(60)), "the writer never committed the send");

    let (tx, rx) = mpsc::channel();
    let reader = {
        let q = q.clone();
        std::thread::spawn(move || {
            let since = SystemTime::now() - Duration::from_secs(300);
            let read = (|| {
                Ok::<_, delayq_durable::DurableError>((
                    Inspect::stats(&q)?.pending,
                    q.page(JobState::Pending, &Filter::default(), 0, 10)?.jobs.len(),
                    q.job(first)?.is_none() && q.job(JobId(first.0 + 1))?.is_some(),
                    q.oldest_due()?.is_some(),
                    q.kinds()?.len(),
                    q.throughput(since)?.iter().map(|t| t.processed).sum::<u64>(),
                    q.samples(since)?.len(),
                ))
            })();
            let _ = tx.send(read);
        })
    };
    let answered = rx.recv_timeout(Duration::from_secs(60));
    let writer_still_held = !sender.is_finished();
    gate.open();
    let read = answered.expect("an inspection read waited for the held writer thread").unwrap();
    assert!(writer_still_held, "the writer was held while the reads ran");
    // The held send is committed (its commit is what the writer records), so
    // the reads see it; its caller is not answered yet.
    assert_eq!(read, (2, 2, true, true, 2, 1, 1));
    sender.join().unwrap().unwrap();
    reader.join().unwrap();
    drop(q);
    std::fs::remove_dir_all(&dir).unwrap();
}
