//! The key → entry table of the timer index: a page table indexed by key.
//!
//! Keys are handed out by one counter, so the live keys form a dense-ish window of
//! integers. The table splits a key into (page, offset) — two array indexes, no
//! hashing — and allocates a page of `PAGE` entries only while one of its keys is
//! live. Inserts walk pages sequentially (producers send in key order), so they
//! stay in cache; a page is freed (or kept as a spare) when its last entry goes,
//! so memory follows the live items, not the key range.

use std::collections::VecDeque;

const PAGE_BITS: u32 = 12;
const PAGE: usize = 1 << PAGE_BITS;
/// Emptied pages kept for reuse, so a steady stream neither allocates nor
/// faults in fresh memory (a page is `PAGE` entries).
const SPARES: usize = 16;

struct Page<E> {
    live: usize,
    slots: Box<[Option<E>]>,
}

pub(crate) struct Slots<E> {
    /// Page number of `pages[0]`.
    first: u64,
    pages: VecDeque<Option<Page<E>>>,
    spares: Vec<Box<[Option<E>]>>,
    len: usize,
}

impl<E> Slots<E> {
    pub(crate) fn new() -> Self {
        Slots { first: 0, pages: VecDeque::new(), spares: Vec::new(), len: 0 }
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
        if self.pages.is_empty() {
            self.first = page;
        }
        while page < self.first {
            self.pages.push_front(None);
            self.first -= 1;
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

    pub(crate) fn get(&self, key: u64) -> Option<&E> {
        let (page, off) = Self::split(key);
        let idx = usize::try_from(page.checked_sub(self.first)?).ok()?;
        self.pages.get(idx)?.as_ref()?.slots[off].as_ref()
    }

    pub(crate) fn get_mut(&mut self, key: u64) -> Option<&mut E> {
        let (page, off) = Self::split(key);
        let idx = usize::try_from(page.checked_sub(self.first)?).ok()?;
        self.pages.get_mut(idx)?.as_mut()?.slots[off].as_mut()
    }

    pub(crate) fn remove(&mut self, key: u64) -> Option<E> {
        let (page, off) = Self::split(key);
        let idx = usize::try_from(page.checked_sub(self.first)?).ok()?;
        let p = self.pages.get_mut(idx)?.as_mut()?;
        let e = p.slots[off].take()?;
        p.live -= 1;
        self.len -= 1;
        if p.live == 0 {
            if let Some(p) = self.pages[idx].take() {
                if self.spares.len() < SPARES {
                    self.spares.push(p.slots);
                }
            }
            self.trim();
        }
        Some(e)
    }

    /// Drops empty pages at both ends, so the page list spans only live keys.
    fn trim(&mut self) {
        while let Some(None) = self.pages.front() {
            self.pages.pop_front();
            self.first += 1;
        }
        while let Some(None) = self.pages.back() {
            self.pages.pop_back();
        }
        if self.pages.capacity() > 64 && self.pages.len() < self.pages.capacity() / 4 {
            self.pages.shrink_to(self.pages.len() * 2);
        }
    }

    /// Every live entry with its key, in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &E)> + '_ {
        let first = self.first;
        self.pages.iter().enumerate().flat_map(move |(i, p)| {
            let base = (first + i as u64) << PAGE_BITS;
            p.iter().flat_map(move |p| {
                p.slots.iter().enumerate().filter_map(move |(o, e)| e.as_ref().map(|e| (base + o as u64, e)))
            })
        })
    }

    /// Removes every entry.
    pub(crate) fn drain(&mut self) -> Vec<(u64, E)> {
        let mut out = Vec::with_capacity(self.len);
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
}

impl<E> std::fmt::Debug for Slots<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slots").field("len", &self.len).field("pages", &self.pages.len()).finish()
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
}
