//! Recurring schedules: [`Schedule`] (a cron expression or a fixed interval,
//! a time zone, a missed-tick policy), what [`JobQueue::schedule`](crate::JobQueue::schedule)
//! stores, and the firing a [`Worker`](crate::Worker) does at each tick
//! ([`fire_tick`]).
//!
//! Cron expressions are parsed by [croner] (five fields, or six with
//! seconds first; `L`, `W`, `#`, names and `@hourly`-style aliases), chosen
//! because it is maintained, follows POSIX/Vixie cron, and defines what a
//! schedule does across daylight-saving changes (the Open Cron Pattern
//! Specification's rules, below). Time zones are [chrono-tz]'s compiled-in
//! IANA database, so a named zone means the same on every machine whatever
//! its `/usr/share/zoneinfo`.
//!
//! [croner]: https://docs.rs/croner
//! [chrono-tz]: https://docs.rs/chrono-tz

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Offset, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use croner::Cron;

use crate::contract::JobQueue;
use crate::error::DurableError;
use crate::job::{check_kind, Job};
use crate::options::check_priority;
use crate::stored::{check_schedule_name, from_us, to_us, Fire, StoredSchedule, TICK_KIND};

/// The most jobs one firing stores ([`Missed::All`]'s bound).
pub const MAX_CATCH_UP: u32 = 1000;

/// When a recurring schedule ticks, and what it does with ticks it missed.
///
/// ```
/// use std::time::Duration;
/// use delayq_durable::{Missed, Schedule};
///
/// // 02:30 every night, Berlin time, whatever the season.
/// let nightly = Schedule::cron("30 2 * * *").unwrap().in_zone("Europe/Berlin").unwrap();
/// // Every 10 seconds; after downtime, one job per missed tick, at most 100.
/// let poll = Schedule::every(Duration::from_secs(10)).unwrap().missed(Missed::All(100));
/// # let _ = (nightly, poll);
/// ```
///
/// # Daylight-saving changes
///
/// A cron schedule in a zone with daylight saving follows croner's rules:
/// - **A time that does not exist** (02:30 on the night clocks spring from
///   02:00 to 03:00, as in `Europe/Berlin` in March and `America/New_York`
///   in March): a *fixed-time* expression (one second, minute and hour, as
///   `30 2 * * *`) runs at the first valid time after the gap (03:00); an
///   interval or wildcard expression (`*/15 * * * *`) just has no ticks in
///   the missing hour.
/// - **A time that happens twice** (01:30 on the night clocks fall back from
///   02:00 to 01:00): a fixed-time expression runs once, at the first 01:30;
///   an interval or wildcard expression runs at both.
///
/// A fixed [interval](Schedule::every) is a duration, not a wall-clock time:
/// it ticks every `interval` of elapsed time (at multiples of it since the
/// Unix epoch, so every process computes the same ticks) and no time zone
/// applies.
#[derive(Clone, PartialEq, Eq)]
pub struct Schedule {
    spec: Spec,
    zone: Option<Tz>,
    missed: Missed,
    grace: Duration,
    priority: u8,
}

#[derive(Clone)]
enum Spec {
    Cron { text: String, cron: Box<Cron> },
    Every(Duration),
}

