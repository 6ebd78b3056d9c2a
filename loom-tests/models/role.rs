//! Model 1c: the roles (`src/role.rs`): the token whoever is present takes to
//! perform a proxy's work, the combining hand-off that keeps a push from being
//! left behind (`role::combine`), and the wake-up a consumer asks of the
//! dequeue role's release (`Role::want`).
//!
//! - Pushes are performed by a pusher or by the proxy, never by nobody: two
//!   producers push, each then runs `combine` with a performer that drains
//!   one command at most and one round, while the proxy runs the enqueue
//!   proxy's loop (try the role, drain, release; else register, re-check,
//!   park). Planted bug `delayq_bug_help_no_ring`: the performer does not ring
//!   for what its bounded drain left. Again with one producer finding the
//!   proxy streaming: it rings the proxy and leaves. Planted bug
//!   `delayq_bug_stream_no_ring`: it leaves without the ring. (In a burst's
//!   stream a push that finds the proxy parked combines instead,
//!   `enqueue::hand_over`: a relaxed hint choosing between these two paths,
//!   so any mix of them is one of the cases modelled.)
//! - A push that finds the two-slot ring full spills; the look for work after
//!   a release (`Ingress::ready`) counts the spill once the ring is drained,
//!   and never a claimed, unwritten head (its producer hands it over). Planted
//!   bug `delayq_bug_ready_no_spill`: the look ignores the spill.
//! - A consumer that finds the dequeue role held while an item is due, and
//!   asks to be woken, is woken by the release. Planted bug
//!   `delayq_bug_role_no_wake`: the release forgets it.
//! - Clients racing for the role: exactly one performs at a time.

use super::model;
use crate::clock::Clock;
use crate::ingress::Ingress;
use crate::role::{combine, leave_to_proxy, look_after_release, Role, Want, WANTED_BY_CONSUMER};
use crate::sync::Parker;
use crate::waiters::{block_on, Waiters};
use crate::wakeup::Bell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Mutex;
use loom::thread;
use std::sync::Arc;

/// Threads: two clients that race for the role, each performing (a counter
/// that must never see two performers at once), and main, which tries too.
#[test]
fn performers_never_overlap() {
    model(|| {
        let parker = Parker::new();
        let role = Arc::new(Role::new(parker.unparker()));
        let inside = Arc::new(AtomicUsize::new(0));
        let perform = |role: &Role, inside: &AtomicUsize| {
            if let Some(held) = role.try_acquire() {
                assert_eq!(inside.fetch_add(1, Ordering::Relaxed), 0, "two performers at once");
                inside.fetch_sub(1, Ordering::Relaxed);
                drop(held);
            }
        };
        let clients: Vec<_> = (0..2)
            .map(|_| {
                let (role, inside) = (role.clone(), inside.clone());
                thread::spawn(move || perform(&role, &inside))
            })
            .collect();
        perform(&role, &inside);
        for c in clients {
            c.join().unwrap();
        }
        assert!(!role.is_held_now());
    });
}

/// Threads: a holder (a round in progress) that takes the dequeue role and
/// releases it, and a consumer (main) that waits, in the consumers' waiter
/// list, until it has performed the round itself: it tries the role, and when
/// it is held asks the release to wake it (`Role::want`) and parks. A release
/// that forgets the consumer leaves it parked forever: loom reports a
/// deadlock.
#[test]
fn a_consumer_that_wants_the_role_is_woken_by_the_release() {
    model(|| {
        let parker = Parker::new();
        let role = Arc::new(Role::new(parker.unparker()));
        let consumers = Arc::new(Waiters::default());
        let holder = {
            let (role, consumers) = (role.clone(), consumers.clone());
            thread::spawn(move || {
                if let Some(held) = role.try_acquire_for(&consumers) {
                    // The round would be here.
                    thread::yield_now();
                    drop(held);
                }
            })
        };
        let performed = block_on(&consumers, &Clock::default(), None, || {
            if let Some(h) = role.try_acquire_for(&consumers) {
                drop(h);
                return Some(());
            }
            // Ask the release to wake us (block_on's re-check runs after its
            // registration); a role freed meanwhile is tried again.
            if role.want(WANTED_BY_CONSUMER) == Want::Free {
                if let Some(h) = role.try_acquire_for(&consumers) {
                    drop(h);
                    return Some(());
                }
            }
            None
        });
        assert_eq!(performed, Some(()));
        holder.join().unwrap();
    });
}

/// Threads: two producers that each push one command into a two-slot ingress
/// and hand it over (`combine`: one round that drains one command at most),
/// and the enqueue proxy's loop (main). Every command is drained exactly
/// once; a command left with the proxy parked and nobody performing the role
/// is a loom deadlock (the proxy waits for the last command forever).
#[test]
fn no_push_is_left_behind_a_parked_proxy() {
    pushes_reach_the_proxy([(0, 1, false), (1, 1, false)]);
}

/// As above, with the second producer finding the proxy streaming
/// (`Shared::streaming`): it rings the proxy and leaves
/// (`role::leave_to_proxy`) while the first combines, so the proxy may park
/// while a client holds the role, and the streaming push relies on the
/// ring alone. Planted bug `delayq_bug_stream_no_ring`: the streaming push
/// does not ring.
#[test]
fn no_push_is_left_behind_a_streaming_proxy() {
    pushes_reach_the_proxy([(0, 1, false), (1, 1, true)]);
}

