//! Per-kind rate limits on one Redis queue (`set_rate_limit`), global across
//! handles: three workers, each with its own handle, lease at most the
//! bucket's tokens of the limited kind while the other kinds flow; a waiting
//! consumer wakes for the next token (not at a poll interval, with few
//! scripts and little CPU); `reserve_many` takes no more tokens than there
//! are; `reserve_excluding` obeys the limit too; clearing the limit lets the rest out at once; the same on a Redis
//! Cluster. Private servers on free loopback ports.
//! Upper bounds on times are loose (CI is a loaded 2-core machine): the lower
//! bounds are the contract, and "no polling" is counted in scripts run.
#![cfg(feature = "redis")]

mod redis_server;

use std::collections::HashSet;
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use delayq_durable::{DurableError, RedisQueue};
use redis_server::{unique, RedisCluster, RedisServer};

const LEASE: Duration = Duration::from_secs(30);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The server the cases share (each uses its own queue name).
fn shared() -> Option<&'static RedisServer> {
    static SHARED: OnceLock<Option<&'static RedisServer>> = OnceLock::new();
    *SHARED.get_or_init(|| {
        redis_server::available().then(|| redis_server::start_shared(|| RedisServer::start("rl")))
    })
}

fn send(q: &RedisQueue, kind: &str, n: usize) {
    for i in 0..n {
        q.send_kind_after(kind, &i.to_le_bytes(), Duration::ZERO).unwrap();
    }
}

/// One lease: kind, time since the limit was set, id, attempt.
type Lease = (String, Duration, u64, u32);

/// 10 "api" jobs a second, 60 of them due, and 20 "other" jobs: three
/// workers (a handle each) reserve and ack for 3.5 s. The k-th api lease is
/// no sooner than (k - 9) × 100 ms after the limit was set, no more than
/// 10 + 35 (+ 1) go in the window, each once; the other kind is done within
/// the first second; the rest stay pending, unleased, until the limit is
/// cleared, then go at once as their first attempt.
#[test]
fn limit_holds_across_workers() {
    let Some(server) = shared() else { return };
    let url = server.url();
    let name = unique("rl-workers");
    let q = RedisQueue::connect(&url, &name).unwrap();
    send(&q, "api", 60);
    send(&q, "other", 20);
    let set = Instant::now();
    q.set_rate_limit("api", 10, Duration::from_secs(1)).unwrap();
    let window = ms(3500);
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let (url, name) = (url.clone(), name.clone());
            thread::spawn(move || {
                let q = RedisQueue::connect(&url, &name).unwrap();
                let mut leases: Vec<Lease> = Vec::new();
                while let Some(left) = window.checked_sub(set.elapsed()) {
                    let Some(job) = q.reserve_timeout(LEASE, left).unwrap() else { break };
                    leases.push((job.kind().to_string(), set.elapsed(), job.id().0, job.attempt()));
                    assert!(q.ack(&job).unwrap());
                }
                leases
            })
        })
        .collect();
    let mut leases: Vec<Lease> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    leases.sort_by_key(|l| l.1);

    let api: Vec<&Lease> = leases.iter().filter(|l| l.0 == "api").collect();
    for (k, l) in api.iter().enumerate() {
        let earliest = ms(100 * (k as u64).saturating_sub(9));
        assert!(l.1 + ms(5) >= earliest, "api lease {k} at {:?}, before {earliest:?}", l.1);
    }
    let in_window = api.iter().filter(|l| l.1 <= window).count();
    assert!(in_window <= 10 + 35 + 1, "{in_window} api leases in 3.5 s");
    assert!(in_window >= 25, "only {in_window} api leases in 3.5 s (45 tokens)");
    let other: Vec<&Lease> = leases.iter().filter(|l| l.0 == "other").collect();
    assert_eq!(other.len(), 20);
    assert!(other.iter().all(|l| l.1 < Duration::from_secs(3)), "the other kind was held up: {other:?}");

    let ids: HashSet<u64> = api.iter().map(|l| l.2).collect();
    assert_eq!(ids.len(), api.len(), "an api job leased twice");
    assert!(api.iter().all(|l| l.3 == 1));
    let stats = q.stats().unwrap();
    assert_eq!((stats.pending, stats.leased), (60 - api.len() as u64, 0));
    println!(
        "{} api leases in 3.5 s (last at {:?}), other done by {:?}",
        api.len(),
        api.last().map(|l| l.1),
        other.last().map(|l| l.1)
    );

    // Cleared: the rest go at once, as their first attempt.
    assert!(q.clear_rate_limit("api").unwrap());
    assert!(!q.clear_rate_limit("api").unwrap());
    let rest = q.reserve_many(LEASE, 100, Duration::ZERO).unwrap();
    assert_eq!(rest.len(), 60 - api.len());
    assert!(rest.iter().all(|j| j.attempt() == 1 && j.kind() == "api" && !ids.contains(&j.id().0)));
}

