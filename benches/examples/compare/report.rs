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
    /// Ran alongside the background hog (`--background-load`).
    pub loaded: bool,
    /// Cores used by other processes on the machine while this run's child ran
    /// (neither the child nor the hog).
    pub others: f64,
    /// Cores used by the background hog over the same window (0 without one).
    pub hog_cores: f64,
    /// Wall time of the child process, start to exit (setup and checks included).
    pub child_s: f64,
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
    pub rates: Vec<f64>,
    pub paced_secs: f64,
    /// Background-load modes run: `false` = quiet, `true` = with the hog.
    pub loads: Vec<bool>,
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
    us_f(ns as f64)
}

fn us_f(ns: f64) -> String {
    let u = ns / 1e3;
    if u >= 1000.0 {
        format!("{u:.0}")
    } else {
        format!("{u:.1}")
    }
}

/// One configuration of one implementation: what the report groups repeats by.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct GroupKey {
    loaded: bool,
    kind: Kind,
    threads: usize,
    d: Duration,
    /// Offered items/s of a paced run; 0 when unthrottled.
    rate: u64,
    name: String,
}

impl GroupKey {
    fn of(r: &RunRecord) -> GroupKey {
        GroupKey {
            loaded: r.loaded,
            kind: r.kind,
            threads: r.threads,
            d: r.d,
            rate: r.rate.round() as u64,
            name: r.name.clone(),
        }
    }
}

/// Min, median and max of one figure over the repeats that finished.
#[derive(Clone, Copy, Debug)]
struct Spread {
    min: f64,
    median: f64,
    max: f64,
}

impl Spread {
    /// `median (min–max)`, each value passed through `f`; only the median with one repeat.
    fn show(&self, f: impl Fn(f64) -> String) -> String {
        if self.min == self.max {
            f(self.median)
        } else {
            format!("{} ({}–{})", f(self.median), f(self.min), f(self.max))
        }
    }

    /// `min / median / max`.
    fn slashed(&self, f: impl Fn(f64) -> String) -> String {
        format!("{} / {} / {}", f(self.min), f(self.median), f(self.max))
    }
}

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

    fn spread(&self, f: impl Fn(&Measured) -> f64) -> Option<Spread> {
        let mut v: Vec<f64> = self
            .runs
            .iter()
            .filter_map(|r| match &r.status {
                Status::Ok(m) => Some(f(m)),
                Status::Failed(_) => None,
            })
            .collect();
        v.sort_by(f64::total_cmp);
        // The upper median with an even count, like the kept repeat.
        Some(Spread { min: *v.first()?, median: v[v.len() / 2], max: *v.last()? })
    }

    fn throughput(&self) -> Option<Spread> {
        self.spread(|m| m.throughput)
    }

    fn flag(&self) -> &'static str {
        if self.all_correct() {
            ""
        } else {
            " ⚠"
        }
    }
}

type Groups<'a> = BTreeMap<GroupKey, Group<'a>>;

fn groups(records: &[RunRecord]) -> Groups<'_> {
    let mut g: Groups<'_> = BTreeMap::new();
    for r in records {
        g.entry(GroupKey::of(r)).or_insert(Group { median: None, runs: Vec::new() }).runs.push(r);
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
        // A paced run offers a fixed rate: keep the median p99 lateness instead.
        if key.kind == Kind::Paced {
            ok.sort_by_key(|m| m.p99_ns);
        } else {
            ok.sort_by(|a, b| a.throughput.total_cmp(&b.throughput));
        }
        grp.median = ok.get(ok.len() / 2).copied();
    }
    g
}

/// The groups of one background-load mode.
#[derive(Clone, Copy)]
struct View<'g, 'a> {
    g: &'g Groups<'a>,
    loaded: bool,
}

impl<'g, 'a> View<'g, 'a> {
    fn get(&self, kind: Kind, threads: usize, d: Duration, rate: u64, name: &str) -> Option<&'g Group<'a>> {
        self.g.get(&GroupKey { loaded: self.loaded, kind, threads, d, rate, name: name.to_owned() })
    }

    fn matrix(&self, t: usize, d: Duration, name: &str) -> Option<&'g Group<'a>> {
        self.get(Kind::Matrix, t, d, 0, name)
    }

    fn paced(&self, rate: u64, name: &str) -> Option<&'g Group<'a>> {
        self.get(Kind::Paced, 16, Duration::from_millis(1), rate, name)
    }

