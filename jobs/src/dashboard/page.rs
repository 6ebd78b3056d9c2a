//! The dashboard's page: server-rendered HTML that refreshes itself every
//! 5 s — also when the queue failed, whose error it then shows in place of
//! the figures, so an open tab recovers when the queue does.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use delayq_durable::{JobInfo, JobState, KindCounts, ScheduleInfo, Stats};

use super::api::{ApiSample, ApiThroughput};
use super::{blocking, App};
use crate::commands::{relative, short};
use crate::preview::{line, preview};

/// How many minutes the charts show.
const MINUTES: u64 = 180;
/// How many dead jobs the page lists.
const DEAD_SHOWN: usize = 100;

/// Escapes text for HTML (element content and quoted attributes).
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The pages' style sheet.
pub(crate) fn style() -> &'static str {
    "<style>\
     body{font:14px system-ui,sans-serif;margin:2em;color:#222;max-width:1600px}\
     a{color:#36c}h1 a{color:inherit;text-decoration:none}\
     table{border-collapse:collapse;table-layout:auto;max-width:100%}\
     td,th{border-bottom:1px solid #ddd;padding:4px 10px;text-align:left;vertical-align:top}\
     .counts td{font-size:28px;font-weight:600;padding-right:2em}\
     .err{color:#a00;overflow-wrap:anywhere;word-break:break-word;max-width:45ch}\
     td.payload{font:12px monospace;overflow-wrap:anywhere;word-break:break-all;max-width:30ch}\
     td.key{color:#666;white-space:nowrap}td.buttons{white-space:nowrap}\
     #error{background:#fee;border:1px solid #c33;padding:8px 12px;overflow-wrap:anywhere}\
     #result{background:#efe;border:1px solid #3a3;padding:8px 12px}\
     #confirm-box{background:#ffd;border:1px solid #cc3;padding:8px 12px;margin:8px 0}\
     .hot td{background:#fee}form{display:inline}code{font-size:12px}</style>"
}

/// The page's head, style and title line.
fn head(h: &mut String, name: &str, mode: &str) {
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=utf-8><meta http-equiv=refresh content=5>\
         <title>delayq jobs: {name}</title>{style}</head><body>\
         <h1>delayq jobs</h1><p>queue <b>{name}</b> · {mode} · lists: <a href=list?state=pending>pending</a> \
         <a href=list?state=leased>leased</a> <a href=list?state=dead>dead</a> · JSON: <a href=api/stats>api/stats</a></p>",
        name = esc(name),
        style = style(),
    );
}

pub(super) async fn page(State(app): State<Arc<App>>) -> Response {
    let q = app.queue.clone();
    let name = q.describe();
    let read = blocking(move || {
        let stats = q.stats()?;
        let oldest = q.oldest_due()?;
        let kinds = q.kinds()?;
        let rates = super::api::throughput(&*q, MINUTES)?;
        let samples = super::api::samples(&*q, MINUTES)?;
        let dead = q.jobs(JobState::Dead, DEAD_SHOWN)?;
        let schedules = q.schedules()?;
        Ok((stats, oldest, (kinds, rates, samples), (dead, schedules)))
    })
    .await;
    let mode = if app.allow_writes { "writes allowed" } else { "read-only" };
    let mut h = String::new();
    head(&mut h, &name, mode);
    let status = match read {
        Ok((stats, oldest, (kinds, rates, samples), (dead, schedules))) => {
            figures(&app, &mut h, stats, oldest, (&kinds, &rates, &samples), (&dead, &schedules));
            StatusCode::OK
        }
        Err(e) => {
            let _ = write!(
                h,
                "<p id=error>the queue failed: {}<br>this page tries again every 5 s</p>",
                esc(&line(&e, 2000))
            );
            StatusCode::SERVICE_UNAVAILABLE
        }
    };
    h.push_str("</body></html>");
    (status, [(header::CACHE_CONTROL, "no-store")], Html(h)).into_response()
}

