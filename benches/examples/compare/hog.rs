//! Background load for `--background-load`: a separate process (this binary with
//! `--hog SECS`) that keeps one thread busy in a loop, started by the parent just
//! before a run's child and killed right after it.
//!
//! The hog stops by itself at its deadline (the run's timeout + 5 s), so a parent
//! that dies or is killed mid-run cannot leave a spinning process behind.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Margin past the run's timeout after which the hog exits on its own.
pub const GRACE: Duration = Duration::from_secs(5);

/// `--hog SECS`: says `ready` on stdout, then spins this thread until `SECS`
/// seconds have passed and returns.
pub fn spin(args: &[String]) {
    let secs: f64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(0.0);
    let deadline = Instant::now() + Duration::from_secs_f64(secs.clamp(0.0, 24.0 * 3600.0));
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready").and_then(|()| out.flush());
    drop(out);
    let mut x = 0u64;
    loop {
        // A clock read every 2^16 steps: cheap enough to stay a pure CPU load,
        // often enough (well under 1 ms) to stop on time.
        for _ in 0..1u32 << 16 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        if Instant::now() >= deadline {
            return;
        }
    }
}

/// A running hog process; killed (and reaped) by [`Hog::stop`] or on drop.
pub struct Hog(Option<Child>);

impl Hog {
    /// Starts `exe --hog` with a deadline of `timeout` + [`GRACE`] and returns
    /// once it is spinning (it said `ready`), so that the run meets it from its
    /// first item.
    pub fn start(exe: &Path, timeout: Duration) -> std::io::Result<Hog> {
        let mut child = Command::new(exe)
            .args(["--hog", &(timeout + GRACE).as_secs_f64().to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let mut hog = Hog(None);
        let mut line = String::new();
        let ready = child.stdout.take().map(|out| BufReader::new(out).read_line(&mut line));
        hog.0 = Some(child);
        match ready {
            Some(Ok(_)) if line.trim() == "ready" => Ok(hog),
            Some(Err(e)) => Err(e),
            _ => Err(std::io::Error::other("the hog exited before it was ready")),
        }
    }

    /// Kills the hog and waits for it, so that its CPU time is in
    /// `getrusage(RUSAGE_CHILDREN)` when this returns.
    pub fn stop(mut self) {
        self.kill();
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.kill();
    }
}
