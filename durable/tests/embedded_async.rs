//! The embedded queue's async client (`AsyncDurableQueue`, feature `async`):
//! the conformance suite through `futures::executor::block_on` (no runtime),
//! then what only an async client has — reserve futures dropped at every
//! point (nothing lost, nothing leased to nobody, the attempt number right),
//! no wake-ups while idle, many consumers as tasks of one thread, wakers
//! that panic when woken.

mod async_adapter;
mod conformance;

use std::path::PathBuf;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::thread;
use std::time::{Duration, Instant};

use async_adapter::{poll_once, poll_once_and_drop, BlockOn, CountingWaker, Futures, PanickingWaker};
use conformance::{ms, Opts, PATIENCE};
use delayq_durable::{AsyncDurableQueue, AsyncJobQueue, DurableQueue, StopSignal};
use futures::executor::block_on;

/// A directory removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory.
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "delayq-durable-async-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
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

fn open_async(opts: Opts) -> Option<BlockOn<AsyncDurableQueue, Futures>> {
    let dir = TempDir::new("conf");
    let queue = DurableQueue::builder()
        .max_attempts(opts.max_attempts)
        .max_payload(opts.max_payload)
        .open(dir.0.join("q.redb"))
        .unwrap();
    Some(BlockOn { q: AsyncDurableQueue::from(queue), exec: Arc::new(Futures), _keep: Box::new(dir) })
}

conformance_tests!(super::open_async);
send_with_tests!(super::open_async);

/// A fresh async queue and its directory.
fn fresh() -> (AsyncDurableQueue, TempDir) {
    let dir = TempDir::new("own");
    (AsyncDurableQueue::open(dir.0.join("q.redb")).unwrap(), dir)
}

const LEASE: Duration = Duration::from_secs(60);

fn counting() -> (Arc<CountingWaker>, Waker) {
    let c = Arc::new(CountingWaker::default());
    (c.clone(), Waker::from(c))
}

/// Waits (blocking) for the one job and checks it is `attempt`, and that it
/// came back long before a lease would have ended.
fn redelivered(q: &AsyncDurableQueue, attempt: u32) {
    let started = Instant::now();
    let job = q.blocking().reserve_timeout(LEASE, PATIENCE).unwrap().expect("the job is delivered again");
    assert_eq!(job.attempt(), attempt);
    assert!(started.elapsed() < PATIENCE);
    assert!(q.blocking().ack(&job).unwrap());
    assert_eq!(q.blocking().len().unwrap(), 0);
}

#[test]
fn a_reserve_polled_once_and_dropped_before_the_job_is_due_takes_nothing() {
    let (q, _dir) = fresh();
    block_on(q.send_after(b"later", ms(150))).unwrap();
    let (_, waker) = counting();
    assert!(poll_once_and_drop(q.reserve(LEASE), &waker).is_none());
    assert!(poll_once_and_drop(q.reserve_timeout(LEASE, PATIENCE), &waker).is_none());
    assert!(poll_once_and_drop(q.reserve_many(LEASE, 4, PATIENCE), &waker).is_none());
    let stop = StopSignal::new();
    assert!(poll_once_and_drop(q.reserve_or_stop(LEASE, &stop), &waker).is_none());
    redelivered(&q, 1);
}

#[test]
fn a_reserve_woken_for_a_due_job_and_dropped_unpolled_passes_the_job_on() {
    let (q, _dir) = fresh();
    block_on(q.send_after(b"soon", ms(50))).unwrap();
    let (woken, waker) = counting();
    {
        let mut f = pin!(q.reserve(LEASE));
        assert!(poll_once(f.as_mut(), &waker).is_none());
        let until = Instant::now() + PATIENCE;
        while woken.0.load(Ordering::SeqCst) == 0 && Instant::now() < until {
            thread::sleep(ms(5));
        }
        assert!(woken.0.load(Ordering::SeqCst) > 0, "the due job woke the task");
        // Dropped here, never polled again.
    }
    redelivered(&q, 1);
}

