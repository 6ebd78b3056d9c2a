use super::*;

/// A UTC instant from its parts.
fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> SystemTime {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap().into()
}

fn ticks(s: &Schedule, from: SystemTime, n: usize) -> Vec<SystemTime> {
    let mut out = Vec::new();
    let mut t = from;
    for _ in 0..n {
        t = s.next_after(t).unwrap();
        out.push(t);
    }
    out
}

#[test]
fn berlin_spring_forward_runs_the_missing_0230_at_0300() {
    // 2026-03-29: clocks go from 02:00 CET to 03:00 CEST; 02:30 does not exist.
    let s = Schedule::cron("30 2 * * *").unwrap().in_zone("Europe/Berlin").unwrap();
    let got = ticks(&s, utc(2026, 3, 28, 12, 0, 0), 3);
    assert_eq!(
        got,
        vec![
            utc(2026, 3, 29, 1, 0, 0),  // 03:00 CEST, the first valid time after the gap
            utc(2026, 3, 30, 0, 30, 0), // 02:30 CEST
            utc(2026, 3, 31, 0, 30, 0),
        ]
    );
}

#[test]
fn berlin_fall_back_runs_a_fixed_time_once() {
    // 2026-10-25: clocks go from 03:00 CEST back to 02:00 CET; 02:30 happens twice.
    let s = Schedule::cron("30 2 * * *").unwrap().in_zone("Europe/Berlin").unwrap();
    let got = ticks(&s, utc(2026, 10, 24, 12, 0, 0), 2);
    assert_eq!(got, vec![utc(2026, 10, 25, 0, 30, 0), utc(2026, 10, 26, 1, 30, 0)]);
    // Asked from between the two 02:30s, the second one is not a tick.
    assert_eq!(s.next_after(utc(2026, 10, 25, 1, 0, 0)), Some(utc(2026, 10, 26, 1, 30, 0)));
}

#[test]
fn new_york_spring_forward_and_fall_back() {
    let s = Schedule::cron("30 2 * * *").unwrap().in_zone("America/New_York").unwrap();
    // 2026-03-08: 02:00 EST -> 03:00 EDT; 02:30 does not exist -> 03:00 EDT (07:00 UTC).
    assert_eq!(s.next_after(utc(2026, 3, 7, 12, 0, 0)), Some(utc(2026, 3, 8, 7, 0, 0)));
    assert_eq!(s.next_after(utc(2026, 3, 8, 7, 0, 0)), Some(utc(2026, 3, 9, 6, 30, 0)));
    // 2026-11-01: 02:00 EDT -> 01:00 EST; 01:30 happens twice: a fixed time runs at the first.
    let s = Schedule::cron("30 1 * * *").unwrap().in_zone("America/New_York").unwrap();
    let got = ticks(&s, utc(2026, 10, 31, 12, 0, 0), 2);
    assert_eq!(got, vec![utc(2026, 11, 1, 5, 30, 0), utc(2026, 11, 2, 6, 30, 0)]);
}

#[test]
fn an_interval_expression_runs_at_both_of_a_repeated_hours_ticks() {
    let s = Schedule::cron("*/30 * * * *").unwrap().in_zone("America/New_York").unwrap();
    let got = ticks(&s, utc(2026, 11, 1, 4, 15, 0), 6);
    assert_eq!(
        got,
        vec![
            utc(2026, 11, 1, 4, 30, 0), // 00:30 EDT
            utc(2026, 11, 1, 5, 0, 0),  // 01:00 EDT
            utc(2026, 11, 1, 5, 30, 0), // 01:30 EDT
            utc(2026, 11, 1, 6, 0, 0),  // 01:00 EST
            utc(2026, 11, 1, 6, 30, 0), // 01:30 EST
            utc(2026, 11, 1, 7, 0, 0),  // 02:00 EST
        ]
    );
    // And no ticks in the hour that does not exist in spring.
    let got = ticks(&s, utc(2026, 3, 8, 6, 15, 0), 3);
    assert_eq!(got, vec![utc(2026, 3, 8, 6, 30, 0), utc(2026, 3, 8, 7, 0, 0), utc(2026, 3, 8, 7, 30, 0)]);
}

#[test]
fn cron_ticks_are_whole_seconds_after_a_fractional_instant() {
    let s = Schedule::cron("30 2 * * *").unwrap();
    let t = utc(2026, 1, 1, 0, 0, 0) + Duration::from_nanos(940_350_000);
    assert_eq!(s.next_after(t), Some(utc(2026, 1, 1, 2, 30, 0)));
    let s = Schedule::cron("* * * * * *").unwrap();
    assert_eq!(s.next_after(t), Some(utc(2026, 1, 1, 0, 0, 1)));
    assert_eq!(s.next_after(utc(2026, 1, 1, 0, 0, 1)), Some(utc(2026, 1, 1, 0, 0, 2)));
}

