//! Waking consumers without polling: one task per queue handle, on the
//! queue's runtime, holds a connection that `LISTEN`s on the queue's
//! channel, on which every statement that makes a job pending notifies its
//! due time (`pg_notify`, delivered when its transaction commits: a job
//! sent in a transaction that rolls back wakes nobody). Each notification
//! goes to the handle's [`Notifier`], which the waiting consumers sleep on.
//!
//! Losing the signal: a notification sent while the connection is down is
//! never seen. The connection's driver notices a closed connection at once
//! (the server restarting, a terminated backend) and a silently dead one by
//! a `SELECT 1` after each `liveness` interval, which must answer within
//! `min(liveness, 1 s)`: the one periodic action of an idle handle. Having
//! listened again (reconnecting with backoff, 10 ms doubling to 1 s), it
//! wakes every waiter to re-check the queue. So a missed notification
//! delays a job by at most liveness + `min(liveness, 1 s)` + the reconnect
//! (at most `connect_timeout`); it never loses one.

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio_postgres::AsyncMessage;

use crate::notifier::Notifier;

/// The longest the liveness query may take to answer.
const PING_TIMEOUT: Duration = Duration::from_secs(1);

/// The listener's configuration.
pub(crate) struct Listen {
    pub(crate) config: tokio_postgres::Config,
    /// The channel, as `LISTEN` takes it (a quoted identifier).
    pub(crate) channel: String,
    pub(crate) notifier: Arc<Notifier>,
    pub(crate) liveness: Duration,
}

/// A connection that has run `LISTEN`, and its driver (which must be
/// polled for the notifications to arrive).
struct Listening {
    client: tokio_postgres::Client,
    driver: tokio::task::JoinHandle<()>,
}

impl Listen {
    /// Listens once on `handle`'s runtime (so that opening the queue can
    /// report a failure), then keeps listening in a task there, until the
    /// task is aborted. Waiters are safe while it reconnects: listening
    /// again wakes them all to re-check.
    pub(crate) fn start(self, handle: &Handle) -> Result<tokio::task::JoinHandle<()>, tokio_postgres::Error> {
        let first = handle.block_on(self.listen())?;
        Ok(handle.spawn(self.run(first)))
    }

    /// Connects, spawns the driver that forwards notifications, `LISTEN`s.
    async fn listen(&self) -> Result<Listening, tokio_postgres::Error> {
        let (client, mut connection) = self.config.connect(tokio_postgres::NoTls).await?;
        let notifier = self.notifier.clone();
        let driver = tokio::spawn(async move {
            while let Some(Ok(message)) = poll_fn(|cx| connection.poll_message(cx)).await {
                if let AsyncMessage::Notification(n) = message {
                    notifier.announce(n.payload().parse::<i64>().ok());
                }
            }
        });
        if let Err(e) = client.batch_execute(&format!("LISTEN {}", self.channel)).await {
            driver.abort();
            return Err(e);
        }
        // Listening (again): whatever was notified before is unknown, so
        // every waiter re-checks.
        self.notifier.announce(None);
        Ok(Listening { client, driver })
    }

    async fn run(self, first: Listening) {
        let mut current = Some(first);
        let mut backoff = Duration::from_millis(10);
        loop {
            let Some(Listening { client, mut driver }) = current.take() else {
                match self.listen().await {
                    Ok(l) => {
                        backoff = Duration::from_millis(10);
                        current = Some(l);
                    }
                    Err(_) => {
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(1));
                    }
                }
                continue;
            };
            // Until the driver ends (the connection closed) or the
            // liveness query fails.
            loop {
                tokio::select! {
                    _ = &mut driver => break,
                    _ = tokio::time::sleep(self.liveness) => {
                        let ping = tokio::time::timeout(
                            self.liveness.min(PING_TIMEOUT),
                            client.simple_query("SELECT 1"),
                        );
                        if !matches!(ping.await, Ok(Ok(_))) {
                            driver.abort();
                            break;
                        }
                    }
                }
            }
        }
    }
}
