//! The server's clock on this client: one offset estimate, measured from a
//! few `TIME` round trips and refreshed now and then, converts instants
//! both ways.
//!
//! The server's clock decides when a job is due (every script reads `TIME`),
//! so a client whose clock is off still schedules "in 5 s" as 5 s: a delay
//! goes to the server as a delay ([`Due::In`]). An instant (`send_at`,
//! `nack`'s `retry_at`, `requeue_dead`'s `at`) goes as that instant mapped to
//! the server's clock ([`Due::At`]), and the times a [`Job`](crate::Job)
//! reports are mapped back with the same offset, so a job's `deadline()` is
//! the instant it was sent with, to the microsecond (the scripts keep µs),
//! whatever the latency of either call.
//!
//! # The estimate
//!
//! A probe reads the client's clock (`sent`), runs a script that returns the
//! server's `TIME` (`server`), and reads the client's clock again
//! (`received`). The server read its clock between the two readings, so the
//! offset (server minus client) lies in `[server − received, server − sent]`.
//! Of [`PROBES`] probes the fastest (the smallest `received − sent`) bounds
//! it tightest, as NTP picks the sample with the least delay; the estimate is
//! the *upper* end of its interval, `server − sent`, rounded up to a µs, not
//! NTP's midpoint. The true offset is never above it, so an instant mapped
//! to the server's clock is never before the same instant on the client's:
//! when the two clocks agree, a job sent with `send_at(t)` is never due
//! before `t` by the client's clock either, and the `deadline()` of a job
//! handed out has passed on the client. The price is lateness of at most the
//! fastest probe's request leg (tens of µs on a loopback, a LAN's one-way
//! delay across one): no more than a delay computed from the client's clock
//! before each send would add, which is late by that send's request leg. The
//! midpoint would err either way by up to half a round trip, so a job could
//! be due before its `t` by the client's own clock.
//!
//! Exact to the microsecond means through one estimate: the handle that sent
//! the job (and its clones, and an `AsyncRedisQueue` made from it) while the
//! estimate stands. Another process maps the same server time through its
//! own estimate, so the two see the job's deadline apart by the difference
//! of their estimates (each within its fastest probe's round trip of the
//! truth).
//!
//! # Refreshes
//!
//! The estimate is taken when the queue connects, then again by the first
//! call that converts a time [`REFRESH`] (10 s) after the last measurement:
//! lazily, so an idle handle makes no round trip (no tick), and by one caller
//! at a time (the others use the estimate in hand). Ten seconds, because the
//! estimate must follow the clocks: two clocks that drift apart at 20 ppm (a
//! free-running quartz; NTP-disciplined clocks agree far better) part by
//! 200 µs in that time, a few LAN round trips; a clock stepped by NTP or by
//! hand, and a failover that puts the queue on a master with another clock,
//! are noticed within 10 s. Five round trips every 10 s of activity cost the
//! server nothing measurable and delay the one call that makes them by five
//! round trips.
//!
//! A fresh measurement moves the estimate only when its fastest probe rules
//! it out (the estimate lies outside that probe's interval): when the clocks
//! stepped or drifted apart by more than a round trip, or a tighter bound was
//! found. A probe slowed by load widens the interval and so moves nothing;
//! the deadlines of jobs sent before a refresh still map back to the instant
//! they were sent with, unless the estimate had to move.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::DurableError;

/// Round trips per measurement: enough that one of them is unhurried.
pub(crate) const PROBES: usize = 5;

/// How long an estimate serves before the next call that converts a time
/// measures again (see the module docs).
pub(crate) const REFRESH: Duration = Duration::from_secs(10);

/// The furthest ahead of the client's now a deadline may be, in µs (2^52,
/// about 142.7 years: every time the scripts keep stays exact in Lua's
/// doubles, on both backends alike).
const MAX_AHEAD_US: i128 = 1 << 52;

