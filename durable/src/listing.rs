//! Reading an embedded file's jobs for operators, in one redb read
//! transaction: by state a page at a time, one job by id, and the census
//! (counts by state, the oldest due, counts by kind).
//!
//! Both embedded inspectors read through here: a [`DurableQueue`]
//! (crate::DurableQueue) on its caller's thread, beside the writer thread
//! (redb's read transactions see the last commit and never wait for a write
//! transaction, MVCC), and an [`OfflineFile`](crate::OfflineFile) opened
//! read-only. Nothing here writes.

use std::collections::BTreeMap;
use std::path::Path;

use redb::{ReadTransaction, ReadableTable};

use crate::error::DurableError;
use crate::inspect::{Filter, JobInfo, JobState, KindCounts, Page, Sample, Throughput};
use crate::job::{from_nanos, JobId};
use crate::record::{Record, State};
use crate::writer::{storage_error, JOBS, META, META_FORMAT, SAMPLES, THROUGHPUT};

/// At most this many records are read for one page of a filtered listing
/// (then it returns what matched and where to go on).
pub(crate) const PAGE_BUDGET: usize = 20_000;

pub(crate) fn state_of(state: State) -> JobState {
    match state {
        State::Pending => JobState::Pending,
        State::Leased => JobState::Leased,
        State::Dead => JobState::Dead,
    }
}

pub(crate) fn state_for(state: JobState) -> State {
    match state {
        JobState::Pending => State::Pending,
        JobState::Leased => State::Leased,
        JobState::Dead => State::Dead,
    }
}

/// A stored record as an inspector sees it (no lease token). A dead
/// record's `lease_until` holds the time it died.
pub(crate) fn info(id: u64, rec: Record) -> JobInfo {
    let state = state_of(rec.state);
    JobInfo {
        id: JobId(id),
        state,
        lease_deadline: (state == JobState::Leased).then(|| from_nanos(rec.lease_until)),
        died_at: (state == JobState::Dead && rec.lease_until != 0).then(|| from_nanos(rec.lease_until)),
        kind: rec.kind,
        deadline: from_nanos(rec.deadline),
        attempt: rec.attempt,
        last_error: rec.error,
        priority: rec.priority,
        payload: rec.payload,
    }
}

fn decode(path: &Path, id: u64, bytes: &[u8]) -> Result<Record, DurableError> {
    Record::decode(bytes).map_err(|detail| DurableError::Corrupt {
        path: path.to_path_buf(),
        detail: format!("job {id}: {detail}"),
    })
}

/// Checks that the file is a delayq database of this format, without
/// changing it: a redb file of another program (no `delayq_meta` table, or
/// no format in it) is `Corrupt`.
pub(crate) fn check_format(txn: &ReadTransaction, path: &Path) -> Result<(), DurableError> {
    let not_ours = |why: &str| DurableError::Corrupt {
        path: path.to_path_buf(),
        detail: format!("not a delayq database ({why})"),
    };
    let meta = match txn.open_table(META) {
        Ok(meta) => meta,
        Err(redb::TableError::TableDoesNotExist(_)) => return Err(not_ours("it has no delayq_meta table")),
        Err(e) => return Err(storage_error(path, e.into(), "reading")),
    };
    match meta.get(META_FORMAT).map_err(|e| storage_error(path, e.into(), "reading"))?.map(|v| v.value()) {
        Some(crate::writer::FORMAT) => Ok(()),
        Some(other) => Err(DurableError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("delayq format {other}, this version reads {}", crate::writer::FORMAT),
        }),
        None => Err(not_ours("its delayq_meta table has no format")),
    }
}

/// Opens the jobs table; a file without one has no jobs (`None`).
fn jobs_table(
    txn: &ReadTransaction,
    path: &Path,
) -> Result<Option<redb::ReadOnlyTable<u64, &'static [u8]>>, DurableError> {
    match txn.open_table(JOBS) {
        Ok(t) => Ok(Some(t)),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(storage_error(path, e.into(), "reading")),
    }
}

