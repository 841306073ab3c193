//! Many pipelines: a folder of specs (`pipelines/*.yaml`), and the runs a
//! backfill over a date range stands for.
//!
//! A pipelines folder holds one spec per file, `*.yaml`, `*.yml` or
//! `*.json` (other files and subfolders are ignored), each naming its own
//! pipeline; `tributary deploy-schedules DIR --stack NAME` makes the stack's
//! schedules match it. Every spec is read and validated before anything is
//! done with any of them, so one bad file stops the deploy naming the file
//! and the field. A spec file may take `${VAR}` from the environment
//! ([`env`](mod@env)).

pub mod env;

use std::path::{Path, PathBuf};

use chrono::{DateTime, Days, NaiveDate, NaiveTime, TimeZone, Utc};
use contracts::schedule::{Schedule, ScheduleExpression};
use contracts::spec::{PipelineSpec, SpecError};
use tributary_core::calendar::compile_cron;

/// A spec read from a file.
#[derive(Clone, Debug)]
pub struct SpecFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// The validated spec.
    pub spec: PipelineSpec,
}

/// The next step after reading a spec or its folder failed: for one that
/// is not there, where a spec comes from.
fn read_step(error: &std::io::Error) -> &'static str {
    match error.kind() {
        std::io::ErrorKind::NotFound => {
            "; check the path (tributary init URL --out FILE writes a spec from what a vendor answers)"
        }
        _ => "",
    }
}

/// Why a pipelines folder or a backfill range was refused.
#[derive(Debug, thiserror::Error)]
pub enum PipelinesError {
    /// The folder or a file could not be read.
    #[error("reading {path}: {error}{step}", step = read_step(error))]
    Read {
        /// The folder or file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        error: std::io::Error,
    },
    /// A spec's `${VAR}` could not be replaced (the error names the
    /// variable and the line).
    #[error("spec {path}: {error}")]
    Env {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        error: env::EnvError,
    },
    /// A spec is invalid (the error names the field).
    #[error(
        "spec {path}: {error}; the spec reference, docs/spec.md, and the generated docs/contracts/pipeline-spec.v1.md have every field"
    )]
    Spec {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        error: contracts::spec::SpecError,
    },
    /// Two files declare the same pipeline: their schedules would clash.
    #[error("specs {first} and {second} both declare pipeline {pipeline}; pipeline names must be unique in a folder")]
    Duplicate {
        /// The pipeline.
        pipeline: String,
        /// The first file.
        first: PathBuf,
        /// The second file.
        second: PathBuf,
    },
    /// `--from` is after `--to`.
    #[error("--from {from} is after --to {to}")]
    EmptyRange {
        /// First date.
        from: NaiveDate,
        /// Last date.
        to: NaiveDate,
    },
    /// The schedule does not fire in the range: no run would start.
    #[error(
        "{from}..={to}: the schedule of pipeline {pipeline} ({schedule}) never fires in that range; no run started"
    )]
    NoRuns {
        /// The pipeline.
        pipeline: String,
        /// First date.
        from: NaiveDate,
        /// Last date.
        to: NaiveDate,
        /// The expression and its zone.
        schedule: String,
    },
    /// The range stands for more runs than allowed.
    #[error(
        "{from}..={to} stands for more than {max_runs} runs of pipeline {pipeline} ({what}); narrow the range or raise --max-runs"
    )]
    TooManyRuns {
        /// The pipeline.
        pipeline: String,
        /// First date.
        from: NaiveDate,
        /// Last date.
        to: NaiveDate,
        /// The cap.
        max_runs: usize,
        /// How runs were counted.
        what: String,
    },
    /// A backfill of an incremental pipeline: each past day's run would ask
    /// for the records since the pipeline's current cursor, not that day's.
    #[error(
        "pipeline {pipeline} is incremental (request.incremental): a run of a past day asks the vendor for the \
         records since the pipeline's cursor, not that day's, so a backfill would land the same recent records in \
         every day's partition (a trial); backfill with a spec without incremental whose request holds the run's \
         window ({{run_start}}, {{run_end}}), or run the days one by one with --scheduled-at if that is meant"
    )]
    IncrementalBackfill {
        /// The pipeline.
        pipeline: String,
    },
}

