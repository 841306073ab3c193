//! Many pipelines: a folder of specs (`pipelines/*.yaml`), and the runs a
//! backfill over a date range stands for.
//!
//! A pipelines folder holds one spec per file, `*.yaml`, `*.yml` or
//! `*.json` (other files and subfolders are ignored), each naming its own
//! pipeline; `tributary deploy-schedules DIR --stack NAME` makes the stack's
//! schedules match it. Every spec is read and validated before anything is
//! done with any of them, so one bad file stops the deploy naming the file
//! and the field.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Days, NaiveDate, NaiveTime, TimeZone, Utc};
use contracts::spec::PipelineSpec;

/// A spec read from a file.
#[derive(Clone, Debug)]
pub struct SpecFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// The validated spec.
    pub spec: PipelineSpec,
}

/// Why a pipelines folder or a backfill range was refused.
#[derive(Debug, thiserror::Error)]
pub enum PipelinesError {
    /// The folder or a file could not be read.
    #[error("reading {path}: {error}")]
    Read {
        /// The folder or file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A spec is invalid (the error names the field).
    #[error("spec {path}: {error}")]
    Spec {
        /// The file.
        path: PathBuf,
        /// What is wrong.
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
}

/// Whether `path` is a spec file by its extension (`yaml`, `yml`, `json`).
pub fn is_spec_file(path: &Path) -> bool {
    path.is_file() && matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

/// Reads and validates one spec file.
///
/// # Errors
/// [`PipelinesError::Read`] or [`PipelinesError::Spec`] naming the file.
pub fn load_spec(path: &Path) -> Result<PipelineSpec, PipelinesError> {
    let text =
        std::fs::read_to_string(path).map_err(|error| PipelinesError::Read { path: path.to_path_buf(), error })?;
    PipelineSpec::from_yaml(&text).map_err(|error| PipelinesError::Spec { path: path.to_path_buf(), error })
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
/// so a backfill rewrites the scheduled run of the same time.
///
/// # Errors
/// [`PipelinesError::EmptyRange`] when `from > to`;
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
    let parsed = schedule.parse().map_err(|error| PipelinesError::Spec { path: PathBuf::from("."), error })?;
    let zone = parsed.timezone;
    let local_midnight = |day: NaiveDate| {
        zone.from_local_datetime(&day.and_time(NaiveTime::MIN)).earliest().map(|t| t.with_timezone(&Utc))
    };
    let start = local_midnight(from).unwrap_or_else(|| from.and_time(NaiveTime::MIN).and_utc());
    let next_day = to.checked_add_days(Days::new(1)).unwrap_or(to);
    let end = local_midnight(next_day).unwrap_or_else(|| next_day.and_time(NaiveTime::MIN).and_utc())
        - chrono::Duration::seconds(1);
    let times = parsed.fire_times(start, end, max_runs);
    if times.len() > max_runs {
        return Err(too_many(format!("schedule {} in {}", schedule.expression, schedule.timezone)));
    }
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::*;

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
