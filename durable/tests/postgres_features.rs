//! Issue 33 on PostgreSQL, against a private server: `send_with` (the
//! priority a job keeps, uniqueness keys and their release, racing sends of
//! one key from 16 threads), the reserve order (priority, deadline, id;
//! aging; never early), `reserve_excluding` (no lease taken of an excluded
//! kind, no polling, woken by a job it may take), the schedule store (the
//! tick job, compare-and-set fires from several threads), and a database of
//! schema version 1 upgraded in place.
#![cfg(feature = "postgres")]

mod pg_server;

use std::collections::HashMap;
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use delayq_durable::{
    DurableError, Fire, Inspect, JobId, JobState, PgQueue, SendOptions, Sent, StopSignal, Unique,
    UniqueStates, TICK_KIND,
};
use pg_server::{unique, PgServer};

const LEASE: Duration = Duration::from_secs(30);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Iteration counts are multiplied by `DELAYQ_TEST_SCALE` (default 1).
fn scaled(n: usize) -> usize {
    n * std::env::var("DELAYQ_TEST_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1)
}

fn shared() -> Option<&'static PgServer> {
    static SHARED: OnceLock<Option<&'static PgServer>> = OnceLock::new();
    *SHARED.get_or_init(|| {
        pg_server::available().then(|| pg_server::start_shared(|| PgServer::start("features")))
    })
}

fn open(tag: &str) -> Option<(PgQueue, String)> {
    let server = shared()?;
    let name = unique(tag);
    Some((PgQueue::connect(&server.url(), &name).unwrap(), name))
}

fn db() -> postgres::Client {
    postgres::Client::connect(&shared().unwrap().url(), postgres::NoTls).unwrap()
}

fn prio(p: u8) -> SendOptions {
    SendOptions::new().priority(p)
}

fn ago(d: Duration) -> SystemTime {
    SystemTime::now() - d
}

fn us(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_micros() as u64
}

/// The rows of the uniqueness table for `queue`.
fn unique_rows(queue: &str) -> i64 {
    db().query_one("SELECT count(*) FROM delayq.unique_keys WHERE queue = $1", &[&queue]).unwrap().get(0)
}

// ------------------------------------------------------------- send_with and priorities

#[test]
fn send_with_stores_the_priority_that_reserve_dead_jobs_and_inspection_report_and_refuses_bad_options() {
    let Some((q, _)) = open("sendwith") else { return };
    let now = SystemTime::now();
    let sent = q.send_with(b"p7", now, &prio(7).kind("k.seven")).unwrap();
    let Sent::Created(id) = sent else { panic!("{sent:?}") };
    let info = q.job(id).unwrap().unwrap();
    assert_eq!((info.priority, info.kind.as_str(), info.state), (7, "k.seven", JobState::Pending));
    let old = q.send_at(b"old", now).unwrap();
    assert_eq!(q.job(old).unwrap().unwrap().priority, 0, "the old sends store priority 0");

    let job = q.reserve(LEASE).unwrap();
    assert_eq!(job.id(), old, "priority 0 first");
    assert_eq!(job.priority(), 0);
    assert!(q.ack(&job).unwrap());
    let job = q.reserve(LEASE).unwrap();
    assert_eq!((job.id(), job.priority(), job.kind()), (id, 7, "k.seven"));
    assert!(q.kill(&job, "no").unwrap());
    let dead = q.dead_jobs(10).unwrap();
    assert_eq!((dead.len(), dead[0].priority()), (1, 7));

    // Bad options, payload or deadline: an error, nothing stored.
    let before = q.stats().unwrap();
    let bad: Vec<(SendOptions, &[u8], SystemTime)> = vec![
        (prio(10), b"x", now),
        (SendOptions::new().kind("bad\nkind"), b"x", now),
        (SendOptions::new().unique(Unique::new("")), b"x", now),
        (SendOptions::new().unique(Unique::new("k".repeat(256))), b"x", now),
        (SendOptions::new().unique(Unique::new("k").period(Duration::from_micros(999))), b"x", now),
        (SendOptions::new(), &[0u8; (1 << 20) + 1], now),
        (SendOptions::new(), b"x", now + Duration::from_secs(200 * 365 * 86_400)),
    ];
    for (opts, payload, at) in bad {
        let err = q.send_with(payload, at, &opts).unwrap_err();
        assert!(
            matches!(
                err,
                DurableError::InvalidArgument(_)
                    | DurableError::PayloadTooLarge { .. }
                    | DurableError::DeadlineOutOfRange
            ),
            "{err:?}"
        );
    }
    assert_eq!(q.stats().unwrap(), before, "a refused send stored something");
}

