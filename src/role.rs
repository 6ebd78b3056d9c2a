//! A proxy's role as a token: the right to perform the enqueue proxy's work
//! (drain the ingress into the index) or the dequeue proxy's (move due items
//! from the index to the egress).
//!
//! Each proxy thread is the role's default performer; a client thread that
//! would otherwise wait for the proxy may take the role with a try-acquire that
//! never waits, do one bounded piece of the work and hand it back (flat
//! combining with a dedicated combiner: Hendler, Incze, Shavit and Tzafrir,
//! SPAA 2010; the "helping" of delegation designs such as ffwd, Roghanchi,
//! Eriksson and Basu, SOSP 2017). Whoever holds a role is its only performer,
//! so the index still sees two contenders, the enqueue role and the dequeue
//! role, whoever performs them.
//!
//! States (one atomic, every change an RMW, so they are totally ordered):
//! - `FREE`: nobody performs the role.
//! - `HELD`: somebody does.
//! - `WANTED`: a client does, and the proxy waits for the role (parked).
//!
//! **Invariant:** the proxy parks in [`Role::acquire`] only after it has
//! moved the state from `HELD` to `WANTED`, and the holder's release swaps the
//! state to `FREE`: a release that reads `WANTED` unparks the proxy, and the
//! parker keeps an unpark that comes before the park as a token. So a proxy
//! that waits for its role never sleeps through its release (loom:
//! `loom-tests/models/role.rs`, with a planted bug that drops the unpark).
//! And a proxy that parked while it waited leaves its parker a token, so an
//! unpark meant for its other waits (work, a clock step, shutdown) that the
//! wait consumed is not lost (same file, with a planted bug that leaves none).

use crate::sync::{fence, AtomicUsize, Ordering, Parker, Unparker};
use crate::wakeup::Bell;
use crossbeam_utils::CachePadded;

const FREE: usize = 0;
const HELD: usize = 1;
const WANTED: usize = 2;

/// One proxy's role (module docs).
#[derive(Debug)]
pub(crate) struct Role {
    state: CachePadded<AtomicUsize>,
    /// Unparks the proxy that waits for the role.
    proxy: Unparker,
}

/// A held role; dropping it releases the role (also when the holder's work
/// panics, so that a panic never leaves the role held by nobody).
#[must_use = "the role is released when this is dropped"]
#[derive(Debug)]
pub(crate) struct Held<'a> {
    role: &'a Role,
}

impl Role {
    pub(crate) fn new(proxy: Unparker) -> Role {
        Role { state: CachePadded::new(AtomicUsize::new(FREE)), proxy }
    }

    /// A client's try-acquire: the role if nobody performs it, never a wait.
    pub(crate) fn try_acquire(&self) -> Option<Held<'_>> {
        // Relaxed: a look first, so that a busy role costs a load, not a CAS
        // on its cache line. A held role read here after the caller's SeqCst
        // fence is what `help_or_ring` relies on (its second pair).
        if self.state.load(Ordering::Relaxed) != FREE {
            return None;
        }
        // Acquire on success: the previous holder's work (released with
        // `Release` or stronger) happens before ours. Relaxed on failure: we
        // take nothing.
        self.state
            .compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| Held::new(self))
    }

    /// The proxy's acquire: takes the role, parking on `parker` (the proxy's
    /// own) while a client performs it. The parker is also unparked for other
    /// reasons (work arrived, a clock step, shutdown), and a park here may
    /// consume such an unpark: so a proxy that parked here leaves a token
    /// behind, and its next park returns at once, to re-check everything.
    /// (Without it, a shutdown that came while the proxy waited here was
    /// slept through: `tests/mock_clock.rs`,
    /// `queues_come_and_go_while_another_thread_steps_the_clock`.)
    pub(crate) fn acquire<'a>(&'a self, parker: &Parker) -> Held<'a> {
        let mut parked = false;
        loop {
            // Acquire on success: as in `try_acquire`.
            match self.state.compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => {
                    // Planted bug for the loom suite: the token is not left.
                    #[cfg(not(delayq_bug_role_eats_unpark))]
                    if parked {
                        self.proxy.unpark();
                    }
                    #[cfg(delayq_bug_role_eats_unpark)]
                    let _ = parked;
                    return Held::new(self);
                }
                Err(HELD) => {
                    // Relaxed: the RMW's place in the state's total order is
                    // what matters; the holder's release reads `WANTED` iff it
                    // comes after this.
                    if self
                        .state
                        .compare_exchange(HELD, WANTED, Ordering::Relaxed, Ordering::Relaxed)
                        .is_err()
                    {
                        continue; // released meanwhile: try again
                    }
                    parker.park(None);
                    parked = true;
                }
                // Still wanted (a spurious or foreign unpark): wait on.
                Err(_) => {
                    parker.park(None);
                    parked = true;
                }
            }
        }
    }

    /// Whether somebody performs the role now, read so that a release it
    /// sees happens before what the caller reads next (`dequeue::catch_up`).
    pub(crate) fn is_held_now(&self) -> bool {
        // SeqCst (an acquire): pairs with the holder's `Release` swap.
        self.state.load(Ordering::SeqCst) != FREE
    }

    /// Whether somebody performs the role now (a hint).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn is_held(&self) -> bool {
        self.state.load(Ordering::Relaxed) != FREE
    }
}

