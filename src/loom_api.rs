//! Crate internals re-exported for the loom model checks (`loom-tests/`), only
//! under `--cfg delayq_loom`. Not a public API.
//!
//! The internals are `pub(crate)`, which a `pub use` cannot widen, so each one is
//! exposed through a thin `pub` newtype whose methods call the real code and do
//! nothing else: what loom explores is the crate's own protocol code.
//!
//! [`Queue`] assembles a whole queue exactly as `Builder::build` does (the same
//! `Shared`, `Signals`, proxy loops, panic-to-disconnect guard and clock
//! subscription) but with ring sizes chosen by the model, and with probes into
//! the dequeue proxy's sleep plan and round counter. Models that need neither use
//! the public `Builder` / `Sender` / `Receiver`.

use crate::clock::{Clock, MockClock, Subscription};
use crate::shared::{Cmd, SendFail, Shared, Signals, Wait};
use crate::sync::{lock, thread, Ordering};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

// ---------------------------------------------------------------- ring.rs

/// Why a push failed; the value comes back (mirror of `ring::PushError`).
#[derive(Debug, PartialEq, Eq)]
pub enum PushError<T> {
    /// The ring holds `capacity` values.
    Full(T),
    /// The ring was closed.
    Closed(T),
}

/// The Vyukov bounded ring with a close bit (`ring::Ring`).
pub struct Ring<T>(crate::ring::Ring<T>);

impl<T> Ring<T> {
    /// `capacity.next_power_of_two()` slots, at least 2.
    pub fn new(capacity: usize) -> Self {
        Ring(crate::ring::Ring::new(capacity))
    }
    /// Slots.
    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }
    /// `Ring::push`.
    pub fn push(&self, value: T) -> Result<(), PushError<T>> {
        self.0.push(value).map_err(|e| match e {
            crate::ring::PushError::Full(v) => PushError::Full(v),
            crate::ring::PushError::Closed(v) => PushError::Closed(v),
        })
    }
    /// `Ring::pop`.
    pub fn pop(&self) -> Option<T> {
        self.0.pop()
    }
    /// `Ring::close`.
    pub fn close(&self) -> bool {
        self.0.close()
    }
    /// `Ring::is_drained`.
    pub fn is_drained(&self) -> bool {
        self.0.is_drained()
    }
    /// `Ring::len`.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// `Ring::len() == 0`.
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }
    /// `Ring::is_full`.
    pub fn is_full(&self) -> bool {
        self.0.is_full()
    }
}

impl<T> fmt::Debug for Ring<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

// ------------------------------------------------------------- ingress.rs

/// The ingress: ring plus locked spill (`ingress::Ingress`).
pub struct Ingress<T>(crate::ingress::Ingress<T>);

impl<T> Ingress<T> {
    /// An ingress whose ring has `ring_slots` slots (rounded as `Ring::new`).
    pub fn new(ring_slots: usize) -> Self {
        Ingress(crate::ingress::Ingress::new(ring_slots))
    }
    /// `Ingress::push`.
    pub fn push(&self, cmd: T) -> Result<(), T> {
        self.0.push(cmd)
    }
    /// `Ingress::drain_into`.
    pub fn drain_into(&self, out: &mut Vec<T>, max: usize) {
        self.0.drain_into(out, max)
    }
    /// `Ingress::is_empty`.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// `Ingress::close`.
    pub fn close(&self) -> bool {
        self.0.close()
    }
    /// `Ingress::drain_closed`.
    pub fn drain_closed(&self, out: &mut Vec<T>) {
        self.0.drain_closed(out)
    }
}

impl<T> fmt::Debug for Ingress<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

// ------------------------------------------------------------- waiters.rs

/// A waiter list (`waiters::Waiters`).
#[derive(Debug, Default)]
pub struct Waiters(crate::waiters::Waiters);

/// A registration in a [`Waiters`] list.
#[derive(Debug, Clone, Copy)]
pub struct Ticket(crate::waiters::Ticket);

impl Waiters {
    /// An empty list.
    pub fn new() -> Self {
        Waiters::default()
    }
    /// `Waiters::register`.
    pub fn register(&self, waker: &Waker) -> Ticket {
        Ticket(self.0.register(waker))
    }
    /// `Waiters::unregister`.
    pub fn unregister(&self, t: Ticket) -> bool {
        self.0.unregister(t.0)
    }
    /// `Waiters::notify`.
    pub fn notify(&self, n: usize) {
        self.0.notify(n)
    }
    /// `Waiters::notify_all`.
    pub fn notify_all(&self) {
        self.0.notify_all()
    }
}

