//! A [`Worker`](crate::Worker)'s per-kind limits: at most `n` handlers of a
//! kind at once ([`concurrency_for`](crate::WorkerBuilder::concurrency_for)),
//! at most `n` starts per period ([`rate_limit_for`](crate::WorkerBuilder::rate_limit_for)).
//!
//! A kind at its limit is *excluded* from the reserves the worker's threads
//! make ([`JobQueue::reserve_excluding`](crate::JobQueue::reserve_excluding)):
//! its jobs stay pending and unleased, and the other kinds flow. The
//! accounting is exact: a thread about to reserve counts as a possible
//! handler of every limited kind it accepts (`offered`), so `running +
//! offered` never passes a kind's limit, however many threads reserve at
//! once, and no job is leased only to be given back.
//!
//! When a kind opens again (a handler of it finished, a token came due) while
//! some thread's reserve excludes it, the limiter raises the [`StopSignal`]
//! those reserves wait on and hands out a fresh one: they return, and
//! reserve again with the new exclusions. Nothing polls: the refill thread
//! sleeps until the next token of a kind that some reserve is waiting for.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::stop::StopSignal;

/// A kind's limits as configured.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Limit {
    /// At most this many handlers at once.
    pub(crate) max: Option<usize>,
    /// At most `n` starts per `per` (a token bucket).
    pub(crate) rate: Option<(u32, Duration)>,
}

pub(crate) struct Limiter {
    state: Mutex<State>,
    /// Wakes the refill thread: a reserve began excluding a kind out of
    /// tokens, or the worker shuts down.
    refill_cv: Condvar,
    has_rates: bool,
}

struct State {
    kinds: HashMap<String, Kind>,
    /// What the threads' current reserves wait on (with the worker's stop).
    interrupt: StopSignal,
    /// Bumped with each interrupt: the reserves of older generations are
    /// ending, and no longer count as excluding anything.
    gen: u64,
    closed: bool,
}

struct Kind {
    max: Option<usize>,
    /// Handlers of this kind running.
    running: usize,
    /// Reserves in flight that accept this kind.
    offered: usize,
    /// Reserves of the current generation in flight that exclude this kind.
    excluding: usize,
    bucket: Option<Bucket>,
}

struct Bucket {
    capacity: f64,
    tokens: f64,
    /// The time one token takes to come back.
    per_token: Duration,
    last: Instant,
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let gained = now.saturating_duration_since(self.last).as_secs_f64() / self.per_token.as_secs_f64();
        self.tokens = (self.tokens + gained).min(self.capacity);
        self.last = now;
    }

    /// When `needed` whole tokens will be there.
    fn due(&self, needed: f64) -> Instant {
        let missing = (needed - self.tokens).max(0.0);
        self.last + self.per_token.mul_f64(missing)
    }
}

impl Kind {
    /// Whether one more reserve may accept this kind.
    fn open(&self) -> bool {
        self.max.is_none_or(|max| self.running + self.offered < max)
            && self.bucket.as_ref().is_none_or(|b| b.tokens - self.offered as f64 >= 1.0)
    }
}

/// One reserve's part in the accounting, from [`Limiter::begin`] to
/// [`Limiter::end`].
pub(crate) struct Ticket {
    accepted: Vec<String>,
    /// The kinds this reserve must not lease.
    pub(crate) exclude: Vec<String>,
    /// Raised when the exclusions change or the worker stops.
    pub(crate) interrupt: StopSignal,
    gen: u64,
}

