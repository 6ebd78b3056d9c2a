//! What a queue reports through the [`metrics`](https://docs.rs/metrics) facade
//! (cargo feature `metrics`): the library records, the application installs a
//! recorder (an exporter) and picks where the figures go. Without the feature
//! every method here is an empty inline function and `Metrics` holds nothing.
//!
//! Where each figure is recorded, so that no client pays a new read-modify-write
//! for a counter:
//! - **sends, cancels, reschedules** and the enqueue role's batch size: by the
//!   performer of the enqueue role, once per batch (`enqueue::apply`);
//! - **moved per round** and the gauges: by the performer of the dequeue
//!   role, once per round (`dequeue::round`), and by a consumer about to park
//!   (the queue has gone quiet: nobody else would bring the figures up to
//!   date);
//! - **the proxy threads' own batches and rounds** (what nobody else was
//!   there to perform: `delayq_proxy_rounds_total`), by the proxy threads;
//! - **received**: not counted by receives at all, but read from the egress
//!   ring's head, which every take moves anyway (`Egress::received_so_far`),
//!   when the gauges are sampled;
//! - **lateness** (receive time − deadline): by the receiving thread, one clock
//!   reading and one histogram record per item, and only when a recorder is
//!   installed (`Metrics::recording`);
//! - **send errors** and **admission pauses**: on those (slow) paths only.
//!
//! Every metric carries the label `queue`, the [`Builder::name`]
//! (`"delayq"` unless set). Handles are registered when the queue is built,
//! so a recorder installed later does not see it (the facade's rule). The
//! table of names, types, labels and units is `docs/METRICS.md`.
//!
//! [`Builder::name`]: crate::Builder::name

/// One sample of the queue's gauges.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    /// Items sent and not yet received, cancelled or taken (`len`).
    pub(crate) pending: usize,
    /// Entries in the egress ring (all due), not yet received.
    pub(crate) due: usize,
    /// Commands waiting in the ingress for the enqueue role.
    pub(crate) ingress: usize,
    /// Items received so far (the egress ring's head, less what left it some
    /// other way).
    pub(crate) received: usize,
}

/// What one batch of the enqueue role applied.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Applied {
    /// Commands drained.
    pub(crate) commands: usize,
    /// Items inserted (accepted sends).
    pub(crate) inserted: usize,
    /// Cancels (and discards) that found their item.
    pub(crate) cancelled: usize,
    /// Reschedules that moved their item.
    pub(crate) rescheduled: usize,
}

/// Why a send failed, as the `error` label says it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SendErrorKind {
    /// The queue was closed or every receiver was gone.
    Disconnected,
    /// A bounded queue was full (`try_send_*`).
    Full,
    /// No room appeared in time (`send_*_timeout`, `_deadline`).
    Timeout,
}

#[cfg(feature = "metrics")]
pub(crate) use on::Metrics;

#[cfg(not(feature = "metrics"))]
pub(crate) use off::Metrics;

#[cfg(not(feature = "metrics"))]
mod off {
    use super::{Applied, Sample, SendErrorKind};
    use std::time::Duration;

    /// The feature is off: nothing is recorded, nothing is held.
    #[derive(Debug)]
    pub(crate) struct Metrics;

    impl Metrics {
        #[inline(always)]
        pub(crate) fn new(_name: &str) -> Metrics {
            Metrics
        }
        #[inline(always)]
        pub(crate) fn recording(&self) -> bool {
            false
        }
        #[inline(always)]
        pub(crate) fn enqueue_batch(&self, _a: &Applied) {}
        #[inline(always)]
        pub(crate) fn dequeue_round(&self, _moved: usize) {}
        #[inline(always)]
        pub(crate) fn proxy_round(&self, _enqueue: bool) {}
        #[inline(always)]
        pub(crate) fn sample(&self, _s: &Sample) {}
        #[inline(always)]
        pub(crate) fn lateness_ns(&self, _ns: u64) {}
        #[inline(always)]
        pub(crate) fn send_error(&self, _kind: SendErrorKind) {}
        #[inline(always)]
        pub(crate) fn admission_pause(&self, _d: Duration) {}
    }
}

#[cfg(feature = "metrics")]
mod on {
    use super::{Applied, Sample, SendErrorKind};
    use metrics::{Counter, Gauge, Histogram, Unit};
    use std::time::Duration;

    /// The queue's handles, registered with the recorder installed when the
    /// queue was built.
    pub(crate) struct Metrics {
        /// A recorder that holds state was installed at build time: only then
        /// do receives read the clock for their lateness.
        recording: bool,
        sent: Counter,
        received: Counter,
        cancelled: Counter,
        rescheduled: Counter,
        err_disconnected: Counter,
        err_full: Counter,
        err_timeout: Counter,
        pending: Gauge,
        due: Gauge,
        ingress: Gauge,
        lateness: Histogram,
        enqueue_batch: Histogram,
        dequeue_batch: Histogram,
        admission_pause: Histogram,
        proxy_enqueue_rounds: Counter,
        proxy_dequeue_rounds: Counter,
    }

