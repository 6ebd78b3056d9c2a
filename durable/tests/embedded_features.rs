//! The embedded (redb) backend's issue 33 primitives: priorities and aging,
//! uniqueness keys, `reserve_excluding`, the schedule store, and all of them
//! across a reopen.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use delayq_durable::{
    Durability, DurableError, DurableQueue, Fire, Inspect, JobId, JobInfo, JobState, SendOptions, Sent,
    StoredSchedule, Unique, UniqueStates, TICK_KIND,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "delayq-features-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn file(&self) -> PathBuf {
        self.0.join("q.redb")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A queue syncing every 5 ms (the tests send thousands of jobs one by one).
fn open(dir: &TempDir) -> DurableQueue {
    DurableQueue::builder().durability(Durability::Window(ms(5))).open(dir.file()).unwrap()
}

fn prio(p: u8) -> SendOptions {
    SendOptions::new().priority(p)
}

fn created(sent: Sent) -> JobId {
    assert!(sent.created(), "{sent:?}");
    sent.id()
}

#[test]
fn a_thousand_due_jobs_of_mixed_priorities_come_out_by_priority_then_deadline_then_id() {
    let dir = TempDir::new("order");
    let q = open(&dir);
    let base = SystemTime::now() - Duration::from_secs(10);
    let mut want = Vec::new();
    for i in 0..1000u64 {
        let p = ((i * 7) % 10) as u8;
        // 40 distinct deadlines: many ties, broken by id (send order).
        let at = base + ms((i * 13) % 40);
        let id = created(q.send_with(format!("{i}").as_bytes(), at, &prio(p)).unwrap());
        want.push((p, at, id));
    }
    want.sort();
    let mut got = Vec::new();
    while let Some(job) = q.reserve_timeout(Duration::from_secs(60), ms(50)).unwrap() {
        got.push((job.priority(), job.deadline(), job.id()));
        assert!(q.ack(&job).unwrap());
    }
    assert_eq!(got.len(), 1000);
    assert!(got == want, "first difference at {:?}", got.iter().zip(&want).position(|(a, b)| a != b));
}

#[test]
fn reserve_many_takes_the_most_urgent_due_jobs() {
    let dir = TempDir::new("many");
    let q = open(&dir);
    let past = SystemTime::now() - ms(100);
    for p in [9u8, 5, 0, 7, 3, 1] {
        q.send_with(&[p], past, &prio(p)).unwrap();
    }
    let mut jobs = q.reserve_many(Duration::from_secs(30), 3, ms(500)).unwrap();
    while jobs.len() < 3 {
        jobs.extend(q.reserve_many(Duration::from_secs(30), 3 - jobs.len(), ms(500)).unwrap());
    }
    let mut ps: Vec<u8> = jobs.iter().map(|j| j.priority()).collect();
    ps.sort();
    assert_eq!(ps, [0, 1, 3]);
}

