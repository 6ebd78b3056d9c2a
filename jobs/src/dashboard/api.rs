//! The dashboard's JSON API, which its own pages use (`list.js` in
//! `views.rs`) and an operator's scripts may too; the CLI uses it to reach
//! a file another process holds (`remote.rs`). Reads answer anyone the
//! `Host` check lets in; writes need `--allow-writes` and the
//! `x-csrf-token` header (the page's `<meta name=csrf>`, or the sidecar's
//! `token=` line for the CLI).
//!
//! | route | what |
//! | --- | --- |
//! | `GET api/stats` | counts by state, the oldest due time, how late it is |
//! | `GET api/jobs?state=dead&kind=K&error=TEXT&cursor=C&limit=N` | one page of a state's jobs, filtered; `next` is the next page's cursor |
//! | `GET api/jobs/ID` | one job (404 if none) |
//! | `GET api/kinds` | counts by state per kind |
//! | `GET api/throughput?minutes=180` | jobs processed and failed per minute, and per kind over the last hour |
//! | `GET api/samples?minutes=180` | the backlog per minute, as the queue sampled it: pending jobs and how late the oldest due job was |
//! | `POST api/requeue` `{"ids":[…]}` | dead jobs back to pending, due now: a flag per id |
//! | `POST api/delete` `{"ids":[…],"states":["dead"]}` | jobs deleted only in those states: a flag per id |
//! | `POST api/bulk` `{"action":"requeue"\|"delete","state":"dead","kind":K,"error":T,"ids":[…],"confirm":false}` | without `confirm`, what it would do; with it, done, and a sentence saying what changed |
//!
//! Times are nanoseconds since the Unix epoch; a queue error is status 503
//! with `{"error": "…"}`.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use delayq_durable::{Filter, Inspect, JobId, JobInfo, JobState, KindCounts, Missed, ScheduleInfo};
use serde::{Deserialize, Serialize};

use super::{blocking, App};
use crate::commands::relative;
use crate::preview::{line, preview};

/// `GET api/stats`.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ApiStats {
    /// What the queue is (`describe`).
    pub queue: String,
    /// Pending jobs.
    pub pending: u64,
    /// Leased jobs.
    pub leased: u64,
    /// Dead jobs.
    pub dead: u64,
    /// The earliest deadline of a pending job.
    pub oldest_due_ns: Option<u64>,
    /// Whether no process holds a lease (an embedded file no application has).
    pub holders_gone: bool,
}

/// One job, as the API gives it: its fields, and their escaped forms for display.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ApiJob {
    /// The id.
    pub id: u64,
    /// `pending`, `leased` or `dead`.
    pub state: String,
    /// The kind (`""`: none).
    pub kind: String,
    /// Its deadline.
    pub deadline_ns: u64,
    /// Deliveries so far.
    pub attempt: u32,
    /// When its lease ends, if leased.
    pub lease_deadline_ns: Option<u64>,
    /// When it died, if dead (where the backend knows).
    pub died_at_ns: Option<u64>,
    /// The last error.
    pub last_error: Option<String>,
    /// Its priority, `0..=9` (0 first; absent from a server that predates priorities).
    #[serde(default)]
    pub priority: u8,
    /// The payload, hex.
    pub payload_hex: String,
    /// For display: the kind, error and payload escaped (`\n`, `\u{202e}`)
    /// and cut; the times relative to now.
    pub shown: Shown,
}

/// A job's fields as a page shows them.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct Shown {
    /// The kind, escaped.
    pub kind: String,
    /// The last error, escaped (`-`: none).
    pub error: String,
    /// The payload's preview, escaped.
    pub payload: String,
    /// The payload's length in bytes.
    pub bytes: usize,
    /// `in 5s`, `3m ago`: when due.
    pub due: String,
    /// When the lease ends (leased jobs).
    pub lease_ends: String,
    /// When it died (dead jobs).
    pub died: String,
}

