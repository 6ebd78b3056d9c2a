//! The enqueue role: drain the ingress into the timer index. Whoever is
//! present performs it — the producer (or command's caller) whose push found
//! the role free, with the other producers' commands batched in (flat
//! combining: Hendler, Incze, Shavit and Tzafrir, SPAA 2010) — and the
//! enqueue proxy thread performs only what nobody was there for: commands a
//! client holder left behind after its bounded share, everything while it
//! streams (below), and everything with `Builder::helping(false)`.
//!
//! **A push is never left behind** (`hand_over`): the pusher fences after its
//! push, then tries the role; if it is held, the pusher leaves, because the
//! holder fences after its release and looks at the ingress again
//! (`Ingress::ready`: a written command at its head). Either the
//! pusher sees the role free (and takes it, or someone else did and will look
//! after *its* release), or the holder sees the push (the store-buffering
//! pair, SeqCst fences on both sides). A push behind a command still being
//! written is not counted: that command's producer hands it over once
//! written, and the drain it performs or rings for takes what follows. A
//! holder performs at most [`CLIENT_ROUNDS`] batches of at most [`CLIENT_BATCH`] commands, then rings
//! the proxy for the rest — a second store-buffering pair with the proxy's
//! `sleeping` flag (`wakeup.rs`). Loom: `loom-tests/models/role.rs`
//! (`no_push_is_left_behind`), with the planted bug `delayq_bug_help_no_ring`.
//!
//! **Under load the proxy streams** ([`Stream`]): a client batch of
//! [`STREAM_AT`] commands or more means commands arrive faster than the
//! producers apply them (a burst), and a window of 256 single-command
//! batches applied at a command per microsecond or faster (`pace.rs`) means
//! a lone producer sends flat out; from then on a push rings the proxy and
//! leaves (`role::leave_to_proxy`); the proxy applies batches until
//! [`STREAM_BACK`] of them in a row hold fewer than [`STREAM_SMALL`]
//! commands, then hands the role back. Near saturation this saves the
//! producers' per-command role (a CAS, the timers lock against the rounds,
//! two fences); below it, a proxy rung per send would cost a wake-up per
//! item. In a burst's stream a push that finds the proxy parked (its
//! `sleeping` flag set) performs the role itself, as without streaming,
//! instead of waiting for the proxy's wake-up; the rounds it leaves behind
//! ring the proxy awake. A lone producer's stream always rings: there the
//! proxy parks between most pushes, and taking them back would undo the
//! stream. Loom: `models/role.rs` (`no_push_is_left_behind_a_streaming_proxy`,
//! planted bug `delayq_bug_stream_no_ring`; `no_push_is_left_behind` for the
//! push that performs the role).
//!
//! **Wake after release** (the Linux kernel's `wake_q`): a batch collects what
//! its performer owes — answers to commands, producers waiting for room in the
//! ingress or in a bounded queue, the signal for a new earliest deadline — and
//! pays it after the role is released ([`Owed::pay`]), so a wake-up that
//! preempts the performer never leaves the role held by a thread off the CPU.
//!
//! **A new earliest deadline** (Java `DelayQueue.offer`'s signal): a batch
//! that inserts lowers `index_head` under the timers lock; if that made a new
//! head, after the release it fences and reads the lead (`lead.rs`): a leader
//! waiting for a later deadline, or nobody leading, means one waiting
//! consumer is woken (the dequeue proxy, if it leads). Nothing is woken when
//! someone leads for a deadline no later, nor for an insert no earlier than
//! the head (as `offer` signals only when its item becomes the head):
//! whoever leads for the head or is about to look at it covers the insert.

use crate::cmd::Cmd;
use crate::contain::drop_contained;
use crate::metrics::Applied;
use crate::oneshot::Answer;
use crate::role::{combine, leave_to_proxy};
use crate::shared::{Shared, Timers};
use crate::sync::{lock, yield_now, Ordering, Parker};

/// The most commands the enqueue proxy applies per critical section of the
/// timers lock.
const BATCH: usize = 1024;

/// Room the enqueue role's batch keeps between batches (a spill's burst may
/// grow it further for one batch).
const BATCH_ROOM: usize = 1024;

/// The most commands a client applies per critical section: its share of
/// the others' work is bounded, as a combiner's must be.
pub(crate) const CLIENT_BATCH: usize = 256;

/// The most batches a client performs per push before it rings the proxy
/// for what is left.
pub(crate) const CLIENT_ROUNDS: usize = 4;

