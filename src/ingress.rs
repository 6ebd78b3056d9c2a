//! The ingress: producers → enqueue proxy.
//!
//! A bounded lock-free [`Ring`] carries the commands. When it is momentarily full,
//! commands spill into a locked overflow list instead of failing or blocking: the
//! ring's size is an internal batching buffer, not a capacity the user sees (the
//! user's capacity is enforced by the `len` counter before a command is built).
//!
//! FIFO across the two paths (a producer's commands must reach the proxy in the
//! order it issued them, so that `cancel` never overtakes its own `send`):
//! - while `spilled` is set, every push goes to the spill, behind the earlier ones;
//! - the proxy takes the spill only after it found the ring empty in the same
//!   round, so every ring command pushed before a spilled one is already taken.

use crate::ring::{PushError, Ring};
use crate::sync::{lock, yield_now, AtomicBool, Mutex, Ordering};
use crossbeam_utils::CachePadded;

pub(crate) struct Ingress<T> {
    ring: Ring<T>,
    spilled: CachePadded<AtomicBool>,
    spill: Mutex<Spill<T>>,
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
        }
    }

    /// Queues `cmd` for the proxy; fails (handing it back) only once closed.
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
        let mut spill = lock(&self.spill);
        if spill.closed {
            return Err(cmd);
        }
        spill.items.push(cmd);
        // Release: see the Acquire above. SeqCst would add nothing: the proxy reads
        // the flag again under the spill lock.
        self.spilled.store(true, Ordering::Release);
        Ok(())
    }

    /// Moves up to `max` commands into `out`, oldest first. Proxy only.
    pub(crate) fn drain_into(&self, out: &mut Vec<T>, max: usize) {
        let start = out.len();
        while out.len() - start < max {
            match self.ring.pop() {
                Some(c) => out.push(c),
                None => break,
            }
        }
        // Acquire: pairs with the Release store in `push`.
        if out.len() - start < max && self.spilled.load(Ordering::Acquire) {
            let mut spill = lock(&self.spill);
            out.append(&mut spill.items);
            self.spilled.store(false, Ordering::Relaxed);
            // Give back the memory of a burst: keep a small buffer only.
            if spill.items.capacity() > 1024 {
                spill.items = Vec::new();
            }
        }
    }

    /// `true` if no command waits. Proxy only (a concurrent push may land at once).
    pub(crate) fn is_empty(&self) -> bool {
        self.ring.len() == 0 && !self.spilled.load(Ordering::SeqCst)
    }

    /// Refuses every later push. Returns `false` if already closed.
    pub(crate) fn close(&self) -> bool {
        let first = self.ring.close();
        lock(&self.spill).closed = true;
        first
    }

    /// After `close`: moves every command still queued into `out`, waiting out
    /// pushes that claimed a ring slot before the close and are mid-write.
    pub(crate) fn drain_closed(&self, out: &mut Vec<T>) {
        loop {
            self.drain_into(out, usize::MAX);
            if self.ring.is_drained() && !self.spilled.load(Ordering::SeqCst) {
                return;
            }
            // A producer claimed a slot and is a few instructions from publishing it.
            yield_now();
        }
    }
}

impl<T> std::fmt::Debug for Ingress<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingress").field("ring", &self.ring).finish()
    }
}
