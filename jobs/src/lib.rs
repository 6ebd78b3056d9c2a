//! `delayq-jobs`: look inside a [`delayq_durable`] queue without writing code.
//!
//! The binary `delayq-jobs` lists, shows, requeues and cancels jobs in an
//! embedded file (`--db PATH`), a Redis queue (`--redis URL --name NAME`) or a
//! PostgreSQL queue (`--postgres URL --name NAME`),
//! and `delayq-jobs serve` runs a small web [`dashboard`]. An embedded file
//! is held by one process at a time (redb's lock), so an application that
//! owns its file mounts the dashboard itself: [`dashboard::router`] or
//! [`dashboard::serve`]; served with a sidecar, its JSON API is how the CLI
//! reaches the file meanwhile ([`remote`]).

#![warn(missing_docs, missing_debug_implementations, unreachable_pub, rust_2018_idioms)]
#![forbid(unsafe_code)]

pub mod commands;
pub mod dashboard;
pub mod open;
pub mod preview;
pub mod remote;
pub mod sidecar;