/// Two cron specs are equal when their expressions are (the parsed form is
/// a function of the text).
impl PartialEq for Spec {
    fn eq(&self, other: &Spec) -> bool {
        match (self, other) {
            (Spec::Cron { text: a, .. }, Spec::Cron { text: b, .. }) => a == b,
            (Spec::Every(a), Spec::Every(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Spec {}

/// What a schedule does with ticks that passed while no worker fired them
/// (every worker down, or busy).
///
/// At each firing the due ticks are those from the schedule's next tick to
/// now; a tick already fired is never fired again. In normal running one
/// tick is due, a few milliseconds late, and every policy fires it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Missed {
    /// Fire only the latest due tick, and only if it is at most the
    /// schedule's [grace](Schedule::grace) late; skip the rest (the default,
    /// as Oban's Cron plugin and BullMQ's job schedulers, which do not
    /// backfill).
    Skip,
    /// Fire one job, for the latest due tick, however late: "run once" after
    /// downtime.
    Once,
    /// Fire every due tick, each as its own job due at its tick, the latest
    /// `n` of them (`1..=1000`).
    All(u32),
}

/// A stored schedule as [`JobQueue::schedules`](crate::JobQueue::schedules)
/// lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleInfo {
    /// Its name.
    pub name: String,
    /// When it ticks, in words: `cron "30 2 * * *" Europe/Berlin`, `every 10s`.
    pub spec: String,
    /// The kind of the jobs it stores.
    pub kind: String,
    /// Their priority.
    pub priority: u8,
    /// The missed-tick policy.
    pub missed: Missed,
    /// The next tick (`None` while paused).
    pub next_run: Option<SystemTime>,
    /// The last tick fired (`None` before the first).
    pub last_run: Option<SystemTime>,
    /// Whether it is paused.
    pub paused: bool,
    /// The payload of the jobs it stores.
    pub payload: Vec<u8>,
}

impl Schedule {
    /// A cron expression: five fields (minute, hour, day of month, month, day
    /// of week) or six with seconds first. In UTC unless [`in_zone`](Self::in_zone).
    ///
    /// # Errors
    ///
    /// [`InvalidArgument`](DurableError::InvalidArgument) for an expression
    /// croner does not accept, or one that never ticks (`0 0 30 2 *`).
    pub fn cron(expr: &str) -> Result<Schedule, DurableError> {
        let cron = parse_cron(expr.trim()).map_err(|_| {
            DurableError::InvalidArgument("not a cron expression (five fields, or six with seconds first)")
        })?;
        let s = Schedule {
            spec: Spec::Cron { text: expr.trim().to_string(), cron: Box::new(cron) },
            zone: None,
            missed: Missed::Skip,
            grace: Duration::from_secs(60),
            priority: 0,
        };
        if s.next_after(SystemTime::now()).is_none() {
            return Err(DurableError::InvalidArgument("the cron expression never ticks"));
        }
        Ok(s)
    }

    /// A fixed interval: ticks at every multiple of `interval` since the
    /// Unix epoch (at least 1 ms, at most a year).
    ///
    /// # Errors
    ///
    /// [`InvalidArgument`](DurableError::InvalidArgument) for an interval
    /// under 1 ms (a zero interval included) or over 366 days.
    pub fn every(interval: Duration) -> Result<Schedule, DurableError> {
        if interval < Duration::from_millis(1) {
            return Err(DurableError::InvalidArgument("a schedule's interval must be at least 1 ms"));
        }
        if interval > Duration::from_secs(366 * 86_400) {
            return Err(DurableError::InvalidArgument("a schedule's interval must be at most 366 days"));
        }
        Ok(Schedule {
            spec: Spec::Every(interval),
            zone: None,
            missed: Missed::Skip,
            grace: Duration::from_secs(60),
            priority: 0,
        })
    }

    /// Reads a cron expression's fields in the IANA time zone `zone`
    /// (`"Europe/Berlin"`, `"America/New_York"`, `"UTC"`).
    ///
    /// # Errors
    ///
    /// [`InvalidArgument`](DurableError::InvalidArgument) for a zone the
    /// database does not know, or for an [interval](Self::every) schedule
    /// (an interval is elapsed time, the same in every zone).
    pub fn in_zone(mut self, zone: &str) -> Result<Schedule, DurableError> {
        let tz = Tz::from_str(zone).map_err(|_| {
            DurableError::InvalidArgument("unknown time zone (an IANA name such as Europe/Berlin)")
        })?;
        if let Spec::Every(_) = self.spec {
            return Err(DurableError::InvalidArgument(
                "an interval schedule has no time zone (it ticks every interval of elapsed time)",
            ));
        }
        self.zone = Some(tz);
        Ok(self)
    }

    /// The missed-tick policy (default [`Missed::Skip`]).
    pub fn missed(mut self, missed: Missed) -> Schedule {
        self.missed = missed;
        self
    }

    /// How late a tick may fire and still count as on time under
    /// [`Missed::Skip`] (default one minute).
    pub fn grace(mut self, grace: Duration) -> Schedule {
        self.grace = grace;
        self
    }

    /// The priority of the jobs it stores (`0..=9`, default 0).
    pub fn priority(mut self, priority: u8) -> Schedule {
        self.priority = priority;
        self
    }

    fn check(&self) -> Result<(), DurableError> {
        check_priority(self.priority)?;
        if let Missed::All(n) = self.missed {
            if n == 0 || n > MAX_CATCH_UP {
                return Err(DurableError::InvalidArgument("Missed::All takes 1..=1000 ticks"));
            }
        }
        Ok(())
    }

    /// The schedule in words.
    fn describe(&self) -> String {
        match &self.spec {
            Spec::Cron { text, .. } => match self.zone {
                Some(z) => format!("cron \"{text}\" {}", z.name()),
                None => format!("cron \"{text}\" UTC"),
            },
            Spec::Every(d) => format!("every {d:?}"),
        }
    }

    /// The first tick strictly after `t`; `None` if there is none (within
    /// croner's search limit) or it is out of range.
    pub fn next_after(&self, t: SystemTime) -> Option<SystemTime> {
        match &self.spec {
            Spec::Every(d) => {
                let since = t.duration_since(SystemTime::UNIX_EPOCH).ok()?;
                let step = d.as_nanos();
                let n = since.as_nanos() / step + 1;
                let nanos = u64::try_from(n.checked_mul(step)?).ok()?;
                Some(SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos))
            }
            Spec::Cron { cron, .. } => match self.zone {
                None => next_cron(cron, Utc, t),
                Some(z) => next_cron(cron, z, t),
            },
        }
    }

    /// Encodes the definition (with the jobs' kind and payload) for the store.
    fn encode(&self, kind: &str, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![DEF_FORMAT];
        match &self.spec {
            Spec::Cron { text, .. } => {
                out.push(0);
                put_str(&mut out, text);
            }
            Spec::Every(d) => {
                out.push(1);
                out.extend_from_slice(&u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).to_le_bytes());
            }
        }
        put_str(&mut out, self.zone.map_or("", |z| z.name()));
        let (policy, n) = match self.missed {
            Missed::Skip => (0u8, 0u32),
            Missed::Once => (1, 0),
            Missed::All(n) => (2, n),
        };
        out.push(policy);
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(&u64::try_from(self.grace.as_nanos()).unwrap_or(u64::MAX).to_le_bytes());
        out.push(self.priority);
        put_str(&mut out, kind);
        out.extend_from_slice(payload);
        out
    }
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schedule")
            .field("spec", &self.describe())
            .field("missed", &self.missed)
            .field("grace", &self.grace)
            .field("priority", &self.priority)
            .finish()
    }
}

