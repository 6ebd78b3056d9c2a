//! A proxy's role as a token: the right to perform the enqueue proxy's work
//! (drain the ingress into the index) or the dequeue proxy's (move due items
//! from the index to the egress).
//!
//! Whoever is present performs a role: a producer its batch of inserts, the
//! consumer awake at a deadline the dequeue round; the proxy threads perform
//! only what nobody is there for (flat combining: Hendler, Incze, Shavit and
//! Tzafrir, SPAA 2010; tokio's worker that takes the time driver by
//! `try_lock` is the same idea). Everyone, the proxy threads included, takes
//! a role with a try-acquire that never waits, and whoever holds one is its
//! only performer, so the index sees two contenders at most, the enqueue
//! role's holder and the dequeue role's.
//!
//! States (one atomic, every change an RMW, so they are totally ordered):
//! `FREE`; `HELD`; and, while held, the bits of who waits for the release:
//! [`WANTED_BY_CONSUMER`] (a consumer found the dequeue role held while an
//! item was due: the release wakes one waiting consumer) and
//! [`WANTED_BY_PROXY`] (the dequeue proxy did: the release unparks it).
//!
//! **Invariant:** a waiter parks only after its bit is set in a state whose
//! release reads it: [`Role::want`] sets the bit with a CAS from a held
//! state, and the release is a swap to `FREE` that wakes whoever's bit it
//! read. The waiter registers (consumers: in the consumers' waiter list)
//! *before* its CAS, so the release's wake finds it (loom:
//! `loom-tests/models/role.rs`, with a planted bug that drops the wake).

use crate::sync::{fence, AtomicUsize, Ordering, Unparker};
use crate::waiters::Waiters;
use crate::wakeup::Bell;
use crossbeam_utils::CachePadded;

const FREE: usize = 0;
const HELD: usize = 1;
/// A consumer waits for the release (it found the role held while an item
/// was due); the release wakes one waiting consumer.
pub(crate) const WANTED_BY_CONSUMER: usize = 2;
/// The dequeue proxy waits for the release; the release unparks it.
pub(crate) const WANTED_BY_PROXY: usize = 4;

/// One proxy's role (module docs).
#[derive(Debug)]
pub(crate) struct Role {
    state: CachePadded<AtomicUsize>,
    /// Unparks the proxy, when it waits for the release.
    proxy: Unparker,
}

/// A held role; dropping it releases the role (also when the holder's work
/// panics, so that a panic never leaves the role held by nobody) and wakes
/// whoever asked to be woken by the release.
#[must_use = "the role is released when this is dropped"]
#[derive(Debug)]
pub(crate) struct Held<'a> {
    role: &'a Role,
    /// Where a consumer that wants the role waits (the dequeue role's).
    consumers: Option<&'a Waiters>,
}

/// What [`Role::want`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Want {
    /// The role is free: try to take it.
    Free,
    /// Someone holds it and will wake the caller when it releases it.
    Marked,
}

impl Role {
    pub(crate) fn new(proxy: Unparker) -> Role {
        Role { state: CachePadded::new(AtomicUsize::new(FREE)), proxy }
    }

    /// A try-acquire: the role if nobody performs it, never a wait.
    pub(crate) fn try_acquire(&self) -> Option<Held<'_>> {
        self.acquire(None)
    }

    /// As [`try_acquire`](Role::try_acquire), for the dequeue role: the
    /// release wakes one of `consumers` if a consumer wants the role.
    pub(crate) fn try_acquire_for<'a>(&'a self, consumers: &'a Waiters) -> Option<Held<'a>> {
        self.acquire(Some(consumers))
    }

    fn acquire<'a>(&'a self, consumers: Option<&'a Waiters>) -> Option<Held<'a>> {
        // Relaxed: a look first, so that a busy role costs a load, not a CAS
        // on its cache line. A held role read here after the caller's SeqCst
        // fence is what `enqueue::hand_over` relies on (its second pair).
        if self.state.load(Ordering::Relaxed) != FREE {
            return None;
        }
        // Acquire on success: the previous holder's work (released with
        // `Release` or stronger) happens before ours. Relaxed on failure: we
        // take nothing.
        self.state
            .compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| Held::new(self, consumers))
    }

    /// Asks to be woken by the holder's release (`by`: one of the `WANTED_*`
    /// bits). The caller has registered where that wake reaches it first.
    /// [`Want::Free`] if the role is free now (the caller tries to take it
    /// instead).
    pub(crate) fn want(&self, by: usize) -> Want {
        // Relaxed: the RMW's place in the state's total order is what
        // matters: the release reads the bit iff it comes after this.
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            if cur == FREE {
                return Want::Free;
            }
            if cur & by != 0 {
                return Want::Marked;
            }
            match self.state.compare_exchange_weak(cur, cur | by, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Want::Marked,
                Err(now) => cur = now,
            }
        }
    }

    /// Whether somebody performs the role now, read so that a release it
    /// sees happens before what the caller reads next.
    pub(crate) fn is_held_now(&self) -> bool {
        // SeqCst (an acquire): pairs with the holder's `Release` swap.
        self.state.load(Ordering::SeqCst) != FREE
    }
}

impl<'a> Held<'a> {
    fn new(role: &'a Role, consumers: Option<&'a Waiters>) -> Held<'a> {
        #[cfg(not(delayq_loom))]
        // `try_with`: a send from another thread-local's destructor may perform.
        let _ = HOLDING.try_with(|n| n.set(n.get() + 1));
        Held { role, consumers }
    }
}

