//! The writer thread: every change to the database goes through it, in group
//! commits.
//!
//! Callers put an [`Op`] in the mailbox and wait on its reply. The writer takes
//! *every* op waiting, applies them in arrival order inside one redb write
//! transaction, commits once (one fsync with [`Durability::Immediate`]), and only
//! then answers each caller and arms or disarms its timers. A commit that fails
//! answers every op of the batch with the error and changes nothing, in the file
//! or in memory: the ids it handed out are handed out again, its timers are not
//! armed. This is group commit (as in Beanstalkd's binlog and every database's
//! log writer): the fsync is shared by however many callers arrived while the
//! previous one ran, so throughput grows with concurrency and no caller waits
//! for a timer to batch it.
//!
//! Timers: the writer alone owns the core `delayq` queue's sender. Each pending
//! job has one timer at its deadline, each leased job one at its lease end; a
//! timer carries `(id, generation)`. A consumer that receives one asks the
//! writer for a lease ([`Op::Lease`]). The writer first ends the timer's own
//! job's lease if it ran out (the job is pending again, or dead); then it
//! leases the *best* due job — not necessarily the timer's — from its index
//! of pending jobs (`writer/ready.rs`: by priority, deadline, id; aged if
//! asked), due meaning by the wall clock (never early by wall clock, even if
//! the monotonic clock the timer ran on drifted from it or the wall clock was
//! stepped back).
//!
//! Wake-ups. Invariant: *every pending job has exactly one wake-up* — its
//! timer, armed, fired or held by a consumer on its way to an `Op::Lease`. A
//! fired timer leads to at most one lease. So: a lease that takes a job other
//! than the timer's re-arms the timer's job (at once if due: its timer was
//! consumed, and it must not be stranded); a timer whose generation no
//! longer matches (stale) needs nothing, since its job, if pending, got a new
//! timer with the change that bumped the generation, and it may still lease
//! the best due job (that job's own timer then finds it changed: stale in
//! turn, which strands nobody). The job a lease takes has its timer replaced
//! by its lease's. A forward step of the wall clock by X is not seen by timers
//! already armed (monotonic delays): they fire up to X late, never early; see
//! "Wall-clock steps" on `DurableQueue`.
//!
//! Panics: redb can panic on a file damaged under it ("entered unreachable
//! code" on an overwritten page). Every storage call the writer makes — the
//! batch's transaction, the dead-set read, a reopen, the timer bookkeeping —
//! runs under `catch_unwind`, and its panic becomes an error for the callers
//! concerned; the writer goes on. Should the writer end anyway, for any reason,
//! [`Closing`] closes the mailbox and answers every queued op `Closed` on the
//! way out, so no caller waits forever.

use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use redb::{Database, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};

use crate::builder::Durability;
use crate::error::DurableError;
use crate::job::{now_nanos, Job, JobId};
use crate::options::Sent;
use crate::record::{Record, State, UniqueKey};
use crate::reply::Reply;

pub(crate) mod parked;
mod ready;
pub(crate) mod schedules;
mod unique;

pub(crate) use ready::Ready;
use schedules::{Schedule, SCHEDULES};
use unique::Keys;

pub(crate) const JOBS: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("delayq_jobs");
pub(crate) const META: TableDefinition<'_, &str, u64> = TableDefinition::new("delayq_meta");
/// Jobs processed (acked) and failed (an attempt nacked, killed or whose
/// lease ran out) per minute and kind: `(minute since the epoch, kind) →
/// (processed, failed)`, kept [`THROUGHPUT_KEPT`] minutes. Written in each
/// commit that has any (one small upsert per minute and kind); a file
/// without the table has none (older versions ignore it).
pub(crate) const THROUGHPUT: TableDefinition<'_, (u64, &str), (u64, u64)> =
    TableDefinition::new("delayq_throughput");
/// How many minutes of throughput a file keeps.
pub(crate) const THROUGHPUT_KEPT: u64 = 24 * 60;
/// The backlog, sampled once per minute: `minute since the epoch →
/// (pending jobs, lateness in ns)`, taken by the minute's first commit that
/// leases a job, before its leases: the pending count then, and how late
/// the most overdue job it leases is (the core queue hands out due jobs
/// oldest first, so that is the oldest due job's lateness). One row insert
/// per minute; kept [`THROUGHPUT_KEPT`] minutes; a file without the table
/// has none.
pub(crate) const SAMPLES: TableDefinition<'_, u64, (u64, u64)> = TableDefinition::new("delayq_samples");
pub(crate) const META_FORMAT: &str = "format";
pub(crate) const META_NEXT_ID: &str = "next_id";
pub(crate) const FORMAT: u64 = 1;

/// The longest a batch waits for callers still waking from the last commit.
const MAX_GATHER: Duration = Duration::from_micros(500);

/// How long a lease whose commit failed waits before its job is offered again.
const RETRY_AFTER_FAILED_COMMIT: Duration = Duration::from_millis(100);

/// A timer: `(job id, generation)`.
pub(crate) type Timer = (u64, u64);

/// A job to store (checked by the caller).
pub(crate) struct NewJob {
    pub(crate) kind: String,
    pub(crate) payload: Vec<u8>,
    /// ns since the Unix epoch.
    pub(crate) deadline: u64,
    pub(crate) priority: u8,
    /// The uniqueness key, its states, and its period in ns (0: none).
    pub(crate) unique: Option<(String, crate::options::UniqueStates, u64)>,
}

impl NewJob {
    pub(crate) fn plain(kind: String, payload: Vec<u8>, deadline: u64) -> NewJob {
        NewJob { kind, payload, deadline, priority: 0, unique: None }
    }
}

