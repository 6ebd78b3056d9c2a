//! `delayq::timer`: one-shot and repeating timers, cancel, missed ticks, panics,
//! shutdown. Timing is decided by a `MockClock`; a test waits only for events
//! (a callback's message, a condition), never for "long enough".

mod common;
use common::{join, ms, scale, secs, spawn, wait_for, Bomb, WAIT};
use delayq::timer::{BuildError, MissedTicks, Scheduler, TimerId};
use delayq::MockClock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

fn mock(threads: usize) -> (Scheduler, MockClock) {
    let clock = MockClock::new();
    (Scheduler::builder().threads(threads).clock(clock.clone()).build().unwrap(), clock)
}

/// With one worker thread, returns once every run due by now has finished (and
/// left `len`): runs start in due order, one after the other, and the marker
/// scheduled now is due after all of them. The marker repeats (once a year), so
/// that cancelling it from here takes it out of `len` even while its run has not
/// quite ended (a started one-shot cannot be cancelled).
fn settle(s: &Scheduler, clock: &MockClock) {
    let (tx, rx) = mpsc::channel();
    let year = secs(365 * 86_400);
    let marker = s.schedule_every(clock.now(), year, MissedTicks::Skip, move || {
        let _ = tx.send(()); // the receiver is gone if a later run ever happened
    });
    rx.recv_timeout(WAIT).expect("the scheduler stalled");
    assert!(s.cancel(marker), "a repeating marker is live until cancelled");
}

/// A callback that sends the mock time of each run, relative to `start`.
fn stamp(clock: &MockClock, start: Instant, tx: Sender<Duration>) -> impl FnMut() + Send + 'static {
    let c = clock.clone();
    move || tx.send(c.now() - start).unwrap()
}

fn drain<T>(rx: &Receiver<T>) -> Vec<T> {
    rx.try_iter().collect()
}

/// The runs reported to `rx` by now, then after each of `steps` half-second
/// steps of the clock (one worker thread).
fn runs_by_step(
    s: &Scheduler,
    clock: &MockClock,
    rx: &Receiver<Duration>,
    steps: usize,
) -> Vec<Vec<Duration>> {
    settle(s, clock);
    let mut runs = vec![drain(rx)];
    for _ in 0..steps {
        clock.advance(ms(500));
        settle(s, clock);
        runs.push(drain(rx));
    }
    runs
}

#[test]
fn one_shot_runs_when_due_and_not_before() {
    let (s, clock) = mock(1);
    let start = clock.now();
    let (tx, rx) = mpsc::channel();
    s.schedule_at(start + secs(10), stamp(&clock, start, tx));
    clock.advance(ms(9_999));
    settle(&s, &clock);
    assert_eq!(drain(&rx), vec![]);
    assert_eq!(s.len(), 1);
    clock.advance(ms(1));
    assert_eq!(rx.recv_timeout(WAIT), Ok(secs(10)));
    settle(&s, &clock);
    assert!(s.is_empty());
}

#[test]
fn schedule_after_counts_from_the_clocks_now() {
    let (s, clock) = mock(1);
    let start = clock.now();
    clock.advance(secs(5));
    let (tx, rx) = mpsc::channel();
    s.schedule_after(secs(3), stamp(&clock, start, tx));
    clock.advance(ms(2_900));
    settle(&s, &clock);
    assert_eq!(drain(&rx), vec![]);
    clock.advance(ms(100));
    assert_eq!(rx.recv_timeout(WAIT), Ok(secs(8)));
}

#[test]
fn runs_start_in_due_order_ties_in_schedule_order() {
    let (s, clock) = mock(1);
    let now = clock.now();
    let (tx, rx) = mpsc::channel();
    for (name, at) in [("c", 3), ("a", 1), ("d", 3), ("b", 2), ("e", 3)] {
        let tx = tx.clone();
        s.schedule_at(now + secs(at), move || tx.send(name).unwrap());
    }
    clock.advance(secs(3));
    settle(&s, &clock);
    assert_eq!(drain(&rx), vec!["a", "b", "c", "d", "e"]);
}

#[test]
fn a_when_in_the_past_runs_at_once() {
    // Start the mock time ten years on, so that "years ago" is an `Instant`.
    let clock = MockClock::starting_at(Instant::now() + secs(10 * 365 * 86_400));
    let s = Scheduler::builder().threads(1).clock(clock.clone()).build().unwrap();
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    s.schedule_at(clock.now() - secs(1), move || tx.send("a second ago").unwrap());
    s.schedule_at(clock.now() - secs(5 * 365 * 86_400), move || tx2.send("five years ago").unwrap());
    settle(&s, &clock);
    // Both are due on arrival; the core may hand the first out before the
    // second reaches its index, so their order is not asserted.
    let mut ran = drain(&rx);
    ran.sort();
    assert_eq!(ran, vec!["a second ago", "five years ago"]);
}

