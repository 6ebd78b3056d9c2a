#![allow(dead_code)] // each test file uses its part (the async clients no schedules)
//! The contract of priorities, unique jobs, recurring schedules, per-kind
//! limits and handler timeouts, run against every backend:
//! `send_with_tests!(open)` (what the async clients have too) and
//! `feature_tests!(open)` (the blocking clients: the schedule store,
//! `reserve_excluding`, the worker's limits).

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use delayq_durable::{
    fire_tick, DurableError, Fire, JobQueue, Missed, RetryPolicy, Schedule, SendOptions, Sent, StopSignal,
    Unique, UniqueStates, Worker, TICK_KIND,
};

use super::{ms, PATIENCE};

const LEASE: Duration = Duration::from_secs(30);

fn past(ms_ago: u64) -> SystemTime {
    SystemTime::now() - Duration::from_millis(ms_ago)
}

fn opts(priority: u8) -> SendOptions {
    SendOptions::new().priority(priority)
}

/// A small deterministic generator (xorshift), so a failure repeats.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

pub fn due_jobs_come_out_by_priority_then_deadline_then_send_order(q: impl JobQueue) {
    let mut seed = 0x9e37_79b9_7f4a_7c15;
    let base = past(60_000);
    let mut sent = Vec::new();
    for i in 0..1000u64 {
        let p = (rng(&mut seed) % 10) as u8;
        // Deadlines in whole milliseconds, some shared (then send order decides).
        let at = base + Duration::from_millis(rng(&mut seed) % 50);
        let id = q.send_with(format!("{i}").as_bytes(), at, &opts(p)).unwrap().id();
        sent.push((p, at, id));
    }
    sent.sort();
    let mut got = Vec::new();
    for _ in 0..1000 {
        let job = q.reserve_timeout(LEASE, PATIENCE).unwrap().expect("a due job");
        got.push((job.priority(), job.id()));
    }
    let want: Vec<_> = sent.iter().map(|&(p, _, id)| (p, id)).collect();
    assert_eq!(got, want);
    assert_eq!(q.reserve_timeout(LEASE, ms(50)).unwrap(), None);
}

pub fn a_priority_never_makes_a_job_early(q: impl JobQueue) {
    let at = SystemTime::now() + ms(400);
    let urgent = q.send_with(b"urgent", at, &opts(0)).unwrap().id();
    let low = q.send_with(b"low", past(0), &opts(9)).unwrap().id();
    let first = q.reserve_timeout(LEASE, PATIENCE).unwrap().unwrap();
    assert_eq!((first.id(), first.priority()), (low, 9));
    let second = q.reserve_timeout(LEASE, PATIENCE).unwrap().unwrap();
    assert_eq!((second.id(), second.priority()), (urgent, 0));
    assert!(SystemTime::now() >= at, "reserved before its deadline");
    // The old sends are priority 0.
    q.send_after(b"plain", ms(0)).unwrap();
    assert_eq!(q.reserve_timeout(LEASE, PATIENCE).unwrap().unwrap().priority(), 0);
}

