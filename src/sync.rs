//! The one door to atomics, locks, cells, parking, spinning and threads.
//!
//! Normally these are the standard library's types (and `crossbeam-utils`'s
//! `Parker`); compiled with `RUSTFLAGS="--cfg delayq_loom"` they are loom's, so the
//! model checks in `loom-tests/` explore the real protocol code of the crate and
//! not a copy of it. Protocol code never names `std::sync::atomic`,
//! `std::thread::park` or `core::cell::UnsafeCell` directly.
//!
//! Loom does not model time: under loom every timed park is an untimed park, and
//! time only moves through a `MockClock`, whose `advance` wakes the sleepers.

#[cfg(not(delayq_loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
/// For the layers' own waits (`timer`, `workqueue`); the core parks instead.
#[cfg(all(not(delayq_loom), any(feature = "timer", feature = "workqueue")))]
pub(crate) use std::sync::Condvar;
#[cfg(not(delayq_loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};
#[cfg(not(delayq_loom))]
pub(crate) use std::thread;

#[cfg(delayq_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(all(delayq_loom, any(feature = "timer", feature = "workqueue")))]
pub(crate) use loom::sync::Condvar;
#[cfg(delayq_loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(delayq_loom)]
pub(crate) use loom::thread;

use std::time::Instant;

/// Locks `m`, ignoring poisoning: every critical section in this crate leaves its
/// data consistent before it can unwind (user code never runs under our locks), so
/// a panic elsewhere must not wedge the queue for the other threads.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One step of a bounded spin: a CPU hint normally, a yield under loom (or loom
/// would explore the spin forever).
#[inline]
pub(crate) fn spin() {
    #[cfg(not(delayq_loom))]
    std::hint::spin_loop();
    #[cfg(delayq_loom)]
    loom::thread::yield_now();
}

/// Exponential backoff for a wait on a peer that is a few instructions from done:
/// spins a little, then yields (crossbeam-utils' `Backoff`; under loom every step
/// yields).
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    #[cfg(not(delayq_loom))]
    inner: crossbeam_utils::Backoff,
}

impl Backoff {
    pub(crate) fn snooze(&mut self) {
        #[cfg(not(delayq_loom))]
        self.inner.snooze();
        #[cfg(delayq_loom)]
        loom::thread::yield_now();
    }
}

/// Gives the CPU away for a moment (used where a peer is known to be mid-write).
#[inline]
pub(crate) fn yield_now() {
    thread::yield_now();
}

/// `UnsafeCell` with loom's closure API, so that loom can check every access.
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(
    #[cfg(not(delayq_loom))] std::cell::UnsafeCell<T>,
    #[cfg(delayq_loom)] loom::cell::UnsafeCell<T>,
);

impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        #[cfg(not(delayq_loom))]
        return UnsafeCell(std::cell::UnsafeCell::new(value));
        #[cfg(delayq_loom)]
        return UnsafeCell(loom::cell::UnsafeCell::new(value));
    }

    /// Runs `f` with a const raw pointer to the contents. The caller must hold a
    /// right to read this cell that no writer shares at the moment.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        #[cfg(not(delayq_loom))]
        return f(self.0.get());
        #[cfg(delayq_loom)]
        return self.0.with(f);
    }

    /// Runs `f` with a mutable raw pointer to the contents. The caller must hold
    /// whatever exclusive right the protocol grants over this cell.
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(not(delayq_loom))]
        return f(self.0.get());
        #[cfg(delayq_loom)]
        return self.0.with_mut(f);
    }
}

/// Blocks one thread until it is unparked (or a deadline passes). A token is
/// remembered: an `unpark` before `park` makes the next `park` return at once,
/// which is what makes "register, re-check, park" free of lost wakeups.
#[derive(Debug)]
pub(crate) struct Parker {
    #[cfg(not(delayq_loom))]
    inner: crossbeam_utils::sync::Parker,
    #[cfg(delayq_loom)]
    inner: std::sync::Arc<loom_parker::Inner>,
}

