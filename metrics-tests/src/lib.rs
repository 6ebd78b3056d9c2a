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

/// Reads `http://127.0.0.1:{port}/metrics` with a plain HTTP/1.1 request
/// (loopback only) and returns the body: Prometheus's text format.
pub fn scrape(port: u16) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Err(std::io::Error::other(format!("no HTTP header in {text:?}")));
    };
    if !head.starts_with("HTTP/1.1 200") {
        return Err(std::io::Error::other(format!("scrape answered {head:?}")));
    }
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        return Ok(dechunk(body));
    }
    Ok(body.to_owned())
}

/// The body of a chunked HTTP/1.1 response.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The value of the sample `name{labels}` in a Prometheus text exposition,
/// where `labels` are the exact label set as the exporter prints it (e.g.
/// `queue="pipeline"`); `None` if it is absent.
pub fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
    let series = if labels.is_empty() { name.to_owned() } else { format!("{name}{{{labels}}}") };
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(series.as_str()).and_then(|v| v.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
}

/// A free TCP port on 127.0.0.1 (bound and released: the caller binds it next).
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

/// What [`pipeline`] did.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// Items sent.
    pub sent: u64,
    /// Items received.
    pub received: u64,
    /// Items received before their deadline (must be 0).
    pub early: u64,
}

/// A small pipeline on a queue named `name`: `producers` threads send
/// `items` in all, due 0–`max_delay` ahead (a fixed pseudo-random sequence),
/// `consumers` threads receive until the queue is exhausted. `during` runs on
/// the calling thread while it flows (a scrape, say).
pub fn pipeline(
    name: &str,
    items: u64,
    producers: u64,
    consumers: usize,
    max_delay: std::time::Duration,
    during: impl FnOnce(),
) -> Outcome {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;
    let (tx, rx) = delayq::Builder::new().name(name).capacity(65536).build::<Instant>().unwrap();
    let received = AtomicU64::new(0);
    let early = AtomicU64::new(0);
    std::thread::scope(|s| {
        for p in 0..producers {
            let tx = tx.clone();
            s.spawn(move || {
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ p;
                let span = max_delay.as_nanos().max(1) as u64;
                for _ in 0..items / producers + u64::from(p < items % producers) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let at = Instant::now() + std::time::Duration::from_nanos(x % span);
                    tx.send_at(at, at).unwrap();
                }
            });
        }
        drop(tx);
        for _ in 0..consumers {
            let rx = rx.clone();
            let (received, early) = (&received, &early);
            s.spawn(move || {
                while let Ok(at) = rx.recv() {
                    if Instant::now() < at {
                        early.fetch_add(1, Ordering::Relaxed);
                    }
                    received.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        during();
    });
    Outcome { sent: items, received: received.into_inner(), early: early.into_inner() }
}

/// Installs the Prometheus exporter as the global recorder, serving on
/// `127.0.0.1:port` (loopback only), with histogram buckets for delayq's
/// seconds and batch sizes.
pub fn install_prometheus(port: u16) -> Result<(), metrics_exporter_prometheus::BuildError> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    let seconds = [1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1, 1.0, 10.0];
    let items: Vec<f64> = (0..14).map(|i| f64::from(1u32 << i)).collect();
    PrometheusBuilder::new()
        .with_http_listener(([127, 0, 0, 1], port))
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &seconds)?
        .set_buckets_for_metric(Matcher::Full("delayq_proxy_batch_items".into()), &items)?
        .install()
}
