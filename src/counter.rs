//! The queue's counters: how many items it holds (`len`), whether it still takes
//! sends (`closed`), whether anyone can still receive (`disconnected`), and how
//! many handles of each kind are alive (crossbeam-channel's `counter.rs` plays
//! the last part there).
//!
//! The accounting that makes "exactly once" checkable:
//! - `len` counts items sent and not yet received, cancelled, taken or dropped. A
//!   send reserves its unit *before* its command enters the ingress, so `len` is
//!   exact from the moment `send` returns; whoever removes an item releases it.
//! - `closed` (set by `close()` or by the last `Sender` going): no new sends.
//!   Receivers report "disconnected" once `closed && len == 0`. A send increments
//!   `len` (a SeqCst RMW) and then, after a SeqCst fence, re-reads `closed`; a
//!   receiver reads `closed` and then `len`, both SeqCst loads. So a receiver
//!   that sees `closed` and `len == 0` cannot miss a send that succeeded: the
//!   send's fence comes before the close in the SeqCst order (it read `closed`
//!   false), the close before the receiver's two loads, so its `len` load sees
//!   the reservation. The send's fence is load-bearing in loom
//!   (`close_races_a_send` fails without it; loom models SeqCst fences, not
//!   SeqCst accesses, loom issue 180). The receiver once had a fence between
//!   its loads too: deleting it failed no model, and it is redundant by the
//!   argument above (every access on the receiver's side is SeqCst), so it
//!   went (`.ci/fence_audit.sh`, 2026-11-26).
//! - `disconnected` (set when the last `Receiver` goes, or a proxy dies): the
//!   ingress ring is closed, the proxies wind down, pending items are dropped.
//!
//! This file holds the atomics and their orderings only; who is woken when a
//! counter moves is `Shared`'s business.

use crate::sync::{fence, AtomicBool, AtomicUsize, Ordering};
use crossbeam_utils::CachePadded;

#[derive(Debug)]
pub(crate) struct Counter {
    /// Written by every send and receive: its own cache line.
    len: CachePadded<AtomicUsize>,
    capacity: Option<usize>,
    closed: AtomicBool,
    disconnected: AtomicBool,
    senders: AtomicUsize,
    receivers: AtomicUsize,
}

impl Counter {
    /// One sender and one receiver, nothing held.
    pub(crate) fn new(capacity: Option<usize>) -> Counter {
        Counter {
            len: CachePadded::new(AtomicUsize::new(0)),
            capacity,
            closed: AtomicBool::new(false),
            disconnected: AtomicBool::new(false),
            senders: AtomicUsize::new(1),
            receivers: AtomicUsize::new(1),
        }
    }

    pub(crate) fn capacity(&self) -> Option<usize> {
        self.capacity
    }

    pub(crate) fn len(&self) -> usize {
        // SeqCst: a receiver's exhaustion check and the tests read it exactly.
        self.len.load(Ordering::SeqCst)
    }

    /// Reserves one unit of `len`; fails only when a bounded queue is full.
    pub(crate) fn reserve(&self) -> bool {
        match self.capacity {
            None => {
                // SeqCst: the increment half of the `closed` handshake.
                self.len.fetch_add(1, Ordering::SeqCst);
                true
            }
            Some(cap) => {
                // Relaxed: only a first guess for the CAS below.
                let mut l = self.len.load(Ordering::Relaxed);
                loop {
                    if l >= cap {
                        return false;
                    }
                    // SeqCst: as above, and a producer's re-check in `block_on`.
                    match self.len.compare_exchange_weak(l, l + 1, Ordering::SeqCst, Ordering::Relaxed) {
                        Ok(_) => return true,
                        Err(now) => l = now,
                    }
                }
            }
        }
    }

    /// `n` units leave `len`; returns what is left.
    pub(crate) fn release(&self, n: usize) -> usize {
        // SeqCst: the notifier side of the producers' and consumers' re-checks.
        self.len.fetch_sub(n, Ordering::SeqCst) - n
    }

    /// After a reservation: `true` if the queue closed meanwhile (the send must
    /// give its unit back). The fence orders the reservation before the read.
    pub(crate) fn closed_after_reserve(&self) -> bool {
        // SeqCst fence: the send's half of the `closed` handshake (module docs).
        fence(Ordering::SeqCst);
        self.is_closed()
    }

    pub(crate) fn is_closed(&self) -> bool {
        // SeqCst: part of the `closed` handshake.
        self.closed.load(Ordering::SeqCst)
    }

    pub(crate) fn close(&self) {
        // SeqCst: part of the `closed` handshake.
        self.closed.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_disconnected(&self) -> bool {
        // SeqCst: the proxies' exit check; whoever sees it also sees `closed`.
        self.disconnected.load(Ordering::SeqCst)
    }

    /// Marks the queue disconnected; `true` the first time.
    pub(crate) fn disconnect(&self) -> bool {
        // SeqCst: published after `closed` and the ingress close (see `Shared`).
        !self.disconnected.swap(true, Ordering::SeqCst)
    }

    /// Items can no longer come out: the receivers' "disconnected".
    pub(crate) fn is_exhausted(&self) -> bool {
        // `closed`, then `len`, both SeqCst loads: the receiver's half (module
        // docs). No fence between them: the fence audit found none needed.
        self.is_disconnected() || (self.is_closed() && self.len() == 0)
    }

    pub(crate) fn add_sender(&self) {
        // Relaxed: as `Arc::clone`; the count only has to reach zero once.
        self.senders.fetch_add(1, Ordering::Relaxed);
    }

    /// `true` if this was the last sender.
    pub(crate) fn remove_sender(&self) -> bool {
        // AcqRel: the last one sees every other sender's sends.
        self.senders.fetch_sub(1, Ordering::AcqRel) == 1
    }

    pub(crate) fn add_receiver(&self) {
        // Relaxed: as `Arc::clone`.
        self.receivers.fetch_add(1, Ordering::Relaxed);
    }

    /// `true` if this was the last receiver.
    pub(crate) fn remove_receiver(&self) -> bool {
        // AcqRel: the last one sees every other receiver's work.
        self.receivers.fetch_sub(1, Ordering::AcqRel) == 1
    }
}