    fn keys(&self) -> impl Iterator<Item = (&'g GroupKey, &'g Group<'a>)> + '_ {
        let loaded = self.loaded;
        self.g.iter().filter(move |(k, _)| k.loaded == loaded)
    }

    /// The offered rates of the paced sweep, ascending.
    fn rates(&self) -> Vec<u64> {
        let mut v: Vec<u64> =
            self.keys().filter(|(k, _)| k.kind == Kind::Paced).map(|(k, _)| k.rate).collect();
        v.sort();
        v.dedup();
        v
    }

    /// The implementations run in `kind` (any of them when `None`), in report order.
    fn names(&self, kind: Option<Kind>) -> Vec<String> {
        let mut v: Vec<String> = self
            .keys()
            .filter(|(k, _)| kind.map_or(k.kind != Kind::Overload, |kind| k.kind == kind))
            .map(|(k, _)| k.name.clone())
            .collect();
        v.sort_by_key(|n| order(n));
        v.dedup();
        v
    }
}

/// The peer every ratio is taken against.
const BASE: &str = "pl-heap";

const PEERS: &[&str] = &["std-heap", "pl-heap", "tokio-dq", "skiplist"];

fn order(name: &str) -> usize {
    crate::peers::ALL.iter().position(|n| *n == name).unwrap_or(usize::MAX)
}

fn mode_title(loaded: bool) -> &'static str {
    if loaded {
        "with background load (one spinning thread)"
    } else {
        "without background load"
    }
}

/// ` — without background load` etc. when the run had both modes, else nothing.
fn mode_suffix(meta: &Meta, loaded: bool) -> String {
    if meta.loads.len() > 1 {
        format!(" — {}", mode_title(loaded))
    } else {
        String::new()
    }
}

fn fmt_rate(r: u64) -> String {
    if r >= 1000 && r.is_multiple_of(1000) {
        format!("{}k", r / 1000)
    } else {
        r.to_string()
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "–".into(),
    }
}

/// Whether `a`'s slowest repeat is at least as fast as `b`'s fastest.
fn dominates(a: Option<Spread>, b: Option<Spread>) -> Option<bool> {
    Some(a?.min >= b?.max)
}

fn yes_no(x: Option<bool>) -> &'static str {
    match x {
        Some(true) => "yes",
        Some(false) => "no",
        None => "–",
    }
}

pub fn write_all(dir: &Path, meta: &Meta, records: &[RunRecord]) -> std::io::Result<()> {
    let g = groups(records);
    std::fs::write(dir.join("runs.csv"), csv(records))?;
    std::fs::write(dir.join("results.md"), markdown(meta, records, &g))?;
    // The single-mode plots show the quiet runs when there are any.
    let view = View { g: &g, loaded: meta.loads.first().copied().unwrap_or(false) };
    if let Err(e) = plot_throughput(&dir.join("throughput.svg"), view) {
        eprintln!("compare: throughput plot failed: {e}");
    }
    if let Err(e) = plot_lateness(&dir.join("lateness.svg"), view) {
        eprintln!("compare: lateness plot failed: {e}");
    }
    if let Err(e) = plot_sweep(&dir.join("sweep.svg"), &g, &meta.loads) {
        eprintln!("compare: sweep plot failed: {e}");
    }
    Ok(())
}

