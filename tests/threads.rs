//! Many producers × many consumers on the system clock: exactly once, never early,
//! each consumer sees nondecreasing deadlines; and the proxy threads' names and
//! nice values (`Builder::proxy_nice`).
//!
//! Only `default_thread_names` builds a queue with the default prefix: the name
//! checks count threads of this process, and tests run in parallel.

mod common;
use common::*;
use delayq::{Builder, MockClock, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// An item that knows who sent it, its place in that producer's sends and its deadline.
#[derive(Clone, Copy, Debug)]
struct Job {
    producer: usize,
    seq: usize,
    deadline: Instant,
}

/// What a consumer saw: each job with the instant it was received.
type Seen = Vec<(Job, Instant)>;

fn queue(prefix: &str, cap: Option<usize>) -> (Sender<Job>, Receiver<Job>) {
    let b = Builder::new().thread_name_prefix(prefix);
    match cap {
        Some(c) => b.capacity(c).build(),
        None => b.build(),
    }
    .unwrap()
}

/// Starts `n` consumers that receive until the queue is exhausted, each with a
/// different receive form.
fn consumers(rx: &Receiver<Job>, n: usize) -> Vec<thread::JoinHandle<Seen>> {
    (0..n)
        .map(|c| {
            let rx = rx.clone();
            thread::spawn(move || {
                let mut seen = Vec::new();
                match c % 3 {
                    0 => {
                        while let Ok(job) = rx.recv() {
                            seen.push((job, Instant::now()));
                        }
                    }
                    1 => {
                        let mut buf = Vec::new();
                        while rx.recv_many(&mut buf, 16).is_ok() {
                            let now = Instant::now();
                            seen.extend(buf.drain(..).map(|job| (job, now)));
                        }
                    }
                    _ => loop {
                        match rx.try_recv() {
                            Ok(job) => seen.push((job, Instant::now())),
                            Err(TryRecvError::Disconnected) => break,
                            Err(TryRecvError::Empty) => match rx.recv_timeout(ms(5)) {
                                Ok(job) => seen.push((job, Instant::now())),
                                Err(RecvTimeoutError::Timeout) => {}
                                Err(RecvTimeoutError::Disconnected) => break,
                            },
                        }
                    },
                }
                seen
            })
        })
        .collect()
}

/// Every job of `producers × per_producer` seen exactly once, none before its deadline.
fn check_exactly_once_never_early(seen: &[Seen], producers: usize, per_producer: usize) {
    let mut count = vec![vec![0u8; per_producer]; producers];
    for (job, at) in seen.iter().flatten() {
        assert!(*at >= job.deadline, "job {job:?} received {:?} early", job.deadline - *at);
        count[job.producer][job.seq] += 1;
    }
    for (p, c) in count.iter().enumerate() {
        for (s, &n) in c.iter().enumerate() {
            assert_eq!(n, 1, "job {p}/{s} received {n} times");
        }
    }
}

#[test]
fn many_producers_many_consumers_exactly_once_never_early() {
    let (producers, per_producer) = (4, 1500 * scale());
    let (tx, rx) = queue("th-mpmc", None);
    let cons = consumers(&rx, 3);
    drop(rx);
    let prods: Vec<_> = (0..producers)
        .map(|p| {
            let tx = tx.clone();
            thread::spawn(move || {
                let mut rng = Rng::seed(p as u64);
                for seq in 0..per_producer {
                    let deadline = Instant::now() + Duration::from_micros(rng.range(0..3000));
                    tx.send_at(Job { producer: p, seq, deadline }, deadline).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    for p in prods {
        p.join().unwrap();
    }
    let seen: Vec<Seen> = cons.into_iter().map(|c| c.join().unwrap()).collect();
    check_exactly_once_never_early(&seen, producers, per_producer);
}

#[test]
fn bounded_many_producers_many_consumers_exactly_once() {
    let (producers, per_producer, cap) = (4, 500 * scale(), 16);
    let (tx, rx) = queue("th-bnd", Some(cap));
    let cons = consumers(&rx, 3);
    let prods: Vec<_> = (0..producers)
        .map(|p| {
            let tx = tx.clone();
            thread::spawn(move || {
                for seq in 0..per_producer {
                    assert!(tx.len() <= cap);
                    let deadline = Instant::now() + Duration::from_micros((seq as u64 * 37) % 500);
                    tx.send_at(Job { producer: p, seq, deadline }, deadline).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    for p in prods {
        p.join().unwrap();
    }
    assert!(rx.len() <= cap);
    drop(rx);
    let seen: Vec<Seen> = cons.into_iter().map(|c| c.join().unwrap()).collect();
    check_exactly_once_never_early(&seen, producers, per_producer);
}

/// When every item is in the queue before the earliest deadline, items leave the
/// dequeue proxy in deadline order (equal deadlines in each producer's send
/// order), so each consumer sees nondecreasing deadlines. Whether the sends were
/// all applied in time is checked (with `peek_deadline`, which the enqueue proxy
/// answers after every earlier send); on a machine too busy for that the attempt
/// is repeated with a larger head start.
#[test]
fn each_consumer_sees_nondecreasing_deadlines() {
    let (producers, per_producer) = (4, 1000 * scale());
    let mut checked = false;
    for head_start in [ms(40), ms(150), ms(500), ms(2000)] {
        let (tx, rx) = queue("th-order", None);
        let cons = consumers(&rx, 3);
        let base = Instant::now() + head_start;
        let prods: Vec<_> = (0..producers)
            .map(|p| {
                let tx = tx.clone();
                thread::spawn(move || {
                    let mut rng = Rng::seed(100 + p as u64);
                    for seq in 0..per_producer {
                        // Coarse deadlines, so that many are equal.
                        let deadline = base + Duration::from_micros(250 * rng.range(0..40));
                        tx.send_at(Job { producer: p, seq, deadline }, deadline).unwrap();
                    }
                })
            })
            .collect();
        for p in prods {
            p.join().unwrap();
        }
        // Every deadline is at or after `base`: were all sends applied before it?
        let _ = rx.peek_deadline();
        let in_time = Instant::now() < base;
        drop((tx, rx));
        let seen: Vec<Seen> = cons.into_iter().map(|c| c.join().unwrap()).collect();
        check_exactly_once_never_early(&seen, producers, per_producer);
        if !in_time {
            continue;
        }
        for (c, s) in seen.iter().enumerate() {
            for w in s.windows(2) {
                let (a, b) = (w[0].0, w[1].0);
                assert!(a.deadline <= b.deadline, "consumer {c}: {a:?} before {b:?}");
                if a.deadline == b.deadline && a.producer == b.producer {
                    assert!(a.seq < b.seq, "consumer {c}: equal deadlines out of send order: {a:?}, {b:?}");
                }
            }
        }
        checked = true;
        break;
    }
    assert!(checked, "no attempt had every send applied before the first deadline");
}

#[cfg(target_os = "linux")]
#[test]
fn default_thread_names() {
    assert_eq!(proxies("delayq"), (0, 0), "another test of this file used the default prefix");
    let (tx, rx) = delayq::unbounded::<u8>();
    wait_for("delayq-enqueue and delayq-dequeue", || proxies("delayq") == (1, 1));
    let (tx2, rx2) = delayq::bounded::<u8>(1);
    wait_for("a second pair", || proxies("delayq") == (2, 2));
    drop((tx, rx));
    wait_for("the first pair to exit", || proxies("delayq") == (1, 1));
    drop((tx2, rx2));
    wait_for("the second pair to exit", || proxies("delayq") == (0, 0));
}

#[cfg(target_os = "linux")]
#[test]
fn thread_name_prefix_names_both_proxies() {
    let (a_tx, a_rx) = queue("th-a", None);
    let (b_tx, b_rx) = queue("th-b", Some(3));
    let (b2_tx, b2_rx) = queue("th-b", None);
    wait_for("th-a's proxies", || proxies("th-a") == (1, 1));
    wait_for("both th-b pairs", || proxies("th-b") == (2, 2));
    assert_eq!(proxies("th-c"), (0, 0));
    // The last handle may go on any thread; dropping it joins the proxies.
    let h = thread::spawn(move || drop((a_tx, a_rx)));
    h.join().unwrap();
    wait_for("th-a's proxies to exit", || proxies("th-a") == (0, 0));
    assert_eq!(proxies("th-b"), (2, 2));
    drop((b_tx, b_rx, b2_tx, b2_rx));
    wait_for("th-b's proxies to exit", || proxies("th-b") == (0, 0));
}

/// A burst of due items must wake as many blocked consumers as it has items, even
/// when some waiting consumers give up at that very moment: no item may stay in
/// the consumers' ring while a consumer sleeps. (The count is polled: a lost
/// wake-up shows as a timeout, not as a hang.)
#[test]
fn a_burst_wakes_enough_blocked_consumers() {
    for round in 0..20 * scale() {
        let clock = MockClock::new();
        let (tx, rx) =
            Builder::new().clock(clock.clone()).thread_name_prefix("th-burst").build::<usize>().unwrap();
        let at = clock.now() + ms(1);
        let got = Arc::new(AtomicUsize::new(0));
        // Six consumers that take one item each, two that give up exactly at `at`.
        let handles: Vec<_> = (0..8)
            .map(|c| {
                let (rx, got) = (rx.clone(), got.clone());
                thread::spawn(move || {
                    let r = if c < 6 { rx.recv().ok() } else { rx.recv_deadline(at).ok() };
                    if r.is_some() {
                        got.fetch_add(1, Ordering::SeqCst);
                    }
                    r
                })
            })
            .collect();
        for i in 0..6 {
            tx.send_at(i, at).unwrap();
        }
        thread::sleep(ms(2)); // most consumers are parked by now (the outcome does not depend on it)
        clock.advance(ms(1));
        wait_for(&format!("round {round}: six items received"), || got.load(Ordering::SeqCst) == 6);
        drop(tx);
        let mut items: Vec<usize> = handles.into_iter().filter_map(|h| h.join().unwrap()).collect();
        items.sort_unstable();
        assert_eq!(items, (0..6).collect::<Vec<_>>());
    }
}

/// The nice values of this process's threads named `name` (from
/// `/proc/self/task/*/stat`, field 19).
#[cfg(target_os = "linux")]
fn nice_of(name: &str) -> Vec<i32> {
    let dir = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    dir.filter_map(|e| {
        let path = e.ok()?.path();
        let comm = std::fs::read_to_string(path.join("comm")).ok()?;
        if comm.trim_end() != name {
            return None;
        }
        stat_nice(&std::fs::read_to_string(path.join("stat")).ok()?)
    })
    .collect()
}

/// The nice value in a `/proc/.../stat` line: field 19, counted from the pid.
#[cfg(target_os = "linux")]
fn stat_nice(stat: &str) -> Option<i32> {
    // Fields after the parenthesised name (which may hold spaces): state is field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19 - 3)?.parse().ok()
}

/// The calling thread's own nice value.
#[cfg(target_os = "linux")]
fn my_nice() -> i32 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("/proc/thread-self/stat");
    stat_nice(&stat).expect("nice field")
}

/// Whether this process may set a thread's nice value to `n` (root,
/// `CAP_SYS_NICE` or a `RLIMIT_NICE` that allows it): tried on a scratch thread.
#[cfg(target_os = "linux")]
fn may_set_nice(n: i32) -> bool {
    extern "C" {
        fn setpriority(which: i32, who: u32, prio: i32) -> i32;
    }
    // SAFETY: the declaration matches `<sys/resource.h>`; plain integers, and
    // `who == 0` is the calling (scratch) thread only.
    thread::spawn(move || unsafe { setpriority(0, 0, n) } == 0).join().unwrap()
}

/// 19, the lowest priority, which any thread may take: both proxies run at it
/// before `build` returns, and the thread that built the queue keeps its own.
#[cfg(target_os = "linux")]
#[test]
fn proxy_nice_sets_both_proxies_and_nothing_else() {
    let before = my_nice();
    assert_ne!(before, 19, "the test needs a thread that does not run at nice 19 already");
    let (tx, rx) = Builder::new().thread_name_prefix("nc-pos").proxy_nice(19).build::<u32>().unwrap();
    // No wait: the values are set before `build` returns (the names too).
    assert_eq!(nice_of("nc-pos-enqueue"), [19]);
    assert_eq!(nice_of("nc-pos-dequeue"), [19]);
    assert_eq!(my_nice(), before, "the building thread kept its own nice value");
    // And the queue works.
    tx.send_at(3, Instant::now()).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(3));
    drop((tx, rx));
    wait_for("nc-pos proxies to exit", || proxies("nc-pos") == (0, 0));
}

#[cfg(target_os = "linux")]
#[test]
fn proxy_nice_out_of_range_fails_with_invalid_input_and_starts_nothing() {
    for n in [-21, 20, i32::MIN, i32::MAX] {
        let err = Builder::new().thread_name_prefix("nc-bad").proxy_nice(n).build::<u8>().unwrap_err();
        match &err {
            delayq::BuildError::ProxyNice(e) => assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{n}"),
            other => panic!("{n}: {other:?}"),
        }
        assert!(err.to_string().contains("nice"), "{err}");
        assert_eq!(proxies("nc-bad"), (0, 0));
    }
}

/// A negative value needs a privilege: with it both proxies run at the value;
/// without it `build` fails with the system's `PermissionDenied`, and both
/// threads it started are gone.
#[cfg(target_os = "linux")]
#[test]
fn proxy_nice_below_zero_follows_the_privilege() {
    let r = Builder::new().thread_name_prefix("nc-neg").proxy_nice(-3).build::<u8>();
    if may_set_nice(-3) {
        let (tx, rx) = r.expect("privileged: a negative nice value is allowed");
        wait_for("nc-neg proxies", || proxies("nc-neg") == (1, 1));
        assert_eq!(nice_of("nc-neg-enqueue"), [-3]);
        assert_eq!(nice_of("nc-neg-dequeue"), [-3]);
        drop((tx, rx));
    } else {
        match r {
            Err(delayq::BuildError::ProxyNice(e)) => {
                assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied)
            }
            other => panic!("unprivileged: {:?}", other.map(|_| ())),
        }
    }
    wait_for("nc-neg proxies to exit", || proxies("nc-neg") == (0, 0));
}
