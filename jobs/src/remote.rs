//! [`RemoteQueue`]: a queue reached through its dashboard's JSON API — how
//! the CLI reads and changes an embedded file that the application holds
//! (one process has a file at a time), when the application serves the
//! dashboard with a sidecar naming its address and token.
//!
//! The client is plain HTTP/1.1 over a loopback TCP connection per call
//! (the dashboard's address is the one the application bound).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, UNIX_EPOCH};

use delayq_durable::{
    DurableError, Filter, Inspect, JobId, JobInfo, JobState, KindCounts, Missed, Page, Sample, ScheduleInfo,
    Stats,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::dashboard::api::{ApiDone, ApiIds, ApiJob, ApiKind, ApiPage, ApiSample, ApiSchedule, ApiStats};
use crate::dashboard::url_encode;

/// A queue behind a dashboard's JSON API.
#[derive(Debug)]
pub struct RemoteQueue {
    /// `host:port`.
    addr: String,
    /// The path the dashboard is served under (`/`, or `/jobs/` when mounted).
    base: String,
    token: Option<String>,
    what: String,
}

fn failed(addr: &str, e: impl std::fmt::Display) -> DurableError {
    DurableError::Storage(format!("the dashboard at http://{addr}: {e}"))
}

impl RemoteQueue {
    /// The API of the dashboard at `url` (`http://127.0.0.1:8025/`), with its
    /// CSRF `token` for writes (a read-only dashboard has none); checks that
    /// it answers.
    pub fn connect(url: &str, token: Option<String>) -> Result<RemoteQueue, DurableError> {
        let rest = url
            .strip_prefix("http://")
            .ok_or(DurableError::InvalidArgument("a dashboard's address starts with http://"))?;
        let (addr, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
        let mut q = RemoteQueue {
            addr: addr.to_string(),
            base: format!("/{}", path.trim_end_matches('/')).trim_end_matches('/').to_string() + "/",
            token,
            what: String::new(),
        };
        let stats: ApiStats = q.get("api/stats")?;
        q.what = format!("{} (through its dashboard at {url})", stats.queue);
        Ok(q)
    }

    fn request<T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<String>,
    ) -> Result<T, DurableError> {
        let addr = &self.addr;
        let mut s = TcpStream::connect(addr).map_err(|e| failed(addr, e))?;
        s.set_read_timeout(Some(Duration::from_secs(60))).map_err(|e| failed(addr, e))?;
        let body = body.unwrap_or_default();
        let token = self.token.as_deref().map(|t| format!("x-csrf-token: {t}\r\n")).unwrap_or_default();
        write!(
            s,
            "{method} {base}{path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{token}\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len(),
            base = self.base,
        )
        .map_err(|e| failed(addr, e))?;
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).map_err(|e| failed(addr, e))?;
        let split =
            reply.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| failed(addr, "a short reply"))?;
        let head = String::from_utf8_lossy(&reply[..split]).to_ascii_lowercase();
        let mut content = reply[split + 4..].to_vec();
        if head.contains("transfer-encoding: chunked") {
            content = dechunk(&content).ok_or_else(|| failed(addr, "a malformed chunked reply"))?;
        }
        let status: u16 =
            head.get(9..12).and_then(|s| s.parse().ok()).ok_or_else(|| failed(addr, "no status"))?;
        if !(200..300).contains(&status) {
            let why = serde_json::from_slice::<serde_json::Value>(&content)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                .unwrap_or_else(|| String::from_utf8_lossy(&content).into_owned());
            return Err(failed(addr, format!("{status}: {why}")));
        }
        serde_json::from_slice(&content)
            .map_err(|e| failed(addr, format!("a reply that does not decode: {e}")))
    }

    fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, DurableError> {
        self.request("GET", path, None)
    }

    fn post<T: DeserializeOwned>(&self, path: &str, body: &impl Serialize) -> Result<T, DurableError> {
        let body = serde_json::to_string(body).map_err(|e| failed(&self.addr, e))?;
        self.request("POST", path, Some(body))
    }
}

/// A chunked body's content.
fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = body.windows(2).position(|w| w == b"\r\n")?;
        let size =
            usize::from_str_radix(std::str::from_utf8(&body[..eol]).ok()?.split(';').next()?.trim(), 16)
                .ok()?;
        body = &body[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

fn time(ns: u64) -> std::time::SystemTime {
    UNIX_EPOCH + Duration::from_nanos(ns)
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len() / 2).filter_map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()).collect()
}

