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
//!   for what its bounded drain left.
//! - A consumer that finds the dequeue role held while an item is due, and
//!   asks to be woken, is woken by the release. Planted bug
//!   `delayq_bug_role_no_wake`: the release forgets it.
//! - Clients racing for the role: exactly one performs at a time.

use super::model;
use crate::clock::Clock;
use crate::ingress::Ingress;
use crate::role::{combine, Role, Want, WANTED_BY_CONSUMER};
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
    model(|| {
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