#[test]
fn priorities_never_make_a_job_early() {
    let dir = TempDir::new("early");
    let q = open(&dir);
    let sent = SystemTime::now();
    let urgent = created(q.send_with(b"urgent, later", sent + ms(300), &prio(0)).unwrap());
    let lazy = created(q.send_with(b"lazy, due", sent - ms(1), &prio(9)).unwrap());
    let job = q.reserve_timeout(Duration::from_secs(30), ms(200)).unwrap().unwrap();
    assert_eq!((job.id(), job.priority()), (lazy, 9));
    assert_eq!(q.reserve_timeout(Duration::from_secs(30), ms(50)).unwrap(), None);
    let job = q.reserve_timeout(Duration::from_secs(30), Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(job.id(), urgent);
    assert!(SystemTime::now() >= sent + ms(300), "reserved before its deadline");
}

#[test]
fn the_priority_is_reported_by_reserve_the_dead_set_and_the_inspection_api_and_old_sends_have_0() {
    let dir = TempDir::new("report");
    let q = DurableQueue::builder().max_attempts(1).open(dir.file()).unwrap();
    let id = created(q.send_with(b"x", SystemTime::now(), &prio(4).kind("k")).unwrap());
    let plain = q.send_after(b"y", Duration::from_secs(3600)).unwrap();
    assert_eq!(q.job(id).unwrap().unwrap().priority, 4);
    assert_eq!(q.job(plain).unwrap().unwrap().priority, 0);
    let job = q.reserve(Duration::from_secs(30)).unwrap();
    assert_eq!((job.id(), job.priority(), job.kind()), (id, 4, "k"));
    assert!(q.nack(&job, SystemTime::now()).unwrap());
    let dead = q.dead_jobs(10).unwrap();
    assert_eq!((dead.len(), dead[0].priority()), (1, 4));
}

#[test]
fn bad_options_store_nothing() {
    let dir = TempDir::new("bad");
    let q = DurableQueue::builder().max_payload(8).open(dir.file()).unwrap();
    let now = SystemTime::now();
    assert!(matches!(q.send_with(b"x", now, &prio(10)), Err(DurableError::InvalidArgument(_))));
    assert!(matches!(
        q.send_with(b"x", now, &SendOptions::new().kind("a\nb")),
        Err(DurableError::InvalidArgument(_))
    ));
    assert!(matches!(
        q.send_with(b"123456789", now, &SendOptions::new()),
        Err(DurableError::PayloadTooLarge { .. })
    ));
    assert!(matches!(
        q.send_with(b"x", now + Duration::from_secs(200 * 365 * 86_400), &SendOptions::new()),
        Err(DurableError::DeadlineOutOfRange)
    ));
    assert_eq!(q.len().unwrap(), 0);
    let step = DurableQueue::builder().priority_aging(Duration::from_micros(999)).open(dir.0.join("b.redb"));
    assert!(matches!(step, Err(DurableError::InvalidArgument(_))));
}

fn unique(key: &str) -> SendOptions {
    SendOptions::new().unique(Unique::new(key))
}

#[test]
fn a_held_key_returns_the_existing_job_and_stores_nothing() {
    let dir = TempDir::new("uniq");
    let q = open(&dir);
    let now = SystemTime::now();
    let a = created(q.send_with(b"1", now, &unique("k")).unwrap());
    assert_eq!(q.send_with(b"2", now, &unique("k")).unwrap(), Sent::Existing(a));
    assert_eq!(q.len().unwrap(), 1);
    // Leased still holds it (Both, the default).
    let job = q.reserve(Duration::from_secs(30)).unwrap();
    assert_eq!(q.send_with(b"3", now, &unique("k")).unwrap(), Sent::Existing(a));
    // Acked without a period: the key is free.
    assert!(q.ack(&job).unwrap());
    let b = created(q.send_with(b"4", now, &unique("k")).unwrap());
    assert_ne!(a, b);
    // A cancelled job frees its key too.
    assert!(q.cancel(b).unwrap());
    created(q.send_with(b"5", now, &unique("k")).unwrap());
}

#[test]
fn the_covered_states_decide_and_a_dead_job_holds_only_through_a_period() {
    let dir = TempDir::new("states");
    let q = DurableQueue::builder().max_attempts(1).open(dir.file()).unwrap();
    let now = SystemTime::now();
    let pending_only = SendOptions::new().unique(Unique::new("p").states(UniqueStates::Pending));
    let a = created(q.send_with(b"a", now, &pending_only).unwrap());
    assert_eq!(q.send_with(b"a", now, &pending_only).unwrap(), Sent::Existing(a));
    let job = q.reserve(Duration::from_secs(30)).unwrap();
    // Leased is not covered: a new job is stored, and it holds the key now.
    let b = created(q.send_with(b"a", now + Duration::from_secs(3600), &pending_only).unwrap());
    assert_eq!(q.send_with(b"a", now, &pending_only).unwrap(), Sent::Existing(b));
    // The old job's ack does not free the key its successor holds.
    assert!(q.ack(&job).unwrap());
    assert_eq!(q.send_with(b"a", now, &pending_only).unwrap(), Sent::Existing(b));

    let leased_only = SendOptions::new().unique(Unique::new("l").states(UniqueStates::Leased));
    let c = created(q.send_with(b"c", now, &leased_only).unwrap());
    assert!(created(q.send_with(b"c", now + Duration::from_secs(3600), &leased_only).unwrap()) != c);

    // Dead, no period: free. Dead within a period: held.
    let dies = SendOptions::new().unique(Unique::new("d"));
    let d = created(q.send_with(b"d", now, &dies).unwrap());
    let job = loop {
        let j = q.reserve(Duration::from_secs(30)).unwrap();
        if j.id() == d {
            break j;
        }
    };
    assert!(q.kill(&job, "no").unwrap());
    assert!(q.send_with(b"d", now + Duration::from_secs(3600), &dies).unwrap().created());
    let period = SendOptions::new().unique(Unique::new("e").period(Duration::from_secs(3600)));
    let e = created(q.send_with(b"e", now, &period).unwrap());
    assert!(q.cancel(e).unwrap());
    assert_eq!(q.send_with(b"e", now, &period).unwrap(), Sent::Existing(e));
}

#[test]
fn a_period_holds_the_key_after_the_job_is_gone_until_it_runs_out() {
    let dir = TempDir::new("period");
    let q = open(&dir);
    let now = SystemTime::now();
    let opts = SendOptions::new().unique(Unique::new("p").period(ms(300)));
    let a = created(q.send_with(b"a", now, &opts).unwrap());
    let job = q.reserve(Duration::from_secs(30)).unwrap();
    assert!(q.ack(&job).unwrap());
    assert_eq!(q.send_with(b"a", now, &opts).unwrap(), Sent::Existing(a));
    std::thread::sleep(ms(350));
    let b = created(q.send_with(b"b", now, &opts).unwrap());
    assert_ne!(a, b);
    // Expired mappings are swept by later unique sends: many keys, each
    // cancelled inside its period, then sends after it.
    let short = |k: String| SendOptions::new().unique(Unique::new(k).period(ms(1)));
    for i in 0..40 {
        let id = q.send_with(b"x", now + Duration::from_secs(3600), &short(format!("s{i}"))).unwrap().id();
        assert!(q.cancel(id).unwrap());
    }
    std::thread::sleep(ms(5));
    for i in 0..40 {
        assert!(q
            .send_with(b"x", now + Duration::from_secs(3600), &short(format!("s{i}")))
            .unwrap()
            .created());
    }
}

#[test]
fn racing_sends_of_one_key_store_one_job() {
    let dir = TempDir::new("race");
    let q = DurableQueue::open(dir.file()).unwrap();
    for round in 0..20 {
        let key = format!("race-{round}");
        let sents: Vec<Sent> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    let (q, key) = (&q, key.clone());
                    s.spawn(move || q.send_with(b"r", SystemTime::now(), &unique(&key)).unwrap())
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(sents.iter().filter(|s| s.created()).count(), 1, "{sents:?}");
        assert!(sents.iter().all(|s| s.id() == sents[0].id()));
    }
    assert_eq!(q.len().unwrap(), 20);
}

fn us(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_micros() as u64
}

/// The pending tick jobs.
fn ticks(q: &DurableQueue) -> Vec<JobInfo> {
    q.jobs(JobState::Pending, usize::MAX).unwrap().into_iter().filter(|j| j.kind == TICK_KIND).collect()
}

fn fire(expect: u64, next: u64, deadlines: Vec<u64>) -> Fire {
    Fire {
        expect_next_us: expect,
        next_run_us: next,
        last_run_us: expect,
        kind: "report".into(),
        payload: b"r".to_vec(),
        priority: 3,
        deadlines_us: deadlines,
    }
}

#[test]
fn the_schedule_store_round_trips_and_keeps_one_pending_tick_job() {
    let dir = TempDir::new("sched");
    let q = open(&dir);
    let next = us(SystemTime::now()) + 3_600_000_000;
    assert_eq!(q.schedule_get("nightly").unwrap(), None);
    q.schedule_store("nightly", b"def-1", Some(next)).unwrap();
    q.schedule_store("alpha", b"def-a", None).unwrap();
    let want = StoredSchedule {
        name: "nightly".into(),
        def: b"def-1".to_vec(),
        next_run_us: Some(next),
        last_run_us: None,
    };
    assert_eq!(q.schedule_get("nightly").unwrap(), Some(want.clone()));
    let names: Vec<String> = q.schedule_list().unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["alpha", "nightly"]);
    // One tick job, due at next, kind TICK_KIND, the name as payload; the
    // paused schedule has none.
    let t = ticks(&q);
    assert_eq!(t.len(), 1);
    assert_eq!((t[0].payload.as_slice(), us(t[0].deadline), t[0].priority), (&b"nightly"[..], next, 0));
    // Stored again: replaced, still one tick job, at the new next.
    q.schedule_store("nightly", b"def-2", Some(next + 1_000_000)).unwrap();
    let t2 = ticks(&q);
    assert_eq!(t2.len(), 1);
    assert_ne!(t2[0].id, t[0].id);
    assert_eq!(us(t2[0].deadline), next + 1_000_000);
    assert_eq!(q.len().unwrap(), 1);
    // Paused: no tick job; last_run kept.
    assert!(q.schedule_fire("nightly", &fire(next + 1_000_000, next + 2_000_000, vec![])).unwrap());
    q.schedule_store("nightly", b"def-3", None).unwrap();
    assert!(ticks(&q).is_empty());
    let s = q.schedule_get("nightly").unwrap().unwrap();
    assert_eq!(
        (s.next_run_us, s.last_run_us, s.def.as_slice()),
        (None, Some(next + 1_000_000), &b"def-3"[..])
    );
    // A paused schedule does not fire.
    assert!(!q.schedule_fire("nightly", &fire(next + 2_000_000, next + 3_000_000, vec![1])).unwrap());
    // Removed: gone with its tick job.
    q.schedule_store("nightly", b"def-4", Some(next)).unwrap();
    assert_eq!(ticks(&q).len(), 1);
    assert!(q.schedule_remove("nightly").unwrap());
    assert!(!q.schedule_remove("nightly").unwrap());
    assert!(ticks(&q).is_empty());
    assert_eq!(q.schedule_get("nightly").unwrap(), None);
    assert_eq!(q.len().unwrap(), 0);
}