#[test]
fn a_thousand_due_jobs_of_mixed_priorities_are_reserved_by_priority_then_deadline_then_id() {
    let Some((q, _)) = open("order") else { return };
    // Whole microseconds, as the server keeps them.
    let base = SystemTime::UNIX_EPOCH + Duration::from_micros(us(ago(Duration::from_secs(60))));
    let n = 1000;
    // (priority, deadline, id) of each job, sent in a scrambled order.
    let mut want = Vec::with_capacity(n);
    for i in 0..n {
        let p = ((i * 7) % 10) as u8;
        let at = base + ms(((i * 13) % 17) as u64); // many equal deadlines
        let id = q.send_with(b"x", at, &prio(p)).unwrap().id();
        want.push((p, us(at), id));
    }
    want.sort();
    let mut got = Vec::with_capacity(n);
    // Single reserves first, then batches: both take the same order.
    for _ in 0..100 {
        got.push(q.reserve(LEASE).unwrap());
    }
    while got.len() < n {
        let batch = q.reserve_many(LEASE, 300, ms(500)).unwrap();
        assert!(!batch.is_empty());
        got.extend(batch);
    }
    let got: Vec<(u8, u64, JobId)> = got.iter().map(|j| (j.priority(), us(j.deadline()), j.id())).collect();
    if let Some(i) = (0..n).find(|&i| got[i] != want[i]) {
        panic!("out of order at {i}: got {:?}, want {:?}", got[i], want[i]);
    }
}

#[test]
fn never_early_with_priorities_an_urgent_job_not_yet_due_waits_and_a_due_low_one_goes() {
    let Some((q, _)) = open("early") else { return };
    let t = Instant::now();
    let urgent = q.send_with(b"urgent", SystemTime::now() + ms(400), &prio(0)).unwrap().id();
    let low = q.send_with(b"low", SystemTime::now(), &prio(9)).unwrap().id();
    let job = q.reserve(LEASE).unwrap();
    assert_eq!(job.id(), low);
    assert_eq!(q.reserve_timeout(LEASE, ms(100)).unwrap(), None, "the urgent job came early");
    let job = q.reserve(LEASE).unwrap();
    assert_eq!(job.id(), urgent);
    assert!(t.elapsed() >= ms(400), "early: {:?}", t.elapsed());
    assert!(SystemTime::now() >= job.deadline());
}

#[test]
fn aging_lets_an_old_low_priority_job_out_before_a_newer_urgent_one() {
    let Some(server) = shared() else { return };
    let name = unique("aging");
    let plain = PgQueue::connect(&server.url(), &unique("not-aging")).unwrap();
    let aged = PgQueue::builder().priority_aging(ms(100)).connect(&server.url(), &name).unwrap();
    // Priority 9 due 2 s ago (20 steps: effective 0, the earliest
    // deadline); priority 9 due 200 ms ago (effective 7); priority 0 due now.
    let mut order = Vec::new();
    for q in [&plain, &aged] {
        let old = q.send_with(b"old", ago(ms(2000)), &prio(9)).unwrap().id();
        let mid = q.send_with(b"mid", ago(ms(200)), &prio(9)).unwrap().id();
        let new = q.send_with(b"new", SystemTime::now(), &prio(0)).unwrap().id();
        let got: Vec<JobId> = q.reserve_many(LEASE, 3, ms(100)).unwrap().iter().map(|j| j.id()).collect();
        let names = |id: JobId| ["old", "mid", "new"][[old, mid, new].iter().position(|&x| x == id).unwrap()];
        order.push(got.into_iter().map(names).collect::<Vec<_>>());
    }
    assert_eq!(order[0], ["new", "old", "mid"], "without aging: by priority, then deadline");
    assert_eq!(order[1], ["old", "new", "mid"], "with aging: by effective priority, then deadline");
    // One by one too: an aged job is taken before a fresh urgent one.
    let fresh = aged.send_with(b"fresh", SystemTime::now(), &prio(0)).unwrap().id();
    let older = aged.send_with(b"older", ago(ms(500)), &prio(3)).unwrap().id();
    assert_eq!(aged.reserve(LEASE).unwrap().id(), older);
    assert_eq!(aged.reserve(LEASE).unwrap().id(), fresh);
    let err = PgQueue::builder().priority_aging(Duration::from_micros(999)).connect(&server.url(), &name);
    assert!(matches!(err, Err(DurableError::InvalidArgument(_))), "{err:?}");
}

