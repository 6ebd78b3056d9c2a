//! Issue 33's primitives on Redis, one body per case, run on one server
//! (`redis_features.rs`) and on a cluster (`redis_cluster.rs`): priorities
//! and the reserve order, uniqueness, the schedule store, reserve_excluding.
//! `Connect` opens a handle on a queue name with a builder's options; a case
//! calls it once per handle (each handle has its own connections).
#![allow(dead_code)]

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use delayq_durable::{
    DurableError, Fire, Inspect, JobState, RedisBuilder, RedisQueue, SendOptions, Sent, StopSignal, Unique,
    UniqueStates, TICK_KIND,
};

use crate::redis_server::unique;

pub type Connect<'a> = &'a (dyn Fn(RedisBuilder, &str) -> RedisQueue + Sync);

const LEASE: Duration = Duration::from_secs(30);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Iterations scaled by `DELAYQ_TEST_SCALE` (default 1).
fn scaled(n: usize) -> usize {
    let k = std::env::var("DELAYQ_TEST_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    n * k
}

fn us(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

fn prio(p: u8) -> SendOptions {
    SendOptions::new().priority(p)
}

/// 1,000 due jobs of mixed priorities and deadlines (some equal) are
/// reserved in (priority, deadline, id) order, one at a time and in batches.
pub fn due_jobs_are_reserved_by_priority_then_deadline_then_id(connect: Connect<'_>) {
    let q = connect(RedisQueue::builder(), &unique("prio-order"));
    let base = SystemTime::now() - Duration::from_secs(60);
    let n = scaled(1000);
    let mut sent = std::collections::HashMap::new();
    for i in 0..n as u64 {
        let p = (i * 7 % 10) as u8;
        // Deadlines from 13 distinct values: many ties, broken by id.
        let at = base + ms(i * 5 % 13);
        let id = q.send_with(&i.to_le_bytes(), at, &prio(p)).unwrap().id();
        sent.insert(id, p);
    }
    let mut got = Vec::new();
    for _ in 0..n / 2 {
        got.push(q.reserve(LEASE).unwrap());
    }
    while got.len() < n {
        let batch = q.reserve_many(LEASE, 300, ms(100)).unwrap();
        assert!(!batch.is_empty());
        got.extend(batch);
    }
    assert_eq!(got.len(), n);
    for job in &got {
        assert_eq!(sent[&job.id()], job.priority(), "job {:?}", job.id());
    }
    let key = |j: &delayq_durable::Job| (j.priority(), j.deadline(), j.id().0);
    for w in got.windows(2) {
        assert!(key(&w[0]) < key(&w[1]), "{:?} before {:?}", key(&w[0]), key(&w[1]));
    }
    assert_eq!(q.stats().unwrap().leased, n as u64);
}

/// A job is never reserved before its deadline, whatever its priority: an
/// urgent job due later waits behind a lax one due now.
pub fn priorities_never_make_a_job_early(connect: Connect<'_>) {
    let q = connect(RedisQueue::builder(), &unique("prio-early"));
    let later = SystemTime::now() + ms(400);
    let urgent = q.send_with(b"urgent", later, &prio(0)).unwrap().id();
    let lax = q.send_with(b"lax", SystemTime::now(), &prio(9)).unwrap().id();
    let first = q.reserve(LEASE).unwrap();
    assert_eq!((first.id(), first.priority()), (lax, 9));
    assert!(q.reserve_timeout(LEASE, ms(100)).unwrap().is_none());
    let second = q.reserve(LEASE).unwrap();
    assert_eq!((second.id(), second.priority()), (urgent, 0));
    assert!(SystemTime::now() >= later);
    // The inspection API and the dead set report priorities too.
    let info = q.job(lax).unwrap().unwrap();
    assert_eq!((info.priority, info.state), (9, JobState::Leased));
    assert!(q.kill(&first, "gone").unwrap());
    let dead = q.dead_jobs(10).unwrap();
    assert_eq!((dead[0].id(), dead[0].priority()), (lax, 9));
    assert_eq!(q.jobs(JobState::Dead, 10).unwrap()[0].priority, 9);
    // Old sends store priority 0.
    let plain = q.send_after(b"plain", Duration::ZERO).unwrap();
    assert_eq!(q.job(plain).unwrap().unwrap().priority, 0);
}

/// With aging, a low-priority job due long enough ago goes before a newer
/// urgent one; without aging (another handle on the same queue) it does not.
pub fn aging_lets_an_old_low_priority_job_out_before_a_newer_urgent_one(connect: Connect<'_>) {
    let name = unique("prio-aging");
    let aged = connect(RedisQueue::builder().priority_aging(ms(10)), &name);
    let plain = connect(RedisQueue::builder(), &name);
    let now = SystemTime::now();
    // Priority 5, due 1 s ago: 100 steps of 10 ms, effective priority 0.
    let old = aged.send_with(b"old", now - Duration::from_secs(1), &prio(5)).unwrap().id();
    let new = aged.send_with(b"new", now, &prio(1)).unwrap().id();
    let job = plain.reserve(LEASE).unwrap();
    assert_eq!(job.id(), new, "without aging, priority 1 goes first");
    plain.nack(&job, now).unwrap(); // back, due at `now` again
    let job = aged.reserve(LEASE).unwrap();
    assert_eq!(job.id(), old, "aged to 0, and due earlier");
    // A step under 1 ms is refused at connect.
    let err =
        RedisQueue::builder().priority_aging(Duration::from_micros(999)).connect("redis://127.0.0.1:1/", "x");
    assert!(matches!(err, Err(DurableError::InvalidArgument(_))), "{err:?}");
    // Aging bounds the wait: priority 9 due 95 ms ago at a 10 ms step is
    // effective 0 and goes before a fresh priority 0 due later than it.
    let lax = aged.send_with(b"lax", now - ms(95), &prio(9)).unwrap().id();
    aged.send_with(b"urgent", now, &prio(0)).unwrap();
    // `new` (effective 1 - steps since `now`) ties at 0 too but is due later.
    assert_eq!(aged.reserve(LEASE).unwrap().id(), lax);
}

/// Two sends of one key store one job; the key is held by state and period
/// as the spec says, and released when its job goes.
pub fn a_unique_key_is_held_by_state_and_period(connect: Connect<'_>) {
    let q = connect(RedisQueue::builder(), &unique("uniq"));
    let now = SystemTime::now();
    let u = |k: &str| SendOptions::new().unique(Unique::new(k));
    let a = q.send_with(b"1", now, &u("k")).unwrap();
    assert!(a.created());
    assert_eq!(q.send_with(b"2", now, &u("k")).unwrap(), Sent::Existing(a.id()));
    // Leased: still held (Both).
    let job = q.reserve(LEASE).unwrap();
    assert_eq!(q.send_with(b"3", now, &u("k")).unwrap(), Sent::Existing(a.id()));
    // Acked: released.
    assert!(q.ack(&job).unwrap());
    let b = q.send_with(b"4", now, &u("k")).unwrap();
    assert!(b.created() && b.id() != a.id());
    // Cancelled: released.
    assert!(q.cancel(b.id()).unwrap());
    assert!(q.send_with(b"5", now, &u("k")).unwrap().created());

    // Pending only: a leased job does not hold the key.
    let p = |k: &str| SendOptions::new().unique(Unique::new(k).states(UniqueStates::Pending));
    let c = q.send_with(b"p", now + Duration::from_secs(3600), &p("pend")).unwrap();
    assert_eq!(q.send_with(b"p", now, &p("pend")).unwrap(), Sent::Existing(c.id()));
    // Leased only: a pending job does not hold it.
    let l = |k: &str| SendOptions::new().kind("lk").unique(Unique::new(k).states(UniqueStates::Leased));
    let d = q.send_with(b"l", now, &l("lease")).unwrap();
    let e = q.send_with(b"l", now, &l("lease")).unwrap();
    assert!(d.created() && e.created() && d.id() != e.id());

    // A period holds the key after the job is gone, until it ends.
    let per = |k: &str| SendOptions::new().kind("per").unique(Unique::new(k).period(ms(300)));
    let f = q.send_with(b"x", now, &per("per")).unwrap();
    assert!(q.cancel(f.id()).unwrap());
    assert_eq!(q.send_with(b"x", now, &per("per")).unwrap(), Sent::Existing(f.id()));
    thread::sleep(ms(350));
    assert!(q.send_with(b"x", now, &per("per")).unwrap().created());

    // Dead is never covered: a killed job without a period frees the key.
    let g = q.send_with(b"d", now, &SendOptions::new().kind("dk").unique(Unique::new("dead"))).unwrap();
    let job = loop {
        let j = q.reserve(LEASE).unwrap();
        if j.id() == g.id() {
            break j;
        }
    };
    assert!(q.kill(&job, "no").unwrap());
    assert!(q.send_with(b"d", now, &SendOptions::new().unique(Unique::new("dead"))).unwrap().created());
}

/// Bad options, payloads and deadlines store nothing.
pub fn bad_options_store_nothing(connect: Connect<'_>) {
    let q = connect(RedisQueue::builder().max_payload(8), &unique("uniq-bad"));
    let now = SystemTime::now();
    let bad = [
        SendOptions::new().priority(10),
        SendOptions::new().kind("a\nb"),
        SendOptions::new().unique(Unique::new("")),
        SendOptions::new().unique(Unique::new("k".repeat(256))),
        SendOptions::new().unique(Unique::new("k").period(Duration::from_micros(999))),
    ];
    for opts in &bad {
        let err = q.send_with(b"x", now, opts);
        assert!(matches!(err, Err(DurableError::InvalidArgument(_))), "{opts:?}: {err:?}");
    }
    assert!(matches!(
        q.send_with(b"123456789", now, &SendOptions::new()),
        Err(DurableError::PayloadTooLarge { .. })
    ));
    let far = SystemTime::now() + Duration::from_secs(200 * 365 * 86_400);
    assert!(matches!(q.send_with(b"x", far, &SendOptions::new()), Err(DurableError::DeadlineOutOfRange)));
    assert_eq!(q.stats().unwrap().pending, 0);
    // 255 bytes is a key.
    assert!(q
        .send_with(b"x", now, &SendOptions::new().unique(Unique::new("k".repeat(255))))
        .unwrap()
        .created());
}

/// `threads` threads, each with its own handle, send one key `total` times
/// in all: one job is stored, and every send names it.
pub fn racing_sends_of_one_key_store_one_job(connect: Connect<'_>, threads: usize, total: usize) {
    let name = unique("uniq-race");
    let handles: Vec<RedisQueue> = (0..threads).map(|_| connect(RedisQueue::builder(), &name)).collect();
    let barrier = Arc::new(Barrier::new(threads));
    let results: Vec<Vec<Sent>> = thread::scope(|s| {
        let joins: Vec<_> = handles
            .iter()
            .enumerate()
            .map(|(t, q)| {
                let barrier = barrier.clone();
                s.spawn(move || {
                    let opts = SendOptions::new().unique(Unique::new("one"));
                    barrier.wait();
                    (t..total)
                        .step_by(threads)
                        .map(|_| q.send_with(b"x", SystemTime::now(), &opts).unwrap())
                        .collect()
                })
            })
            .collect();
        joins.into_iter().map(|j| j.join().unwrap()).collect()
    });
    let all: Vec<Sent> = results.into_iter().flatten().collect();
    assert_eq!(all.len(), total);
    assert_eq!(all.iter().filter(|s| s.created()).count(), 1);
    let id = all.iter().find(|s| s.created()).unwrap().id();
    assert!(all.iter().all(|s| s.id() == id));
    assert_eq!(handles[0].stats().unwrap().pending, 1);
}

fn ticks(q: &RedisQueue) -> Vec<delayq_durable::JobInfo> {
    q.jobs(JobState::Pending, 10_000).unwrap().into_iter().filter(|j| j.kind == TICK_KIND).collect()
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

/// The schedule store: round trip, its one pending tick job, fire and its
/// compare-and-set, pause, remove.
pub fn the_schedule_store_keeps_one_pending_tick_job_and_fires_once(connect: Connect<'_>) {
    let q = connect(RedisQueue::builder().max_payload(100), &unique("sched"));
    let t0 = us(SystemTime::now()) + 3_600_000_000;
    assert!(q.schedule_get("nightly").unwrap().is_none());
    q.schedule_store("nightly", b"def-1", Some(t0)).unwrap();
    q.schedule_store("hourly", b"def-h", None).unwrap();
    let s = q.schedule_get("nightly").unwrap().unwrap();
    assert_eq!((s.def.as_slice(), s.next_run_us, s.last_run_us), (&b"def-1"[..], Some(t0), None));
    let names: Vec<String> = q.schedule_list().unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["hourly", "nightly"]);
    // One pending tick job: kind, payload, due at next_run (±1 ms: the offset estimate).
    let t = ticks(&q);
    assert_eq!(t.len(), 1);
    assert_eq!((t[0].payload.as_slice(), t[0].priority), (&b"nightly"[..], 0));
    assert!(us(t[0].deadline).abs_diff(t0) <= 1000, "{} vs {t0}", us(t[0].deadline));
    assert_eq!(q.len().unwrap(), 1);
    // Store again: replaced, still one.
    let t1 = t0 + 60_000_000;
    q.schedule_store("nightly", b"def-2", Some(t1)).unwrap();
    let t = ticks(&q);
    assert_eq!(t.len(), 1);
    assert!(us(t[0].deadline).abs_diff(t1) <= 1000);
    // Too large a definition.
    let big = vec![0u8; 100 + 4097];
    assert!(matches!(q.schedule_store("nightly", &big, Some(t1)), Err(DurableError::PayloadTooLarge { .. })));
    assert!(matches!(q.schedule_store("", b"d", None), Err(DurableError::InvalidArgument(_))));
    // Fire with a wrong expectation: nothing.
    assert!(!q.schedule_fire("nightly", &fire(t0, t1 + 1, vec![t1])).unwrap());
    assert_eq!(q.len().unwrap(), 1);
    // Bad fires store nothing.
    let mut bad = fire(t1, t1 + 1, vec![t1]);
    bad.priority = 10;
    assert!(matches!(q.schedule_fire("nightly", &bad), Err(DurableError::InvalidArgument(_))));
    let mut bad = fire(t1, t1 + 1, vec![t1]);
    bad.payload = vec![0; 101];
    assert!(matches!(q.schedule_fire("nightly", &bad), Err(DurableError::PayloadTooLarge { .. })));
    // The right one: two jobs, next and last moved, the tick replaced.
    let now = us(SystemTime::now());
    let t2 = t1 + 60_000_000;
    assert!(q.schedule_fire("nightly", &fire(t1, t2, vec![now - 2, now - 1])).unwrap());
    let s = q.schedule_get("nightly").unwrap().unwrap();
    assert_eq!((s.next_run_us, s.last_run_us, s.def.as_slice()), (Some(t2), Some(t1), &b"def-2"[..]));
    let t = ticks(&q);
    assert_eq!(t.len(), 1);
    assert!(us(t[0].deadline).abs_diff(t2) <= 1000);
    let jobs: Vec<_> =
        q.jobs(JobState::Pending, 100).unwrap().into_iter().filter(|j| j.kind == "report").collect();
    assert_eq!(jobs.len(), 2);
    assert!(jobs.iter().all(|j| j.priority == 3 && j.payload == b"r"));
    // The same tick again: false, nothing stored.
    assert!(!q.schedule_fire("nightly", &fire(t1, t2, vec![now])).unwrap());
    assert_eq!(q.len().unwrap(), 3);
    // A leased tick job does not count: a fire that does not match stores a pending one.
    q.schedule_store("soon", b"s", Some(us(SystemTime::now()) - 1)).unwrap();
    let tick = loop {
        let j = q.reserve(LEASE).unwrap();
        if j.kind() == TICK_KIND {
            break j;
        }
    };
    assert_eq!(tick.payload(), b"soon");
    assert_eq!(ticks(&q).iter().filter(|t| t.payload == b"soon").count(), 0);
    assert!(!q.schedule_fire("soon", &fire(1, 2, vec![])).unwrap());
    assert_eq!(ticks(&q).iter().filter(|t| t.payload == b"soon").count(), 1);
    assert!(q.ack(&tick).unwrap());
    // Pause: the pending tick job goes.
    q.schedule_store("nightly", b"def-2", None).unwrap();
    assert_eq!(ticks(&q).iter().filter(|t| t.payload == b"nightly").count(), 0);
    assert!(!q.schedule_fire("nightly", &fire(t2, t2 + 1, vec![now])).unwrap());
    assert_eq!(q.schedule_get("nightly").unwrap().unwrap().last_run_us, Some(t1));
    // Remove: the schedule and its tick job.
    assert!(q.schedule_remove("soon").unwrap());
    assert!(!q.schedule_remove("soon").unwrap());
    assert!(ticks(&q).is_empty());
    assert!(q.schedule_get("soon").unwrap().is_none());
    let names: Vec<String> = q.schedule_list().unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["hourly", "nightly"]);
}

/// `threads` handles fire one tick at once: one fires, its jobs stored once.
pub fn racing_fires_of_one_tick_fire_once(connect: Connect<'_>, threads: usize) {
    let name = unique("sched-race");
    let handles: Vec<RedisQueue> = (0..threads).map(|_| connect(RedisQueue::builder(), &name)).collect();
    let t0 = us(SystemTime::now()) + 3_600_000_000;
    handles[0].schedule_store("s", b"d", Some(t0)).unwrap();
    let now = us(SystemTime::now());
    let barrier = Arc::new(Barrier::new(threads));
    let fired: usize = thread::scope(|s| {
        let joins: Vec<_> = handles
            .iter()
            .map(|q| {
                let barrier = barrier.clone();
                s.spawn(move || {
                    barrier.wait();
                    q.schedule_fire("s", &fire(t0, t0 + 1_000_000, vec![now, now + 1, now + 2])).unwrap()
                })
            })
            .collect();
        joins.into_iter().map(|j| usize::from(j.join().unwrap())).sum()
    });
    assert_eq!(fired, 1);
    // Three jobs and one tick job.
    assert_eq!(handles[0].len().unwrap(), 4);
    assert_eq!(ticks(&handles[0]).len(), 1);
}

/// CPU time of the calling thread (Linux: the first field of
/// `/proc/thread-self/schedstat`, ns on the CPU).
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    Duration::from_nanos(stat.split(' ').next().unwrap().parse().unwrap())
}