#[test]
fn a_fire_stores_its_jobs_once_and_moves_the_schedule_on() {
    let dir = TempDir::new("fire");
    let q = open(&dir);
    let now = us(SystemTime::now());
    let (t1, t2) = (now - 1_000, now + 3_600_000_000);
    q.schedule_store("s", b"d", Some(t1)).unwrap();
    // The worker's part: reserve the tick job, fire, ack it.
    let tick = q.reserve(Duration::from_secs(30)).unwrap();
    assert_eq!((tick.kind(), tick.payload()), (TICK_KIND, &b"s"[..]));
    assert!(ticks(&q).is_empty(), "a leased tick job is not pending");
    assert!(q.schedule_fire("s", &fire(t1, t2, vec![t1, t1 + 1])).unwrap());
    assert!(q.ack(&tick).unwrap());
    let s = q.schedule_get("s").unwrap().unwrap();
    assert_eq!((s.next_run_us, s.last_run_us), (Some(t2), Some(t1)));
    let jobs: Vec<JobInfo> =
        q.jobs(JobState::Pending, 100).unwrap().into_iter().filter(|j| j.kind == "report").collect();
    assert_eq!(jobs.len(), 2);
    assert!(jobs.iter().all(|j| j.priority == 3 && j.payload == b"r"));
    let t = ticks(&q);
    assert_eq!((t.len(), us(t[0].deadline)), (1, t2));
    // The same tick again: not fired, nothing stored.
    assert!(!q.schedule_fire("s", &fire(t1, t2, vec![t1])).unwrap());
    assert_eq!(q.len().unwrap(), 3);
    // Bad fires store nothing.
    let mut bad = fire(t2, t2 + 1, vec![t2]);
    bad.priority = 10;
    assert!(matches!(q.schedule_fire("s", &bad), Err(DurableError::InvalidArgument(_))));
    bad = fire(t2, t2 + 1, vec![t2]);
    bad.kind = "a\u{7}".into();
    assert!(matches!(q.schedule_fire("s", &bad), Err(DurableError::InvalidArgument(_))));
    assert!(matches!(q.schedule_store("", b"", None), Err(DurableError::InvalidArgument(_))));
    let big = vec![0u8; (1 << 20) + 4097];
    assert!(matches!(q.schedule_store("big", &big, None), Err(DurableError::PayloadTooLarge { .. })));
    assert_eq!(q.len().unwrap(), 3);
}

