//! `cancel` and `reschedule`: pending items come back, stale, foreign and
//! cancelled keys name nothing, reschedules move items earlier and later, and a
//! cancel racing the delivery of the same item leaves it on exactly one side.

mod common;
use common::*;
use delayq::{Key, RecvError, TryRecvError};
use std::thread;
use std::time::{Duration, Instant};

#[test]
fn cancel_returns_a_pending_item_once_and_it_is_never_delivered() {
    let (clock, tx, rx) = mock::<&str>();
    let a = tx.send_after("a", ms(10)).unwrap();
    tx.send_after("b", ms(10)).unwrap();
    assert_eq!(tx.len(), 2);
    assert_eq!(tx.cancel(a), Some("a"));
    assert_eq!(tx.len(), 1, "len is exact when cancel returns");
    assert_eq!(tx.cancel(a), None, "a cancelled key names nothing");
    clock.advance(ms(10));
    assert_eq!(rx.try_recv(), Ok("b"));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    drop(tx);
    assert_eq!(rx.recv(), Err(RecvError));
}

#[test]
fn cancel_of_a_due_or_received_item_returns_none() {
    let (clock, tx, rx) = mock::<u32>();
    let k1 = tx.send_after(1, ms(5)).unwrap();
    let k2 = tx.send_after(2, ms(5)).unwrap();
    clock.advance(ms(5));
    // Due and handed to the consumers' ring: delivered, no longer cancellable.
    assert_eq!(tx.cancel(k1), None);
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(tx.cancel(k1), None);
    assert_eq!(rx.try_recv(), Ok(2));
    assert_eq!(tx.cancel(k2), None);
    assert_eq!(tx.len(), 0);
}

#[test]
fn cancel_after_take_pending_returns_none() {
    let (_clock, tx, rx) = mock::<u32>();
    let k = tx.send_after(1, ms(5)).unwrap();
    assert_eq!(rx.take_pending().len(), 1);
    assert_eq!(tx.cancel(k), None);
    assert!(!tx.reschedule(k, Instant::now()));
}

#[test]
fn foreign_keys_name_nothing() {
    let (c1, tx1, rx1) = mock::<u32>();
    let (c2, tx2, rx2) = mock::<u32>();
    // Both queues number their first item alike; the keys must still differ.
    let k1 = tx1.send_after(1, ms(5)).unwrap();
    let k2 = tx2.send_after(2, ms(5)).unwrap();
    assert_ne!(k1, k2);
    assert_eq!(tx1.cancel(k2), None);
    assert_eq!(tx2.cancel(k1), None);
    assert!(!tx1.reschedule(k2, c1.now() + Duration::from_secs(60)));
    assert!(!tx2.reschedule(k1, c2.now() + Duration::from_secs(60)));
    c1.advance(ms(5));
    c2.advance(ms(5));
    assert_eq!(rx1.try_recv(), Ok(1));
    assert_eq!(rx2.try_recv(), Ok(2));
}

#[test]
fn stale_keys_never_name_a_newer_item() {
    let (_clock, tx, rx) = mock::<usize>();
    let mut stale: Vec<Key> = Vec::new();
    for i in 0..1000 {
        let k = tx.send_after(i, ms(5)).unwrap();
        for &s in stale.iter().rev().take(3) {
            assert_eq!(tx.cancel(s), None);
            assert!(!tx.reschedule(s, Instant::now()));
        }
        assert_eq!(tx.len(), 1);
        assert_eq!(tx.cancel(k), Some(i));
        stale.push(k);
    }
    for &s in &stale {
        assert_eq!(tx.cancel(s), None);
    }
    assert!(rx.is_empty());
}

#[test]
fn cancel_and_reschedule_on_a_disconnected_queue() {
    let (_clock, tx, rx) = mock::<u32>();
    let k = tx.send_after(1, ms(5)).unwrap();
    drop(rx);
    assert_eq!(tx.cancel(k), None);
    assert!(!tx.reschedule(k, Instant::now()));
}

#[test]
fn reschedule_earlier() {
    let (clock, tx, rx) = mock::<&str>();
    let t0 = clock.now();
    let k = tx.send_at("x", t0 + ms(100)).unwrap();
    tx.send_at("y", t0 + ms(20)).unwrap();
    assert!(tx.reschedule(k, t0 + ms(10)));
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(10)));
    clock.advance(ms(9));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    clock.advance(ms(1));
    assert_eq!(rx.try_recv(), Ok("x"));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert!(!tx.reschedule(k, t0), "delivered: nothing to reschedule");
    clock.advance(ms(10));
    assert_eq!(rx.try_recv(), Ok("y"));
}

