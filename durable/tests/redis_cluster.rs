//! The Redis backend on a real Redis Cluster: three masters on free loopback
//! ports, started, joined (`redis-cli --cluster create`) and stopped here.
//! The conformance suite (through the blocking client, and with feature
//! `redis-async` through the async one), queues spread over every master,
//! and a master killed and restarted mid-stream losing nothing.
#![cfg(feature = "redis")]

#[cfg(feature = "redis-async")]
mod async_adapter;
mod conformance;
mod redis_cases;
mod redis_server;

use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use conformance::{ms, Opts};
use delayq_durable::{DurableError, RedisQueue};
use redis_server::{unique, RedisCluster};

const LEASE: Duration = Duration::from_secs(30);

/// The cluster the conformance cases share (each case uses its own queue).
fn shared() -> Option<&'static RedisCluster> {
    static SHARED: OnceLock<Option<&'static RedisCluster>> = OnceLock::new();
    *SHARED.get_or_init(|| {
        redis_server::available().then(|| redis_server::start_shared(|| RedisCluster::start("shared")))
    })
}

fn connect(cluster: &RedisCluster, name: &str) -> RedisQueue {
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    RedisQueue::builder().retry_for(Duration::from_secs(20)).connect_cluster(&urls, name).unwrap()
}

fn open_cluster(opts: Opts) -> Option<RedisQueue> {
    let cluster = shared()?;
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    Some(
        RedisQueue::builder()
            .max_attempts(opts.max_attempts)
            .max_payload(opts.max_payload)
            .connect_cluster(&urls, &unique("conf"))
            .unwrap(),
    )
}

conformance_tests!(super::open_cluster);
feature_tests!(super::open_cluster);

/// The conformance suite through `AsyncRedisQueue` on the cluster (its
/// async cluster connection), on a tokio runtime's `block_on`.
#[cfg(feature = "redis-async")]
mod async_client {
    use std::sync::Arc;

    use super::async_adapter::{BlockOn, Tokio};
    use super::{conformance, shared, unique, Opts};
    use delayq_durable::{AsyncJobQueue, AsyncRedisQueue, RedisQueue};

    fn open_async(opts: Opts) -> Option<BlockOn<AsyncRedisQueue, Tokio>> {
        let cluster = shared()?;
        let urls = cluster.urls();
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        let queue = RedisQueue::builder()
            .max_attempts(opts.max_attempts)
            .max_payload(opts.max_payload)
            .connect_cluster(&urls, &unique("aconf"))
            .unwrap();
        Some(BlockOn {
            q: AsyncRedisQueue::new(queue).unwrap(),
            exec: Arc::new(Tokio::new()),
            _keep: Box::new(()),
        })
    }

    crate::conformance_tests!(super::open_async);
    crate::send_with_tests!(super::open_async);

    /// `AsyncRedisQueue::connect_cluster`: a job round trip, on the master
    /// that owns the queue's slot.
    #[test]
    fn connect_cluster_round_trip() {
        let Some(cluster) = shared() else { return };
        let urls = cluster.urls();
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        let name = unique("aconnect");
        let q = AsyncRedisQueue::connect_cluster(&urls, &name).unwrap();
        let rt = Tokio::new();
        let id = rt.0.block_on(q.send_after(b"x", super::ms(0))).unwrap();
        let job = rt.0.block_on(q.reserve(super::LEASE)).unwrap();
        assert_eq!((job.id(), job.payload()), (id, b"x".as_slice()));
        assert!(rt.0.block_on(q.ack(&job)).unwrap());
        let s = rt.0.block_on(q.stats()).unwrap();
        assert_eq!((s.pending, s.leased, s.dead), (0, 0, 0));
        let owner = super::owner(cluster, &name);
        assert!(
            super::keys_on(cluster, owner).iter().any(|k| k.contains(&name)),
            "the queue's keys are on its master"
        );
    }
}

