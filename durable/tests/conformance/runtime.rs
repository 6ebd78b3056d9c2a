//! The worker runtime's contract, on every backend: kinds and last errors
//! stored, every job handled once per successful attempt, retries spaced by
//! the policy and never early, panics contained, leases kept alive, unknown
//! kinds and bad payloads dead with a reason, shutdown losing nothing.
//!
//! Tests wait on the runtime's own events (`on_event`) and on handlers'
//! channels, never on sleeps.

use std::collections::HashMap;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use delayq_durable::{DurableError, Event, JobId, JobKind, JobQueue, RetryPolicy, Worker, WorkerBuilder};
use serde::{Deserialize, Serialize};

use super::{ms, PATIENCE};

const LEASE: Duration = Duration::from_secs(30);

#[derive(Serialize, Deserialize, Debug)]
pub struct Echo {
    pub n: u32,
}

impl JobKind for Echo {
    const KIND: &'static str = "test.echo";
}

/// What the `on_event` hook saw, by job.
#[derive(Debug, PartialEq, Eq, Clone)]
pub enum Seen {
    Ok(JobId),
    Retry(JobId, SystemTime, String),
    Dead(JobId, String),
    Lost(JobId),
    QueueError(String),
}

/// A builder whose events arrive on the returned channel.
fn watched(q: Arc<dyn JobQueue>) -> (WorkerBuilder, Receiver<Seen>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let b = Worker::builder(q).on_event(move |e| {
        let seen = match e {
            Event::Succeeded { job } => Seen::Ok(job.id()),
            Event::Retrying { job, at, error } => Seen::Retry(job.id(), *at, error.to_string()),
            Event::Dead { job, error } => Seen::Dead(job.id(), error.to_string()),
            Event::LeaseLost { job } => Seen::Lost(job.id()),
            Event::QueueError { error } => Seen::QueueError(error.to_string()),
            _ => return,
        };
        let _ = tx.lock().unwrap().send(seen);
    });
    (b, rx)
}

/// The next `n` events (panics after `PATIENCE` without one).
fn next_events(rx: &Receiver<Seen>, n: usize) -> Vec<Seen> {
    (0..n)
        .map(|i| rx.recv_timeout(PATIENCE).unwrap_or_else(|_| panic!("event {} of {n} never came", i + 1)))
        .collect()
}

pub fn kinds_and_last_errors_are_stored_and_checked(q: impl JobQueue) {
    let plain = q.send_after(b"p", ms(0)).unwrap();
    let kinded = q.send_kind_after("email.send", b"{}", ms(0)).unwrap();
    let mut got = HashMap::new();
    for _ in 0..2 {
        let job = q.reserve_timeout(LEASE, PATIENCE).unwrap().expect("due");
        assert_eq!(job.last_error(), None);
        got.insert(job.id(), job);
    }
    assert_eq!(got[&plain].kind(), "");
    assert_eq!(got[&kinded].kind(), "email.send");
    // A nack with an error stores it; the redelivery carries it and the kind.
    let long = format!("smtp: 451 {}", "é".repeat(5000));
    assert!(q.nack_with_error(&got[&kinded], SystemTime::now(), &long).unwrap());
    let again = q.reserve_timeout(LEASE, PATIENCE).unwrap().expect("retried at once");
    assert_eq!((again.id(), again.kind(), again.attempt()), (kinded, "email.send", 2));
    let stored = again.last_error().expect("the error is stored");
    assert!(
        stored.starts_with("smtp: 451 é") && stored.len() <= 4096 && stored.len() > 4090,
        "{}",
        stored.len()
    );
    // A plain nack keeps it; a kill replaces it and buries the job at once.
    assert!(q.nack(&again, SystemTime::now()).unwrap());
    let third = q.reserve_timeout(LEASE, PATIENCE).unwrap().expect("retried at once");
    assert_eq!(third.last_error(), Some(stored));
    assert!(q.kill(&third, "no handler").unwrap());
    assert!(!q.kill(&third, "twice").unwrap(), "a killed job's lease is gone");
    assert!(!q.ack(&third).unwrap());
    let dead = q.dead_jobs(10).unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (dead[0].id(), dead[0].kind(), dead[0].last_error()),
        (kinded, "email.send", Some("no handler"))
    );
    assert_eq!(dead[0].attempt(), 3, "killed with attempts left: it is dead anyway");
    assert!(q.nack_with_error(&got[&plain], SystemTime::now(), "").unwrap());
    let p = q.reserve_timeout(LEASE, PATIENCE).unwrap().expect("retried at once");
    assert_eq!(p.last_error(), Some("(no message)"), "an empty message is not 'no error'");
    assert!(q.ack(&p).unwrap());
    // Bad kinds are refused, nothing stored.
    for bad in ["x".repeat(256), "a\nb".to_string()] {
        let err = q.send_kind_after(&bad, b"", ms(0)).unwrap_err();
        assert!(matches!(err, DurableError::InvalidArgument(_)), "{err:?}");
    }
    assert_eq!(q.len().unwrap(), 0);
    let max = "k".repeat(255);
    let id = q.send_kind_at(&max, b"", SystemTime::now()).unwrap();
    let job = q.reserve_timeout(LEASE, PATIENCE).unwrap().unwrap();
    assert_eq!((job.id(), job.kind()), (id, max.as_str()));
    assert!(q.ack(&job).unwrap());
}

