//! A pipeline's schedule: when EventBridge Scheduler fires it, and which
//! scheduled times a backfill over a date range stands for.
//!
//! ```yaml
//! schedule:
//!   expression: cron(0 6 * * ? *)   # or rate(6 hours), at(2026-12-01T06:00:00)
//!   timezone: Europe/Lisbon         # IANA name; default UTC
//!   state: ENABLED                  # or DISABLED; default ENABLED
//! ```
//!
//! The expression takes EventBridge Scheduler's three forms
//! (<https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html>):
//!
//! - `cron(minutes hours day-of-month month day-of-week year)`: six fields,
//!   day-of-week 1-7 = SUN-SAT, exactly one of day-of-month and day-of-week
//!   is `?`, wildcards `, - * /` everywhere, `L W` in day-of-month, `L #` in
//!   day-of-week, years 1970-2199 (EventBridge's cron reference). It is
//!   checked against that table here and then evaluated by the `croner`
//!   crate in its Quartz mode (seconds `0` prepended, 1 = SUN, `?` as any,
//!   `x/y` steps), which implements `L`, `W`, `#` and the year field. Not
//!   accepted, though Quartz has them: `LW`, `L-n` offsets and `nL` in
//!   day-of-month (EventBridge's table does not list them either).
//! - `rate(value unit)`: a positive whole number of `minute(s)`, `hour(s)`
//!   or `day(s)` (singular for 1, plural otherwise, as EventBridge requires).
//!   A rate schedule has no fixed phase: it counts from when the schedule
//!   was created (or its start date), so a backfill counts from the first
//!   day of its range at 00:00 in the schedule's time zone.
//! - `at(yyyy-mm-ddThh:mm:ss)`: one time, in the schedule's time zone.

use std::str::FromStr;

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::SpecError;

/// The default `schedule.timezone`: `UTC`.
pub const DEFAULT_TIMEZONE: &str = "UTC";

/// When the pipeline runs on AWS: one EventBridge Scheduler schedule
/// (`tributary deploy-schedules`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    /// EventBridge Scheduler expression: `cron(0 6 * * ? *)` (six fields,
    /// day-of-week 1-7 = SUN-SAT, one of day-of-month and day-of-week `?`),
    /// `rate(6 hours)` or `at(2026-12-01T06:00:00)`.
    pub expression: String,
    /// IANA time zone the expression is evaluated in, e.g. `Europe/Lisbon`
    /// (Scheduler's `ScheduleExpressionTimezone`); default `UTC`.
    #[serde(default = "default_timezone")]
    pub timezone: String,
    /// `ENABLED` (default) or `DISABLED` (the schedule exists but does not
    /// fire; `tributary trigger` still runs the pipeline).
    #[serde(default)]
    pub state: ScheduleState,
}

fn default_timezone() -> String {
    DEFAULT_TIMEZONE.into()
}

/// Scheduler's `State` of a schedule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum ScheduleState {
    /// The schedule fires.
    #[default]
    Enabled,
    /// The schedule is kept but does not fire.
    Disabled,
}

impl ScheduleState {
    /// `ENABLED` or `DISABLED`, as Scheduler's API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleState::Enabled => "ENABLED",
            ScheduleState::Disabled => "DISABLED",
        }
    }
}

/// The unit of a `rate(...)` expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateUnit {
    /// `minute` / `minutes`.
    Minutes,
    /// `hour` / `hours`.
    Hours,
    /// `day` / `days`.
    Days,
}

impl RateUnit {
    fn seconds(self) -> i64 {
        match self {
            RateUnit::Minutes => 60,
            RateUnit::Hours => 3_600,
            RateUnit::Days => 86_400,
        }
    }
}

/// A parsed schedule expression.
#[derive(Clone, Debug)]
pub enum ScheduleExpression {
    /// `cron(...)`, evaluated by croner.
    Cron(Box<croner::Cron>),
    /// `rate(value unit)`.
    Rate {
        /// How many units between runs (at least 1).
        value: u32,
        /// The unit.
        unit: RateUnit,
    },
    /// `at(...)`: one local time in the schedule's zone.
    At(NaiveDateTime),
}

/// A schedule checked and ready to evaluate: its expression and zone.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// The expression.
    pub expression: ScheduleExpression,
    /// The time zone it is evaluated in.
    pub timezone: chrono_tz::Tz,
}

