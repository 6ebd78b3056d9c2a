//! The dequeue role and the dequeue proxy, its default performer: moves items
//! from the timer index to the egress ring once they are due within
//! `stage_ahead`; the admission rule it applies after each round; consumers'
//! help; and the handshake by which a mock clock's step waits for one of its
//! rounds (the counter is `rounds.rs`).
//!
//! The proxy performs its rounds holding the dequeue role (`role.rs`), so the
//! index sees two performers at most, this role's and the enqueue role's.
//! Three clients perform it too: a consumer that claimed the staging duty
//! (`duty.rs`: the proxy handed it its next round and parked without a
//! timer) runs the proxy's round (`perform_duty`); the performer of the
//! enqueue role whose insert is due before the proxy's planned wake-up runs
//! that round instead of waking the proxy (`stage_early`); and a `try_recv`
//! that found nothing due moves what is due (`catch_up`). One other client
//! performer was tried and removed: consumers that found nothing due while
//! the proxy was late ran a round in the first cut of the roles (it cost
//! 16×16 unthrottled runs 16 % of their throughput and 4×4 ones 27 %, and
//! gained little paced: they fought an awake proxy for the role, which a
//! handed-over round cannot): docs/bench/README.md, seventh round.
//!
//! Each round reads the clock once (`now`), then in ONE critical section of
//! the timers lock moves every item due by `now + 2 × stage_ahead` (as many as
//! the egress ring has room for; staged entries due after one of them go back
//! to the index first, so that the ring stays in deadline order), reads the new
//! head and records the sleep plan ([`Sleep`]: the time of the next round,
//! so that only an insert due before then wakes the proxy), and hands that
//! round to the consumers when it can (`duty.rs`). After unlocking it wakes
//! consumers; the proxy then parks until `stage_ahead` before the new head's
//! deadline (without a timer if it handed the round over), an earlier head,
//! egress room, a mock-clock step or shutdown — and, when no consumer leads
//! for the oldest staged entry (`lead.rs`), until that entry's deadline at
//! the latest. Waking when the
//! head is `stage_ahead` away and filling to twice that is hysteresis: the
//! proxy wakes at most once per `stage_ahead` of deadlines, not once per item
//! as the window slides (at 100 K items/s on 2 cores: 10 K proxy rounds per
//! second instead of 27 K, and 3.7 s of CPU instead of 4.4 for 300 K items;
//! docs/bench/README.md, seventh round). So an item is staged between one and
//! two `stage_ahead`s before its deadline.

use crate::admission::Reason;
use crate::clock::{Clock, NEVER};
use crate::cmd::Cmd;
use crate::enqueue;
use crate::shared::{Shared, Timers};
use crate::sync::{lock, set_timer_slack, yield_now, Ordering, Parker};
use crate::waiters::block_on;
use crate::wakeup::{Bell, Sleep};
use std::time::{Duration, Instant};

/// Timer slack of the dequeue proxy's timed parks: the kernel may fire them this
/// much late (instead of its default 50 µs), so lateness stays in microseconds.
const TIMER_SLACK_NS: u64 = 2_000;

/// The most entries the ring may hold for the proxy to hand its next round
/// to their takers (`duty.rs`).
const HAND_OVER_MAX: usize = 16;

/// How long the index must stay empty before the proxy hands back the
/// buffers a burst left in it (`Index::trim`): long enough that a queue
/// swinging around a working set keeps them, short enough that a drained
/// burst's memory goes back while an operator watches.
const TRIM_AFTER: Duration = Duration::from_secs(1);

/// When the index last emptied after holding items, and whether it has held
/// any since it was last trimmed.
#[derive(Default)]
struct Trim {
    dirty: bool,
    empty_since: Option<Instant>,
}

