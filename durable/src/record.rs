//! A job as stored: one value per job in the `jobs` table, keyed by its id.
//!
//! Layout (little-endian), 42 bytes of header then the payload:
//!
//! | bytes | field |
//! | --- | --- |
//! | 0 | format: 1, or 2 when the job has a kind or a last error |
//! | 1 | state: 0 pending, 1 leased, 2 dead |
//! | 2..6 | attempt: deliveries so far |
//! | 6..10 | dead_after: the attempt after which a failed delivery goes dead |
//! | 10..18 | deadline, ns since the Unix epoch |
//! | 18..26 | lease token (0 when not leased) |
//! | 26..34 | lease end, ns since the Unix epoch |
//! | 34..42 | generation: bumped by every change; a timer names the generation it was armed for |
//! | 42.. | format 1: payload |
//! | 42..44 | format 2: kind length K (at most [`MAX_KIND`]) |
//! | 44..48 | format 2: last error length E (0: none; at most [`MAX_ERROR`]) |
//! | 48..48+K+E | format 2: kind, then last error (UTF-8) |
//! | 48+K+E.. | format 2: payload |
//! | 42..48 | format 3: kind length K, last error length E (as format 2) |
//! | 48 | format 3: priority, `0..=9` |
//! | 49 | format 3: uniqueness key length U (0: none) |
//! | 50 | format 3: the covered states of the key (0 pending, 1 leased, 2 both) |
//! | 51..59 | format 3: the key is held until then whatever the job's state (ns since the epoch; 0: no period) |
//! | 59..59+K+E+U | format 3: kind, last error, key (UTF-8) |
//! | 59+K+E+U.. | format 3: payload |
//!
//! A job with neither a kind nor a last error is written in format 1, byte for
//! byte what the first version wrote, so a file used without kinds stays
//! readable by that version. Format 2 was added with the worker runtime
//! (kinds, `last_error`); a version that predates it refuses such a record as
//! `Corrupt`, naming the job, rather than misreading it — no job is skipped.
//! Format 3 (issue 33: priorities, uniqueness keys) is written only for a job
//! with a priority other than 0 or a key, so files used without them stay
//! readable by the versions before it, in the same way.

#[cfg(test)]
use crate::job::clip_error;
use crate::job::{Job, JobId, MAX_ERROR, MAX_KIND};
use crate::options::{UniqueStates, MAX_UNIQUE_KEY};

const FORMAT_PLAIN: u8 = 1;
const FORMAT_KIND: u8 = 2;
const FORMAT_PRIORITY: u8 = 3;
const HEADER: usize = 42;
const HEADER_KIND: usize = HEADER + 6;
const HEADER_PRIORITY: usize = HEADER_KIND + 11;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum State {
    Pending,
    Leased,
    Dead,
}

#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub(crate) state: State,
    pub(crate) attempt: u32,
    pub(crate) dead_after: u32,
    pub(crate) deadline: u64,
    pub(crate) token: u64,
    pub(crate) lease_until: u64,
    pub(crate) gen: u64,
    /// The job's kind (`""`: none).
    pub(crate) kind: String,
    /// The message of the last failed attempt that gave one.
    pub(crate) error: Option<String>,
    /// `0..=9`, 0 reserved first among due jobs.
    pub(crate) priority: u8,
    /// The uniqueness key the job was sent with, if any.
    pub(crate) unique: Option<UniqueKey>,
    pub(crate) payload: Vec<u8>,
}

/// A job's uniqueness key as stored in its record (the `unique` table maps
/// the key back to the job, `writer.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UniqueKey {
    pub(crate) key: String,
    /// Which states of the job hold the key.
    pub(crate) states: UniqueStates,
    /// The key is held until then whatever became of the job (ns since the
    /// epoch; 0: no period).
    pub(crate) until: u64,
}

pub(crate) fn states_byte(states: UniqueStates) -> u8 {
    match states {
        UniqueStates::Pending => 0,
        UniqueStates::Leased => 1,
        UniqueStates::Both => 2,
    }
}

pub(crate) fn states_of(byte: u8) -> Option<UniqueStates> {
    match byte {
        0 => Some(UniqueStates::Pending),
        1 => Some(UniqueStates::Leased),
        2 => Some(UniqueStates::Both),
        _ => None,
    }
}