#[test]
fn a_when_too_far_never_runs_stays_counted_and_cancellable() {
    let (s, clock) = mock(1);
    let ran = Arc::new(AtomicUsize::new(0));
    let (r1, r2, r3) = (ran.clone(), ran.clone(), ran.clone());
    let a = s.schedule_after(Duration::MAX, move || {
        r1.fetch_add(1, Ordering::SeqCst);
    });
    let b = s.schedule_at(clock.now() + secs(1_000 * 365 * 86_400), move || {
        r2.fetch_add(1, Ordering::SeqCst);
    });
    // Runs once at `first`; its next grid time does not fit an `Instant`.
    let c = s.schedule_every(clock.now(), Duration::MAX, MissedTicks::Burst, move || {
        r3.fetch_add(1, Ordering::SeqCst);
    });
    settle(&s, &clock);
    // Past the queue's horizon (about 484 years), then to the end of time: the
    // wheel once spun forever here (reliability defect 1).
    clock.advance(secs(600 * 365 * 86_400));
    settle(&s, &clock);
    clock.advance(Duration::MAX);
    settle(&s, &clock);
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(s.len(), 3);
    assert!(s.cancel(a));
    assert!(s.cancel(b));
    assert!(s.cancel(c));
    assert!(s.is_empty());
}

#[test]
fn a_zero_interval_runs_once() {
    let (s, clock) = mock(1);
    let start = clock.now();
    let (tx, rx) = mpsc::channel();
    let id = s.schedule_every(start + secs(1), Duration::ZERO, MissedTicks::Burst, stamp(&clock, start, tx));
    for _ in 0..5 {
        clock.advance(secs(1));
        settle(&s, &clock);
    }
    assert_eq!(drain(&rx), vec![secs(1)]);
    assert!(s.is_empty());
    assert!(!s.cancel(id));
}

#[test]
fn cancel_before_due_prevents_the_run() {
    let (s, clock) = mock(1);
    let (tx, rx) = mpsc::channel();
    let id = s.schedule_after(secs(1), move || tx.send(()).unwrap());
    assert!(s.cancel(id));
    assert_eq!(s.len(), 0);
    clock.advance(secs(2));
    settle(&s, &clock);
    assert!(rx.try_recv().is_err());
    assert!(!s.cancel(id));
}

#[test]
fn cancel_of_a_finished_or_foreign_timer_is_false() {
    let (s, clock) = mock(1);
    let (other, _) = mock(1);
    let done = s.schedule_at(clock.now(), || {});
    settle(&s, &clock);
    assert!(s.is_empty());
    assert!(!s.cancel(done));
    let theirs = other.schedule_after(secs(60), || {});
    assert!(!s.cancel(theirs));
    assert!(other.cancel(theirs));
}

#[test]
fn cancel_from_inside_its_own_callback_stops_a_repeating_timer() {
    let (s, clock) = mock(1);
    let me: Arc<OnceLock<TimerId>> = Arc::new(OnceLock::new());
    let (tx, rx) = mpsc::channel();
    let (s2, me2) = (s.clone(), me.clone());
    let mut n = 0;
    let id = s.schedule_every(clock.now() + secs(1), secs(1), MissedTicks::Skip, move || {
        n += 1;
        let cancelled = n == 3 && s2.cancel(*me2.get().unwrap());
        tx.send((n, cancelled)).unwrap();
    });
    me.set(id).unwrap();
    for _ in 0..6 {
        clock.advance(secs(1));
        settle(&s, &clock);
    }
    assert_eq!(drain(&rx), vec![(1, false), (2, false), (3, true)]);
    assert!(s.is_empty());
    assert!(!s.cancel(id));
}

#[test]
fn a_one_shot_cancelling_itself_gets_false() {
    // Its callback has started: nothing is left to prevent.
    let (s, clock) = mock(1);
    let me: Arc<OnceLock<TimerId>> = Arc::new(OnceLock::new());
    let (tx, rx) = mpsc::channel();
    let (s2, me2) = (s.clone(), me.clone());
    let id = s.schedule_at(clock.now() + secs(1), move || tx.send(s2.cancel(*me2.get().unwrap())).unwrap());
    me.set(id).unwrap();
    clock.advance(secs(1));
    assert_eq!(rx.recv_timeout(WAIT), Ok(false));
    settle(&s, &clock);
    assert!(s.is_empty());
}

