//! The dequeue role: move the items that are due from the timer index into
//! the egress ring. Whoever is present performs it: the consumer awake at the
//! index's next deadline (the leader, `lead.rs`), or any consumer that finds
//! the ring empty while the index holds a due item (`receiver.rs`), a
//! `try_recv` catching up, a mock clock's step. The dequeue proxy thread
//! performs it only for those who cannot wait with a timeout (async
//! receivers take the lead *for* it and ring it) and, with
//! `Builder::helping(false)`, for everyone.
//!
//! A round reads the clock once (`now`), then in ONE critical section of the
//! timers lock moves every item due by `now` into the egress (as many as it
//! has room for), reads the index's new earliest deadline and publishes it as
//! `index_head`. After unlocking (and releasing the role) its performer wakes
//! consumers for what it moved ([`after_round`]). An item in the egress is
//! final (due); nothing is moved ahead of its deadline.
//!
//! The mock clock's handshake is here too: a step returns once every command
//! sent before it is applied and a round that read the new time has moved
//! what it made due ([`clock_moved`]); and `try_recv`'s catch-up
//! ([`catch_up`]), which decides when "nothing is due" is a true answer.

use crate::admission::LAG;
use crate::clock::NEVER;
use crate::cmd::Cmd;
use crate::enqueue;
use crate::role::{Want, WANTED_BY_PROXY};
use crate::shared::Shared;
use crate::sync::{lock, set_timer_slack, Ordering, Parker};
use std::time::{Duration, Instant};

/// Timer slack of the dequeue proxy's timed parks: the kernel may fire them this
/// much late (instead of its default 50 µs), so lateness stays in microseconds.
const TIMER_SLACK_NS: u64 = 2_000;

/// What a round did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Round {
    /// Items moved into the egress.
    pub(crate) moved: usize,
    /// The ring filled up with due items still in the index.
    pub(crate) due_left: bool,
    /// How long the oldest item moved had been due.
    pub(crate) lag: u64,
    /// When the memory rule wants its next look (`tidy.rs`).
    pub(crate) tidy: Option<Instant>,
}

/// One round under the timers lock: moves every item due by `now` into the
/// egress (as many as it has room for), then publishes the index's new head.
/// The caller holds the dequeue role (so it is the egress's only pusher).
pub(crate) fn round<T>(s: &Shared<T>, now: u64) -> Round {
    let mut t = lock(&s.timers);
    let mut r = Round { moved: 0, due_left: false, lag: 0, tidy: None };
    loop {
        if s.egress.is_full() {
            r.due_left = t.index.next_wake().is_some_and(|d| d <= now);
            break;
        }
        let Some(entry) = t.index.pop_due(now) else { break };
        if r.moved == 0 {
            r.lag = now.saturating_sub(entry.0);
        }
        // SAFETY: the caller holds the dequeue role, so we are the egress's
        // only pusher, and we hold the timers lock.
        match unsafe { s.egress.push(entry) } {
            Ok(()) => r.moved += 1,
            Err((at, key, item)) => {
                // Full after all (the check above is a snapshot): back it goes.
                t.index.insert(key, at, item);
                r.due_left = true;
                break;
            }
        }
    }
    let next = t.index.next_wake().unwrap_or(NEVER);
    // SeqCst: read by consumers that found the egress empty (`receiver.rs`),
    // after the pushes above.
    s.index_head.store(next, Ordering::SeqCst);
    r.tidy = s.tidy(&mut t);
    r
}

/// After a round, with the role released: the admission rule, the metrics,
/// and the wake-ups for what it moved. A performer that will take one item
/// itself (`taker`) wakes nobody: its own take wakes one consumer for what it
/// leaves (`receiver::taken`); any other performer wakes two. Each consumer
/// that leaves items behind wakes one more, so the wake-ups spread over the
/// consumers' threads, one per item at most.
pub(crate) fn after_round<T>(s: &Shared<T>, r: &Round, taker: bool) {
    if !s.clock.is_mock() {
        s.signals.admission.after_round(r.due_left, Duration::from_nanos(r.lag));
    }
    s.tidy_later(r.tidy);
    s.metrics.dequeue_round(r.moved);
    s.sample_metrics();
    let others = if taker { 0 } else { r.moved.min(2) };
    if others > 0 {
        s.signals.consumers.notify(others);
    }
}

