//! The dashboard over HTTP (plain requests on loopback), and in a real
//! browser: headless Chromium loads the page (the counts must match the
//! queue), presses "requeue" (the job must move), and takes a screenshot.
//! The browser test is `#[ignore]`d (run it with `--ignored`, as `.ci/run`
//! does); where `chromium` is missing it skips loudly, unless `CI` is set:
//! then it fails.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::response::Html;
use axum::routing::get;
use delayq_durable::{DurableQueue, Inspect, JobId, JobQueue, JobState, Schedule};
use delayq_jobs::dashboard::{self, Options};

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("delayq-dash-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One pending, one leased and one dead job (its error holds markup); the dead one's id.
fn fill(q: &DurableQueue) -> JobId {
    let now = SystemTime::now();
    let dead = q.send_kind_at("email.send", b"to ana", now).unwrap();
    q.send_kind_at("report.daily", b"leased", now + Duration::from_millis(1)).unwrap();
    q.send_at(b"later", now + Duration::from_secs(3600)).unwrap();
    let job = q.reserve(Duration::from_secs(600)).unwrap();
    assert!(q.kill(&job, "smtp <b>550</b>: no such user").unwrap());
    q.reserve(Duration::from_secs(600)).unwrap();
    dead
}

/// A request on its own connection: (status, body).
fn http(addr: SocketAddr, method: &str, path: &str, body: &str, headers: &str) -> (u16, String) {
    http_as(&addr.to_string(), addr, method, path, body, headers)
}

/// A request naming `host` in its `Host` header.
fn http_as(
    host: &str,
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
    headers: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{headers}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let status = reply[9..12].parse().unwrap();
    (status, reply)
}

/// The CSRF token in a page's forms.
fn token(page: &str) -> String {
    find_token(page).unwrap_or_else(|| panic!("no token in {page}"))
}

fn find_token(page: &str) -> Option<String> {
    let at = page.find("name=csrf value=")? + 16;
    Some(page[at..].split(|c: char| !c.is_ascii_hexdigit()).next()?.to_string())
}

fn count(page: &str, state: &str) -> u64 {
    // As served (`id=count-x>`) or as Chromium serializes the DOM (`id="count-x">`).
    let at = [format!("id=\"count-{state}\">"), format!("id=count-{state}>")]
        .iter()
        .find_map(|p| page.find(p.as_str()).map(|i| i + p.len()))
        .unwrap_or_else(|| panic!("no count-{state} in {page}"));
    page[at..].split('<').next().unwrap().trim().parse().unwrap()
}

#[test]
fn read_only_page_shows_counts_and_escaped_dead_jobs() {
    let dir = temp_dir("ro");
    let q = DurableQueue::open(dir.join("jobs.redb")).unwrap();
    let dead = fill(&q);
    let server =
        dashboard::serve(Arc::new(q.clone()), "127.0.0.1:0".parse().unwrap(), Options::default()).unwrap();
    let (status, page) = http(server.addr(), "GET", "/", "", "");
    assert_eq!(status, 200);
    assert_eq!((count(&page, "pending"), count(&page, "leased"), count(&page, "dead")), (1, 1, 1));
    assert!(
        page.contains("email.send") && page.contains("smtp &lt;b&gt;550&lt;/b&gt;: no such user"),
        "{page}"
    );
    assert!(page.contains("read-only") && !page.contains("requeue-"), "no buttons when read-only");
    assert!(page.contains("<svg id=chart"));
    let (status, _) = http(server.addr(), "POST", "/requeue", &format!("id={}", dead.0), "");
    assert_eq!(status, 403);
    assert_eq!(q.job(dead).unwrap().unwrap().state, JobState::Dead);
    server.shutdown();
    drop(q);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn writes_move_jobs_and_other_origins_are_refused() {
    let dir = temp_dir("rw");
    let q = DurableQueue::open(dir.join("jobs.redb")).unwrap();
    let dead = fill(&q);
    let options = Options { allow_writes: true, ..Options::default() };
    let server = dashboard::serve(Arc::new(q.clone()), "127.0.0.1:0".parse().unwrap(), options).unwrap();
    let (_, page) = http(server.addr(), "GET", "/", "", "");
    let t = token(&page);
    let form = format!("id={}&csrf={t}", dead.0);
    let (status, _) = http(server.addr(), "POST", "/requeue", &form, "Origin: http://evil.example\r\n");
    assert_eq!(status, 403);
    assert_eq!(q.job(dead).unwrap().unwrap().state, JobState::Dead);
    let (status, _) = http(server.addr(), "POST", "/requeue", &format!("id={}", dead.0), "");
    assert_eq!(status, 403, "no CSRF token");
    let (status, _) = http(server.addr(), "POST", "/requeue", &format!("id={}&csrf=0{t}", dead.0), "");
    assert_eq!(status, 403, "a wrong CSRF token");
    assert_eq!(q.job(dead).unwrap().unwrap().state, JobState::Dead);
    let (status, reply) = http(server.addr(), "POST", "/requeue", &form, "");
    assert_eq!(status, 303, "{reply}");
    assert_eq!(q.job(dead).unwrap().unwrap().state, JobState::Pending);
    // Delete takes only a dead job.
    let (status, _) = http(server.addr(), "POST", "/delete", &form, "");
    assert_eq!(status, 303);
    assert_eq!(q.job(dead).unwrap().unwrap().state, JobState::Pending, "a pending job is not deleted");
    let job = q.reserve(Duration::from_secs(60)).unwrap();
    assert!(q.kill(&job, "again").unwrap());
    let origin = format!("Origin: http://{}\r\n", server.addr());
    let (status, _) = http(server.addr(), "POST", "/delete", &format!("id={}&csrf={t}", job.id().0), &origin);
    assert_eq!(status, 303);
    assert_eq!(q.job(job.id()).unwrap(), None);
    let (status, _) = http(server.addr(), "POST", "/delete", &format!("id=notanumber&csrf={t}"), "");
    assert_eq!(status, 422, "bad input is a client error");
    server.shutdown();
    drop(q);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_forged_host_is_refused_for_reads_and_writes() {
    let dir = temp_dir("host");
    let q = DurableQueue::open(dir.join("jobs.redb")).unwrap();
    let dead = fill(&q);
    let options = Options { allow_writes: true, ..Options::default() };
    let server = dashboard::serve(Arc::new(q.clone()), "127.0.0.1:0".parse().unwrap(), options).unwrap();
    let addr = server.addr();
    let (_, page) = http(addr, "GET", "/", "", "");
    // (The token the page gives, if any: the Host check comes first.)
    let form = format!("id={}&csrf={}", dead.0, find_token(&page).unwrap_or_default());
    // What DNS rebinding produces: Origin and Host both name the attacker's site.
    let evil = format!("attacker.example:{}", addr.port());
    let origin = format!("Origin: http://{evil}\r\n");
    let (status, _) = http_as(&evil, addr, "POST", "/delete", &form, &origin);
    assert_eq!(status, 421);
    assert_eq!(q.job(dead).unwrap().unwrap().state, JobState::Dead, "not deleted");
    let (status, body) = http_as(&evil, addr, "GET", "/", "", "");
    assert_eq!(status, 421);
    assert!(!body.contains("email.send"), "no payload leaks: {body}");
    // Loopback names are served.
    for host in [format!("localhost:{}", addr.port()), format!("127.0.0.1:{}", addr.port())] {
        assert_eq!(http_as(&host, addr, "GET", "/", "", "").0, 200, "{host}");
    }
    server.shutdown();
    drop(q);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[path = "../../durable/tests/redis_server/mod.rs"]
mod redis_server;

#[test]
fn a_redis_outage_is_shown_in_the_page_which_keeps_refreshing() {
    if !redis_server::available() {
        return;
    }
    let server = redis_server::RedisServer::start("jobs-outage");
    let q = delayq_durable::RedisQueue::builder()
        .retry_for(Duration::from_millis(300))
        .connect(&server.url(), "outage")
        .unwrap();
    q.send_after(b"x", Duration::from_secs(60)).unwrap();
    let dash =
        dashboard::serve(Arc::new(q.clone()), "127.0.0.1:0".parse().unwrap(), Options::default()).unwrap();
    let (status, page) = http(dash.addr(), "GET", "/", "", "");
    assert_eq!((status, count(&page, "pending")), (200, 1));
    server.kill();
    let (status, page) = http(dash.addr(), "GET", "/", "", "");
    assert_eq!(status, 503);
    assert!(page.contains("<!doctype html>") && page.contains("id=error"), "an HTML page: {page}");
    assert!(page.contains("the queue failed: redis:"), "{page}");
    assert!(page.contains("http-equiv=refresh"), "it keeps refreshing: {page}");
    server.restart();
    let (status, page) = http(dash.addr(), "GET", "/", "", "");
    assert_eq!((status, count(&page, "pending")), (200, 1), "the same tab recovers");
    dash.shutdown();
}

#[path = "../../durable/tests/pg_server/mod.rs"]
mod pg_server;

#[test]
fn a_postgres_outage_is_shown_in_the_page_which_keeps_refreshing() {
    if !pg_server::available() {
        return;
    }
    let server = pg_server::PgServer::start("jobs-outage");
    let q = delayq_durable::PgQueue::builder()
        .retry_for(Duration::from_millis(300))
        .connect(&server.url(), "outage")
        .unwrap();
    q.send_after(b"x", Duration::from_secs(60)).unwrap();
    let dash =
        dashboard::serve(Arc::new(q.clone()), "127.0.0.1:0".parse().unwrap(), Options::default()).unwrap();
    let (status, page) = http(dash.addr(), "GET", "/", "", "");
    assert_eq!((status, count(&page, "pending")), (200, 1));
    server.stop_immediate();
    let (status, page) = http(dash.addr(), "GET", "/", "", "");
    assert_eq!(status, 503);
    assert!(page.contains("the queue failed: postgres:"), "{page}");
    assert!(page.contains("http-equiv=refresh"), "it keeps refreshing: {page}");
    server.restart();
    let (status, page) = http(dash.addr(), "GET", "/", "", "");
    assert_eq!((status, count(&page, "pending")), (200, 1), "the same tab recovers");
    dash.shutdown();
}

fn chromium_available() -> bool {
    let found = Command::new("chromium").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        if std::env::var_os("CI").is_some() {
            panic!("chromium not found, and CI is set: CI must install it (apt-get install -y chromium)");
        }
        eprintln!("\n*** SKIPPED: chromium not found; install it (apt-get install -y chromium) to run the browser test ***\n");
    }
    found
}

/// Runs headless Chromium on `url` with `args`, in a profile of its own, for
/// at most 90 s; its stdout.
fn chromium(profile: &Path, args: &[&str], url: &str) -> String {
    let out = Command::new("timeout")
        .arg("90")
        .arg("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            &format!("--user-data-dir={}", profile.display()),
        ])
        .args(args)
        .arg(url)
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

// Ignored by a plain `cargo test` (CI's workspace test step runs before
// Chromium is installed); `.ci/run` installs it and runs this with `--ignored`.
#[test]
#[ignore = "needs chromium: cargo test -p delayq-jobs --test dashboard -- --ignored"]
fn a_browser_sees_the_counts_presses_requeue_and_takes_a_screenshot() {
    if !chromium_available() {
        return;
    }
    let dir = temp_dir("browser");
    let q = DurableQueue::open(dir.join("jobs.redb")).unwrap();
    let dead = fill(&q);
    // The dashboard, plus a page that loads it in a frame and clicks its
    // requeue button (same origin, so the click is the dashboard's own form).
    let press = format!(
        "<!doctype html><iframe id=f src=\"/\" width=1100 height=700></iframe><script>\
         let pressed = false;\
         document.getElementById('f').onload = function () {{\
           if (!pressed) {{ pressed = true; this.contentDocument.getElementById('requeue-{}').click(); }}\
           else {{ document.title = 'pressed'; }}\
         }};</script>",
        dead.0
    );
    // A page that loads the dashboard in a 1400 px frame and says whether
    // every requeue button fits in it.
    let measure = "<!doctype html><iframe id=f src=\"/\" width=1400 height=900 style=border:0></iframe><script>\
         document.getElementById('f').onload = function () {\
           const d = this.contentDocument, w = d.documentElement.clientWidth;\
           const right = Math.max(...[...d.querySelectorAll('button')].map(b => b.getBoundingClientRect().right));\
           document.title = right <= w ? 'fits' : 'overflows ' + right + ' > ' + w;\
         };</script>";
    let app = dashboard::router(Arc::new(q.clone()), Options { allow_writes: true, ..Options::default() })
        .route("/press", get(move || async move { Html(press.clone()) }))
        .route("/measure", get(move || async move { Html(measure) }));
    let server = dashboard::serve_router(app, "127.0.0.1:0".parse().unwrap()).unwrap();
    let profile = dir.join("profile");

    let dom = chromium(&profile, &["--dump-dom"], &server.url());
    let s = q.stats().unwrap();
    assert_eq!(
        (count(&dom, "pending"), count(&dom, "leased"), count(&dom, "dead")),
        (s.pending, s.leased, s.dead)
    );
    assert!(dom.contains(&format!("requeue-{}", dead.0)), "the button is there: {dom}");

    let dom =
        chromium(&profile, &["--dump-dom", "--virtual-time-budget=10000"], &format!("{}press", server.url()));
    assert!(dom.contains("<title>pressed</title>"), "the frame reloaded after the click: {dom}");
    assert_eq!(q.job(dead).unwrap().unwrap().state, JobState::Pending, "the job moved");
    let dom = chromium(&profile, &["--dump-dom"], &server.url());
    assert_eq!((count(&dom, "pending"), count(&dom, "dead")), (2, 0));
    assert!(dom.contains("id=\"no-schedules\""), "no schedules yet: {dom}");

    // A schedule shows with when it ticks, its next run and its state.
    let nightly = Schedule::cron("30 2 * * *").unwrap().in_zone("Europe/Berlin").unwrap();
    q.schedule_raw("nightly", &nightly, "report.daily", b"{}").unwrap();
    q.schedule_raw("paused-one", &Schedule::every(Duration::from_secs(60)).unwrap(), "beat", b"").unwrap();
    assert!(q.pause_schedule("paused-one").unwrap());
    let dom = chromium(&profile, &["--dump-dom"], &server.url());
    let row = |id: &str| {
        let at = dom.find(&format!("id=\"schedule-{id}\"")).unwrap_or_else(|| panic!("row {id}: {dom}"));
        dom[at..at + dom[at..].find("</tr>").unwrap()].to_string()
    };
    let nightly = row("nightly");
    assert!(
        nightly.contains("Europe/Berlin") && nightly.contains("report.daily") && nightly.contains(">active<"),
        "{nightly}"
    );
    assert!(nightly.contains("<td class=\"next\">in "), "{nightly}");
    assert!(row("paused-one").contains(">paused<"));
    assert!(q.remove_schedule("nightly").unwrap() && q.remove_schedule("paused-one").unwrap());

    // A screenshot with a dead job on the list.
    let job = q.reserve(Duration::from_secs(600)).unwrap();
    assert!(q.kill(&job, "panicked: index out of bounds: the len is 3 but the index is 7").unwrap());
    let png = dir.join("dashboard.png");
    chromium(
        &profile,
        &[&format!("--screenshot={}", png.display()), "--window-size=1200,800"],
        &server.url(),
    );
    // One long unbroken error does not push the buttons off a 1400 px window.
    q.send_kind_at("report.daily", b"{}", SystemTime::now()).unwrap();
    let job = q.reserve(Duration::from_secs(600)).unwrap();
    assert!(q.kill(&job, &format!("thread 'worker' panicked: {}", "x".repeat(3000))).unwrap());
    let dom = chromium(
        &profile,
        &["--dump-dom", "--virtual-time-budget=10000"],
        &format!("{}measure", server.url()),
    );
    assert!(dom.contains("<title>fits</title>"), "the buttons: {}", &dom[..dom.len().min(400)]);
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    if let Some(to) = std::env::var_os("DELAYQ_DASHBOARD_PNG") {
        std::fs::copy(&png, to).unwrap();
    }
    server.shutdown();
    drop(q);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `n` dead jobs without a kind (leases of 1 ms on a queue that allows one
/// attempt: a few commits, not one per job), then `kinded` dead jobs of
/// kind `report.daily`.
fn many_dead(q: &DurableQueue, n: usize, kinded: usize) {
    let payloads: Vec<Vec<u8>> = (0..n).map(|i| format!("{{\"order\":{i}}}").into_bytes()).collect();
    let now = SystemTime::now();
    let jobs: Vec<(&[u8], SystemTime)> = payloads.iter().map(|p| (p.as_slice(), now)).collect();
    for chunk in jobs.chunks(5000) {
        q.send_many(chunk).unwrap();
    }
    for i in 0..kinded {
        q.send_kind_at("report.daily", format!("{{\"day\":{i}}}").as_bytes(), now).unwrap();
    }
    let total = (n + kinded) as u64;
    let mut leased = 0;
    while leased < total {
        leased +=
            q.reserve_many(Duration::from_millis(1), 1000, Duration::from_secs(5)).unwrap().len() as u64;
    }
    while q.stats().unwrap().dead < total {
        assert!(q
            .reserve_many(Duration::from_secs(60), 1000, Duration::from_millis(200))
            .unwrap()
            .is_empty());
    }
}

/// Where the screenshots go: `DELAYQ_DASHBOARD_PNG_DIR` (the README's are
/// made with `DELAYQ_DASHBOARD_PNG_DIR=durable/docs`), else the test's own
/// directory.
fn screenshot(profile: &Path, dir: &Path, name: &str, url: &str, height: u32) -> PathBuf {
    let to = std::env::var_os("DELAYQ_DASHBOARD_PNG_DIR").map_or_else(|| dir.to_path_buf(), PathBuf::from);
    let png = to.join(name);
    chromium(
        profile,
        &[
            &format!("--screenshot={}", png.display()),
            &format!("--window-size=1400,{height}"),
            "--virtual-time-budget=5000",
        ],
        url,
    );
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    png
}

#[test]
#[ignore = "needs chromium: cargo test -p delayq-jobs --test dashboard -- --ignored"]
fn a_browser_pages_20000_dead_jobs_filters_by_kind_and_retries_through_a_confirmation() {
    if !chromium_available() {
        return;
    }
    let dir = temp_dir("views");
    let q = DurableQueue::builder().max_attempts(1).open(dir.join("jobs.redb")).unwrap();
    many_dead(&q, 20_000, 12);
    // A few live jobs of other kinds, for the overview and the lists.
    let now = SystemTime::now();
    for i in 0..3 {
        q.send_kind_at(
            "email.send",
            format!("{{\"to\":\"user{i}@example.com\"}}").as_bytes(),
            now + Duration::from_secs(600),
        )
        .unwrap();
    }
    // A page that drives the list in a frame (same origin: the clicks are
    // the list's own buttons): every page of the dead jobs, then the kind
    // filter, then "retry all matching", its confirmation, and the result.
    let drive = r#"<!doctype html><iframe id=f src="list?state=dead&limit=1000" width=1400 height=900></iframe><script>
      const f = document.getElementById('f');
      const sleep = (ms) => new Promise(r => setTimeout(r, ms));
      const doc = () => f.contentDocument;
      let stage = 'loading';
      async function until(test) { for (let i = 0; i < 600; i++) { const v = test(); if (v) return v; await sleep(50); } throw new Error('timed out ' + stage + ' at ' + pageText() + ' ' + (doc().getElementById('error')?.textContent || '')); }
      const rows = () => doc().querySelectorAll('#jobs tr[id^=job-]');
      const pageText = () => doc().getElementById('page')?.textContent || '';
      async function run() {
        await until(() => rows().length > 0);
        let seen = new Set(), pages = 0;
        for (;;) {
          const text = pageText();
          for (const r of rows()) seen.add(r.id);
          pages++;
          if (doc().getElementById('next').disabled) break;
          stage = 'paging ' + pages;
          doc().getElementById('next').click();
          await until(() => pageText() !== text && pageText().startsWith('page ' + (pages + 1)));
        }
        stage = 'filtering';
        f.src = 'list?state=dead&kind=report.daily';
        await until(() => doc().readyState === 'complete' && doc().getElementById('kind')?.value === 'report.daily' && rows().length > 0);
        const kinds = [...rows()].map(r => r.cells[2].textContent);
        stage = 'asking';
        doc().getElementById('requeue-all').click();
        await until(() => !doc().getElementById('confirm-box').hidden);
        const question = doc().getElementById('question').textContent;
        stage = 'confirming';
        doc().getElementById('confirm').click();
        await until(() => !doc().getElementById('result').hidden);
        const result = doc().getElementById('result').textContent;
        // The page's counts follow: the twelve left the dead set.
        stage = 'recounting';
        const counted = await until(() => doc().getElementById('count-dead').textContent === '20000' &&
          [doc().getElementById('count-pending').textContent, doc().getElementById('count-dead').textContent]);
        document.title = JSON.stringify({ pages, seen: seen.size, filtered: kinds.length, kinds: [...new Set(kinds)], question, result, counted });
      }
      run().catch(e => document.title = 'failed: ' + e.message);
    </script>"#;
    let app = dashboard::router(Arc::new(q.clone()), Options { allow_writes: true, ..Options::default() })
        .route("/drive", get(move || async move { Html(drive) }));
    let server = dashboard::serve_router(app, "127.0.0.1:0".parse().unwrap()).unwrap();
    let profile = dir.join("profile");
    let dom = chromium(
        &profile,
        &["--dump-dom", "--virtual-time-budget=120000"],
        &format!("{}drive", server.url()),
    );
    let title = dom.split("<title>").nth(1).and_then(|t| t.split("</title>").next()).unwrap_or("");
    let title = title.replace("&quot;", "\"").replace("&amp;", "&");
    let seen: serde_json::Value =
        serde_json::from_str(&title).unwrap_or_else(|_| panic!("the driver did not finish: {title}"));
    assert_eq!(seen["pages"], 21, "{seen}");
    assert_eq!(seen["seen"], 20_012, "every dead job, once: {seen}");
    assert_eq!(seen["filtered"], 12, "{seen}");
    assert_eq!(seen["kinds"], serde_json::json!(["report.daily"]), "{seen}");
    assert_eq!(seen["question"], "requeue every dead (of kind report.daily): 12 jobs?", "{seen}");
    assert_eq!(seen["result"], "requeued 12 jobs", "{seen}");
    assert_eq!(seen["counted"], serde_json::json!(["15", "20000"]), "the page's counts: {seen}");
    let s = q.stats().unwrap();
    assert_eq!((s.pending, s.dead), (15, 20_000), "the 12 are pending again");

    // The views, for the README: the overview, a filtered list, its
    // confirmation step, and a job.
    let failures: [(&str, &str, &str); 10] = [
        (
            "email.send",
            "{\"to\":\"ana@example.com\",\"template\":\"welcome\"}",
            "smtp 550 5.1.1 <ana@example.com>: Recipient address rejected",
        ),
        (
            "email.send",
            "{\"to\":\"bo@example.org\",\"template\":\"reset\"}",
            "smtp 550 5.1.1 <bo@example.org>: Recipient address rejected",
        ),
        (
            "email.send",
            "{\"to\":\"cy@example.net\",\"template\":\"welcome\"}",
            "smtp 421 4.7.0 Try again later, closing connection",
        ),
        (
            "email.send",
            "{\"to\":\"di@example.com\",\"template\":\"invoice\"}",
            "smtp 550 5.7.1 Message rejected as spam",
        ),
        (
            "billing.charge",
            "{\"invoice\":\"A-1043\",\"amount\":129900}",
            "card_declined: insufficient_funds (request req_8Hk2LmQ)",
        ),
        (
            "billing.charge",
            "{\"invoice\":\"A-1051\",\"amount\":4900}",
            "panicked at src/billing.rs:88:14: called `Option::unwrap()` on a `None` value",
        ),
        (
            "webhook.deliver",
            "{\"url\":\"https://hooks.example.com/orders\",\"event\":\"order.paid\"}",
            "POST https://hooks.example.com/orders: 503 Service Unavailable after 30.0 s",
        ),
        (
            "webhook.deliver",
            "{\"url\":\"https://hooks.example.com/orders\",\"event\":\"order.shipped\"}",
            "POST https://hooks.example.com/orders: 503 Service Unavailable after 30.0 s",
        ),
        (
            "webhook.deliver",
            "{\"url\":\"https://crm.example.net/hook\",\"event\":\"user.created\"}",
            "POST https://crm.example.net/hook: connection refused (os error 111)",
        ),
        (
            "thumbnail.make",
            "{\"image\":\"uploads/7f3a.png\",\"sizes\":[64,256]}",
            "lease expired (attempt 1)",
        ),
    ];
    let mut detail = None;
    for (kind, payload, error) in failures {
        let id = q.send_kind_at(kind, payload.as_bytes(), SystemTime::now()).unwrap();
        // (The requeued jobs, due now, come first: they stay leased.)
        let job = loop {
            let job = q.reserve(Duration::from_secs(600)).unwrap();
            if job.id() == id {
                break job;
            }
        };
        assert!(q.kill(&job, error).unwrap());
        if kind == "billing.charge" {
            detail.get_or_insert(id);
        }
    }
    // Processed jobs for the throughput chart.
    for i in 0..30 {
        q.send_kind_at(
            "email.send",
            format!("{{\"to\":\"user{i}@example.com\"}}").as_bytes(),
            SystemTime::now(),
        )
        .unwrap();
    }
    for _ in 0..30 {
        let job = q.reserve(Duration::from_secs(600)).unwrap();
        assert!(q.ack(&job).unwrap());
    }
    q.send_kind_at("thumbnail.make", b"{\"image\":\"uploads/9c1d.png\"}", SystemTime::now()).unwrap();
    q.reserve(Duration::from_secs(600)).unwrap(); // one leased
    let u = server.url();
    for (name, path, height) in [
        ("dashboard.png", String::new(), 1000),
        ("dashboard-list.png", "list?state=dead&kind=email.send".to_string(), 520),
        ("dashboard-confirm.png", "list?state=dead&kind=webhook.deliver&ask=requeue".to_string(), 520),
        ("dashboard-job.png", format!("job/{}", detail.unwrap().0), 520),
    ] {
        screenshot(&profile, &dir, name, &format!("{u}{path}"), height);
    }
    server.shutdown();
    drop(q);
    std::fs::remove_dir_all(&dir).unwrap();
}