#[test]
fn callbacks_run_on_the_worker_pool_not_on_the_queue_threads() {
    let (s, clock) = mock(2);
    let (tx, rx) = mpsc::channel();
    for _ in 0..4 {
        let tx = tx.clone();
        s.schedule_at(clock.now(), move || tx.send(thread::current().name().map(str::to_owned)).unwrap());
    }
    for _ in 0..4 {
        let name = rx.recv_timeout(WAIT).unwrap().unwrap();
        assert!(name.starts_with("delayq-timer-worker-"), "ran on {name}");
    }
}

#[test]
fn cancel_of_a_running_one_shot_is_false_and_it_finishes() {
    let (s, clock) = mock(1);
    let (started_tx, started) = mpsc::channel();
    let (open, gate) = mpsc::channel::<()>();
    let id = s.schedule_at(clock.now(), move || {
        started_tx.send(()).unwrap();
        gate.recv().unwrap();
    });
    started.recv_timeout(WAIT).unwrap();
    assert_eq!(s.len(), 1); // running counts
    assert!(!s.cancel(id), "its callback has started");
    assert_eq!(s.len(), 1); // a `false` cancel changes nothing
    open.send(()).unwrap();
    settle(&s, &clock);
    assert_eq!(s.len(), 0);
    assert!(!s.cancel(id));
}

/// Sends its timer's index when dropped: after a callback ran (its captures
/// drop when it returns) or when the scheduler dropped it unrun.
struct Gone(usize, Sender<usize>);

impl Drop for Gone {
    fn drop(&mut self) {
        let _ = self.1.send(self.0);
    }
}

/// xorshift64*: a reproducible shuffle without a dependency.
fn shuffle<T>(v: &mut [T], seed: &mut u64) {
    for i in (1..v.len()).rev() {
        *seed ^= *seed >> 12;
        *seed ^= *seed << 25;
        *seed ^= *seed >> 27;
        let r = seed.wrapping_mul(0x2545_f491_4f6c_dd1d);
        v.swap(i, (r % (i as u64 + 1)) as usize);
    }
}

#[test]
fn a_one_shot_cancel_is_true_exactly_when_its_callback_never_starts() {
    // Issue 22.1: `execute` checked the timer was live, then called it without
    // claiming it, so a `cancel` in between (or during the run) said `true` for
    // a callback that ran. 24 one-shots share a deadline; one thread moves the
    // clock to it while this one cancels them in random order, with a random
    // head start. Each timer must end with exactly one of "cancel returned
    // true" and "its callback started".
    const TIMERS: usize = 24;
    let rounds = 2_000 * scale();
    let (s, clock) = mock(4);
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let (gone_tx, gone) = mpsc::channel();
    let (mut both, mut neither) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let ran: Arc<Vec<AtomicBool>> = Arc::new((0..TIMERS).map(|_| AtomicBool::new(false)).collect());
        let due = clock.now() + ms(1);
        let mut ids: Vec<(usize, TimerId)> = (0..TIMERS)
            .map(|i| {
                let (ran, gone) = (ran.clone(), Gone(i, gone_tx.clone()));
                (
                    i,
                    s.schedule_at(due, move || {
                        let _gone = gone;
                        ran[i].store(true, Ordering::SeqCst);
                    }),
                )
            })
            .collect();
        shuffle(&mut ids, &mut seed);
        let head_start = (seed % 64) as usize;
        let start = Arc::new(Barrier::new(2));
        let (c, st) = (clock.clone(), start.clone());
        let mover = spawn(move || {
            st.wait();
            c.advance(ms(1));
        });
        start.wait();
        for _ in 0..head_start {
            std::hint::spin_loop();
        }
        let cancelled: Vec<(usize, bool)> = ids.iter().map(|&(i, id)| (i, s.cancel(id))).collect();
        join(mover);
        // Every callback has run or been dropped unrun once all 24 are gone.
        for _ in 0..TIMERS {
            gone.recv_timeout(WAIT).expect("a timer was neither run nor dropped");
        }
        for (i, was_cancelled) in cancelled {
            match (was_cancelled, ran[i].load(Ordering::SeqCst)) {
                (true, true) => both.push((round, i)),
                (false, false) => neither.push((round, i)),
                _ => {}
            }
        }
    }
    assert!(
        both.is_empty() && neither.is_empty(),
        "cancel true and ran: {} {:?}; cancel false and never ran: {} {:?} ({rounds} rounds)",
        both.len(),
        &both[..both.len().min(5)],
        neither.len(),
        &neither[..neither.len().min(5)],
    );
}

