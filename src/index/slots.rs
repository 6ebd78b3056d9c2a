//! The key → entry table of the timer index: a page table indexed by key.
//!
//! Keys are handed out by one counter, so the live keys form a dense-ish window of
//! integers. The table splits a key into (page, offset) — two array indexes, no
//! hashing — and allocates a page of `PAGE` entries only while one of its keys is
//! live. Inserts walk pages sequentially (producers send in key order), so they
//! stay in cache; a page is freed (or kept as a spare) when its last entry goes.
//!
//! A long-lived item (a never-due one, say) would pin the front of that window:
//! every page sent after it would keep a 24-byte entry in the page list, 5.9 KB
//! per million keys sent, without bound. So once a live front page has `GAP` empty
//! pages behind it, its live entries move to `stragglers`, an ordered map by key,
//! and the window moves on (`examples/scale.rs --far-stream N`: one far item, then
//! N items streamed through; the RSS growth no longer depends on N). Memory is
//! then bounded by the live items: the window's pages (each `PAGE` entries, the
//! spares included) plus one map entry per straggler, whatever the key range.
//! Keys below the window (stragglers, or a send that took its key long before it
//! arrived) cost a map lookup; the window's keys never do.
//!
//! **Invariant:** every straggler's page is below `floor`, and the window never
//! starts below `floor`; so a key is looked up in exactly one place (the window
//! if its page is at or after `first`, the map otherwise). A late key whose page
//! is below `floor` joins the stragglers even when the window is empty: an
//! earlier version re-based an empty window onto a straggler's page, and lookups
//! of that straggler then missed, so it was never delivered.

use std::collections::{BTreeMap, VecDeque};

/// 4,096 entries a page; 64 in unit tests, so that the index models (a few
/// tens of thousands of keys) cross many pages and make stragglers.
const PAGE_BITS: u32 = if cfg!(test) { 6 } else { 12 };
const PAGE: usize = 1 << PAGE_BITS;
/// Emptied pages kept for reuse, so that a steady stream, or a queue swinging
/// around a working set, neither allocates nor faults in fresh memory: as
/// many pages as fit in this many bytes, and at least one. Those a burst left
/// beyond the working set go back after it (`index::tidy`).
const SPARE_BYTES: usize = 4 << 20;
/// Empty pages behind a live front page before its entries become stragglers.
const GAP: usize = 16;

struct Page<E> {
    live: usize,
    slots: Box<[Option<E>]>,
}

pub(crate) struct Slots<E> {
    /// Page number of `pages[0]`.
    first: u64,
    pages: VecDeque<Option<Page<E>>>,
    spares: Vec<Box<[Option<E>]>>,
    /// Live entries below the window (keys below `first`'s page).
    stragglers: BTreeMap<u64, E>,
    /// One past the highest page a straggler may be on; `first >= floor`.
    floor: u64,
    len: usize,
}

