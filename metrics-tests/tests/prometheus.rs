//! The Prometheus exporter, scraped over loopback HTTP while a pipeline runs
//! and after: the names and labels an operator's dashboards rely on, and a
//! lateness histogram whose count is the number of items received. One test
//! in this file: it installs the process's global recorder.

use delayq_metrics_tests::{free_port, install_prometheus, pipeline, sample, scrape};
use std::time::Duration;

#[test]
fn scrape_names_labels_and_counts() {
    let port = free_port().unwrap();
    install_prometheus(port).unwrap();
    let mut mid = None;
    let out = pipeline("scraped", 60_000, 2, 2, Duration::from_millis(2), || {
        std::thread::sleep(Duration::from_millis(20));
        mid = Some(scrape(port));
    });
    assert_eq!((out.received, out.early), (out.sent, 0));
    let mid = mid.unwrap().expect("mid-run scrape");
    assert!(mid.contains("delayq_sent_total{queue=\"scraped\"}"), "mid-run scrape:\n{mid}");

    let text = scrape(port).unwrap();
    let q = "queue=\"scraped\"";
    let n = out.received as f64;
    // One lateness value per item received, less what the mid-run scrape may
    // have lost: the exporter drains a histogram's `AtomicBucket`
    // (metrics-util) by swapping its block list out, and a record that had
    // loaded the old block before the swap but claims its slot after the
    // drain saw the block quiet lands in a retired block. Each recording
    // thread (the two consumers) has at most one record in flight.
    let count = sample(&text, "delayq_lateness_seconds_count", q).unwrap();
    assert!(count <= n && count >= n - 2.0, "lateness count {count} for {n} items:\n{text}");
    assert_eq!(sample(&text, "delayq_sent_total", q), Some(n), "{text}");
    assert_eq!(sample(&text, "delayq_received_total", q), Some(n), "{text}");
    assert_eq!(sample(&text, "delayq_pending", q), Some(0.0), "{text}");
    // Lateness is never negative (nothing early) and is in seconds.
    let sum = sample(&text, "delayq_lateness_seconds_sum", q).unwrap();
    assert!(sum >= 0.0 && sum / count < 1.0, "mean lateness {} s", sum / count);
    // Every bucket series carries the queue label; the +Inf bucket counts all.
    assert_eq!(
        sample(&text, "delayq_lateness_seconds_bucket", &format!("{q},le=\"+Inf\"")),
        Some(count),
        "{text}"
    );
    // Both proxies' batches, labelled by proxy.
    for proxy in ["enqueue", "dequeue"] {
        let c = sample(&text, "delayq_proxy_batch_items_count", &format!("proxy=\"{proxy}\",{q}"))
            .or_else(|| sample(&text, "delayq_proxy_batch_items_count", &format!("{q},proxy=\"{proxy}\"")));
        assert!(c.is_some_and(|c| c >= 1.0), "no {proxy} batches in:\n{text}");
    }
    // Every series the core declares is described (a HELP line) and typed.
    for name in [
        "delayq_sent_total",
        "delayq_received_total",
        "delayq_pending",
        "delayq_due",
        "delayq_ingress_depth",
        "delayq_lateness_seconds",
        "delayq_proxy_batch_items",
    ] {
        assert!(text.contains(&format!("# TYPE {name} ")), "no TYPE line for {name}:\n{text}");
        assert!(text.contains(&format!("# HELP {name} ")), "no HELP line for {name}:\n{text}");
    }
}
