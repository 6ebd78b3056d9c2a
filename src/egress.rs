//! The egress: dequeue proxy → consumers. Items wait here as
//! `(deadline, key, item)`, due or about to be: the dequeue proxy *stages* items
//! whose deadline is at most `stage_ahead` away (`dequeue.rs`), so that at the
//! deadline a consumer's own timed park releases it, without waiting for the
//! proxy to wake first (`lead.rs`).
//!
//! A bounded ring after Dmitry Vyukov's bounded MPMC queue, with one pusher and
//! a state per entry:
//! - **Exclusive push.** Only the dequeue proxy pushes, and only while it holds
//!   the timers lock. So the push needs no CAS, and anyone else holding that lock
//!   (the enqueue proxy answering `cancel`, `peek_deadline` or `take_pending`)
//!   sees a ring that no one is filling.
//! - **Takes only what is due.** The proxy marks each entry `DUE` (due when it
//!   pushed it) or `STAGED` (not yet). A consumer looks at the oldest entry: a
//!   `DUE` one it claims with one CAS on `head`, as in Vyukov's queue, without
//!   reading the clock; a `STAGED` one not due by its clock reading stays (the
//!   consumer learns its deadline, to park until then).
//! - **Recall.** A staged entry can be taken back — by `cancel`, by
//!   `reschedule`, or by the dequeue proxy when an earlier item must go in front
//!   of it. Entry states:
//!
//!   ```text
//!   DUE ──(consumer that claimed its position)──▶ (slot freed)
//!   STAGED ──(consumer that claimed its position)──▶ TAKEN
//!     └──────(recaller, under the timers lock)──────▶ RECALLED
//!   ```
//!
//!   Each side moves a staged item out only after winning that one CAS, so an
//!   item leaves once; nobody recalls a `DUE` entry, so claiming its position is
//!   enough. A consumer whose claimed entry was recalled frees the slot and
//!   looks at the next. No memory is reclaimed under a reader: the entries are the
//!   ring's slots, rewritten only by pushes, and a recaller holds the timers lock,
//!   under which no push runs. (This is why no epoch-based reclamation is needed
//!   here, although the entries are shared.)
//!
//! Invariant of a slot, for the position `pos` it holds: `stamp == pos` means
//! empty, ready for the push of `pos`; `stamp == pos + 1` means the push of `pos`
//! is complete and its `state`, `at` and `key` are those of that push; a consumer
//! that claimed `pos` (the CAS on `head`) writes `stamp = pos + capacity` when it
//! is done with the slot.
//!
//! **Room.** The dequeue proxy stops at a full ring and waits for room
//! (`Sleep::Space`); whoever makes room rings its bell once
//! [`has_room_for_batch`](Egress::has_room_for_batch) holds — half the ring
//! free — so that it moves a batch per wake-up, not one item. A recalled entry
//! keeps its slot until a consumer passes over it.

use crate::sync::{fence, spin, AtomicU64, AtomicUsize, Ordering, UnsafeCell};
use crate::wakeup::Bell;
use crossbeam_utils::CachePadded;
use std::mem::MaybeUninit;

/// An item on its way out: `(deadline ticks, key, item)`.
pub(crate) type Due<T> = (u64, u64, T);

/// Entry states (meaningful while the slot's stamp says it holds a push).
const DUE: usize = 0;
const STAGED: usize = 1;
const TAKEN: usize = 2;
const RECALLED: usize = 3;

struct Slot<T> {
    stamp: AtomicUsize,
    state: AtomicUsize,
    /// Deadline ticks and key: written before the stamp is published, read by
    /// consumers before they claim, and by recallers.
    at: AtomicU64,
    key: AtomicU64,
    item: UnsafeCell<MaybeUninit<T>>,
}

/// What a consumer found at the front of the ring.
#[derive(Debug)]
pub(crate) enum Look<T> {
    /// A due item, now the caller's.
    Item(Due<T>),
    /// The oldest entry is due at this tick, later than the caller's `now`.
    NotYet(u64),
    /// Nothing waiting.
    Empty,
}