/// One request to the writer. Times are ns since the Unix epoch; leases are ns.
pub(crate) enum Op {
    Send {
        jobs: Vec<NewJob>,
        reply: Reply<Vec<JobId>>,
    },
    /// One job with options (`send_with`): with a key, stored only if no
    /// job holds the key.
    SendWith {
        job: NewJob,
        reply: Reply<Sent>,
    },
    /// A consumer received the timer `(id, gen)`: lease it the best due job
    /// whose kind is not in `exclude` (see "Wake-ups" above).
    Lease {
        id: u64,
        gen: u64,
        lease: u64,
        exclude: Option<Arc<[String]>>,
        reply: Reply<Option<Job>>,
    },
    Ack {
        id: u64,
        token: u64,
        reply: Reply<bool>,
    },
    /// Gives back a lease whose job never reached its caller (an async
    /// `reserve` dropped while the lease was being committed): pending again
    /// at its deadline, with the delivery uncounted, as if never leased.
    Release {
        id: u64,
        token: u64,
        reply: Reply<bool>,
    },
    Nack {
        id: u64,
        token: u64,
        retry_at: u64,
        /// Stored as the job's last error (`None` keeps the one it has).
        error: Option<String>,
        reply: Reply<bool>,
    },
    /// Moves a leased job to the dead set now, whatever its attempts.
    Kill {
        id: u64,
        token: u64,
        error: String,
        reply: Reply<bool>,
    },
    Extend {
        id: u64,
        token: u64,
        lease: u64,
        reply: Reply<bool>,
    },
    Cancel {
        id: u64,
        reply: Reply<bool>,
    },
    Requeue {
        id: u64,
        at: u64,
        reply: Reply<bool>,
    },
    /// As `Cancel`, only if the job's state is one of `states` (indexed by
    /// `State as usize`): the inspection API's guarded delete.
    CancelIn {
        id: u64,
        states: [bool; 3],
        reply: Reply<bool>,
    },
    /// The schedule store: creates or replaces a schedule, replacing its
    /// pending tick job (`next_us`: µs; `None`: paused).
    ScheduleStore {
        name: String,
        def: Vec<u8>,
        next_us: Option<u64>,
        reply: Reply<bool>,
    },
    /// The schedule store: deletes a schedule and its pending tick job.
    ScheduleRemove {
        name: String,
        reply: Reply<bool>,
    },
    /// The schedule store: fires a tick (compare-and-set on the next tick).
    ScheduleFire {
        name: String,
        fire: crate::stored::Fire,
        reply: Reply<bool>,
    },
    /// Reads (no commit): up to `limit` dead jobs.
    Dead {
        limit: usize,
        reply: Reply<Vec<Job>>,
    },
}

/// The database, shared by the writer and the readers of the inspection API
/// (`listing.rs`), which begin read transactions on their own threads:
/// redb's readers see the last commit and never wait for the writer. `None`
/// after a failed reopen. The writer takes the write lock only to reopen.
pub(crate) type SharedDb = Arc<RwLock<Option<Database>>>;

pub(crate) enum Outcome {
    Ids(Vec<JobId>),
    Sent(Sent),
    Job(Option<Job>),
    Flag(bool),
}

enum TimerAct {
    Arm {
        id: u64,
        gen: u64,
        due: u64,
    },
    Disarm {
        id: u64,
    },
    /// The job's timer was consumed by a consumer that excludes its kind:
    /// its wake-up waits in `parked.rs` for one that takes it.
    Park {
        id: u64,
        gen: u64,
        kind: String,
    },
}

#[derive(Default)]
pub(crate) struct Mailbox {
    state: Mutex<MailState>,
    wake: Condvar,
}

#[derive(Default)]
struct MailState {
    ops: Vec<Op>,
    closed: bool,
    /// The writer is gathering a batch: wake it on every post.
    gathering: bool,
}

impl Mailbox {
    /// Queues ops for the next group commit; `Err` (with the ops dropped, which
    /// answers them `Closed`) once the writer is shutting down.
    pub(crate) fn post(&self, ops: impl IntoIterator<Item = Op>) -> Result<(), DurableError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.closed {
            return Err(DurableError::Closed);
        }
        let wake = state.ops.is_empty() || state.gathering;
        state.ops.extend(ops);
        drop(state);
        if wake {
            self.wake.notify_one();
        }
        Ok(())
    }

    pub(crate) fn close(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).closed = true;
        self.wake.notify_one();
    }

    /// Closes the mailbox and answers every op still queued `Closed` (dropping
    /// an op's `Reply` does that): no post succeeds after this, so no caller
    /// can be left waiting on a writer that is gone.
    fn close_and_drain(&self) {
        let ops = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.closed = true;
            std::mem::take(&mut state.ops)
        };
        drop(ops);
    }
}

/// Held by the writer thread while it runs: however it ends (the mailbox
/// closed and drained, or a panic nothing caught), its drop closes the mailbox
/// and answers what is queued.
struct Closing(Arc<Mailbox>);

impl Drop for Closing {
    fn drop(&mut self) {
        self.0.close_and_drain();
    }
}

/// The text of a caught panic, for an error message.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "a panic"
    }
}

/// What the queue handles read without asking the writer.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) pending: AtomicU64,
    pub(crate) leased: AtomicU64,
    pub(crate) dead: AtomicU64,
    pub(crate) commits: AtomicU64,
    pub(crate) durable_commits: AtomicU64,
    pub(crate) ops: AtomicU64,
}

pub(crate) struct Writer {
    /// `None` after a failed reopen: every batch retries it first.
    pub(crate) db: SharedDb,
    pub(crate) path: PathBuf,
    pub(crate) mailbox: Arc<Mailbox>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) timers: delayq::Sender<Timer>,
    pub(crate) keys: HashMap<u64, delayq::Key>,
    pub(crate) next_id: u64,
    pub(crate) max_attempts: u32,
    pub(crate) durability: Durability,
    /// Ops in the last batch: how many callers the next one may gather.
    pub(crate) expect: usize,
    /// How long the last commit took.
    pub(crate) last_commit: Duration,
    /// What goes to the `metrics` facade (nothing without the feature).
    pub(crate) metrics: crate::metrics::Metrics,
    /// The minute (since the epoch) of the last backlog sample committed.
    pub(crate) sampled: u64,
    /// The pending jobs by priority and kind (`ready.rs`): which due job a
    /// lease takes.
    pub(crate) ready: Ready,
    /// The index missed changes (a failed commit whose re-read failed too):
    /// rebuilt from the file before the next batch.
    pub(crate) ready_stale: bool,
    /// Wake-ups parked by consumers that exclude their job's kind.
    pub(crate) parked: Arc<parked::Parked>,
}

impl Drop for Writer {
    /// Closes the database on the writer thread, as it ends: the storage
    /// engine's drop may panic on a damaged file, and a panic here ends this
    /// thread only, never a caller dropping its last handle.
    fn drop(&mut self) {
        let db = self.db.write().unwrap_or_else(PoisonError::into_inner).take();
        drop(db);
    }
}

/// Per-state count changes of one batch, applied after its commit, its
/// expired leases acted on (for the metrics), its throughput, and the
/// minute of the backlog sample it wrote.
#[derive(Default)]
struct Deltas([i64; 3], u64, Tally, Option<u64>);

/// A batch's processed and failed jobs, by kind (its minute is the batch's).
#[derive(Default)]
struct Tally(HashMap<String, (u64, u64)>);

impl Tally {
    fn processed(&mut self, kind: &str) {
        self.entry(kind).0 += 1;
    }

    fn failed(&mut self, kind: &str) {
        self.entry(kind).1 += 1;
    }

    fn entry(&mut self, kind: &str) -> &mut (u64, u64) {
        if !self.0.contains_key(kind) {
            self.0.insert(kind.to_string(), (0, 0));
        }
        self.0.get_mut(kind).expect("just inserted")
    }
}

impl Deltas {
    fn moved(&mut self, from: Option<State>, to: Option<State>) {
        if let Some(s) = from {
            self.0[s as usize] -= 1;
        }
        if let Some(s) = to {
            self.0[s as usize] += 1;
        }
    }
}