/// `reserve_many` takes as many jobs of a limited kind as there are tokens,
/// no more, and fills the rest with other kinds.
#[test]
fn reserve_many_takes_only_the_tokens_there_are() {
    let Some(server) = shared() else { return };
    let q = RedisQueue::connect(&server.url(), &unique("rl-many")).unwrap();
    q.set_rate_limit("api", 3, Duration::from_secs(60)).unwrap();
    send(&q, "api", 10);
    send(&q, "other", 2);
    let jobs = q.reserve_many(LEASE, 100, Duration::ZERO).unwrap();
    let api = jobs.iter().filter(|j| j.kind() == "api").count();
    assert_eq!((api, jobs.len()), (3, 5));
    assert!(q.reserve_many(LEASE, 100, Duration::ZERO).unwrap().is_empty());
    // Priorities share the kind's bucket.
    let q2 = RedisQueue::connect(&server.url(), &unique("rl-prio")).unwrap();
    q2.set_rate_limit("api", 2, Duration::from_secs(60)).unwrap();
    for prio in [0, 5, 9] {
        let opts = delayq_durable::SendOptions::new().kind("api").priority(prio);
        q2.send_with(b"", std::time::SystemTime::now(), &opts).unwrap();
    }
    assert_eq!(q2.reserve_many(LEASE, 100, Duration::ZERO).unwrap().len(), 2);
    let stats = q2.stats().unwrap();
    assert_eq!((stats.pending, stats.leased), (1, 2));
}

/// `reserve_excluding` (what a `Worker` with per-kind limits calls) obeys
/// the queue's limit too: with the only kind it may take out of tokens, it
/// waits for the next token rather than take an excluded kind.
#[test]
fn excluding_and_limited_together() {
    let Some(server) = shared() else { return };
    let q = RedisQueue::connect(&server.url(), &unique("rl-excl")).unwrap();
    q.set_rate_limit("api", 1, ms(300)).unwrap();
    send(&q, "api", 2);
    send(&q, "other", 1);
    let (exclude, stop) = (["other".to_string()], delayq_durable::StopSignal::new());
    let before = Instant::now();
    let first = q.reserve_excluding(LEASE, &exclude, &stop).unwrap().unwrap();
    let second = q.reserve_excluding(LEASE, &exclude, &stop).unwrap().unwrap();
    let after = before.elapsed();
    assert_eq!((first.kind(), second.kind()), ("api", "api"));
    assert!(after >= ms(295) && after <= ms(1500), "the second api job after {after:?}");
    assert_eq!(q.stats().unwrap().pending, 1);
}

