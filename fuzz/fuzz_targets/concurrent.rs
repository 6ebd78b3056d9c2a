//! `concurrent`: 2–4 threads share one queue on a `MockClock`, each running its
//! own decoded operation list (sends, cancels and reschedules of its own items,
//! receives, clock steps, peeks, close, take_pending, dropping its handles). The
//! interleaving is the scheduler's, so order is not checked; what must hold in
//! every interleaving is checked after the threads join:
//!
//! - exactly once: each item sent has at most one outcome (received, cancelled,
//!   taken, or handed back by a failed send), and exactly one while a receiver
//!   survives to drain the queue; every item is dropped exactly once in the end;
//! - never early: a received item's deadline (the last one its owner set with a
//!   successful `reschedule`) is not after the mock time read just after it
//!   arrived; `take_pending` reports each item's current deadline;
//! - liveness: the final drain and every blocking call return (a hang is a
//!   libFuzzer timeout).

#![no_main]

use arbitrary::Arbitrary;
use delayq::{Builder, Key, MockClock, Receiver, Sender, TrySendError};
use delayq_fuzz::{ms, Item, Ticks, Tracker};
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Operations per thread at most (keeps one run in the milliseconds).
const MAX_OPS: usize = 64;

#[derive(Arbitrary, Debug)]
struct Input {
    /// The timer index: the 4-ary heap, or the timing wheel (the default).
    heap: bool,
    /// `None`: unbounded; `Some(c)`: bounded to `c % 16 + 1` (sends then never block).
    capacity: Option<u8>,
    /// The main thread keeps a receiver and drains the queue after the threads
    /// join; otherwise the threads hold the only receivers and the queue may
    /// disconnect under them.
    keep_receiver: bool,
    /// 2 + `threads % 3` threads.
    threads: u8,
    /// Two-slot rings (the builder's hidden `ingress_slots` / `egress_slots`):
    /// producers spill, and rounds leave due items behind a full egress ring
    /// for the next receive to move.
    small_rings: bool,
    /// `Builder::helping(false)`: the proxies alone perform their roles
    /// (otherwise the clients perform them, and the proxies only what nobody
    /// is there for).
    no_help: bool,
    ops: Vec<Vec<TOp>>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum TOp {
    SendAt {
        at_ms: u8,
    },
    SendAfter {
        ms: u8,
    },
    /// Cancel the `which % n`-th item this thread sent.
    Cancel {
        which: u8,
    },
    Reschedule {
        which: u8,
        at_ms: u8,
    },
    TryRecv,
    TryRecvBurst {
        n: u8,
    },
    Advance {
        ms: u8,
    },
    Peek,
    Len,
    Close,
    TakePending,
    DropSender,
    DropReceiver,
    Yield,
}

#[derive(Debug, Clone, Copy)]
enum Event {
    /// The deadline lies in `lo..=hi` (equal unless `send_after` raced a step).
    Sent {
        id: u32,
        lo: u64,
        hi: u64,
    },
    Refused {
        id: u32,
    },
    Rescheduled {
        id: u32,
        deadline: u64,
    },
    Cancelled {
        id: u32,
    },
    Received {
        id: u32,
        now: u64,
    },
    Taken {
        id: u32,
        deadline: u64,
    },
}

struct Ctx {
    clock: MockClock,
    start: Instant,
    ticks: Ticks,
    tracker: Arc<Tracker>,
    bounded: bool,
}

fn worker(cx: &Ctx, mut tx: Option<Sender<Item>>, mut rx: Option<Receiver<Item>>, ops: &[TOp]) -> Vec<Event> {
    let mut log = Vec::new();
    let mut mine: Vec<(Key, u32)> = Vec::new();
    let recv_one = |rx: &Receiver<Item>, log: &mut Vec<Event>| match rx.try_recv() {
        Ok(item) => {
            let now = cx.ticks.of(cx.clock.now());
            assert_eq!(cx.tracker.drops(item.id), 0, "received item {} was already dropped", item.id);
            log.push(Event::Received { id: item.id, now });
            true
        }
        Err(_) => false,
    };
    for op in ops.iter().take(MAX_OPS) {
        match *op {
            TOp::SendAt { at_ms } | TOp::SendAfter { ms: at_ms } => {
                let Some(tx) = &tx else { continue };
                let item = cx.tracker.item();
                let id = item.id;
                // `send_after` reads the clock itself, which other threads move:
                // its deadline is known to lie between two readings around it.
                let (r, lo, hi) = match *op {
                    TOp::SendAt { .. } => {
                        let t = cx.start + ms(u64::from(at_ms % 40));
                        let r = if cx.bounded {
                            tx.try_send_at(item, t).map_err(|e| match e {
                                TrySendError::Full(x) | TrySendError::Disconnected(x) => x,
                            })
                        } else {
                            tx.send_at(item, t).map_err(|e| e.into_inner())
                        };
                        (r, cx.ticks.of(t), cx.ticks.of(t))
                    }
                    _ => {
                        let d = ms(u64::from(at_ms % 40));
                        if cx.bounded {
                            let t = cx.clock.now() + d;
                            let r = tx.try_send_at(item, t).map_err(|e| match e {
                                TrySendError::Full(x) | TrySendError::Disconnected(x) => x,
                            });
                            (r, cx.ticks.of(t), cx.ticks.of(t))
                        } else {
                            let lo = cx.ticks.of(cx.clock.now() + d);
                            let r = tx.send_after(item, d).map_err(|e| e.into_inner());
                            (r, lo, cx.ticks.of(cx.clock.now() + d))
                        }
                    }
                };
                match r {
                    Ok(key) => {
                        mine.push((key, id));
                        log.push(Event::Sent { id, lo, hi });
                    }
                    Err(back) => {
                        assert_eq!(back.id, id, "a failed send handed back another item");
                        log.push(Event::Refused { id });
                    }
                }
            }
            TOp::Cancel { which } => {
                let (Some(tx), false) = (&tx, mine.is_empty()) else { continue };
                let (key, id) = mine[usize::from(which) % mine.len()];
                if let Some(item) = tx.cancel(key) {
                    assert_eq!(item.id, id, "cancel returned another item");
                    log.push(Event::Cancelled { id });
                }
            }
            TOp::Reschedule { which, at_ms } => {
                let (Some(tx), false) = (&tx, mine.is_empty()) else { continue };
                let (key, id) = mine[usize::from(which) % mine.len()];
                let t = cx.start + ms(u64::from(at_ms % 40));
                if tx.reschedule(key, t) {
                    log.push(Event::Rescheduled { id, deadline: cx.ticks.of(t) });
                }
            }
            TOp::TryRecv => {
                if let Some(rx) = &rx {
                    recv_one(rx, &mut log);
                }
            }
            TOp::TryRecvBurst { n } => {
                if let Some(rx) = &rx {
                    for _ in 0..n % 16 {
                        if !recv_one(rx, &mut log) {
                            break;
                        }
                    }
                }
            }
            TOp::Advance { ms: n } => cx.clock.advance(ms(u64::from(n % 20))),
            TOp::Peek => {
                if let Some(rx) = &rx {
                    if let Some(t) = rx.peek_deadline() {
                        assert!(t >= cx.start, "peek_deadline before any deadline sent");
                    }
                }
            }
            TOp::Len => {
                if let Some(tx) = &tx {
                    // An underflowed counter shows up as a huge length.
                    assert!(tx.len() <= cx.tracker.made(), "len() {} > items ever made", tx.len());
                }
            }
            TOp::Close => {
                if let Some(rx) = &rx {
                    rx.close();
                }
            }
            TOp::TakePending => {
                if let Some(rx) = &rx {
                    for (t, item) in rx.take_pending() {
                        assert_eq!(
                            cx.tracker.drops(item.id),
                            0,
                            "taken item {} was already dropped",
                            item.id
                        );
                        log.push(Event::Taken { id: item.id, deadline: cx.ticks.of(t) });
                    }
                }
            }
            TOp::DropSender => tx = None,
            TOp::DropReceiver => rx = None,
            TOp::Yield => std::thread::yield_now(),
        }
    }
    log
}

fuzz_target!(|input: Input| {
    let n = 2 + usize::from(input.threads % 3);
    let capacity = input.capacity.map(|c| usize::from(c % 16) + 1);
    let clock = MockClock::new();
    let start = clock.now();
    let mut b = Builder::new().clock(clock.clone()).timer_index(if input.heap { "heap" } else { "wheel" });
    if let Some(c) = capacity {
        b = b.capacity(c);
    }
    b = b.helping(!input.no_help);
    if input.small_rings {
        b = b.ingress_slots(2).egress_slots(2);
    }
    let (tx, rx) = b.build::<Item>().expect("build");
    let tracker = Tracker::new();
    let cx = Ctx {
        clock: clock.clone(),
        start,
        ticks: Ticks::new(start),
        tracker: tracker.clone(),
        bounded: capacity.is_some(),
    };
    let empty = Vec::new();
    let handles: Vec<_> = (0..n).map(|_| (Some(tx.clone()), Some(rx.clone()))).collect();
    drop(tx);
    let main_rx = input.keep_receiver.then_some(rx);
    let logs: Vec<Vec<Event>> = std::thread::scope(|s| {
        let ts: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(i, (t, r))| {
                let ops = input.ops.get(i).unwrap_or(&empty);
                let cx = &cx;
                s.spawn(move || worker(cx, t, r, ops))
            })
            .collect();
        ts.into_iter().map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    let mut drained = Vec::new();
    if let Some(rx) = &main_rx {
        // No sender is left: everything pending falls due and comes out, then
        // the queue reports it is exhausted.
        clock.advance(Duration::from_secs(3600));
        while let Ok(item) = rx.recv() {
            drained.push(Event::Received { id: item.id, now: cx.ticks.of(clock.now()) });
        }
        assert_eq!(rx.len(), 0, "drained queue has a nonzero len");
    }
    drop(main_rx);

    // Each item's outcome, and the deadline in force (the owner's last word).
    let mut sent: HashMap<u32, (u64, u64)> = HashMap::new();
    let mut outcome: HashMap<u32, Event> = HashMap::new();
    for e in logs.iter().flatten() {
        match *e {
            Event::Sent { id, lo, hi } => {
                sent.insert(id, (lo, hi));
            }
            Event::Rescheduled { id, deadline } => {
                sent.insert(id, (deadline, deadline));
            }
            _ => {}
        }
    }
    for e in logs.iter().flatten().chain(&drained) {
        let id = match *e {
            Event::Sent { .. } | Event::Rescheduled { .. } => continue,
            Event::Refused { id }
            | Event::Cancelled { id }
            | Event::Received { id, .. }
            | Event::Taken { id, .. } => id,
        };
        if let Some(prev) = outcome.insert(id, *e) {
            panic!("item {id} came out twice: {prev:?} and {e:?}");
        }
        match *e {
            Event::Refused { .. } => assert!(!sent.contains_key(&id), "item {id} both sent and refused"),
            Event::Received { now, .. } => {
                let (lo, _) = sent[&id];
                assert!(lo <= now, "item {id} received early: deadline >= {lo} > now {now}");
            }
            Event::Taken { deadline, .. } => {
                let (lo, hi) = sent[&id];
                assert!(
                    (lo..=hi).contains(&deadline),
                    "take_pending: deadline {deadline} of {id} not in {lo}..={hi}"
                );
            }
            _ => {}
        }
    }
    if input.keep_receiver {
        for id in sent.keys() {
            assert!(outcome.contains_key(id), "item {id} was sent and never came out");
        }
    }
    // Every handle is gone: the proxies are joined and everything is dropped.
    tracker.assert_each_dropped_once();
});