impl Trim {
    /// After a round: trims the index if it has stayed empty `TRIM_AFTER`;
    /// returns when the proxy should wake to trim it, if it will be due.
    fn after_round<T>(&mut self, shared: &Shared<T>, r: &Round) -> Option<Instant> {
        if shared.clock.is_mock() {
            return None;
        }
        if r.index_len > 0 || r.due + r.staged > 0 {
            self.dirty = true;
            self.empty_since = None;
        }
        if !self.dirty || r.index_len > 0 {
            return None;
        }
        let now = shared.clock.now();
        let since = *self.empty_since.get_or_insert(now);
        if now.saturating_duration_since(since) < TRIM_AFTER {
            return Some(since + TRIM_AFTER);
        }
        lock(&shared.timers).index.trim();
        *self = Trim::default();
        None
    }
}

pub(crate) fn run<T>(shared: &Shared<T>, parker: &Parker) {
    set_timer_slack(TIMER_SLACK_NS);
    let mut taken_before = shared.egress.taken_so_far();
    let mut trim = Trim::default();
    loop {
        if shared.counter.is_disconnected() {
            // The enqueue proxy drops what is pending.
            return;
        }
        // Awake: the next round is ours again, whoever it was handed to.
        shared.duty.take_back();
        // Only mock-clock steps wait for rounds.
        let counted = shared.clock.is_mock();
        if counted {
            shared.rounds.start();
        }
        let role = shared.roles.dequeue.acquire(parker);
        let now = delivery_now(shared);
        let r = round(shared, now);
        drop(role);
        // Planted bug for the loom suite: publishing the plan in a second critical
        // section opens the "looked at the head, then slept" window that the Go
        // timing-wheel library's delay queue describes in its comments.
        #[cfg(delayq_bug_lost_wakeup)]
        {
            lock(&shared.timers).sleep = r.plan;
        }
        if !counted {
            admit(shared, &mut taken_before, r.plan == Sleep::Space);
        }
        wake_consumers(shared, &r, false);
        shared.metrics.dequeue_round(r.due + r.staged);
        if shared.metrics.recording() {
            shared.sample_metrics(r.staged_now);
        }
        if counted {
            shared.rounds.end();
        }
        let trim_at = trim.after_round(shared, &r);
        let wake = r.staged_wake.map(|t| shared.ticks.instant(t));
        match r.plan {
            Sleep::Space => {
                let bell = &shared.signals.dequeue;
                bell.prepare_sleep();
                if !shared.egress.has_room_for_batch() && !shared.counter.is_disconnected() {
                    shared.clock.park(parker, wake);
                }
                bell.awake();
            }
            Sleep::Until(t) => {
                // `t` is `stage_ahead` before the head's deadline, to stage it,
                // unless the ring was full (then staging waits for room or the
                // deadline): `round`.
                // Handed to the consumers (`duty.rs`): no timer of our own
                // but for a staged entry nobody leads for.
                let t = if r.handed { r.staged_wake } else { Some(r.staged_wake.map_or(t, |w| w.min(t))) };
                let until = t.map(|t| shared.ticks.instant(t));
                shared.clock.park(parker, until);
            }
            Sleep::Forever => shared.clock.park(parker, earliest(wake, trim_at)),
            Sleep::Awake => {}
        }
    }
}

