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
    use ::metrics::{Counter, Gauge, Histogram, Unit};

    /// The queue's handles, registered with the recorder installed when the
    /// queue was connected.
    pub(crate) struct Metrics {
        pending: Gauge,
        reserved: Gauge,
        dead: Gauge,
        sent: Counter,
        reserves: Counter,
        redelivered: Counter,
        acked: Counter,
        nacked: Counter,
        lease_expired: Counter,
        reconnects: Counter,
        /// Indexed by `Name as usize`.
        scripts: Vec<Histogram>,
    }

    fn describe() {
        use ::metrics::{describe_counter, describe_gauge, describe_histogram};
        describe_gauge!(
            "delayq_durable_jobs",
            Unit::Count,
            "Jobs stored, by state (pending, reserved, dead)."
        );
        describe_counter!("delayq_durable_sent_total", Unit::Count, "Jobs stored by sends.");
        describe_counter!("delayq_durable_reserved_total", Unit::Count, "Leases granted (deliveries).");
        describe_counter!(
            "delayq_durable_redelivered_total",
            Unit::Count,
            "Leases granted on a job delivered before (attempt above 1)."
        );
        describe_counter!("delayq_durable_acked_total", Unit::Count, "Acks that deleted their job.");
        describe_counter!(
            "delayq_durable_nacked_total",
            Unit::Count,
            "Nacks that gave their job back (to retry, or to the dead set)."
        );
        describe_counter!(
            "delayq_durable_lease_expired_total",
            Unit::Count,
            "Expired leases acted on: the job leased again, or moved to the dead set."
        );
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
    }

    impl Metrics {
        pub(crate) fn new(queue: &str) -> Metrics {
            use ::metrics::{counter, gauge, histogram};
            describe();
            let q = queue.to_owned();
            let jobs =
                |state: &'static str| gauge!("delayq_durable_jobs", "queue" => q.clone(), "state" => state);
            let script = |name: Name| histogram!("delayq_durable_redis_script_seconds", "queue" => q.clone(), "script" => name.label());
            Metrics {
                pending: jobs("pending"),
                reserved: jobs("reserved"),
                dead: jobs("dead"),
                sent: counter!("delayq_durable_sent_total", "queue" => q.clone()),
                reserves: counter!("delayq_durable_reserved_total", "queue" => q.clone()),
                redelivered: counter!("delayq_durable_redelivered_total", "queue" => q.clone()),
                acked: counter!("delayq_durable_acked_total", "queue" => q.clone()),
                nacked: counter!("delayq_durable_nacked_total", "queue" => q.clone()),
                lease_expired: counter!("delayq_durable_lease_expired_total", "queue" => q.clone()),
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
            self.sent.increment(n as u64);
        }

        /// A reserve script leased `jobs` and reported `counts`.
        pub(crate) fn reserved(&self, jobs: &[Job], counts: &ReserveCounts) {
            if !jobs.is_empty() {
                self.reserves.increment(jobs.len() as u64);
                let again = jobs.iter().filter(|j| j.attempt() > 1).count() as u64;
                if again > 0 {
                    self.redelivered.increment(again);
                }
            }
            if counts.expired > 0 {
                self.lease_expired.increment(counts.expired);
            }
            if let Some((pending, leased, dead)) = counts.jobs {
                self.jobs(pending, leased, dead);
            }
        }

        /// Acks deleted `n` jobs.
        pub(crate) fn acked(&self, n: usize) {
            if n > 0 {
                self.acked.increment(n as u64);
            }
        }

        /// A nack gave its job back.
        pub(crate) fn nacked(&self) {
            self.nacked.increment(1);
        }

        /// The counts a `stats` call read.
        pub(crate) fn stats(&self, s: &Stats) {
            self.jobs(s.pending, s.leased, s.dead);
        }

        fn jobs(&self, pending: u64, leased: u64, dead: u64) {
            self.pending.set(pending as f64);
            self.reserved.set(leased as f64);
            self.dead.set(dead as f64);
        }
    }
}
