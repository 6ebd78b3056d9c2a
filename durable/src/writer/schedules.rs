//! The schedule store (`stored.rs`) in the embedded file: one redb table,
//! `delayq_schedules`, name → the schedule's record. Its changes are writer
//! ops (`Op::ScheduleStore`, `ScheduleRemove`, `ScheduleFire` in
//! `writer.rs`), each part of one batch transaction with the tick jobs it
//! adds and deletes; reads (`schedule_get`, `schedule_list`) run in a read
//! transaction on the caller's thread.
//!
//! Record layout (little-endian): byte 0 format (1); byte 1 flags (bit 0: a
//! next tick, bit 1: a last tick, bit 2: a pending tick job); 2..10 next
//! tick (µs since the epoch); 10..18 last tick (µs); 18..26 the pending
//! tick job's id; 26.. the definition (opaque).

use std::path::Path;

use redb::{ReadTransaction, ReadableTable, TableDefinition};

use crate::error::DurableError;
use crate::stored::StoredSchedule;

pub(crate) const SCHEDULES: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("delayq_schedules");

const HEADER: usize = 26;

/// A schedule as stored: what [`StoredSchedule`] says, and its pending tick job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Schedule {
    pub(crate) def: Vec<u8>,
    pub(crate) next_us: Option<u64>,
    pub(crate) last_us: Option<u64>,
    /// The id of its pending tick job, if it has one (it may have been
    /// leased or deleted since: checked against the job).
    pub(crate) tick: Option<u64>,
}

impl Schedule {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + self.def.len());
        out.push(1);
        let flags = u8::from(self.next_us.is_some())
            | u8::from(self.last_us.is_some()) << 1
            | u8::from(self.tick.is_some()) << 2;
        out.push(flags);
        for v in [self.next_us, self.last_us, self.tick] {
            out.extend_from_slice(&v.unwrap_or(0).to_le_bytes());
        }
        out.extend_from_slice(&self.def);
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Schedule, String> {
        if bytes.len() < HEADER || bytes[0] != 1 {
            return Err(format!("schedule record of {} bytes is not format 1", bytes.len()));
        }
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let flag = |bit: u8| bytes[1] & (1 << bit) != 0;
        Ok(Schedule {
            next_us: flag(0).then(|| u64_at(2)),
            last_us: flag(1).then(|| u64_at(10)),
            tick: flag(2).then(|| u64_at(18)),
            def: bytes[HEADER..].to_vec(),
        })
    }

    pub(crate) fn stored(self, name: &str) -> StoredSchedule {
        StoredSchedule {
            name: name.to_string(),
            def: self.def,
            next_run_us: self.next_us,
            last_run_us: self.last_us,
        }
    }
}

fn corrupt(path: &Path, name: &str, detail: String) -> DurableError {
    DurableError::Corrupt { path: path.to_path_buf(), detail: format!("schedule {name:?}: {detail}") }
}

/// Decodes schedule `name`'s stored record; `Corrupt`, naming it, if it does not decode.
pub(crate) fn decode_at(path: &Path, name: &str, bytes: &[u8]) -> Result<Schedule, DurableError> {
    Schedule::decode(bytes).map_err(|d| corrupt(path, name, d))
}

/// Reads the schedules named in `range` (one, or all), by name.
pub(crate) fn read(
    txn: &ReadTransaction,
    path: &Path,
    only: Option<&str>,
) -> Result<Vec<StoredSchedule>, DurableError> {
    let err = |e: redb::StorageError| super::storage_error(path, e.into(), "reading schedules");
    let table = match txn.open_table(SCHEDULES) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(super::storage_error(path, e.into(), "reading schedules")),
    };
    let mut out = Vec::new();
    if let Some(name) = only {
        if let Some(v) = table.get(name).map_err(err)? {
            out.push(decode_at(path, name, v.value())?.stored(name));
        }
        return Ok(out);
    }
    for entry in table.iter().map_err(err)? {
        let (k, v) = entry.map_err(err)?;
        let name = k.value();
        out.push(decode_at(path, name, v.value())?.stored(name));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_record_round_trips() {
        for s in [
            Schedule { def: b"cron".to_vec(), next_us: Some(5), last_us: None, tick: Some(9) },
            Schedule { def: Vec::new(), next_us: None, last_us: Some(3), tick: None },
        ] {
            assert_eq!(Schedule::decode(&s.encode()).unwrap(), s);
        }
        assert!(Schedule::decode(&[1, 0]).is_err());
    }
}
