//! `delayq-durable`'s metrics on the Redis backend (label `queue`: the
//! queue's name), against a private `redis-server` (on a free loopback port,
//! started and stopped here; skipped loudly without one, a failure when `CI`
//! is set): a known sequence of sends, leases, acks, a nack, an expired lease
//! and a kill, made by one thread, through the blocking client and through
//! the async one; then the server restarted under each (a reconnect).

#[path = "../../durable/tests/async_adapter/mod.rs"]
mod async_adapter;
#[path = "../../durable/tests/redis_server/mod.rs"]
mod redis_server;

use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime};

use async_adapter::{BlockOn, Tokio};
use delayq_durable::{AsyncRedisQueue, Job, JobQueue, RedisQueue};
use delayq_metrics_tests::{Recording, Snapshot};
use redis_server::RedisServer;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const LEASE: Duration = Duration::from_secs(60);

/// The sequence, on `q` (empty, one caller). Returns the job it holds the
/// lease of at the end.
fn sequence(q: &impl JobQueue) -> Job {
    let now = SystemTime::now();
    // Sends: one an hour out, two in one script, one more below.
    q.send_after(b"later", Duration::from_secs(3600)).unwrap();
    q.send_many(&[(b"a".as_slice(), now), (b"b".as_slice(), now)]).unwrap();
    // Reserve and ack; a second ack finds no lease (not counted).
    let j = q.reserve(LEASE).unwrap();
    assert!(q.ack(&j).unwrap());
    assert!(!q.ack(&j).unwrap());
    // Reserve, nack, reserve again (a redelivery), ack.
    let j = q.reserve(LEASE).unwrap();
    assert!(q.nack(&j, SystemTime::now()).unwrap());
    let j = q.reserve(LEASE).unwrap();
    assert_eq!(j.attempt(), 2);
    assert!(q.ack(&j).unwrap());
    // A short lease that runs out: the next reserve acts on it (an expired
    // lease) and leases the job again (a redelivery).
    q.send_at(b"c", now).unwrap();
    let j = q.reserve(ms(30)).unwrap();
    thread::sleep(ms(40));
    let j2 = q.reserve(LEASE).unwrap();
    assert_eq!((j2.id(), j2.attempt()), (j.id(), 2));
    j2
}

/// The counters, gauges and histograms the sequence left, from `rec`; then
/// a kill of `held` and a `stats` (which sets the gauges), and a restart of
/// `server` under `q` (a reconnect).
fn check(rec: &Recording, name: &str, q: &impl JobQueue, held: &Job, server: &RedisServer) {
    let q_label = [("queue", name)];
    let m = rec.snapshot();
    assert_eq!(m.counter("delayq_durable_sent_total", &q_label), 4);
    assert_eq!(m.counter("delayq_durable_reserved_total", &q_label), 5);
    assert_eq!(m.counter("delayq_durable_redelivered_total", &q_label), 2);
    assert_eq!(m.counter("delayq_durable_acked_total", &q_label), 2);
    assert_eq!(m.counter("delayq_durable_nacked_total", &q_label), 1);
    assert_eq!(m.counter("delayq_durable_lease_expired_total", &q_label), 1);
    assert_eq!(m.counter("delayq_durable_redis_reconnects_total", &q_label), 0);
    // The gauges as the last reserve script counted them: "later" pending,
    // "c" leased.
    assert_eq!(jobs(&m, name), (1.0, 1.0, 0.0));
    // Every reserve found a due job at once: one script each.
    for (script, n) in [("send", 3), ("reserve", 5), ("ack", 3), ("nack", 1), ("kill", 0)] {
        let took = m.histogram("delayq_durable_redis_script_seconds", &[("queue", name), ("script", script)]);
        assert_eq!(took.len(), n, "{script}: {took:?}");
        assert!(took.iter().all(|&s| s > 0.0 && s < 10.0), "{script}: {took:?}");
    }
    // Every series carries the queue's name, and only it.
    for metric in m.metrics.iter().filter(|m| m.name.starts_with("delayq_durable_")) {
        assert!(metric.labels.contains(&("queue".to_owned(), name.to_owned())), "{metric:?}");
    }

    // A kill is not a nack; `stats` sets the gauges.
    assert!(q.kill(held, "gave up").unwrap());
    assert_eq!(q.dead_jobs(10).unwrap().len(), 1);
    let stats = q.stats().unwrap();
    assert_eq!((stats.pending, stats.leased, stats.dead), (1, 0, 1));
    let m = rec.snapshot();
    assert_eq!(jobs(&m, name), (1.0, 0.0, 1.0));
    assert_eq!(m.counter("delayq_durable_nacked_total", &q_label), 0);
    assert_eq!(m.counter("delayq_durable_reserved_total", &q_label), 0);
    for script in ["kill", "dead", "stats"] {
        let took = m.histogram("delayq_durable_redis_script_seconds", &[("queue", name), ("script", script)]);
        assert_eq!(took.len(), 1, "{script}: {took:?}");
    }

    // The server restarts (from its AOF): the next call reconnects.
    server.restart();
    let stats = q.stats().unwrap();
    assert_eq!((stats.pending, stats.leased, stats.dead), (1, 0, 1));
    let m = rec.snapshot();
    // One, unless the server still answered `LOADING` to the first retry
    // (each retry on a fresh connection is one more).
    let reconnects = m.counter("delayq_durable_redis_reconnects_total", &q_label);
    assert!(reconnects >= 1, "{reconnects}");
    assert_eq!(m.counter("delayq_durable_acked_total", &q_label), 0);
}

/// `delayq_durable_jobs{state}` as `(pending, reserved, dead)`.
fn jobs(m: &Snapshot, name: &str) -> (f64, f64, f64) {
    let jobs = |state| m.gauge("delayq_durable_jobs", &[("queue", name), ("state", state)]);
    (jobs("pending"), jobs("reserved"), jobs("dead"))
}

#[test]
fn redis_blocking_counts_gauges_scripts_and_reconnects() {
    if !redis_server::available() {
        return;
    }
    let server = RedisServer::start("metrics");
    let name = "metrics-blocking";
    let rec = Recording::new();
    let q = rec.build(|| RedisQueue::connect(&server.url(), name).unwrap());
    let held = sequence(&q);
    check(&rec, name, &q, &held, &server);
}

#[test]
fn redis_async_counts_gauges_scripts_and_reconnects() {
    if !redis_server::available() {
        return;
    }
    let server = RedisServer::start("ametrics");
    let name = "metrics-async";
    let rec = Recording::new();
    // The handles are registered when the blocking queue is connected; the
    // async client made from it records into them.
    let queue = rec.build(|| RedisQueue::connect(&server.url(), name).unwrap());
    let q = BlockOn {
        q: AsyncRedisQueue::new(queue).unwrap(),
        exec: Arc::new(Tokio::new()),
        _keep: Box::new(()),
    };
    let held = sequence(&q);
    check(&rec, name, &q, &held, &server);
}
