//! `MockClock`: `advance`/`set` semantics (setting backwards is ignored), delivery
//! exactly when the mock time reaches a deadline, timeouts in mock time, and many
//! queues on one clock.

mod common;
use common::{join, ms, scale, spawn, HOUR};
use delayq::{Builder, Clock, MockClock, Receiver, RecvTimeoutError, Sender, SystemClock, TryRecvError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

fn years(n: u32) -> Duration {
    YEAR * n
}

/// Both timer index backends, on a fresh mock clock each.
fn each_index<T: Send + 'static>(mut f: impl FnMut(&str, MockClock, Sender<T>, Receiver<T>)) {
    for index in ["wheel", "heap"] {
        let clock = MockClock::new();
        let (tx, rx) = Builder::new().clock(clock.clone()).timer_index(index).build().unwrap();
        f(index, clock, tx, rx);
    }
}

/// Steps `clock` on another thread, failing (instead of hanging) if the step
/// does not return.
fn step(clock: &MockClock, by: Duration) {
    let c = clock.clone();
    join(spawn(move || c.advance(by)));
}

fn on<T: Send + 'static>(clock: &MockClock) -> (Sender<T>, Receiver<T>) {
    Builder::new().clock(clock.clone()).build().unwrap()
}

#[test]
fn time_moves_only_by_advance_and_set_and_never_backwards() {
    let t0 = Instant::now();
    let clock = MockClock::starting_at(t0);
    assert_eq!(clock.now(), t0);
    assert_eq!(clock.now(), t0, "a mock clock stands still");
    clock.advance(ms(5));
    assert_eq!(clock.now(), t0 + ms(5));
    clock.advance(Duration::ZERO);
    assert_eq!(clock.now(), t0 + ms(5));
    clock.set(t0 + ms(10));
    assert_eq!(clock.now(), t0 + ms(10));
    clock.set(t0 + ms(10));
    assert_eq!(clock.now(), t0 + ms(10));
    clock.set(t0);
    assert_eq!(clock.now(), t0 + ms(10), "set backwards is ignored");
    // Clones share one time.
    let c2 = clock.clone();
    c2.advance(Duration::from_nanos(1));
    assert_eq!(clock.now(), t0 + ms(10) + Duration::from_nanos(1));
    assert!(format!("{clock:?}").starts_with("MockClock"));
    // `new` and `default` start at the real time of their creation.
    let before = Instant::now();
    let d = MockClock::default();
    let n = MockClock::new();
    let after = Instant::now();
    assert!(before <= d.now() && d.now() <= n.now() && n.now() <= after);
}

#[test]
fn advance_saturates_instead_of_overflowing() {
    let clock = MockClock::new();
    let t0 = clock.now();
    clock.advance(Duration::MAX);
    let t1 = clock.now();
    assert!(t1 > t0 + Duration::from_secs(1000 * 365 * 24 * 3600), "advance(MAX) moved only {:?}", t1 - t0);
    clock.advance(Duration::MAX);
    assert!(clock.now() >= t1);
    // A queue on such a clock still works.
    let (tx, rx) = on::<u8>(&clock);
    tx.send_after(1, Duration::ZERO).unwrap();
    clock.advance(Duration::ZERO);
    assert_eq!(rx.try_recv(), Ok(1));
}

#[test]
fn delivery_happens_exactly_when_the_mock_time_reaches_the_deadline() {
    let clock = MockClock::new();
    let (tx, rx) = on::<&str>(&clock);
    let deadline = clock.now() + ms(10);
    tx.send_at("x", deadline).unwrap();
    clock.advance(ms(9));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    clock.set(deadline - Duration::from_nanos(1));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "one nanosecond early");
    clock.advance(Duration::from_nanos(1));
    assert_eq!(rx.try_recv(), Ok("x"));

    // `set` delivers as `advance` does.
    let deadline = clock.now() + Duration::from_secs(30);
    tx.send_at("y", deadline).unwrap();
    clock.set(deadline + ms(1));
    assert_eq!(rx.try_recv(), Ok("y"));
}

#[test]
fn each_step_delivers_exactly_what_it_made_due() {
    let clock = MockClock::new();
    let (tx, rx) = on::<(u64, u32)>(&clock);
    let t0 = clock.now();
    let steps = 50 * scale() as u64;
    // Latest first, three items per millisecond.
    for k in (1..=steps).rev() {
        for j in 0..3 {
            tx.send_at((k, j), t0 + ms(k)).unwrap();
        }
    }
    for k in 1..=steps {
        clock.advance(ms(1));
        let got: Vec<(u64, u32)> = rx.try_iter().collect();
        assert_eq!(got, vec![(k, 0), (k, 1), (k, 2)], "step {k}");
        assert_eq!(rx.len() as u64, 3 * (steps - k));
    }
}

