//! Shared helpers for the loom models of `delayq` that use its public API (the
//! models are in `tests/`; the models of its internals are in `models/`,
//! compiled into the crate's own tests).
//!
//! Everything here is compiled only under `--cfg delayq_loom`, when `delayq`'s
//! `sync` facade is loom's.
#![cfg(delayq_loom)]

#[path = "../models/harness.rs"]
mod harness;

pub use harness::{model, DEFAULT_MAX_BRANCHES, DEFAULT_PREEMPTIONS};
use std::sync::Arc;
use std::time::Duration;

/// `n` milliseconds.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The earlier-head scenario (model 1), shared by `tests/loom_wakeup.rs` and
/// `tests/loom_planted_bug.rs`: the new-head signal of `enqueue.rs` and the
/// lead of `lead.rs`, on a whole queue.
///
/// One item is already waiting (due in 10 ms) and a consumer is blocked in
/// `recv`, leading for it (its park is untimed on a mock clock), when an item
/// due *now* is sent: the send's insert must wake the consumer, which then
/// moves the item itself, without any clock step (a step wakes every waiter
/// and would hide a lost wake-up); a lost wake-up leaves every thread parked,
/// which loom reports as a deadlock.
pub fn earlier_head_is_delivered_without_a_clock_step() {
    use delayq::{Builder, MockClock, TryRecvError};

    let clock = MockClock::new();
    let (tx, rx) = Builder::new().capacity(2).clock(clock.clone()).build::<&str>().unwrap();
    tx.send_at("later", clock.now() + ms(10)).unwrap();
    let consumer = {
        let rx = rx.clone();
        loom::thread::spawn(move || rx.recv())
    };
    tx.send_at("now", clock.now()).unwrap();
    assert_eq!(consumer.join().unwrap(), Ok("now"));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "never early");
    clock.advance(ms(10));
    assert_eq!(rx.try_recv(), Ok("later"));
}

/// The catch-up of `try_recv` (`dequeue::catch_up` in the crate), shared by
/// `tests/loom_try_recv.rs` and `tests/loom_planted_bug.rs`.
///
/// Items due at once, with every role left to the proxy threads
/// (`helping(false)`: a send only pushes and rings), then polled with no
/// clock step: wherever the proxies are (the enqueue proxy not yet drained,
/// the dequeue proxy not yet moved them), `try_iter` gets them all, in order,
/// and then nothing. With `helping` on and three items through a two-slot
/// egress ring, the polls must also move what a full ring left behind.
pub fn try_iter_gets_every_due_item_sent_before_it() {
    try_iter_gets_every_due_item(false, 2);
}

/// See [`try_iter_gets_every_due_item_sent_before_it`].
pub fn try_iter_gets_every_due_item(helping: bool, n: u32) {
    use delayq::{Builder, MockClock, TryRecvError};

    let clock = MockClock::new();
    let (tx, rx) = Builder::new()
        .ingress_slots(2)
        .egress_slots(2)
        .helping(helping)
        .clock(clock.clone())
        .build::<u32>()
        .unwrap();
    for i in 0..n {
        tx.send_at(i, clock.now()).unwrap();
    }
    let got: Vec<u32> = rx.try_iter().collect();
    assert_eq!(got, (0..n).collect::<Vec<_>>(), "try_recv missed a due item sent before it");
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
}

/// A command pushed while a `try_recv` holds the enqueue role (its catch-up)
/// is applied: the push finds the role held and returns, so the catch-up
/// must look at the ingress after its release. One item due at once; a
/// thread polls with `try_recv` while main calls `take_pending` (a command
/// whose answer main waits for). Between them they get the item exactly
/// once, and main's wait ends (a command left behind parks everyone:
/// deadlock). Threads: main, the poller and the two proxies.
pub fn a_command_sent_during_a_try_recv_is_applied() {
    use delayq::{Builder, MockClock};

    let clock = MockClock::new();
    let (tx, rx) =
        Builder::new().ingress_slots(2).egress_slots(2).clock(clock.clone()).build::<u32>().unwrap();
    tx.send_at(7, clock.now()).unwrap();
    let poller = rx.clone();
    let t = loom::thread::spawn(move || poller.try_recv().ok());
    let taken: Vec<u32> = rx.take_pending().into_iter().map(|(_, x)| x).collect();
    let polled = t.join().unwrap();
    let mut got: Vec<u32> = taken.into_iter().chain(polled).collect();
    got.sort_unstable();
    assert_eq!(got, vec![7], "the item not taken exactly once");
}