#[test]
fn reschedule_later() {
    let (clock, tx, rx) = mock::<&str>();
    let t0 = clock.now();
    let k = tx.send_at("x", t0 + ms(10)).unwrap();
    assert!(tx.reschedule(k, t0 + ms(50)));
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(50)));
    clock.advance(ms(10));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    clock.advance(ms(39));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(rx.len(), 1);
    clock.advance(ms(1));
    assert_eq!(rx.try_recv(), Ok("x"));
}

#[test]
fn reschedule_to_the_past_is_due_at_once_and_the_key_stays_valid() {
    let (clock, tx, rx) = mock::<u32>();
    let t0 = clock.now();
    let a = tx.send_at(1, t0 + ms(100)).unwrap();
    let b = tx.send_at(2, t0 + ms(100)).unwrap();
    assert!(tx.reschedule(a, t0 - ms(1)));
    assert!(tx.reschedule(b, t0 + ms(200)));
    assert!(tx.reschedule(b, t0 + ms(300)), "a key survives many reschedules");
    clock.advance(Duration::ZERO);
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(tx.cancel(b), Some(2), "the key still names the rescheduled item");
    assert!(!tx.reschedule(b, t0), "cancelled: nothing to reschedule");
    assert!(rx.is_empty());
}

#[test]
fn a_rescheduled_item_takes_its_place_in_deadline_order() {
    let (clock, tx, rx) = mock::<char>();
    let t0 = clock.now();
    let a = tx.send_at('a', t0 + ms(10)).unwrap();
    tx.send_at('b', t0 + ms(20)).unwrap();
    tx.send_at('c', t0 + ms(30)).unwrap();
    let d = tx.send_at('d', t0 + ms(40)).unwrap();
    assert!(tx.reschedule(a, t0 + ms(25)));
    assert!(tx.reschedule(d, t0 + ms(5)));
    clock.advance(ms(40));
    assert_eq!(rx.try_iter().collect::<String>(), "dbac");
}

#[test]
fn cancel_racing_delivery_on_system_clock_leaves_each_item_on_one_side() {
    let n = 2000 * scale();
    let (tx, rx) = delayq::unbounded::<usize>();
    let mut rng = Rng::seed(11);
    let base = Instant::now() + ms(5);
    let mut keys: Vec<(usize, Key)> = (0..n)
        .map(|i| (i, tx.send_at(i, base + Duration::from_micros(rng.range(0..60_000))).unwrap()))
        .collect();
    rng.shuffle(&mut keys);
    let consumer = thread::spawn(move || rx.iter().collect::<Vec<usize>>());
    let canceller = {
        let tx = tx.clone();
        thread::spawn(move || {
            let mut cancelled = Vec::new();
            for (i, k) in keys {
                if let Some(x) = tx.cancel(k) {
                    assert_eq!(x, i, "cancel returned another item");
                    cancelled.push(x);
                }
            }
            cancelled
        })
    };
    drop(tx);
    let cancelled: Vec<usize> = canceller.join().unwrap();
    let received = consumer.join().unwrap();
    let mut side = vec![0u8; n];
    for &i in &cancelled {
        side[i] += 1;
    }
    for &i in &received {
        side[i] += 2;
    }
    for (i, &s) in side.iter().enumerate() {
        assert!(s == 1 || s == 2, "item {i}: cancelled {} received {}", s & 1, s >> 1);
    }
    assert_eq!(cancelled.len() + received.len(), n);
}

#[test]
fn cancel_racing_delivery_on_mock_clock_leaves_each_item_on_one_side() {
    let per_ms = 4;
    let steps = 400 * scale() as u64;
    let (clock, tx, rx) = mock::<(usize, Instant)>();
    let t0 = clock.now();
    let mut keys: Vec<(usize, Key)> = (0..steps as usize * per_ms)
        .map(|i| {
            let at = t0 + ms(1 + (i / per_ms) as u64);
            (i, tx.send_at((i, at), at).unwrap())
        })
        .collect();
    let n = keys.len();
    Rng::seed(12).shuffle(&mut keys);
    let c2 = clock.clone();
    let consumer = thread::spawn(move || {
        let mut got = Vec::new();
        for (i, at) in rx.iter() {
            let now = c2.now();
            assert!(now >= at, "item {i} received before its deadline");
            got.push(i);
        }
        got
    });
    let c3 = clock.clone();
    let advancer = thread::spawn(move || {
        for _ in 0..steps {
            c3.advance(ms(1));
        }
    });
    let canceller = {
        let tx = tx.clone();
        thread::spawn(move || {
            let mut cancelled = 0;
            for (i, k) in keys {
                if let Some((x, _)) = tx.cancel(k) {
                    assert_eq!(x, i, "cancel returned another item");
                    cancelled += 1;
                }
            }
            cancelled
        })
    };
    drop(tx);
    let cancelled = canceller.join().unwrap();
    advancer.join().unwrap();
    let received = consumer.join().unwrap();
    let mut seen = vec![false; n];
    for &i in &received {
        assert!(!seen[i], "item {i} received twice");
        seen[i] = true;
    }
    assert_eq!(cancelled + received.len(), n, "every item is cancelled or received, never both");
}

