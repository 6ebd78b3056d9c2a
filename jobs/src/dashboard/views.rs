//! The list and job pages: HTML shells whose script reads and changes the
//! queue through the JSON API (`api.rs`), as an operator's script would.
//! The list pages through a state's jobs, filtered by kind and error text,
//! with a checkbox per job and bulk actions (selected, or every job
//! matching) behind a confirmation step that says how many jobs it takes,
//! then a sentence saying what changed. Every text from the queue goes in
//! through `textContent`, never as markup.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};

use super::page::{esc, style};
use super::App;

/// The script shared by the pages: the API's base, its token, and a fetch
/// that turns an error into a message in `#error` (the page then tries
/// again at its next refresh).
const COMMON: &str = r#"
const token = document.querySelector('meta[name=csrf]')?.content;
const shown = (id, text) => { const e = document.getElementById(id); e.textContent = text; e.hidden = !text; };
async function api(path, body) {
  const init = body === undefined ? {} :
    { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': token || '' }, body: JSON.stringify(body) };
  const r = await fetch(base + path, init);
  const data = await r.json().catch(() => ({ error: r.status + ' ' + r.statusText }));
  if (!r.ok) throw new Error(data.error || r.statusText);
  shown('error', '');
  return data;
}
const fail = (e) => shown('error', 'the queue failed: ' + e.message + ' (tries again every 5 s)');
const cell = (tr, text, cls) => { const td = tr.insertCell(); td.textContent = text; if (cls) td.className = cls; return td; };
async function counts() {
  const s = await api('api/stats');
  for (const k of ['pending', 'leased', 'dead']) document.getElementById('count-' + k).textContent = s[k];
}
"#;

/// The list page's script.
const LIST: &str = r#"
const q = new URLSearchParams(location.search);
const state = ['pending', 'leased', 'dead'].includes(q.get('state')) ? q.get('state') : 'dead';
document.getElementById('state').value = state;
document.getElementById('kind').value = q.get('kind') || '';
document.getElementById('errtext').value = q.get('error') || '';
const trail = [Number(q.get('cursor') || 0)];
const limit = Math.min(Math.max(Number(q.get('limit') || 50), 1), 1000);
let next = null, pending = null;
const filt = () => ({ state, kind: q.get('kind') || null, error: q.get('error') || null });
async function load() {
  const f = filt();
  const u = new URLSearchParams({ state, cursor: trail[trail.length - 1], limit });
  if (f.kind) u.set('kind', f.kind);
  if (f.error) u.set('error', f.error);
  const page = await api('api/jobs?' + u);
  const t = document.getElementById('jobs');
  while (t.rows.length > 1) t.deleteRow(1);
  for (const j of page.jobs) {
    const tr = t.insertRow(); tr.id = 'job-' + j.id;
    const box = document.createElement('input'); box.type = 'checkbox'; box.value = j.id; box.className = 'pick';
    tr.insertCell().append(box);
    const a = document.createElement('a'); a.href = 'job/' + j.id; a.textContent = j.id; tr.insertCell().append(a);
    cell(tr, j.shown.kind); cell(tr, j.attempt);
    cell(tr, state === 'dead' ? j.shown.died : state === 'leased' ? j.shown.lease_ends : j.shown.due);
    cell(tr, j.shown.error, 'err'); cell(tr, j.shown.payload, 'payload');
  }
  next = page.next;
  document.getElementById('page').textContent =
    'page ' + trail.length + ' · ' + page.jobs.length + ' shown' + (next === null ? ' · the last page' : '');
  document.getElementById('next').disabled = next === null;
  document.getElementById('prev').disabled = trail.length < 2;
  document.getElementById('all').checked = false;
}
const refresh = () => Promise.all([counts(), load()]).catch(fail);
document.getElementById('next').onclick = () => { if (next !== null) { trail.push(next); refresh(); } };
document.getElementById('prev').onclick = () => { if (trail.length > 1) { trail.pop(); refresh(); } };
document.getElementById('all').onchange = (e) => { for (const b of document.querySelectorAll('.pick')) b.checked = e.target.checked; };
function ask(action, selected) {
  const body = Object.assign({ action, confirm: false }, filt());
  if (selected) body.ids = [...document.querySelectorAll('.pick:checked')].map(b => Number(b.value));
  if (selected && body.ids.length === 0) { shown('result', 'select some jobs first'); return; }
  api('api/bulk', body).then(r => {
    pending = body;
    document.getElementById('question').textContent = r.message;
    document.getElementById('confirm-box').hidden = false;
    shown('result', '');
  }).catch(fail);
}
for (const b of document.querySelectorAll('[data-action]')) b.onclick = () => ask(b.dataset.action, b.dataset.scope === 'selected');
document.getElementById('confirm').onclick = () => {
  if (!pending) return;
  const body = Object.assign({}, pending, { confirm: true });
  pending = null;
  document.getElementById('confirm-box').hidden = true;
  api('api/bulk', body).then(r => { shown('result', r.message); trail.length = 1; trail[0] = 0; return refresh(); }).catch(fail);
};
document.getElementById('cancel').onclick = () => { pending = null; document.getElementById('confirm-box').hidden = true; };
refresh().then(() => {
  // A link may open the confirmation step at once: `&ask=requeue` (every
  // job matching) asks, and still waits for the confirm button.
  const a = q.get('ask');
  if (a === 'requeue' || a === 'delete') ask(a, false);
});
setInterval(() => counts().catch(fail), 5000);
"#;

/// The job page's script.
const JOB: &str = r#"
async function load() {
  const j = await api('api/jobs/' + id);
  const rows = [['id', j.id], ['state', j.state], ['kind', j.shown.kind], ['due', j.shown.due], ['attempt', j.attempt],
    ['lease ends', j.shown.lease_ends || '-'], ['died', j.shown.died || '-'], ['bytes', j.shown.bytes],
    ['last error', j.shown.error], ['payload', j.shown.payload]];
  const t = document.getElementById('job');
  while (t.rows.length) t.deleteRow(0);
  for (const [k, v] of rows) { const tr = t.insertRow(); cell(tr, k, 'key'); cell(tr, v, k === 'last error' ? 'err' : k === 'payload' ? 'payload' : ''); }
  await counts();
}
load().catch(fail);
setInterval(() => load().catch(fail), 5000);
"#;

/// The head, the counts and the navigation every page shares.
fn frame(app: &App, title: &str, base: &str) -> String {
    let mut h = String::new();
    let csrf = if app.allow_writes {
        format!("<meta name=csrf content={}>", app.guard.token)
    } else {
        String::new()
    };
    h.push_str(&format!(
        "<!doctype html><html><head><meta charset=utf-8>{csrf}<title>delayq jobs: {t}</title>{style}</head><body>\
         <h1><a href=\"{base}\">delayq jobs</a>: {t}</h1>\
         <p class=nav>pending <b id=count-pending>…</b> · leased <b id=count-leased>…</b> · dead <b id=count-dead>…</b> · \
         lists: <a href=\"{base}list?state=pending\">pending</a> <a href=\"{base}list?state=leased\">leased</a> \
         <a href=\"{base}list?state=dead\">dead</a></p><p id=error hidden></p>",
        t = esc(title),
        style = style(),
    ));
    h
}

fn html(body: String) -> Response {
    ([(header::CACHE_CONTROL, "no-store")], Html(body)).into_response()
}

pub(super) async fn list(State(app): State<Arc<App>>) -> Response {
    let mut h = frame(&app, &app.queue.describe(), "./");
    h.push_str(
        "<form id=filter method=get action=list>state <select id=state name=state>\
         <option>pending</option><option>leased</option><option>dead</option></select> \
         kind <input id=kind name=kind size=18 placeholder=\"any (- for none)\"> \
         error contains <input id=errtext name=error size=24> <button id=apply>filter</button></form>",
    );
    if app.allow_writes {
        h.push_str(
            "<p class=bulk><button data-action=requeue data-scope=selected id=requeue-selected>retry selected</button> \
             <button data-action=delete data-scope=selected id=delete-selected>delete selected</button> · \
             <button data-action=requeue data-scope=all id=requeue-all>retry all matching</button> \
             <button data-action=delete data-scope=all id=delete-all>delete all matching</button></p>\
             <div id=confirm-box hidden><span id=question></span> \
             <button id=confirm>confirm</button> <button id=cancel>cancel</button></div>",
        );
    } else {
        h.push_str("<p>read-only (start with --allow-writes for the bulk actions)</p>");
    }
    h.push_str(
        "<p id=result hidden></p><table id=jobs><tr><th><input type=checkbox id=all></th><th>id</th><th>kind</th>\
         <th>attempt</th><th>due / lease ends / died</th><th>last error</th><th>payload</th></tr></table>\
         <p><button id=prev>previous</button> <button id=next>next</button> <span id=page></span></p>",
    );
    h.push_str(&format!("<script>const base = './';{COMMON}{LIST}</script></body></html>"));
    html(h)
}

pub(super) async fn job(State(app): State<Arc<App>>, Path(id): Path<u64>) -> Response {
    let mut h = frame(&app, &format!("job {id}"), "../");
    h.push_str("<table id=job></table>");
    h.push_str(&format!("<script>const base = '../'; const id = {id};{COMMON}{JOB}</script></body></html>"));
    html(h)
}
