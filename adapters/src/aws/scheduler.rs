//! One EventBridge Scheduler schedule group, read and written as
//! [`ScheduleDef`]s (feature `scheduler`): what `tributary deploy-schedules`
//! applies its plan through.
//!
//! Every schedule is created with `FlexibleTimeWindow` `OFF` (runs start at
//! their time; the run id is that time) and `ActionAfterCompletion` left at
//! Scheduler's default (`NONE`: an `at(...)` schedule stays in the group
//! after it fired, so the next deploy sees it unchanged rather than
//! re-creating it).

use aws_sdk_scheduler::types::{
    DeadLetterConfig, FlexibleTimeWindow, FlexibleTimeWindowMode, RetryPolicy as SdkRetryPolicy,
    ScheduleState as SdkState, Target,
};
use contracts::schedule::ScheduleState;
use tributary_core::ports::PortError;
use tributary_core::schedules::{RetryPolicy, ScheduleDef};

use super::error::{build_error, code, port_error};

/// Schedules in one group.
///
/// Scheduler's API rates (`CreateSchedule` 1,000/s and more per Region,
/// `ListSchedules` and `GetSchedule` far above what a deploy of a few
/// hundred pipelines needs) are left to the SDK's standard retries.
#[derive(Clone, Debug)]
pub struct ScheduleGroup {
    client: aws_sdk_scheduler::Client,
    group: String,
}

/// Sets every setting of a schedule on a `CreateSchedule` or
/// `UpdateSchedule` builder (two SDK types with the same setters;
/// `UpdateSchedule` replaces all of them).
macro_rules! schedule_settings {
    ($builder:expr, $group:expr, $def:expr, $window:expr, $target:expr) => {
        $builder
            .group_name(&$group.group)
            .name(&$def.name)
            .description(&$def.description)
            .schedule_expression(&$def.expression)
            .schedule_expression_timezone(&$def.timezone)
            .state(SdkState::from($def.state.as_str()))
            .flexible_time_window($window)
            .target($target)
    };
}

impl ScheduleGroup {
    /// The group named `group` (the stack's `ScheduleGroupName` output).
    pub fn new(client: aws_sdk_scheduler::Client, group: impl Into<String>) -> Self {
        Self { client, group: group.into() }
    }

    /// The group's name.
    pub fn name(&self) -> &str {
        &self.group
    }

    /// Every schedule in the group, read whole (`ListSchedules`, then
    /// `GetSchedule` for each: the list gives names and targets' ARNs only).
    ///
    /// # Errors
    /// [`PortError::NotFound`] when the group does not exist; the SDK's
    /// errors as transient or permanent.
    pub async fn list(&self) -> Result<Vec<ScheduleDef>, PortError> {
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self
                .client
                .list_schedules()
                .group_name(&self.group)
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|err| self.error("ListSchedules", err))?;
            names.extend(page.schedules().iter().filter_map(|s| s.name().map(str::to_string)));
            match page.next_token() {
                Some(next) if !next.is_empty() => token = Some(next.to_string()),
                _ => break,
            }
        }
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            out.push(self.get(&name).await?);
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// One schedule (`GetSchedule`).
    ///
    /// # Errors
    /// [`PortError::NotFound`] for an unknown schedule or group.
    pub async fn get(&self, name: &str) -> Result<ScheduleDef, PortError> {
        let output = self
            .client
            .get_schedule()
            .group_name(&self.group)
            .name(name)
            .send()
            .await
            .map_err(|err| self.error("GetSchedule", err))?;
        let target = output.target();
        Ok(ScheduleDef {
            name: name.to_string(),
            description: output.description().unwrap_or_default().to_string(),
            expression: output.schedule_expression().unwrap_or_default().to_string(),
            timezone: output
                .schedule_expression_timezone()
                .unwrap_or(contracts::schedule::DEFAULT_TIMEZONE)
                .to_string(),
            state: match output.state() {
                Some(SdkState::Disabled) => ScheduleState::Disabled,
                _ => ScheduleState::Enabled,
            },
            target_arn: target.map(|t| t.arn().to_string()).unwrap_or_default(),
            role_arn: target.map(|t| t.role_arn().to_string()).unwrap_or_default(),
            input: target.and_then(|t| t.input()).unwrap_or_default().to_string(),
            dlq_arn: target.and_then(|t| t.dead_letter_config()).and_then(|d| d.arn()).map(str::to_string),
            retry: target.and_then(|t| t.retry_policy()).map(|r| RetryPolicy {
                maximum_event_age_secs: r.maximum_event_age_in_seconds().unwrap_or(86_400),
                maximum_retry_attempts: r.maximum_retry_attempts().unwrap_or(185),
            }),
        })
    }

    /// `CreateSchedule` of `def` in the group.
    ///
    /// # Errors
    /// Scheduler's refusals (`ValidationException` naming the field,
    /// `ConflictException` when it exists) as permanent.
    pub async fn create(&self, def: &ScheduleDef) -> Result<(), PortError> {
        let (window, target) = self.parts(def)?;
        schedule_settings!(self.client.create_schedule(), self, def, window, target)
            .send()
            .await
            .map_err(|err| self.error("CreateSchedule", err))?;
        Ok(())
    }

    /// `UpdateSchedule` of `def`: a full replace of its settings.
    ///
    /// # Errors
    /// As [`ScheduleGroup::create`]; [`PortError::NotFound`] when it is gone.
    pub async fn update(&self, def: &ScheduleDef) -> Result<(), PortError> {
        let (window, target) = self.parts(def)?;
        schedule_settings!(self.client.update_schedule(), self, def, window, target)
            .send()
            .await
            .map_err(|err| self.error("UpdateSchedule", err))?;
        Ok(())
    }

    /// `DeleteSchedule` of `name`; one already gone is not an error.
    ///
    /// # Errors
    /// The SDK's errors as transient or permanent.
    pub async fn delete(&self, name: &str) -> Result<(), PortError> {
        match self.client.delete_schedule().group_name(&self.group).name(name).send().await {
            Ok(_) => Ok(()),
            Err(err) if code(&err) == Some("ResourceNotFoundException") => Ok(()),
            Err(err) => Err(self.error("DeleteSchedule", err)),
        }
    }

    fn parts(&self, def: &ScheduleDef) -> Result<(FlexibleTimeWindow, Target), PortError> {
        let window = FlexibleTimeWindow::builder()
            .mode(FlexibleTimeWindowMode::Off)
            .build()
            .map_err(|err| build_error("CreateSchedule", &def.name, err))?;
        let target = Target::builder()
            .arn(&def.target_arn)
            .role_arn(&def.role_arn)
            .input(&def.input)
            .set_dead_letter_config(def.dlq_arn.as_ref().map(|arn| DeadLetterConfig::builder().arn(arn).build()))
            .set_retry_policy(def.retry.map(|r| {
                SdkRetryPolicy::builder()
                    .maximum_event_age_in_seconds(r.maximum_event_age_secs)
                    .maximum_retry_attempts(r.maximum_retry_attempts)
                    .build()
            }))
            .build()
            .map_err(|err| build_error("CreateSchedule", &def.name, err))?;
        Ok((window, target))
    }

    fn error<E>(
        &self,
        operation: &'static str,
        err: aws_sdk_scheduler::error::SdkError<E, super::error::RawResponse>,
    ) -> PortError
    where
        E: aws_sdk_scheduler::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        if code(&err) == Some("ResourceNotFoundException") {
            return PortError::NotFound { what: "schedule or schedule group", target: self.group.clone() };
        }
        port_error(operation, &self.group, err)
    }
}