#[test]
fn real_time_does_not_make_items_due() {
    let clock = MockClock::new();
    let (tx, rx) = on::<u8>(&clock);
    tx.send_after(1, ms(1)).unwrap();
    // A real instant after the clock's creation is in the mock future.
    tx.send_at(2, Instant::now() + ms(1)).unwrap();
    thread::sleep(ms(5)); // real time passes; the mock time does not
    clock.advance(Duration::ZERO);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    clock.advance(ms(1));
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.len(), 1);
}

#[test]
fn a_step_wakes_a_blocked_receiver() {
    let clock = MockClock::new();
    let (tx, rx) = on::<u32>(&clock);
    tx.send_after(7, Duration::from_secs(60)).unwrap();
    let h = thread::spawn(move || rx.recv());
    clock.advance(Duration::from_secs(59));
    clock.advance(Duration::from_secs(1));
    assert_eq!(h.join().unwrap(), Ok(7));
}

#[test]
fn receive_timeouts_run_on_mock_time_not_real_time() {
    let clock = MockClock::new();
    let (_tx, rx) = on::<u32>(&clock);
    let deadline = clock.now() + ms(1);
    let h = thread::spawn(move || rx.recv_deadline(deadline));
    thread::sleep(ms(20)); // real time passes: no timeout
    assert!(!h.is_finished(), "recv_deadline timed out by real time");
    clock.advance(ms(1));
    assert_eq!(h.join().unwrap(), Err(RecvTimeoutError::Timeout));
}

#[test]
fn many_queues_on_one_clock() {
    let clock = MockClock::new();
    let (tx_a, rx_a) = on::<u8>(&clock);
    let (tx_b, rx_b) = on::<String>(&clock);
    let (tx_c, rx_c) = on::<Vec<u8>>(&clock);
    tx_a.send_after(1, ms(10)).unwrap();
    tx_b.send_after("b".into(), ms(20)).unwrap();
    tx_c.send_after(vec![3], ms(10)).unwrap();
    clock.advance(ms(10));
    assert_eq!(rx_a.try_recv(), Ok(1));
    assert_eq!(rx_b.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(rx_c.try_recv(), Ok(vec![3]));
    // A queue that goes away leaves the others (and the clock) working.
    drop((tx_a, rx_a));
    // A receiver-less queue whose sender lives on does not stall the clock either.
    drop(rx_c);
    // A queue built later measures from the current mock time.
    let (tx_d, rx_d) = on::<u8>(&clock);
    tx_d.send_after(4, ms(10)).unwrap();
    clock.advance(ms(10));
    assert_eq!(rx_b.try_recv(), Ok("b".to_string()));
    assert_eq!(rx_d.try_recv(), Ok(4));
    assert!(tx_c.send_after(vec![], ms(1)).is_err());
}

#[test]
fn concurrent_steps_from_two_threads_add_up() {
    let clock = MockClock::new();
    let (tx, rx) = on::<u32>(&clock);
    let t0 = clock.now();
    let steps = 200 * scale() as u32;
    for i in 1..=2 * steps {
        tx.send_at(i, t0 + ms(u64::from(i))).unwrap();
    }
    let stepper = || {
        let c = clock.clone();
        thread::spawn(move || {
            for _ in 0..steps {
                c.advance(ms(1));
            }
        })
    };
    let (a, b) = (stepper(), stepper());
    a.join().unwrap();
    b.join().unwrap();
    assert_eq!(clock.now(), t0 + ms(2 * u64::from(steps)));
    drop(tx);
    assert_eq!(rx.iter().count(), 2 * steps as usize);
}

#[test]
fn a_step_with_the_consumers_ring_full_returns_and_the_rest_follows() {
    let clock = MockClock::new();
    let (tx, rx) = on::<u32>(&clock);
    for i in 0..3000 {
        tx.send_after(i, ms(1)).unwrap();
    }
    clock.advance(ms(1)); // more due items than the ring holds: it must not wait for room
                          // The ring (1024 slots) was full when `advance` returned.
    for i in 0..1024 {
        assert_eq!(rx.try_recv(), Ok(i));
    }
    drop(tx);
    assert_eq!(rx.iter().collect::<Vec<_>>(), (1024..3000).collect::<Vec<_>>());
}

#[test]
fn clock_conversions_and_builder_clocks() {
    let m = MockClock::new();
    let c = Clock::from(m.clone());
    assert!(c.is_mock());
    assert_eq!(c.now(), m.now());
    let s = Clock::from(SystemClock);
    assert!(!s.is_mock());
    let before = Instant::now();
    assert!(s.now() >= before && SystemClock.now() >= before);
    let (tx, rx) = Builder::new().clock(SystemClock).build::<u8>().unwrap();
    tx.send_after(1, Duration::ZERO).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(1));
    let (tx, rx) = Builder::new().clock(c).build::<u8>().unwrap();
    tx.send_after(2, ms(1)).unwrap();
    m.advance(ms(1));
    assert_eq!(rx.try_recv(), Ok(2));
}

