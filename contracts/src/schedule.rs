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
//!   is `?`, wildcards `, - * /` (day-of-week: `, - * ?`), `L W` in
//!   day-of-month, `L #` in day-of-week, years 1970-2199 (EventBridge's cron
//!   reference). Every field is checked here against that table, piece by
//!   piece (`*`, `n`, `a-b` with `a <= b`, `x/step`, `L`, `nW`, `nL`,
//!   `n#k`), so a spec that passes is one Scheduler takes. Not accepted,
//!   though Quartz has them: `LW`, `L-n` offsets and `nL` in day-of-month
//!   (EventBridge's table does not list them either). Evaluating the
//!   expression (which times it fires) is the CLI's (`tributary trigger
//!   --from/--to`, with the `croner` crate on [`CronExpression::quartz_pattern`]),
//!   so this crate carries no cron engine.
//! - `rate(value unit)`: a positive whole number of `minute(s)`, `hour(s)`
//!   or `day(s)` (singular for 1, plural otherwise, as EventBridge requires).
//!   A rate schedule has no fixed phase: it counts from when the schedule
//!   was created (or its start date), so a backfill counts from the first
//!   day of its range at 00:00 in the schedule's time zone.
//! - `at(yyyy-mm-ddThh:mm:ss)`: one time, in the schedule's time zone.

use std::str::FromStr;

use chrono::NaiveDateTime;
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
    /// The unit's length in seconds (60, 3,600 or 86,400).
    pub fn seconds(self) -> i64 {
        match self {
            RateUnit::Minutes => 60,
            RateUnit::Hours => 3_600,
            RateUnit::Days => 86_400,
        }
    }
}

/// A `cron(...)` expression's six fields, each checked against
/// EventBridge's cron table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronExpression {
    fields: [String; 6],
}

impl CronExpression {
    /// The fields as written: minutes, hours, day-of-month, month,
    /// day-of-week, year.
    pub fn fields(&self) -> &[String; 6] {
        &self.fields
    }

    /// The same schedule as a seven-field Quartz pattern, seconds `0`
    /// first: `0 <minutes> <hours> <day-of-month> <month> <day-of-week>
    /// <year>` (day-of-week 1 = SUN, `?` as any), for a Quartz evaluator
    /// such as croner's parser with seconds and year required and
    /// alternative weekdays.
    pub fn quartz_pattern(&self) -> String {
        format!("0 {}", self.fields.join(" "))
    }
}

/// A parsed schedule expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleExpression {
    /// `cron(...)`.
    Cron(CronExpression),
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
#[derive(Clone, Debug, PartialEq, Eq)]
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

fn invalid(field: &str, value: &str, reason: &str) -> SpecError {
    SpecError::Invalid { field: field.into(), value: format!("{value:?}"), reason: reason.into() }
}

/// EventBridge's cron fields: name, the characters each takes besides
/// digits and names, and the numeric range (EventBridge Scheduler User
/// Guide, "Cron expressions").
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
        parse_cron(fields).map(ScheduleExpression::Cron)
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

fn parse_cron(fields: &str) -> Result<CronExpression, String> {
    let parts: Vec<&str> = fields.split_whitespace().collect();
    let Ok(parts) = <[&str; 6]>::try_from(parts.as_slice()) else {
        return Err(format!(
            "cron(...) has {} fields; EventBridge takes six: minutes hours day-of-month month day-of-week year, e.g. cron(0 6 * * ? *)",
            parts.len()
        ));
    };
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
        let field = CronField { name, low, high, names };
        for piece in upper.split(',') {
            field.check_piece(piece, &upper).map_err(|problem| format!("the {name} field {part:?}: {problem}"))?;
        }
    }
    let (dom, dow) = (parts[2], parts[4]);
    if (dom == "?") == (dow == "?") {
        return Err(format!(
            "exactly one of day-of-month ({dom}) and day-of-week ({dow}) must be `?` (EventBridge cannot take both, e.g. cron(0 6 * * ? *) or cron(0 6 ? * MON-FRI *))"
        ));
    }
    Ok(CronExpression { fields: parts.map(str::to_owned) })
}

/// One cron field's table row, for checking its comma-separated pieces.
struct CronField<'a> {
    name: &'a str,
    low: u32,
    high: u32,
    names: &'a [&'a str],
}

