//! The enqueue role: draining the ingress into the timer index, and the
//! enqueue proxy, its default performer.
//!
//! Whoever holds the role (`role.rs`) drains up to `BATCH` commands from the
//! ingress and applies them all in ONE critical section of the timers lock
//! (flat combining: one lock round-trip and at most one dequeue-proxy wakeup
//! per batch, not per item), then answers commands and wakes anyone only after
//! releasing the lock. The proxy thread does this whenever it is awake; with
//! nothing to do it parks on its [`Bell`](crate::wakeup::Bell) (it has no
//! timer). A client whose push finds it parked takes the role instead of
//! waking it, if the role is free ([`hand_over`]): it drains up to
//! `HELP_BATCH` commands, its own among them, releases the role, and rings the
//! proxy only if commands are left. So the paced case (a push now and then)
//! costs no wake-up of the proxy, and the saturated case (the proxy awake, so
//! nobody helps) is the proxy's as before.
//!
//! Why no command is left behind: a pusher publishes its command, fences
//! (SeqCst) and reads the bell's `sleeping` flag. If the flag is clear the
//! proxy is awake and re-checks the ingress before it parks (the bell's
//! store-buffering pair, `wakeup.rs`). If it is set, the pusher either takes
//! the role, drains, releases it, fences and rings if anything is left (its
//! own command among it, or one still being written), or finds the role held
//! and leaves the command to its holder, whose check after its release (a
//! second store-buffering pair: `role::help_or_ring`) sees it. (Ringing the
//! proxy there instead, as the first cut did, woke it only to wait for the
//! role: two wake-ups where the holder's check needs none.)

use crate::admission::{Reason, INGRESS_OPEN};
use crate::cmd::Cmd;
use crate::contain::drop_contained;
use crate::metrics::Applied;
use crate::oneshot::Answer;
use crate::role::help_or_ring;
use crate::shared::{Shared, Timers};
use crate::sync::{lock, yield_now, Ordering, Parker};
use std::cell::Cell;
use std::time::{Duration, Instant};

/// An insert due before the dequeue proxy's wake-up is staged by the enqueue
/// role's holder itself (`dequeue::stage_early`) only if no dequeue round ran
/// in the last `stage_ahead / EARLY_GAP_DIV` (12.5 µs by default), so that
/// inside a burst of sends the proxy's rounds batch the items. Added with the
/// key table's fix (`slots.rs`) against a cost that turned out to be the
/// table's alone: without the gap, criterion's `pair_batch` at 1 M pending
/// took 197 ns against 170 with it (a noisy run), and `pair` (one send, then
/// its receive) 4.1 µs against 16; and in the comparison harness (`ab.py 5`,
/// with / without) 100 K items/s cost 13.3 / 12.1 µs of CPU per item, 400 K/s
/// p99 1040 / 827 µs, 1 M/s p99 1065 / 1131 µs, unthrottled 16×16 3.03 /
/// 3.01 M items/s. It does not pay, and is next to go (docs/bench/README.md,
/// eleventh round).
const EARLY_GAP_DIV: u64 = 8;

/// Commands applied per lock round-trip at most.
pub(crate) const BATCH: usize = 1024;

/// Commands a helping client drains at most: a bound on the work a send may
/// do for others (a few microseconds); the proxy does the rest.
const HELP_BATCH: usize = 64;

/// One thread's pushes closer together than this wake the enqueue proxy
/// instead of performing its role (`too_soon`).
const HELP_GAP: Duration = Duration::from_micros(4);

/// An answer to send once the lock is released.
enum Done<T> {
    Item(Answer<Option<T>>, Option<T>),
    Flag(Answer<bool>, bool),
    Tick(Answer<Option<u64>>, Option<u64>),
    All(Answer<Vec<(u64, T)>>, Vec<(u64, T)>),
    Unit(Answer<()>),
}

impl<T> Done<T> {
    fn send(self) {
        match self {
            Done::Item(a, v) => a.send(v),
            Done::Flag(a, v) => a.send(v),
            Done::Tick(a, v) => a.send(v),
            Done::All(a, v) => a.send(v),
            Done::Unit(a) => a.send(()),
        }
    }
}

