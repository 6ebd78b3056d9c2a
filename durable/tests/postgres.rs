//! The PostgreSQL backend against a real server (private, `initdb`'d into
//! a temporary directory, on a free loopback port, started and stopped
//! here): the conformance suite, then the schema (migration, several
//! queues, a chosen schema), the transactional enqueue, and the failures.
#![cfg(feature = "postgres")]

mod conformance;
mod pg_server;

use std::sync::OnceLock;

use conformance::Opts;
use delayq_durable::PgQueue;
use pg_server::{unique, PgServer};

/// The server the conformance cases share (each case uses its own queue name).
fn shared() -> Option<&'static PgServer> {
    static SHARED: OnceLock<Option<&'static PgServer>> = OnceLock::new();
    *SHARED
        .get_or_init(|| pg_server::available().then(|| pg_server::start_shared(|| PgServer::start("shared"))))
}

fn open_pg(opts: Opts) -> Option<PgQueue> {
    let server = shared()?;
    Some(
        PgQueue::builder()
            .max_attempts(opts.max_attempts)
            .max_payload(opts.max_payload)
            .connect(&server.url(), &unique("conf"))
            .unwrap(),
    )
}

conformance_tests!(super::open_pg);
feature_tests!(super::open_pg);

#[test]
fn the_harness_serves_only_loopback_with_fsync_on_and_trusts_only_its_own_server() {
    let Some(server) = shared() else { return };
    let mut client = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
    let show = |client: &mut postgres::Client, what: &str| -> String {
        client.query_one(&format!("SHOW {what}"), &[]).unwrap().get(0)
    };
    assert_eq!(show(&mut client, "fsync"), "on");
    assert_eq!(show(&mut client, "synchronous_commit"), "on");
    assert_eq!(show(&mut client, "listen_addresses"), "127.0.0.1");
    assert_eq!(show(&mut client, "unix_socket_directories"), "");
    // Ours answers with our directory; a port nobody serves answers nothing.
    let dir = pg_server::data_directory(server.port).unwrap();
    assert_eq!(std::path::Path::new(&dir), server.dir.join("data"));
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    assert_eq!(pg_server::data_directory(free), None);
}

// ------------------------------------------------------------- the transactional enqueue

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use conformance::ms;

const LEASE: Duration = Duration::from_secs(30);

/// The application's own connection, with a table of its own.
fn app(server: &PgServer) -> postgres::Client {
    static TABLE: std::sync::Once = std::sync::Once::new();
    let mut db = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
    // Once: two cases creating it at once would race in the catalog.
    TABLE.call_once(|| {
        db.batch_execute("CREATE TABLE orders (id bigint PRIMARY KEY, total bigint NOT NULL)").unwrap();
    });
    db
}

#[test]
fn a_job_sent_in_a_transaction_that_rolls_back_is_never_delivered_and_one_that_commits_is_delivered_once() {
    let Some(server) = shared() else { return };
    let q = PgQueue::connect(&server.url(), &unique("tx")).unwrap();
    let mut db = app(server);
    let order = i64::from(std::process::id()) * 1000;

    let mut tx = db.transaction().unwrap();
    tx.execute("INSERT INTO orders VALUES ($1, 10)", &[&order]).unwrap();
    let rolled = q.send_after_in(&mut tx, b"receipt (rolled back)", ms(0)).unwrap();
    // Not committed: no other connection sees it, no consumer gets it.
    assert_eq!(q.len().unwrap(), 0);
    assert_eq!(q.reserve_timeout(LEASE, ms(200)).unwrap(), None);
    tx.rollback().unwrap();
    assert_eq!(q.reserve_timeout(LEASE, ms(300)).unwrap(), None, "a rolled-back job was delivered");
    assert!(!q.cancel(rolled).unwrap(), "the rolled-back job is not stored");

    let mut tx = db.transaction().unwrap();
    tx.execute("INSERT INTO orders VALUES ($1, 20)", &[&(order + 1)]).unwrap();
    let kept = q.send_after_in(&mut tx, b"receipt (committed)", ms(0)).unwrap();
    let many = q.send_many_in(&mut tx, &[(b"a", SystemTime::now()), (b"b", SystemTime::now())]).unwrap();
    assert_eq!(many.len(), 2);
    assert_eq!(q.len().unwrap(), 0, "seen before the commit");
    tx.commit().unwrap();
    let mut got = Vec::new();
    while let Some(job) = q.reserve_timeout(LEASE, ms(500)).unwrap() {
        got.push(job.id());
        assert!(q.ack(&job).unwrap());
    }
    got.sort();
    let mut want = vec![kept, many[0], many[1]];
    want.sort();
    assert_eq!(got, want, "each committed job delivered once");
    let orders: i64 = db
        .query_one("SELECT count(*) FROM orders WHERE id IN ($1, $2)", &[&order, &(order + 1)])
        .unwrap()
        .get(0);
    assert_eq!(orders, 1, "the business data followed the same transactions");
}