fn add(counter: &AtomicU64, delta: i64) {
    if delta >= 0 {
        counter.fetch_add(delta as u64, Ordering::Relaxed);
    } else {
        counter.fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
    }
}

impl Writer {
    /// Runs until the mailbox is closed and drained; commits what a durability
    /// window left unsynced before returning.
    pub(crate) fn run(mut self) {
        // Declared after `self`, so dropped before it (and before the database
        // handle, whose own drop may touch a damaged file).
        let _closing = Closing(self.mailbox.clone());
        self.metrics.counts(&self.counters);
        let mut unsynced_since: Option<Instant> = None;
        loop {
            let mut batch = {
                let mut state = self.mailbox.state.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    if !state.ops.is_empty() || state.closed {
                        break;
                    }
                    match (unsynced_since, self.durability) {
                        (Some(since), Durability::Window(window)) => {
                            let left = window.saturating_sub(since.elapsed());
                            if left.is_zero() {
                                break;
                            }
                            state = self
                                .mailbox
                                .wake
                                .wait_timeout(state, left)
                                .unwrap_or_else(PoisonError::into_inner)
                                .0;
                        }
                        _ => state = self.mailbox.wake.wait(state).unwrap_or_else(PoisonError::into_inner),
                    }
                }
                if state.ops.is_empty() && state.closed && unsynced_since.is_none() {
                    return;
                }
                // Gather: the callers answered by the last commit are still
                // waking up; a commit started now would carry few of them and
                // the rest would wait a whole fsync more. When the last batch
                // was bigger than what is here, wait (parked, not spinning)
                // up to half a commit's time for them (PostgreSQL's
                // commit_delay, made adaptive). A lone caller never waits.
                if self.durability == Durability::Immediate && !state.closed && state.ops.len() < self.expect
                {
                    let until = Instant::now() + (self.last_commit / 2).min(MAX_GATHER);
                    state.gathering = true;
                    while state.ops.len() < self.expect && !state.closed {
                        let left = until.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        state = self
                            .mailbox
                            .wake
                            .wait_timeout(state, left)
                            .unwrap_or_else(PoisonError::into_inner)
                            .0;
                    }
                    state.gathering = false;
                }
                self.expect = state.ops.len();
                std::mem::take(&mut state.ops)
            };
            let window_over = match (unsynced_since, self.durability) {
                (Some(since), Durability::Window(window)) => since.elapsed() >= window,
                _ => false,
            };
            let closing = self.mailbox.state.lock().unwrap_or_else(PoisonError::into_inner).closed;
            // In a durability window a batch commits without fsync, unless the
            // window is over or the queue is closing: then this commit (an
            // empty one if there is no op) makes everything before it durable.
            let durable = match self.durability {
                Durability::Immediate => true,
                Durability::Window(_) => window_over || closing,
            };
            if batch.is_empty() && !durable {
                continue;
            }
            // `commit_batch` guards each storage call itself; this catches
            // whatever else might unwind, answers what is left of the batch,
            // and keeps the writer alive.
            let ok = match panic::catch_unwind(AssertUnwindSafe(|| self.commit_batch(&mut batch, durable))) {
                Ok(ok) => ok,
                Err(payload) => {
                    let err = DurableError::Storage(format!(
                        "the writer panicked handling a batch ({}); it was not committed",
                        panic_text(payload.as_ref())
                    ));
                    for op in batch.drain(..) {
                        fail(op, err.duplicate());
                    }
                    false
                }
            };
            if durable && ok {
                unsynced_since = None;
            } else if !durable && ok && unsynced_since.is_none() {
                unsynced_since = Some(Instant::now());
            }
            if closing && !ok {
                // A final sync that fails cannot be retried forever.
                unsynced_since = None;
            }
        }
    }

    /// Applies and commits one batch, then answers it. Returns whether it committed.
    fn commit_batch(&mut self, batch: &mut Vec<Op>, durable: bool) -> bool {
        if self.db.read().unwrap_or_else(PoisonError::into_inner).is_none() {
            if let Err(err) = self.guarded("reopening", Writer::reopen) {
                for op in batch.drain(..) {
                    fail(op, err.duplicate());
                }
                return false;
            }
        }
        if self.ready_stale {
            if let Err(err) = self.guarded("reading", Writer::rebuild_ready) {
                for op in batch.drain(..) {
                    fail(op, err.duplicate());
                }
                return false;
            }
        }
        let (reads, writes): (Vec<Op>, Vec<Op>) =
            batch.drain(..).partition(|op| matches!(op, Op::Dead { .. }));
        *batch = writes;
        for op in reads {
            if let Op::Dead { limit, reply } = op {
                reply.send(self.guarded("reading", |w| w.dead_jobs(limit)));
            }
        }
        if batch.is_empty() && !durable {
            return true;
        }
        let started = Instant::now();
        let applied = self.guarded("committing", |w| w.apply(batch, durable));
        self.last_commit = started.elapsed();
        self.counters.commits.fetch_add(1, Ordering::Relaxed);
        if durable {
            self.counters.durable_commits.fetch_add(1, Ordering::Relaxed);
        }
        self.counters.ops.fetch_add(batch.len() as u64, Ordering::Relaxed);
        match applied {
            Ok((outcomes, acts, deltas, next_id)) => {
                self.next_id = next_id;
                if let Some(minute) = deltas.3 {
                    self.sampled = minute;
                }
                add(&self.counters.pending, deltas.0[State::Pending as usize]);
                add(&self.counters.leased, deltas.0[State::Leased as usize]);
                add(&self.counters.dead, deltas.0[State::Dead as usize]);
                self.metrics.committed(batch, &outcomes, deltas.1, self.last_commit, durable, &self.counters);
                for act in acts {
                    // A panic here (none is known) loses one timer, not the writer.
                    let _ = self.guarded("arming a timer", |w| {
                        w.act(act);
                        Ok(())
                    });
                }
                let mut given_back = Vec::new();
                for (op, outcome) in batch.drain(..).zip(outcomes) {
                    if let Some(job) = answer(op, outcome) {
                        let (reply, _) = crate::reply::reply();
                        given_back.push(Op::Release { id: job.id.0, token: job.token, reply });
                    }
                }
                if !given_back.is_empty() {
                    // The next batch; fails only when the writer is closing,
                    // and then the leases end as the file is reopened.
                    let _ = self.mailbox.post(given_back);
                }
                true
            }
            Err(err) => {
                if matches!(err, DurableError::Io { .. }) {
                    // redb refuses every write after an I/O error until the
                    // file is reopened; the file holds exactly the commits
                    // answered Ok, so memory and file still agree.
                    let _ = self.guarded("reopening", Writer::reopen);
                }
                // The batch changed the index as it went; the file did not
                // change: read the index back from it.
                self.ready_stale = true;
                let _ = self.guarded("reading", Writer::rebuild_ready);
                for op in batch.drain(..) {
                    if let Op::Lease { id, gen, .. } = op {
                        // Its timer was consumed: offer the job again shortly.
                        let key = self.timers.send_after((id, gen), RETRY_AFTER_FAILED_COMMIT);
                        if let Ok(key) = key {
                            if let Some(old) = self.keys.insert(id, key) {
                                self.timers.discard(old);
                            }
                        }
                    }
                    fail(op, err.duplicate());
                }
                false
            }
        }
    }

    /// Runs one storage call, turning a panic inside it into an error: the
    /// storage engine panics on some damaged files, and the writer must
    /// outlive that (its callers then get `Corrupt`, never a hang).
    fn guarded<T>(
        &mut self,
        doing: &str,
        f: impl FnOnce(&mut Writer) -> Result<T, DurableError>,
    ) -> Result<T, DurableError> {
        match panic::catch_unwind(AssertUnwindSafe(|| f(self))) {
            Ok(result) => result,
            Err(payload) => Err(DurableError::Corrupt {
                path: self.path.clone(),
                detail: format!(
                    "the storage engine panicked {doing} it ({}); nothing was changed",
                    panic_text(payload.as_ref())
                ),
            }),
        }
    }

    fn begin_read(&self) -> Result<ReadTransaction, DurableError> {
        begin_read(&self.db, &self.path)
    }

    fn begin_write(&self) -> Result<WriteTransaction, DurableError> {
        let db = self.db.read().unwrap_or_else(PoisonError::into_inner);
        db.as_ref()
            .ok_or_else(|| unopened(&self.path))?
            .begin_write()
            .map_err(|e| storage_error(&self.path, e.into(), "starting a commit"))
    }

    /// Closes and reopens the file (after an I/O error), recounting its jobs.
    fn reopen(&mut self) -> Result<(), DurableError> {
        // Closed before it is opened again (redb locks the file).
        *self.db.write().unwrap_or_else(PoisonError::into_inner) = None;
        let db =
            Database::create(&self.path).map_err(|e| storage_error(&self.path, e.into(), "reopening"))?;
        let mut counts = [0u64; 3];
        {
            let read = db.begin_read().map_err(|e| storage_error(&self.path, e.into(), "reopening"))?;
            let table =
                read.open_table(JOBS).map_err(|e| storage_error(&self.path, e.into(), "reopening"))?;
            for entry in table.iter().map_err(|e| storage_error(&self.path, e.into(), "reopening"))? {
                let (_, value) = entry.map_err(|e| storage_error(&self.path, e.into(), "reopening"))?;
                if let Ok(rec) = Record::decode(value.value()) {
                    counts[rec.state as usize] += 1;
                }
            }
        }
        self.counters.pending.store(counts[0], Ordering::Relaxed);
        self.counters.leased.store(counts[1], Ordering::Relaxed);
        self.counters.dead.store(counts[2], Ordering::Relaxed);
        *self.db.write().unwrap_or_else(PoisonError::into_inner) = Some(db);
        self.ready_stale = true;
        Ok(())
    }

    /// Reads the index of pending jobs back from the file.
    fn rebuild_ready(&mut self) -> Result<(), DurableError> {
        let path = &self.path;
        let err = |e: redb::Error| storage_error(path, e, "reading");
        let read = self.begin_read()?;
        let table = read.open_table(JOBS).map_err(|e| err(e.into()))?;
        let mut ready = Ready::new(self.ready.step());
        for entry in table.iter().map_err(|e| err(e.into()))? {
            let (id, value) = entry.map_err(|e| err(e.into()))?;
            if let Ok(rec) = Record::decode(value.value()) {
                ready.insert(id.value(), &rec);
            }
        }
        self.ready = ready;
        self.ready_stale = false;
        Ok(())
    }

    fn dead_jobs(&self, limit: usize) -> Result<Vec<Job>, DurableError> {
        let path = &self.path;
        let err = |e: redb::Error| storage_error(path, e, "reading");
        let read = self.begin_read()?;
        let table = read.open_table(JOBS).map_err(|e| err(e.into()))?;
        let mut dead = Vec::new();
        for entry in table.iter().map_err(|e| err(e.into()))? {
            if dead.len() >= limit {
                break;
            }
            let (id, value) = entry.map_err(|e| err(e.into()))?;
            let rec = Record::decode(value.value()).map_err(|detail| DurableError::Corrupt {
                path: path.clone(),
                detail: format!("job {}: {detail}", id.value()),
            })?;
            if rec.state == State::Dead {
                dead.push(rec.to_job(JobId(id.value())));
            }
        }
        Ok(dead)
    }

    fn act(&mut self, act: TimerAct) {
        match act {
            TimerAct::Arm { id, gen, due } => {
                self.parked.unpark(id);
                let delay = Duration::from_nanos(due.saturating_sub(now_nanos()));
                if let Some(old) = self.keys.remove(&id) {
                    self.timers.discard(old);
                }
                // The writer holds the timers' only sender and the queue holds a
                // receiver until the writer is gone, so the send cannot fail.
                if let Ok(key) = self.timers.send_after((id, gen), delay) {
                    self.keys.insert(id, key);
                }
            }
            TimerAct::Disarm { id } => {
                self.parked.unpark(id);
                if let Some(old) = self.keys.remove(&id) {
                    self.timers.discard(old);
                }
            }
            TimerAct::Park { id, gen, kind } => {
                // Its timer fired (the key is spent): the parked entry is
                // the job's one wake-up now.
                self.keys.remove(&id);
                self.parked.park(id, gen, kind);
            }
        }
    }

    #[allow(clippy::type_complexity)]
    fn apply(
        &mut self,
        batch: &[Op],
        durable: bool,
    ) -> Result<(Vec<Outcome>, Vec<TimerAct>, Deltas, u64), DurableError> {
        let mut txn = self.begin_write()?;
        txn.set_durability(if durable { redb::Durability::Immediate } else { redb::Durability::None })
            .map_err(|e| DurableError::Storage(e.to_string()))?;
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut acts = Vec::new();
        let mut deltas = Deltas::default();
        let mut next_id = self.next_id;
        let now = now_nanos();
        // How late the most overdue job this batch leases is (ns).
        let mut late: Option<u64> = None;
        // Whether the batch wrote anything: a batch of leases that leased
        // nothing (stale or parked wake-ups) commits nothing, and costs no
        // fsync.
        let mut dirty = false;
        {
            let mut jobs =
                txn.open_table(JOBS).map_err(|e| storage_error(&self.path, e.into(), "opening jobs"))?;
            let path = &self.path;
            let err = |e: redb::StorageError| storage_error(path, e.into(), "writing a job");
            let get = |jobs: &redb::Table<'_, u64, &[u8]>, id: u64| -> Result<Option<Record>, DurableError> {
                match jobs.get(id).map_err(err)? {
                    None => Ok(None),
                    Some(value) => Record::decode(value.value()).map(Some).map_err(|detail| {
                        DurableError::Corrupt { path: path.clone(), detail: format!("job {id}: {detail}") }
                    }),
                }
            };
            // The uniqueness keys' tables, opened on first use.
            let mut keys: Option<Keys<'_>> = None;
            for op in batch {
                dirty |= !matches!(op, Op::Lease { .. });
                let outcome = match op {
                    Op::Send { jobs: sends, .. } => {
                        let mut ids = Vec::with_capacity(sends.len());
                        for job in sends {
                            let id = next_id;
                            next_id += 1;
                            let rec = new_record(job, self.max_attempts, None);
                            jobs.insert(id, rec.encode().as_slice()).map_err(err)?;
                            self.ready.insert(id, &rec);
                            deltas.moved(None, Some(State::Pending));
                            acts.push(TimerAct::Arm { id, gen: 1, due: rec.deadline });
                            ids.push(JobId(id));
                        }
                        Outcome::Ids(ids)
                    }
                    Op::SendWith { job, .. } => {
                        let mut key = None;
                        if let Some((name, states, period)) = &job.unique {
                            let k = Keys::open(&mut keys, &txn, path)?;
                            if let Some(holder) = k.holder(name, now, &|id| get(&jobs, id))? {
                                outcomes.push(Outcome::Sent(Sent::Existing(JobId(holder))));
                                continue;
                            }
                            let until = if *period == 0 { 0 } else { now.saturating_add(*period) };
                            key = Some(UniqueKey { key: name.clone(), states: *states, until });
                        }
                        let id = next_id;
                        next_id += 1;
                        let rec = new_record(job, self.max_attempts, key);
                        if let Some(u) = &rec.unique {
                            let k = Keys::open(&mut keys, &txn, path)?;
                            k.hold(&u.key, id, u.states, u.until, now, &|id| get(&jobs, id))?;
                        }
                        jobs.insert(id, rec.encode().as_slice()).map_err(err)?;
                        self.ready.insert(id, &rec);
                        deltas.moved(None, Some(State::Pending));
                        acts.push(TimerAct::Arm { id, gen: 1, due: rec.deadline });
                        Outcome::Sent(Sent::Created(JobId(id)))
                    }
                    Op::Lease { id, gen, lease, exclude, reply } => {
                        let (id, gen, lease) = (*id, *gen, *lease);
                        let exclude: &[String] = exclude.as_deref().unwrap_or(&[]);
                        // The timer's own job, if the timer is current.
                        let mut own = get(&jobs, id)?.filter(|r| r.gen == gen);
                        if reply.is_abandoned() {
                            // Its caller gave up (a dropped async reserve):
                            // no lease; the consumed timer comes back for
                            // another consumer.
                            if let Some(due) = own.as_ref().and_then(Record::due) {
                                acts.push(TimerAct::Arm { id, gen, due });
                            }
                            outcomes.push(Outcome::Job(None));
                            continue;
                        }
                        let mut expired = false;
                        if let Some(rec) =
                            own.as_mut().filter(|r| r.state == State::Leased && r.lease_until <= now)
                        {
                            // Its lease ran out: pending again at its deadline
                            // (ordered among the due jobs like any other), or
                            // dead after its last attempt.
                            expired = true;
                            deltas.1 += 1;
                            deltas.2.failed(&rec.kind);
                            rec.gen += 1;
                            rec.token = 0;
                            // The reason it is delivered again (or dead), as `Job::last_error`.
                            rec.error = Some(format!("lease expired (attempt {})", rec.attempt));
                            if rec.attempt >= rec.dead_after {
                                // A dead record's lease end is when it died.
                                rec.state = State::Dead;
                                rec.lease_until = now;
                                acts.push(TimerAct::Disarm { id });
                                if rec.unique.is_some() {
                                    Keys::open(&mut keys, &txn, path)?.release(id, rec, now)?;
                                }
                            } else {
                                rec.state = State::Pending;
                                self.ready.insert(id, rec);
                            }
                            deltas.moved(Some(State::Leased), Some(rec.state));
                            jobs.insert(id, rec.encode().as_slice()).map_err(err)?;
                        }
                        let mut leased = None;
                        while let Some((level, deadline, pick)) = self.ready.best(now, exclude) {
                            let taken = if pick == id { own.take() } else { None };
                            let rec = match taken {
                                Some(rec) => Some(rec),
                                None => get(&jobs, pick)?,
                            };
                            let Some(mut rec) = rec.filter(|r| {
                                r.state == State::Pending && r.deadline == deadline && r.priority == level
                            }) else {
                                self.ready.forget(level, deadline, pick);
                                continue;
                            };
                            self.ready.remove(pick, &rec);
                            if !(expired && pick == id) {
                                late = late.max(Some(now.saturating_sub(rec.deadline)));
                            }
                            rec.gen += 1;
                            rec.state = State::Leased;
                            rec.attempt = rec.attempt.saturating_add(1);
                            rec.token = rec.gen;
                            rec.lease_until = now.saturating_add(lease);
                            acts.push(TimerAct::Arm { id: pick, gen: rec.gen, due: rec.lease_until });
                            deltas.moved(Some(State::Pending), Some(State::Leased));
                            jobs.insert(pick, rec.encode().as_slice()).map_err(err)?;
                            leased = Some(rec.to_job(JobId(pick)));
                            break;
                        }
                        // The timer's own job, if this lease did not take
                        // it, keeps a wake-up: its timer was consumed, so it
                        // is armed again (at once if it is due).
                        match own {
                            // Due, and of a kind this consumer excludes: armed
                            // again, it could come straight back to it (a busy
                            // loop), so it waits for a consumer that takes it.
                            Some(rec)
                                if rec.state == State::Pending
                                    && rec.deadline <= now
                                    && exclude.contains(&rec.kind) =>
                            {
                                acts.push(TimerAct::Park { id, gen: rec.gen, kind: rec.kind })
                            }
                            Some(rec) if rec.state == State::Pending => {
                                acts.push(TimerAct::Arm { id, gen: rec.gen, due: rec.deadline })
                            }
                            // Its lease ends by the monotonic clock, not yet
                            // by the wall clock: wait for the rest.
                            Some(rec) if rec.state == State::Leased => {
                                acts.push(TimerAct::Arm { id, gen: rec.gen, due: rec.lease_until })
                            }
                            _ => {}
                        }
                        dirty |= expired || leased.is_some();
                        Outcome::Job(leased)
                    }
                    Op::Ack { id, token, .. } => match get(&jobs, *id)? {
                        Some(rec) if rec.state == State::Leased && rec.token == *token => {
                            deltas.2.processed(&rec.kind);
                            jobs.remove(*id).map_err(err)?;
                            if rec.unique.is_some() {
                                Keys::open(&mut keys, &txn, path)?.release(*id, &rec, now)?;
                            }
                            deltas.moved(Some(State::Leased), None);
                            acts.push(TimerAct::Disarm { id: *id });
                            Outcome::Flag(true)
                        }
                        _ => Outcome::Flag(false),
                    },
                    Op::Release { id, token, .. } => match get(&jobs, *id)? {
                        Some(mut rec) if rec.state == State::Leased && rec.token == *token => {
                            rec.gen += 1;
                            rec.token = 0;
                            rec.state = State::Pending;
                            rec.attempt = rec.attempt.saturating_sub(1);
                            self.ready.insert(*id, &rec);
                            acts.push(TimerAct::Arm { id: *id, gen: rec.gen, due: rec.deadline });
                            deltas.moved(Some(State::Leased), Some(State::Pending));
                            jobs.insert(*id, rec.encode().as_slice()).map_err(err)?;
                            Outcome::Flag(true)
                        }
                        _ => Outcome::Flag(false),
                    },
                    Op::Nack { id, token, retry_at, error, .. } => match get(&jobs, *id)? {
                        Some(mut rec) if rec.state == State::Leased && rec.token == *token => {
                            deltas.2.failed(&rec.kind);
                            rec.gen += 1;
                            rec.token = 0;
                            if error.is_some() {
                                rec.error = error.clone();
                            }
                            if rec.attempt >= rec.dead_after {
                                rec.state = State::Dead;
                                rec.lease_until = now;
                                acts.push(TimerAct::Disarm { id: *id });
                                if rec.unique.is_some() {
                                    Keys::open(&mut keys, &txn, path)?.release(*id, &rec, now)?;
                                }
                            } else {
                                rec.state = State::Pending;
                                rec.deadline = *retry_at;
                                self.ready.insert(*id, &rec);
                                acts.push(TimerAct::Arm { id: *id, gen: rec.gen, due: rec.deadline });
                            }
                            deltas.moved(Some(State::Leased), Some(rec.state));
                            jobs.insert(*id, rec.encode().as_slice()).map_err(err)?;
                            Outcome::Flag(true)
                        }
                        _ => Outcome::Flag(false),
                    },
                    Op::Kill { id, token, error, .. } => match get(&jobs, *id)? {
                        Some(mut rec) if rec.state == State::Leased && rec.token == *token => {
                            deltas.2.failed(&rec.kind);
                            rec.gen += 1;
                            rec.token = 0;
                            rec.error = Some(error.clone());
                            rec.state = State::Dead;
                            rec.lease_until = now;
                            acts.push(TimerAct::Disarm { id: *id });
                            if rec.unique.is_some() {
                                Keys::open(&mut keys, &txn, path)?.release(*id, &rec, now)?;
                            }
                            deltas.moved(Some(State::Leased), Some(State::Dead));
                            jobs.insert(*id, rec.encode().as_slice()).map_err(err)?;
                            Outcome::Flag(true)
                        }
                        _ => Outcome::Flag(false),
                    },
                    Op::Extend { id, token, lease, .. } => match get(&jobs, *id)? {
                        Some(mut rec) if rec.state == State::Leased && rec.token == *token => {
                            rec.gen += 1;
                            rec.lease_until = now.saturating_add(*lease);
                            acts.push(TimerAct::Arm { id: *id, gen: rec.gen, due: rec.lease_until });
                            jobs.insert(*id, rec.encode().as_slice()).map_err(err)?;
                            Outcome::Flag(true)
                        }
                        _ => Outcome::Flag(false),
                    },
                    Op::CancelIn { id, states, .. } => match get(&jobs, *id)? {
                        Some(rec) if states[rec.state as usize] => {
                            jobs.remove(*id).map_err(err)?;
                            self.ready.remove(*id, &rec);
                            if rec.unique.is_some() && rec.state != State::Dead {
                                Keys::open(&mut keys, &txn, path)?.release(*id, &rec, now)?;
                            }
                            deltas.moved(Some(rec.state), None);
                            acts.push(TimerAct::Disarm { id: *id });
                            Outcome::Flag(true)
                        }
                        _ => Outcome::Flag(false),
                    },
                    Op::Cancel { id, .. } => match get(&jobs, *id)? {
                        Some(rec) => {
                            jobs.remove(*id).map_err(err)?;
                            self.ready.remove(*id, &rec);
                            if rec.unique.is_some() && rec.state != State::Dead {
                                Keys::open(&mut keys, &txn, path)?.release(*id, &rec, now)?;
                            }
                            deltas.moved(Some(rec.state), None);
                            acts.push(TimerAct::Disarm { id: *id });
                            Outcome::Flag(true)
                        }
                        None => Outcome::Flag(false),
                    },
                    Op::Requeue { id, at, .. } => match get(&jobs, *id)? {
                        Some(mut rec) if rec.state == State::Dead => {
                            rec.requeue(*at, self.max_attempts);
                            self.ready.insert(*id, &rec);
                            if rec.unique.is_some() {
                                Keys::open(&mut keys, &txn, path)?
                                    .revive(*id, &rec, now, &|id| get(&jobs, id))?;
                            }
                            acts.push(TimerAct::Arm { id: *id, gen: rec.gen, due: rec.deadline });
                            deltas.moved(Some(State::Dead), Some(State::Pending));
                            jobs.insert(*id, rec.encode().as_slice()).map_err(err)?;
                            Outcome::Flag(true)
                        }
                        _ => Outcome::Flag(false),
                    },
                    Op::ScheduleStore { name, def, next_us, .. } => {
                        let mut table = txn
                            .open_table(SCHEDULES)
                            .map_err(|e| storage_error(path, e.into(), "opening schedules"))?;
                        let old = match table.get(name.as_str()).map_err(err)? {
                            Some(v) => Some(schedules::decode_at(path, name, v.value())?),
                            None => None,
                        };
                        let mut tick_ctx = TickCtx {
                            ready: &mut self.ready,
                            acts: &mut acts,
                            deltas: &mut deltas,
                            max_attempts: self.max_attempts,
                        };
                        if let Some(tick) = old.as_ref().and_then(|o| o.tick) {
                            tick_ctx.delete_pending_tick(&mut jobs, tick, name, path)?;
                        }
                        let tick = match next_us {
                            Some(next) => {
                                Some(tick_ctx.add_tick(&mut jobs, &mut next_id, name, *next, path)?)
                            }
                            None => None,
                        };
                        let sched = Schedule {
                            def: def.clone(),
                            next_us: *next_us,
                            last_us: old.and_then(|o| o.last_us),
                            tick,
                        };
                        table.insert(name.as_str(), sched.encode().as_slice()).map_err(err)?;
                        Outcome::Flag(true)
                    }
                    Op::ScheduleRemove { name, .. } => {
                        let mut table = txn
                            .open_table(SCHEDULES)
                            .map_err(|e| storage_error(path, e.into(), "opening schedules"))?;
                        let old =
                            table.remove(name.as_str()).map_err(err)?.map(|v| Schedule::decode(v.value()));
                        match old {
                            None => Outcome::Flag(false),
                            Some(old) => {
                                let mut tick_ctx = TickCtx {
                                    ready: &mut self.ready,
                                    acts: &mut acts,
                                    deltas: &mut deltas,
                                    max_attempts: self.max_attempts,
                                };
                                if let Some(tick) = old.ok().and_then(|o| o.tick) {
                                    tick_ctx.delete_pending_tick(&mut jobs, tick, name, path)?;
                                }
                                Outcome::Flag(true)
                            }
                        }
                    }
                    Op::ScheduleFire { name, fire, .. } => {
                        let mut table = txn
                            .open_table(SCHEDULES)
                            .map_err(|e| storage_error(path, e.into(), "opening schedules"))?;
                        let old = match table.get(name.as_str()).map_err(err)? {
                            Some(v) => Some(schedules::decode_at(path, name, v.value())?),
                            None => None,
                        };
                        let mut tick_ctx = TickCtx {
                            ready: &mut self.ready,
                            acts: &mut acts,
                            deltas: &mut deltas,
                            max_attempts: self.max_attempts,
                        };
                        match old {
                            Some(mut sched) if sched.next_us.is_some() => {
                                let fired = sched.next_us == Some(fire.expect_next_us);
                                let pending = match sched.tick {
                                    Some(tick) => tick_ctx.pending_tick(&jobs, tick, name, path)?,
                                    None => false,
                                };
                                if fired {
                                    for d in &fire.deadlines_us {
                                        let job = NewJob {
                                            kind: fire.kind.clone(),
                                            payload: fire.payload.clone(),
                                            deadline: d.saturating_mul(1000),
                                            priority: fire.priority,
                                            unique: None,
                                        };
                                        tick_ctx.add(&mut jobs, &mut next_id, &job, path)?;
                                    }
                                    if let (Some(tick), true) = (sched.tick, pending) {
                                        tick_ctx.delete_pending_tick(&mut jobs, tick, name, path)?;
                                    }
                                    sched.next_us = Some(fire.next_run_us);
                                    sched.last_us = Some(fire.last_run_us);
                                    sched.tick = Some(tick_ctx.add_tick(
                                        &mut jobs,
                                        &mut next_id,
                                        name,
                                        fire.next_run_us,
                                        path,
                                    )?);
                                } else if !pending {
                                    let next = sched.next_us.unwrap_or(0);
                                    sched.tick =
                                        Some(tick_ctx.add_tick(&mut jobs, &mut next_id, name, next, path)?);
                                }
                                if fired || !pending {
                                    table.insert(name.as_str(), sched.encode().as_slice()).map_err(err)?;
                                }
                                Outcome::Flag(fired)
                            }
                            _ => Outcome::Flag(false),
                        }
                    }
                    // Answered before the transaction (`commit_batch`).
                    Op::Dead { .. } => Outcome::Flag(false),
                };
                outcomes.push(outcome);
            }
            if !deltas.2 .0.is_empty() {
                tally(&txn, &deltas.2, now)
                    .map_err(|e| storage_error(&self.path, e, "counting throughput"))?;
            }
            let minute = now / 60_000_000_000;
            if let Some(late) = late.filter(|_| minute != self.sampled) {
                // Relaxed: written by this (the writer) thread only.
                let pending = self.counters.pending.load(Ordering::Relaxed);
                sample(&txn, minute, pending, late)
                    .map_err(|e| storage_error(&self.path, e, "sampling the backlog"))?;
                deltas.3 = Some(minute);
            }
            if next_id != self.next_id {
                let mut meta =
                    txn.open_table(META).map_err(|e| storage_error(&self.path, e.into(), "opening meta"))?;
                meta.insert(META_NEXT_ID, next_id).map_err(err)?;
            }
        }
        // A window's durable commit syncs the commits before it: never skipped.
        let syncs = durable && matches!(self.durability, Durability::Window(_));
        if !(dirty || syncs) {
            txn.abort().map_err(|e| storage_error(&self.path, e.into(), "ending a read-only batch"))?;
            return Ok((outcomes, acts, deltas, next_id));
        }
        txn.commit().map_err(|e| storage_error(&self.path, e.into(), "committing"))?;
        Ok((outcomes, acts, deltas, next_id))
    }
}