/// A sampling send's look (`sender::pace`): whether the oldest due item in
/// the index has waited longer than the admission rule's [`LAG`], by one
/// load of `index_head` and a clock reading. (`index_head` is a lower bound:
/// after cancels, or on the wheel's slot boundaries, it can read older than
/// the head is; the next round corrects it.)
pub(crate) fn lagging<T>(s: &Shared<T>) -> bool {
    // Relaxed: a hint for the admission gate.
    let head = s.index_head.load(Ordering::Relaxed);
    head != NEVER && s.now_ticks().saturating_sub(head) > LAG.as_nanos() as u64
}

/// The dequeue proxy: performs the dequeue role only for whoever made it
/// the leader (`lead.rs`: async receivers, which cannot wait with a timeout,
/// and every receiver with `helping(false)`), sleeping until the deadline it
/// leads for; parks without a timer otherwise. Never waits for the role
/// while another holds it: it asks the holder's release to unpark it.
pub(crate) fn run<T>(s: &Shared<T>, parker: &Parker) {
    set_timer_slack(TIMER_SLACK_NS);
    loop {
        if s.counter.is_disconnected() {
            // The enqueue proxy (or the last receiver) drops what is pending.
            return;
        }
        // SeqCst: after the wake-up that brought us here (an insert lowered
        // it before ringing).
        let head = s.index_head.load(Ordering::SeqCst);
        if head != NEVER && (!s.helping || s.lead.current().is_some_and(|l| l.proxy && l.at > head)) {
            // Without helping the proxy leads whenever something can fall
            // due; with it, it follows an earlier head it was woken for.
            let _ = s.lead.take(head, true);
        }
        let now = s.delivery_now();
        match s.lead.current() {
            Some(l) if l.proxy && l.at <= now => {
                let Some(held) = s.roles.dequeue.try_acquire_for(&s.signals.consumers) else {
                    // A round runs: its release unparks us, and we look again.
                    if s.roles.dequeue.want(WANTED_BY_PROXY) == Want::Marked {
                        s.clock.park(parker, None);
                    }
                    continue;
                };
                s.lead.give_up(crate::lead::encode(l.at, true));
                let r = round(s, s.delivery_now());
                drop(held);
                s.metrics.proxy_round(false);
                after_round(s, &r, false);
                if r.moved == 0 {
                    // The lead is free and nobody was handed an item: a
                    // waiting consumer looks (and leads, or asks us again).
                    s.signals.consumers.notify(1);
                }
                if r.due_left && !s.helping {
                    // Nobody else moves items: wait for a take to make room
                    // (with helping, the consumer that empties the ring runs
                    // the next round itself).
                    wait_for_room(s, parker);
                }
            }
            Some(l) if l.proxy => {
                // Our lead: sleep until its deadline, an earlier one, a clock
                // step or shutdown (each unparks us).
                park(s, parker, Some(s.ticks.instant(l.at)));
            }
            _ => {
                // Nobody asked: park until rung (register, re-check, park).
                let bell = &s.signals.dequeue;
                bell.prepare_sleep();
                let asked = s.lead.current().is_some_and(|l| l.proxy)
                    // SeqCst: the sleeper's re-check after its fence.
                    || (!s.helping && s.index_head.load(Ordering::SeqCst) != NEVER);
                if !asked && !s.counter.is_disconnected() {
                    park(s, parker, None);
                }
                bell.awake();
            }
        }
        look_at_memory(s);
    }
}

/// Without helping: the dequeue proxy left due items in the index for want
/// of egress room; it parks until a take makes room (the take rings its bell
/// after the take's fence: `receiver::taken`; the bell's store-buffering pair,
/// `wakeup.rs`), or shutdown.
fn wait_for_room<T>(s: &Shared<T>, parker: &Parker) {
    let bell = &s.signals.dequeue;
    bell.prepare_sleep();
    if s.egress.is_full() && !s.counter.is_disconnected() {
        park(s, parker, None);
    }
    bell.awake();
}

