//! Options for opening a [`DurableQueue`](crate::DurableQueue) (its `open` is in
//! `queue.rs`, which reads this file; this one reads none of the others).

use std::time::Duration;

/// When a change is on disk.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Durability {
    /// Every call that changes the queue (`send_*`, a `reserve` that leases,
    /// `ack`, `nack`, `extend`, `cancel`, `requeue_dead`) returns only after the
    /// commit holding it is fsync'd. Concurrent calls share a commit (group
    /// commit), so this costs one fsync per batch, not per job. The default.
    #[default]
    Immediate,
    /// Calls return once their change is committed to the file *without*
    /// fsync; an fsync follows within the window (Beanstalkd's `-f ms`).
    /// **A crash — of the machine or of this process — can lose every change
    /// made in the last window**, including sends that returned `Ok` and acks
    /// (an acked job may then be delivered again, with `attempt()` not
    /// counting the lost lease). Dropping the queue syncs before it returns.
    Window(Duration),
}

/// Options for [`DurableQueue`](crate::DurableQueue): `Builder::new().max_attempts(5).open(path)`.
#[derive(Clone, Debug)]
pub struct Builder {
    pub(crate) max_payload: usize,
    pub(crate) max_attempts: u32,
    pub(crate) durability: Durability,
    pub(crate) verify_on_open: bool,
    pub(crate) cache_size: Option<usize>,
    pub(crate) priority_aging: Option<Duration>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// The defaults: payloads up to 1 MiB, 25 deliveries before a job is dead
    /// (Sidekiq's and Faktory's default), [`Durability::Immediate`], every page
    /// checksummed on open.
    pub fn new() -> Builder {
        Builder {
            max_payload: 1 << 20,
            max_attempts: 25,
            durability: Durability::Immediate,
            verify_on_open: true,
            cache_size: None,
            priority_aging: None,
        }
    }

    /// The largest payload `send_*` accepts, in bytes; larger ones fail with
    /// [`DurableError::PayloadTooLarge`](crate::DurableError::PayloadTooLarge). At most 1 GiB.
    pub fn max_payload(mut self, bytes: usize) -> Builder {
        self.max_payload = bytes;
        self
    }

    /// How many deliveries a job gets: after the `n`th delivery's lease expires
    /// or is nacked, the job moves to the dead set instead of being retried.
    /// At least 1.
    pub fn max_attempts(mut self, n: u32) -> Builder {
        self.max_attempts = n;
        self
    }

    /// When changes reach the disk; see [`Durability`].
    pub fn durability(mut self, durability: Durability) -> Builder {
        self.durability = durability;
        self
    }

    /// Whether opening reads the whole file and checks every page's checksum
    /// (redb's integrity check) before trusting it. On by default: a file
    /// altered outside redb (a truncated copy, a flipped byte) then fails to
    /// open with [`DurableError::Corrupt`](crate::DurableError::Corrupt). Turning it off makes opening a large
    /// file faster; redb still checks after a crash.
    pub fn verify_on_open(mut self, verify: bool) -> Builder {
        self.verify_on_open = verify;
        self
    }

    /// The storage engine's page cache, in bytes (redb's default otherwise).
    pub fn cache_size(mut self, bytes: usize) -> Builder {
        self.cache_size = Some(bytes);
        self
    }

    /// Ages due jobs: a due job's effective priority is its priority less
    /// one per `step` it has been due (`priority - floor((now - deadline) /
    /// step)`, at least 0), and due jobs are reserved by effective priority,
    /// then deadline, then send order. A job of priority `p` thus waits at
    /// most about `p * step` behind a stream of more urgent ones. Off by
    /// default (due jobs go by priority alone). A step under 1 ms is
    /// [`InvalidArgument`](crate::DurableError::InvalidArgument) at `open`.
    pub fn priority_aging(mut self, step: Duration) -> Builder {
        self.priority_aging = Some(step);
        self
    }
}