/// The first cron tick strictly after `t` in zone `zone`.
///
/// croner's search from an instant starts from its wall-clock time, so in
/// the hour that happens twice (clocks falling back) it can skip the second
/// pass or answer an instant before `t`; its iterator yields both passes,
/// but not in order of time. So near a fall-back the search walks the
/// iterator from `t` minus the repeated span and keeps the earliest tick
/// after `t`; everywhere else (a spring-forward gap included) one search
/// answers.
fn next_cron<Z: TimeZone + Copy>(cron: &Cron, zone: Z, t: SystemTime) -> Option<SystemTime>
where
    Z::Offset: Copy,
{
    // Cron's grain is the second: search from the whole second (ticks are
    // whole seconds, and the first is still strictly after `t`).
    let at: DateTime<Utc> = t.into();
    let at = at.with_nanosecond(0).unwrap_or(at);
    let window = chrono::Duration::hours(3);
    let offset_at = |d: DateTime<Utc>| i64::from(d.with_timezone(&zone).offset().fix().local_minus_utc());
    let repeated = offset_at(at - window) - offset_at(at + window);
    let found: DateTime<Utc> = if repeated > 0 {
        let span = chrono::Duration::seconds(repeated);
        let mut best: Option<DateTime<Utc>> = None;
        for d in cron.iter_from((at - span).with_timezone(&zone), croner::Direction::Forward).take(100_000) {
            let d = d.with_timezone(&Utc);
            if best.is_some_and(|b| d - span > b) {
                break;
            }
            if d > at && best.is_none_or(|b| d < b) {
                best = Some(d);
            }
        }
        best?
    } else {
        cron.find_next_occurrence(&at.with_timezone(&zone), false).ok()?.with_timezone(&Utc)
    };
    let nanos = u64::try_from(found.timestamp_nanos_opt()?).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos))
}