impl Record {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let error = self.error.as_deref().unwrap_or("");
        let v3 = self.priority != 0 || self.unique.is_some();
        let plain = !v3 && self.kind.is_empty() && error.is_empty();
        let key = self.unique.as_ref().map_or("", |u| u.key.as_str());
        let mut out = Vec::with_capacity(
            HEADER_PRIORITY + self.kind.len() + error.len() + key.len() + self.payload.len(),
        );
        out.push(if plain {
            FORMAT_PLAIN
        } else if v3 {
            FORMAT_PRIORITY
        } else {
            FORMAT_KIND
        });
        out.push(match self.state {
            State::Pending => 0,
            State::Leased => 1,
            State::Dead => 2,
        });
        out.extend_from_slice(&self.attempt.to_le_bytes());
        out.extend_from_slice(&self.dead_after.to_le_bytes());
        out.extend_from_slice(&self.deadline.to_le_bytes());
        out.extend_from_slice(&self.token.to_le_bytes());
        out.extend_from_slice(&self.lease_until.to_le_bytes());
        out.extend_from_slice(&self.gen.to_le_bytes());
        if !plain {
            // Both lengths are bounded by the callers (`MAX_KIND`, `MAX_ERROR`).
            out.extend_from_slice(&(self.kind.len() as u16).to_le_bytes());
            out.extend_from_slice(&(error.len() as u32).to_le_bytes());
            if v3 {
                out.push(self.priority);
                // Bounded by the callers (`MAX_UNIQUE_KEY`).
                out.push(key.len() as u8);
                let u = self.unique.as_ref();
                out.push(states_byte(u.map_or(UniqueStates::Both, |u| u.states)));
                out.extend_from_slice(&u.map_or(0, |u| u.until).to_le_bytes());
            }
            out.extend_from_slice(self.kind.as_bytes());
            out.extend_from_slice(error.as_bytes());
            out.extend_from_slice(key.as_bytes());
        }
        out.extend_from_slice(&self.payload);
        out
    }

    /// Decodes a stored value; `Err` says what is wrong with it.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Record, String> {
        if bytes.len() < HEADER {
            return Err(format!("record of {} bytes is shorter than its {HEADER}-byte header", bytes.len()));
        }
        if !(FORMAT_PLAIN..=FORMAT_PRIORITY).contains(&bytes[0]) {
            return Err(format!("record format {} is not {FORMAT_PLAIN} to {FORMAT_PRIORITY}", bytes[0]));
        }
        let state = match bytes[1] {
            0 => State::Pending,
            1 => State::Leased,
            2 => State::Dead,
            other => return Err(format!("record state {other} is not 0, 1 or 2")),
        };
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let (kind, error, priority, unique, payload_at) = if bytes[0] == FORMAT_PLAIN {
            (String::new(), None, 0, None, HEADER)
        } else {
            let header = if bytes[0] == FORMAT_KIND { HEADER_KIND } else { HEADER_PRIORITY };
            if bytes.len() < header {
                return Err(format!(
                    "record of {} bytes is shorter than its {header}-byte header",
                    bytes.len()
                ));
            }
            let k = u16::from_le_bytes([bytes[42], bytes[43]]) as usize;
            let e = u32_at(44) as usize;
            let (priority, u) =
                if header == HEADER_PRIORITY { (bytes[48], bytes[49] as usize) } else { (0, 0) };
            if priority > crate::options::PRIORITY_LOWEST {
                return Err(format!("record's priority {priority} is not in 0..=9"));
            }
            if k > MAX_KIND || e > MAX_ERROR || u > MAX_UNIQUE_KEY || bytes.len() - header < k + e + u {
                return Err(format!(
                    "record's kind ({k} bytes), error ({e} bytes) or key ({u} bytes) overruns it"
                ));
            }
            let text = |from: usize, len: usize, what: &str| {
                String::from_utf8(bytes[from..from + len].to_vec())
                    .map_err(|_| format!("record's {what} is not UTF-8"))
            };
            let kind = text(header, k, "kind")?;
            let error = text(header + k, e, "error")?;
            let unique = if u == 0 {
                None
            } else {
                let states = states_of(bytes[50])
                    .ok_or_else(|| format!("record's key states {} is not 0, 1 or 2", bytes[50]))?;
                Some(UniqueKey { key: text(header + k + e, u, "key")?, states, until: u64_at(51) })
            };
            (kind, (!error.is_empty()).then_some(error), priority, unique, header + k + e + u)
        };
        Ok(Record {
            state,
            attempt: u32_at(2),
            dead_after: u32_at(6),
            deadline: u64_at(10),
            token: u64_at(18),
            lease_until: u64_at(26),
            gen: u64_at(34),
            kind,
            error,
            priority,
            unique,
            payload: bytes[payload_at..].to_vec(),
        })
    }

    /// When this record's timer should fire: its deadline while pending, its
    /// lease end while leased, never while dead.
    pub(crate) fn due(&self) -> Option<u64> {
        match self.state {
            State::Pending => Some(self.deadline),
            State::Leased => Some(self.lease_until),
            State::Dead => None,
        }
    }

    /// A dead record back to pending, due at `at` (ns), with a fresh
    /// allowance of `max_attempts` deliveries (its attempt count goes on).
    pub(crate) fn requeue(&mut self, at: u64, max_attempts: u32) {
        self.gen += 1;
        self.state = State::Pending;
        self.token = 0;
        self.deadline = at;
        self.dead_after = self.attempt.saturating_add(max_attempts);
    }

    pub(crate) fn to_job(&self, id: JobId) -> Job {
        Job {
            id,
            payload: self.payload.clone(),
            deadline: self.deadline,
            attempt: self.attempt,
            token: if self.state == State::Leased { self.token } else { 0 },
            lease_until: self.lease_until,
            kind: self.kind.clone(),
            last_error: self.error.clone(),
            priority: self.priority,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_short_or_foreign_bytes_are_refused() {
        let r = Record {
            state: State::Leased,
            attempt: 3,
            dead_after: 5,
            deadline: 1_700_000_000_123_456_789,
            token: 42,
            lease_until: u64::MAX - 1,
            gen: 9,
            kind: String::new(),
            error: None,
            priority: 0,
            unique: None,
            payload: b"hello".to_vec(),
        };
        let bytes = r.encode();
        assert_eq!(bytes.len(), HEADER + 5);
        let back = Record::decode(&bytes).unwrap();
        assert_eq!(back.state, State::Leased);
        assert_eq!((back.attempt, back.dead_after, back.token, back.gen), (3, 5, 42, 9));
        assert_eq!((back.deadline, back.lease_until), (r.deadline, r.lease_until));
        assert_eq!(back.payload, b"hello");
        assert!(Record::decode(&bytes[..HEADER - 1]).unwrap_err().contains("shorter"));
        let mut bad = bytes.clone();
        bad[1] = 7;
        assert!(Record::decode(&bad).unwrap_err().contains("state 7"));
        bad[0] = 4;
        assert!(Record::decode(&bad).unwrap_err().contains("format 4"));
    }

    #[test]
    fn a_record_with_a_kind_or_an_error_round_trips_in_format_2_and_one_without_stays_format_1() {
        let mut r = Record {
            state: State::Pending,
            attempt: 2,
            dead_after: 5,
            deadline: 7,
            token: 0,
            lease_until: 0,
            gen: 3,
            kind: "email.send".into(),
            error: Some("smtp: 451 try later".into()),
            priority: 0,
            unique: None,
            payload: b"{}".to_vec(),
        };
        let bytes = r.encode();
        assert_eq!(bytes[0], FORMAT_KIND);
        let back = Record::decode(&bytes).unwrap();
        assert_eq!((back.kind.as_str(), back.error.as_deref()), ("email.send", Some("smtp: 451 try later")));
        assert_eq!((back.attempt, back.gen, back.payload.as_slice()), (2, 3, &b"{}"[..]));
        // A lying length is refused, not read past the end.
        let mut bad = bytes.clone();
        bad[44] = 0xff;
        assert!(Record::decode(&bad).unwrap_err().contains("overruns"), "{:?}", Record::decode(&bad));
        assert!(Record::decode(&bytes[..HEADER_KIND - 1]).unwrap_err().contains("shorter"));
        // Kind only, error only.
        r.error = None;
        let back = Record::decode(&r.encode()).unwrap();
        assert_eq!((back.kind.as_str(), back.error), ("email.send", None));
        r.kind.clear();
        r.error = Some("boom".into());
        let back = Record::decode(&r.encode()).unwrap();
        assert_eq!((back.kind.as_str(), back.error.as_deref()), ("", Some("boom")));
        // Neither: the first version's bytes exactly.
        r.error = None;
        let bytes = r.encode();
        assert_eq!((bytes[0], bytes.len()), (FORMAT_PLAIN, HEADER + 2));
    }

    #[test]
    fn errors_are_clipped_at_a_character_boundary_and_never_empty() {
        assert_eq!(clip_error(""), "(no message)");
        let long = "é".repeat(MAX_ERROR); // 2 bytes each
        let clipped = clip_error(&long);
        assert!(clipped.len() <= MAX_ERROR && clipped.len() > MAX_ERROR - 2);
        assert!(clipped.chars().all(|c| c == 'é'));
    }

    #[test]
    fn a_record_with_a_priority_or_a_key_round_trips_in_format_3() {
        let mut r = Record {
            state: State::Pending,
            attempt: 0,
            dead_after: 25,
            deadline: 11,
            token: 0,
            lease_until: 0,
            gen: 1,
            kind: "report".into(),
            error: Some("e".into()),
            priority: 7,
            unique: Some(UniqueKey { key: "report-42".into(), states: UniqueStates::Pending, until: 99 }),
            payload: b"p".to_vec(),
        };
        let bytes = r.encode();
        assert_eq!(bytes[0], FORMAT_PRIORITY);
        let back = Record::decode(&bytes).unwrap();
        assert_eq!((back.priority, back.kind.as_str(), back.error.as_deref()), (7, "report", Some("e")));
        assert_eq!(back.unique, r.unique);
        assert_eq!(back.payload, b"p");
        assert_eq!(back.to_job(JobId(1)).priority(), 7);
        let mut bad = bytes.clone();
        bad[48] = 10;
        assert!(Record::decode(&bad).unwrap_err().contains("priority 10"));
        bad = bytes.clone();
        bad[49] = 200;
        assert!(Record::decode(&bad).unwrap_err().contains("overruns"));
        // A priority alone, no key; no priority and no key: format 2.
        r.unique = None;
        let back = Record::decode(&r.encode()).unwrap();
        assert_eq!((back.priority, back.unique), (7, None));
        r.priority = 0;
        assert_eq!(r.encode()[0], FORMAT_KIND);
    }
}