/// The scripts the server ran (`EVAL` and `EVALSHA` calls).
fn scripts_run(url: &str) -> u64 {
    let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
    let info: String = redis::cmd("INFO").arg("commandstats").query(&mut con).unwrap();
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| l.split("calls=").nth(1)?.split(',').next()?.parse::<u64>().ok())
        .sum()
}

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(r, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A consumer with only rate-limited jobs due sleeps until the next token
/// and gets the job within 150 ms of it: two scripts or so, not a poll, and
/// almost no CPU while it waits. (A private server: its script count is
/// this test's own.)
#[test]
fn waiting_consumer_wakes_for_the_next_token() {
    if !redis_server::available() {
        return;
    }
    let server = RedisServer::start("rl-wake");
    let q = RedisQueue::connect(&server.url(), &unique("rl-wake")).unwrap();
    q.set_rate_limit("api", 2, Duration::from_secs(1)).unwrap(); // a token every 500 ms
    send(&q, "api", 3);
    let before = Instant::now();
    assert_eq!(q.reserve_many(LEASE, 10, Duration::ZERO).unwrap().len(), 2);
    let taken = Instant::now();
    let (scripts, cpu) = (scripts_run(&server.url()), thread_cpu());
    let job = q.reserve_timeout(LEASE, Duration::from_secs(3)).unwrap().expect("the third job");
    let got = Instant::now();
    let (scripts, cpu) = (scripts_run(&server.url()) - scripts, thread_cpu() - cpu);
    assert_eq!(job.attempt(), 1);
    let after = got - before;
    assert!(after >= ms(495), "leased {after:?} after the tokens were taken: before the next token");
    assert!(got - taken <= ms(2000), "leased {:?} after the tokens were taken: late", got - taken);
    assert!(scripts <= 4, "{scripts} scripts while waiting 500 ms");
    assert!(cpu < ms(200), "{cpu:?} CPU while waiting 500 ms");
    println!("woke {:?} after the tokens were taken, {scripts} scripts, {cpu:?} CPU", got - taken);
}

/// Clearing a limit wakes a consumer waiting for its kind at once; the rest
/// of its jobs follow.
#[test]
fn clearing_lets_the_rest_out_at_once() {
    let Some(server) = shared() else { return };
    let url = server.url();
    let name = unique("rl-clear");
    let q = RedisQueue::connect(&url, &name).unwrap();
    q.set_rate_limit("api", 1, Duration::from_secs(60)).unwrap();
    send(&q, "api", 4);
    assert!(q.reserve_timeout(LEASE, Duration::ZERO).unwrap().is_some());
    assert!(q.reserve_timeout(LEASE, ms(200)).unwrap().is_none());
    let waiter = thread::spawn(move || {
        let q = RedisQueue::connect(&url, &name).unwrap();
        let job = q.reserve_timeout(LEASE, Duration::from_secs(5)).unwrap();
        (job, Instant::now())
    });
    thread::sleep(ms(300));
    let cleared = Instant::now();
    assert!(q.clear_rate_limit("api").unwrap());
    let (job, at) = waiter.join().unwrap();
    assert!(job.is_some());
    assert!(at - cleared < ms(1000), "woke {:?} after the clear", at - cleared);
    assert_eq!(q.reserve_many(LEASE, 10, Duration::ZERO).unwrap().len(), 2);
    assert!(q.rate_limits().unwrap().is_empty());
}

/// Bad arguments store nothing; a good one is listed, and replaced.
#[test]
fn bad_arguments_are_refused() {
    let Some(server) = shared() else { return };
    let q = RedisQueue::connect(&server.url(), &unique("rl-args")).unwrap();
    let bad =
        |r: Result<(), DurableError>| assert!(matches!(r, Err(DurableError::InvalidArgument(_))), "{r:?}");
    bad(q.set_rate_limit("api", 0, Duration::from_secs(1)));
    bad(q.set_rate_limit("api", 1, Duration::from_micros(999)));
    bad(q.set_rate_limit("api", 1, Duration::from_micros((1 << 52) + 1)));
    bad(q.set_rate_limit("a\nb", 1, Duration::from_secs(1)));
    bad(q.set_rate_limit(&"k".repeat(256), 1, Duration::from_secs(1)));
    assert!(matches!(q.clear_rate_limit("a\nb"), Err(DurableError::InvalidArgument(_))));
    assert!(q.rate_limits().unwrap().is_empty());
    q.set_rate_limit("api", 1, Duration::from_millis(1)).unwrap();
    q.set_rate_limit("x", u32::MAX, Duration::from_micros(1 << 52)).unwrap();
    q.set_rate_limit("api", 7, Duration::from_secs(2)).unwrap();
    assert_eq!(
        q.rate_limits().unwrap(),
        vec![
            ("api".to_string(), 7, Duration::from_secs(2)),
            ("x".to_string(), u32::MAX, Duration::from_micros(1 << 52)),
        ]
    );
}

/// The same on a Redis Cluster: the limit, its bucket and the jobs share
/// the queue's slot.
#[test]
fn cluster_limit() {
    if !redis_server::available() {
        return;
    }
    let cluster = RedisCluster::start("rl");
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let q = RedisQueue::builder()
        .retry_for(Duration::from_secs(20))
        .connect_cluster(&urls, &unique("rl-cl"))
        .unwrap();
    let q2 = RedisQueue::connect_cluster(&urls, q.name()).unwrap();
    q.set_rate_limit("api", 5, Duration::from_secs(1)).unwrap(); // a token every 200 ms
    assert_eq!(q2.rate_limits().unwrap(), vec![("api".to_string(), 5, Duration::from_secs(1))]);
    send(&q, "api", 8);
    send(&q, "other", 2);
    let before = Instant::now();
    let jobs = q.reserve_many(LEASE, 100, Duration::ZERO).unwrap();
    assert_eq!((jobs.iter().filter(|j| j.kind() == "api").count(), jobs.len()), (5, 7));
    let job = q2.reserve_timeout(LEASE, Duration::from_secs(2)).unwrap().expect("the next token's job");
    let after = before.elapsed();
    assert!(after >= ms(195) && after <= ms(1500), "the next api job after {after:?}");
    assert_eq!(job.kind(), "api");
    assert!(q2.clear_rate_limit("api").unwrap());
    assert_eq!(q.reserve_many(LEASE, 100, Duration::ZERO).unwrap().len(), 2);
}