    impl std::fmt::Debug for Metrics {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Metrics").field("recording", &self.recording).finish_non_exhaustive()
        }
    }

    /// Whether the recorder that `metrics` would hand a registration to holds
    /// any state. The facade's fallback, `NoopRecorder`, is a zero-sized type
    /// (as is any recorder that cannot record); every exporter holds its
    /// registry. The facade offers no other way to ask, and the answer only
    /// decides whether receives read the clock for a histogram that would
    /// drop the value anyway.
    fn recorder_holds_state() -> bool {
        metrics::with_recorder(|r| std::mem::size_of_val(r) != 0)
    }

    fn describe() {
        use metrics::{describe_counter, describe_gauge, describe_histogram};
        describe_counter!("delayq_sent_total", Unit::Count, "Items accepted into the timer index.");
        describe_counter!("delayq_received_total", Unit::Count, "Items handed to consumers.");
        describe_counter!("delayq_cancelled_total", Unit::Count, "Cancels that found their item pending.");
        describe_counter!("delayq_rescheduled_total", Unit::Count, "Reschedules that moved their item.");
        describe_counter!("delayq_send_errors_total", Unit::Count, "Sends that failed, by error.");
        describe_counter!(
            "delayq_proxy_rounds_total",
            Unit::Count,
            "Batches and rounds the proxy threads performed themselves (nobody else was there to), by proxy."
        );
        describe_gauge!(
            "delayq_pending",
            Unit::Count,
            "Items sent and not yet received, cancelled or taken."
        );
        describe_gauge!("delayq_due", Unit::Count, "Items due in the egress ring, not yet received.");
        describe_gauge!("delayq_ingress_depth", Unit::Count, "Commands waiting for the enqueue role.");
        describe_histogram!("delayq_lateness_seconds", Unit::Seconds, "Receive time minus deadline.");
        describe_histogram!(
            "delayq_proxy_batch_items",
            Unit::Count,
            "Items moved by one round of a proxy role."
        );
        describe_histogram!(
            "delayq_admission_pause_seconds",
            Unit::Seconds,
            "How long a blocking send waited at the shut admission gate."
        );
    }

    impl Metrics {
        pub(crate) fn new(name: &str) -> Metrics {
            use metrics::{counter, gauge, histogram};
            describe();
            let q = name.to_owned();
            let err =
                |e: &'static str| counter!("delayq_send_errors_total", "queue" => q.clone(), "error" => e);
            let batch =
                |p: &'static str| histogram!("delayq_proxy_batch_items", "queue" => q.clone(), "proxy" => p);
            Metrics {
                recording: recorder_holds_state(),
                sent: counter!("delayq_sent_total", "queue" => q.clone()),
                received: counter!("delayq_received_total", "queue" => q.clone()),
                cancelled: counter!("delayq_cancelled_total", "queue" => q.clone()),
                rescheduled: counter!("delayq_rescheduled_total", "queue" => q.clone()),
                err_disconnected: err("disconnected"),
                err_full: err("full"),
                err_timeout: err("timeout"),
                pending: gauge!("delayq_pending", "queue" => q.clone()),
                due: gauge!("delayq_due", "queue" => q.clone()),
                ingress: gauge!("delayq_ingress_depth", "queue" => q.clone()),
                lateness: histogram!("delayq_lateness_seconds", "queue" => q.clone()),
                enqueue_batch: batch("enqueue"),
                dequeue_batch: batch("dequeue"),
                admission_pause: histogram!("delayq_admission_pause_seconds", "queue" => q.clone()),
                proxy_enqueue_rounds: counter!("delayq_proxy_rounds_total", "queue" => q.clone(), "proxy" => "enqueue"),
                proxy_dequeue_rounds: counter!("delayq_proxy_rounds_total", "queue" => q.clone(), "proxy" => "dequeue"),
            }
        }

        /// Whether receives should measure their lateness.
        #[inline]
        pub(crate) fn recording(&self) -> bool {
            self.recording
        }

        /// One batch of the enqueue role.
        pub(crate) fn enqueue_batch(&self, a: &Applied) {
            if a.commands == 0 {
                return;
            }
            self.enqueue_batch.record(a.commands as f64);
            if a.inserted > 0 {
                self.sent.increment(a.inserted as u64);
            }
            if a.cancelled > 0 {
                self.cancelled.increment(a.cancelled as u64);
            }
            if a.rescheduled > 0 {
                self.rescheduled.increment(a.rescheduled as u64);
            }
        }

        /// One round of the dequeue role that moved `moved` items.
        pub(crate) fn dequeue_round(&self, moved: usize) {
            self.dequeue_batch.record(moved as f64);
        }

        /// A proxy thread performed a batch (enqueue) or a round (dequeue)
        /// itself: nobody else was there to.
        pub(crate) fn proxy_round(&self, enqueue: bool) {
            if enqueue {
                self.proxy_enqueue_rounds.increment(1);
            } else {
                self.proxy_dequeue_rounds.increment(1);
            }
        }

        pub(crate) fn sample(&self, s: &Sample) {
            self.pending.set(s.pending as f64);
            self.due.set(s.due as f64);
            self.ingress.set(s.ingress as f64);
            // `absolute` keeps the largest value seen: samples taken by
            // different threads may arrive out of order.
            self.received.absolute(s.received as u64);
        }

        pub(crate) fn lateness_ns(&self, ns: u64) {
            self.lateness.record(ns as f64 * 1e-9);
        }

        pub(crate) fn send_error(&self, kind: SendErrorKind) {
            match kind {
                SendErrorKind::Disconnected => self.err_disconnected.increment(1),
                SendErrorKind::Full => self.err_full.increment(1),
                SendErrorKind::Timeout => self.err_timeout.increment(1),
            }
        }

        pub(crate) fn admission_pause(&self, d: Duration) {
            self.admission_pause.record(d.as_secs_f64());
        }
    }
}
