//! [`QueueSender`] over Amazon SQS `SendMessageBatch`.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::types::{
    MessageSystemAttributeNameForSends, MessageSystemAttributeValue, SendMessageBatchRequestEntry,
};

use super::batching::{BatchClient, BatchOutcome, FailedEntry, entry_id, send_in_batches, string_attributes};
use super::error::{RawResponse, build_error, code, port_error};
use tributary_core::ports::{PortError, QueueMessage, QueueSender};
use tributary_core::xray;

const OPERATION: &str = "SendMessageBatch";

/// Error codes SQS answers for a queue that does not exist (query and JSON
/// protocols).
const QUEUE_MISSING: &[&str] = &["AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"];

/// `err` of `operation` on `queue` as a [`PortError`]: `NotFound` for a
/// queue that does not exist, else as [`port_error`] tells it.
fn queue_error<E>(operation: &'static str, queue: &str, err: SdkError<E, RawResponse>) -> PortError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    if code(&err).is_some_and(|c| QUEUE_MISSING.contains(&c)) {
        PortError::NotFound { what: "queue", target: queue.to_string() }
    } else {
        port_error(operation, queue, err)
    }
}

/// The `AWSTraceHeader` system attribute of a message sent for a record
/// with X-Ray trace header `trace` ([`xray`]); `None` leaves SQS to take
/// the call's `X-Amzn-Trace-Id` (the invocation's, as the SDK sends it).
/// SQS counts it in neither the message's size nor its attributes.
fn trace_attribute(
    trace: Option<&str>,
) -> Option<HashMap<MessageSystemAttributeNameForSends, MessageSystemAttributeValue>> {
    let value = MessageSystemAttributeValue::builder().data_type("String").string_value(trace?).build().ok()?;
    Some(HashMap::from([(MessageSystemAttributeNameForSends::AwsTraceHeader, value)]))
}

/// Sends bodies to SQS queues with `SendMessageBatch`.
///
/// `queue` in [`QueueSender::send`] is the queue URL. Bodies are split, in
/// order, into calls of at most 10 entries and at most
/// [`BatchLimits::max_bytes`](super::BatchLimits::max_bytes) bytes in all
/// (default 262,144), counted as SQS does: the body plus each message attribute's name, type and value
/// ([`QueueMessage::size`]). Entries a call reports as failed without sender fault are
/// re-sent by id with a short backoff (see the [`batching`](super::batching)
/// module); the calls go one at a time unless
/// [`with_max_in_flight`](BatchClient::with_max_in_flight) lets more be in
/// flight. SQS quotas:
/// <https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html>.
pub type SqsSender = BatchClient<aws_sdk_sqs::Client>;

impl SqsSender {
    async fn send_batch(
        &self,
        queue: &str,
        messages: &[QueueMessage],
        indices: Vec<usize>,
        trace: Option<&str>,
    ) -> Result<BatchOutcome, PortError> {
        let entries = indices
            .iter()
            .map(|&i| {
                let message = &messages[i];
                SendMessageBatchRequestEntry::builder()
                    .id(entry_id(i))
                    .message_body(message.body.as_str())
                    .set_message_attributes(string_attributes(OPERATION, queue, &message.attributes)?)
                    .set_message_system_attributes(trace_attribute(trace))
                    .build()
                    .map_err(|err| build_error(OPERATION, queue, err))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let output = self
            .client
            .send_message_batch()
            .queue_url(queue)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|err| queue_error(OPERATION, queue, err))?;
        Ok(BatchOutcome {
            successful: output.successful().iter().map(|entry| entry.id().to_string()).collect(),
            failed: output.failed().iter().map(FailedEntry::from).collect(),
        })
    }
}

#[async_trait]
impl QueueSender for SqsSender {
    /// # Errors
    /// - [`PortError::TooLarge`] if one body alone exceeds the byte limit
    ///   (nothing is sent);
    /// - [`PortError::NotFound`] for an unknown queue URL;
    /// - [`PortError::Permanent`] naming an entry SQS refused by the
    ///   sender's fault, or for a call refused outright (access denied, …);
    /// - [`PortError::Transient`] for throttling, 5xx, time-outs, or entries
    ///   still failing after the retries.
    ///
    /// On an error, other batches may already have been sent (the earlier
    /// ones, or with calls in flight at once any of them): SQS delivery is
    /// at-least-once and consumers are idempotent.
    async fn send_messages(&self, queue: &str, messages: Vec<QueueMessage>) -> Result<(), PortError> {
        let sizes: Vec<usize> = messages.iter().map(QueueMessage::size).collect();
        let trace = xray::record_trace();
        send_in_batches(OPERATION, queue, &sizes, self.limits(), self.max_in_flight(), |indices| {
            self.send_batch(queue, &messages, indices, trace.as_deref())
        })
        .await
    }

    /// `ChangeMessageVisibility` with `timeout` in whole seconds, capped at
    /// 43,200 (12 hours, the SQS quota).
    ///
    /// # Errors
    /// [`PortError::NotFound`] for an unknown queue; SQS's own errors
    /// (`ReceiptHandleIsInvalid`, `MessageNotInflight`) as permanent.
    async fn change_visibility(&self, queue: &str, receipt_handle: &str, timeout: Duration) -> Result<bool, PortError> {
        let secs = timeout.min(tributary_core::ports::MAX_VISIBILITY_TIMEOUT).as_secs();
        self.client
            .change_message_visibility()
            .queue_url(queue)
            .receipt_handle(receipt_handle)
            .visibility_timeout(i32::try_from(secs).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|err| queue_error("ChangeMessageVisibility", queue, err))?;
        Ok(true)
    }

    /// `SendMessage` with `DelaySeconds` (whole seconds, capped at 900, the
    /// SQS quota), the message's attributes as string attributes.
    ///
    /// # Errors
    /// [`PortError::TooLarge`] for a message over the byte limit (not
    /// sent); [`PortError::NotFound`] for an unknown queue; SQS's own errors
    /// as `port_error` tells them.
    async fn send_delayed(&self, queue: &str, message: QueueMessage, delay: Duration) -> Result<bool, PortError> {
        const SEND: &str = "SendMessage";
        let limit = self.limits().max_bytes;
        if message.size() > limit {
            return Err(PortError::TooLarge {
                what: "message",
                target: queue.to_string(),
                bytes: message.size(),
                limit,
            });
        }
        let secs = delay.min(tributary_core::ports::MAX_DELAY).as_secs();
        self.client
            .send_message()
            .queue_url(queue)
            .message_body(message.body)
            .set_message_attributes(string_attributes(SEND, queue, &message.attributes)?)
            .set_message_system_attributes(trace_attribute(xray::record_trace().as_deref()))
            .delay_seconds(i32::try_from(secs).unwrap_or(900))
            .send()
            .await
            .map_err(|err| queue_error(SEND, queue, err))?;
        Ok(true)
    }
}