/// A client batch this long hands the role to the proxy (`Shared::streaming`):
/// commands arrived faster than the producers applied them.
pub(crate) const STREAM_AT: usize = 64;

/// While it streams, a proxy batch shorter than this is small ...
const STREAM_SMALL: usize = 4;

/// ... and this many small batches in a row hand the role back to the
/// producers.
pub(crate) const STREAM_BACK: u32 = 8;

/// Whether, and why, the enqueue proxy streams (`Shared::streaming`; module
/// docs, "Under load"). A hint: either way a push is handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    /// The producers perform the role.
    Off = 0,
    /// A client batch held [`STREAM_AT`] commands or more: a push rings the
    /// proxy while it is awake, and performs the role while it is parked.
    Burst = 1,
    /// A lone producer sends flat out (`pace.rs`): every push rings the proxy.
    Lone = 2,
}

impl Stream {
    pub(crate) fn of<T>(s: &Shared<T>) -> Stream {
        // Relaxed: a hint (`Shared::streaming`).
        match s.streaming.load(Ordering::Relaxed) {
            1 => Stream::Burst,
            2 => Stream::Lone,
            _ => Stream::Off,
        }
    }

    fn set<T>(self, s: &Shared<T>) {
        // Relaxed: a hint. The load first: a store to the line every send
        // reads would make them miss it.
        if s.streaming.load(Ordering::Relaxed) != self as usize {
            s.streaming.store(self as usize, Ordering::Relaxed);
        }
    }
}

/// An answer to send once the role is released.
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

/// What a batch's performer owes once it has released the role (module docs).
#[must_use = "what a batch owes is paid after the role's release"]
pub(crate) struct Owed<T> {
    /// Commands drained from the ring (producers waiting for its room).
    freed: usize,
    /// The batch completed a fast window of the role's pace (`pace.rs`).
    fast: bool,
    /// Items that left `len` (cancelled, taken).
    released: usize,
    /// The earliest deadline the batch inserted, while it is applied; then
    /// only if it lowered `index_head` (a new head to signal).
    earliest: Option<u64>,
    applied: Applied,
    done: Vec<Done<T>>,
    /// Items of `discard`s, dropped with no lock or role held.
    discarded: Vec<T>,
    /// When the memory rule wants its next look (`tidy.rs`), if the batch
    /// removed items and looked.
    tidy: Option<std::time::Instant>,
}

impl<T> Owed<T> {
    /// Commands the batch applied.
    pub(crate) fn commands(&self) -> usize {
        self.applied.commands
    }

    /// Pays what the batch owes: room in the ingress, `len`, the metrics, the
    /// new-head signal, the answers, and the discarded items' drops (a
    /// panicking `Drop` is contained).
    pub(crate) fn pay(self, s: &Shared<T>) {
        s.ingress.made_room(self.freed);
        if self.released > 0 {
            s.tidy_later(self.tidy);
        }
        // Before answering, so that `len` is exact when `cancel` returns.
        s.release(self.released);
        s.metrics.enqueue_batch(&self.applied);
        if let Some(e) = self.earliest {
            new_head(s, e);
        }
        for d in self.done {
            d.send();
        }
        drop_contained(self.discarded);
    }
}

/// After a batch that inserted `earliest` (module docs): wakes one waiting
/// consumer if nobody leads for a deadline no later, or the dequeue proxy if
/// it leads for a later one.
fn new_head<T>(s: &Shared<T>, earliest: u64) {
    let Some(who) = s.lead.after_insert(earliest) else { return };
    match who {
        Some(l) if l.proxy => s.signals.dequeue.force(),
        // Nobody leads, without helping: the proxy leads for everyone.
        None if !s.helping => s.signals.dequeue.force(),
        // After `after_insert`'s fence: the waiters' store-buffering pair.
        _ => s.signals.consumers.notify_after_fence(1),
    }
}

