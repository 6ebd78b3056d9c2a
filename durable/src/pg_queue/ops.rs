//! The queue's calls as async functions on its shared state, each one
//! statement (most a function of the schema: `schema.rs`) and one round
//! trip. The blocking [`PgQueue`](super::PgQueue) runs them on its calling
//! thread (`block_on`); the async client on the queue's runtime.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::runtime::{Handle, Runtime};

use super::pool::{call, Pool, Retry};
use super::schema::{Sql, Stmt};
use crate::error::DurableError;
use crate::inspect::{Filter, JobInfo, JobState, KindCounts, Page, Sample, Throughput};
use crate::job::{from_nanos, Job, JobId, Stats, MAX_AHEAD};
use crate::notifier::Notifier;
use crate::stored::StoredSchedule;

/// The most jobs one `reserve_many` leases (a larger `max` is taken as this).
pub(crate) const MAX_RESERVE: usize = 1000;

/// At most this many jobs are read for one page of a filtered listing (as
/// the embedded file's budget).
const PAGE_BUDGET: i64 = 20_000;

/// What every handle on one opened queue shares.
pub(crate) struct Inner {
    pub(crate) name: String,
    pub(crate) schema: String,
    pub(crate) sql: Sql,
    pub(crate) pool: Pool,
    pub(crate) notifier: Arc<Notifier>,
    pub(crate) listener: tokio::task::JoinHandle<()>,
    /// The runtime that drives the connections and the listener; shut down
    /// (without waiting) when the last handle goes.
    pub(crate) runtime: Option<Runtime>,
    pub(crate) handle: Handle,
    pub(crate) closed: AtomicBool,
    pub(crate) max_attempts: u32,
    pub(crate) max_payload: usize,
    /// Priority aging's step in µs (0: off): a due job's effective priority
    /// is its priority less one per step it has waited since its due time.
    pub(crate) aging_us: i64,
    /// Lease tokens: SipHash of a counter under keys the standard library
    /// draws from the operating system's randomness.
    pub(crate) tokens: AtomicU64,
    pub(crate) token_keys: RandomState,
    /// The minute (since the epoch, this machine's clock) of the last
    /// backlog sample statement: at most one a minute per opened queue.
    pub(crate) sampled: AtomicU64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.notifier.close();
        self.listener.abort();
        if let Some(rt) = self.runtime.take() {
            // Not waiting: this may run inside another runtime's task.
            rt.shutdown_background();
        }
    }
}

/// A reserve's answer.
pub(crate) struct Reserved {
    pub(crate) jobs: Vec<Job>,
    /// The server's now (µs).
    pub(crate) server_now: i64,
    /// With no job: the next due time (server µs), if any; one already
    /// past is a job another transaction holds this moment.
    pub(crate) next: Option<i64>,
}

/// A [`Fire`](crate::stored::Fire) as the fire statement takes it (µs as `i64`).
pub(crate) struct FireUs<'a> {
    pub(crate) expect: i64,
    pub(crate) next: i64,
    pub(crate) last: i64,
    pub(crate) kind: &'a str,
    pub(crate) payload: &'a [u8],
    pub(crate) priority: u8,
    pub(crate) deadlines: Vec<i64>,
}

fn schedule(row: &tokio_postgres::Row) -> StoredSchedule {
    let us = |v: Option<i64>| v.map(|v| u64::try_from(v).unwrap_or(0));
    StoredSchedule {
        name: row.get(0),
        def: row.get(1),
        next_run_us: us(row.get(2)),
        last_run_us: us(row.get(3)),
    }
}

/// Microseconds since the epoch as the nanoseconds a [`Job`] keeps (0 before it).
fn us_to_ns(us: i64) -> u64 {
    u64::try_from(us).unwrap_or(0).saturating_mul(1000)
}

fn time(us: i64) -> SystemTime {
    from_nanos(us_to_ns(us))
}

/// An instant as server microseconds, rounded up (never earlier than asked);
/// one more than [`MAX_AHEAD`] from now is out of range.
pub(crate) fn at_us(at: SystemTime) -> Result<i64, DurableError> {
    let ns = crate::job::to_nanos(at)?;
    Ok(ns.div_ceil(1000) as i64)
}

