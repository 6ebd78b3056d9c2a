//! The dashboard's JSON API, which its pages use, over plain HTTP on each
//! backend: the embedded file, Redis, a 3-master Redis Cluster and
//! PostgreSQL (private servers on 127.0.0.1). Paging, the kind and error filters, one job,
//! counts by kind, and bulk actions with their confirmation step and
//! result sentence. And defect 7's regression test: the pages and the API
//! answer while an embedded queue's writer thread is held in a commit.

#[path = "../../durable/tests/held_writer/mod.rs"]
mod held_writer;
#[path = "../../durable/tests/pg_server/mod.rs"]
mod pg_server;
#[path = "../../durable/tests/redis_server/mod.rs"]
mod redis_server;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use delayq_durable::{DurableQueue, Inspect, JobId, JobQueue, JobState, PgQueue, RedisQueue};
use delayq_jobs::dashboard::{self, Options};
use serde_json::{json, Value};

trait Both: JobQueue + Inspect {}
impl<Q: JobQueue + Inspect> Both for Q {}

/// A request: (status, JSON body).
fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
    token: Option<&str>,
) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let token = token.map(|t| format!("x-csrf-token: {t}\r\n")).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{token}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).unwrap();
    let text = String::from_utf8_lossy(&reply).into_owned();
    let status = text[9..12].parse().unwrap();
    let at = text.find("\r\n\r\n").unwrap() + 4;
    let content = &text[at..];
    let json = serde_json::from_str(content).unwrap_or_else(|_| Value::String(content.to_string()));
    (status, json)
}

fn token(addr: SocketAddr) -> String {
    let (_, page) = call(addr, "GET", "/list", None, None);
    let page = page.as_str().unwrap().to_string();
    let at = page.find("<meta name=csrf content=").expect("a token on a writable page") + 24;
    page[at..].split('>').next().unwrap().to_string()
}

/// 30 dead `email.send` jobs (error `smtp 550 …`), 20 dead `report.daily`
/// (error `Timeout …`), 5 pending `email.send`, 4 `email.send` processed.
fn fill(q: &dyn Both) {
    let now = SystemTime::now();
    for i in 0..50 {
        let kind = if i % 5 < 3 { "email.send" } else { "report.daily" };
        q.send_kind_at(kind, format!("payload {i}").as_bytes(), now).unwrap();
    }
    for _ in 0..5 {
        q.send_kind_at("email.send", b"later", now + Duration::from_secs(3600)).unwrap();
    }
    let mut killed = 0;
    while killed < 50 {
        for job in q.reserve_many(Duration::from_secs(600), 50, Duration::from_secs(5)).unwrap() {
            let error =
                if job.kind() == "email.send" { "smtp 550: no such user" } else { "Timeout after 30 s" };
            assert!(q.kill(&job, error).unwrap());
            killed += 1;
        }
    }
    // Four processed.
    for _ in 0..4 {
        q.send_kind_at("email.send", b"ok", now).unwrap();
    }
    let mut acked = 0;
    while acked < 4 {
        for job in q.reserve_many(Duration::from_secs(600), 4, Duration::from_secs(5)).unwrap() {
            assert!(q.ack(&job).unwrap());
            acked += 1;
        }
    }
}

fn ids(page: &Value) -> Vec<u64> {
    page["jobs"].as_array().unwrap().iter().map(|j| j["id"].as_u64().unwrap()).collect()
}

/// Every page of a listing, following `next`.
fn all_pages(addr: SocketAddr, query: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut cursor = 0;
    for _ in 0..100 {
        let (status, page) =
            call(addr, "GET", &format!("/api/jobs?{query}&limit=20&cursor={cursor}"), None, None);
        assert_eq!(status, 200, "{page}");
        let got = ids(&page);
        assert!(got.len() <= 20);
        out.extend(got);
        match page["next"].as_u64() {
            Some(next) => cursor = next,
            None => return out,
        }
    }
    panic!("the listing never ended");
}