/// What a round did and what the proxy does next.
struct Round {
    /// Entries pushed into the egress that were due.
    due: usize,
    /// Entries pushed into the egress ahead of their deadline.
    staged: usize,
    /// The earliest deadline of the staged entries that fell due since the
    /// last round, still waiting.
    fell_due: Option<u64>,
    plan: Sleep,
    /// The deadline of the oldest staged entry still waiting.
    first_staged: Option<u64>,
    /// The deadline the leading consumer waits for, read after the pushes.
    lead: Option<u64>,
    /// The proxy's own wake-up for the oldest staged entry, when no consumer
    /// leads for it (`lead.rs`).
    staged_wake: Option<u64>,
    /// Entries staged in the egress when the round ended (for the metrics).
    staged_now: usize,
    /// Items left in the index when the round ended.
    index_len: usize,
    /// The next round was handed to the takers of the ring's live entries
    /// (`duty.rs`).
    handed: bool,
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// One round under the timers lock: moves every item due by `now + 2 ×
/// stage_ahead` into the egress (as many as it has room for), recalling staged
/// entries that an earlier item must precede, then reads the new head and
/// records the sleep plan.
fn round<T>(shared: &Shared<T>, now: u64) -> Round {
    // Fill to twice the wake-up distance (module docs).
    let ahead = shared.stage_ahead.saturating_mul(2);
    let horizon = now.saturating_add(ahead).min(NEVER - 1);
    let mut t = lock(&shared.timers);
    let t = &mut *t;
    let fell_due = t.staged.prune(&shared.egress, now);
    let Moved { due, staged, due_left } = fill(shared, t, now, horizon);
    // The plan records when the proxy will wake, not the head's deadline: it
    // wakes `stage_ahead` before the head (unless the ring is full), so an
    // insert due no earlier than that is staged in time by that round and
    // needs no wake-up of its own.
    let full = shared.egress.is_full();
    let next = t.index.next_wake();
    // SeqCst: read by `catch_up` without the lock.
    shared.index_head.store(next.unwrap_or(NEVER), Ordering::SeqCst);
    let plan = match Sleep::plan(next, due_left) {
        Sleep::Until(head) if !full => Sleep::Until(head.saturating_sub(shared.stage_ahead)),
        p => p,
    };
    // The proxy's half of the lead hand-off (`lead.rs`): our pushes, a
    // fence, then the leader's deadline.
    let lead = shared.lead.after_push();
    let first_staged = t.staged.first();
    let staged_wake = first_staged.filter(|&f| lead.map_or(true, |l| l > f));
    // The next round goes to the takers of the ring's live entries, awake
    // at their deadlines anyway (`duty.rs`), when the queue is paced, not
    // saturated: nothing due was moved, few entries wait, and the round is
    // not imminent. (The proxy keeps a timer for a staged entry nobody
    // leads for: `run`.)
    let handed = match plan {
        Sleep::Until(wake)
            if shared.duty.is_on()
                && due == 0
                && first_staged.is_some()
                && shared.egress.len() <= HAND_OVER_MAX
                && wake > now.saturating_add(shared.stage_ahead / 2) =>
        {
            shared.duty.hand_over(wake, || shared.egress.has_live_entry())
        }
        // A consumer's earlier hand-over, left while we waited for the role.
        _ => {
            shared.duty.take_back();
            false
        }
    };
    #[cfg(not(delayq_bug_lost_wakeup))]
    {
        t.sleep = plan;
    }
    t.last_round = now;
    let (staged_now, index_len) = (t.staged.len(), t.index.len());
    Round { due, staged, fell_due, plan, first_staged, lead, staged_wake, staged_now, index_len, handed }
}

/// A consumer claimed the staging duty after a take (`duty.rs`): performs
/// the proxy's round, and hands the next one on, or wakes the proxy to plan
/// it. A thread inside a role's work (an item's `Drop`) or one that finds
/// the role held (a proxy mid-round, a `try_recv` catching up) leaves the
/// round to the proxy.
pub(crate) fn perform_duty<T>(shared: &Shared<T>, chained: bool) {
    let role = if crate::role::holding_any() { None } else { shared.roles.dequeue.try_acquire() };
    let Some(role) = role else {
        shared.signals.dequeue.force();
        return;
    };
    // The proxy plans the next round unless this one hands it on: the claim
    // cleared the duty, and the proxy parked without a timer.
    client_round(shared, role, chained, |r| {
        shared.metrics.handed_round();
        r.handed
    });
}

/// The enqueue role's holder applied an insert due before the dequeue
/// proxy's `planned` wake-up (`wakeup.rs`, mechanism 1), with nothing behind
/// it in the ingress: instead of waking the proxy to stage it, it performs
/// that round itself, if the dequeue role is free. Returns `false` if it did
/// not (the caller wakes the proxy). After a round it wakes the proxy itself
/// unless the proxy may sleep on: the round handed the next one to the
/// consumers (`duty.rs`), or the proxy, parked on its timer (no round was
/// handed to it), wakes no later than the new plan. An insert only moves the
/// head earlier and a round only later, so the proxy's timer, no later than
/// the head when it parked, stays no later than the head.
pub(crate) fn stage_early<T>(shared: &Shared<T>, planned: Sleep) -> bool {
    let Sleep::Until(armed) = planned else { return false };
    let Some(role) = shared.roles.dequeue.try_acquire() else { return false };
    // Only the dequeue role's holder hands rounds over: we read our own
    // state. Held: the proxy parked without a timer (`run`).
    let handed_before = shared.duty.is_held();
    client_round(shared, role, false, |r| {
        shared.metrics.early_round();
        proxy_sleeps_on(armed, handed_before, r.handed, r.plan, r.staged_wake)
    });
    true
}

/// A round performed by a client holding the dequeue `role`: the round,
/// the role released, consumers woken as the proxy would (but for the one
/// a taker's chain wake-up already woke: `chained`), the round recorded.
/// Then wakes the dequeue proxy unless `proxy_may_sleep` says otherwise —
/// and also if anything here unwinds (a panicking metrics recorder), so that
/// a round the proxy left to others is never left with nobody.
fn client_round<T>(
    shared: &Shared<T>,
    role: crate::role::Held<'_>,
    chained: bool,
    proxy_may_sleep: impl FnOnce(&Round) -> bool,
) {
    let mut fallback = WakeOnDrop(Some(&shared.signals.dequeue));
    let r = round(shared, delivery_now(shared));
    drop(role);
    wake_consumers(shared, &r, chained);
    shared.metrics.dequeue_round(r.due + r.staged);
    if proxy_may_sleep(&r) {
        fallback.0 = None;
    }
}

/// After a round that a client ran for an early insert (`stage_early`):
/// whether the dequeue proxy, which planned to wake at `armed` before it, may
/// sleep on. Yes if this round handed the next one over (`duty.rs`: the
/// takers own it now). Otherwise only if the proxy is parked on its timer —
/// `handed_before` false: it was not handed a round, after which it parks
/// without one — and that timer comes no later than the new plan and than a
/// staged entry it would have to wake for. Loom: `models/early.rs`, with the
/// planted bug `delayq_bug_early_ignores_hand_over`.
pub(crate) fn proxy_sleeps_on(
    armed: u64,
    handed_before: bool,
    handed: bool,
    plan: Sleep,
    staged_wake: Option<u64>,
) -> bool {
    // Planted bug for the loom suite: a proxy parked without a timer taken
    // for one parked on its timer.
    #[cfg(delayq_bug_early_ignores_hand_over)]
    let handed_before = {
        let _ = handed_before;
        false
    };
    handed
        || (!handed_before
            && matches!(plan, Sleep::Until(t) if t >= armed)
            && staged_wake.map_or(true, |w| w >= armed))
}

/// Wakes the dequeue proxy when dropped, unless emptied first.
struct WakeOnDrop<'a>(Option<&'a Bell>);