/// 1,000 due jobs of an excluded kind ahead of one of another kind: the
/// other is leased at once, none of the excluded ones is touched; with only
/// excluded jobs due the call sleeps until `stop`; a plain reserve then
/// takes them.
pub fn reserve_excluding_skips_excluded_kinds_exactly_and_sleeps(connect: Connect<'_>) {
    let q = connect(RedisQueue::builder(), &unique("excl"));
    let n = scaled(1000);
    let past = SystemTime::now() - Duration::from_secs(10);
    for i in 0..n as u64 {
        // Mixed priorities, all more urgent than the "b" job, and earlier.
        q.send_with(
            &i.to_le_bytes(),
            past + ms(i % 50),
            &SendOptions::new().kind("a").priority((i % 3) as u8),
        )
        .unwrap();
    }
    let b = q.send_with(b"b", past + ms(60), &SendOptions::new().kind("b").priority(9)).unwrap().id();
    let exclude = vec!["a".to_string()];
    let start = Instant::now();
    let job = q.reserve_excluding(LEASE, &exclude, &StopSignal::new()).unwrap().unwrap();
    assert_eq!((job.id(), job.kind()), (b, "b"));
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
    let stats = q.stats().unwrap();
    assert_eq!((stats.pending, stats.leased), (n as u64, 1));
    assert!(q.jobs(JobState::Pending, n).unwrap().iter().all(|j| j.kind == "a" && j.attempt == 0));

    // Only excluded jobs due: sleeps (no CPU) until stop.
    let stop = StopSignal::new();
    let (cpu, took, got) = thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(ms(600));
            stop.raise();
        });
        let (c0, t0) = (thread_cpu(), Instant::now());
        let got = q.reserve_excluding(LEASE, &exclude, &stop).unwrap();
        (thread_cpu() - c0, t0.elapsed(), got)
    });
    assert!(got.is_none());
    assert!(took >= ms(550), "{took:?}");
    assert!(cpu < ms(100), "used {cpu:?} of CPU while waiting {took:?}");
    // It wakes for a job it may take, sent while it waits.
    let (took, got) = thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(ms(200));
            q.send_with(b"c", SystemTime::now(), &SendOptions::new().kind("c")).unwrap();
        });
        let t0 = Instant::now();
        let got = q.reserve_excluding(LEASE, &exclude, &StopSignal::new()).unwrap();
        (t0.elapsed(), got)
    });
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(got.unwrap().kind(), "c");
    // A raised stop returns at once.
    let raised = StopSignal::new();
    raised.raise();
    assert!(q.reserve_excluding(LEASE, &exclude, &raised).unwrap().is_none());
    // A plain reserve takes the "a" jobs, in priority order.
    let mut got = Vec::new();
    while got.len() < n {
        got.extend(q.reserve_many(LEASE, 1000, ms(100)).unwrap());
    }
    assert!(got.iter().all(|j| j.kind() == "a" && j.attempt() == 1));
    assert!(got.windows(2).all(|w| w[0].priority() <= w[1].priority()));
}

/// A plain `reserve_or_stop` already blocked takes a due job that a
/// `reserve_excluding` call leaves (no stranding).
pub fn a_job_left_by_reserve_excluding_goes_to_a_blocked_plain_reserve(connect: Connect<'_>) {
    let name = unique("excl-strand");
    let q = connect(RedisQueue::builder(), &name);
    let other = connect(RedisQueue::builder(), &name);
    let exclude = vec!["a".to_string()];
    let stop = StopSignal::new();
    let got = thread::scope(|s| {
        let plain = s.spawn(|| other.reserve_or_stop(LEASE, &StopSignal::new()).unwrap());
        let excl = s.spawn(|| q.reserve_excluding(LEASE, &exclude, &stop).unwrap());
        thread::sleep(ms(200));
        q.send_with(b"a", SystemTime::now(), &SendOptions::new().kind("a")).unwrap();
        let got = plain.join().unwrap();
        thread::sleep(ms(100));
        stop.raise();
        assert!(excl.join().unwrap().is_none());
        got
    });
    assert_eq!(got.unwrap().kind(), "a");
}
