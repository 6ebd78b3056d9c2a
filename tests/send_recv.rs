//! Sending and receiving: deadline order, FIFO among equal deadlines, never early
//! (mock and system clock), past and saturating deadlines, every receive form,
//! `peek_deadline`, the errors and `Key`.

mod common;
use common::*;
use delayq::{
    BuildError, Builder, Key, MockClock, Receiver, RecvError, RecvTimeoutError, SendError, SendTimeoutError,
    Sender, TryRecvError, TrySendError,
};
use std::collections::HashSet;
use std::error::Error;
use std::thread;
use std::time::{Duration, Instant};

/// Advances `clock` in 1 ms steps until `h` has finished (a thread that computed a
/// relative timeout from the mock time at a moment the test cannot see).
fn advance_until_finished<R>(clock: &MockClock, h: &thread::JoinHandle<R>) {
    for _ in 0..1_000_000 {
        if h.is_finished() {
            return;
        }
        clock.advance(ms(1));
        thread::yield_now();
    }
    panic!("the thread never finished");
}

#[test]
fn due_items_come_out_in_deadline_order() {
    let (clock, tx, rx) = mock::<u64>();
    let mut offsets: Vec<u64> = (1..=500).collect();
    Rng::seed(1).shuffle(&mut offsets);
    let t0 = clock.now();
    for &o in &offsets {
        tx.send_at(o, t0 + ms(o)).unwrap();
    }
    assert_eq!(rx.len(), 500);
    clock.advance(ms(500));
    let got: Vec<u64> = rx.try_iter().collect();
    assert_eq!(got, (1..=500).collect::<Vec<_>>());
    assert_eq!(rx.len(), 0);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
}

#[test]
fn equal_deadlines_leave_in_send_order() {
    let (clock, tx, rx) = mock::<u32>();
    let t0 = clock.now();
    // Two interleaved groups: evens due at +2 ms, odds at +1 ms.
    for i in 0..600u32 {
        let at = if i % 2 == 0 { t0 + ms(2) } else { t0 + ms(1) };
        tx.send_at(i, at).unwrap();
    }
    clock.advance(ms(2));
    let got: Vec<u32> = rx.try_iter().collect();
    let odds = (0..600).filter(|i| i % 2 == 1);
    let evens = (0..600).filter(|i| i % 2 == 0);
    assert_eq!(got, odds.chain(evens).collect::<Vec<_>>());
}

#[test]
fn equal_deadlines_from_one_producer_keep_order_beyond_the_egress_ring() {
    // More items than the consumers' ring holds (1024): later batches keep the order.
    let n = 3000 * scale() as u32;
    let (clock, tx, rx) = mock::<u32>();
    let at = clock.now() + ms(7);
    for i in 0..n {
        tx.send_at(i, at).unwrap();
    }
    clock.advance(ms(7));
    for i in 0..n {
        assert_eq!(rx.recv(), Ok(i));
    }
    assert_eq!(rx.len(), 0);
}

#[test]
fn never_early_on_mock_clock() {
    let (clock, tx, rx) = mock::<u64>();
    let mut rng = Rng::seed(2);
    let t0 = clock.now();
    let deadlines: Vec<u64> = (0..300).map(|_| rng.range(1..=120)).collect();
    for (i, &d) in deadlines.iter().enumerate() {
        tx.send_at(i as u64, t0 + ms(d)).unwrap();
    }
    let mut elapsed = 0;
    let mut received = vec![false; deadlines.len()];
    while elapsed <= 125 {
        let step = rng.range(0..7);
        clock.advance(ms(step));
        elapsed += step;
        for i in rx.try_iter() {
            let i = i as usize;
            assert!(deadlines[i] <= elapsed, "item due at {} ms received at {elapsed} ms", deadlines[i]);
            assert!(!received[i], "item {i} received twice");
            received[i] = true;
        }
        // And nothing that is due stays behind.
        for (i, &d) in deadlines.iter().enumerate() {
            assert_eq!(received[i], d <= elapsed, "item {i} due at {d} ms, now {elapsed} ms");
        }
    }
    assert_eq!(rx.len(), 0);
}