fn csv(records: &[RunRecord]) -> String {
    let mut s = String::from(
        "kind,impl,producers,consumers,n,d_us,offered_per_s,background_load,repeat,others_cores,hog_cores,child_s,\
         status,items_per_s,wall_s,cpu_s,p50_ns,p99_ns,p999_ns,max_ns,early,earliest_ns,lost,duplicated,received,\
         peak_rss_bytes,helper_cpu_s\n",
    );
    for r in records {
        let head = format!(
            "{},{},{},{},{},{},{},{},{},{:.2},{:.2},{:.3}",
            r.kind.label(),
            r.name,
            r.threads,
            r.threads,
            r.n,
            r.d.as_micros(),
            r.rate,
            u8::from(r.loaded),
            r.repeat + 1,
            r.others,
            r.hog_cores,
            r.child_s
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

/// One row of a details table: the kept repeat's figures, the throughput over
/// all repeats and, against `base` (pl-heap's group of the same configuration),
/// the ratio of the medians and whether this implementation dominates it.
fn detail_row(s: &mut String, label: &str, name: &str, grp: &Group<'_>, base: Option<&Group<'_>>) {
    let flag = grp.flag();
    let thr = grp.throughput();
    let base = base.filter(|_| name != BASE);
    let vs = base.map_or("–".into(), |b| ratio(thr.map(|x| x.median), b.throughput().map(|x| x.median)));
    let dom = yes_no(base.and_then(|b| dominates(thr, b.throughput())));
    match (grp.median, thr) {
        (Some(m), Some(thr)) => {
            let _ = writeln!(
                s,
                "| {label} | {name}{flag} | {} | {vs} | {dom} | {} | {} | {} | {} | {} | {} / {} | {:.1} | {:.0} | {} | {:.2} |",
                thr.slashed(|x| format!("{:.3}", x / 1e6)),
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
        _ => {
            let _ = writeln!(s, "| {label} | {name}{flag} | FAILED | | | | | | | | | | | | | |");
        }
    }
}

const DETAIL_HEAD: &str = "| config | implementation | M items/s min / median / max | ÷ pl-heap (medians) | slowest ≥ pl-heap's fastest | p50 µs | p99 µs | p999 µs | max µs | early | lost / dup | peak RSS MiB | CPU ns/item | of which queue threads | cores busy |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";

/// The matrix configurations run in any mode, by D then threads.
fn matrix_keys(g: &Groups<'_>) -> Vec<(usize, Duration)> {
    let mut v: Vec<(usize, Duration)> =
        g.keys().filter(|k| k.kind == Kind::Matrix).map(|k| (k.threads, k.d)).collect();
    v.sort_by_key(|&(t, d)| (d, t));
    v.dedup();
    v
}

fn markdown(meta: &Meta, records: &[RunRecord], g: &Groups<'_>) -> String {
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
    let hogs: Vec<f64> = records.iter().filter(|r| r.loaded).map(|r| r.hog_cores).collect();
    let hog_mean = hogs.iter().sum::<f64>() / hogs.len().max(1) as f64;
    let hog_what = "a separate process started just before each run's child and killed right after it";
    let _ = match meta.loads.as_slice() {
        [false] => writeln!(s, "- Background load: none."),
        [true] => writeln!(
            s,
            "- Background load: one spinning thread ({hog_what}; it used {hog_mean:.2} cores on average, `hog_cores` in runs.csv)."
        ),
        _ => writeln!(
            s,
            "- Background load: both — every run once without and once with one spinning thread ({hog_what}; it used {hog_mean:.2} cores on average), interleaved: the quiet run, then the loaded run of the same implementation and configuration. The tables come once per mode; `background_load` in runs.csv."
        ),
    };
    let _ = writeln!(s, "- Command: `{}` ({:.0} s)", meta.command.trim(), meta.elapsed.as_secs_f64());
    let rates: Vec<String> = meta.rates.iter().map(|r| format!("{r:.0}")).collect();
    let paced = if meta.paced_secs > 0.0 {
        format!(
            "{} items/s offered in total, each for {} s, 16×16, D = 1 ms (the median repeat by p99)",
            rates.join(", "),
            meta.paced_secs
        )
    } else {
        "not run".into()
    };
    let _ = writeln!(
        s,
        "- Matrix runs: N = {} items, producers unthrottled, {} repeat(s): min / median / max over the repeats, the other figures from the median repeat by throughput; paced sweep: {paced}; overload: `delayq::bounded({})`, 16×16, D = 1 ms, unthrottled.",
        meta.n,
        meta.repeats,
        crate::peers::BOUNDED_CAP
    );
    let _ = writeln!(
        s,
        "- Lateness = receive time − deadline. `channel` is crossbeam-channel `bounded(1024)` with no delay (always D = 0): the hand-off ceiling, its lateness is plain hand-off latency. Each run is a fresh child process; every run is checked for lost, duplicated and early items (⚠ marks a configuration where some repeat failed a check or did not finish). CPU is the whole child process (producers, consumers and the queue); \"of which queue threads\" is the part spent in the implementation's own threads (delayq's two proxies, tokio-dq's driver).\n"
    );

    let matrix_keys = matrix_keys(g);
    for &loaded in &meta.loads {
        throughput_tables(&mut s, meta, records, View { g, loaded }, &matrix_keys);
    }
    if !matrix_keys.is_empty() {
        let _ = writeln!(
            s,
            "Cells: median (min–max) over the repeats. Bold: the best delay-queue peer (std-heap, pl-heap, tokio-dq, skiplist) of the row by median. \"Dominates\": delayq's slowest repeat is at least as fast as pl-heap's fastest.{}\n",
            if meta.loads.len() > 1 { " The plot shows the runs without background load." } else { "" }
        );
        let _ = writeln!(s, "![throughput vs threads](throughput.svg)\n");
    }

    let _ = writeln!(s, "## Every matrix configuration\n");
    let _ = write!(s, "{DETAIL_HEAD}");
    for &(t, d) in &matrix_keys {
        for &loaded in &meta.loads {
            let view = View { g, loaded };
            let hog = if loaded { " + hog" } else { "" };
            for n in view.names(Some(Kind::Matrix)) {
                if let Some(grp) = view.matrix(t, d, &n) {
                    let label = format!("{t}×{t}, D = {}{hog}", fmt_d(d));
                    detail_row(&mut s, &label, &n, grp, view.matrix(t, d, BASE));
                }
            }
        }
    }

    sweep(&mut s, meta, g);

    let overload: Vec<(&GroupKey, &Group<'_>)> = g.iter().filter(|(k, _)| k.kind == Kind::Overload).collect();
    if !overload.is_empty() {
        let _ = writeln!(s, "\n## Overload: unthrottled, 16×16, D = 1 ms, `delayq::bounded(capacity)`\n");
        let _ = write!(s, "{DETAIL_HEAD}");
        for (k, grp) in &overload {
            let hog = if k.loaded { " + hog" } else { "" };
            detail_row(
                &mut s,
                &format!("overload, capacity {}{hog}", capacity_of(&k.name)),
                &k.name,
                grp,
                None,
            );
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
                    "- capacity {}{}: {} ÷ {:.2} M/s = {:.1} ms in the queue; measured p50 lateness {} µs.",
                    capacity_of(&k.name),
                    if k.loaded { " (with background load)" } else { "" },
                    capacity_of(&k.name),
                    m.throughput / 1e6,
                    capacity_of(&k.name) as f64 / m.throughput * 1e3,
                    us(m.p50_ns)
                );
            }
        }
    }

    for &loaded in &meta.loads {
        targets(&mut s, meta, records, View { g, loaded }, &matrix_keys);
    }

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
            let pace = if r.kind == Kind::Paced { format!(" {:.0}/s", r.rate) } else { String::new() };
            let _ = writeln!(
                s,
                "- {}{pace} {} {}×{} D = {}{} repeat {}: {what}",
                r.kind.label(),
                r.name,
                r.threads,
                r.threads,
                fmt_d(r.d),
                if r.loaded { " with background load" } else { "" },
                r.repeat + 1
            );
        }
    }
    s
}

/// The throughput table (median and range per implementation) and the ratio
/// table against pl-heap, for one background-load mode.
fn throughput_tables(
    s: &mut String,
    meta: &Meta,
    records: &[RunRecord],
    view: View<'_, '_>,
    matrix_keys: &[(usize, Duration)],
) {
    let names = view.names(Some(Kind::Matrix));
    if names.is_empty() {
        return;
    }
    let suffix = mode_suffix(meta, view.loaded);
    let med = |t: usize, d: Duration, name: &str| view.matrix(t, d, name).and_then(|x| x.throughput());
    let _ = writeln!(s, "## Throughput (M items/s, unthrottled producers){suffix}\n");
    let _ = write!(s, "| P×C, D |");
    for n in &names {
        let _ = write!(s, " {n} |");
    }
    let _ = write!(s, "\n|---|");
    for _ in &names {
        let _ = write!(s, "---:|");
    }
    let _ = writeln!(s);
    let keys: Vec<(usize, Duration)> = matrix_keys
        .iter()
        .copied()
        .filter(|&(t, d)| names.iter().any(|n| view.matrix(t, d, n).is_some()))
        .collect();
    for &(t, d) in &keys {
        let _ = write!(s, "| {t}×{t}, {} |", fmt_d(d));
        let best_peer = PEERS
            .iter()
            .filter_map(|p| med(t, d, p).map(|v| (v.median, *p)))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        for n in &names {
            let cell = match view.matrix(t, d, n) {
                Some(grp) => match grp.throughput() {
                    Some(thr) => {
                        let bold = if best_peer.is_some_and(|(_, p)| p == n) { "**" } else { "" };
                        let median = format!("{bold}{:.2}{bold}", thr.median / 1e6);
                        if thr.min == thr.max {
                            format!("{median}{}", grp.flag())
                        } else {
                            format!("{median} ({:.2}–{:.2}){}", thr.min / 1e6, thr.max / 1e6, grp.flag())
                        }
                    }
                    None => "FAILED".into(),
                },
                None => "–".into(),
            };
            let _ = write!(s, " {cell} |");
        }
        let _ = writeln!(s);
    }

    let _ = writeln!(s, "\n### Ratios to pl-heap{suffix}\n");
    let _ = writeln!(
        s,
        "| P×C, D | delayq ÷ pl-heap | per repeat | delayq dominates | delayq-bounded ÷ pl-heap | delayq-bounded dominates | delayq ÷ best peer | delayq ÷ channel |\n|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for &(t, d) in &keys {
        let m = |n: &str| med(t, d, n).map(|x| x.median);
        let best_peer =
            PEERS.iter().filter_map(|p| m(p)).fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v))));
        let per: Vec<String> = per_repeat_ratios(records, view.loaded, "delayq", t, d)
            .iter()
            .map(|x| format!("{x:.2}"))
            .collect();
        let _ = writeln!(
            s,
            "| {t}×{t}, {} | {} | {} | {} | {} | {} | {} | {} |",
            fmt_d(d),
            ratio(m("delayq"), m(BASE)),
            if per.is_empty() { "–".into() } else { per.join(", ") },
            yes_no(dominates(med(t, d, "delayq"), med(t, d, BASE))),
            ratio(m("delayq-bounded"), m(BASE)),
            yes_no(dominates(med(t, d, "delayq-bounded"), med(t, d, BASE))),
            ratio(m("delayq"), best_peer),
            ratio(m("delayq"), m("channel"))
        );
    }
    let _ = writeln!(s);
}

