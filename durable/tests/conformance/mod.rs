//! The durable-jobs contract as tests, run against every backend: each backend's
//! test file calls `conformance_tests!(open)` with a function that opens a fresh,
//! empty queue with the given options.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime};

use delayq_durable::{DurableError, Job, JobId, JobQueue, StopSignal};

pub mod features;
pub mod runtime;

/// What a test needs of a fresh queue.
#[derive(Clone, Copy, Debug)]
pub struct Opts {
    pub max_attempts: u32,
    pub max_payload: usize,
}

impl Default for Opts {
    fn default() -> Self {
        Opts { max_attempts: 25, max_payload: 1 << 20 }
    }
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos() as u64
}

const LEASE: Duration = Duration::from_secs(30);

/// Deadlines as two backends report them: exact for the file, and for Redis
/// the server's microseconds mapped back to this client's clock by the same
/// offset estimate the instant went through (so to the microsecond).
fn close_to(a: SystemTime, b: SystemTime) -> bool {
    let d = a.duration_since(b).unwrap_or_else(|e| e.duration());
    d < Duration::from_micros(1)
}
// "Never early" is checked against the deadline the test itself asked for,
// never against `job.deadline()`: Redis maps its own deadline to this client's
// clock with an offset estimate that is never below the true offset, so that
// one has always passed by construction and a check against it could not
// fail. (Server and client share the host's clock in these tests.)

/// How long a test waits for something that must happen (generous: CI is slow).
pub const PATIENCE: Duration = Duration::from_secs(10);

pub fn reserve_and_ack_round_trip(q: impl JobQueue) {
    let id = q.send_after(b"\x00payload\xff", ms(0)).unwrap();
    assert_eq!(q.len().unwrap(), 1);
    let job = q.reserve(LEASE).unwrap();
    assert_eq!(job.id(), id);
    assert_eq!(job.payload(), b"\x00payload\xff");
    assert_eq!(job.attempt(), 1);
    assert!(job.lease_deadline().unwrap() > SystemTime::now() + Duration::from_secs(20));
    let s = q.stats().unwrap();
    assert_eq!((s.pending, s.leased, s.dead), (0, 1, 0));
    assert!(q.ack(&job).unwrap());
    assert!(!q.ack(&job).unwrap(), "a second ack finds nothing");
    assert_eq!(q.len().unwrap(), 0);
    assert!(q.is_empty().unwrap());
    assert_eq!(q.reserve_timeout(LEASE, ms(50)).unwrap(), None);
}

pub fn never_early_and_in_deadline_order(q: impl JobQueue) {
    let base = SystemTime::now() + ms(80);
    let c = q.send_at(b"c", base + ms(40)).unwrap();
    let a = q.send_at(b"a", base).unwrap();
    let b = q.send_at(b"b", base + ms(20)).unwrap();
    let asked = HashMap::from([(a, base), (b, base + ms(20)), (c, base + ms(40))]);
    let mut got = Vec::new();
    for _ in 0..3 {
        let job = q.reserve_timeout(LEASE, PATIENCE).unwrap().expect("due within patience");
        let now = SystemTime::now();
        let deadline = asked[&job.id()];
        assert!(now >= deadline, "{:?} delivered {:?} early", job.id(), deadline.duration_since(now));
        got.push(job.id());
        assert!(q.ack(&job).unwrap());
    }
    assert_eq!(got, vec![a, b, c]);
}

pub fn a_past_deadline_is_due_at_once_and_a_far_one_waits(q: impl JobQueue) {
    let far = q.send_at(b"far", SystemTime::now() + Duration::from_secs(3600)).unwrap();
    let past = q.send_at(b"past", SystemTime::UNIX_EPOCH + Duration::from_secs(1)).unwrap();
    let job = q.reserve_timeout(LEASE, PATIENCE).unwrap().unwrap();
    assert_eq!(job.id(), past);
    assert!(q.ack(&job).unwrap());
    assert_eq!(q.reserve_timeout(LEASE, ms(100)).unwrap(), None);
    assert_eq!(q.len().unwrap(), 1);
    assert!(q.cancel(far).unwrap());
    assert!(!q.cancel(far).unwrap());
    assert_eq!(q.len().unwrap(), 0);
}