#[test]
fn seconds_and_utc_and_intervals() {
    let s = Schedule::cron("*/10 * * * * *").unwrap();
    assert_eq!(
        ticks(&s, utc(2026, 1, 1, 0, 0, 5), 2),
        vec![utc(2026, 1, 1, 0, 0, 10), utc(2026, 1, 1, 0, 0, 20)]
    );
    let s = Schedule::every(Duration::from_secs(5)).unwrap();
    assert_eq!(s.next_after(utc(2026, 1, 1, 0, 0, 5)), Some(utc(2026, 1, 1, 0, 0, 10)));
    assert_eq!(s.next_after(utc(2026, 1, 1, 0, 0, 7)), Some(utc(2026, 1, 1, 0, 0, 10)));
}

#[test]
fn bad_schedules_are_named_errors() {
    let msg = |e: DurableError| e.to_string();
    assert!(msg(Schedule::cron("61 * * * *").unwrap_err()).contains("cron expression"));
    assert!(msg(Schedule::cron("").unwrap_err()).contains("cron expression"));
    assert!(msg(Schedule::cron("0 0 0 1 1 * 2030").unwrap_err()).contains("cron expression"));
    assert!(msg(Schedule::cron("0 0 30 2 *").unwrap_err()).contains("never"));
    assert!(
        msg(Schedule::cron("* * * * *").unwrap().in_zone("Mars/Olympus").unwrap_err()).contains("time zone")
    );
    assert!(msg(Schedule::every(Duration::ZERO).unwrap_err()).contains("at least 1 ms"));
    assert!(msg(Schedule::every(Duration::from_secs(1)).unwrap().in_zone("UTC").unwrap_err())
        .contains("interval"));
    assert!(Schedule::every(Duration::from_secs(1)).unwrap().missed(Missed::All(0)).check().is_err());
    assert!(Schedule::every(Duration::from_secs(1)).unwrap().priority(10).check().is_err());
}

#[test]
fn a_definition_round_trips() {
    let s = Schedule::cron("0 30 2 * * *")
        .unwrap()
        .in_zone("Europe/Berlin")
        .unwrap()
        .missed(Missed::All(7))
        .grace(Duration::from_secs(5))
        .priority(3);
    let d = decode(&s.encode("report", b"\x00\xffpayload")).unwrap();
    assert!(d.schedule == s);
    assert_eq!((d.kind.as_str(), d.payload.as_slice()), ("report", &b"\x00\xffpayload"[..]));
    assert!(decode(&[9]).unwrap_err().contains("format"));
    assert!(decode(&s.encode("k", b"")[..5]).unwrap_err().contains("truncated"));
}

#[test]
fn the_missed_tick_policies() {
    let every = Schedule::every(Duration::from_secs(10)).unwrap();
    let next = utc(2026, 1, 1, 0, 0, 0);
    let on_time = next + Duration::from_millis(3);
    // On time: every policy fires the one due tick.
    for m in [Missed::Skip, Missed::Once, Missed::All(5)] {
        let (due, following) = plan(&every.clone().missed(m), next, None, on_time);
        assert_eq!(due, vec![next], "{m:?}");
        assert_eq!(following, Some(next + Duration::from_secs(10)));
    }
    // Down for 95 s: ticks at 0, 10, ..., 90 are due.
    let now = next + Duration::from_secs(95);
    let (due, following) = plan(&every.clone().missed(Missed::Skip), next, None, now);
    assert_eq!(due, vec![next + Duration::from_secs(90)]); // 5 s late, within the grace
    assert_eq!(following, Some(next + Duration::from_secs(100)));
    let (due, _) = plan(&every.clone().missed(Missed::Skip).grace(Duration::from_secs(1)), next, None, now);
    assert!(due.is_empty()); // the latest is 5 s late, over a 1 s grace
    let (due, _) = plan(&every.clone().missed(Missed::Once).grace(Duration::from_secs(1)), next, None, now);
    assert_eq!(due, vec![next + Duration::from_secs(90)]);
    let (due, _) = plan(&every.clone().missed(Missed::All(3)), next, None, now);
    assert_eq!(due, vec![70, 80, 90].into_iter().map(|s| next + Duration::from_secs(s)).collect::<Vec<_>>());
    let (due, _) = plan(&every.clone().missed(Missed::All(1000)), next, None, now);
    assert_eq!(due.len(), 10);
    // A tick already fired is not fired again (a schedule stored again by a racing process).
    let (due, _) =
        plan(&every.clone().missed(Missed::All(1000)), next, Some(next + Duration::from_secs(40)), now);
    assert_eq!(due.first(), Some(&(next + Duration::from_secs(50))));
    assert_eq!(due.len(), 5);
}

#[test]
fn a_long_downtime_of_a_fast_schedule_is_planned_quickly() {
    let every = Schedule::every(Duration::from_millis(1)).unwrap().missed(Missed::All(1000));
    let next = utc(2026, 1, 1, 0, 0, 0);
    let now = next + Duration::from_secs(3600); // 3.6 M missed ticks
    let (due, following) = plan(&every, next, None, now);
    assert_eq!(due.len(), 1000);
    assert_eq!(due.last(), Some(&now));
    assert_eq!(following, Some(now + Duration::from_millis(1)));
}
