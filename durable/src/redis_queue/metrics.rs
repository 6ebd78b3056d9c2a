//! What a [`RedisQueue`](super::RedisQueue) (and an `AsyncRedisQueue` made
//! from it, which shares it) reports through the
//! [`metrics`](https://docs.rs/metrics) facade (cargo feature `metrics`),
//! labelled `queue` (the queue's name). Without the feature `Metrics` is an
//! empty type whose methods do nothing. The table is `docs/METRICS.md`.
//!
//! Everything is recorded by the client, from what it already learns:
//!
//! - the counters from the scripts' replies (the ids a send returns, the
//!   jobs and attempts a reserve returns, the flags of acks and nacks, and
//!   the expired leases a reserve acted on, which its reply carries);
//! - the per-state gauges from the counts the reserve script returns (three
//!   `ZCARD`s in the script: no round trip of their own) and from `stats`;
//! - one latency record per script call answered by the server;
//! - one reconnect per connection opened again after a transient failure.
//!
//! So they are this client's view: counters count what this handle's calls
//! did (sum them over the processes that share a queue), gauges are the
//! server's counts as of this handle's last reserve or `stats`.

use std::time::Duration;

use super::scripts::Name;

#[cfg(feature = "metrics")]
pub(crate) use on::Metrics;

#[cfg(not(feature = "metrics"))]
pub(crate) use off::Metrics;

/// What one reserve script reported beyond its jobs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ReserveCounts {
    /// Expired leases it acted on (the job due again, or dead).
    pub(crate) expired: u64,
    /// The queue's jobs by state after it ran: `(pending, leased, dead)`;
    /// `None` from a reply without them.
    pub(crate) jobs: Option<(u64, u64, u64)>,
}

#[cfg(not(feature = "metrics"))]
mod off {
    use super::{Duration, Name};
    use crate::job::{Job, Stats};

    /// The feature is off: nothing is recorded, nothing is held.
    pub(crate) struct Metrics;

    impl Metrics {
        #[inline(always)]
        pub(crate) fn new(_queue: &str) -> Metrics {
            Metrics
        }
        #[inline(always)]
        pub(crate) fn script(&self, _name: Name, _took: Duration) {}
        #[inline(always)]
        pub(crate) fn reconnect(&self) {}
        #[inline(always)]
        pub(crate) fn sent(&self, _n: usize) {}
        #[inline(always)]
        pub(crate) fn reserved(&self, _jobs: &[Job], _counts: &super::ReserveCounts) {}
        #[inline(always)]
        pub(crate) fn acked(&self, _n: usize) {}
        #[inline(always)]
        pub(crate) fn nacked(&self) {}
        #[inline(always)]
        pub(crate) fn stats(&self, _s: &Stats) {}
    }
}

#[cfg(feature = "metrics")]
mod on {
    use super::{Duration, Name, ReserveCounts};
    use crate::job::{Job, Stats};
    use crate::metrics::Jobs;
    use ::metrics::{Counter, Histogram, Unit};

    /// The queue's handles, registered with the recorder installed when the
    /// queue was connected.
    pub(crate) struct Metrics {
        /// What both backends report alike.
        jobs: Jobs,
        reconnects: Counter,
        /// Indexed by `Name as usize`.
        scripts: Vec<Histogram>,
    }

    impl Metrics {
        pub(crate) fn new(queue: &str) -> Metrics {
            use ::metrics::{counter, describe_counter, describe_histogram, histogram};
            describe_counter!(
                "delayq_durable_redis_reconnects_total",
                Unit::Count,
                "Connections for the scripts opened again after a transient failure."
            );
            describe_histogram!(
                "delayq_durable_redis_script_seconds",
                Unit::Seconds,
                "One script call's round trip, by script."
            );
            let q = queue.to_owned();
            let script = |name: Name| histogram!("delayq_durable_redis_script_seconds", "queue" => q.clone(), "script" => name.label());
            Metrics {
                jobs: Jobs::new(queue),
                reconnects: counter!("delayq_durable_redis_reconnects_total", "queue" => q.clone()),
                scripts: Name::ALL.iter().map(|&n| script(n)).collect(),
            }
        }

        /// A call of script `name` was answered after `took`.
        pub(crate) fn script(&self, name: Name, took: Duration) {
            self.scripts[name as usize].record(took.as_secs_f64());
        }

        /// A connection was opened again after a transient failure.
        pub(crate) fn reconnect(&self) {
            self.reconnects.increment(1);
        }

        /// A send stored `n` jobs.
        pub(crate) fn sent(&self, n: usize) {
            self.jobs.sent.increment(n as u64);
        }

        /// A reserve script leased `jobs` and reported `counts`.
        pub(crate) fn reserved(&self, jobs: &[Job], counts: &ReserveCounts) {
            self.jobs.leased(jobs.iter().map(Job::attempt));
            if counts.expired > 0 {
                self.jobs.lease_expired.increment(counts.expired);
            }
            if let Some((pending, leased, dead)) = counts.jobs {
                self.jobs.states(pending, leased, dead);
            }
        }

        /// Acks deleted `n` jobs.
        pub(crate) fn acked(&self, n: usize) {
            if n > 0 {
                self.jobs.acked.increment(n as u64);
            }
        }

        /// A nack gave its job back.
        pub(crate) fn nacked(&self) {
            self.jobs.nacked.increment(1);
        }

        /// The counts a `stats` call read.
        pub(crate) fn stats(&self, s: &Stats) {
            self.jobs.states(s.pending, s.leased, s.dead);
        }
    }
}
