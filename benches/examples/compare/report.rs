//! Results of the comparison: the per-run record a child prints, the medians the
//! parent keeps, the markdown table, the raw CSV, the SVG plots, and the issue's
//! targets checked against the numbers of this run.

use crate::workload::{Config, Outcome};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Matrix,
    Paced,
    Overload,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Matrix => "matrix",
            Kind::Paced => "paced",
            Kind::Overload => "overload",
        }
    }
}

/// Quantiles reported for the lateness plot: q = 1 − 10^(−k/4), k = 0..=16 (0 to 4 nines).
pub fn plot_quantiles() -> Vec<f64> {
    (0..=16).map(|k| 1.0 - 10f64.powf(-(k as f64) / 4.0)).collect()
}

/// What one child run measured (its `RESULT` line).
#[derive(Clone, Debug)]
pub struct Measured {
    pub n: u64,
    pub throughput: f64,
    pub wall_s: f64,
    pub cpu_s: f64,
    /// CPU of the implementation's own threads (see `Outcome::helper_cpu`).
    pub helper_cpu_s: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    pub early: u64,
    pub earliest_ns: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub received: u64,
    pub peak_rss: u64,
    /// (nines, lateness ns) for `plot_quantiles()`.
    pub quantiles: Vec<(f64, u64)>,
}

impl Measured {
    pub fn from_outcome(cfg: &Config, o: &Outcome) -> Measured {
        let secs = o.wall.as_secs_f64().max(1e-9);
        let quantiles = plot_quantiles()
            .into_iter()
            .map(|q| ((-(1.0 - q).max(1e-12).log10()).abs(), o.late.quantile(q)))
            .collect();
        Measured {
            n: cfg.items as u64,
            throughput: o.received as f64 / secs,
            wall_s: secs,
            cpu_s: o.cpu.as_secs_f64(),
            helper_cpu_s: o.helper_cpu.as_secs_f64(),
            p50_ns: o.late.quantile(0.5),
            p99_ns: o.late.quantile(0.99),
            p999_ns: o.late.quantile(0.999),
            max_ns: o.late.max,
            early: o.early,
            earliest_ns: o.earliest_ns,
            lost: o.lost,
            duplicated: o.duplicated,
            received: o.received,
            peak_rss: o.peak_rss,
            quantiles,
        }
    }

    pub fn encode(&self) -> String {
        let q: Vec<String> = self.quantiles.iter().map(|(x, v)| format!("{x:.2}:{v}")).collect();
        format!(
            "n={} thr={} wall={} cpu={} hcpu={} p50={} p99={} p999={} max={} early={} earliest={} lost={} dup={} recv={} rss={} q={}",
            self.n,
            self.throughput,
            self.wall_s,
            self.cpu_s,
            self.helper_cpu_s,
            self.p50_ns,
            self.p99_ns,
            self.p999_ns,
            self.max_ns,
            self.early,
            self.earliest_ns,
            self.lost,
            self.duplicated,
            self.received,
            self.peak_rss,
            q.join(",")
        )
    }

    pub fn parse(line: &str) -> Option<Measured> {
        let kv: BTreeMap<&str, &str> = line.split_whitespace().filter_map(|t| t.split_once('=')).collect();
        let u = |k: &str| kv.get(k).and_then(|v| v.parse::<u64>().ok());
        let f = |k: &str| kv.get(k).and_then(|v| v.parse::<f64>().ok());
        let quantiles = kv
            .get("q")?
            .split(',')
            .filter_map(|p| {
                let (x, v) = p.split_once(':')?;
                Some((x.parse().ok()?, v.parse().ok()?))
            })
            .collect();
        Some(Measured {
            n: u("n")?,
            throughput: f("thr")?,
            wall_s: f("wall")?,
            cpu_s: f("cpu")?,
            helper_cpu_s: f("hcpu").unwrap_or(0.0),
            p50_ns: u("p50")?,
            p99_ns: u("p99")?,
            p999_ns: u("p999")?,
            max_ns: u("max")?,
            early: u("early")?,
            earliest_ns: u("earliest")?,
            lost: u("lost")?,
            duplicated: u("dup")?,
            received: u("recv")?,
            peak_rss: u("rss")?,
            quantiles,
        })
    }

    pub fn is_correct(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.early == 0 && self.received == self.n
    }

