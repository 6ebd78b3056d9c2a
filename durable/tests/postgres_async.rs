//! The PostgreSQL backend's async client (`AsyncPgQueue`, feature
//! `postgres-async`) against a private server: the conformance suite on
//! `futures::executor::block_on` (no tokio runtime around it: its
//! statements run on the queue's own), reserve futures dropped while
//! waiting, and the transactional enqueue on the application's
//! tokio-postgres transaction.
#![cfg(feature = "postgres-async")]

mod async_adapter;
mod conformance;
mod pg_server;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use async_adapter::{poll_once_and_drop, BlockOn, CountingWaker, Futures};
use conformance::{ms, Opts};
use delayq_durable::{AsyncJobQueue, AsyncPgQueue, PgQueue};
use pg_server::{unique, PgServer};

fn shared() -> Option<&'static PgServer> {
    static SHARED: OnceLock<Option<&'static PgServer>> = OnceLock::new();
    *SHARED
        .get_or_init(|| pg_server::available().then(|| pg_server::start_shared(|| PgServer::start("async"))))
}

fn open_async(opts: Opts) -> Option<BlockOn<AsyncPgQueue, Futures>> {
    let server = shared()?;
    let queue = PgQueue::builder()
        .max_attempts(opts.max_attempts)
        .max_payload(opts.max_payload)
        .connect(&server.url(), &unique("aconf"))
        .unwrap();
    Some(BlockOn { q: AsyncPgQueue::new(queue), exec: Arc::new(Futures), _keep: Box::new(()) })
}

conformance_tests!(super::open_async);
send_with_tests!(super::open_async);

const LEASE: Duration = Duration::from_secs(60);

#[test]
fn a_reserve_dropped_while_it_waits_takes_nothing() {
    let Some(server) = shared() else { return };
    let q = AsyncPgQueue::connect(&server.url(), &unique("drop")).unwrap();
    futures::executor::block_on(q.send_after(b"later", ms(300))).unwrap();
    let waker = std::task::Waker::from(Arc::new(CountingWaker::default()));
    // Polled until it waits on the queue (its statement ran: nothing due), then dropped.
    for _ in 0..5 {
        assert!(poll_once_and_drop(q.reserve(LEASE), &waker).is_none());
    }
    let t = Instant::now();
    let job =
        futures::executor::block_on(q.reserve_timeout(LEASE, Duration::from_secs(10))).unwrap().unwrap();
    assert_eq!((job.payload(), job.attempt()), (&b"later"[..], 1), "nobody else held it");
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(futures::executor::block_on(q.ack(&job)).unwrap());
}

#[test]
fn a_job_sent_in_a_tokio_postgres_transaction_commits_or_rolls_back_with_it() {
    let Some(server) = shared() else { return };
    let q = AsyncPgQueue::connect(&server.url(), &unique("atx")).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (mut client, connection) =
            tokio_postgres::connect(&server.url(), tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        let tx = client.transaction().await.unwrap();
        q.send_after_in(&tx, b"rolled back", ms(0)).await.unwrap();
        tx.rollback().await.unwrap();
        let tx = client.transaction().await.unwrap();
        let id = q.send_after_in(&tx, b"committed", ms(0)).await.unwrap();
        assert_eq!(q.len().await.unwrap(), 0, "seen before the commit");
        tx.commit().await.unwrap();
        let job = q.reserve_timeout(LEASE, Duration::from_secs(5)).await.unwrap().expect("committed");
        assert_eq!((job.id(), job.payload()), (id, &b"committed"[..]));
        assert!(q.ack(&job).await.unwrap());
        assert_eq!(q.reserve_timeout(LEASE, ms(300)).await.unwrap(), None, "the rolled-back job came");
    });
}

/// Counts the polls of the future inside.
struct Polls<F> {
    inner: std::pin::Pin<Box<F>>,
    n: usize,
}

impl<F: std::future::Future + Unpin> std::future::Future for Polls<F> {
    type Output = (F::Output, usize);
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.n += 1;
        let n = self.n;
        self.inner.as_mut().poll(cx).map(|out| (out, n))
    }
}

#[test]
fn an_idle_reserve_is_not_polled_while_nothing_happens() {
    let Some(server) = shared() else { return };
    let q = AsyncPgQueue::connect(&server.url(), &unique("idle")).unwrap();
    futures::executor::block_on(q.send_after(b"far", Duration::from_secs(3600))).unwrap();
    let t = Instant::now();
    let waiting = Polls { inner: Box::pin(Box::pin(q.reserve_timeout(LEASE, ms(1500)))), n: 0 };
    let (got, polls) = futures::executor::block_on(waiting);
    assert_eq!(got.unwrap(), None);
    assert!(t.elapsed() >= ms(1500));
    // The first poll, the statement's answer, the timeout: a poller would
    // have been woken dozens of times in 1.5 s.
    assert!(polls <= 5, "an idle reserve was polled {polls} times in 1.5 s");
}

#[test]
fn async_send_with_stores_the_priority_and_racing_sends_of_one_key_store_one_job() {
    use delayq_durable::{SendOptions, Sent, Unique};
    use std::time::SystemTime;
    let Some(server) = shared() else { return };
    let q = AsyncPgQueue::connect(&server.url(), &unique("asendwith")).unwrap();
    use futures::executor::block_on as block;
    let now = SystemTime::now();
    let low = block(q.send_with(b"low", now, &SendOptions::new().priority(9))).unwrap();
    let high = block(q.send_with(b"high", now, &SendOptions::new().priority(1).kind("k"))).unwrap();
    assert!(low.created() && high.created());
    let job = block(q.reserve(LEASE)).unwrap();
    assert_eq!((job.id(), job.priority(), job.kind()), (high.id(), 1, "k"));
    assert!(block(q.send_with(b"x", now, &SendOptions::new().priority(10))).is_err());

    let opts = SendOptions::new().unique(Unique::new("one"));
    let later = now + Duration::from_secs(3600);
    let sent: Vec<Sent> = std::thread::scope(|s| {
        let all: Vec<_> =
            (0..8).map(|_| s.spawn(|| block(q.send_with(b"u", later, &opts)).unwrap())).collect();
        all.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let created: Vec<&Sent> = sent.iter().filter(|s| s.created()).collect();
    assert_eq!(created.len(), 1, "{sent:?}");
    assert!(sent.iter().all(|s| s.id() == created[0].id()));
}