#[test]
fn never_early_on_system_clock() {
    let (tx, rx) = delayq::unbounded::<(usize, Instant)>();
    let mut rng = Rng::seed(3);
    let n = 60;
    for i in 0..n {
        let deadline = Instant::now() + Duration::from_micros(rng.range(0..30_000));
        tx.send_at((i, deadline), deadline).unwrap();
    }
    drop(tx);
    let mut seen = vec![false; n];
    for (i, deadline) in rx.iter() {
        let now = Instant::now();
        assert!(now >= deadline, "item {i} received {:?} early", deadline - now);
        assert!(!seen[i]);
        seen[i] = true;
    }
    assert!(seen.iter().all(|&s| s));
}

#[test]
fn send_after_waits_at_least_the_delay_on_system_clock() {
    let (tx, rx) = delayq::unbounded();
    let start = Instant::now();
    tx.send_after("x", ms(30)).unwrap();
    assert_eq!(rx.recv(), Ok("x"));
    assert!(start.elapsed() >= ms(30), "received after {:?}", start.elapsed());
}

#[test]
fn past_deadline_is_due_at_once_on_mock_clock() {
    let (clock, tx, rx) = mock::<&str>();
    let now = clock.now();
    tx.send_at("future", now + ms(1)).unwrap();
    tx.send_at("past-1s", now - Duration::from_secs(1)).unwrap();
    tx.send_at("past-2s", now - Duration::from_secs(2)).unwrap();
    tx.send_at("now", now).unwrap();
    clock.advance(Duration::ZERO);
    assert_eq!(clock.now(), now, "advance(ZERO) moved the time");
    // Due when sent, so each may leave as soon as it is applied: any order.
    let mut due: Vec<&str> = rx.try_iter().collect();
    due.sort_unstable();
    assert_eq!(due, vec!["now", "past-1s", "past-2s"]);
    assert_eq!(rx.len(), 1);
    clock.advance(ms(1));
    assert_eq!(rx.try_recv(), Ok("future"));
}

#[test]
fn past_deadline_is_due_at_once_on_system_clock() {
    let (tx, rx) = delayq::unbounded();
    let long_ago = Instant::now().checked_sub(Duration::from_secs(1)).unwrap();
    tx.send_at(5, long_ago).unwrap();
    let start = Instant::now();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(5));
    assert!(start.elapsed() < Duration::from_secs(1), "took {:?}", start.elapsed());
}

#[test]
fn send_after_duration_max_saturates() {
    let (clock, tx, rx) = mock::<u8>();
    let never = tx.send_after(1, Duration::MAX).unwrap();
    tx.send_after(2, Duration::ZERO).unwrap();
    clock.advance(Duration::from_secs(3600 * 24 * 365));
    assert_eq!(rx.try_recv(), Ok(2));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(rx.len(), 1);
    let peek = rx.peek_deadline().expect("the saturated item is pending");
    assert!(peek > clock.now() + Duration::from_secs(100 * 365 * 24 * 3600), "saturated deadline too close");
    assert_eq!(tx.cancel(never), Some(1));

    // On the system clock too, and through every other timeout that can overflow.
    let (tx, rx) = delayq::bounded::<u8>(4);
    let k = tx.send_after(3, Duration::MAX).unwrap();
    tx.send_at_timeout(4, Instant::now(), Duration::MAX).unwrap();
    assert_eq!(rx.recv_timeout(Duration::MAX), Ok(4));
    assert_eq!(tx.cancel(k), Some(3));
}

