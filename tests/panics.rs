//! Panics: a consumer or producer thread that panics mid-use does not wedge the
//! queue for the others, and an item whose `Drop` panics, dropped by the queue,
//! does not kill it.

mod common;
use common::*;
use delayq::{RecvError, SendError};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

#[test]
fn a_consumer_that_panics_mid_use_does_not_wedge_the_others() {
    let (clock, tx, rx) = mock_named::<u32>("pa-c", None);
    for i in 0..3 {
        tx.send_after(i, ms(1)).unwrap();
    }
    for i in 3..303 {
        tx.send_after(i, ms(10)).unwrap();
    }
    clock.advance(ms(1));
    // The panicking consumer takes the three due items, then panics holding its
    // receiver while the other consumers wait.
    let (got_tx, got_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let rx_p = rx.clone();
    let panicker = thread::spawn(move || {
        let got: Vec<u32> = (0..3).map(|_| rx_p.recv().unwrap()).collect();
        got_tx.send(got).unwrap();
        go_rx.recv().unwrap();
        panic!("consumer panics mid-use (expected by the test)");
    });
    let mut all: Vec<u32> = got_rx.recv().unwrap();
    let consumers: Vec<_> = (0..3)
        .map(|_| {
            let rx = rx.clone();
            thread::spawn(move || rx.iter().collect::<Vec<u32>>())
        })
        .collect();
    go_tx.send(()).unwrap();
    assert!(panicker.join().is_err(), "the consumer was meant to panic");
    // The queue still works for everyone else.
    tx.send_after(303, ms(10)).unwrap(); // due at 11 ms
    clock.advance(ms(10));
    drop(tx);
    for c in consumers {
        all.extend(c.join().unwrap());
    }
    all.sort_unstable();
    assert_eq!(all, (0..304).collect::<Vec<_>>());
    assert_eq!(rx.recv(), Err(RecvError));
}

#[test]
fn a_panicking_consumer_holding_the_last_receiver_releases_blocked_producers() {
    let (clock, tx, rx) = mock_named::<u32>("pa-d", Some(1));
    tx.send_at(1, clock.now() + HOUR).unwrap();
    let tx2 = tx.clone();
    let at = clock.now();
    let producer = thread::spawn(move || tx2.send_at(2, at));
    let consumer = thread::spawn(move || {
        let _rx = rx;
        panic!("the only consumer panics (expected by the test)");
    });
    assert!(consumer.join().is_err());
    assert_eq!(producer.join().unwrap(), Err(SendError(2)));
    assert_eq!(tx.send_at(3, at), Err(SendError(3)));
}

#[test]
fn a_producer_that_panics_mid_use_does_not_wedge_the_others() {
    let (clock, tx, rx) = mock_named::<u32>("pa-p", Some(8));
    let at = clock.now();
    let producers: Vec<_> = (0..3u32)
        .map(|p| {
            let tx = tx.clone();
            thread::spawn(move || {
                for i in 0..100 {
                    if p == 0 && i == 50 {
                        panic!("producer panics mid-use (expected by the test)");
                    }
                    tx.send_at(p * 1000 + i, at).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    // A bounded queue: producers block until the consumer makes room.
    let got: Vec<u32> = rx.iter().collect();
    let results: Vec<bool> = producers.into_iter().map(|h| h.join().is_ok()).collect();
    assert_eq!(results, vec![false, true, true]);
    let got: HashSet<u32> = got.into_iter().collect();
    let want: HashSet<u32> = (0..50).chain(1000..1100).chain(2000..2100).collect();
    assert_eq!(got, want);
}

#[test]
fn a_panicking_producer_holding_the_last_sender_releases_blocked_consumers() {
    let (clock, tx, rx) = mock_named::<u32>("pa-q", None);
    tx.send_after(1, ms(5)).unwrap();
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let rx = rx.clone();
            thread::spawn(move || rx.iter().collect::<Vec<u32>>())
        })
        .collect();
    let producer = thread::spawn(move || {
        tx.send_after(2, ms(5)).unwrap();
        panic!("the only producer panics (expected by the test)");
    });
    assert!(producer.join().is_err());
    clock.advance(ms(5));
    let mut all: Vec<u32> = consumers.into_iter().flat_map(|c| c.join().unwrap()).collect();
    all.sort_unstable();
    assert_eq!(all, vec![1, 2], "pending items are still delivered, then RecvError");
}

/// An item whose `Drop` panics when `boom` is set; every drop is counted first.
struct Bomb {
    boom: bool,
    drops: Arc<AtomicUsize>,
}

impl Drop for Bomb {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        if self.boom && !thread::panicking() {
            panic!("an item's Drop panics (expected by the test)");
        }
    }
}

#[test]
fn items_whose_drop_panics_do_not_kill_the_queue_when_it_drops_them() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (clock, tx, rx) = mock_named::<Bomb>("pa-b", None);
    let bomb = |boom| Bomb { boom, drops: drops.clone() };
    // Due ones (staged for consumers) and later ones (in the heap), bombs among them.
    for i in 0..20 {
        tx.send_at(bomb(i % 3 == 0), clock.now()).unwrap();
        tx.send_at(bomb(i % 3 == 1), clock.now() + HOUR).unwrap();
    }
    clock.advance(Duration::ZERO);
    let mut got = rx.try_recv().expect("a due item");
    got.boom = false; // received: the test owns it now
    drop(got);
    drop(rx);
    // The enqueue proxy drops the 39 pending items; the bombs must not stop it
    // before it has dropped the rest, nor keep it from exiting.
    wait_for("every pending item to be dropped", || drops.load(Ordering::SeqCst) == 40);
    wait_for("the proxies to exit", || threads_named("pa-b-enqueue") + threads_named("pa-b-dequeue") == 0);
    assert_eq!(tx.len(), 0);
    // The sender still answers, without panicking, and hands items back.
    let mut refused = tx.send_at(bomb(true), clock.now()).unwrap_err().into_inner();
    refused.boom = false;
    drop(refused);
    drop(tx);
    assert_eq!(drops.load(Ordering::SeqCst), 41, "every item dropped exactly once");
}

/// An item whose `Drop` calls `try_recv` on its own queue, dropped by `discard`
/// (the enqueue role's holder drops it, role in hand): `try_recv`'s catch-up
/// (a round trip through the enqueue role when commands may be upstream, then
/// the dequeue role for due items) must not wait for a role its own thread
/// holds. The `Drop` sees the due item that was sent before it; the queue goes
/// on working.
#[test]
fn a_drop_that_calls_try_recv_on_its_own_queue_does_not_wait_for_itself() {
    struct Peeks(Option<delayq::Receiver<Peeks>>, Arc<AtomicUsize>);
    impl Drop for Peeks {
        fn drop(&mut self) {
            if let Some(rx) = self.0.take() {
                // Whatever it finds (the due item, or nothing while the role
                // is held), it must return.
                if let Ok(mut p) = rx.try_recv() {
                    p.0 = None;
                }
                self.1.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    let (tx, rx) = delayq::unbounded::<Peeks>();
    let drops = Arc::new(AtomicUsize::new(0));
    // Pending, not due: the `Drop`'s `try_recv` finds nothing in the ring and
    // tries to catch up.
    tx.send_after(Peeks(None, drops.clone()), Duration::from_secs(60)).unwrap();
    for i in 0..50 {
        // Every other round, a due item upstream of the ring too.
        if i % 2 == 0 {
            tx.send_after(Peeks(None, drops.clone()), Duration::ZERO).unwrap();
        }
        let key = tx.send_after(Peeks(Some(rx.clone()), drops.clone()), Duration::from_secs(60)).unwrap();
        tx.discard(key);
    }
    // Every discard ran its Drop (none is stuck), and the queue still works.
    let done = std::time::Instant::now();
    while drops.load(Ordering::SeqCst) < 50 {
        assert!(done.elapsed() < Duration::from_secs(20), "a Drop inside the enqueue role never returned");
        thread::sleep(Duration::from_millis(1));
    }
    tx.send_after(Peeks(None, drops.clone()), Duration::ZERO).unwrap();
    let mut left = 0;
    while rx.len() > 1 {
        rx.recv_timeout(Duration::from_secs(10)).expect("the queue went on delivering");
        left += 1;
    }
    assert!(left <= 26, "{left} items received after the discards");
    assert_eq!(rx.len(), 1, "the item due in 60 s is still pending");
}
