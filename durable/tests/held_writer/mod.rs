//! A `metrics` recorder whose commit-time histogram
//! (`delayq_durable_commit_seconds`) blocks the thread that records into it
//! while the gate is shut: an embedded queue's writer thread records every
//! commit's time there (after committing, before answering its callers), so
//! a queue opened under this recorder (`metrics::with_local_recorder`) can
//! have its writer held in the middle of a batch. Shared by the durable
//! inspection tests and the dashboard's (`jobs/tests/api.rs`).
#![allow(dead_code)]

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit};

#[derive(Default)]
pub struct Gate {
    /// (shut, a thread is held)
    state: Mutex<(bool, bool)>,
    changed: Condvar,
}

impl Gate {
    pub fn shut(&self) {
        self.state.lock().unwrap().0 = true;
    }

    pub fn open(&self) {
        self.state.lock().unwrap().0 = false;
        self.changed.notify_all();
    }

    /// Waits until a thread is held (`false` if none came within `limit`).
    pub fn wait_held(&self, limit: Duration) -> bool {
        let state = self.state.lock().unwrap();
        self.changed.wait_timeout_while(state, limit, |s| !s.1).unwrap().0 .1
    }
}

impl HistogramFn for Gate {
    fn record(&self, _: f64) {
        let mut state = self.state.lock().unwrap();
        if state.0 {
            state.1 = true;
            self.changed.notify_all();
            state = self.changed.wait_while(state, |s| s.0).unwrap();
            state.1 = false;
        }
    }
}

pub struct GateRecorder(pub Arc<Gate>);

impl Recorder for GateRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::noop()
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        if key.name() == "delayq_durable_commit_seconds" {
            Histogram::from_arc(self.0.clone())
        } else {
            Histogram::noop()
        }
    }
}