/// The waking half of a [`Parker`]; cheap to clone, `Send + Sync`.
#[derive(Debug, Clone)]
pub(crate) struct Unparker {
    #[cfg(not(delayq_loom))]
    inner: crossbeam_utils::sync::Unparker,
    #[cfg(delayq_loom)]
    inner: std::sync::Arc<loom_parker::Inner>,
}

impl Parker {
    pub(crate) fn new() -> Self {
        #[cfg(not(delayq_loom))]
        return Parker { inner: crossbeam_utils::sync::Parker::new() };
        #[cfg(delayq_loom)]
        return Parker { inner: std::sync::Arc::new(loom_parker::Inner::new()) };
    }

    pub(crate) fn unparker(&self) -> Unparker {
        #[cfg(not(delayq_loom))]
        return Unparker { inner: self.inner.unparker().clone() };
        #[cfg(delayq_loom)]
        return Unparker { inner: self.inner.clone() };
    }

    /// Parks until unparked, or until `deadline` (real time) if one is given.
    /// May return spuriously; callers re-check their condition.
    pub(crate) fn park(&self, deadline: Option<Instant>) {
        #[cfg(not(delayq_loom))]
        match deadline {
            Some(d) => self.inner.park_deadline(d),
            None => self.inner.park(),
        }
        #[cfg(delayq_loom)]
        {
            let _ = deadline; // loom has no time; a MockClock drives every model.
            self.inner.park();
        }
    }
}

impl Unparker {
    pub(crate) fn unpark(&self) {
        self.inner.unpark();
    }
}

#[cfg(delayq_loom)]
mod loom_parker {
    use loom::sync::{Condvar, Mutex};

    #[derive(Debug)]
    pub(crate) struct Inner {
        token: Mutex<bool>,
        cv: Condvar,
    }

    impl Inner {
        pub(crate) fn new() -> Self {
            Inner { token: Mutex::new(false), cv: Condvar::new() }
        }

        pub(crate) fn park(&self) {
            let mut token = self.token.lock().unwrap();
            while !*token {
                token = self.cv.wait(token).unwrap();
            }
            *token = false;
        }

        pub(crate) fn unpark(&self) {
            *self.token.lock().unwrap() = true;
            self.cv.notify_one();
        }
    }
}

/// A process-wide counter of ids (queues, schedulers), for a `static`. Plain std
/// atomic on purpose: it takes part in no protocol, and loom atomics cannot live
/// in a `static`.
#[derive(Debug)]
pub(crate) struct IdCounter(std::sync::atomic::AtomicU64);

impl IdCounter {
    pub(crate) const fn new() -> IdCounter {
        IdCounter(std::sync::atomic::AtomicU64::new(1))
    }