/// What a take did: what it found, and how many recalled entries it passed over
/// (their slots are free now, so the caller may have made room).
#[derive(Debug)]
pub(crate) struct Took<T> {
    pub(crate) look: Look<T>,
    pub(crate) skipped: usize,
}

pub(crate) struct Egress<T> {
    head: CachePadded<AtomicUsize>,
    tail: CachePadded<AtomicUsize>,
    /// Positions that left the ring some way other than a consumer's take:
    /// recalled entries and `take_all`'s. Counted *before* the head can move
    /// past them, so that `received_so_far` never counts one as received.
    /// Written by holders of the timers lock only; read for the metrics.
    bypassed: AtomicUsize,
    slots: Box<[Slot<T>]>,
    mask: usize,
}

// SAFETY: each item goes from the dequeue proxy (which pushed it) to exactly one
// thread: the consumer or the recaller that won the entry's state CAS; so
// `T: Send` is all it needs.
unsafe impl<T: Send> Send for Egress<T> {}
// SAFETY: as for `Send`; shared access goes through the stamp and state protocol.
unsafe impl<T: Send> Sync for Egress<T> {}

impl<T> Egress<T> {
    /// A ring of `slots.next_power_of_two()` slots (at least 2, at most 2^30).
    pub(crate) fn new(slots: usize) -> Egress<T> {
        let cap = slots.clamp(2, 1 << 30).next_power_of_two();
        let slots = (0..cap)
            .map(|i| Slot {
                stamp: AtomicUsize::new(i),
                state: AtomicUsize::new(DUE),
                at: AtomicU64::new(0),
                key: AtomicU64::new(0),
                item: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect();
        Egress {
            head: CachePadded::new(AtomicUsize::new(0)),
            tail: CachePadded::new(AtomicUsize::new(0)),
            bypassed: AtomicUsize::new(0),
            slots,
            mask: cap - 1,
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Slots in use, recalled entries included (approximate while others take).
    pub(crate) fn len(&self) -> usize {
        // SeqCst: consumers' and the proxy's room checks order against the
        // claims and pushes (fences in `wakeup` and `waiters`).
        let tail = self.tail.load(Ordering::SeqCst);
        let head = self.head.load(Ordering::SeqCst);
        tail.saturating_sub(head)
    }

    pub(crate) fn is_full(&self) -> bool {
        self.len() >= self.capacity()
    }

    /// At least half the ring is free: enough for the dequeue proxy to move a
    /// batch. The proxy re-checks it before parking for room, and takers check it
    /// before ringing the proxy's bell; the two must agree.
    pub(crate) fn has_room_for_batch(&self) -> bool {
        self.len() <= self.capacity() / 2
    }

    /// Whether the front of the ring needs a consumer to wake for it: a due
    /// entry (anyone may take it now), or a staged one that nobody leads for
    /// (`led`: the deadline the leading consumer waits for, if any; a leader
    /// for that deadline or an earlier one will look again by then). `false`
    /// for an empty ring. A hint read after the caller's SeqCst fence: a
    /// front that changes meanwhile was changed by a taker or a recaller,
    /// whose own wake-up rules cover what follows it.
    pub(crate) fn front_needs_taker(&self, led: Option<u64>) -> bool {
        // SeqCst: as in `len`, the claims' total order.
        let head = self.head.load(Ordering::SeqCst);
        let slot = &self.slots[head & self.mask];
        // Acquire: pairs with the Release stamp store of the push of `head`.
        if slot.stamp.load(Ordering::Acquire) != head + 1 {
            // Not pushed yet (empty), or claimed meanwhile (its taker decides).
            return false;
        }
        // Acquire: as for the stamp.
        match slot.state.load(Ordering::Acquire) {
            // Acquire: published with the stamp.
            STAGED => led.map_or(true, |l| l > slot.at.load(Ordering::Acquire)),
            // Due; or recalled, to be passed over by whoever looks next.
            _ => true,
        }
    }

    /// After a take freed slots without taking an item (it passed over
    /// recalled entries): rings `bell`, the dequeue proxy's, if the proxy
    /// parked waiting for room and there is room for a batch now. The fence
    /// is the waker's half of the bell's store-buffering pair (`wakeup.rs`):
    /// our claims on the head, then the proxy's `sleeping` flag (loom:
    /// `models/egress.rs`, `passing_a_recalled_entry_wakes_a_proxy_waiting_for_room`).
    pub(crate) fn made_room(&self, bell: &Bell) {
        // SeqCst: the waker's half of the store-buffering pair.
        fence(Ordering::SeqCst);
        if bell.is_sleeping() && self.has_room_for_batch() {
            bell.ring_after_fence();
        }
    }

    /// Items consumers have taken so far: the head, less the positions that
    /// left otherwise. Read in this order it can only undercount (a position
    /// is counted as bypassed before the head can pass it), so a series of
    /// readings, each kept as a maximum, converges on the exact count once
    /// the ring is quiet (`metrics.rs`).
    pub(crate) fn received_so_far(&self) -> usize {
        // SeqCst: the head first, then `bypassed` (see the field).
        let head = self.head.load(Ordering::SeqCst);
        head.saturating_sub(self.bypassed.load(Ordering::SeqCst))
    }

    /// How many slots consumers have passed so far, in all (wraps; compare for
    /// change only). A hint: others may be taking.
    pub(crate) fn taken_so_far(&self) -> usize {
        // Relaxed: a progress hint for the admission rules (the dequeue
        // proxy's, and a paused send whose `MAX_WAIT` ran out).
        self.head.load(Ordering::Relaxed)
    }

    /// Hands an item to the consumers: `staged` if it is not due yet. Returns
    /// its position (for a later [`recall`](Egress::recall) of a staged one), or
    /// hands it back when the ring is full.
    ///
    /// # Safety
    /// The caller is the dequeue proxy, the only pusher, and holds the timers lock.
    pub(crate) unsafe fn push(&self, (at, key, item): Due<T>, staged: bool) -> Result<usize, Due<T>> {
        // Relaxed: only we write `tail`.
        let tail = self.tail.load(Ordering::Relaxed);
        let slot = &self.slots[tail & self.mask];
        loop {
            // Acquire: pairs with the Release stamp store of the take that freed it.
            let stamp = slot.stamp.load(Ordering::Acquire);
            if stamp == tail {
                break;
            }
            // The slot holds the entry of one lap ago: full, unless a consumer has
            // claimed it and is finishing (then it is free in a moment).
            // SeqCst: the verdict must not be older than the take a blocked
            // proxy then waits for (see `wakeup::Bell`).
            if self.head.load(Ordering::SeqCst).wrapping_add(self.mask + 1) == tail {
                return Err((at, key, item));
            }
            spin();
        }
        // Release (state, deadline): a consumer that reads either before the
        // stamp says this push is complete must also see the stamp that freed
        // the slot (see `take`'s re-check); the key is published by the stamp.
        slot.state.store(if staged { STAGED } else { DUE }, Ordering::Release);
        slot.at.store(at, Ordering::Release);
        slot.key.store(key, Ordering::Relaxed);
        // SAFETY: the stamp says the slot is empty for position `tail`, and no
        // other thread pushes (the caller's duty), so the slot is ours to write.
        slot.item.with_mut(|p| unsafe { (*p).write(item) });
        // Release: publishes the entry to whoever reads this stamp.
        slot.stamp.store(tail + 1, Ordering::Release);
        // SeqCst: claims and room checks read `tail` in the total order that the
        // wake-up checks reason about.
        self.tail.store(tail + 1, Ordering::SeqCst);
        Ok(tail)
    }

    /// Takes the oldest entry if it is due, passing over recalled ones. `now` is
    /// called (once) only if the oldest entry was staged.
    pub(crate) fn take(&self, mut now: impl FnMut() -> u64) -> Took<T> {
        let mut clock = None::<u64>;
        let mut skipped = 0;
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[head & self.mask];
            // Acquire: pairs with the Release stamp store of the push of `head`.
            let stamp = slot.stamp.load(Ordering::Acquire);
            if stamp == head + 1 {
                // Acquire: a recaller's RECALLED is read with what it saw, and a
                // later lap's push with the stamp that freed the slot for it.
                let state = slot.state.load(Ordering::Acquire);
                if state == STAGED {
                    // Acquire: as for the state.
                    let at = slot.at.load(Ordering::Acquire);
                    if at > *clock.get_or_insert_with(&mut now) {
                        // Unlike a claim, this answer has no CAS to validate it:
                        // meanwhile the slot may have been passed and pushed
                        // again, and the state and deadline read may be the next
                        // lap's (loom found a due item reported as `NotYet`).
                        // Trust them only if the stamp still names `head`.
                        // Acquire: a stamp like the rest; the two Acquire loads
                        // above keep this one after them.
                        if slot.stamp.load(Ordering::Acquire) != stamp {
                            spin();
                            head = self.head.load(Ordering::Relaxed);
                            continue;
                        }
                        return Took { look: Look::NotYet(at), skipped };
                    }
                }
                // SeqCst: claims belong to the total order that the wake-up checks
                // (fences in `wakeup` and `waiters`) reason about.
                if let Err(h) =
                    self.head.compare_exchange_weak(head, head + 1, Ordering::SeqCst, Ordering::Relaxed)
                {
                    head = h;
                    continue;
                }
                // Position `head` is ours. A due entry is ours with it (nobody
                // recalls those); a staged one if it is still STAGED.
                // AcqRel: orders our read of the item after the push, and against a
                // recaller's CAS on the same state.
                let won = state == DUE
                    || slot
                        .state
                        .compare_exchange(STAGED, TAKEN, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok();
                // Planted bug for the loom suite: a consumer that takes a staged
                // entry without winning it races a recall of the same item.
                #[cfg(delayq_bug_take_ignores_recall)]
                let won = won || state == STAGED;
                let entry = won.then(|| {
                    let at = slot.at.load(Ordering::Relaxed);
                    let key = slot.key.load(Ordering::Relaxed);
                    // SAFETY: we claimed position `head`, whose push completed (the
                    // stamp), and the entry is ours (due, or STAGED → TAKEN): no one
                    // else moves the item out, and no push rewrites the slot before
                    // our stamp store below.
                    let item = slot.item.with(|p| unsafe { (*p).assume_init_read() });
                    (at, key, item)
                });
                // Release: hands the emptied slot to the push one lap on.
                slot.stamp.store(head + self.mask + 1, Ordering::Release);
                match entry {
                    Some(e) => return Took { look: Look::Item(e), skipped },
                    None => {
                        skipped += 1;
                        head += 1;
                    }
                }
            } else if stamp == head {
                // Nothing pushed at `head` yet.
                return Took { look: Look::Empty, skipped };
            } else {
                // Another consumer claimed `head` meanwhile.
                spin();
                head = self.head.load(Ordering::Relaxed);
            }
        }
    }

    /// Takes back the staged entry pushed at `pos`, if it is still there and not
    /// taken: for `cancel`, `reschedule`, and the dequeue proxy putting an earlier
    /// item in front. Returns it, or `None` if a consumer has it (or it was pushed
    /// due: those are never recalled).
    ///
    /// # Safety
    /// The caller holds the timers lock, so no push runs (the slot's item cannot
    /// be rewritten while we move it out).
    pub(crate) unsafe fn recall(&self, pos: usize) -> Option<Due<T>> {
        let slot = &self.slots[pos & self.mask];
        // Acquire: pairs with the Release stamp store of the push of `pos`; any
        // other value means a consumer passed it (and it was taken).
        if slot.stamp.load(Ordering::Acquire) != pos + 1 {
            return None;
        }
        // AcqRel: against a consumer's STAGED → TAKEN on the same state; Release
        // so that a consumer that sees RECALLED also sees that we own the item.
        // Counted before the state change that lets others pass it (the
        // field's rule); taken back if a consumer won the entry.
        // SeqCst: `received_so_far` reads it after the head.
        self.bypassed.fetch_add(1, Ordering::SeqCst);
        if slot.state.compare_exchange(STAGED, RECALLED, Ordering::AcqRel, Ordering::Acquire).is_err() {
            self.bypassed.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        let at = slot.at.load(Ordering::Relaxed);
        let key = slot.key.load(Ordering::Relaxed);
        // SAFETY: the push of `pos` completed (the stamp), we won the entry
        // (STAGED → RECALLED), so no consumer reads the item; no push runs while we
        // hold the timers lock (the caller's duty), so the slot is not rewritten.
        let item = slot.item.with(|p| unsafe { (*p).assume_init_read() });
        Some((at, key, item))
    }

    /// Moves the head past recalled entries at the front of the ring (the
    /// dequeue proxy, before it checks for room). No item is read: whoever
    /// wins the CAS on the head for a recalled entry only frees its slot, as a
    /// consumer passing over it would.
    pub(crate) fn pass_recalled(&self) {
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[head & self.mask];
            // Acquire: pairs with the Release stamp store of the push of `head`;
            // the state as the recaller left it.
            if slot.stamp.load(Ordering::Acquire) != head + 1
                || slot.state.load(Ordering::Acquire) != RECALLED
            {
                return;
            }
            // SeqCst: as the claim in `take`.
            match self.head.compare_exchange(head, head + 1, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => {
                    // Release: hands the emptied slot to the push one lap on.
                    slot.stamp.store(head + self.mask + 1, Ordering::Release);
                    head += 1;
                }
                Err(h) => head = h,
            }
        }
    }

    /// The earliest deadline waiting here. (Entries are in deadline order except
    /// where an item reached the index already due, or where the proxy did not
    /// recall a long run of staged entries to put an earlier one in front.)
    pub(crate) fn earliest_deadline(&self) -> Option<u64> {
        self.live_deadlines().min()
    }

    /// Whether a live entry (due or staged, neither taken nor recalled) is
    /// waiting here: one whose taker is still to come (`duty.rs`).
    pub(crate) fn has_live_entry(&self) -> bool {
        self.live_deadlines().next().is_some()
    }

    /// The deadlines of the live entries, oldest position first.
    fn live_deadlines(&self) -> impl Iterator<Item = u64> + '_ {
        // SeqCst: as in `len` (the duty's hand-over reads the claims here,
        // after its fence); orders the stamp reads after the positions.
        let head = self.head.load(Ordering::SeqCst);
        let tail = self.tail.load(Ordering::SeqCst);
        (head..tail).filter_map(move |pos| {
            let slot = &self.slots[pos & self.mask];
            // Acquire: pairs with the Release stamp store of the push of
            // `pos` (an entry taken meanwhile may or may not be seen).
            let waiting = slot.stamp.load(Ordering::Acquire) == pos + 1
                && matches!(slot.state.load(Ordering::Acquire), DUE | STAGED);
            // Relaxed: published with the stamp.
            waiting.then(|| slot.at.load(Ordering::Relaxed))
        })
    }

    /// Takes every waiting entry, due or not (`take_pending`, shutdown).
    pub(crate) fn take_all(&self) -> Vec<Due<T>> {
        let mut all = Vec::new();
        loop {
            // Counted before the take moves the head (the field's rule).
            // SeqCst: `received_so_far` reads it after the head.
            self.bypassed.fetch_add(1, Ordering::SeqCst);
            let Look::Item(x) = self.take(|| u64::MAX).look else { break };
            all.push(x);
        }
        self.bypassed.fetch_sub(1, Ordering::SeqCst);
        all
    }
}

impl<T> Drop for Egress<T> {
    fn drop(&mut self) {
        while let Look::Item(_) = self.take(|| u64::MAX).look {}
    }
}

impl<T> std::fmt::Debug for Egress<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress").field("len", &self.len()).field("capacity", &self.capacity()).finish()
    }
}

#[cfg(all(test, not(delayq_loom)))]
mod tests {
    use super::*;

