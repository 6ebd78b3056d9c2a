//! [`OfflineFile`]: an embedded queue's file opened by an operator while no
//! application has it — read-only for every read, and no crash recovery.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use redb::{ReadTransaction, ReadableDatabase, ReadableTable};

use crate::error::DurableError;
use crate::inspect::{Filter, Inspect, JobInfo, JobState, KindCounts, Page, Sample, Throughput};
use crate::job::{to_nanos, JobId, Stats};
use crate::listing;
use crate::record::{Record, State};
use crate::writer::{storage_error, JOBS};

/// An embedded queue's file, for an operator's tools (the `delayq-jobs` CLI)
/// while no application holds it.
///
/// Reads open the file **read-only** (redb's `ReadOnlyDatabase`: the file
/// is opened without write access) for the length of one call, and run no
/// crash recovery: a leased job is shown as it is stored, with its lease
/// end, and [`holders_gone`](Inspect::holders_gone) says that no process
/// holds its lease (the application ends it when it next opens the file).
/// A file its last owner left without closing (a crash) cannot be opened
/// read-only by redb, which would first repair it: it is copied to the
/// temporary directory and the copy is repaired and read; the file itself is
/// not touched. A file that is not a delayq database (empty, another
/// program's redb file, not redb at all) is refused with
/// [`DurableError::Corrupt`] and left as it is; a missing file is refused,
/// never created.
///
/// The two changes, [`requeue_dead_many`](Inspect::requeue_dead_many) and
/// [`cancel_many_in`](Inspect::cancel_many_in), each open the file for
/// writing and commit one transaction for the whole batch.
///
/// While the application has the file, every call fails with
/// [`DurableError::Locked`] (the file is one process's at a time); while a
/// call runs, the application cannot open it.
///
/// ```
/// use std::time::Duration;
/// use delayq_durable::{DurableQueue, Inspect, OfflineFile};
///
/// # let dir = std::env::temp_dir().join(format!("delayq-doc-offline-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("offline.redb");
/// let q = DurableQueue::open(&path).unwrap();
/// q.send_after(b"x", Duration::from_secs(60)).unwrap();
/// assert!(OfflineFile::open(&path).unwrap_err().is_locked());
/// drop(q);
/// let file = OfflineFile::open(&path).unwrap();
/// assert_eq!(file.stats().unwrap().pending, 1);
/// assert!(OfflineFile::open(dir.join("missing.redb")).is_err());
/// assert!(!dir.join("missing.redb").exists());
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Debug)]
pub struct OfflineFile {
    path: PathBuf,
    max_attempts: u32,
}

impl OfflineFile {
    /// Checks that `path` is a delayq database no process holds, without
    /// changing it.
    ///
    /// # Errors
    ///
    /// [`DurableError::Io`] for a missing file or a directory,
    /// [`DurableError::Corrupt`] for a file that is not a delayq database,
    /// [`DurableError::Locked`] while a process has it.
    pub fn open(path: impl AsRef<Path>) -> Result<OfflineFile, DurableError> {
        let path = path.as_ref();
        let meta = std::fs::metadata(path)
            .map_err(|e| DurableError::Io { context: format!("opening {}", path.display()), source: e })?;
        if meta.is_dir() {
            return Err(DurableError::Io {
                context: format!("opening {}", path.display()),
                source: std::io::Error::other("it is a directory, not a database file"),
            });
        }
        if meta.len() == 0 {
            return Err(DurableError::Corrupt {
                path: path.to_path_buf(),
                detail: "an empty file, not a delayq database".into(),
            });
        }
        let file = OfflineFile { path: path.to_path_buf(), max_attempts: crate::Builder::new().max_attempts };
        file.read(|_, _| Ok(()))?;
        Ok(file)
    }

