//! Issue 33's primitives on one private `redis-server`: priorities and the
//! reserve order (with aging), uniqueness (a 16-thread race of one key),
//! the schedule store (16 threads firing one tick), reserve_excluding; plus
//! what only one server shows: a queue written before priorities, and the
//! uniqueness entries going with their jobs. The same cases run on a
//! cluster in `redis_cluster.rs`.
#![cfg(feature = "redis")]

mod redis_cases;
mod redis_server;

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use delayq_durable::{RedisBuilder, RedisQueue, SendOptions, Unique};
use redis_server::{unique, RedisServer};

fn shared() -> Option<&'static RedisServer> {
    static SHARED: OnceLock<Option<&'static RedisServer>> = OnceLock::new();
    *SHARED.get_or_init(|| {
        redis_server::available().then(|| redis_server::start_shared(|| RedisServer::start("features")))
    })
}

fn connect(b: RedisBuilder, name: &str) -> RedisQueue {
    b.connect(&shared().unwrap().url(), name).unwrap()
}

macro_rules! cases {
    ($($name:ident $(($($arg:expr),*))?;)*) => {$(
        #[test]
        fn $name() {
            if shared().is_none() {
                eprintln!("redis-server not found: skipped");
                return;
            }
            redis_cases::$name(&connect $($(, $arg)*)?);
        }
    )*};
}

cases! {
    due_jobs_are_reserved_by_priority_then_deadline_then_id;
    priorities_never_make_a_job_early;
    aging_lets_an_old_low_priority_job_out_before_a_newer_urgent_one;
    a_unique_key_is_held_by_state_and_period;
    bad_options_store_nothing;
    racing_sends_of_one_key_store_one_job(16, 1000);
    the_schedule_store_keeps_one_pending_tick_job_and_fires_once;
    racing_fires_of_one_tick_fire_once(16);
    reserve_excluding_skips_excluded_kinds_exactly_and_sleeps;
    a_job_left_by_reserve_excluding_goes_to_a_blocked_plain_reserve;
}

fn raw() -> redis::Connection {
    redis::Client::open(shared().unwrap().url()).unwrap().get_connection().unwrap()
}

const LEASE: Duration = Duration::from_secs(30);

/// Jobs stored by the backend before priorities (a hash without
/// `priority`, only in `pending`) are reserved, as priority 0, in deadline
/// order among the new ones: the first reserve rebuilds the priority sets.
#[test]
fn a_queue_written_before_priorities_is_reindexed_and_reads_as_priority_0() {
    let Some(_) = shared() else { return };
    let name = unique("old-format");
    let q = connect(RedisQueue::builder(), &name);
    let mut con = raw();
    let p = format!("delayq:{{{name}}}:");
    let now_us = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_micros() as i64;
    for (id, at) in [(1, now_us - 30_000_000), (2, now_us - 10_000_000)] {
        let _: () = redis::cmd("HSET")
            .arg(format!("{p}job:{id}"))
            .arg(&["payload", "old", "kind", "k", "attempt", "0", "dead_after", "5", "token", "0"])
            .arg(&["lease_until", "0", "state", "p", "deadline"])
            .arg(at)
            .query(&mut con)
            .unwrap();
        let _: () = redis::cmd("ZADD").arg(format!("{p}pending")).arg(at).arg(id).query(&mut con).unwrap();
    }
    let _: () = redis::cmd("SET").arg(format!("{p}seq")).arg(2).query(&mut con).unwrap();
    let at = SystemTime::now() - Duration::from_secs(20);
    let lax = q.send_with(b"new", at, &SendOptions::new().priority(1)).unwrap().id();
    let urgent = q.send_with(b"new", at, &SendOptions::new()).unwrap().id();
    let order: Vec<u64> = (0..4).map(|_| q.reserve(LEASE).unwrap()).map(|j| j.id().0).collect();
    assert_eq!(order, [1, urgent.0, 2, lax.0]);
    assert_eq!(q.stats().unwrap().leased, 4);
}

/// A key's entry goes with its job (ack, cancel, death), and entries whose
/// period ran out are swept by later unique sends: no unbounded growth.
#[test]
fn uniqueness_entries_go_with_their_jobs_and_expired_periods_are_swept() {
    let Some(_) = shared() else { return };
    let name = unique("uniq-gc");
    let q = connect(RedisQueue::builder(), &name);
    let mut con = raw();
    let entries = |con: &mut redis::Connection| -> (i64, i64) {
        let p = format!("delayq:{{{name}}}:");
        let h: i64 = redis::cmd("HLEN").arg(format!("{p}uniq")).query(con).unwrap();
        let z: i64 = redis::cmd("ZCARD").arg(format!("{p}uexp")).query(con).unwrap();
        (h, z)
    };
    let now = SystemTime::now();
    for i in 0..50 {
        q.send_with(b"x", now, &SendOptions::new().unique(Unique::new(format!("k{i}")))).unwrap();
    }
    assert_eq!(entries(&mut con), (50, 0));
    let jobs = q.reserve_many(LEASE, 50, Duration::from_secs(1)).unwrap();
    assert_eq!(jobs.len(), 50);
    q.ack_many(&jobs[..20]).unwrap();
    for j in &jobs[20..40] {
        q.cancel(j.id()).unwrap();
    }
    for j in &jobs[40..] {
        q.kill(j, "x").unwrap();
    }
    assert_eq!(entries(&mut con), (0, 0));
    // With a period: kept past the job, swept after.
    let per =
        |i: usize| SendOptions::new().unique(Unique::new(format!("p{i}")).period(Duration::from_millis(500)));
    for i in 0..30 {
        let id = q.send_with(b"x", now, &per(i)).unwrap().id();
        q.cancel(id).unwrap();
    }
    assert_eq!(entries(&mut con), (30, 30));
    std::thread::sleep(Duration::from_millis(600));
    // Each unique send sweeps up to 20.
    q.send_with(b"x", now, &per(100)).unwrap();
    q.send_with(b"x", now, &per(101)).unwrap();
    assert_eq!(entries(&mut con), (2, 2));
}
