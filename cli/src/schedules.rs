//! The CLI's AWS side for many pipelines (feature `aws`): a folder of specs
//! to the stack's EventBridge Scheduler schedules (`deploy-schedules`), and
//! ad-hoc runs and backfills on the stack's orchestrator queue
//! (`trigger`). Both find the stack's resources by its CloudFormation
//! outputs.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use contracts::RunId;
use contracts::spec::PipelineSpec;
use tributary_core::ports::QueueSender;
use tributary_core::schedules::{self, Change, ScheduleDef, StackTargets};

use crate::pipelines::{self, SpecFile};

/// The stack output `trigger` sends to.
pub const ORCHESTRATOR_QUEUE_OUTPUT: &str = "OrchestratorQueueUrl";

/// Why `deploy-schedules` or `trigger` stopped.
#[derive(Debug, thiserror::Error)]
pub enum AwsCommandError {
    /// A spec or the folder (names the file and the field).
    #[error(transparent)]
    Pipelines(#[from] pipelines::PipelinesError),
    /// A spec's schedules break a Scheduler limit (names the file).
    #[error("spec {path}: {error}")]
    Schedule {
        /// The file.
        path: PathBuf,
        /// The limit it breaks.
        #[source]
        error: schedules::ScheduleDefError,
    },
    /// The stack or one of its outputs.
    #[error("stack {stack}: {source}")]
    Stack {
        /// The stack name.
        stack: String,
        /// What is missing or failed.
        source: tributary_core::ports::PortError,
    },
    /// An AWS call failed.
    #[error(transparent)]
    Port(#[from] tributary_core::ports::PortError),
}

/// One schedule's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleOutcome {
    /// What was (or, in a dry run, would be) done.
    pub change: Change,
    /// The spec file that declares it (`None` for a deleted schedule).
    pub path: Option<PathBuf>,
}

/// What `deploy-schedules` did.
#[derive(Clone, Debug)]
pub struct DeployReport {
    /// The stack's schedule group.
    pub group: String,
    /// Per schedule, by name.
    pub outcomes: Vec<ScheduleOutcome>,
    /// Whether nothing was changed (`--dry-run`).
    pub dry_run: bool,
}

impl std::fmt::Display for DeployReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for outcome in &self.outcomes {
            let what = match (&outcome.change, &outcome.path) {
                (Change::Create(def) | Change::Update(def), Some(path)) => {
                    format!("{} {} ({})", def.expression, def.timezone, path.display())
                }
                (_, Some(path)) => path.display().to_string(),
                (_, None) => "no spec declares it".into(),
            };
            writeln!(f, "{:<9} {:<40} {what}", outcome.change.verb(self.dry_run), outcome.change.name())?;
        }
        let count = |verb: &str| self.outcomes.iter().filter(|o| o.change.verb(false) == verb).count();
        writeln!(
            f,
            "schedule group {}{}: {} {}, {} {}, {} unchanged, {} {}",
            self.group,
            if self.dry_run { " (dry run: nothing changed)" } else { "" },
            count("created"),
            if self.dry_run { "to create" } else { "created" },
            count("updated"),
            if self.dry_run { "to update" } else { "updated" },
            count("unchanged"),
            count("deleted"),
            if self.dry_run { "to delete" } else { "deleted" },
        )
    }
}

/// The stack's outputs by name.
async fn outputs(sdk: &aws_config::SdkConfig, stack: &str) -> Result<adapters::aws::StackOutputs, AwsCommandError> {
    adapters::aws::StackOutputs::describe(sdk, stack)
        .await
        .map_err(|source| AwsCommandError::Stack { stack: stack.into(), source })
}

fn output<'a>(outputs: &'a adapters::aws::StackOutputs, stack: &str, name: &str) -> Result<&'a str, AwsCommandError> {
    outputs.get(name).map_err(|source| AwsCommandError::Stack { stack: stack.into(), source })
}

/// Every schedule the specs of `files` declare, with the file of each.
///
/// # Errors
/// [`AwsCommandError::Schedule`] naming the file whose schedule breaks a
/// Scheduler limit.
pub fn declared_schedules(
    files: &[SpecFile],
    targets: &StackTargets,
) -> Result<Vec<(ScheduleDef, PathBuf)>, AwsCommandError> {
    let mut out = Vec::new();
    for file in files {
        let defs = schedules::declared(&file.spec, targets)
            .map_err(|error| AwsCommandError::Schedule { path: file.path.clone(), error })?;
        out.extend(defs.into_iter().map(|def| (def, file.path.clone())));
    }
    Ok(out)
}