/// What storing and deleting tick jobs (and a firing's jobs) changes
/// besides the jobs table.
struct TickCtx<'a> {
    ready: &'a mut Ready,
    acts: &'a mut Vec<TimerAct>,
    deltas: &'a mut Deltas,
    max_attempts: u32,
}

impl TickCtx<'_> {
    /// Stores a new job; returns its id.
    fn add(
        &mut self,
        jobs: &mut redb::Table<'_, u64, &[u8]>,
        next_id: &mut u64,
        job: &NewJob,
        path: &std::path::Path,
    ) -> Result<u64, DurableError> {
        let id = *next_id;
        *next_id += 1;
        let rec = new_record(job, self.max_attempts, None);
        jobs.insert(id, rec.encode().as_slice())
            .map_err(|e| storage_error(path, e.into(), "writing a job"))?;
        self.ready.insert(id, &rec);
        self.deltas.moved(None, Some(State::Pending));
        self.acts.push(TimerAct::Arm { id, gen: 1, due: rec.deadline });
        Ok(id)
    }

    /// Stores the tick job of schedule `name`, due at `next_us` (µs).
    fn add_tick(
        &mut self,
        jobs: &mut redb::Table<'_, u64, &[u8]>,
        next_id: &mut u64,
        name: &str,
        next_us: u64,
        path: &std::path::Path,
    ) -> Result<u64, DurableError> {
        let job = NewJob::plain(
            crate::stored::TICK_KIND.to_string(),
            name.as_bytes().to_vec(),
            next_us.saturating_mul(1000),
        );
        self.add(jobs, next_id, &job, path)
    }

    /// Whether job `id` is schedule `name`'s tick job, pending.
    fn pending_tick(
        &self,
        jobs: &redb::Table<'_, u64, &[u8]>,
        id: u64,
        name: &str,
        path: &std::path::Path,
    ) -> Result<bool, DurableError> {
        Ok(tick_record(jobs, id, name, path)?.is_some())
    }

    /// Deletes job `id` if it is schedule `name`'s tick job, pending (a
    /// leased one is a worker firing it, which acks it after).
    fn delete_pending_tick(
        &mut self,
        jobs: &mut redb::Table<'_, u64, &[u8]>,
        id: u64,
        name: &str,
        path: &std::path::Path,
    ) -> Result<(), DurableError> {
        if let Some(rec) = tick_record(jobs, id, name, path)? {
            jobs.remove(id).map_err(|e| storage_error(path, e.into(), "deleting a tick job"))?;
            self.ready.remove(id, &rec);
            self.deltas.moved(Some(State::Pending), None);
            self.acts.push(TimerAct::Disarm { id });
        }
        Ok(())
    }
}