pub fn a_unique_key_returns_the_job_that_holds_it(q: impl JobQueue) {
    let far = SystemTime::now() + Duration::from_secs(3600);
    let u = || SendOptions::new().unique(Unique::new("order-7"));
    let first = q.send_with(b"a", far, &u()).unwrap();
    assert!(first.created());
    assert_eq!(q.send_with(b"b", far, &u()).unwrap(), Sent::Existing(first.id()));
    assert_eq!(q.len().unwrap(), 1);
    // Leased still holds it (Both), and after the ack it is free again.
    assert!(q.cancel(first.id()).unwrap());
    let second = q.send_with(b"c", past(0), &u()).unwrap();
    assert!(second.created() && second.id() != first.id());
    let job = q.reserve_timeout(LEASE, PATIENCE).unwrap().unwrap();
    assert_eq!(q.send_with(b"d", far, &u()).unwrap(), Sent::Existing(second.id()));
    assert!(q.ack(&job).unwrap());
    assert!(q.send_with(b"e", far, &u()).unwrap().created());

    // Pending only: a leased job does not hold it.
    let p = || SendOptions::new().unique(Unique::new("pending-only").states(UniqueStates::Pending));
    let a = q.send_with(b"x", past(0), &p()).unwrap().id();
    let job = q.reserve_timeout(LEASE, PATIENCE).unwrap().unwrap();
    assert_eq!(job.id(), a);
    let b = q.send_with(b"y", far, &p()).unwrap();
    assert!(b.created());
    assert_eq!(q.send_with(b"z", far, &p()).unwrap(), Sent::Existing(b.id()));
    q.ack(&job).unwrap();

    // Leased only: a pending job does not hold it.
    let l = || SendOptions::new().unique(Unique::new("leased-only").states(UniqueStates::Leased));
    let a = q.send_with(b"x", far, &l()).unwrap().id();
    let b = q.send_with(b"y", far, &l()).unwrap().id();
    assert_ne!(a, b);

    // A period holds it past the ack, then lets go.
    let t = || SendOptions::new().unique(Unique::new("period").period(ms(1500)));
    let a = q.send_with(b"x", past(0), &t()).unwrap().id();
    let job = loop {
        let j = q.reserve_timeout(LEASE, PATIENCE).unwrap().unwrap();
        if j.id() == a {
            break j;
        }
        q.ack(&j).unwrap();
    };
    assert!(q.ack(&job).unwrap());
    assert_eq!(q.send_with(b"y", far, &t()).unwrap(), Sent::Existing(a));
    thread::sleep(ms(1600));
    assert!(q.send_with(b"z", far, &t()).unwrap().created());
}

pub fn a_dead_job_does_not_hold_its_key(q: impl JobQueue) {
    let u = || SendOptions::new().unique(Unique::new("dies"));
    let a = q.send_with(b"x", past(0), &u()).unwrap().id();
    let job = q.reserve_timeout(LEASE, PATIENCE).unwrap().unwrap();
    assert_eq!(job.id(), a);
    assert!(q.kill(&job, "no").unwrap());
    assert!(q.send_with(b"y", past(0), &u()).unwrap().created());
}

