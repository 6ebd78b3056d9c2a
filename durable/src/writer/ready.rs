//! The writer's index of pending jobs: which due job a lease takes.
//!
//! Every pending job is in two ordered sets keyed `(deadline, id)`: its
//! priority level's (ten levels, `0..=9`) and its kind's level. A level's
//! first entry is its oldest job, hence, with aging, its most aged one, so
//! the best due job is the best of at most ten heads: `(effective priority,
//! deadline, id)`, the effective priority being `priority - floor((now -
//! deadline) / step)` with aging on, the priority without. A consumer that
//! excludes kinds looks at the heads of the kinds it takes (ten per kind
//! that has pending jobs) instead. Costs: O(log n) per send, lease, nack or
//! cancel (two B-tree updates); a lease looks at ten heads, or ten per kind
//! when kinds are excluded.
//!
//! The index is memory only: rebuilt from the file on open, and after a
//! commit that failed (its changes to the index are then undone by reading
//! the file again).

use std::collections::{BTreeSet, HashMap};

use crate::record::{Record, State};

type Levels = [BTreeSet<(u64, u64)>; 10];

fn levels() -> Levels {
    std::array::from_fn(|_| BTreeSet::new())
}

pub(crate) struct Ready {
    levels: Levels,
    kinds: HashMap<String, Levels>,
    /// The aging step in ns; 0: no aging.
    step: u64,
}

impl Ready {
    pub(crate) fn new(step: u64) -> Ready {
        Ready { levels: levels(), kinds: HashMap::new(), step }
    }

    /// The aging step in ns (0: none).
    pub(crate) fn step(&self) -> u64 {
        self.step
    }

    /// Adds a pending job (a record in another state is ignored).
    pub(crate) fn insert(&mut self, id: u64, rec: &Record) {
        if rec.state != State::Pending {
            return;
        }
        let level = usize::from(rec.priority.min(9));
        self.levels[level].insert((rec.deadline, id));
        match self.kinds.get_mut(rec.kind.as_str()) {
            Some(l) => {
                l[level].insert((rec.deadline, id));
            }
            None => {
                let mut l = levels();
                l[level].insert((rec.deadline, id));
                self.kinds.insert(rec.kind.clone(), l);
            }
        }
    }

    /// Removes a job as it was indexed (its record before the change); a job
    /// not in the index is ignored.
    pub(crate) fn remove(&mut self, id: u64, rec: &Record) {
        if rec.state != State::Pending {
            return;
        }
        let level = usize::from(rec.priority.min(9));
        self.levels[level].remove(&(rec.deadline, id));
        if let Some(l) = self.kinds.get_mut(rec.kind.as_str()) {
            l[level].remove(&(rec.deadline, id));
            if l.iter().all(BTreeSet::is_empty) {
                self.kinds.remove(rec.kind.as_str());
            }
        }
    }

    /// Drops an entry whose record is not pending any more (should not
    /// happen: the index follows every change; a safety net that keeps a
    /// stray entry from being chosen forever).
    pub(crate) fn forget(&mut self, level: u8, deadline: u64, id: u64) {
        let level = usize::from(level);
        self.levels[level].remove(&(deadline, id));
        self.kinds.retain(|_, l| {
            l[level].remove(&(deadline, id));
            !l.iter().all(BTreeSet::is_empty)
        });
    }

    /// The best due job (`deadline <= now`) whose kind is not in `exclude`:
    /// `(level, deadline, id)`.
    pub(crate) fn best(&self, now: u64, exclude: &[String]) -> Option<(u8, u64, u64)> {
        if exclude.is_empty() {
            return self.best_of(&self.levels, now).map(|(_, d, id, l)| (l, d, id));
        }
        self.kinds
            .iter()
            .filter(|(kind, _)| !exclude.iter().any(|e| e == *kind))
            .filter_map(|(_, l)| self.best_of(l, now))
            .min()
            .map(|(_, d, id, l)| (l, d, id))
    }

    /// `(effective priority, deadline, id, level)` of the best due head.
    fn best_of(&self, levels: &Levels, now: u64) -> Option<(u8, u64, u64, u8)> {
        let mut best: Option<(u8, u64, u64, u8)> = None;
        for (level, set) in levels.iter().enumerate() {
            let Some(&(deadline, id)) = set.first() else { continue };
            if deadline > now {
                continue;
            }
            let level = level as u8;
            let key = (self.effective(level, now - deadline), deadline, id, level);
            if best.is_none_or(|b| key < b) {
                best = Some(key);
            }
        }
        best
    }

    fn effective(&self, level: u8, waited: u64) -> u8 {
        if self.step == 0 {
            return level;
        }
        level.saturating_sub(u8::try_from(waited / self.step).unwrap_or(u8::MAX))
    }

    /// Pending jobs indexed.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.levels.iter().map(BTreeSet::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(priority: u8, deadline: u64, kind: &str) -> Record {
        Record {
            state: State::Pending,
            attempt: 0,
            dead_after: 1,
            deadline,
            token: 0,
            lease_until: 0,
            gen: 1,
            kind: kind.into(),
            error: None,
            priority,
            unique: None,
            payload: Vec::new(),
        }
    }

    #[test]
    fn the_best_due_job_is_the_lowest_priority_then_deadline_then_id_and_never_early() {
        let mut r = Ready::new(0);
        r.insert(1, &rec(5, 10, ""));
        r.insert(2, &rec(1, 30, "a"));
        r.insert(3, &rec(1, 20, "b"));
        r.insert(4, &rec(0, 100, ""));
        assert_eq!(r.best(5, &[]), None);
        assert_eq!(r.best(10, &[]), Some((5, 10, 1)));
        assert_eq!(r.best(25, &[]), Some((1, 20, 3)));
        assert_eq!(r.best(25, &["b".into()]), Some((5, 10, 1)));
        assert_eq!(r.best(100, &[]), Some((0, 100, 4)));
        r.remove(4, &rec(0, 100, ""));
        r.remove(3, &rec(1, 20, "b"));
        assert_eq!(r.best(100, &[]), Some((1, 30, 2)));
        r.forget(1, 30, 2);
        assert_eq!((r.best(100, &[]), r.len()), (Some((5, 10, 1)), 1));
    }

    #[test]
    fn aging_lets_an_old_low_priority_job_before_a_newer_urgent_one() {
        let mut r = Ready::new(10);
        r.insert(1, &rec(3, 0, ""));
        r.insert(2, &rec(1, 20, ""));
        // At 25: job 1 aged 2 steps (3 -> 1), job 2 none (1): equal, older first.
        assert_eq!(r.best(25, &[]), Some((3, 0, 1)));
        // At 20: job 1 aged 2 steps (3 -> 1) too; the tie goes to the older deadline.
        let mut r = Ready::new(10);
        r.insert(1, &rec(3, 0, ""));
        r.insert(2, &rec(0, 20, ""));
        assert_eq!(r.best(25, &[]), Some((0, 20, 2)));
        assert_eq!(r.best(30, &[]), Some((3, 0, 1)));
    }
}
