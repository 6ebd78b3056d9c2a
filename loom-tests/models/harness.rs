//! The one loom harness of delayq's models, compiled twice: into the crate's own
//! test build (`models/`, which reaches `pub(crate)` internals) and into the
//! `loom-tests` package (`tests/`, which uses the public API only).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Preemption bound used when `LOOM_MAX_PREEMPTIONS` is not set.
pub const DEFAULT_PREEMPTIONS: usize = 2;
/// Per-execution branch limit (loom's default of 1000 is too low once two proxy
/// threads run their loops); `LOOM_MAX_BRANCHES` overrides it.
pub const DEFAULT_MAX_BRANCHES: usize = 100_000;

/// Runs `f` under loom, bounded by `LOOM_MAX_PREEMPTIONS` (default
/// [`DEFAULT_PREEMPTIONS`]), and prints how many executions it took and how long.
pub fn model<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(DEFAULT_PREEMPTIONS);
    }
    if std::env::var_os("LOOM_MAX_BRANCHES").is_none() {
        b.max_branches = DEFAULT_MAX_BRANCHES;
    }
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let name = std::thread::current().name().unwrap_or("model").to_owned();
    let start = Instant::now();
    b.check(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        f();
    });
    eprintln!(
        "loom {name}: {} executions in {:.1} s (preemption bound {})",
        runs.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64(),
        b.preemption_bound.unwrap_or(0),
    );
}