/// Five fields, or six with seconds first; no year field (a schedule with
/// a last tick would have nothing to do after it).
fn parse_cron(expr: &str) -> Result<Cron, croner::errors::CronError> {
    use croner::parser::{CronParser, Seconds, Year};
    CronParser::builder().seconds(Seconds::Optional).year(Year::Disallowed).build().parse(expr)
}

const DEF_FORMAT: u8 = 1;

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A decoded definition: the schedule and its jobs' kind and payload.
#[derive(Debug)]
struct Def {
    schedule: Schedule,
    kind: String,
    payload: Vec<u8>,
}

fn decode(def: &[u8]) -> Result<Def, String> {
    let mut r = Reader { bytes: def, at: 0 };
    let format = r.u8()?;
    if format != DEF_FORMAT {
        return Err(format!("schedule format {format}, this version reads {DEF_FORMAT}"));
    }
    let spec = match r.u8()? {
        0 => {
            let text = r.string()?;
            let cron = parse_cron(&text).map_err(|e| format!("stored cron expression {text:?}: {e}"))?;
            Spec::Cron { text, cron: Box::new(cron) }
        }
        1 => Spec::Every(Duration::from_nanos(r.u64()?)),
        other => return Err(format!("schedule spec {other} is not 0 or 1")),
    };
    let zone = match r.string()? {
        z if z.is_empty() => None,
        z => Some(Tz::from_str(&z).map_err(|_| format!("unknown time zone {z:?}"))?),
    };
    let policy = r.u8()?;
    let n = r.u32()?;
    let missed = match policy {
        0 => Missed::Skip,
        1 => Missed::Once,
        2 => Missed::All(n.clamp(1, MAX_CATCH_UP)),
        other => return Err(format!("missed-tick policy {other} is not 0, 1 or 2")),
    };
    let grace = Duration::from_nanos(r.u64()?);
    let priority = r.u8()?;
    let kind = r.string()?;
    let payload = def[r.at..].to_vec();
    Ok(Def { schedule: Schedule { spec, zone, missed, grace, priority }, kind, payload })
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or("schedule definition is truncated")?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn string(&mut self) -> Result<String, String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| "schedule definition holds bad UTF-8".to_string())
    }
}

/// The ticks a firing at `now` stores, and the schedule's next tick after it.
///
/// `next` is the stored next tick (due: `next <= now`), `last` the last tick
/// fired: a tick at or before it is never fired again (so a schedule stored
/// again by a racing process, which sets its next tick back, fires nothing
/// twice).
fn plan(
    s: &Schedule,
    next: SystemTime,
    last: Option<SystemTime>,
    now: SystemTime,
) -> (Vec<SystemTime>, Option<SystemTime>) {
    let keep = match s.missed {
        Missed::Skip | Missed::Once => 1,
        Missed::All(n) => n as usize,
    };
    let mut due: std::collections::VecDeque<SystemTime> = std::collections::VecDeque::new();
    let mut t = Some(next);
    let mut walked = 0u32;
    while let Some(tick) = t {
        if tick > now {
            break;
        }
        if last.is_none_or(|l| tick > l) {
            due.push_back(tick);
            if due.len() > keep {
                due.pop_front();
            }
        }
        walked += 1;
        if walked >= 100_000 {
            // A long downtime of a fast schedule: jump to the ticks near now.
            let back = now.checked_sub(Duration::from_secs(1)).unwrap_or(now);
            t = s.next_after(back.max(tick));
            walked = 0;
            continue;
        }
        t = s.next_after(tick);
    }
    if s.missed == Missed::Skip {
        due.retain(|&tick| now.duration_since(tick).unwrap_or_default() <= s.grace);
    }
    let following = s.next_after(now.max(next));
    (due.into(), following)
}