#[test]
fn len_counts_pending_running_and_repeating_timers() {
    let (s, clock) = mock(1);
    s.schedule_after(secs(1), || {});
    s.schedule_after(secs(2), || {});
    let every = s.schedule_every(clock.now() + secs(1), secs(1), MissedTicks::Skip, || {});
    assert_eq!(s.len(), 3);
    clock.advance(secs(1));
    settle(&s, &clock);
    assert_eq!(s.len(), 2);
    clock.advance(secs(1));
    settle(&s, &clock);
    assert_eq!(s.len(), 1);
    assert!(s.cancel(every));
    assert_eq!(s.len(), 0);
}

#[test]
fn on_time_repeating_timers_keep_their_grid() {
    for missed in [MissedTicks::Burst, MissedTicks::Delay, MissedTicks::Skip] {
        let (s, clock) = mock(1);
        let start = clock.now();
        let (tx, rx) = mpsc::channel();
        s.schedule_every(start + secs(1), secs(1), missed, stamp(&clock, start, tx));
        for _ in 0..4 {
            clock.advance(ms(500));
            settle(&s, &clock);
            clock.advance(ms(500));
            settle(&s, &clock);
        }
        assert_eq!(drain(&rx), vec![secs(1), secs(2), secs(3), secs(4)], "{missed:?}");
    }
}

/// A timer every second, first due at 1 s; the process stalls for 12.5 s (the
/// seed's "more than 10 s late"). Returns the runs by 12.5 s and by each of
/// 13, 13.5, 14 and 14.5 s.
fn more_than_10s_late(missed: MissedTicks) -> Vec<Vec<Duration>> {
    let (s, clock) = mock(1);
    let start = clock.now();
    let (tx, rx) = mpsc::channel();
    s.schedule_every(start + secs(1), secs(1), missed, stamp(&clock, start, tx));
    clock.advance(ms(12_500));
    runs_by_step(&s, &clock, &rx, 4)
}

#[test]
fn burst_runs_every_tick_missed_more_than_10s_late_then_keeps_the_grid() {
    let runs = more_than_10s_late(MissedTicks::Burst);
    assert_eq!(runs[0], vec![ms(12_500); 12]); // ticks 1..=12, back to back
    assert_eq!(runs[1..], [vec![secs(13)], vec![], vec![secs(14)], vec![]]);
}

#[test]
fn delay_runs_once_more_than_10s_late_then_shifts_the_grid() {
    let runs = more_than_10s_late(MissedTicks::Delay);
    assert_eq!(runs[0], vec![ms(12_500)]);
    assert_eq!(runs[1..], [vec![], vec![ms(13_500)], vec![], vec![ms(14_500)]]);
}

#[test]
fn skip_runs_once_more_than_10s_late_then_keeps_the_grid() {
    let runs = more_than_10s_late(MissedTicks::Skip);
    assert_eq!(runs[0], vec![ms(12_500)]);
    assert_eq!(runs[1..], [vec![secs(13)], vec![], vec![secs(14)], vec![]]);
}

/// A timer every second, first due at 1 s, whose first run takes until 3.5 s.
/// Returns the start times of the runs by 3.5 s and by each of 4, 4.5 and 5 s.
fn slow_first_run(missed: MissedTicks) -> Vec<Vec<Duration>> {
    let (s, clock) = mock(1);
    let start = clock.now();
    let (tx, rx) = mpsc::channel();
    let (started_tx, started) = mpsc::channel();
    let (open, gate) = mpsc::channel::<()>();
    let c = clock.clone();
    let mut first = true;
    s.schedule_every(start + secs(1), secs(1), missed, move || {
        tx.send(c.now() - start).unwrap();
        if std::mem::take(&mut first) {
            started_tx.send(()).unwrap();
            gate.recv().unwrap();
        }
    });
    clock.advance(secs(1));
    started.recv_timeout(WAIT).unwrap();
    clock.advance(ms(2_500)); // the callback is still running
    open.send(()).unwrap();
    runs_by_step(&s, &clock, &rx, 3)
}

#[test]
fn burst_after_a_slow_callback_runs_the_missed_ticks() {
    let runs = slow_first_run(MissedTicks::Burst);
    assert_eq!(runs, [vec![secs(1), ms(3_500), ms(3_500)], vec![secs(4)], vec![], vec![secs(5)]]);
}

#[test]
fn delay_after_a_slow_callback_waits_an_interval_from_its_end() {
    let runs = slow_first_run(MissedTicks::Delay);
    assert_eq!(runs, [vec![secs(1)], vec![], vec![ms(4_500)], vec![]]);
}