impl Limiter {
    /// `None` for no limits.
    pub(crate) fn new(limits: HashMap<String, Limit>) -> Option<Limiter> {
        if limits.is_empty() {
            return None;
        }
        let now = Instant::now();
        let has_rates = limits.values().any(|l| l.rate.is_some());
        let kinds = limits
            .into_iter()
            .map(|(kind, l)| {
                let bucket = l.rate.map(|(n, per)| Bucket {
                    capacity: f64::from(n),
                    tokens: f64::from(n),
                    per_token: per / n.max(1),
                    last: now,
                });
                (kind, Kind { max: l.max, running: 0, offered: 0, excluding: 0, bucket })
            })
            .collect();
        Some(Limiter {
            state: Mutex::new(State { kinds, interrupt: StopSignal::new(), gen: 0, closed: false }),
            refill_cv: Condvar::new(),
            has_rates,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a refill thread is needed.
    pub(crate) fn has_rates(&self) -> bool {
        self.has_rates
    }

    /// Before a reserve: which kinds it accepts (counted as offered) and
    /// which it excludes.
    pub(crate) fn begin(&self) -> Ticket {
        let mut st = self.lock();
        let now = Instant::now();
        let mut accepted = Vec::new();
        let mut exclude = Vec::new();
        let mut starved = false;
        for (name, k) in st.kinds.iter_mut() {
            if let Some(b) = &mut k.bucket {
                b.refill(now);
            }
            if k.open() {
                k.offered += 1;
                accepted.push(name.clone());
            } else {
                k.excluding += 1;
                starved |= k.bucket.is_some();
                exclude.push(name.clone());
            }
        }
        let interrupt = st.interrupt.clone();
        let gen = st.gen;
        drop(st);
        if starved {
            self.refill_cv.notify_all();
        }
        Ticket { accepted, exclude, interrupt, gen }
    }

    /// After a reserve that got a job of `kind` (`None`: no job): the job's
    /// kind counts as running and takes a token.
    pub(crate) fn end(&self, ticket: Ticket, kind: Option<&str>) {
        let mut st = self.lock();
        if ticket.gen == st.gen {
            for name in &ticket.exclude {
                if let Some(k) = st.kinds.get_mut(name) {
                    k.excluding -= 1;
                }
            }
        }
        for name in &ticket.accepted {
            if let Some(k) = st.kinds.get_mut(name) {
                k.offered -= 1;
            }
        }
        if let Some(k) = kind.and_then(|kind| st.kinds.get_mut(kind)) {
            k.running += 1;
            if let Some(b) = &mut k.bucket {
                b.tokens -= 1.0;
            }
        }
        // An offer given back may open a kind another reserve excludes.
        let reopened =
            ticket.accepted.iter().any(|n| st.kinds.get(n).is_some_and(|k| k.excluding > 0 && k.open()));
        if reopened {
            Self::interrupt(&mut st);
        }
    }

    /// Whether `kind` is limited (its handlers are counted).
    pub(crate) fn limits(&self, kind: &str) -> bool {
        self.lock().kinds.contains_key(kind)
    }

    /// A handler of `kind` finished.
    pub(crate) fn done(&self, kind: &str) {
        let mut st = self.lock();
        let Some(k) = st.kinds.get_mut(kind) else { return };
        k.running = k.running.saturating_sub(1);
        if k.excluding > 0 && k.open() {
            Self::interrupt(&mut st);
        }
    }

    /// Ends every reserve in flight now (the worker is stopping).
    pub(crate) fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        Self::interrupt(&mut st);
        drop(st);
        self.refill_cv.notify_all();
    }

    fn interrupt(st: &mut State) {
        st.gen += 1;
        for k in st.kinds.values_mut() {
            k.excluding = 0;
        }
        let old = std::mem::take(&mut st.interrupt);
        if st.closed {
            st.interrupt.raise(); // later reserves return at once too
        }
        old.raise();
    }

    /// The refill thread: sleeps until the next token of a kind that a
    /// reserve excludes for want of tokens, then lets the reserves retry.
    /// No timer while no reserve waits for a token.
    pub(crate) fn refill_loop(&self) {
        let mut st = self.lock();
        loop {
            if st.closed {
                return;
            }
            let now = Instant::now();
            let mut next: Option<Instant> = None;
            let mut reopened = false;
            for k in st.kinds.values_mut() {
                let Some(b) = &mut k.bucket else { continue };
                b.refill(now);
                if k.excluding == 0 {
                    continue;
                }
                if k.open() {
                    reopened = true;
                } else if k.max.is_none_or(|max| k.running + k.offered < max) {
                    // Only tokens hold it: they come at a known time.
                    let due = k.bucket.as_ref().map_or(now, |b| b.due(k.offered as f64 + 1.0));
                    next = Some(next.map_or(due, |n| n.min(due)));
                }
            }
            if reopened {
                Self::interrupt(&mut st);
                continue;
            }
            st = match next {
                None => self.refill_cv.wait(st).unwrap_or_else(PoisonError::into_inner),
                Some(at) => {
                    let wait = at.saturating_duration_since(now).max(Duration::from_micros(100));
                    self.refill_cv.wait_timeout(st, wait).unwrap_or_else(PoisonError::into_inner).0
                }
            };
        }
    }
}
