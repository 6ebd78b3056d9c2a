//! The worker's `tracing` spans (feature `tracing`), seen by a test
//! subscriber: one span per job run with the queue, kind, id and attempt,
//! its outcome recorded, and the error as an event on a failure.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use delayq_durable::{DurableQueue, RetryPolicy, Worker};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

/// Field values as text.
#[derive(Default, Debug, Clone)]
struct Fields(HashMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

#[derive(Default)]
struct Seen {
    /// Spans by id: name, fields (as recorded so far).
    spans: HashMap<u64, (String, Fields)>,
    /// Events: the span they were in, their fields, their level.
    events: Vec<(Option<u64>, Fields, tracing::Level)>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Seen>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut f = Fields::default();
        attrs.record(&mut f);
        self.0.lock().unwrap().spans.insert(id.into_u64(), (attrs.metadata().name().to_string(), f));
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some((_, f)) = self.0.lock().unwrap().spans.get_mut(&id.into_u64()) {
            values.record(f);
        }
    }
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut f = Fields::default();
        event.record(&mut f);
        let span = ctx.event_span(event).map(|s| s.id().into_u64());
        self.0.lock().unwrap().events.push((span, f, *event.metadata().level()));
    }
}

#[test]
fn a_span_per_job_run_with_its_outcome_and_error() {
    let dir = std::env::temp_dir().join(format!("delayq-tracing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let capture = Capture::default();

    let q = DurableQueue::open(dir.join("q.redb")).unwrap();
    let ok = q.send_kind_at("ok", b"", SystemTime::now()).unwrap();
    let bad = q.send_kind_at("bad", b"", SystemTime::now()).unwrap();
    // The worker's threads run the handlers: the subscriber must be theirs
    // too, so it is set globally for this test binary (one test in it).
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(capture.clone()));
    tracing::dispatcher::set_global_default(dispatch).unwrap();
    let w = Worker::builder(q.clone())
        .handle_raw("ok", |_, _| Ok::<(), String>(()))
        .handle_raw("bad", |_, _| Err::<(), String>("disk on fire".into()))
        .retry(RetryPolicy::exponential(Duration::from_millis(10)).max_attempts(2))
        .start()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while (q.len().unwrap() > 0 || q.stats().unwrap().dead == 0) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    w.shutdown(Duration::from_secs(5));

    let seen = capture.0.lock().unwrap();
    let runs: Vec<_> = seen.spans.iter().filter(|(_, (name, _))| name == "delayq.job").collect();
    // One run of "ok", two of "bad" (attempt 1 retried, attempt 2 dead).
    assert_eq!(runs.len(), 3, "{:?}", seen.spans);
    let field = |f: &Fields, k: &str| f.0.get(k).cloned().unwrap_or_default();
    let mut by_outcome: Vec<(String, String, String, String)> = runs
        .iter()
        .map(|(_, (_, f))| (field(f, "kind"), field(f, "id"), field(f, "attempt"), field(f, "outcome")))
        .collect();
    by_outcome.sort();
    assert_eq!(
        by_outcome,
        vec![
            ("bad".into(), bad.0.to_string(), "1".into(), "retrying".into()),
            ("bad".into(), bad.0.to_string(), "2".into(), "dead".into()),
            ("ok".into(), ok.0.to_string(), "1".into(), "succeeded".into()),
        ]
    );
    for (_, (_, f)) in &runs {
        assert_eq!(field(f, "queue"), dir.join("q.redb").display().to_string());
    }
    // The failures' errors are events inside their spans.
    let errors: Vec<_> = seen
        .events
        .iter()
        .filter(|(span, f, _)| span.is_some() && f.0.contains_key("error"))
        .map(|(span, f, level)| {
            (seen.spans[&span.unwrap()].1 .0["attempt"].clone(), field(f, "error"), *level)
        })
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors.iter().all(|(_, e, _)| e.contains("disk on fire")));
    assert!(errors.iter().any(|(a, _, l)| a == "2" && *l == tracing::Level::ERROR));
    drop(seen);
    drop(q);
    let _ = std::fs::remove_dir_all(&dir);
}
