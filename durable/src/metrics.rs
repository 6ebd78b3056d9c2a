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
pub(crate) use on::{Jobs, Metrics};

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

    /// What both backends report alike: jobs by state, and the counters of
    /// the contract's calls (the Redis backend's `Metrics` holds one too).
    pub(crate) struct Jobs {
        pending: Gauge,
        reserved: Gauge,
        dead: Gauge,
        pub(crate) sent: Counter,
        reserves: Counter,
        redelivered: Counter,
        pub(crate) acked: Counter,
        pub(crate) nacked: Counter,
        pub(crate) lease_expired: Counter,
    }

    impl Jobs {
        /// Registers the handles of the queue labelled `q` (and describes them).
        pub(crate) fn new(q: &str) -> Jobs {
            use metrics::{counter, describe_counter, describe_gauge, gauge};
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
            let q = q.to_owned();
            let jobs =
                |state: &'static str| gauge!("delayq_durable_jobs", "queue" => q.clone(), "state" => state);
            Jobs {
                pending: jobs("pending"),
                reserved: jobs("reserved"),
                dead: jobs("dead"),
                sent: counter!("delayq_durable_sent_total", "queue" => q.clone()),
                reserves: counter!("delayq_durable_reserved_total", "queue" => q.clone()),
                redelivered: counter!("delayq_durable_redelivered_total", "queue" => q.clone()),
                acked: counter!("delayq_durable_acked_total", "queue" => q.clone()),
                nacked: counter!("delayq_durable_nacked_total", "queue" => q.clone()),
                lease_expired: counter!("delayq_durable_lease_expired_total", "queue" => q.clone()),
            }
        }

        /// The jobs stored in each state.
        pub(crate) fn states(&self, pending: u64, leased: u64, dead: u64) {
            self.pending.set(pending as f64);
            self.reserved.set(leased as f64);
            self.dead.set(dead as f64);
        }

        /// Leases granted, to jobs whose attempts these are.
        pub(crate) fn leased(&self, attempts: impl Iterator<Item = u32>) {
            let (mut n, mut again) = (0, 0);
            for a in attempts {
                n += 1;
                again += u64::from(a > 1);
            }
            if n > 0 {
                self.reserves.increment(n);
            }
            if again > 0 {
                self.redelivered.increment(again);
            }
        }
    }

    /// The queue's handles, registered with the recorder installed when the
    /// queue was opened.
    pub(crate) struct Metrics {
        jobs: Jobs,
        batch: Histogram,
        commit_fsync: Histogram,
        commit_no_fsync: Histogram,
    }

    impl Metrics {
        pub(crate) fn new(queue: &str) -> Metrics {
            use metrics::{describe_histogram, histogram};
            describe_histogram!(
                "delayq_durable_commit_batch_ops",
                Unit::Count,
                "Changes in one group commit."
            );
            describe_histogram!(
                "delayq_durable_commit_seconds",
                Unit::Seconds,
                "One group commit: applying its changes and committing (with fsync, or not)."
            );
            let q = queue.to_owned();
            let commit = |fsync: &'static str| histogram!("delayq_durable_commit_seconds", "queue" => q.clone(), "fsync" => fsync);
            Metrics {
                jobs: Jobs::new(queue),
                batch: histogram!("delayq_durable_commit_batch_ops", "queue" => q.clone()),
                commit_fsync: commit("true"),
                commit_no_fsync: commit("false"),
            }
        }

        /// The per-state gauges, from the writer's counts.
        pub(crate) fn counts(&self, c: &Counters) {
            // Relaxed: written by this (the writer) thread only.
            let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
            self.jobs.states(get(&c.pending), get(&c.leased), get(&c.dead));
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
            let (mut sent, mut acked, mut nacked) = (0, 0, 0);
            for (op, outcome) in batch.iter().zip(outcomes) {
                match (op, outcome) {
                    (Op::Send { .. }, Outcome::Ids(ids)) => sent += ids.len() as u64,
                    (Op::SendWith { .. }, Outcome::Sent(crate::options::Sent::Created(_))) => sent += 1,
                    (Op::Ack { .. }, Outcome::Flag(true)) => acked += 1,
                    (Op::Nack { .. }, Outcome::Flag(true)) => nacked += 1,
                    _ => {}
                }
            }
            self.jobs.leased(batch.iter().zip(outcomes).filter_map(|(op, outcome)| match (op, outcome) {
                (Op::Lease { .. }, Outcome::Job(Some(job))) => Some(job.attempt()),
                _ => None,
            }));
            let j = &self.jobs;
            for (counter, n) in
                [(&j.sent, sent), (&j.acked, acked), (&j.nacked, nacked), (&j.lease_expired, expired)]
            {
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