/// Job `id`'s record if it is schedule `name`'s tick job and pending.
fn tick_record(
    jobs: &redb::Table<'_, u64, &[u8]>,
    id: u64,
    name: &str,
    path: &std::path::Path,
) -> Result<Option<Record>, DurableError> {
    let Some(v) = jobs.get(id).map_err(|e| storage_error(path, e.into(), "reading a tick job"))? else {
        return Ok(None);
    };
    let rec = Record::decode(v.value()).map_err(|detail| DurableError::Corrupt {
        path: path.to_path_buf(),
        detail: format!("job {id}: {detail}"),
    })?;
    let is_tick =
        rec.state == State::Pending && rec.kind == crate::stored::TICK_KIND && rec.payload == name.as_bytes();
    Ok(is_tick.then_some(rec))
}

/// The record of a job being stored.
fn new_record(job: &NewJob, max_attempts: u32, unique: Option<UniqueKey>) -> Record {
    Record {
        state: State::Pending,
        attempt: 0,
        dead_after: max_attempts,
        deadline: job.deadline,
        token: 0,
        lease_until: 0,
        gen: 1,
        kind: job.kind.clone(),
        error: None,
        priority: job.priority,
        unique,
        payload: job.payload.clone(),
    }
}

/// Adds a batch's tally to the throughput table, for the minute of `now`
/// (ns), and drops the minutes past [`THROUGHPUT_KEPT`].
fn tally(txn: &redb::WriteTransaction, tally: &Tally, now: u64) -> Result<(), redb::Error> {
    let minute = now / 60_000_000_000;
    let mut table = txn.open_table(THROUGHPUT)?;
    for (kind, (processed, failed)) in &tally.0 {
        let (p, f) = table.get((minute, kind.as_str()))?.map_or((0, 0), |v| v.value());
        table.insert((minute, kind.as_str()), (p + processed, f + failed))?;
    }
    let cutoff = minute.saturating_sub(THROUGHPUT_KEPT);
    if table.first()?.is_some_and(|(k, _)| k.value().0 < cutoff) {
        table.retain_in(..(cutoff, ""), |_, _| false)?;
    }
    Ok(())
}