// ------------------------------------------------------------- uniqueness

#[test]
fn a_key_is_held_by_the_covered_states_and_the_period_and_released_when_the_job_goes() {
    let Some((q, name)) = open("unique") else { return };
    let now = SystemTime::now();
    let key = |k: &str| SendOptions::new().unique(Unique::new(k));

    // Both (the default): pending and leased hold; an ack releases.
    let a = q.send_with(b"a", now, &key("both")).unwrap();
    assert!(a.created());
    assert_eq!(q.send_with(b"a2", now, &key("both")).unwrap(), Sent::Existing(a.id()));
    let job = q.reserve(LEASE).unwrap();
    assert_eq!(q.send_with(b"a3", now, &key("both")).unwrap(), Sent::Existing(a.id()));
    assert!(q.ack(&job).unwrap());
    assert_eq!(unique_rows(&name), 0, "the ack released the key's row");
    let b = q.send_with(b"b", now, &key("both")).unwrap();
    assert!(b.created() && b.id() != a.id());
    assert!(q.cancel(b.id()).unwrap());
    assert_eq!(unique_rows(&name), 0, "the cancel released the key's row");

    // Pending: a leased job does not hold.
    let pending = SendOptions::new().unique(Unique::new("pending").states(UniqueStates::Pending));
    let c = q.send_with(b"c", now, &pending).unwrap();
    assert_eq!(q.send_with(b"c", now, &pending).unwrap(), Sent::Existing(c.id()));
    let job = q.reserve(LEASE).unwrap();
    assert_eq!(job.id(), c.id());
    let d = q.send_with(b"d", now + Duration::from_secs(3600), &pending).unwrap();
    assert!(d.created(), "a leased job held a Pending key");
    assert!(q.ack(&job).unwrap());
    assert_eq!(q.send_with(b"d", now, &pending).unwrap(), Sent::Existing(d.id()));

    // Leased: a pending job does not hold (the new one takes the key).
    let leased = SendOptions::new().unique(Unique::new("leased").states(UniqueStates::Leased));
    let e = q.send_with(b"e", now + Duration::from_secs(3600), &leased).unwrap();
    let f = q.send_with(b"f", now, &leased).unwrap();
    assert!(e.created() && f.created());
    let job = q.reserve(LEASE).unwrap();
    assert_eq!(job.id(), f.id());
    assert_eq!(q.send_with(b"g", now, &leased).unwrap(), Sent::Existing(f.id()));

    // Dead without a period: released.
    let h = q.send_with(b"h", now, &key("dead")).unwrap();
    let job = q.reserve(LEASE).unwrap();
    assert_eq!(job.id(), h.id());
    assert!(q.kill(&job, "boom").unwrap());
    assert!(q.send_with(b"h2", now + Duration::from_secs(3600), &key("dead")).unwrap().created());

    // A period holds whatever became of the job, then runs out.
    let period = SendOptions::new().unique(Unique::new("period").period(ms(400)));
    let i = q.send_with(b"i", now, &period).unwrap();
    assert!(q.cancel(i.id()).unwrap());
    assert_eq!(q.send_with(b"i2", now, &period).unwrap(), Sent::Existing(i.id()));
    thread::sleep(ms(450));
    let j = q.send_with(b"j", now + Duration::from_secs(3600), &period).unwrap();
    assert!(j.created(), "the period ran out");
    assert!(q.cancel(j.id()).unwrap());
    // The mapping outlives the cancel for the period, then a later unique
    // send sweeps it.
    assert_eq!(unique_rows(&name), 4, "both, pending, leased, dead hold rows; period's still runs");
    thread::sleep(ms(450));
    q.send_with(b"k", now + Duration::from_secs(3600), &key("other")).unwrap();
    let left: Vec<String> = db()
        .query("SELECT key FROM delayq.unique_keys WHERE queue = $1 ORDER BY key", &[&name])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(!left.contains(&"period".to_string()), "not swept: {left:?}");
}

