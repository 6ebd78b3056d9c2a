//! The embedded (redb) backend: the conformance suite, then what only a file
//! has — recovery, locking, corrupt and unreadable files, durability windows.

mod conformance;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use conformance::{ms, Opts};
use delayq_durable::{Durability, DurableError, DurableQueue};

/// A directory removed when dropped.
/// (test helper)
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory.
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "delayq-durable-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    /// A path inside it.
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A queue that owns its temporary directory.
pub struct Fresh {
    queue: DurableQueue,
    _dir: TempDir,
}

impl std::ops::Deref for Fresh {
    type Target = DurableQueue;
    fn deref(&self) -> &DurableQueue {
        &self.queue
    }
}

fn open_fresh(opts: Opts) -> Option<FreshQueue> {
    let dir = TempDir::new("conf");
    let queue = DurableQueue::builder()
        .max_attempts(opts.max_attempts)
        .max_payload(opts.max_payload)
        .open(dir.file("q.redb"))
        .unwrap();
    Some(FreshQueue(Fresh { queue, _dir: dir }))
}

/// `JobQueue` for a queue and its directory (the directory outlives the queue).
pub struct FreshQueue(Fresh);

macro_rules! delegate {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        impl delayq_durable::JobQueue for FreshQueue {
            $(fn $name(&self, $($arg: $ty),*) -> $ret { delayq_durable::JobQueue::$name(&self.0.queue, $($arg),*) })*
        }
    };
}
use delayq_durable::{Job, JobId, Stats};
delegate! {
    send_at(payload: &[u8], at: SystemTime) -> Result<JobId, DurableError>;
    send_after(payload: &[u8], delay: Duration) -> Result<JobId, DurableError>;
    send_kind_at(kind: &str, payload: &[u8], at: SystemTime) -> Result<JobId, DurableError>;
    send_kind_after(kind: &str, payload: &[u8], delay: Duration) -> Result<JobId, DurableError>;
    send_many(jobs: &[(&[u8], SystemTime)]) -> Result<Vec<JobId>, DurableError>;
    reserve(lease: Duration) -> Result<Job, DurableError>;
    reserve_timeout(lease: Duration, timeout: Duration) -> Result<Option<Job>, DurableError>;
    reserve_or_stop(lease: Duration, stop: &delayq_durable::StopSignal) -> Result<Option<Job>, DurableError>;
    reserve_many(lease: Duration, max: usize, timeout: Duration) -> Result<Vec<Job>, DurableError>;
    ack(job: &Job) -> Result<bool, DurableError>;
    ack_many(jobs: &[Job]) -> Result<Vec<bool>, DurableError>;
    nack(job: &Job, retry_at: SystemTime) -> Result<bool, DurableError>;
    nack_with_error(job: &Job, retry_at: SystemTime, error: &str) -> Result<bool, DurableError>;
    kill(job: &Job, error: &str) -> Result<bool, DurableError>;
    extend(job: &Job, lease: Duration) -> Result<bool, DurableError>;
    cancel(id: JobId) -> Result<bool, DurableError>;
    len() -> Result<u64, DurableError>;
    stats() -> Result<Stats, DurableError>;
    dead_jobs(limit: usize) -> Result<Vec<Job>, DurableError>;
    requeue_dead(id: JobId, at: SystemTime) -> Result<bool, DurableError>;
    send_with(payload: &[u8], at: SystemTime, opts: &delayq_durable::SendOptions) -> Result<delayq_durable::Sent, DurableError>;
    reserve_excluding(lease: Duration, exclude: &[String], stop: &delayq_durable::StopSignal) -> Result<Option<Job>, DurableError>;
    schedule_store(name: &str, def: &[u8], next_run_us: Option<u64>) -> Result<(), DurableError>;
    schedule_get(name: &str) -> Result<Option<delayq_durable::StoredSchedule>, DurableError>;
    schedule_list() -> Result<Vec<delayq_durable::StoredSchedule>, DurableError>;
    schedule_remove(name: &str) -> Result<bool, DurableError>;
    schedule_fire(name: &str, fire: &delayq_durable::Fire) -> Result<bool, DurableError>;
    payload_limit() -> usize;
    queue_label() -> String;
}