/// The index of the node that owns queue `name`'s slot: the one master that
/// answers a command on its keys instead of redirecting (`MOVED`).
fn owner(cluster: &RedisCluster, name: &str) -> usize {
    let key = format!("delayq:{{{name}}}:seq");
    let owners: Vec<usize> = (0..cluster.nodes.len())
        .filter(|&i| {
            let mut con = redis::Client::open(cluster.nodes[i].url()).unwrap().get_connection().unwrap();
            redis::cmd("EXISTS").arg(&key).query::<i64>(&mut con).is_ok()
        })
        .collect();
    assert_eq!(owners.len(), 1, "exactly one master owns {key}: {owners:?}");
    owners[0]
}

/// Keys under `delayq:` on the node, by `SCAN` (a node holds only its slots).
fn keys_on(cluster: &RedisCluster, node: usize) -> Vec<String> {
    let mut con = redis::Client::open(cluster.nodes[node].url()).unwrap().get_connection().unwrap();
    let keys = redis::cmd("SCAN").cursor_arg(0).arg("MATCH").arg("delayq:*").clone().iter::<String>(&mut con);
    keys.unwrap().collect::<Result<_, _>>().unwrap()
}

#[test]
fn queues_spread_over_every_master_and_each_keeps_its_own_jobs() {
    let Some(cluster) = shared() else { return };
    // Names chosen by where their slot is: one queue per master.
    let mut names: Vec<Option<String>> = vec![None; cluster.nodes.len()];
    for i in 0.. {
        let name = format!("spread-{i}");
        let at = owner(cluster, &name);
        names[at].get_or_insert(name);
        if names.iter().all(Option::is_some) {
            break;
        }
        assert!(i < 1000, "no name landed on some master");
    }
    let names: Vec<String> = names.into_iter().map(Option::unwrap).collect();
    let queues: Vec<RedisQueue> = names.iter().map(|n| connect(cluster, n)).collect();
    let n = 50u32;
    thread::scope(|s| {
        for (qi, q) in queues.iter().enumerate() {
            s.spawn(move || {
                for i in 0..n {
                    q.send_after(format!("{qi}:{i}").as_bytes(), ms(0)).unwrap();
                }
            });
        }
    });
    // Each master holds its queue's keys and none of the others' (the
    // conformance cases' queues share this cluster: only these are counted).
    for node in 0..names.len() {
        let keys = keys_on(cluster, node);
        let held: Vec<&String> = names
            .iter()
            .filter(|n| keys.iter().any(|k| k.starts_with(&format!("delayq:{{{n}}}:"))))
            .collect();
        assert_eq!(held, [&names[node]], "master {node} holds the keys of exactly its queue");
    }
    thread::scope(|s| {
        for (qi, q) in queues.iter().enumerate() {
            s.spawn(move || {
                let mut got = Vec::new();
                while got.len() < n as usize {
                    let job = q.reserve_timeout(LEASE, conformance::PATIENCE).unwrap().expect("a job");
                    got.push(String::from_utf8(job.payload().to_vec()).unwrap());
                    assert!(q.ack(&job).unwrap());
                }
                got.sort();
                let mut want: Vec<String> = (0..n).map(|i| format!("{qi}:{i}")).collect();
                want.sort();
                assert_eq!(got, want, "queue {qi} got exactly its own jobs");
                assert_eq!(q.len().unwrap(), 0);
            });
        }
    });
}