/// Whether `path` is a spec file by its extension (`yaml`, `yml`, `json`).
pub fn is_spec_file(path: &Path) -> bool {
    path.is_file() && matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

/// Reads and validates one spec file: its `${VAR}` replaced from the
/// environment ([`env::substitute`]), contracts' validation, then its
/// `schedule` compiled by the cron engine ([`check_schedule`]).
///
/// # Errors
/// [`PipelinesError::Read`], [`PipelinesError::Env`] or
/// [`PipelinesError::Spec`] naming the file.
pub fn load_spec(path: &Path) -> Result<PipelineSpec, PipelinesError> {
    let spec_error = |error| PipelinesError::Spec { path: path.to_path_buf(), error };
    let text =
        std::fs::read_to_string(path).map_err(|error| PipelinesError::Read { path: path.to_path_buf(), error })?;
    let text = env::substitute(&text, |name| std::env::var(name).ok())
        .map_err(|error| PipelinesError::Env { path: path.to_path_buf(), error })?;
    let spec = PipelineSpec::from_yaml(&text).map_err(spec_error)?;
    check_schedule(&spec).map_err(spec_error)?;
    Ok(spec)
}

/// Checks that the cron engine takes the spec's `schedule` (contracts
/// checked it against EventBridge's table; this catches any expression the
/// table allows and croner would not evaluate, before anything is deployed
/// or triggered).
///
/// # Errors
/// [`SpecError::Invalid`] naming `schedule.expression` and the value.
pub fn check_schedule(spec: &PipelineSpec) -> Result<(), SpecError> {
    let Some(schedule) = &spec.schedule else { return Ok(()) };
    if let ScheduleExpression::Cron(cron) = schedule.parse()?.expression {
        compile_cron(&cron).map_err(|reason| SpecError::Invalid {
            field: "schedule.expression".into(),
            value: format!("{:?}", schedule.expression),
            reason,
        })?;
    }
    Ok(())
}

/// The times `schedule` fires in `[from, to]` (both inclusive), in order,
/// at most `limit + 1` of them (so a caller can tell "more than `limit`"
/// from "exactly `limit`").
///
/// A cron schedule fires at its matching times in its zone (a local time
/// skipped by a daylight-saving change does not fire, as on Scheduler),
/// evaluated by croner; a rate schedule counts from `from` (it has no phase
/// of its own, see `contracts::schedule`); an `at` schedule fires once.
///
/// # Errors
/// [`SpecError::Invalid`] naming `schedule.expression` when croner refuses
/// the cron expression (see [`check_schedule`]).
pub fn fire_times(
    schedule: &Schedule,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    limit: usize,
) -> Result<Vec<DateTime<Utc>>, SpecError> {
    let mut times = Vec::new();
    if to < from {
        return Ok(times);
    }
    match &schedule.expression {
        ScheduleExpression::Cron(expression) => {
            let cron = compile_cron(expression).map_err(|reason| SpecError::Invalid {
                field: "schedule.expression".into(),
                value: format!("{:?}", format!("cron({})", expression.fields().join(" "))),
                reason,
            })?;
            let start = from.with_timezone(&schedule.timezone);
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
            if let Some(time) = schedule.timezone.from_local_datetime(local).earliest() {
                let time = time.with_timezone(&Utc);
                if (from..=to).contains(&time) {
                    times.push(time);
                }
            }
        }
    }
    Ok(times)
}

/// Every spec file in `dir`, read and validated, in file-name order.
///
/// # Errors
/// The first unreadable or invalid file ([`PipelinesError::Spec`] names it
/// and the field), or two files with one pipeline name.
pub fn load_dir(dir: &Path) -> Result<Vec<SpecFile>, PipelinesError> {
    let read_error = |error| PipelinesError::Read { path: dir.to_path_buf(), error };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_error)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(read_error)?;
    paths.retain(|p| is_spec_file(p));
    paths.sort();
    let mut files: Vec<SpecFile> = Vec::with_capacity(paths.len());
    for path in paths {
        let spec = load_spec(&path)?;
        if let Some(first) = files.iter().find(|f| f.spec.pipeline == spec.pipeline) {
            return Err(PipelinesError::Duplicate { pipeline: spec.pipeline, first: first.path.clone(), second: path });
        }
        files.push(SpecFile { path, spec });
    }
    Ok(files)
}