pub(crate) fn run<T>(shared: &Shared<T>, parker: &Parker) {
    let mut batch: Vec<Cmd<T>> = Vec::with_capacity(BATCH);
    let mut done: Vec<Done<T>> = Vec::new();
    loop {
        let role = shared.roles.enqueue.acquire(parker);
        if shared.counter.is_disconnected() {
            wind_down(shared);
            drop(role);
            return;
        }
        let drained = drain_and_apply(shared, &mut batch, &mut done, BATCH);
        drop(role);
        if drained > 0 {
            continue;
        }
        // A drained spill can have grown the buffers far past `BATCH`: idle,
        // hand that back (`Ingress::drain_into`).
        if batch.capacity() > 4 * BATCH {
            batch = Vec::with_capacity(BATCH);
        }
        if done.capacity() > 4 * BATCH {
            done = Vec::new();
        }
        // Idle: register, re-check, park (wakeup mechanism 2).
        let bell = &shared.signals.enqueue;
        bell.prepare_sleep();
        if !shared.ingress.is_empty() {
            bell.awake();
            // A producer claimed a slot and is mid-write: let it finish.
            yield_now();
            continue;
        }
        if shared.counter.is_disconnected() {
            bell.awake();
            continue;
        }
        parker.park(None);
        bell.awake();
    }
}

/// Hands the enqueue role a command: pushes it into the ingress, then wakes
/// the proxy or performs the role ([`hand_over`]). `false` if the queue is
/// disconnected (the command, and any answer it expects, are dropped).
pub(crate) fn command<T>(shared: &Shared<T>, cmd: Cmd<T>) -> bool {
    if shared.ingress.push(cmd).is_err() {
        return false;
    }
    hand_over(shared);
    true
}

/// After a push into the ingress: makes sure somebody performs the enqueue
/// role for it (module docs). Wakes the proxy only if it is parked and the
/// role cannot be taken here (or helping is off).
pub(crate) fn hand_over<T>(shared: &Shared<T>) {
    help_or_ring(
        &shared.signals.enqueue,
        &shared.roles.enqueue,
        || shared.helping && !too_soon(),
        || !shared.ingress.is_empty(),
        || {
            let (mut batch, mut done) = (Vec::new(), Vec::new());
            drain_and_apply(shared, &mut batch, &mut done, HELP_BATCH);
        },
    );
}

/// Whether this thread performed an enqueue role (of any queue) less than
/// `HELP_GAP` ago: then its pushes come faster than a wake-up of the proxy
/// costs, and the proxy, woken, drains them in batches while the thread goes
/// on sending (helping there made one producer do the proxy's work in series
/// with its own: 1×1 unthrottled ran at 2.5 M items/s instead of 3.9). Per
/// thread, not per queue: many producers that each send now and then still
/// help. Records the time of this help otherwise. Asked only when the
/// proxy is parked (`help_or_ring` calls it lazily): asked at every push, as
/// it once was, it read the clock for every send of a streaming producer and
/// recorded a "help" each time: 1×1 unthrottled ran at 2.95–3.42 M items/s
/// against 3.60–4.06 asked lazily (medians, docs/bench/README.md, ninth round).
fn too_soon() -> bool {
    // Loom explores interleavings, not time: a hint read from the real
    // clock would make a model's choices differ between runs of the same
    // path (loom: "is the model fully deterministic?"). Under loom every
    // push that finds the proxy parked helps.
    if cfg!(delayq_loom) {
        return false;
    }
    thread_local! {
        static HELPED_AT: Cell<Option<Instant>> = const { Cell::new(None) };
    }
    let now = Instant::now();
    HELPED_AT.with(|at| {
        if at.get().is_some_and(|t| now.saturating_duration_since(t) < HELP_GAP) {
            return true;
        }
        at.set(Some(now));
        false
    })
}

/// One drain of up to `max` commands and their application; the caller holds
/// the enqueue role (a client or the proxy). Returns how many commands it applied.
fn drain_and_apply<T>(
    shared: &Shared<T>,
    batch: &mut Vec<Cmd<T>>,
    done: &mut Vec<Done<T>>,
    max: usize,
) -> usize {
    shared.ingress.drain_into(batch, max);
    let n = batch.len();
    if !shared.clock.is_mock() {
        admit(shared, n);
    }
    if n > 0 {
        apply(shared, batch, done);
    }
    n
}

/// The admission rule of the enqueue proxy, after a drain of `drained`
/// commands (`admission.rs`): a deep drain shuts the gate, a shallow one opens it
/// (producers that find the ring deep shut it too: `sender::pace`).
fn admit<T>(shared: &Shared<T>, drained: usize) {
    if drained > INGRESS_OPEN {
        shared.signals.admission.shut(Reason::Ingress);
    } else {
        shared.signals.admission.open(Reason::Ingress);
    }
}