/// Every job is handled to success exactly once; failures (errors and panics)
/// on the first attempt succeed on the second.
pub fn the_runtime_handles_every_job_once_per_successful_attempt(q: impl JobQueue + 'static) {
    let q: Arc<dyn JobQueue> = Arc::new(q);
    let calls: Arc<Mutex<Vec<(u32, u32, bool)>>> = Arc::default();
    let c = calls.clone();
    let (builder, events) = watched(q.clone());
    let worker = builder
        .handle(move |job: Echo, ctx| {
            let attempt = ctx.job().attempt();
            let fails = attempt == 1 && job.n.is_multiple_of(3);
            let panics = attempt == 1 && job.n.is_multiple_of(5) && !fails;
            c.lock().unwrap().push((job.n, attempt, !fails && !panics));
            if panics {
                panic!("job {} panicked on purpose", job.n);
            }
            if fails {
                return Err(format!("job {} failed on purpose", job.n));
            }
            Ok(())
        })
        .retry(RetryPolicy::exponential(ms(10)).jitter(0.5))
        .concurrency(3)
        .start()
        .unwrap();
    let n = 30u32;
    let mut ids = HashMap::new();
    for i in 0..n {
        ids.insert(q.enqueue_after(&Echo { n: i }, ms(u64::from(i % 4) * 5)).unwrap(), i);
    }
    let failing = (0..n).filter(|i| i.is_multiple_of(3) || i.is_multiple_of(5)).count();
    let seen = next_events(&events, n as usize + failing);
    let report = worker.shutdown(PATIENCE);
    assert!(report.abandoned.is_empty(), "{report:?}");
    let ok: Vec<_> =
        seen.iter().filter_map(|s| if let Seen::Ok(id) = s { Some(*id) } else { None }).collect();
    let mut per_job: HashMap<JobId, usize> = HashMap::new();
    for id in &ok {
        *per_job.entry(*id).or_default() += 1;
    }
    assert_eq!(per_job.len(), n as usize, "every job succeeded: {seen:?}");
    assert!(per_job.values().all(|&k| k == 1), "a job succeeded twice: {per_job:?}");
    let retries: Vec<_> = seen.iter().filter(|s| matches!(s, Seen::Retry(..))).collect();
    assert_eq!(retries.len(), failing, "{seen:?}");
    for s in &retries {
        let Seen::Retry(id, _, error) = s else { unreachable!() };
        let i = ids[id];
        let want = if i.is_multiple_of(3) {
            format!("job {i} failed on purpose")
        } else {
            format!("panicked: job {i} panicked on purpose")
        };
        assert_eq!(error, &want);
    }
    let calls = calls.lock().unwrap();
    assert_eq!(calls.len(), n as usize + failing, "one call per attempt, none more");
    for &(i, attempt, success) in calls.iter() {
        let first_fails = i.is_multiple_of(3) || i.is_multiple_of(5);
        assert_eq!(success, !(first_fails && attempt == 1), "job {i} attempt {attempt}");
        assert!(attempt <= 2, "job {i} ran a third time");
    }
    let stats = report.stats;
    assert_eq!((stats.succeeded, stats.retried, stats.killed), (u64::from(n), failing as u64, 0));
    assert_eq!(stats.panicked, (0..n).filter(|i| i.is_multiple_of(5) && !i.is_multiple_of(3)).count() as u64);
    assert_eq!((stats.lease_lost, stats.queue_errors), (0, 0));
    assert_eq!(q.len().unwrap(), 0);
    assert_eq!(q.stats().unwrap().dead, 0);
}

