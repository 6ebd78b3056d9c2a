//! Side-by-side comparison of `delayq` against the peers a Rust user would
//! otherwise pick, on the SAME workload, in one run on one machine (issue 4).
//!
//! ```text
//! cargo run --release -p delayq-bench --example compare                 # full run → docs/bench/
//! cargo run --release -p delayq-bench --example compare -- --quick      # CI smoke run (~1–2 min) → target/bench-quick/
//! cargo run --release -p delayq-bench --example compare -- --help
//! ```
//!
//! Workload (`compare/workload.rs`): P producers, C consumers, N items, deadline =
//! (send time) + uniform[0, D]. The matrix is D ∈ {0, 1 ms, 10 ms} × (P, C) ∈
//! {(1,1), (4,4), (16,16)} with unthrottled producers; then a paced sweep (20,000
//! to 1,000,000 items/s offered in total, 16×16, D = 1 ms) for lateness and CPU
//! against load, and an overload run (unthrottled, 16×16, D = 1 ms) of
//! `delayq::bounded(65536)` for back-pressure. Implementations are in
//! `compare/peers.rs`. With `--background-load`, each run shares the machine
//! with one spinning thread (`compare/hog.rs`).
//!
//! Each run is a child process of this binary (`--child …`), so peak RSS (VmHWM)
//! and CPU time (getrusage) belong to that run alone, and a hang or crash is
//! caught (with a timeout) and reported instead of stopping the comparison. Every
//! run is checked: each id received exactly once (lost / duplicated), none before
//! its deadline (early). The parent keeps every repeat (min / median / max) and
//! the median-throughput one of each configuration, and writes `results.md`,
//! `runs.csv`, `throughput.svg`, `lateness.svg` and `sweep.svg` to the output
//! directory.

#[path = "compare/hog.rs"]
mod hog;
#[path = "compare/peers.rs"]
mod peers;
#[path = "compare/report.rs"]
mod report;
#[path = "compare/sys.rs"]
mod sys;
#[path = "compare/workload.rs"]
mod workload;

use report::{Kind, Measured, RunRecord, Status};
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use workload::{Config, Pace};

const HELP: &str = "\
compare: delayq vs peers on one workload (see benches/examples/compare.rs and docs/bench/README.md)

USAGE: cargo run --release -p delayq-bench --example compare -- [OPTIONS]

OPTIONS:
  --quick             smoke run for CI: N = 500000, 1 repeat, configs 1x1/4x4/16x16 at
                      D = 1 ms plus 16x16 at D = 0, one paced rate (100000) for 1 s;
                      writes to target/bench-quick unless --out is given
  --n N               items per matrix run (default 2000000)
  --repeats R         repeats of every run; results.md shows min / median / max and
                      keeps the median-throughput one (paced: median p99) (default 3)
  --impls a,b,...     subset of: delayq,delayq-bounded,delayq-nohelp,delayq-nice,delayq-batch,delayq-async,delayq-async-direct,std-heap,pl-heap,tokio-dq,skiplist,channel
                      (default: all but delayq-nice, which needs CAP_SYS_NICE, and
                      delayq-nohelp, the A/B of Builder::helping(false)); the paced
                      sweep adds a `floor` row at every rate (one thread sleeping
                      until evenly spaced deadlines: how late a wake-up is here)
  --threads 1,4,16    producers = consumers per side (default 1,4,16)
  --delays 0,1,10     D values in ms (default 0,1,10)
  --paced-secs S      length of each paced run (default 3; 0 skips the sweep)
  --rates R1,R2,...   offered items/s (in total; 16x16, D = 1 ms) of the paced sweep,
                      one run per rate (default 20000,100000,400000,1000000)
  --rate R            a single paced rate: same as --rates R
  --overload-caps C,… capacities of the overload runs (default 65536,4096)
  --no-overload       skip the overload runs
  --timeout S         per-run timeout in seconds (default 30 + N/25000)
  --out DIR           output directory (default docs/bench)
  --wait-quiet C      before each run, wait until other processes use less than C
                      cores over a 1 s sample (at most 60 s per run, 15 min in all);
                      measured before the background hog, if any, starts; and run
                      again (up to 3 attempts, the last kept) a run during which
                      they used more (hypervisor steal counts as other processes)
  --background-load   run every child alongside one spinning thread (a separate
                      process, started just before the child and killed after it)
  --background-load both
                      run every configuration without and then with the spinning
                      thread (interleaved: quiet run, loaded run, per repeat); results.md
                      shows the two side by side
