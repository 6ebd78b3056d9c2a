//! Process measurements shared by the `compare`, `idle` and `scale` examples:
//! CPU time (getrusage / CLOCK_PROCESS_CPUTIME_ID), resident memory from
//! `/proc/self/status`, per-thread CPU from `/proc/self/task/*`, and the machine
//! line (nproc, CPU model, load, date) that every report opens with.

#![allow(dead_code)]

use std::time::Duration;

/// User + system CPU time of the whole process (all threads), from getrusage.
pub fn rusage_cpu() -> Duration {
    // SAFETY: `getrusage` only writes the struct we pass; zeroed is a valid value.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time of the whole process in nanoseconds (CLOCK_PROCESS_CPUTIME_ID).
pub fn process_cpu_ns() -> u64 {
    // SAFETY: `clock_gettime` only writes the struct we pass.
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts);
        ts
    };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A `kB` field of `/proc/self/status` (e.g. `VmRSS`, `VmHWM`), in bytes.
pub fn status_kb(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(field)?.strip_prefix(':')?;
            rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// Current resident set size, bytes.
pub fn rss() -> u64 {
    status_kb("VmRSS")
}

/// Peak resident set size (high-water mark), bytes.
pub fn peak_rss() -> u64 {
    status_kb("VmHWM")
}

/// One thread of this process, as `/proc/self/task/<tid>` shows it.
#[derive(Debug, Clone)]
pub struct ThreadInfo {
    pub tid: u32,
    pub name: String,
    pub state: String,
    /// Time on CPU, ns (`schedstat`, first field).
    pub cpu_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

/// Every thread of this process.
pub fn threads() -> Vec<ThreadInfo> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return out };
    for e in dir.flatten() {
        let Ok(tid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let p = e.path();
        let status = std::fs::read_to_string(p.join("status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| {
                    l.strip_prefix(name).and_then(|r| r.strip_prefix(':')).map(|r| r.trim().to_owned())
                })
                .unwrap_or_default()
        };
        let cpu_ns = std::fs::read_to_string(p.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
            .unwrap_or(0);
        out.push(ThreadInfo {
            tid,
            name: field("Name"),
            state: field("State"),
            cpu_ns,
            voluntary_switches: field("voluntary_ctxt_switches").parse().unwrap_or(0),
            involuntary_switches: field("nonvoluntary_ctxt_switches").parse().unwrap_or(0),
        });
    }
    out.sort_by_key(|t| t.tid);
    out
}

/// Busy CPU time of the whole machine so far (all CPUs, every process), from
/// `/proc/stat` (user + nice + system + irq + softirq + steal), in seconds.
pub fn machine_busy() -> f64 {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = s.lines().find(|l| l.starts_with("cpu ")) else { return 0.0 };
    let f: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal …
    let busy = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| f.get(i)).sum::<u64>();
    // SAFETY: `sysconf` has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    busy as f64 / hz
}

/// CPU time (user + system) of this process's waited-for children, seconds.
pub fn children_cpu() -> f64 {
    // SAFETY: `getrusage` only writes the struct we pass; zeroed is a valid value.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// `/proc/loadavg`'s first three fields.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The CPU model from `/proc/cpuinfo`.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("model name").map(|r| r.trim_start_matches([' ', '\t', ':']).to_owned())
            })
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// UTC date and time, `YYYY-MM-DD HH:MM UTC`.
pub fn date_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

/// `nproc`, the CPU model, the load average and the date, on one line.
pub fn machine_line() -> String {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("nproc {nproc}, {}, load average {} at {}", cpu_model(), loadavg(), date_utc())
}

/// Bytes as MiB with one decimal.
pub fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}
