//! Uniqueness keys (`send_with` with a [`Unique`](crate::Unique)), kept by
//! the writer in two redb tables beside the jobs:
//!
//! - `delayq_unique`: key → (job id, the states of the job that hold the key,
//!   held-until in ns since the epoch — 0: no period). The job's record
//!   holds the same key, states and until (record format 3), so the job's
//!   deletion finds its mapping.
//! - `delayq_unique_expiry`: (until, key) → (): mappings whose job is gone
//!   (or dead) but whose period still runs, swept lazily: a few at each
//!   unique send.
//!
//! A key is held iff its mapping's period still runs, or its job exists in a
//! state the mapping's states cover (dead is never covered). Every step is
//! part of the writer's batch transaction, and the writer applies ops one
//! after the other, so a check and the store that follows are atomic: two
//! racing sends of one key store one job.
//!
//! No unbounded growth: a mapping goes when its job is deleted or dies,
//! unless its period runs (then the expiry table holds it until a sweep
//! after the period); a mapping replaced by a newer send is overwritten.

use std::path::{Path, PathBuf};

use redb::{ReadableTable, Table, TableDefinition, WriteTransaction};

use crate::error::DurableError;

use crate::options::UniqueStates;
use crate::record::{states_byte, states_of, Record, State};

pub(crate) const UNIQUE: TableDefinition<'_, &str, (u64, u8, u64)> = TableDefinition::new("delayq_unique");
pub(crate) const UNIQUE_EXPIRY: TableDefinition<'_, (u64, &str), ()> =
    TableDefinition::new("delayq_unique_expiry");

/// How many expired mappings a unique send sweeps.
const SWEEP: usize = 8;

/// The two tables, opened in the batch's transaction.
pub(crate) struct Keys<'t> {
    map: Table<'t, &'static str, (u64, u8, u64)>,
    expiry: Table<'t, (u64, &'static str), ()>,
    path: PathBuf,
}

/// Reads a job's record (`None`: no such job).
pub(crate) type Get<'a> = dyn Fn(u64) -> Result<Option<Record>, DurableError> + 'a;

impl<'t> Keys<'t> {
    /// The tables, opened in `txn` on first use (most batches need none).
    pub(crate) fn open<'s>(
        slot: &'s mut Option<Keys<'t>>,
        txn: &'t WriteTransaction,
        path: &Path,
    ) -> Result<&'s mut Keys<'t>, DurableError> {
        if slot.is_none() {
            let err =
                |e: redb::TableError| super::storage_error(path, e.into(), "opening the uniqueness keys");
            *slot = Some(Keys {
                map: txn.open_table(UNIQUE).map_err(err)?,
                expiry: txn.open_table(UNIQUE_EXPIRY).map_err(err)?,
                path: path.to_path_buf(),
            });
        }
        Ok(slot.as_mut().expect("just opened"))
    }

    /// The job holding `key` at `now`, if one does.
    pub(crate) fn holder(&self, key: &str, now: u64, get: &Get<'_>) -> Result<Option<u64>, DurableError> {
        let Some((id, states, until)) = self.map.get(key).map_err(st(&self.path))?.map(|v| v.value()) else {
            return Ok(None);
        };
        Ok(holds(id, states, until, now, get)?.then_some(id))
    }

    /// Maps `key` to the job `id` just stored (replacing a stale mapping)
    /// and sweeps a few mappings whose period ran out.
    pub(crate) fn hold(
        &mut self,
        key: &str,
        id: u64,
        states: UniqueStates,
        until: u64,
        now: u64,
        get: &Get<'_>,
    ) -> Result<(), DurableError> {
        self.map.insert(key, (id, states_byte(states), until)).map_err(st(&self.path))?;
        let mut due = Vec::new();
        for entry in self.expiry.range(..(now, "")).map_err(st(&self.path))?.take(SWEEP) {
            let (k, _) = entry.map_err(st(&self.path))?;
            let (until, key) = k.value();
            due.push((until, key.to_string()));
        }
        for (until, key) in due {
            self.expiry.remove((until, key.as_str())).map_err(st(&self.path))?;
            let mapped = self.map.get(key.as_str()).map_err(st(&self.path))?.map(|v| v.value());
            if let Some((id, states, u)) = mapped {
                if u == until && !holds(id, states, 0, now, get)? {
                    self.map.remove(key.as_str()).map_err(st(&self.path))?;
                }
            }
        }
        Ok(())
    }

    /// The job `id`, whose record is `rec`, is deleted or dead: its mapping
    /// goes, or waits in the expiry table while its period runs.
    pub(crate) fn release(&mut self, id: u64, rec: &Record, now: u64) -> Result<(), DurableError> {
        let Some(u) = &rec.unique else { return Ok(()) };
        let Some((holder, _, until)) =
            self.map.get(u.key.as_str()).map_err(st(&self.path))?.map(|v| v.value())
        else {
            return Ok(());
        };
        if holder != id {
            return Ok(());
        }
        if until > now {
            self.expiry.insert((until, u.key.as_str()), ()).map_err(st(&self.path))?;
        } else {
            self.map.remove(u.key.as_str()).map_err(st(&self.path))?;
        }
        Ok(())
    }

    /// A dead job `id` is pending again: it holds its key again unless
    /// another job holds it now.
    pub(crate) fn revive(
        &mut self,
        id: u64,
        rec: &Record,
        now: u64,
        get: &Get<'_>,
    ) -> Result<(), DurableError> {
        let Some(u) = &rec.unique else { return Ok(()) };
        if self.holder(&u.key, now, get)?.is_some_and(|holder| holder != id) {
            return Ok(());
        }
        self.map.insert(u.key.as_str(), (id, states_byte(u.states), u.until)).map_err(st(&self.path))?;
        Ok(())
    }
}

/// Whether the job `id`, mapped with `states` and `until`, holds its key.
fn holds(id: u64, states: u8, until: u64, now: u64, get: &Get<'_>) -> Result<bool, DurableError> {
    if until > now {
        return Ok(true);
    }
    let states = states_of(states).unwrap_or(UniqueStates::Both);
    Ok(match get(id)? {
        Some(rec) if rec.state != State::Dead => states.covers(rec.state == State::Leased),
        _ => false,
    })
}

fn st(path: &Path) -> impl Fn(redb::StorageError) -> DurableError + '_ {
    move |e| super::storage_error(path, e.into(), "writing a uniqueness key")
}