/// `GET api/jobs`.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ApiPage {
    /// The jobs.
    pub jobs: Vec<ApiJob>,
    /// The next page's cursor (`null`: the last page).
    pub next: Option<u64>,
}

/// `GET api/kinds`: one per kind.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ApiKind {
    /// The kind (`""`: none).
    pub kind: String,
    /// Pending jobs of this kind.
    pub pending: u64,
    /// Leased jobs of this kind.
    pub leased: u64,
    /// Dead jobs of this kind.
    pub dead: u64,
}

/// `GET api/throughput`.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct ApiThroughput {
    /// Per minute with any (oldest first): all kinds together.
    pub minutes: Vec<ApiMinute>,
    /// Per kind, over the last hour.
    pub kinds: Vec<ApiKindRate>,
}

/// One minute's jobs processed and failed.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ApiMinute {
    /// The minute's start.
    pub minute_ns: u64,
    /// Jobs acked.
    pub processed: u64,
    /// Failed attempts.
    pub failed: u64,
}

/// One kind's jobs processed and failed over the last hour.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ApiKindRate {
    /// The kind (`""`: none).
    pub kind: String,
    /// Jobs acked.
    pub processed: u64,
    /// Failed attempts.
    pub failed: u64,
    /// `failed / (processed + failed)`, 0 with neither.
    pub failure_rate: f64,
}

/// The throughput of the last `minutes`, and per kind of the last hour.
pub(crate) fn throughput(
    q: &dyn Inspect,
    minutes: u64,
) -> Result<ApiThroughput, delayq_durable::DurableError> {
    let now = SystemTime::now();
    let span = std::time::Duration::from_secs(60 * minutes.max(60));
    let rows = q.throughput(now.checked_sub(span).unwrap_or(UNIX_EPOCH))?;
    let shown_from = now.checked_sub(std::time::Duration::from_secs(60 * minutes)).unwrap_or(UNIX_EPOCH);
    let hour_ago = now.checked_sub(std::time::Duration::from_secs(3600)).unwrap_or(UNIX_EPOCH);
    let mut by_minute: std::collections::BTreeMap<u64, (u64, u64)> = Default::default();
    let mut by_kind: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for r in &rows {
        // The minute that began before the window's start still counts.
        if r.minute + std::time::Duration::from_secs(60) > shown_from {
            let m = by_minute.entry(ns(r.minute)).or_default();
            m.0 += r.processed;
            m.1 += r.failed;
        }
        if r.minute + std::time::Duration::from_secs(60) > hour_ago {
            let k = by_kind.entry(r.kind.clone()).or_default();
            k.0 += r.processed;
            k.1 += r.failed;
        }
    }
    Ok(ApiThroughput {
        minutes: by_minute
            .into_iter()
            .map(|(minute_ns, (processed, failed))| ApiMinute { minute_ns, processed, failed })
            .collect(),
        kinds: by_kind
            .into_iter()
            .map(|(kind, (processed, failed))| ApiKindRate {
                kind,
                processed,
                failed,
                failure_rate: if processed + failed == 0 {
                    0.0
                } else {
                    failed as f64 / (processed + failed) as f64
                },
            })
            .collect(),
    })
}

/// `api/throughput`'s and `api/samples`' query.
#[derive(Deserialize, Debug, Default)]
pub(super) struct ThroughputQuery {
    #[serde(default)]
    minutes: Option<u64>,
}

pub(super) async fn throughput_route(
    State(app): State<Arc<App>>,
    Query(q): Query<ThroughputQuery>,
) -> Response {
    let queue = app.queue.clone();
    let minutes = q.minutes.unwrap_or(180).clamp(1, 24 * 60);
    match blocking(move || throughput(&*queue, minutes)).await {
        Ok(t) => Json(t).into_response(),
        Err(e) => unavailable(e),
    }
}

