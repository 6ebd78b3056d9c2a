//! The Redis backend's async client (`AsyncRedisQueue`, feature
//! `redis-async`) against a private `redis-server`: the conformance suite
//! through a tokio runtime's `block_on`, then reserve futures dropped at
//! every point (nothing lost; a lease the server took for a dropped future
//! comes back at its end as the next attempt), no wake-ups while idle, a
//! waker that panics when the watcher thread wakes it.
#![cfg(feature = "redis-async")]

mod async_adapter;
mod conformance;
mod redis_server;

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::task::{Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use async_adapter::{poll_once, BlockOn, CountingWaker, PanickingWaker, Tokio};
use conformance::{ms, Opts, PATIENCE};
use delayq_durable::{AsyncJobQueue, AsyncRedisQueue, DurableError, RedisQueue, StopSignal};
use redis_server::{unique, RedisServer};

/// The server the cases share (each case uses its own queue name).
fn shared() -> Option<&'static RedisServer> {
    static SHARED: OnceLock<Option<&'static RedisServer>> = OnceLock::new();
    *SHARED.get_or_init(|| {
        redis_server::available().then(|| redis_server::start_shared(|| RedisServer::start("async")))
    })
}

fn open_async(opts: Opts) -> Option<BlockOn<AsyncRedisQueue, Tokio>> {
    let server = shared()?;
    let queue = RedisQueue::builder()
        .max_attempts(opts.max_attempts)
        .max_payload(opts.max_payload)
        .connect(&server.url(), &unique("aconf"))
        .unwrap();
    Some(BlockOn {
        q: AsyncRedisQueue::new(queue).unwrap(),
        exec: Arc::new(Tokio::new()),
        _keep: Box::new(()),
    })
}

conformance_tests!(super::open_async);
send_with_tests!(super::open_async);

fn fresh() -> Option<(AsyncRedisQueue, Tokio)> {
    let server = shared()?;
    Some((AsyncRedisQueue::connect(&server.url(), &unique("own")).unwrap(), Tokio::new()))
}

fn counting() -> (Arc<CountingWaker>, Waker) {
    let c = Arc::new(CountingWaker::default());
    (c.clone(), Waker::from(c))
}

const LEASE: Duration = Duration::from_secs(60);

#[test]
fn a_reserve_polled_once_and_dropped_before_the_job_is_due_takes_nothing() {
    let Some((q, rt)) = fresh() else { return };
    rt.0.block_on(q.send_after(b"later", ms(300))).unwrap();
    rt.0.block_on(async {
        let stop = StopSignal::new();
        let mut a = pin!(q.reserve(LEASE));
        let mut b = pin!(q.reserve_timeout(LEASE, PATIENCE));
        let mut c = pin!(q.reserve_or_stop(LEASE, &stop));
        // Let each run its script (nothing is due yet) and suspend.
        for _ in 0..20 {
            poll_fn(|cx| {
                assert!(a.as_mut().poll(cx).is_pending());
                assert!(b.as_mut().poll(cx).is_pending());
                assert!(c.as_mut().poll(cx).is_pending());
                Poll::Ready(())
            })
            .await;
            tokio::time::sleep(ms(5)).await;
        }
    });
    let job = rt.0.block_on(q.reserve_timeout(LEASE, PATIENCE)).unwrap().expect("delivered");
    assert_eq!(job.attempt(), 1);
    assert!(rt.0.block_on(q.ack(&job)).unwrap());
}