#[test]
fn sixteen_threads_racing_each_key_store_one_job_per_key() {
    let Some(server) = shared() else { return };
    let name = unique("race");
    let handles: Vec<PgQueue> = (0..4).map(|_| PgQueue::connect(&server.url(), &name).unwrap()).collect();
    let keys = scaled(1000);
    let threads = 16;
    let barrier = Barrier::new(threads);
    let created: Vec<HashMap<usize, JobId>> = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (q, barrier) = (&handles[t % handles.len()], &barrier);
                s.spawn(move || {
                    let mut mine = HashMap::new();
                    let mut seen = HashMap::new();
                    barrier.wait();
                    for k in 0..keys {
                        let opts = SendOptions::new().unique(Unique::new(format!("key-{k}")));
                        match q.send_with(b"x", SystemTime::now() + Duration::from_secs(3600), &opts).unwrap()
                        {
                            Sent::Created(id) => {
                                mine.insert(k, id);
                            }
                            Sent::Existing(id) => {
                                seen.insert(k, id);
                            }
                        }
                    }
                    (mine, seen)
                })
            })
            .collect();
        let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        // Every Existing names the one created job.
        let all: HashMap<usize, JobId> = results.iter().flat_map(|(m, _)| m.clone()).collect();
        for (_, seen) in &results {
            for (k, id) in seen {
                assert_eq!(all.get(k), Some(id), "key {k}: Existing names another job");
            }
        }
        results.into_iter().map(|(m, _)| m).collect()
    });
    let mut per_key = vec![0; keys];
    for m in &created {
        for k in m.keys() {
            per_key[*k] += 1;
        }
    }
    assert!(per_key.iter().all(|&c| c == 1), "a key stored {:?} jobs", per_key.iter().max());
    assert_eq!(handles[0].len().unwrap(), keys as u64);
    assert_eq!(unique_rows(&name), keys as i64);
}

#[test]
fn racing_sends_whose_periods_run_out_meanwhile_sweep_without_deadlocks_and_keep_one_live_job_per_key() {
    let Some(server) = shared() else { return };
    let name = unique("sweep");
    let handles: Vec<PgQueue> = (0..2).map(|_| PgQueue::connect(&server.url(), &name).unwrap()).collect();
    let keys = scaled(200);
    let threads = 8;
    let barrier = Barrier::new(threads);
    // Periods of 1 ms run out during the run: every send sweeps rows that
    // other sends are locking; the live (pending) job still holds its key.
    let created: usize = thread::scope(|s| {
        let all: Vec<_> = (0..threads)
            .map(|t| {
                let (q, barrier) = (&handles[t % handles.len()], &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let mut created = 0;
                    for i in 0..keys {
                        let k = (i * 7 + t * 13) % keys;
                        let opts = SendOptions::new().unique(Unique::new(format!("key-{k}")).period(ms(1)));
                        let at = SystemTime::now() + Duration::from_secs(3600);
                        created += q.send_with(b"x", at, &opts).unwrap().created() as usize;
                    }
                    created
                })
            })
            .collect();
        all.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(created, keys);
    assert_eq!(handles[0].len().unwrap(), keys as u64);
}

// ------------------------------------------------------------- reserve_excluding

/// CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    Duration::from_secs(ru.ru_utime.tv_sec as u64 + ru.ru_stime.tv_sec as u64)
        + Duration::from_micros(ru.ru_utime.tv_usec as u64 + ru.ru_stime.tv_usec as u64)
}

