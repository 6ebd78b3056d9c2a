//! Model 4: shutdown races, on whole queues through the public API.
//!
//! Last `Sender` dropped, last `Receiver` dropped, `close()` and `take_pending()`
//! racing sends and receives: every item is accounted for exactly once (received,
//! handed back by a failed send, returned by `take_pending`, or dropped by the
//! queue — checked with items that log their drop), every blocked thread is
//! released, and both proxies exit (the last handle joins them; a proxy that
//! never exits leaves loom with a deadlock).
#![cfg(delayq_loom)]

use delayq::{Builder, MockClock, RecvError};
use loom::thread;
use loom_tests::{model, ms, DropLog};

/// Threads: the two proxies, a producer that sends one item and drops the last
/// `Sender`, and main blocked in `recv` meanwhile. Main gets the item, then
/// `RecvError`.
#[test]
fn last_sender_drop_releases_a_blocked_receiver() {
    model(|| {
        let clock = MockClock::new();
        let (tx, rx) = Builder::new().capacity(2).clock(clock.clone()).build::<u32>().unwrap();
        let now = clock.now();
        let producer = thread::spawn(move || {
            tx.send_at(7, now).unwrap();
            drop(tx);
        });
        assert_eq!(rx.recv(), Ok(7));
        assert_eq!(rx.recv(), Err(RecvError));
        producer.join().unwrap();
    });
}

/// Threads: the two proxies, a producer blocked on a full `bounded(1)` queue, and
/// main, which drops the last `Receiver`. The blocked send is released with its
/// item back; the pending item is dropped by the queue; each exactly once.
#[test]
fn last_receiver_drop_releases_a_blocked_sender() {
    model(|| {
        let log = DropLog::new();
        let clock = MockClock::new();
        let (tx, rx) = Builder::new().capacity(1).clock(clock.clone()).build().unwrap();
        tx.send_at(log.item(1), clock.now() + ms(10)).unwrap();
        let producer = {
            let (tx, item, at) = (tx.clone(), log.item(2), clock.now());
            thread::spawn(move || match tx.send_at(item, at) {
                Ok(_) => panic!("sent into a full queue with no receiver taking"),
                Err(e) => e.into_inner().id,
            })
        };
        drop(rx);
        assert_eq!(producer.join().unwrap(), 2);
        assert!(tx.send_at(log.item(3), clock.now()).is_err(), "send after the last receiver");
        drop(tx); // joins both proxies
        assert_eq!(log.dropped(), vec![1, 2, 3], "each item dropped exactly once");
    });
}

/// Threads: the two proxies, a producer sending one due item, and main calling
/// `close()` and then draining. The item is either refused (handed back) or
/// received exactly once, and `recv` ends with `RecvError`.
#[test]
fn close_races_a_send() {
    model(|| {
        let clock = MockClock::new();
        let (tx, rx) = Builder::new().capacity(2).clock(clock.clone()).build::<u32>().unwrap();
        let now = clock.now();
        let producer = thread::spawn(move || tx.send_at(5, now).is_ok());
        rx.close();
        let mut got = Vec::new();
        while let Ok(x) = rx.recv() {
            got.push(x);
        }
        let sent = producer.join().unwrap();
        assert_eq!(got, if sent { vec![5] } else { vec![] }, "sent: {sent}");
    });
}

/// Threads: the two proxies, a producer sending one item due later, and main
/// calling `close()` then `take_pending()`. A send that succeeded is returned by
/// `take_pending` or (if its insert reached the enqueue proxy after the take)
/// received once it falls due; never both, never neither.
#[test]
fn take_pending_races_a_send() {
    model(|| {
        let clock = MockClock::new();
        let (tx, rx) = Builder::new().capacity(2).clock(clock.clone()).build::<u32>().unwrap();
        let at = clock.now() + ms(10);
        let producer = thread::spawn(move || tx.send_at(9, at).is_ok());
        rx.close();
        let mut got: Vec<u32> = rx.take_pending().into_iter().map(|(_, x)| x).collect();
        let sent = producer.join().unwrap();
        clock.advance(ms(10));
        while let Ok(x) = rx.recv() {
            got.push(x);
        }
        assert_eq!(got, if sent { vec![9] } else { vec![] }, "sent: {sent}");
    });
}
