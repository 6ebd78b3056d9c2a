//! Shutdown: every sender gone (drain, then `RecvError`), every receiver gone
//! (sends fail with the item, pending items dropped once, proxies exit), `close`
//! (drain), `take_pending` after `close` (nothing lost), and the release of blocked
//! producers and consumers by each of these paths. Proxy threads are observed by
//! name in `/proc/self/task/*/comm`.

mod common;
use common::*;
use delayq::{
    Receiver, RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// Waits until `h` is blocked-looking (still running after a moment), for checks
/// that a call did not return early; the real assertion is on what it returns.
fn still_running<R>(h: &thread::JoinHandle<R>) {
    thread::sleep(ms(20));
    assert!(!h.is_finished(), "the call returned before its release");
}

struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn senders_gone_pending_items_are_delivered_when_due_then_recv_error() {
    let (clock, tx, rx) = mock_named::<u32>("sd-a", None);
    let tx2 = tx.clone();
    tx.send_after(1, ms(10)).unwrap();
    tx2.send_after(2, ms(20)).unwrap();
    drop(tx);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "one sender is left");
    drop(tx2);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "items are pending: not disconnected yet");
    assert_eq!(rx.len(), 2);
    clock.advance(ms(10));
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    clock.advance(ms(10));
    assert_eq!(rx.recv(), Ok(2));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(rx.recv(), Err(RecvError));
    assert_eq!(rx.recv_timeout(HOUR), Err(RecvTimeoutError::Disconnected));
    assert_eq!(rx.recv_many(&mut Vec::new(), 10), Err(RecvError));
    assert_eq!(rx.iter().next(), None);
}

#[test]
fn senders_gone_release_every_blocked_receiver() {
    let (_clock, tx, rx) = mock_named::<u32>("sd-b", None);
    let consumers: Vec<_> = (0..4)
        .map(|i| {
            let rx = rx.clone();
            thread::spawn(move || match i {
                0 => rx.recv().map_err(|_| "recv"),
                1 => rx.recv_timeout(HOUR).map_err(|_| "recv_timeout"),
                2 => rx.recv_many(&mut Vec::new(), 5).map(|n| n as u32).map_err(|_| "recv_many"),
                _ => rx.iter().next().ok_or("iter"),
            })
        })
        .collect();
    still_running(&consumers[0]);
    drop(tx);
    let results: Vec<_> = consumers.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(results, vec![Err("recv"), Err("recv_timeout"), Err("recv_many"), Err("iter")]);
}

#[test]
fn senders_gone_a_blocked_receiver_still_gets_the_pending_item() {
    let (clock, tx, rx) = mock_named::<u32>("sd-c", None);
    tx.send_after(7, ms(10)).unwrap();
    let rx2 = rx.clone();
    let h = thread::spawn(move || (rx2.recv(), rx2.recv()));
    drop(tx);
    still_running(&h);
    clock.advance(ms(10));
    assert_eq!(h.join().unwrap(), (Ok(7), Err(RecvError)));
}

#[test]
fn receivers_gone_sends_fail_with_the_item() {
    let (_clock, tx, rx) = mock_named::<String>("sd-d", None);
    let rx2 = rx.clone();
    drop(rx);
    assert!(tx.send_after("still open".into(), HOUR).is_ok(), "one receiver is left");
    assert!(!tx.is_disconnected());
    drop(rx2);
    assert!(tx.is_disconnected());
    assert_eq!(tx.send_at("a".into(), Instant::now()), Err(SendError("a".into())));
    assert_eq!(tx.send_after("b".into(), ms(1)), Err(SendError("b".into())));
    assert_eq!(tx.try_send_at("c".into(), Instant::now()), Err(TrySendError::Disconnected("c".into())));
    assert_eq!(
        tx.send_at_timeout("d".into(), Instant::now(), HOUR),
        Err(SendTimeoutError::Disconnected("d".into()))
    );
}

#[cfg(target_os = "linux")]
#[test]
fn receivers_gone_pending_items_are_dropped_once_and_proxies_exit() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (clock, tx, rx) = mock_named::<Counted>("sd-e", None);
    // A new thread names itself as it starts: wait for both names to show.
    wait_for("the proxies to start", || proxies("sd-e") == (1, 1));
    for i in 0..50 {
        tx.send_after(Counted(drops.clone()), ms(i % 5)).unwrap();
    }
    clock.advance(ms(2)); // Some due and staged for consumers, some in the heap.
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(rx);
    // The proxies exit although a sender is still alive.
    wait_for("the proxies to exit", || proxies("sd-e") == (0, 0));
    assert_eq!(drops.load(Ordering::SeqCst), 50, "each pending item dropped once");
    assert_eq!(tx.len(), 0);
    let e = tx.send_after(Counted(drops.clone()), ms(1)).unwrap_err();
    assert_eq!(drops.load(Ordering::SeqCst), 50, "the refused item is handed back, not dropped");
    drop(e);
    assert_eq!(drops.load(Ordering::SeqCst), 51);
    drop(tx);
    clock.advance(ms(10)); // A clock whose queue is gone still steps.
    assert_eq!(drops.load(Ordering::SeqCst), 51);
}