impl<'a> Held<'a> {
    fn new(role: &'a Role) -> Held<'a> {
        #[cfg(not(delayq_loom))]
        // `try_with`: a send from another thread-local's destructor may help.
        let _ = HOLDING.try_with(|n| n.set(n.get() + 1));
        Held { role }
    }
}

#[cfg(not(delayq_loom))]
thread_local! {
    /// Roles (of any queue) the current thread holds.
    static HOLDING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether the current thread holds a role of any queue: then it must not
/// wait for one (`dequeue::catch_up`, reached from a `try_recv` inside an
/// item's `Drop` that a role's holder runs, would wait for itself).
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
        // holder's. A swap: it reads the state the proxy may have written.
        let was = self.role.state.swap(FREE, Ordering::Release);
        debug_assert_ne!(was, FREE, "a role released twice");
        #[cfg(not(delayq_bug_role_no_unpark))]
        if was == WANTED {
            self.role.proxy.unpark();
        }
        // Planted bug for the loom suite: the proxy that waits for the role
        // sleeps through its release.
        #[cfg(delayq_bug_role_no_unpark)]
        let _ = was;
    }
}

/// After a push of work for a proxy that parks on `bell` when idle: makes
/// sure somebody performs the role for it. `helping` is asked only when the
/// proxy is parked (it may read the clock: a push that finds the proxy awake,
/// the streaming case, pays for nothing but the fence and one load). Without
/// helping, rings the proxy if it is parked. With it on, a parked proxy is not woken: the pusher
/// `perform`s one bounded piece of the role's work here if the role is free,
/// releases it, and rings the proxy only if `work_left()` says some is left
/// (more than `perform` does at most, or a push still being written: it may
/// be ours); if the role is held, the pusher does nothing more: the holder's
/// own check after its release covers the push.
///
/// Why no work is left behind a parked proxy: two store-buffering pairs, each
/// with a SeqCst fence on both sides. The pusher fences between its push and
/// its reads of `sleeping` and of the role; the proxy fences in
/// `Bell::prepare_sleep` between setting `sleeping` and re-checking for work,
/// and every performer fences between releasing the role and its check for
/// work left. So if the pusher sees the proxy awake, the proxy's re-check
/// sees the push; and if it sees the role held, that holder's check after
/// its release sees the push (and rings, or the proxy itself, re-checking
/// before it parks, takes it). (loom: `models/role.rs`.)
pub(crate) fn help_or_ring(
    bell: &Bell,
    role: &Role,
    helping: impl FnOnce() -> bool,
    work_left: impl FnOnce() -> bool,
    perform: impl FnOnce(),
) {
    // SeqCst: the pusher's half of the bell's store-buffering pair: our push,
    // then the proxy's `sleeping` flag.
    fence(Ordering::SeqCst);
    if !bell.is_sleeping() {
        return; // awake: it re-checks for work before it parks
    }
    if !helping() {
        bell.ring_after_fence();
        return;
    }
    let Some(held) = role.try_acquire() else {
        return; // its holder checks for work left after its release
    };
    perform();
    drop(held);
    // SeqCst: the performer's half of the second pair: our release, then
    // the check for work left.
    fence(Ordering::SeqCst);
    #[cfg(not(delayq_bug_help_no_ring))]
    if work_left() {
        bell.ring_after_fence();
    }
    // Planted bug for the loom suite: work the helper did not reach stays
    // behind a parked proxy.
    #[cfg(delayq_bug_help_no_ring)]
    let _ = work_left;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_takes_a_free_role_and_nobody_else_does() {
        let parker = Parker::new();
        let role = Role::new(parker.unparker());
        let held = role.try_acquire().expect("free");
        assert!(role.is_held());
        assert!(role.try_acquire().is_none(), "held: a second client must not get it");
        drop(held);
        assert!(!role.is_held());
        let again = role.acquire(&parker);
        assert!(role.try_acquire().is_none(), "the proxy holds it");
        drop(again);
        assert!(role.try_acquire().is_some());
    }

    #[test]
    fn the_proxy_waits_for_a_client_and_gets_the_role_on_its_release() {
        let parker = Parker::new();
        let role = Role::new(parker.unparker());
        std::thread::scope(|scope| {
            let held = role.try_acquire().expect("free");
            let r = &role;
            scope.spawn(move || {
                // Wait until the proxy has announced that it waits, then release.
                while r.state.load(Ordering::SeqCst) != WANTED {
                    std::thread::yield_now();
                }
                drop(held);
            });
            let got = role.acquire(&parker);
            assert_eq!(role.state.load(Ordering::SeqCst), HELD);
            drop(got);
        });
        assert!(!role.is_held());
    }
}