#[test]
fn a_master_killed_and_restarted_mid_stream_keeps_every_sent_job() {
    if !redis_server::available() {
        return;
    }
    // A cluster of its own: this test kills one of its masters.
    let cluster = RedisCluster::start("restart");
    let name = unique("restart");
    let victim = owner(&cluster, &name);
    let q = connect(&cluster, &name);
    let r = conformance::sends_survive(&q, "cluster restart", || {
        thread::sleep(Duration::from_millis(800));
        cluster.nodes[victim].kill();
        thread::sleep(Duration::from_millis(300));
        cluster.nodes[victim].restart();
        cluster.wait_ready();
    });
    // The wake-up subscription came back on the restarted master: a consumer
    // asleep on an empty queue (no due time to wake for) is woken by a job
    // sent now, well before its 10 s timeout. The pause lets it fall asleep
    // first; if it has not, its first look finds the job, which is no error
    // but tests less.
    let t = Instant::now();
    let waiter = thread::scope(|s| {
        let h = s.spawn(|| q.reserve_timeout(LEASE, conformance::PATIENCE).unwrap());
        thread::sleep(ms(300));
        q.send_after(b"after", ms(0)).unwrap();
        h.join().unwrap()
    });
    let job = waiter.expect("the job sent after the restart");
    assert_eq!(job.payload(), b"after");
    assert!(t.elapsed() < Duration::from_secs(3), "the wake-up took {:?}", t.elapsed());
    assert!(q.ack(&job).unwrap());
    eprintln!(
        "cluster restart: {} sends returned Ok, {} failed, {} jobs delivered",
        r.sent, r.failed, r.delivered
    );
}

#[test]
fn bad_cluster_arguments_get_clear_errors() {
    let Some(cluster) = shared() else { return };
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    for (what, r) in [
        ("no address", RedisQueue::connect_cluster(&[], "q")),
        ("empty tag", RedisQueue::connect_cluster(&urls, "}q")),
        ("empty name", RedisQueue::connect_cluster(&urls, "")),
    ] {
        match r {
            Err(DurableError::InvalidArgument(msg)) => assert!(!msg.is_empty(), "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    match RedisQueue::builder()
        .connect_timeout(ms(200))
        .retry_for(ms(200))
        .connect_cluster(&["redis://127.0.0.1:1/"], "q")
    {
        Err(DurableError::Redis(msg)) => assert!(!msg.is_empty()),
        other => panic!("an unreachable cluster: {other:?}"),
    }
}

#[test]
fn the_reserve_script_samples_the_backlog_on_a_cluster_too() {
    let Some(cluster) = shared() else { return };
    let name = unique("samples");
    let since = SystemTime::now() - Duration::from_secs(120);
    {
        let q = connect(cluster, &name);
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
    let q = connect(cluster, &name);
    let rows = delayq_durable::Inspect::samples(&q, since).unwrap();
    // The two reserves fall in one minute, or in two.
    assert!(!rows.is_empty() && rows.len() <= 2, "{rows:?}");
    assert_eq!(rows[0].pending, 4, "the count before the minute's first reserve took anything: {rows:?}");
    assert!(rows[0].lateness >= Duration::from_millis(4000), "the oldest due job was 5 s late: {rows:?}");
    assert!(rows[0].lateness < Duration::from_secs(60), "{rows:?}");
}

/// Issue 33's primitives on the cluster: every key a script touches is
/// under the queue's hash tag (a cross-slot key would fail the script).
mod features {
    use super::{redis_cases, shared};
    use delayq_durable::{RedisBuilder, RedisQueue};

    fn connect(b: RedisBuilder, name: &str) -> RedisQueue {
        let urls = shared().unwrap().urls();
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        b.connect_cluster(&urls, name).unwrap()
    }

    macro_rules! cases {
        ($($name:ident $(($($arg:expr),*))?;)*) => {$(
            #[test]
            fn $name() {
                if shared().is_none() {
                    return;
                }
                redis_cases::$name(&connect $($(, $arg)*)?);
            }
        )*};
    }

    cases! {
        due_jobs_are_reserved_by_priority_then_deadline_then_id;
        aging_lets_an_old_low_priority_job_out_before_a_newer_urgent_one;
        a_unique_key_is_held_by_state_and_period;
        racing_sends_of_one_key_store_one_job(8, 200);
        the_schedule_store_keeps_one_pending_tick_job_and_fires_once;
        racing_fires_of_one_tick_fire_once(8);
        reserve_excluding_skips_excluded_kinds_exactly_and_sleeps;
    }
}
