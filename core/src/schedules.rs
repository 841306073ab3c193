//! The pipelines' EventBridge Scheduler schedules as tributary declares
//! them, and the plan that makes a schedule group match: pure values, no
//! AWS call (the CLI's `deploy-schedules` applies the plan through
//! `adapters::aws::ScheduleGroup`).
//!
//! Per pipeline spec, in the stack's schedule group:
//! - `<pipeline>`: the run schedule, when the spec has a `schedule`. Target
//!   the Orchestrator function, input [`run_input`] (the scheduler-event
//!   wrapper with `<aws.scheduler.scheduled-time>` as `time`, so the run id
//!   is the scheduled time);
//! - `<pipeline>.freshness`: the freshness check, when the spec has a
//!   `freshness` — daily at `deadline_utc` (UTC), target Notify, input
//!   [`freshness_input`].
//!
//! Both retry as [`RetryPolicy::DEFAULT`] and dead-letter to the stack's
//! scheduler DLQ. Schedule names follow Scheduler's `Name` rule (1-64
//! characters of `[0-9a-zA-Z-_.]`); a pipeline name is at most 64 of
//! `a-z 0-9 _ -`, so `.` never clashes, and a freshness check needs a name
//! of at most 54.

use chrono::{DateTime, SecondsFormat, Utc};
use contracts::schedule::ScheduleState;
use contracts::spec::PipelineSpec;

/// Longest schedule name EventBridge Scheduler takes (`CreateSchedule`
/// `Name`: 1-64 characters of `[0-9a-zA-Z-_.]`).
pub const MAX_SCHEDULE_NAME: usize = 64;

/// Largest target `Input` EventBridge Scheduler takes: 256 KiB
/// (`Target.Input`, and Lambda's asynchronous invocation payload).
pub const MAX_INPUT_BYTES: usize = 262_144;

/// Suffix of a freshness check's schedule name.
pub const FRESHNESS_SUFFIX: &str = ".freshness";

/// Scheduler's context attribute for the scheduled time, replaced in the
/// target input at each invocation.
pub const SCHEDULED_TIME: &str = "<aws.scheduler.scheduled-time>";

/// Scheduler's context attribute for the schedule's ARN.
pub const SCHEDULE_ARN: &str = "<aws.scheduler.schedule-arn>";

/// A schedule's `Target.RetryPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// `MaximumEventAgeInSeconds` (Scheduler: 60-86400).
    pub maximum_event_age_secs: i32,
    /// `MaximumRetryAttempts` (Scheduler: 0-185).
    pub maximum_retry_attempts: i32,
}

impl RetryPolicy {
    /// One hour and 3 retries, as the template's schedules had: a run
    /// started an hour late is still useful; after that the DLQ and an
    /// alert are better than a silent late run.
    pub const DEFAULT: RetryPolicy = RetryPolicy { maximum_event_age_secs: 3600, maximum_retry_attempts: 3 };
}

/// What the stack gives the schedules (its CloudFormation outputs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackTargets {
    /// `OrchestratorFunctionArn`: target of run schedules.
    pub orchestrator_arn: String,
    /// `NotifyFunctionArn`: target of freshness checks.
    pub notify_arn: String,
    /// `SchedulerRoleArn`: the role schedules run as.
    pub role_arn: String,
    /// `SchedulerDlqArn`: every schedule's dead-letter queue.
    pub dlq_arn: String,
}

/// One schedule, with every setting tributary manages; two equal values
/// mean nothing to update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleDef {
    /// Name in the group (`<pipeline>` or `<pipeline>.freshness`).
    pub name: String,
    /// `Description`: what it does, for the console.
    pub description: String,
    /// `ScheduleExpression`.
    pub expression: String,
    /// `ScheduleExpressionTimezone` (IANA name).
    pub timezone: String,
    /// `State`.
    pub state: ScheduleState,
    /// `Target.Arn`.
    pub target_arn: String,
    /// `Target.RoleArn`.
    pub role_arn: String,
    /// `Target.Input` (JSON text).
    pub input: String,
    /// `Target.DeadLetterConfig.Arn`.
    pub dlq_arn: Option<String>,
    /// `Target.RetryPolicy`.
    pub retry: Option<RetryPolicy>,
}

