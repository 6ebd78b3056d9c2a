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
//! Client threads hand work to an enqueue proxy and take due items that a
//! dequeue proxy moved out; the timer index is shared by those two proxies
//! only. This is the "SingleFlight" design proposed for the ekit Go library's
//! delay queue. Each proxy is a dedicated thread *and* a role: a client that
//! would otherwise wake or wait for a proxy may perform its role under the
//! role's token, so the index still sees two contenders (below).
//!
//! ```text
//! producers ──send──▶ [ingress ring] ──▶ enqueue role ───┐   timers lock:
//!                     (lock-free,        (≤1024 cmds per  │   timing wheel
//!                      bounded)           lock; its proxy  ▼   + sleep plan
//!                                         or a producer) index (2 roles only)
//!                                                         │
//! consumers ◀──recv── [egress ring] ◀── dequeue role ◀───┘
//!                     (lock-free,        (its proxy: moves every item due
//!                      bounded)           within 100–200 µs per round, sleeps
//!                                         until 100 µs before the next
//!                                         deadline)
//! ```
//!
//! - Producers reserve a unit of `len` (blocking only on a full bounded queue),
//!   push a command into a bounded lock-free ring (Dmitry Vyukov's bounded MPMC
//!   queue; a momentarily full ring spills into a locked overflow list); if the
//!   enqueue proxy sleeps they perform its role instead of waking it (below).
//! - The enqueue proxy drains commands in batches and applies each batch in one
//!   critical section of the timers lock — flat combining (Hendler, Incze, Shavit
//!   and Tzafrir, SPAA 2010). The default index is a hierarchical timing wheel
//!   (Varghese and Lauck, SOSP 1987) with exact `(deadline, key)` order: insert
//!   O(1), each item cascades at most once per level; cancel and reschedule are
//!   O(1) (stale nodes become tombstones, swept in bulk). A 4-ary heap is the
//!   alternative backend (O(log n) insert).
//! - The dequeue proxy wakes [`stage_ahead`](Builder::stage_ahead) (100 µs)
//!   before the next deadline, moves every item due within twice that into a
//!   second bounded ring in deadline order, wakes consumers, and parks again
//!   (waking once per 100 µs of deadlines, however many items they hold). Consumers take only what is due; the one that finds the
//!   oldest entry not due yet parks until its deadline (the others wait for
//!   it), so an item leaves on that consumer's own timer. A staged item stays
//!   cancellable and reschedulable until its deadline (a per-entry state that
//!   the canceller and a consumer settle with one CAS), and an earlier item
//!   goes in front of staged ones.
//! - Roles (`role.rs`): each proxy's work is a role held by a token. A send
//!   (or command) whose push finds the enqueue proxy parked drains the
//!   ingress itself (at most 64 commands) instead of waking it, by a
//!   try-acquire of the role that never waits; a dequeue proxy that would
//!   park on its timer while staged items wait for a leading consumer hands
//!   its next round to their takers instead (`duty.rs`: they wake at those
//!   deadlines anyway); the performer of the enqueue role whose insert is due
//!   before the dequeue proxy's planned wake-up runs that round itself
//!   instead of waking the proxy (`dequeue::stage_early`); the proxy threads
//!   do everything nobody helps with,
//!   and do all the work while the queue is saturated (they are awake then,
//!   and nobody helps). [`Builder::helping`] switches it off.
//!   Flat combining with a dedicated combiner; the helping of delegation
//!   designs such as ffwd (Roghanchi, Eriksson and Basu, SOSP 2017).
//! - No thread polls or ticks: idle proxies are parked, and the only timers are
//!   the dequeue proxy's (`stage_ahead` before the earliest deadline, unless
//!   it handed that round to the consumers) and the leading consumer's. The wakeup protocol (an earlier head must
//!   wake a sleeping dequeue proxy) is in `wakeup.rs`, with its invariant; loom
//!   checks it (`loom-tests/`).
//! - Admission: while the queue is behind (more than 1024 commands queue in the
//!   ingress ring, or due items wait for room in the egress ring), blocking sends
//!   pause at a gate, at most 1 ms each, so that unthrottled producers cannot grow
//!   a backlog behind the deadlines. A send pauses after it has handed its item
//!   over, so the pause slows the caller's next send, not the item just sent. The
//!   gate is no capacity (a consumer that never comes costs a send one pause, not
//!   a hang), `try_send_*` and the async sends pass it, and a [`MockClock`] queue
//!   never shuts it (`admission.rs`).
//! - Costs per item: a blocking send reads the admission gate (one in 32 also
//!   reads the ingress depth); a send reads
//!   `closed`, does an RMW on `len` (a CAS loop when bounded), a SeqCst fence,
//!   a second read of `closed`, a relaxed RMW for its key, a CAS on the ingress
//!   tail, a stamp store and the enqueue bell's fence and load (plus, when it
//!   finds the proxy parked, the enqueue role's work: a CAS on the role, the
//!   timers lock, one insert); a receive does
//!   a CAS on the egress head (and, for a staged entry, a clock reading and a CAS
//!   on the entry), an RMW on `len`, a fence and a few loads (wake-ups only when
//!   someone waits). The price of the design is the two hand-offs (producer →
//!   proxy → proxy → consumer; the roles remove the wake-ups of both where a
//!   client performs them) and two threads per queue. Those two threads compete for the
//!   CPU like any other: with many more busy client threads than cores, the
//!   kernel's fair share leaves them behind, and
//!   [`Builder::proxy_nice`] (which needs `CAP_SYS_NICE` for a value below the
//!   caller's own) gives them a larger share, at a price described there.
//! - Memory: a pending item costs its entry in the key table (deadline and
//!   item, no padding for the table's empty slots) and a 16-byte node: 32
//!   bytes for an 8-byte item.
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