/// The probe: the server's `TIME` as `{seconds, microseconds}`. A script, not
/// the `TIME` command, so that it goes where the queue's scripts go: on a
/// cluster, `KEYS[1]` (the queue's prefix, which it does not touch) routes it
/// to the master whose clock they read.
const PROBE: &str = "local t = redis.call('TIME') return {tonumber(t[1]), tonumber(t[2])}";

/// When a script is to make a job due, as its argument: `In(µs)` after the
/// server's now (`"<µs>"`), or `At(µs)` on the server's clock (`"@<µs>"`);
/// the scripts' `due` reads both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Due {
    In(i64),
    At(i64),
}

impl Due {
    /// The script argument.
    pub(crate) fn arg(self) -> String {
        match self {
            Due::In(us) => us.to_string(),
            Due::At(us) => format!("@{us}"),
        }
    }
}

/// One `TIME` round trip: the client's clock before the request and after
/// the reply (ns since the epoch), and the server's reading between (µs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Probe {
    pub(crate) sent_ns: i128,
    pub(crate) server_us: i64,
    pub(crate) received_ns: i128,
}

impl Probe {
    fn round_trip(&self) -> i128 {
        self.received_ns - self.sent_ns
    }

    /// The offsets (server minus client) it allows, in whole µs, widened to
    /// whole µs outward: `[server − received, server − sent]`.
    fn bounds_us(&self) -> (i64, i64) {
        let server_ns = i128::from(self.server_us) * 1000;
        let lo = (server_ns - self.received_ns).div_euclid(1000);
        let hi = -(self.sent_ns - server_ns).div_euclid(1000); // rounded up
        (lo as i64, hi as i64)
    }
}

/// The estimate and its upkeep.
struct State {
    /// Server minus client, µs.
    offset_us: i64,
    /// When it was last measured; `None`: never (conversions use 0 until a
    /// measurement succeeds, and every call tries one).
    measured: Option<Instant>,
    /// A caller is measuring.
    refreshing: bool,
}

/// This client's view of the server's clock (see the module docs).
pub(crate) struct ServerClock {
    /// Test hook: nanoseconds added to this client's clock readings.
    skew_ns: AtomicI64,
    probe: redis::Script,
    state: Mutex<State>,
}