/// `waiters::block_on`: try; register; re-check; park.
pub fn block_on<R>(
    waiters: &Waiters,
    clock: &Clock,
    deadline: Option<Instant>,
    attempt: impl FnMut() -> Option<R>,
) -> Option<R> {
    crate::waiters::block_on(&waiters.0, clock, deadline, attempt)
}

// ---------------------------------------------------------------- sync.rs

/// The facade's parker (`sync::Parker`): under loom, a token + condvar.
#[derive(Debug)]
pub struct Parker(crate::sync::Parker);

/// The waking half of a [`Parker`].
#[derive(Debug, Clone)]
pub struct Unparker(crate::sync::Unparker);

impl Parker {
    /// A parker with no token.
    pub fn new() -> Self {
        Parker(crate::sync::Parker::new())
    }
    /// Its unparker.
    pub fn unparker(&self) -> Unparker {
        Unparker(self.0.unparker())
    }
    /// Parks until a token is there (loom has no time: always untimed).
    pub fn park(&self) {
        self.0.park(None)
    }
}

impl Default for Parker {
    fn default() -> Self {
        Parker::new()
    }
}

impl Unparker {
    /// Leaves a token / wakes the parked thread.
    pub fn unpark(&self) {
        self.0.unpark()
    }
}

// -------------------------------------------------------------- wakeup.rs

/// A sleeping flag and the sleeper's unparker (`wakeup::Bell`).
#[derive(Debug)]
pub struct Bell(crate::wakeup::Bell);

impl Bell {
    /// A bell that unparks `unparker`.
    pub fn new(unparker: Unparker) -> Self {
        Bell(crate::wakeup::Bell::new(unparker.0))
    }
    /// `Bell::prepare_sleep`.
    pub fn prepare_sleep(&self) {
        self.0.prepare_sleep()
    }
    /// `Bell::awake`.
    pub fn awake(&self) {
        self.0.awake()
    }
    /// `Bell::ring`.
    pub fn ring(&self) {
        self.0.ring()
    }
    /// `Bell::is_sleeping`.
    pub fn is_sleeping(&self) -> bool {
        self.0.is_sleeping()
    }
    /// `Bell::force`.
    pub fn force(&self) {
        self.0.force()
    }
}

/// The dequeue proxy's sleep plan (mirror of `wakeup::Sleep`), read by a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Running, or already unparked.
    Awake,
    /// Parked until this tick (relative to the queue's creation: see [`Queue::ticks`]).
    Until(u64),
    /// Parked with an empty heap.
    Forever,
    /// Parked until consumers make room in the egress ring.
    Space,
}

impl From<crate::wakeup::Sleep> for Plan {
    fn from(s: crate::wakeup::Sleep) -> Plan {
        use crate::wakeup::Sleep;
        match s {
            Sleep::Awake => Plan::Awake,
            Sleep::Until(t) => Plan::Until(t),
            Sleep::Forever => Plan::Forever,
            Sleep::Space => Plan::Space,
        }
    }
}

// ------------------------------------------------------------- oneshot.rs

/// The proxy's half of a one-shot reply (`oneshot::Answer`).
#[derive(Debug)]
pub struct Answer<R>(crate::oneshot::Answer<R>);

/// The client's half of a one-shot reply (`oneshot::Reply`).
pub struct Reply<R>(crate::oneshot::Reply<R>);

/// `oneshot::pair`.
pub fn oneshot<R>() -> (Answer<R>, Reply<R>) {
    let (a, r) = crate::oneshot::pair();
    (Answer(a), Reply(r))
}

impl<R> Answer<R> {
    /// `Answer::send`.
    pub fn send(self, r: R) {
        self.0.send(r)
    }
}

impl<R> Reply<R> {
    /// `Reply::wait`.
    pub fn wait(self) -> Option<R> {
        self.0.wait()
    }
}

impl<R> fmt::Debug for Reply<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Reply")
    }
}

// ------------------------------------------------------------ whole queue

/// A whole queue (both proxies running), assembled as `Builder::build` does, with
/// model-sized rings and probes. Dropping it disconnects and joins the proxies,
/// as the last handle's `Chan` does.
pub struct Queue<T: Send + 'static> {
    shared: Arc<Shared<T>>,
    threads: Vec<thread::JoinHandle<()>>,
    _subscription: Subscription,
}

/// Why a [`Queue::send`] failed; the item comes back.
#[derive(Debug, PartialEq, Eq)]
pub enum SendFailure<T> {
    /// Bounded queue full (`try_send` only).
    Full(T),
    /// Closed or disconnected.
    Disconnected(T),
}

