//! Creates the topology of `tributary_core::topology` through the AWS APIs: queues
//! (with their visibility timeouts, size limit and redrive policies), topics,
//! SNS -> SQS subscriptions and the queue policies that allow them.
//!
//! The SAM template (infra/template.yaml) declares the same resources for a
//! real deployment. This is for emulators (moto's CloudFormation silently
//! skips subscriptions and queue policies) and for scratch accounts: tests
//! provision from the very declaration the local runtime uses.

use std::collections::BTreeMap;

use aws_config::SdkConfig;
use aws_sdk_sqs::types::QueueAttributeName;

use super::error::port_error;
use tributary_core::ports::PortError;
use tributary_core::topology;

/// Addresses of a provisioned topology, by logical name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Provisioned {
    /// Queue URL per logical queue name (`request`, `request-dlq`, …).
    pub queue_urls: BTreeMap<String, String>,
    /// Queue ARN per logical queue name.
    pub queue_arns: BTreeMap<String, String>,
    /// Topic ARN per logical topic name (`query-results`, `alerts`).
    pub topic_arns: BTreeMap<String, String>,
}

impl Provisioned {
    /// URL of logical queue `name`.
    ///
    /// # Errors
    /// [`PortError::NotFound`] for a name the topology does not declare.
    pub fn queue_url(&self, name: &str) -> Result<&str, PortError> {
        self.queue_urls
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| PortError::NotFound { what: "queue", target: name.into() })
    }

    /// ARN of logical topic `name`.
    ///
    /// # Errors
    /// [`PortError::NotFound`] for a name the topology does not declare.
    pub fn topic_arn(&self, name: &str) -> Result<&str, PortError> {
        self.topic_arns
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| PortError::NotFound { what: "topic", target: name.into() })
    }
}

/// Creates every queue and topic of the topology named `<prefix>-<name>`,
/// with `MaximumMessageSize` = `max_message_bytes` (SQS: 1024..=1048576),
/// redrive policies, subscriptions (with `RawMessageDelivery` as declared)
/// and a queue policy on each subscribed queue allowing its topic to send.
/// Creating what already exists with the same attributes is harmless
/// (CreateQueue and CreateTopic are idempotent).
///
/// # Errors
/// [`PortError`] from the first call that fails.
pub async fn provision(config: &SdkConfig, prefix: &str, max_message_bytes: usize) -> Result<Provisioned, PortError> {
    let sqs = aws_sdk_sqs::Client::new(config);
    let sns = aws_sdk_sns::Client::new(config);
    let mut out = Provisioned::default();

    for decl in topology::QUEUES {
        let name = format!("{prefix}-{}", decl.name);
        let url = sqs
            .create_queue()
            .queue_name(&name)
            .attributes(QueueAttributeName::VisibilityTimeout, decl.visibility_timeout_secs.to_string())
            .attributes(QueueAttributeName::MaximumMessageSize, max_message_bytes.to_string())
            .send()
            .await
            .map_err(|err| port_error("CreateQueue", &name, err))?
            .queue_url()
            .ok_or_else(|| {
                PortError::permanent_msg("CreateQueue", &name, "invalid request: no QueueUrl in the response")
            })?
            .to_string();
        let arn = sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|err| port_error("GetQueueAttributes", &name, err))?
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::QueueArn))
            .cloned()
            .ok_or_else(|| {
                PortError::permanent_msg("GetQueueAttributes", &name, "invalid request: no QueueArn in the response")
            })?;
        out.queue_urls.insert(decl.name.to_string(), url);
        out.queue_arns.insert(decl.name.to_string(), arn);
    }
    // Redrive policies once every DLQ exists.
    for decl in topology::QUEUES {
        let Some((dlq, max_receive)) = decl.redrive else { continue };
        let policy = serde_json::json!({"deadLetterTargetArn": out.queue_arns[dlq], "maxReceiveCount": max_receive});
        sqs.set_queue_attributes()
            .queue_url(&out.queue_urls[decl.name])
            .attributes(QueueAttributeName::RedrivePolicy, policy.to_string())
            .send()
            .await
            .map_err(|err| port_error("SetQueueAttributes", decl.name, err))?;
    }
    for topic in topology::TOPICS {
        let name = format!("{prefix}-{topic}");
        let arn = sns
            .create_topic()
            .name(&name)
            .send()
            .await
            .map_err(|err| port_error("CreateTopic", &name, err))?
            .topic_arn()
            .ok_or_else(|| {
                PortError::permanent_msg("CreateTopic", &name, "invalid request: no TopicArn in the response")
            })?
            .to_string();
        out.topic_arns.insert(topic.to_string(), arn);
    }
    for subscription in topology::QUEUE_SUBSCRIPTIONS {
        let topic_arn = out.topic_arns[subscription.topic].clone();
        let queue_arn = out.queue_arns[subscription.queue].clone();
        sns.subscribe()
            .topic_arn(&topic_arn)
            .protocol("sqs")
            .endpoint(&queue_arn)
            .attributes("RawMessageDelivery", subscription.raw.to_string())
            .return_subscription_arn(true)
            .send()
            .await
            .map_err(|err| port_error("Subscribe", &topic_arn, err))?;
        let policy = serde_json::json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Sid": format!("from-{}", subscription.topic),
                "Effect": "Allow",
                "Principal": {"Service": "sns.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": topic_arn}}
            }]
        });
        sqs.set_queue_attributes()
            .queue_url(&out.queue_urls[subscription.queue])
            .attributes(QueueAttributeName::Policy, policy.to_string())
            .send()
            .await
            .map_err(|err| port_error("SetQueueAttributes", subscription.queue, err))?;
    }
    Ok(out)
}
