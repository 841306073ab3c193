//! [`TopicPublisher`] over Amazon SNS `PublishBatch`.

use async_trait::async_trait;
use aws_sdk_sns::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sns::types::PublishBatchRequestEntry;

use super::batching::{BatchClient, BatchOutcome, FailedEntry, entry_id, send_in_batches, string_attributes};
use super::error::{RawResponse, build_error, code, port_error};
use tributary_core::ports::{PortError, TopicMessage, TopicPublisher, sanitize_subject};
use tributary_core::xray;

const OPERATION: &str = "PublishBatch";

/// Bytes SNS counts for a message: body, subject, and each attribute's
/// name, data type (`String`) and value.
fn message_bytes(message: &TopicMessage, subject: Option<&str>) -> usize {
    let attributes: usize =
        message.attributes.iter().map(|(name, value)| name.len() + "String".len() + value.len()).sum();
    message.wire_body().len() + subject.map_or(0, str::len) + attributes
}

/// An SNS error on `topic`: [`PortError::NotFound`] for SNS's `NotFound`
/// (no such topic), else as [`port_error`] classifies it.
fn topic_error<E>(operation: &'static str, topic: &str, err: SdkError<E, RawResponse>) -> PortError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    if code(&err) == Some("NotFound") {
        PortError::NotFound { what: "topic", target: topic.to_string() }
    } else {
        port_error(operation, topic, err)
    }
}

/// Publishes to SNS topics with `PublishBatch`.
///
/// `topic` in [`TopicPublisher::publish`] is the topic ARN. Messages are
/// split, in order, into calls of at most 10 entries and at most
/// [`BatchLimits::max_bytes`](super::BatchLimits::max_bytes) bytes in all
/// (default 262,144, the SNS limit for one message and for a whole batch),
/// counting body, subject and attributes. Subjects pass through [`sanitize_subject`] (in
/// [`tributary_core::ports`]) and are omitted
/// when empty; attributes are sent as `String` message attributes (what
/// subscription filter policies match on). Failed entries without sender
/// fault are re-sent by id with a short backoff. API reference:
/// <https://docs.aws.amazon.com/sns/latest/api/API_PublishBatch.html>.
pub type SnsPublisher = BatchClient<aws_sdk_sns::Client>;

impl SnsPublisher {
    async fn publish_batch(
        &self,
        topic: &str,
        messages: &[(TopicMessage, Option<String>)],
        indices: Vec<usize>,
        trace: Option<&str>,
    ) -> Result<BatchOutcome, PortError> {
        let mut entries = Vec::with_capacity(indices.len());
        for &i in &indices {
            let (message, subject) = &messages[i];
            let entry = PublishBatchRequestEntry::builder()
                .id(entry_id(i))
                .message(message.wire_body())
                .set_message_structure((!message.per_protocol.is_empty()).then(|| "json".to_string()))
                .set_subject(subject.clone())
                .set_message_attributes(string_attributes(OPERATION, topic, &message.attributes)?);
            entries.push(entry.build().map_err(|err| build_error(OPERATION, topic, err))?);
        }
        let call = self.client.publish_batch().topic_arn(topic).set_publish_batch_request_entries(Some(entries));
        let output = match trace {
            // The record's trace, which SNS passes on to its subscriptions
            // ([`xray`]), instead of the invocation's the SDK would send
            // (its interceptor leaves a header already set alone).
            Some(trace) => {
                let trace = trace.to_string();
                call.customize()
                    .mutate_request(move |request| {
                        // A checked trace header is a valid header value.
                        let _ = request.headers_mut().try_insert(xray::TRACE_HEADER, trace.clone());
                    })
                    .send()
                    .await
            }
            None => call.send().await,
        }
        .map_err(|err| topic_error(OPERATION, topic, err))?;
        Ok(BatchOutcome {
            successful: output.successful().iter().filter_map(|entry| entry.id().map(str::to_string)).collect(),
            failed: output.failed().iter().map(FailedEntry::from).collect(),
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
        let trace = xray::record_trace();
        send_in_batches(OPERATION, topic, &sizes, self.limits(), self.max_in_flight(), |indices| {
            self.publish_batch(topic, &messages, indices, trace.as_deref())
        })
        .await
    }
}

/// One subscription of a topic, as `ListSubscriptionsByTopic` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicSubscription {
    /// `email`, `sms`, `sqs`, `lambda`, `https`, …
    pub protocol: String,
    /// The address, phone number, queue or function ARN, or URL.
    pub endpoint: String,
    /// The subscription's ARN once its endpoint confirmed it; SNS lists
    /// `PendingConfirmation` until then (an e-mail subscription waits for
    /// its link to be followed, and SNS delivers nothing to it meanwhile).
    pub subscription_arn: String,
}

/// Every subscription of topic `topic_arn`, through all of
/// `ListSubscriptionsByTopic`'s pages (100 each). API reference:
/// <https://docs.aws.amazon.com/sns/latest/api/API_ListSubscriptionsByTopic.html>.
///
/// # Errors
/// [`PortError::NotFound`] for an unknown topic; others by the SDK error.
pub async fn list_topic_subscriptions(
    config: &aws_config::SdkConfig,
    topic_arn: &str,
) -> Result<Vec<TopicSubscription>, PortError> {
    const LIST: &str = "ListSubscriptionsByTopic";
    let client = aws_sdk_sns::Client::new(config);
    let mut subscriptions = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let output = client
            .list_subscriptions_by_topic()
            .topic_arn(topic_arn)
            .set_next_token(token.take())
            .send()
            .await
            .map_err(|err| topic_error(LIST, topic_arn, err))?;
        subscriptions.extend(output.subscriptions().iter().map(|s| TopicSubscription {
            protocol: s.protocol().unwrap_or_default().to_string(),
            endpoint: s.endpoint().unwrap_or_default().to_string(),
            subscription_arn: s.subscription_arn().unwrap_or_default().to_string(),
        }));
        match output.next_token() {
            Some(next) if !next.is_empty() => token = Some(next.to_string()),
            _ => return Ok(subscriptions),
        }
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
