//! The web dashboard: per queue, the counts by state, a chart of pending
//! jobs and lateness over the last minutes, and the dead jobs with their
//! kind and last error — with requeue and delete buttons (plain form POSTs)
//! when writes are allowed. Server-rendered HTML, no JavaScript; the page
//! refreshes itself every 5 s.
//!
//! The chart's samples are taken when the page is served (every 5 s while a
//! browser shows it, by its refresh): no thread wakes while nobody looks.
//!
//! An embedded file is held by one process at a time, so an application
//! that owns its file serves the dashboard itself:
//!
//! ```no_run
//! use std::sync::Arc;
//! use delayq_durable::DurableQueue;
//! use delayq_jobs::dashboard::{self, Options};
//!
//! let queue = DurableQueue::open("jobs.redb")?;
//! // On its own thread, on loopback; writes a `jobs.redb.dashboard` sidecar so
//! // that `delayq-jobs --db jobs.redb`, refused by the lock, points here.
//! let server = dashboard::serve(
//!     Arc::new(queue.clone()),
//!     "127.0.0.1:8025".parse()?,
//!     Options { allow_writes: true, sidecar: Some("jobs.redb".into()) },
//! )?;
//! println!("dashboard at {}", server.url());
//! // ... or mount `dashboard::router(Arc::new(queue), Options::default())` in an axum app.
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use axum::extract::{Form, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use delayq_durable::{Inspect, JobId, JobState};

use crate::commands::{relative, short};
use crate::preview::{line, preview};

/// How many samples the chart keeps (at one per 5 s refresh: 10 minutes).
const SAMPLES: usize = 120;
/// How many dead jobs the page lists.
const DEAD_SHOWN: usize = 100;

/// What the dashboard may do.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Show and accept the requeue and delete buttons (read-only otherwise:
    /// a POST is refused with 403).
    pub allow_writes: bool,
    /// For [`serve`]: the database file whose sidecar (`PATH.dashboard`) to
    /// write with this process's id and the dashboard's address while it
    /// runs (removed when the server stops).
    pub sidecar: Option<PathBuf>,
}

struct Sample {
    at: Instant,
    pending: u64,
    late: Duration,
}

struct App {
    queue: Arc<dyn Inspect>,
    allow_writes: bool,
    samples: Mutex<VecDeque<Sample>>,
}

/// The dashboard as an axum `Router` (`GET /`, `POST /requeue`, `POST
/// /delete`), to mount in an application (`Router::nest("/jobs", …)`).
/// Queue calls run on tokio's blocking pool.
pub fn router(queue: Arc<dyn Inspect>, options: Options) -> Router {
    let app =
        Arc::new(App { queue, allow_writes: options.allow_writes, samples: Mutex::new(VecDeque::new()) });
    Router::new()
        .route("/", get(page))
        .route("/requeue", post(requeue))
        .route("/delete", post(delete))
        .with_state(app)
}

/// A dashboard running on its own thread; stopped when dropped or by
/// [`shutdown`](Server::shutdown).
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    sidecar: Option<PathBuf>,
}

