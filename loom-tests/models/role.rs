//! Model 1c: the proxies' roles (`src/role.rs`): the token a client takes to
//! perform a proxy's work, and the hand-off that keeps work from being left
//! behind a parked proxy (`help_or_ring`).
//!
//! - A proxy that waits for its role while a client performs it gets it when
//!   the client releases it, however the release and the proxy's park
//!   interleave (planted bug `delayq_bug_role_no_unpark`: the release forgets
//!   the unpark, and the proxy sleeps forever).
//! - Pushes that find the proxy parked are performed by their pusher or by
//!   the proxy, never by nobody: two producers push, each then runs
//!   `help_or_ring` with a helper that drains one command at most, while the
//!   proxy runs the enqueue proxy's loop (take the role, drain, release; else
//!   register, re-check, park). Planted bug `delayq_bug_help_no_ring`: the
//!   helper does not ring for what its bounded drain left.
//! - Two clients racing for the role: exactly one performs at a time.

use super::model;
use crate::ingress::Ingress;
use crate::role::{help_or_ring, Role};
use crate::sync::Parker;
use crate::wakeup::Bell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Mutex;
use loom::thread;
use std::sync::Arc;

/// Threads: a client that takes the role if it is free and releases it, and
/// the proxy (main), which acquires it (parking while the client holds it).
/// Loom reports a deadlock if the proxy can sleep through the release.
#[test]
fn a_released_role_reaches_the_waiting_proxy() {
    model(|| {
        let parker = Parker::new();
        let role = Arc::new(Role::new(parker.unparker()));
        let r = role.clone();
        let client = thread::spawn(move || {
            if let Some(held) = r.try_acquire() {
                // The client's bounded work would be here.
                drop(held);
            }
        });
        let got = role.acquire(&parker);
        drop(got);
        client.join().unwrap();
        assert!(!role.is_held());
    });
}

/// Threads: a client that takes the role and releases it, a thread that
/// shuts the "queue" down (a flag, then an unpark of the proxy, as
/// `Shared::disconnect` does), and the proxy (main) running its loop: check
/// for shutdown, take the role, do a round, park. An unpark that the wait
/// for the role consumed must not leave the proxy asleep after shutdown
/// (planted bug `delayq_bug_role_eats_unpark`: loom reports a deadlock).
#[test]
fn an_unpark_consumed_by_the_wait_for_the_role_is_not_lost() {
    model(|| {
        let parker = Parker::new();
        let unparker = parker.unparker();
        let role = Arc::new(Role::new(parker.unparker()));
        let stop = Arc::new(AtomicUsize::new(0));
        let r = role.clone();
        let client = thread::spawn(move || {
            if let Some(held) = r.try_acquire() {
                drop(held);
            }
        });
        let s = stop.clone();
        let stopper = thread::spawn(move || {
            s.store(1, Ordering::SeqCst);
            unparker.unpark();
        });
        loop {
            if stop.load(Ordering::SeqCst) == 1 {
                break;
            }
            let held = role.acquire(&parker);
            drop(held);
            parker.park(None);
        }
        client.join().unwrap();
        stopper.join().unwrap();
    });
}

/// Threads: two clients that race for the role, each performing (a counter
/// that must never see two performers at once), and the proxy (main), which
/// takes the role too. Nobody waits forever and performers never overlap.
#[test]
fn performers_never_overlap() {
    model(|| {
        let parker = Parker::new();
        let role = Arc::new(Role::new(parker.unparker()));
        let inside = Arc::new(AtomicUsize::new(0));
        let clients: Vec<_> = (0..2)
            .map(|_| {
                let (role, inside) = (role.clone(), inside.clone());
                thread::spawn(move || {
                    if let Some(held) = role.try_acquire() {
                        assert_eq!(inside.fetch_add(1, Ordering::Relaxed), 0, "two performers at once");
                        inside.fetch_sub(1, Ordering::Relaxed);
                        drop(held);
                    }
                })
            })
            .collect();
        let held = role.acquire(&parker);
        assert_eq!(inside.fetch_add(1, Ordering::Relaxed), 0, "a client performs while the proxy does");
        inside.fetch_sub(1, Ordering::Relaxed);
        drop(held);
        for c in clients {
            c.join().unwrap();
        }
    });
}

/// Threads: two producers that each push one command into a two-slot ingress
/// and hand it over (`help_or_ring`, helping drains one command at most), and
/// the enqueue proxy's loop (main). Every command is drained exactly once; a
/// command left with the proxy parked and nobody performing the role is a
/// loom deadlock (the proxy waits for the last command forever).
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
                    help_or_ring(
                        &bell,
                        &role,
                        || true,
                        || !ingress.is_empty(),
                        || {
                            let mut got = Vec::new();
                            ingress.drain_into(&mut got, 1);
                            record(got);
                        },
                    );
                })
            })
            .collect();
        // The enqueue proxy's loop (`enqueue::run`), draining one at a time.
        loop {
            let held = role.acquire(&parker);
            let mut got = Vec::new();
            ingress.drain_into(&mut got, 1);
            let n = got.len();
            record(got);
            drop(held);
            if drained.lock().unwrap().len() == TOTAL {
                break;
            }
            if n > 0 {
                continue;
            }
            bell.prepare_sleep();
            if !ingress.is_empty() {
                bell.awake();
                thread::yield_now();
                continue;
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