    pub fn cpu_ns_per_item(&self) -> f64 {
        self.cpu_s * 1e9 / self.n.max(1) as f64
    }

    pub fn helper_ns_per_item(&self) -> f64 {
        self.helper_cpu_s * 1e9 / self.n.max(1) as f64
    }
}

#[derive(Clone, Debug)]
pub enum Status {
    Ok(Measured),
    Failed(String),
}

#[derive(Clone, Debug)]
pub struct RunRecord {
    pub kind: Kind,
    pub name: String,
    pub threads: usize,
    pub n: usize,
    pub d: Duration,
    pub rate: f64,
    pub repeat: usize,
    /// Cores used by other processes on the machine while this run's child ran.
    pub others: f64,
    pub status: Status,
}

impl RunRecord {
    pub fn is_correct(&self) -> bool {
        matches!(&self.status, Status::Ok(m) if m.is_correct())
    }
}

pub struct Meta {
    pub command: String,
    pub machine: String,
    pub load_start: String,
    pub load_end: String,
    pub elapsed: Duration,
    pub n: usize,
    pub repeats: usize,
    pub rate: f64,
    pub paced_secs: f64,
    pub source: String,
}

pub fn fmt_d(d: Duration) -> String {
    if d.is_zero() {
        "0".into()
    } else if d.subsec_nanos().is_multiple_of(1_000_000) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}µs", d.as_micros())
    }
}

fn us(ns: u64) -> String {
    let u = ns as f64 / 1e3;
    if u >= 1000.0 {
        format!("{u:.0}")
    } else {
        format!("{u:.1}")
    }
}

type GroupKey = (Kind, usize, Duration, String);

/// One configuration of one implementation over its repeats.
struct Group<'a> {
    /// The kept (median) repeat.
    median: Option<&'a Measured>,
    runs: Vec<&'a RunRecord>,
}

impl Group<'_> {
    fn all_correct(&self) -> bool {
        self.runs.iter().all(|r| r.is_correct())
    }
}

fn groups(records: &[RunRecord]) -> BTreeMap<GroupKey, Group<'_>> {
    let mut g: BTreeMap<GroupKey, Group<'_>> = BTreeMap::new();
    for r in records {
        g.entry((r.kind, r.threads, r.d, r.name.clone()))
            .or_insert(Group { median: None, runs: Vec::new() })
            .runs
            .push(r);
    }
    for (key, grp) in g.iter_mut() {
        let mut ok: Vec<&Measured> = grp
            .runs
            .iter()
            .filter_map(|r| match &r.status {
                Status::Ok(m) => Some(m),
                Status::Failed(_) => None,
            })
            .collect();
        // Paced runs all offer the same rate: keep the median p99 lateness instead.
        if key.0 == Kind::Paced {
            ok.sort_by_key(|m| m.p99_ns);
        } else {
            ok.sort_by(|a, b| a.throughput.total_cmp(&b.throughput));
        }
        grp.median = ok.get(ok.len() / 2).copied();
    }
    g
}

const PEERS: &[&str] = &["std-heap", "pl-heap", "tokio-dq", "skiplist"];

fn order(name: &str) -> usize {
    crate::peers::ALL.iter().position(|n| *n == name).unwrap_or(usize::MAX)
}

pub fn write_all(dir: &Path, meta: &Meta, records: &[RunRecord]) -> std::io::Result<()> {
    let g = groups(records);
    std::fs::write(dir.join("runs.csv"), csv(records))?;
    std::fs::write(dir.join("results.md"), markdown(meta, records, &g))?;
    if let Err(e) = plot_throughput(&dir.join("throughput.svg"), &g) {
        eprintln!("compare: throughput plot failed: {e}");
    }
    if let Err(e) = plot_lateness(&dir.join("lateness.svg"), &g) {
        eprintln!("compare: lateness plot failed: {e}");
    }
    Ok(())
}

