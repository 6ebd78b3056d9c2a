//! The transactional enqueue: jobs sent on the caller's own connection,
//! inside the caller's transaction, so that they commit with the business
//! data or not at all — no outbox to write by hand. The send statement is
//! the queue's own (`send` of the schema, `schema.rs`); its `pg_notify` is
//! transactional too, so the wake-up goes out when the transaction commits
//! and never for one that rolls back.
//!
//! The blocking calls take what the `postgres` crate gives (a
//! [`postgres::Transaction`], or a [`postgres::Client`] in autocommit), the
//! async ones (`AsyncPgQueue`, `aio.rs`) what tokio-postgres gives; both
//! through the crate's `GenericClient` trait. The connection must reach the
//! database the queue was opened on (the queue's open migrated its schema).

use std::time::{Duration, SystemTime};

use super::ops::{at_us, delay_us};
use super::pool::pg_error;
use super::schema::Stmt;
use super::{batch, PgQueue};
use crate::error::DurableError;
use crate::job::{check_kind, JobId};
#[cfg(feature = "serde")]
use crate::kind::JobKind;

impl PgQueue {
    /// Stores a job due `delay` from the server's now, inside the caller's
    /// transaction `tx`: workers see it only once `tx` commits (and are woken
    /// then), and it is gone if `tx` rolls back. The id is known at once.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use delayq_durable::PgQueue;
    ///
    /// let q = PgQueue::connect("postgres://app@127.0.0.1/app", "receipts")?;
    /// let mut db = postgres::Client::connect("postgres://app@127.0.0.1/app", postgres::NoTls)?;
    /// let mut tx = db.transaction()?;
    /// tx.execute("INSERT INTO orders (id, total) VALUES ($1, $2)", &[&12_i64, &990_i64])?;
    /// q.send_after_in(&mut tx, b"send receipt for order 12", Duration::from_secs(600))?;
    /// tx.commit()?; // the order and its job, or neither
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn send_after_in(
        &self,
        tx: &mut impl postgres::GenericClient,
        payload: &[u8],
        delay: Duration,
    ) -> Result<JobId, DurableError> {
        self.send_kind_after_in(tx, "", payload, delay)
    }

    /// As [`send_after_in`](Self::send_after_in), due at `at` (as
    /// [`send_at`](Self::send_at)).
    pub fn send_at_in(
        &self,
        tx: &mut impl postgres::GenericClient,
        payload: &[u8],
        at: SystemTime,
    ) -> Result<JobId, DurableError> {
        self.send_kind_at_in(tx, "", payload, at)
    }

    /// As [`send_after_in`](Self::send_after_in), with a kind.
    pub fn send_kind_after_in(
        &self,
        tx: &mut impl postgres::GenericClient,
        kind: &str,
        payload: &[u8],
        delay: Duration,
    ) -> Result<JobId, DurableError> {
        check_kind(kind)?;
        let due = delay_us(delay)?;
        Ok(self.send_in(tx, &[kind], &[payload], &[due], true)?[0])
    }

    /// As [`send_at_in`](Self::send_at_in), with a kind.
    pub fn send_kind_at_in(
        &self,
        tx: &mut impl postgres::GenericClient,
        kind: &str,
        payload: &[u8],
        at: SystemTime,
    ) -> Result<JobId, DurableError> {
        check_kind(kind)?;
        let due = at_us(at)?;
        Ok(self.send_in(tx, &[kind], &[payload], &[due], false)?[0])
    }

    /// Stores a typed job (its [`JobKind::KIND`], the value as JSON) inside
    /// the caller's transaction, due at `at` (feature `serde`).
    #[cfg(feature = "serde")]
    pub fn enqueue_in<K: JobKind>(
        &self,
        tx: &mut impl postgres::GenericClient,
        job: &K,
        at: SystemTime,
    ) -> Result<JobId, DurableError> {
        self.send_kind_at_in(tx, K::KIND, &crate::kind::encode(job)?, at)
    }

    /// As [`enqueue_in`](Self::enqueue_in), due `delay` from the server's now.
    #[cfg(feature = "serde")]
    pub fn enqueue_after_in<K: JobKind>(
        &self,
        tx: &mut impl postgres::GenericClient,
        job: &K,
        delay: Duration,
    ) -> Result<JobId, DurableError> {
        self.send_kind_after_in(tx, K::KIND, &crate::kind::encode(job)?, delay)
    }

    /// Stores several jobs in one statement inside the caller's transaction.
    pub fn send_many_in(
        &self,
        tx: &mut impl postgres::GenericClient,
        jobs: &[(&[u8], SystemTime)],
    ) -> Result<Vec<JobId>, DurableError> {
        let (kinds, payloads, dues) = batch(jobs)?;
        self.send_in(tx, &kinds, &payloads, &dues, false)
    }

    fn send_in(
        &self,
        tx: &mut impl postgres::GenericClient,
        kinds: &[&str],
        payloads: &[&[u8]],
        dues: &[i64],
        relative: bool,
    ) -> Result<Vec<JobId>, DurableError> {
        let inner = self.inner();
        inner.check_open()?;
        inner.check_payloads(payloads.iter().copied())?;
        if dues.is_empty() {
            return Ok(Vec::new());
        }
        let last = inner.max_attempts as i32;
        let rows = tx
            .query(inner.sql.text(Stmt::Send), &[&inner.name, &last, &kinds, &payloads, &dues, &relative])
            .map_err(|e| pg_error(&e, "sending in the caller's transaction"))?;
        Ok(rows.iter().map(|r| JobId(r.get::<_, i64>(0) as u64)).collect())
    }
}