fn figures(
    app: &App,
    h: &mut String,
    stats: Stats,
    oldest: Option<SystemTime>,
    (kinds, rates, samples): (&[KindCounts], &ApiThroughput, &[ApiSample]),
    (dead, schedules): (&[JobInfo], &[ScheduleInfo]),
) {
    let late = oldest.and_then(|t| SystemTime::now().duration_since(t).ok()).unwrap_or_default();
    let chart = chart(samples);
    let _ = write!(
        h,
        "<table class=counts><tr><th>pending</th><th>leased</th><th>dead</th><th>late</th></tr>\
         <tr><td id=count-pending>{p}</td><td id=count-leased>{l}</td><td id=count-dead>{d}</td><td id=late>{late}</td></tr></table>\
         <h2>Throughput</h2>{throughput}<h2>Pending and lateness</h2>{chart}<h2>By kind</h2>{kinds}\
         <h2>Schedules</h2>{schedules}<h2>Dead jobs</h2>",
        throughput = throughput_chart(rates),
        kinds = by_kind(kinds, rates),
        schedules = schedules_table(schedules),
        p = stats.pending,
        l = stats.leased,
        d = stats.dead,
        late = short(late),
    );
    if dead.is_empty() {
        h.push_str("<p id=no-dead>none</p>");
        return;
    }
    h.push_str("<table id=dead><tr><th>id</th><th>kind</th><th>attempt</th><th>died</th><th>last error</th><th>payload</th><th></th></tr>");
    for j in dead {
        let buttons = if app.allow_writes {
            format!(
                "<form method=post action=requeue><input type=hidden name=id value={id}><input type=hidden name=csrf value={t}><button id=requeue-{id}>requeue</button></form> \
                 <form method=post action=delete><input type=hidden name=id value={id}><input type=hidden name=csrf value={t}><button id=delete-{id}>delete</button></form>",
                id = j.id.0,
                t = app.guard.token,
            )
        } else {
            String::new()
        };
        let _ = write!(
            h,
            "<tr id=dead-{id}><td>{id}</td><td>{kind}</td><td>{attempt}</td><td>{died}</td><td class=err>{err}</td><td class=payload><code>{payload}</code></td><td class=buttons>{buttons}</td></tr>",
            id = j.id.0,
            kind = esc(&line(&j.kind, 60)),
            attempt = j.attempt,
            died = esc(&j.died_at.map_or_else(|| "-".into(), relative)),
            err = esc(&line(j.last_error.as_deref().unwrap_or("-"), 200)),
            payload = esc(&preview(&j.payload, 60)),
        );
    }
    h.push_str("</table>");
    if stats.dead as usize > dead.len() {
        let _ = write!(h, "<p>the first {} of {} shown</p>", dead.len(), stats.dead);
    }
}

/// The recurring schedules: when each ticks, its next and last run, paused.
fn schedules_table(schedules: &[ScheduleInfo]) -> String {
    if schedules.is_empty() {
        return "<p id=no-schedules>none</p>".into();
    }
    let mut h = String::from(
        "<table id=schedules><tr><th>name</th><th>when</th><th>kind</th><th>priority</th><th>next run</th>\
         <th>last run</th><th>state</th></tr>",
    );
    for s in schedules {
        let _ = write!(
            h,
            "<tr id=\"schedule-{id}\" class=\"{class}\"><td>{name}</td><td>{spec}</td><td>{kind}</td><td>{priority}</td>\
             <td class=next>{next}</td><td class=last>{last}</td><td class=state>{state}</td></tr>",
            id = esc(&url_encode(&s.name)),
            class = if s.paused { "paused" } else { "" },
            name = esc(&line(&s.name, 80)),
            spec = esc(&line(&s.spec, 80)),
            kind = esc(&line(&s.kind, 60)),
            priority = s.priority,
            next = s.next_run.map_or_else(|| "-".to_string(), relative),
            last = s.last_run.map_or_else(|| "never".to_string(), relative),
            state = if s.paused { "paused" } else { "active" },
        );
    }
    h.push_str("</table>");
    h
}