#[test]
fn a_reserve_dropped_while_its_lease_commits_gives_the_job_back_as_the_same_attempt() {
    let (q, _dir) = fresh();
    let (_, waker) = counting();
    // Drop at every distance from the lease's commit: before the writer took
    // it (the lease is skipped), during it, after it (given back).
    for round in 0..40u64 {
        block_on(q.send_after(b"due", ms(0))).unwrap();
        thread::sleep(ms(10)); // due: the first poll takes its timer and posts the lease
        {
            let mut f = pin!(q.reserve(LEASE));
            if let Some(job) = poll_once(f.as_mut(), &waker) {
                // Completed at once: the caller holds it; give it back the normal way.
                let job = job.unwrap();
                assert!(block_on(q.nack(&job, std::time::SystemTime::now())).unwrap());
                let job = q.blocking().reserve_timeout(LEASE, PATIENCE).unwrap().unwrap();
                assert_eq!(job.attempt(), 2);
                assert!(q.blocking().ack(&job).unwrap());
                continue;
            }
            thread::sleep(Duration::from_micros(round * 150));
        }
        redelivered(&q, 1);
    }
}

#[test]
fn reserve_many_and_reserve_timeout_dropped_mid_lease_lose_nothing() {
    let (q, _dir) = fresh();
    let (_, waker) = counting();
    for delay_us in [0u64, 300, 3000, 30_000] {
        for _ in 0..3 {
            block_on(q.send_after(b"due", ms(0))).unwrap();
        }
        thread::sleep(ms(20));
        {
            let mut f = pin!(q.reserve_many(LEASE, 10, PATIENCE));
            assert!(poll_once(f.as_mut(), &waker).is_none(), "leases wait for their commit");
            thread::sleep(Duration::from_micros(delay_us));
        }
        {
            let mut f = pin!(q.reserve_timeout(LEASE, PATIENCE));
            let _ = poll_once(f.as_mut(), &waker);
        }
        let jobs = q.blocking().reserve_many(LEASE, 10, PATIENCE).unwrap();
        let mut got = jobs.len();
        assert!(jobs.iter().all(|j| j.attempt() == 1), "delivered again as the same attempt");
        q.blocking().ack_many(&jobs).unwrap();
        while got < 3 {
            let job = q.blocking().reserve_timeout(LEASE, PATIENCE).unwrap().expect("nothing lost");
            assert_eq!(job.attempt(), 1);
            q.blocking().ack(&job).unwrap();
            got += 1;
        }
        assert_eq!(q.blocking().len().unwrap(), 0);
    }
}

#[test]
fn a_lease_given_to_a_caller_that_completed_counts_as_an_attempt() {
    // The contrast: a reserve that completed is a delivery; its lease ends
    // and the job comes back as the next attempt.
    let (q, _dir) = fresh();
    block_on(q.send_after(b"x", ms(0))).unwrap();
    let job = block_on(q.reserve(ms(100))).unwrap();
    assert_eq!(job.attempt(), 1);
    let again = block_on(q.reserve_timeout(LEASE, PATIENCE)).unwrap().unwrap();
    assert_eq!(again.attempt(), 2);
    assert!(!block_on(q.ack(&job)).unwrap(), "the stale lease");
    assert!(block_on(q.ack(&again)).unwrap());
}

#[test]
fn an_idle_reserve_is_not_woken() {
    let (q, _dir) = fresh();
    block_on(q.send_after(b"in an hour", Duration::from_secs(3600))).unwrap();
    let (woken, waker) = counting();
    let stop = StopSignal::new();
    let mut a = pin!(q.reserve(LEASE));
    let mut b = pin!(q.reserve_or_stop(LEASE, &stop));
    let mut c = pin!(q.reserve_timeout(LEASE, Duration::from_secs(3600)));
    assert!(poll_once(a.as_mut(), &waker).is_none());
    assert!(poll_once(b.as_mut(), &waker).is_none());
    assert!(poll_once(c.as_mut(), &waker).is_none());
    thread::sleep(ms(500));
    assert_eq!(woken.0.load(Ordering::SeqCst), 0, "no periodic wake-up");
    stop.raise();
    assert!(woken.0.load(Ordering::SeqCst) >= 1, "the stop signal wakes its reserve");
    assert_eq!(poll_once(b.as_mut(), &waker).map(Result::unwrap), Some(None));
}