fn info(j: ApiJob) -> JobInfo {
    JobInfo {
        id: JobId(j.id),
        state: crate::dashboard::api::state_named(&j.state).unwrap_or(JobState::Pending),
        kind: j.kind,
        deadline: time(j.deadline_ns),
        attempt: j.attempt,
        lease_deadline: j.lease_deadline_ns.map(time),
        died_at: j.died_at_ns.map(time),
        last_error: j.last_error,
        priority: j.priority,
        payload: unhex(&j.payload_hex),
    }
}

impl Inspect for RemoteQueue {
    fn stats(&self) -> Result<Stats, DurableError> {
        let s: ApiStats = self.get("api/stats")?;
        Ok(Stats { pending: s.pending, leased: s.leased, dead: s.dead })
    }

    fn page(
        &self,
        state: JobState,
        filter: &Filter,
        cursor: u64,
        limit: usize,
    ) -> Result<Page, DurableError> {
        let mut path = format!("api/jobs?state={state}&cursor={cursor}&limit={}", limit.clamp(1, 1000));
        if let Some(k) = &filter.kind {
            path.push_str(&format!("&kind={}", url_encode(if k.is_empty() { "-" } else { k })));
        }
        if let Some(e) = &filter.error {
            path.push_str(&format!("&error={}", url_encode(e)));
        }
        let page: ApiPage = self.get(&path)?;
        Ok(Page { jobs: page.jobs.into_iter().map(info).collect(), next: page.next })
    }

    fn job(&self, id: JobId) -> Result<Option<JobInfo>, DurableError> {
        match self.get::<ApiJob>(&format!("api/jobs/{}", id.0)) {
            Ok(j) => Ok(Some(info(j))),
            Err(DurableError::Storage(msg)) if msg.contains(": 404: ") => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn oldest_due(&self) -> Result<Option<std::time::SystemTime>, DurableError> {
        Ok(self.get::<ApiStats>("api/stats")?.oldest_due_ns.map(time))
    }

    fn kinds(&self) -> Result<Vec<KindCounts>, DurableError> {
        let kinds: Vec<ApiKind> = self.get("api/kinds")?;
        Ok(kinds
            .into_iter()
            .map(|k| KindCounts { kind: k.kind, pending: k.pending, leased: k.leased, dead: k.dead })
            .collect())
    }

    fn schedules(&self) -> Result<Vec<ScheduleInfo>, DurableError> {
        let list: Vec<ApiSchedule> = self.get("api/schedules")?;
        Ok(list
            .into_iter()
            .map(|s| ScheduleInfo {
                missed: crate::dashboard::api::missed_named(&s.missed).unwrap_or(Missed::Skip),
                name: s.name,
                spec: s.spec,
                kind: s.kind,
                priority: s.priority,
                next_run: s.next_run_ns.map(time),
                last_run: s.last_run_ns.map(time),
                paused: s.paused,
                payload: unhex(&s.payload_hex),
            })
            .collect())
    }

    fn samples(&self, since: std::time::SystemTime) -> Result<Vec<Sample>, DurableError> {
        let minutes = std::time::SystemTime::now().duration_since(since).map_or(1, |d| d.as_secs() / 60 + 1);
        let samples: Vec<ApiSample> = self.get(&format!("api/samples?minutes={}", minutes.min(24 * 60)))?;
        Ok(samples
            .into_iter()
            .map(|s| Sample {
                minute: time(s.minute_ns),
                pending: s.pending,
                lateness: std::time::Duration::from_nanos(s.lateness_ns),
            })
            .collect())
    }

    fn cancel_many_in(&self, ids: &[JobId], states: &[JobState]) -> Result<Vec<bool>, DurableError> {
        let body = ApiIds {
            ids: ids.iter().map(|id| id.0).collect(),
            states: states.iter().map(|s| s.as_str().to_string()).collect(),
        };
        Ok(self.post::<ApiDone>("api/delete", &body)?.done)
    }

    fn requeue_dead_many(
        &self,
        ids: &[JobId],
        _at: std::time::SystemTime,
    ) -> Result<Vec<bool>, DurableError> {
        let body = ApiIds { ids: ids.iter().map(|id| id.0).collect(), states: Vec::new() };
        Ok(self.post::<ApiDone>("api/requeue", &body)?.done)
    }

    fn describe(&self) -> String {
        self.what.clone()
    }
}