#[test]
fn recv_many_takes_due_items_up_to_limit() {
    let (clock, tx, rx) = mock::<u32>();
    let mut buf = vec![99];
    assert_eq!(rx.recv_many(&mut buf, 0), Ok(0), "limit 0 returns at once");
    for i in 0..10 {
        tx.send_after(i, ms(1)).unwrap();
    }
    tx.send_after(10, ms(5)).unwrap();
    clock.advance(ms(1));
    assert_eq!(rx.recv_many(&mut buf, 4), Ok(4));
    assert_eq!(buf, vec![99, 0, 1, 2, 3]);
    assert_eq!(rx.recv_many(&mut buf, 100), Ok(6), "only the due items");
    assert_eq!(buf, vec![99, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert_eq!(rx.len(), 1);
    drop(tx);
    clock.advance(ms(4));
    buf.clear();
    assert_eq!(rx.recv_many(&mut buf, 100), Ok(1));
    assert_eq!(buf, vec![10]);
    assert_eq!(rx.recv_many(&mut buf, 100), Err(RecvError));
    assert_eq!(buf, vec![10], "a failed recv_many appends nothing");
}

#[test]
fn recv_many_blocks_until_something_is_due() {
    let (clock, tx, rx) = mock::<u32>();
    for i in 0..5 {
        tx.send_after(i, ms(10)).unwrap();
    }
    let rx2 = rx.clone();
    let h = thread::spawn(move || {
        let mut buf = Vec::new();
        let n = rx2.recv_many(&mut buf, 100).unwrap();
        (n, buf)
    });
    clock.advance(ms(9));
    assert_eq!(rx.len(), 5);
    clock.advance(ms(1));
    let (n, mut buf) = h.join().unwrap();
    assert!((1..=5).contains(&n), "recv_many returned {n}");
    assert_eq!(buf.len(), n);
    buf.extend(rx.try_iter());
    assert_eq!(buf, vec![0, 1, 2, 3, 4]);
}

#[test]
fn iterators_yield_in_order_and_end_on_disconnect() {
    let (clock, tx, rx) = mock::<u32>();
    let t0 = clock.now();
    for i in [4, 2, 3, 1] {
        tx.send_at(i, t0 + ms(u64::from(i))).unwrap();
    }
    clock.advance(ms(2));
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![1, 2], "try_iter: the due items only");
    assert_eq!(rx.try_iter().next(), None);
    drop(tx);
    clock.advance(ms(2));
    assert_eq!(rx.iter().collect::<Vec<_>>(), vec![3, 4], "iter ends when the queue is exhausted");

    // `&Receiver: IntoIterator`.
    let (clock, tx, rx) = mock::<u32>();
    for i in [30, 10, 20] {
        tx.send_after(i, ms(u64::from(i))).unwrap();
    }
    drop(tx);
    clock.advance(ms(30));
    let mut got = Vec::new();
    for x in &rx {
        got.push(x);
    }
    assert_eq!(got, vec![10, 20, 30]);

    // `Receiver: IntoIterator` (owning).
    let (clock, tx, rx) = mock::<u32>();
    for i in [2, 1] {
        tx.send_after(i, ms(u64::from(i))).unwrap();
    }
    drop(tx);
    clock.advance(ms(2));
    assert_eq!(rx.into_iter().collect::<Vec<_>>(), vec![1, 2]);
}

#[test]
fn iter_blocks_for_items_not_yet_due() {
    let (clock, tx, rx) = mock::<u32>();
    tx.send_after(1, ms(10)).unwrap();
    tx.send_after(2, ms(20)).unwrap();
    drop(tx);
    let h = thread::spawn(move || rx.iter().collect::<Vec<_>>());
    clock.advance(ms(10));
    clock.advance(ms(10));
    assert_eq!(h.join().unwrap(), vec![1, 2]);
}

#[test]
fn peek_deadline_reports_the_earliest_undelivered_deadline() {
    let (clock, tx, rx) = mock::<&str>();
    assert_eq!(rx.peek_deadline(), None);
    let t0 = clock.now();
    let b = tx.send_at("b", t0 + ms(20)).unwrap();
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(20)));
    let a = tx.send_at("a", t0 + ms(10)).unwrap();
    tx.send_at("c", t0 + ms(30)).unwrap();
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(10)));
    assert_eq!(tx.cancel(a), Some("a"));
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(20)));
    clock.advance(ms(25));
    // "b" is due and staged for consumers but not received: still undelivered.
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(20)));
    assert_eq!(rx.try_recv(), Ok("b"));
    assert_eq!(tx.cancel(b), None);
    assert_eq!(rx.peek_deadline(), Some(t0 + ms(30)));
    clock.advance(ms(5));
    assert_eq!(rx.try_recv(), Ok("c"));
    assert_eq!(rx.peek_deadline(), None);
}