/// The `take_pending` scenario of `tests/loom_take_pending.rs`.
///
/// Three items due at once through a two-slot egress ring with no consumer:
/// `take_pending` returns all three in order, wherever they are (the ingress,
/// the index, the ring). Then an item due at once must reach `recv` without
/// a clock step.
pub fn take_pending_takes_everything_and_the_queue_goes_on() {
    use delayq::{Builder, MockClock};

    let clock = MockClock::new();
    let (tx, rx) =
        Builder::new().ingress_slots(2).egress_slots(2).clock(clock.clone()).build::<u32>().unwrap();
    for i in 0..3 {
        tx.send_at(i, clock.now()).unwrap();
    }
    // A command: the enqueue proxy answers it after applying the sends before it.
    let taken: Vec<u32> = rx.take_pending().into_iter().map(|(_, x)| x).collect();
    assert_eq!(taken, vec![0, 1, 2]);
    tx.send_at(3, clock.now()).unwrap();
    assert_eq!(rx.recv(), Ok(3));
    assert_eq!(rx.len(), 0);
}

/// The async scenario of `tests/loom_async.rs`, shared with
/// `tests/loom_planted_bug.rs`: a future's waker registration racing a delivery
/// and the future's drop.
///
/// Future A registers (polled once), a task B waits in `recv_async` on another
/// thread, an item due at once is sent, and A is dropped — possibly after the
/// dequeue proxy's notification went to A, the older waiter. A must pass that
/// wakeup on, or B sleeps forever (loom: deadlock). No clock step: a step wakes
/// every waiter and would hide the loss.
pub fn dropped_future_passes_its_wakeup_on() {
    use delayq::{Builder, MockClock};
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Wake, Waker};

    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }

    let clock = MockClock::new();
    let (tx, rx) =
        Builder::new().ingress_slots(2).egress_slots(2).clock(clock.clone()).build::<u32>().unwrap();
    let mut a = rx.recv_async();
    let noop = Waker::from(Arc::new(Noop));
    assert!(Pin::new(&mut a).poll(&mut Context::from_waker(&noop)).is_pending());
    let b = {
        let rx = rx.clone();
        // `doc_block_on` parks through the crate's `sync` facade: a loom park here.
        loom::thread::spawn(move || delayq::doc_block_on(rx.recv_async()))
    };
    tx.send_at(1, clock.now()).unwrap();
    drop(a);
    assert_eq!(b.join().unwrap(), Ok(1));
    assert_eq!(rx.len(), 0);
}

/// Records which [`Tracked`] items were dropped, to check "dropped exactly once"
/// across every shutdown path. A plain `std` mutex: loom runs one thread at a
/// time and never switches inside this bookkeeping, so it adds no interleavings.
#[derive(Clone, Debug, Default)]
pub struct DropLog(Arc<std::sync::Mutex<Vec<u32>>>);

impl DropLog {
    /// A new, empty log.
    pub fn new() -> Self {
        DropLog::default()
    }

    /// An item that records its id here when dropped.
    pub fn item(&self, id: u32) -> Tracked {
        Tracked { id, log: self.clone() }
    }

    /// The ids dropped so far, sorted.
    pub fn dropped(&self) -> Vec<u32> {
        let mut v = self.0.lock().unwrap().clone();
        v.sort_unstable();
        v
    }
}

/// An item whose drop is recorded in a [`DropLog`].
#[derive(Debug)]
pub struct Tracked {
    /// Which item this is.
    pub id: u32,
    log: DropLog,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.log.0.lock().unwrap().push(self.id);
    }
}
