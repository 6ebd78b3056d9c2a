//! The ingress: producers → the enqueue role.
//!
//! A bounded lock-free [`Ring`] carries the commands to whoever performs the
//! enqueue role (`enqueue.rs`). When it is momentarily full,
//! commands spill into a locked overflow list instead of failing or blocking: the
//! ring's size is an internal batching buffer, not a capacity the user sees (the
//! user's capacity is enforced by the `len` counter before a command is built).
//!
//! A blocking send (`push_or_wait`) instead waits for ring room when the ring is
//! full (after trying to drain it itself: it performs the enqueue role if
//! nobody does): back-pressure rather than a backlog piled into the spill.
//! Whoever holds the enqueue role drains the ring, so the wait is short and
//! cannot deadlock; non-blocking sends and commands still spill.
//!
//! FIFO across the two paths (a producer's commands must reach the enqueue role in the
//! order it issued them, so that `cancel` never overtakes its own `send`):
//! - while `spilled` is set, every push goes to the spill, behind the earlier ones;
//! - the role takes the spill only once the ring is drained (every claimed slot
//!   popped, not merely "the head slot is not written yet"), so every ring
//!   command pushed before a spilled one is already taken.

use crate::clock::Clock;
use crate::ring::{PushError, Ring};
use crate::sync::{lock, yield_now, AtomicBool, Mutex, Ordering};
use crate::waiters::{block_on, Waiters};
use crossbeam_utils::CachePadded;

pub(crate) struct Ingress<T> {
    ring: Ring<T>,
    spilled: CachePadded<AtomicBool>,
    spill: Mutex<Spill<T>>,
    /// Producers waiting for ring room (blocking sends only).
    room: Waiters,
}

struct Spill<T> {
    items: Vec<T>,
    closed: bool,
}

impl<T> Ingress<T> {
    pub(crate) fn new(ring_slots: usize) -> Self {
        Ingress {
            ring: Ring::new(ring_slots),
            spilled: CachePadded::new(AtomicBool::new(false)),
            spill: Mutex::new(Spill { items: Vec::new(), closed: false }),
            room: Waiters::default(),
        }
    }

    /// As `push`, but waits for ring room instead of spilling. `help` is
    /// called once before the wait: the caller may drain the ring itself (it
    /// performs the enqueue role if nobody does).
    pub(crate) fn push_or_wait(&self, cmd: T, help: impl FnOnce()) -> Result<(), T> {
        let mut cmd = Some(cmd);
        let mut attempt = || {
            let c = cmd.take()?;
            // Acquire: as in `push`.
            if self.spilled.load(Ordering::Acquire) {
                return Some(self.push_spill(c));
            }
            match self.ring.push(c) {
                Ok(()) => Some(Ok(())),
                Err(PushError::Closed(c)) => Some(Err(c)),
                Err(PushError::Full(c)) => {
                    cmd = Some(c);
                    None
                }
            }
        };
        if let Some(r) = attempt() {
            return r;
        }
        help();
        if let Some(r) = attempt() {
            return r;
        }
        // Untimed: the enqueue role's holders drain the ring, or it closes.
        block_on(&self.room, &Clock::default(), None, attempt).expect("an untimed wait ends with an outcome")
    }

    /// Queues `cmd` for the enqueue role; fails (handing it back) only once closed.
    pub(crate) fn push(&self, cmd: T) -> Result<(), T> {
        // Acquire: pairs with the Release below, so a producer that learnt of an
        // earlier spilled command (through any synchronisation) sees the flag.
        let cmd = if !self.spilled.load(Ordering::Acquire) {
            match self.ring.push(cmd) {
                Ok(()) => return Ok(()),
                Err(PushError::Closed(c)) => return Err(c),
                Err(PushError::Full(c)) => c,
            }
        } else {
            cmd
        };
        self.push_spill(cmd)
    }

    fn push_spill(&self, cmd: T) -> Result<(), T> {
        let mut spill = lock(&self.spill);
        if spill.closed {
            return Err(cmd);
        }
        spill.items.push(cmd);
        // Release: see the Acquire above. SeqCst would add nothing: the drainer reads
        // the flag again under the spill lock.
        self.spilled.store(true, Ordering::Release);
        Ok(())
    }