fn views(q: Arc<dyn Both>) {
    fill(&*q);
    let options = Options { allow_writes: true, ..Options::default() };
    let server = dashboard::serve(q.clone(), "127.0.0.1:0".parse().unwrap(), options).unwrap();
    let addr = server.addr();

    let (status, stats) = call(addr, "GET", "/api/stats", None, None);
    assert_eq!(status, 200);
    assert_eq!((stats["pending"].as_u64(), stats["dead"].as_u64()), (Some(5), Some(50)), "{stats}");
    assert!(stats["oldest_due_ns"].as_u64().is_some());

    // Paging: every dead job once.
    let mut dead = all_pages(addr, "state=dead");
    assert_eq!(dead.len(), 50);
    dead.sort_unstable();
    dead.dedup();
    assert_eq!(dead.len(), 50, "no job twice");
    // Filters: a kind, text in the error (case ignored), both.
    assert_eq!(all_pages(addr, "state=dead&kind=report.daily").len(), 20);
    assert_eq!(all_pages(addr, "state=dead&error=SMTP%20550").len(), 30);
    assert_eq!(all_pages(addr, "state=dead&kind=report.daily&error=smtp").len(), 0);
    assert_eq!(all_pages(addr, "state=pending&kind=email.send").len(), 5);
    let (status, _) = call(addr, "GET", "/api/jobs?state=sleeping", None, None);
    assert_eq!(status, 400);

    // One job.
    let (_, page) = call(addr, "GET", "/api/jobs?state=dead&kind=email.send&limit=1", None, None);
    let id = ids(&page)[0];
    let (status, job) = call(addr, "GET", &format!("/api/jobs/{id}"), None, None);
    assert_eq!(status, 200);
    assert_eq!((job["state"].as_str(), job["kind"].as_str()), (Some("dead"), Some("email.send")), "{job}");
    assert_eq!(job["last_error"].as_str(), Some("smtp 550: no such user"));
    assert!(job["died_at_ns"].as_u64().is_some(), "when it died: {job}");
    assert!(job["shown"]["payload"].as_str().unwrap().starts_with("payload "), "{job}");
    assert_eq!(call(addr, "GET", "/api/jobs/999999", None, None).0, 404);

    // By kind.
    let (_, kinds) = call(addr, "GET", "/api/kinds", None, None);
    let of = |k: &str| kinds.as_array().unwrap().iter().find(|x| x["kind"] == k).cloned().unwrap();
    assert_eq!(
        (of("email.send")["dead"].as_u64(), of("email.send")["pending"].as_u64()),
        (Some(30), Some(5))
    );
    assert_eq!(of("report.daily")["dead"].as_u64(), Some(20));

    // Throughput: processed and failed, stored by the queue.
    let (status, t) = call(addr, "GET", "/api/throughput?minutes=60", None, None);
    assert_eq!(status, 200, "{t}");
    let sum = |field: &str| {
        t["minutes"].as_array().unwrap().iter().map(|m| m[field].as_u64().unwrap()).sum::<u64>()
    };
    assert_eq!((sum("processed"), sum("failed")), (4, 50), "{t}");
    let rate = |k: &str| t["kinds"].as_array().unwrap().iter().find(|x| x["kind"] == k).cloned().unwrap();
    assert_eq!(
        (rate("email.send")["processed"].as_u64(), rate("email.send")["failed"].as_u64()),
        (Some(4), Some(30))
    );
    assert!((rate("email.send")["failure_rate"].as_f64().unwrap() - 30.0 / 34.0).abs() < 1e-9, "{t}");
    assert_eq!(rate("report.daily")["failure_rate"].as_f64(), Some(1.0));
    // The backlog, sampled by the queue itself at `fill`'s first reserve,
    // before the dashboard was started.
    let (status, samples) = call(addr, "GET", "/api/samples?minutes=60", None, None);
    assert_eq!(status, 200, "{samples}");
    let first = &samples.as_array().unwrap()[0];
    assert_eq!(first["pending"].as_u64(), Some(55), "before the first reserve took anything: {samples}");
    let (_, page) = call(addr, "GET", "/", None, None);
    let page = page.as_str().unwrap_or_default().to_string();
    assert!(
        page.contains("<svg id=throughput") && page.contains("88.2 %"),
        "the overview's chart and rate: {page}"
    );
    assert!(
        page.contains("<svg id=chart") && !page.contains("<span id=samples>0</span>"),
        "the pending and lateness chart from the stored samples: {page}"
    );

    // Bulk: a confirmation step, then the result.
    let t = token(addr);
    let ask = json!({"action": "requeue", "state": "dead", "kind": "report.daily"});
    assert_eq!(call(addr, "POST", "/api/bulk", Some(&ask), None).0, 403, "no token");
    let (status, r) = call(addr, "POST", "/api/bulk", Some(&ask), Some(&t));
    assert_eq!(status, 200, "{r}");
    assert_eq!((r["matching"].as_u64(), r["changed"].as_u64()), (Some(20), Some(0)));
    assert_eq!(r["message"].as_str(), Some("requeue every dead (of kind report.daily): 20 jobs?"));
    assert_eq!(JobQueue::stats(&*q).unwrap().dead, 50, "nothing changed before the confirmation");
    let mut confirm = ask.clone();
    confirm["confirm"] = json!(true);
    let (_, r) = call(addr, "POST", "/api/bulk", Some(&confirm), Some(&t));
    assert_eq!(r["message"].as_str(), Some("requeued 20 jobs"), "{r}");
    assert_eq!(JobQueue::stats(&*q).unwrap().dead, 30);
    // Selected jobs, one of which left the dead set meanwhile.
    let (_, page) = call(addr, "GET", "/api/jobs?state=dead&limit=2", None, None);
    let two = ids(&page);
    assert!(JobQueue::requeue_dead(&*q, JobId(two[1]), SystemTime::now()).unwrap());
    let pick = json!({"action": "delete", "state": "dead", "ids": two, "confirm": true});
    let (_, r) = call(addr, "POST", "/api/bulk", Some(&pick), Some(&t));
    assert_eq!(
        r["message"].as_str().unwrap(),
        format!("deleted 1 of 2 jobs; job {} was pending meanwhile", two[1]),
        "{r}"
    );
    assert_eq!(q.job(JobId(two[0])).unwrap(), None);
    assert_eq!(q.job(JobId(two[1])).unwrap().map(|j| j.state), Some(JobState::Pending));
    let none = json!({"action": "delete", "state": "dead", "ids": [two[0]], "confirm": true});
    let (_, r) = call(addr, "POST", "/api/bulk", Some(&none), Some(&t));
    assert_eq!(r["message"].as_str().unwrap(), format!("nothing changed: job {} was gone", two[0]));
    let leased = json!({"action": "delete", "state": "leased"});
    assert_eq!(call(addr, "POST", "/api/bulk", Some(&leased), Some(&t)).0, 400, "a leased job is a worker's");
    server.shutdown();
}

