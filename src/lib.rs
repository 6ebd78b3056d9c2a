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
//! tx.send_at("later", start + Duration::from_millis(20)).unwrap();
//! tx.send_at("sooner", start + Duration::from_millis(10)).unwrap();
//! assert_eq!(rx.recv(), Ok("sooner"));
//! assert_eq!(rx.recv(), Ok("later"));
//! assert!(start.elapsed() >= Duration::from_millis(20));
//! ```
//!
//! # How it works
//!
//! Producers hand commands to an enqueue role and take due items that a
//! dequeue role moved out; the timer index is shared by those two roles only.
//! This is the "SingleFlight" design proposed for the ekit Go library's
//! delay queue. Each role is a dedicated proxy thread *and* a token: whoever
//! is present takes the token and performs the role — a producer its batch of
//! inserts, the consumer awake at a deadline the move of what is due — and the
//! proxy threads perform only what nobody is there for.
//!
//! ```text
//! producers ──send──▶ [ingress ring] ──▶ enqueue role ───┐   timers lock:
//!                     (lock-free,        (the pusher that │   timing wheel
//!                      bounded)           found it free:  ▼
//!                                         ≤256 per lock) index (2 roles only)
//!                                                         │
//! consumers ◀──recv── [egress ring] ◀── dequeue role ◀───┘
//!                     (lock-free,        (the consumer that found the ring
//!                      bounded)           empty and an item due, or the one
//!                                         leading at the next deadline)
//! ```
//!
//! - A send reserves a unit of `len`, pushes a command into a bounded
//!   lock-free ring (Dmitry Vyukov's bounded MPMC queue; a momentarily full
//!   ring spills into a locked overflow list, or makes a blocking send wait),
//!   and then tries the enqueue role's token: if it is free, the sender
//!   applies the commands waiting in the ring — its own and other producers'
//!   — in one critical section of the timers lock (flat combining: Hendler,
//!   Incze, Shavit and Tzafrir, SPAA 2010), at most 256 four times over, and
//!   rings the enqueue proxy only for what it leaves. If another producer
//!   holds the token, the send returns at once: that holder looks again
//!   after its release. Wake-ups a holder owes are issued after the release.
//! - The index is a hierarchical timing wheel (Varghese and Lauck, SOSP 1987)
//!   with exact `(deadline, key)` order: insert O(1), each item cascades at
//!   most once per level; cancel and reschedule are O(1) (stale nodes become
//!   tombstones, swept in bulk). A 4-ary heap is the alternative backend
//!   (O(log n) insert).
//! - A receive takes the oldest entry of a second ring, which holds due items
//!   only (one CAS). When it is empty and an item in the index is due, the
//!   receiver takes the dequeue role's token and moves every due item into
//!   the ring, then takes one; the others follow, each consumer that leaves
//!   items behind waking one more. When nothing is due, one waiting receiver
//!   leads, as in Java's `DelayQueue`: it sleeps until the index's next
//!   deadline and moves what is due itself, the others sleep until woken; a
//!   send whose item is due before the leader's deadline wakes one. So an
//!   item that falls due while a receiver waits costs one wake-up, that
//!   receiver's own timer. An async receiver, which cannot sleep with a
//!   timeout, asks the dequeue proxy to lead for it. [`Builder::helping`]
//!   (`false`) leaves every piece of work to the two proxy threads.
//! - No thread polls or ticks: idle proxies are parked, and the only timers
//!   are the leader's (and, for a few wake-ups after a burst, the dequeue
//!   proxy's, to give the index's memory back). The hand-offs that keep a
//!   push from being left behind and a due item from waiting with nobody to
//!   move it are written up in `role.rs` and `lead.rs`, with their
//!   invariants; loom checks them (`loom-tests/`).
//! - `try_recv` says [`TryRecvError::Empty`] only when, at some instant of the
//!   call, no due item had been sent and not yet received: it applies the
//!   commands still on their way and moves what is due before it says so.
//! - Admission: while the consumers fall behind (the oldest due item waits
//!   longer than 200 µs while they take, due items wait for room in the
//!   consumers' ring, or more than 1024 commands queue in the ingress ring),
//!   blocking sends pause at a gate, at most 1 ms each, so that unthrottled
//!   producers cannot build a backlog behind the deadlines. A send pauses
//!   after it has handed its item over, so the pause slows the caller's next
//!   send, not the item just sent. A thread that performed the last dequeue
//!   round is a consumer and does not pause for the lag (a thread that sends
//!   a burst and then receives it). The gate is no capacity (a consumer that
//!   never comes costs a send one pause, not a hang), `try_send_*` and the
//!   async sends pass it, and a [`MockClock`] queue never shuts it
//!   (`admission.rs`).
//! - Costs per item: a send reads `closed`, does an RMW on `len` (a CAS loop
//!   when bounded), a SeqCst fence, a second read of `closed`, a relaxed RMW
//!   for its key, a CAS on the ingress tail, a stamp store, a SeqCst fence
//!   and a look at the enqueue role's token (plus, when it is free, the role's
//!   work: a CAS on the token, the timers lock, the inserts, a fence); a
//!   receive does a CAS on the egress head, an RMW on `len`, a fence and a
//!   few loads (plus, when it runs a round, the token, the timers lock and the
//!   moves; wake-ups only when someone waits). The two proxy threads per
//!   queue sleep while clients perform the roles; they compete for the CPU
//!   like any other thread when they run, and [`Builder::proxy_nice`] (which
//!   needs `CAP_SYS_NICE` for a value below the caller's own) gives them a
//!   larger share.
//! - Memory: a pending item costs its entry in the key table (deadline and
//!   item, no padding for the table's empty slots) and a 16-byte node: 32
//!   bytes for an 8-byte item. What a burst grew goes back within 600 ms of
//!   its last item, with or without traffic, on any clock (`tidy.rs`).
//! - Rings hold at most 2^30 slots; every ring size is a power of two.
//!
//! Time enters only through the [`Clock`]: [`SystemClock`] by default, or a
//! [`MockClock`] for deterministic tests (and loom models).
//!
//! # Features
//!
//! The core needs no feature and pulls in `crossbeam-utils` only. Layers on top,
//! each using the core through its public API (and, inside this crate, its `sync`
//! facade and its helper that drops user values with panics contained):
//!
//! | feature | module | what |
//! | --- | --- | --- |
//! | `timer` | `timer` | scheduled callbacks on a rayon pool (adds `rayon`) |
//! | `workqueue` | `workqueue` | Kubernetes client-go's work queue |
//! | `async` | (root) | `recv_async`, `send_at_async`, `Stream`s: any executor, no runtime timer (adds `futures-core`) |
//! | `metrics` | (root, and the layers) | counters, gauges and histograms through the `metrics` facade, labelled by [`Builder::name`]; every metric is listed in `docs/METRICS.md` (adds `metrics`) |
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
//! - **Order**: the dequeue role never moves an item while an item with an
//!   earlier deadline (or the same deadline and a smaller key) is in the timer
//!   index, so due items leave in nondecreasing deadline order, equal deadlines in
//!   key order (keys are numbered by the send; for one producer, its send order).
//!   The exception is an item that reaches the index already due (sent with a past
//!   deadline, or a send still in flight when its deadline passed; a send takes
//!   microseconds to reach the index): it leaves after the items moved before it
//!   arrived. So each consumer sees nondecreasing deadlines among items that were
//!   in the index before they fell due. On a [`MockClock`] every item sent before a
//!   clock step is in the index before a round sees the step.
//! - **Exactly once**: every item sent is exactly one of: received once, returned
//!   by [`Sender::cancel`], handed back in a send error, returned by
//!   [`Receiver::take_pending`], or dropped once when the last receiver goes.
//! - **Length**: [`Sender::len`] counts items sent and not yet received,
//!   cancelled or taken, exactly from the moment a send returns.
//! - **Shutdown**: with every sender gone (or after [`Receiver::close`]), receivers
//!   get every pending item when due, then [`RecvError`]. With every receiver gone,
//!   sends fail with the item handed back, pending items are dropped before the
//!   last receiver's `drop` returns, and the proxies exit. The last handle joins
//!   both proxy threads.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub, rust_2018_idioms)]