/// Parks the dequeue proxy until `lead` by the queue's clock (untimed on a
/// mock clock, whose steps unpark it) and, whatever the clock, until the
/// memory rule's next look by real time (`tidy.rs`), or an unpark.
fn park<T>(s: &Shared<T>, parker: &Parker, lead: Option<Instant>) {
    let lead = if s.clock.is_mock() { None } else { lead };
    let until = match (lead, s.tidy_instant()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    parker.park(until);
}

/// The dequeue proxy's look for the memory rule, once its time has come
/// (nobody else may have looked: a queue gone quiet after a burst).
fn look_at_memory<T>(s: &Shared<T>) {
    if s.tidy_instant().is_some_and(|at| Instant::now() >= at) {
        let at = s.tidy(&mut lock(&s.timers));
        s.tidy_later(at);
    }
}

/// Asks the dequeue proxy to lead for `at` on a receiver's behalf (an async
/// receiver cannot wait with a timeout; with `helping(false)` nobody but the
/// proxy performs the role), unless someone leads for a deadline no later.
pub(crate) fn ask_proxy<T>(s: &Shared<T>, at: u64) {
    if s.lead.take(at, true).is_some() {
        s.signals.dequeue.force();
    }
}

/// A `try_recv` (or a timed receive that ran out) found nothing in the egress
/// while items are pending: decides whether "nothing is due" is a true
/// answer, moving what is due if it is not.
///
/// It performs the enqueue role for everything pushed so far, then the
/// dequeue role, waiting for each while another holds it (their holders do
/// bounded work and never park holding one). With both held, the index and
/// the commands in flight are frozen (only the roles' holders change them),
/// the ingress can only grow and the egress only shrink. Under the timers
/// lock it reads the egress (empty?), then the clock, then moves what is due
/// by then; after unlocking it reads the ingress (empty?). If the egress was
/// empty, nothing was due and the ingress is still empty, then at the instant
/// of the egress read no item that was due had been sent and not yet
/// received: `Empty` is a linearizable answer (crossbeam-channel's
/// `linearizable` test; loom: `loom-tests/tests/loom_try_recv.rs`). Returns
/// `true` in that case; `false` if the caller should look again (something
/// was there, or was moved there).
///
/// A thread that holds a role itself (an item's `Drop` run by a holder)
/// cannot wait for one: it answers `true` at once (best effort, documented).
pub(crate) fn catch_up<T>(s: &Shared<T>) -> bool {
    if crate::role::holding_any() {
        return true;
    }
    let e = enqueue::wait_for(&s.roles.enqueue);
    // Planted bug for the loom suite: commands still in the ingress are not
    // applied (nor looked at, below), so a poll right after a send misses
    // its item.
    #[cfg(delayq_bug_catch_up_no_sync)]
    let owed = enqueue::apply(s, 0);
    #[cfg(not(delayq_bug_catch_up_no_sync))]
    let owed = enqueue::apply(s, usize::MAX);
    let d = enqueue::wait_for(&s.roles.dequeue);
    let (egress_empty, r) = {
        let t = lock(&s.timers);
        let empty = s.egress.len() == 0;
        drop(t);
        // Planted bug for the loom suite: the index's due items are left
        // where they are (a full ring's worth is all a `try_iter` gets).
        #[cfg(delayq_bug_catch_up_no_move)]
        let r = Round { moved: 0, due_left: false, lag: 0, tidy: None };
        #[cfg(not(delayq_bug_catch_up_no_move))]
        let r = round(s, s.delivery_now());
        (empty, r)
    };
    let quiet = egress_empty && r.moved == 0 && !r.due_left && s.ingress.is_empty();
    // Planted bug for the loom suite (with the one above): the commands
    // upstream are neither applied nor looked at.
    #[cfg(delayq_bug_catch_up_no_sync)]
    let quiet = egress_empty && r.moved == 0 && !r.due_left;
    drop(d);
    drop(e);
    // A command pushed while we held the enqueue role found it held and left
    // its application to us (`role::combine`): look again after the release,
    // as every holder does (the stress test's `take_pending` waited forever
    // on a command pushed during a `try_recv`'s catch-up).
    // Planted bug for the loom suite: no look after the release.
    #[cfg(not(delayq_bug_catch_up_no_look))]
    enqueue::look_after_release(s);
    owed.pay(s);
    after_round(s, &r, true);
    quiet
}

/// A mock clock moved. Returns once every command sent before the step is
/// applied and a round that read the new time has moved what it made due into
/// the egress ring (room permitting), in deadline order: the stepping thread
/// performs that round itself (waiting for the dequeue role while a round
/// holds it). Then blocked clients re-check their deadlines.
pub(crate) fn clock_moved<T>(s: &Shared<T>) {
    let (answer, reply) = crate::oneshot::pair();
    if enqueue::command(s, Cmd::Sync { answer }) && reply.wait().is_some() {
        // Every earlier send is in the index: now the rounds may see the step.
        // SeqCst: read by `Shared::delivery_now`.
        s.mock_now.fetch_max(s.now_ticks(), Ordering::SeqCst);
        if !crate::role::holding_any() && !s.counter.is_disconnected() {
            let held = enqueue::wait_for(&s.roles.dequeue);
            let r = round(s, s.delivery_now());
            drop(held);
            after_round(s, &r, false);
        }
    }
    // A proxy that leads re-reads the time; waiting clients re-check.
    s.signals.dequeue.force();
    s.signals.consumers.notify_all();
    s.signals.producers.notify_all();
}