";

struct Options {
    quick: bool,
    n: usize,
    repeats: usize,
    impls: Vec<String>,
    matrix: Vec<(usize, Duration)>,
    paced_secs: f64,
    rates: Vec<f64>,
    /// Background-load modes to run, in order: `false` = quiet, `true` = with the hog.
    loads: Vec<bool>,
    overload_caps: Vec<usize>,
    timeout: Option<Duration>,
    out: Option<PathBuf>,
    wait_quiet: Option<f64>,
}

/// One run of the plan: an implementation, a configuration, a repeat, a load.
struct Planned {
    kind: Kind,
    name: String,
    threads: usize,
    n: usize,
    d: Duration,
    pace: Pace,
    repeat: usize,
    /// Run alongside the background hog.
    loaded: bool,
}

fn parse_list<T: std::str::FromStr>(s: &str, what: &str) -> Vec<T> {
    s.split(',')
        .map(|x| x.trim().parse::<T>().unwrap_or_else(|_| die(&format!("bad {what}: {x:?}"))))
        .collect()
}

fn die(msg: &str) -> ! {
    eprintln!("compare: {msg}\n\n{HELP}");
    std::process::exit(2)
}

fn parse_options(args: &[String]) -> Options {
    let mut o = Options {
        quick: false,
        n: 2_000_000,
        repeats: 3,
        impls: peers::ALL
            .iter()
            .filter(|s| !matches!(**s, "delayq-nice" | "delayq-nohelp"))
            .map(|s| s.to_string())
            .collect(),
        matrix: Vec::new(),
        paced_secs: 3.0,
        rates: vec![20_000.0, 100_000.0, 400_000.0, 1_000_000.0],
        loads: vec![false],
        overload_caps: vec![peers::BOUNDED_CAP, 4096],
        timeout: None,
        out: None,
        wait_quiet: None,
    };
    let (mut threads, mut delays): (Option<Vec<usize>>, Option<Vec<u64>>) = (None, None);
    let (mut n_set, mut r_set, mut paced_set, mut rates_set) = (false, false, false, false);
    let mut i = 0;
    let value = |i: &mut usize| -> String {
        *i += 1;
        args.get(*i).cloned().unwrap_or_else(|| die(&format!("{} needs a value", args[*i - 1])))
    };
    while i < args.len() {
        match args[i].as_str() {
            "--quick" => o.quick = true,
            "--n" => {
                o.n = value(&mut i).replace('_', "").parse().unwrap_or_else(|_| die("bad --n"));
                n_set = true;
            }
            "--repeats" => {
                o.repeats = value(&mut i).parse().unwrap_or_else(|_| die("bad --repeats"));
                r_set = true;
            }
            "--impls" => {
                o.impls = value(&mut i).split(',').map(|s| s.trim().to_owned()).collect();
                for name in &o.impls {
                    if !peers::ALL.contains(&name.as_str()) {
                        die(&format!("unknown implementation {name:?}"));
                    }
                }
            }
            "--threads" => threads = Some(parse_list(&value(&mut i), "--threads")),
            "--delays" => delays = Some(parse_list(&value(&mut i), "--delays")),
            "--paced-secs" => {
                o.paced_secs = value(&mut i).parse().unwrap_or_else(|_| die("bad --paced-secs"));
                paced_set = true;
            }
            "--rate" => {
                o.rates = vec![value(&mut i).parse().unwrap_or_else(|_| die("bad --rate"))];
                rates_set = true;
            }
            "--rates" => {
                o.rates = parse_list(&value(&mut i), "--rates");
                rates_set = true;
            }
            "--background-load" => {
                o.loads = if args.get(i + 1).map(String::as_str) == Some("both") {
                    i += 1;
                    vec![false, true]
                } else {
                    vec![true]
                };
            }
            "--no-overload" => o.overload_caps.clear(),
            "--overload-caps" => o.overload_caps = parse_list(&value(&mut i), "--overload-caps"),
            "--timeout" => {
                o.timeout = Some(Duration::from_secs_f64(
                    value(&mut i).parse().unwrap_or_else(|_| die("bad --timeout")),
                ))
            }
            "--out" => o.out = Some(PathBuf::from(value(&mut i))),
            "--wait-quiet" => {
                o.wait_quiet = Some(value(&mut i).parse().unwrap_or_else(|_| die("bad --wait-quiet")))
            }
            "-h" | "--help" => {
                print!("{HELP}");
                std::process::exit(0);
            }
            other => die(&format!("unknown option {other:?}")),
        }
        i += 1;
    }
    if o.repeats == 0 || o.n == 0 {
        die("--n and --repeats must be at least 1");
    }
    if o.rates.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
        die("paced rates must be positive");
    }
    if o.quick {
        if !n_set {
            o.n = 500_000;
        }
        if !r_set {
            o.repeats = 1;
        }
        if !paced_set {
            o.paced_secs = 1.0;
        }
        if !rates_set {
            o.rates = vec![100_000.0];
        }
    }
    let ms = Duration::from_millis;
    o.matrix = match (threads, delays, o.quick) {
        (None, None, true) => vec![(1, ms(1)), (4, ms(1)), (16, ms(0)), (16, ms(1))],
        (t, d, _) => {
            let t = t.unwrap_or_else(|| vec![1, 4, 16]);
            let d = d.unwrap_or_else(|| vec![0, 1, 10]);
            d.iter().flat_map(|&d| t.iter().map(move |&t| (t, ms(d)))).collect()
        }
    };
    o
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--child") => return child(&args[1..]),
        Some("--hog") => return hog::spin(&args[1..]),
        _ => {}
    }
    let o = parse_options(&args);
    let out = o.out.clone().unwrap_or_else(|| {
        // The repository's root: this package lives in `benches/`.
        let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
        if o.quick {
            root.join("target/bench-quick")
        } else {
            root.join("docs/bench")
        }
    });
    std::fs::create_dir_all(&out).unwrap_or_else(|e| die(&format!("cannot create {}: {e}", out.display())));
    let machine_start = sys::machine_line();
    let load_start = sys::loadavg();
    let started = Instant::now();
    eprintln!("compare: {machine_start}");

    // Every run, in order: repeats outermost, so that a burst of outside load
    // hits every implementation of a configuration rather than one of them; with
    // `--background-load both`, the quiet and the loaded run of one
    // implementation and configuration go back to back.
    let mut plan: Vec<Planned> = Vec::new();
    for repeat in 0..o.repeats {
        let mut push = |kind: Kind, name: &str, threads: usize, n: usize, d: Duration, pace: Pace| {
            for &loaded in &o.loads {
                plan.push(Planned { kind, name: name.to_owned(), threads, n, d, pace, repeat, loaded });
            }
        };
        for &(t, d) in &o.matrix {
            for name in &o.impls {
                push(Kind::Matrix, name, t, o.n, d, Pace::Unthrottled);
            }
        }
        if o.paced_secs > 0.0 {
            for &rate in &o.rates {
                let n = ((rate * o.paced_secs).round() as usize).max(1);
                for name in &o.impls {
                    push(Kind::Paced, name, 16, n, Duration::from_millis(1), Pace::Rate(rate));
                }
                // The floor: how late a sleeping thread wakes, at one of the
                // 16 consumers' share of this rate.
                push(Kind::Paced, "floor", 16, n, Duration::from_millis(1), Pace::Rate(rate));
            }
        }
        for &cap in &o.overload_caps {
            let name = if cap == peers::BOUNDED_CAP {
                "delayq-bounded".to_owned()
            } else {
                format!("delayq-bounded-{cap}")
            };
            push(Kind::Overload, &name, 16, o.n, Duration::from_millis(1), Pace::Unthrottled);
        }
    }

    // Children run from a private copy of this binary, so that a `cargo build` by
    // someone else on the machine cannot swap the code under a running comparison.
    let exe = private_copy();
    let source = source_rev();
    let mut records = Vec::new();
    for (i, p) in plan.iter().enumerate() {
        // The channel has no delay: it always runs with D = 0 (the hand-off ceiling).
        let d_eff = if p.name == "channel" { Duration::ZERO } else { p.d };
        let timeout = o.timeout.unwrap_or_else(|| Duration::from_secs(30 + (p.n / 25_000) as u64));
        let rate = match p.pace {
            Pace::Unthrottled => 0.0,
            Pace::Rate(r) => r,
        };
        // With --wait-quiet, a run during which the rest of the machine (a
        // hypervisor's steal included) used more than the limit is run again,
        // up to 3 times; the last attempt is kept either way.
        let mut attempt = 0;
        let (status, others, hog_cores, child_s) = loop {
            // Measured before the hog starts: it waits for the rest of the machine.
            if let Some(limit) = o.wait_quiet {
                wait_quiet(limit);
            }
            let t0 = Instant::now();
            let (busy0, kids0) = (sys::machine_busy(), sys::children_cpu());
            let hog = if p.loaded {
                match hog::Hog::start(&exe, timeout) {
                    Ok(h) => Some(h),
                    Err(e) => die(&format!("cannot start the background hog: {e}")),
                }
            } else {
                None
            };
            let c0 = Instant::now();
            let status = run_child(&exe, &p.name, p.threads, p.n, d_eff, rate, timeout);
            let child_s = c0.elapsed().as_secs_f64();
            let kids1 = sys::children_cpu();
            if let Some(h) = hog {
                h.stop();
            }
            let (elapsed, kids2) = (t0.elapsed().as_secs_f64().max(1e-3), sys::children_cpu());
            // Cores used by everything else on the machine while the child (and the
            // hog, both reaped by now) ran, and by the hog itself.
            let others = ((sys::machine_busy() - busy0) - (kids2 - kids0)).max(0.0) / elapsed;
            let hog_cores = (kids2 - kids1).max(0.0) / elapsed;
            attempt += 1;
            match o.wait_quiet {
                Some(limit) if others > limit && attempt < 3 => {
                    eprintln!("[{:>3}/{}] others {others:.2} cores during the run: again", i + 1, plan.len());
                }
                _ => break (status, others, hog_cores, child_s),
            }
        };
        let line = match &status {
            Status::Ok(m) => format!(
                "{:>8.3} M/s  p50 {:>9.1} µs  p99 {:>9.1} µs  lost {} dup {} early {}",
                m.throughput / 1e6,
                m.p50_ns as f64 / 1e3,
                m.p99_ns as f64 / 1e3,
                m.lost,
                m.duplicated,
                m.early
            ),
            Status::Failed(why) => format!("FAILED: {why}"),
        };
        let what = match p.pace {
            Pace::Rate(r) => format!("{r:.0}/s"),
            Pace::Unthrottled => format!("D={}", report::fmt_d(p.d)),
        };
        eprintln!(
            "[{:>3}/{}] {:<8} {:<14} {:>2}x{:<2} {what:<10} {:<4} rep {}  {line}  ({child_s:.1} s, others {others:.2} cores{})",
            i + 1,
            plan.len(),
            p.kind.label(),
            p.name,
            p.threads,
            p.threads,
            if p.loaded { "+hog" } else { "" },
            p.repeat + 1,
            if p.loaded { format!(", hog {hog_cores:.2}") } else { String::new() }
        );
        records.push(RunRecord {
            kind: p.kind,
            name: p.name.clone(),
            threads: p.threads,
            n: p.n,
            d: p.d,
            rate,
            repeat: p.repeat,
            loaded: p.loaded,
            others,
            hog_cores,
            child_s,
            status,
        });
    }

    let command = std::iter::once("cargo run --release -p delayq-bench --example compare --".to_owned())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let meta = report::Meta {
        command,
        machine: machine_start,
        load_start,
        load_end: sys::loadavg(),
        elapsed: started.elapsed(),
        n: o.n,
        repeats: o.repeats,
        rates: o.rates.clone(),
        paced_secs: o.paced_secs,
        loads: o.loads.clone(),
        source,
    };
    let _ = std::fs::remove_file(&exe);
    report::write_all(&out, &meta, &records).unwrap_or_else(|e| die(&format!("writing the report: {e}")));
    eprintln!(
        "compare: wrote {}/results.md, runs.csv, throughput.svg, lateness.svg, sweep.svg",
        out.display()
    );
    let bad = records.iter().filter(|r| !r.is_correct()).count();
    if bad > 0 {
        eprintln!("compare: {bad} run(s) FAILED or were incorrect (lost/duplicated/early/hang/crash); see results.md");
        std::process::exit(1);
    }
}