/// A spec whose schedules cannot be declared.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleDefError {
    /// The name would break Scheduler's `Name` rule.
    #[error(
        "schedule name {name:?} of pipeline {pipeline} is {len} characters; EventBridge Scheduler takes at most {MAX_SCHEDULE_NAME}: shorten the pipeline name"
    )]
    NameTooLong {
        /// The pipeline.
        pipeline: String,
        /// The name.
        name: String,
        /// Its length.
        len: usize,
    },
    /// The target input is over [`MAX_INPUT_BYTES`].
    #[error(
        "the input of schedule {name:?} is {bytes} bytes; EventBridge Scheduler takes at most {MAX_INPUT_BYTES} (Target.Input): the spec is too large to schedule"
    )]
    InputTooLarge {
        /// The schedule.
        name: String,
        /// Its input's size.
        bytes: usize,
    },
    /// The spec cannot be written as JSON (it always can in practice).
    #[error("pipeline {pipeline}: the spec cannot be written as JSON: {reason}")]
    Encode {
        /// The pipeline.
        pipeline: String,
        /// serde's error.
        #[source]
        reason: serde_json::Error,
    },
}

/// The spec as JSON text.
fn spec_json(spec: &PipelineSpec) -> Result<String, ScheduleDefError> {
    serde_json::to_string(spec).map_err(|err| ScheduleDefError::Encode { pipeline: spec.pipeline.clone(), reason: err })
}