/// Items all sent before a step leave in deadline order after it: the step must
/// not become visible to the dequeue proxy before the earlier sends are applied
/// (a regression test: it once could, and moved the first items sent ahead of
/// earlier deadlines still in the ingress).
#[test]
fn a_step_never_reorders_items_sent_before_it() {
    for rep in 0..100 * scale() {
        let clock = MockClock::new();
        let (tx, rx) = on::<u32>(&clock);
        let t0 = clock.now();
        // Evens due at +2 ms, odds at +1 ms; the first sent is an even one.
        for i in 0..200u32 {
            tx.send_at(i, if i % 2 == 0 { t0 + ms(2) } else { t0 + ms(1) }).unwrap();
        }
        clock.advance(ms(2));
        let got: Vec<u32> = rx.try_iter().collect();
        let want: Vec<u32> = (0..200).filter(|i| i % 2 == 1).chain((0..200).filter(|i| i % 2 == 0)).collect();
        assert_eq!(got, want, "repetition {rep}");
    }
}

/// Queues on one clock come and go while another thread steps it; every step must
/// return. Run on a helper thread so that a hang fails the test instead of
/// blocking the suite.
#[test]
fn queues_come_and_go_while_another_thread_steps_the_clock() {
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        let clock = MockClock::new();
        let stop = Arc::new(AtomicBool::new(false));
        let stepper = {
            let (clock, stop) = (clock.clone(), stop.clone());
            thread::spawn(move || {
                let mut steps = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    clock.advance(ms(1));
                    steps += 1;
                }
                steps
            })
        };
        for round in 0..30 * scale() {
            let (tx, rx) = on::<usize>(&clock);
            tx.send_after(round, ms(2)).unwrap();
            tx.send_after(round + 1, HOUR).unwrap();
            // The stepper delivers the first item; the second goes with the queue.
            assert_eq!(rx.recv(), Ok(round));
            match round % 3 {
                0 => drop((tx, rx)),
                1 => drop((rx, tx)),
                _ => {
                    rx.close();
                    assert_eq!(rx.take_pending().len(), 1);
                }
            }
        }
        stop.store(true, Ordering::SeqCst);
        done_tx.send(stepper.join().unwrap()).unwrap();
    });
    match done_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(steps) => assert!(steps > 0),
        Err(e) => panic!("a clock step (or a receive waiting for one) hung: {e:?}"),
    }
}

// Deadlines and clock steps at the edge of the tick range (reliability defects 1
// and 2): a deadline beyond the horizon is "never", whatever the clock does.

#[test]
fn a_saturated_deadline_never_falls_due_and_century_steps_return() {
    // The whole scenario, queue included, on a thread of its own: if the wheel
    // spun again, a failed step would otherwise unwind into the queue's drop,
    // which joins the spinning proxy, and hang the test instead of failing it.
    join(spawn(|| {
        each_index::<&str>(|index, clock, tx, rx| {
            let t0 = clock.now();
            tx.send_after("duration max", Duration::MAX).unwrap();
            tx.send_at("+600 y", t0 + years(600)).unwrap();
            tx.send_at("+1 y", t0 + years(1)).unwrap();
            step(&clock, years(500));
            assert_eq!(rx.try_recv(), Ok("+1 y"), "{index}");
            assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "{index}: a far deadline fell due");
            step(&clock, Duration::MAX);
            assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "{index}: a far deadline fell due");
            assert_eq!(rx.len(), 2, "{index}");
            // The queue still works on a clock at the end of time, and goes away.
            tx.send_at("now", clock.now()).unwrap();
            step(&clock, Duration::ZERO);
            assert_eq!(rx.try_recv(), Ok("now"), "{index}");
            let pending: Vec<&str> = rx.take_pending().into_iter().map(|(_, x)| x).collect();
            assert_eq!(pending, ["duration max", "+600 y"], "{index}: far items leave in key order");
            join(spawn(move || drop((tx, rx))));
        });
    }));
}

#[test]
fn far_deadlines_are_never_early_and_never_reordered_by_saturation() {
    each_index::<&str>(|index, clock, tx, rx| {
        let t0 = clock.now();
        tx.send_at("+600 y", t0 + years(600)).unwrap();
        tx.send_at("+500 y", t0 + years(500)).unwrap();
        tx.send_at("+400 y", t0 + years(400)).unwrap();
        tx.send_at("+300 y", t0 + years(300)).unwrap();
        step(&clock, years(350));
        assert_eq!(rx.try_recv(), Ok("+300 y"), "{index}");
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "{index}");
        step(&clock, years(140)); // 490 years: past the tick range's end
        assert_eq!(rx.try_recv(), Ok("+400 y"), "{index}");
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "{index}: delivered 110 years early");
        assert_eq!(rx.len(), 2, "{index}");
        // Beyond the horizon, `peek_deadline` reports the horizon: later than
        // any time the queue can reach.
        let peek = rx.peek_deadline().expect("two items pending");
        assert!(peek > t0 + years(480), "{index}: peek {:?} after t0", peek - t0);
    });
}