#[cfg(target_os = "linux")]
#[test]
fn proxy_threads_live_as_long_as_a_handle_and_the_last_one_joins_them() {
    let (clock, tx, rx) = mock_named::<u32>("sd-f", None);
    wait_for("the proxies to start", || proxies("sd-f") == (1, 1));
    tx.send_after(1, ms(5)).unwrap();
    let rx2 = rx.clone();
    drop(tx);
    // Senders gone: the proxies keep running to deliver what is pending.
    assert_eq!(proxies("sd-f"), (1, 1));
    clock.advance(ms(5));
    assert_eq!(rx.recv(), Ok(1));
    assert_eq!(rx.recv(), Err(RecvError));
    drop(rx);
    assert_eq!(proxies("sd-f"), (1, 1), "a receiver clone is still alive");
    let h = thread::spawn(move || drop(rx2));
    h.join().unwrap();
    wait_for("the proxies to exit", || proxies("sd-f") == (0, 0));
}

#[cfg(target_os = "linux")]
#[test]
fn queues_created_and_dropped_leak_no_threads() {
    for round in 0..20 * scale() {
        let (clock, tx, rx) = mock_named::<u32>("sd-g", Some(4));
        tx.send_after(1, ms(1)).unwrap();
        tx.send_after(2, HOUR).unwrap();
        clock.advance(ms(1));
        if round % 2 == 0 {
            drop(tx);
            drop(rx);
        } else {
            drop(rx);
            drop(tx);
        }
    }
    wait_for("every proxy to exit", || proxies("sd-g") == (0, 0));
}

#[test]
fn close_refuses_sends_and_drains_pending_items_then_recv_error() {
    let (clock, tx, rx) = mock_named::<u32>("sd-h", None);
    tx.send_after(2, ms(20)).unwrap();
    tx.send_after(1, ms(10)).unwrap();
    let rx2 = rx.clone();
    rx2.close();
    rx2.close(); // idempotent
    assert!(tx.is_disconnected());
    assert_eq!(tx.send_after(3, ms(1)), Err(SendError(3)));
    assert_eq!(tx.try_send_at(4, clock.now()), Err(TrySendError::Disconnected(4)));
    assert_eq!(tx.send_at_timeout(5, clock.now(), HOUR), Err(SendTimeoutError::Disconnected(5)));
    assert_eq!(rx.len(), 2);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "pending, not yet due");
    clock.advance(ms(10));
    assert_eq!(rx.try_recv(), Ok(1));
    clock.advance(ms(10));
    assert_eq!(rx.recv(), Ok(2));
    assert_eq!(rx.recv(), Err(RecvError));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(tx.len(), 0);
}

#[test]
fn take_pending_after_close_returns_everything_in_deadline_order() {
    let (clock, tx, rx) = mock_named::<usize>("sd-i", None);
    let t0 = clock.now();
    // 1500 due at once (more than the consumers' ring holds) and 500 later ones,
    // sent in shuffled order; deadlines are distinct and known per item.
    let mut order: Vec<usize> = (0..2000).collect();
    Rng::seed(21).shuffle(&mut order);
    let at = |i: usize| if i < 1500 { t0 + Duration::from_micros(i as u64) } else { t0 + ms(i as u64) };
    for &i in &order {
        tx.send_at(i, at(i)).unwrap();
    }
    clock.advance(ms(2));
    for i in 0..10 {
        assert_eq!(rx.try_recv(), Ok(i));
    }
    rx.close();
    assert_eq!(tx.send_at(9999, t0), Err(SendError(9999)));
    let taken = rx.take_pending();
    let want: Vec<_> = (10..2000).map(|i| (at(i), i)).collect();
    assert_eq!(taken.len(), want.len());
    assert!(taken == want, "take_pending: not every item, or not in deadline order");
    assert_eq!(rx.len(), 0);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(rx.recv(), Err(RecvError));
    assert!(rx.take_pending().is_empty());
}

