//! The web dashboard: per queue, an overview (the counts by state and by
//! kind, charts of the throughput and of pending jobs and lateness over
//! the last three hours, from what the queue stores, the
//! first dead jobs with requeue and delete buttons, plain form POSTs, when
//! writes are allowed) that refreshes itself every 5 s, also when the queue
//! fails (the error is shown in the page, and the next refresh tries
//! again); lists of each state, paged and filtered by kind and error text,
//! with bulk actions behind a confirmation step, and a page per job
//! (`views.rs`), whose script uses the JSON API (`api.rs`) as an
//! operator's script would.
//!
//! It answers only requests whose `Host` is a loopback name, the address
//! it is bound to, or a name in [`Options::hosts`] (421 otherwise, for
//! reads too: DNS rebinding), and takes a write only with its page's CSRF
//! token and no foreign `Origin` (`guard.rs`).
//!
//! The charts read what the queue stores itself (its throughput per minute
//! and its backlog sampled once a minute, [`Inspect::samples`]), so they
//! show the hours before the page was opened; no thread of the dashboard
//! wakes while nobody looks.
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
//!     Options { allow_writes: true, sidecar: Some("jobs.redb".into()), ..Options::default() },
//! )?;
//! println!("dashboard at {}", server.url());
//! // ... or mount `dashboard::router(Arc::new(queue), Options::default())` in an axum app.
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod api;
mod guard;
mod page;
mod views;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Form, State};
use axum::http::{HeaderMap, Request, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use delayq_durable::{DurableError, Inspect, JobId, JobState};

use self::guard::Guard;
pub(crate) use self::page::url_encode;

/// What the dashboard may do.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Show and accept the requeue and delete buttons (read-only otherwise:
    /// a POST is refused with 403).
    pub allow_writes: bool,
    /// For [`serve`]: the database file whose sidecar (`PATH.dashboard`) to
    /// write with this process's id, the dashboard's address and (with
    /// `allow_writes`) its CSRF token while it runs (removed when the server
    /// stops): `delayq-jobs --db PATH` then reaches the queue through this
    /// dashboard's JSON API while this process holds the file.
    pub sidecar: Option<PathBuf>,
    /// Host names it answers to besides loopback names (`localhost`,
    /// `127.0.0.1`, `[::1]`) and the address [`serve`] binds: the name an
    /// operator reaches it by through a proxy or on another machine. Any
    /// other `Host` is refused (421).
    pub hosts: Vec<String>,
}

struct App {
    queue: Arc<dyn Inspect>,
    allow_writes: bool,
    guard: Guard,
}

/// The dashboard as an axum `Router` (`GET /`, `/list`, `/job/{id}`, `POST
/// /requeue`, `/delete`, and the JSON API under `/api/`, see [`api`]), to
/// mount in an application (`Router::nest("/jobs", …)`).
/// Queue calls run on tokio's blocking pool. Mounted this way it answers to
/// loopback names and [`Options::hosts`] (it does not know the address the
/// application binds).
pub fn router(queue: Arc<dyn Inspect>, options: Options) -> Router {
    router_on(queue, options, None).0
}

/// The router and its CSRF token.
fn router_on(queue: Arc<dyn Inspect>, options: Options, bound: Option<IpAddr>) -> (Router, String) {
    let app =
        Arc::new(App { queue, allow_writes: options.allow_writes, guard: Guard::new(bound, &options.hosts) });
    let router = Router::new()
        .route("/", get(page::page))
        .route("/list", get(views::list))
        .route("/job/{id}", get(views::job))
        .route("/requeue", post(requeue))
        .route("/delete", post(delete))
        .route("/api/stats", get(api::stats))
        .route("/api/jobs", get(api::jobs))
        .route("/api/jobs/{id}", get(api::job))
        .route("/api/kinds", get(api::kinds))
        .route("/api/schedules", get(api::schedules))
        .route("/api/throughput", get(api::throughput_route))
        .route("/api/samples", get(api::samples_route))
        .route("/api/requeue", post(api::requeue))
        .route("/api/delete", post(api::delete))
        .route("/api/bulk", post(api::bulk))
        .layer(middleware::from_fn_with_state(app.clone(), check_host))
        .with_state(app.clone());
    (router, app.guard.token.clone())
}

/// Every request, read or write: its `Host` must be one this dashboard serves.
async fn check_host(State(app): State<Arc<App>>, req: Request<axum::body::Body>, next: Next) -> Response {
    match app.guard.check_host(req.headers()) {
        Ok(()) => next.run(req).await,
        Err(refused) => refused.into_response(),
    }
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
    let writes = options.allow_writes;
    let (router, token) = router_on(queue, options, Some(addr.ip()));
    let mut server = serve_router(router, addr)?;
    if let Some(db) = sidecar {
        crate::sidecar::write(&db, &server.url(), writes.then_some(token.as_str()))?;
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

fn failed(e: impl std::fmt::Display) -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, format!("the queue failed: {e}")).into_response()
}

/// What to show for a queue error: a file held by another process names it
/// (and its dashboard, from its sidecar), as the CLI does.
fn queue_error(e: DurableError) -> String {
    match &e {
        DurableError::Locked { path } => crate::open::locked_message(&path.clone()),
        _ => e.to_string(),
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, DurableError> + Send + 'static,
) -> Result<T, String> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(queue_error(e)),
        Err(e) => Err(format!("the queue call panicked: {e}")),
    }
}

/// The form's fields.
#[derive(serde::Deserialize)]
struct IdForm {
    id: u64,
    #[serde(default)]
    csrf: String,
}

/// Refuses a write unless writes are allowed and it comes from this
/// dashboard's own page (`guard.rs`).
fn refuse(app: &App, headers: &HeaderMap, token: &str) -> Option<Response> {
    if !app.allow_writes {
        return Some(
            (StatusCode::FORBIDDEN, "read-only dashboard (start it with --allow-writes)").into_response(),
        );
    }
    app.guard.check_write(headers, Some(token)).err().map(IntoResponse::into_response)
}

async fn requeue(State(app): State<Arc<App>>, headers: HeaderMap, Form(f): Form<IdForm>) -> Response {
    if let Some(r) = refuse(&app, &headers, &f.csrf) {
        return r;
    }
    let q = app.queue.clone();
    match blocking(move || q.requeue_dead(JobId(f.id), SystemTime::now())).await {
        Ok(_) => Redirect::to("./").into_response(),
        Err(e) => failed(e),
    }
}

async fn delete(State(app): State<Arc<App>>, headers: HeaderMap, Form(f): Form<IdForm>) -> Response {
    if let Some(r) = refuse(&app, &headers, &f.csrf) {
        return r;
    }
    let q = app.queue.clone();
    // Only a dead job: the button is on the dead list, and a job requeued
    // and leased meanwhile is a worker's.
    let deleted = blocking(move || q.cancel_in(JobId(f.id), &[JobState::Dead]));
    match deleted.await {
        Ok(_) => Redirect::to("./").into_response(),
        Err(e) => failed(e),
    }
}
