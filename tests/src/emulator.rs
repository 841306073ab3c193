//! The AWS emulator (moto in server mode) for end-to-end tests: connecting,
//! resetting, provisioning the topology, and an event source mapping that
//! polls real SQS queues and invokes handlers with Lambda-shaped events.

use std::collections::HashMap;
use std::time::Duration;

use aws_config::{Region, SdkConfig};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage, SqsMessageAttribute};
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};

const HOW_TO_START: &str =
    "start moto first: scripts/moto.sh install && eval \"$(scripts/moto.sh start)\" (or run bash .ci/run)";

/// A connection to moto.
pub struct Emulator {
    /// `AWS_ENDPOINT_URL`.
    pub endpoint: String,
    /// SDK configuration pointing at it.
    pub config: SdkConfig,
}

/// Connects to moto at `AWS_ENDPOINT_URL` and wipes its state
/// (`POST /moto-api/reset`), so each test starts from nothing.
///
/// # Panics
/// With how to start moto, when `AWS_ENDPOINT_URL` is unset or unreachable:
/// a test that needs the emulator never passes without it.
pub async fn reset_emulator() -> Emulator {
    let endpoint = match std::env::var("AWS_ENDPOINT_URL") {
        Ok(url) if !url.trim().is_empty() => url.trim().trim_end_matches('/').to_string(),
        _ => panic!("AWS_ENDPOINT_URL is not set; {HOW_TO_START}"),
    };
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("HTTP client");
    match http.post(format!("{endpoint}/moto-api/reset")).send().await {
        Ok(response) if response.status().is_success() => {}
        Ok(response) => panic!("{endpoint}/moto-api/reset answered {}: is it moto? {HOW_TO_START}", response.status()),
        Err(err) => panic!("moto at AWS_ENDPOINT_URL={endpoint} is unreachable ({err}); {HOW_TO_START}"),
    }
    let mut loader = adapters::aws::config_loader().region(Region::new("us-east-1"));
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        loader =
            loader.credentials_provider(aws_sdk_sqs::config::Credentials::new("testing", "testing", None, None, "e2e"));
    }
    Emulator { endpoint, config: loader.load().await }
}

/// Receives up to `max` messages from `queue_url` as the records of a Lambda
/// SQS event, as the event source mapping would (attributes included), with
/// the given visibility timeout for this receive.
///
/// # Panics
/// On an SQS error (tests only).
pub async fn receive_event(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    queue_arn: &str,
    max: i32,
    visibility_timeout_secs: i32,
) -> SqsEvent {
    let output = sqs
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(max)
        .visibility_timeout(visibility_timeout_secs)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .message_attribute_names("All")
        .send()
        .await
        .expect("ReceiveMessage");
    let mut event = SqsEvent::default();
    for message in output.messages() {
        let mut record = SqsMessage::default();
        record.message_id = message.message_id().map(str::to_string);
        record.receipt_handle = message.receipt_handle().map(str::to_string);
        record.body = message.body().map(str::to_string);
        record.attributes = message
            .attributes()
            .map(|a| a.iter().map(|(k, v)| (k.as_str().to_string(), v.clone())).collect::<HashMap<_, _>>())
            .unwrap_or_default();
        record.message_attributes = message
            .message_attributes()
            .map(|attributes| {
                attributes
                    .iter()
                    .map(|(name, value)| {
                        let mut attribute = SqsMessageAttribute::default();
                        attribute.string_value = value.string_value().map(str::to_string);
                        attribute.data_type = Some(value.data_type().to_string());
                        (name.clone(), attribute)
                    })
                    .collect()
            })
            .unwrap_or_default();
        record.event_source = Some("aws:sqs".into());
        record.event_source_arn = Some(queue_arn.to_string());
        record.aws_region = Some("us-east-1".into());
        event.records.push(record);
    }
    event
}

/// Deletes the records of `event` that `response` does not list as failed,
/// as the event source mapping does with a partial batch response. Returns
/// how many were deleted.
///
/// # Panics
/// On an SQS error (tests only).
pub async fn settle(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    event: &SqsEvent,
    response: &SqsBatchResponse,
) -> usize {
    let failed: Vec<&str> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
    let mut deleted = 0;
    for record in &event.records {
        if failed.contains(&record.message_id.as_deref().unwrap_or_default()) {
            continue;
        }
        sqs.delete_message()
            .queue_url(queue_url)
            .receipt_handle(record.receipt_handle.as_deref().unwrap_or_default())
            .send()
            .await
            .expect("DeleteMessage");
        deleted += 1;
    }
    deleted
}

/// `ApproximateNumberOfMessages` + `…NotVisible` of a queue.
///
/// # Panics
/// On an SQS error (tests only).
pub async fn depth(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> usize {
    let output = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .expect("GetQueueAttributes");
    let attributes = output.attributes().cloned().unwrap_or_default();
    [QueueAttributeName::ApproximateNumberOfMessages, QueueAttributeName::ApproximateNumberOfMessagesNotVisible]
        .iter()
        .filter_map(|name| attributes.get(name)?.parse::<usize>().ok())
        .sum()
}

/// Creates CloudFormation stack `name` whose outputs are `outputs` (key ->
/// value), as a deployed SAM stack's would be, so the CLI's `--stack` mode
/// can be tested on moto: moto's CloudFormation skips the SAM resources,
/// so the topology itself is provisioned with SDK calls
/// (`adapters::aws::provision`) and the stack only carries the addresses.
/// The template holds one `AWS::CloudFormation::WaitConditionHandle` (a
/// template needs a resource).
///
/// # Panics
/// When the stack cannot be created (tests only).
pub async fn stack_with_outputs(config: &SdkConfig, name: &str, outputs: &[(&str, &str)]) {
    let outputs: serde_json::Map<String, serde_json::Value> =
        outputs.iter().map(|(key, value)| (key.to_string(), serde_json::json!({ "Value": value }))).collect();
    let template = serde_json::json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Resources": {"Placeholder": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": outputs,
    });
    aws_sdk_cloudformation::Client::new(config)
        .create_stack()
        .stack_name(name)
        .template_body(template.to_string())
        .send()
        .await
        .unwrap_or_else(|err| panic!("CreateStack {name}: {}", aws_sdk_sqs::error::DisplayErrorContext(err)));
}