#[test]
fn a_fire_restores_a_missing_tick_job() {
    let dir = TempDir::new("restore");
    let q = open(&dir);
    let next = us(SystemTime::now()) + 3_600_000_000;
    q.schedule_store("s", b"d", Some(next)).unwrap();
    assert!(q.cancel(ticks(&q)[0].id).unwrap());
    assert!(!q.schedule_fire("s", &fire(next - 1, next + 1, vec![])).unwrap());
    let t = ticks(&q);
    assert_eq!((t.len(), us(t[0].deadline)), (1, next));
}

#[test]
fn threads_firing_one_tick_fire_it_once() {
    let dir = TempDir::new("fire-race");
    let q = DurableQueue::open(dir.file()).unwrap();
    let now = us(SystemTime::now());
    for round in 0..10u64 {
        let name = format!("s{round}");
        q.schedule_store(&name, b"d", Some(now)).unwrap();
        let wins: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..6)
                .map(|_| {
                    let (q, name) = (&q, name.clone());
                    s.spawn(move || {
                        usize::from(
                            q.schedule_fire(&name, &fire(now, now + 3_600_000_000, vec![now])).unwrap(),
                        )
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(wins, 1);
    }
    let reports =
        q.jobs(JobState::Pending, usize::MAX).unwrap().into_iter().filter(|j| j.kind == "report").count();
    assert_eq!(reports, 10);
    assert_eq!(ticks(&q).len(), 10);
}

/// CPU time (user + system) of the thread `tid` of this process.
fn cpu_time(tid: i32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

#[test]
fn reserve_excluding_takes_what_it_may_and_leaves_the_rest_unleased_and_uncounted() {
    let dir = TempDir::new("exclude");
    let q = open(&dir);
    let past = SystemTime::now() - Duration::from_secs(1);
    let a_ids = {
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| (0..250).map(|_| q.send_kind_at("a", b"a", past).unwrap()).collect::<Vec<_>>())
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect::<Vec<JobId>>()
        })
    };
    let b = q.send_kind_at("b", b"b", past + ms(500)).unwrap();
    let stop = delayq_durable::StopSignal::new();
    let exclude = vec!["a".to_string()];
    let job = q.reserve_excluding(Duration::from_secs(30), &exclude, &stop).unwrap().unwrap();
    assert_eq!((job.id(), job.kind()), (b, "b"));
    let stats = q.stats().unwrap();
    assert_eq!((stats.pending, stats.leased), (1000, 1));
    assert!(q.jobs(JobState::Pending, usize::MAX).unwrap().iter().all(|j| j.kind == "a" && j.attempt == 0));

    // Only "a" jobs due: it sleeps, using no CPU, until stop is raised.
    let raiser = stop.clone();
    let waiter = std::thread::spawn(move || {
        std::thread::sleep(ms(1500));
        raiser.raise();
    });
    let started = std::time::Instant::now();
    let got = std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        let (q, exclude, stop) = (&q, &exclude, &stop);
        let h = s.spawn(move || {
            // "/proc/thread-self" links to "<pid>/task/<tid>".
            let link = std::fs::read_link("/proc/thread-self").unwrap();
            tx.send(link.file_name().unwrap().to_str().unwrap().parse::<i32>().unwrap()).unwrap();
            q.reserve_excluding(Duration::from_secs(30), exclude, stop)
        });
        let tid = rx.recv().unwrap();
        // The burst of parking the 1000 wake-ups is over well before this.
        std::thread::sleep(ms(700));
        let mid = cpu_time(tid);
        std::thread::sleep(ms(700));
        let end = cpu_time(tid);
        assert!(end - mid <= ms(20), "busy while only excluded jobs are due: {:?} CPU in 700 ms", end - mid);
        h.join().unwrap()
    });
    assert_eq!(got.unwrap(), None);
    assert!(started.elapsed() >= ms(1400));
    waiter.join().unwrap();
    assert_eq!(q.stats().unwrap().leased, 1);
    assert!(q.jobs(JobState::Pending, usize::MAX).unwrap().iter().all(|j| j.attempt == 0));

    // A plain reserve then gets the "a" jobs, every one.
    let mut got = Vec::new();
    while let Some(job) = q.reserve_timeout(Duration::from_secs(30), ms(200)).unwrap() {
        assert_eq!((job.kind(), job.attempt()), ("a", 1));
        got.push(job.id());
    }
    got.sort();
    let mut want = a_ids;
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn a_plain_reserve_already_blocked_gets_a_job_an_excluding_consumer_parked() {
    let dir = TempDir::new("strand");
    let q = open(&dir);
    for _ in 0..20 {
        let stop = delayq_durable::StopSignal::new();
        let (got, excluder) = std::thread::scope(|s| {
            let plain =
                s.spawn(|| q.reserve_timeout(Duration::from_secs(30), Duration::from_secs(10)).unwrap());
            let excl =
                s.spawn(|| q.reserve_excluding(Duration::from_secs(30), &["a".to_string()], &stop).unwrap());
            // Both blocked; the job's timer goes to either.
            std::thread::sleep(ms(30));
            let id = q.send_kind_after("a", b"a", ms(20)).unwrap();
            let got = plain.join().unwrap().expect("the plain reserve is not stranded");
            assert_eq!(got.id(), id);
            assert!(q.ack(&got).unwrap());
            stop.raise();
            (got, excl.join().unwrap())
        });
        assert_eq!(got.kind(), "a");
        assert_eq!(excluder, None);
    }
}

