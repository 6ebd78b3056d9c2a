//! Waking consumers without polling: one thread per queue handle holds a
//! pub/sub subscription to the queue's `wake` channel, on which every script
//! that makes a job pending publishes its due time. Waiting consumers sleep
//! until the earliest due time they know of, or until a message announces an
//! earlier one.
//!
//! The waiters' side is [`Notifier`] (`notifier.rs`, shared with the
//! PostgreSQL backend). The lost-wakeup rule: a consumer reads its generation
//! *before* it runs the reserve script, and sleeps only while no message newer
//! than that generation announces a due time earlier than its plan. A job sent
//! after the script ran publishes after it, so its message is newer.
//!
//! Losing the signal: a message published while the subscription is down is
//! never seen. The watcher notices a dropped connection at once (a read
//! error) and a silently dead one within the liveness interval (a `PING`
//! after that long without traffic, the one periodic action of an idle
//! handle), which must answer within `min(liveness, 1 s)`. When it has
//! subscribed again it wakes every waiter to re-check the queue. So a missed
//! message delays a job by at most liveness + `min(liveness, 1 s)` + the time
//! to reconnect (at most `connect_timeout`); it never loses one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

pub(crate) use crate::notifier::Notifier;

/// The longest a liveness `PING` may take to answer.
const PING_TIMEOUT: Duration = Duration::from_secs(1);

/// Where the watcher subscribes.
pub(crate) enum Source {
    /// The one server.
    One(redis::Client),
    /// A cluster: the master that owns the slot of `key` (the queue's
    /// prefix), found anew at every (re)subscription by asking the nodes in
    /// turn for `CLUSTER SLOTS`. The scripts publish on that master, which
    /// delivers to its own subscribers directly (not through the cluster
    /// bus), and a restart or failover of it drops the subscription, which is
    /// noticed as on one server.
    Cluster { nodes: Vec<redis::Client>, key: String },
}

/// The watcher thread's configuration.
pub(crate) struct Watch {
    pub(crate) source: Source,
    pub(crate) channel: String,
    /// This handle's own control channel: a message there makes the watcher
    /// look at `stop` (how `Drop` interrupts a blocking read).
    pub(crate) control: String,
    pub(crate) notifier: Arc<Notifier>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) liveness: Duration,
    pub(crate) connect_timeout: Duration,
}

impl Watch {
    /// Connects once (so that `connect` can report a failure), then runs the
    /// watcher on its own thread. Waiters are safe before it has subscribed:
    /// subscribing wakes them all to re-check.
    pub(crate) fn start(self) -> Result<thread::JoinHandle<()>, redis::RedisError> {
        let first = self.connection()?;
        thread::Builder::new()
            .name("delayq-redis-watch".into())
            .spawn(move || self.run(Some(first)))
            .map_err(|e| redis::RedisError::from(std::io::Error::other(e)))
    }

    fn connection(&self) -> Result<redis::Connection, redis::RedisError> {
        match &self.source {
            Source::One(client) => client.get_connection_with_timeout(self.connect_timeout),
            Source::Cluster { nodes, key } => {
                let mut last = None;
                for node in nodes {
                    match self.owner(node, key) {
                        Ok(owner) => return owner.get_connection_with_timeout(self.connect_timeout),
                        Err(e) => last = Some(e),
                    }
                }
                Err(last.unwrap_or_else(|| std::io::Error::other("no cluster node given").into()))
            }
        }
    }

    /// Asks `node` which master owns the slot of `key`.
    fn owner(&self, node: &redis::Client, key: &str) -> Result<redis::Client, redis::RedisError> {
        let mut con = node.get_connection_with_timeout(self.connect_timeout)?;
        con.set_read_timeout(Some(self.connect_timeout))?;
        let slot: i64 = redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query(&mut con)?;
        let ranges: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER").arg("SLOTS").query(&mut con)?;
        let int = |v: &redis::Value| match v {
            redis::Value::Int(i) => Some(*i),
            _ => None,
        };
        for range in ranges {
            let (Some(start), Some(end)) = (range.first().and_then(int), range.get(1).and_then(int)) else {
                continue;
            };
            if !(start..=end).contains(&slot) {
                continue;
            }
            let Some(redis::Value::Array(master)) = range.get(2) else { break };
            let ip = match master.first() {
                Some(redis::Value::BulkString(b)) if !b.is_empty() => String::from_utf8_lossy(b).into_owned(),
                // An empty address: the node asked.
                _ => node
                    .get_connection_info()
                    .addr()
                    .to_string()
                    .rsplit_once(':')
                    .map_or_else(|| "127.0.0.1".to_string(), |(host, _)| host.to_string()),
            };
            let Some(port) = master.get(1).and_then(int) else { break };
            return redis::Client::open(format!("redis://{ip}:{port}/"));
        }
        Err(std::io::Error::other(format!("no master owns slot {slot} (the cluster is not ready)")).into())
    }

    fn run(self, mut first: Option<redis::Connection>) {
        let mut backoff = Duration::from_millis(10);
        while !self.stop.load(Ordering::Acquire) {
            let con = match first.take().map(Ok).unwrap_or_else(|| self.connection()) {
                Ok(con) => con,
                Err(_) => {
                    thread::park_timeout(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
            };
            backoff = Duration::from_millis(10);
            self.listen(con);
        }
    }

    /// How long the liveness `PING` may take to answer: `min(liveness, 1 s)`.
    fn ping_timeout(&self) -> Duration {
        self.liveness.min(PING_TIMEOUT)
    }

    /// Reads messages until the connection fails or `stop` is set.
    fn listen(&self, mut con: redis::Connection) {
        let mut ps = con.as_pubsub();
        if ps.subscribe(&self.channel).is_err() || ps.subscribe(&self.control).is_err() {
            return;
        }
        // Subscribed (again): whatever was published while we were not is
        // unknown, so every waiter re-checks.
        self.notifier.announce(None);
        if ps.set_read_timeout(Some(self.liveness)).is_err() {
            return;
        }
        loop {
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            match ps.get_message() {
                Ok(msg) => {
                    if msg.get_channel_name() == self.control {
                        continue;
                    }
                    let due =
                        std::str::from_utf8(msg.get_payload_bytes()).ok().and_then(|s| s.parse::<i64>().ok());
                    self.notifier.announce(due);
                }
                Err(e) if e.is_timeout() => {
                    // Quiet for a whole liveness interval: is the server still
                    // there? It has `ping_timeout` to say so, not another
                    // whole interval.
                    if ps.set_read_timeout(Some(self.ping_timeout())).is_err()
                        || ps.ping::<String>().is_err()
                        || ps.set_read_timeout(Some(self.liveness)).is_err()
                    {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    }
}