/// `GET api/samples`: one per minute the queue sampled (oldest first).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ApiSample {
    /// The minute's start.
    pub minute_ns: u64,
    /// Pending jobs at the sample.
    pub pending: u64,
    /// How late the oldest due job was at the sample (0: none was due).
    pub lateness_ns: u64,
}

/// The backlog samples of the last `minutes`.
pub(crate) fn samples(q: &dyn Inspect, minutes: u64) -> Result<Vec<ApiSample>, delayq_durable::DurableError> {
    let since =
        SystemTime::now().checked_sub(std::time::Duration::from_secs(60 * minutes)).unwrap_or(UNIX_EPOCH);
    Ok(q.samples(since)?
        .into_iter()
        .map(|s| ApiSample {
            minute_ns: ns(s.minute),
            pending: s.pending,
            lateness_ns: u64::try_from(s.lateness.as_nanos()).unwrap_or(u64::MAX),
        })
        .collect())
}

pub(super) async fn samples_route(State(app): State<Arc<App>>, Query(q): Query<ThroughputQuery>) -> Response {
    let queue = app.queue.clone();
    let minutes = q.minutes.unwrap_or(180).clamp(1, 24 * 60);
    match blocking(move || samples(&*queue, minutes)).await {
        Ok(t) => Json(t).into_response(),
        Err(e) => unavailable(e),
    }
}

/// `POST api/requeue` and `api/delete`.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct ApiIds {
    /// The jobs.
    pub ids: Vec<u64>,
    /// For a delete: the states it may be in.
    #[serde(default)]
    pub states: Vec<String>,
}

/// What `api/requeue` and `api/delete` did: a flag per id.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ApiDone {
    /// Whether each job changed.
    pub done: Vec<bool>,
}

/// `POST api/bulk`: the jobs selected (`ids`) or every job matching the
/// state and filter.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct ApiBulk {
    /// `requeue` (dead jobs only) or `delete` (pending or dead jobs).
    pub action: String,
    /// The state listed.
    pub state: String,
    /// The kind filter.
    #[serde(default)]
    pub kind: Option<String>,
    /// The error-text filter.
    #[serde(default)]
    pub error: Option<String>,
    /// The jobs selected; absent: every job that matches.
    #[serde(default)]
    pub ids: Option<Vec<u64>>,
    /// Do it (otherwise: say what it would do).
    #[serde(default)]
    pub confirm: bool,
}

/// What `api/bulk` did or would do.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ApiBulkResult {
    /// The jobs it takes (or took).
    pub matching: u64,
    /// The jobs it changed (0 before confirmation).
    pub changed: u64,
    /// A sentence: the question before confirmation, the outcome after.
    pub message: String,
}

pub(crate) fn ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `job` as the API gives it; `preview_len`: how much of the payload the
/// shown preview keeps.
pub(crate) fn api_job(j: &JobInfo, preview_len: usize) -> ApiJob {
    ApiJob {
        id: j.id.0,
        state: j.state.as_str().into(),
        kind: j.kind.clone(),
        deadline_ns: ns(j.deadline),
        attempt: j.attempt,
        lease_deadline_ns: j.lease_deadline.map(ns),
        died_at_ns: j.died_at.map(ns),
        last_error: j.last_error.clone(),
        priority: j.priority,
        payload_hex: hex(&j.payload),
        shown: Shown {
            kind: if j.kind.is_empty() { "-".into() } else { line(&j.kind, 80) },
            error: line(j.last_error.as_deref().unwrap_or("-"), if preview_len > 200 { 4096 } else { 300 }),
            payload: preview(&j.payload, preview_len),
            bytes: j.payload.len(),
            due: relative(j.deadline),
            lease_ends: j.lease_deadline.map(relative).unwrap_or_default(),
            died: j.died_at.map(relative).unwrap_or_default(),
        },
    }
}

