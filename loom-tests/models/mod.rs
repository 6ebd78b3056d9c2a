//! The loom models of delayq's internals: compiled into the crate's own unit
//! tests under `--cfg delayq_loom` (`src/lib.rs` includes this directory), so
//! they drive the crate's real `pub(crate)` code — the rings, the egress, the
//! ingress, the waiter lists, the roles, the lead and the enqueue proxy's bell —
//! and no copy of it. The
//! whole-queue models, which need only the public API, are in `../tests/`.
//!
//! ```text
//! RUSTFLAGS="--cfg delayq_loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p delayq --lib --release -- loom_models --nocapture
//! ```

// `harness` is `pub` for the loom-tests package, which compiles it too.
#![allow(unreachable_pub)]

mod blocking;
mod egress;
mod harness;
mod ingress;
mod lead;
mod ring;
mod role;
mod wakeup;

use self::harness::model;