#[test]
fn peek_deadline_is_exact_after_a_timing_wheel_rotation() {
    // Reliability defect 3: after A's granule, the last of a wheel rotation, the
    // wheel's next level holds B in the slot that now contains "now"; C, sent
    // later into the lowest level, is the earliest.
    for index in ["wheel", "heap"] {
        let clock = MockClock::new();
        let (tx, rx) = Builder::new().clock(clock.clone()).timer_index(index).build::<char>().unwrap();
        let t0 = clock.now();
        let ns = Duration::from_nanos;
        tx.send_at('A', t0 + ns(65_036)).unwrap();
        tx.send_at('B', t0 + ns(115_536)).unwrap();
        clock.set(t0 + ns(65_036));
        assert_eq!(rx.try_recv(), Ok('A'), "{index}");
        tx.send_at('C', t0 + ns(65_636)).unwrap();
        assert_eq!(rx.peek_deadline(), Some(t0 + ns(65_636)), "{index}");
        clock.set(t0 + ns(115_536));
        assert_eq!(rx.try_iter().collect::<String>(), "CB", "{index}");
    }
}

#[test]
fn peek_deadline_is_exact_on_system_clock() {
    let (tx, rx) = delayq::unbounded::<u8>();
    let at = Instant::now() + Duration::from_secs(3600) + Duration::from_nanos(123);
    tx.send_at(1, at).unwrap();
    assert_eq!(rx.peek_deadline(), Some(at));
}

#[test]
fn recv_deadline_on_mock_clock() {
    let (clock, tx, rx) = mock::<char>();
    tx.send_after('x', Duration::from_secs(10)).unwrap();
    let t0 = clock.now();
    let rx2 = rx.clone();
    let h = thread::spawn(move || rx2.recv_deadline(t0 + Duration::from_secs(5)));
    clock.advance(Duration::from_secs(4));
    clock.advance(Duration::from_secs(1));
    assert_eq!(h.join().unwrap(), Err(RecvTimeoutError::Timeout));
    assert_eq!(rx.len(), 1, "a timeout takes nothing");

    let rx2 = rx.clone();
    let h = thread::spawn(move || rx2.recv_deadline(t0 + Duration::from_secs(60)));
    clock.advance(Duration::from_secs(5));
    assert_eq!(h.join().unwrap(), Ok('x'));

    // A deadline already passed: nothing due, an immediate timeout.
    assert_eq!(rx.recv_deadline(t0), Err(RecvTimeoutError::Timeout));
    drop(tx);
    assert_eq!(rx.recv_deadline(clock.now() + Duration::from_secs(60)), Err(RecvTimeoutError::Disconnected));
}