fn csv(records: &[RunRecord]) -> String {
    let mut s = String::from(
        "kind,impl,producers,consumers,n,d_us,offered_per_s,repeat,others_cores,status,items_per_s,wall_s,cpu_s,\
         p50_ns,p99_ns,p999_ns,max_ns,early,earliest_ns,lost,duplicated,received,peak_rss_bytes,helper_cpu_s\n",
    );
    for r in records {
        let head = format!(
            "{},{},{},{},{},{},{},{},{:.2}",
            r.kind.label(),
            r.name,
            r.threads,
            r.threads,
            r.n,
            r.d.as_micros(),
            r.rate,
            r.repeat + 1,
            r.others
        );
        match &r.status {
            Status::Ok(m) => {
                let _ = writeln!(
                    s,
                    "{head},{},{:.0},{:.4},{:.4},{},{},{},{},{},{},{},{},{},{},{:.4}",
                    if m.is_correct() { "ok" } else { "INCORRECT" },
                    m.throughput,
                    m.wall_s,
                    m.cpu_s,
                    m.p50_ns,
                    m.p99_ns,
                    m.p999_ns,
                    m.max_ns,
                    m.early,
                    m.earliest_ns,
                    m.lost,
                    m.duplicated,
                    m.received,
                    m.peak_rss,
                    m.helper_cpu_s
                );
            }
            Status::Failed(why) => {
                let _ = writeln!(s, "{head},\"FAILED: {}\",,,,,,,,,,,,,,", why.replace('"', "'"));
            }
        }
    }
    s
}

fn detail_row(s: &mut String, label: &str, name: &str, grp: &Group<'_>) {
    let flag = if grp.all_correct() { "" } else { " ⚠" };
    match grp.median {
        Some(m) => {
            let _ = writeln!(
                s,
                "| {label} | {name}{flag} | {:.3} | {} | {} | {} | {} | {} | {} / {} | {:.1} | {:.0} | {} | {:.2} |",
                m.throughput / 1e6,
                us(m.p50_ns),
                us(m.p99_ns),
                us(m.p999_ns),
                us(m.max_ns),
                m.early,
                m.lost,
                m.duplicated,
                m.peak_rss as f64 / (1024.0 * 1024.0),
                m.cpu_ns_per_item(),
                if m.helper_cpu_s > 0.0 { format!("{:.0}", m.helper_ns_per_item()) } else { "–".into() },
                m.cpu_s / m.wall_s,
            );
        }
        None => {
            let _ = writeln!(s, "| {label} | {name}{flag} | FAILED | | | | | | | | | | |");
        }
    }
}

const DETAIL_HEAD: &str = "| config | implementation | M items/s | p50 µs | p99 µs | p999 µs | max µs | early | lost / dup | peak RSS MiB | CPU ns/item | of which queue threads | cores busy |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";