conformance_tests!(super::open_fresh);
feature_tests!(super::open_fresh);

const LEASE: Duration = Duration::from_secs(30);

#[test]
fn reopening_recovers_pending_jobs_and_redelivers_orphaned_leases_at_once() {
    let dir = TempDir::new("recover");
    let path = dir.file("q.redb");
    let (far, leased_id);
    {
        let q = DurableQueue::open(&path).unwrap();
        far = q.send_after(b"far", Duration::from_secs(3600)).unwrap();
        leased_id = q.send_after(b"leased", ms(0)).unwrap();
        q.send_after(b"soon", ms(150)).unwrap();
        let job = q.reserve(Duration::from_secs(3600)).unwrap();
        assert_eq!((job.id(), job.attempt()), (leased_id, 1));
        // The holder "crashes": the queue is dropped with the lease open.
    }
    let q = DurableQueue::open(&path).unwrap();
    let s = q.stats().unwrap();
    assert_eq!((s.pending, s.leased), (2, 1));
    let job = q.reserve_timeout(LEASE, ms(100)).unwrap().expect("an orphaned lease is due at once");
    assert_eq!((job.id(), job.attempt(), job.payload()), (leased_id, 2, &b"leased"[..]));
    assert!(q.ack(&job).unwrap());
    let soon = q.reserve_timeout(LEASE, Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(soon.payload(), b"soon");
    assert!(SystemTime::now() >= soon.deadline());
    assert!(q.ack(&soon).unwrap());
    let new = q.send_after(b"new", ms(0)).unwrap();
    assert!(new > far, "ids are never reused: {new:?} after {far:?}");
    assert_eq!(q.len().unwrap(), 2);
}

#[test]
fn a_second_opener_in_this_process_is_told_the_file_is_locked() {
    let dir = TempDir::new("lock");
    let path = dir.file("q.redb");
    let q = DurableQueue::open(&path).unwrap();
    let err = DurableQueue::open(&path).unwrap_err();
    assert!(err.is_locked(), "{err:?}");
    assert!(err.to_string().contains("locked"), "{err}");
    drop(q);
    DurableQueue::open(&path).unwrap();
}

/// Run as a child: opens the file named by the env var and prints the outcome.
#[test]
fn child_opens_the_named_file() {
    let Some(path) = std::env::var_os("DELAYQ_DURABLE_CHILD_OPEN") else { return };
    match DurableQueue::open(Path::new(&path)) {
        Ok(_) => println!("CHILD: opened"),
        Err(e) => println!("CHILD: {} / {e}", if e.is_locked() { "locked" } else { "other" }),
    }
}

#[test]
fn a_second_process_is_told_the_file_is_locked() {
    let dir = TempDir::new("lock2");
    let path = dir.file("q.redb");
    let q = DurableQueue::open(&path).unwrap();
    let run_child = || {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_opens_the_named_file", "--nocapture", "--test-threads=1"])
            .env("DELAYQ_DURABLE_CHILD_OPEN", &path)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = run_child();
    assert!(out.contains("CHILD: locked / database"), "{out}");
    drop(q);
    let out = run_child();
    assert!(out.contains("CHILD: opened"), "{out}");
}

#[test]
fn a_file_that_is_not_a_database_is_reported_corrupt_and_left_alone() {
    let dir = TempDir::new("garbage");
    let path = dir.file("q.redb");
    let garbage: Vec<u8> = (0..64 * 1024u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(&path, &garbage).unwrap();
    let err = DurableQueue::open(&path).unwrap_err();
    assert!(err.is_corrupt(), "{err:?}");
    assert_eq!(std::fs::read(&path).unwrap(), garbage, "the file was changed");
}

#[test]
fn a_truncated_or_altered_database_gives_an_error_not_a_panic() {
    let dir = TempDir::new("trunc");
    let path = dir.file("q.redb");
    {
        let q = DurableQueue::open(&path).unwrap();
        let payload = vec![b'j'; 300];
        for _ in 0..200 {
            q.send_after(&payload, Duration::from_secs(3600)).unwrap();
        }
    }
    let good = std::fs::read(&path).unwrap();
    let mut cases = Vec::new();
    for cut in [good.len() / 2, good.len() / 4, 4096, 100] {
        cases.push((format!("truncated to {cut}"), good[..cut].to_vec()));
    }
    for at in (512..good.len()).step_by(good.len() / 7) {
        let mut bad = good.clone();
        bad[at] ^= 0x5a;
        cases.push((format!("byte {at} flipped"), bad));
    }
    let mut refused = 0;
    for (what, bytes) in cases {
        std::fs::write(&path, &bytes).unwrap();
        match DurableQueue::open(&path) {
            Err(e) => {
                refused += 1;
                assert!(
                    matches!(e, DurableError::Corrupt { .. } | DurableError::Io { .. }),
                    "{what}: unexpected error {e:?}"
                );
            }
            // An alteration the checks cannot see (in free space) may open,
            // but must not lose a job.
            Ok(q) => assert_eq!(q.len().unwrap(), 200, "{what}: opened and lost jobs"),
        }
    }
    assert!(refused >= 4, "truncations must be refused");
}

#[test]
fn a_record_that_does_not_decode_fails_the_open_naming_the_job() {
    let dir = TempDir::new("record");
    let path = dir.file("q.redb");
    {
        let q = DurableQueue::open(&path).unwrap();
        q.send_after(b"fine", Duration::from_secs(60)).unwrap();
    }
    {
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(redb::TableDefinition::<u64, &[u8]>::new("delayq_jobs")).unwrap();
            t.insert(5, &b"\x01\x09short"[..]).unwrap();
        }
        txn.commit().unwrap();
    }
    let err = DurableQueue::open(&path).unwrap_err();
    assert!(err.is_corrupt(), "{err:?}");
    assert!(err.to_string().contains("job 5"), "{err}");
}

#[test]
fn a_redb_file_of_another_application_is_refused() {
    let dir = TempDir::new("foreign");
    let path = dir.file("q.redb");
    {
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(redb::TableDefinition::<&str, &str>::new("delayq_jobs"))
            .unwrap()
            .insert("a", "b")
            .unwrap();
        txn.commit().unwrap();
    }
    let err = DurableQueue::open(&path).unwrap_err();
    assert!(err.is_corrupt(), "{err:?}");
}

#[test]
fn unusable_paths_give_io_errors() {
    let dir = TempDir::new("paths");
    let missing = dir.file("no/such/dir/q.redb");
    let err = DurableQueue::open(&missing).unwrap_err();
    assert!(matches!(err, DurableError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("no/such/dir"), "{err}");
    let file = dir.file("plain");
    std::fs::write(&file, b"x").unwrap();
    let err = DurableQueue::open(file.join("q.redb")).unwrap_err();
    assert!(matches!(err, DurableError::Io { .. }), "{err:?}");
    let err = DurableQueue::open(dir.file("")).unwrap_err();
    assert!(matches!(err, DurableError::Io { .. }), "a directory: {err:?}");
}

/// Run as a child: fills "the disk" (RLIMIT_FSIZE: writes past it fail with
/// EFBIG, as on a full disk they fail with ENOSPC) under an open queue.
#[test]
fn child_fills_the_disk() {
    let Some(path) = std::env::var_os("DELAYQ_DURABLE_CHILD_FULL") else { return };
    let q = DurableQueue::open(Path::new(&path)).unwrap();
    for i in 0..10u32 {
        q.send_after(&i.to_le_bytes(), Duration::from_secs(60)).unwrap();
    }
    let size = std::fs::metadata(&path).unwrap().len();
    // SAFETY: plain libc calls with valid arguments; this child runs one test.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let limit = libc::rlimit { rlim_cur: size as libc::rlim_t, rlim_max: libc::RLIM_INFINITY };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
    let big = vec![7u8; 512 * 1024];
    let mut stored = 10;
    let err = loop {
        match q.send_after(&big, Duration::from_secs(60)) {
            Ok(_) => stored += 1,
            Err(e) => break e,
        }
        assert!(stored < 1000, "the file limit never bit");
    };
    println!("CHILD: full: {err}");
    assert!(matches!(err, DurableError::Io { .. } | DurableError::Storage(_)), "{err:?}");
    assert_eq!(q.len().unwrap(), stored, "a failed send changed the count");
    // Space comes back: the queue goes on (the writer reopened the file after
    // the I/O error; redb refuses writes on a handle that saw one).
    // SAFETY: as above.
    unsafe {
        let limit = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
    q.send_after(b"after", Duration::from_secs(60)).expect("a send once space is back");
    stored += 1;
    let job = q.reserve_timeout(Duration::from_secs(30), Duration::ZERO).unwrap();
    assert!(job.is_none(), "nothing is due");
    println!("CHILD: stored {stored}");
}

#[test]
fn a_full_disk_gives_a_clear_error_and_loses_no_stored_job() {
    let dir = TempDir::new("full");
    let path = dir.file("q.redb");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_fills_the_disk", "--nocapture", "--test-threads=1"])
        .env("DELAYQ_DURABLE_CHILD_FULL", &path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("CHILD: full: "), "{stdout}");
    let stored: u64 =
        stdout.split("CHILD: stored ").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    let q = DurableQueue::open(&path).unwrap();
    assert_eq!(q.len().unwrap(), stored, "jobs whose send returned Ok were lost");
}

#[test]
fn bad_options_are_refused() {
    let dir = TempDir::new("opts");
    let err = DurableQueue::builder().max_attempts(0).open(dir.file("q.redb")).unwrap_err();
    assert!(matches!(err, DurableError::InvalidArgument(_)), "{err:?}");
    let err = DurableQueue::builder()
        .durability(Durability::Window(Duration::ZERO))
        .open(dir.file("q.redb"))
        .unwrap_err();
    assert!(err.to_string().contains("window"), "{err}");
}

#[test]
fn concurrent_senders_share_commits() {
    let dir = TempDir::new("group");
    let q = DurableQueue::open(dir.file("q.redb")).unwrap();
    let before = q.commit_stats();
    std::thread::scope(|s| {
        for t in 0..16u32 {
            let q = &q;
            s.spawn(move || {
                for i in 0..50u32 {
                    q.send_after(&(t * 1000 + i).to_le_bytes(), Duration::from_secs(60)).unwrap();
                }
            });
        }
    });
    let after = q.commit_stats();
    let commits = after.durable_commits - before.durable_commits;
    assert_eq!(q.len().unwrap(), 800);
    assert_eq!(after.ops - before.ops, 800);
    assert!(commits < 800, "800 sends from 16 threads took {commits} fsync'd commits: no grouping");
}

#[test]
fn a_durability_window_syncs_late_but_loses_nothing_on_a_clean_drop() {
    let dir = TempDir::new("window");
    let path = dir.file("q.redb");
    {
        let q = DurableQueue::builder().durability(Durability::Window(ms(50))).open(&path).unwrap();
        for i in 0..20u32 {
            q.send_after(&i.to_le_bytes(), Duration::from_secs(60)).unwrap();
        }
        let s = q.commit_stats();
        assert!(s.durable_commits < s.commits, "{s:?}: every commit was synced");
        // The window's sync comes 50 ms later, or later still on a loaded
        // machine: wait for it (a fixed 150 ms sleep failed beside four
        // spinning processes).
        let until = std::time::Instant::now() + Duration::from_secs(10);
        let mut s2 = q.commit_stats();
        while s2.durable_commits == s.durable_commits && std::time::Instant::now() < until {
            std::thread::sleep(ms(10));
            s2 = q.commit_stats();
        }
        assert!(s2.durable_commits > s.durable_commits, "{s2:?}: no sync after the window");
    }
    assert_eq!(DurableQueue::open(&path).unwrap().len().unwrap(), 20);
}

#[test]
fn close_wakes_blocked_reserves_and_lets_holders_finish() {
    let dir = TempDir::new("close");
    let q = DurableQueue::open(dir.file("q.redb")).unwrap();
    q.send_after(b"held", ms(0)).unwrap();
    let held = q.reserve(LEASE).unwrap();
    q.send_after(b"later", Duration::from_secs(3600)).unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| q.reserve(LEASE));
        std::thread::sleep(ms(100));
        q.close();
        assert!(waiter.join().unwrap().unwrap_err().is_closed());
    });
    assert!(q.send_after(b"x", ms(0)).unwrap_err().is_closed());
    assert!(q.ack(&held).unwrap(), "a holder can still ack after close");
    assert_eq!(q.len().unwrap(), 1, "the later job stays in the file");
}

/// Runs `f` on a new thread and waits up to 20 s for it: a call that hangs
/// fails the test instead of hanging it.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("{what} never returned"))
}