/// The paced sweep: lateness and CPU per rate and implementation, delayq's
/// ratios to pl-heap, and every figure of the kept repeats.
fn sweep(s: &mut String, meta: &Meta, g: &Groups<'_>) {
    if !g.keys().any(|k| k.kind == Kind::Paced) {
        return;
    }
    let _ = writeln!(s, "\n## Lateness and CPU against offered rate (paced, 16×16, D = 1 ms)\n");
    let _ = writeln!(
        s,
        "Producers sleep until their slot in a global schedule of the offered rate (items/s in total), each run for {} s. p50 / p99 / p999, CPU and cores busy are from the median repeat by p99; the min / median / max columns are over all repeats. CPU per item is the whole child process, producers' per-item sleeps included (the same work for every implementation), so it rises at low rates where every item costs wake-ups.\n",
        meta.paced_secs
    );
    for &loaded in &meta.loads {
        let view = View { g, loaded };
        let rates = view.rates();
        let names = view.names(Some(Kind::Paced));
        if rates.is_empty() {
            continue;
        }
        if meta.loads.len() > 1 {
            let _ = writeln!(s, "### {}\n", mode_title(loaded));
        }
        let _ = writeln!(
            s,
            "| offered items/s | implementation | p50 µs | p99 µs | p999 µs | CPU µs/item | cores busy | p50 µs min / median / max | p99 µs min / median / max |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|"
        );
        for &r in &rates {
            for n in &names {
                let Some(grp) = view.paced(r, n) else { continue };
                let p50 = grp.spread(|m| m.p50_ns as f64);
                let p99 = grp.spread(|m| m.p99_ns as f64);
                match (grp.median, p50, p99) {
                    (Some(m), Some(p50), Some(p99)) => {
                        let _ = writeln!(
                            s,
                            "| {r} | {n}{} | {} | {} | {} | {:.2} | {:.2} | {} | {} |",
                            grp.flag(),
                            us(m.p50_ns),
                            us(m.p99_ns),
                            us(m.p999_ns),
                            m.cpu_ns_per_item() / 1e3,
                            m.cpu_s / m.wall_s,
                            p50.slashed(us_f),
                            p99.slashed(us_f)
                        );
                    }
                    _ => {
                        let _ = writeln!(s, "| {r} | {n}{} | FAILED | | | | | | |", grp.flag());
                    }
                }
            }
        }
        let ours: Vec<&String> = names.iter().filter(|n| n.starts_with("delayq")).collect();
        if names.iter().any(|n| n == BASE) && !ours.is_empty() {
            let _ = write!(s, "\nLateness ÷ pl-heap's at the same rate (medians over repeats; below 1: less late than pl-heap):\n\n| offered items/s |");
            for n in &ours {
                let _ = write!(s, " {n} p50 | {n} p99 |");
            }
            let _ = write!(s, "\n|---:|");
            for _ in &ours {
                let _ = write!(s, "---:|---:|");
            }
            let _ = writeln!(s);
            for &r in &rates {
                let _ = write!(s, "| {r} |");
                let q = |n: &str, f: fn(&Measured) -> u64| {
                    view.paced(r, n).and_then(|x| x.spread(|m| f(m) as f64)).map(|x| x.median)
                };
                for n in &ours {
                    let _ = write!(
                        s,
                        " {} | {} |",
                        ratio(q(n, |m| m.p50_ns), q(BASE, |m| m.p50_ns)),
                        ratio(q(n, |m| m.p99_ns), q(BASE, |m| m.p99_ns))
                    );
                }
                let _ = writeln!(s);
            }
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "![lateness and CPU against offered rate](sweep.svg)\n");
    let _ = writeln!(s, "### Paced runs: every figure of the median repeat\n");
    let _ = write!(s, "{DETAIL_HEAD}");
    for &loaded in &meta.loads {
        let view = View { g, loaded };
        let hog = if loaded { " + hog" } else { "" };
        for r in view.rates() {
            for n in view.names(Some(Kind::Paced)) {
                if let Some(grp) = view.paced(r, &n) {
                    detail_row(s, &format!("paced {}/s{hog}", fmt_rate(r)), &n, grp, None);
                }
            }
        }
    }
    let _ = writeln!(s, "\n![lateness distribution](lateness.svg)");
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

/// `name` ÷ pl-heap within each repeat of one matrix configuration (the runs of
/// one repeat ran back to back, so they saw the most similar machine load).
fn per_repeat_ratios(records: &[RunRecord], loaded: bool, name: &str, t: usize, d: Duration) -> Vec<f64> {
    let thr = |n: &str, rep: usize| {
        records.iter().find_map(|r| match &r.status {
            Status::Ok(m)
                if r.kind == Kind::Matrix
                    && r.loaded == loaded
                    && r.threads == t
                    && r.d == d
                    && r.name == n
                    && r.repeat == rep =>
            {
                Some(m.throughput)
            }
            _ => None,
        })
    };
    let reps = records.iter().map(|r| r.repeat + 1).max().unwrap_or(0);
    (0..reps)
        .filter_map(|rep| {
            let (ours, base) = (thr(name, rep)?, thr(BASE, rep)?);
            (base > 0.0).then(|| ours / base)
        })
        .collect()
}

/// The goals, each checked against this run: one table row per goal.
fn targets(
    s: &mut String,
    meta: &Meta,
    records: &[RunRecord],
    view: View<'_, '_>,
    matrix_keys: &[(usize, Duration)],
) {
    let _ = writeln!(s, "\n## Targets{}\n", mode_suffix(meta, view.loaded));
    let _ = writeln!(s, "| goal | measured | verdict |\n|---|---|---|");
    let mut row = |goal: String, measured: String, ok: bool| {
        let _ = writeln!(s, "| {goal} | {measured} | {} |", verdict(ok));
    };
    let thr = |t: usize, d: Duration, name: &str| view.matrix(t, d, name).and_then(|x| x.throughput());
    let mbps = |x: f64| format!("{:.2}", x / 1e6);

    // Throughput against pl-heap's median, and dominance over its repeats.
    let mut dominated = (0, 0, Vec::new());
    for &(t, d) in matrix_keys {
        let (Some(dq), Some(pl)) = (thr(t, d, "delayq"), thr(t, d, BASE)) else { continue };
        let need = if d.is_zero() { 1.0 } else { 1.5 };
        let r = dq.median / pl.median;
        let per: Vec<String> = per_repeat_ratios(records, view.loaded, "delayq", t, d)
            .iter()
            .map(|x| format!("{x:.2}"))
            .collect();
        row(
            format!("throughput {t}×{t}, D = {}: delayq ≥ {need}× pl-heap (medians)", fmt_d(d)),
            format!("{} vs {} M/s = {r:.2}× (per repeat: {})", dq.show(mbps), pl.show(mbps), per.join(", ")),
            r >= need,
        );
        dominated.1 += 1;
        if dq.min >= pl.max {
            dominated.0 += 1;
        } else {
            dominated.2.push(format!(
                "{t}×{t} D = {}: slowest {} < fastest {}",
                fmt_d(d),
                mbps(dq.min),
                mbps(pl.max)
            ));
        }
    }
    if dominated.1 > 0 {
        let (yes, all, misses) = dominated;
        let measured = if misses.is_empty() {
            format!("in {yes} of {all} configurations")
        } else {
            format!("in {yes} of {all} configurations; not at {}", misses.join("; "))
        };
        row(
            "delayq dominates pl-heap: its slowest repeat ≥ pl-heap's fastest, in every matrix configuration"
                .into(),
            measured,
            yes == all,
        );
    }

    // The crossbeam-channel hand-off (always D = 0) at 16×16.
    let ms1 = Duration::from_millis(1);
    let handoff: Vec<(Duration, f64)> = matrix_keys
        .iter()
        .filter(|&&(t, _)| t == 16)
        .filter_map(|&(_, d)| Some((d, thr(16, d, "delayq")?.median / thr(16, d, "channel")?.median)))
        .collect();
    if let Some(&(d, r)) = handoff.iter().find(|(d, _)| *d == ms1).or(handoff.first()) {
        let rest: Vec<String> = handoff
            .iter()
            .filter(|(x, _)| *x != d)
            .map(|(x, r)| format!("D = {}: {:.0} %", fmt_d(*x), r * 100.0))
            .collect();
        row(
            format!("16×16, D = {}: delayq ≥ 50 % of crossbeam-channel's hand-off (D = 0)", fmt_d(d)),
            if rest.is_empty() {
                format!("{:.0} %", r * 100.0)
            } else {
                format!("{:.0} % (at {})", r * 100.0, rest.join(", "))
            },
            r >= 0.5,
        );
    }

    // Lateness of the unthrottled 16×16, D = 1 ms runs.
    for name in ["delayq", "delayq-bounded"] {
        let Some(grp) = view.matrix(16, ms1, name) else { continue };
        let (Some(p50), Some(p99)) = (grp.spread(|m| m.p50_ns as f64), grp.spread(|m| m.p99_ns as f64))
        else {
            continue;
        };
        row(
            format!("unthrottled 16×16, D = 1ms, {name}: lateness p50 ≤ 100 µs, p99 ≤ 2 ms (medians over repeats)"),
            format!("p50 {} µs, p99 {} µs", us_f(p50.median), us_f(p99.median)),
            p50.median <= 100e3 && p99.median <= 2e6,
        );
    }

    // The paced sweep.
    let rates = view.rates();
    if let Some(dq) = view.paced(100_000, "delayq").and_then(|x| x.median) {
        row(
            "paced 100k/s: delayq lateness p50 ≤ 10 µs, p99 ≤ 50 µs, p999 ≤ 250 µs".into(),
            format!("{} / {} / {} µs", us(dq.p50_ns), us(dq.p99_ns), us(dq.p999_ns)),
            dq.p50_ns <= 10_000 && dq.p99_ns <= 50_000 && dq.p999_ns <= 250_000,
        );
        if let Some(pl) = view.paced(100_000, BASE).and_then(|x| x.median) {
            row(
                "paced 100k/s: delayq CPU per item ≤ pl-heap's".into(),
                format!("{:.2} vs {:.2} µs", dq.cpu_ns_per_item() / 1e3, pl.cpu_ns_per_item() / 1e3),
                dq.cpu_ns_per_item() <= pl.cpu_ns_per_item(),
            );
        }
    }
    for &r in &rates {
        let q = |n: &str, f: fn(&Measured) -> u64| {
            view.paced(r, n).and_then(|x| x.spread(|m| f(m) as f64)).map(|x| x.median)
        };
        let (Some(d50), Some(d99), Some(p50), Some(p99)) = (
            q("delayq", |m| m.p50_ns),
            q("delayq", |m| m.p99_ns),
            q(BASE, |m| m.p50_ns),
            q(BASE, |m| m.p99_ns),
        ) else {
            continue;
        };
        row(
            format!(
                "paced {}/s: delayq lateness p50 and p99 ≤ pl-heap's (medians over repeats)",
                fmt_rate(r)
            ),
            format!("p50 {} vs {} µs, p99 {} vs {} µs", us_f(d50), us_f(p50), us_f(d99), us_f(p99)),
            d50 <= p50 && d99 <= p99,
        );
    }

    // Issue 4's back-pressure goal.
    for (k, grp) in view.keys().filter(|(k, _)| k.kind == Kind::Overload) {
        if let Some(o) = grp.median {
            row(
                format!(
                    "overload, `bounded({})`: p99 lateness ≤ 1 ms (issue 4){}",
                    capacity_of(&k.name),
                    if k.name == "delayq-bounded" { "" } else { "; extra capacity, not the issue's" }
                ),
                format!("{} µs", us(o.p99_ns)),
                o.p99_ns <= 1_000_000,
            );
        }
    }
}

fn color(name: &str) -> RGBColor {
    match name {
        "delayq" => RGBColor(214, 39, 40),
        "delayq-bounded" => RGBColor(255, 127, 14),
        "delayq-batch" => RGBColor(140, 86, 75),
        "delayq-nohelp" => RGBColor(227, 119, 194),
        "floor" => RGBColor(0, 0, 0),
        "std-heap" => RGBColor(31, 119, 180),
        "pl-heap" => RGBColor(23, 190, 207),
        "tokio-dq" => RGBColor(148, 103, 189),
        "skiplist" => RGBColor(44, 160, 44),
        _ => RGBColor(127, 127, 127),
    }
}

type PlotResult = Result<(), Box<dyn std::error::Error>>;

fn plot_throughput(path: &Path, view: View<'_, '_>) -> PlotResult {
    let matrix = || view.keys().filter(|(k, _)| k.kind == Kind::Matrix);
    let mut delays: Vec<Duration> = matrix().map(|(k, _)| k.d).collect();
    delays.sort();
    delays.dedup();
    if delays.is_empty() {
        return Ok(());
    }
    let names = view.names(Some(Kind::Matrix));
    let ymax =
        matrix().filter_map(|(_, v)| v.median.map(|m| m.throughput / 1e6)).fold(0.1f64, f64::max) * 1.7;
    let mut threads: Vec<usize> = matrix().map(|(k, _)| k.threads).collect();
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
            let mut pts: Vec<(f64, f64)> = matrix()
                .filter(|(k, _)| k.d == d && &k.name == n)
                .filter_map(|(k, v)| v.median.map(|m| (xpos(k.threads), m.throughput / 1e6)))
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

fn plot_lateness(path: &Path, view: View<'_, '_>) -> PlotResult {
    let ms1 = Duration::from_millis(1);
    let mut panels_spec: Vec<(String, Kind, u64)> = Vec::new();
    // The swept rate nearest 100k/s (by ratio).
    let dist = |r: u64| (r.max(1) as f64 / 1e5).ln().abs();
    if let Some(r) = view.rates().into_iter().min_by(|&a, &b| dist(a).total_cmp(&dist(b))) {
        panels_spec.push((format!("paced {}/s, 16×16, D = 1ms", fmt_rate(r)), Kind::Paced, r));
    }
    if view.keys().any(|(k, _)| k.kind == Kind::Matrix && k.threads == 16 && k.d == ms1) {
        panels_spec.push(("unthrottled 16×16, D = 1ms".into(), Kind::Matrix, 0));
    }
    if panels_spec.is_empty() {
        return Ok(());
    }
    let root = SVGBackend::new(path, (560 * panels_spec.len() as u32, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, panels_spec.len()));
    for (panel, (title, kind, rate)) in panels.iter().zip(&panels_spec) {
        let series: Vec<(String, Vec<(f64, f64)>)> = view
            .keys()
            .filter(|(k, _)| k.kind == *kind && k.threads == 16 && k.d == ms1 && k.rate == *rate)
            .filter_map(|(k, v)| {
                let m = v.median?;
                Some((
                    k.name.clone(),
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

/// (offered items/s, p50 µs, p99 µs, CPU µs per item) of one paced group.
type SweepPoint = (f64, f64, f64, f64);

/// `sweep.svg`: lateness p50 (dashed) and p99 (solid) against the offered rate,
/// both axes logarithmic, and CPU per item against the rate; one line per
/// implementation (and per background-load mode, the loaded one paler).
fn plot_sweep(path: &Path, g: &Groups<'_>, loads: &[bool]) -> PlotResult {
    // (name, loaded, points) from the median repeats.
    let mut series: Vec<(String, bool, Vec<SweepPoint>)> = Vec::new();
    for &loaded in loads {
        let view = View { g, loaded };
        for n in view.names(Some(Kind::Paced)) {
            let pts: Vec<SweepPoint> = view
                .rates()
                .into_iter()
                .filter_map(|r| {
                    let m = view.paced(r, &n)?.median?;
                    let lat = |ns: u64| (ns as f64 / 1e3).max(0.1);
                    Some((r as f64, lat(m.p50_ns), lat(m.p99_ns), m.cpu_ns_per_item() / 1e3))
                })
                .collect();
            if !pts.is_empty() {
                series.push((n, loaded, pts));
            }
        }
    }
    if series.is_empty() {
        return Ok(());
    }
    let all = || series.iter().flat_map(|(_, _, p)| p.iter());
    let (rmin, rmax) = all().fold((f64::MAX, 0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    let xr = (rmin / 1.6)..(rmax * 1.6);
    // One x label per swept rate.
    let mut rates: Vec<f64> = all().map(|p| p.0).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    let lmin = all().map(|p| p.1).fold(f64::MAX, f64::min) / 2.0;
    let lmax = all().map(|p| p.2).fold(1.0f64, f64::max) * 3.0;
    let cmax = all().map(|p| p.3).fold(0.1f64, f64::max) * 1.3;
    let rate_label = |x: &f64| {
        if *x >= 1e6 {
            format!("{}M", x / 1e6)
        } else if *x >= 1e3 {
            format!("{}k", x / 1e3)
        } else {
            format!("{x}")
        }
    };
    let style = |n: &str, loaded: bool| {
        let width = if n.starts_with("delayq") { 3 } else { 2 };
        (color(n).mix(if loaded { 0.45 } else { 1.0 }), width)
    };
    let label = |n: &str, loaded: bool| if loaded { format!("{n} + hog") } else { n.to_owned() };

    let root = SVGBackend::new(path, (1120, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 2));

    let mut chart = ChartBuilder::on(&panels[0])
        .caption("lateness p50 (dashed) and p99 (solid), paced 16×16, D = 1ms", ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(
            xr.clone().log_scale().with_key_points(rates.clone()),
            (lmin.min(1.0)..lmax).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("offered items/s")
        .y_desc("lateness (receive − deadline)")
        .x_label_formatter(&rate_label)
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
    for (n, loaded, pts) in &series {
        let (c, width) = style(n, *loaded);
        chart.draw_series(pts.iter().map(|p| Circle::new((p.0, p.2), width + 1, c.filled())))?;
        chart.draw_series(DashedLineSeries::new(
            pts.iter().map(|p| (p.0, p.1)),
            6,
            4,
            c.stroke_width(width),
        ))?;
        chart
            .draw_series(LineSeries::new(pts.iter().map(|p| (p.0, p.2)), c.stroke_width(width)))?
            .label(label(n, *loaded))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(width)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;

    let mut chart = ChartBuilder::on(&panels[1])
        .caption("CPU per item (whole process), paced 16×16, D = 1ms", ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(xr.log_scale().with_key_points(rates), 0f64..cmax)?;
    chart
        .configure_mesh()
        .x_desc("offered items/s")
        .y_desc("CPU µs per item")
        .x_label_formatter(&rate_label)
        .draw()?;
    for (n, loaded, pts) in &series {
        let (c, width) = style(n, *loaded);
        chart.draw_series(pts.iter().map(|p| Circle::new((p.0, p.3), width + 1, c.filled())))?;
        chart
            .draw_series(LineSeries::new(pts.iter().map(|p| (p.0, p.3)), c.stroke_width(width)))?
            .label(label(n, *loaded))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(width)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;
    root.present()?;
    Ok(())
}
