//! Items close to their deadline: they come out only once due, in deadline
//! order, and can be cancelled and rescheduled until then; the consumer that
//! waits for the index's next deadline on everyone's behalf (the lead,
//! `src/lead.rs`) hands that duty on when it leaves, and an earlier item sent
//! meanwhile reaches it.
//!
//! (These tests were written for staging, which moved items into the
//! consumers' ring before their deadline; they hold as they are without it.)
//! The deterministic tests use a mock clock: `advance` returns after a
//! dequeue round that read the new time.

mod common;
use common::*;
use delayq::{Builder, Key, MockClock, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// A queue on a mock clock.
fn mock<T: Send + 'static>() -> (MockClock, Sender<T>, Receiver<T>) {
    let clock = MockClock::new();
    let (tx, rx) = Builder::new().clock(clock.clone()).build().unwrap();
    (clock, tx, rx)
}

#[test]
fn an_item_comes_out_only_once_due() {
    let (clock, tx, rx) = mock::<u32>();
    tx.send_after(1, secs(5)).unwrap();
    clock.advance(secs(1));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "not due");
    assert!(rx.try_iter().next().is_none());
    clock.advance(secs(4));
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
}

#[test]
fn recv_many_takes_the_due_items_and_leaves_the_others() {
    let (clock, tx, rx) = mock::<u32>();
    for (i, d) in [1, 2, 8].into_iter().enumerate() {
        tx.send_after(i as u32, secs(d)).unwrap();
    }
    clock.advance(secs(2));
    let mut buf = Vec::new();
    assert_eq!(rx.recv_many(&mut buf, 10), Ok(2));
    assert_eq!(buf, [0, 1]);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(rx.len(), 1);
    clock.advance(secs(6));
    assert_eq!(rx.recv_many(&mut buf, 10), Ok(1));
    assert_eq!(buf, [0, 1, 2]);
}

#[test]
fn an_item_can_be_cancelled_until_it_is_due() {
    let (clock, tx, rx) = mock::<&str>();
    let a = tx.send_after("a", secs(5)).unwrap();
    let b = tx.send_after("b", secs(6)).unwrap();
    clock.advance(secs(1));
    assert_eq!(rx.peek_deadline(), Some(clock.now() + secs(4)));
    assert_eq!(tx.cancel(a), Some("a"));
    assert_eq!(tx.cancel(a), None);
    assert_eq!(rx.len(), 1);
    clock.advance(secs(5));
    assert_eq!(tx.cancel(b), None, "due and moved to the ring: final");
    assert_eq!(rx.try_recv(), Ok("b"));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
}

#[test]
fn a_discarded_item_is_dropped_and_released() {
    let (clock, tx, rx) = mock::<u32>();
    let a = tx.send_after(1, secs(5)).unwrap();
    clock.advance(secs(1));
    tx.discard(a);
    assert_eq!(rx.peek_deadline(), None);
    assert_eq!(rx.len(), 0);
    clock.advance(secs(10));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
}

#[test]
fn an_item_can_be_rescheduled_later_and_earlier() {
    let (clock, tx, rx) = mock::<&str>();
    let t0 = clock.now();
    let a = tx.send_after("a", secs(5)).unwrap();
    tx.send_after("b", secs(6)).unwrap();
    clock.advance(secs(1));
    assert!(tx.reschedule(a, t0 + secs(30)), "still pending");
    clock.set(t0 + secs(6));
    assert_eq!(rx.try_recv(), Ok("b"));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "a moved to 30 s");
    assert!(tx.reschedule(a, t0 + secs(7)));
    clock.set(t0 + secs(7));
    assert_eq!(rx.try_recv(), Ok("a"));
    assert!(!tx.reschedule(a, t0 + secs(8)), "received");
}