#[test]
fn reschedule_racing_delivery_never_delivers_early_or_twice() {
    let n = 1000 * scale();
    let (tx, rx) = delayq::unbounded::<usize>();
    let mut rng = Rng::seed(13);
    let base = Instant::now() + ms(1);
    let sent: Vec<(usize, Key, Instant)> = (0..n)
        .map(|i| {
            let at = base + Duration::from_micros(rng.range(0..3000));
            (i, tx.send_at(i, at).unwrap(), at)
        })
        .collect();
    let consumer = thread::spawn(move || rx.iter().map(|i| (i, Instant::now())).collect::<Vec<_>>());
    // Push every item 2 ms later than planned, racing its delivery.
    let mut moved = vec![None; n];
    for &(i, k, at) in &sent {
        if tx.reschedule(k, at + ms(2)) {
            moved[i] = Some(at + ms(2));
        }
    }
    drop(tx);
    let received = consumer.join().unwrap();
    assert_eq!(received.len(), n);
    let mut seen = vec![false; n];
    for (i, when) in received {
        assert!(!seen[i], "item {i} received twice");
        seen[i] = true;
        let due = moved[i].unwrap_or(sent[i].2);
        assert!(when >= due, "item {i} received {:?} before its deadline", due - when);
    }
}

#[test]
fn discard_removes_a_pending_item_without_waiting_and_it_is_never_delivered() {
    let (clock, tx, rx) = mock::<&str>();
    let a = tx.send_after("a", ms(10)).unwrap();
    tx.send_after("b", ms(10)).unwrap();
    tx.discard(a);
    // A flush: `advance` returns once earlier commands are applied.
    clock.advance(ms(10));
    assert_eq!(rx.len(), 1, "the discarded item is released");
    assert_eq!(rx.try_recv(), Ok("b"));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(tx.cancel(a), None, "a discarded key names nothing");
    tx.discard(a);
    let (_, other_tx, _other_rx) = mock::<&str>();
    let foreign = other_tx.send_after("other", ms(1)).unwrap();
    tx.discard(foreign);
    assert_eq!(other_tx.len(), 1, "a foreign key touches nothing");
}

#[test]
fn discard_of_a_due_item_leaves_it_delivered() {
    let (clock, tx, rx) = mock::<u32>();
    let k = tx.send_after(1, ms(5)).unwrap();
    clock.advance(ms(5));
    tx.discard(k);
    clock.advance(ms(1));
    assert_eq!(rx.try_recv(), Ok(1));
}

#[test]
fn a_discarded_item_whose_drop_panics_does_not_kill_the_proxy() {
    let (clock, tx, rx) = mock::<Bomb>();
    let k = tx.send_after(Bomb::armed(), ms(5)).unwrap();
    tx.discard(k);
    let live = Bomb::armed();
    let flag = live.0.clone();
    tx.send_after(live, ms(5)).unwrap();
    clock.advance(ms(5));
    let got = rx.try_recv().expect("the proxy survived the panic and delivered");
    assert!(std::sync::Arc::ptr_eq(&got.0, &flag));
    got.disarm();
}

/// An item whose deadline has passed but that still waits in the timer index
/// (here: the consumers' ring is full) is still pending: `cancel` returns it
/// and `reschedule` moves it (tokio-util's `remove` and Java's
/// `DelayQueue.remove` hand back an expired item nobody took). Deterministic:
/// a two-slot consumers' ring holds the first two due items, the third stays
/// in the index.
#[test]
fn a_due_item_still_in_the_index_is_cancelled_and_returned() {
    let clock = delayq::MockClock::new();
    let (tx, rx) = delayq::Builder::new().clock(clock.clone()).egress_slots(2).build::<u32>().unwrap();
    let at = clock.now() + ms(10);
    let keys: Vec<Key> = (1..=4).map(|i| tx.send_at(i, at).unwrap()).collect();
    clock.advance(ms(10));
    assert_eq!(tx.cancel(keys[2]), Some(3), "due, in the index: cancellable");
    assert!(tx.reschedule(keys[3], clock.now() + ms(5)), "due, in the index: reschedulable");
    assert_eq!(tx.len(), 3);
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.try_recv(), Ok(2));
    assert_eq!(tx.cancel(keys[0]), None, "received: gone");
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "4 was moved 5 ms later");
    clock.advance(ms(5));
    assert_eq!(rx.try_recv(), Ok(4));
}
