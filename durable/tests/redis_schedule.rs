//! A recurring schedule fired by four worker processes on one Redis queue:
//! 60 ticks of a 1 s schedule become exactly 60 jobs, each tick once, none
//! early. The processes are this test binary run again as children; the
//! server is private, on a free loopback port.
#![cfg(feature = "redis")]

mod redis_server;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_durable::{JobQueue, Missed, RedisQueue, Schedule, Worker};
use redis_server::{unique, RedisServer};

fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

fn every_second() -> Schedule {
    Schedule::every(Duration::from_secs(1)).unwrap().missed(Missed::All(100))
}

/// Runs as a worker process when `DELAYQ_SCHEDULE_CHILD` is set: registers
/// the schedule (as every process of an application would at start), runs a
/// worker that prints each job it handles, and stops after the given time.
#[test]
fn child_worker() {
    let Ok(secs) = std::env::var("DELAYQ_SCHEDULE_CHILD") else { return };
    let url = std::env::var("DELAYQ_REDIS_URL").unwrap();
    let name = std::env::var("DELAYQ_REDIS_QUEUE").unwrap();
    let q = Arc::new(RedisQueue::connect(&url, &name).unwrap());
    q.schedule_raw("beat", &every_second(), "beat", b"").unwrap();
    // libtest printed "test child_worker ... " without a newline: end that line.
    println!();
    let w = Worker::builder(q.clone())
        .handle_raw("beat", |job, _| {
            // The host's clock, read as the handler starts; the tick is the
            // whole second the job is due at (its deadline as reported is
            // the server's, mapped to this client's clock).
            let tick = (nanos(job.deadline()) + 500_000_000) / 1_000_000_000;
            println!("B {tick} {} {}", nanos(SystemTime::now()), job.id().0);
            Ok::<(), String>(())
        })
        .concurrency(2)
        .start()
        .unwrap();
    thread::sleep(Duration::from_secs(secs.parse().unwrap()));
    let report = w.shutdown(Duration::from_secs(5));
    println!("STATS {}", report.stats.scheduled);
}

#[test]
fn four_worker_processes_fire_each_tick_of_a_schedule_once() {
    if !redis_server::available() {
        return;
    }
    let server = RedisServer::start("schedule");
    let queue = unique("sched");
    let q = RedisQueue::connect(&server.url(), &queue).unwrap();
    q.schedule_raw("beat", &every_second(), "beat", b"").unwrap();
    let first = q.schedules().unwrap()[0].next_run.unwrap();
    let first_tick = nanos(first) / 1_000_000_000;
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "child_worker", "--nocapture", "--test-threads=1"])
                .env("DELAYQ_SCHEDULE_CHILD", "66")
                .env("DELAYQ_REDIS_URL", server.url())
                .env("DELAYQ_REDIS_QUEUE", &queue)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Let 60 ticks fire (first .. first + 59), then pause before the 61st.
    let pause_at = first + Duration::from_millis(59_500);
    thread::sleep(pause_at.duration_since(SystemTime::now()).unwrap_or_default());
    assert!(q.pause_schedule("beat").unwrap());
    let mut runs: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    let mut scheduled = 0;
    for child in children {
        let mut child = child;
        let out = BufReader::new(child.stdout.take().unwrap());
        for line in out.lines() {
            let line = line.unwrap();
            if let Some(rest) = line.strip_prefix("B ") {
                let v: Vec<u64> = rest.split(' ').map(|x| x.parse().unwrap()).collect();
                runs.entry(v[0]).or_default().push((v[1], v[2]));
            } else if let Some(n) = line.strip_prefix("STATS ") {
                scheduled += n.parse::<u64>().unwrap();
            }
        }
        assert!(child.wait().unwrap().success(), "a worker process failed");
    }
    let ticks: Vec<u64> = runs.keys().copied().collect();
    let want: Vec<u64> = (first_tick..first_tick + 60).collect();
    assert_eq!(ticks, want, "the ticks that ran");
    for (tick, handled) in &runs {
        assert_eq!(handled.len(), 1, "tick {tick} ran {} times: {handled:?}", handled.len());
        let (at, _) = handled[0];
        assert!(at >= tick * 1_000_000_000, "tick {tick} ran early, at {at}");
    }
    assert_eq!(scheduled, 60, "jobs stored by the four workers' firings");
    assert!(q.schedules().unwrap()[0].paused);
}