    fn push(e: &Egress<u32>, at: u64, key: u64) -> usize {
        // SAFETY: this test is the only pusher, and no one else recalls.
        unsafe { e.push((at, key, key as u32), true) }.unwrap()
    }

    fn item(t: Took<u32>) -> Option<u32> {
        match t.look {
            Look::Item((_, _, x)) => Some(x),
            _ => None,
        }
    }

    #[test]
    fn takes_only_what_is_due_and_reports_the_front() {
        let e = Egress::new(4);
        push(&e, 10, 1);
        push(&e, 20, 2);
        assert!(matches!(e.take(|| 9).look, Look::NotYet(10)));
        assert_eq!(e.earliest_deadline(), Some(10));
        assert_eq!(item(e.take(|| 10)), Some(1));
        assert!(matches!(e.take(|| 19).look, Look::NotYet(20)));
        assert_eq!(item(e.take(|| 25)), Some(2));
        assert!(matches!(e.take(|| u64::MAX).look, Look::Empty));
        assert_eq!(e.earliest_deadline(), None);
    }

    #[test]
    fn a_recalled_entry_is_passed_over_once_and_frees_its_slot() {
        let e = Egress::new(2);
        let a = push(&e, 10, 1);
        push(&e, 20, 2);
        // SAFETY: no push runs concurrently (single-threaded test).
        let back = unsafe { e.recall(a) };
        assert_eq!(back, Some((10, 1, 1)));
        // SAFETY: as above.
        assert_eq!(unsafe { e.recall(a) }, None, "recalled twice");
        assert_eq!(e.earliest_deadline(), Some(20));
        let t = e.take(|| 30);
        assert_eq!(t.skipped, 1);
        assert_eq!(item(t), Some(2));
        assert_eq!(e.len(), 0);
        // Both slots are free again.
        push(&e, 40, 3);
        push(&e, 50, 4);
        assert_eq!(e.take_all().len(), 2);
    }