#[test]
fn a_reserve_dropped_in_flight_loses_nothing_and_a_lease_it_took_comes_back_as_the_next_attempt() {
    let Some((q, rt)) = fresh() else { return };
    let lease = ms(400);
    let mut seen_taken = 0;
    for round in 0..12u64 {
        rt.0.block_on(q.send_after(b"due", ms(0))).unwrap();
        rt.0.block_on(async {
            let mut f = pin!(q.reserve(lease));
            let mut done = None;
            poll_fn(|cx| {
                if let Poll::Ready(r) = f.as_mut().poll(cx) {
                    done = Some(r);
                }
                Poll::Ready(())
            })
            .await;
            if done.is_none() {
                tokio::time::sleep(Duration::from_micros(round * 100)).await;
            }
            if let Some(job) = done {
                // Completed: it was delivered; acking settles it.
                assert!(q.ack(&job.unwrap()).await.unwrap());
            }
        });
        // Whatever the script did for the dropped future is done by now.
        thread::sleep(ms(50));
        let stats = rt.0.block_on(q.stats()).unwrap();
        if stats.pending + stats.leased == 0 {
            continue; // it completed and was acked above
        }
        let taken = stats.leased == 1;
        seen_taken += usize::from(taken);
        let started = Instant::now();
        let job = rt.0.block_on(q.reserve_timeout(LEASE, PATIENCE)).unwrap().expect("nothing lost");
        if taken {
            assert_eq!(job.attempt(), 2, "a lease taken for nobody ends, then the next attempt");
            assert!(started.elapsed() >= lease - ms(100));
        } else {
            assert_eq!(job.attempt(), 1);
        }
        assert!(rt.0.block_on(q.ack(&job)).unwrap());
    }
    eprintln!("leases taken for dropped futures: {seen_taken} of 12");
}

#[test]
fn an_idle_reserve_is_not_woken() {
    let Some((q, rt)) = fresh() else { return };
    rt.0.block_on(q.send_after(b"in an hour", Duration::from_secs(3600))).unwrap();
    let (woken, waker) = counting();
    let stop = StopSignal::new();
    let _guard = rt.0.enter();
    let mut f = pin!(q.reserve_or_stop(LEASE, &stop));
    // Drive it until its script has answered and it sleeps on the notifier.
    let until = Instant::now() + PATIENCE;
    let mut before = 0;
    while Instant::now() < until {
        assert!(poll_once(f.as_mut(), &waker).is_none());
        thread::sleep(ms(100));
        let now = woken.0.load(Ordering::SeqCst);
        if now == before {
            break;
        }
        before = now;
    }
    thread::sleep(ms(500));
    assert_eq!(woken.0.load(Ordering::SeqCst), before, "no wake-up while idle");
    stop.raise();
    assert!(woken.0.load(Ordering::SeqCst) > before, "the stop signal wakes it");
    assert_eq!(poll_once(f.as_mut(), &waker).map(Result::unwrap), Some(None));
}

#[test]
fn a_send_from_elsewhere_wakes_a_waiting_async_reserve() {
    let Some((q, rt)) = fresh() else { return };
    let other = q.blocking().clone();
    let t = thread::spawn(move || {
        thread::sleep(ms(100));
        other.send_after(b"now", ms(0)).unwrap();
    });
    let started = Instant::now();
    let job = rt.0.block_on(q.reserve(LEASE)).unwrap();
    assert_eq!(job.payload(), b"now");
    assert!(started.elapsed() < Duration::from_secs(3), "woken by the announcement, not a poll");
    t.join().unwrap();
}

#[test]
fn close_ends_waiting_async_reserves() {
    let Some((q, rt)) = fresh() else { return };
    let q2 = q.clone();
    let t = thread::spawn(move || {
        thread::sleep(ms(50));
        q2.close();
    });
    assert!(matches!(rt.0.block_on(q.reserve(LEASE)), Err(DurableError::Closed)));
    t.join().unwrap();
}