/// A delay in microseconds, rounded up; over [`MAX_AHEAD`] is out of range.
pub(crate) fn delay_us(delay: Duration) -> Result<i64, DurableError> {
    if delay > MAX_AHEAD {
        return Err(DurableError::DeadlineOutOfRange);
    }
    Ok(delay.as_nanos().div_ceil(1000) as i64)
}

pub(crate) fn lease_us(lease: Duration) -> Result<i64, DurableError> {
    if lease.is_zero() {
        return Err(DurableError::InvalidArgument("a lease must be longer than zero"));
    }
    delay_us(lease).map_err(|_| DurableError::InvalidArgument("a lease must be under 142 years"))
}

fn state_code(state: JobState) -> i16 {
    match state {
        JobState::Pending => 0,
        JobState::Leased => 1,
        JobState::Dead => 2,
    }
}

fn info(row: &tokio_postgres::Row) -> JobInfo {
    let state = match row.get::<_, i16>(1) {
        1 => JobState::Leased,
        2 => JobState::Dead,
        _ => JobState::Pending,
    };
    let due: i64 = row.get(5);
    JobInfo {
        id: JobId(row.get::<_, i64>(0) as u64),
        state,
        kind: row.get(2),
        deadline: time(row.get(3)),
        attempt: row.get::<_, i32>(4).max(0) as u32,
        lease_deadline: (state == JobState::Leased).then(|| time(due)),
        died_at: (state == JobState::Dead).then(|| time(due)),
        last_error: row.get(6),
        priority: priority(row.get(8)),
        payload: row.get(7),
    }
}

/// A stored priority as a job's (`0..=9`; the column is a smallint).
fn priority(p: i16) -> u8 {
    p.clamp(0, i16::from(crate::options::PRIORITY_LOWEST)) as u8
}

/// What [`Inner::send_with`] stores: one job, due at `due` (server µs).
pub(crate) struct OneSend<'a> {
    pub(crate) kind: &'a str,
    pub(crate) payload: &'a [u8],
    pub(crate) due: i64,
    pub(crate) priority: u8,
    pub(crate) unique: Option<&'a crate::options::Unique>,
}

impl Inner {
    pub(crate) fn check_open(&self) -> Result<(), DurableError> {
        // Acquire: pairs with `close`'s Release, so a closed handle says so.
        if self.closed.load(Ordering::Acquire) {
            return Err(DurableError::Closed);
        }
        Ok(())
    }

    /// A fresh lease token: random, 64 bits, never 0 (0 means "no lease").
    fn token(&self) -> i64 {
        // Relaxed: a counter made unique by the RMW, ordering nothing else.
        let n = self.tokens.fetch_add(1, Ordering::Relaxed);
        let mut h = self.token_keys.build_hasher();
        h.write_u64(n);
        h.finish().max(1) as i64
    }

    /// Checks a batch's payload sizes (before anything is stored).
    pub(crate) fn check_payloads<'a>(
        &self,
        payloads: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<(), DurableError> {
        for p in payloads {
            if p.len() > self.max_payload {
                return Err(DurableError::PayloadTooLarge { len: p.len(), max: self.max_payload });
            }
        }
        Ok(())
    }

    /// Stores jobs in one statement; `dues` absolute (server µs), or delays
    /// when `relative`.
    pub(crate) async fn send(
        &self,
        kinds: &[&str],
        payloads: &[&[u8]],
        dues: &[i64],
        relative: bool,
    ) -> Result<Vec<JobId>, DurableError> {
        self.check_open()?;
        self.check_payloads(payloads.iter().copied())?;
        if dues.is_empty() {
            return Ok(Vec::new());
        }
        let last = self.max_attempts as i32;
        call!(self.pool, "sending", Retry::OnlyUnsent, |conn| {
            let st = conn.stmt(&self.sql, Stmt::Send).await?;
            let rows =
                conn.client.query(&st, &[&self.name, &last, &kinds, &payloads, &dues, &relative]).await?;
            Ok(rows.iter().map(|r| JobId(r.get::<_, i64>(0) as u64)).collect())
        })
    }