#[test]
fn recv_timeout_on_mock_clock_counts_mock_time() {
    let (clock, tx, rx) = mock::<u8>();
    tx.send_after(1, Duration::from_secs(1000)).unwrap();
    let c2 = clock.clone();
    let rx2 = rx.clone();
    let h = thread::spawn(move || {
        let start = c2.now();
        let r = rx2.recv_timeout(ms(100));
        (r, c2.now() - start)
    });
    advance_until_finished(&clock, &h);
    let (r, waited) = h.join().unwrap();
    assert_eq!(r, Err(RecvTimeoutError::Timeout));
    assert!(waited >= ms(100), "timed out after {waited:?} of mock time");

    // An item that falls due within the timeout is returned, not a timeout.
    tx.send_at(2, clock.now() + ms(50)).unwrap();
    let due = clock.now() + ms(50);
    let c2 = clock.clone();
    let rx2 = rx.clone();
    let h = thread::spawn(move || (rx2.recv_timeout(Duration::from_secs(3600)), c2.now()));
    advance_until_finished(&clock, &h);
    let (r, at) = h.join().unwrap();
    assert_eq!(r, Ok(2));
    assert!(at >= due);
    assert_eq!(rx.len(), 1);
}

#[test]
fn recv_timeout_and_deadline_on_system_clock() {
    let (tx, rx) = delayq::unbounded::<u8>();
    let start = Instant::now();
    tx.send_after(1, ms(80)).unwrap();
    assert_eq!(rx.recv_timeout(ms(10)), Err(RecvTimeoutError::Timeout));
    assert!(start.elapsed() >= ms(10), "timed out after {:?}", start.elapsed());
    assert_eq!(rx.recv_deadline(Instant::now() + ms(10)), Err(RecvTimeoutError::Timeout));
    assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(1));
    assert!(start.elapsed() >= ms(80), "received after {:?}", start.elapsed());
    assert_eq!(rx.recv_timeout(Duration::ZERO), Err(RecvTimeoutError::Timeout));
    drop(tx);
    assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Err(RecvTimeoutError::Disconnected));
    assert_eq!(
        rx.recv_deadline(Instant::now() + Duration::from_secs(30)),
        Err(RecvTimeoutError::Disconnected)
    );
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(rx.recv(), Err(RecvError));
}

#[test]
fn len_is_exact_as_soon_as_send_returns() {
    let (clock, tx, rx) = mock::<u32>();
    for i in 0..100 {
        tx.send_at(i, clock.now()).unwrap();
        assert_eq!(tx.len(), i as usize + 1);
        assert_eq!(rx.len(), i as usize + 1);
    }
    assert!(!tx.is_empty());
    clock.advance(Duration::ZERO);
    for i in 0..100 {
        assert_eq!(rx.try_recv(), Ok(i));
        assert_eq!(rx.len(), 99 - i as usize);
    }
    assert!(rx.is_empty() && tx.is_empty());
}

struct NoDebug;

#[test]
fn send_errors_display_debug_into_inner_and_predicates() {
    let e = SendError(NoDebug);
    assert_eq!(format!("{e:?}"), "SendError { .. }");
    assert_eq!(e.to_string(), "sending on a closed delay queue");
    assert!(matches!(SendError(7).into_inner(), 7));

    let full: TrySendError<NoDebug> = TrySendError::Full(NoDebug);
    let disc: TrySendError<NoDebug> = TrySendError::Disconnected(NoDebug);
    assert_eq!(format!("{full:?}"), "Full(..)");
    assert_eq!(format!("{disc:?}"), "Disconnected(..)");
    assert_eq!(full.to_string(), "sending on a full delay queue");
    assert_eq!(disc.to_string(), "sending on a closed delay queue");
    assert!(full.is_full() && !full.is_disconnected());
    assert!(disc.is_disconnected() && !disc.is_full());
    assert_eq!(TrySendError::Full(3).into_inner(), 3);
    assert_eq!(TrySendError::Disconnected(4).into_inner(), 4);

    let to: SendTimeoutError<NoDebug> = SendTimeoutError::Timeout(NoDebug);
    let disc: SendTimeoutError<NoDebug> = SendTimeoutError::Disconnected(NoDebug);
    assert_eq!(format!("{to:?}"), "Timeout(..)");
    assert_eq!(format!("{disc:?}"), "Disconnected(..)");
    assert_eq!(to.to_string(), "timed out waiting on a full delay queue");
    assert_eq!(disc.to_string(), "sending on a closed delay queue");
    assert!(to.is_timeout() && !to.is_disconnected());
    assert!(disc.is_disconnected() && !disc.is_timeout());
    assert_eq!(SendTimeoutError::Timeout(5).into_inner(), 5);
    assert_eq!(SendTimeoutError::Disconnected(6).into_inner(), 6);

    // std::error::Error, without T: Debug.
    let errs: Vec<Box<dyn Error>> = vec![
        Box::new(SendError(NoDebug)),
        Box::new(TrySendError::Full(NoDebug)),
        Box::new(SendTimeoutError::Timeout(NoDebug)),
    ];
    assert!(errs.iter().all(|e| e.source().is_none()));
}

