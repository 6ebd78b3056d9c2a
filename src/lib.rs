//! `delayq`: a concurrent priority delay queue for high-contention pipelines.
//!
//! Items are sent with a deadline; they come out only once due, earliest deadline
//! first, to many consumers, from many producers, with nothing lost and nothing
//! early.
//!
//! ```
//! use std::time::{Duration, Instant};
//!
//! let (tx, rx) = delayq::unbounded();
//! let start = Instant::now();
//! tx.send_after("later", Duration::from_millis(20)).unwrap();
//! tx.send_after("sooner", Duration::from_millis(10)).unwrap();
//! assert_eq!(rx.recv(), Ok("sooner"));
//! assert_eq!(rx.recv(), Ok("later"));
//! assert!(start.elapsed() >= Duration::from_millis(20));
//! ```
//!
//! # How it works
//!
//! Client threads never touch the timer heap (the "SingleFlight" design of the
//! ekit delay-queue proposal, seed 002):
//!
//! ```text
//! producers ──send──▶ [ingress ring] ──▶ enqueue proxy ──┐
//!                     (lock-free,        (drains ≤1024    │  timers lock:
//!                      bounded)           cmds per batch) ▼  4-ary heap
//!                                                       heap  (2 threads only)
//!                                                         │
//! consumers ◀──recv── [egress ring] ◀── dequeue proxy ◀──┘
//!                     (lock-free,        (moves every due item per wakeup,
//!                      bounded)           sleeps until the next deadline)
//! ```
//!
//! - Producers reserve a unit of `len` (blocking only on a full bounded queue),
//!   push a command into a bounded lock-free ring (Vyukov's bounded MPMC queue)
//!   and unpark the enqueue proxy only if it sleeps.
//! - The enqueue proxy drains commands in batches and applies each batch in one
//!   critical section of the timers lock (flat combining): O(log n) per insert
//!   (a 4-ary heap), O(1) for cancel and reschedule (tombstones).
//! - The dequeue proxy moves every due item into a second bounded ring in
//!   deadline order, wakes that many parked consumers, and parks until the next
//!   deadline. The heap sees at most 1:1 contention.
//! - No thread polls or ticks: idle proxies are parked, and the dequeue proxy's
//!   only timer is the head's deadline. The wakeup protocol (an earlier head must
//!   wake a sleeping dequeue proxy) is in `wakeup.rs`, with its invariant.
//! - Costs: a send is one CAS on the ring, one on `len`, a SeqCst fence and a
//!   load; a receive is one CAS on the ring, one on `len` and a fence. The price of
//!   the design is latency of two hand-offs (producer → proxy → proxy → consumer)
//!   and two threads per queue.
//!
//! Time enters only through the [`Clock`]: [`SystemClock`] by default, or a
//! [`MockClock`] for deterministic tests (and loom models).
//!
//! # Guarantees
//!
//! - **Never early**: no item is received before its deadline by the queue's clock.
//! - **Horizon**: deadlines are nanoseconds from an origin a century before the
//!   queue was built, and run out about 484 years after it. A deadline at or beyond
//!   that horizon (`send_after(Duration::MAX)`, `Instant` + 600 years) is never
//!   due, however far the clock moves (a [`MockClock`] stepped past it stops one
//!   nanosecond short); it stays pending until cancelled, taken or shut down, and
//!   [`Receiver::peek_deadline`] / [`Receiver::take_pending`] report the horizon
//!   instant for it.
//! - **Order**: the dequeue proxy never moves an item while an item with an
//!   earlier deadline (or the same deadline and a smaller key) is in the timer
//!   index, so due items leave in nondecreasing deadline order, equal deadlines in
//!   key order (keys are numbered by the send; for one producer, its send order).
//!   The exception is an item that reaches the index already due (sent with a past
//!   deadline, or a send still in flight when its deadline passed; a send takes
//!   microseconds to reach the index): it leaves after the items moved before it
//!   arrived. So each consumer sees nondecreasing deadlines among items that were
//!   in the index before they fell due. On a [`MockClock`] every item sent before a
//!   clock step is in the index before the proxy sees the step.
//! - **Exactly once**: every item sent is exactly one of: received once, returned
//!   by [`Sender::cancel`], handed back in a send error, returned by
//!   [`Receiver::take_pending`], or dropped once when the last receiver goes.
//! - **Length**: [`Sender::len`] counts items sent and not yet received,
//!   cancelled or taken, exactly from the moment a send returns.
//! - **Shutdown**: with every sender gone (or after [`Receiver::close`]), receivers
//!   get every pending item when due, then [`RecvError`]. With every receiver gone,
//!   sends fail with the item handed back, pending items are dropped and the
//!   proxies exit. The last handle joins both proxy threads.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub, rust_2018_idioms)]

mod builder;
mod clock;
mod dequeue;
mod enqueue;
mod error;
mod expired;
mod heap;
mod index;
mod ingress;
mod key;
#[cfg(delayq_loom)]
#[doc(hidden)]
pub mod loom_api;
mod oneshot;
mod receiver;
mod ring;
mod sender;
mod shared;
mod slots;
mod sync;
pub mod timer;
mod waiters;
mod wakeup;
mod wheel;
pub mod workqueue;

pub use crate::builder::{bounded, unbounded, Builder};
pub use crate::clock::{Clock, MockClock, SystemClock};
pub use crate::error::{
    BuildError, RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};
pub use crate::expired::Expired;
pub use crate::key::Key;
pub use crate::receiver::{IntoIter, Iter, Receiver, TryIter};
pub use crate::sender::Sender;