#[test]
fn a_file_overwritten_under_an_open_queue_gives_errors_never_a_hang() {
    // Issue 22.3a: redb panicked inside `dead_jobs`, outside the writer's
    // `catch_unwind`; the writer thread died, `dead_jobs` said `Closed` and the
    // next `send_after` waited forever in a mailbox nobody read.
    let dir = TempDir::new("overwrite");
    let path = dir.file("q.redb");
    // No page cache, so that the next read meets the overwritten pages.
    let q = DurableQueue::builder().cache_size(0).open(&path).unwrap();
    let payload = vec![b'j'; 300];
    for _ in 0..200 {
        q.send_after(&payload, Duration::from_secs(3600)).unwrap();
    }
    {
        use std::io::{Seek, SeekFrom, Write};
        let len = std::fs::metadata(&path).unwrap().len();
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(SeekFrom::Start(4096)).unwrap();
        let junk: Vec<u8> = (0..len - 4096).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        f.write_all(&junk).unwrap();
        f.sync_all().unwrap();
    }
    let q2 = q.clone();
    let dead = within("dead_jobs", move || q2.dead_jobs(10));
    let err = dead.expect_err("a read of an overwritten file succeeded");
    assert!(
        matches!(err, DurableError::Corrupt { .. } | DurableError::Storage(_) | DurableError::Io { .. }),
        "dead_jobs: {err:?}"
    );
    for round in 0..3 {
        let q2 = q.clone();
        let sent = within("send_after after the failure", move || q2.send_after(b"x", ms(0)));
        assert!(sent.is_err(), "round {round}: a send into an overwritten file succeeded: {sent:?}");
        let q2 = q.clone();
        let dead = within("dead_jobs after the failure", move || q2.dead_jobs(usize::MAX));
        assert!(dead.is_err(), "round {round}: {dead:?}");
        let q2 = q.clone();
        let cancelled = within("cancel after the failure", move || q2.cancel(JobId(1)));
        assert!(cancelled.is_err(), "round {round}: {cancelled:?}");
    }
    let q2 = q.clone();
    within("dropping the queue", move || drop(q2));
    within("dropping the last handle", move || drop(q));
}

