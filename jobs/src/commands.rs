//! The CLI's commands, on any [`Inspect`] queue, writing to any `Write`.
//! Each returns `Err(message)` for the caller to print and exit non-zero.

use std::io::{IsTerminal, Write};
use std::time::{Duration, SystemTime};

use delayq_durable::{Filter, Inspect, JobId, JobInfo, JobState};
use indicatif::{ProgressBar, ProgressStyle};

use crate::preview::{line, preview};

type Out<'a> = &'a mut dyn Write;

fn io(e: std::io::Error) -> String {
    format!("writing the output: {e}")
}

fn q_err(doing: &str) -> impl Fn(delayq_durable::DurableError) -> String + '_ {
    move |e| format!("{doing}: {e}")
}

/// `when` relative to now: `in 5s`, `3s ago`, `now`.
pub fn relative(when: SystemTime) -> String {
    match when.duration_since(SystemTime::now()) {
        Ok(d) if d >= Duration::from_secs(1) => format!("in {}", short(d)),
        Ok(_) => "now".into(),
        Err(e) if e.duration() < Duration::from_secs(1) => "now".into(),
        Err(e) => format!("{} ago", short(e.duration())),
    }
}

/// A duration to the second: `42s`, `3m20s`, `5h2m`, `2d3h`.
pub fn short(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{}s", s / 60, s % 60),
        3600..=86399 => format!("{}h{}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{}h", s / 86400, s % 86400 / 3600),
    }
}

/// What a leased job of a file no process holds is.
const HOLDERS_GONE: &str =
    "holder gone: no process has the file; due again, as the next attempt, when the application opens it";

/// `stats`: the counts by state and how late the oldest pending job is.
pub fn stats(q: &dyn Inspect, out: Out<'_>) -> Result<(), String> {
    let s = q.stats().map_err(q_err("counting"))?;
    writeln!(out, "queue    {}", q.describe()).map_err(io)?;
    writeln!(out, "pending  {}", s.pending).map_err(io)?;
    if s.leased > 0 && q.holders_gone() {
        writeln!(out, "leased   {} ({})", s.leased, HOLDERS_GONE).map_err(io)?;
    } else {
        writeln!(out, "leased   {}", s.leased).map_err(io)?;
    }
    writeln!(out, "dead     {}", s.dead).map_err(io)?;
    let oldest = q.oldest_due().map_err(q_err("reading the oldest pending job"))?;
    let late = oldest.and_then(|t| SystemTime::now().duration_since(t).ok());
    match (oldest, late) {
        (None, _) => writeln!(out, "next due -"),
        (Some(_), Some(late)) => writeln!(out, "late     {} (the oldest due job)", short(late)),
        (Some(t), None) => writeln!(out, "next due {}", relative(t)),
    }
    .map_err(io)
}

/// `schedules`: one line per recurring schedule.
pub fn schedules(q: &dyn Inspect, out: Out<'_>) -> Result<(), String> {
    let list = q.schedules().map_err(q_err("listing the schedules"))?;
    if list.is_empty() {
        return writeln!(out, "no schedules").map_err(io);
    }
    writeln!(
        out,
        "{:<24} {:<36} {:<20} {:<10} {:<12} {:<12} state",
        "name", "when", "kind", "priority", "next run", "last run"
    )
    .map_err(io)?;
    for s in list {
        let next = s.next_run.map_or_else(|| "-".to_string(), relative);
        let last = s.last_run.map_or_else(|| "never".to_string(), relative);
        let state = if s.paused { "paused" } else { "active" };
        writeln!(
            out,
            "{:<24} {:<36} {:<20} {:<10} {:<12} {:<12} {state}",
            s.name, s.spec, s.kind, s.priority, next, last
        )
        .map_err(io)?;
    }
    Ok(())
}

/// `list --state S [--limit N]`: one line per job.
pub fn list(q: &dyn Inspect, state: JobState, limit: usize, out: Out<'_>) -> Result<(), String> {
    let jobs = q.jobs(state, limit).map_err(q_err("listing"))?;
    writeln!(
        out,
        "{:>8}  {:<10}  {:>7}  {:<20}  {:>8}  {:<30}  payload",
        "id", "due", "attempt", "kind", "bytes", "last error"
    )
    .map_err(io)?;
    for j in &jobs {
        writeln!(
            out,
            "{:>8}  {:<10}  {:>7}  {:<20}  {:>8}  {:<30}  {}",
            j.id.0,
            relative(j.deadline),
            j.attempt,
            line(&j.kind, 20),
            j.payload.len(),
            line(j.last_error.as_deref().unwrap_or("-"), 30),
            preview(&j.payload, 40)
        )
        .map_err(io)?;
    }
    writeln!(out, "({} {state} job{} shown)", jobs.len(), if jobs.len() == 1 { "" } else { "s" }).map_err(io)
}

fn get(q: &dyn Inspect, id: u64) -> Result<JobInfo, String> {
    q.job(JobId(id)).map_err(q_err("reading the job"))?.ok_or_else(|| format!("no job {id}"))
}