impl ScheduleSpec {
    /// Parses the expression and the time zone.
    ///
    /// # Errors
    /// [`SpecError::Invalid`] naming `schedule.expression` or
    /// `schedule.timezone` with the value and what is wrong.
    pub fn parse(&self) -> Result<Schedule, SpecError> {
        let timezone = chrono_tz::Tz::from_str(&self.timezone).map_err(|_| {
            invalid("schedule.timezone", &self.timezone, "is not an IANA time zone name such as UTC or Europe/Lisbon")
        })?;
        let expression = parse_expression(&self.expression)
            .map_err(|reason| invalid("schedule.expression", &self.expression, &reason))?;
        Ok(Schedule { expression, timezone })
    }
}

impl Schedule {
    /// The times this schedule fires in `[from, to]` (both inclusive), in
    /// order, at most `limit + 1` of them (so a caller can tell "more than
    /// `limit`" from "exactly `limit`").
    ///
    /// A cron schedule fires at its matching times in its zone (a local time
    /// skipped by a daylight-saving change does not fire, as on Scheduler);
    /// a rate schedule counts from `from` (it has no phase of its own; see
    /// the module doc); an `at` schedule fires once.
    pub fn fire_times(&self, from: DateTime<Utc>, to: DateTime<Utc>, limit: usize) -> Vec<DateTime<Utc>> {
        let mut times = Vec::new();
        if to < from {
            return times;
        }
        match &self.expression {
            ScheduleExpression::Cron(cron) => {
                let start = from.with_timezone(&self.timezone);
                for time in cron.iter_from(start, croner::Direction::Forward) {
                    let time = time.with_timezone(&Utc);
                    if time > to || times.len() > limit {
                        break;
                    }
                    times.push(time);
                }
            }
            ScheduleExpression::Rate { value, unit } => {
                let step = chrono::Duration::seconds(i64::from(*value) * unit.seconds());
                let mut time = from;
                while time <= to && times.len() <= limit {
                    times.push(time);
                    time += step;
                }
            }
            ScheduleExpression::At(local) => {
                if let Some(time) = self.timezone.from_local_datetime(local).earliest() {
                    let time = time.with_timezone(&Utc);
                    if (from..=to).contains(&time) {
                        times.push(time);
                    }
                }
            }
        }
        times
    }
}

fn invalid(field: &str, value: &str, reason: &str) -> SpecError {
    SpecError::Invalid { field: field.into(), value: format!("{value:?}"), reason: reason.into() }
}

/// EventBridge's cron fields: name, the characters each takes besides
/// digits and names, and the numeric range.
const CRON_FIELDS: [(&str, &str, u32, u32); 6] = [
    ("minutes", ",-*/", 0, 59),
    ("hours", ",-*/", 0, 23),
    ("day-of-month", ",-*?/LW", 1, 31),
    ("month", ",-*/", 1, 12),
    ("day-of-week", ",-*?L#", 1, 7),
    ("year", ",-*/", 1970, 2199),
];

const MONTHS: [&str; 12] = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

fn parse_expression(text: &str) -> Result<ScheduleExpression, String> {
    let text = text.trim();
    let form = "must be cron(minutes hours day-of-month month day-of-week year), rate(value unit) or at(yyyy-mm-ddThh:mm:ss), as EventBridge Scheduler takes them";
    let inner = |prefix: &str| text.strip_prefix(prefix).and_then(|rest| rest.strip_suffix(')'));
    if let Some(fields) = inner("cron(") {
        parse_cron(fields).map(|cron| ScheduleExpression::Cron(Box::new(cron)))
    } else if let Some(rate) = inner("rate(") {
        parse_rate(rate)
    } else if let Some(at) = inner("at(") {
        NaiveDateTime::parse_from_str(at.trim(), "%Y-%m-%dT%H:%M:%S").map(ScheduleExpression::At).map_err(|err| {
            format!("at(...) takes a local time as yyyy-mm-ddThh:mm:ss, e.g. at(2026-12-01T06:00:00): {err}")
        })
    } else {
        Err(form.into())
    }
}

fn parse_rate(text: &str) -> Result<ScheduleExpression, String> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [value, unit] = parts.as_slice() else {
        return Err("rate(...) takes a value and a unit, e.g. rate(6 hours)".into());
    };
    let value: u32 = value
        .parse()
        .ok()
        .filter(|v| *v >= 1)
        .ok_or_else(|| format!("rate value {value:?} must be a whole number of at least 1"))?;
    let (unit, singular) = match *unit {
        "minute" => (RateUnit::Minutes, true),
        "minutes" => (RateUnit::Minutes, false),
        "hour" => (RateUnit::Hours, true),
        "hours" => (RateUnit::Hours, false),
        "day" => (RateUnit::Days, true),
        "days" => (RateUnit::Days, false),
        other => return Err(format!("rate unit {other:?} must be minute(s), hour(s) or day(s)")),
    };
    if singular != (value == 1) {
        return Err(format!(
            "rate({value} {}): EventBridge takes the singular unit for 1 and the plural otherwise",
            parts[1]
        ));
    }
    Ok(ScheduleExpression::Rate { value, unit })
}