#[test]
fn a_waiting_worker_is_woken_by_the_commit_not_before() {
    let Some(server) = shared() else { return };
    let name = unique("wake");
    let q = PgQueue::connect(&server.url(), &name).unwrap();
    let consumer = PgQueue::connect(&server.url(), &name).unwrap();
    let mut db = app(server);
    let (tx_got, got) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let job = consumer.reserve_timeout(LEASE, Duration::from_secs(20)).unwrap();
        tx_got.send((job, Instant::now())).unwrap();
    });
    thread::sleep(ms(300)); // the waiter is asleep on the (empty) queue
    let mut delays = Vec::new();
    let mut tx = db.transaction().unwrap();
    q.enqueue_after_in(&mut tx, &Receipt { order: 7 }, ms(0)).unwrap();
    // Due now but not committed: nobody may have it.
    assert!(got.recv_timeout(ms(400)).is_err(), "woken before the commit");
    let committed = Instant::now();
    tx.commit().unwrap();
    let (job, at) = got.recv_timeout(Duration::from_secs(10)).expect("woken by the commit");
    let job = job.expect("the job");
    delays.push(at.duration_since(committed));
    assert_eq!(job.kind(), "test.receipt");
    assert!(q.ack(&job).unwrap());
    waiter.join().unwrap();
    // The delay from commit to a waiting consumer holding the job, a few times.
    for i in 0..5 {
        let consumer = PgQueue::connect(&server.url(), &name).unwrap();
        let (tx_got, got) = mpsc::channel();
        let w = thread::spawn(move || {
            let job = consumer.reserve_timeout(LEASE, Duration::from_secs(20)).unwrap().unwrap();
            tx_got.send(Instant::now()).unwrap();
            assert!(consumer.ack(&job).unwrap());
        });
        thread::sleep(ms(200));
        let mut tx = db.transaction().unwrap();
        q.send_after_in(&mut tx, format!("{i}").as_bytes(), ms(0)).unwrap();
        let committed = Instant::now();
        tx.commit().unwrap();
        delays.push(got.recv_timeout(Duration::from_secs(10)).unwrap().duration_since(committed));
        w.join().unwrap();
    }
    delays.sort();
    eprintln!("commit to a waiting consumer holding the job: {delays:?}");
    assert!(delays[delays.len() - 1] < ms(1000), "woken {:?} after the commit", delays.last());
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Receipt {
    order: u64,
}

impl delayq_durable::JobKind for Receipt {
    const KIND: &'static str = "test.receipt";
}

// ------------------------------------------------------------- processes and crashes

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use delayq_durable::JobId;