#[test]
fn skip_after_a_slow_callback_goes_on_with_the_grid() {
    let runs = slow_first_run(MissedTicks::Skip);
    assert_eq!(runs, [vec![secs(1)], vec![secs(4)], vec![], vec![secs(5)]]);
}

#[test]
fn a_burst_catch_up_is_capped_at_1024_runs() {
    let (s, clock) = mock(1);
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    s.schedule_every(clock.now() + ms(1), ms(1), MissedTicks::Burst, move || {
        n2.fetch_add(1, Ordering::SeqCst);
    });
    clock.advance(secs(10)); // 10 000 ticks missed
    settle(&s, &clock);
    assert_eq!(n.load(Ordering::SeqCst), 1024);
    clock.advance(ms(1)); // back on the grid: 10.001 s
    settle(&s, &clock);
    assert_eq!(n.load(Ordering::SeqCst), 1025);
}

#[test]
fn a_first_tick_years_in_the_past_never_loops() {
    let base = Instant::now() + secs(10 * 365 * 86_400);
    let long_ago = secs(3 * 365 * 86_400);
    for (missed, now_runs, next_at) in [
        (MissedTicks::Burst, 1024, ms(500)),
        (MissedTicks::Delay, 1, secs(1)),
        (MissedTicks::Skip, 1, ms(500)),
    ] {
        let clock = MockClock::starting_at(base);
        let s = Scheduler::builder().threads(1).clock(clock.clone()).build().unwrap();
        let (tx, rx) = mpsc::channel();
        // Grid: base - 3 years + 0.5 s + k seconds.
        s.schedule_every(base - long_ago + ms(500), secs(1), missed, stamp(&clock, base, tx));
        settle(&s, &clock);
        assert_eq!(drain(&rx), vec![Duration::ZERO; now_runs], "{missed:?}");
        clock.advance(next_at - ms(1));
        settle(&s, &clock);
        assert_eq!(drain(&rx), vec![], "{missed:?}");
        clock.advance(ms(1));
        settle(&s, &clock);
        assert_eq!(drain(&rx), vec![next_at], "{missed:?}");
    }
}

#[test]
fn a_repeating_timer_never_runs_concurrently_with_itself() {
    let (s, clock) = mock(4);
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    let (started_tx, started) = mpsc::channel();
    let (open, gate) = mpsc::channel::<()>();
    let (burst_tx, burst) = mpsc::channel();
    let (i, o, r) = (inside.clone(), overlaps.clone(), runs.clone());
    let id = s.schedule_every(clock.now() + ms(1), ms(1), MissedTicks::Burst, move || {
        if i.swap(true, Ordering::SeqCst) {
            o.fetch_add(1, Ordering::SeqCst);
        }
        match r.fetch_add(1, Ordering::SeqCst) {
            0 => {
                started_tx.send(()).unwrap();
                gate.recv().unwrap();
            }
            1023 => burst_tx.send(()).unwrap(),
            _ => {}
        }
        i.store(false, Ordering::SeqCst);
    });
    clock.advance(ms(1));
    started.recv_timeout(WAIT).unwrap();
    // Five seconds of ticks fall due while the first run holds its worker; three
    // workers are free, and the marker below runs on one of them.
    clock.advance(secs(5));
    settle(&s, &clock);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    open.send(()).unwrap();
    // The late first run is followed by a capped burst of 1023 more.
    burst.recv_timeout(WAIT).expect("the burst did not run");
    for _ in 0..50 {
        clock.advance(ms(3));
    }
    assert!(s.cancel(id));
    s.shutdown();
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    assert!(runs.load(Ordering::SeqCst) >= 1024);
}

#[test]
fn a_slow_callback_does_not_delay_other_timers() {
    let (s, clock) = mock(2);
    let (started_tx, started) = mpsc::channel();
    let (open, gate) = mpsc::channel::<()>();
    s.schedule_after(secs(1), move || {
        started_tx.send(()).unwrap();
        gate.recv().unwrap();
    });
    let (tx, rx) = mpsc::channel();
    s.schedule_after(secs(2), move || tx.send("on time").unwrap());
    clock.advance(secs(1));
    started.recv_timeout(WAIT).unwrap();
    clock.advance(secs(1));
    assert_eq!(rx.recv_timeout(WAIT), Ok("on time")); // while the first still runs
    open.send(()).unwrap();
}