#[cfg(feature = "serde")]
#[test]
fn typed_refuses_at_send_a_value_it_could_not_read_back() {
    // Issue 22.3c: NaN and infinities serialise to JSON `null`; `send` said
    // `Ok` and every `reserve` then failed with `Codec` until the job died.
    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Reading {
        sensor: u32,
        value: f64,
    }
    let dir = TempDir::new("typed");
    let raw = DurableQueue::open(dir.file("q.redb")).unwrap();
    use delayq_durable::Typed;
    let floats: Typed<f64> = Typed::new(raw.clone());
    let readings: Typed<Reading> = Typed::new(raw.clone());
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let err = floats.send_after(&bad, ms(0)).expect_err("a non-finite float was stored");
        assert!(matches!(err, DurableError::Codec(_)), "{bad}: {err:?}");
        let err = readings.send_after(&Reading { sensor: 1, value: bad }, ms(0)).unwrap_err();
        assert!(matches!(err, DurableError::Codec(_)), "{bad} in a struct: {err:?}");
        let err = floats.send_at(&bad, SystemTime::now()).unwrap_err();
        assert!(matches!(err, DurableError::Codec(_)), "send_at {bad}: {err:?}");
    }
    assert_eq!(raw.len().unwrap(), 0, "nothing was stored");
    readings.send_after(&Reading { sensor: 2, value: -0.5 }, ms(0)).unwrap();
    let job = readings.reserve(LEASE).unwrap();
    assert_eq!(job.value(), &Reading { sensor: 2, value: -0.5 });
    assert!(readings.ack(&job).unwrap());
}

