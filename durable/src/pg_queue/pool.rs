//! Connections for the queue's statements: a few kept open, opened on
//! demand, each driven by a task on the queue's own runtime (so a
//! connection the server closed is known closed at once, and not handed
//! out again), each with the queue's statements prepared once.
//!
//! Retries: a call that cannot connect (refused, the server starting up or
//! shutting down) is retried with backoff (5 ms doubling to 500 ms) for up
//! to `retry_for`, then fails with [`DurableError::Postgres`] naming how long
//! it tried. A statement whose connection broke after it was sent is
//! retried too, except a send (its outcome is unknown: retrying could store
//! the job twice), which fails at once with an error that says so; the
//! other changes are safe to repeat (a repeated ack finds its job gone and
//! answers `false`; a repeated reserve leaves the first lease to run out,
//! after which the job is due again as its next attempt).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio_postgres::{Client, NoTls, Statement};

use super::schema::{Sql, Stmt};
use crate::error::DurableError;

/// Idle connections kept for reuse.
const KEEP_IDLE: usize = 32;

/// One connection and the statements prepared on it.
pub(crate) struct Conn {
    pub(crate) client: Client,
    prepared: HashMap<usize, Statement>,
}

impl Conn {
    /// The statement `stmt`, prepared on this connection the first time.
    pub(crate) async fn stmt(&mut self, sql: &Sql, stmt: Stmt) -> Result<Statement, tokio_postgres::Error> {
        if let Some(s) = self.prepared.get(&(stmt as usize)) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql.text(stmt)).await?;
        self.prepared.insert(stmt as usize, s.clone());
        Ok(s)
    }
}

pub(crate) struct Pool {
    config: tokio_postgres::Config,
    /// The queue's runtime, which drives every connection.
    handle: Handle,
    idle: Mutex<Vec<Conn>>,
    pub(crate) retry_for: Duration,
    /// The longest one call's statements may take before the call is given
    /// up on that connection (which is then closed).
    io_timeout: Duration,
    /// Where the connections go, for messages: `host:port/dbname`.
    pub(crate) target: String,
}

/// Whether a call may be tried again on another connection: whether it
/// changes nothing twice if it ran once already.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Reads, and changes that are safe to repeat.
    Safe,
    /// A send: retried only if it never reached the server.
    OnlyUnsent,
}

/// Whether an error may go away on another connection: the connection
/// broke, or the server is starting, stopping or recovering.
pub(crate) fn transient(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    if e.is_closed() {
        return true;
    }
    if let Some(code) = e.code() {
        return [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
        ]
        .contains(code);
    }
    // No SQL state: an I/O error, a connection that ended, a timeout.
    std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>()) || e.to_string().contains("closed")
}

/// The error in one line: the server's message (and detail) where it sent
/// one, the client's description otherwise.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = format!("{} ({})", db.message(), db.code().code());
        if let Some(detail) = db.detail() {
            s.push_str(": ");
            s.push_str(detail);
        }
        return s;
    }
    match std::error::Error::source(e) {
        Some(source) => format!("{e}: {source}"),
        None => e.to_string(),
    }
}

pub(crate) fn pg_error(e: &tokio_postgres::Error, doing: &str) -> DurableError {
    DurableError::Postgres(format!("{doing}: {}", describe(e)))
}