fn parse_cron(fields: &str) -> Result<croner::Cron, String> {
    let parts: Vec<&str> = fields.split_whitespace().collect();
    if parts.len() != 6 {
        return Err(format!(
            "cron(...) has {} fields; EventBridge takes six: minutes hours day-of-month month day-of-week year, e.g. cron(0 6 * * ? *)",
            parts.len()
        ));
    }
    for (part, (name, specials, low, high)) in parts.iter().zip(CRON_FIELDS) {
        let upper = part.to_ascii_uppercase();
        let names: &[&str] = match name {
            "month" => &MONTHS,
            "day-of-week" => &DAYS,
            _ => &[],
        };
        let mut rest = upper.clone();
        for name in names {
            rest = rest.replace(name, "");
        }
        if let Some(bad) = rest.chars().find(|c| !c.is_ascii_digit() && !specials.contains(*c)) {
            return Err(format!("the {name} field {part:?} has {bad:?}; it takes digits and {specials}"));
        }
        // Numbers after `/` and `#` are steps and occurrences, not values.
        for piece in upper.split(',') {
            let values = piece.split(['/', '#']).next().unwrap_or_default();
            for number in values.split('-').filter_map(|n| n.trim_end_matches(['L', 'W']).parse::<u32>().ok()) {
                if !(low..=high).contains(&number) {
                    return Err(format!("the {name} field {part:?} has {number}, outside {low}-{high}"));
                }
            }
        }
    }
    let (dom, dow) = (parts[2], parts[4]);
    if (dom == "?") == (dow == "?") {
        return Err(format!(
            "exactly one of day-of-month ({dom}) and day-of-week ({dow}) must be `?` (EventBridge cannot take both, e.g. cron(0 6 * * ? *) or cron(0 6 ? * MON-FRI *))"
        ));
    }
    if dom.to_ascii_uppercase().contains("LW") || dom.contains("L-") || (dom.contains('L') && dom != "L") {
        return Err(format!("day-of-month {dom:?}: only a plain `L` (the last day) is taken, not LW, L-n or nL"));
    }
    let pattern = format!("0 {}", parts.join(" "));
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Required)
        .year(croner::parser::Year::Required)
        .alternative_weekdays(true)
        .sloppy_ranges(true)
        .build()
        .parse(&pattern)
        .map_err(|err| format!("not a valid cron expression: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(expression: &str, timezone: &str) -> ScheduleSpec {
        ScheduleSpec { expression: expression.into(), timezone: timezone.into(), state: ScheduleState::Enabled }
    }

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).expect("time").with_timezone(&Utc)
    }

    fn fires(expression: &str, timezone: &str, from: &str, to: &str) -> Vec<String> {
        let schedule = spec(expression, timezone).parse().expect("valid expression");
        schedule.fire_times(at(from), at(to), 100).iter().map(|t| t.to_rfc3339()).collect()
    }

    fn refused(expression: &str) -> String {
        spec(expression, "UTC").parse().expect_err("refused").to_string()
    }

    #[test]
    fn daily_cron_fires_once_a_day_inclusive_of_both_ends() {
        assert_eq!(
            fires("cron(0 6 * * ? *)", "UTC", "2026-11-28T06:00:00Z", "2026-11-30T06:00:00Z"),
            ["2026-11-28T06:00:00+00:00", "2026-11-29T06:00:00+00:00", "2026-11-30T06:00:00+00:00"]
        );
    }

    #[test]
    fn day_of_week_counts_from_sunday_and_question_mark_means_any() {
        // 2026-11-30 is a Monday; 2-6 = MON-FRI.
        let weekdays = fires("cron(30 7 ? * 2-6 *)", "UTC", "2026-11-28T00:00:00Z", "2026-12-06T23:59:59Z");
        assert_eq!(weekdays.len(), 5, "{weekdays:?}");
        assert_eq!(weekdays[0], "2026-11-30T07:30:00+00:00");
        assert_eq!(fires("cron(30 7 ? * MON-FRI *)", "UTC", "2026-11-28T00:00:00Z", "2026-12-06T23:59:59Z"), weekdays);
        assert_eq!(
            fires("cron(0 0 15 * ? *)", "UTC", "2026-11-01T00:00:00Z", "2026-12-31T00:00:00Z"),
            ["2026-11-15T00:00:00+00:00", "2026-12-15T00:00:00+00:00"]
        );
    }

    #[test]
    fn last_weekday_and_nth_day_of_week() {
        assert_eq!(
            fires("cron(0 0 L * ? *)", "UTC", "2027-01-01T00:00:00Z", "2027-03-01T00:00:00Z"),
            ["2027-01-31T00:00:00+00:00", "2027-02-28T00:00:00+00:00"]
        );
        // 2026-11-15 is a Sunday: 15W is Monday the 16th.
        assert_eq!(
            fires("cron(0 0 15W * ? *)", "UTC", "2026-11-01T00:00:00Z", "2026-11-30T00:00:00Z"),
            ["2026-11-16T00:00:00+00:00"]
        );
        // 3#2 = the second Tuesday: 2026-12-08.
        assert_eq!(
            fires("cron(0 9 ? * 3#2 *)", "UTC", "2026-12-01T00:00:00Z", "2026-12-31T00:00:00Z"),
            ["2026-12-08T09:00:00+00:00"]
        );
        // 6L = the last Friday: 2026-12-25.
        assert_eq!(
            fires("cron(0 9 ? * 6L *)", "UTC", "2026-12-01T00:00:00Z", "2026-12-31T00:00:00Z"),
            ["2026-12-25T09:00:00+00:00"]
        );
        assert_eq!(
            fires("cron(0/20 9 * * ? 2026)", "UTC", "2026-12-31T00:00:00Z", "2027-01-01T23:00:00Z"),
            ["2026-12-31T09:00:00+00:00", "2026-12-31T09:20:00+00:00", "2026-12-31T09:40:00+00:00"]
        );
    }

    #[test]
    fn the_time_zone_moves_the_utc_times() {
        // 06:00 in Lisbon is 06:00Z in winter and 05:00Z in summer.
        assert_eq!(
            fires("cron(0 6 * * ? *)", "Europe/Lisbon", "2026-07-01T00:00:00Z", "2026-07-01T23:00:00Z"),
            ["2026-07-01T05:00:00+00:00"]
        );
        assert_eq!(
            fires("at(2026-12-01T06:00:00)", "America/New_York", "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z"),
            ["2026-12-01T11:00:00+00:00"]
        );
        assert!(fires("at(2026-12-01T06:00:00)", "UTC", "2026-12-02T00:00:00Z", "2026-12-03T00:00:00Z").is_empty());
    }

    #[test]
    fn rates_count_from_the_start_of_the_range() {
        assert_eq!(
            fires("rate(6 hours)", "UTC", "2026-12-01T00:00:00Z", "2026-12-01T12:00:00Z"),
            ["2026-12-01T00:00:00+00:00", "2026-12-01T06:00:00+00:00", "2026-12-01T12:00:00+00:00"]
        );
        assert_eq!(fires("rate(1 day)", "UTC", "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z").len(), 2);
    }

    #[test]
    fn the_limit_stops_the_count_one_past_it() {
        let schedule = spec("rate(1 minute)", "UTC").parse().expect("valid");
        let times = schedule.fire_times(at("2026-01-01T00:00:00Z"), at("2026-12-31T00:00:00Z"), 1000);
        assert_eq!(times.len(), 1001);
    }

    #[test]
    fn malformed_expressions_name_the_field_and_value() {
        for (expression, problem) in [
            ("cron(0 6 * * *)", "six"),
            ("cron(0 6 * * * *)", "exactly one of day-of-month"),
            ("cron(0 6 ? * ? *)", "exactly one of day-of-month"),
            ("cron(0 25 * * ? *)", "outside 0-23"),
            ("cron(0 6 * * ? 2300)", "outside 1970-2199"),
            ("cron(0 6 ? * 0 *)", "outside 1-7"),
            ("cron(0 6 ? * MON/2 *)", "'/'"),
            ("cron(0 6 LW * ? *)", "LW"),
            ("cron(x 6 * * ? *)", "'X'"),
            ("rate(0 hours)", "at least 1"),
            ("rate(1 hours)", "singular"),
            ("rate(5 weeks)", "minute(s)"),
            ("at(2026-12-01 06:00)", "yyyy-mm-ddThh:mm:ss"),
            ("every day at six", "must be cron("),
        ] {
            let err = refused(expression);
            assert!(
                err.contains("schedule.expression") && err.contains(expression) && err.contains(problem),
                "{expression}: {err}"
            );
        }
        let err = spec("cron(0 6 * * ? *)", "Mars/Olympus").parse().expect_err("bad zone").to_string();
        assert!(err.contains("schedule.timezone") && err.contains("Mars/Olympus"), "{err}");
    }
}