fn markdown(meta: &Meta, records: &[RunRecord], g: &BTreeMap<GroupKey, Group<'_>>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# delayq vs peers: comparison results\n");
    let _ = writeln!(s, "- Machine: {}", meta.machine);
    let _ =
        writeln!(s, "- Load average (1/5/15 min): {} at start, {} at end", meta.load_start, meta.load_end);
    let _ = writeln!(s, "- delayq source: {}", meta.source);
    let mut others: Vec<f64> = records.iter().map(|r| r.others).collect();
    others.sort_by(f64::total_cmp);
    if !others.is_empty() {
        let mean = others.iter().sum::<f64>() / others.len() as f64;
        let _ = writeln!(
            s,
            "- Other processes on the machine used {mean:.2} cores on average while the runs ran (per run: median {:.2}, max {:.2}; `others_cores` in runs.csv) — out of {} cores.",
            others[others.len() / 2],
            others[others.len() - 1],
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
    }
    let _ = writeln!(s, "- Command: `{}` ({:.0} s)", meta.command.trim(), meta.elapsed.as_secs_f64());
    let _ = writeln!(
        s,
        "- Matrix runs: N = {} items, producers unthrottled, median of {} repeat(s) by throughput; paced run: {:.0} items/s offered for {} s, 16×16, D = 1 ms (median of {} by p99); overload: `delayq::bounded({})`, 16×16, D = 1 ms, unthrottled.",
        meta.n,
        meta.repeats,
        meta.rate,
        meta.paced_secs,
        meta.repeats,
        crate::peers::BOUNDED_CAP
    );
    let _ = writeln!(
        s,
        "- Lateness = receive time − deadline. `channel` is crossbeam-channel `bounded(1024)` with no delay (always D = 0): the hand-off ceiling, its lateness is plain hand-off latency. Each run is a fresh child process; every run is checked for lost, duplicated and early items (⚠ marks a configuration where some repeat failed a check or did not finish). CPU is the whole child process (producers, consumers and the queue); \"of which queue threads\" is the part spent in the implementation's own threads (delayq's two proxies, tokio-dq's driver).\n"
    );

    // Throughput matrix.
    let matrix_keys: Vec<(usize, Duration)> = {
        let mut v: Vec<(usize, Duration)> =
            g.keys().filter(|k| k.0 == Kind::Matrix).map(|k| (k.1, k.2)).collect();
        v.sort_by_key(|&(t, d)| (d, t));
        v.dedup();
        v
    };
    let mut names: Vec<String> = g.keys().filter(|k| k.0 != Kind::Overload).map(|k| k.3.clone()).collect();
    names.sort_by_key(|n| order(n));
    names.dedup();
    let get = |kind: Kind, t: usize, d: Duration, name: &str| g.get(&(kind, t, d, name.to_owned()));
    let thr = |t: usize, d: Duration, name: &str| {
        get(Kind::Matrix, t, d, name).and_then(|x| x.median).map(|m| m.throughput)
    };

    let _ = writeln!(s, "## Throughput (M items/s, unthrottled producers)\n");
    let _ = write!(s, "| P×C, D |");
    for n in &names {
        let _ = write!(s, " {n} |");
    }
    let _ = writeln!(s, " delayq ÷ best peer | delayq-bounded ÷ best peer | delayq ÷ channel |");
    let _ = write!(s, "|---|");
    for _ in &names {
        let _ = write!(s, "---:|");
    }
    let _ = writeln!(s, "---:|---:|---:|");
    for &(t, d) in &matrix_keys {
        let _ = write!(s, "| {t}×{t}, {} |", fmt_d(d));
        let best_peer =
            PEERS.iter().filter_map(|p| thr(t, d, p).map(|v| (v, *p))).max_by(|a, b| a.0.total_cmp(&b.0));
        for n in &names {
            let cell = match get(Kind::Matrix, t, d, n) {
                Some(grp) => {
                    let flag = if grp.all_correct() { "" } else { " ⚠" };
                    match grp.median {
                        Some(m) if best_peer.is_some_and(|(_, p)| p == n) => {
                            format!("**{:.2}**{flag}", m.throughput / 1e6)
                        }
                        Some(m) => format!("{:.2}{flag}", m.throughput / 1e6),
                        None => "FAILED".into(),
                    }
                }
                None => "–".into(),
            };
            let _ = write!(s, " {cell} |");
        }
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
            _ => "–".into(),
        };
        let bp = best_peer.map(|(v, _)| v);
        let _ = writeln!(
            s,
            " {} | {} | {} |",
            ratio(thr(t, d, "delayq"), bp),
            ratio(thr(t, d, "delayq-bounded"), bp),
            ratio(thr(t, d, "delayq"), thr(t, d, "channel"))
        );
    }
    let _ = writeln!(
        s,
        "\nBold: the best delay-queue peer (std-heap, pl-heap, tokio-dq, skiplist) of the row.\n"
    );
    let _ = writeln!(s, "![throughput vs threads](throughput.svg)\n");

    let _ = writeln!(s, "## Every matrix configuration\n");
    let _ = write!(s, "{DETAIL_HEAD}");
    for &(t, d) in &matrix_keys {
        for n in &names {
            if let Some(grp) = get(Kind::Matrix, t, d, n) {
                detail_row(&mut s, &format!("{t}×{t}, D = {}", fmt_d(d)), n, grp);
            }
        }
    }

    let paced: Vec<&String> =
        names.iter().filter(|n| get(Kind::Paced, 16, Duration::from_millis(1), n).is_some()).collect();
    if !paced.is_empty() {
        let _ = writeln!(s, "\n## Paced: {:.0} items/s offered, 16×16, D = 1 ms\n", meta.rate);
        let _ = write!(s, "{DETAIL_HEAD}");
        for n in &paced {
            if let Some(grp) = get(Kind::Paced, 16, Duration::from_millis(1), n) {
                detail_row(&mut s, "paced 16×16, D = 1ms", n, grp);
            }
        }
        let _ = writeln!(s, "\n![lateness distribution](lateness.svg)");
    }
    let overload: Vec<(&GroupKey, &Group<'_>)> = g.iter().filter(|(k, _)| k.0 == Kind::Overload).collect();
    if !overload.is_empty() {
        let _ = writeln!(s, "\n## Overload: unthrottled, 16×16, D = 1 ms, `delayq::bounded(capacity)`\n");
        let _ = write!(s, "{DETAIL_HEAD}");
        for (k, grp) in &overload {
            detail_row(&mut s, &format!("overload, capacity {}", capacity_of(&k.3)), &k.3, grp);
        }
        let _ = writeln!(
            s,
            "\nLittle's law: a queue kept full spends capacity ÷ throughput per item, nearly all of it late \
             (D ≤ 1 ms). A p50 lateness well below that means the producers did not keep the queue full; \
             a p99 ≤ 1 ms needs an occupancy ≤ ~throughput × 1 ms, far below 65536 here:"
        );
        for (k, grp) in &overload {
            if let Some(m) = grp.median {
                let _ = writeln!(
                    s,
                    "- capacity {}: {} ÷ {:.2} M/s = {:.1} ms in the queue; measured p50 lateness {} µs.",
                    capacity_of(&k.3),
                    capacity_of(&k.3),
                    m.throughput / 1e6,
                    capacity_of(&k.3) as f64 / m.throughput * 1e3,
                    us(m.p50_ns)
                );
            }
        }
    }

    targets(&mut s, g, records, &matrix_keys);

    let failed: Vec<&RunRecord> = records.iter().filter(|r| !r.is_correct()).collect();
    let _ = writeln!(s, "\n## Correctness\n");
    if failed.is_empty() {
        let _ = writeln!(
            s,
            "All {} runs received every item exactly once and none before its deadline.",
            records.len()
        );
    } else {
        let _ = writeln!(s, "{} of {} runs failed a check or did not finish:\n", failed.len(), records.len());
        for r in failed {
            let what = match &r.status {
                Status::Ok(m) => format!(
                    "received {} of {}, lost {}, duplicated {}, early {} (earliest {} ns early)",
                    m.received, m.n, m.lost, m.duplicated, m.early, m.earliest_ns
                ),
                Status::Failed(why) => why.clone(),
            };
            let _ = writeln!(
                s,
                "- {} {} {}×{} D = {} repeat {}: {what}",
                r.kind.label(),
                r.name,
                r.threads,
                r.threads,
                fmt_d(r.d),
                r.repeat + 1
            );
        }
    }
    s
}

fn capacity_of(name: &str) -> usize {
    name.strip_prefix("delayq-bounded-").and_then(|c| c.parse().ok()).unwrap_or(crate::peers::BOUNDED_CAP)
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**not met**"
    }
}