pub(crate) fn state_named(name: &str) -> Option<JobState> {
    match name {
        "pending" => Some(JobState::Pending),
        "leased" | "reserved" => Some(JobState::Leased),
        "dead" => Some(JobState::Dead),
        _ => None,
    }
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

fn unavailable(message: String) -> Response {
    error(StatusCode::SERVICE_UNAVAILABLE, message)
}

pub(super) async fn stats(State(app): State<Arc<App>>) -> Response {
    let q = app.queue.clone();
    let read = blocking(move || Ok((q.describe(), q.stats()?, q.oldest_due()?, q.holders_gone()))).await;
    match read {
        Ok((queue, s, oldest, holders_gone)) => Json(ApiStats {
            queue,
            pending: s.pending,
            leased: s.leased,
            dead: s.dead,
            oldest_due_ns: oldest.map(ns),
            holders_gone,
        })
        .into_response(),
        Err(e) => unavailable(e),
    }
}

/// `api/jobs`' query.
#[derive(Deserialize, Debug, Default)]
pub(super) struct ListQuery {
    #[serde(default)]
    pub(super) state: Option<String>,
    #[serde(default)]
    pub(super) kind: Option<String>,
    #[serde(default)]
    pub(super) error: Option<String>,
    #[serde(default)]
    pub(super) cursor: u64,
    #[serde(default)]
    pub(super) limit: Option<usize>,
}

/// A filter from query parameters: an empty error text keeps every job; a
/// kind of `-` is "no kind".
pub(crate) fn filter(kind: Option<&str>, error: Option<&str>) -> Filter {
    Filter {
        kind: kind.filter(|k| !k.is_empty()).map(|k| if k == "-" { String::new() } else { k.to_string() }),
        error: error.filter(|e| !e.is_empty()).map(str::to_string),
    }
}

pub(super) async fn jobs(State(app): State<Arc<App>>, Query(q): Query<ListQuery>) -> Response {
    let Some(state) = state_named(q.state.as_deref().unwrap_or("dead")) else {
        return error(StatusCode::BAD_REQUEST, "state must be pending, leased or dead");
    };
    let filter = filter(q.kind.as_deref(), q.error.as_deref());
    let limit = q.limit.unwrap_or(50).clamp(1, 1000);
    let queue = app.queue.clone();
    // A filter that keeps few jobs: a backend's page reads a bounded number
    // of entries, so read on (up to ten pages, 200,000 entries) before
    // answering with fewer than asked for.
    let read = move || {
        let mut page = queue.page(state, &filter, q.cursor, limit)?;
        for _ in 0..9 {
            let Some(next) = page.next.filter(|_| page.jobs.len() < limit) else { break };
            let more = queue.page(state, &filter, next, limit - page.jobs.len())?;
            page.jobs.extend(more.jobs);
            page.next = more.next;
        }
        Ok(page)
    };
    match blocking(read).await {
        Ok(page) => {
            Json(ApiPage { jobs: page.jobs.iter().map(|j| api_job(j, 80)).collect(), next: page.next })
                .into_response()
        }
        Err(e) => unavailable(e),
    }
}

pub(super) async fn job(State(app): State<Arc<App>>, Path(id): Path<u64>) -> Response {
    let queue = app.queue.clone();
    match blocking(move || queue.job(JobId(id))).await {
        Ok(Some(j)) => Json(api_job(&j, 4096)).into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, format!("no job {id}")),
        Err(e) => unavailable(e),
    }
}

pub(crate) fn api_kind(k: &KindCounts) -> ApiKind {
    ApiKind { kind: k.kind.clone(), pending: k.pending, leased: k.leased, dead: k.dead }
}

/// A recurring schedule as the API gives it.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ApiSchedule {
    /// Its name.
    pub name: String,
    /// When it ticks, in words.
    pub spec: String,
    /// The kind of the jobs it stores.
    pub kind: String,
    /// Their priority.
    pub priority: u8,
    /// The missed-tick policy: `skip`, `once`, or `all:N`.
    pub missed: String,
    /// The next tick (absent while paused).
    pub next_run_ns: Option<u64>,
    /// The last tick fired.
    pub last_run_ns: Option<u64>,
    /// Whether it is paused.
    pub paused: bool,
    /// The payload of its jobs, hex.
    pub payload_hex: String,
}