fn apply<T>(shared: &Shared<T>, batch: &mut Vec<Cmd<T>>, done: &mut Vec<Done<T>>) {
    let mut released = 0;
    // What the batch did, for the metrics (recorded once, after the lock).
    let mut applied = Applied { commands: batch.len(), ..Applied::default() };
    // Items of `discard`s: dropped once the lock is released.
    let mut discarded = Vec::new();
    // The earliest deadline this batch adds: only it can move the head earlier.
    let mut earliest = None::<u64>;
    // Whether this batch took items out of the egress ring.
    let mut made_room = false;
    // The clock's reading for cancels of staged entries, read once per batch
    // and only if needed.
    let mut now = None;
    let wake = {
        let mut guard = lock(&shared.timers);
        let t = &mut *guard;
        for cmd in batch.drain(..) {
            match cmd {
                Cmd::Insert { key, deadline, item } => {
                    t.index.insert(key, deadline, item);
                    put_in_front(shared, t, (deadline, key), &mut now, &mut made_room);
                    applied.inserted += 1;
                    earliest = Some(earliest.map_or(deadline, |e| e.min(deadline)));
                }
                Cmd::Cancel { key, answer } => {
                    let item = cancel(shared, t, key, &mut now, &mut made_room).map(|(_, item)| item);
                    released += usize::from(item.is_some());
                    applied.cancelled += usize::from(item.is_some());
                    done.push(Done::Item(answer, item));
                }
                Cmd::Discard { key } => {
                    if let Some((_, item)) = cancel(shared, t, key, &mut now, &mut made_room) {
                        released += 1;
                        applied.cancelled += 1;
                        discarded.push(item);
                    }
                }
                Cmd::Reschedule { key, deadline, answer } => {
                    let moved = t.index.reschedule(key, deadline)
                        || cancel(shared, t, key, &mut now, &mut made_room)
                            .map(|(_, item)| t.index.insert(key, deadline, item))
                            .is_some();
                    applied.rescheduled += usize::from(moved);
                    if moved {
                        put_in_front(shared, t, (deadline, key), &mut now, &mut made_room);
                        earliest = Some(earliest.map_or(deadline, |e| e.min(deadline)));
                    }
                    done.push(Done::Flag(answer, moved));
                }
                Cmd::Peek { answer } => {
                    let staged = shared.egress.earliest_deadline();
                    let min = match (t.index.peek(), staged) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    done.push(Done::Tick(answer, min));
                }
                Cmd::Sync { answer } => done.push(Done::Unit(answer)),
                Cmd::TakePending { answer } => {
                    let mut all = shared.egress.take_all();
                    t.staged.clear();
                    // Always: the ring may have held recalled entries only,
                    // passed over (and their slots freed) by `take_all`.
                    made_room = true;
                    all.extend(t.index.take_all());
                    // The ring is in delivery order: an item that arrived already
                    // due can follow later deadlines there. Keys make it exact.
                    all.sort_unstable_by_key(|&(d, k, _)| (d, k));
                    released += all.len();
                    done.push(Done::All(answer, all.into_iter().map(|(d, _, item)| (d, item)).collect()));
                }
            }
        }
        if let Some(e) = earliest {
            // SeqCst: read by `dequeue::catch_up` after the role's release.
            shared.index_head.fetch_min(e, Ordering::SeqCst);
        }
        // A recall (or `take_pending`) may have taken the live entry whose
        // taker was to run the next round (`duty.rs`): the proxy's again.
        let planned = t.sleep;
        let early = t.sleep.must_wake_for(earliest);
        // An insert due before the proxy's wake-up: staged by us (below)
        // unless commands wait behind this batch or a round ran moments ago
        // (a burst: the proxy's rounds batch it).
        let stage_here = early && shared.duty.is_on() && shared.ingress.is_empty() && {
            let now = *now.get_or_insert_with(|| shared.now_ticks());
            now >= t.last_round.saturating_add(shared.stage_ahead / EARLY_GAP_DIV)
        };
        let recalled = made_room && shared.duty.take_back();
        (early, stage_here.then_some(planned), recalled)
    };
    let wake = match wake {
        (_, _, true) => true,
        (true, Some(planned), false) => !crate::dequeue::stage_early(shared, planned),
        (early, _, false) => early,
    };
    if wake {
        shared.signals.dequeue.force();
    }
    #[cfg(not(delayq_bug_take_pending_no_ring))]
    if made_room {
        // Room appeared without a receive: the dequeue proxy may wait for it
        // (`Sleep::Space`), and only a consumer's `taken` would ring otherwise.
        // The bell's fence orders our pops before its check (wakeup mechanism 2).
        shared.signals.dequeue.ring();
    }
    // Planted bug for the loom suite: without the ring above, a proxy waiting
    // for room sleeps through `take_pending` (reliability defect 4).
    #[cfg(delayq_bug_take_pending_no_ring)]
    let _ = made_room;
    // Release before answering, so that `len` is exact when `cancel` returns.
    shared.release(released);
    shared.metrics.enqueue_batch(&applied);
    for d in done.drain(..) {
        d.send();
    }
    // On a proxy thread: a panicking `Drop` must not kill it.
    drop_contained(discarded);
}