    /// Moves up to `max` commands into `out`, oldest first (as
    /// [`drain_with`](Ingress::drain_with)).
    pub(crate) fn drain_into(&self, out: &mut Vec<T>, max: usize) -> usize {
        self.drain_with(max, |c| out.push(c))
    }

    /// Hands up to `max` commands to `f`, oldest first (a spill that is taken
    /// is handed over whole, so more than `max` may come). Returns how many
    /// left the ring. The enqueue role's holder only: it relies on being the
    /// ring's only popper. The caller wakes the producers waiting for room
    /// ([`made_room`](Ingress::made_room)) once it has released the role.
    pub(crate) fn drain_with(&self, max: usize, mut f: impl FnMut(T)) -> usize {
        let mut n = 0;
        while n < max {
            // SAFETY: the enqueue role's holder, the only caller of `drain_with`
            // and `drain_closed`, is the ingress ring's only popper.
            match unsafe { self.ring.pop_exclusive() } {
                Some(c) => {
                    n += 1;
                    f(c);
                }
                None => break,
            }
        }
        // Acquire: pairs with the Release store in `push`.
        if n < max && self.spilled.load(Ordering::Acquire) {
            // Only once every claimed ring slot is popped: a `None` from the ring
            // can mean "claimed, still being written", and that command may come
            // before spilled ones of the same producer (found by loom:
            // `spill_keeps_each_producers_order`). The next drain retries.
            if !self.ring.is_drained() {
                return n;
            }
            let items = {
                let mut spill = lock(&self.spill);
                self.spilled.store(false, Ordering::Relaxed);
                // The whole buffer: a burst's memory goes with it.
                std::mem::take(&mut spill.items)
            };
            items.into_iter().for_each(f);
        }
        n
    }

    /// `n` commands were drained: wakes as many producers waiting for ring
    /// room. (The waiters' fence inside `notify` orders the pops before its
    /// check.)
    pub(crate) fn made_room(&self, n: usize) {
        self.room.notify(n);
    }

    /// Commands in the ring (approximate while others push or pop; the spill
    /// is not counted).
    pub(crate) fn len(&self) -> usize {
        self.ring.len()
    }

    /// `true` if a drain now would take a command: the ring's oldest one is
    /// written, or the spill waits behind a drained ring. A command claimed
    /// and not yet written does not count, nor what waits behind it: its
    /// producer hands it over once written (`enqueue::hand_over`), and the
    /// drain of that hand-over takes what follows. The roles' look for work
    /// after a release; so a role's holder neither loops nor wakes the proxy
    /// for a producer that is off the CPU mid-push.
    pub(crate) fn ready(&self) -> bool {
        // Planted bug for the loom suite: the spill is not looked at.
        #[cfg(delayq_bug_ready_no_spill)]
        return self.ring.head_ready();
        // Acquire: as in `push`.
        #[cfg(not(delayq_bug_ready_no_spill))]
        return self.ring.head_ready() || (self.spilled.load(Ordering::Acquire) && self.ring.is_drained());
    }

    /// `true` if no command waits (a concurrent push may land at once).
    pub(crate) fn is_empty(&self) -> bool {
        self.ring.len() == 0 && !self.spilled.load(Ordering::SeqCst)
    }

    /// Refuses every later push. Returns `false` if already closed.
    pub(crate) fn close(&self) -> bool {
        let first = self.ring.close();
        lock(&self.spill).closed = true;
        self.room.notify_all();
        first
    }

    /// After `close`: moves every command still queued into `out`, waiting out
    /// pushes that claimed a ring slot before the close and are mid-write.
    pub(crate) fn drain_closed(&self, out: &mut Vec<T>) {
        loop {
            let freed = self.drain_into(out, usize::MAX);
            self.made_room(freed);
            if self.ring.is_drained() && !self.spilled.load(Ordering::SeqCst) {
                return;
            }
            // A producer claimed a slot and is a few instructions from publishing it.
            yield_now();
        }
    }
}
