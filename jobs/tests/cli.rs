//! The `delayq-jobs` binary's commands against both backends: an embedded
//! file, and a Redis queue on a private `redis-server` (127.0.0.1, a free
//! port, started and stopped here). Also: a file held by another process
//! (a child of this test) is a clear error, naming that process and its
//! dashboard when its sidecar says.

#[path = "../../durable/tests/redis_server/mod.rs"]
mod redis_server;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use delayq_durable::{DurableQueue, Inspect, JobId, JobState, RedisQueue};

/// One backend: how to open it in this process, and the CLI's arguments for it.
struct Backend {
    open: Box<dyn Fn() -> Arc<dyn Inspect>>,
    args: Vec<String>,
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("delayq-jobs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn embedded(dir: &Path) -> Backend {
    let path = dir.join("jobs.redb");
    let p = path.clone();
    Backend {
        open: Box::new(move || Arc::new(DurableQueue::open(&p).unwrap())),
        args: vec!["--db".into(), path.display().to_string()],
    }
}

fn redis(url: String, name: &str) -> Backend {
    let (u, n) = (url.clone(), name.to_string());
    Backend {
        open: Box::new(move || Arc::new(RedisQueue::connect(&u, &n).unwrap())),
        args: vec!["--redis".into(), url, "--name".into(), name.into()],
    }
}

struct Run {
    ok: bool,
    out: String,
    err: String,
}

fn cli(b: &Backend, args: &[&str]) -> Run {
    let o = Command::new(env!("CARGO_BIN_EXE_delayq-jobs"))
        .args(&b.args)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Run {
        ok: o.status.success(),
        out: String::from_utf8_lossy(&o.stdout).into_owned(),
        err: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn ok(b: &Backend, args: &[&str]) -> String {
    let r = cli(b, args);
    assert!(r.ok, "{args:?} failed: {}", r.err);
    r.out
}

fn refused(b: &Backend, args: &[&str]) -> String {
    let r = cli(b, args);
    assert!(!r.ok, "{args:?} should fail; printed {}", r.out);
    r.err
}

/// A queue with one job in each state: returns (pending, leased, dead).
fn fill(b: &Backend) -> (JobId, JobId, JobId) {
    let q = (b.open)();
    let now = SystemTime::now();
    let dead = q.send_kind_at("email.send", b"to ana\x1b[31m\xff", now).unwrap();
    let leased = q.send_at(b"leased one", now + Duration::from_millis(1)).unwrap();
    let pending = q.send_at(b"later", now + Duration::from_secs(3600)).unwrap();
    let job = q.reserve(Duration::from_secs(600)).unwrap();
    assert_eq!(job.id(), dead);
    assert!(q.kill(&job, "smtp: 550\nno such user").unwrap());
    let job = q.reserve(Duration::from_secs(600)).unwrap();
    assert_eq!(job.id(), leased);
    (pending, leased, dead)
}

fn state(b: &Backend, id: JobId) -> Option<JobState> {
    (b.open)().job(id).unwrap().map(|j| j.state)
}

fn commands(b: &Backend) {
    let (pending, leased, dead) = fill(b);

    let stats = ok(b, &["stats"]);
    assert!(
        stats.contains("pending  1\n") && stats.contains("leased   1\n") && stats.contains("dead     1\n"),
        "{stats}"
    );
    assert!(stats.contains("next due in "), "{stats}");

    let list = ok(b, &["list", "--state", "dead"]);
    let row = list.lines().find(|l| l.trim_start().starts_with(&dead.0.to_string())).expect(&list);
    assert!(row.contains("email.send") && row.contains("smtp: 550\\nno such user"), "{row}");
    assert!(row.contains("to ana\\x1b[31m\\xff") && !row.contains('\x1b'), "escaped preview: {row}");
    assert!(row.contains(" 12 "), "payload size: {row}");
    assert!(list.ends_with("(1 dead job shown)\n"), "{list}");
    let list = ok(b, &["list", "--state", "reserved"]);
    assert!(list.contains("leased one") && list.contains("(1 leased job shown)"), "{list}");
    let list = ok(b, &["list", "--state", "pending", "--limit", "0"]);
    assert!(list.contains("(0 pending jobs shown)"), "{list}");

    let show = ok(b, &["show", &dead.0.to_string()]);
    assert!(show.contains("state       dead\n") && show.contains("kind        email.send\n"), "{show}");
    assert!(show.contains("attempt     1\n"), "{show}");
    let show = ok(b, &["show", &leased.0.to_string()]);
    assert!(show.contains("state       leased\n") && show.contains("lease ends  "), "{show}");
    assert!(refused(b, &["show", "999999"]).contains("no job 999999"));

    // The guarded delete under the commands: only in the states named.
    {
        let q = (b.open)();
        assert!(!q.cancel_in(leased, &[JobState::Pending, JobState::Dead]).unwrap());
        assert!(!q.cancel_in(JobId(999_999), &[JobState::Pending]).unwrap());
        assert_eq!(q.job(leased).unwrap().map(|j| j.state), Some(JobState::Leased));
    }
    // A leased job is not cancelled without --force, and says why.
    let err = refused(b, &["cancel", &leased.0.to_string()]);
    assert!(err.contains("is leased") && err.contains("--force"), "{err}");
    assert_eq!(state(b, leased), Some(JobState::Leased));
    let out = ok(b, &["cancel", "--force", &leased.0.to_string()]);
    assert!(out.contains("which was leased"), "{out}");
    assert_eq!(state(b, leased), None);

    // Requeue takes only a dead job.
    let err = refused(b, &["requeue", &pending.0.to_string()]);
    assert!(err.contains("is pending, not dead"), "{err}");
    ok(b, &["requeue", &dead.0.to_string()]);
    assert_eq!(state(b, dead), Some(JobState::Pending));
    ok(b, &["cancel", &pending.0.to_string()]);
    assert_eq!(state(b, pending), None);
    ok(b, &["cancel", &dead.0.to_string()]);

    // Many dead jobs: requeue --all-dead, then purge --dead.
    let kill_all = |n: usize| {
        let q = (b.open)();
        let jobs: Vec<(&[u8], SystemTime)> = (0..n).map(|_| (&b"x"[..], SystemTime::now())).collect();
        q.send_many(&jobs).unwrap();
        let mut killed = 0;
        while killed < n {
            for job in q.reserve_many(Duration::from_secs(60), n, Duration::from_secs(5)).unwrap() {
                assert!(q.kill(&job, "boom").unwrap());
                killed += 1;
            }
        }
    };
    kill_all(1500);
    assert!(ok(b, &["requeue", "--all-dead"]).contains("requeued 1500 dead jobs"));
    let s = (b.open)().stats().unwrap();
    assert_eq!((s.pending, s.dead), (1500, 0));
    {
        let q = (b.open)();
        for j in q.jobs(JobState::Pending, usize::MAX).unwrap() {
            q.cancel(j.id).unwrap();
        }
    }
    kill_all(7);
    assert!(ok(b, &["purge", "--dead"]).contains("deleted 7 dead jobs"));
    let s = (b.open)().stats().unwrap();
    assert_eq!((s.pending, s.leased, s.dead), (0, 0, 0));
}

#[test]
fn commands_on_an_embedded_file() {
    let dir = temp_dir("cli");
    commands(&embedded(&dir));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn commands_on_redis() {
    if !redis_server::available() {
        return;
    }
    let server = redis_server::RedisServer::start("jobs-cli");
    commands(&redis(server.url(), "cli"));
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = temp_dir("bad");
    let missing = Backend {
        open: Box::new(|| unreachable!()),
        args: vec!["--db".into(), dir.join("nope.redb").display().to_string()],
    };
    assert!(refused(&missing, &["stats"]).contains("no database at"));
    assert!(!dir.join("nope.redb").exists(), "the CLI never creates a file");
    let b = embedded(&dir);
    drop((b.open)());
    assert!(
        refused(&b, &["requeue"]).contains("required arguments were not provided"),
        "requeue needs an id or --all-dead"
    );
    assert!(refused(&Backend { open: Box::new(|| unreachable!()), args: vec![] }, &["stats"])
        .contains("name a queue"));
    let err = refused(&b, &["serve", "--bind", "0.0.0.0:0"]);
    assert!(err.contains("not a loopback address") && err.contains("--allow-remote"), "{err}");
    let no_server = redis("redis://127.0.0.1:1".into(), "x");
    assert!(refused(&no_server, &["stats"]).contains("connecting to redis://127.0.0.1:1"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Run as a child process by the tests below (a no-op otherwise): holds the
/// file named in `DELAYQ_JOBS_HOLD` (and serves its dashboard with a sidecar
/// when `DELAYQ_JOBS_SIDECAR` is set), prints `held URL`, and lets go when
/// its stdin closes.
#[test]
fn hold_helper() {
    let Some(path) = std::env::var_os("DELAYQ_JOBS_HOLD") else { return };
    let path = PathBuf::from(path);
    let q = DurableQueue::open(&path).unwrap();
    let server = std::env::var_os("DELAYQ_JOBS_SIDECAR").map(|_| {
        let options = delayq_jobs::dashboard::Options { allow_writes: false, sidecar: Some(path.clone()) };
        delayq_jobs::dashboard::serve(Arc::new(q.clone()), "127.0.0.1:0".parse().unwrap(), options).unwrap()
    });
    // Straight to the pipe: libtest captures `println!`.
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "held {}", server.as_ref().map_or(String::new(), |s| s.url())).unwrap();
    stdout.flush().unwrap();
    drop(stdout);
    let mut line = String::new();
    while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {}
    drop(server);
}

fn held_by_child(sidecar: bool) {
    let dir = temp_dir(if sidecar { "held-sidecar" } else { "held" });
    let b = embedded(&dir);
    drop((b.open)());
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "hold_helper", "--nocapture", "--test-threads=1"])
        .env("DELAYQ_JOBS_HOLD", dir.join("jobs.redb"))
        .envs(sidecar.then_some(("DELAYQ_JOBS_SIDECAR", "1")))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = loop {
        let l = lines.next().expect("the child holds the file").unwrap();
        // libtest's "test hold_helper ... " comes first on the line.
        if let Some((_, url)) = l.split_once("held ") {
            break url.trim().to_string();
        }
    };
    let err = refused(&b, &["stats"]);
    assert!(err.contains("is held by another process"), "{err}");
    if sidecar {
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        assert!(
            err.contains(&format!("process {} holds it; its dashboard is at {url}", child.id())),
            "{err}"
        );
    } else {
        assert!(err.contains("stop that process"), "{err}");
    }
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    assert!(!delayq_jobs::sidecar::path_for(&dir.join("jobs.redb")).exists(), "the sidecar is removed");
    assert!(ok(&b, &["stats"]).contains("pending  0"), "let go: the CLI opens it");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_held_by_another_process_is_a_clear_error() {
    held_by_child(false);
}

#[test]
fn a_file_held_by_a_dashboard_names_its_process_and_address() {
    held_by_child(true);
}

#[test]
fn serve_holds_the_file_and_the_cli_points_to_it() {
    let dir = temp_dir("serve");
    let b = embedded(&dir);
    drop((b.open)());
    let mut child = Command::new(env!("CARGO_BIN_EXE_delayq-jobs"))
        .args(&b.args)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let url = first.trim().rsplit(" at ").next().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{first}");
    let err = refused(&b, &["stats"]);
    assert!(err.contains(&format!("process {} holds it; its dashboard is at {url}", child.id())), "{err}");
    // The page answers (a plain request on loopback).
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut page = String::new();
    std::io::Read::read_to_string(&mut s, &mut page).unwrap();
    assert!(page.starts_with("HTTP/1.1 200") && page.contains("read-only"), "{page}");
    child.kill().unwrap();
    child.wait().unwrap();
    // A sidecar left by a killed process is ignored: its process is gone.
    assert!(ok(&b, &["stats"]).contains("pending  0"));
    std::fs::remove_dir_all(&dir).unwrap();
}