#[cfg(not(delayq_loom))]
thread_local! {
    /// Roles (of any queue) the current thread holds.
    static HOLDING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether the current thread holds a role of any queue: then it must not
/// wait for one (a `try_recv` inside an item's `Drop` that a role's holder
/// runs would wait for itself).
pub(crate) fn holding_any() -> bool {
    #[cfg(not(delayq_loom))]
    return HOLDING.try_with(|n| n.get() > 0).unwrap_or(true);
    #[cfg(delayq_loom)]
    return false;
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        #[cfg(not(delayq_loom))]
        let _ = HOLDING.try_with(|n| n.set(n.get().saturating_sub(1)));
        // Release: our work on what the role protects happens before the next
        // holder's. A swap: it reads the bits the waiters set.
        let was = self.role.state.swap(FREE, Ordering::Release);
        debug_assert_ne!(was, FREE, "a role released twice");
        // Planted bug for the loom suite: the release forgets the consumer
        // that waits for it.
        #[cfg(delayq_bug_role_no_wake)]
        let was = was & !WANTED_BY_CONSUMER;
        if was & WANTED_BY_CONSUMER != 0 {
            if let Some(w) = self.consumers {
                w.notify(1);
            }
        }
        if was & WANTED_BY_PROXY != 0 {
            self.role.proxy.unpark();
        }
    }
}

/// After a push of work for a role whose proxy parks on `bell` when idle
/// (the enqueue role): performs the role while it is free and work is left,
/// at most `rounds` bounded pieces (`perform` does one, and releases the role
/// before it pays what it owes), then rings the proxy for what is left. If
/// the role is held, returns at once: its holder looks again after its
/// release.
///
/// Why no push is left behind: two store-buffering pairs, each with a SeqCst
/// fence on both sides. The pusher fences between its push and its look at
/// the role; every performer fences between its release and its look for
/// work left. Either the pusher sees the role free, or the holder sees the
/// push. And a performer that leaves work behind rings after that fence,
/// while the proxy, before it parks, sets its `sleeping` flag, fences and
/// looks again (`wakeup.rs`). Loom: `models/role.rs`
/// (`no_push_is_left_behind`, planted bug `delayq_bug_help_no_ring`).
pub(crate) fn combine(
    role: &Role,
    bell: &Bell,
    rounds: usize,
    mut perform: impl FnMut(Held<'_>),
    work_left: impl Fn() -> bool,
) {
    // SeqCst: the pusher's half of the first pair: our push, then the role.
    fence(Ordering::SeqCst);
    for _ in 0..rounds {
        let Some(held) = role.try_acquire() else {
            return; // its holder looks for work after its release
        };
        perform(held);
        // SeqCst: the performer's half: our release, then the look for work.
        fence(Ordering::SeqCst);
        if !work_left() {
            return;
        }
    }
    // Planted bug for the loom suite: what this performer left stays behind
    // a parked proxy.
    #[cfg(not(delayq_bug_help_no_ring))]
    bell.ring_after_fence();
    #[cfg(delayq_bug_help_no_ring)]
    let _ = bell;
}

/// For a holder of the role other than `combine`'s performers (the catch-up
/// of `try_recv`), after its release: a push that found the role held left
/// its work to the holder, so the holder looks for work again and, if it
/// finds some, hands it over (`hand_over`: `combine` or a ring). Loom:
/// `models/role.rs` (`a_push_during_a_catch_up_is_not_left_behind`).
pub(crate) fn look_after_release(work_left: impl Fn() -> bool, hand_over: impl FnOnce()) {
    // SeqCst: the performer's half of the pair in `combine`: our release,
    // then the look for work.
    fence(Ordering::SeqCst);
    if work_left() {
        hand_over();
    }
}

/// After a push of work for a role whose proxy performs it for everyone
/// (the enqueue proxy while it streams, `enqueue::hand_over`; every push
/// without helping): rings the proxy and leaves. The ring's fence is the
/// pusher's half of the pair with the proxy's `sleeping` flag (`wakeup.rs`):
/// a proxy that parks after it looked at the ingress is unparked. Loom:
/// `models/role.rs` (`no_push_is_left_behind_a_streaming_proxy`, planted bug
/// `delayq_bug_stream_no_ring`).
pub(crate) fn leave_to_proxy(bell: &Bell) {
    // Planted bug for the loom suite: a pusher that counts on a streaming
    // proxy being awake.
    #[cfg(not(delayq_bug_stream_no_ring))]
    bell.ring();
    #[cfg(delayq_bug_stream_no_ring)]
    let _ = bell;
}

#[cfg(all(test, not(delayq_loom)))]
mod tests {
    use super::*;
    use crate::sync::Parker;

    #[test]
    fn a_client_takes_a_free_role_and_nobody_else_does() {
        let parker = Parker::new();
        let role = Role::new(parker.unparker());
        let held = role.try_acquire().expect("free");
        assert!(role.is_held_now());
        assert!(role.try_acquire().is_none(), "held: a second client must not get it");
        drop(held);
        assert!(!role.is_held_now());
        assert!(role.try_acquire().is_some());
    }

    #[test]
    fn want_marks_a_held_role_and_reports_a_free_one() {
        let parker = Parker::new();
        let role = Role::new(parker.unparker());
        assert_eq!(role.want(WANTED_BY_PROXY), Want::Free);
        let held = role.try_acquire().unwrap();
        assert_eq!(role.want(WANTED_BY_PROXY), Want::Marked);
        assert_eq!(role.want(WANTED_BY_CONSUMER), Want::Marked);
        drop(held);
        // The release unparked the proxy: its token makes this park return.
        parker.park(None);
        assert!(!role.is_held_now());
    }
}
