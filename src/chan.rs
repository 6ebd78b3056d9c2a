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

/// What both handles have alike (`Sender` and `Receiver`): the gauges, a
/// `Debug` that shows them, and unwind safety. The queue's state stays
/// consistent across a panic that a caller catches: panics in user code (an
/// item's `Drop`, a waker) are contained on the library's own paths, and a
/// role's holder releases it while unwinding (`role::Held`). So, as
/// crossbeam-channel's handles are, the handles are unwind safe whatever `T` is.
macro_rules! handle {
    ($h:ident) => {
        impl<T> $h<T> {
            /// Items sent and not yet received, cancelled or taken (exact once `send`
            /// returns, whether or not they are due).
            pub fn len(&self) -> usize {
                self.chan.shared.len()
            }

            /// `len() == 0`.
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// `true` if a bounded queue holds `capacity` items; always `false` unbounded.
            pub fn is_full(&self) -> bool {
                self.capacity().is_some_and(|c| self.len() >= c)
            }

            /// The bound given at creation; `None` for an unbounded queue.
            pub fn capacity(&self) -> Option<usize> {
                self.chan.shared.counter.capacity()
            }
        }

        impl<T> std::fmt::Debug for $h<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($h))
                    .field("len", &self.len())
                    .field("capacity", &self.capacity())
                    .finish()
            }
        }

        impl<T> std::panic::UnwindSafe for $h<T> {}
        impl<T> std::panic::RefUnwindSafe for $h<T> {}
    };
}
pub(crate) use handle;

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
        started(&s, up_enqueue, nice, Role::Enqueue);
        enqueue::run(&s, &enqueue_parker)
    })?);
    let s = shared.clone();
    chan.threads.push(spawn(format!("{prefix}-dequeue"), shared, move || {
        started(&s, up_dequeue, nice, Role::Dequeue);
        dequeue::run(&s, &dequeue_parker)
    })?);
    // Both answers first, so that neither thread is left waiting; then the
    // error, if any: dropping `chan` disconnects the queue and joins both.
    let (a, b) = (enqueue_running.wait(), dequeue_running.wait());
    for r in [a, b].into_iter().flatten() {
        r.map_err(BuildError::ProxyNice)?;
    }
    Ok(Arc::new(chan))
}

/// Which proxy a thread runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    Enqueue,
    Dequeue,
}

/// A proxy thread's first step: apply the nice value, if any, and report. A
/// thread that failed disconnects the queue before it reports, and then runs
/// its loop all the same: a disconnected loop winds down at once — the enqueue
/// proxy answering and dropping whatever reached the ingress meanwhile (a
/// mock clock's step may have sent a `Sync` from another thread, and waits for
/// its answer).
fn started<T>(shared: &Shared<T>, up: oneshot::Answer<std::io::Result<()>>, nice: Option<i32>, role: Role) {
    let r = nice.map_or(Ok(()), |n| set_nice_as(role, n));
    if r.is_err() {
        shared.disconnect();
    }
    up.send(r);
}

#[cfg(not(all(test, not(delayq_loom), target_os = "linux")))]
fn set_nice_as(_: Role, nice: i32) -> std::io::Result<()> {
    set_nice(nice)
}

/// Tests make one proxy's `set_nice` fail (both get the same value, so the
/// system refuses both or neither).
#[cfg(all(test, not(delayq_loom), target_os = "linux"))]
fn set_nice_as(role: Role, nice: i32) -> std::io::Result<()> {
    if tests::FAIL.with_role(role) {
        return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "refused by the test"));
    }
    set_nice(nice)
}

#[cfg(all(test, not(delayq_loom), target_os = "linux"))]
mod tests {
    use super::Role;
    use crate::error::BuildError;
    use crate::{Builder, MockClock};
    use std::sync::atomic::{AtomicU8, Ordering};
    use std::time::Duration;

    /// Which role's `set_nice` fails: 0 none, 1 enqueue, 2 dequeue.
    pub(super) struct Fail(AtomicU8);

    impl Fail {
        pub(super) fn with_role(&self, role: Role) -> bool {
            let r = self.0.load(Ordering::SeqCst);
            (r == 1 && role == Role::Enqueue) || (r == 2 && role == Role::Dequeue)
        }
    }

    pub(super) static FAIL: Fail = Fail(AtomicU8::new(0));

    /// One proxy refused, the other running: `build` fails with the error, and
    /// a mock clock stepped from another thread while the queue was starting
    /// does not wait forever for the failed enqueue proxy's answer. Only the
    /// tests of this module set `FAIL`, and they run one after the other.
    #[test]
    fn one_proxy_refused_fails_the_build_and_strands_no_clock_step() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        for role in [1, 2] {
            FAIL.0.store(role, Ordering::SeqCst);
            for _ in 0..20 {
                let clock = MockClock::new();
                let (done, finished) = std::sync::mpsc::channel();
                let stepper = clock.clone();
                let done_stepping = done.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        stepper.advance(Duration::from_millis(1));
                    }
                    let _ = done_stepping.send(None);
                });
                // Built (and dropped) on a thread of its own too: a stranded step
                // holds the clock's listener list, which the failed queue's drop
                // needs, so either side may be the one that hangs.
                std::thread::spawn(move || {
                    let r = Builder::new().clock(clock).proxy_nice(19).build::<u8>();
                    let _ = done.send(Some(match r {
                        Err(BuildError::ProxyNice(e)) => e.kind() == std::io::ErrorKind::PermissionDenied,
                        _ => false,
                    }));
                });
                let mut built = None;
                for _ in 0..2 {
                    // A stranded step would wait forever: fail instead of hanging.
                    match finished.recv_timeout(Duration::from_secs(20)) {
                        Ok(Some(ok)) => built = Some(ok),
                        Ok(None) => {}
                        Err(_) => panic!("role {role}: a clock step or the build never finished"),
                    }
                }
                assert_eq!(built, Some(true), "role {role}: build must fail with PermissionDenied");
            }
        }
        FAIL.0.store(0, Ordering::SeqCst);
    }

    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
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