/// One thread, every job panicking once: the thread survives them all.
pub fn a_panicking_handler_does_not_end_its_thread(q: impl JobQueue + 'static) {
    let q: Arc<dyn JobQueue> = Arc::new(q);
    let (builder, events) = watched(q.clone());
    let worker = builder
        .handle_raw("boom", |job, _ctx| -> Result<(), String> {
            if job.attempt() == 1 {
                panic!("first attempt of {}", job.id());
            }
            Ok(())
        })
        .retry(RetryPolicy::exponential(ms(1)).jitter(0.0))
        .concurrency(1)
        .start()
        .unwrap();
    for _ in 0..3 {
        q.send_kind_after("boom", b"", ms(0)).unwrap();
    }
    let seen = next_events(&events, 6);
    assert_eq!(seen.iter().filter(|s| matches!(s, Seen::Ok(_))).count(), 3, "{seen:?}");
    let report = worker.shutdown(PATIENCE);
    assert_eq!((report.stats.panicked, report.stats.succeeded), (3, 3));
    assert_eq!(q.len().unwrap(), 0);
}

/// A job failing three times: each retry starts no earlier than the policy's
/// delay after the failure, and sees the last failure's message.
pub fn retries_are_spaced_by_the_policy_and_never_early(q: impl JobQueue + 'static) {
    let q: Arc<dyn JobQueue> = Arc::new(q);
    let policy = RetryPolicy::exponential(ms(40)).jitter(0.5).max_attempts(5);
    type Calls = Vec<(u32, SystemTime, SystemTime, Option<String>)>;
    let calls: Arc<Mutex<Calls>> = Arc::default();
    let c = calls.clone();
    let (builder, events) = watched(q.clone());
    let worker = builder
        .handle_raw("flaky", move |job, _ctx| {
            let entered = SystemTime::now();
            let last = job.last_error().map(str::to_string);
            let attempt = job.attempt();
            let result = if attempt <= 3 { Err(format!("failure {attempt}")) } else { Ok(()) };
            c.lock().unwrap().push((attempt, entered, SystemTime::now(), last));
            result
        })
        .retry_for("flaky", policy)
        .retry(RetryPolicy::exponential(Duration::from_secs(3600)))
        .start()
        .unwrap();
    q.send_kind_after("flaky", b"", ms(0)).unwrap();
    let seen = next_events(&events, 4);
    assert!(matches!(seen[3], Seen::Ok(_)), "{seen:?}");
    worker.shutdown(PATIENCE);
    let calls = calls.lock().unwrap();
    assert_eq!(calls.iter().map(|c| c.0).collect::<Vec<_>>(), [1, 2, 3, 4]);
    for w in calls.windows(2) {
        let (failed, _, left, _) = &w[0];
        let (_, entered, _, last) = &w[1];
        let least = policy.base_delay(*failed);
        let gap = entered.duration_since(*left).unwrap_or_default();
        assert!(gap >= least, "attempt {} retried after {gap:?}, policy says at least {least:?}", failed + 1);
        assert_eq!(last.as_deref(), Some(format!("failure {failed}").as_str()));
    }
    for (k, s) in seen[..3].iter().enumerate() {
        let Seen::Retry(_, at, _) = s else { panic!("{s:?}") };
        let (_, _, left, _) = &calls[k];
        let d = at.duration_since(*left).unwrap_or_default();
        let base = policy.base_delay(k as u32 + 1);
        assert!(
            d >= base && d <= base.mul_f64(1.5) + ms(5),
            "retry {} planned {d:?} after (base {base:?})",
            k + 1
        );
    }
    assert_eq!(calls[0].3, None);
}