    /// A number no earlier call returned.
    pub(crate) fn next(&self) -> u64 {
        // Relaxed: ids only need to be distinct.
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

/// Sets the calling thread's nice value (Linux `setpriority(PRIO_PROCESS, 0, n)`,
/// which on Linux applies to the calling thread only). Lowering it below the
/// thread's current value needs `CAP_SYS_NICE` or a `RLIMIT_NICE` that allows
/// it: the kernel's error comes back as it is (`PermissionDenied`). Elsewhere, where
/// the call would change the whole process, it is `Unsupported`; under loom, a
/// no-op.
pub(crate) fn set_nice(nice: i32) -> std::io::Result<()> {
    #[cfg(all(target_os = "linux", not(delayq_loom)))]
    {
        extern "C" {
            fn setpriority(
                which: std::ffi::c_int,
                who: std::ffi::c_uint,
                prio: std::ffi::c_int,
            ) -> std::ffi::c_int;
        }
        const PRIO_PROCESS: std::ffi::c_int = 0;
        // SAFETY: the declaration matches `<sys/resource.h>` on Linux (glibc and
        // musl: `int setpriority(int which, id_t who, int prio)`, `id_t` being a
        // 32-bit unsigned integer); the call takes three integers by value and
        // touches no memory of ours; with `who == 0` it changes a scheduling
        // attribute of the calling thread only (Linux keeps nice per thread).
        let r = unsafe { setpriority(PRIO_PROCESS, 0, nice) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(delayq_loom)]
    {
        let _ = nice;
        Ok(())
    }
    #[cfg(all(not(target_os = "linux"), not(delayq_loom)))]
    {
        let _ = nice;
        Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "per-thread nice values need Linux"))
    }
}

/// Timer slack of a consumer's timed park while it leads for a deadline
/// (`Clock::park_lead`): the kernel's default of 50 µs would be added to the
/// lateness of what it leads for; none at all costs a wake-up for every item
/// when items fall due microseconds apart, where 25 µs lets one wake-up cover
/// the few due within it (16 x 16 at 100 K items/s: p50 lateness 24 -> 16 µs,
/// CPU per item 6.7 -> 7.1 µs; at 2 µs, 7.5 µs and 9.7 µs).
pub(crate) const LEAD_TIMER_SLACK_NS: u64 = 25_000;

/// Parks until `deadline` (or an unpark) with this thread's timer slack at
/// `ns` for the wait, and puts the thread's own slack back after it: the
/// calling thread is the user's (a consumer), so its setting is left as it
/// was. Linux only (`PR_GET_TIMERSLACK`, read once per thread); elsewhere,
/// and under loom, a plain timed park.
pub(crate) fn park_with_slack(parker: &Parker, deadline: Instant, ns: u64) {
    #[cfg(all(target_os = "linux", not(delayq_loom)))]
    {
        thread_local! {
            /// The thread's own slack, read at its first lead.
            static OWN: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
        }
        let own = OWN
            .try_with(|own| match own.get() {
                Some(v) => v,
                None => {
                    let v = timer_slack();
                    own.set(Some(v));
                    v
                }
            })
            .ok();
        match own {
            Some(own) if own > ns => {
                set_timer_slack(ns);
                parker.park(Some(deadline));
                set_timer_slack(own);
            }
            _ => parker.park(Some(deadline)),
        }
    }
    #[cfg(not(all(target_os = "linux", not(delayq_loom))))]
    {
        let _ = ns;
        parker.park(Some(deadline));
    }
}

#[cfg(all(target_os = "linux", not(delayq_loom)))]
extern "C" {
    fn prctl(option: std::ffi::c_int, ...) -> std::ffi::c_int;
}

/// This thread's timer slack in nanoseconds (Linux `PR_GET_TIMERSLACK`).
#[cfg(all(target_os = "linux", not(delayq_loom)))]
fn timer_slack() -> u64 {
    const PR_GET_TIMERSLACK: std::ffi::c_int = 30;
    // SAFETY: PR_GET_TIMERSLACK takes no argument, touches no memory of ours
    // and returns the calling thread's slack (or -1 on an old kernel).
    let r = unsafe { prctl(PR_GET_TIMERSLACK) };
    // An error reads as 0: nothing is changed then.
    u64::try_from(r).unwrap_or(0)
}

/// Asks the kernel to fire this thread's timed waits within `ns` of their
/// deadline (Linux `PR_SET_TIMERSLACK`; the default slack is 50 µs, which would be
/// added to the lateness of every item). Elsewhere, and under loom, a no-op.
pub(crate) fn set_timer_slack(ns: u64) {
    #[cfg(all(target_os = "linux", not(delayq_loom)))]
    {
        const PR_SET_TIMERSLACK: std::ffi::c_int = 29;
        // SAFETY: PR_SET_TIMERSLACK takes one unsigned long by value and touches
        // no memory of ours; it only changes a scheduling attribute of the calling
        // thread. A failure (an old kernel) leaves the default slack, which is fine.
        unsafe {
            prctl(PR_SET_TIMERSLACK, ns as std::ffi::c_ulong);
        }
    }
    #[cfg(not(all(target_os = "linux", not(delayq_loom))))]
    let _ = ns;
}