impl Drop for WakeOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(bell) = self.0 {
            bell.force();
        }
    }
}

/// A `try_recv` found nothing due although items are pending: makes sure
/// nothing due hides upstream of the consumers' ring, so that a `try_recv`
/// after a send of a due item (on the same thread, or ordered after it) finds
/// it, and a `try_iter` drains every due item, not only the ring's worth.
/// Two places can hide one: the ingress (a command pushed but not applied, or
/// a batch mid-apply: the enqueue role held) — then a `Sync` round trip
/// through the enqueue role; and the index, holding a due item for want of a
/// dequeue round (the proxy not yet on a CPU, or the ring was full) — then the
/// caller performs the dequeue role for the due items itself, once the role
/// is free. The proxy's plan is left alone: only items due now move, so the
/// index's head can only get later, and the plan (no later than the head)
/// stays valid. Returns `false` only if nothing is pending (the caller looks
/// again otherwise: a round may have moved the item since it looked).
///
/// The checks are read in the order the performers write: an empty ingress
/// (its drain), then a free role (its release), then `index_head` (lowered
/// before that release), so a caller ordered after a send either sees the
/// command still upstream or the index's new head. Loom:
/// `loom-tests/tests/loom_try_recv.rs`, with two planted bugs.
pub(crate) fn catch_up<T>(shared: &Shared<T>) -> bool {
    if shared.len() == 0 || shared.counter.is_disconnected() {
        return false;
    }
    if crate::role::holding_any() {
        // Inside a role's work (an item's `Drop`): waiting would be for itself.
        return false;
    }
    let upstream = !shared.ingress.is_empty() || shared.roles.enqueue.is_held_now();
    // Planted bug for the loom suite: commands still upstream are not waited
    // for, so a poll right after a send misses its item.
    #[cfg(delayq_bug_catch_up_no_sync)]
    let upstream = upstream && false;
    if upstream {
        let (answer, reply) = crate::oneshot::pair();
        if !enqueue::command(shared, Cmd::Sync { answer }) || reply.wait().is_none() {
            return false;
        }
    }
    // SeqCst: after the reads above (module order of the checks). Nothing
    // due in the index: a round may have moved it into the ring since the
    // caller looked (it sets `index_head` after its pushes): look again.
    if shared.index_head.load(Ordering::SeqCst) > delivery_now(shared) {
        return true;
    }
    // The holder, if any, is a proxy in a round (bounded work, no wait but
    // the timers lock's): yield to it until the round ends. Giving up after
    // a few yields left a `try_iter` short when the holder lost its CPU.
    let role = loop {
        if let Some(held) = shared.roles.dequeue.try_acquire() {
            break held;
        }
        if shared.counter.is_disconnected() {
            return true;
        }
        yield_now();
    };
    // Planted bug for the loom suite: due items left in the index for the
    // proxy (a full ring's worth is all a `try_iter` gets).
    #[cfg(delayq_bug_catch_up_no_move)]
    let moved = 0;
    #[cfg(not(delayq_bug_catch_up_no_move))]
    let moved = move_due(shared, delivery_now(shared));
    drop(role);
    if moved > 1 {
        // More than the caller will take: the others' turn.
        shared.signals.consumers.notify(1);
    }
    true
}

