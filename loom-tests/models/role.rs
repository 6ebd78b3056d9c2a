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
//!   `delayq_bug_stream_no_ring`: it leaves without the ring.
//! - A consumer that finds the dequeue role held while an item is due, and
//!   asks to be woken, is woken by the release. Planted bug
//!   `delayq_bug_role_no_wake`: the release forgets it.
//! - Clients racing for the role: exactly one performs at a time.

use super::model;
use crate::clock::Clock;
use crate::ingress::Ingress;
use crate::role::{combine, leave_to_proxy, look_after_release, Held, Role, Want, WANTED_BY_CONSUMER};
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
        assert!(!role.is_held());
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
    pushes_reach_the_proxy([false, false]);
}

/// As above, with the second producer finding the proxy streaming
/// (`Shared::streaming`): it rings the proxy and leaves
/// (`role::leave_to_proxy`) while the first combines, so the proxy may park
/// while a client holds the role, and the streaming push relies on the
/// ring alone. Planted bug `delayq_bug_stream_no_ring`: the streaming push
/// does not ring.
#[test]
fn no_push_is_left_behind_a_streaming_proxy() {
    pushes_reach_the_proxy([false, true]);
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
        let parker = Parker::new();
        let unparker = parker.unparker();
        let bell = Arc::new(Bell::new(parker.unparker()));
        let role = Arc::new(Role::new(parker.unparker()));
        let ingress = Arc::new(Ingress::<u32>::new(2));
        let drained = Arc::new(Mutex::new(Vec::new()));
        let record = {
            let (drained, unparker) = (drained.clone(), unparker.clone());
            move |got: Vec<u32>| {
                let mut all = drained.lock().unwrap();
                all.extend(got);
                if !all.is_empty() {
                    unparker.unpark();
                }
            }
        };
        let drain_one = {
            let (ingress, record) = (ingress.clone(), record.clone());
            move |held: Held<'_>| {
                let mut got = Vec::new();
                ingress.drain_into(&mut got, 1);
                drop(held);
                record(got);
            }
        };
        let catch_up = {
            let (bell, role, ingress, record, drain_one) =
                (bell.clone(), role.clone(), ingress.clone(), record.clone(), drain_one.clone());
            thread::spawn(move || {
                let held = loop {
                    if let Some(held) = role.try_acquire() {
                        break held;
                    }
                    thread::yield_now();
                };
                let mut got = Vec::new();
                ingress.drain_into(&mut got, 2);
                drop(held);
                record(got);
                look_after_release(
                    || !ingress.is_empty(),
                    || combine(&role, &bell, 1, drain_one, || !ingress.is_empty()),
                );
            })
        };
        let producer = {
            let (bell, role, ingress) = (bell.clone(), role.clone(), ingress.clone());
            thread::spawn(move || {
                ingress.push(7).expect("open ingress");
                combine(&role, &bell, 1, drain_one, || !ingress.is_empty());
            })
        };
        // The enqueue proxy's loop, as in `pushes_reach_the_proxy`.
        loop {
            if let Some(held) = role.try_acquire() {
                let mut got = Vec::new();
                ingress.drain_into(&mut got, 1);
                let n = got.len();
                drop(held);
                record(got);
                if n > 0 {
                    continue;
                }
            }
            if !drained.lock().unwrap().is_empty() {
                break;
            }
            bell.prepare_sleep();
            if !ingress.is_empty() && !role.is_held_now() {
                bell.awake();
                thread::yield_now();
                continue;
            }
            if !drained.lock().unwrap().is_empty() {
                bell.awake();
                break;
            }
            parker.park(None);
            bell.awake();
        }
        catch_up.join().unwrap();
        producer.join().unwrap();
        assert_eq!(*drained.lock().unwrap(), vec![7], "the command drained twice or never");
    });
}

/// The model of the two tests above; `streaming[i]`: producer `i` leaves its
/// push to the proxy instead of combining.
fn pushes_reach_the_proxy(streaming: [bool; 2]) {
    model(move || {
        const TOTAL: usize = 2;
        let parker = Parker::new();
        let unparker = parker.unparker();
        let bell = Arc::new(Bell::new(parker.unparker()));
        let role = Arc::new(Role::new(parker.unparker()));
        let ingress = Arc::new(Ingress::<u32>::new(2));
        let drained = Arc::new(Mutex::new(Vec::new()));
        // The last drain (by anyone) unparks the proxy so that it can stop: it
        // happens only once every command was drained, so it cannot hide one
        // that was left behind.
        let record = {
            let (drained, unparker) = (drained.clone(), unparker.clone());
            move |got: Vec<u32>| {
                let mut all = drained.lock().unwrap();
                all.extend(got);
                if all.len() == TOTAL {
                    unparker.unpark();
                }
            }
        };
        let producers: Vec<_> = (0..TOTAL as u32)
            .map(|i| {
                let (bell, role, ingress, record) =
                    (bell.clone(), role.clone(), ingress.clone(), record.clone());
                thread::spawn(move || {
                    ingress.push(i).expect("open ingress");
                    if streaming[i as usize] {
                        leave_to_proxy(&bell);
                        return;
                    }
                    combine(
                        &role,
                        &bell,
                        1,
                        |held| {
                            let mut got = Vec::new();
                            ingress.drain_into(&mut got, 1);
                            drop(held);
                            record(got);
                        },
                        || !ingress.is_empty(),
                    );
                })
            })
            .collect();
        // The enqueue proxy's loop (`enqueue::run`), draining one at a time.
        loop {
            if let Some(held) = role.try_acquire() {
                let mut got = Vec::new();
                ingress.drain_into(&mut got, 1);
                let n = got.len();
                drop(held);
                record(got);
                if n > 0 {
                    continue;
                }
            }
            if drained.lock().unwrap().len() == TOTAL {
                break;
            }
            bell.prepare_sleep();
            if !ingress.is_empty() && !role.is_held_now() {
                bell.awake();
                // A producer may be mid-write: let it finish.
                thread::yield_now();
                continue;
            }
            if drained.lock().unwrap().len() == TOTAL {
                bell.awake();
                break;
            }
            parker.park(None);
            bell.awake();
        }
        for p in producers {
            p.join().unwrap();
        }
        let mut all = drained.lock().unwrap().clone();
        all.sort_unstable();
        assert_eq!(all, vec![0, 1], "a command drained twice or never");
    });
}