#[test]
fn an_earlier_item_goes_in_front_of_later_ones() {
    let (clock, tx, rx) = mock::<&str>();
    let t0 = clock.now();
    tx.send_at("c", t0 + secs(6)).unwrap();
    tx.send_at("d", t0 + secs(7)).unwrap();
    clock.advance(secs(1));
    // a and b arrive with earlier deadlines than c and d.
    tx.send_at("b", t0 + secs(4)).unwrap();
    tx.send_at("a", t0 + secs(3)).unwrap();
    clock.set(t0 + secs(3));
    assert_eq!(rx.try_recv(), Ok("a"), "not stuck behind c");
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    clock.set(t0 + secs(10));
    let rest: Vec<_> = rx.try_iter().collect();
    assert_eq!(rest, ["b", "c", "d"]);
}

#[test]
fn equal_deadlines_leave_in_key_order() {
    let (clock, tx, rx) = mock::<&str>();
    let t0 = clock.now();
    let a = tx.send_at("a", t0 + secs(9)).unwrap();
    tx.send_at("b", t0 + secs(5)).unwrap();
    clock.advance(ms(1));
    // "a" (the smaller key) moves to the same deadline as "b", before "b" is
    // due (were "b" due first, "a" would follow it, as an item that reaches
    // the index late always does).
    assert!(tx.reschedule(a, t0 + secs(5)));
    clock.advance(Duration::ZERO);
    clock.set(t0 + secs(5));
    assert_eq!(rx.try_recv(), Ok("a"));
    assert_eq!(rx.try_recv(), Ok("b"));
}

/// Items cancelled near their deadline, and `take_pending`, with a two-slot
/// ring: nothing may be left waiting for room. On the system clock: a mock
/// clock's step would wake everyone and hide a missed wake-up.
#[test]
fn cancelled_items_never_hold_up_the_ring() {
    let (tx, rx) = Builder::new().egress_slots(2).build::<u32>().unwrap();
    for round in 0..2 {
        let a = tx.send_after(1, secs(5)).unwrap();
        let b = tx.send_after(2, secs(6)).unwrap();
        thread::sleep(ms(50));
        assert_eq!(tx.cancel(a), Some(1));
        assert_eq!(tx.cancel(b), Some(2));
        tx.send_at(3, Instant::now()).unwrap();
        if round == 0 {
            // Nobody receives: `take_pending` takes the due item.
            thread::sleep(ms(50));
            let taken: Vec<u32> = rx.take_pending().into_iter().map(|(_, x)| x).collect();
            assert_eq!(taken, [3]);
        } else {
            assert_eq!(rx.recv_timeout(secs(5)), Ok(3));
        }
        tx.send_at(4, Instant::now()).unwrap();
        assert_eq!(rx.recv_timeout(secs(5)), Ok(4), "round {round}: the proxy slept with room in the ring");
    }
}

#[test]
fn an_item_already_due_goes_in_front_of_later_ones() {
    let (clock, tx, rx) = mock::<u32>();
    tx.send_after(2, secs(5)).unwrap();
    clock.advance(secs(1));
    tx.send_at(1, clock.now()).unwrap();
    clock.advance(Duration::ZERO);
    assert_eq!(rx.try_recv(), Ok(1));
}

#[test]
fn take_pending_returns_items_in_deadline_order() {
    let (clock, tx, rx) = mock::<u32>();
    for d in [3, 1, 2, 20] {
        tx.send_after(d, secs(d as u64)).unwrap();
    }
    clock.advance(ms(500));
    rx.close();
    let got: Vec<u32> = rx.take_pending().into_iter().map(|(_, x)| x).collect();
    assert_eq!(got, [1, 2, 3, 20]);
    assert_eq!(rx.len(), 0);
    assert!(rx.recv().is_err());
}

#[test]
fn dropping_the_queue_drops_pending_items() {
    let (clock, tx, rx) = mock::<Arc<()>>();
    let probe = Arc::new(());
    for d in 1..=3 {
        tx.send_after(probe.clone(), secs(d)).unwrap();
    }
    clock.advance(ms(1));
    drop((tx, rx));
    // The proxies are joined when the last handle goes: nothing is left behind.
    assert_eq!(Arc::strong_count(&probe), 1);
}