/// The enqueue proxy: performs the role when rung (a client left commands
/// behind, or `helping(false)`); never waits for it while a client holds it
/// (the holder looks at the ingress after its release).
pub(crate) fn run<T>(shared: &Shared<T>, parker: &Parker) {
    // Small batches in a row while streaming.
    let mut small = 0;
    loop {
        if shared.counter.is_disconnected() {
            wind_down(shared);
            return;
        }
        if let Some(held) = shared.roles.enqueue.try_acquire() {
            let owed = apply(shared, BATCH);
            drop(held);
            let n = owed.commands();
            owed.pay(shared);
            if n > 0 && Stream::of(shared) != Stream::Off {
                small = if n < STREAM_SMALL { small + 1 } else { 0 };
                if small >= STREAM_BACK {
                    Stream::Off.set(shared);
                    small = 0;
                }
            }
            if n > 0 {
                shared.metrics.proxy_round(true);
                continue;
            }
        }
        // Idle (or a client holds the role, and will look again after its
        // release): register, re-check, park.
        let bell = &shared.signals.enqueue;
        bell.prepare_sleep();
        let work = shared.ingress.ready() && !shared.roles.enqueue.is_held_now();
        if work || shared.counter.is_disconnected() {
            bell.awake();
            continue;
        }
        parker.park(None);
        bell.awake();
    }
}

/// Hands the enqueue role a command: pushes it into the ingress, then
/// performs the role or rings the proxy ([`hand_over`]). `false` if the queue
/// is disconnected (the command, and any answer it expects, are dropped).
pub(crate) fn command<T>(shared: &Shared<T>, cmd: Cmd<T>) -> bool {
    if shared.ingress.push(cmd).is_err() {
        return false;
    }
    hand_over(shared);
    true
}

/// After a push into the ingress: makes sure somebody performs the enqueue
/// role for it (module docs; `role::combine`). With helping on, the pusher
/// performs it if it is free, unless the proxy streams (and, in a burst's
/// stream, is awake); then, and without helping, it rings the proxy.
pub(crate) fn hand_over<T>(shared: &Shared<T>) {
    // Hints, both: either path hands the push over.
    let to_proxy = !shared.helping
        || match Stream::of(shared) {
            Stream::Off => false,
            Stream::Lone => true,
            // A parked proxy is a wake-up away (at 16 x 16 and 400 K items/s,
            // p99 lateness 877 -> 438 us when the push performs the role).
            Stream::Burst => !shared.signals.enqueue.is_sleeping(),
        };
    if to_proxy {
        leave_to_proxy(&shared.signals.enqueue);
        return;
    }
    combine(
        &shared.roles.enqueue,
        &shared.signals.enqueue,
        CLIENT_ROUNDS,
        |held| {
            let owed = apply(shared, CLIENT_BATCH);
            drop(held);
            if owed.commands() >= STREAM_AT {
                Stream::Burst.set(shared);
            } else if owed.fast {
                Stream::Lone.set(shared);
            }
            owed.pay(shared);
        },
        || shared.ingress.ready(),
    );
}

/// For a holder of the enqueue role other than `combine`'s performers (the
/// catch-up of `try_recv`), after its release: a push that found the role
/// held returned, leaving its command to the holder, so the holder looks at
/// the ingress again and hands what it finds over.
pub(crate) fn look_after_release<T>(shared: &Shared<T>) {
    crate::role::look_after_release(|| shared.ingress.ready(), || hand_over(shared));
}

/// One batch of up to `max` commands, drained and applied in one critical
/// section of the timers lock (so no command is ever out of the ingress and
/// not yet applied while the lock is free); the caller holds the enqueue
/// role and pays what the batch owes once it has released it.
pub(crate) fn apply<T>(s: &Shared<T>, max: usize) -> Owed<T> {
    let mut owed = Owed {
        freed: 0,
        fast: false,
        released: 0,
        earliest: None,
        applied: Applied::default(),
        done: Vec::new(),
        discarded: Vec::new(),
        tidy: None,
    };
    let mut guard = lock(&s.batch);
    let batch = &mut *guard;
    owed.freed = s.ingress.drain_with(max, |cmd| batch.cmds.push_back(cmd));
    // A mock clock's pace says nothing about the load.
    owed.fast = !s.clock.is_mock() && batch.pace.applied(owed.freed, || s.now_ticks());
    let mut timers = lock(&s.timers);
    let t = &mut *timers;
    // One at a time off the front: a command that unwinds leaves the rest
    // here, in order, for the next holder.
    while let Some(cmd) = batch.cmds.pop_front() {
        apply_one(s, t, cmd, &mut owed);
    }
    if batch.cmds.capacity() > BATCH_ROOM {
        // A spill's burst: its memory goes with it.
        batch.cmds.shrink_to(BATCH_ROOM);
    }
    drop(guard);
    if let Some(e) = owed.earliest {
        if !crate::lead::lower_head(&s.index_head, e) {
            // No new head: nothing to signal.
            owed.earliest = None;
        }
    }
    if owed.released > 0 {
        owed.tidy = s.tidy(t);
    }
    if !s.clock.is_mock() {
        s.signals.admission.after_drain(owed.applied.commands);
    }
    owed
}