pub fn an_expired_lease_redelivers_and_the_stale_ack_fails(q: impl JobQueue) {
    let id = q.send_after(b"x", ms(0)).unwrap();
    // The lease starts no earlier than this, so it ends no earlier than this + 100 ms.
    let asked = SystemTime::now();
    let first = q.reserve(ms(100)).unwrap();
    assert_eq!(first.attempt(), 1);
    let second = q.reserve_timeout(LEASE, PATIENCE).unwrap().expect("redelivered after the lease");
    assert!(SystemTime::now() >= asked + ms(100), "redelivered before the lease ended");
    assert_eq!(second.id(), id);
    assert_eq!(second.attempt(), 2);
    assert_eq!(second.last_error(), Some("lease expired (attempt 1)"), "why it came back");
    assert!(close_to(second.deadline(), first.deadline()), "a redelivery keeps its deadline");
    assert!(!q.ack(&first).unwrap(), "a stale ack must not delete a re-leased job");
    assert!(!q.extend(&first, LEASE).unwrap());
    assert!(!q.nack(&first, SystemTime::now()).unwrap());
    assert_eq!(q.len().unwrap(), 1);
    assert!(q.ack(&second).unwrap());
    assert_eq!(q.len().unwrap(), 0);
}

pub fn an_ack_after_the_lease_ends_but_before_redelivery_succeeds(q: impl JobQueue) {
    q.send_after(b"x", ms(0)).unwrap();
    let job = q.reserve(ms(30)).unwrap();
    thread::sleep(ms(100));
    assert!(q.ack(&job).unwrap());
    assert_eq!(q.reserve_timeout(LEASE, ms(100)).unwrap(), None);
    assert_eq!(q.len().unwrap(), 0);
}

pub fn nack_retries_at_the_given_time_as_the_next_attempt(q: impl JobQueue) {
    let id = q.send_after(b"x", ms(0)).unwrap();
    let job = q.reserve(LEASE).unwrap();
    let retry_at = SystemTime::now() + ms(80);
    assert!(q.nack(&job, retry_at).unwrap());
    assert!(!q.ack(&job).unwrap(), "the nacked lease is gone");
    let again = q.reserve_timeout(LEASE, PATIENCE).unwrap().unwrap();
    assert!(SystemTime::now() >= retry_at, "retried early");
    assert_eq!((again.id(), again.attempt()), (id, 2));
    assert!(close_to(again.deadline(), retry_at), "{:?} vs {retry_at:?}", again.deadline());
    assert!(q.ack(&again).unwrap());
}

pub fn extend_keeps_the_job_from_redelivery(q: impl JobQueue) {
    q.send_after(b"x", ms(0)).unwrap();
    let job = q.reserve(ms(80)).unwrap();
    assert!(q.extend(&job, Duration::from_secs(5)).unwrap());
    assert_eq!(q.reserve_timeout(LEASE, ms(300)).unwrap(), None, "redelivered despite the extension");
    assert!(q.ack(&job).unwrap());
}