/// Fires the tick job `job` (kind [`TICK_KIND`]) of a schedule stored in `q`,
/// and acks it: what a [`Worker`](crate::Worker) does with every tick job it
/// reserves. Call it from a hand-written consumer loop that reserves jobs of
/// every kind, for each job whose kind is [`TICK_KIND`].
///
/// The firing stores the due ticks' jobs and moves the schedule on in one
/// atomic step that compares and sets the schedule's next tick, so however
/// many workers fire a copy of the tick job (a redelivery after a crash, a
/// lease that ran out), each tick is stored once. Returns how many jobs it
/// stored.
///
/// # Errors
///
/// A backend error (the tick job is then left to its lease, and redelivered);
/// [`InvalidArgument`](DurableError::InvalidArgument) for a job that is not a
/// tick job; [`Corrupt`](DurableError::Corrupt) for a stored definition this
/// version cannot read (the tick job is killed with that error, so it shows
/// in the dead set).
pub fn fire_tick<Q: JobQueue + ?Sized>(q: &Q, job: &Job) -> Result<usize, DurableError> {
    if job.kind() != TICK_KIND {
        return Err(DurableError::InvalidArgument("not a schedule's tick job"));
    }
    let name = String::from_utf8_lossy(job.payload()).into_owned();
    let stored = match q.schedule_get(&name)? {
        Some(s) => s,
        None => {
            q.ack(job)?;
            return Ok(0);
        }
    };
    let Some(next_us) = stored.next_run_us else {
        q.ack(job)?; // paused: resume stores a fresh tick job
        return Ok(0);
    };
    let def = match decode(&stored.def) {
        Ok(d) => d,
        Err(detail) => {
            let msg = format!("schedule {name:?}: {detail}");
            q.kill(job, &msg)?;
            return Err(DurableError::Corrupt { path: Default::default(), detail: msg });
        }
    };
    // The tick job was handed out at its deadline by the backend's clock:
    // that instant has passed, whatever this machine's clock says.
    let now = SystemTime::now().max(job.deadline());
    let next = from_us(next_us);
    if next > now {
        // A copy of an older tick (redelivered): make sure the current one exists.
        q.schedule_fire(&name, &ensure_tick(&def.kind))?;
        q.ack(job)?;
        return Ok(0);
    }
    let (ticks, following) = plan(&def.schedule, next, stored.last_run_us.map(from_us), now);
    let Some(following) = following else {
        // No tick after now within croner's search (a day that comes more
        // than a year apart): pause it, and say so in the dead set.
        q.schedule_store(&name, &stored.def, None)?;
        q.kill(job, &format!("schedule {name:?} has no tick within a year of now: paused"))?;
        return Ok(0);
    };
    let last_run_us = ticks.last().map_or(stored.last_run_us.unwrap_or(0), |&t| to_us(t));
    let fire = Fire {
        expect_next_us: next_us,
        next_run_us: to_us(following),
        last_run_us,
        kind: def.kind,
        payload: def.payload,
        priority: def.schedule.priority,
        deadlines_us: ticks.iter().map(|&t| to_us(t)).collect(),
    };
    let fired = match q.schedule_fire(&name, &fire) {
        Ok(fired) => fired,
        Err(e @ (DurableError::PayloadTooLarge { .. } | DurableError::InvalidArgument(_))) => {
            // The queue refuses the schedule's jobs (opened again with a
            // smaller max_payload): no retry can help. Pause it, and say why
            // in the dead set.
            q.schedule_store(&name, &stored.def, None)?;
            q.kill(job, &format!("schedule {name:?} paused: its jobs are refused: {e}"))?;
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    q.ack(job)?;
    Ok(if fired { fire.deadlines_us.len() } else { 0 })
}

/// A firing that fires nothing (its expected tick, the Unix epoch, is never
/// a stored next tick: those are planned after now): what is left of it is
/// the store's guarantee that a schedule not paused has its pending tick job.
fn ensure_tick(kind: &str) -> Fire {
    Fire {
        expect_next_us: 0,
        next_run_us: 0,
        last_run_us: 0,
        kind: kind.to_string(),
        payload: Vec::new(),
        priority: 0,
        deadlines_us: Vec::new(),
    }
}

/// The schedule API, on every backend: provided methods of [`JobQueue`].
pub(crate) fn store<Q: JobQueue + ?Sized>(
    q: &Q,
    name: &str,
    schedule: &Schedule,
    kind: &str,
    payload: &[u8],
) -> Result<(), DurableError> {
    check_schedule_name(name)?;
    check_kind(kind)?;
    schedule.check()?;
    if payload.len() > q.payload_limit() {
        return Err(DurableError::PayloadTooLarge { len: payload.len(), max: q.payload_limit() });
    }
    let def = schedule.encode(kind, payload);
    let existing = q.schedule_get(name)?;
    if let Some(e) = &existing {
        if e.def == def {
            // Registered again (every process at start): keep its ticks, and
            // give it back its tick job if that was lost (dead after its
            // attempts ran out, or cancelled by hand).
            if e.next_run_us.is_some() {
                q.schedule_fire(name, &ensure_tick(kind))?;
            }
            return Ok(());
        }
    }
    let paused = existing.as_ref().is_some_and(|e| e.next_run_us.is_none());
    let next = if paused {
        None
    } else {
        let after = existing
            .as_ref()
            .and_then(|e| e.last_run_us)
            .map_or(SystemTime::now(), |l| from_us(l).max(SystemTime::now()));
        Some(to_us(
            schedule.next_after(after).ok_or(DurableError::InvalidArgument("the schedule never ticks"))?,
        ))
    };
    q.schedule_store(name, &def, next)
}

pub(crate) fn info(s: StoredSchedule) -> Result<ScheduleInfo, DurableError> {
    let def = decode(&s.def).map_err(|detail| DurableError::Corrupt {
        path: Default::default(),
        detail: format!("schedule {:?}: {detail}", s.name),
    })?;
    Ok(ScheduleInfo {
        spec: def.schedule.describe(),
        kind: def.kind,
        priority: def.schedule.priority,
        missed: def.schedule.missed,
        next_run: s.next_run_us.map(from_us),
        last_run: s.last_run_us.map(from_us),
        paused: s.next_run_us.is_none(),
        payload: def.payload,
        name: s.name,
    })
}

pub(crate) fn set_paused<Q: JobQueue + ?Sized>(
    q: &Q,
    name: &str,
    paused: bool,
) -> Result<bool, DurableError> {
    check_schedule_name(name)?;
    let Some(s) = q.schedule_get(name)? else {
        return Ok(false);
    };
    if s.next_run_us.is_none() == paused {
        return Ok(true);
    }
    let next = if paused {
        None
    } else {
        let def =
            decode(&s.def).map_err(|detail| DurableError::Corrupt { path: Default::default(), detail })?;
        // Resuming skips the ticks that passed while paused.
        let next = def
            .schedule
            .next_after(SystemTime::now())
            .ok_or(DurableError::InvalidArgument("the schedule never ticks"))?;
        Some(to_us(next))
    };
    q.schedule_store(name, &s.def, next)?;
    Ok(true)
}

#[cfg(test)]
mod tests;