    /// Stores one job with a priority and, maybe, a uniqueness key, in one
    /// statement (`send_with` of the schema); `(id, created)`. The options
    /// were checked.
    pub(crate) async fn send_with(&self, job: OneSend<'_>) -> Result<(JobId, bool), DurableError> {
        self.check_open()?;
        self.check_payloads([job.payload])?;
        let last = self.max_attempts as i32;
        let prio = i16::from(job.priority);
        let key = job.unique.map(|u| u.key());
        let states: i16 = match job.unique.map(crate::options::Unique::get_states) {
            Some(crate::options::UniqueStates::Pending) => 0,
            Some(crate::options::UniqueStates::Leased) => 1,
            _ => 2,
        };
        // Rounded up, as deadlines are: the key is held at least that long.
        let period = job.unique.map_or(0, |u| u.period_nanos().div_ceil(1000).min(i64::MAX as u64) as i64);
        call!(self.pool, "sending", Retry::OnlyUnsent, |conn| {
            let st = conn.stmt(&self.sql, Stmt::SendWith).await?;
            let row = conn
                .client
                .query_one(
                    &st,
                    &[&self.name, &last, &job.kind, &job.payload, &job.due, &prio, &key, &states, &period],
                )
                .await?;
            Ok((JobId(row.get::<_, i64>(0) as u64), row.get::<_, bool>(1)))
        })
    }