pub fn failed_deliveries_go_dead_and_can_be_requeued(q: impl JobQueue) {
    // Opened with max_attempts = 2.
    let id = q.send_after(b"poison", ms(0)).unwrap();
    let j1 = q.reserve(LEASE).unwrap();
    assert!(q.nack(&j1, SystemTime::now()).unwrap());
    let j2 = q.reserve_timeout(LEASE, PATIENCE).unwrap().unwrap();
    assert_eq!(j2.attempt(), 2);
    assert!(q.nack(&j2, SystemTime::now()).unwrap(), "the last nack is accepted (to the dead set)");
    assert_eq!(q.reserve_timeout(LEASE, ms(100)).unwrap(), None);
    let s = q.stats().unwrap();
    assert_eq!((s.pending, s.leased, s.dead), (0, 0, 1));
    assert_eq!(q.len().unwrap(), 0);
    let dead = q.dead_jobs(10).unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!((dead[0].id(), dead[0].attempt(), dead[0].payload()), (id, 2, &b"poison"[..]));
    assert_eq!(dead[0].lease_deadline(), None);
    assert!(!q.ack(&dead[0]).unwrap());

    // A lease that runs out on the last attempt also goes dead.
    let other = q.send_after(b"slow", ms(0)).unwrap();
    let k1 = q.reserve(ms(30)).unwrap();
    let k2 = q.reserve_timeout(ms(30), PATIENCE).unwrap().unwrap();
    assert_eq!((k1.id(), k2.id(), k2.attempt()), (other, other, 2));
    assert_eq!(q.reserve_timeout(LEASE, ms(200)).unwrap(), None);
    assert_eq!(q.stats().unwrap().dead, 2);
    let slow = q.dead_jobs(10).unwrap().into_iter().find(|j| j.id() == other).expect("dead");
    assert_eq!(slow.last_error(), Some("lease expired (attempt 2)"), "a death by lease says so");

    assert!(q.requeue_dead(id, SystemTime::now()).unwrap());
    assert!(!q.requeue_dead(id, SystemTime::now()).unwrap(), "not dead any more");
    let j3 = q.reserve_timeout(LEASE, PATIENCE).unwrap().unwrap();
    assert_eq!((j3.id(), j3.attempt()), (id, 3));
    assert!(q.ack(&j3).unwrap());
    assert!(q.cancel(other).unwrap(), "cancel deletes a dead job too");
    assert_eq!(q.stats().unwrap().dead, 0);
}

pub fn cancel_removes_pending_and_leased_jobs(q: impl JobQueue) {
    let pending = q.send_after(b"p", ms(50)).unwrap();
    let leased = q.send_after(b"l", ms(0)).unwrap();
    let job = q.reserve(LEASE).unwrap();
    assert_eq!(job.id(), leased);
    assert!(q.cancel(pending).unwrap());
    assert!(q.cancel(leased).unwrap());
    assert!(!q.ack(&job).unwrap(), "its job was cancelled");
    assert_eq!(q.reserve_timeout(LEASE, ms(200)).unwrap(), None, "a cancelled job was delivered");
    assert_eq!(q.len().unwrap(), 0);
    assert!(!q.cancel(delayq_durable::JobId(u64::MAX)).unwrap());
}

pub fn batches_send_and_ack_together(q: impl JobQueue) {
    let now = SystemTime::now();
    let payloads: Vec<Vec<u8>> = (0..50u32).map(|i| i.to_le_bytes().to_vec()).collect();
    let batch: Vec<(&[u8], SystemTime)> = payloads.iter().map(|p| (p.as_slice(), now)).collect();
    let ids = q.send_many(&batch).unwrap();
    assert_eq!(ids.len(), 50);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids in order");
    assert_eq!(q.send_many(&[]).unwrap(), vec![]);
    let mut seen = Vec::new();
    while seen.len() < 50 {
        let job = q.reserve_timeout(LEASE, PATIENCE).unwrap().expect("all due");
        seen.push(job.id());
        assert!(q.ack(&job).unwrap());
    }
    seen.sort();
    assert_eq!(seen, ids);
}

pub fn bad_arguments_get_clear_errors_and_store_nothing(q: impl JobQueue) {
    // Opened with max_payload = 16.
    match q.send_after(&[0u8; 17], ms(0)) {
        Err(DurableError::PayloadTooLarge { len: 17, max: 16 }) => {}
        other => panic!("expected PayloadTooLarge, got {other:?}"),
    }
    let big = [0u8; 17];
    let err = q.send_many(&[(b"ok", SystemTime::now()), (&big, SystemTime::now())]).unwrap_err();
    assert!(matches!(err, DurableError::PayloadTooLarge { .. }), "{err}");
    assert!(err.to_string().contains("17 bytes"), "{err}");
    assert_eq!(q.len().unwrap(), 0, "a rejected batch stores nothing");
    let far = SystemTime::UNIX_EPOCH + Duration::from_secs(600 * 365 * 86_400);
    assert!(matches!(q.send_at(b"x", far), Err(DurableError::DeadlineOutOfRange)));
    assert!(matches!(q.send_after(b"x", Duration::MAX), Err(DurableError::DeadlineOutOfRange)));
    assert!(matches!(q.reserve_timeout(Duration::ZERO, ms(1)), Err(DurableError::InvalidArgument(_))));
    assert_eq!(q.len().unwrap(), 0);
    q.send_after(&[7u8; 16], ms(0)).unwrap();
    assert_eq!(q.reserve(LEASE).unwrap().payload(), &[7u8; 16]);
}