/// The raw value of job `id` in the file.
fn raw_record(path: &Path, id: u64) -> Vec<u8> {
    use redb::ReadableDatabase;
    let db = redb::Database::create(path).unwrap();
    let txn = db.begin_read().unwrap();
    let t = txn.open_table(redb::TableDefinition::<u64, &[u8]>::new("delayq_jobs")).unwrap();
    let v = t.get(id).unwrap().expect("the record").value().to_vec();
    v
}

#[test]
fn jobs_without_kind_or_error_stay_in_the_first_record_format_and_others_survive_a_reopen() {
    let dir = TempDir::new("format");
    let path = dir.file("q.redb");
    let (plain, kinded);
    {
        let q = DurableQueue::open(&path).unwrap();
        plain = q.send_after(b"old", Duration::from_secs(3600)).unwrap();
        kinded = q.send_kind_after("report.build", b"new", ms(0)).unwrap();
        let job = q.reserve(LEASE).unwrap();
        assert_eq!(job.id(), kinded);
        assert!(q.kill(&job, "no handler for kind \"report.build\"").unwrap());
    }
    // What the first version wrote and reads: format 1, a 42-byte header.
    let old = raw_record(&path, plain.0);
    assert_eq!((old[0], old.len()), (1, 42 + 3));
    assert_eq!(raw_record(&path, kinded.0)[0], 2);
    let q = DurableQueue::open(&path).unwrap();
    let dead = q.dead_jobs(10).unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!((dead[0].kind(), dead[0].payload()), ("report.build", &b"new"[..]));
    assert_eq!(dead[0].last_error(), Some("no handler for kind \"report.build\""));
    assert!(q.requeue_dead(kinded, SystemTime::now()).unwrap());
    let job = q.reserve(LEASE).unwrap();
    assert_eq!(
        (job.kind(), job.last_error(), job.attempt()),
        ("report.build", Some("no handler for kind \"report.build\""), 2)
    );
    assert!(q.ack(&job).unwrap());
    assert_eq!(q.len().unwrap(), 1, "the format-1 job is still there");
}