pub(crate) fn api_schedule(s: &ScheduleInfo) -> ApiSchedule {
    ApiSchedule {
        name: s.name.clone(),
        spec: s.spec.clone(),
        kind: s.kind.clone(),
        priority: s.priority,
        missed: match s.missed {
            Missed::Skip => "skip".into(),
            Missed::Once => "once".into(),
            Missed::All(n) => format!("all:{n}"),
        },
        next_run_ns: s.next_run.map(ns),
        last_run_ns: s.last_run.map(ns),
        paused: s.paused,
        payload_hex: hex(&s.payload),
    }
}

/// `missed` as [`api_schedule`] wrote it.
pub(crate) fn missed_named(text: &str) -> Option<Missed> {
    match text {
        "skip" => Some(Missed::Skip),
        "once" => Some(Missed::Once),
        _ => text.strip_prefix("all:")?.parse().ok().map(Missed::All),
    }
}

pub(super) async fn schedules(State(app): State<Arc<App>>) -> Response {
    let queue = app.queue.clone();
    match blocking(move || queue.schedules()).await {
        Ok(list) => Json(list.iter().map(api_schedule).collect::<Vec<_>>()).into_response(),
        Err(e) => unavailable(e),
    }
}

pub(super) async fn kinds(State(app): State<Arc<App>>) -> Response {
    let queue = app.queue.clone();
    match blocking(move || queue.kinds()).await {
        Ok(kinds) => Json(kinds.iter().map(api_kind).collect::<Vec<_>>()).into_response(),
        Err(e) => unavailable(e),
    }
}

/// Refuses a write unless writes are allowed and it carries this
/// dashboard's token (`x-csrf-token`) from its own origin.
fn refused(app: &App, headers: &HeaderMap) -> Option<Response> {
    if !app.allow_writes {
        return Some(error(StatusCode::FORBIDDEN, "read-only dashboard (start it with --allow-writes)"));
    }
    app.guard.check_write(headers, None).err().map(|(status, why)| error(status, why))
}

fn ids(list: &[u64]) -> Vec<JobId> {
    list.iter().copied().map(JobId).collect()
}

pub(super) async fn requeue(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Json(req): Json<ApiIds>,
) -> Response {
    if let Some(r) = refused(&app, &headers) {
        return r;
    }
    let queue = app.queue.clone();
    match blocking(move || queue.requeue_dead_many(&ids(&req.ids), SystemTime::now())).await {
        Ok(done) => Json(ApiDone { done }).into_response(),
        Err(e) => unavailable(e),
    }
}

pub(super) async fn delete(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Json(req): Json<ApiIds>,
) -> Response {
    if let Some(r) = refused(&app, &headers) {
        return r;
    }
    let Some(states) = req.states.iter().map(|s| state_named(s)).collect::<Option<Vec<_>>>() else {
        return error(StatusCode::BAD_REQUEST, "states must be pending, leased or dead");
    };
    if states.is_empty() {
        return error(StatusCode::BAD_REQUEST, "name the states a job may be deleted in");
    }
    let queue = app.queue.clone();
    match blocking(move || queue.cancel_many_in(&ids(&req.ids), &states)).await {
        Ok(done) => Json(ApiDone { done }).into_response(),
        Err(e) => unavailable(e),
    }
}

/// `1204` as `1,204`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn jobs_word(n: u64) -> String {
    format!("{} job{}", thousands(n), if n == 1 { "" } else { "s" })
}