#[test]
fn recv_errors_display_debug_and_predicates() {
    assert_eq!(format!("{RecvError:?}"), "RecvError");
    assert_eq!(RecvError.to_string(), "receiving on an empty and disconnected delay queue");
    assert_eq!(format!("{:?}", TryRecvError::Empty), "Empty");
    assert_eq!(format!("{:?}", TryRecvError::Disconnected), "Disconnected");
    assert_eq!(TryRecvError::Empty.to_string(), "no item of the delay queue is due");
    assert_eq!(TryRecvError::Disconnected.to_string(), "receiving on an empty and disconnected delay queue");
    assert!(TryRecvError::Empty.is_empty() && !TryRecvError::Empty.is_disconnected());
    assert!(TryRecvError::Disconnected.is_disconnected() && !TryRecvError::Disconnected.is_empty());
    assert_eq!(format!("{:?}", RecvTimeoutError::Timeout), "Timeout");
    assert_eq!(format!("{:?}", RecvTimeoutError::Disconnected), "Disconnected");
    assert_eq!(RecvTimeoutError::Timeout.to_string(), "timed out waiting for a due item");
    assert_eq!(
        RecvTimeoutError::Disconnected.to_string(),
        "receiving on an empty and disconnected delay queue"
    );
    assert!(RecvTimeoutError::Timeout.is_timeout() && !RecvTimeoutError::Timeout.is_disconnected());
    assert!(RecvTimeoutError::Disconnected.is_disconnected() && !RecvTimeoutError::Disconnected.is_timeout());
    let errs: Vec<Box<dyn Error + Send + Sync>> =
        vec![Box::new(RecvError), Box::new(TryRecvError::Empty), Box::new(RecvTimeoutError::Timeout)];
    assert!(errs.iter().all(|e| e.source().is_none()));
}

#[test]
fn error_conversions() {
    assert_eq!(TrySendError::from(SendError(1)), TrySendError::Disconnected(1));
    assert_eq!(SendTimeoutError::from(SendError(2)), SendTimeoutError::Disconnected(2));
    assert_eq!(TryRecvError::from(RecvError), TryRecvError::Disconnected);
    assert_eq!(RecvTimeoutError::from(RecvError), RecvTimeoutError::Disconnected);
    // `?` uses them.
    fn try_send(e: SendError<u8>) -> Result<(), TrySendError<u8>> {
        Err(e)?
    }
    assert_eq!(try_send(SendError(3)), Err(TrySendError::Disconnected(3)));
    fn recv(e: RecvError) -> Result<(), RecvTimeoutError> {
        Err(e)?
    }
    assert_eq!(recv(RecvError), Err(RecvTimeoutError::Disconnected));
}

#[test]
fn build_errors() {
    let e = Builder::new().capacity(0).build::<u8>().unwrap_err();
    assert!(matches!(e, BuildError::ZeroCapacity), "{e:?}");
    assert_eq!(e.to_string(), "a delay queue needs a capacity of at least 1");
    assert!(e.source().is_none());
    let e = Builder::new().thread_name_prefix("a\0b").build::<u8>().unwrap_err();
    assert!(matches!(e, BuildError::InvalidThreadName), "{e:?}");
    assert_eq!(e.to_string(), "thread name prefix contains a NUL byte");
    // A later setting wins: unbounded() undoes capacity(0).
    let (tx, _rx) = Builder::new().capacity(0).unbounded().build::<u8>().unwrap();
    assert_eq!(tx.capacity(), None);
}

