//! The entries the dequeue proxy staged ahead of their deadline, as long as they
//! may still be taken back: by `cancel` and `reschedule` (the enqueue role),
//! and, when an earlier item must go in front of them, by the enqueue role as
//! it inserts that item and by the dequeue role before each push.
//!
//! Both roles use it under the timers lock, which is also what makes
//! [`Egress::recall`] safe (no push runs). It lists `(position, key, deadline)`
//! in push order; an entry leaves the list once consumers have passed its
//! position or its deadline has come (a due item is final, as before staging).
//! With `stage_ahead` at its default of 100 µs it holds what falls due in the
//! next 100 to 200 µs; with staging off (mock clocks) it stays empty.

use crate::egress::Egress;
use crate::index::Index;
use std::collections::VecDeque;

/// At most this many staged entries are recalled to put one earlier item in
/// front of them; beyond it the earlier item goes behind them (it is then late
/// by at most `2 × stage_ahead`). It bounds the work per item at high rates,
/// where a backlog makes the order within `stage_ahead` moot.
const RECALL_MAX: usize = 32;

#[derive(Debug, Clone, Copy)]
struct Entry {
    pos: usize,
    key: u64,
    at: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Staged {
    list: VecDeque<Entry>,
}

impl Staged {
    /// The dequeue proxy pushed `key`, due at `at`, at position `pos`.
    pub(crate) fn record(&mut self, pos: usize, key: u64, at: u64) {
        self.list.push_back(Entry { pos, key, at });
    }

    /// Forgets entries that are due by `now` or that consumers have passed.
    /// Returns the earliest deadline among those that fell due still waiting
    /// for a consumer (the dequeue proxy may have woken for it).
    pub(crate) fn prune<T>(&mut self, egress: &Egress<T>, now: u64) -> Option<u64> {
        let mut fell_due = None::<u64>;
        if self.list.is_empty() {
            return fell_due;
        }
        let passed = egress.taken_so_far();
        while let Some(e) = self.list.front() {
            if e.pos < passed {
                self.list.pop_front();
            } else if e.at <= now {
                fell_due = Some(fell_due.map_or(e.at, |f| f.min(e.at)));
                self.list.pop_front();
            } else {
                break;
            }
        }
        fell_due
    }

    /// The deadline of the oldest staged entry still waiting (as of the last
    /// prune), or `None`.
    pub(crate) fn first(&self) -> Option<u64> {
        self.list.front().map(|e| e.at)
    }

    /// The deadline and key of the newest staged entry listed, or `None`.
    pub(crate) fn last(&self) -> Option<(u64, u64)> {
        self.list.back().map(|e| (e.at, e.key))
    }

    /// Entries listed: staged and not yet passed or due, as of the last prune.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn clear(&mut self) {
        self.list.clear();
    }

    /// Takes back the staged item of `key` if it is not due by `now`:
    /// `(deadline, item)`, or `None` if it is not staged, is due, or a consumer
    /// has it.
    ///
    /// # Safety
    /// The caller holds the timers lock (see [`Egress::recall`]).
    pub(crate) unsafe fn recall_key<T>(
        &mut self,
        egress: &Egress<T>,
        key: u64,
        now: u64,
    ) -> Option<(u64, T)> {
        let i = self.list.iter().position(|e| e.key == key)?;
        if self.list[i].at <= now {
            // Due: final. It stays listed, so that the dequeue proxy's next
            // prune still sees it fall due (and wakes a consumer for it).
            return None;
        }
        let e = self.list.remove(i)?;
        // SAFETY: the caller holds the timers lock (its duty).
        unsafe { egress.recall(e.pos) }.map(|(at, _, item)| (at, item))
    }

    /// The item `key`, due at `at`, is about to be pushed by the dequeue role
    /// or was just inserted into the index by the enqueue role: staged
    /// entries that must follow it — due later, or at the same time with a
    /// larger key (equal deadlines leave in key order) — and are not due by
    /// `now` (a run of at most [`RECALL_MAX`] at the end of the list) go back
    /// into `index`, so that they follow it out in order. Returns how many
    /// went back.
    ///
    /// # Safety
    /// The caller holds the timers lock (see [`Egress::recall`]).
    pub(crate) unsafe fn recall_later<T>(
        &mut self,
        egress: &Egress<T>,
        (at, key): (u64, u64),
        now: u64,
        index: &mut Index<T>,
    ) -> usize {
        let later = self
            .list
            .iter()
            .rev()
            .take(RECALL_MAX + 1)
            .take_while(|e| (e.at, e.key) > (at, key) && e.at > now)
            .count();
        if later == 0 || later > RECALL_MAX {
            return 0;
        }
        let mut recalled = 0;
        for e in self.list.drain(self.list.len() - later..) {
            // SAFETY: the caller holds the timers lock (its duty).
            if let Some((d, key, item)) = unsafe { egress.recall(e.pos) } {
                index.insert(key, d, item);
                recalled += 1;
            }
        }
        recalled
    }
}