#[test]
fn panicking_callbacks_are_caught_and_counted_and_the_rest_goes_on() {
    let (s, clock) = mock(1);
    let (tx, rx) = mpsc::channel();
    s.schedule_after(secs(1), || panic!("one-shot boom"));
    let tx2 = tx.clone();
    let every = s.schedule_every(clock.now() + secs(1), secs(1), MissedTicks::Skip, move || {
        tx2.send("tick").unwrap();
        panic!("repeating boom");
    });
    s.schedule_after(secs(1), move || tx.send("after").unwrap());
    for _ in 0..3 {
        clock.advance(secs(1));
        settle(&s, &clock);
    }
    assert_eq!(drain(&rx), vec!["tick", "after", "tick", "tick"]);
    assert_eq!(s.panicked(), 4);
    assert!(s.cancel(every)); // still scheduled after panicking
}

/// Schedules a one-shot due in a second and returns its message channel: the
/// scheduler still runs timers.
fn still_works(s: &Scheduler, clock: &MockClock) {
    let (tx, rx) = mpsc::channel();
    s.schedule_after(secs(1), move || tx.send("still works").unwrap());
    clock.advance(secs(1));
    assert_eq!(rx.recv_timeout(WAIT), Ok("still works"));
}

#[test]
fn a_repeating_callback_whose_drop_panics_cancelling_itself_does_not_abort() {
    // Reliability defect 5: the leftover closure of a repeating timer that
    // cancelled itself was dropped on a rayon worker outside `catch_unwind`,
    // and rayon aborts the process on an escaped panic.
    let (s, clock) = mock(1);
    let (tx, rx) = mpsc::channel();
    let id = Arc::new(OnceLock::<TimerId>::new());
    let (s2, id2, bomb) = (s.clone(), id.clone(), Bomb::armed());
    let t = s.schedule_every(clock.now() + secs(1), secs(1), MissedTicks::Skip, move || {
        let _keep = &bomb;
        tx.send(s2.cancel(*id2.get().unwrap())).unwrap();
    });
    id.set(t).unwrap();
    clock.advance(secs(1));
    assert_eq!(rx.recv_timeout(WAIT), Ok(true));
    settle(&s, &clock);
    assert_eq!(s.len(), 0);
    still_works(&s, &clock);
    assert_eq!(s.panicked(), 1, "the panicking drop is caught and counted");
}

#[test]
fn panics_in_callbacks_and_their_drops_are_contained_on_every_path() {
    let (s, clock) = mock(2);
    let (tx, rx) = mpsc::channel();
    let expected_panics = 6;
    // 1. A one-shot that runs (its closure is dropped after the call).
    let b = Bomb::armed();
    let t1 = tx.clone();
    s.schedule_after(secs(1), move || {
        let _keep = &b;
        t1.send("one-shot ran").unwrap();
    });
    // 2. A panicking callback that also panics when dropped.
    let b = Bomb::armed();
    s.schedule_after(secs(1), move || {
        let _keep = &b;
        panic!("callback boom");
    });
    // 3. A repeating timer cancelled from this thread while pending.
    let b = Bomb::armed();
    let every = s.schedule_every(clock.now() + secs(100), secs(1), MissedTicks::Burst, move || {
        let _keep = &b;
    });
    // 4. A pending one-shot cancelled from this thread.
    let b = Bomb::armed();
    let once = s.schedule_after(secs(100), move || {
        let _keep = &b;
    });
    clock.advance(secs(1));
    assert_eq!(rx.recv_timeout(WAIT), Ok("one-shot ran"));
    settle(&s, &clock);
    assert!(s.cancel(every), "the drop's panic does not reach the caller");
    assert!(s.cancel(once));
    still_works(&s, &clock);
    // 5. Pending at shutdown, and 6. scheduled after it.
    let b = Bomb::armed();
    s.schedule_after(secs(100), move || {
        let _keep = &b;
    });
    let t2 = s.clone();
    join(spawn(move || t2.shutdown()));
    let b = Bomb::armed();
    s.schedule_after(secs(1), move || {
        let _keep = &b;
    });
    assert_eq!(s.len(), 0);
    assert_eq!(s.panicked(), expected_panics);
    join(spawn(move || drop(s)));
}

#[test]
fn shutdown_waits_for_running_callbacks() {
    let (s, clock) = mock(2);
    let finished = Arc::new(AtomicBool::new(false));
    let (started_tx, started) = mpsc::channel();
    let (open, gate) = mpsc::channel::<()>();
    let f = finished.clone();
    s.schedule_at(clock.now(), move || {
        started_tx.send(()).unwrap();
        gate.recv().unwrap();
        f.store(true, Ordering::SeqCst);
    });
    started.recv_timeout(WAIT).unwrap();
    let s2 = s.clone();
    let f2 = finished.clone();
    let stopper = spawn(move || {
        s2.shutdown();
        f2.load(Ordering::SeqCst) // must be true: shutdown waited
    });
    wait_for("shutdown has begun", || s.is_empty());
    open.send(()).unwrap();
    assert!(join(stopper));
}