impl Pool {
    pub(crate) fn new(
        config: tokio_postgres::Config,
        handle: Handle,
        retry_for: Duration,
        io_timeout: Duration,
    ) -> Pool {
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            #[cfg(unix)]
            Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
            None => "localhost".to_string(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let target = format!("{host}:{port}/{}", config.get_dbname().unwrap_or("(default)"));
        Pool { config, handle, idle: Mutex::new(Vec::new()), retry_for, io_timeout, target }
    }

    /// Opens a connection, its driver spawned on the queue's runtime.
    pub(crate) async fn connect(&self) -> Result<Client, tokio_postgres::Error> {
        connect(&self.config, &self.handle).await
    }

    /// An open connection: an idle one the server has not closed, or a new one.
    pub(crate) async fn checkout(&self) -> Result<Conn, tokio_postgres::Error> {
        loop {
            let conn = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
            match conn {
                Some(c) if !c.client.is_closed() => return Ok(c),
                Some(_) => continue,
                None => break,
            }
        }
        let client = self.connect().await?;
        Ok(Conn { client, prepared: HashMap::new() })
    }

    pub(crate) fn checkin(&self, conn: Conn) {
        if conn.client.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < KEEP_IDLE {
            idle.push(conn);
        }
    }

    /// The longest one try of a call may take.
    pub(crate) fn io_timeout(&self) -> Duration {
        self.io_timeout
    }

    /// After a failed try of a call: `Err` to return (not transient, out of
    /// time, or a send whose outcome is unknown), or `Ok` after backing off
    /// for the next try. `sent`: the statement may have reached the server.
    pub(crate) async fn failed(
        &self,
        tries: &mut Tries,
        doing: &str,
        retry: Retry,
        fail: Fail,
        sent: bool,
    ) -> Result<(), DurableError> {
        let why = match fail {
            Fail::Pg(e) if !transient(&e) => return Err(pg_error(&e, doing)),
            Fail::Pg(e) => describe(&e),
            Fail::Timeout => format!("the server did not answer within {:?}", self.io_timeout),
        };
        if sent && retry == Retry::OnlyUnsent {
            return Err(DurableError::Postgres(format!(
                "{doing}: the connection broke after the statement was sent, so it may or may \
                 not have been stored (not retried): {why}"
            )));
        }
        if tries.start.elapsed() >= self.retry_for {
            return Err(DurableError::Postgres(format!(
                "{doing} at {} (gave up after retrying for {:?}): {why}",
                self.target, self.retry_for,
            )));
        }
        // Every idle connection likely broke with this one.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).retain(|c| !c.client.is_closed());
        tokio::time::sleep(tries.backoff.min(self.retry_for.saturating_sub(tries.start.elapsed()))).await;
        tries.backoff = (tries.backoff * 2).min(Duration::from_millis(500));
        Ok(())
    }
}

/// The state of one call's tries.
pub(crate) struct Tries {
    start: Instant,
    backoff: Duration,
}

impl Tries {
    pub(crate) fn new() -> Tries {
        Tries { start: Instant::now(), backoff: Duration::from_millis(5) }
    }
}

/// Runs `$body` (an async block's body that uses `$conn`, a [`Conn`], and
/// returns `Result<T, tokio_postgres::Error>`) on a connection of `$pool`,
/// tried again as `$retry` says on transient failures for the pool's
/// `retry_for`; `$doing` names the call in errors. Evaluates to
/// `Result<T, DurableError>`. (A macro, not a function taking a closure: the
/// body borrows the caller's arguments across its awaits.)
macro_rules! call {
    ($pool:expr, $doing:expr, $retry:expr, |$conn:ident| $body:block) => {{
        let pool = &$pool;
        let mut tries = $crate::pg_queue::pool::Tries::new();
        loop {
            let (fail, sent) = match pool.checkout().await {
                Ok(mut $conn) => match tokio::time::timeout(pool.io_timeout(), async { $body }).await {
                    Ok(Ok(v)) => {
                        pool.checkin($conn);
                        break Ok(v);
                    }
                    Ok(Err(e)) => {
                        pool.checkin($conn);
                        ($crate::pg_queue::pool::Fail::Pg(e), true)
                    }
                    // Dropped: a connection stuck in a call is not reused.
                    Err(_) => ($crate::pg_queue::pool::Fail::Timeout, true),
                },
                Err(e) => ($crate::pg_queue::pool::Fail::Pg(e), false),
            };
            if let Err(e) = pool.failed(&mut tries, $doing, $retry, fail, sent).await {
                break Err(e);
            }
        }
    }};
}
pub(crate) use call;

/// Why one try of a call failed.
pub(crate) enum Fail {
    Pg(tokio_postgres::Error),
    Timeout,
}

/// Connects with `config`, the connection's driver spawned on `handle`.
pub(crate) async fn connect(
    config: &tokio_postgres::Config,
    handle: &Handle,
) -> Result<Client, tokio_postgres::Error> {
    let config = config.clone();
    // Connected on the runtime: the socket must be made inside it.
    let joined = handle
        .spawn(async move {
            let (client, connection) = config.connect(NoTls).await?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok::<_, tokio_postgres::Error>(client)
        })
        .await;
    match joined {
        Ok(r) => r,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // The runtime is shut down only when the last handle on the queue
        // is dropped, and a call holds one.
        Err(_) => unreachable!("the queue's runtime shut down under a call"),
    }
}