fn apply_one<T>(s: &Shared<T>, t: &mut Timers<T>, cmd: Cmd<T>, owed: &mut Owed<T>) {
    owed.applied.commands += 1;
    let inserted = |owed: &mut Owed<T>, deadline: u64| {
        if deadline != crate::clock::NEVER {
            owed.earliest = Some(owed.earliest.map_or(deadline, |e| e.min(deadline)));
        }
    };
    match cmd {
        Cmd::Insert { key, deadline, item } => {
            t.index.insert(key, deadline, item);
            owed.applied.inserted += 1;
            inserted(owed, deadline);
        }
        Cmd::Cancel { key, answer } => {
            let item = t.index.cancel(key).map(|(_, item)| item);
            let found = usize::from(item.is_some());
            owed.released += found;
            owed.applied.cancelled += found;
            owed.done.push(Done::Item(answer, item));
        }
        Cmd::Discard { key } => {
            if let Some((_, item)) = t.index.cancel(key) {
                owed.released += 1;
                owed.applied.cancelled += 1;
                owed.discarded.push(item);
            }
        }
        Cmd::Reschedule { key, deadline, answer } => {
            let moved = t.index.reschedule(key, deadline);
            if moved {
                owed.applied.rescheduled += 1;
                inserted(owed, deadline);
            }
            owed.done.push(Done::Flag(answer, moved));
        }
        Cmd::Peek { answer } => {
            let min = match (t.index.peek(), s.egress.earliest_deadline()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            owed.done.push(Done::Tick(answer, min));
        }
        Cmd::Sync { answer } => owed.done.push(Done::Unit(answer)),
        Cmd::TakePending { answer } => {
            let mut all = s.egress.take_all();
            all.extend(t.index.take_all());
            // The ring is in delivery order: an item that arrived already due
            // can follow later deadlines there. Keys make it exact.
            all.sort_unstable_by_key(|&(d, k, _)| (d, k));
            owed.released += all.len();
            owed.done.push(Done::All(answer, all.into_iter().map(|(d, _, item)| (d, item)).collect()));
        }
    }
}

/// The queue is disconnected: answers what is queued and drops every pending
/// item (on this thread, panics contained). Run by the enqueue proxy on its
/// way out, and by the last receiver's drop (`drop_pending`).
fn wind_down<T>(shared: &Shared<T>) {
    let e = wait_for(&shared.roles.enqueue);
    let d = wait_for(&shared.roles.dequeue);
    let (done, dropped, released) = take_everything(shared);
    drop(d);
    drop(e);
    pay_wind_down(shared, done, dropped, released);
}

/// The last receiver is gone: drops every pending item before its `drop`
/// returns (crossbeam-channel's rule), waiting for the roles' holders (bounded
/// work). A thread that holds a role itself (an item's `Drop` dropping the
/// last receiver) leaves it to the enqueue proxy's wind-down instead.
pub(crate) fn drop_pending<T>(shared: &Shared<T>) {
    if crate::role::holding_any() {
        return;
    }
    wind_down(shared);
}

/// Takes `role`, yielding while another holds it (its work is bounded).
pub(crate) fn wait_for(role: &crate::role::Role) -> crate::role::Held<'_> {
    loop {
        if let Some(held) = role.try_acquire() {
            return held;
        }
        yield_now();
    }
}

/// With both roles held: every queued command answered as a disconnected
/// queue answers it, every pending item taken out.
fn take_everything<T>(shared: &Shared<T>) -> (Vec<Done<T>>, Vec<T>, usize) {
    let mut rest = Vec::new();
    shared.ingress.drain_closed(&mut rest);
    let mut dropped = Vec::new();
    let mut released = 0;
    let mut done = Vec::new();
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
    t.index.trim();
    (done, dropped, released)
}

fn pay_wind_down<T>(shared: &Shared<T>, done: Vec<Done<T>>, dropped: Vec<T>, released: usize) {
    shared.release(released + dropped.len());
    for d in done {
        d.send();
    }
    // A panicking `Drop` must not kill the thread (a proxy) or unwind out of
    // the receiver's `drop`.
    drop_contained(dropped);
}