#[test]
fn reserve_excluding_takes_the_one_job_it_may_sleeps_while_only_excluded_ones_are_due_and_leaves_them() {
    let Some((q, name)) = open("exclude") else { return };
    let past = ago(Duration::from_secs(1));
    let a: Vec<(&[u8], SystemTime)> = (0..1000).map(|_| (&b"a"[..], past)).collect();
    let kind_a = SendOptions::new().kind("a");
    // 1000 "a" (one batch, then kinds set in SQL: faster than 1000 sends).
    let ids = q.send_many(&a).unwrap();
    let ids: Vec<i64> = ids.iter().map(|i| i.0 as i64).collect();
    db().execute("UPDATE delayq.jobs SET kind = 'a' WHERE queue = $1 AND id = ANY($2)", &[&name, &ids])
        .unwrap();
    let b = q.send_with(b"b", SystemTime::now(), &SendOptions::new().kind("b").priority(9)).unwrap().id();
    let exclude = vec!["a".to_string()];

    let t = Instant::now();
    let job = q.reserve_excluding(LEASE, &exclude, &StopSignal::new()).unwrap().unwrap();
    assert_eq!((job.id(), job.kind()), (b, "b"));
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(q.ack(&job).unwrap());
    let s = q.stats().unwrap();
    assert_eq!((s.pending, s.leased), (1000, 0), "an excluded job was leased");
    let attempts: i64 = db()
        .query_one("SELECT count(*) FROM delayq.jobs WHERE queue = $1 AND attempt > 0", &[&name])
        .unwrap()
        .get(0);
    assert_eq!(attempts, 0, "an excluded job had its attempt counted");

    // Only "a" due: it sleeps (no CPU) until stopped.
    let stop = StopSignal::new();
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let cpu = thread_cpu();
            let got = q.reserve_excluding(LEASE, &exclude, &stop).unwrap();
            (got, thread_cpu() - cpu)
        });
        thread::sleep(Duration::from_secs(1));
        stop.raise();
        let (got, cpu) = waiter.join().unwrap();
        assert_eq!(got, None);
        assert!(cpu < ms(100), "the waiting thread used {cpu:?} of CPU in 1 s: polling?");
    });

    // Blocked, it is woken by a job it may take, due now.
    let stop = StopSignal::new();
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let t = Instant::now();
            (q.reserve_excluding(LEASE, &exclude, &stop).unwrap(), t.elapsed())
        });
        thread::sleep(ms(300));
        let c = q.send_with(b"c", SystemTime::now(), &SendOptions::new().kind("c")).unwrap().id();
        let (got, took) = waiter.join().unwrap();
        assert_eq!(got.map(|j| j.id()), Some(c));
        assert!(took < Duration::from_secs(3), "{took:?}");
    });

    // A plain reserve then gets the "a" jobs; a raised signal returns at once.
    let job = q.reserve_timeout(LEASE, ms(500)).unwrap().unwrap();
    assert_eq!(job.kind(), "a");
    let raised = StopSignal::new();
    raised.raise();
    assert_eq!(q.reserve_excluding(LEASE, &[], &raised).unwrap(), None);
    let _ = kind_a;
}

// ------------------------------------------------------------- the schedule store

fn tick_jobs(q: &PgQueue) -> Vec<delayq_durable::JobInfo> {
    q.jobs(JobState::Pending, usize::MAX).unwrap().into_iter().filter(|j| j.kind == TICK_KIND).collect()
}

fn fire(expect: u64, next: u64, deadlines: Vec<u64>) -> Fire {
    Fire {
        expect_next_us: expect,
        next_run_us: next,
        last_run_us: expect,
        kind: "report".into(),
        payload: b"run".to_vec(),
        priority: 2,
        deadlines_us: deadlines,
    }
}

