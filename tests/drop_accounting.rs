//! Exactly once, nothing lost: every item sent is exactly one of received,
//! cancelled, handed back in a send error, taken by `take_pending`, or dropped once
//! by the queue, across every shutdown path and wherever the item is at the time
//! (ingress, heap, consumers' ring).

mod common;
use common::*;
use delayq::{Builder, Key, MockClock, Receiver, RecvError, Sender};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// Where items went. `dropped` counts items whose `Drop` ran without the test
/// having claimed them first: the queue dropped them.
#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
struct Tally {
    received: usize,
    cancelled: usize,
    returned: usize,
    taken: usize,
    dropped: usize,
}

#[derive(Clone, Copy)]
enum Outcome {
    Received,
    Cancelled,
    Returned,
    Taken,
}

/// Per-item counters: how often each item was dropped, claimed by the test, and
/// dropped unclaimed.
struct Ledger {
    next: AtomicUsize,
    drops: Vec<AtomicUsize>,
    claims: Vec<AtomicUsize>,
    unclaimed: Vec<AtomicUsize>,
    outcomes: [AtomicUsize; 4],
}

/// A drop-counting item.
struct Item {
    id: usize,
    claimed: bool,
    ledger: Arc<Ledger>,
}

impl Drop for Item {
    fn drop(&mut self) {
        self.ledger.drops[self.id].fetch_add(1, Ordering::SeqCst);
        if !self.claimed {
            self.ledger.unclaimed[self.id].fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Ledger {
    fn new(max_items: usize) -> Arc<Ledger> {
        let counters = || (0..max_items).map(|_| AtomicUsize::new(0)).collect();
        Arc::new(Ledger {
            next: AtomicUsize::new(0),
            drops: counters(),
            claims: counters(),
            unclaimed: counters(),
            outcomes: Default::default(),
        })
    }

    fn item(self: &Arc<Self>) -> Item {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        assert!(id < self.drops.len(), "ledger too small");
        Item { id, claimed: false, ledger: self.clone() }
    }

    /// The test got `item` back some way: record how, then drop it.
    fn claim(&self, mut item: Item, how: Outcome) {
        item.claimed = true;
        self.claims[item.id].fetch_add(1, Ordering::SeqCst);
        self.outcomes[how as usize].fetch_add(1, Ordering::SeqCst);
    }

    fn dropped_by_queue(&self) -> usize {
        self.unclaimed.iter().map(|c| c.load(Ordering::SeqCst)).sum()
    }

    /// Checks that every item issued was dropped exactly once and had exactly one
    /// fate, and returns the tally of fates.
    fn check(&self) -> Tally {
        let issued = self.next.load(Ordering::SeqCst);
        for id in 0..issued {
            let drops = self.drops[id].load(Ordering::SeqCst);
            let claims = self.claims[id].load(Ordering::SeqCst);
            let unclaimed = self.unclaimed[id].load(Ordering::SeqCst);
            assert_eq!(drops, 1, "item {id} dropped {drops} times");
            assert_eq!(
                claims + unclaimed,
                1,
                "item {id}: claimed {claims} times, dropped unclaimed {unclaimed}"
            );
        }
        let o = |i: Outcome| self.outcomes[i as usize].load(Ordering::SeqCst);
        Tally {
            received: o(Outcome::Received),
            cancelled: o(Outcome::Cancelled),
            returned: o(Outcome::Returned),
            taken: o(Outcome::Taken),
            dropped: self.dropped_by_queue(),
        }
    }
}

fn mock(cap: Option<usize>) -> (MockClock, Sender<Item>, Receiver<Item>) {
    let clock = MockClock::new();
    let b = Builder::new().clock(clock.clone());
    let b = match cap {
        Some(c) => b.capacity(c),
        None => b,
    };
    let (tx, rx) = b.build().unwrap();
    (clock, tx, rx)
}

/// Sends a new item; a refused one is claimed as returned. The key if accepted.
fn send(ledger: &Arc<Ledger>, tx: &Sender<Item>, at: Instant) -> Option<Key> {
    match tx.send_at(ledger.item(), at) {
        Ok(k) => Some(k),
        Err(e) => {
            ledger.claim(e.into_inner(), Outcome::Returned);
            None
        }
    }
}

#[test]
fn receivers_gone_items_in_ingress_heap_and_ring_are_dropped_once() {
    let ledger = Ledger::new(4000);
    let (clock, tx, rx) = mock(None);
    let now = clock.now();
    for _ in 0..1500 {
        send(&ledger, &tx, now).unwrap(); // due: 1024 fill the ring, the rest wait in the heap
    }
    let far: Vec<Key> = (0..300).map(|_| send(&ledger, &tx, now + HOUR).unwrap()).collect();
    clock.advance(Duration::ZERO);
    for _ in 0..10 {
        ledger.claim(rx.try_recv().unwrap(), Outcome::Received);
    }
    for &k in &far[..5] {
        ledger.claim(tx.cancel(k).unwrap(), Outcome::Cancelled);
    }
    for _ in 0..200 {
        send(&ledger, &tx, now).unwrap(); // some still in the ingress when the receiver goes
    }
    assert_eq!(ledger.dropped_by_queue(), 0, "the queue dropped an item while alive");
    drop(rx);
    for _ in 0..50 {
        assert_eq!(send(&ledger, &tx, now), None);
    }
    drop(tx); // the last handle: joins the proxies
    let t = ledger.check();
    assert_eq!(t, Tally { received: 10, cancelled: 5, returned: 50, taken: 0, dropped: 1985 });
}

#[test]
fn senders_gone_every_item_is_received() {
    let ledger = Ledger::new(3000);
    let (clock, tx, rx) = mock(None);
    let t0 = clock.now();
    let senders = [tx.clone(), tx.clone(), tx];
    for i in 0..3000u64 {
        send(&ledger, &senders[i as usize % 3], t0 + ms(i % 97)).unwrap();
    }
    drop(senders);
    let mut n = 0;
    for _ in 0..97 {
        clock.advance(ms(1));
        for item in rx.try_iter() {
            ledger.claim(item, Outcome::Received);
            n += 1;
        }
    }
    while let Ok(item) = rx.recv() {
        ledger.claim(item, Outcome::Received);
        n += 1;
    }
    assert_eq!(n, 3000);
    assert_eq!(rx.recv().err(), Some(RecvError));
    drop(rx);
    assert_eq!(ledger.check(), Tally { received: 3000, ..Tally::default() });
}

#[test]
fn close_then_take_pending_loses_nothing() {
    let ledger = Ledger::new(3000);
    let (clock, tx, rx) = mock(None);
    let now = clock.now();
    for _ in 0..1500 {
        send(&ledger, &tx, now).unwrap();
    }
    let later: Vec<Key> = (0..500).map(|_| send(&ledger, &tx, now + HOUR).unwrap()).collect();
    clock.advance(Duration::ZERO);
    for _ in 0..10 {
        ledger.claim(rx.recv().unwrap(), Outcome::Received);
    }
    for &k in &later[..5] {
        ledger.claim(tx.cancel(k).unwrap(), Outcome::Cancelled);
    }
    rx.close();
    for _ in 0..20 {
        assert_eq!(send(&ledger, &tx, now), None);
    }
    let taken = rx.take_pending();
    assert_eq!(taken.len(), 1985);
    for (_, item) in taken {
        ledger.claim(item, Outcome::Taken);
    }
    assert_eq!(rx.recv().err(), Some(RecvError));
    drop((tx, rx));
    assert_eq!(ledger.check(), Tally { received: 10, cancelled: 5, returned: 20, taken: 1985, dropped: 0 });
}

#[test]
fn take_pending_while_open_then_drop_with_items_pending() {
    let ledger = Ledger::new(100);
    let (clock, tx, rx) = mock(Some(10));
    for _ in 0..10 {
        send(&ledger, &tx, clock.now() + ms(5)).unwrap();
    }
    for (_, item) in rx.take_pending() {
        ledger.claim(item, Outcome::Taken);
    }
    // The queue stays usable.
    for _ in 0..10 {
        send(&ledger, &tx, clock.now() + ms(5)).unwrap();
    }
    clock.advance(ms(5));
    for _ in 0..4 {
        ledger.claim(rx.try_recv().unwrap(), Outcome::Received);
    }
    drop(tx); // senders first: six items due and staged, still pending
    assert_eq!(ledger.dropped_by_queue(), 0);
    drop(rx);
    assert_eq!(ledger.check(), Tally { received: 4, taken: 10, dropped: 6, ..Tally::default() });
}

#[test]
fn blocked_producers_get_their_items_back_when_receivers_go() {
    let ledger = Ledger::new(100);
    let (clock, tx, rx) = mock(Some(4));
    for _ in 0..4 {
        send(&ledger, &tx, clock.now()).unwrap();
    }
    clock.advance(Duration::ZERO); // the items are due and staged for consumers
    let producers: Vec<_> = (0..3)
        .map(|_| {
            let (tx, ledger, at) = (tx.clone(), ledger.clone(), clock.now());
            thread::spawn(move || send(&ledger, &tx, at).is_none())
        })
        .collect();
    thread::sleep(ms(20)); // let them block (the outcome does not depend on it)
    drop(rx);
    let refused = producers.into_iter().map(|h| h.join().unwrap()).filter(|&r| r).count();
    assert_eq!(refused, 3, "a producer blocked on a full queue must get Disconnected");
    drop(tx);
    assert_eq!(ledger.check(), Tally { returned: 3, dropped: 4, ..Tally::default() });
}

/// Producers, a consumer that drops the only receiver part-way, and cancels, all
/// racing on the system clock; then the last sender goes. Repeated with fresh
/// queues, alternately bounded and unbounded.
#[test]
fn racing_shutdown_loses_and_duplicates_nothing() {
    let rounds = 12 * scale();
    let per_producer = 1500;
    let mut rng = Rng::seed(31);
    for round in 0..rounds {
        let ledger = Ledger::new(2 * per_producer);
        let b = Builder::new().thread_name_prefix("da-race");
        let (tx, rx) =
            if round % 2 == 0 { b.build::<Item>() } else { b.capacity(64).build::<Item>() }.unwrap();
        let stop_after = rng.range(0..2 * per_producer);
        let consumer = {
            let ledger = ledger.clone();
            thread::spawn(move || {
                let mut n = 0;
                while n < stop_after {
                    match rx.recv_timeout(ms(200)) {
                        Ok(item) => {
                            ledger.claim(item, Outcome::Received);
                            n += 1;
                        }
                        Err(_) => break,
                    }
                }
                drop(rx); // part-way: everything still pending is the queue's to drop
                n
            })
        };
        let producers: Vec<_> = (0..2u64)
            .map(|p| {
                let (tx, ledger) = (tx.clone(), ledger.clone());
                thread::spawn(move || {
                    for i in 0..per_producer as u64 {
                        let at = Instant::now() + Duration::from_micros((i * 7 + p * 3) % 500);
                        let Some(k) = send(&ledger, &tx, at) else { continue };
                        if i % 5 == 0 {
                            if let Some(item) = tx.cancel(k) {
                                ledger.claim(item, Outcome::Cancelled);
                            }
                        }
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        let received = consumer.join().unwrap();
        drop(tx);
        let t = ledger.check();
        assert_eq!(t.received, received);
        assert_eq!(t.taken, 0);
        assert_eq!(
            t.received + t.cancelled + t.returned + t.dropped,
            2 * per_producer,
            "round {round}: {t:?}"
        );
    }
}

/// `take_pending` racing consumers, producers and cancels, then `close` and a
/// last `take_pending`: every item is received, cancelled, refused or taken once.
#[test]
fn racing_take_pending_loses_and_duplicates_nothing() {
    let per_producer = 1500 * scale();
    let ledger = Ledger::new(2 * per_producer);
    let (tx, rx) = Builder::new().thread_name_prefix("da-take").build::<Item>().unwrap();
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let (rx, ledger) = (rx.clone(), ledger.clone());
            thread::spawn(move || {
                while let Ok(item) = rx.recv() {
                    ledger.claim(item, Outcome::Received);
                }
            })
        })
        .collect();
    // The producers start with the first `take_pending`, so that the two race
    // however fast the sends are (a send or cancel that finds the enqueue
    // proxy parked applies itself, with no round trip).
    let start = std::sync::Arc::new(std::sync::Barrier::new(3));
    let producers: Vec<_> = (0..2u64)
        .map(|p| {
            let (tx, ledger, start) = (tx.clone(), ledger.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                for i in 0..per_producer as u64 {
                    let at = Instant::now() + Duration::from_micros((i * 13 + p) % 2000);
                    let Some(k) = send(&ledger, &tx, at) else { continue };
                    if i % 4 == 0 {
                        if let Some(item) = tx.cancel(k) {
                            ledger.claim(item, Outcome::Cancelled);
                        }
                    }
                }
            })
        })
        .collect();
    let mut takes = 0;
    start.wait();
    loop {
        for (_, item) in rx.take_pending() {
            ledger.claim(item, Outcome::Taken);
        }
        takes += 1;
        if producers.iter().all(|p| p.is_finished()) {
            break;
        }
        thread::sleep(Duration::from_micros(500));
    }
    for p in producers {
        p.join().unwrap();
    }
    rx.close();
    for (_, item) in rx.take_pending() {
        ledger.claim(item, Outcome::Taken);
    }
    for c in consumers {
        c.join().unwrap();
    }
    assert_eq!(rx.len(), 0);
    drop((tx, rx));
    let t = ledger.check();
    assert!(takes > 0);
    assert_eq!(t.dropped, 0, "{t:?}");
    assert_eq!(t.returned, 0, "nothing was sent after close: {t:?}");
    assert_eq!(t.received + t.cancelled + t.taken, 2 * per_producer, "{t:?}");
}

/// An item that owns the queue's last sender: the enqueue proxy drops it while
/// winding down, so the last handle goes on the proxy thread itself.
struct Holder {
    _tx: Sender<Holder>,
    drops: Arc<AtomicUsize>,
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn the_last_handle_dropped_inside_an_item_on_a_proxy_thread() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = Builder::new().thread_name_prefix("da-hold").build::<Holder>().unwrap();
    tx.send_after(Holder { _tx: tx.clone(), drops: drops.clone() }, HOUR).unwrap();
    tx.send_after(Holder { _tx: tx.clone(), drops: drops.clone() }, HOUR).unwrap();
    drop(tx);
    assert!(rx.try_recv().is_err());
    drop(rx); // the proxy drops both holders, and with them the last handle
              // Nobody is left to join the proxies: poll for their exit.
    let end = Instant::now() + Duration::from_secs(10);
    while drops.load(Ordering::SeqCst) < 2
        || threads_named("da-hold-enqueue") + threads_named("da-hold-dequeue") > 0
    {
        assert!(Instant::now() < end, "the holders were not dropped or the proxies did not exit");
        thread::sleep(ms(1));
    }
    assert_eq!(drops.load(Ordering::SeqCst), 2, "dropped more than once");
}