impl<T: Send + 'static> Queue<T> {
    /// Starts a queue on `clock` holding at most `capacity` items (`None`:
    /// unbounded), with rings of `ingress_slots` and `egress_slots` slots.
    pub fn new(
        capacity: Option<usize>,
        clock: &MockClock,
        ingress_slots: usize,
        egress_slots: usize,
    ) -> Self {
        let clock = Clock::from(clock.clone());
        let enqueue_parker = crate::sync::Parker::new();
        let dequeue_parker = crate::sync::Parker::new();
        let signals = Arc::new(Signals {
            consumers: crate::waiters::Waiters::default(),
            producers: crate::waiters::Waiters::default(),
            enqueue: crate::wakeup::Bell::new(enqueue_parker.unparker()),
            dequeue: crate::wakeup::Bell::new(dequeue_parker.unparker()),
            rounds: crate::waiters::Waiters::default(),
        });
        let shared = Arc::new(Shared::new(capacity, clock.clone(), signals, ingress_slots, egress_slots));
        let weak = Arc::downgrade(&shared);
        let subscription = clock.subscribe(Arc::new(move || {
            if let Some(s) = weak.upgrade() {
                s.clock_moved();
            }
        }));
        let spawn = |shared: Arc<Shared<T>>, body: Box<dyn FnOnce() + Send>| {
            thread::spawn(move || {
                if catch_unwind(AssertUnwindSafe(body)).is_err() {
                    shared.disconnect();
                }
            })
        };
        let s = shared.clone();
        let enq = spawn(shared.clone(), Box::new(move || crate::enqueue::run(&s, &enqueue_parker)));
        let s = shared.clone();
        let deq = spawn(shared.clone(), Box::new(move || crate::dequeue::run(&s, &dequeue_parker)));
        Queue { shared, threads: vec![enq, deq], _subscription: subscription }
    }

    /// The queue's clock reading in ticks (deadlines are ticks).
    pub fn ticks(&self) -> u64 {
        self.shared.now_ticks()
    }

    /// `Shared::send`, blocking while a bounded queue is full; returns the key.
    pub fn send(&self, item: T, deadline: u64) -> Result<u64, SendFailure<T>> {
        self.send_with(item, deadline, Wait::Until(None))
    }

    /// `Shared::send` that never blocks.
    pub fn try_send(&self, item: T, deadline: u64) -> Result<u64, SendFailure<T>> {
        self.send_with(item, deadline, Wait::Never)
    }

    fn send_with(&self, item: T, deadline: u64, wait: Wait) -> Result<u64, SendFailure<T>> {
        self.shared.send(item, deadline, wait).map_err(|e| match e {
            SendFail::Full(t) | SendFail::Timeout(t) => SendFailure::Full(t),
            SendFail::Disconnected(t) => SendFailure::Disconnected(t),
        })
    }

    /// As `Receiver::try_recv`, without telling "empty" from "exhausted".
    pub fn try_recv(&self) -> Option<T> {
        self.attempt().and_then(Result::ok)
    }

    /// As `Receiver::recv`: `None` once the queue is exhausted.
    pub fn recv(&self) -> Option<T> {
        let s = &self.shared;
        crate::waiters::block_on(&s.signals.consumers, &s.clock, None, || self.attempt()).and_then(Result::ok)
    }

    fn attempt(&self) -> Option<Result<T, ()>> {
        let s = &self.shared;
        if let Some((_, _, item)) = s.try_take() {
            return Some(Ok(item));
        }
        s.is_exhausted().then_some(Err(()))
    }

    /// As `Sender::cancel`.
    pub fn cancel(&self, key: u64) -> Option<T> {
        let (answer, reply) = crate::oneshot::pair();
        if !self.shared.command(Cmd::Cancel { key, answer }) {
            return None;
        }
        reply.wait().flatten()
    }

    /// Returns once the enqueue proxy applied every command sent before.
    pub fn sync(&self) -> bool {
        let (answer, reply) = crate::oneshot::pair();
        self.shared.command(Cmd::Sync { answer }) && reply.wait().is_some()
    }

    /// As `Receiver::close` (`Shared::close`).
    pub fn close(&self) {
        self.shared.close()
    }

    /// `Shared::len`.
    pub fn len(&self) -> usize {
        self.shared.len()
    }

    /// `len() == 0`.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Probe: the dequeue proxy's plan, read under the timers lock.
    pub fn plan(&self) -> Plan {
        lock(&self.shared.timers).sleep.into()
    }

    /// Probe: dequeue proxy round counter (odd while a round runs).
    pub fn rounds(&self) -> u64 {
        self.shared.rounds.load(Ordering::SeqCst)
    }
}

impl<T: Send + 'static> Drop for Queue<T> {
    fn drop(&mut self) {
        self.shared.disconnect();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl<T: Send + 'static> fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue").field("len", &self.len()).finish()
    }
}