/// Runs as a child process when `DELAYQ_PG_CHILD` names a role.
#[test]
fn child_role() {
    let Ok(role) = std::env::var("DELAYQ_PG_CHILD") else { return };
    let url = std::env::var("DELAYQ_PG_URL").unwrap();
    let name = std::env::var("DELAYQ_PG_QUEUE").unwrap();
    let q = PgQueue::connect(&url, &name).unwrap();
    // libtest printed "test child_role ... " without a newline: end that line.
    println!();
    match role.as_str() {
        "consume" => {
            // Until the queue has been quiet for 2 s: id, attempt, the
            // deadline and the server's time of the lease (its end minus
            // the lease), both µs.
            let lease = Duration::from_secs(60);
            while let Some(job) = q.reserve_timeout(lease, Duration::from_secs(2)).unwrap() {
                let us = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_micros();
                let leased_at = us(job.lease_deadline().unwrap() - lease);
                println!("D {} {} {} {leased_at}", job.id().0, job.attempt(), us(job.deadline()));
                assert!(q.ack(&job).unwrap(), "ack refused");
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

fn child(role: &str, url: &str, queue: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
        .env("DELAYQ_PG_CHILD", role)
        .env("DELAYQ_PG_URL", url)
        .env("DELAYQ_PG_QUEUE", queue)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

fn lines(child: std::process::Child) -> Vec<String> {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "a child failed: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

/// The jobs of the concurrency test (`DELAYQ_PG_JOBS` scales it; 20,000 by default).
fn jobs_count() -> u64 {
    std::env::var("DELAYQ_PG_JOBS").ok().and_then(|n| n.parse().ok()).unwrap_or(20_000)
}

#[test]
fn eight_worker_processes_get_each_job_once_none_early_by_the_server_s_clock_fifo_among_equal_deadlines() {
    let Some(server) = shared() else { return };
    let name = unique("eight");
    let q = PgQueue::connect(&server.url(), &name).unwrap();
    let n = jobs_count();
    // Deadlines in groups of 1,000 equal ones, 20 ms apart, the first in the
    // past: many jobs share a deadline, so FIFO among them is visible.
    let base = SystemTime::now() + ms(500);
    let consumers: Vec<_> = (0..8).map(|_| child("consume", &server.url(), &name)).collect();
    let mut sent: HashMap<u64, u128> = HashMap::new();
    let mut i = 0;
    while i < n {
        let group = i / 1000;
        let at = base + ms(group * 20);
        let batch: Vec<Vec<u8>> = (i..(i + 500).min(n)).map(|k| k.to_le_bytes().to_vec()).collect();
        let refs: Vec<(&[u8], SystemTime)> = batch.iter().map(|p| (p.as_slice(), at)).collect();
        // As the queue keeps it: µs, rounded up.
        let at_us = at.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos().div_ceil(1000);
        for id in q.send_many(&refs).unwrap() {
            sent.insert(id.0, at_us);
        }
        i += batch.len() as u64;
    }
    let mut delivered: HashMap<u64, Vec<u32>> = HashMap::new();
    let (mut early, mut out_of_order) = (0, 0);
    // Read concurrently: a child blocked on a full pipe would hold its lease.
    let outputs: Vec<Vec<String>> = consumers
        .into_iter()
        .map(|c| thread::spawn(move || lines(c)))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    for output in outputs {
        // Per process: the last id taken of each deadline.
        let mut last_of: HashMap<u128, u64> = HashMap::new();
        for l in output {
            let f: Vec<&str> = l.split(' ').collect();
            if f[0] != "D" {
                continue;
            }
            let (id, attempt): (u64, u32) = (f[1].parse().unwrap(), f[2].parse().unwrap());
            let (deadline, leased_at): (u128, u128) = (f[3].parse().unwrap(), f[4].parse().unwrap());
            delivered.entry(id).or_default().push(attempt);
            assert_eq!(sent.get(&id), Some(&deadline), "job {id}: the deadline reported is the one sent");
            if leased_at < deadline {
                early += 1;
                eprintln!(
                    "job {id} leased {} µs before its deadline by the server's clock",
                    deadline - leased_at
                );
            }
            // Each consumer takes jobs of one deadline in id order: a
            // later reserve never gets a lower id of the same deadline.
            let last = last_of.entry(deadline).or_insert(0);
            if id < *last {
                out_of_order += 1;
            }
            *last = id;
        }
    }
    assert_eq!(early, 0, "handed out before the deadline by the server's clock");
    assert_eq!(out_of_order, 0, "jobs of one deadline not taken in id order");
    assert_eq!(delivered.len(), n as usize, "lost jobs");
    for (id, attempts) in &delivered {
        assert_eq!(attempts, &[1], "job {id}: handed out more than once in one lease");
    }
    assert_eq!(q.len().unwrap(), 0);
}

#[test]
fn a_killed_worker_s_leases_come_back_after_the_lease_as_the_next_attempt() {
    let Some(server) = shared() else { return };
    let queue = unique("kill");
    let q = PgQueue::connect(&server.url(), &queue).unwrap();
    let ids: Vec<JobId> = (0..5u8).map(|i| q.send_after(&[i], ms(0)).unwrap()).collect();
    let mut holder = child("hold", &server.url(), &queue);
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
    holder.kill().unwrap(); // SIGKILL
    holder.wait().unwrap();
    held.sort();
    assert_eq!(held, ids.iter().map(|id| id.0).collect::<Vec<_>>());
    assert_eq!(q.stats().unwrap().leased, 5);
    let mut back = Vec::new();
    while back.len() < 5 {
        let job =
            q.reserve_timeout(LEASE, Duration::from_secs(10)).unwrap().expect("the leases end after 1 s");
        assert_eq!(job.attempt(), 2, "a redelivery declares itself");
        assert_eq!(job.last_error(), Some("lease expired (attempt 1)"));
        back.push(job.id().0);
        assert!(q.ack(&job).unwrap());
    }
    assert!(killed_at.elapsed() < Duration::from_secs(5), "{:?}", killed_at.elapsed());
    back.sort();
    assert_eq!(back, held, "nothing lost");
}

#[test]
fn a_server_stopped_immediately_and_restarted_mid_stream_keeps_every_sent_job() {
    if !pg_server::available() {
        return;
    }
    let server = PgServer::start("restart");
    let q = PgQueue::builder()
        .retry_for(Duration::from_secs(20))
        .connect(&server.url(), &unique("restart"))
        .unwrap();
    let r = conformance::sends_survive(&q, "restart", || {
        thread::sleep(ms(800));
        server.restart(); // pg_ctl stop -m immediate, then start: WAL recovery
    });
    eprintln!(
        "restart: {} sends returned Ok, {} failed, {} jobs delivered (sends stored whose reply was lost: {})",
        r.sent,
        r.failed,
        r.delivered,
        r.delivered - r.sent
    );
}

#[test]
fn a_server_that_is_down_gives_a_clear_error_after_the_retry_window_never_a_hang() {
    if !pg_server::available() {
        return;
    }
    // Never up: the open fails after its retry window.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let t = Instant::now();
    let err = PgQueue::builder()
        .retry_for(ms(500))
        .connect(&format!("postgres://postgres@127.0.0.1:{port}/postgres"), "q")
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("gave up after retrying for 500ms") && text.contains(&port.to_string()), "{text}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // Down after the open: each call fails within the window, none hangs.
    let server = PgServer::start("down");
    let q = PgQueue::builder().retry_for(ms(700)).connect(&server.url(), &unique("down")).unwrap();
    q.send_after(b"x", ms(0)).unwrap();
    server.stop_immediate();
    for (what, call) in [
        ("send", Box::new(|| q.send_after(b"y", ms(0)).map(|_| ())) as Box<dyn Fn() -> Result<(), _>>),
        ("reserve", Box::new(|| q.reserve_timeout(LEASE, Duration::from_secs(60)).map(|_| ()))),
        ("stats", Box::new(|| q.stats().map(|_| ()))),
    ] {
        let t = Instant::now();
        let err = call().expect_err(what);
        assert!(err.to_string().starts_with("postgres: "), "{what}: {err}");
        assert!(t.elapsed() < Duration::from_secs(5), "{what} took {:?}: {err}", t.elapsed());
        eprintln!("{what} with the server down, after {:?}: {err}", t.elapsed());
    }
    assert!(PgQueue::connect("not a url", "q").is_err());
    assert!(PgQueue::connect(&server.url(), "").unwrap_err().to_string().contains("name"));
}

// ------------------------------------------------------------- the schema, several queues, wake-ups

#[test]
fn queues_of_one_schema_are_apart_a_schema_is_chosen_and_a_newer_one_is_refused() {
    let Some(server) = shared() else { return };
    let (a, b) = (unique("apart-a"), unique("apart-b"));
    let qa = PgQueue::connect(&server.url(), &a).unwrap();
    let qb = PgQueue::connect(&server.url(), &b).unwrap();
    let schema = format!("jobs_{}", std::process::id());
    let qc = PgQueue::builder().schema(&schema).connect(&server.url(), &a).unwrap();
    let ia = qa.send_after(b"a", ms(0)).unwrap();
    let ib = qb.send_after(b"b", ms(0)).unwrap();
    let ic = qc.send_after(b"c", ms(0)).unwrap();
    assert_ne!(ia, ib, "ids are unique across the queues of a schema");
    for (q, id, payload) in [(&qa, ia, b"a"), (&qb, ib, b"b"), (&qc, ic, b"c")] {
        let job = q.reserve_timeout(LEASE, Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!((job.id(), job.payload()), (id, &payload[..]));
        assert!(q.ack(&job).unwrap());
        assert_eq!(q.reserve_timeout(LEASE, ms(100)).unwrap(), None, "another queue's job came");
    }
    let mut db = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
    let tables: i64 = db
        .query_one("SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = 'jobs'", &[&schema])
        .unwrap()
        .get(0);
    assert_eq!(tables, 1, "the chosen schema holds the table");
    // Opening again applies nothing; a schema of a newer version is refused.
    drop(PgQueue::builder().schema(&schema).connect(&server.url(), &b).unwrap());
    db.execute(&format!("UPDATE \"{schema}\".delayq_schema SET version = 99"), &[]).unwrap();
    let err = PgQueue::builder().schema(&schema).connect(&server.url(), &a).unwrap_err().to_string();
    assert!(err.contains("version 99, newer than"), "{err}");
    assert!(PgQueue::builder().schema("no-dashes").connect(&server.url(), &a).is_err());
}

#[test]
fn a_dropped_listening_connection_delays_a_job_by_at_most_the_liveness_bound() {
    let Some(server) = shared() else { return };
    let name = unique("listen");
    let consumer = PgQueue::builder().liveness(Duration::from_secs(1)).connect(&server.url(), &name).unwrap();
    let producer = PgQueue::connect(&server.url(), &name).unwrap();
    producer.send_after(b"far", Duration::from_secs(3600)).unwrap();
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let t = Instant::now();
            let job = consumer.reserve_timeout(LEASE, Duration::from_secs(10)).unwrap();
            (job.map(|j| j.payload().to_vec()), t.elapsed())
        });
        thread::sleep(ms(300));
        // End every listening connection, then send a job due now: its
        // notification may go out before the listener is back.
        let mut db = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
        let ended: i64 = db
            .query_one(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE application_name = 'delayq listen') t",
                &[],
            )
            .unwrap()
            .get(0);
        assert!(ended >= 1, "no listening connection found");
        producer.send_after(b"now", ms(0)).unwrap();
        let (got, took) = waiter.join().unwrap();
        assert_eq!(got.as_deref(), Some(&b"now"[..]));
        assert!(took < Duration::from_millis(300 + 4000), "took {took:?}: more than liveness + reconnect");
    });
}

#[test]
fn a_reserve_samples_the_backlog_once_a_minute_for_any_later_handle_to_read() {
    let Some(server) = shared() else { return };
    let name = unique("samples");
    let since = SystemTime::now() - Duration::from_secs(120);
    {
        let q = PgQueue::connect(&server.url(), &name).unwrap();
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
    let q = PgQueue::connect(&server.url(), &name).unwrap();
    let rows = delayq_durable::Inspect::samples(&q, since).unwrap();
    // The two reserves fall in one minute, or in two.
    assert!(!rows.is_empty() && rows.len() <= 2, "{rows:?}");
    assert_eq!(rows[0].pending, 4, "the count before the minute's first reserve took anything: {rows:?}");
    assert!(rows[0].lateness >= Duration::from_millis(4900), "the oldest due job was 5 s late: {rows:?}");
    assert!(rows[0].lateness < Duration::from_secs(60), "{rows:?}");
}
