//! A job as stored: one value per job in the `jobs` table, keyed by its id.
//!
//! Layout (little-endian), 42 bytes of header then the payload:
//!
//! | bytes | field |
//! | --- | --- |
//! | 0 | format (1) |
//! | 1 | state: 0 pending, 1 leased, 2 dead |
//! | 2..6 | attempt: deliveries so far |
//! | 6..10 | dead_after: the attempt after which a failed delivery goes dead |
//! | 10..18 | deadline, ns since the Unix epoch |
//! | 18..26 | lease token (0 when not leased) |
//! | 26..34 | lease end, ns since the Unix epoch |
//! | 34..42 | generation: bumped by every change; a timer names the generation it was armed for |
//! | 42.. | payload |

use crate::job::{Job, JobId};

const FORMAT: u8 = 1;
const HEADER: usize = 42;

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
    pub(crate) payload: Vec<u8>,
}

impl Record {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + self.payload.len());
        out.push(FORMAT);
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
        out.extend_from_slice(&self.payload);
        out
    }

    /// Decodes a stored value; `Err` says what is wrong with it.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Record, String> {
        if bytes.len() < HEADER {
            return Err(format!("record of {} bytes is shorter than its {HEADER}-byte header", bytes.len()));
        }
        if bytes[0] != FORMAT {
            return Err(format!("record format {} is not {FORMAT}", bytes[0]));
        }
        let state = match bytes[1] {
            0 => State::Pending,
            1 => State::Leased,
            2 => State::Dead,
            other => return Err(format!("record state {other} is not 0, 1 or 2")),
        };
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        Ok(Record {
            state,
            attempt: u32_at(2),
            dead_after: u32_at(6),
            deadline: u64_at(10),
            token: u64_at(18),
            lease_until: u64_at(26),
            gen: u64_at(34),
            payload: bytes[HEADER..].to_vec(),
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

    pub(crate) fn to_job(&self, id: JobId) -> Job {
        Job {
            id,
            payload: self.payload.clone(),
            deadline: self.deadline,
            attempt: self.attempt,
            token: if self.state == State::Leased { self.token } else { 0 },
            lease_until: self.lease_until,
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
        bad[0] = 2;
        assert!(Record::decode(&bad).unwrap_err().contains("format 2"));
    }
}
