//! One-shot and repeating timers, a cancel and a panicking callback on a
//! `delayq::timer::Scheduler` (system clock). Finishes in about half a second.
//!
//! Run with `cargo run --example timers`.

use delayq::timer::{MissedTicks, Scheduler};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn main() {
    // A caught panic still goes through the panic hook; keep it to one line.
    std::panic::set_hook(Box::new(|info| {
        let why = info.payload().downcast_ref::<&str>().copied().unwrap_or("?");
        eprintln!("        (a callback panicked: {why})");
    }));

    let s = Scheduler::builder().threads(2).build().expect("start the scheduler");
    let start = Instant::now();
    let (tx, rx) = mpsc::channel::<String>();

    // One-shots, scheduled out of order: they run in time order.
    for (after, what) in [(300, "tea is ready"), (100, "toast is ready"), (200, "eggs are ready")] {
        let tx = tx.clone();
        s.schedule_after(ms(after), move || {
            let _ = tx.send(format!("{:>4} ms  {what}", start.elapsed().as_millis()));
        });
    }

    // A one-shot cancelled before it is due: it never runs.
    let burn = s.schedule_after(ms(250), || unreachable!("cancelled"));
    assert!(s.cancel(burn));

    // A callback that panics: caught and counted; nothing else is disturbed.
    s.schedule_after(ms(150), || panic!("the smoke alarm went off"));

    // A repeating timer every 80 ms, on the grid start + 80·k.
    let ticks = tx.clone();
    let mut n = 0;
    let every = s.schedule_every(start + ms(80), ms(80), MissedTicks::Skip, move || {
        n += 1;
        let _ = ticks.send(format!("{:>4} ms  tick {n}", start.elapsed().as_millis()));
    });
    drop(tx);

    println!("{} timers scheduled", s.len());
    let stop_at = start + ms(400);
    while let Some(left) = stop_at.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => println!("{line}"),
            Err(_) => break,
        }
    }
    assert!(s.cancel(every), "the repeating timer was still scheduled");
    s.shutdown();
    println!("after shutdown: {} timers, {} panicked callback(s)", s.len(), s.panicked());
    assert_eq!(s.panicked(), 1);
    assert_eq!(s.len(), 0);
}