impl CronField<'_> {
    /// Checks one piece of the field (`field` is the whole field, upper
    /// case): `*`, `?` alone, `n`, `a-b`, `*/s`, `n/s`, `a-b/s`, and the
    /// field's own `L`, `nW` (day-of-month), `nL`, `n#k` (day-of-week).
    /// The characters were checked against the field's table before.
    fn check_piece(&self, piece: &str, field: &str) -> Result<(), String> {
        let day_of_month = self.name == "day-of-month";
        let day_of_week = self.name == "day-of-week";
        if piece.is_empty() {
            return Err("has an empty list item".into());
        }
        if piece == "?" {
            return if field == "?" { Ok(()) } else { Err("`?` must stand alone".into()) };
        }
        if day_of_month && (piece.contains("LW") || piece.contains("L-") || (piece.contains('L') && piece != "L")) {
            return Err(format!("only a plain `L` (the last day) is taken, not LW, L-n or nL ({piece:?})"));
        }
        if piece == "L" && day_of_month {
            return Ok(());
        }
        if piece == "L" {
            // Quartz reads a lone `L` in day-of-week as SAT; croner never
            // fires it, so it is refused rather than silently never run.
            return Err("a lone `L` is taken in day-of-month only; for Saturdays write 7 or SAT, for the last Friday of the month 6L".into());
        }
        if let Some(day) = piece.strip_suffix('W').filter(|_| day_of_month) {
            return self.value(day).map(drop).map_err(|problem| format!("{problem} before W (a single day, as 15W)"));
        }
        if let Some(day) = piece.strip_suffix('L').filter(|_| day_of_week) {
            return self.value(day).map(drop).map_err(|problem| format!("{problem} before L (a single day, as 6L)"));
        }
        if let Some((day, nth)) = piece.split_once('#') {
            self.value(day)?;
            return match nth.parse::<u32>() {
                Ok(1..=5) => Ok(()),
                _ => Err(format!("{piece:?}: the occurrence after # must be 1-5")),
            };
        }
        let (range, step) = match piece.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (piece, None),
        };
        if let Some(step) = step {
            let most = self.high - self.low + 1;
            match step.parse::<u32>() {
                Ok(n) if (1..=most).contains(&n) => {}
                _ => return Err(format!("{piece:?}: the step after / must be a number from 1 to {most}")),
            }
        }
        if range == "*" {
            return Ok(());
        }
        match range.split_once('-') {
            Some((first, last)) => {
                let (first, last) = (self.value(first)?, self.value(last)?);
                if first > last {
                    return Err(format!("the range {range:?} runs backwards"));
                }
                Ok(())
            }
            None => self.value(range).map(drop),
        }
    }

    /// A single value: a number in the field's range or, for months and
    /// days of the week, a name (`JAN`, `SUN`; 1 = SUN).
    fn value(&self, text: &str) -> Result<u32, String> {
        if let Some(index) = self.names.iter().position(|name| *name == text) {
            return Ok(self.low + u32::try_from(index).unwrap_or(0));
        }
        match text.parse::<u32>() {
            Ok(number) if (self.low..=self.high).contains(&number) => Ok(number),
            Ok(number) => Err(format!("has {number}, outside {}-{}", self.low, self.high)),
            Err(_) => Err(format!("{text:?} is not a number from {} to {}", self.low, self.high)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(expression: &str, timezone: &str) -> ScheduleSpec {
        ScheduleSpec { expression: expression.into(), timezone: timezone.into(), state: ScheduleState::Enabled }
    }

    fn refused(expression: &str) -> String {
        spec(expression, "UTC").parse().expect_err("refused").to_string()
    }

    #[test]
    fn every_form_of_the_eventbridge_table_is_taken() {
        for expression in [
            "cron(0 6 * * ? *)",
            "cron(30 7 ? * 2-6 *)",
            "cron(30 7 ? * MON-FRI *)",
            "cron(0 0 L * ? *)",
            "cron(0 0 15W * ? *)",
            "cron(0 9 ? * 3#2 *)",
            "cron(0 9 ? * 6L *)",
            "cron(0/20 9 * * ? 2026)",
            "cron(*/5 8-17/2 1,15 JAN-MAR,DEC ? 2026-2030)",
            "cron(15 10 ? * sun,wed 2027/2)",
        ] {
            let schedule = spec(expression, "Europe/Lisbon").parse().unwrap_or_else(|e| panic!("{expression}: {e}"));
            let ScheduleExpression::Cron(cron) = &schedule.expression else { panic!("{expression}: not cron") };
            let inner = &expression[5..expression.len() - 1];
            assert_eq!(cron.quartz_pattern(), format!("0 {inner}"));
            assert_eq!(cron.fields().join(" "), inner);
            assert_eq!(schedule.timezone, chrono_tz::Europe::Lisbon);
        }
        assert_eq!(
            spec("rate(6 hours)", "UTC").parse().expect("rate").expression,
            ScheduleExpression::Rate { value: 6, unit: RateUnit::Hours }
        );
        assert!(matches!(
            spec("at(2026-12-01T06:00:00)", "UTC").parse().expect("at").expression,
            ScheduleExpression::At(_)
        ));
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
            ("cron(0 6 5L * ? *)", "only a plain `L`"),
            ("cron(0/0 6 * * ? *)", "step after / must be a number from 1 to 60"),
            ("cron(0/ 6 * * ? *)", "step after /"),
            ("cron(0 6 ? * 2#6 *)", "occurrence after # must be 1-5"),
            ("cron(0 6 ? * # *)", "is not a number"),
            ("cron(0 20-8 * * ? *)", "runs backwards"),
            ("cron(0 6,,7 * * ? *)", "empty list item"),
            ("cron(0 6 --1 * ? *)", "is not a number"),
            ("cron(0 6 ?,1 * ? *)", "must stand alone"),
            ("cron(0 6 W * ? *)", "before W"),
            ("cron(0 9 ? * L *)", "a lone `L` is taken in day-of-month only"),
            ("cron(0 6 32W * ? *)", "outside 1-31"),
            ("cron(0 6 ? * 8L *)", "outside 1-7"),
            ("cron(0 6 * FOO ? *)", "'F'"),
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