/// Up to `limit` jobs in `state` that match `filter`, by id from `from`;
/// reads at most [`PAGE_BUDGET`] records (`next` then says where to go on).
pub(crate) fn page(
    txn: &ReadTransaction,
    path: &Path,
    state: JobState,
    filter: &Filter,
    from: u64,
    limit: usize,
) -> Result<Page, DurableError> {
    let err = |e: redb::StorageError| storage_error(path, e.into(), "reading");
    let Some(table) = jobs_table(txn, path)? else { return Ok(Page::default()) };
    let want = state_for(state);
    let mut out = Page::default();
    for (read, entry) in table.range(from..).map_err(err)?.enumerate() {
        let (id, value) = entry.map_err(err)?;
        let id = id.value();
        if out.jobs.len() >= limit || read >= PAGE_BUDGET {
            out.next = Some(id);
            break;
        }
        let rec = decode(path, id, value.value())?;
        if rec.state == want && filter.matches(&rec.kind, rec.error.as_deref()) {
            out.jobs.push(info(id, rec));
        }
    }
    Ok(out)
}

/// The job with this id.
pub(crate) fn one(txn: &ReadTransaction, path: &Path, id: u64) -> Result<Option<JobInfo>, DurableError> {
    let Some(table) = jobs_table(txn, path)? else { return Ok(None) };
    match table.get(id).map_err(|e| storage_error(path, e.into(), "reading"))? {
        None => Ok(None),
        Some(value) => Ok(Some(info(id, decode(path, id, value.value())?))),
    }
}

/// What one pass over the table counts.
#[derive(Default)]
pub(crate) struct Census {
    pub(crate) counts: [u64; 3],
    /// The earliest deadline of a pending job (ns).
    pub(crate) oldest_due: Option<u64>,
    pub(crate) kinds: BTreeMap<String, [u64; 3]>,
}

/// Reads every record once (O(jobs)).
pub(crate) fn census(txn: &ReadTransaction, path: &Path) -> Result<Census, DurableError> {
    let err = |e: redb::StorageError| storage_error(path, e.into(), "reading");
    let mut out = Census::default();
    let Some(table) = jobs_table(txn, path)? else { return Ok(out) };
    for entry in table.iter().map_err(err)? {
        let (id, value) = entry.map_err(err)?;
        let rec = decode(path, id.value(), value.value())?;
        out.counts[rec.state as usize] += 1;
        if rec.state == State::Pending {
            out.oldest_due = Some(out.oldest_due.map_or(rec.deadline, |d| d.min(rec.deadline)));
        }
        match out.kinds.get_mut(rec.kind.as_str()) {
            Some(c) => c[rec.state as usize] += 1,
            None => {
                let mut c = [0; 3];
                c[rec.state as usize] = 1;
                out.kinds.insert(rec.kind, c);
            }
        }
    }
    Ok(out)
}

/// The census's kinds as the inspection API gives them.
pub(crate) fn kind_counts(kinds: BTreeMap<String, [u64; 3]>) -> Vec<KindCounts> {
    kinds.into_iter().map(|(kind, c)| KindCounts { kind, pending: c[0], leased: c[1], dead: c[2] }).collect()
}

/// The throughput table's minutes from `since` (a file without the table
/// has none).
pub(crate) fn throughput(
    txn: &ReadTransaction,
    path: &Path,
    since: std::time::SystemTime,
) -> Result<Vec<Throughput>, DurableError> {
    let err = |e: redb::StorageError| storage_error(path, e.into(), "reading");
    let table = match txn.open_table(THROUGHPUT) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(storage_error(path, e.into(), "reading")),
    };
    let from = since.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 60);
    let mut out = Vec::new();
    for entry in table.range((from, "")..).map_err(err)? {
        let (key, value) = entry.map_err(err)?;
        let (minute, kind) = key.value();
        let (processed, failed) = value.value();
        out.push(Throughput {
            minute: std::time::UNIX_EPOCH + std::time::Duration::from_secs(minute * 60),
            kind: kind.to_string(),
            processed,
            failed,
        });
    }
    Ok(out)
}

/// The backlog samples' minutes from `since` (a file without the table has
/// none).
pub(crate) fn samples(
    txn: &ReadTransaction,
    path: &Path,
    since: std::time::SystemTime,
) -> Result<Vec<Sample>, DurableError> {
    let err = |e: redb::StorageError| storage_error(path, e.into(), "reading");
    let table = match txn.open_table(SAMPLES) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(storage_error(path, e.into(), "reading")),
    };
    let from = since.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 60);
    let mut out = Vec::new();
    for entry in table.range(from..).map_err(err)? {
        let (minute, value) = entry.map_err(err)?;
        let (pending, late) = value.value();
        out.push(Sample {
            minute: std::time::UNIX_EPOCH + std::time::Duration::from_secs(minute.value() * 60),
            pending,
            lateness: std::time::Duration::from_nanos(late),
        });
    }
    Ok(out)
}
