//! Capacity: `try_send_at` reports `Full`, `send_at` blocks while full and is
//! released by a receive, a cancel or `take_pending`, `send_at_timeout` times out;
//! an unbounded queue never reports `Full` or `Timeout`; `len`/`is_full`/`capacity`
//! are exact; a zero capacity is refused.

mod common;
use common::*;
use delayq::{BuildError, Builder, MockClock, Receiver, SendTimeoutError, Sender, TrySendError};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn mock_bounded<T: Send + 'static>(cap: usize) -> (MockClock, Sender<T>, Receiver<T>) {
    let clock = MockClock::new();
    let (tx, rx) = Builder::new().capacity(cap).clock(clock.clone()).build().unwrap();
    (clock, tx, rx)
}

/// Spawns a thread that calls `send_at` on a full queue, and checks that it is
/// still blocked a little later. Returns its handle and its "returned" flag.
fn blocked_send(
    tx: &Sender<u32>,
    item: u32,
    at: Instant,
) -> (thread::JoinHandle<Result<u32, u32>>, Arc<AtomicBool>) {
    let tx = tx.clone();
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    let h = thread::spawn(move || {
        let r = tx.send_at(item, at).map(|_| item).map_err(|e| e.into_inner());
        d2.store(true, Ordering::SeqCst);
        r
    });
    // Not a wait for a result: a send into a full queue must still be blocked after it.
    thread::sleep(ms(20));
    assert!(!done.load(Ordering::SeqCst), "send_at returned while the queue was full");
    (h, done)
}

#[test]
fn capacity_reports_the_bound() {
    let (tx, rx) = delayq::bounded::<u8>(3);
    assert_eq!((tx.capacity(), rx.capacity()), (Some(3), Some(3)));
    let (tx, rx) = delayq::unbounded::<u8>();
    assert_eq!((tx.capacity(), rx.capacity()), (None, None));
    let (tx, _rx) = Builder::new().capacity(5000).build::<u8>().unwrap();
    assert_eq!(tx.capacity(), Some(5000));
}

#[test]
fn len_is_full_and_is_empty_are_exact() {
    let (clock, tx, rx) = mock_bounded::<u32>(3);
    assert!(tx.is_empty() && rx.is_empty() && !tx.is_full() && !rx.is_full());
    let mut keys = Vec::new();
    for i in 0..3 {
        assert!(!tx.is_full());
        keys.push(tx.try_send_at(i, clock.now() + ms(u64::from(i))).unwrap());
        assert_eq!((tx.len(), rx.len()), (i as usize + 1, i as usize + 1));
    }
    assert!(tx.is_full() && rx.is_full());
    assert_eq!(tx.cancel(keys[2]), Some(2));
    assert_eq!((tx.len(), tx.is_full()), (2, false));
    clock.advance(Duration::ZERO);
    // Due and staged for consumers, but not received: still counted.
    assert_eq!(rx.len(), 2);
    assert_eq!(rx.try_recv(), Ok(0));
    assert_eq!((tx.len(), rx.len()), (1, 1));
    tx.try_send_at(3, clock.now() + HOUR).unwrap();
    tx.try_send_at(4, clock.now() + HOUR).unwrap();
    assert!(tx.is_full());
    assert_eq!(rx.take_pending().len(), 3);
    assert!(tx.is_empty() && rx.is_empty() && !rx.is_full());
}

#[test]
fn try_send_reports_full_with_the_item() {
    let (clock, tx, rx) = mock_bounded::<u32>(2);
    tx.try_send_at(1, clock.now()).unwrap();
    tx.try_send_at(2, clock.now() + HOUR).unwrap();
    for _ in 0..3 {
        let e = tx.try_send_at(3, clock.now()).unwrap_err();
        assert!(e.is_full());
        assert_eq!(e, TrySendError::Full(3));
    }
    assert_eq!(tx.len(), 2);
    clock.advance(Duration::ZERO);
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(tx.try_send_at(3, clock.now()).map(|_| ()), Ok(()));
    assert_eq!(tx.try_send_at(4, clock.now()), Err(TrySendError::Full(4)));
}