/// The scheduler-event wrapper with `time` as given: what a run schedule
/// passes the Orchestrator (`time` = [`SCHEDULED_TIME`]), and what
/// `tributary trigger` puts on its queue (`time` = the run's time).
fn scheduler_event(spec: &PipelineSpec, time: &str, resource: Option<&str>) -> Result<String, ScheduleDefError> {
    let resources = resource.map(|r| format!(r#","resources":[{}]"#, serde_json::Value::from(r))).unwrap_or_default();
    Ok(format!(
        r#"{{"source":"aws.scheduler","detail-type":"Scheduled Event","time":{}{resources},"detail":{}}}"#,
        serde_json::Value::from(time),
        spec_json(spec)?
    ))
}

/// A run schedule's `Target.Input`:
/// `{"source":"aws.scheduler","detail-type":"Scheduled Event","time":"<aws.scheduler.scheduled-time>","resources":["<aws.scheduler.schedule-arn>"],"detail":<spec>}`.
///
/// # Errors
/// [`ScheduleDefError::Encode`] (not in practice).
pub fn run_input(spec: &PipelineSpec) -> Result<String, ScheduleDefError> {
    scheduler_event(spec, SCHEDULED_TIME, Some(SCHEDULE_ARN))
}

/// The run trigger `tributary trigger` sends to the orchestrator queue for
/// the run scheduled at `time`: the run schedule's input with the time
/// filled in, so the Orchestrator names the run exactly as a scheduled one
/// (`RunId::from_time`) and a backfill overwrites the scheduled run of the
/// same time instead of duplicating it. With `replace` (a re-run token,
/// `tributary trigger --replace`), the event's `replace` field asks the
/// Orchestrator to re-run a completed run, replacing its rows
/// (`crate::rerun`).
///
/// # Errors
/// [`ScheduleDefError::Encode`] (not in practice).
pub fn trigger_message(
    spec: &PipelineSpec,
    time: DateTime<Utc>,
    replace: Option<&str>,
) -> Result<String, ScheduleDefError> {
    let event = scheduler_event(spec, &time.to_rfc3339_opts(SecondsFormat::Secs, true), None)?;
    Ok(match replace {
        Some(token) => format!(r#"{{"replace":{},{}"#, serde_json::Value::from(token), &event[1..]),
        None => event,
    })
}

/// A freshness check's `Target.Input`:
/// `{"time":"<aws.scheduler.scheduled-time>","freshness_check":{"pipeline":…,"deadline_utc":…}}`
/// (Notify reads the day from `time`).
pub fn freshness_input(pipeline: &str, deadline_utc: &str) -> String {
    serde_json::json!({
        "time": SCHEDULED_TIME,
        "freshness_check": {"pipeline": pipeline, "deadline_utc": deadline_utc},
    })
    .to_string()
}

/// The schedules `spec` declares: its run schedule and its freshness
/// check, each when the spec asks for it.
///
/// # Errors
/// [`ScheduleDefError`] for a name over 64 characters or an input over
/// 256 KiB.
pub fn declared(spec: &PipelineSpec, targets: &StackTargets) -> Result<Vec<ScheduleDef>, ScheduleDefError> {
    let mut out = Vec::new();
    if let Some(schedule) = &spec.schedule {
        out.push(ScheduleDef {
            name: spec.pipeline.clone(),
            description: format!("Runs pipeline {} (tributary deploy-schedules).", spec.pipeline),
            expression: schedule.expression.trim().to_string(),
            timezone: schedule.timezone.clone(),
            state: schedule.state,
            target_arn: targets.orchestrator_arn.clone(),
            role_arn: targets.role_arn.clone(),
            input: run_input(spec)?,
            dlq_arn: Some(targets.dlq_arn.clone()),
            retry: Some(RetryPolicy::DEFAULT),
        });
    }
    if let Some(freshness) = &spec.freshness {
        // Validated by the spec: HH:MM.
        let (hour, minute) = freshness.deadline_utc.split_once(':').unwrap_or(("0", "0"));
        let (hour, minute) = (hour.trim_start_matches('0'), minute.trim_start_matches('0'));
        let (hour, minute) = (if hour.is_empty() { "0" } else { hour }, if minute.is_empty() { "0" } else { minute });
        out.push(ScheduleDef {
            name: format!("{}{FRESHNESS_SUFFIX}", spec.pipeline),
            description: format!(
                "Alerts when pipeline {} has no run of the day completed by {} UTC (tributary deploy-schedules).",
                spec.pipeline, freshness.deadline_utc
            ),
            expression: format!("cron({minute} {hour} * * ? *)"),
            timezone: contracts::schedule::DEFAULT_TIMEZONE.into(),
            // A paused pipeline is not expected fresh.
            state: spec.schedule.as_ref().map_or(ScheduleState::Enabled, |s| s.state),
            target_arn: targets.notify_arn.clone(),
            role_arn: targets.role_arn.clone(),
            input: freshness_input(&spec.pipeline, &freshness.deadline_utc),
            dlq_arn: Some(targets.dlq_arn.clone()),
            retry: Some(RetryPolicy::DEFAULT),
        });
    }
    for def in &out {
        if def.name.len() > MAX_SCHEDULE_NAME {
            return Err(ScheduleDefError::NameTooLong {
                pipeline: spec.pipeline.clone(),
                name: def.name.clone(),
                len: def.name.len(),
            });
        }
        if def.input.len() > MAX_INPUT_BYTES {
            return Err(ScheduleDefError::InputTooLarge { name: def.name.clone(), bytes: def.input.len() });
        }
    }
    Ok(out)
}

/// What to do to one schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Declared, not in the group: `CreateSchedule`.
    Create(ScheduleDef),
    /// In the group with other settings: `UpdateSchedule` (a full replace).
    Update(ScheduleDef),
    /// In the group as declared.
    Unchanged(String),
    /// In the group, declared by no spec: `DeleteSchedule`.
    Delete(String),
}

impl Change {
    /// The schedule's name.
    pub fn name(&self) -> &str {
        match self {
            Change::Create(def) | Change::Update(def) => &def.name,
            Change::Unchanged(name) | Change::Delete(name) => name,
        }
    }

    /// `created`, `updated`, `unchanged` or `deleted` (what was done), or
    /// with `dry_run` `create`, `update`, `unchanged` or `delete`.
    pub fn verb(&self, dry_run: bool) -> &'static str {
        match (self, dry_run) {
            (Change::Create(_), false) => "created",
            (Change::Create(_), true) => "create",
            (Change::Update(_), false) => "updated",
            (Change::Update(_), true) => "update",
            (Change::Unchanged(_), _) => "unchanged",
            (Change::Delete(_), false) => "deleted",
            (Change::Delete(_), true) => "delete",
        }
    }
}

/// The changes that make a group holding `existing` hold exactly
/// `declared`, sorted by schedule name.
pub fn plan(declared: &[ScheduleDef], existing: &[ScheduleDef]) -> Vec<Change> {
    let mut changes: Vec<Change> = declared
        .iter()
        .map(|def| match existing.iter().find(|e| e.name == def.name) {
            None => Change::Create(def.clone()),
            Some(current) if current == def => Change::Unchanged(def.name.clone()),
            Some(_) => Change::Update(def.clone()),
        })
        .collect();
    changes.extend(
        existing.iter().filter(|e| !declared.iter().any(|d| d.name == e.name)).map(|e| Change::Delete(e.name.clone())),
    );
    changes.sort_by(|a, b| a.name().cmp(b.name()));
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets() -> StackTargets {
        StackTargets {
            orchestrator_arn: "arn:aws:lambda:us-east-1:123456789012:function:t-orchestrator".into(),
            notify_arn: "arn:aws:lambda:us-east-1:123456789012:function:t-notify".into(),
            role_arn: "arn:aws:iam::123456789012:role/t-scheduler".into(),
            dlq_arn: "arn:aws:sqs:us-east-1:123456789012:t-scheduler-dlq".into(),
        }
    }

    fn spec(extra: &str) -> PipelineSpec {
        PipelineSpec::from_yaml(&format!(
            "version: 1\npipeline: customers\nstrategy: {{kind: simple}}\nrequest: {{url: 'https://api.example.com/c'}}\ntarget: {{dataset: customers}}\n{extra}"
        ))
        .expect("valid spec")
    }

    #[test]
    fn a_spec_declares_its_run_schedule_and_freshness_check() {
        let spec = spec("schedule: {expression: 'cron(0 6 * * ? *)'}\nfreshness: {deadline_utc: '07:05'}\n");
        let defs = declared(&spec, &targets()).expect("declared");
        assert_eq!(defs.len(), 2);
        let run = &defs[0];
        assert_eq!(
            (run.name.as_str(), run.expression.as_str(), run.timezone.as_str()),
            ("customers", "cron(0 6 * * ? *)", "UTC")
        );
        assert_eq!(run.target_arn, targets().orchestrator_arn);
        let input: serde_json::Value = serde_json::from_str(&run.input).expect("JSON input");
        assert_eq!(input["source"], "aws.scheduler");
        assert_eq!(input["time"], SCHEDULED_TIME);
        assert_eq!(input["detail"]["pipeline"], "customers");
        let fresh = &defs[1];
        assert_eq!((fresh.name.as_str(), fresh.expression.as_str()), ("customers.freshness", "cron(5 7 * * ? *)"));
        assert_eq!(fresh.target_arn, targets().notify_arn);
        assert_eq!(fresh.retry, Some(RetryPolicy::DEFAULT));
        assert_eq!(fresh.dlq_arn.as_deref(), Some(targets().dlq_arn.as_str()));
        assert!(declared(&self::spec(""), &targets()).expect("none").is_empty());
    }

    #[test]
    fn a_trigger_is_the_run_input_with_the_time_filled_in() {
        let spec = spec("");
        let time = DateTime::parse_from_rfc3339("2026-11-29T06:00:00Z").expect("time").with_timezone(&Utc);
        let trigger = trigger_message(&spec, time, None).expect("trigger");
        let run = run_input(&spec).expect("input").replace(SCHEDULED_TIME, "2026-11-29T06:00:00Z");
        let (trigger, run): (serde_json::Value, serde_json::Value) =
            (serde_json::from_str(&trigger).expect("JSON"), serde_json::from_str(&run).expect("JSON"));
        assert_eq!(trigger["time"], run["time"]);
        assert_eq!(trigger["detail"], run["detail"]);
        assert_eq!(trigger.get("replace"), None, "a plain trigger re-runs nothing");
        let rerun = trigger_message(&spec, time, Some("fix-\"day\"-1")).expect("trigger");
        let rerun: serde_json::Value = serde_json::from_str(&rerun).expect("JSON");
        assert_eq!(rerun["replace"], "fix-\"day\"-1", "the token, escaped as JSON");
        assert_eq!((&rerun["time"], &rerun["detail"]), (&trigger["time"], &trigger["detail"]));
    }

    #[test]
    fn limits_are_refused_naming_the_schedule() {
        let long = "p".repeat(60);
        let spec = spec("freshness: {deadline_utc: '07:00'}\n").clone();
        let spec = PipelineSpec { pipeline: long.clone(), ..spec };
        let err = declared(&spec, &targets()).expect_err("too long").to_string();
        assert!(err.contains(&format!("{long}.freshness")) && err.contains("at most 64"), "{err}");
        let mut big = self::spec("schedule: {expression: 'rate(1 day)'}\n");
        big.description = Some("x".repeat(MAX_INPUT_BYTES));
        let err = declared(&big, &targets()).expect_err("too large").to_string();
        assert!(err.contains("\"customers\"") && err.contains("Target.Input"), "{err}");
    }

    #[test]
    fn the_plan_creates_updates_keeps_and_deletes() {
        let spec_a = spec("schedule: {expression: 'rate(1 day)'}\n");
        let declared_now = declared(&spec_a, &targets()).expect("declared");
        let mut changed = declared_now[0].clone();
        changed.expression = "rate(2 days)".into();
        let mut stray = declared_now[0].clone();
        stray.name = "gone".into();
        assert_eq!(plan(&declared_now, &[]), vec![Change::Create(declared_now[0].clone())]);
        assert_eq!(plan(&declared_now, &declared_now), vec![Change::Unchanged("customers".into())]);
        assert_eq!(
            plan(&declared_now, &[changed, stray]),
            vec![Change::Update(declared_now[0].clone()), Change::Delete("gone".into())]
        );
    }
}
