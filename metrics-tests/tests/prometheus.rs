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
    assert_eq!(sample(&text, "delayq_lateness_seconds_count", q), Some(n), "{text}");
    assert_eq!(sample(&text, "delayq_sent_total", q), Some(n), "{text}");
    assert_eq!(sample(&text, "delayq_received_total", q), Some(n), "{text}");
    assert_eq!(sample(&text, "delayq_pending", q), Some(0.0), "{text}");
    // Lateness is never negative (nothing early) and is in seconds.
    let sum = sample(&text, "delayq_lateness_seconds_sum", q).unwrap();
    assert!(sum >= 0.0 && sum / n < 1.0, "mean lateness {} s", sum / n);
    // Every bucket series carries the queue label; the +Inf bucket counts all.
    assert_eq!(
        sample(&text, "delayq_lateness_seconds_bucket", &format!("{q},le=\"+Inf\"")),
        Some(n),
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
        "delayq_staged",
        "delayq_ingress_depth",
        "delayq_lateness_seconds",
        "delayq_proxy_batch_items",
    ] {
        assert!(text.contains(&format!("# TYPE {name} ")), "no TYPE line for {name}:\n{text}");
        assert!(text.contains(&format!("# HELP {name} ")), "no HELP line for {name}:\n{text}");
    }
}