#[test]
fn send_at_timeout_times_out_on_mock_clock() {
    let (clock, tx, rx) = mock_bounded::<u32>(1);
    tx.send_at(1, clock.now() + HOUR).unwrap();
    let (c2, tx2) = (clock.clone(), tx.clone());
    let h = thread::spawn(move || {
        let start = c2.now();
        let r = tx2.send_at_timeout(2, c2.now(), ms(10));
        (r.map(|_| ()), c2.now() - start)
    });
    // The thread reads the mock time itself: step until its timeout has passed.
    for _ in 0..1_000_000 {
        if h.is_finished() {
            break;
        }
        clock.advance(ms(1));
        thread::yield_now();
    }
    let (r, waited) = h.join().unwrap();
    assert_eq!(r, Err(SendTimeoutError::Timeout(2)));
    assert!(waited >= ms(10), "timed out after {waited:?} of mock time");
    assert_eq!(tx.len(), 1, "the timed-out send left nothing behind");
    assert_eq!(rx.take_pending().into_iter().map(|(_, x)| x).collect::<Vec<_>>(), vec![1]);
}

#[test]
fn send_at_timeout_on_system_clock() {
    let (tx, rx) = delayq::bounded::<u32>(1);
    let far = Instant::now() + HOUR;
    tx.send_at_timeout(1, far, ms(10)).unwrap();
    let start = Instant::now();
    assert_eq!(tx.send_at_timeout(2, far, ms(20)), Err(SendTimeoutError::Timeout(2)));
    assert!(start.elapsed() >= ms(20), "timed out after {:?}", start.elapsed());
    assert_eq!(tx.send_at_timeout(3, far, Duration::ZERO), Err(SendTimeoutError::Timeout(3)));
    // Room appears within the timeout: the send succeeds.
    let rx2 = rx.clone();
    let h = thread::spawn(move || {
        thread::sleep(ms(20));
        rx2.take_pending()
    });
    tx.send_at_timeout(4, far, Duration::from_secs(30)).unwrap();
    assert_eq!(h.join().unwrap().into_iter().map(|(_, x)| x).collect::<Vec<_>>(), vec![1]);
    assert_eq!(rx.len(), 1);
}

#[test]
fn blocked_send_is_released_by_a_receive() {
    let (clock, tx, rx) = mock_bounded::<u32>(1);
    tx.send_at(1, clock.now()).unwrap();
    let (h, _) = blocked_send(&tx, 2, clock.now());
    assert_eq!(tx.len(), 1);
    clock.advance(Duration::ZERO);
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(h.join().unwrap(), Ok(2));
    assert_eq!(rx.len(), 1);
    clock.advance(Duration::ZERO);
    assert_eq!(rx.try_recv(), Ok(2));
}

#[test]
fn blocked_send_is_released_by_a_cancel() {
    let (clock, tx, rx) = mock_bounded::<u32>(1);
    let key = tx.send_at(1, clock.now() + HOUR).unwrap();
    let (h, _) = blocked_send(&tx, 2, clock.now());
    assert_eq!(tx.cancel(key), Some(1));
    assert_eq!(h.join().unwrap(), Ok(2));
    clock.advance(Duration::ZERO);
    assert_eq!(rx.try_recv(), Ok(2));
}

#[test]
fn blocked_send_is_released_by_take_pending() {
    let (clock, tx, rx) = mock_bounded::<u32>(2);
    let t = clock.now() + HOUR;
    tx.send_at(1, t).unwrap();
    tx.send_at(2, t + ms(1)).unwrap();
    let (h, _) = blocked_send(&tx, 3, t + ms(2));
    assert_eq!(rx.take_pending(), vec![(t, 1), (t + ms(1), 2)]);
    assert_eq!(h.join().unwrap(), Ok(3));
    assert_eq!(rx.take_pending(), vec![(t + ms(2), 3)]);
}