#[test]
fn reserve_timeout_times_out_on_any_executor_without_a_runtime() {
    let (q, _dir) = fresh();
    let started = Instant::now();
    assert_eq!(block_on(q.reserve_timeout(LEASE, ms(80))).unwrap(), None);
    let took = started.elapsed();
    assert!(took >= ms(80) && took < ms(80) + PATIENCE, "{took:?}");
    // Many timeouts at once, different deadlines, on one thread: each ends at its own.
    let futs = (1..=8u64).map(|n| {
        let q = &q;
        async move {
            let t = Instant::now();
            let r = q.reserve_timeout(LEASE, ms(20 * n)).await.unwrap();
            (n, r.is_none(), t.elapsed())
        }
    });
    for (n, none, took) in block_on(futures::future::join_all(futs)) {
        assert!(none);
        assert!(took >= ms(20 * n), "timeout {n} ended early: {took:?}");
    }
}

#[test]
fn many_consumer_tasks_on_one_thread_share_the_jobs() {
    let (q, _dir) = fresh();
    let n = 200u32;
    for i in 0..n {
        block_on(q.send_after(&i.to_le_bytes(), ms(u64::from(i % 20)))).unwrap();
    }
    let stop = StopSignal::new();
    let seen = std::sync::Mutex::new(Vec::new());
    let consumer = || async {
        while let Some(job) = q.reserve_or_stop(LEASE, &stop).await.unwrap() {
            assert!(q.ack(&job).await.unwrap());
            let mut s = seen.lock().unwrap();
            s.push(u32::from_le_bytes(job.payload().try_into().unwrap()));
            if s.len() == n as usize {
                stop.raise();
            }
        }
    };
    block_on(futures::future::join_all((0..8).map(|_| consumer())));
    let mut s = seen.into_inner().unwrap();
    s.sort_unstable();
    assert_eq!(s, (0..n).collect::<Vec<_>>(), "each job once");
}

#[test]
fn close_ends_waiting_reserves_with_closed() {
    let (q, _dir) = fresh();
    let q2 = q.clone();
    let t = thread::spawn(move || {
        thread::sleep(ms(50));
        q2.close();
    });
    assert!(matches!(block_on(q.reserve(LEASE)), Err(delayq_durable::DurableError::Closed)));
    t.join().unwrap();
}

/// Waits (bounded by `PATIENCE`) until `done` holds; panics naming `what`.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < until, "{what}");
        thread::sleep(ms(1));
    }
}

#[test]
fn a_panicking_waker_cuts_no_commit_short_the_writer_answers_the_rest_of_the_batch() {
    // The writer thread answers a batch's ops in turn, waking each caller's
    // task. A waker that panics there must not cut the other answers short.
    // (Before wakes were contained, the acks after it were answered with an
    // error, though they had been committed.)
    let (q, _dir) = fresh();
    let boom = PanickingWaker::armed();
    let boom_waker = Waker::from(boom.clone());
    let mut exercised = false;
    for _ in 0..20 {
        let now = std::time::SystemTime::now();
        block_on(q.send_many(&[(&b"a"[..], now), (&b"b"[..], now)])).unwrap();
        let mut jobs = Vec::new();
        while jobs.len() < 2 {
            jobs.extend(block_on(q.reserve_many(LEASE, 2 - jobs.len(), PATIENCE)).unwrap());
        }
        let before = boom.woken();
        let mut f = pin!(q.ack_many(&jobs));
        // One post, so one batch: the writer answers the first ack by waking
        // this task, then the second.
        let acked = match poll_once(f.as_mut(), &boom_waker) {
            // Answered before this poll could register: no wake to test.
            Some(acked) => acked,
            None => {
                exercised = true;
                wait_until("the writer answered the first ack", || boom.woken() > before);
                block_on(f.as_mut())
            }
        };
        assert_eq!(acked.expect("every ack of the batch is answered Ok"), [true, true]);
        assert_eq!(q.blocking().len().unwrap(), 0);
        if exercised {
            break;
        }
    }
    assert!(exercised, "no ack_many waited for its commit");
    // The writer goes on.
    block_on(q.send_after(b"after", ms(0))).unwrap();
    let job = block_on(q.reserve_timeout(LEASE, PATIENCE)).unwrap().expect("the writer still commits");
    assert!(block_on(q.ack(&job)).unwrap());
}