/// Flips its flag when the thread that holds it exits (thread-local destructors
/// run before a join of that thread returns).
struct OnExit(Arc<AtomicBool>);

impl Drop for OnExit {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

thread_local!(static EXIT: std::cell::RefCell<Option<OnExit>> = const { std::cell::RefCell::new(None) });

#[test]
fn every_worker_thread_has_exited_when_shutdown_or_the_last_drop_returns() {
    // The pool's threads were left to exit on their own (a dropped rayon pool
    // does not join them); shutdown now joins them, as the queue's proxies.
    // "twice": two threads shut down at once, and each checks on its return.
    for how in ["shutdown", "drop", "twice"] {
        let (s, clock) = mock(3);
        let exited: Arc<Vec<Arc<AtomicBool>>> =
            Arc::new((0..30).map(|_| Arc::new(AtomicBool::new(false))).collect());
        let (ran, runs) = mpsc::channel();
        for e in exited.iter() {
            let (e, ran) = (e.clone(), ran.clone());
            s.schedule_at(clock.now(), move || {
                // Marks the worker this run is on (once per thread).
                EXIT.with(|x| {
                    x.borrow_mut().get_or_insert_with(|| OnExit(e.clone()));
                });
                ran.send(()).unwrap();
            });
        }
        for _ in exited.iter() {
            runs.recv_timeout(WAIT).expect("a callback did not run");
        }
        match how {
            "shutdown" => s.shutdown(),
            "drop" => drop(s),
            _ => {
                let start = Arc::new(Barrier::new(2));
                let stoppers: Vec<_> = (0..2)
                    .map(|_| {
                        let (s, start, exited) = (s.clone(), start.clone(), exited.clone());
                        spawn(move || {
                            start.wait();
                            s.shutdown();
                            all_marked_workers_exited(how, &exited);
                        })
                    })
                    .collect();
                stoppers.into_iter().for_each(join);
            }
        }
        all_marked_workers_exited(how, &exited);
    }
}

/// Each worker a run marked has exited: at least one flag is set, and every
/// flag a worker took is set (the others were never installed).
fn all_marked_workers_exited(how: &str, exited: &[Arc<AtomicBool>]) {
    let set = exited.iter().filter(|e| e.load(Ordering::SeqCst)).count();
    let installed = exited.iter().filter(|e| Arc::strong_count(e) > 1).count();
    assert!(set >= 1 && installed == 0, "{how}: {set} exited, {installed} workers still hold theirs");
}

/// Owns the last handle; says when its drop (and the shutdown in it) is over.
struct LastHandle {
    s: Option<Scheduler>,
    dropped: Sender<()>,
}

impl Drop for LastHandle {
    fn drop(&mut self) {
        drop(self.s.take());
        let _ = self.dropped.send(());
    }
}

#[test]
fn a_repeating_callback_that_cancels_itself_while_owning_the_last_handle_shuts_down() {
    // Found by a review: its drop (after the run) dropped the last handle on
    // the worker once the run had left its callback's count but was still
    // counted as running, so that shutdown waited for its own run forever.
    let (s, clock) = mock(1);
    let (dropped, done) = mpsc::channel();
    let id: Arc<OnceLock<TimerId>> = Arc::default();
    let holder = LastHandle { s: Some(s.clone()), dropped };
    let mine = id.clone();
    let t = s.schedule_every(clock.now() + ms(1), ms(1), MissedTicks::Skip, move || {
        let h = &holder; // the whole holder moves in (its `Drop` is the point)
        h.s.as_ref().unwrap().cancel(*mine.get().unwrap());
    });
    id.set(t).unwrap();
    drop(s);
    clock.advance(ms(1));
    done.recv_timeout(WAIT).expect("the last handle's drop on the worker never returned");
}

#[test]
fn no_callback_starts_after_shutdown_returns() {
    let (s, clock) = mock(2);
    let after = Arc::new(AtomicBool::new(false));
    let late = Arc::new(AtomicUsize::new(0));
    let token = Arc::new(());
    for i in 0..300 {
        let (a, l, t) = (after.clone(), late.clone(), token.clone());
        s.schedule_after(ms(i % 7), move || {
            let _t = t;
            if a.load(Ordering::SeqCst) {
                l.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    clock.advance(ms(7));
    s.shutdown();
    after.store(true, Ordering::SeqCst);
    // Every callback is either run or dropped once nothing holds the token.
    wait_for("every callback is gone", || Arc::strong_count(&token) == 1);
    assert_eq!(late.load(Ordering::SeqCst), 0);
    assert_eq!(s.len(), 0);
}

#[test]
fn shutdown_is_idempotent_and_later_timers_never_run() {
    let (s, clock) = mock(2);
    let s2 = s.clone();
    let t = spawn(move || s2.shutdown());
    let s3 = s.clone();
    join(spawn(move || {
        s3.shutdown();
        s3.shutdown();
    }));
    join(t);
    let id = s.schedule_at(clock.now(), || unreachable!());
    s.schedule_every(clock.now(), secs(1), MissedTicks::Burst, || unreachable!());
    assert_eq!(s.len(), 0);
    assert!(!s.cancel(id));
    clock.advance(secs(1));
}

#[test]
fn shutdown_from_inside_a_callback_returns() {
    let (s, clock) = mock(1);
    let (tx, rx) = mpsc::channel();
    let s2 = s.clone();
    s.schedule_at(clock.now(), move || {
        s2.shutdown();
        tx.send("shut down").unwrap();
    });
    assert_eq!(rx.recv_timeout(WAIT), Ok("shut down"));
    assert!(s.is_empty());
}

#[test]
fn callbacks_shutting_down_at_once_do_not_wait_for_each_other() {
    let (s, clock) = mock(2);
    let both_running = Arc::new(Barrier::new(2));
    let (tx, rx) = mpsc::channel();
    for name in ["a", "b"] {
        let (s2, both, tx) = (s.clone(), both_running.clone(), tx.clone());
        s.schedule_at(clock.now(), move || {
            both.wait();
            s2.shutdown(); // each waits for every callback not itself shutting down
            tx.send(name).unwrap();
        });
    }
    let mut returned: Vec<_> = (0..2).filter_map(|_| rx.recv_timeout(WAIT).ok()).collect();
    if returned.len() < 2 {
        std::mem::forget(s); // dropping it would hang on the deadlocked callbacks
        panic!("shutdown from two callbacks at once deadlocked: {returned:?} returned");
    }
    returned.sort();
    assert_eq!(returned, ["a", "b"]);
    s.shutdown(); // and from outside, after them
    assert!(s.is_empty());
}

#[test]
fn dropping_the_last_handle_shuts_down_even_inside_a_callback() {
    let (s, clock) = mock(1);
    let token = Arc::new(());
    let t = token.clone();
    s.schedule_after(secs(60), move || drop(t));
    let (tx, rx) = mpsc::channel();
    let (open, gate) = mpsc::channel::<()>();
    let s2 = s.clone();
    s.schedule_at(clock.now(), move || {
        tx.send("ran").unwrap();
        gate.recv().unwrap();
        drop(s2); // the last handle by now: shuts down from inside its callback
        tx.send("shut down").unwrap();
    });
    assert_eq!(rx.recv_timeout(WAIT), Ok("ran"));
    join(spawn(move || drop(s))); // not the last handle: returns at once
    open.send(()).unwrap();
    assert_eq!(rx.recv_timeout(WAIT), Ok("shut down"));
    assert_eq!(Arc::strong_count(&token), 1); // the pending timer was dropped
}

#[test]
fn dropping_the_last_handle_drops_pending_timers() {
    let (s, _clock) = mock(1);
    let token = Arc::new(());
    let t = token.clone();
    s.schedule_after(secs(60), move || drop(t));
    join(spawn(move || drop(s)));
    assert_eq!(Arc::strong_count(&token), 1);
}

#[test]
fn builder_rejects_zero_threads() {
    let e = Scheduler::builder().threads(0).build().unwrap_err();
    assert!(matches!(e, BuildError::ZeroThreads));
    assert!(Scheduler::builder().threads(1).build().is_ok());
}

#[test]
fn system_clock_one_shot_and_repeating() {
    let s = Scheduler::new();
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    let tx2 = tx.clone();
    s.schedule_after(ms(5), move || tx.send("once").unwrap());
    let mut n = 0;
    let every = s.schedule_every(Instant::now(), ms(2), MissedTicks::Skip, move || {
        n += 1;
        if n <= 3 {
            tx2.send("tick").unwrap();
        }
    });
    let mut got: Vec<_> = (0..4).map(|_| rx.recv_timeout(WAIT).unwrap()).collect();
    got.sort();
    assert_eq!(got, vec!["once", "tick", "tick", "tick"]);
    assert!(start.elapsed() >= ms(5));
    assert!(s.cancel(every));
}