/// `show ID`: every field, the payload up to 4 KiB of preview.
pub fn show(q: &dyn Inspect, id: u64, out: Out<'_>) -> Result<(), String> {
    let j = get(q, id)?;
    writeln!(out, "id          {}", j.id.0).map_err(io)?;
    writeln!(out, "state       {}", j.state).map_err(io)?;
    writeln!(out, "kind        {}", if j.kind.is_empty() { "-".into() } else { line(&j.kind, 255) })
        .map_err(io)?;
    writeln!(out, "due         {}", relative(j.deadline)).map_err(io)?;
    writeln!(out, "attempt     {}", j.attempt).map_err(io)?;
    if let Some(l) = j.lease_deadline {
        if q.holders_gone() {
            writeln!(out, "lease ends  {} ({HOLDERS_GONE})", relative(l)).map_err(io)?;
        } else {
            writeln!(out, "lease ends  {}", relative(l)).map_err(io)?;
        }
    }
    if let Some(d) = j.died_at {
        writeln!(out, "died        {}", relative(d)).map_err(io)?;
    }
    writeln!(out, "last error  {}", line(j.last_error.as_deref().unwrap_or("-"), 4096)).map_err(io)?;
    writeln!(out, "bytes       {}", j.payload.len()).map_err(io)?;
    writeln!(out, "payload     {}", preview(&j.payload, 4096)).map_err(io)
}

/// `requeue ID`: a dead job back to pending, due now. Any other state is
/// an error saying which.
pub fn requeue(q: &dyn Inspect, id: u64, out: Out<'_>) -> Result<(), String> {
    let j = get(q, id)?;
    if j.state != JobState::Dead {
        return Err(format!("job {id} is {}, not dead: only a dead job can be requeued", j.state));
    }
    if !q.requeue_dead(JobId(id), SystemTime::now()).map_err(q_err("requeueing"))? {
        return Err(format!("job {id} left the dead set meanwhile; nothing changed"));
    }
    writeln!(out, "requeued job {id}").map_err(io)
}

/// A progress bar on stderr, only when stderr is a terminal.
fn progress(total: u64, what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    if let Ok(style) = ProgressStyle::with_template("{msg} {wide_bar} {pos}/{len} ({eta})") {
        bar.set_style(style);
    }
    bar.set_message(what.to_string());
    bar
}

/// How many jobs one bulk change carries (one transaction on the embedded
/// file; on Redis, scripts of at most 500 ids).
const BATCH: usize = 10_000;

/// Applies `act` to every job dead at the start (listed first, so a job
/// that dies again meanwhile is not taken twice), a batch at a time;
/// returns how many it changed.
fn each_dead(
    q: &dyn Inspect,
    what: &str,
    act: impl Fn(&[JobId]) -> Result<Vec<bool>, String>,
) -> Result<u64, String> {
    let ids = matching(q, JobState::Dead, &Filter::default())?;
    let bar = progress(ids.len() as u64, what);
    let mut changed = 0u64;
    for batch in ids.chunks(BATCH) {
        changed += act(batch)?.into_iter().filter(|&done| done).count() as u64;
        bar.inc(batch.len() as u64);
    }
    bar.finish_and_clear();
    Ok(changed)
}

/// The ids of every job in `state` that `filter` keeps, page after page.
pub fn matching(q: &dyn Inspect, state: JobState, filter: &Filter) -> Result<Vec<JobId>, String> {
    let mut ids = Vec::new();
    let mut cursor = 0;
    loop {
        let page = q.page(state, filter, cursor, BATCH).map_err(q_err("listing jobs"))?;
        ids.extend(page.jobs.iter().map(|j| j.id));
        match page.next {
            Some(next) => cursor = next,
            None => return Ok(ids),
        }
    }
}

/// `requeue --all-dead`.
pub fn requeue_all_dead(q: &dyn Inspect, out: Out<'_>) -> Result<(), String> {
    let n = each_dead(q, "requeueing", |ids| {
        q.requeue_dead_many(ids, SystemTime::now()).map_err(q_err("requeueing"))
    })?;
    writeln!(out, "requeued {n} dead job{}", if n == 1 { "" } else { "s" }).map_err(io)
}

/// `purge --dead`: deletes every dead job.
pub fn purge_dead(q: &dyn Inspect, out: Out<'_>) -> Result<(), String> {
    // Only while it is still dead (one atomic change): a job requeued and
    // leased meanwhile is left alone.
    let n =
        each_dead(q, "deleting", |ids| q.cancel_many_in(ids, &[JobState::Dead]).map_err(q_err("deleting")))?;
    writeln!(out, "deleted {n} dead job{}", if n == 1 { "" } else { "s" }).map_err(io)
}

/// `cancel ID [--force]`: deletes a job; a leased one only with `force` (a
/// worker is running it, and its ack will then find nothing).
pub fn cancel(q: &dyn Inspect, id: u64, force: bool, out: Out<'_>) -> Result<(), String> {
    let j = get(q, id)?;
    if j.state == JobState::Leased && !force {
        let ends = j.lease_deadline.map(relative).unwrap_or_default();
        return Err(format!(
            "job {id} is leased (lease ends {ends}): a worker may be running it; pass --force to cancel it anyway"
        ));
    }
    // Only in the state just seen (any, with `force`), in one change: a job
    // leased between the look and the delete is not deleted unannounced.
    let states: &[JobState] =
        if force { &[JobState::Pending, JobState::Leased, JobState::Dead] } else { &[j.state] };
    if !q.cancel_in(JobId(id), states).map_err(q_err("cancelling"))? {
        return match q.job(JobId(id)).map_err(q_err("reading the job"))? {
            None => Err(format!("no job {id} (it finished meanwhile)")),
            Some(now) => {
                Err(format!("job {id} became {} meanwhile; nothing changed (run it again)", now.state))
            }
        };
    }
    let note =
        if j.state == JobState::Leased { " (it was leased: its worker's ack will find nothing)" } else { "" };
    writeln!(out, "cancelled job {id}, which was {}{note}", j.state).map_err(io)
}