/// Waits until the rest of the machine uses fewer than `limit` cores over a 1 s
/// sample (this process is idle meanwhile): at most 60 s per run and 15 min in
/// all, after which runs go ahead regardless (`others_cores` records the load).
fn wait_quiet(limit: f64) {
    static WAITED_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let budget = Duration::from_secs(15 * 60);
    let t0 = Instant::now();
    loop {
        let b0 = sys::machine_busy();
        std::thread::sleep(Duration::from_secs(1));
        let busy = sys::machine_busy() - b0;
        let total =
            Duration::from_millis(WAITED_MS.load(std::sync::atomic::Ordering::Relaxed)) + t0.elapsed();
        if busy < limit || t0.elapsed() > Duration::from_secs(60) || total > budget {
            let ms = t0.elapsed().as_millis() as u64;
            WAITED_MS.fetch_add(ms, std::sync::atomic::Ordering::Relaxed);
            return;
        }
    }
}

fn private_copy() -> PathBuf {
    let me = std::env::current_exe().expect("current_exe");
    let copy = std::env::temp_dir().join(format!("compare-child-{}", std::process::id()));
    match std::fs::copy(&me, &copy) {
        Ok(_) => copy,
        Err(e) => {
            eprintln!("compare: cannot copy {} ({e}); children run it in place", me.display());
            me
        }
    }
}