#[test]
fn a_reserve_excluding_that_starts_later_takes_a_parked_job_and_a_blocked_one_wakes_for_its_kind() {
    let dir = TempDir::new("later");
    let q = open(&dir);
    let stop_a = delayq_durable::StopSignal::new();
    let a = q.send_kind_at("a", b"a", SystemTime::now()).unwrap();
    // Excludes "a": parks it, then blocks.
    std::thread::scope(|s| {
        let h =
            s.spawn(|| q.reserve_excluding(Duration::from_secs(30), &["a".to_string()], &stop_a).unwrap());
        std::thread::sleep(ms(100));
        // One that excludes "b" only takes the parked "a" job at once.
        let stop_b = delayq_durable::StopSignal::new();
        let job = q.reserve_excluding(Duration::from_secs(30), &["b".to_string()], &stop_b).unwrap().unwrap();
        assert_eq!(job.id(), a);
        // A "c" job due later wakes the blocked one (it may take it).
        let c = q.send_kind_after("c", b"c", ms(50)).unwrap();
        let got = h.join().unwrap().unwrap();
        assert_eq!(got.id(), c);
    });
}

#[test]
fn aging_lets_an_old_low_priority_job_out_before_a_newer_urgent_one() {
    let dir = TempDir::new("aging");
    let q = DurableQueue::builder()
        .durability(Durability::Window(ms(5)))
        .priority_aging(ms(100))
        .open(dir.file())
        .unwrap();
    let now = SystemTime::now();
    // Priority 5, due 1 s ago: aged 10 steps, effective 0.
    let old = created(q.send_with(b"old", now - Duration::from_secs(1), &prio(5)).unwrap());
    // Priority 1, due 150 ms ago: aged 1 step, effective 0, later deadline.
    let urgent = created(q.send_with(b"urgent", now - ms(150), &prio(1)).unwrap());
    // Priority 0, due now: effective 0, the latest deadline.
    let newest = created(q.send_with(b"newest", now, &prio(0)).unwrap());
    let order: Vec<JobId> =
        (0..3).map(|_| q.reserve_timeout(Duration::from_secs(30), ms(500)).unwrap().unwrap().id()).collect();
    assert_eq!(order, [old, urgent, newest]);

    // Without aging, priority alone.
    let dir2 = TempDir::new("no-aging");
    let q = open(&dir2);
    let old = created(q.send_with(b"old", now - Duration::from_secs(1), &prio(5)).unwrap());
    let urgent = created(q.send_with(b"urgent", now, &prio(1)).unwrap());
    let order: Vec<JobId> =
        (0..2).map(|_| q.reserve_timeout(Duration::from_secs(30), ms(500)).unwrap().unwrap().id()).collect();
    assert_eq!(order, [urgent, old]);
}