impl ServerClock {
    pub(crate) fn new(skew_ns: i64) -> ServerClock {
        ServerClock {
            skew_ns: AtomicI64::new(skew_ns),
            probe: redis::Script::new(PROBE),
            state: Mutex::new(State { offset_us: 0, measured: None, refreshing: false }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The client's clock, in ns since the epoch (negative before it).
    pub(crate) fn now_ns(&self) -> i128 {
        let real = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(e) => -(e.duration().as_nanos() as i128),
        };
        // Relaxed: a test's setting, ordering nothing else.
        real + i128::from(self.skew_ns.load(Ordering::Relaxed))
    }

    /// Test hook: the client's clock steps by `ns` (the estimate stays until
    /// the next measurement).
    pub(crate) fn step(&self, ns: i64) {
        self.skew_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// The probe's invocation on the queue whose key prefix is `prefix`.
    pub(crate) fn probe(&self, prefix: &str) -> redis::ScriptInvocation<'_> {
        self.probe.key(prefix)
    }

    /// Runs one probe: `run` sends the probe and returns the server's
    /// `{seconds, microseconds}`.
    pub(crate) fn probe_with<E>(&self, run: impl FnOnce() -> Result<(i64, i64), E>) -> Result<Probe, E> {
        let sent_ns = self.now_ns();
        let time = run()?;
        Ok(self.probe_answered(sent_ns, time))
    }

    /// A probe sent at `sent_ns` (this clock's reading just before) that the
    /// server has just answered with `(seconds, microseconds)`.
    pub(crate) fn probe_answered(&self, sent_ns: i128, (secs, micros): (i64, i64)) -> Probe {
        let received_ns = self.now_ns();
        Probe { sent_ns, server_us: secs * 1_000_000 + micros, received_ns }
    }

    /// `at` on the server's clock, µs since the epoch: `at` rounded up to a
    /// µs, plus the offset (a time before the epoch is 0, due at once).
    /// [`DurableError::DeadlineOutOfRange`] more than 2^52 µs past the
    /// client's now.
    pub(crate) fn at(&self, at: SystemTime) -> Result<Due, DurableError> {
        let at_ns = match at.duration_since(UNIX_EPOCH) {
            Ok(d) => i128::try_from(d.as_nanos()).map_err(|_| DurableError::DeadlineOutOfRange)?,
            Err(e) => -i128::try_from(e.duration().as_nanos()).unwrap_or(i128::MAX),
        };
        let at_us = -(-at_ns).div_euclid(1000); // rounded up
        if at_us - self.now_ns().div_euclid(1000) > MAX_AHEAD_US {
            return Err(DurableError::DeadlineOutOfRange);
        }
        let server_us = at_us + i128::from(self.state().offset_us);
        Ok(Due::At(server_us.clamp(0, i128::from(i64::MAX)) as i64))
    }

    /// A server time (µs since the epoch) on this client's clock, as ns since
    /// the epoch (0 before it).
    pub(crate) fn client_ns(&self, server_us: i64) -> u64 {
        let us = i128::from(server_us) - i128::from(self.state().offset_us);
        (us * 1000).clamp(0, i128::from(u64::MAX)) as u64
    }

    /// Whether a measurement is due and nobody is taking one; if so, the
    /// caller takes it: it probes and hands the results to
    /// [`Refresh::apply`]. Dropping the claim unapplied (a dropped future)
    /// leaves the estimate as it was, for the next caller to measure.
    pub(crate) fn claim_refresh(&self) -> Option<Refresh<'_>> {
        let mut s = self.state();
        let due = s.measured.is_none_or(|at| at.elapsed() >= REFRESH);
        if !due || s.refreshing {
            return None;
        }
        s.refreshing = true;
        Some(Refresh { clock: self })
    }

    /// Takes a measurement's probes (the ones that got an answer) into the
    /// estimate: see the module docs.
    fn apply(&self, probes: &[Probe]) {
        let mut s = self.state();
        let Some(fastest) = probes.iter().min_by_key(|p| p.round_trip()) else {
            // Nothing answered: try again after a period, or at once if
            // there was never an estimate.
            if s.measured.is_some() {
                s.measured = Some(Instant::now());
            }
            return;
        };
        let (lo, hi) = fastest.bounds_us();
        if s.measured.is_none() || !(lo..=hi).contains(&s.offset_us) {
            s.offset_us = hi;
        }
        s.measured = Some(Instant::now());
    }

    /// The estimate: the server's clock minus this client's, µs.
    pub(crate) fn offset_us(&self) -> i64 {
        self.state().offset_us
    }
}

/// A claim on the next measurement ([`ServerClock::claim_refresh`]).
pub(crate) struct Refresh<'a> {
    clock: &'a ServerClock,
}

impl Refresh<'_> {
    /// Takes the probes that answered (any number, none included).
    pub(crate) fn apply(self, probes: &[Probe]) {
        self.clock.apply(probes);
    }
}

