//! `delayq::timer`'s metrics (`delayq_timer_*`, label `scheduler`), checked
//! against a known sequence of schedules, cancels and runs on a `MockClock`
//! with one worker thread (runs start, and finish, in due order), so every
//! lateness and duration is exact.

use delayq::timer::{MissedTicks, Scheduler};
use delayq::MockClock;
use delayq_metrics_tests::Recording;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

const JOBS: &[(&str, &str)] = &[("scheduler", "jobs")];

fn scheduler(rec: &Recording, clock: &MockClock) -> Scheduler {
    rec.build(|| Scheduler::builder().name("jobs").threads(1).clock(clock.clone()).build().unwrap())
}

/// Waits (real time, bounded) until `s.len()` is `n`: a one-shot leaves the
/// table after its callback returned and its duration was recorded.
fn wait_len(s: &Scheduler, n: usize) {
    let give_up = Instant::now() + Duration::from_secs(10);
    while s.len() != n {
        assert!(Instant::now() < give_up, "len stayed {} (waiting for {n})", s.len());
        thread::yield_now();
    }
}

/// A value whose `Drop` panics: what a callback may capture.
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !thread::panicking() {
            panic!("a callback's capture panics on drop");
        }
    }
}

#[test]
fn counters_and_lateness_follow_schedules_cancels_and_runs() {
    let rec = Recording::new();
    let clock = MockClock::new();
    let s = scheduler(&rec, &clock);
    let (tx, rx) = mpsc::channel();

    let one = tx.clone();
    s.schedule_after(ms(10), move || one.send("one").unwrap());
    s.schedule_after(ms(20), || panic!("a callback panics"));
    let capture = PanicOnDrop;
    let never = s.schedule_after(ms(30), move || drop(capture));
    let tick = tx.clone();
    let every = s.schedule_every(clock.now() + ms(10), ms(10), MissedTicks::Skip, move || {
        tick.send("tick").unwrap();
    });
    s.schedule_after(ms(25), move || tx.send("last").unwrap());
    assert!(s.cancel(never)); // its callback's drop panics: caught, counted
    assert!(!s.cancel(never)); // not counted twice
                               // t = 25: "one" (due 10), the tick (due 10), the panic (due 20) and
                               // "last" (due 25) run, in that order; the tick's next run is at 30.
    clock.advance(ms(25));
    assert_eq!([rx.recv().unwrap(), rx.recv().unwrap(), rx.recv().unwrap()], ["one", "tick", "last"]);
    wait_len(&s, 1);

    let m = rec.snapshot();
    assert_eq!(m.counter("delayq_timer_scheduled_total", JOBS), 5);
    assert_eq!(m.counter("delayq_timer_cancelled_total", JOBS), 1);
    assert_eq!(m.counter("delayq_timer_fired_total", JOBS), 4);
    assert_eq!(m.counter("delayq_timer_panics_total", JOBS), 2);
    assert_eq!(s.panicked(), 2);
    assert_eq!(
        m.histogram("delayq_timer_lateness_seconds", JOBS),
        [secs(ms(15)), secs(ms(15)), secs(ms(5)), 0.0]
    );
    // The mock time did not move while they ran.
    assert_eq!(m.histogram("delayq_timer_callback_duration_seconds", JOBS), [0.0; 4]);
    // The scheduler's queue is a core queue named after it (its count is the
    // proxy's business: the tick's re-arm may not be applied yet).
    m.find("delayq_sent_total", &[("queue", "timer/jobs")]);

    // The repeating timer, cancelled while pending: one more cancel (each
    // snapshot resets the counters).
    assert!(s.cancel(every));
    assert!(!s.cancel(every));
    let m = rec.snapshot();
    assert_eq!(m.counter("delayq_timer_cancelled_total", JOBS), 1);
    assert_eq!(m.counter("delayq_timer_scheduled_total", JOBS), 0);
    s.shutdown();
}

#[test]
fn callback_duration_is_measured_on_the_clock() {
    let rec = Recording::new();
    let clock = MockClock::new();
    let s = scheduler(&rec, &clock);
    let (started_tx, started) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    s.schedule_after(ms(2), move || {
        started_tx.send(()).unwrap();
        go_rx.recv().unwrap();
    });
    clock.advance(ms(5)); // 3 ms late
    started.recv().unwrap();
    clock.advance(ms(4)); // while the callback runs
    go.send(()).unwrap();
    wait_len(&s, 0);
    let m = rec.snapshot();
    assert_eq!(m.counter("delayq_timer_fired_total", JOBS), 1);
    assert_eq!(m.histogram("delayq_timer_lateness_seconds", JOBS), [secs(ms(3))]);
    assert_eq!(m.histogram("delayq_timer_callback_duration_seconds", JOBS), [secs(ms(4))]);
    assert_eq!(m.counter("delayq_timer_panics_total", JOBS), 0);
}

#[test]
fn a_burst_catch_up_fires_each_missed_tick_late_against_its_own_time() {
    let rec = Recording::new();
    let clock = MockClock::new();
    let s = scheduler(&rec, &clock);
    let (tx, rx) = mpsc::channel();
    let first = clock.now() + ms(10);
    let every = s.schedule_every(first, ms(10), MissedTicks::Burst, move || tx.send(()).unwrap());
    // t = 35: the run due at 10, then the missed 20 and 30 back to back.
    clock.advance(ms(35));
    for _ in 0..3 {
        rx.recv().unwrap();
    }
    assert!(s.cancel(every));
    wait_len(&s, 0);
    // The third run's duration is recorded once it returned, before the
    // worker takes the scheduler's lock to re-arm (which `cancel` waited
    // for, or pre-empted): shutdown waits for the run to end.
    s.shutdown();
    let m = rec.snapshot();
    assert_eq!(m.counter("delayq_timer_fired_total", JOBS), 3);
    assert_eq!(m.histogram("delayq_timer_lateness_seconds", JOBS), [secs(ms(25)), secs(ms(15)), secs(ms(5))]);
    assert_eq!(m.histogram("delayq_timer_callback_duration_seconds", JOBS), [0.0; 3]);
    assert_eq!(m.counter("delayq_timer_cancelled_total", JOBS), 1);
}

#[test]
fn schedulers_are_told_apart_by_name() {
    let rec = Recording::new();
    let clock = MockClock::new();
    let a = rec.build(|| Scheduler::builder().name("a").clock(clock.clone()).build().unwrap());
    let b = rec.build(|| Scheduler::builder().name("b").clock(clock.clone()).build().unwrap());
    for _ in 0..3 {
        a.schedule_after(ms(60), || {});
    }
    b.schedule_after(ms(60), || {});
    let m = rec.snapshot();
    assert_eq!(m.counter("delayq_timer_scheduled_total", &[("scheduler", "a")]), 3);
    assert_eq!(m.counter("delayq_timer_scheduled_total", &[("scheduler", "b")]), 1);
}
