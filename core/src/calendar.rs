//! When a schedule fires, and the window of time a run stands for.
//!
//! EventBridge Scheduler's cron form is evaluated by the `croner` crate in
//! its Quartz mode ([`compile_cron`]); `contracts::schedule` checks the
//! expression's grammar and carries no cron engine.
//!
//! A run's window ([`RunWindow`]) is what `{run_start}` and `{run_end}` bind
//! to in a request template: the period of the pipeline's schedule that
//! ends at the run's scheduled time, as an orchestrator's "data interval":
//!
//! | `schedule.expression` | window of the run scheduled at `t` |
//! |---|---|
//! | `cron(...)` | from the schedule's previous fire time before `t` to `t` |
//! | `rate(n unit)` | from `t - n unit` to `t` |
//! | `at(...)`, or no schedule | from `t - 1 day` to `t` |
//!
//! So a daily `cron(0 6 * * ? *)` run at 2026-12-05T06:00Z fetches
//! `[2026-12-04T06:00Z, 2026-12-05T06:00Z)`, and a backfill
//! (`--from/--to`) replays exactly the windows the schedule would have run.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use contracts::schedule::{CronExpression, Schedule, ScheduleExpression};

/// croner's Quartz mode for EventBridge's cron: seconds and year fields,
/// 1 = SUN, `?` as any, `0/20` steps.
///
/// # Errors
/// The reason croner refuses the expression, as text.
pub fn compile_cron(cron: &CronExpression) -> Result<croner::Cron, String> {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Required)
        .year(croner::parser::Year::Required)
        .alternative_weekdays(true)
        .sloppy_ranges(true)
        .build()
        .parse(&cron.quartz_pattern())
        .map_err(|err| format!("not a cron expression croner evaluates: {err}"))
}

/// The half-open period `[start, end)` a run stands for (see the module
/// docs for how the schedule decides it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunWindow {
    /// Inclusive start.
    pub start: DateTime<Utc>,
    /// Exclusive end: the run's scheduled time.
    pub end: DateTime<Utc>,
}

impl RunWindow {
    /// The window of the run scheduled at `time` under `schedule` (`None`:
    /// the pipeline has no schedule). A cron expression that never fired
    /// before `time`, or that croner cannot evaluate (validation refuses
    /// those), falls back to one day.
    pub fn of(schedule: Option<&Schedule>, time: DateTime<Utc>) -> Self {
        let day = Duration::days(1);
        let start = match schedule.map(|s| (&s.expression, s.timezone)) {
            Some((ScheduleExpression::Cron(cron), zone)) => compile_cron(cron)
                .ok()
                .and_then(|cron| cron.find_previous_occurrence(&time.with_timezone(&zone), false).ok())
                .map_or(time - day, |previous| previous.with_timezone(&Utc)),
            Some((ScheduleExpression::Rate { value, unit }, _)) => {
                time - Duration::seconds(i64::from(*value) * unit.seconds())
            }
            Some((ScheduleExpression::At(_), _)) | None => time - day,
        };
        Self { start, end: time }
    }

    /// `start` as RFC 3339 UTC to the second, e.g. `2026-12-04T06:00:00Z`.
    pub fn start_text(&self) -> String {
        self.start.to_rfc3339_opts(SecondsFormat::Secs, true)
    }

    /// `end` as RFC 3339 UTC to the second.
    pub fn end_text(&self) -> String {
        self.end.to_rfc3339_opts(SecondsFormat::Secs, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use contracts::schedule::{ScheduleSpec, ScheduleState};

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).expect("time").with_timezone(&Utc)
    }

    fn window(expression: Option<(&str, &str)>, time: &str) -> (String, String) {
        let schedule = expression.map(|(expression, timezone)| {
            ScheduleSpec { expression: expression.into(), timezone: timezone.into(), state: ScheduleState::Enabled }
                .parse()
                .expect("valid")
        });
        let window = RunWindow::of(schedule.as_ref(), at(time));
        (window.start_text(), window.end_text())
    }

    #[test]
    fn a_cron_runs_window_starts_at_its_previous_fire_time() {
        let daily = Some(("cron(0 6 * * ? *)", "UTC"));
        assert_eq!(
            window(daily, "2026-12-05T06:00:00Z"),
            ("2026-12-04T06:00:00Z".into(), "2026-12-05T06:00:00Z".into())
        );
        let twice = Some(("cron(0 6,18 * * ? *)", "UTC"));
        assert_eq!(window(twice, "2026-12-05T06:00:00Z").0, "2026-12-04T18:00:00Z");
        // Weekdays only: Monday's window reaches back to Friday.
        let weekdays = Some(("cron(30 7 ? * MON-FRI *)", "UTC"));
        assert_eq!(window(weekdays, "2026-11-30T07:30:00Z").0, "2026-11-27T07:30:00Z");
        // In the schedule's zone: summer time ended on 2026-10-25, so the window
        // runs from 06:00 Lisbon in summer (05:00Z) to 06:00 in winter (06:00Z): 25 hours.
        let lisbon = Some(("cron(0 6 * * ? *)", "Europe/Lisbon"));
        assert_eq!(window(lisbon, "2026-10-25T06:00:00Z").0, "2026-10-24T05:00:00Z");
    }

    #[test]
    fn rates_reach_back_one_period_and_no_schedule_one_day() {
        assert_eq!(window(Some(("rate(6 hours)", "UTC")), "2026-12-05T12:00:00Z").0, "2026-12-05T06:00:00Z");
        assert_eq!(window(Some(("rate(1 minute)", "UTC")), "2026-12-05T12:00:00Z").0, "2026-12-05T11:59:00Z");
        assert_eq!(
            window(None, "2026-12-05T00:00:00Z"),
            ("2026-12-04T00:00:00Z".into(), "2026-12-05T00:00:00Z".into())
        );
        assert_eq!(window(Some(("at(2026-12-05T06:00:00)", "UTC")), "2026-12-05T06:00:00Z").0, "2026-12-04T06:00:00Z");
        // Milliseconds of an ad-hoc run are dropped from the text only.
        assert_eq!(window(None, "2026-12-05T16:37:12.345Z").1, "2026-12-05T16:37:12Z");
    }
}