#[test]
fn a_worker_refuses_bad_options_with_clear_errors() {
    use delayq_durable::Worker;
    let dir = TempDir::new("workeropts");
    let q = DurableQueue::open(dir.file("q.redb")).unwrap();
    let ok = |_: &delayq_durable::Job, _: &delayq_durable::Context<'_>| -> Result<(), String> { Ok(()) };
    let cases: Vec<(&str, Result<Worker, DurableError>)> = vec![
        ("no handler", Worker::builder(q.clone()).start()),
        ("twice", Worker::builder(q.clone()).handle_raw("a", ok).handle_raw("a", ok).start()),
        ("bad kind", Worker::builder(q.clone()).handle_raw("a\tb", ok).start()),
        ("long kind", Worker::builder(q.clone()).handle_raw(&"k".repeat(256), ok).start()),
        ("no threads", Worker::builder(q.clone()).handle_raw("a", ok).concurrency(0).start()),
        ("many threads", Worker::builder(q.clone()).handle_raw("a", ok).concurrency(1025).start()),
        ("zero lease", Worker::builder(q.clone()).handle_raw("a", ok).lease(Duration::ZERO).start()),
        (
            "NUL in a thread name",
            Worker::builder(q.clone()).handle_raw("a", ok).thread_name_prefix("w\0").start(),
        ),
    ];
    for (what, result) in cases {
        match result {
            Err(DurableError::InvalidArgument(msg)) => assert!(!msg.is_empty(), "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    let w = Worker::builder(q.clone()).handle_raw("a", ok).start().unwrap();
    let report = w.shutdown(Duration::from_secs(5));
    assert!(report.abandoned.is_empty());
}

#[test]
fn a_closed_queue_ends_the_workers_threads_and_shutdown_still_returns() {
    use delayq_durable::Worker;
    let dir = TempDir::new("workerclosed");
    let q = DurableQueue::open(dir.file("q.redb")).unwrap();
    let worker = Worker::builder(q.clone())
        .handle_raw("a", |_, _| -> Result<(), String> { Ok(()) })
        .concurrency(3)
        .start()
        .unwrap();
    // Blocked reserves return Closed; the threads end without a shutdown.
    q.close();
    let t = std::time::Instant::now();
    let report = worker.shutdown(Duration::from_secs(3600));
    assert!(t.elapsed() < Duration::from_secs(10), "shutdown waited {:?}", t.elapsed());
    assert_eq!(report.stats.queue_errors, 0);
}