#[test]
fn priorities_unique_keys_and_schedules_survive_a_reopen() {
    let dir = TempDir::new("reopen");
    let now = SystemTime::now();
    let next = us(now) + 3_600_000_000;
    let (low, high, keyed) = {
        let q = DurableQueue::open(dir.file()).unwrap();
        let low = created(q.send_with(b"low", now - ms(10), &prio(8)).unwrap());
        let high = created(q.send_with(b"high", now, &prio(2)).unwrap());
        let keyed = created(q.send_with(b"k", now + Duration::from_secs(3600), &unique("kept")).unwrap());
        q.schedule_store("hourly", b"def", Some(next)).unwrap();
        (low, high, keyed)
    };
    let q = DurableQueue::open(dir.file()).unwrap();
    assert_eq!(q.send_with(b"again", now, &unique("kept")).unwrap(), Sent::Existing(keyed));
    let a = q.reserve_timeout(Duration::from_secs(30), ms(500)).unwrap().unwrap();
    let b = q.reserve_timeout(Duration::from_secs(30), ms(500)).unwrap().unwrap();
    assert_eq!((a.id(), a.priority(), b.id(), b.priority()), (high, 2, low, 8));
    let s = q.schedule_get("hourly").unwrap().unwrap();
    assert_eq!((s.def.as_slice(), s.next_run_us), (&b"def"[..], Some(next)));
    assert_eq!(ticks(&q).len(), 1);
    // Leased at the "crash": due again at once, with its priority.
    drop(q);
    let q = DurableQueue::open(dir.file()).unwrap();
    let mut again: Vec<u8> = (0..2)
        .map(|_| q.reserve_timeout(Duration::from_secs(30), ms(500)).unwrap().unwrap().priority())
        .collect();
    again.sort();
    assert_eq!(again, [2, 8]);
}