/// Writes the backlog sample of `minute` unless the file has one (a reopen
/// in the same minute), and drops the minutes past [`THROUGHPUT_KEPT`].
fn sample(txn: &redb::WriteTransaction, minute: u64, pending: u64, late: u64) -> Result<(), redb::Error> {
    let mut table = txn.open_table(SAMPLES)?;
    if table.get(minute)?.is_none() {
        table.insert(minute, (pending, late))?;
    }
    let cutoff = minute.saturating_sub(THROUGHPUT_KEPT);
    if table.first()?.is_some_and(|(k, _)| k.value() < cutoff) {
        table.retain_in(..cutoff, |_, _| false)?;
    }
    Ok(())
}

/// Answers an applied op; returns a job leased for a caller that gave up
/// while its lease was committed, for the writer to give back.
fn answer(op: Op, outcome: Outcome) -> Option<Job> {
    match (op, outcome) {
        (Op::Send { reply, .. }, Outcome::Ids(ids)) => reply.send(Ok(ids)),
        (Op::SendWith { reply, .. }, Outcome::Sent(sent)) => reply.send(Ok(sent)),
        (Op::Lease { reply, .. }, Outcome::Job(job)) => {
            if let Some(Ok(Some(job))) = reply.deliver(Ok(job)) {
                return Some(job);
            }
        }
        (
            Op::Ack { reply, .. }
            | Op::Release { reply, .. }
            | Op::Nack { reply, .. }
            | Op::Kill { reply, .. }
            | Op::Extend { reply, .. }
            | Op::Cancel { reply, .. }
            | Op::CancelIn { reply, .. }
            | Op::Requeue { reply, .. }
            | Op::ScheduleStore { reply, .. }
            | Op::ScheduleRemove { reply, .. }
            | Op::ScheduleFire { reply, .. },
            Outcome::Flag(flag),
        ) => reply.send(Ok(flag)),
        (op, _) => fail(op, DurableError::Storage("internal: outcome does not match its op".into())),
    }
    None
}