/// A blocked consumer leads for the next deadline and its own timed park
/// releases the item, on the system clock: never early.
#[test]
fn blocked_consumers_get_items_on_time_and_never_early() {
    let (tx, rx) = Builder::new().build::<u32>().unwrap();
    let n = 200 * scale() as u32;
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let rx = rx.clone();
            thread::spawn(move || {
                let mut got = Vec::new();
                while let Ok(e) = rx.recv_entry() {
                    assert!(Instant::now() >= e.deadline(), "early");
                    got.push(e.into_inner());
                }
                got
            })
        })
        .collect();
    let start = Instant::now();
    for i in 0..n {
        // Deadlines 0–20 ms out, in a scrambled order.
        tx.send_at(i, start + us(u64::from(i * 7919 % 20_000))).unwrap();
    }
    drop(tx);
    let mut all: Vec<u32> = consumers.into_iter().flat_map(|c| c.join().unwrap()).collect();
    all.sort_unstable();
    assert_eq!(all, (0..n).collect::<Vec<_>>());
}

/// A leader that times out must hand the lead on: the other consumer, parked
/// without a timeout while the first one led, would otherwise sleep through
/// the deadline (nobody else has a timer for it).
#[test]
fn a_leader_that_times_out_hands_the_lead_on() {
    let (tx, rx) = Builder::new().build::<u32>().unwrap();
    let at = Instant::now() + ms(300);
    tx.send_at(7, at).unwrap();
    let first = {
        let rx = rx.clone();
        // Alone for 50 ms: it finds the item not due and leads for it.
        thread::spawn(move || rx.recv_timeout(ms(100)))
    };
    thread::sleep(ms(50));
    // A later item: no wake-up (someone leads for an earlier deadline).
    tx.send_after(8, secs(60)).unwrap();
    let second = {
        let rx = rx.clone();
        thread::spawn(move || (rx.recv_timeout(secs(10)), Instant::now()))
    };
    assert_eq!(first.join().unwrap(), Err(RecvTimeoutError::Timeout));
    let (got, when) = second.join().unwrap();
    assert_eq!(got, Ok(7));
    assert!(when >= at);
    assert!(when < at + secs(5), "slept through the deadline: {:?} late", when - at);
}

#[test]
fn cancel_racing_the_delivery_leaves_each_item_on_exactly_one_side() {
    let (tx, rx) = Builder::new().build::<u32>().unwrap();
    let n = 400 * scale() as u32;
    let received = Arc::new(Mutex::new(Vec::new()));
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let (rx, received) = (rx.clone(), received.clone());
            thread::spawn(move || {
                while let Ok(x) = rx.recv() {
                    received.lock().unwrap().push(x);
                }
            })
        })
        .collect();
    let start = Instant::now();
    let keys: Vec<(u32, Key)> =
        (0..n).map(|i| (i, tx.send_at(i, start + us(u64::from(i % 50) * 100 + 2_000)).unwrap())).collect();
    let mut cancelled = Vec::new();
    for (i, k) in keys {
        if i % 2 == 0 {
            if let Some(x) = tx.cancel(k) {
                assert_eq!(x, i);
                cancelled.push(x);
            }
        }
    }
    drop(tx);
    for c in consumers {
        c.join().unwrap();
    }
    let received = received.lock().unwrap().clone();
    let got: HashSet<u32> = received.iter().copied().collect();
    assert_eq!(got.len(), received.len(), "an item came out twice");
    for x in &cancelled {
        assert!(!got.contains(x), "{x} was both cancelled and received");
    }
    assert_eq!(got.len() + cancelled.len(), n as usize, "an item was lost");
    assert_eq!(rx.len(), 0);
}

#[cfg(feature = "async")]
#[test]
fn an_async_receiver_gets_an_item_at_its_deadline() {
    let (tx, rx) = Builder::new().build::<u32>().unwrap();
    let at = Instant::now() + ms(20);
    tx.send_at(3, at).unwrap();
    let got = delayq::doc_block_on(rx.recv_async());
    assert_eq!(got, Ok(3));
    assert!(Instant::now() >= at);
}
