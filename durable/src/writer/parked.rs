//! Parked wake-ups: how a due job that one consumer excludes reaches a
//! consumer that takes it, with no polling and no busy loop.
//!
//! A job's wake-up (its timer, `writer.rs` "Wake-ups") goes to whichever
//! consumer receives it from the core queue. When that consumer
//! ([`reserve_excluding`](crate::DurableQueue::reserve_excluding)) excludes
//! the job's kind and no due job it may take is there, the writer does not
//! re-arm the timer (the same consumer could take it again at once: a busy
//! loop); it *parks* it here, under the job's kind. Every consumer, before
//! it blocks, takes a parked wake-up of a kind it accepts if there is one,
//! and a consumer that blocks registers its waker with the kinds it
//! excludes, so a wake-up parked later wakes it.
//!
//! Protocol (register, re-check, then park): a consumer takes a parked
//! wake-up or registers, under the lock, in one step; `park` inserts and
//! takes the waiters that accept the kind, under the same lock, and wakes
//! them with the lock released. So a wake-up parked while a consumer blocks
//! is either taken by it at registration or finds it registered. Every
//! accepting waiter is woken (not one): a woken consumer may be leaving
//! (its stop signal raised), and the rest must still get their chance.
//!
//! Invariant (with the writer's): each parked entry is a pending job's one
//! wake-up. The writer removes a job's entry whenever it re-arms or disarms
//! the job's timer (the job changed), so an entry is current, and the board
//! holds at most one entry per pending job. An entry taken by a consumer is
//! a timer like any other: it leads to one `Op::Lease`.
//!
//! A consumer that takes nothing from here costs one atomic load
//! ([`count`](Parked::take) is checked before the lock) until it blocks.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Waker;

use super::Timer;

#[derive(Default)]
pub(crate) struct Parked {
    /// Entries parked; written under the lock.
    count: AtomicUsize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// kind → job id → generation.
    by_kind: HashMap<String, BTreeMap<u64, u64>>,
    /// job id → kind, for the writer's removals.
    kind_of: HashMap<u64, String>,
    waiters: Vec<Waiter>,
    next: u64,
}

struct Waiter {
    id: u64,
    waker: Waker,
    exclude: Option<Arc<[String]>>,
}

fn accepts(exclude: Option<&[String]>, kind: &str) -> bool {
    !exclude.is_some_and(|e| e.iter().any(|k| k == kind))
}

impl Parked {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The writer parks job `id`'s wake-up under its kind and wakes the
    /// blocked consumers that accept the kind.
    pub(crate) fn park(&self, id: u64, gen: u64, kind: String) {
        let woken: Vec<Waker> = {
            let mut s = self.lock();
            let waiters = std::mem::take(&mut s.waiters);
            let (wake, keep): (Vec<Waiter>, Vec<Waiter>) =
                waiters.into_iter().partition(|w| accepts(w.exclude.as_deref(), &kind));
            s.waiters = keep;
            if s.kind_of.insert(id, kind.clone()).is_none() {
                // Relaxed: read as a hint before the lock, which orders the rest.
                self.count.fetch_add(1, Ordering::Relaxed);
            }
            s.by_kind.entry(kind).or_default().insert(id, gen);
            wake.into_iter().map(|w| w.waker).collect()
        };
        for waker in woken {
            crate::contain::wake(waker);
        }
    }

    /// The writer drops job `id`'s entry, if any (its timer is re-armed or
    /// disarmed).
    pub(crate) fn unpark(&self, id: u64) {
        // Relaxed: only the writer (this caller) adds to the count, and a
        // load sees at least its own last write (coherence); what comes
        // after it are consumers' takes, so a 0 read here is the truth, and
        // a stale nonzero only costs the lock.
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut s = self.lock();
        if let Some(kind) = s.kind_of.remove(&id) {
            self.count.fetch_sub(1, Ordering::Relaxed);
            if let Some(ids) = s.by_kind.get_mut(&kind) {
                ids.remove(&id);
                if ids.is_empty() {
                    s.by_kind.remove(&kind);
                }
            }
        }
    }

    /// Takes a parked wake-up of a kind not in `exclude`, if there is one.
    pub(crate) fn take(&self, exclude: Option<&[String]>) -> Option<Timer> {
        // Relaxed: a hint; a wake-up parked after this load is taken at
        // registration (under the lock) before the consumer blocks.
        if self.count.load(Ordering::Relaxed) == 0 {
            return None;
        }
        Self::take_locked(&mut self.lock(), &self.count, exclude)
    }

    fn take_locked(s: &mut State, count: &AtomicUsize, exclude: Option<&[String]>) -> Option<Timer> {
        let kind = s.by_kind.keys().find(|k| accepts(exclude, k))?.clone();
        let ids = s.by_kind.get_mut(&kind)?;
        let (id, gen) = ids.pop_first()?;
        if ids.is_empty() {
            s.by_kind.remove(&kind);
        }
        s.kind_of.remove(&id);
        count.fetch_sub(1, Ordering::Relaxed);
        Some((id, gen))
    }

    /// Takes a parked wake-up the consumer accepts (`Ok`), or registers
    /// `waker` to be woken when one is parked (`Err`: the registration, which
    /// ends when dropped) — in one step under the lock.
    pub(crate) fn take_or_register(
        &self,
        waker: &Waker,
        exclude: Option<&Arc<[String]>>,
    ) -> Result<Timer, Registration<'_>> {
        let mut s = self.lock();
        if let Some(t) = Self::take_locked(&mut s, &self.count, exclude.map(|e| &e[..])) {
            return Ok(t);
        }
        let id = s.next;
        s.next += 1;
        s.waiters.push(Waiter { id, waker: waker.clone(), exclude: exclude.cloned() });
        Err(Registration { parked: self, id })
    }
}

/// A blocked consumer's registration; dropping it unregisters.
pub(crate) struct Registration<'a> {
    parked: &'a Parked,
    id: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.parked.lock().waiters.retain(|w| w.id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::task::Wake;

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_parked_wake_up_goes_to_a_consumer_that_accepts_its_kind_only() {
        let p = Parked::default();
        let excl: Arc<[String]> = Arc::from(vec!["a".to_string()]);
        let flag_a = Arc::new(Flag(AtomicBool::new(false)));
        let flag_any = Arc::new(Flag(AtomicBool::new(false)));
        let wa = Waker::from(flag_a.clone());
        let wany = Waker::from(flag_any.clone());
        let reg_a = p.take_or_register(&wa, Some(&excl)).unwrap_err();
        let reg_any = p.take_or_register(&wany, None).unwrap_err();
        p.park(7, 3, "a".into());
        assert!(!flag_a.0.load(Ordering::SeqCst), "the excluder is not woken");
        assert!(flag_any.0.load(Ordering::SeqCst));
        assert_eq!(p.take(Some(&excl)), None);
        assert_eq!(p.take(None), Some((7, 3)));
        assert_eq!(p.take(None), None);
        // Removed by the writer: gone.
        p.park(8, 1, "b".into());
        p.unpark(8);
        assert_eq!((p.take(None), p.count.load(Ordering::SeqCst)), (None, 0));
        drop((reg_a, reg_any));
        assert!(p.lock().waiters.is_empty());
    }
}