#[test]
fn a_panicking_waker_kills_no_watcher_thread_and_the_tasks_after_it_are_woken() {
    // The handle's watcher thread wakes its waiting tasks when a send is
    // announced. The first task's waker panics: the next is still woken, and
    // the watcher lives on to announce later sends. (Before wakes were
    // contained, the watcher thread died on it: the next task was never woken,
    // nor any task of the handle by a send again.)
    let Some((q, rt)) = fresh() else { return };
    // Armed once both tasks sleep on the notifier: before, the scripts'
    // replies wake it too (on the runtime's threads).
    let boom = Arc::new(PanickingWaker::default());
    let boom_waker = Waker::from(boom.clone());
    let (woken, waker) = counting();
    {
        let _guard = rt.0.enter();
        let mut a = pin!(q.reserve(LEASE));
        let mut b = pin!(q.reserve(LEASE));
        // Drive both until their scripts have answered (nothing is pending)
        // and they sleep on the notifier, A registered before B.
        let until = Instant::now() + PATIENCE;
        let mut before = (0, 0);
        loop {
            assert!(Instant::now() < until, "the reserves never settled");
            assert!(poll_once(a.as_mut(), &boom_waker).is_none());
            assert!(poll_once(b.as_mut(), &waker).is_none());
            thread::sleep(ms(100));
            let now = (boom.woken(), woken.0.load(Ordering::SeqCst));
            if now == before {
                break;
            }
            before = now;
        }
        boom.armed.store(true, Ordering::SeqCst);
        q.blocking().send_after(b"now", ms(0)).unwrap();
        let until = Instant::now() + PATIENCE;
        while woken.0.load(Ordering::SeqCst) == before.1 {
            assert!(Instant::now() < until, "the task after the panicking one was not woken");
            thread::sleep(ms(1));
        }
        assert!(boom.woken() > before.0, "the panicking task was woken first");
        let job = loop {
            assert!(Instant::now() < until, "B did not take the job");
            if let Some(job) = poll_once(b.as_mut(), &waker) {
                break job.unwrap();
            }
            thread::sleep(ms(5));
        };
        assert_eq!(job.payload(), b"now");
        assert!(q.blocking().ack(&job).unwrap());
    }
    // The watcher lives on: a send from another thread wakes a reserve that
    // knows of no due time.
    let other = q.blocking().clone();
    let t = thread::spawn(move || {
        thread::sleep(ms(100));
        other.send_after(b"later", ms(0)).unwrap();
    });
    let started = Instant::now();
    let job = rt.0.block_on(q.reserve_timeout(LEASE, PATIENCE)).unwrap().expect("woken by the announcement");
    assert_eq!(job.payload(), b"later");
    assert!(started.elapsed() < Duration::from_secs(3), "woken by the announcement, not a poll");
    assert!(rt.0.block_on(q.ack(&job)).unwrap());
    t.join().unwrap();
}

/// `send_with` on the async client: priority and uniqueness as on the
/// blocking one (the same script).
#[test]
fn async_send_with_stores_priorities_and_keeps_keys_unique() {
    use delayq_durable::{SendOptions, Sent, Unique};
    let Some((q, rt)) = fresh() else { return };
    let now = std::time::SystemTime::now();
    let u = SendOptions::new().kind("k").priority(4).unique(Unique::new("key"));
    let a = rt.0.block_on(q.send_with(b"a", now, &u)).unwrap();
    assert!(a.created());
    assert_eq!(rt.0.block_on(q.send_with(b"b", now, &u)).unwrap(), Sent::Existing(a.id()));
    let urgent = rt.0.block_on(q.send_with(b"c", now, &SendOptions::new().priority(0))).unwrap().id();
    let first = rt.0.block_on(q.reserve(ms(30_000))).unwrap();
    assert_eq!((first.id(), first.priority()), (urgent, 0));
    let second = rt.0.block_on(q.reserve(ms(30_000))).unwrap();
    assert_eq!((second.id(), second.priority(), second.kind()), (a.id(), 4, "k"));
    let bad = rt.0.block_on(q.send_with(b"x", now, &SendOptions::new().priority(10)));
    assert!(matches!(bad, Err(DurableError::InvalidArgument(_))));
    assert_eq!(rt.0.block_on(q.stats()).unwrap().pending, 0);
}