impl<E> Slots<E> {
    pub(crate) fn new() -> Self {
        Slots {
            first: 0,
            pages: VecDeque::new(),
            spares: Vec::new(),
            stragglers: BTreeMap::new(),
            floor: 0,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn split(key: u64) -> (u64, usize) {
        (key >> PAGE_BITS, (key as usize) & (PAGE - 1))
    }

    /// Stores `e` under `key`; returns the previous entry (none for fresh keys).
    pub(crate) fn insert(&mut self, key: u64, e: E) -> Option<E> {
        let (page, off) = Self::split(key);
        if page < self.floor || (!self.pages.is_empty() && self.first - page.min(self.first) > GAP as u64) {
            // Below the window, or so far below it that extending it down would
            // keep empty pages alive: a straggler.
            self.floor = self.floor.max(page + 1);
            let old = self.stragglers.insert(key, e);
            self.len += usize::from(old.is_none());
            return old;
        }
        if self.pages.is_empty() {
            self.first = page;
        }
        if page < self.first {
            while page < self.first {
                self.pages.push_front(None);
                self.first -= 1;
            }
        }
        let idx = (page - self.first) as usize;
        while self.pages.len() <= idx {
            self.pages.push_back(None);
        }
        let spares = &mut self.spares;
        let p = self.pages[idx].get_or_insert_with(|| Page {
            live: 0,
            slots: spares.pop().unwrap_or_else(|| (0..PAGE).map(|_| None).collect()),
        });
        let old = p.slots[off].replace(e);
        if old.is_none() {
            p.live += 1;
            self.len += 1;
        }
        old
    }

    /// The window's index of `key`'s page, if the key is at or after the window.
    fn index(&self, key: u64) -> Option<(usize, usize)> {
        let (page, off) = Self::split(key);
        let idx = usize::try_from(page.checked_sub(self.first)?).ok()?;
        Some((idx, off))
    }

    pub(crate) fn get(&self, key: u64) -> Option<&E> {
        match self.index(key) {
            Some((idx, off)) => self.pages.get(idx)?.as_ref()?.slots[off].as_ref(),
            None => self.stragglers.get(&key),
        }
    }

    pub(crate) fn get_mut(&mut self, key: u64) -> Option<&mut E> {
        match self.index(key) {
            Some((idx, off)) => self.pages.get_mut(idx)?.as_mut()?.slots[off].as_mut(),
            None => self.stragglers.get_mut(&key),
        }
    }

    pub(crate) fn remove(&mut self, key: u64) -> Option<E> {
        let Some((idx, off)) = self.index(key) else {
            let e = self.stragglers.remove(&key)?;
            self.len -= 1;
            return Some(e);
        };
        let p = self.pages.get_mut(idx)?.as_mut()?;
        let e = p.slots[off].take()?;
        p.live -= 1;
        self.len -= 1;
        if p.live == 0 {
            if let Some(p) = self.pages[idx].take() {
                self.recycle(p.slots);
            }
            self.trim();
        }
        Some(e)
    }

    fn recycle(&mut self, slots: Box<[Option<E>]>) {
        let page_bytes = PAGE * std::mem::size_of::<Option<E>>();
        if self.spares.len() < (SPARE_BYTES / page_bytes.max(1)).max(1) {
            self.spares.push(slots);
        }
    }

    /// Drops empty pages at the front, so the page list starts at the oldest
    /// live key, and moves the entries of a live front page far behind the rest
    /// to `stragglers`.
    fn trim(&mut self) {
        loop {
            while let Some(None) = self.pages.front() {
                self.pages.pop_front();
                self.first += 1;
            }
            let lonely = self.pages.len() > GAP + 1 && self.pages.range(1..=GAP).all(Option::is_none);
            if !lonely {
                break;
            }
            let Some(Some(p)) = self.pages.pop_front() else { unreachable!("a live front page") };
            let base = self.first << PAGE_BITS;
            self.first += 1;
            self.floor = self.floor.max(self.first);
            let mut slots = p.slots;
            for (off, e) in slots.iter_mut().enumerate() {
                if let Some(e) = e.take() {
                    self.stragglers.insert(base + off as u64, e);
                }
            }
            self.recycle(slots);
        }
        // Empty pages at the back stay in the list: keys only grow, so the
        // next insert lands there or beyond. Dropping them made a stream whose
        // last page emptied after every item (one item in flight at a time,
        // behind long-lived items with far lower keys) push the whole gap of
        // empty entries back at every insert: 4 K of them per item at 18 M
        // keys behind 1 M pending, 5.8 µs per send+recv instead of 0.2.
        if self.pages.capacity() > 64 && self.pages.len() < self.pages.capacity() / 4 {
            self.pages.shrink_to(self.pages.len() * 2);
        }
    }

    /// Entries the table's buffers have room for: its pages, live and spare.
    #[cfg(all(test, not(delayq_loom)))]
    pub(crate) fn room(&self) -> usize {
        (self.pages.iter().filter(|p| p.is_some()).count() + self.spares.len()) * PAGE + self.stragglers.len()
    }

    /// Gives back the spare pages beyond those `need` entries would fill, and
    /// the page list's slack (`index::tidy`'s rule); everything, with no
    /// entry live and none needed.
    pub(crate) fn release_beyond(&mut self, need: usize) {
        if self.len == 0 && need == 0 {
            self.release_buffers();
            return;
        }
        let live = self.pages.iter().filter(|p| p.is_some()).count();
        let keep = (need.div_ceil(PAGE) + 1).saturating_sub(live);
        if self.spares.len() > keep {
            self.spares.truncate(keep);
            self.spares.shrink_to_fit();
        }
        if self.pages.capacity() > 64 && self.pages.len() * 4 < self.pages.capacity() {
            self.pages.shrink_to(self.pages.len() * 2);
        }
    }

    /// No entry live: drops the spare pages and the page list's buffer.
    pub(crate) fn release_buffers(&mut self) {
        debug_assert_eq!(self.len, 0);
        self.spares = Vec::new();
        self.pages = VecDeque::new();
        self.stragglers = BTreeMap::new();
    }

    /// Every live entry with its key, in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &E)> + '_ {
        let first = self.first;
        let window = self.pages.iter().enumerate().flat_map(move |(i, p)| {
            let base = (first + i as u64) << PAGE_BITS;
            p.iter().flat_map(move |p| {
                p.slots.iter().enumerate().filter_map(move |(o, e)| e.as_ref().map(|e| (base + o as u64, e)))
            })
        });
        self.stragglers.iter().map(|(&k, e)| (k, e)).chain(window)
    }

    /// Removes every entry, in key order.
    pub(crate) fn drain(&mut self) -> Vec<(u64, E)> {
        let mut out = Vec::with_capacity(self.len);
        out.extend(std::mem::take(&mut self.stragglers));
        let first = self.first;
        for (i, p) in std::mem::take(&mut self.pages).into_iter().enumerate() {
            let base = (first + i as u64) << PAGE_BITS;
            if let Some(p) = p {
                out.extend(
                    Vec::from(p.slots)
                        .into_iter()
                        .enumerate()
                        .filter_map(|(o, e)| e.map(|e| (base + o as u64, e))),
                );
            }
        }
        self.len = 0;
        self.spares.clear();
        out
    }

    /// Entries in the page list (live or not) and stragglers: what the table's
    /// bookkeeping costs beyond the pages themselves.
    #[cfg(test)]
    fn footprint(&self) -> (usize, usize) {
        (self.pages.len(), self.stragglers.len())
    }
}

impl<E> std::fmt::Debug for Slots<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slots")
            .field("len", &self.len)
            .field("pages", &self.pages.len())
            .field("stragglers", &self.stragglers.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove_across_pages_and_out_of_order() {
        let mut s = Slots::new();
        let keys = [5000u64, 3, 9000, 4096, 4095, 100_000];
        for &k in &keys {
            assert!(s.insert(k, k * 2).is_none());
        }
        assert_eq!(s.len(), keys.len());
        assert_eq!(s.get(4095), Some(&8190));
        assert_eq!(s.get(4094), None);
        assert_eq!(s.get(u64::MAX), None);
        let mut listed: Vec<u64> = s.iter().map(|(k, _)| k).collect();
        listed.sort();
        let mut want = keys.to_vec();
        want.sort();
        assert_eq!(listed, want);
        for &k in &keys {
            assert_eq!(s.remove(k), Some(k * 2));
            assert_eq!(s.remove(k), None);
        }
        assert_eq!(s.len(), 0);
        assert!(s.pages.is_empty(), "empty pages must be released");
    }

    #[test]
    fn a_long_lived_entry_does_not_pin_the_page_list() {
        let mut s = Slots::new();
        s.insert(7, 'f');
        // Stream a hundred pages of keys past it, each removed soon after.
        let mut most = 0;
        for k in (1u64 << PAGE_BITS)..(101 << PAGE_BITS) {
            s.insert(k, 'x');
            if k >= 64 + (1 << PAGE_BITS) {
                assert_eq!(s.remove(k - 64), Some('x'));
            }
            most = most.max(s.footprint().0);
        }
        assert!(most <= GAP + 3, "the page list grew to {most} entries behind one entry");
        assert_eq!(s.footprint().1, 1, "the far entry became a straggler");
        assert_eq!(s.get(7), Some(&'f'));
        assert_eq!(s.len(), 65);
        // Keys below the window (a late arrival) land among the stragglers.
        assert!(s.insert(9, 'g').is_none());
        assert_eq!(s.insert(9, 'h'), Some('g'));
        assert_eq!(s.len(), 66);
        let keys: Vec<u64> = s.iter().map(|(k, _)| k).take(3).collect();
        assert_eq!(keys[..2], [7, 9], "iteration stays in key order");
        assert_eq!(s.remove(7), Some('f'));
        assert_eq!(s.remove(7), None);
        let all = s.drain();
        assert_eq!(all.len(), 65);
        assert!(all.windows(2).all(|w| w[0].0 < w[1].0), "drain in key order");
        assert_eq!((s.len(), s.footprint()), (0, (0, 0)));
    }

    #[test]
    fn a_stream_far_past_live_pages_keeps_the_page_list() {
        // Live entries on the first 20 pages; the stream's keys start 100
        // pages on (keys sent and taken meanwhile), one item at a time.
        let mut s = Slots::new();
        for k in 0..(20u64 << PAGE_BITS) {
            s.insert(k, 'p');
        }
        let start = 120u64 << PAGE_BITS;
        s.insert(start, 'x');
        assert_eq!(s.remove(start), Some('x'));
        let (pages, stragglers) = s.footprint();
        assert_eq!((pages, stragglers), (121, 0));
        for k in start + 1..start + (1 << PAGE_BITS) - 1 {
            s.insert(k, 'x');
            assert_eq!(s.remove(k), Some('x'));
            // Dropping the empty back entries here made every insert push
            // them all back (the gap between the live pages and the stream).
            assert_eq!(s.footprint(), (pages, 0), "the page list was trimmed, to be rebuilt");
        }
        assert_eq!(s.len(), 20 << PAGE_BITS);
    }

    /// One far entry on page 0, a stream that makes it a straggler and then
    /// leaves the window empty.
    fn straggler_and_an_empty_window() -> Slots<char> {
        let mut s = Slots::new();
        s.insert(5, 'f');
        for k in (1u64 << PAGE_BITS)..(40 << PAGE_BITS) {
            s.insert(k, 'x');
            assert_eq!(s.remove(k), Some('x'));
        }
        assert_eq!(s.footprint(), (0, 1), "the far entry is a straggler, the window empty");
        s
    }

    #[test]
    fn a_late_key_into_an_empty_window_does_not_hide_a_straggler() {
        let mut s = straggler_and_an_empty_window();
        // A send that took its key long ago arrives now: same page as the straggler.
        assert!(s.insert(3, 'l').is_none());
        assert_eq!(s.get(5), Some(&'f'), "the straggler must stay reachable");
        assert_eq!(s.get(3), Some(&'l'));
        assert_eq!(s.iter().map(|(k, _)| k).collect::<Vec<_>>(), [3, 5]);
        assert_eq!(s.remove(5), Some('f'));
        assert_eq!(s.remove(3), Some('l'));
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn late_keys_stepping_the_window_down_do_not_hide_a_straggler() {
        let mut s = straggler_and_an_empty_window();
        // The window restarts far above, then late keys walk it down in steps of
        // at most GAP pages, towards the straggler's page.
        let mut page = 40u64;
        s.insert(page << PAGE_BITS, 'w');
        while page > GAP as u64 {
            page -= GAP as u64;
            s.insert(page << PAGE_BITS, 'l');
        }
        s.insert(1, 'l');
        assert_eq!(s.get(5), Some(&'f'), "the straggler must stay reachable");
        assert_eq!(s.get_mut(5).copied(), Some('f'));
        let keys: Vec<u64> = s.iter().map(|(k, _)| k).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "iteration in key order: {keys:?}");
        assert_eq!(s.remove(5), Some('f'));
        let n = s.len();
        assert_eq!(n, keys.len() - 1);
        assert_eq!(s.drain().len(), n);
    }
}