pub(super) async fn bulk(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Json(req): Json<ApiBulk>,
) -> Response {
    if let Some(r) = refused(&app, &headers) {
        return r;
    }
    let Some(state) = state_named(&req.state) else {
        return error(StatusCode::BAD_REQUEST, "state must be pending, leased or dead");
    };
    let requeue = match (req.action.as_str(), state) {
        ("requeue", JobState::Dead) => true,
        ("delete", JobState::Pending | JobState::Dead) => false,
        ("requeue", _) => return error(StatusCode::BAD_REQUEST, "only dead jobs are requeued"),
        ("delete", _) => {
            return error(
                StatusCode::BAD_REQUEST,
                "leased jobs are a worker's: cancel one with the CLI's --force",
            )
        }
        _ => return error(StatusCode::BAD_REQUEST, "action must be requeue or delete"),
    };
    let queue = app.queue.clone();
    let outcome = blocking(move || bulk_on(&*queue, &req, state, requeue)).await;
    match outcome {
        Ok(r) => Json(r).into_response(),
        Err(e) => unavailable(e),
    }
}

fn bulk_on(
    q: &dyn Inspect,
    req: &ApiBulk,
    state: JobState,
    requeue: bool,
) -> Result<ApiBulkResult, delayq_durable::DurableError> {
    let verb = if requeue { "requeue" } else { "delete" };
    let filter = filter(req.kind.as_deref(), req.error.as_deref());
    let what = match (&req.ids, filter.is_empty()) {
        (Some(_), _) => "selected".to_string(),
        (None, true) => format!("every {state}"),
        (None, false) => {
            let mut parts = Vec::new();
            if let Some(k) = &filter.kind {
                parts.push(format!("of kind {}", if k.is_empty() { "-".into() } else { line(k, 80) }));
            }
            if let Some(e) = &filter.error {
                parts.push(format!("whose error contains \"{}\"", line(e, 80)));
            }
            format!("every {state} ({})", parts.join(", "))
        }
    };
    let targets: Vec<JobId> = match &req.ids {
        Some(list) => ids(list),
        None => {
            let mut all = Vec::new();
            let mut cursor = 0;
            loop {
                let page = q.page(state, &filter, cursor, 1000)?;
                all.extend(page.jobs.iter().map(|j| j.id));
                match page.next {
                    Some(next) => cursor = next,
                    None => break,
                }
            }
            all
        }
    };
    let matching = targets.len() as u64;
    if !req.confirm {
        return Ok(ApiBulkResult {
            matching,
            changed: 0,
            message: format!("{verb} {what}: {}?", jobs_word(matching)),
        });
    }
    let mut done = Vec::with_capacity(targets.len());
    for batch in targets.chunks(10_000) {
        done.extend(if requeue {
            q.requeue_dead_many(batch, SystemTime::now())?
        } else {
            q.cancel_many_in(batch, &[state])?
        });
    }
    let changed = done.iter().filter(|&&d| d).count() as u64;
    let past = if requeue { "requeued" } else { "deleted" };
    let unchanged: Vec<JobId> = targets.iter().zip(&done).filter(|(_, d)| !**d).map(|(id, _)| *id).collect();
    let why = |id: JobId| -> String {
        match q.job(id) {
            Ok(Some(j)) => format!("job {} was {} meanwhile", id.0, j.state),
            Ok(None) => format!("job {} was gone", id.0),
            Err(_) => format!("job {} did not change", id.0),
        }
    };
    let message = match (changed, unchanged.first()) {
        (0, None) => "nothing to do: no job matched".to_string(),
        (_, None) => format!("{past} {}", jobs_word(changed)),
        (0, Some(&first)) => format!("nothing changed: {}", why(first)),
        (_, Some(&first)) => format!(
            "{past} {} of {}; {}{}",
            thousands(changed),
            jobs_word(matching),
            why(first),
            if unchanged.len() > 1 { format!(" (and {} more)", unchanged.len() - 1) } else { String::new() }
        ),
    };
    Ok(ApiBulkResult { matching, changed, message })
}
