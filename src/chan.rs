//! Starting a queue's two proxy threads, and the handle state that owns them.
//!
//! [`start`] is the one place a queue is assembled: `Builder::build` calls it,
//! and so does every loom model (through the builder), so the models run the
//! code users run. The [`Chan`] it returns is shared by every `Sender` and
//! `Receiver`; the last one dropped disconnects the queue and joins both proxies.

use crate::clock::{Clock, Subscription};
use crate::error::BuildError;
use crate::shared::{Layout, Shared};
use crate::sync::{set_nice, thread, Parker};
use crate::{dequeue, enqueue, oneshot};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// What the handles share: the queue, its threads and its clock subscription.
pub(crate) struct Chan<T> {
    pub(crate) shared: Arc<Shared<T>>,
    threads: Vec<thread::JoinHandle<()>>,
    _subscription: Subscription,
}

/// Builds the queue's shared state, subscribes it to `clock`'s steps, and starts
/// the proxies `<prefix>-enqueue` and `<prefix>-dequeue`, each at nice value
/// `nice` if one is given. Returns once both run (their thread names and nice
/// values are set by then). On an error, whatever started is disconnected and
/// joined.
pub(crate) fn start<T: Send + 'static>(
    layout: &Layout,
    clock: Clock,
    prefix: &str,
    nice: Option<i32>,
) -> Result<Arc<Chan<T>>, BuildError> {
    let enqueue_parker = Parker::new();
    let dequeue_parker = Parker::new();
    let shared =
        Arc::new(Shared::new(layout, clock.clone(), enqueue_parker.unparker(), dequeue_parker.unparker()));
    let weak = Arc::downgrade(&shared);
    let subscription = clock.subscribe(move || {
        if let Some(s) = weak.upgrade() {
            dequeue::clock_moved(&s);
        }
    });
    let mut chan = Chan { shared: shared.clone(), threads: Vec::new(), _subscription: subscription };
    let (up_enqueue, enqueue_running) = oneshot::pair();
    let (up_dequeue, dequeue_running) = oneshot::pair();
    let s = shared.clone();
    chan.threads.push(spawn(format!("{prefix}-enqueue"), shared.clone(), move || {
        if started(up_enqueue, nice) {
            enqueue::run(&s, &enqueue_parker)
        }
    })?);
    let s = shared.clone();
    chan.threads.push(spawn(format!("{prefix}-dequeue"), shared, move || {
        if started(up_dequeue, nice) {
            dequeue::run(&s, &dequeue_parker)
        }
    })?);
    // Both answers first, so that neither thread is left waiting; then the
    // error, if any: dropping `chan` disconnects the queue and joins both.
    let (a, b) = (enqueue_running.wait(), dequeue_running.wait());
    for r in [a, b].into_iter().flatten() {
        r.map_err(BuildError::ProxyNice)?;
    }
    Ok(Arc::new(chan))
}

/// A proxy thread's first step: apply the nice value, if any, and report. Only
/// a thread that reports success goes on to run its loop; one that failed
/// returns at once (and `start` fails).
fn started(up: oneshot::Answer<std::io::Result<()>>, nice: Option<i32>) -> bool {
    let r = nice.map_or(Ok(()), set_nice);
    let ok = r.is_ok();
    up.send(r);
    ok
}

/// Starts a proxy thread. A panic inside it (a bug, or a panicking `Drop` we
/// failed to contain) disconnects the queue, so no client waits forever.
fn spawn<T: Send + 'static>(
    name: String,
    shared: Arc<Shared<T>>,
    body: impl FnOnce() + Send + 'static,
) -> Result<thread::JoinHandle<()>, BuildError> {
    thread::Builder::new()
        .name(name)
        .spawn(move || {
            if catch_unwind(AssertUnwindSafe(body)).is_err() {
                shared.disconnect();
            }
        })
        .map_err(BuildError::Spawn)
}

impl<T> Drop for Chan<T> {
    /// The last handle is gone: disconnect and join both proxies.
    fn drop(&mut self) {
        self.shared.disconnect();
        let me = thread::current().id();
        for t in self.threads.drain(..) {
            // The last handle can die on a proxy thread (inside an item's `Drop`);
            // a thread cannot join itself, and it is about to exit anyway.
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }
}

impl<T> std::fmt::Debug for Chan<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chan").field("threads", &self.threads.len()).finish()
    }
}