/// Default cap on the runs one backfill starts.
pub const DEFAULT_MAX_RUNS: usize = 1_000;

/// The scheduled times of the runs a backfill over the dates `from..=to`
/// stands for, in order: every time the spec's `schedule` fires in the
/// range (the dates read in the schedule's time zone; a `rate(...)` counts
/// from `from` at 00:00), or, for a spec without a schedule, one run per day
/// at 00:00 UTC.
///
/// Each run's id derives from its time exactly as a scheduled run's does,
/// so a backfill is the scheduled run of the same time: it completes one
/// that did not complete and never rewrites a completed one (Persist
/// dead-letters a page whose records changed, with an alert).
///
/// # Errors
/// [`PipelinesError::EmptyRange`] when `from > to`;
/// [`PipelinesError::IncrementalBackfill`] for an incremental pipeline;
/// [`PipelinesError::NoRuns`] when the schedule never fires in the range;
/// [`PipelinesError::TooManyRuns`] beyond `max_runs`.
pub fn backfill_times(
    spec: &PipelineSpec,
    from: NaiveDate,
    to: NaiveDate,
    max_runs: usize,
) -> Result<Vec<DateTime<Utc>>, PipelinesError> {
    if from > to {
        return Err(PipelinesError::EmptyRange { from, to });
    }
    if spec.incremental.is_some() {
        return Err(PipelinesError::IncrementalBackfill { pipeline: spec.pipeline.clone() });
    }
    let too_many =
        |what: String| PipelinesError::TooManyRuns { pipeline: spec.pipeline.clone(), from, to, max_runs, what };
    let Some(schedule) = &spec.schedule else {
        let days = usize::try_from((to - from).num_days() + 1).unwrap_or(usize::MAX);
        if days > max_runs {
            return Err(too_many(format!("no schedule: one run per day at 00:00 UTC, {days} days")));
        }
        return Ok(from.iter_days().take(days).map(|day| day.and_time(NaiveTime::MIN).and_utc()).collect());
    };
    // Validated with the spec; parsing cannot fail here.
    let spec_error = |error| PipelinesError::Spec { path: PathBuf::from("."), error };
    let parsed = schedule.parse().map_err(spec_error)?;
    let zone = parsed.timezone;
    let local_midnight = |day: NaiveDate| {
        zone.from_local_datetime(&day.and_time(NaiveTime::MIN)).earliest().map(|t| t.with_timezone(&Utc))
    };
    let start = local_midnight(from).unwrap_or_else(|| from.and_time(NaiveTime::MIN).and_utc());
    let next_day = to.checked_add_days(Days::new(1)).unwrap_or(to);
    let end = local_midnight(next_day).unwrap_or_else(|| next_day.and_time(NaiveTime::MIN).and_utc())
        - chrono::Duration::seconds(1);
    let times = fire_times(&parsed, start, end, max_runs).map_err(spec_error)?;
    let described = format!("schedule {} in {}", schedule.expression, schedule.timezone);
    if times.is_empty() {
        return Err(PipelinesError::NoRuns { pipeline: spec.pipeline.clone(), from, to, schedule: described });
    }
    if times.len() > max_runs {
        return Err(too_many(described));
    }
    Ok(times)
}