/// Out of attempts, unknown kind, undecodable payload: dead, each with its
/// reason, and each handled (or not) exactly as often as it should be.
pub fn unknown_kinds_bad_payloads_and_spent_attempts_go_dead_with_a_reason(q: impl JobQueue + 'static) {
    let q: Arc<dyn JobQueue> = Arc::new(q);
    let runs: Arc<Mutex<Vec<u32>>> = Arc::default();
    let r = runs.clone();
    let (builder, events) = watched(q.clone());
    let worker = builder
        .handle(move |job: Echo, ctx| -> Result<(), String> {
            r.lock().unwrap().push(ctx.job().attempt());
            Err(format!("echo {} is broken", job.n))
        })
        .retry_for(Echo::KIND, RetryPolicy::exponential(ms(1)).max_attempts(2))
        .start()
        .unwrap();
    let unknown = q.send_kind_after("nobody.handles.this", b"x", ms(0)).unwrap();
    let garbled = q.send_kind_after(Echo::KIND, b"not json", ms(0)).unwrap();
    let spent = q.enqueue_after(&Echo { n: 7 }, ms(0)).unwrap();
    let seen = next_events(&events, 4); // unknown, garbled, spent: retry then dead
    worker.shutdown(PATIENCE);
    let dead: HashMap<JobId, String> = seen
        .iter()
        .filter_map(|s| if let Seen::Dead(id, e) = s { Some((*id, e.clone())) } else { None })
        .collect();
    assert_eq!(dead.len(), 3, "{seen:?}");
    assert_eq!(dead[&unknown], "no handler for kind \"nobody.handles.this\"");
    assert!(dead[&garbled].contains("does not decode as a \"test.echo\" job"), "{}", dead[&garbled]);
    assert_eq!(dead[&spent], "echo 7 is broken (attempt 2 of 2)");
    assert_eq!(
        *runs.lock().unwrap(),
        [1, 2],
        "the garbled job never reached the handler, the spent one twice"
    );
    let listed: HashMap<JobId, (String, Option<String>)> = q
        .dead_jobs(10)
        .unwrap()
        .into_iter()
        .map(|j| (j.id(), (j.kind().to_string(), j.last_error().map(str::to_string))))
        .collect();
    assert_eq!(listed.len(), 3);
    for (id, why) in &dead {
        assert_eq!(listed[id].1.as_deref(), Some(why.as_str()), "the reason is stored on {id}");
    }
    assert_eq!(listed[&unknown].0, "nobody.handles.this");
    assert_eq!(q.len().unwrap(), 0);
}

/// A handler running for several leases keeps its job: no other consumer
/// gets it, and its ack is accepted.
pub fn a_long_handler_keeps_its_lease(q: impl JobQueue + 'static) {
    let q: Arc<dyn JobQueue> = Arc::new(q);
    let lease = ms(300);
    let (started_tx, started) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let released = Mutex::new(released);
    let (builder, events) = watched(q.clone());
    let worker = builder
        .handle_raw("long", move |job, _ctx| -> Result<(), String> {
            started_tx.send(job.id()).unwrap();
            released.lock().unwrap().recv().map_err(|e| e.to_string())
        })
        .lease(lease)
        .start()
        .unwrap();
    let id = q.send_kind_after("long", b"", ms(0)).unwrap();
    assert_eq!(started.recv_timeout(PATIENCE).unwrap(), id);
    // Four leases long: without extensions it would have come back thrice.
    assert_eq!(q.reserve_timeout(LEASE, lease * 4).unwrap(), None, "the job was handed out again");
    release.send(()).unwrap();
    assert_eq!(next_events(&events, 1), [Seen::Ok(id)]);
    let report = worker.shutdown(PATIENCE);
    assert!(report.stats.extended >= 3, "{:?}", report.stats);
    assert_eq!(q.len().unwrap(), 0);
}

/// Shutdown stops reserving, waits for the handlers running, and loses
/// nothing: the rest stays pending for the next worker.
pub fn shutdown_waits_for_running_handlers_and_loses_nothing(q: impl JobQueue + 'static) {
    let q: Arc<dyn JobQueue> = Arc::new(q);
    let handled: Arc<Mutex<Vec<u32>>> = Arc::default();
    let make = |releases: Arc<Mutex<Receiver<()>>>, started: Sender<u32>| {
        let h = handled.clone();
        move |job: Echo, _ctx: &delayq_durable::Context<'_>| -> Result<(), String> {
            let _ = started.send(job.n);
            let _ = releases.lock().unwrap().recv(); // Err once the sender is gone: go on
            h.lock().unwrap().push(job.n);
            Ok(())
        }
    };
    let (release, releases) = mpsc::channel();
    let (started_tx, started) = mpsc::channel();
    let worker = Worker::builder(q.clone())
        .handle(make(Arc::new(Mutex::new(releases)), started_tx))
        .concurrency(2)
        .start()
        .unwrap();
    let n = 20u32;
    for i in 0..n {
        q.enqueue_after(&Echo { n: i }, ms(0)).unwrap();
    }
    let first: Vec<u32> = (0..2).map(|_| started.recv_timeout(PATIENCE).unwrap()).collect();
    let stop = worker.shutdown_handle();
    stop.shutdown(PATIENCE); // returns at once: both handlers are still blocked
    release.send(()).unwrap();
    release.send(()).unwrap();
    let report = worker.run();
    assert!(report.abandoned.is_empty(), "{report:?}");
    assert_eq!(report.stats.succeeded, 2, "{report:?}");
    let mut done = handled.lock().unwrap().clone();
    done.sort();
    let mut want = first.clone();
    want.sort();
    assert_eq!(done, want, "the two running handlers finished and nothing else started");
    let s = q.stats().unwrap();
    assert_eq!((s.pending, s.leased, s.dead), (u64::from(n) - 2, 0, 0), "the rest is pending, none leased");
    // A second worker drains the rest.
    let (release, releases) = mpsc::channel();
    drop(release);
    let (started_tx, _started) = mpsc::channel();
    let (builder, events) = watched(q.clone());
    let worker =
        builder.handle(make(Arc::new(Mutex::new(releases)), started_tx)).concurrency(2).start().unwrap();
    next_events(&events, n as usize - 2);
    worker.shutdown(PATIENCE);
    let mut all = handled.lock().unwrap().clone();
    all.sort();
    assert_eq!(all, (0..n).collect::<Vec<_>>(), "every job handled exactly once");
    assert_eq!(q.len().unwrap(), 0);
}