/// The counts by kind with the last hour's processed and failed jobs and
/// failure rate: the kinds failing most first (then by dead share), rows
/// with failures or dead jobs highlighted, each a link to its dead jobs.
fn by_kind(kinds: &[KindCounts], rates: &ApiThroughput) -> String {
    let rate = |kind: &str| rates.kinds.iter().find(|r| r.kind == kind);
    let mut names: Vec<&str> = kinds.iter().map(|k| k.kind.as_str()).collect();
    for r in &rates.kinds {
        if !names.contains(&r.kind.as_str()) {
            names.push(&r.kind);
        }
    }
    if names.is_empty() {
        return "<p id=no-kinds>no jobs</p>".into();
    }
    let counts = |kind: &str| kinds.iter().find(|k| k.kind == kind).cloned().unwrap_or_default();
    let share = |k: &KindCounts| k.dead as f64 / (k.pending + k.leased + k.dead).max(1) as f64;
    let failing = |kind: &str| rate(kind).map_or(0.0, |r| r.failure_rate);
    names.sort_by(|a, b| {
        failing(b).total_cmp(&failing(a)).then(share(&counts(b)).total_cmp(&share(&counts(a)))).then(a.cmp(b))
    });
    let mut h = String::from(
        "<table id=kinds><tr><th>kind</th><th>pending</th><th>leased</th><th>dead</th><th>dead share</th>\
         <th>processed (1 h)</th><th>failed (1 h)</th><th>failure rate</th></tr>",
    );
    for kind in names {
        let k = counts(kind);
        let r = rate(kind);
        let shown = if kind.is_empty() { "-".to_string() } else { line(kind, 60) };
        let href = url_encode(if kind.is_empty() { "-" } else { kind });
        let _ = write!(
            h,
            "<tr class=\"{hot}\"><td><a href=\"list?state=dead&amp;kind={href}\">{name}</a></td><td>{p}</td><td>{l}</td><td>{d}</td><td>{pct:.1} %</td>\
             <td>{ok}</td><td>{fail}</td><td>{fr}</td></tr>",
            hot = if k.dead > 0 || r.is_some_and(|r| r.failed > 0) { "hot" } else { "" },
            name = esc(&shown),
            p = k.pending,
            l = k.leased,
            d = k.dead,
            pct = share(&k) * 100.0,
            ok = r.map_or(0, |r| r.processed),
            fail = r.map_or(0, |r| r.failed),
            fr = r.filter(|r| r.processed + r.failed > 0).map_or("-".to_string(), |r| format!("{:.1} %", r.failure_rate * 100.0)),
        );
    }
    h.push_str("</table>");
    h
}

/// An inline SVG: jobs processed (green) and failed (red) per minute over
/// the last three hours, from the counts the queue stores.
fn throughput_chart(rates: &ApiThroughput) -> String {
    let (w, h, minutes) = (720.0_f64, 100.0_f64, 180u64);
    let now_minute = super::api::ns(SystemTime::now()) / 60_000_000_000;
    let max = rates.minutes.iter().map(|m| m.processed.max(m.failed)).max().unwrap_or(0).max(1) as f64;
    let (mut total_ok, mut total_failed) = (0, 0);
    let mut bars = String::new();
    for m in &rates.minutes {
        let ago = now_minute.saturating_sub(m.minute_ns / 60_000_000_000);
        if ago >= minutes {
            continue;
        }
        total_ok += m.processed;
        total_failed += m.failed;
        let x = w - (ago + 1) as f64 * (w / minutes as f64);
        let bw = (w / minutes as f64 / 2.0).max(1.0);
        for (i, (n, color)) in [(m.processed, "#3a3"), (m.failed, "#c33")].into_iter().enumerate() {
            let bh = n as f64 / max * (h - 10.0);
            let _ = write!(
                bars,
                "<rect x={:.1} y={:.1} width={bw:.1} height={bh:.1} fill={color}></rect>",
                x + i as f64 * bw,
                h - bh
            );
        }
    }
    format!(
        "<svg id=throughput width={w} height={h} viewBox=\"0 0 {w} {h}\" style=\"border:1px solid #ddd\">{bars}</svg>\
         <p><span style=color:#3a3>processed</span> {ok} · <span style=color:#c33>failed</span> {failed} in the last 3 h \
         (per minute, max {max}; stored by the queue, kept 24 h) · <a href=api/throughput>api/throughput</a></p>",
        ok = super::api::thousands(total_ok),
        failed = super::api::thousands(total_failed),
        max = max as u64,
    )
}