/// The day `time` falls on as [`backfill_times`] reads `--from`/`--to`: in
/// the schedule's time zone, or UTC for a spec without a schedule. A
/// backfill from this day to its last day runs `time` again and every
/// time after it.
pub fn backfill_day(spec: &PipelineSpec, time: DateTime<Utc>) -> NaiveDate {
    match spec.schedule.as_ref().and_then(|schedule| schedule.parse().ok()) {
        Some(parsed) => time.with_timezone(&parsed.timezone).date_naive(),
        None => time.date_naive(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use contracts::schedule::{ScheduleSpec, ScheduleState};

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).expect("time").with_timezone(&Utc)
    }

    fn fires(expression: &str, timezone: &str, from: &str, to: &str) -> Vec<String> {
        let schedule =
            ScheduleSpec { expression: expression.into(), timezone: timezone.into(), state: ScheduleState::Enabled };
        let schedule = schedule.parse().expect("valid expression");
        fire_times(&schedule, at(from), at(to), 100).expect("croner takes it").iter().map(|t| t.to_rfc3339()).collect()
    }

    #[test]
    fn croner_evaluates_every_form_contracts_takes() {
        for expression in [
            "cron(0 6 * * ? *)",
            "cron(0 0 L * ? *)",
            "cron(0 0 15W * ? *)",
            "cron(0 9 ? * 3#2 *)",
            "cron(0 9 ? * 6L *)",
            "cron(*/5 8-17/2 1,15 JAN-MAR,DEC ? 2026-2030)",
            "cron(15 10 ? * sun,wed 2027/2)",
            "cron(0/59 23 31 12 ? 2199)",
        ] {
            let spec = spec(&format!("schedule: {{expression: '{expression}'}}"));
            check_schedule(&spec).unwrap_or_else(|e| panic!("{expression}: {e}"));
            let schedule = spec.schedule.expect("schedule").parse().expect("parsed");
            let times =
                fire_times(&schedule, at("2026-01-01T00:00:00Z"), at("2031-01-01T00:00:00Z"), 5).expect("fires");
            assert!(expression.contains("2199") || !times.is_empty(), "{expression} never fires in 2026-2030");
        }
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
        for (expression, from, to, expected) in [
            ("cron(0 0 L * ? *)", "2027-01-01T00:00:00Z", "2027-03-01T00:00:00Z", &["2027-01-31", "2027-02-28"][..]),
            // 2026-11-15 is a Sunday: 15W is Monday the 16th.
            ("cron(0 0 15W * ? *)", "2026-11-01T00:00:00Z", "2026-11-30T00:00:00Z", &["2026-11-16"]),
            // 3#2 = the second Tuesday: 2026-12-08.
            ("cron(0 9 ? * 3#2 *)", "2026-12-01T00:00:00Z", "2026-12-31T00:00:00Z", &["2026-12-08T09:00"]),
            // 6L = the last Friday: 2026-12-25.
            ("cron(0 9 ? * 6L *)", "2026-12-01T00:00:00Z", "2026-12-31T00:00:00Z", &["2026-12-25T09:00"]),
            (
                "cron(0/20 9 * * ? 2026)",
                "2026-12-31T00:00:00Z",
                "2027-01-01T23:00:00Z",
                &["2026-12-31T09:00", "2026-12-31T09:20", "2026-12-31T09:40"],
            ),
        ] {
            let expected: Vec<String> = expected
                .iter()
                .map(|t| if t.len() == 10 { format!("{t}T00:00:00+00:00") } else { format!("{t}:00+00:00") })
                .collect();
            assert_eq!(fires(expression, "UTC", from, to), expected, "{expression}");
        }
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
        let schedule =
            ScheduleSpec { expression: "rate(1 minute)".into(), timezone: "UTC".into(), state: ScheduleState::Enabled };
        let times =
            fire_times(&schedule.parse().expect("valid"), at("2026-01-01T00:00:00Z"), at("2026-12-31T00:00:00Z"), 1000)
                .expect("rate");
        assert_eq!(times.len(), 1001);
    }

    fn spec(schedule: &str) -> PipelineSpec {
        PipelineSpec::from_yaml(&format!(
            "version: 1\npipeline: p\nstrategy: {{kind: simple}}\nrequest: {{url: 'https://api.example.com/x'}}\ntarget: {{dataset: d}}\n{schedule}"
        ))
        .expect("valid")
    }

    fn day(text: &str) -> NaiveDate {
        text.parse().expect("date")
    }

    fn times(spec: &PipelineSpec, from: &str, to: &str, max: usize) -> Result<Vec<String>, String> {
        backfill_times(spec, day(from), day(to), max)
            .map(|t| t.iter().map(|t| t.to_rfc3339()).collect())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn without_a_schedule_one_run_per_day_at_midnight_utc() {
        assert_eq!(
            times(&spec(""), "2026-11-28", "2026-11-30", 10).expect("ok"),
            ["2026-11-28T00:00:00+00:00", "2026-11-29T00:00:00+00:00", "2026-11-30T00:00:00+00:00"]
        );
        let err = times(&spec(""), "2026-01-01", "2026-12-31", 100).expect_err("365 > 100");
        assert!(err.contains("more than 100 runs") && err.contains("365 days") && err.contains("--max-runs"), "{err}");
        assert!(times(&spec(""), "2026-12-02", "2026-12-01", 10).expect_err("empty").contains("after --to"));
        // An incremental pipeline's past days would all fetch since its
        // current cursor (a trial: the same record in four partitions).
        let incremental =
            spec("incremental: {cursor_field: /updated_at, start: '2026-01-01T00:00:00Z', param: since}\n");
        let err = times(&incremental, "2026-11-20", "2026-11-22", 10).expect_err("incremental");
        assert!(err.contains("pipeline p is incremental") && err.contains("{run_start}"), "{err}");
    }

    #[test]
    fn with_a_schedule_its_fire_times_in_the_range() {
        let twice = spec("schedule: {expression: 'cron(0 6,18 * * ? *)'}\n");
        assert_eq!(
            times(&twice, "2026-11-28", "2026-11-29", 10).expect("ok"),
            [
                "2026-11-28T06:00:00+00:00",
                "2026-11-28T18:00:00+00:00",
                "2026-11-29T06:00:00+00:00",
                "2026-11-29T18:00:00+00:00"
            ]
        );
        // The dates are the schedule zone's: 23:30 in New York is 04:30Z the next day.
        let late = spec("schedule: {expression: 'cron(30 23 * * ? *)', timezone: America/New_York}\n");
        assert_eq!(times(&late, "2026-12-01", "2026-12-01", 10).expect("ok"), ["2026-12-02T04:30:00+00:00"]);
        let every_minute = spec("schedule: {expression: 'rate(1 minute)'}\n");
        let err = times(&every_minute, "2026-12-01", "2026-12-01", 1000).expect_err("1440 > 1000");
        assert!(err.contains("more than 1000 runs") && err.contains("rate(1 minute)"), "{err}");
        assert_eq!(times(&every_minute, "2026-12-01", "2026-12-01", 1440).expect("ok").len(), 1440);
        // A schedule that never fires in the range starts nothing and says so.
        let february_31 = spec("schedule: {expression: 'cron(0 6 31 2 ? *)'}\n");
        let err = times(&february_31, "2026-01-01", "2030-12-31", 1000).expect_err("never fires");
        assert!(err.contains("never fires") && err.contains("cron(0 6 31 2 ? *)") && err.contains("no run"), "{err}");
    }

    #[test]
    fn a_folder_is_read_whole_and_refused_naming_the_bad_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = "version: 1\npipeline: a\nstrategy: {kind: simple}\nrequest: {url: 'https://x.example/a'}\ntarget: {dataset: a}\n";
        std::fs::write(dir.path().join("a.yaml"), good).expect("write");
        std::fs::write(dir.path().join("b.yml"), good.replace("pipeline: a", "pipeline: b")).expect("write");
        std::fs::write(dir.path().join("README.md"), "not a spec").expect("write");
        let files = load_dir(dir.path()).expect("valid folder");
        assert_eq!(files.iter().map(|f| f.spec.pipeline.as_str()).collect::<Vec<_>>(), ["a", "b"]);

        std::fs::write(dir.path().join("c.json"), r#"{"version":1,"pipeline":"a","strategy":{"kind":"simple"},"request":{"url":"https://x.example/c"},"target":{"dataset":"c"}}"#)
            .expect("write");
        let err = load_dir(dir.path()).expect_err("duplicate").to_string();
        assert!(err.contains("a.yaml") && err.contains("c.json") && err.contains("pipeline a"), "{err}");
        std::fs::write(
            dir.path().join("c.json"),
            good.replace("pipeline: a", "pipeline: c\nschedule: {expression: 'cron(0 6 * * * *)'}"),
        )
        .expect("write");
        let err = load_dir(dir.path()).expect_err("invalid").to_string();
        assert!(err.contains("c.json") && err.contains("schedule.expression"), "{err}");
    }
}