/// A client's dequeue round: moves the items due by `now` into the egress (as
/// many as it has room for), recalling staged entries an earlier item must
/// precede, and records the index's new head; stages nothing and leaves the
/// proxy's plan as it is. The caller holds the dequeue role.
fn move_due<T>(shared: &Shared<T>, now: u64) -> usize {
    let mut t = lock(&shared.timers);
    let t = &mut *t;
    // Horizon `now`: every push is a due one.
    let moved = fill(shared, t, now, now).due;
    // SeqCst: as in `round`.
    shared.index_head.store(t.index.next_wake().unwrap_or(NEVER), Ordering::SeqCst);
    moved
}

/// What [`fill`] pushed.
struct Moved {
    due: usize,
    staged: usize,
    /// The ring filled up with due items still in the index.
    due_left: bool,
}

/// Pops the index's items due by `horizon` into the egress (as many as it has
/// room for): those due by `now` as due, the others staged; before each push,
/// staged entries the item must precede go back into the index. The caller
/// holds the dequeue role (so it is the egress's only pusher) and `t`, the
/// timers lock's contents.
fn fill<T>(shared: &Shared<T>, t: &mut Timers<T>, now: u64, horizon: u64) -> Moved {
    let mut m = Moved { due: 0, staged: 0, due_left: false };
    loop {
        if shared.egress.is_full() {
            // Recalled entries at the head would keep their slots until a
            // consumer passes them: pass them here, so that they never hold up
            // a push. (Only here: reading the head's slot costs a cache miss
            // while consumers take.)
            shared.egress.pass_recalled();
            if shared.egress.is_full() {
                m.due_left = t.index.next_wake().is_some_and(|d| d <= now);
                return m;
            }
        }
        let Some(entry) = t.index.pop_due(horizon) else { return m };
        let (at, key) = (entry.0, entry.1);
        if shared.stage_ahead != 0 {
            // SAFETY: we hold the timers lock.
            unsafe { t.staged.recall_later(&shared.egress, (at, key), now, &mut t.index) };
        }
        // SAFETY: the caller holds the dequeue role, so we are the egress's
        // only pusher, and the timers lock.
        match unsafe { shared.egress.push(entry, at > now) } {
            Ok(pos) if at > now => {
                t.staged.record(pos, key, at);
                m.staged += 1;
            }
            Ok(_) => m.due += 1,
            Err(_) => unreachable!("egress ring refused a push below capacity"),
        }
    }
}