pub fn racing_sends_of_one_key_store_one_job(q: impl JobQueue + 'static) {
    let q = Arc::new(q);
    let at = SystemTime::now() + Duration::from_secs(3600);
    let created = Arc::new(AtomicUsize::new(0));
    let ids = Arc::new(Mutex::new(HashSet::new()));
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let (q, created, ids) = (q.clone(), created.clone(), ids.clone());
            thread::spawn(move || {
                let n = if t < 1000 % 16 { 1000 / 16 + 1 } else { 1000 / 16 };
                for _ in 0..n {
                    let sent =
                        q.send_with(b"once", at, &SendOptions::new().unique(Unique::new("the-key"))).unwrap();
                    if sent.created() {
                        created.fetch_add(1, Ordering::SeqCst);
                    }
                    ids.lock().unwrap().insert(sent.id());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(created.load(Ordering::SeqCst), 1);
    assert_eq!(ids.lock().unwrap().len(), 1);
    assert_eq!(q.len().unwrap(), 1);
}

pub fn bad_send_options_are_named_and_store_nothing(q: impl JobQueue) {
    let now = SystemTime::now();
    let invalid = |r: Result<Sent, DurableError>, needle: &str| match r {
        Err(DurableError::InvalidArgument(m)) => assert!(m.contains(needle), "{m:?} should name {needle:?}"),
        other => panic!("expected InvalidArgument naming {needle:?}, got {other:?}"),
    };
    invalid(q.send_with(b"x", now, &opts(10)), "priority");
    invalid(q.send_with(b"x", now, &SendOptions::new().unique(Unique::new("k".repeat(256)))), "255 bytes");
    invalid(q.send_with(b"x", now, &SendOptions::new().unique(Unique::new(""))), "empty");
    invalid(
        q.send_with(b"x", now, &SendOptions::new().unique(Unique::new("k").period(Duration::ZERO))),
        "period",
    );
    invalid(q.send_with(b"x", now, &SendOptions::new().kind("bad\nkind")), "control");
    assert_eq!(q.len().unwrap(), 0);
    // The largest key is accepted.
    assert!(q
        .send_with(b"x", now, &SendOptions::new().unique(Unique::new("k".repeat(255))))
        .unwrap()
        .created());
}

pub fn reserve_excluding_leaves_excluded_kinds_pending(q: impl JobQueue + 'static) {
    for _ in 0..300 {
        q.send_with(b"a", past(10), &SendOptions::new().kind("a")).unwrap();
    }
    let b = q.send_with(b"b", past(0), &SendOptions::new().kind("b")).unwrap().id();
    let stop = StopSignal::new();
    let job = q.reserve_excluding(LEASE, &["a".to_string()], &stop).unwrap().unwrap();
    assert_eq!(job.id(), b);
    q.ack(&job).unwrap();
    let s = q.stats().unwrap();
    assert_eq!((s.pending, s.leased), (300, 0), "an excluded job was leased");
    // Only excluded jobs due: it waits until the signal.
    let raiser = stop.clone();
    let t = thread::spawn(move || {
        thread::sleep(ms(300));
        raiser.raise();
    });
    let started = Instant::now();
    assert_eq!(q.reserve_excluding(LEASE, &["a".to_string()], &stop).unwrap(), None);
    assert!(started.elapsed() >= ms(250));
    t.join().unwrap();
    // Nothing was counted against them.
    let job = q.reserve_timeout(LEASE, PATIENCE).unwrap().unwrap();
    assert_eq!((job.kind(), job.attempt()), ("a", 1));
    // A job of another kind sent while an excluding reserve waits wakes it.
    let q2 = Arc::new(q);
    let waiter = {
        let q = q2.clone();
        thread::spawn(move || q.reserve_excluding(LEASE, &["a".to_string()], &StopSignal::new()))
    };
    thread::sleep(ms(200));
    let c = q2.send_with(b"c", past(0), &SendOptions::new().kind("c")).unwrap().id();
    let got = waiter.join().unwrap().unwrap().unwrap();
    assert_eq!(got.id(), c);
}

pub fn the_schedule_store_round_trips_and_keeps_one_tick_job(q: impl JobQueue) {
    let next = SystemTime::now() + ms(300);
    let next_us = next.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_micros() as u64;
    q.schedule_store("s1", b"def-1", Some(next_us)).unwrap();
    q.schedule_store("s1", b"def-2", Some(next_us)).unwrap(); // replaced: still one tick job
    q.schedule_store("s0", b"def-0", None).unwrap(); // paused: no tick job
    let got = q.schedule_get("s1").unwrap().unwrap();
    assert_eq!((got.def.as_slice(), got.next_run_us, got.last_run_us), (&b"def-2"[..], Some(next_us), None));
    let names: Vec<_> = q.schedule_list().unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(names, vec!["s0", "s1"]);
    assert_eq!(q.stats().unwrap().pending, 1);
    let tick = q.reserve_timeout(LEASE, PATIENCE).unwrap().unwrap();
    assert!(SystemTime::now() >= next, "a tick job came out early");
    assert_eq!((tick.kind(), tick.payload()), (TICK_KIND, &b"s1"[..]));
    // Fire: compare-and-set on the next tick; the jobs and the new tick job are stored.
    let fire = Fire {
        expect_next_us: next_us,
        next_run_us: next_us + 10_000_000,
        last_run_us: next_us,
        kind: "report".into(),
        payload: b"p".to_vec(),
        priority: 3,
        deadlines_us: vec![next_us, next_us + 1],
    };
    assert!(q.schedule_fire("s1", &fire).unwrap());
    assert!(!q.schedule_fire("s1", &fire).unwrap(), "a tick fired twice");
    q.ack(&tick).unwrap();
    let s = q.schedule_get("s1").unwrap().unwrap();
    assert_eq!((s.next_run_us, s.last_run_us), (Some(next_us + 10_000_000), Some(next_us)));
    let jobs = q.reserve_many(LEASE, 10, PATIENCE).unwrap();
    assert_eq!(jobs.len(), 2);
    assert!(jobs.iter().all(|j| j.kind() == "report" && j.payload() == b"p" && j.priority() == 3));
    assert_eq!(q.stats().unwrap().pending, 1, "one tick job, for the next tick");
    // Bad names and a missing schedule.
    assert!(matches!(q.schedule_store("", b"d", None), Err(DurableError::InvalidArgument(_))));
    assert!(matches!(q.schedule_store(&"n".repeat(201), b"d", None), Err(DurableError::InvalidArgument(_))));
    assert!(!q.schedule_fire("missing", &fire).unwrap());
    // Pausing and removing delete the pending tick job.
    q.schedule_store("s1", b"def-2", None).unwrap();
    assert_eq!(q.stats().unwrap().pending, 0);
    assert!(q.schedule_remove("s1").unwrap());
    assert!(!q.schedule_remove("s1").unwrap());
    assert_eq!(q.schedule_get("s1").unwrap(), None);
}

pub fn racing_fires_of_one_tick_store_it_once(q: impl JobQueue + 'static) {
    let q = Arc::new(q);
    let next_us = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_micros() as u64;
    q.schedule_store("race", b"def", Some(next_us)).unwrap();
    let fire = Fire {
        expect_next_us: next_us,
        next_run_us: next_us + 3_600_000_000,
        last_run_us: next_us,
        kind: "k".into(),
        payload: Vec::new(),
        priority: 0,
        deadlines_us: vec![next_us],
    };
    let wins = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (q, fire, wins) = (q.clone(), fire.clone(), wins.clone());
            thread::spawn(move || {
                if q.schedule_fire("race", &fire).unwrap() {
                    wins.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(wins.load(Ordering::SeqCst), 1);
    let jobs = q.reserve_many(LEASE, 100, PATIENCE).unwrap();
    let kinds: Vec<_> = jobs.iter().map(|j| j.kind().to_string()).collect();
    assert_eq!(kinds.iter().filter(|k| *k == "k").count(), 1, "{kinds:?}");
}

/// Drives a schedule with `fire_tick` as a hand-written loop would, for
/// `for_`, and returns the scheduled jobs' deadlines.
fn run_ticks(q: &impl JobQueue, for_: Duration) -> Vec<SystemTime> {
    let until = Instant::now() + for_;
    let mut got = Vec::new();
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        let Some(job) = q.reserve_timeout(LEASE, left).unwrap() else { break };
        if job.kind() == TICK_KIND {
            fire_tick(q, &job).unwrap();
        } else {
            assert!(SystemTime::now() >= job.deadline());
            got.push(job.deadline());
            q.ack(&job).unwrap();
        }
    }
    got
}

pub fn a_schedule_fires_each_tick_once_and_never_early(q: impl JobQueue) {
    let every = Schedule::every(ms(500)).unwrap().missed(Missed::All(100));
    q.schedule_raw("half-second", &every, "beat", b"tick").unwrap();
    q.schedule_raw("half-second", &every, "beat", b"tick").unwrap(); // again: no change
    let info = &q.schedules().unwrap()[0];
    assert_eq!((info.name.as_str(), info.kind.as_str(), info.paused), ("half-second", "beat", false));
    let first = info.next_run.unwrap();
    let mut got = run_ticks(&q, ms(2300));
    // Pause (no tick job is left, nothing more fires), then take the jobs of
    // the ticks fired just before: the loop may have ended between a firing
    // and its job.
    assert!(q.pause_schedule("half-second").unwrap());
    assert!(q.schedules().unwrap()[0].paused);
    while let Some(job) = q.reserve_timeout(LEASE, ms(300)).unwrap() {
        assert_eq!(job.kind(), "beat", "a tick job is left after the pause");
        got.push(job.deadline());
        q.ack(&job).unwrap();
    }
    assert!((4..=6).contains(&got.len()), "{} ticks in 2.3 s of a 0.5 s schedule", got.len());
    // Redis reports a deadline through its clock-offset estimate: to the
    // millisecond here, not to the nanosecond.
    let near = |a: SystemTime, b: SystemTime| a.duration_since(b).unwrap_or_else(|e| e.duration()) < ms(2);
    for (i, t) in got.iter().enumerate() {
        assert!(near(*t, first + ms(500) * i as u32), "tick {i} at {t:?}, first {first:?}");
    }
    let info = &q.schedules().unwrap()[0];
    assert!(near(info.last_run.unwrap(), *got.last().unwrap()), "{:?} {:?}", info.last_run, got.last());
    assert_eq!(q.stats().unwrap().pending, 0);
    assert!(run_ticks(&q, ms(700)).is_empty());
    assert!(q.resume_schedule("half-second").unwrap());
    let resumed = q.schedules().unwrap()[0].next_run.unwrap();
    assert!(resumed > SystemTime::now() - ms(10));
    assert!(!run_ticks(&q, ms(800)).is_empty());
    assert!(q.remove_schedule("half-second").unwrap());
    assert!(q.schedules().unwrap().is_empty());
    assert!(!q.pause_schedule("half-second").unwrap());
}

pub fn bad_schedules_are_named_and_store_nothing(q: impl JobQueue) {
    let every = Schedule::every(ms(500)).unwrap();
    let invalid = |r: Result<(), DurableError>, needle: &str| match r {
        Err(DurableError::InvalidArgument(m)) => assert!(m.contains(needle), "{m:?} should name {needle:?}"),
        other => panic!("expected InvalidArgument naming {needle:?}, got {other:?}"),
    };
    invalid(q.schedule_raw("", &every, "k", b""), "name");
    invalid(q.schedule_raw("x", &every, "bad\u{7}", b""), "control");
    invalid(q.schedule_raw("x", &every.clone().priority(12), "k", b""), "priority");
    invalid(q.schedule_raw("x", &every.clone().missed(Missed::All(0)), "k", b""), "1..=1000");
    let big = vec![0u8; (1 << 20) + 1]; // Opts::default's max_payload, plus one
    assert!(matches!(q.schedule_raw("x", &every, "k", &big), Err(DurableError::PayloadTooLarge { .. })));
    assert!(q.schedules().unwrap().is_empty());
    assert_eq!(q.len().unwrap(), 0);
}

pub fn two_workers_fire_a_schedule_once_per_tick(q: impl JobQueue + 'static) {
    let q = Arc::new(q);
    let every = Schedule::every(ms(400)).unwrap().missed(Missed::All(100));
    q.schedule_raw("shared", &every, "beat", b"").unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let seen = seen.clone();
            Worker::builder(q.clone())
                .handle_raw("beat", move |job, _| {
                    assert!(SystemTime::now() >= job.deadline());
                    seen.lock().unwrap().push(job.deadline());
                    Ok::<(), String>(())
                })
                .concurrency(2)
                .start()
                .unwrap()
        })
        .collect();
    thread::sleep(ms(2100));
    let stats: Vec<_> = workers.into_iter().map(|w| w.shutdown(Duration::from_secs(5)).stats).collect();
    // The jobs of ticks fired just before the shutdown, not yet handled.
    assert!(q.remove_schedule("shared").unwrap());
    let mut ticks = seen.lock().unwrap().clone();
    while let Some(job) = q.reserve_timeout(LEASE, ms(300)).unwrap() {
        assert_eq!(job.kind(), "beat");
        ticks.push(job.deadline());
        q.ack(&job).unwrap();
    }
    let n = ticks.len();
    ticks.sort();
    ticks.dedup();
    assert_eq!(ticks.len(), n, "a tick ran twice");
    assert!((4..=7).contains(&n), "{n} ticks in 2.1 s of a 0.4 s schedule");
    assert_eq!(stats.iter().map(|s| s.scheduled).sum::<u64>() as usize, n);
}

pub fn a_kind_at_its_concurrency_limit_does_not_hold_up_other_kinds(q: impl JobQueue + 'static) {
    let q = Arc::new(q);
    for _ in 0..1000 {
        q.send_with(b"", past(5), &SendOptions::new().kind("email")).unwrap();
    }
    for _ in 0..20 {
        q.send_with(b"", past(0), &SendOptions::new().kind("other")).unwrap();
    }
    let now = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let emails_done = Arc::new(AtomicUsize::new(0));
    let others_at = Arc::new(Mutex::new(Vec::new()));
    let w = {
        let (now, most, emails_done, others_at) =
            (now.clone(), most.clone(), emails_done.clone(), others_at.clone());
        let done_now = emails_done.clone();
        Worker::builder(q.clone())
            .handle_raw("email", move |job, _| {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(n, Ordering::SeqCst);
                thread::sleep(ms(2));
                now.fetch_sub(1, Ordering::SeqCst);
                emails_done.fetch_add(1, Ordering::SeqCst);
                assert_eq!(job.attempt(), 1, "an email job was leased and given back");
                Ok::<(), String>(())
            })
            .handle_raw("other", move |_, _| {
                others_at.lock().unwrap().push(done_now.load(Ordering::SeqCst));
                Ok::<(), String>(())
            })
            .concurrency(6)
            .concurrency_for("email", 2)
            .start()
            .unwrap()
    };
    let until = Instant::now() + PATIENCE * 3;
    while q.len().unwrap() > 0 && Instant::now() < until {
        thread::sleep(ms(20));
    }
    let stats = w.shutdown(Duration::from_secs(5)).stats;
    assert_eq!(q.len().unwrap(), 0);
    assert_eq!(most.load(Ordering::SeqCst), 2, "email handlers at once");
    assert_eq!(stats.succeeded, 1020);
    assert_eq!(stats.lease_lost, 0);
    let others = others_at.lock().unwrap();
    assert_eq!(others.len(), 20);
    assert!(others.iter().all(|&done| done < 1000), "the other kind waited for every email: {others:?}");
}

pub fn a_rate_limit_spaces_the_starts(q: impl JobQueue + 'static) {
    let q = Arc::new(q);
    for _ in 0..25 {
        q.send_with(b"", past(0), &SendOptions::new().kind("api")).unwrap();
    }
    let starts = Arc::new(Mutex::new(Vec::new()));
    let began = Instant::now();
    let w = {
        let starts = starts.clone();
        Worker::builder(q.clone())
            .handle_raw("api", move |_, _| {
                starts.lock().unwrap().push(began.elapsed());
                Ok::<(), String>(())
            })
            .concurrency(4)
            .rate_limit_for("api", 10, Duration::from_secs(1))
            .start()
            .unwrap()
    };
    let until = Instant::now() + PATIENCE;
    while q.len().unwrap() > 0 && Instant::now() < until {
        thread::sleep(ms(20));
    }
    w.shutdown(Duration::from_secs(5));
    let starts = starts.lock().unwrap();
    assert_eq!(starts.len(), 25);
    // A full bucket of 10, then one every 100 ms: start k (from 0) no sooner
    // than (k - 9) * 100 ms (less a little for the clock's grain).
    for (k, at) in starts.iter().enumerate() {
        let earliest = ms(100) * (k.saturating_sub(9) as u32);
        assert!(*at + ms(5) >= earliest, "start {k} at {at:?}, before {earliest:?}");
    }
}

pub fn an_async_handler_past_its_timeout_is_dropped_and_retried(q: impl JobQueue + 'static) {
    let q = Arc::new(q);
    let id = q.send_with(b"", past(0), &SendOptions::new().kind("slow")).unwrap().id();
    let dropped = Arc::new(AtomicUsize::new(0));
    struct Flag(Arc<AtomicUsize>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let w = {
        let dropped = dropped.clone();
        Worker::builder(q.clone())
            .handle_raw_async("slow", move |_job| {
                let flag = Flag(dropped.clone());
                async move {
                    let _flag = flag;
                    std::future::pending::<()>().await;
                    Ok::<(), String>(())
                }
            })
            .timeout_for("slow", ms(200))
            .retry(RetryPolicy::exponential(ms(10)).max_attempts(1))
            .start()
            .unwrap()
    };
    let until = Instant::now() + PATIENCE;
    while q.stats().unwrap().dead == 0 && Instant::now() < until {
        thread::sleep(ms(20));
    }
    w.shutdown(Duration::from_secs(5));
    let dead = q.dead_jobs(10).unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].id(), id);
    assert!(dead[0].last_error().unwrap().contains("timed out after 200ms"), "{:?}", dead[0].last_error());
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "the future was not dropped");
}

/// `send_with` cases: every client, async ones included.
#[macro_export]
macro_rules! send_with_tests {
    ($open:path) => {
        mod send_with_cases {
            use super::conformance::{features, Opts};
            fn open(opts: Opts) -> Option<impl delayq_durable::JobQueue + 'static> {
                $open(opts)
            }
            #[test]
            fn due_jobs_come_out_by_priority_then_deadline_then_send_order() {
                if let Some(q) = open(Opts::default()) {
                    features::due_jobs_come_out_by_priority_then_deadline_then_send_order(q);
                }
            }
            #[test]
            fn a_priority_never_makes_a_job_early() {
                if let Some(q) = open(Opts::default()) {
                    features::a_priority_never_makes_a_job_early(q);
                }
            }
            #[test]
            fn a_unique_key_returns_the_job_that_holds_it() {
                if let Some(q) = open(Opts::default()) {
                    features::a_unique_key_returns_the_job_that_holds_it(q);
                }
            }
            #[test]
            fn a_dead_job_does_not_hold_its_key() {
                if let Some(q) = open(Opts::default()) {
                    features::a_dead_job_does_not_hold_its_key(q);
                }
            }
            #[test]
            fn racing_sends_of_one_key_store_one_job() {
                if let Some(q) = open(Opts::default()) {
                    features::racing_sends_of_one_key_store_one_job(q);
                }
            }
            #[test]
            fn bad_send_options_are_named_and_store_nothing() {
                if let Some(q) = open(Opts::default()) {
                    features::bad_send_options_are_named_and_store_nothing(q);
                }
            }
        }
    };
}

