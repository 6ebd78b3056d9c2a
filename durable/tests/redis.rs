//! The Redis backend against a real `redis-server` (private, on a free
//! loopback port, started and stopped here): the conformance suite, then
//! several producer and consumer processes, a consumer killed holding leases,
//! the server killed and restarted mid-stream, and clients whose clocks are
//! hours off.
#![cfg(feature = "redis")]

mod conformance;
mod redis_server;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use conformance::{ms, Opts};
use delayq_durable::{JobId, RedisQueue};
use redis_server::RedisServer;

/// The server the conformance cases share (each case uses its own queue name).
fn shared() -> Option<&'static RedisServer> {
    static SERVER: OnceLock<Option<&'static RedisServer>> = OnceLock::new();
    *SERVER.get_or_init(|| {
        if !redis_server::available() {
            return None;
        }
        // Started from a thread that never ends: the server's death signal is
        // tied to the thread that spawned it, and test threads come and go.
        let (tx, rx) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let server: &'static RedisServer = Box::leak(Box::new(RedisServer::start("shared")));
            tx.send(server).unwrap();
            loop {
                thread::park();
            }
        });
        Some(rx.recv().unwrap())
    })
}

fn unique(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

fn open_redis(opts: Opts) -> Option<RedisQueue> {
    let server = shared()?;
    Some(
        RedisQueue::builder()
            .max_attempts(opts.max_attempts)
            .max_payload(opts.max_payload)
            .connect(&server.url(), &unique("conf"))
            .unwrap(),
    )
}

conformance_tests!(super::open_redis);

const LEASE: Duration = Duration::from_secs(30);

// ------------------------------------------------------------- children

/// Runs as a child process when `DELAYQ_REDIS_CHILD` names a role.
#[test]
fn child_role() {
    let Ok(role) = std::env::var("DELAYQ_REDIS_CHILD") else { return };
    let url = std::env::var("DELAYQ_REDIS_URL").unwrap();
    let name = std::env::var("DELAYQ_REDIS_QUEUE").unwrap();
    let q = RedisQueue::connect(&url, &name).unwrap();
    // libtest printed "test child_role ... " without a newline: end that line.
    println!();
    match role.as_str() {
        "produce" => {
            let n: u64 = std::env::var("DELAYQ_REDIS_N").unwrap().parse().unwrap();
            for i in 0..n {
                let id = q.send_after(&i.to_le_bytes(), ms(i % 5 * 40)).unwrap();
                println!("S {}", id.0);
            }
        }
        "consume" => {
            // Until the queue has been quiet for 2 s.
            while let Some(job) = q.reserve_timeout(LEASE, Duration::from_secs(2)).unwrap() {
                let early = SystemTime::now() < job.deadline();
                println!("D {} {} {}", job.id().0, job.attempt(), if early { "EARLY" } else { "ok" });
                assert!(q.ack(&job).unwrap(), "ack refused");
                println!("A {}", job.id().0);
            }
        }
        "hold" => {
            // Lease five jobs for 1 s each, then hang until killed.
            for _ in 0..5 {
                let job = q.reserve(Duration::from_secs(1)).unwrap();
                println!("H {} {}", job.id().0, job.attempt());
            }
            println!("HELD");
            thread::sleep(Duration::from_secs(3600));
        }
        other => panic!("unknown role {other}"),
    }
}

fn child(role: &str, url: &str, queue: &str, n: u64) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
        .env("DELAYQ_REDIS_CHILD", role)
        .env("DELAYQ_REDIS_URL", url)
        .env("DELAYQ_REDIS_QUEUE", queue)
        .env("DELAYQ_REDIS_N", n.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

fn lines(child: std::process::Child) -> Vec<String> {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "a child failed: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

#[test]
fn producer_and_consumer_processes_lose_nothing_and_deliver_nothing_twice() {
    let Some(server) = shared() else { return };
    let queue = unique("procs");
    let consumers: Vec<_> = (0..3).map(|_| child("consume", &server.url(), &queue, 0)).collect();
    let producers: Vec<_> = (0..3).map(|_| child("produce", &server.url(), &queue, 400)).collect();
    let mut sent = Vec::new();
    for p in producers {
        for l in lines(p) {
            if let Some(id) = l.strip_prefix("S ") {
                sent.push(id.parse::<u64>().unwrap());
            }
        }
    }
    let (mut delivered, mut acked): (HashMap<u64, Vec<u32>>, HashMap<u64, u32>) = Default::default();
    let mut early = 0;
    for c in consumers {
        for l in lines(c) {
            let f: Vec<&str> = l.split(' ').collect();
            match f[0] {
                "D" => {
                    delivered.entry(f[1].parse().unwrap()).or_default().push(f[2].parse().unwrap());
                    early += usize::from(f[3] == "EARLY");
                }
                "A" => *acked.entry(f[1].parse().unwrap()).or_default() += 1,
                _ => {}
            }
        }
    }
    assert_eq!(sent.len(), 1200);
    assert_eq!(early, 0, "delivered before the deadline");
    for id in &sent {
        assert_eq!(acked.get(id), Some(&1), "job {id} acked {:?} times", acked.get(id));
        assert_eq!(delivered[id], vec![1], "job {id}: undeclared or extra deliveries");
    }
    let q = RedisQueue::connect(&server.url(), &queue).unwrap();
    assert_eq!(q.len().unwrap(), 0);
}

#[test]
fn a_killed_consumer_s_leases_come_back_after_the_lease_as_the_next_attempt() {
    let Some(server) = shared() else { return };
    let queue = unique("kill");
    let q = RedisQueue::connect(&server.url(), &queue).unwrap();
    let ids: Vec<JobId> = (0..5u8).map(|i| q.send_after(&[i], ms(0)).unwrap()).collect();
    let mut holder = child("hold", &server.url(), &queue, 0);
    let mut out = BufReader::new(holder.stdout.take().unwrap());
    let mut held = Vec::new();
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 {
        if line.trim() == "HELD" {
            break;
        }
        if let Some(rest) = line.trim().strip_prefix("H ") {
            held.push(rest.split(' ').next().unwrap().parse::<u64>().unwrap());
        }
        line.clear();
    }
    let killed_at = Instant::now();
    holder.kill().unwrap();
    holder.wait().unwrap();
    held.sort();
    assert_eq!(held, ids.iter().map(|id| id.0).collect::<Vec<_>>());
    assert_eq!(q.stats().unwrap().leased, 5);
    let mut back = Vec::new();
    while back.len() < 5 {
        let job =
            q.reserve_timeout(LEASE, Duration::from_secs(10)).unwrap().expect("the leases end after 1 s");
        assert_eq!(job.attempt(), 2, "a redelivery declares itself");
        back.push(job.id().0);
        assert!(q.ack(&job).unwrap());
    }
    assert!(killed_at.elapsed() < Duration::from_secs(5));
    back.sort();
    assert_eq!(back, held);
}

#[test]
fn a_server_killed_and_restarted_mid_stream_keeps_every_sent_job() {
    if !redis_server::available() {
        return;
    }
    let server = RedisServer::start("restart");
    let queue = unique("restart");
    let q = RedisQueue::builder().retry_for(Duration::from_secs(15)).connect(&server.url(), &queue).unwrap();
    let sent = Mutex::new(Vec::new());
    let errors = AtomicUsize::new(0);
    thread::scope(|s| {
        for t in 0..4u32 {
            let (q, sent, errors) = (&q, &sent, &errors);
            s.spawn(move || {
                let start = Instant::now();
                let mut i = 0u32;
                while start.elapsed() < Duration::from_millis(2500) {
                    match q.send_after(&(t << 24 | i).to_le_bytes(), ms(0)) {
                        Ok(id) => sent.lock().unwrap().push(id.0),
                        Err(e) => {
                            if errors.fetch_add(1, Ordering::Relaxed) < 3 {
                                eprintln!("restart: a send failed: {e}");
                            }
                        }
                    }
                    i += 1;
                }
            });
        }
        thread::sleep(Duration::from_millis(800));
        server.kill();
        thread::sleep(Duration::from_millis(300));
        server.restart();
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
    // A job nobody was told about can only come from a call that failed
    // (retries are deduplicated by nonce, so a retried send is stored once).
    let failed = errors.load(Ordering::Relaxed);
    assert!(
        got.len() <= sent.len() + failed,
        "{} jobs for {} Ok sends and {failed} failed ones",
        got.len(),
        sent.len()
    );
    eprintln!(
        "restart: {} sends returned Ok, {} failed, {} jobs delivered (sends the server kept but whose reply was lost: {})",
        sent.len(),
        errors.load(Ordering::Relaxed),
        got.len(),
        got.len() - sent.len()
    );
}

#[test]
fn clients_with_clocks_hours_off_still_get_jobs_on_time_by_the_server_s_clock() {
    let Some(server) = shared() else { return };
    let queue = unique("skew");
    let three_h = Duration::from_secs(3 * 3600);
    let ahead =
        RedisQueue::builder().client_clock_offset(three_h, true).connect(&server.url(), &queue).unwrap();
    let behind = RedisQueue::builder()
        .client_clock_offset(Duration::from_secs(2 * 3600), false)
        .connect(&server.url(), &queue)
        .unwrap();
    // The producer's clock reads 3 h ahead: "in 300 ms" by its clock.
    let start = Instant::now();
    ahead.send_at(b"at", SystemTime::now() + three_h + ms(300)).unwrap();
    ahead.send_after(b"after", ms(300)).unwrap();
    for _ in 0..2 {
        let job = behind.reserve_timeout(LEASE, Duration::from_secs(10)).unwrap().expect("due in 300 ms");
        let waited = start.elapsed();
        assert!(waited >= ms(290), "{:?} came {waited:?} after the send: early", job.payload());
        assert!(waited < Duration::from_secs(3), "{:?} came {waited:?} after the send: late", job.payload());
        // On the consumer's own (skewed) clock the deadline has passed.
        assert!(job.deadline() < SystemTime::now() - Duration::from_secs(2 * 3600) + ms(50));
        assert!(behind.ack(&job).unwrap());
    }
    // A client-side past deadline is due at once, whatever the skew.
    behind.send_at(b"past", SystemTime::now() - Duration::from_secs(4 * 3600)).unwrap();
    let t = Instant::now();
    assert!(ahead.reserve_timeout(LEASE, Duration::from_secs(5)).unwrap().is_some());
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[test]
fn a_dropped_notification_connection_delays_a_job_by_at_most_the_liveness_bound() {
    let Some(server) = shared() else { return };
    let queue = unique("notify");
    let consumer =
        RedisQueue::builder().liveness(Duration::from_secs(1)).connect(&server.url(), &queue).unwrap();
    let producer = RedisQueue::connect(&server.url(), &queue).unwrap();
    producer.send_after(b"far", Duration::from_secs(3600)).unwrap();
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let t = Instant::now();
            let job = consumer.reserve_timeout(LEASE, Duration::from_secs(10)).unwrap();
            (job.map(|j| j.payload().to_vec()), t.elapsed())
        });
        thread::sleep(ms(300));
        // Kill every subscriber's connection, then send a job due now.
        let client = redis::Client::open(server.url()).unwrap();
        let mut con = client.get_connection().unwrap();
        let _: redis::Value =
            redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("pubsub").query(&mut con).unwrap();
        producer.send_after(b"now", ms(0)).unwrap();
        let (got, took) = waiter.join().unwrap();
        assert_eq!(got.as_deref(), Some(&b"now"[..]));
        assert!(took < Duration::from_millis(300 + 2500), "took {took:?}: more than liveness + reconnect");
    });
}

#[test]
fn an_unreachable_server_gives_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let err = RedisQueue::builder()
        .retry_for(ms(200))
        .connect(&format!("redis://127.0.0.1:{port}/"), "q")
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("connecting to redis://127.0.0.1"), "{text}");
    assert!(RedisQueue::connect("not a url", "q").is_err());
    assert!(RedisQueue::connect("redis://127.0.0.1:1/", "").unwrap_err().to_string().contains("name"));
}