#[test]
fn send_errors_come_from_a_real_queue() {
    let (tx, rx) = delayq::bounded::<String>(1);
    tx.send_at("a".into(), Instant::now() + Duration::from_secs(60)).unwrap();
    assert_eq!(tx.try_send_at("b".into(), Instant::now()), Err(TrySendError::Full("b".into())));
    let e = tx.send_at_timeout("c".into(), Instant::now(), ms(1)).unwrap_err();
    assert_eq!(e, SendTimeoutError::Timeout("c".into()));
    drop(rx);
    assert_eq!(tx.send_at("d".into(), Instant::now()), Err(SendError("d".into())));
    assert_eq!(tx.send_after("e".into(), ms(1)), Err(SendError("e".into())));
    assert_eq!(tx.try_send_at("f".into(), Instant::now()), Err(TrySendError::Disconnected("f".into())));
    assert_eq!(
        tx.send_at_timeout("g".into(), Instant::now(), ms(1)),
        Err(SendTimeoutError::Disconnected("g".into()))
    );
}

fn assert_key_traits<K: Copy + Eq + std::hash::Hash + std::fmt::Debug + Send + Sync + 'static>() {}
fn assert_handle_traits<H: Clone + Send + Sync + std::fmt::Debug + 'static>() {}

#[test]
fn keys_are_unique_copy_hash_and_debug() {
    assert_key_traits::<Key>();
    assert_handle_traits::<Sender<NoDebug>>();
    assert_handle_traits::<Receiver<NoDebug>>();
    let (clock, tx, rx) = mock::<usize>();
    let n = 5000;
    let keys: Vec<Key> = (0..n).map(|i| tx.send_after(i, ms(1)).unwrap()).collect();
    let set: HashSet<Key> = keys.iter().copied().collect();
    assert_eq!(set.len(), n, "keys repeat");
    let k = keys[0];
    let copy = k;
    assert_eq!(k, copy);
    assert!(format!("{k:?}").starts_with("Key("), "{k:?}");
    assert_ne!(format!("{:?}", keys[0]), format!("{:?}", keys[1]));
    // Keys of another queue never equal these, even for the same send count.
    let (_c2, tx2, _rx2) = mock::<usize>();
    let other: Vec<Key> = (0..n).map(|i| tx2.send_after(i, ms(1)).unwrap()).collect();
    assert!(other.iter().all(|k| !set.contains(k)));
    // A foreign key names nothing here.
    assert_eq!(tx.cancel(other[0]), None);
    assert!(!tx.reschedule(other[1], clock.now()));
    assert_eq!(tx2.len(), n);
    assert_eq!(rx.len(), n);
    clock.advance(ms(1));
    assert_eq!(rx.try_recv(), Ok(0));
}

#[test]
fn handles_debug_show_len_and_capacity() {
    let (tx, rx) = delayq::bounded::<NoDebug>(3);
    tx.send_after(NoDebug, Duration::from_secs(60)).unwrap();
    assert_eq!(format!("{tx:?}"), "Sender { len: 1, capacity: Some(3) }");
    assert_eq!(format!("{rx:?}"), "Receiver { len: 1, capacity: Some(3) }");
}

/// Generic code written as for crossbeam-channel: no bounds on `T`.
fn drain_all<T>(rx: &delayq::Receiver<T>) -> Vec<T> {
    rx.try_iter().collect()
}

fn len_of<T>(tx: &delayq::Sender<T>) -> usize {
    tx.len()
}