#[test]
fn close_releases_blocked_producers() {
    let (clock, tx, rx) = mock_named::<u32>("sd-j", Some(1));
    tx.send_at(1, clock.now() + HOUR).unwrap();
    let (tx1, tx2) = (tx.clone(), tx.clone());
    let at = clock.now();
    let a = thread::spawn(move || tx1.send_at(2, at));
    let b = thread::spawn(move || tx2.send_at_timeout(3, at, HOUR));
    still_running(&a);
    rx.close();
    assert_eq!(a.join().unwrap(), Err(SendError(2)));
    assert_eq!(b.join().unwrap(), Err(SendTimeoutError::Disconnected(3)));
    assert_eq!(rx.len(), 1);
}

#[test]
fn receivers_gone_release_blocked_producers() {
    let (clock, tx, rx) = mock_named::<u32>("sd-k", Some(1));
    tx.send_at(1, clock.now() + HOUR).unwrap();
    let (tx1, tx2) = (tx.clone(), tx.clone());
    let at = clock.now();
    let a = thread::spawn(move || tx1.send_at(2, at));
    let b = thread::spawn(move || tx2.send_at_timeout(3, at, HOUR));
    still_running(&a);
    drop(rx);
    assert_eq!(a.join().unwrap(), Err(SendError(2)));
    assert_eq!(b.join().unwrap(), Err(SendTimeoutError::Disconnected(3)));
}

#[test]
fn close_releases_blocked_consumers_once_drained() {
    let (_clock, tx, rx) = mock_named::<u32>("sd-l", None);
    let waiting = |rx: &Receiver<u32>| {
        let rx = rx.clone();
        thread::spawn(move || (rx.recv(), rx.recv_timeout(HOUR)))
    };
    // Nothing pending: close releases them at once.
    let a = waiting(&rx);
    still_running(&a);
    rx.close();
    assert_eq!(a.join().unwrap(), (Err(RecvError), Err(RecvTimeoutError::Disconnected)));
    drop(tx);

    // An item pending: they wait for it, then get RecvError.
    let (clock, tx, rx) = mock_named::<u32>("sd-m", None);
    tx.send_after(1, ms(10)).unwrap();
    let a = waiting(&rx);
    rx.close();
    still_running(&a);
    clock.advance(ms(10));
    assert_eq!(a.join().unwrap(), (Ok(1), Err(RecvTimeoutError::Disconnected)));
}

#[test]
fn take_pending_after_close_releases_blocked_consumers() {
    let (_clock, tx, rx) = mock_named::<u32>("sd-n", None);
    tx.send_after(1, HOUR).unwrap();
    tx.send_after(2, HOUR).unwrap();
    rx.close();
    let consumers: Vec<_> = (0..3)
        .map(|_| {
            let rx = rx.clone();
            thread::spawn(move || rx.recv())
        })
        .collect();
    still_running(&consumers[0]);
    let taken: Vec<u32> = rx.take_pending().into_iter().map(|(_, x)| x).collect();
    assert_eq!(taken, vec![1, 2]);
    for c in consumers {
        assert_eq!(c.join().unwrap(), Err(RecvError));
    }
    drop(tx);
}

#[test]
fn shutdown_while_the_consumers_ring_is_full_loses_nothing() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (clock, tx, rx) = mock_named::<Counted>("sd-o", Some(3000));
    for _ in 0..3000 {
        tx.send_at(Counted(drops.clone()), clock.now()).unwrap();
    }
    clock.advance(Duration::ZERO); // the ring fills, the dequeue proxy waits for room
    let got: Vec<Counted> = rx.try_iter().take(5).collect();
    assert_eq!(got.len(), 5);
    drop(rx);
    drop(tx);
    assert_eq!(drops.load(Ordering::SeqCst), 2995, "the last handle drops every pending item");
    drop(got);
    assert_eq!(drops.load(Ordering::SeqCst), 3000);
}

#[test]
fn take_pending_without_close_wakes_a_dequeue_proxy_waiting_for_room() {
    // Reliability defect 4: more items due than the consumers' ring holds and no
    // consumer, so the dequeue proxy waits for room; `take_pending` makes room
    // without a receive. A later due item must still come out.
    for cap in [None, Some(1100)] {
        let (clock, tx, rx) = mock_named::<u32>("sd-tp", cap);
        for i in 0..1100 {
            tx.send_at(i, clock.now()).unwrap();
        }
        clock.advance(Duration::ZERO); // a round ran: the ring is full
        assert_eq!(rx.take_pending().len(), 1100);
        assert_eq!(rx.len(), 0);
        tx.send_at(7, clock.now()).unwrap();
        // No clock step: a step would wake the proxy and hide a lost wakeup.
        let rx2 = rx.clone();
        assert_eq!(join(spawn(move || rx2.recv())), Ok(7), "cap {cap:?}");
        assert_eq!(rx.len(), 0);
    }
}