impl Server {
    /// The address it listens on (the real port when bound to port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Stops serving and joins the thread (a request being answered finishes first).
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(db) = self.sidecar.take() {
            crate::sidecar::remove(&db);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Serves [`router`] at `addr` on a thread of its own (a one-thread tokio
/// runtime), and returns once it listens: a bind error is returned here.
/// Writes the sidecar named in `options`, if any.
pub fn serve(queue: Arc<dyn Inspect>, addr: SocketAddr, options: Options) -> std::io::Result<Server> {
    let sidecar = options.sidecar.clone();
    let mut server = serve_router(router(queue, options), addr)?;
    if let Some(db) = sidecar {
        crate::sidecar::write(&db, &server.url())?;
        server.sidecar = Some(db);
    }
    Ok(server)
}

/// Serves any `Router` (the dashboard's with routes of your own) at `addr`
/// as [`serve`] does, without a sidecar.
pub fn serve_router(app: Router, addr: SocketAddr) -> std::io::Result<Server> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new().name("delayq-jobs-dashboard".into()).spawn(move || {
        runtime.block_on(async move {
            let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
    })?;
    Ok(Server { addr, stop: Some(stop), thread: Some(thread), sidecar: None })
}

fn esc(text: &str) -> String {
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

fn failed(e: impl std::fmt::Display) -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, format!("the queue failed: {e}")).into_response()
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, delayq_durable::DurableError> + Send + 'static,
) -> Result<T, Response> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(failed(e)),
        Err(e) => Err(failed(e)),
    }
}

async fn page(State(app): State<Arc<App>>) -> Response {
    let q = app.queue.clone();
    let read = blocking(move || {
        let stats = q.stats()?;
        let oldest = q.oldest_due()?;
        let dead = q.jobs(JobState::Dead, DEAD_SHOWN)?;
        Ok((q.describe(), stats, oldest, dead))
    })
    .await;
    let (name, stats, oldest, dead) = match read {
        Ok(v) => v,
        Err(r) => return r,
    };
    let late = oldest.and_then(|t| SystemTime::now().duration_since(t).ok()).unwrap_or_default();
    let chart = {
        let mut samples = app.samples.lock().unwrap_or_else(PoisonError::into_inner);
        samples.push_back(Sample { at: Instant::now(), pending: stats.pending, late });
        while samples.len() > SAMPLES {
            samples.pop_front();
        }
        chart(&samples)
    };
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=utf-8><meta http-equiv=refresh content=5>\
         <title>delayq jobs: {name}</title><style>\
         body{{font:14px system-ui,sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse}}\
         td,th{{border-bottom:1px solid #ddd;padding:4px 10px;text-align:left}}\
         .counts td{{font-size:28px;font-weight:600;padding-right:2em}}.err{{color:#a00}}\
         form{{display:inline}}code{{font-size:12px}}</style></head><body>\
         <h1>delayq jobs</h1><p>queue <b>{name}</b> · {mode}</p>\
         <table class=counts><tr><th>pending</th><th>leased</th><th>dead</th><th>late</th></tr>\
         <tr><td id=count-pending>{p}</td><td id=count-leased>{l}</td><td id=count-dead>{d}</td><td id=late>{late}</td></tr></table>\
         <h2>Pending and lateness</h2>{chart}<h2>Dead jobs</h2>",
        name = esc(&name),
        mode = if app.allow_writes { "writes allowed" } else { "read-only" },
        p = stats.pending,
        l = stats.leased,
        d = stats.dead,
        late = short(late),
    );
    if dead.is_empty() {
        h.push_str("<p id=no-dead>none</p>");
    } else {
        h.push_str("<table id=dead><tr><th>id</th><th>kind</th><th>attempt</th><th>was due</th><th>last error</th><th>payload</th><th></th></tr>");
        for j in &dead {
            let buttons = if app.allow_writes {
                format!(
                    "<form method=post action=requeue><input type=hidden name=id value={id}><button id=requeue-{id}>requeue</button></form> \
                     <form method=post action=delete><input type=hidden name=id value={id}><button id=delete-{id}>delete</button></form>",
                    id = j.id.0
                )
            } else {
                String::new()
            };
            let _ = write!(
                h,
                "<tr id=dead-{id}><td>{id}</td><td>{kind}</td><td>{attempt}</td><td>{due}</td><td class=err>{err}</td><td><code>{payload}</code></td><td>{buttons}</td></tr>",
                id = j.id.0,
                kind = esc(&line(&j.kind, 60)),
                attempt = j.attempt,
                due = esc(&relative(j.deadline)),
                err = esc(&line(j.last_error.as_deref().unwrap_or("-"), 200)),
                payload = esc(&preview(&j.payload, 60)),
            );
        }
        h.push_str("</table>");
        if stats.dead as usize > dead.len() {
            let _ = write!(h, "<p>the first {} of {} shown</p>", dead.len(), stats.dead);
        }
    }
    h.push_str("</body></html>");
    ([(header::CACHE_CONTROL, "no-store")], Html(h)).into_response()
}

/// An inline SVG: pending jobs (blue) and lateness in seconds (red), each
/// scaled to its own maximum, over the samples kept.
fn chart(samples: &VecDeque<Sample>) -> String {
    let (w, h) = (600.0_f64, 120.0_f64);
    let Some(first) = samples.front() else { return String::new() };
    let span = samples.back().map_or(0.0, |s| s.at.duration_since(first.at).as_secs_f64()).max(1.0);
    let max_p = samples.iter().map(|s| s.pending).max().unwrap_or(0).max(1) as f64;
    let max_l = samples.iter().map(|s| s.late.as_secs_f64()).fold(1.0, f64::max);
    let points = |value: &dyn Fn(&Sample) -> f64| {
        samples
            .iter()
            .map(|s| {
                let x = s.at.duration_since(first.at).as_secs_f64() / span * w;
                format!("{x:.1},{:.1}", h - value(s) * (h - 10.0))
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        "<svg id=chart width={w} height={h} viewBox=\"0 0 {w} {h}\" style=\"border:1px solid #ddd\">\
         <polyline fill=none stroke=#36c stroke-width=2 points=\"{p}\"/>\
         <polyline fill=none stroke=#c33 stroke-width=2 points=\"{l}\"/></svg>\
         <p><span style=color:#36c>pending</span> (max {mp}) · <span style=color:#c33>lateness</span> (max {ml}) · last {span}</p>",
        p = points(&|s| s.pending as f64 / max_p),
        l = points(&|s| s.late.as_secs_f64() / max_l),
        mp = max_p as u64,
        ml = short(Duration::from_secs_f64(max_l)),
        span = short(Duration::from_secs_f64(span)),
    )
}

/// The form's field.
#[derive(serde::Deserialize)]
struct IdForm {
    id: u64,
}

/// Refuses a write unless writes are allowed and the request comes from
/// this dashboard's own page (no `Origin`, or one naming this host): a page
/// on another site must not drive the buttons.
fn refuse(app: &App, headers: &HeaderMap) -> Option<Response> {
    if !app.allow_writes {
        return Some(
            (StatusCode::FORBIDDEN, "read-only dashboard (start it with --allow-writes)").into_response(),
        );
    }
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    match (origin, host) {
        (None, _) => None,
        (Some(o), Some(h)) if o.strip_prefix("http://") == Some(h) => None,
        _ => Some((StatusCode::FORBIDDEN, "cross-origin request refused").into_response()),
    }
}

async fn requeue(State(app): State<Arc<App>>, headers: HeaderMap, Form(f): Form<IdForm>) -> Response {
    if let Some(r) = refuse(&app, &headers) {
        return r;
    }
    let q = app.queue.clone();
    match blocking(move || q.requeue_dead(JobId(f.id), SystemTime::now())).await {
        Ok(_) => Redirect::to("./").into_response(),
        Err(r) => r,
    }
}

async fn delete(State(app): State<Arc<App>>, headers: HeaderMap, Form(f): Form<IdForm>) -> Response {
    if let Some(r) = refuse(&app, &headers) {
        return r;
    }
    let q = app.queue.clone();
    // Only a dead job: the button is on the dead list, and a job requeued
    // and leased meanwhile is a worker's.
    let deleted = blocking(move || q.cancel_in(JobId(f.id), &[JobState::Dead]));
    match deleted.await {
        Ok(_) => Redirect::to("./").into_response(),
        Err(r) => r,
    }
}