#[test]
fn the_schedule_store_round_trips_keeps_one_pending_tick_job_and_fires_once_per_tick() {
    let Some((q, _)) = open("sched") else { return };
    let t0 = us(SystemTime::now()) + 3_600_000_000;
    q.schedule_store("nightly", b"def-1", Some(t0)).unwrap();
    q.schedule_store("alpha", b"def-a", None).unwrap();
    let got = q.schedule_get("nightly").unwrap().unwrap();
    assert_eq!((got.def.as_slice(), got.next_run_us, got.last_run_us), (&b"def-1"[..], Some(t0), None));
    let names: Vec<String> = q.schedule_list().unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["alpha", "nightly"]);
    assert_eq!(q.schedule_get("nope").unwrap(), None);

    // One pending tick job, due at next_run, kind and payload as said.
    let ticks = tick_jobs(&q);
    assert_eq!(ticks.len(), 1, "{ticks:?}");
    assert_eq!((ticks[0].payload.as_slice(), ticks[0].priority), (&b"nightly"[..], 0));
    assert_eq!(us(ticks[0].deadline), t0);
    // Storing again replaces it.
    q.schedule_store("nightly", b"def-2", Some(t0 + 1000)).unwrap();
    let again = tick_jobs(&q);
    assert_eq!(again.len(), 1);
    assert_ne!(again[0].id, ticks[0].id);
    assert_eq!(us(again[0].deadline), t0 + 1000);
    assert_eq!(q.len().unwrap(), 1, "the tick job counts in len");

    // A fire with the wrong expect_next stores nothing; the right one
    // stores the jobs and moves next and last; the same again is refused.
    let t1 = t0 + 1000;
    assert!(!q.schedule_fire("nightly", &fire(t0, t1 + 5000, vec![t1])).unwrap());
    assert_eq!(q.len().unwrap(), 1);
    let past = us(ago(Duration::from_secs(1)));
    assert!(q.schedule_fire("nightly", &fire(t1, t1 + 5000, vec![past, past + 1])).unwrap());
    let s = q.schedule_get("nightly").unwrap().unwrap();
    assert_eq!((s.next_run_us, s.last_run_us, s.def.as_slice()), (Some(t1 + 5000), Some(t1), &b"def-2"[..]));
    let ticks = tick_jobs(&q);
    assert_eq!(ticks.len(), 1);
    assert_eq!(us(ticks[0].deadline), t1 + 5000);
    assert!(!q.schedule_fire("nightly", &fire(t1, t1 + 9000, vec![past])).unwrap());
    assert_eq!(q.len().unwrap(), 3, "two fired jobs and the tick job");
    let jobs = q.reserve_many(LEASE, 10, ms(100)).unwrap();
    assert_eq!(jobs.len(), 2);
    assert!(jobs.iter().all(|j| j.kind() == "report" && j.payload() == b"run" && j.priority() == 2));

    // Bad fires: nothing stored.
    let mut bad = fire(t1 + 5000, t1 + 6000, vec![past]);
    bad.priority = 10;
    assert!(matches!(q.schedule_fire("nightly", &bad), Err(DurableError::InvalidArgument(_))));
    let mut bad = fire(t1 + 5000, t1 + 6000, vec![past]);
    bad.payload = vec![0; (1 << 20) + 1];
    assert!(matches!(q.schedule_fire("nightly", &bad), Err(DurableError::PayloadTooLarge { .. })));
    assert!(matches!(q.schedule_store("", b"d", None), Err(DurableError::InvalidArgument(_))));
    let big = vec![0; (1 << 20) + 4097];
    assert!(matches!(q.schedule_store("big", &big, None), Err(DurableError::PayloadTooLarge { .. })));
    assert_eq!(q.schedule_get("nightly").unwrap().unwrap().next_run_us, Some(t1 + 5000));

    // Pause: the pending tick job goes; a fire does nothing.
    q.schedule_store("nightly", b"def-2", None).unwrap();
    assert!(tick_jobs(&q).is_empty());
    assert!(!q.schedule_fire("nightly", &fire(t1 + 5000, t1 + 6000, vec![past])).unwrap());
    assert!(tick_jobs(&q).is_empty());
    // Remove: the schedule and its tick job.
    q.schedule_store("nightly", b"def-3", Some(t1)).unwrap();
    assert_eq!(s.last_run_us, q.schedule_get("nightly").unwrap().unwrap().last_run_us, "last kept");
    assert!(q.schedule_remove("nightly").unwrap());
    assert!(!q.schedule_remove("nightly").unwrap());
    assert!(tick_jobs(&q).is_empty());
    assert!(q.schedule_remove("alpha").unwrap());
    assert!(q.schedule_list().unwrap().is_empty());
}

