//! A deployed stack's addresses, read from its CloudFormation outputs
//! (`DescribeStacks`): what the CLI needs to operate a stack by name —
//! queue URLs, topic ARNs, the lake bucket, the Glue database, the Athena
//! workgroup — without copying them by hand.
//!
//! The output keys are the SAM template's (`infra/template.yaml`,
//! `Outputs:`); [`output`] names each one the CLI reads.

use std::collections::BTreeMap;

use aws_config::SdkConfig;

use super::error::port_error;
use tributary_core::ports::PortError;

/// Output keys of `infra/template.yaml` the CLI reads.
pub mod output {
    /// The lake bucket's name.
    pub const LAKE_BUCKET: &str = "LakeBucketName";
    /// The Glue database of the lake's tables.
    pub const LAKE_DATABASE: &str = "LakeDatabaseName";
    /// The Athena workgroup queries run in.
    pub const ATHENA_WORKGROUP: &str = "AthenaWorkGroupName";
    /// The Orchestrator's queue URL (probe replies, query rows, triggers).
    pub const ORCHESTRATOR_QUEUE: &str = "OrchestratorQueueUrl";
    /// Request's queue URL.
    pub const REQUEST_QUEUE: &str = "RequestQueueUrl";
    /// Persist's queue URL (replay re-sends raw pages here).
    pub const PERSIST_QUEUE: &str = "PersistQueueUrl";
    /// The Athena function's queue URL.
    pub const ATHENA_QUEUE: &str = "AthenaQueueUrl";
    /// The alerts topic ARN.
    pub const ALERTS_TOPIC: &str = "AlertsTopicArn";
    /// The operations topic ARN (every CloudWatch alarm of the stack).
    pub const OPERATIONS_TOPIC: &str = "OperationsTopicArn";
    /// The console URL of the stack's CloudWatch dashboard (`tributary
    /// status --stack` prints it).
    pub const DASHBOARD_URL: &str = "DashboardUrl";

    /// The output holding the URL of work queue `queue` (a logical name of
    /// `tributary_core::topology`: `orchestrator`, `request`, `persist`,
    /// `athena`), `None` for other names.
    pub fn queue_url_key(queue: &str) -> Option<&'static str> {
        match queue {
            "orchestrator" => Some(ORCHESTRATOR_QUEUE),
            "request" => Some(REQUEST_QUEUE),
            "persist" => Some(PERSIST_QUEUE),
            "athena" => Some(ATHENA_QUEUE),
            _ => None,
        }
    }
}

/// A stack's outputs, by key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackOutputs {
    /// The stack's name.
    pub stack: String,
    /// `OutputKey` -> `OutputValue`.
    pub outputs: BTreeMap<String, String>,
}

impl StackOutputs {
    /// Reads the outputs of stack `stack` (a name or stack id) with
    /// CloudFormation `DescribeStacks`.
    ///
    /// # Errors
    /// [`PortError::NotFound`] when there is no such stack (CloudFormation
    /// answers `ValidationError` "Stack with id X does not exist");
    /// [`PortError`] for other failures (credentials, region, network).
    pub async fn describe(config: &SdkConfig, stack: &str) -> Result<Self, PortError> {
        let client = aws_sdk_cloudformation::Client::new(config);
        let answer = client.describe_stacks().stack_name(stack).send().await.map_err(|err| {
            let text = aws_sdk_cloudformation::error::DisplayErrorContext(&err).to_string();
            if text.contains("does not exist") {
                PortError::NotFound { what: "CloudFormation stack", target: stack.to_string() }
            } else {
                port_error("DescribeStacks", stack, err)
            }
        })?;
        let found = answer
            .stacks()
            .first()
            .ok_or_else(|| PortError::NotFound { what: "CloudFormation stack", target: stack.to_string() })?;
        let outputs = found
            .outputs()
            .iter()
            .filter_map(|o| Some((o.output_key()?.to_string(), o.output_value()?.to_string())))
            .collect();
        Ok(Self { stack: stack.to_string(), outputs })
    }

    /// The value of output `key`.
    ///
    /// # Errors
    /// [`PortError::NotFound`] naming the stack, the key and the keys the
    /// stack has (a stack of an older template, or another stack).
    pub fn get(&self, key: &str) -> Result<&str, PortError> {
        self.outputs.get(key).map(String::as_str).ok_or_else(|| PortError::NotFound {
            what: "stack output",
            target: format!(
                "{key} of stack {} (its outputs: {})",
                self.stack,
                self.outputs.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        })
    }
}