/// `tributary deploy-schedules DIR --stack NAME [--dry-run]`: reads and
/// validates every spec in `dir` (any invalid one stops here, before any
/// AWS call), then makes the stack's schedule group hold exactly the
/// schedules they declare: creates the missing, updates the different,
/// deletes those no spec declares (the group is tributary's alone).
///
/// # Errors
/// [`AwsCommandError`]: a bad spec (file and field), a missing stack output,
/// an AWS call that failed (schedules changed before it stay changed; a
/// second run finishes the job).
pub async fn deploy_schedules(
    sdk: &aws_config::SdkConfig,
    stack: &str,
    dir: &Path,
    dry_run: bool,
) -> Result<DeployReport, AwsCommandError> {
    let files = pipelines::load_dir(dir)?;
    // The limits are checked with placeholder ARNs first: a spec too large
    // to schedule is refused before any AWS call too.
    let placeholder = StackTargets {
        orchestrator_arn: String::new(),
        notify_arn: String::new(),
        role_arn: String::new(),
        dlq_arn: String::new(),
    };
    declared_schedules(&files, &placeholder)?;
    let outputs = outputs(sdk, stack).await?;
    let targets = StackTargets {
        orchestrator_arn: output(&outputs, stack, "OrchestratorFunctionArn")?.to_string(),
        notify_arn: output(&outputs, stack, "NotifyFunctionArn")?.to_string(),
        role_arn: output(&outputs, stack, "SchedulerRoleArn")?.to_string(),
        dlq_arn: output(&outputs, stack, "SchedulerDlqArn")?.to_string(),
    };
    let group_name = output(&outputs, stack, "ScheduleGroupName")?;
    let declared = declared_schedules(&files, &targets)?;
    let group = adapters::aws::ScheduleGroup::new(aws_sdk_scheduler::Client::new(sdk), group_name);
    let existing = group.list().await?;
    let defs: Vec<ScheduleDef> = declared.iter().map(|(def, _)| def.clone()).collect();
    let mut outcomes = Vec::new();
    for change in schedules::plan(&defs, &existing) {
        if !dry_run {
            match &change {
                Change::Create(def) => group.create(def).await?,
                Change::Update(def) => group.update(def).await?,
                Change::Delete(name) => group.delete(name).await?,
                Change::Unchanged(_) => {}
            }
        }
        let path = declared.iter().find(|(def, _)| def.name == change.name()).map(|(_, path)| path.clone());
        outcomes.push(ScheduleOutcome { change, path });
    }
    Ok(DeployReport { group: group_name.to_string(), outcomes, dry_run })
}

/// A run `trigger` queued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedRun {
    /// The run's id (its scheduled time).
    pub run_id: RunId,
    /// The scheduled time it stands for.
    pub time: DateTime<Utc>,
}

/// `tributary trigger SPEC --stack NAME`: sends one run trigger per time to
/// the stack's orchestrator queue (`OrchestratorQueueUrl`), in
/// `SendMessageBatch` calls of up to 10 (SQS's limit), and returns the runs
/// in order. The Orchestrator starts each as the scheduler would: the run id
/// is the time, so a run already scheduled at that time is overwritten,
/// not duplicated.
///
/// # Errors
/// A missing output, a message over the queue's 256 KiB (a spec that
/// large), or SQS's errors (runs sent before the failure stay queued).
pub async fn trigger(
    sdk: &aws_config::SdkConfig,
    stack: &str,
    spec: &PipelineSpec,
    times: &[DateTime<Utc>],
    replace: Option<&str>,
) -> Result<Vec<QueuedRun>, AwsCommandError> {
    let outputs = outputs(sdk, stack).await?;
    let queue = output(&outputs, stack, ORCHESTRATOR_QUEUE_OUTPUT)?;
    let bodies = times
        .iter()
        .map(|time| schedules::trigger_message(spec, *time, replace))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| AwsCommandError::Schedule { path: PathBuf::from(&spec.pipeline), error })?;
    let sender = adapters::aws::SqsSender::new(aws_sdk_sqs::Client::new(sdk));
    sender.send(queue, bodies).await?;
    Ok(times.iter().map(|time| QueuedRun { run_id: RunId::from_time(*time), time: *time }).collect())
}