/// `text` for a URL's query (every byte but unreserved ones as `%XX`).
pub(crate) fn url_encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// An inline SVG: pending jobs (blue) and lateness (red) per minute over
/// the last three hours, each scaled to its own maximum, from the samples
/// the queue stores (one per minute in which it reserved); a minute without
/// one breaks the lines.
fn chart(samples: &[ApiSample]) -> String {
    let (w, h, minutes) = (720.0_f64, 120.0_f64, MINUTES);
    let now_minute = super::api::ns(SystemTime::now()) / 60_000_000_000;
    let shown: Vec<(u64, &ApiSample)> = samples
        .iter()
        .map(|s| (now_minute.saturating_sub(s.minute_ns / 60_000_000_000), s))
        .filter(|(ago, _)| *ago < minutes)
        .collect();
    let max_p = shown.iter().map(|(_, s)| s.pending).max().unwrap_or(0).max(1) as f64;
    let max_l = shown.iter().map(|(_, s)| s.lateness_ns).max().unwrap_or(0).max(1_000_000_000) as f64;
    // One polyline per run of consecutive minutes.
    let lines = |value: &dyn Fn(&ApiSample) -> f64, color: &str| {
        let mut out = String::new();
        let mut run: Vec<String> = Vec::new();
        let mut last: Option<u64> = None;
        let mut flush = |run: &mut Vec<String>| {
            match run.as_slice() {
                [] => {}
                [one] => {
                    let (x, y) = one.split_once(',').unwrap_or(("0", "0"));
                    let _ = write!(out, "<circle cx={x} cy={y} r=2.5 fill={color}></circle>");
                }
                _ => {
                    let _ = write!(
                        out,
                        "<polyline fill=none stroke={color} stroke-width=2 points=\"{}\"/>",
                        run.join(" ")
                    );
                }
            }
            run.clear();
        };
        for (ago, s) in &shown {
            if last.is_some_and(|l| l != ago + 1) {
                flush(&mut run);
            }
            let x = w - (*ago as f64 + 0.5) * (w / minutes as f64);
            run.push(format!("{x:.1},{:.1}", h - value(s) * (h - 10.0)));
            last = Some(*ago);
        }
        flush(&mut run);
        out
    };
    format!(
        "<svg id=chart width={w} height={h} viewBox=\"0 0 {w} {h}\" style=\"border:1px solid #ddd\">{p}{l}</svg>\
         <p><span style=color:#36c>pending</span> (max {mp}) · <span style=color:#c33>lateness</span> of the oldest due job \
         (max {ml}) · samples in the last 3 h: <span id=samples>{n}</span> (one a minute while the queue reserves; \
         stored by the queue, kept 24 h) · \
         <a href=api/samples>api/samples</a></p>",
        p = lines(&|s| s.pending as f64 / max_p, "#36c"),
        l = lines(&|s| s.lateness_ns as f64 / max_l, "#c33"),
        mp = max_p as u64,
        ml = short(Duration::from_nanos(max_l as u64)),
        n = shown.len(),
    )
}