/// Threads: a catch-up (`try_recv`'s: it waits for the enqueue role, drains
/// what is there, releases, then `role::look_after_release`), a producer
/// that pushes one command and combines (one round), and the enqueue proxy's
/// loop (main). The push may land after the catch-up's drain and find the
/// role still held; then only the catch-up's look after its release hands it
/// over, while the proxy, which saw the role held, parks. A command left
/// behind is a loom deadlock.
#[test]
fn a_push_during_a_catch_up_is_not_left_behind() {
    model(|| {
        let rig = EnqueueRig::new(1);
        let catch_up = {
            let rig = rig.clone();
            thread::spawn(move || {
                let held = loop {
                    if let Some(held) = rig.role.try_acquire() {
                        break held;
                    }
                    thread::yield_now();
                };
                let mut got = Vec::new();
                rig.ingress.drain_into(&mut got, 2);
                drop(held);
                rig.record(got);
                look_after_release(|| rig.ingress.ready(), || rig.combine_one());
            })
        };
        let producer = {
            let rig = rig.clone();
            thread::spawn(move || {
                rig.ingress.push(7).expect("open ingress");
                rig.combine_one();
            })
        };
        rig.run_proxy();
        catch_up.join().unwrap();
        producer.join().unwrap();
        assert_eq!(*rig.drained.lock().unwrap(), vec![7], "the command drained twice or never");
    });
}

/// Threads: producer A pushes two commands into the two-slot ingress and
/// combines after each, producer B pushes one and combines, and the enqueue
/// proxy's loop (main). The third push can find the ring full (its head
/// claimed and unwritten, or written and not yet drained) and spill; the look
/// for work (`Ingress::ready`) must then count the spill once the ring is
/// drained, and must not count a claimed, unwritten head, whose producer
/// hands it over itself. Planted bug `delayq_bug_ready_no_spill`: the look
/// ignores the spill (a loom deadlock: the proxy parks with it left).
#[test]
fn a_push_that_spilled_behind_a_full_ring_is_not_left_behind() {
    pushes_reach_the_proxy([(0, 2, false), (10, 1, false)]);
}

/// The model of `no_push_is_left_behind_*` and the test above: producer `i`
/// pushes `n` commands numbered from `first` (`plan[i] = (first, n,
/// streaming)`), each followed by its hand-over: `combine`, or with
/// `streaming` a ring of the proxy and leave. Every command is drained
/// exactly once.
fn pushes_reach_the_proxy(plan: [(u32, u32, bool); 2]) {
    model(move || {
        let rig = EnqueueRig::new(plan.iter().map(|p| p.1 as usize).sum());
        let producers: Vec<_> = plan
            .into_iter()
            .map(|(first, n, streaming)| {
                let rig = rig.clone();
                thread::spawn(move || {
                    for c in first..first + n {
                        rig.ingress.push(c).expect("open ingress");
                        if streaming {
                            leave_to_proxy(&rig.bell);
                        } else {
                            rig.combine_one();
                        }
                    }
                })
            })
            .collect();
        rig.run_proxy();
        for p in producers {
            p.join().unwrap();
        }
        let mut all = rig.drained.lock().unwrap().clone();
        all.sort_unstable();
        let mut want: Vec<u32> = plan.iter().flat_map(|&(first, n, _)| first..first + n).collect();
        want.sort_unstable();
        assert_eq!(all, want, "a command drained twice or never");
    });
}

/// The enqueue side of the models above: the proxy's bell and the role
/// (both unparking main, the proxy), a two-slot ingress, and every command
/// drained so far; `total` commands are pushed in all.
#[derive(Clone)]
struct EnqueueRig {
    unparker: crate::sync::Unparker,
    parker: Arc<Parker>,
    bell: Arc<Bell>,
    role: Arc<Role>,
    ingress: Arc<Ingress<u32>>,
    drained: Arc<Mutex<Vec<u32>>>,
    total: usize,
}

impl EnqueueRig {
    fn new(total: usize) -> EnqueueRig {
        let parker = Parker::new();
        EnqueueRig {
            unparker: parker.unparker(),
            bell: Arc::new(Bell::new(parker.unparker())),
            role: Arc::new(Role::new(parker.unparker())),
            parker: Arc::new(parker),
            ingress: Arc::new(Ingress::new(2)),
            drained: Arc::new(Mutex::new(Vec::new())),
            total,
        }
    }

    /// Records a drain. The drain that completes the total unparks the
    /// proxy so that it can stop: it happens only once every command was
    /// drained, so it cannot hide one that was left behind.
    fn record(&self, got: Vec<u32>) {
        let mut all = self.drained.lock().unwrap();
        all.extend(got);
        if all.len() == self.total {
            self.unparker.unpark();
        }
    }

    /// A client's hand-over (`combine`): one round that drains one command
    /// at most.
    fn combine_one(&self) {
        combine(
            &self.role,
            &self.bell,
            1,
            |held| {
                let mut got = Vec::new();
                self.ingress.drain_into(&mut got, 1);
                drop(held);
                self.record(got);
            },
            || self.ingress.ready(),
        );
    }

    /// The enqueue proxy's loop (`enqueue::run`), draining one command at a
    /// time, until every command was drained.
    fn run_proxy(&self) {
        let done = || self.drained.lock().unwrap().len() == self.total;
        loop {
            if let Some(held) = self.role.try_acquire() {
                let mut got = Vec::new();
                self.ingress.drain_into(&mut got, 1);
                let n = got.len();
                drop(held);
                self.record(got);
                if n > 0 {
                    continue;
                }
            }
            if done() {
                break;
            }
            self.bell.prepare_sleep();
            if self.ingress.ready() && !self.role.is_held_now() {
                self.bell.awake();
                continue;
            }
            if done() {
                self.bell.awake();
                break;
            }
            self.parker.park(None);
            self.bell.awake();
        }
    }
}