/// Takes a pending item out: from the index, or, if the dequeue proxy staged it
/// and it is not due yet, back from the egress. `(deadline, item)`.
fn cancel<T>(
    shared: &Shared<T>,
    t: &mut Timers<T>,
    key: u64,
    now: &mut Option<u64>,
    made_room: &mut bool,
) -> Option<(u64, T)> {
    if let Some(found) = t.index.cancel(key) {
        return Some(found);
    }
    if shared.stage_ahead == 0 {
        return None;
    }
    let now = *now.get_or_insert_with(|| shared.now_ticks());
    // SAFETY: the caller holds the timers lock (`t` is behind it).
    let found = unsafe { t.staged.recall_key(&shared.egress, key, now) };
    if found.is_some() {
        // The recalled entry holds its slot until someone passes it.
        shared.egress.pass_recalled();
        *made_room = true;
    }
    found
}

/// An item just went into the index due at `deadline`: staged entries that
/// must follow it go back into the index now, under the same lock, so that
/// none of them can leave while it waits there (README, "Order"). Left to the
/// dequeue role's next round, which recalls them too, a consumer could take
/// one that falls due first: the proxy short of a CPU, or a mock clock
/// stepped past both deadlines before that round ran (found by a port of
/// tokio-util's insert-before-the-head tests, `tests/ported.rs`).
fn put_in_front<T>(
    shared: &Shared<T>,
    t: &mut Timers<T>,
    (deadline, key): (u64, u64),
    now: &mut Option<u64>,
    made_room: &mut bool,
) {
    if shared.stage_ahead == 0 || t.staged.last().map_or(true, |last| last < (deadline, key)) {
        return;
    }
    let now = *now.get_or_insert_with(|| shared.now_ticks());
    // SAFETY: the caller holds the timers lock (`t` is behind it).
    if unsafe { t.staged.recall_later(&shared.egress, (deadline, key), now, &mut t.index) } > 0 {
        // The recalled entries hold their slots until someone passes them.
        shared.egress.pass_recalled();
        *made_room = true;
    }
}

/// The last receiver is gone: answer what is queued, drop every pending item.
fn wind_down<T>(shared: &Shared<T>) {
    let mut rest = Vec::new();
    shared.ingress.drain_closed(&mut rest);
    let mut dropped = Vec::new();
    let mut released = 0;
    let mut done = Vec::new();
    {
        let mut t = lock(&shared.timers);
        for cmd in rest {
            match cmd {
                Cmd::Insert { item, .. } => dropped.push(item),
                Cmd::Cancel { key, answer } => {
                    let item = t.index.cancel(key).map(|(_, item)| item);
                    released += usize::from(item.is_some());
                    done.push(Done::Item(answer, item));
                }
                Cmd::Discard { key } => {
                    if let Some((_, item)) = t.index.cancel(key) {
                        released += 1;
                        dropped.push(item);
                    }
                }
                // Nothing will be delivered any more: there is nothing to move.
                Cmd::Reschedule { answer, .. } => done.push(Done::Flag(answer, false)),
                Cmd::Peek { answer } => done.push(Done::Tick(answer, None)),
                Cmd::TakePending { answer } => done.push(Done::All(answer, Vec::new())),
                Cmd::Sync { answer } => done.push(Done::Unit(answer)),
            }
        }
        dropped.extend(t.index.take_all().into_iter().map(|(_, _, item)| item));
        dropped.extend(shared.egress.take_all().into_iter().map(|(_, _, item)| item));
        t.staged.clear();
    }
    shared.release(released + dropped.len());
    for d in done {
        d.send();
    }
    // On a proxy thread: a panicking `Drop` must not kill it.
    drop_contained(dropped);
}