/// delayq ÷ best peer within each repeat of one matrix configuration (the runs of
/// one repeat ran back to back, so they saw the most similar machine load).
fn per_repeat_ratios(records: &[RunRecord], name: &str, t: usize, d: Duration) -> Vec<f64> {
    let thr = |n: &str, rep: usize| {
        records.iter().find_map(|r| match &r.status {
            Status::Ok(m)
                if r.kind == Kind::Matrix && r.threads == t && r.d == d && r.name == n && r.repeat == rep =>
            {
                Some(m.throughput)
            }
            _ => None,
        })
    };
    let reps = records.iter().map(|r| r.repeat + 1).max().unwrap_or(0);
    (0..reps)
        .filter_map(|rep| {
            let dq = thr(name, rep)?;
            let best = PEERS.iter().filter_map(|p| thr(p, rep)).fold(0.0f64, f64::max);
            (best > 0.0).then(|| dq / best)
        })
        .collect()
}

fn targets(
    s: &mut String,
    g: &BTreeMap<GroupKey, Group<'_>>,
    records: &[RunRecord],
    matrix_keys: &[(usize, Duration)],
) {
    let med = |kind: Kind, t: usize, d: Duration, name: &str| {
        g.get(&(kind, t, d, name.to_owned())).and_then(|x| x.median)
    };
    let _ = writeln!(s, "\n## Issue 4 targets, checked against this run\n");
    for &(t, d) in matrix_keys {
        let Some(dq) = med(Kind::Matrix, t, d, "delayq") else { continue };
        let Some((bp, bn)) = PEERS
            .iter()
            .filter_map(|p| med(Kind::Matrix, t, d, p).map(|m| (m.throughput, *p)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
        else {
            continue;
        };
        let need = if d.is_zero() { 1.25 } else { 2.0 };
        let r = dq.throughput / bp;
        let per: Vec<String> =
            per_repeat_ratios(records, "delayq", t, d).iter().map(|x| format!("{x:.2}")).collect();
        let per_b: Vec<String> =
            per_repeat_ratios(records, "delayq-bounded", t, d).iter().map(|x| format!("{x:.2}")).collect();
        let _ = writeln!(
            s,
            "- Throughput {t}×{t}, D = {}: delayq {:.2} M/s = {r:.2}× the best peer ({bn}, {:.2} M/s); target ≥ {need}×: {} (per repeat: {}; delayq-bounded per repeat: {})",
            fmt_d(d),
            dq.throughput / 1e6,
            bp / 1e6,
            verdict(r >= need),
            per.join(", "),
            per_b.join(", ")
        );
    }
    let ms1 = Duration::from_millis(1);
    if let (Some(dq), Some(ch)) =
        (med(Kind::Matrix, 16, ms1, "delayq"), med(Kind::Matrix, 16, ms1, "channel"))
    {
        let r = dq.throughput / ch.throughput;
        let _ = writeln!(
            s,
            "- 16×16, D = 1ms vs the crossbeam-channel hand-off: {:.0} % (target ≥ 50 %): {}",
            r * 100.0,
            verdict(r >= 0.5)
        );
    }
    if let Some(dq) = med(Kind::Paced, 16, ms1, "delayq") {
        let ok = dq.p50_ns <= 10_000 && dq.p99_ns <= 50_000 && dq.p999_ns <= 250_000;
        let _ = writeln!(
            s,
            "- Paced lateness: delayq p50/p99/p999 = {}/{}/{} µs (target ≤ 10/50/250): {}; early {}: {}",
            us(dq.p50_ns),
            us(dq.p99_ns),
            us(dq.p999_ns),
            verdict(ok),
            dq.early,
            verdict(dq.early == 0)
        );
        if let Some(pl) = med(Kind::Paced, 16, ms1, "pl-heap") {
            let _ = writeln!(
                s,
                "- Paced CPU: delayq {:.0} ns/item vs pl-heap {:.0} ns/item (target: no more): {}",
                dq.cpu_ns_per_item(),
                pl.cpu_ns_per_item(),
                verdict(dq.cpu_ns_per_item() <= pl.cpu_ns_per_item())
            );
        }
        for p in ["std-heap", "pl-heap", "tokio-dq"] {
            if let Some(m) = med(Kind::Paced, 16, ms1, p) {
                let better = dq.p50_ns <= m.p50_ns && dq.p99_ns <= m.p99_ns && dq.p999_ns <= m.p999_ns;
                let _ = writeln!(
                    s,
                    "- Paced lateness vs {p} ({}/{}/{} µs): better at p50, p99 and p999: {}",
                    us(m.p50_ns),
                    us(m.p99_ns),
                    us(m.p999_ns),
                    verdict(better)
                );
            }
        }
    }
    for (k, grp) in g.iter().filter(|(k, _)| k.0 == Kind::Overload) {
        if let Some(o) = grp.median {
            let _ = writeln!(
                s,
                "- Overload p99 lateness, `bounded({})`: {} µs (target ≤ 1000 µs){}: {}",
                capacity_of(&k.3),
                us(o.p99_ns),
                if k.3 == "delayq-bounded" { "" } else { " (extra capacity, not the issue's)" },
                verdict(o.p99_ns <= 1_000_000)
            );
        }
    }
}

fn color(name: &str) -> RGBColor {
    match name {
        "delayq" => RGBColor(214, 39, 40),
        "delayq-bounded" => RGBColor(255, 127, 14),
        "delayq-batch" => RGBColor(140, 86, 75),
        "std-heap" => RGBColor(31, 119, 180),
        "pl-heap" => RGBColor(23, 190, 207),
        "tokio-dq" => RGBColor(148, 103, 189),
        "skiplist" => RGBColor(44, 160, 44),
        _ => RGBColor(127, 127, 127),
    }
}

type PlotResult = Result<(), Box<dyn std::error::Error>>;

fn plot_throughput(path: &Path, g: &BTreeMap<GroupKey, Group<'_>>) -> PlotResult {
    let mut delays: Vec<Duration> = g.keys().filter(|k| k.0 == Kind::Matrix).map(|k| k.2).collect();
    delays.sort();
    delays.dedup();
    if delays.is_empty() {
        return Ok(());
    }
    let mut names: Vec<String> = g.keys().filter(|k| k.0 == Kind::Matrix).map(|k| k.3.clone()).collect();
    names.sort_by_key(|n| order(n));
    names.dedup();
    let ymax = g
        .iter()
        .filter(|(k, _)| k.0 == Kind::Matrix)
        .filter_map(|(_, v)| v.median.map(|m| m.throughput / 1e6))
        .fold(0.1f64, f64::max)
        * 1.7;
    let mut threads: Vec<usize> = g.keys().filter(|k| k.0 == Kind::Matrix).map(|k| k.1).collect();
    threads.sort();
    threads.dedup();
    let xpos = |t: usize| threads.iter().position(|&x| x == t).unwrap_or(0) as f64;
    let last = threads.len().saturating_sub(1) as f64;
    let root = SVGBackend::new(path, (420 * delays.len() as u32, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, delays.len()));
    for (panel, &d) in panels.iter().zip(&delays) {
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("throughput, D = {}", fmt_d(d)), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(-0.25f64..last + 0.25, 0f64..ymax)?;
        let labels = |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < threads.len() {
                format!("{0}×{0}", threads[i as usize])
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .x_desc("producers × consumers")
            .y_desc("M items/s")
            .x_labels(4 * threads.len() + 1)
            .x_label_formatter(&labels)
            .light_line_style(WHITE)
            .draw()?;
        for n in &names {
            let mut pts: Vec<(f64, f64)> = g
                .iter()
                .filter(|(k, _)| k.0 == Kind::Matrix && k.2 == d && &k.3 == n)
                .filter_map(|(k, v)| v.median.map(|m| (xpos(k.1), m.throughput / 1e6)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let c = color(n);
            let width = if n.starts_with("delayq") { 3 } else { 2 };
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, width + 1, c.filled())))?;
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(width)))?
                .label(n.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(width)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.85))
            .draw()?;
    }
    root.present()?;
    Ok(())
}

