//! [`TopicPublisher`] over Amazon SNS `PublishBatch`.

use async_trait::async_trait;
use aws_sdk_sns::types::{MessageAttributeValue, PublishBatchRequestEntry};

use super::batching::{BatchLimits, BatchOutcome, FailedEntry, entry_id, entry_retry_policy, send_all, split_batches};
use super::error::{build_error, code, port_error};
use tributary_core::ports::{PortError, TopicMessage, TopicPublisher, sanitize_subject};

const OPERATION: &str = "PublishBatch";

/// Bytes SNS counts for a message: body, subject, and each attribute's
/// name, data type (`String`) and value.
fn message_bytes(message: &TopicMessage, subject: Option<&str>) -> usize {
    let attributes: usize =
        message.attributes.iter().map(|(name, value)| name.len() + "String".len() + value.len()).sum();
    message.wire_body().len() + subject.map_or(0, str::len) + attributes
}

/// Publishes to SNS topics with `PublishBatch`.
///
/// `topic` in [`TopicPublisher::publish`] is the topic ARN. Messages are
/// split, in order, into calls of at most 10 entries and at most
/// [`BatchLimits::max_bytes`] bytes in all (default 262,144, the SNS limit
/// for one message and for a whole batch), counting body, subject and
/// attributes. Subjects pass through [`sanitize_subject`] (in
/// [`tributary_core::ports`]) and are omitted
/// when empty; attributes are sent as `String` message attributes (what
/// subscription filter policies match on). Failed entries without sender
/// fault are re-sent by id with a short backoff. API reference:
/// <https://docs.aws.amazon.com/sns/latest/api/API_PublishBatch.html>.
#[derive(Clone, Debug)]
pub struct SnsPublisher {
    client: aws_sdk_sns::Client,
    limits: BatchLimits,
}

impl SnsPublisher {
    /// A publisher with the default limits (10 entries, 262,144 bytes per
    /// call).
    pub fn new(client: aws_sdk_sns::Client) -> Self {
        Self { client, limits: BatchLimits::default() }
    }

    /// Caps the bytes of one call (and of one message) at `max_bytes`.
    pub fn with_max_batch_bytes(mut self, max_bytes: usize) -> Self {
        self.limits.max_bytes = max_bytes;
        self
    }

    /// The limits in force.
    pub fn limits(&self) -> BatchLimits {
        self.limits
    }

    async fn publish_batch(
        &self,
        topic: &str,
        messages: &[(TopicMessage, Option<String>)],
        indices: Vec<usize>,
    ) -> Result<BatchOutcome, PortError> {
        let mut entries = Vec::with_capacity(indices.len());
        for &i in &indices {
            let (message, subject) = &messages[i];
            let mut entry = PublishBatchRequestEntry::builder()
                .id(entry_id(i))
                .message(message.wire_body())
                .set_message_structure((!message.per_protocol.is_empty()).then(|| "json".to_string()))
                .set_subject(subject.clone());
            for (name, value) in &message.attributes {
                let attribute = MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(value.as_str())
                    .build()
                    .map_err(|err| build_error(OPERATION, topic, err))?;
                entry = entry.message_attributes(name.as_str(), attribute);
            }
            entries.push(entry.build().map_err(|err| build_error(OPERATION, topic, err))?);
        }
        let output = self
            .client
            .publish_batch()
            .topic_arn(topic)
            .set_publish_batch_request_entries(Some(entries))
            .send()
            .await
            .map_err(|err| {
                if code(&err) == Some("NotFound") {
                    PortError::NotFound { what: "topic", target: topic.to_string() }
                } else {
                    port_error(OPERATION, topic, err)
                }
            })?;
        Ok(BatchOutcome {
            successful: output.successful().iter().filter_map(|entry| entry.id().map(str::to_string)).collect(),
            failed: output
                .failed()
                .iter()
                .map(|entry| FailedEntry {
                    id: entry.id().to_string(),
                    sender_fault: entry.sender_fault(),
                    code: entry.code().to_string(),
                    message: entry.message().map(str::to_string),
                })
                .collect(),
        })
    }
}

#[async_trait]
impl TopicPublisher for SnsPublisher {
    /// # Errors
    /// - [`PortError::TooLarge`] if one message alone exceeds the byte limit
    ///   (nothing is published);
    /// - [`PortError::NotFound`] for an unknown topic ARN;
    /// - [`PortError::Permanent`] naming an entry SNS refused by the
    ///   sender's fault, or a call refused outright;
    /// - [`PortError::Transient`] for throttling, 5xx, time-outs, or entries
    ///   still failing after the retries.
    async fn publish(&self, topic: &str, messages: Vec<TopicMessage>) -> Result<(), PortError> {
        let messages: Vec<(TopicMessage, Option<String>)> = messages
            .into_iter()
            .map(|message| {
                let subject = message.subject.as_deref().and_then(sanitize_subject);
                (message, subject)
            })
            .collect();
        let sizes: Vec<usize> =
            messages.iter().map(|(message, subject)| message_bytes(message, subject.as_deref())).collect();
        let batches = split_batches(&sizes, self.limits).map_err(|over| PortError::TooLarge {
            what: "message",
            target: topic.to_string(),
            bytes: over.bytes,
            limit: self.limits.max_bytes,
        })?;
        let policy = entry_retry_policy();
        for batch in batches {
            send_all(OPERATION, topic, batch.collect(), &policy, |indices| {
                self.publish_batch(topic, &messages, indices)
            })
            .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_size_counts_subject_and_attributes() {
        let message = TopicMessage {
            per_protocol: Default::default(),
            subject: Some("hello".into()),
            body: "12345".into(),
            attributes: [("kind".to_string(), "rows".to_string())].into(),
        };
        assert_eq!(message_bytes(&message, Some("hello")), 5 + 5 + 4 + 6 + 4);
    }
}
