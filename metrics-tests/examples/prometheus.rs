//! Serves a running pipeline's metrics in Prometheus's text format over HTTP
//! (`metrics-exporter-prometheus`, loopback only), scrapes itself while the
//! items flow and once they are all received, prints what an operator's
//! Prometheus would see, and stops by itself.
//!
//! ```sh
//! cargo run --release -p delayq-metrics-tests --example prometheus -- [--items N] [--port P]
//! ```
//!
//! It exits non-zero if the scrape disagrees with what the pipeline did (the
//! lateness histogram's count, the sent and received counters).

use delayq_metrics_tests::{free_port, install_prometheus, pipeline, sample, scrape};
use std::time::Duration;

fn main() {
    let mut items = 1_000_000u64;
    let mut port = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().and_then(|v| v.parse::<u64>().ok());
        match a.as_str() {
            "--items" => items = value().unwrap_or_else(|| usage("--items takes a number")),
            "--port" => {
                port =
                    Some(value().and_then(|p| u16::try_from(p).ok()).unwrap_or_else(|| usage("bad --port")))
            }
            _ => usage(&format!("unknown argument {a:?}")),
        }
    }
    let port = port.unwrap_or_else(|| free_port().expect("no free port on 127.0.0.1"));
    install_prometheus(port).expect("cannot install the Prometheus exporter");
    println!("serving http://127.0.0.1:{port}/metrics");

    let out = pipeline("pipeline", items, 4, 4, Duration::from_millis(5), || {
        std::thread::sleep(Duration::from_millis(30));
        match scrape(port) {
            Ok(text) => {
                let pending = sample(&text, "delayq_pending", "queue=\"pipeline\"");
                println!("mid-run scrape: {} lines, delayq_pending {pending:?}", text.lines().count());
            }
            Err(e) => println!("mid-run scrape failed: {e}"),
        }
    });
    let text = scrape(port).expect("final scrape failed");
    println!("\nfinal scrape, delayq's series:");
    for l in text.lines().filter(|l| l.starts_with("delayq_") && !l.contains("_bucket")) {
        println!("  {l}");
    }
    let q = "queue=\"pipeline\"";
    let count = sample(&text, "delayq_lateness_seconds_count", q);
    let sent = sample(&text, "delayq_sent_total", q);
    let received = sample(&text, "delayq_received_total", q);
    println!("\npipeline: sent {}, received {}, early {}", out.sent, out.received, out.early);
    // The mid-run scrape may lose the lateness records in flight while it
    // drains the histogram, one per recording thread at most (the four
    // consumers; `tests/prometheus.rs` says how).
    let n = out.received as f64;
    let ok = out.early == 0
        && out.received == out.sent
        && count.is_some_and(|c| c <= n && c >= n - 4.0)
        && sent == Some(out.sent as f64)
        && received == Some(out.received as f64);
    if !ok {
        eprintln!("MISMATCH: lateness count {count:?}, sent_total {sent:?}, received_total {received:?}");
        std::process::exit(1);
    }
    println!(
        "scrape agrees: received_total = sent_total = {}, lateness count {}",
        out.received,
        count.unwrap_or_default()
    );
}

fn usage(why: &str) -> ! {
    eprintln!("{why}\nusage: prometheus [--items N] [--port P]");
    std::process::exit(2);
}