/// Wakes consumers after a round: for due entries, two (each consumer that
/// leaves items wakes the next, `receiver::taken`, so the syscalls spread over
/// the consumers); for a staged entry that fell due with nobody leading for it
/// (the proxy woke for it), one; for a new oldest staged entry, one, to lead,
/// unless a consumer already leads for one no later.
fn wake_consumers<T>(shared: &Shared<T>, r: &Round, chained: bool) {
    // A taker performing the round (`perform_duty`) has just woken a
    // consumer for the front entry (`chained`), which will lead.
    let unled = |at: u64| !chained && r.lead.map_or(true, |l| l > at);
    let n = if r.due > 0 {
        r.due.min(2)
    } else if r.fell_due.is_some_and(unled) || (r.staged > 0 && r.first_staged.is_some_and(unled)) {
        1
    } else {
        0
    };
    if n > 0 {
        shared.signals.consumers.notify(n);
    }
}

/// The admission rule (`admission.rs`), after a round on a system clock: shut
/// the gate when due items stay in the index for want of egress room although
/// the consumers took items since the last round (they are there, and working,
/// but not fast enough); open it after a round that moved every due item (the
/// backlog is gone), or when the consumers took nothing (holding producers back
/// would help nobody).
fn admit<T>(shared: &Shared<T>, taken_before: &mut usize, egress_full: bool) {
    let taken = shared.egress.taken_so_far();
    let progressed = taken != *taken_before;
    *taken_before = taken;
    if progressed && egress_full {
        shared.signals.admission.shut(Reason::Egress);
    } else {
        shared.signals.admission.open(Reason::Egress);
    }
}

/// The time the dequeue proxy delivers by: the mock time as of the last step
/// whose sends are applied, or the system clock's now.
fn delivery_now<T>(shared: &Shared<T>) -> u64 {
    if shared.clock.is_mock() {
        shared.rounds.mock_now()
    } else {
        shared.now_ticks()
    }
}

/// A mock clock moved. Returns once every command sent before the step is
/// applied and the dequeue proxy has finished a round that read the new time, so
/// that whatever the step made due is in the egress ring (room permitting), in
/// deadline order, when `advance` returns. Then blocked clients re-check their
/// deadlines.
pub(crate) fn clock_moved<T>(shared: &Shared<T>) {
    let r = &shared.rounds;
    let (answer, reply) = crate::oneshot::pair();
    if enqueue::command(shared, Cmd::Sync { answer }) && reply.wait().is_some() {
        // Every earlier send is in the index: now the proxy may see the step.
        // SeqCst: see `delivery_now`.
        r.step_to(shared.now_ticks());
        let target = r.next_round_after_step();
        shared.signals.dequeue.force();
        block_on(r.waiters(), &Clock::default(), None, || {
            (r.finished(target) || shared.counter.is_disconnected()).then_some(())
        });
    }
    shared.signals.consumers.notify_all();
    shared.signals.producers.notify_all();
}
