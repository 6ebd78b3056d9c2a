//! Connections for the scripts: a few kept open, opened on demand, and every
//! call retried across a dropped connection or a restarting server, with
//! backoff, for a bounded time. Every script that changes anything carries a
//! nonce whose result the server keeps (`r:<nonce>`), so a call retried after
//! its reply was lost returns the first result instead of applying twice.

use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use super::metrics::Metrics;
use crate::error::DurableError;

/// Idle connections kept for reuse.
const KEEP_IDLE: usize = 32;

/// Where the connections go: one server, or a Redis Cluster (commands routed
/// by their key's slot; every key of a queue is in one slot).
#[derive(Clone)]
pub(crate) enum Target {
    One(redis::Client),
    // Boxed: a cluster client is twice a plain one's size.
    Cluster(Box<redis::cluster::ClusterClient>),
}

/// A connection to a [`Target`].
pub(crate) enum Conn {
    One(redis::Connection),
    // Boxed: a cluster connection is several times a plain one's size.
    Cluster(Box<redis::cluster::ClusterConnection>),
}

impl redis::ConnectionLike for Conn {
    fn req_packed_command(&mut self, cmd: &[u8]) -> redis::RedisResult<redis::Value> {
        match self {
            Conn::One(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }
    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<redis::Value>> {
        match self {
            Conn::One(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }
    // The cluster connection routes here, by the command's key.
    fn req_command(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<redis::Value> {
        match self {
            Conn::One(c) => c.req_command(cmd),
            Conn::Cluster(c) => c.req_command(cmd),
        }
    }
    fn get_db(&self) -> i64 {
        match self {
            Conn::One(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
    fn supports_pipelining(&self) -> bool {
        match self {
            Conn::One(c) => c.supports_pipelining(),
            Conn::Cluster(c) => c.supports_pipelining(),
        }
    }
    fn check_connection(&mut self) -> bool {
        match self {
            Conn::One(c) => c.check_connection(),
            Conn::Cluster(c) => c.check_connection(),
        }
    }
    fn is_open(&self) -> bool {
        match self {
            Conn::One(c) => c.is_open(),
            Conn::Cluster(c) => c.is_open(),
        }
    }
}

pub(crate) struct Pool {
    pub(crate) target: Target,
    idle: Mutex<Vec<Conn>>,
    pub(crate) connect_timeout: Duration,
    pub(crate) io_timeout: Option<Duration>,
    pub(crate) retry_for: Duration,
    /// Counts the reconnects (and is shared with the queue's other figures).
    pub(crate) metrics: Arc<Metrics>,
}

/// Whether an error may go away by reconnecting and trying again.
pub(crate) fn transient(e: &redis::RedisError) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        // A restarted server answers LOADING until its AOF is read back.
        || text.contains("loading")
        || text.contains("tryagain")
        // A cluster whose slot's master is down or moving.
        || text.contains("clusterdown")
        || text.contains("cluster is down")
}

pub(crate) fn redis_error(e: redis::RedisError, doing: &str) -> DurableError {
    DurableError::Redis(format!("{doing}: {}", describe(&e)))
}

/// One line an operator can act on: a timeout says so (not the socket's
/// `Resource temporarily unavailable`), a reply that is not the Redis
/// protocol says that the server is likely not Redis (not the parser's
/// dump of what it read).
fn describe(e: &redis::RedisError) -> String {
    if e.is_timeout() {
        return "timed out: the server did not answer in time".into();
    }
    if e.kind() == redis::ErrorKind::Parse {
        return "the reply is not the Redis protocol: is a Redis server listening there?".into();
    }
    let text = e.to_string();
    let first = text.lines().next().unwrap_or("").trim();
    if text.lines().nth(1).is_some() {
        format!("{first} …")
    } else {
        first.to_string()
    }
}

impl Pool {
    pub(crate) fn new(
        target: Target,
        connect_timeout: Duration,
        io_timeout: Option<Duration>,
        retry_for: Duration,
        metrics: Arc<Metrics>,
    ) -> Pool {
        Pool { target, idle: Mutex::new(Vec::new()), connect_timeout, io_timeout, retry_for, metrics }
    }

    /// An idle connection, or a new one; `retrying`: this call failed on a
    /// connection (transiently), so a new one is a reconnect.
    fn take(&self, retrying: bool) -> redis::RedisResult<Conn> {
        if let Some(con) = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop() {
            return Ok(con);
        }
        let con = self.open()?;
        if retrying {
            self.metrics.reconnect();
        }
        Ok(con)
    }

    fn open(&self) -> redis::RedisResult<Conn> {
        match &self.target {
            Target::One(client) => {
                let con = client.get_connection_with_timeout(self.connect_timeout)?;
                con.set_read_timeout(self.io_timeout)?;
                con.set_write_timeout(self.io_timeout)?;
                Ok(Conn::One(con))
            }
            Target::Cluster(client) => {
                let con = client.get_connection()?;
                con.set_read_timeout(self.io_timeout)?;
                con.set_write_timeout(self.io_timeout)?;
                Ok(Conn::Cluster(Box::new(con)))
            }
        }
    }

    fn put(&self, con: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < KEEP_IDLE {
            idle.push(con);
        }
    }

    /// Runs `f` once, on a pooled or new connection, without retrying.
    pub(crate) fn once<T>(
        &self,
        f: impl FnOnce(&mut Conn) -> redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        let mut con = self.take(false)?;
        let r = f(&mut con);
        if r.is_ok() {
            self.put(con);
        }
        r
    }

    /// Drops every idle connection: after one has failed with a transient
    /// error (a restarted server, a dropped network) the others are most
    /// likely dead too, and retrying each in turn would spend the retry budget
    /// on connections that cannot work.
    fn drop_idle(&self) {
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(PoisonError::into_inner));
        drop(idle); // closed outside the lock
    }

    /// Runs `f` on a connection, retrying transient failures (the idle
    /// connections dropped, so each retry opens a fresh one; backoff from 5 ms
    /// to 500 ms) for up to the retry budget; then, or on any other error,
    /// fails with the server's message.
    pub(crate) fn run<T>(
        &self,
        doing: &str,
        mut f: impl FnMut(&mut Conn) -> redis::RedisResult<T>,
    ) -> Result<T, DurableError> {
        let start = Instant::now();
        let mut backoff = Duration::from_millis(5);
        let mut retrying = false;
        loop {
            let result = self.take(retrying).and_then(|mut con| {
                let r = f(&mut con);
                if r.is_ok() || !r.as_ref().err().is_some_and(transient) {
                    self.put(con);
                }
                r
            });
            match result {
                Ok(v) => return Ok(v),
                Err(e) if transient(&e) && start.elapsed() < self.retry_for => {
                    retrying = true;
                    self.drop_idle();
                    thread::sleep(backoff.min(self.retry_for.saturating_sub(start.elapsed())));
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                }
                Err(e) if transient(&e) => {
                    return Err(redis_error(
                        e,
                        &format!("{doing} (gave up after retrying for {:?})", self.retry_for),
                    ))
                }
                Err(e) => return Err(redis_error(e, doing)),
            }
        }
    }
}
