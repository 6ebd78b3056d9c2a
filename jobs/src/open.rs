//! Opening the queue a command names: an embedded file or a Redis queue,
//! with errors that say what to do.

use std::path::Path;
use std::sync::Arc;

use delayq_durable::{DurableError, DurableQueue, Inspect, RedisQueue};

use crate::sidecar;

/// A queue to inspect, either backend.
pub type Queue = Arc<dyn Inspect>;

/// Opens an existing embedded file (never creates one). A file another
/// process holds is an error naming that process and its dashboard, when
/// its sidecar (`PATH.dashboard`) says.
pub fn embedded(path: &Path) -> Result<Queue, String> {
    if !path.exists() {
        return Err(format!("no database at {}", path.display()));
    }
    match DurableQueue::open(path) {
        Ok(q) => Ok(Arc::new(q)),
        Err(DurableError::Locked { .. }) => Err(locked_message(path)),
        Err(e) => Err(format!("opening {}: {e}", path.display())),
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
        None => msg
            .push_str(" (stop that process, or have it serve the dashboard: delayq_jobs::dashboard::serve)"),
    }
    msg
}

/// Connects to the Redis queue `name` at `url`.
pub fn redis(url: &str, name: &str) -> Result<Queue, String> {
    RedisQueue::connect(url, name)
        .map(|q| Arc::new(q) as Queue)
        .map_err(|e| format!("connecting to {url}: {e}"))
}