impl Drop for Refresh<'_> {
    fn drop(&mut self) {
        self.clock.state().refreshing = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe sent at `sent` µs (client), read by the server at `server`
    /// µs, answered at `received` µs (client).
    fn probe(sent: i64, server: i64, received: i64) -> Probe {
        Probe {
            sent_ns: i128::from(sent) * 1000,
            server_us: server,
            received_ns: i128::from(received) * 1000,
        }
    }

    fn measured(probes: &[Probe]) -> ServerClock {
        let c = ServerClock::new(0);
        c.claim_refresh().expect("never measured").apply(probes);
        c
    }

    #[test]
    fn the_estimate_is_the_upper_end_of_the_fastest_round_trip() {
        // Server 5 s ahead; round trips of 900, 60 and 300 µs.
        let ahead = 5_000_000;
        let c = measured(&[
            probe(0, 100 + ahead, 900),
            probe(1000, 1020 + ahead, 1060),
            probe(2000, 2250 + ahead, 2300),
        ]);
        assert_eq!(c.offset_us(), ahead + 20, "server − sent of the 60 µs round trip");
    }

    #[test]
    fn an_instant_maps_to_the_server_and_back_to_itself_to_the_microsecond() {
        let c = measured(&[probe(0, 3_000_000_017, 40)]);
        for ns in [0u64, 1, 999, 1000, 1001, 1_700_000_000_123_456_789] {
            let at = UNIX_EPOCH + Duration::from_nanos(ns);
            let Ok(Due::At(server)) = c.at(at) else { panic!("{ns} ns: not an instant") };
            let back = c.client_ns(server);
            assert_eq!(back, ns.div_ceil(1000) * 1000, "{ns} ns: rounded up to its µs");
        }
    }

    #[test]
    fn before_the_epoch_is_due_at_once_and_past_2_pow_52_us_ahead_is_refused() {
        let c = measured(&[probe(0, 0, 10)]);
        assert_eq!(c.at(UNIX_EPOCH - Duration::from_secs(5)).unwrap(), Due::At(0));
        let limit = Duration::from_micros(1 << 52);
        let day = Duration::from_secs(86_400);
        assert!(matches!(c.at(SystemTime::now() + limit - day), Ok(Due::At(_))));
        assert!(matches!(c.at(SystemTime::now() + limit + day), Err(DurableError::DeadlineOutOfRange)));
        assert_eq!((Due::In(5).arg(), Due::At(7).arg()), ("5".to_string(), "@7".to_string()));
    }

    #[test]
    fn a_refresh_moves_the_estimate_only_when_its_fastest_round_trip_rules_it_out() {
        let c = measured(&[probe(0, 30, 50)]);
        assert_eq!(c.offset_us(), 30);
        // A slow round trip, or a fast one that agrees: the estimate stays.
        c.apply(&[probe(100, 2000, 5000)]);
        assert_eq!(c.offset_us(), 30);
        c.apply(&[probe(100, 135, 140)]);
        assert_eq!(c.offset_us(), 30, "30 lies in [135 − 140, 135 − 100]");
        // A tighter bound: the estimate comes down to it.
        c.apply(&[probe(100, 112, 130)]);
        assert_eq!(c.offset_us(), 12);
        // The server's clock stepped 1 s ahead: the estimate follows.
        c.apply(&[probe(200, 1_000_215, 230)]);
        assert_eq!(c.offset_us(), 1_000_015);
        // Nothing answered: the estimate stays.
        c.apply(&[]);
        assert_eq!(c.offset_us(), 1_000_015);
    }

    #[test]
    fn one_caller_measures_at_a_time_and_only_when_the_estimate_is_old() {
        let c = ServerClock::new(0);
        let first = c.claim_refresh().expect("never measured");
        assert!(c.claim_refresh().is_none(), "one measurement at a time");
        drop(first);
        let again = c.claim_refresh().expect("a dropped claim measured nothing");
        again.apply(&[probe(0, 0, 10)]);
        assert!(c.claim_refresh().is_none(), "measured just now");
        c.state().measured = Instant::now().checked_sub(REFRESH);
        assert!(c.claim_refresh().is_some(), "measured a period ago");
    }

    #[test]
    fn a_client_clock_step_moves_its_readings_not_the_estimate() {
        let c = measured(&[probe(0, 0, 10)]);
        let before = c.now_ns();
        c.step(3_600_000_000_000);
        assert!(c.now_ns() - before >= 3_600_000_000_000);
        assert_eq!(c.offset_us(), 0);
    }
}
