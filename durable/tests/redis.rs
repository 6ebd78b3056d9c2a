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
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use conformance::{ms, Opts};
use delayq_durable::{JobId, RedisQueue};
use redis_server::{unique, RedisServer};

/// The server the conformance cases share (each case uses its own queue name).
fn shared() -> Option<&'static RedisServer> {
    static SHARED: OnceLock<Option<&'static RedisServer>> = OnceLock::new();
    *SHARED.get_or_init(|| {
        redis_server::available().then(|| redis_server::start_shared(|| RedisServer::start("shared")))
    })
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
feature_tests!(super::open_redis);

const LEASE: Duration = Duration::from_secs(30);

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

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
                // The deadline as the producer means it, read before the
                // send: the server's "now + delay" is no earlier (one host
                // clock), so a job handed out before this time was early.
                let delay = ms(i % 5 * 40);
                let deadline = nanos(SystemTime::now() + delay);
                let id = q.send_after(&i.to_le_bytes(), delay).unwrap();
                println!("S {} {deadline}", id.0);
            }
        }
        "consume" => {
            // Until the queue has been quiet for 2 s.
            while let Some(job) = q.reserve_timeout(LEASE, Duration::from_secs(2)).unwrap() {
                // Not compared with `job.deadline()` here: that is the
                // server's deadline mapped with a clock reading taken before
                // the reserve, so it has always passed. The parent compares
                // this time with the producer's deadline.
                println!("D {} {} {}", job.id().0, job.attempt(), nanos(SystemTime::now()));
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
    let mut deadlines: HashMap<u64, u64> = HashMap::new();
    for p in producers {
        for l in lines(p) {
            if let Some(rest) = l.strip_prefix("S ") {
                let (id, deadline) = rest.split_once(' ').unwrap();
                let id = id.parse::<u64>().unwrap();
                sent.push(id);
                deadlines.insert(id, deadline.parse().unwrap());
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
                    let id: u64 = f[1].parse().unwrap();
                    let at: u64 = f[3].parse().unwrap();
                    delivered.entry(id).or_default().push(f[2].parse().unwrap());
                    if deadlines.get(&id).is_some_and(|&d| at < d) {
                        early += 1;
                        eprintln!(
                            "job {id} delivered {} µs before its deadline",
                            (deadlines[&id] - at) / 1000
                        );
                    }
                }
                "A" => *acked.entry(f[1].parse().unwrap()).or_default() += 1,
                _ => {}
            }
        }
    }
    assert_eq!(sent.len(), 1200);
    assert_eq!(early, 0, "delivered before the producer's deadline");
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
    let r = conformance::sends_survive(&q, "restart", || {
        thread::sleep(Duration::from_millis(800));
        server.kill();
        thread::sleep(Duration::from_millis(300));
        server.restart();
    });
    eprintln!(
        "restart: {} sends returned Ok, {} failed, {} jobs delivered (sends the server kept but whose reply was lost: {})",
        r.sent,
        r.failed,
        r.delivered,
        r.delivered - r.sent
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

/// Issue 36.4: the client's clock steps an hour ahead after the handle
/// measured its offset to the server's, so its estimate is an hour off
/// until the next measurement (up to 10 s later). A delay still goes to the
/// server as a delay: `send_after(1 s)` is due 1 s later by the server's
/// clock, neither an hour early nor an hour late.
#[test]
fn a_client_whose_offset_estimate_is_an_hour_off_still_schedules_send_after_by_the_server_s_clock() {
    let Some(server) = shared() else { return };
    let q = RedisQueue::connect(&server.url(), &unique("stepped")).unwrap();
    let hour = Duration::from_secs(3600);
    q.step_client_clock(hour, true);
    let start = Instant::now();
    q.send_after(b"in 1 s", Duration::from_secs(1)).unwrap();
    let job = q.reserve_timeout(LEASE, Duration::from_secs(10)).unwrap().expect("due in 1 s");
    let waited = start.elapsed();
    assert!(waited >= Duration::from_secs(1), "came {waited:?} after the send: early");
    assert!(waited < Duration::from_secs(3), "came {waited:?} after the send: late");
    // Its deadline maps back with the estimate taken before the step: the
    // server's time, an hour behind what the stepped clock reads.
    let off = job.deadline().duration_since(SystemTime::now()).unwrap_or_else(|e| e.duration());
    assert!(off < Duration::from_secs(2), "deadline {off:?} from the server's now");
    assert!(q.ack(&job).unwrap());
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

// ------------------------------------------------------------- upkeep

/// A raw connection to the server, for looking at and damaging the keys.
fn raw(server: &RedisServer) -> redis::Connection {
    redis::Client::open(server.url()).unwrap().get_connection().unwrap()
}

#[test]
fn a_change_s_nonce_result_is_kept_for_the_retry_window_not_ten_minutes() {
    let Some(server) = shared() else { return };
    let mut con = raw(server);
    for (retry_for, ttl) in [(Duration::from_secs(10), 30), (Duration::from_secs(1), 21)] {
        let queue = unique("nonce");
        let q = RedisQueue::builder().retry_for(retry_for).connect(&server.url(), &queue).unwrap();
        q.send_after(b"x", ms(0)).unwrap();
        let keys: Vec<String> =
            redis::cmd("KEYS").arg(format!("delayq:{{{queue}}}:r:*")).query(&mut con).unwrap();
        assert_eq!(keys.len(), 1, "{keys:?}");
        let left: i64 = redis::cmd("TTL").arg(&keys[0]).query(&mut con).unwrap();
        assert!(left > ttl - 5 && left <= ttl, "a nonce kept {left} s, expected {ttl} s");
    }
}

#[test]
fn a_job_hash_deleted_by_hand_does_not_stop_the_consumers() {
    let Some(server) = shared() else { return };
    let mut con = raw(server);
    let queue = unique("orphan");
    let prefix = format!("delayq:{{{queue}}}:");
    let q = RedisQueue::builder().max_attempts(1).connect(&server.url(), &queue).unwrap();
    let del = |con: &mut redis::Connection, id: JobId| {
        let n: i64 = redis::cmd("DEL").arg(format!("{prefix}job:{}", id.0)).query(con).unwrap();
        assert_eq!(n, 1);
    };
    // A pending job without its hash.
    let gone = q.send_after(b"gone", ms(0)).unwrap();
    let kept = q.send_after(b"kept", ms(0)).unwrap();
    del(&mut con, gone);
    let job = q.reserve_timeout(LEASE, Duration::from_secs(5)).unwrap().expect("the intact job");
    assert_eq!(job.id(), kept);
    assert!(q.ack(&job).unwrap());
    assert_eq!(q.reserve_timeout(LEASE, ms(100)).unwrap(), None);
    // A leased job without its hash, whose lease then ends.
    let leased = q.send_after(b"leased", ms(0)).unwrap();
    let job = q.reserve(ms(50)).unwrap();
    assert_eq!(job.id(), leased);
    del(&mut con, leased);
    thread::sleep(ms(100));
    let next = q.send_after(b"next", ms(0)).unwrap();
    let job = q.reserve_timeout(LEASE, Duration::from_secs(5)).unwrap().expect("the intact job");
    assert_eq!(job.id(), next);
    // A dead job without its hash: listed no more.
    assert!(q.nack(&job, SystemTime::now()).unwrap());
    assert_eq!(q.dead_jobs(10).unwrap().len(), 1);
    del(&mut con, next);
    assert_eq!(q.dead_jobs(10).unwrap(), vec![]);
    let s = q.stats().unwrap();
    assert_eq!((s.pending, s.leased, s.dead), (0, 0, 0), "orphaned entries are dropped");
    q.send_after(b"last", ms(0)).unwrap();
    assert_eq!(q.reserve_timeout(LEASE, Duration::from_secs(5)).unwrap().unwrap().payload(), b"last");
}

#[test]
fn after_a_server_restart_a_call_retries_on_a_fresh_connection_not_on_each_dead_idle_one() {
    if !redis_server::available() {
        return;
    }
    let server = RedisServer::start("pool");
    let queue = unique("pool");
    let q = RedisQueue::builder().retry_for(Duration::from_secs(3)).connect(&server.url(), &queue).unwrap();
    // Fill the pool with idle connections: many calls at once.
    let barrier = std::sync::Barrier::new(32);
    thread::scope(|s| {
        for _ in 0..32 {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..20 {
                    q.send_after(b"x", Duration::from_secs(3600)).unwrap();
                }
            });
        }
    });
    let info: String = redis::cmd("INFO").arg("clients").query(&mut raw(&server)).unwrap();
    let clients: usize = info
        .lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    assert!(clients >= 12, "only {clients} connections: the test needs many idle ones");
    server.restart();
    // Every idle connection is dead now. One retry on a fresh connection
    // suffices; trying them in turn would sleep 5 + 10 + 20 + … ms between.
    let t = Instant::now();
    let len = q.len().unwrap();
    assert_eq!(len, 640);
    assert!(t.elapsed() < ms(500), "the first call after a restart took {:?}", t.elapsed());
}

#[test]
fn the_harness_trusts_only_its_own_server_and_removes_dead_runs_directories() {
    let Some(server) = shared() else { return };
    // A port another server answers on: ours must not be taken for it.
    let dir = std::env::temp_dir().join(format!("delayq-harness-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    assert!(RedisServer::start_on(server.port, &dir).is_none(), "took another server for ours");
    assert!(redis_server::server_pid(server.port).is_some(), "the shared server still answers");
    let _ = std::fs::remove_dir_all(&dir);
    // A directory of a process that is gone is removed; ours is kept.
    let mut done = Command::new("true").spawn().unwrap();
    let dead_pid = done.id();
    done.wait().unwrap();
    let stale = std::env::temp_dir().join(format!("delayq-redis-shared-{dead_pid}-0"));
    std::fs::create_dir_all(&stale).unwrap();
    redis_server::remove_stale_dirs();
    assert!(!stale.exists(), "{} was left behind", stale.display());
    assert!(server.dir.exists(), "the live server's directory was removed");
}

// ------------------------------------------------------------- data loss

/// Leases `n` fresh jobs on `q` and returns them.
fn lease_fresh(q: &RedisQueue, n: usize) -> Vec<delayq_durable::Job> {
    for i in 0..n {
        q.send_after(format!("job {i}").as_bytes(), ms(0)).unwrap();
    }
    let jobs = q.reserve_many(LEASE, n, Duration::from_secs(5)).unwrap();
    assert_eq!(jobs.len(), n);
    jobs
}

/// Issue 22.3b: after a data loss the id and token counters started again at
/// 1, so a worker still holding job 1 / token 1 from before acked the new job 1
/// leased to someone else (`Ok(true)`), whose own ack then said `false`.
/// `lose` loses the server's data; no stale ack may be accepted.
fn stale_acks_after(tag: &str, lose: impl FnOnce(&RedisServer)) {
    if !redis_server::available() {
        return;
    }
    let server = RedisServer::start(tag);
    let queue = unique(tag);
    let before = RedisQueue::connect(&server.url(), &queue).unwrap();
    let stale = lease_fresh(&before, 3);
    lose(&server);
    let after = RedisQueue::connect(&server.url(), &queue).unwrap();
    let fresh = lease_fresh(&after, 3);
    let mut ids: Vec<_> = stale.iter().map(|j| j.id()).collect();
    ids.sort();
    let mut fresh_ids: Vec<_> = fresh.iter().map(|j| j.id()).collect();
    fresh_ids.sort();
    let same_ids = ids == fresh_ids; // the server's id counter started again
    let accepted: Vec<_> = stale.iter().filter(|j| before.ack(j).unwrap()).map(|j| j.id()).collect();
    let own: Vec<bool> = fresh.iter().map(|j| after.ack(j).unwrap()).collect();
    assert!(
        accepted.is_empty(),
        "{tag}: {} of 3 stale acks accepted {accepted:?} (ids reused: {same_ids}); the holders' acks: {own:?}",
        accepted.len()
    );
    assert_eq!(own, [true, true, true], "{tag}: the current holders' acks");
    assert_eq!(after.len().unwrap(), 0);
}

#[test]
fn after_flushall_a_stale_ack_never_deletes_a_job_leased_to_someone_else() {
    stale_acks_after("flushall", |server| {
        let () = redis::cmd("FLUSHALL").query(&mut raw(server)).unwrap();
    });
}

#[test]
fn after_a_restart_without_persistence_a_stale_ack_never_deletes_a_job_leased_to_someone_else() {
    stale_acks_after("nopersist", |server| {
        server.kill();
        // What a server without persistence starts from: nothing.
        for e in std::fs::read_dir(server.aof_dir()).unwrap().flatten() {
            if e.file_name() != "redis.log" {
                let p = e.path();
                let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
            }
        }
        server.restart();
    });
}

#[test]
fn the_reserve_script_samples_the_backlog_for_any_later_handle_to_read() {
    let Some(server) = shared() else { return };
    let name = unique("samples");
    let since = SystemTime::now() - Duration::from_secs(120);
    {
        let q = RedisQueue::connect(&server.url(), &name).unwrap();
        let past = SystemTime::now() - Duration::from_secs(5);
        for _ in 0..3 {
            q.send_at(b"due", past).unwrap();
        }
        q.send_after(b"later", Duration::from_secs(3600)).unwrap();
        for _ in 0..2 {
            let job = q.reserve(Duration::from_secs(30)).unwrap();
            assert!(q.ack(&job).unwrap());
        }
    }
    // No dashboard was open: the samples are the queue's own.
    let q = RedisQueue::connect(&server.url(), &name).unwrap();
    let rows = delayq_durable::Inspect::samples(&q, since).unwrap();
    // The two reserves fall in one minute, or in two.
    assert!(!rows.is_empty() && rows.len() <= 2, "{rows:?}");
    assert_eq!(rows[0].pending, 4, "the count before the minute's first reserve took anything: {rows:?}");
    assert!(rows[0].lateness >= Duration::from_millis(4000), "the oldest due job was 5 s late: {rows:?}");
    assert!(rows[0].lateness < Duration::from_secs(60), "{rows:?}");
}