/// The cases of the blocking clients: `send_with`'s, the schedule store and
/// API, `reserve_excluding`, and the worker's limits and timeouts.
#[macro_export]
macro_rules! feature_tests {
    ($open:path) => {
        $crate::send_with_tests!($open);
        mod feature_cases {
            use super::conformance::{features, Opts};
            fn open(opts: Opts) -> Option<impl delayq_durable::JobQueue + 'static> {
                $open(opts)
            }
            #[test]
            fn reserve_excluding_leaves_excluded_kinds_pending() {
                if let Some(q) = open(Opts::default()) {
                    features::reserve_excluding_leaves_excluded_kinds_pending(q);
                }
            }
            #[test]
            fn the_schedule_store_round_trips_and_keeps_one_tick_job() {
                if let Some(q) = open(Opts::default()) {
                    features::the_schedule_store_round_trips_and_keeps_one_tick_job(q);
                }
            }
            #[test]
            fn racing_fires_of_one_tick_store_it_once() {
                if let Some(q) = open(Opts::default()) {
                    features::racing_fires_of_one_tick_store_it_once(q);
                }
            }
            #[test]
            fn a_schedule_fires_each_tick_once_and_never_early() {
                if let Some(q) = open(Opts::default()) {
                    features::a_schedule_fires_each_tick_once_and_never_early(q);
                }
            }
            #[test]
            fn bad_schedules_are_named_and_store_nothing() {
                if let Some(q) = open(Opts::default()) {
                    features::bad_schedules_are_named_and_store_nothing(q);
                }
            }
            #[test]
            fn two_workers_fire_a_schedule_once_per_tick() {
                if let Some(q) = open(Opts::default()) {
                    features::two_workers_fire_a_schedule_once_per_tick(q);
                }
            }
            #[test]
            fn a_kind_at_its_concurrency_limit_does_not_hold_up_other_kinds() {
                if let Some(q) = open(Opts::default()) {
                    features::a_kind_at_its_concurrency_limit_does_not_hold_up_other_kinds(q);
                }
            }
            #[test]
            fn a_rate_limit_spaces_the_starts() {
                if let Some(q) = open(Opts::default()) {
                    features::a_rate_limit_spaces_the_starts(q);
                }
            }
            #[test]
            fn an_async_handler_past_its_timeout_is_dropped_and_retried() {
                if let Some(q) = open(Opts::default()) {
                    features::an_async_handler_past_its_timeout_is_dropped_and_retried(q);
                }
            }
        }
    };
}