#[test]
fn handle_methods_need_no_bounds_on_t() {
    let (tx, rx) = delayq::unbounded::<u8>();
    tx.send_after(1, Duration::ZERO).unwrap();
    assert_eq!(len_of(&tx), 1);
    let got = loop {
        let got = drain_all(&rx);
        if !got.is_empty() {
            break got;
        }
        std::thread::yield_now();
    };
    assert_eq!(got, [1]);
}

#[test]
fn relative_sends_and_reschedules() {
    let (clock, tx, rx) = mock::<&str>();
    let k = tx.try_send_after("a", ms(10)).unwrap();
    tx.send_after_timeout("b", ms(20), Duration::ZERO).unwrap();
    assert!(tx.reschedule_after(k, ms(30)));
    clock.advance(ms(20));
    assert_eq!(rx.try_recv(), Ok("b"));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    clock.advance(ms(10));
    let e = rx.try_recv_entry().unwrap();
    assert_eq!((e.key(), e.into_inner()), (k, "a"));
    assert!(!tx.reschedule_after(k, ms(1)), "delivered: nothing to move");
    // send_at_deadline waits for room until its deadline (mock time here).
    let (clock, tx, _rx) = {
        let clock = MockClock::new();
        let (tx, rx) = Builder::new().capacity(1).clock(clock.clone()).build::<u8>().unwrap();
        (clock, tx, rx)
    };
    tx.send_at_deadline(1, clock.now(), clock.now()).unwrap();
    let e = tx.send_at_deadline(2, clock.now(), clock.now()).unwrap_err();
    assert!(e.is_timeout());
    assert_eq!(e.into_inner(), 2);
    // After close, sends say "closed".
    _rx.close();
    assert_eq!(tx.send_after(3, ms(1)).unwrap_err().to_string(), "sending on a closed delay queue");
}

// The admission gate (`src/admission.rs`) slows blocking sends while the queue is
// behind; it must never become a capacity.

#[test]
fn blocking_sends_without_a_consumer_never_wait_for_one() {
    // Far more due items than the egress ring holds and nobody receiving: every
    // send returns (each at most one pause at the gate), nothing is lost.
    let (tx, rx) = delayq::unbounded();
    let n = 20_000 * scale();
    let t0 = Instant::now();
    let done = spawn(move || {
        for i in 0..n {
            tx.send_at(i, Instant::now()).unwrap();
        }
        tx
    });
    let tx = join(done);
    assert!(t0.elapsed() < Duration::from_secs(30), "sends held back for {:?}", t0.elapsed());
    assert_eq!(rx.len(), n);
    let mut got: Vec<usize> = rx.try_iter().collect();
    while got.len() < n {
        got.push(rx.recv_timeout(Duration::from_secs(10)).expect("a pending item never came"));
    }
    got.sort_unstable();
    assert!(got.iter().copied().eq(0..n), "every item exactly once");
    drop(tx);
    assert_eq!(rx.recv(), Err(RecvError));
}

#[test]
fn producers_outrunning_a_slow_consumer_lose_nothing_and_finish() {
    // Many unthrottled producers, one consumer that stops half way for a while:
    // the gate shuts and opens around it; every item arrives exactly once and
    // never early.
    let (tx, rx) = delayq::unbounded::<(usize, Instant)>();
    let (producers, per) = (8, 5_000 * scale());
    let senders: Vec<_> = (0..producers)
        .map(|p| {
            let tx = tx.clone();
            spawn(move || {
                for i in 0..per {
                    let at = Instant::now() + us((i % 200) as u64);
                    tx.send_at((p * per + i, at), at).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let mut seen = vec![false; producers * per];
    let mut count = 0;
    while let Ok((id, at)) = rx.recv() {
        assert!(Instant::now() >= at, "item {id} early");
        assert!(!std::mem::replace(&mut seen[id], true), "item {id} twice");
        count += 1;
        if count == producers * per / 2 {
            thread::sleep(ms(50));
        }
    }
    for s in senders {
        join(s);
    }
    assert_eq!(count, producers * per);
}