/// A handler that outlives the grace period: shutdown returns, names its job,
/// and stops extending its lease, so the job comes back as its next attempt.
pub fn a_handler_past_the_grace_period_is_left_to_its_lease(q: impl JobQueue + 'static) {
    let q: Arc<dyn JobQueue> = Arc::new(q);
    let lease = ms(400);
    let (started_tx, started) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let released = Mutex::new(released);
    let (builder, events) = watched(q.clone());
    let worker = builder
        .handle_raw("stuck", move |job, _ctx| -> Result<(), String> {
            started_tx.send(job.id()).unwrap();
            released.lock().unwrap().recv().map_err(|e| e.to_string())
        })
        .lease(lease)
        .start()
        .unwrap();
    let id = q.send_kind_after("stuck", b"", ms(0)).unwrap();
    assert_eq!(started.recv_timeout(PATIENCE).unwrap(), id);
    let report = worker.shutdown(ms(50));
    assert_eq!(report.abandoned, [id]);
    let again = q.reserve_timeout(LEASE, PATIENCE).unwrap().expect("back at its lease end");
    assert_eq!((again.id(), again.attempt()), (id, 2));
    assert!(q.ack(&again).unwrap());
    // The abandoned handler ends; its ack is refused (the job was someone else's).
    release.send(()).unwrap();
    assert_eq!(next_events(&events, 1), [Seen::Lost(id)]);
    assert_eq!(q.len().unwrap(), 0);
}

/// Wake-ups so far of this process's threads whose name starts with
/// `prefix`: their voluntary context switches (each block that ended), from
/// `/proc/self/task/*/status`. `None` where there is no `/proc` (not Linux).
fn wakeups(prefix: &str) -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = task.ok()?.path();
        let Ok(name) = std::fs::read_to_string(dir.join("comm")) else { continue };
        if !name.starts_with(prefix) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else { continue };
        let line = status.lines().find(|l| l.starts_with("voluntary_ctxt_switches:"))?;
        total += line.split_whitespace().nth(1)?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// An idle worker's threads block until a job is due or a shutdown is asked:
/// they do not wake up while nothing happens, and a shutdown ends them at once.
pub fn an_idle_worker_does_not_wake_and_stops_at_once(q: impl JobQueue + 'static) {
    let q: Arc<dyn JobQueue> = Arc::new(q);
    let threads = 4;
    let (done_tx, done) = mpsc::channel();
    let done_tx = Mutex::new(done_tx);
    let worker = Worker::builder(q.clone())
        .handle_raw("idle", move |job, _ctx| -> Result<(), String> {
            done_tx.lock().unwrap().send(job.id()).map_err(|e| e.to_string())
        })
        .concurrency(threads)
        .thread_name_prefix("idlewk")
        .start()
        .unwrap();
    // One job through, so every backend connection is made and used.
    let id = q.send_kind_after("idle", b"", ms(0)).unwrap();
    assert_eq!(done.recv_timeout(PATIENCE).unwrap(), id);
    // Idleness is a matter of elapsed time: this test has to let time pass.
    // A short settle (the ack, the threads going back to their wait), then a
    // window in which an idle thread must not wake at all. A worker that
    // polls the shutdown flag every 100 ms wakes ~15 times per thread here.
    thread::sleep(ms(300));
    if let Some(before) = wakeups("idlewk") {
        thread::sleep(ms(1500));
        let woke = wakeups("idlewk").unwrap() - before;
        assert!(woke < threads as u64, "{threads} idle worker threads woke {woke} times in 1.5 s");
    }
    let t = Instant::now();
    let report = worker.shutdown(PATIENCE);
    assert!(t.elapsed() < Duration::from_secs(1), "an idle worker's shutdown took {:?}", t.elapsed());
    assert!(report.abandoned.is_empty());
    assert_eq!(report.stats.succeeded, 1);
}