#[test]
fn the_api_on_an_embedded_file() {
    let dir = std::env::temp_dir().join(format!("delayq-api-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    views(Arc::new(DurableQueue::open(dir.join("jobs.redb")).unwrap()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_api_on_redis() {
    if !redis_server::available() {
        return;
    }
    let server = redis_server::RedisServer::start("jobs-api");
    views(Arc::new(RedisQueue::connect(&server.url(), "api").unwrap()));
}

#[test]
fn the_api_on_a_redis_cluster() {
    if !redis_server::available() {
        return;
    }
    let cluster = redis_server::RedisCluster::start("jobs-api");
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let q = RedisQueue::builder().retry_for(Duration::from_secs(20)).connect_cluster(&urls, "api").unwrap();
    views(Arc::new(q));
}

#[test]
fn the_api_on_postgres() {
    if !pg_server::available() {
        return;
    }
    let server = pg_server::PgServer::start("jobs-api");
    views(Arc::new(PgQueue::connect(&server.url(), "api").unwrap()));
}

/// The dashboard's reads of an embedded file do not go through its writer
/// thread (defect 7: with a page load every 0.5 s the application's send
/// p99 went from 4-10 ms to 80 ms when they did). The writer is held in a
/// commit (by a metrics recorder, `held_writer`) while the overview, a list
/// and every API read are loaded: each answers. Were one queued to the
/// writer, it would wait until the gate opens, which happens only after the
/// loads (or the 60 s limit, a failure). No clock decides the outcome.
#[test]
fn pages_and_api_reads_answer_while_the_writer_thread_is_held_in_a_commit() {
    let dir = std::env::temp_dir().join(format!("delayq-api-held-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let gate = Arc::new(held_writer::Gate::default());
    let recorder = held_writer::GateRecorder(gate.clone());
    let q = metrics::with_local_recorder(&recorder, || DurableQueue::open(dir.join("jobs.redb"))).unwrap();
    fill(&q);
    let server =
        dashboard::serve(Arc::new(q.clone()), "127.0.0.1:0".parse().unwrap(), Options::default()).unwrap();
    let addr = server.addr();

    gate.shut();
    let sender = {
        let q = q.clone();
        std::thread::spawn(move || q.send_after(b"held", Duration::from_secs(3600)))
    };
    assert!(gate.wait_held(Duration::from_secs(60)), "the writer never committed the send");
    let (tx, rx) = std::sync::mpsc::channel();
    let paths = [
        "/",
        "/list?state=dead&kind=email.send",
        "/api/stats",
        "/api/jobs?state=dead&limit=5",
        "/api/jobs/1",
        "/api/kinds",
        "/api/throughput",
        "/api/samples",
    ];
    let reader = std::thread::spawn(move || {
        let answers: Vec<(u16, Value)> = paths.iter().map(|p| call(addr, "GET", p, None, None)).collect();
        let _ = tx.send(answers);
    });
    let answered = rx.recv_timeout(Duration::from_secs(60));
    let writer_still_held = !sender.is_finished();
    gate.open();
    let answers = answered.expect("a page load waited for the held writer thread");
    assert!(writer_still_held, "the writer was held while the pages loaded");
    for (path, (status, body)) in paths.iter().zip(&answers) {
        assert_eq!(*status, 200, "{path}: {body}");
    }
    // The held send is committed (the writer records a commit's time after
    // it), so the reads count it; its caller is not answered yet.
    assert_eq!(answers[2].1["pending"].as_u64(), Some(6), "{}", answers[2].1);
    sender.join().unwrap().unwrap();
    reader.join().unwrap();
    server.shutdown();
    drop(q);
    std::fs::remove_dir_all(&dir).unwrap();
}