fn fail(op: Op, err: DurableError) {
    match op {
        Op::Send { reply, .. } => reply.send(Err(err)),
        Op::SendWith { reply, .. } => reply.send(Err(err)),
        Op::Lease { reply, .. } => reply.send(Err(err)),
        Op::Ack { reply, .. }
        | Op::Release { reply, .. }
        | Op::Nack { reply, .. }
        | Op::Kill { reply, .. }
        | Op::Extend { reply, .. }
        | Op::Cancel { reply, .. }
        | Op::Requeue { reply, .. }
        | Op::ScheduleStore { reply, .. }
        | Op::ScheduleRemove { reply, .. }
        | Op::ScheduleFire { reply, .. } => reply.send(Err(err)),
        Op::Dead { reply, .. } => reply.send(Err(err)),
        Op::CancelIn { reply, .. } => reply.send(Err(err)),
    }
}

fn unopened(path: &std::path::Path) -> DurableError {
    DurableError::Storage(format!(
        "{} could not be reopened after an I/O error; the next call tries again",
        path.display()
    ))
}

/// A read transaction on the shared database, begun on the caller's thread.
pub(crate) fn begin_read(db: &SharedDb, path: &std::path::Path) -> Result<ReadTransaction, DurableError> {
    let db = db.read().unwrap_or_else(PoisonError::into_inner);
    db.as_ref()
        .ok_or_else(|| unopened(path))?
        .begin_read()
        .map_err(|e| storage_error(path, e.into(), "reading"))
}

