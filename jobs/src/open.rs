//! Opening the queue a command names: an embedded file, a Redis or a PostgreSQL queue,
//! with errors that say what to do.

use std::path::Path;
use std::sync::Arc;

use std::time::Duration;

use delayq_durable::{DurableError, Inspect, OfflineFile, PgQueue, RedisQueue};

use crate::remote::RemoteQueue;
use crate::sidecar;

/// A queue to inspect, either backend.
pub type Queue = Arc<dyn Inspect>;

/// Opens an existing embedded file for inspection ([`OfflineFile`]: reads
/// open it read-only and run no crash recovery; it is never created, and a
/// file that is not a delayq database is refused unchanged). A file another
/// process holds is reached through that process's dashboard when its
/// sidecar (`PATH.dashboard`) names one ([`RemoteQueue`]); otherwise it is
/// an error saying what to do.
pub fn embedded(path: &Path) -> Result<Queue, String> {
    if !path.exists() {
        return Err(format!("no database at {}", path.display()));
    }
    match OfflineFile::open(path) {
        Ok(f) => Ok(Arc::new(f)),
        Err(DurableError::Locked { .. }) => match sidecar::read(path) {
            // The application holds the file and serves its dashboard:
            // through that dashboard's JSON API.
            Some(h) => RemoteQueue::connect(&h.url, h.token)
                .map(|q| Arc::new(q) as Queue)
                .map_err(|e| format!("{} ({e})", locked_message(path))),
            None => Err(locked_message(path)),
        },
        Err(e) => Err(file_error(path, e)),
    }
}

/// What to say when opening or reading `path` failed: the error names the
/// file itself (no "opening X: opening X").
pub fn file_error(path: &Path, e: DurableError) -> String {
    match e {
        DurableError::Locked { .. } => locked_message(path),
        e => e.to_string(),
    }
}

/// What to say when another process holds `path`.
pub fn locked_message(path: &Path) -> String {
    let mut msg = format!(
        "{} is held by another process: an embedded queue is open in one process at a time",
        path.display()
    );
    match sidecar::read(path) {
        Some(h) => msg.push_str(&format!(" (process {} holds it; its dashboard is at {})", h.pid, h.url)),
        None => msg.push_str(
            " (stop that process, or have it serve the dashboard with a sidecar, Options::sidecar: the CLI then goes through it)",
        ),
    }
    msg
}

/// Connects to the Redis queue `name` at `url` (with `cluster`: on the
/// Redis Cluster whose nodes `url` lists, comma-separated), retrying a
/// dropped connection for 3 s, not the library's 10: an operator is
/// waiting. With `must_exist`, a queue no job was ever sent to is an error
/// (a typo'd name would show an empty queue).
pub fn redis(url: &str, name: &str, cluster: bool, must_exist: bool) -> Result<Queue, String> {
    let builder = RedisQueue::builder().retry_for(Duration::from_secs(3)).io_timeout(Duration::from_secs(3));
    let q = if cluster {
        let nodes: Vec<&str> = url.split(',').map(str::trim).filter(|u| !u.is_empty()).collect();
        builder.connect_cluster(&nodes, name)
    } else {
        builder.connect(url, name)
    }
    .map_err(|e| format!("connecting to {url}: {e}"))?;
    if must_exist && !q.exists().map_err(|e| format!("reading {url}: {e}"))? {
        return Err(format!(
            "no queue named {name:?} at {url}: no job was ever sent to it (check --name; queue names are case-sensitive)"
        ));
    }
    Ok(Arc::new(q))
}

/// Opens the PostgreSQL queue `name` in `schema` of the database at `url`,
/// retrying an unreachable server for 3 s, not the library's 10: an
/// operator is waiting. Opening migrates the schema (creates it the first
/// time). With `must_exist`, a queue without any job is an error (a typo'd
/// name would show an empty queue).
pub fn postgres(url: &str, schema: &str, name: &str, must_exist: bool) -> Result<Queue, String> {
    let q = PgQueue::builder()
        .schema(schema)
        .retry_for(Duration::from_secs(3))
        .io_timeout(Duration::from_secs(10))
        .connect(url, name)
        .map_err(|e| format!("connecting to {url}: {e}"))?;
    if must_exist && !q.exists().map_err(|e| format!("reading {url}: {e}"))? {
        return Err(format!(
            "no queue named {name:?} in schema {schema} at {url}: it holds no job (check --name and --schema; names are case-sensitive)"
        ));
    }
    Ok(Arc::new(q))
}