fn plot_lateness(path: &Path, g: &BTreeMap<GroupKey, Group<'_>>) -> PlotResult {
    let ms1 = Duration::from_millis(1);
    let mut panels_spec: Vec<(String, Kind)> = Vec::new();
    if g.keys().any(|k| k.0 == Kind::Paced) {
        panels_spec.push(("paced 16×16, D = 1ms".into(), Kind::Paced));
    }
    if g.keys().any(|k| k.0 == Kind::Matrix && k.1 == 16 && k.2 == ms1) {
        panels_spec.push(("unthrottled 16×16, D = 1ms".into(), Kind::Matrix));
    }
    if panels_spec.is_empty() {
        return Ok(());
    }
    let root = SVGBackend::new(path, (560 * panels_spec.len() as u32, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, panels_spec.len()));
    for (panel, (title, kind)) in panels.iter().zip(&panels_spec) {
        let series: Vec<(String, Vec<(f64, f64)>)> = g
            .iter()
            .filter(|(k, _)| k.0 == *kind && k.1 == 16 && k.2 == ms1)
            .filter_map(|(k, v)| {
                let m = v.median?;
                Some((
                    k.3.clone(),
                    m.quantiles.iter().map(|&(x, ns)| (x, (ns as f64 / 1e3).max(0.1))).collect(),
                ))
            })
            .collect();
        let ymax = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.1)).fold(1.0f64, f64::max) * 2.0;
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("lateness, {title}"), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..4.05f64, (0.1f64..ymax).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("percentile")
            .y_desc("lateness (receive − deadline)")
            .x_labels(5)
            .x_label_formatter(&|x| match x.round() as i64 {
                0 => "p0".into(),
                1 => "p90".into(),
                2 => "p99".into(),
                3 => "p99.9".into(),
                4 => "p99.99".into(),
                _ => String::new(),
            })
            .y_label_formatter(&|y| {
                if *y >= 1e6 {
                    format!("{} s", y / 1e6)
                } else if *y >= 1e3 {
                    format!("{} ms", y / 1e3)
                } else {
                    format!("{y} µs")
                }
            })
            .draw()?;
        let mut series = series;
        series.sort_by_key(|(n, _)| order(n));
        for (n, pts) in series {
            let c = color(&n);
            let width = if n.starts_with("delayq") { 3 } else { 2 };
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(width)))?
                .label(n)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(width)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.85))
            .draw()?;
    }
    root.present()?;
    Ok(())
}