/// Maps redb's error to ours, naming the file and what was being done.
pub(crate) fn storage_error(path: &std::path::Path, err: redb::Error, doing: &str) -> DurableError {
    match err {
        redb::Error::DatabaseAlreadyOpen | redb::Error::LockProtocolMismatch => {
            DurableError::Locked { path: path.to_path_buf() }
        }
        redb::Error::Corrupted(detail) => DurableError::Corrupt { path: path.to_path_buf(), detail },
        redb::Error::UpgradeRequired(v) => DurableError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("redb file format {v} needs an upgrade this version does not do"),
        },
        redb::Error::Io(source) if source.kind() == std::io::ErrorKind::InvalidData => {
            DurableError::Corrupt { path: path.to_path_buf(), detail: source.to_string() }
        }
        redb::Error::PreviousIo => DurableError::Io {
            context: format!("{doing} {}", path.display()),
            source: std::io::Error::other("an earlier write failed; the file is being reopened"),
        },
        redb::Error::Io(source) => {
            DurableError::Io { context: format!("{doing} {}", path.display()), source }
        }
        redb::Error::TableTypeMismatch { .. } | redb::Error::TableIsMultimap(_) => DurableError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("not a delayq database: {err}"),
        },
        other => DurableError::Storage(format!("{doing} {}: {other}", path.display())),
    }
}