#[test]
fn a_leased_tick_job_is_replaced_by_a_fire_that_lost_the_race_and_many_threads_fire_one_tick_once() {
    let Some((q, _)) = open("fire") else { return };
    let t0 = us(ago(Duration::from_secs(1)));
    q.schedule_store("every", b"d", Some(t0)).unwrap();
    // A worker leases the tick job: no pending tick job now.
    let tick = q.reserve(LEASE).unwrap();
    assert_eq!((tick.kind(), tick.payload()), (TICK_KIND, &b"every"[..]));
    assert!(tick_jobs(&q).is_empty());
    // A fire with a stale expect_next: not fired, but a pending tick job again.
    assert!(!q.schedule_fire("every", &fire(t0 - 1, t0 + 1, vec![])).unwrap());
    assert_eq!(tick_jobs(&q).len(), 1);
    assert!(q.ack(&tick).unwrap());

    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads));
    let future = us(SystemTime::now()) + 3_600_000_000;
    let next = future + 60_000_000;
    let wins: usize = thread::scope(|s| {
        let all: Vec<_> = (0..threads)
            .map(|_| {
                let (q, barrier) = (q.clone(), barrier.clone());
                s.spawn(move || {
                    barrier.wait();
                    q.schedule_fire("every", &fire(t0, next, vec![future, future + 1])).unwrap() as usize
                })
            })
            .collect();
        all.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(wins, 1);
    let reports =
        q.jobs(JobState::Pending, usize::MAX).unwrap().into_iter().filter(|j| j.kind == "report").count();
    assert_eq!(reports, 2, "the tick's jobs stored once");
    let ticks = tick_jobs(&q);
    assert_eq!(ticks.len(), 1);
    assert_eq!(us(ticks[0].deadline), next);
}

// ------------------------------------------------------------- the migration

/// Version 1's migration text, as released (it is never edited).
fn v1_sql(schema: &str) -> String {
    let src = include_str!("../src/pg_queue/schema.rs");
    let start = src.find("const V1: &str = r#\"").expect("V1") + "const V1: &str = r#\"".len();
    let end = start + src[start..].find("\"#;").expect("end of V1");
    src[start..end].replace("{s}", &format!("\"{schema}\"")).replace("{lit}", &format!("'{schema}'"))
}

#[test]
fn a_database_of_schema_version_1_is_upgraded_in_place_and_its_jobs_work() {
    let Some(server) = shared() else { return };
    let schema = format!("old_{}", std::process::id());
    let mut db = db();
    db.batch_execute(&format!(
        "CREATE SCHEMA \"{schema}\"; CREATE TABLE \"{schema}\".delayq_schema (version integer NOT NULL);
         INSERT INTO \"{schema}\".delayq_schema VALUES (1);"
    ))
    .unwrap();
    db.batch_execute(&v1_sql(&schema)).unwrap();
    // Jobs sent by version 1's statement.
    let past = us(ago(Duration::from_secs(1))) as i64;
    db.execute(
        &format!("SELECT \"{schema}\".send('q', 25, ARRAY['old', 'old'], ARRAY['\\x01'::bytea, '\\x02'], ARRAY[$1::bigint, $1 + 1], false)"),
        &[&past],
    )
    .unwrap();
    let q = PgQueue::builder().schema(&schema).connect(&server.url(), "q").unwrap();
    let version: i32 =
        db.query_one(&format!("SELECT version FROM \"{schema}\".delayq_schema"), &[]).unwrap().get(0);
    assert_eq!(version, 2);
    let urgent = q.send_with(b"u", SystemTime::now(), &prio(0).unique(Unique::new("u"))).unwrap();
    assert!(urgent.created());
    let low = q.send_with(b"l", ago(Duration::from_secs(5)), &prio(5)).unwrap().id();
    let got: Vec<(Vec<u8>, u8)> = q
        .reserve_many(LEASE, 10, ms(100))
        .unwrap()
        .iter()
        .map(|j| (j.payload().to_vec(), j.priority()))
        .collect();
    assert_eq!(got, [(vec![1], 0), (vec![2], 0), (b"u".to_vec(), 0), (b"l".to_vec(), 5)]);
    let _ = low;
    // Version 1's reserve statement still works (a handle opened before the upgrade).
    q.send_with(b"v1", SystemTime::now(), &prio(3)).unwrap();
    let row = db
        .query_one(
            &format!("SELECT id, kind FROM \"{schema}\".reserve('q', 1, 1000000, ARRAY[7::bigint])"),
            &[],
        )
        .unwrap();
    assert!(row.get::<_, Option<i64>>(0).is_some());
    q.schedule_store("s", b"d", None).unwrap();
    assert_eq!(q.schedule_list().unwrap().len(), 1);
}