    /// The allowance a requeued job gets (as the application's
    /// [`Builder::max_attempts`](crate::Builder::max_attempts); 25 by default).
    pub fn max_attempts(mut self, n: u32) -> OfflineFile {
        self.max_attempts = n.max(1);
        self
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` in a read transaction of the file opened read-only (or of a
    /// repaired copy), after checking it is a delayq database.
    fn read<T>(
        &self,
        f: impl FnOnce(&ReadTransaction, &Path) -> Result<T, DurableError>,
    ) -> Result<T, DurableError> {
        let path = &self.path;
        let run = |txn: ReadTransaction| {
            listing::check_format(&txn, path)?;
            f(&txn, path)
        };
        guarded(path, || match redb::ReadOnlyDatabase::open(path) {
            Ok(db) => run(db.begin_read().map_err(|e| storage_error(path, e.into(), "reading"))?),
            Err(redb::DatabaseError::RepairAborted) => {
                let copy = Copy::of(path)?;
                let db =
                    redb::Database::open(&copy.0).map_err(|e| storage_error(path, e.into(), "reading"))?;
                let result = run(db.begin_read().map_err(|e| storage_error(path, e.into(), "reading"))?);
                drop(db);
                result
            }
            Err(e) => Err(storage_error(path, e.into(), "opening")),
        })
    }

    /// Applies `change` to each job in one write transaction (after the
    /// read-only check that the file is a delayq database).
    fn change(
        &self,
        ids: &[JobId],
        change: impl Fn(&mut Record) -> Change,
    ) -> Result<Vec<bool>, DurableError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.read(|_, _| Ok(()))?;
        let path = &self.path;
        let err = |e: redb::Error| storage_error(path, e, "changing");
        let corrupt = |id: JobId, detail: String| DurableError::Corrupt {
            path: path.clone(),
            detail: format!("job {}: {detail}", id.0),
        };
        guarded(path, || {
            let db = redb::Database::open(path).map_err(|e| err(e.into()))?;
            let txn = db.begin_write().map_err(|e| err(e.into()))?;
            let mut done = vec![false; ids.len()];
            let targets: std::collections::HashMap<u64, usize> =
                ids.iter().enumerate().map(|(i, id)| (id.0, i)).collect();
            let (Some(&lo), Some(&hi)) = (targets.keys().min(), targets.keys().max()) else {
                return Ok(done);
            };
            {
                let mut jobs = txn.open_table(JOBS).map_err(|e| err(e.into()))?;
                // One pass over the ids' range to read them (one lookup per
                // job descends the tree each time), then the writes, then
                // the deletions in one more pass (one removal at a time
                // rebuilds a branch page per job).
                let mut writes = Vec::new();
                let mut deletes = std::collections::HashMap::new();
                for entry in jobs.range(lo..=hi).map_err(|e| err(e.into()))? {
                    let (id, value) = entry.map_err(|e| err(e.into()))?;
                    let id = id.value();
                    let Some(&i) = targets.get(&id) else { continue };
                    let mut rec = Record::decode(value.value()).map_err(|d| corrupt(JobId(id), d))?;
                    match change(&mut rec) {
                        Change::None => {}
                        Change::Write => writes.push((id, i, rec)),
                        Change::Delete => {
                            deletes.insert(id, i);
                        }
                    }
                }
                for (id, i, rec) in writes {
                    jobs.insert(id, rec.encode().as_slice()).map_err(|e| err(e.into()))?;
                    done[i] = true;
                }
                if let (Some(&lo), Some(&hi)) = (deletes.keys().min(), deletes.keys().max()) {
                    jobs.retain_in(lo..=hi, |id, _| match deletes.get(&id) {
                        Some(&i) => {
                            done[i] = true;
                            false
                        }
                        None => true,
                    })
                    .map_err(|e| err(e.into()))?;
                }
            }
            txn.commit().map_err(|e| err(e.into()))?;
            Ok(done)
        })
    }
}

/// What a change does to one record.
enum Change {
    None,
    Write,
    Delete,
}

/// Runs a storage call, turning the storage engine's panic (a damaged
/// file) into `Corrupt`.
fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T, DurableError>) -> Result<T, DurableError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(DurableError::Corrupt {
            path: path.to_path_buf(),
            detail: "the storage engine panicked reading it".into(),
        })
    })
}

/// A copy of a file in the temporary directory, removed when dropped.
struct Copy(PathBuf);

impl Copy {
    fn of(path: &Path) -> Result<Copy, DurableError> {
        static N: AtomicU64 = AtomicU64::new(0);
        let to = std::env::temp_dir().join(format!(
            "delayq-inspect-{}-{}.redb",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::copy(path, &to).map_err(|e| DurableError::Io {
            context: format!("copying {} to {} to read it", path.display(), to.display()),
            source: e,
        })?;
        Ok(Copy(to))
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Inspect for OfflineFile {
    fn stats(&self) -> Result<Stats, DurableError> {
        let c = self.read(listing::census)?.counts;
        Ok(Stats { pending: c[0], leased: c[1], dead: c[2] })
    }

    fn page(
        &self,
        state: JobState,
        filter: &Filter,
        cursor: u64,
        limit: usize,
    ) -> Result<Page, DurableError> {
        self.read(|txn, path| listing::page(txn, path, state, filter, cursor, limit))
    }

    fn job(&self, id: JobId) -> Result<Option<JobInfo>, DurableError> {
        self.read(|txn, path| listing::one(txn, path, id.0))
    }

    fn oldest_due(&self) -> Result<Option<SystemTime>, DurableError> {
        Ok(self.read(listing::census)?.oldest_due.map(crate::job::from_nanos))
    }

    fn kinds(&self) -> Result<Vec<KindCounts>, DurableError> {
        Ok(listing::kind_counts(self.read(listing::census)?.kinds))
    }

    fn throughput(&self, since: SystemTime) -> Result<Vec<Throughput>, DurableError> {
        self.read(|txn, path| listing::throughput(txn, path, since))
    }

    fn schedules(&self) -> Result<Vec<crate::ScheduleInfo>, DurableError> {
        let stored = self.read(|txn, path| crate::writer::schedules::read(txn, path, None))?;
        stored.into_iter().map(crate::schedule::info).collect()
    }

    fn samples(&self, since: SystemTime) -> Result<Vec<Sample>, DurableError> {
        self.read(|txn, path| listing::samples(txn, path, since))
    }

    fn cancel_many_in(&self, ids: &[JobId], states: &[JobState]) -> Result<Vec<bool>, DurableError> {
        let states: Vec<State> = states.iter().map(|s| listing::state_for(*s)).collect();
        self.change(ids, |rec| if states.contains(&rec.state) { Change::Delete } else { Change::None })
    }

    fn requeue_dead_many(&self, ids: &[JobId], at: SystemTime) -> Result<Vec<bool>, DurableError> {
        let at = to_nanos(at)?;
        self.change(ids, |rec| {
            if rec.state != State::Dead {
                return Change::None;
            }
            rec.requeue(at, self.max_attempts);
            Change::Write
        })
    }

    fn holders_gone(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }
}