/// Issue 22.3d: `usize::MAX` as a batch size or a listing limit means "all
/// there are" on both backends (Redis failed with "value is not an integer").
pub fn the_largest_limits_are_accepted(q: impl JobQueue) {
    // Opened with max_attempts = 1: a nack is death.
    let ids = q.send_many(&[(b"a", SystemTime::now()), (b"b", SystemTime::now()), (b"c", SystemTime::now())]);
    let mut ids = ids.unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        let jobs = q.reserve_many(LEASE, usize::MAX, PATIENCE).unwrap();
        assert!(!jobs.is_empty(), "nothing due within patience");
        got.extend(jobs);
    }
    let mut leased: Vec<_> = got.iter().map(|j| j.id()).collect();
    leased.sort();
    ids.sort();
    assert_eq!(leased, ids);
    assert_eq!(q.dead_jobs(usize::MAX).unwrap(), vec![]);
    for job in &got {
        assert!(q.nack(job, SystemTime::now()).unwrap());
    }
    let mut dead: Vec<_> = q.dead_jobs(usize::MAX).unwrap().iter().map(|j| j.id()).collect();
    dead.sort();
    assert_eq!(dead, ids);
    assert_eq!(q.reserve_many(LEASE, usize::MAX, ms(50)).unwrap(), vec![]);
}

/// Issue 22.3e: both backends accept deadlines up to 2^52 µs (about 142.7
/// years) ahead and refuse later ones, with an error naming that limit (Redis
/// named 2554, the embedded file's limit, and the file accepted 2200).
pub fn both_backends_accept_the_same_deadline_range(q: impl JobQueue) {
    let limit = Duration::from_micros(1 << 52);
    let day = Duration::from_secs(86_400);
    let inside = q.send_after(b"in 142 years", limit - day).unwrap();
    let inside_at = q.send_at(b"in 142 years", SystemTime::now() + limit - day).unwrap();
    for (what, r) in [
        ("send_after", q.send_after(b"x", limit + day)),
        ("send_at", q.send_at(b"x", SystemTime::now() + limit + day)),
    ] {
        match r {
            Err(e @ DurableError::DeadlineOutOfRange) => {
                let text = e.to_string();
                assert!(text.contains("142 years") && !text.contains("2554"), "{what}: {text}");
            }
            other => panic!("{what}: a deadline past the limit: {other:?}"),
        }
    }
    let err = q.send_many(&[(b"x", SystemTime::now() + limit + day)]).unwrap_err();
    assert!(matches!(err, DurableError::DeadlineOutOfRange), "send_many: {err:?}");
    assert_eq!(q.len().unwrap(), 2, "only the two inside the range were stored");
    assert!(q.cancel(inside).unwrap() && q.cancel(inside_at).unwrap());
}

