//! What a [`DurableQueue`](crate::DurableQueue) reports through the
//! [`metrics`](https://docs.rs/metrics) facade (cargo feature `metrics`),
//! labelled `queue` (the file's path). Without the feature `Metrics` is an
//! empty type whose methods do nothing.
//!
//! Everything is recorded by the writer thread, once per group commit that
//! succeeded, from the batch it committed: no caller pays for a figure, a
//! batch of changes is one increment per counter, and a failed commit (whose
//! changes did not happen) records nothing. The gauges are the writer's own
//! per-state counts (`Counters`), set after each commit and when the writer
//! starts (the counts recovered from the file). The table is
//! `docs/METRICS.md`.

use crate::writer::{Counters, Op, Outcome};
use std::time::Duration;

#[cfg(feature = "metrics")]
pub(crate) use on::Metrics;

#[cfg(not(feature = "metrics"))]
pub(crate) use off::Metrics;

#[cfg(not(feature = "metrics"))]
mod off {
    use super::{Counters, Duration, Op, Outcome};

    /// The feature is off: nothing is recorded, nothing is held.
    pub(crate) struct Metrics;

    impl Metrics {
        #[inline(always)]
        pub(crate) fn new(_queue: &str) -> Metrics {
            Metrics
        }
        #[inline(always)]
        pub(crate) fn counts(&self, _c: &Counters) {}
        #[inline(always)]
        pub(crate) fn committed(
            &self,
            _batch: &[Op],
            _outcomes: &[Outcome],
            _expired: u64,
            _took: Duration,
            _fsync: bool,
            _c: &Counters,
        ) {
        }
    }
}

#[cfg(feature = "metrics")]
mod on {
    use super::{Counters, Duration, Op, Outcome};
    use metrics::{Counter, Gauge, Histogram, Unit};
    use std::sync::atomic::Ordering;

    /// The queue's handles, registered with the recorder installed when the
    /// queue was opened.
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
        batch: Histogram,
        commit_fsync: Histogram,
        commit_no_fsync: Histogram,
    }

    fn describe() {
        use metrics::{describe_counter, describe_gauge, describe_histogram};
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
        describe_histogram!("delayq_durable_commit_batch_ops", Unit::Count, "Changes in one group commit.");
        describe_histogram!(
            "delayq_durable_commit_seconds",
            Unit::Seconds,
            "One group commit: applying its changes and committing (with fsync, or not)."
        );
    }

    impl Metrics {
        pub(crate) fn new(queue: &str) -> Metrics {
            use metrics::{counter, gauge, histogram};
            describe();
            let q = queue.to_owned();
            let jobs =
                |state: &'static str| gauge!("delayq_durable_jobs", "queue" => q.clone(), "state" => state);
            let commit = |fsync: &'static str| histogram!("delayq_durable_commit_seconds", "queue" => q.clone(), "fsync" => fsync);
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
                batch: histogram!("delayq_durable_commit_batch_ops", "queue" => q.clone()),
                commit_fsync: commit("true"),
                commit_no_fsync: commit("false"),
            }
        }

        /// The per-state gauges, from the writer's counts.
        pub(crate) fn counts(&self, c: &Counters) {
            // Relaxed: written by this (the writer) thread only.
            self.pending.set(c.pending.load(Ordering::Relaxed) as f64);
            self.reserved.set(c.leased.load(Ordering::Relaxed) as f64);
            self.dead.set(c.dead.load(Ordering::Relaxed) as f64);
        }

        /// A group commit of `batch` (answered by `outcomes`, in order) that
        /// acted on `expired` expired leases took `took`.
        pub(crate) fn committed(
            &self,
            batch: &[Op],
            outcomes: &[Outcome],
            expired: u64,
            took: Duration,
            fsync: bool,
            c: &Counters,
        ) {
            let (mut sent, mut reserves, mut redelivered, mut acked, mut nacked) = (0, 0, 0, 0, 0);
            for (op, outcome) in batch.iter().zip(outcomes) {
                match (op, outcome) {
                    (Op::Send { .. }, Outcome::Ids(ids)) => sent += ids.len() as u64,
                    (Op::Lease { .. }, Outcome::Job(Some(job))) => {
                        reserves += 1;
                        redelivered += u64::from(job.attempt() > 1);
                    }
                    (Op::Ack { .. }, Outcome::Flag(true)) => acked += 1,
                    (Op::Nack { .. }, Outcome::Flag(true)) => nacked += 1,
                    _ => {}
                }
            }
            for (counter, n) in [
                (&self.sent, sent),
                (&self.reserves, reserves),
                (&self.redelivered, redelivered),
                (&self.acked, acked),
                (&self.nacked, nacked),
                (&self.lease_expired, expired),
            ] {
                if n > 0 {
                    counter.increment(n);
                }
            }
            self.batch.record(batch.len() as f64);
            let commit = if fsync { &self.commit_fsync } else { &self.commit_no_fsync };
            commit.record(took.as_secs_f64());
            self.counts(c);
        }
    }
}