mod admission;
mod builder;
mod chan;
mod clock;
mod cmd;
mod contain;
mod counter;
mod dequeue;
mod egress;
mod enqueue;
mod error;
mod expired;
mod index;
mod ingress;
mod key;
mod lead;
mod metrics;
mod oneshot;
mod pace;
mod receiver;
#[cfg(feature = "async")]
mod recv_future;
mod ring;
mod role;
#[cfg(feature = "async")]
mod send_future;
mod sender;
mod shared;
#[cfg(any(feature = "timer", feature = "workqueue"))]
mod shrink;
mod sync;
mod tidy;
#[cfg(feature = "timer")]
pub mod timer;
mod waiters;
mod wakeup;

// The loom models of the internals live with the other models, in loom-tests/.
#[cfg(all(test, delayq_loom))]
#[path = "../loom-tests/models/mod.rs"]
mod loom_models;
#[cfg(feature = "workqueue")]
pub mod workqueue;

pub use crate::builder::{bounded, unbounded, Builder};
pub use crate::clock::{Clock, MockClock, Subscription, SystemClock};
pub use crate::error::{
    BuildError, RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};
pub use crate::expired::Expired;
pub use crate::key::Key;
pub use crate::receiver::{IntoIter, Iter, Receiver, TryIter};
#[cfg(feature = "async")]
pub use crate::recv_future::{doc_block_on, IntoStream, RecvEntryFut, RecvFut, RecvManyFut, RecvStream};
#[cfg(feature = "async")]
pub use crate::send_future::SendFut;
pub use crate::sender::Sender;