/// The git revision of the working tree being measured (and whether src/ is dirty).
fn source_rev() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(rev) => {
            let dirty = git(&["status", "--porcelain", "--", "src"]).is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{rev} + uncommitted changes in src/")
            } else {
                rev
            }
        }
        None => "unknown (not a git checkout)".into(),
    }
}

fn run_child(
    exe: &std::path::Path,
    name: &str,
    threads: usize,
    n: usize,
    d: Duration,
    rate: f64,
    timeout: Duration,
) -> Status {
    let mut child = match Command::new(exe)
        .args([
            "--child",
            name,
            &threads.to_string(),
            &n.to_string(),
            &d.as_nanos().to_string(),
            &rate.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Status::Failed(format!("spawn: {e}")),
    };
    let mut out_pipe = child.stdout.take().expect("piped");
    let mut err_pipe = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out_pipe.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    let t0 = Instant::now();
    let exit = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if t0.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Status::Failed(format!("wait: {e}")),
        }
    };
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    let tail = |s: &str| {
        s.lines().rev().take(3).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join(" | ")
    };
    match exit {
        None => Status::Failed(format!("HANG: no result within {:.0} s (killed)", timeout.as_secs_f64())),
        Some(st) if !st.success() => Status::Failed(format!("CRASH: {st}; stderr: {}", tail(&stderr))),
        Some(_) => match stdout.lines().find_map(|l| l.strip_prefix("RESULT ")).and_then(Measured::parse) {
            Some(m) => Status::Ok(m),
            None => Status::Failed(format!("no RESULT line; stderr: {}", tail(&stderr))),
        },
    }
}

/// `--child IMPL THREADS N D_NS RATE`: one run, printed as a `RESULT` line.
fn child(args: &[String]) {
    let [name, threads, n, d_ns, rate] = args else {
        die("--child IMPL THREADS N D_NS RATE");
    };
    let threads: usize = threads.parse().expect("threads");
    let cfg = Config {
        producers: threads,
        consumers: threads,
        items: n.parse().expect("n"),
        max_delay: Duration::from_nanos(d_ns.parse().expect("d_ns")),
        pace: match rate.parse::<f64>().expect("rate") {
            r if r > 0.0 => Pace::Rate(r),
            _ => Pace::Unthrottled,
        },
    };
    let o = if name == "floor" {
        workload::floor(&cfg)
    } else {
        workload::run(&cfg, peers::build(name, cfg.producers, cfg.consumers))
    };
    println!("RESULT {}", Measured::from_outcome(&cfg, &o).encode());
}