#[test]
fn a_panicking_waker_does_not_stop_a_raise_from_waking_the_other_reserves() {
    // `raise` wakes every task waiting on the signal, on the raiser's thread:
    // the first task's waker panics, the next is still woken and the raise
    // returns. (Before wakes were contained, the panic went up into `raise`
    // and the reserve registered after it was never woken.)
    let (q, _dir) = fresh();
    let stop = StopSignal::new();
    let boom = PanickingWaker::armed();
    let boom_waker = Waker::from(boom.clone());
    let (woken, waker) = counting();
    let mut a = pin!(q.reserve_or_stop(LEASE, &stop));
    let mut b = pin!(q.reserve_or_stop(LEASE, &stop));
    assert!(poll_once(a.as_mut(), &boom_waker).is_none());
    assert!(poll_once(b.as_mut(), &waker).is_none());
    stop.raise();
    assert_eq!(boom.woken(), 1, "the first task was woken");
    assert!(woken.0.load(Ordering::SeqCst) >= 1, "the task after it was woken too");
    assert_eq!(poll_once(b.as_mut(), &waker).map(Result::unwrap), Some(None));
    assert_eq!(poll_once(a.as_mut(), &waker).map(Result::unwrap), Some(None));
}

#[test]
fn a_deadline_rung_for_a_task_whose_waker_panics_does_not_panic_the_task_that_rang_it() {
    // Whichever `reserve_timeout` receives a due deadline rings it, waking its
    // owner's task. Here the owner's waker panics and another task rings it:
    // that task's poll must go on, not unwind. (Before wakes were contained,
    // the panic came out of the other task's poll.)
    let (q, _dir) = fresh();
    let boom = PanickingWaker::armed();
    let boom_waker = Waker::from(boom.clone());
    let (woken, waker) = counting();
    let mut a = Box::pin(q.reserve_timeout(LEASE, ms(20)));
    let mut b = pin!(q.reserve_timeout(LEASE, PATIENCE));
    assert!(poll_once(a.as_mut(), &boom_waker).is_none());
    assert!(poll_once(b.as_mut(), &waker).is_none());
    // A's deadline falls due; the deadline queue wakes A's task (the oldest
    // waiting), whose waker panics (contained by the core queue).
    wait_until("A's deadline fell due", || boom.woken() >= 1);
    // B's poll receives A's alarm and rings it: A's waker panics again.
    assert!(poll_once(b.as_mut(), &waker).is_none(), "B's own deadline is far");
    assert_eq!(boom.woken(), 2, "B rang A's alarm");
    assert_eq!(poll_once(a.as_mut(), &waker).map(Result::unwrap), Some(None), "A timed out");
    drop(a);
    // B still waits as it should: a job due now wakes it and is its.
    let before = woken.0.load(Ordering::SeqCst);
    block_on(q.send_after(b"for b", ms(0))).unwrap();
    wait_until("the due job woke B", || woken.0.load(Ordering::SeqCst) > before);
    let job = block_on(b.as_mut()).unwrap().expect("B took the job, not a timeout");
    assert_eq!(job.payload(), b"for b");
    assert!(block_on(q.ack(&job)).unwrap());
}