/// Issue 36.4: the deadline a job reports is the instant it was sent with
/// (or nacked or requeued to), to the microsecond: the file keeps
/// nanoseconds, Redis keeps microseconds (an instant between two is kept as
/// the later). Run on a loaded machine — two threads spin beside it — where
/// round trips are slow and uneven: Redis reported deadlines off by up to
/// ±7 ms when each reply's time was mapped by that reply's own round trip.
pub fn the_reported_deadline_is_the_instant_sent_to_the_microsecond(q: impl JobQueue) {
    let spin = Arc::new(AtomicBool::new(true));
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            let spin = spin.clone();
            thread::spawn(move || {
                // Relaxed: a stop flag, ordering nothing else.
                while spin.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let micro = Duration::from_micros(1);
    // Sub-microsecond parts on purpose; the first ones already past.
    let base = SystemTime::now() - ms(30);
    let at = |i: u64| base + Duration::from_nanos(i * 2_345_678 + 321);
    let mut asked: HashMap<JobId, SystemTime> = HashMap::new();
    for i in 0..20u64 {
        asked.insert(q.send_at(&i.to_le_bytes(), at(i)).unwrap(), at(i));
    }
    let batch: Vec<(Vec<u8>, SystemTime)> =
        (20..30).map(|i: u64| (i.to_le_bytes().to_vec(), at(i))).collect();
    let refs: Vec<(&[u8], SystemTime)> = batch.iter().map(|(p, t)| (p.as_slice(), *t)).collect();
    for (id, (_, t)) in q.send_many(&refs).unwrap().into_iter().zip(&batch) {
        asked.insert(id, *t);
    }
    // Errors in ns (reported minus asked), by how each deadline was set.
    let mut errors: Vec<(&str, i128)> = Vec::new();
    let error = |job: &Job, asked: SystemTime| match job.deadline().duration_since(asked) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    };
    let (mut nacked, mut requeued) = (None, None);
    while !asked.is_empty() {
        let job = q.reserve_timeout(LEASE, PATIENCE).unwrap().expect("due within patience");
        let Some(sent) = asked.remove(&job.id()) else { panic!("{:?} was not sent", job.id()) };
        let how = match (nacked, requeued) {
            (Some(id), _) if id == job.id() => "nack",
            (_, Some(id)) if id == job.id() => "requeue_dead",
            _ => "send_at",
        };
        errors.push((how, error(&job, sent)));
        if nacked.is_none() {
            let retry_at = SystemTime::now() + Duration::from_nanos(3_000_777);
            assert!(q.nack(&job, retry_at).unwrap());
            nacked = Some(job.id());
            asked.insert(job.id(), retry_at);
        } else if requeued.is_none() && Some(job.id()) != nacked {
            assert!(q.kill(&job, "for the test").unwrap());
            let dead = q.dead_jobs(10).unwrap();
            errors.push(("dead_jobs", error(&dead[0], sent)));
            let again = SystemTime::now() + Duration::from_nanos(2_000_555);
            assert!(q.requeue_dead(job.id(), again).unwrap());
            requeued = Some(job.id());
            asked.insert(job.id(), again);
        } else {
            assert!(q.ack(&job).unwrap());
        }
    }
    spin.store(false, Ordering::Relaxed);
    for s in spinners {
        s.join().unwrap();
    }
    let off: Vec<_> = errors.iter().filter(|(_, e)| !(0..micro.as_nanos() as i128).contains(e)).collect();
    let (lo, hi) = (errors.iter().map(|e| e.1).min(), errors.iter().map(|e| e.1).max());
    assert!(
        off.is_empty(),
        "{} of {} deadlines are not the instant sent, to the microsecond (reported - sent, ns: \
         from {lo:?} to {hi:?}): {off:?}",
        off.len(),
        errors.len()
    );
    assert_eq!(errors.len(), 30 + 3);
}

/// Many producer and consumer threads: every job acked exactly once, none early.
pub fn threads_lose_nothing_and_deliver_nothing_early(q: impl JobQueue + 'static) {
    let q = Arc::new(q);
    let per = 200u32;
    let acked: Arc<Mutex<HashMap<u32, u32>>> = Arc::default();
    let producers: Vec<_> = (0..4u32)
        .map(|p| {
            let q = q.clone();
            thread::spawn(move || {
                for i in 0..per {
                    let n = p * per + i;
                    let delay = ms(u64::from(n % 7) * 5);
                    // The payload carries the deadline as the producer meant it.
                    let deadline = SystemTime::now() + delay;
                    let mut payload = n.to_le_bytes().to_vec();
                    payload.extend_from_slice(&nanos(deadline).to_le_bytes());
                    q.send_after(&payload, delay).unwrap();
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let (q, acked) = (q.clone(), acked.clone());
            thread::spawn(move || {
                while let Some(job) = q.reserve_timeout(LEASE, ms(1500)).unwrap() {
                    let now = nanos(SystemTime::now());
                    let n = u32::from_le_bytes(job.payload()[..4].try_into().unwrap());
                    let deadline = u64::from_le_bytes(job.payload()[4..].try_into().unwrap());
                    assert!(now >= deadline, "job {n} delivered {} µs early", (deadline - now) / 1000);
                    assert_eq!(job.attempt(), 1);
                    assert!(q.ack(&job).unwrap());
                    *acked.lock().unwrap().entry(n).or_default() += 1;
                }
            })
        })
        .collect();
    for t in producers.into_iter().chain(consumers) {
        t.join().unwrap();
    }
    let acked = acked.lock().unwrap();
    assert_eq!(acked.len(), (4 * per) as usize, "lost jobs");
    assert!(acked.values().all(|&n| n == 1), "a job was acked twice");
    assert_eq!(q.len().unwrap(), 0);
}

// `reserve_or_stop`: a due job is leased; a raised signal ends a blocked
// call (and only the calls waiting on that signal) and leaves jobs alone;
// an already raised one returns at once.
pub fn reserve_or_stop_leases_a_due_job_or_returns_when_its_signal_is_raised(q: impl JobQueue + 'static) {
    let q = Arc::new(q);
    let never = StopSignal::new();
    let id = q.send_after(b"now", ms(0)).unwrap();
    let job = q.reserve_or_stop(LEASE, &never).unwrap().expect("a due job");
    assert_eq!(job.id(), id);
    assert!(q.ack(&job).unwrap());
    let far = q.send_after(b"far", Duration::from_secs(3600)).unwrap();
    let (a, b) = (StopSignal::new(), StopSignal::new());
    let (tx, rx) = std::sync::mpsc::channel();
    let waiters: Vec<_> = [("a", a.clone()), ("b", b.clone())]
        .into_iter()
        .map(|(name, stop)| {
            let (q, tx) = (q.clone(), tx.clone());
            thread::spawn(move || tx.send((name, q.reserve_or_stop(LEASE, &stop).unwrap())).unwrap())
        })
        .collect();
    // Whether a thread is already blocked or not yet in the call when the
    // signal is raised, the answer must be the same: `None`, at once.
    a.raise();
    let (name, got) = rx.recv_timeout(PATIENCE).expect("raising `a` ends its waiter");
    assert_eq!((name, got.map(|j| j.id())), ("a", None));
    // `b` still waits: a job sent now is its.
    let soon = q.send_after(b"soon", ms(0)).unwrap();
    let (name, got) = rx.recv_timeout(PATIENCE).expect("b gets the job");
    let job = got.expect("b was not stopped");
    assert_eq!((name, job.id()), ("b", soon));
    assert!(q.ack(&job).unwrap());
    for t in waiters {
        t.join().unwrap();
    }
    // Raised already: `None` at once, even with a job due; nothing leased.
    let due = q.send_after(b"due", ms(0)).unwrap();
    assert_eq!(q.reserve_or_stop(LEASE, &a).unwrap().map(|j| j.id()), None);
    let s = q.stats().unwrap();
    assert_eq!((s.pending, s.leased), (2, 0));
    assert!(q.cancel(far).unwrap() && q.cancel(due).unwrap());
    for stop in [&never, &a] {
        assert!(matches!(q.reserve_or_stop(Duration::ZERO, stop), Err(DurableError::InvalidArgument(_))));
    }
}

/// What a stream of sends through a disruption came to ([`sends_survive`]).
#[allow(dead_code)] // the Redis tests only
#[derive(Debug)]
pub struct Survived {
    /// Sends that returned `Ok`.
    pub sent: usize,
    /// Sends that returned an error.
    pub failed: usize,
    /// Jobs reserved (and acked) afterwards.
    pub delivered: usize,
}

/// Four threads send for 2.5 s while `disrupt` runs on this thread (it
/// kills and restarts a server, say, and waits until it serves again); then
/// every job is reserved and acked. Each send that returned `Ok` must come
/// back exactly once; a job nobody was told about can only come from a send
/// that failed (a retried send is stored once: retries are deduplicated by
/// nonce). `label` prefixes the first failures printed.
#[allow(dead_code)] // the Redis tests only
pub fn sends_survive(q: &impl JobQueue, label: &str, disrupt: impl FnOnce()) -> Survived {
    let sent = Mutex::new(Vec::new());
    let errors = std::sync::atomic::AtomicUsize::new(0);
    thread::scope(|s| {
        for t in 0..4u32 {
            let (sent, errors) = (&sent, &errors);
            s.spawn(move || {
                let start = std::time::Instant::now();
                let mut i = 0u32;
                while start.elapsed() < Duration::from_millis(2500) {
                    match q.send_after(&(t << 24 | i).to_le_bytes(), ms(0)) {
                        Ok(id) => sent.lock().unwrap().push(id.0),
                        Err(e) => {
                            if errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 3 {
                                eprintln!("{label}: a send failed: {e}");
                            }
                        }
                    }
                    i += 1;
                }
            });
        }
        disrupt();
    });
    let sent = sent.into_inner().unwrap();
    assert!(sent.len() > 100, "too few sends to mean anything: {}", sent.len());
    let mut got: HashMap<u64, u32> = HashMap::new();
    while let Some(job) = q.reserve_timeout(LEASE, Duration::from_secs(2)).unwrap() {
        *got.entry(job.id().0).or_default() += 1;
        assert!(q.ack(&job).unwrap());
    }
    for id in &sent {
        assert_eq!(
            got.get(id),
            Some(&1),
            "job {id}, whose send returned Ok, came back {:?} times",
            got.get(id)
        );
    }
    let failed = errors.into_inner();
    assert!(
        got.len() <= sent.len() + failed,
        "{} jobs for {} Ok sends and {failed} failed ones",
        got.len(),
        sent.len()
    );
    Survived { sent: sent.len(), failed, delivered: got.len() }
}

/// Generates one `#[test]` per conformance case for a backend. `$open` is a
/// `fn(Opts) -> Option<impl JobQueue + 'static>` giving a fresh, empty queue
/// (`None`: the backend is not available here, and the opener said so loudly).
#[macro_export]
macro_rules! conformance_tests {
    ($open:path) => {
        mod conformance_cases {
            use super::conformance::{self, Opts};
            fn open(opts: Opts) -> Option<impl delayq_durable::JobQueue + 'static> {
                $open(opts)
            }
            #[test]
            fn reserve_and_ack_round_trip() {
                if let Some(q) = open(Opts::default()) {
                    conformance::reserve_and_ack_round_trip(q);
                }
            }
            #[test]
            fn never_early_and_in_deadline_order() {
                if let Some(q) = open(Opts::default()) {
                    conformance::never_early_and_in_deadline_order(q);
                }
            }
            #[test]
            fn a_past_deadline_is_due_at_once_and_a_far_one_waits() {
                if let Some(q) = open(Opts::default()) {
                    conformance::a_past_deadline_is_due_at_once_and_a_far_one_waits(q);
                }
            }
            #[test]
            fn an_expired_lease_redelivers_and_the_stale_ack_fails() {
                if let Some(q) = open(Opts::default()) {
                    conformance::an_expired_lease_redelivers_and_the_stale_ack_fails(q);
                }
            }
            #[test]
            fn an_ack_after_the_lease_ends_but_before_redelivery_succeeds() {
                if let Some(q) = open(Opts::default()) {
                    conformance::an_ack_after_the_lease_ends_but_before_redelivery_succeeds(q);
                }
            }
            #[test]
            fn nack_retries_at_the_given_time_as_the_next_attempt() {
                if let Some(q) = open(Opts::default()) {
                    conformance::nack_retries_at_the_given_time_as_the_next_attempt(q);
                }
            }
            #[test]
            fn extend_keeps_the_job_from_redelivery() {
                if let Some(q) = open(Opts::default()) {
                    conformance::extend_keeps_the_job_from_redelivery(q);
                }
            }
            #[test]
            fn failed_deliveries_go_dead_and_can_be_requeued() {
                if let Some(q) = open(Opts { max_attempts: 2, ..Opts::default() }) {
                    conformance::failed_deliveries_go_dead_and_can_be_requeued(q);
                }
            }
            #[test]
            fn cancel_removes_pending_and_leased_jobs() {
                if let Some(q) = open(Opts::default()) {
                    conformance::cancel_removes_pending_and_leased_jobs(q);
                }
            }
            #[test]
            fn batches_send_and_ack_together() {
                if let Some(q) = open(Opts::default()) {
                    conformance::batches_send_and_ack_together(q);
                }
            }
            #[test]
            fn bad_arguments_get_clear_errors_and_store_nothing() {
                if let Some(q) = open(Opts { max_payload: 16, ..Opts::default() }) {
                    conformance::bad_arguments_get_clear_errors_and_store_nothing(q);
                }
            }
            #[test]
            fn the_largest_limits_are_accepted() {
                if let Some(q) = open(Opts { max_attempts: 1, ..Opts::default() }) {
                    conformance::the_largest_limits_are_accepted(q);
                }
            }
            #[test]
            fn both_backends_accept_the_same_deadline_range() {
                if let Some(q) = open(Opts::default()) {
                    conformance::both_backends_accept_the_same_deadline_range(q);
                }
            }
            #[test]
            fn the_reported_deadline_is_the_instant_sent_to_the_microsecond() {
                if let Some(q) = open(Opts::default()) {
                    conformance::the_reported_deadline_is_the_instant_sent_to_the_microsecond(q);
                }
            }
            #[test]
            fn threads_lose_nothing_and_deliver_nothing_early() {
                if let Some(q) = open(Opts::default()) {
                    conformance::threads_lose_nothing_and_deliver_nothing_early(q);
                }
            }
            #[test]
            fn reserve_or_stop_leases_a_due_job_or_returns_when_its_signal_is_raised() {
                if let Some(q) = open(Opts::default()) {
                    conformance::reserve_or_stop_leases_a_due_job_or_returns_when_its_signal_is_raised(q);
                }
            }
            #[test]
            fn kinds_and_last_errors_are_stored_and_checked() {
                if let Some(q) = open(Opts::default()) {
                    conformance::runtime::kinds_and_last_errors_are_stored_and_checked(q);
                }
            }
            #[test]
            fn the_runtime_handles_every_job_once_per_successful_attempt() {
                if let Some(q) = open(Opts::default()) {
                    conformance::runtime::the_runtime_handles_every_job_once_per_successful_attempt(q);
                }
            }
            #[test]
            fn a_panicking_handler_does_not_end_its_thread() {
                if let Some(q) = open(Opts::default()) {
                    conformance::runtime::a_panicking_handler_does_not_end_its_thread(q);
                }
            }
            #[test]
            fn retries_are_spaced_by_the_policy_and_never_early() {
                if let Some(q) = open(Opts::default()) {
                    conformance::runtime::retries_are_spaced_by_the_policy_and_never_early(q);
                }
            }
            #[test]
            fn unknown_kinds_bad_payloads_and_spent_attempts_go_dead_with_a_reason() {
                if let Some(q) = open(Opts::default()) {
                    conformance::runtime::unknown_kinds_bad_payloads_and_spent_attempts_go_dead_with_a_reason(
                        q,
                    );
                }
            }
            #[test]
            fn a_long_handler_keeps_its_lease() {
                if let Some(q) = open(Opts::default()) {
                    conformance::runtime::a_long_handler_keeps_its_lease(q);
                }
            }
            #[test]
            fn shutdown_waits_for_running_handlers_and_loses_nothing() {
                if let Some(q) = open(Opts::default()) {
                    conformance::runtime::shutdown_waits_for_running_handlers_and_loses_nothing(q);
                }
            }
            #[test]
            fn a_handler_past_the_grace_period_is_left_to_its_lease() {
                if let Some(q) = open(Opts::default()) {
                    conformance::runtime::a_handler_past_the_grace_period_is_left_to_its_lease(q);
                }
            }
            #[test]
            fn an_idle_worker_does_not_wake_and_stops_at_once() {
                if let Some(q) = open(Opts::default()) {
                    conformance::runtime::an_idle_worker_does_not_wake_and_stops_at_once(q);
                }
            }
        }
    };
}
