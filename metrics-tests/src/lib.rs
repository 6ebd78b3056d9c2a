//! Helpers for the metrics checks: a recording recorder installed while the
//! queues to watch are built, and lookups in what it recorded.

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};

/// A recorder that keeps every value, for the queues built inside
/// [`Recording::build`].
pub struct Recording {
    recorder: DebuggingRecorder,
    snapshotter: Snapshotter,
}

impl Default for Recording {
    fn default() -> Self {
        Recording::new()
    }
}

/// One metric as the recorder held it.
#[derive(Debug)]
pub struct Metric {
    /// Its name.
    pub name: String,
    /// Counter, gauge or histogram.
    pub kind: MetricKind,
    /// Its labels, `(key, value)`, sorted.
    pub labels: Vec<(String, String)>,
    /// Its value.
    pub value: DebugValue,
}

/// What the recorder held at one moment ([`Recording::snapshot`]).
#[derive(Debug)]
pub struct Snapshot {
    /// Every metric registered, with its value.
    pub metrics: Vec<Metric>,
}

impl Recording {
    /// A fresh recorder with nothing recorded.
    pub fn new() -> Recording {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        Recording { recorder, snapshotter }
    }

    /// Runs `f` (which builds the queues to watch) with this recorder as the
    /// thread's recorder: the handles registered meanwhile record here, from
    /// any thread.
    pub fn build<R>(&self, f: impl FnOnce() -> R) -> R {
        metrics::with_local_recorder(&self.recorder, f)
    }

    /// What was recorded. The debugging recorder hands counters, gauges and
    /// histograms over and resets them: take one snapshot per check.
    pub fn snapshot(&self) -> Snapshot {
        let metrics = self
            .snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value): (CompositeKey, _, _, DebugValue)| {
                let mut labels: Vec<(String, String)> =
                    key.key().labels().map(|l| (l.key().to_owned(), l.value().to_owned())).collect();
                labels.sort();
                Metric { name: key.key().name().to_owned(), kind: key.kind(), labels, value }
            })
            .collect();
        Snapshot { metrics }
    }
}

impl Snapshot {
    /// The metric `name` whose labels include every one of `labels`. Panics
    /// if there is none or more than one, listing what there is.
    #[track_caller]
    pub fn find(&self, name: &str, labels: &[(&str, &str)]) -> &Metric {
        let hits: Vec<&Metric> = self
            .metrics
            .iter()
            .filter(|m| {
                m.name == name
                    && labels.iter().all(|(k, v)| m.labels.iter().any(|(mk, mv)| mk == k && mv == v))
            })
            .collect();
        match hits.as_slice() {
            [one] => one,
            _ => panic!(
                "{} metrics named {name} with labels {labels:?}; recorded: {:#?}",
                hits.len(),
                self.metrics.iter().map(|m| (&m.name, &m.labels)).collect::<Vec<_>>()
            ),
        }
    }

    /// The names recorded, sorted, each once.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.metrics.iter().map(|m| m.name.clone()).collect();
        names.sort();
        names.dedup();
        names
    }

    /// A counter's value.
    #[track_caller]
    pub fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        match &self.find(name, labels).value {
            DebugValue::Counter(n) => *n,
            other => panic!("{name} is not a counter: {other:?}"),
        }
    }

    /// A gauge's value.
    #[track_caller]
    pub fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        match &self.find(name, labels).value {
            DebugValue::Gauge(g) => g.into_inner(),
            other => panic!("{name} is not a gauge: {other:?}"),
        }
    }

    /// A histogram's values, every one recorded before the snapshot.
    #[track_caller]
    pub fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        match &self.find(name, labels).value {
            DebugValue::Histogram(v) => v.iter().map(|x| x.into_inner()).collect(),
            other => panic!("{name} is not a histogram: {other:?}"),
        }
    }
}