    #[test]
    fn a_due_entry_is_taken_without_reading_the_clock_and_never_recalled() {
        let e = Egress::new(2);
        // SAFETY: the only pusher and recaller (single-threaded test).
        let a = unsafe { e.push((10, 1, 1), false) }.unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { e.recall(a) }, None);
        assert_eq!(item(e.take(|| unreachable!("read the clock for a due entry"))), Some(1));
    }

    #[test]
    fn the_proxy_passes_recalled_entries_at_the_head_only() {
        let e = Egress::new(4);
        let a = push(&e, 10, 1);
        let b = push(&e, 20, 2);
        let c = push(&e, 30, 3);
        // SAFETY: no push runs concurrently (single-threaded test).
        unsafe {
            assert!(e.recall(a).is_some());
            assert!(e.recall(c).is_some());
        }
        e.pass_recalled();
        assert_eq!(e.len(), 2, "passes the recalled head, stops at a staged entry");
        assert_eq!(item(e.take(|| 20)), Some(2));
        e.pass_recalled();
        assert_eq!(e.len(), 0);
        let _ = b;
    }

    #[test]
    fn a_taken_entry_cannot_be_recalled() {
        let e = Egress::new(2);
        let a = push(&e, 10, 1);
        assert_eq!(item(e.take(|| 10)), Some(1));
        // SAFETY: no push runs concurrently (single-threaded test).
        assert_eq!(unsafe { e.recall(a) }, None);
    }

    #[test]
    fn drop_drops_waiting_items_but_not_recalled_ones() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        use std::sync::Arc;
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, SeqCst);
            }
        }
        let drops = Arc::new(AtomicUsize::new(0));
        let e = Egress::new(4);
        // SAFETY: the only pusher and recaller (single-threaded test).
        let (a, back) = unsafe {
            let a = e.push((5, 1, Counted(drops.clone())), true).ok().unwrap();
            e.push((6, 2, Counted(drops.clone())), true).ok().unwrap();
            (a, e.recall(a))
        };
        let _ = a;
        assert_eq!(drops.load(SeqCst), 0);
        drop(back);
        assert_eq!(drops.load(SeqCst), 1);
        drop(e);
        assert_eq!(drops.load(SeqCst), 2, "the recalled item was dropped twice, or the live one never");
    }
}