    /// One reserve statement: leases up to `max` due jobs whose kind is not
    /// in `excluded`.
    pub(crate) async fn reserve(
        &self,
        lease_us: i64,
        max: usize,
        excluded: &[String],
    ) -> Result<Reserved, DurableError> {
        self.check_open()?;
        let max = max.clamp(1, MAX_RESERVE);
        let tokens: Vec<i64> = (0..max).map(|_| self.token()).collect();
        let lim = max as i32;
        let minute = SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 60);
        // Relaxed: the swap alone picks the one reserve of the minute that
        // samples; it orders no other memory.
        let mut sample = self.sampled.swap(minute, Ordering::Relaxed) != minute;
        call!(self.pool, "reserving", Retry::Safe, |conn| {
            if std::mem::take(&mut sample) {
                // The minute's backlog sample, before this reserve takes
                // anything. A failure loses the sample, not the reserve.
                let st = conn.stmt(&self.sql, Stmt::Sample).await?;
                let _ = conn.client.execute(&st, &[&self.name]).await;
            }
            let st = conn.stmt(&self.sql, Stmt::Reserve).await?;
            let rows = conn
                .client
                .query(&st, &[&self.name, &lim, &lease_us, &tokens, &excluded, &self.aging_us])
                .await?;
            let mut out = Reserved { jobs: Vec::with_capacity(rows.len()), server_now: 0, next: None };
            for row in rows {
                out.server_now = row.get(9);
                let Some(id) = row.get::<_, Option<i64>>(0) else {
                    out.next = row.get(10);
                    continue;
                };
                out.jobs.push(Job {
                    id: JobId(id as u64),
                    attempt: row.get::<_, i32>(1).max(0) as u32,
                    token: row.get::<_, i64>(2) as u64,
                    lease_until: us_to_ns(row.get(3)),
                    deadline: us_to_ns(row.get(4)),
                    payload: row.get(5),
                    kind: row.get(6),
                    last_error: row.get(7),
                    priority: priority(row.get(8)),
                });
            }
            Ok(out)
        })
    }

    /// Deletes the job if `token` is its lease's.
    pub(crate) async fn ack(&self, id: JobId, token: u64) -> Result<bool, DurableError> {
        if token == 0 {
            return Ok(false);
        }
        let (id, token) = (id.0 as i64, token as i64);
        call!(self.pool, "acking", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::Ack).await?;
            Ok(conn.client.query(&st, &[&self.name, &id, &token]).await?.len() == 1)
        })
    }

    /// Acks in one statement; the flags in order.
    pub(crate) async fn ack_many(&self, jobs: &[(JobId, u64)]) -> Result<Vec<bool>, DurableError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = jobs.iter().map(|(id, _)| id.0 as i64).collect();
        let tokens: Vec<i64> = jobs.iter().map(|(_, t)| *t as i64).collect();
        let deleted: std::collections::HashSet<i64> = call!(self.pool, "acking", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::AckMany).await?;
            let rows = conn.client.query(&st, &[&self.name, &ids, &tokens]).await?;
            Ok(rows.iter().map(|r| r.get::<_, i64>(0)).collect())
        })?;
        // A job listed twice is acked once: its first entry says so.
        let mut seen = std::collections::HashSet::new();
        Ok(ids
            .iter()
            .zip(&tokens)
            .map(|(id, t)| *t != 0 && deleted.contains(id) && seen.insert(*id))
            .collect())
    }

    /// A retry at `retry_us`, or death after the last attempt; `error`:
    /// `None` keeps the last error.
    pub(crate) async fn nack(
        &self,
        id: JobId,
        token: u64,
        retry_us: i64,
        error: Option<String>,
    ) -> Result<bool, DurableError> {
        if token == 0 {
            return Ok(false);
        }
        let (id, token) = (id.0 as i64, token as i64);
        call!(self.pool, "nacking", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::Nack).await?;
            let row = conn.client.query_one(&st, &[&self.name, &id, &token, &retry_us, &error]).await?;
            Ok(row.get::<_, bool>(0))
        })
    }

    pub(crate) async fn kill(&self, id: JobId, token: u64, error: String) -> Result<bool, DurableError> {
        if token == 0 {
            return Ok(false);
        }
        let (id, token) = (id.0 as i64, token as i64);
        call!(self.pool, "killing", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::Kill).await?;
            Ok(conn.client.query(&st, &[&self.name, &id, &token, &error]).await?.len() == 1)
        })
    }

    pub(crate) async fn extend(&self, id: JobId, token: u64, lease_us: i64) -> Result<bool, DurableError> {
        if token == 0 {
            return Ok(false);
        }
        let (id, token) = (id.0 as i64, token as i64);
        call!(self.pool, "extending", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::Extend).await?;
            Ok(conn.client.execute(&st, &[&self.name, &id, &token, &lease_us]).await? == 1)
        })
    }

    pub(crate) async fn cancel(&self, id: JobId) -> Result<bool, DurableError> {
        let id = id.0 as i64;
        call!(self.pool, "cancelling", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::Cancel).await?;
            Ok(conn.client.execute(&st, &[&self.name, &id]).await? == 1)
        })
    }

    /// Dead jobs back to pending, due at `at_us`; a flag per id.
    pub(crate) async fn requeue(&self, ids: &[JobId], at_us: i64) -> Result<Vec<bool>, DurableError> {
        let want: Vec<i64> = ids.iter().map(|id| id.0 as i64).collect();
        let more = self.max_attempts as i32;
        let moved: std::collections::HashSet<i64> = call!(self.pool, "requeueing", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::Requeue).await?;
            let rows = conn.client.query(&st, &[&self.name, &want, &at_us, &more]).await?;
            Ok(rows.iter().map(|r| r.get::<_, i64>(0)).collect())
        })?;
        let mut seen = std::collections::HashSet::new();
        Ok(want.iter().map(|id| moved.contains(id) && seen.insert(*id)).collect())
    }

    pub(crate) async fn stats(&self) -> Result<Stats, DurableError> {
        call!(self.pool, "counting", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::Stats).await?;
            let mut s = Stats::default();
            for row in conn.client.query(&st, &[&self.name]).await? {
                let n = row.get::<_, i64>(1).max(0) as u64;
                match row.get::<_, i16>(0) {
                    0 => s.pending = n,
                    1 => s.leased = n,
                    _ => s.dead += n,
                }
            }
            Ok(s)
        })
    }

    /// Up to `limit` dead jobs, oldest death first.
    pub(crate) async fn dead(&self, limit: usize) -> Result<Vec<Job>, DurableError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        call!(self.pool, "listing dead jobs", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::Dead).await?;
            let rows = conn.client.query(&st, &[&self.name, &limit]).await?;
            Ok(rows
                .iter()
                .map(|r| Job {
                    id: JobId(r.get::<_, i64>(0) as u64),
                    attempt: r.get::<_, i32>(1).max(0) as u32,
                    deadline: us_to_ns(r.get(2)),
                    payload: r.get(3),
                    kind: r.get(4),
                    last_error: r.get(5),
                    priority: priority(r.get(6)),
                    token: 0,
                    lease_until: 0,
                })
                .collect())
        })
    }

    /// A page of the jobs in `state` that `filter` keeps, by id from
    /// `cursor`: reads at most [`PAGE_BUDGET`] ids, kinds and errors, then
    /// the matching jobs whole.
    pub(crate) async fn page(
        &self,
        state: JobState,
        filter: &Filter,
        cursor: u64,
        limit: usize,
    ) -> Result<Page, DurableError> {
        let code = state_code(state);
        let from = i64::try_from(cursor).unwrap_or(i64::MAX);
        call!(self.pool, "listing jobs", Retry::Safe, |conn| {
            let scan = conn.stmt(&self.sql, Stmt::ScanState).await?;
            let rows = conn.client.query(&scan, &[&self.name, &code, &from, &PAGE_BUDGET]).await?;
            let mut page = Page::default();
            let mut ids: Vec<i64> = Vec::new();
            for row in &rows {
                let id: i64 = row.get(0);
                if ids.len() >= limit {
                    page.next = Some(id as u64);
                    break;
                }
                if filter.matches(row.get(1), row.get(2)) {
                    ids.push(id);
                }
            }
            if page.next.is_none() && rows.len() as i64 >= PAGE_BUDGET {
                page.next = rows.last().map(|r| r.get::<_, i64>(0) as u64 + 1);
            }
            if !ids.is_empty() {
                let st = conn.stmt(&self.sql, Stmt::Rows).await?;
                page.jobs =
                    conn.client.query(&st, &[&self.name, &ids, &code]).await?.iter().map(info).collect();
            }
            Ok(page)
        })
    }

    pub(crate) async fn one(&self, id: JobId) -> Result<Option<JobInfo>, DurableError> {
        let id = id.0 as i64;
        call!(self.pool, "reading a job", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::One).await?;
            Ok(conn.client.query_opt(&st, &[&self.name, &id]).await?.as_ref().map(info))
        })
    }

    pub(crate) async fn oldest_due(&self) -> Result<Option<SystemTime>, DurableError> {
        call!(self.pool, "reading the oldest due job", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::OldestDue).await?;
            let row = conn.client.query_one(&st, &[&self.name]).await?;
            Ok(row.get::<_, Option<i64>>(0).map(time))
        })
    }

    pub(crate) async fn kinds(&self) -> Result<Vec<KindCounts>, DurableError> {
        let mut kinds: std::collections::BTreeMap<String, [u64; 3]> = Default::default();
        let rows = call!(self.pool, "counting kinds", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::Kinds).await?;
            conn.client.query(&st, &[&self.name]).await
        })?;
        for row in rows {
            let slot = (row.get::<_, i16>(1).clamp(0, 2)) as usize;
            kinds.entry(row.get(0)).or_default()[slot] += row.get::<_, i64>(2).max(0) as u64;
        }
        Ok(kinds
            .into_iter()
            .map(|(kind, c)| KindCounts { kind, pending: c[0], leased: c[1], dead: c[2] })
            .collect())
    }

    /// Deletes each job only in one of `states`, in one statement.
    pub(crate) async fn cancel_in(
        &self,
        ids: &[JobId],
        states: &[JobState],
    ) -> Result<Vec<bool>, DurableError> {
        let want: Vec<i64> = ids.iter().map(|id| id.0 as i64).collect();
        let codes: Vec<i16> = states.iter().map(|s| state_code(*s)).collect();
        let gone: std::collections::HashSet<i64> = call!(self.pool, "cancelling", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::CancelIn).await?;
            let rows = conn.client.query(&st, &[&self.name, &want, &codes]).await?;
            Ok(rows.iter().map(|r| r.get::<_, i64>(0)).collect())
        })?;
        let mut seen = std::collections::HashSet::new();
        Ok(want.iter().map(|id| gone.contains(id) && seen.insert(*id)).collect())
    }

    /// Jobs processed and failed per minute and kind since `since`.
    pub(crate) async fn throughput(&self, since: SystemTime) -> Result<Vec<Throughput>, DurableError> {
        let from = since.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 60) as i64;
        call!(self.pool, "reading the throughput", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::Throughput).await?;
            let rows = conn.client.query(&st, &[&self.name, &from]).await?;
            Ok(rows
                .iter()
                .map(|r| Throughput {
                    minute: std::time::UNIX_EPOCH
                        + Duration::from_secs(u64::try_from(r.get::<_, i64>(0)).unwrap_or(0) * 60),
                    kind: r.get(1),
                    processed: r.get::<_, i64>(2).max(0) as u64,
                    failed: r.get::<_, i64>(3).max(0) as u64,
                })
                .collect())
        })
    }

    /// The backlog samples since `since`.
    pub(crate) async fn samples(&self, since: SystemTime) -> Result<Vec<Sample>, DurableError> {
        let from = since.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 60) as i64;
        call!(self.pool, "reading the backlog samples", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::Samples).await?;
            let rows = conn.client.query(&st, &[&self.name, &from]).await?;
            Ok(rows
                .iter()
                .map(|r| Sample {
                    minute: std::time::UNIX_EPOCH
                        + Duration::from_secs(u64::try_from(r.get::<_, i64>(0)).unwrap_or(0) * 60),
                    pending: r.get::<_, i64>(1).max(0) as u64,
                    lateness: Duration::from_micros(r.get::<_, i64>(2).max(0) as u64),
                })
                .collect())
        })
    }

    /// Creates or replaces a schedule and its pending tick job.
    pub(crate) async fn schedule_store(
        &self,
        name: &str,
        def: &[u8],
        next_us: Option<i64>,
    ) -> Result<(), DurableError> {
        let last = self.max_attempts as i32;
        call!(self.pool, "storing a schedule", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::ScheduleStore).await?;
            conn.client.execute(&st, &[&self.name, &last, &name, &def, &next_us]).await?;
            Ok(())
        })
    }

    pub(crate) async fn schedule_get(&self, name: &str) -> Result<Option<StoredSchedule>, DurableError> {
        call!(self.pool, "reading a schedule", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::ScheduleGet).await?;
            Ok(conn.client.query_opt(&st, &[&self.name, &name]).await?.as_ref().map(schedule))
        })
    }

    pub(crate) async fn schedule_list(&self) -> Result<Vec<StoredSchedule>, DurableError> {
        call!(self.pool, "listing schedules", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::ScheduleList).await?;
            Ok(conn.client.query(&st, &[&self.name]).await?.iter().map(schedule).collect())
        })
    }

    pub(crate) async fn schedule_remove(&self, name: &str) -> Result<bool, DurableError> {
        call!(self.pool, "removing a schedule", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::ScheduleRemove).await?;
            Ok(conn.client.query_one(&st, &[&self.name, &name]).await?.get::<_, bool>(0))
        })
    }

    /// Fires a schedule's tick (compare-and-set on its next tick); times in
    /// server µs, checked.
    pub(crate) async fn schedule_fire(&self, name: &str, fire: &FireUs<'_>) -> Result<bool, DurableError> {
        let last = self.max_attempts as i32;
        let prio = i16::from(fire.priority);
        // A lost answer is not retried: the fire may have stored its jobs.
        call!(self.pool, "firing a schedule", Retry::OnlyUnsent, |conn| {
            let st = conn.stmt(&self.sql, Stmt::ScheduleFire).await?;
            let row = conn
                .client
                .query_one(
                    &st,
                    &[
                        &self.name,
                        &last,
                        &name,
                        &fire.expect,
                        &fire.next,
                        &fire.last,
                        &fire.kind,
                        &fire.payload,
                        &prio,
                        &fire.deadlines,
                    ],
                )
                .await?;
            Ok(row.get::<_, bool>(0))
        })
    }

    pub(crate) async fn exists(&self) -> Result<bool, DurableError> {
        call!(self.pool, "looking for the queue", Retry::Safe, |conn| {
            let st = conn.stmt(&self.sql, Stmt::Exists).await?;
            Ok(conn.client.query_one(&st, &[&self.name]).await?.get::<_, bool>(0))
        })
    }
}