#[test]
fn many_blocked_senders_all_get_through_as_room_appears() {
    let (clock, tx, rx) = mock_bounded::<u32>(2);
    tx.send_at(1000, clock.now()).unwrap();
    tx.send_at(1001, clock.now()).unwrap();
    let producers: Vec<_> = (0..4u32)
        .map(|p| {
            let tx = tx.clone();
            let at = clock.now();
            thread::spawn(move || {
                for i in 0..25 {
                    tx.send_at(p * 100 + i, at).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let mut got = HashSet::new();
    for x in rx.iter() {
        assert!(rx.len() <= 2, "len {} above capacity", rx.len());
        assert!(got.insert(x), "{x} received twice");
    }
    for p in producers {
        p.join().unwrap();
    }
    let want: HashSet<u32> =
        (0..4).flat_map(|p| (0..25).map(move |i| p * 100 + i)).chain([1000, 1001]).collect();
    assert_eq!(got, want);
}

#[test]
fn capacity_above_the_egress_ring_is_honoured() {
    let n = 3000;
    let (clock, tx, rx) = mock_bounded::<usize>(n);
    for i in 0..n {
        tx.try_send_at(i, clock.now()).unwrap();
    }
    assert!(tx.is_full());
    assert_eq!(tx.try_send_at(n, clock.now()), Err(TrySendError::Full(n)));
    clock.advance(Duration::ZERO);
    for i in 0..n {
        assert_eq!(rx.recv(), Ok(i));
    }
    assert!(rx.is_empty());
}

#[test]
fn unbounded_never_reports_full_or_timeout() {
    // Far more than the ingress ring holds, sent faster than anyone drains them.
    let per_producer = 60_000 * scale();
    let clock = MockClock::new();
    let (tx, rx) = Builder::new().clock(clock.clone()).build::<(u8, usize)>().unwrap();
    let producers: Vec<_> = (0..2u8)
        .map(|p| {
            let (tx, at) = (tx.clone(), clock.now());
            thread::spawn(move || {
                for i in 0..per_producer {
                    let r = match i % 3 {
                        0 => tx.try_send_at((p, i), at).map_err(|e| e.to_string()),
                        1 => tx.send_at_timeout((p, i), at, Duration::ZERO).map_err(|e| e.to_string()),
                        _ => tx.send_at((p, i), at).map_err(|e| e.to_string()),
                    };
                    if let Err(e) = r {
                        panic!("send {i} failed on an unbounded queue: {e}");
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    assert_eq!(tx.len(), 2 * per_producer);
    assert!(!tx.is_full());
    clock.advance(Duration::ZERO);
    let mut next = [0usize; 2];
    for _ in 0..2 * per_producer {
        let (p, i) = rx.recv().unwrap();
        assert_eq!(i, next[p as usize], "producer {p}: out of send order");
        next[p as usize] += 1;
    }
    assert_eq!(next, [per_producer; 2]);
    assert!(rx.is_empty());
}

#[test]
fn bounded_zero_panics_with_a_clear_message() {
    let r = std::panic::catch_unwind(|| delayq::bounded::<u8>(0));
    let payload = r.expect_err("bounded(0) did not panic");
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .expect("a string panic message");
    assert!(msg.contains("capacity"), "unclear message: {msg}");
    assert!(msg.contains("at least 1") || msg.contains('0'), "unclear message: {msg}");
}

#[test]
fn builder_capacity_zero_is_a_build_error() {
    let r = Builder::new().capacity(0).build::<u8>();
    assert!(matches!(r, Err(BuildError::ZeroCapacity)), "{r:?}");
    let clock = MockClock::new();
    let r = Builder::new().clock(clock).capacity(0).thread_name_prefix("z").build::<u8>();
    assert!(matches!(r, Err(BuildError::ZeroCapacity)), "{r:?}");
    // Capacity 1 is fine.
    let (tx, rx) = Builder::new().capacity(1).build::<u8>().unwrap();
    tx.send_at(1, Instant::now()).unwrap();
    assert_eq!(rx.recv(), Ok(1));
}
