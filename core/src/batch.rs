//! The SQS batch helper every SQS-triggered function uses.
//!
//! It handles each record of an SQS event on its own: the body is parsed by
//! itself (a JSON message, or an SNS notification envelope whose `Message`
//! holds the JSON — detected by its shape, so subscriptions with and without
//! `RawMessageDelivery` both work), decoded into the function's contract, and
//! handed to the per-record handler inside a tracing span keyed by message id.
//! The answer lists only the failed records in `batchItemFailures` (Lambda's
//! partial batch response; the event source mapping must enable
//! `ReportBatchItemFailures`), so one bad record never fails or replays the
//! batch: SQS redelivers it alone after its visibility timeout, and redrives
//! it to the DLQ after `maxReceiveCount`.

use std::fmt::Display;
use std::future::Future;

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use futures::{FutureExt, StreamExt};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tracing::Instrument;

use crate::ports::{PortError, QueueMessage, QueueSender};
use contracts;

/// What the helper knows about a record besides its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordMeta {
    /// SQS message id (the `itemIdentifier` of a batch item failure).
    pub message_id: String,
    /// `ApproximateReceiveCount` (1 on first delivery).
    pub receive_count: u32,
    /// Name of the queue the record came from (last part of its ARN).
    pub source_queue: String,
    /// Whether the body was an SNS notification envelope.
    pub from_sns: bool,
    /// The receipt handle of this delivery (for `ChangeMessageVisibility`).
    pub receipt_handle: Option<String>,
    /// The `SenderId` system attribute: the IAM unique id of the principal
    /// that sent the message (see [`crate::tenant`]).
    pub sender_id: Option<String>,
    /// The queue's ARN (`eventSourceARN`).
    pub source_arn: Option<String>,
    /// The record's string message attributes (`messageAttributes`, each
    /// `stringValue`), as its sender set them.
    pub attributes: std::collections::BTreeMap<String, String>,
}

impl RecordMeta {
    /// Reads the metadata of an SQS record.
    pub fn of(record: &SqsMessage) -> Self {
        Self {
            message_id: record.message_id.clone().unwrap_or_default(),
            receive_count: record.attributes.get("ApproximateReceiveCount").and_then(|n| n.parse().ok()).unwrap_or(1),
            source_queue: record.event_source_arn.as_deref().map(queue_name_of_arn).unwrap_or_default().to_string(),
            from_sns: false,
            receipt_handle: record.receipt_handle.clone(),
            sender_id: record.attributes.get(crate::tenant::SENDER_ID_ATTRIBUTE).cloned(),
            source_arn: record.event_source_arn.clone(),
            attributes: record
                .message_attributes
                .iter()
                .filter_map(|(name, value)| Some((name.clone(), value.string_value.clone()?)))
                .collect(),
        }
    }

    /// Whom the record acts for: [`crate::tenant::Tenants::check`] with
    /// this record's `SenderId` and queue.
    ///
    /// # Errors
    /// [`crate::tenant::TenantError`]: an unknown sender, or a pipeline it
    /// does not own.
    pub fn acting_for<'t>(
        &self,
        tenants: &'t crate::tenant::Tenants,
        pipeline: &str,
    ) -> Result<crate::tenant::Acting<'t>, crate::tenant::TenantError> {
        tenants.check(self.sender_id.as_deref(), self.source_arn.as_deref(), pipeline)
    }
}

/// The queue name in an SQS ARN (`arn:aws:sqs:region:account:name`).
pub fn queue_name_of_arn(arn: &str) -> &str {
    arn.rsplit(':').next().unwrap_or(arn)
}

/// A record body that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The record has no body.
    #[error("record has no body")]
    Missing,
    /// The body is not JSON.
    #[error("body is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// The body is an SNS envelope whose `Message` is not JSON.
    #[error("SNS envelope's Message is not JSON: {0}")]
    EnvelopeNotJson(#[source] serde_json::Error),
    /// The JSON does not match the expected contract.
    #[error(transparent)]
    Contract(#[from] contracts::ContractError),
}

/// The fields of a body looked at before the contract is decoded.
#[derive(Default, serde::Deserialize)]
struct Peek {
    #[serde(rename = "Type")]
    kind: Option<Value>,
    #[serde(rename = "Message")]
    message: Option<Value>,
    #[serde(rename = "TopicArn")]
    topic_arn: Option<Value>,
    pipeline: Option<Value>,
    run_id: Option<Value>,
    page: Option<Value>,
    row_index: Option<Value>,
}

/// Parses a record body: JSON, unwrapping an SNS notification envelope.
///
/// An envelope is recognised by its shape: an object with `"Type":
/// "Notification"`, a string `Message` and a `TopicArn`. Returns the JSON
/// and whether it came from an envelope.
///
/// # Errors
/// [`BodyError::NotJson`] or [`BodyError::EnvelopeNotJson`].
pub fn decode_body(raw: &str) -> Result<(Value, bool), BodyError> {
    let value: Value = serde_json::from_str(raw).map_err(BodyError::NotJson)?;
    let is_envelope = value.get("Type").and_then(Value::as_str) == Some("Notification")
        && value.get("TopicArn").is_some_and(Value::is_string);
    if is_envelope && let Some(Value::String(message)) = value.get("Message") {
        let inner = serde_json::from_str(message).map_err(BodyError::EnvelopeNotJson)?;
        return Ok((inner, true));
    }
    Ok((value, false))
}

/// A per-record failure, told permanent or not.
pub trait RecordError: Display {
    /// Whether the same message can never succeed (a malformed message, an
    /// HTTP 4xx, a failed query): with [`DeadLetters`], such a record goes to
    /// its DLQ at once, with the reason, instead of being redelivered until
    /// `maxReceiveCount`.
    fn is_permanent(&self) -> bool;
}

impl RecordError for BodyError {
    fn is_permanent(&self) -> bool {
        true
    }
}

impl RecordError for PortError {
    fn is_permanent(&self) -> bool {
        !self.is_retryable()
    }
}

/// Message attribute of a dead letter holding the last error (at most
/// [`REASON_MAX_BYTES`]).
pub const ATTR_ERROR: &str = "tributary-error";
/// Message attribute of a dead letter naming the function that failed.
pub const ATTR_FUNCTION: &str = "tributary-function";
/// Message attribute of a dead letter naming the queue it failed on.
pub const ATTR_SOURCE_QUEUE: &str = "tributary-source-queue";
/// Message attribute of a dead letter with its receive count on that queue.
pub const ATTR_RECEIVE_COUNT: &str = "tributary-receive-count";
/// Message attribute of a dead letter: `true` when the error was permanent.
pub const ATTR_PERMANENT: &str = "tributary-permanent";
/// Longest error text kept in [`ATTR_ERROR`]: 4 KiB of the 256 KiB an SQS
/// message may hold.
pub const REASON_MAX_BYTES: usize = 4096;

/// Where a function sends the records it gives up on, with the reason.
///
/// SQS's redrive policy moves a message to the DLQ unchanged, so the error
/// that killed it would be lost; instead the helper sends the record's body
/// to the DLQ itself, with the error in message attributes ([`ATTR_ERROR`]
/// and the others) for Notify's alert, and deletes it from the source queue:
/// at once for a permanent error, on the last allowed receive for others.
/// The redrive policy stays as the safety net (a crash, a timeout).
#[derive(Clone, Copy)]
pub struct DeadLetters<'a> {
    /// Sends to the DLQ.
    pub queue: &'a dyn QueueSender,
    /// The DLQ's address (URL on AWS, name locally).
    pub dlq: &'a str,
    /// The source queue's `maxReceiveCount`.
    pub max_receive_count: u32,
    /// Function name, for the alert.
    pub function: &'static str,
}

/// The settings behind [`DeadLetters`], as a function's config holds them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetterTarget {
    /// The DLQ's address (`DLQ_URL` on AWS).
    pub dlq: String,
    /// The source queue's `maxReceiveCount` (`MAX_RECEIVE_COUNT`).
    pub max_receive_count: u32,
}

impl DeadLetterTarget {
    /// The policy for `function`, sending through `queue`.
    pub fn policy<'a>(&'a self, queue: &'a dyn QueueSender, function: &'static str) -> DeadLetters<'a> {
        DeadLetters { queue, dlq: &self.dlq, max_receive_count: self.max_receive_count, function }
    }
}

/// Sends `record` to its DLQ with the reason in message attributes.
///
/// The DLQ has the same `MaximumMessageSize` as the work queue (256 KiB by
/// default), and the body alone may already be close to it: when the DLQ
/// refuses the letter as too large, the reason is cut by what is over (the
/// whole reason is in the function's log line), and if even without a
/// reason it does not fit, the body goes alone, as SQS's redrive policy
/// would have moved it (Notify then names the function by the DLQ).
async fn dead_letter(
    record: &SqsMessage,
    meta: &RecordMeta,
    reason: &str,
    permanent: bool,
    to: &DeadLetters<'_>,
) -> Result<(), PortError> {
    let body = record.body.clone().unwrap_or_default();
    let letter = |reason_bytes: usize| {
        let attributes = [
            (ATTR_ERROR, cut(reason, reason_bytes.min(REASON_MAX_BYTES))),
            (ATTR_FUNCTION, to.function.to_string()),
            (ATTR_SOURCE_QUEUE, meta.source_queue.clone()),
            (ATTR_RECEIVE_COUNT, meta.receive_count.to_string()),
            (ATTR_PERMANENT, permanent.to_string()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect();
        QueueMessage { body: body.clone(), attributes }
    };
    let first = letter(reason.len());
    let size = first.size();
    match to.queue.send_messages(to.dlq, vec![first]).await {
        Err(PortError::TooLarge { limit, .. }) if size > limit => {
            let over = size - limit;
            let room = reason.len().min(REASON_MAX_BYTES).saturating_sub(over);
            // Below 64 bytes a reason says nothing: send the body alone.
            let message = if room >= 64 {
                letter(room)
            } else {
                QueueMessage { body: body.clone(), attributes: Default::default() }
            };
            tracing::warn!(
                bytes = size,
                limit,
                reason_bytes = room,
                "the dead letter was over the DLQ's size limit; its reason is cut (the whole reason is in this log)"
            );
            to.queue.send_messages(to.dlq, vec![message]).await
        }
        other => other,
    }
}

/// At most `max` bytes of `text`, cut on a character boundary.
fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// Runs `handler` over every record of `event`, each body decoded into
/// contract `T` first, up to `concurrency` records at a time, and reports
/// the failed ones. A body that is not JSON or does not match `T` fails its
/// record alone.
///
/// With `dead_letters`, a record that fails permanently, or fails on its
/// last allowed receive, is sent to the DLQ with its reason and counts as
/// handled (see [`DeadLetters`]); if that send fails, the record is reported
/// failed as usual.
///
/// `handler` receives the decoded message and the record's metadata. Each
/// call runs in a span `sqs_record{message_id, receive_count, queue}` (with
/// `pipeline`, `run_id` and `page` once the body is read). A failure is
/// logged with its error and listed in `batchItemFailures`; successes are
/// not. A panic in `handler` is caught per record and is that record's
/// failure (transient, its reason `the handler panicked: <message>`),
/// never the whole batch's. Each call runs with the record's
/// `AWSTraceHeader` as [`crate::xray::record_trace`], so what it sends
/// stays in the record's X-Ray trace.
pub async fn for_each_message<'a, T, F, Fut, E>(
    event: &'a SqsEvent,
    concurrency: usize,
    dead_letters: Option<DeadLetters<'a>>,
    handler: F,
) -> SqsBatchResponse
where
    T: DeserializeOwned,
    F: Fn(T, RecordMeta) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: RecordError + From<BodyError>,
{
    let handler = &handler;
    let decoded = move |record: &'a SqsMessage, mut meta: RecordMeta| async move {
        let message: T = read_message(record, &mut meta)?;
        handler(message, meta).await
    };
    let decoded = &decoded;
    // Futures are built eagerly so the stream holds no closure over record
    // references (which would defeat `Send` inference in spawned tasks).
    let attempts: Vec<_> = event
        .records
        .iter()
        .enumerate()
        .map(|(index, record)| one_record(index, record, dead_letters, decoded))
        .collect();
    let outcomes: Vec<Option<(usize, String)>> =
        futures::stream::iter(attempts).buffer_unordered(concurrency.max(1)).collect().await;
    let mut failures: Vec<(usize, String)> = outcomes.into_iter().flatten().collect();
    failures.sort_unstable();
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = failures
        .into_iter()
        .map(|(_, message_id)| {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = message_id;
            failure
        })
        .collect();
    response
}

/// A record's body as contract `T`: JSON, or an SNS notification envelope
/// whose `Message` is (`meta.from_sns` is then set). The body's `pipeline`,
/// `run_id` and page index are recorded on the current span (the record's)
/// before the contract is decoded, so even a record that does not match `T`
/// can be found by run.
///
/// # Errors
/// [`BodyError`]: no body, not JSON, an envelope whose `Message` is not
/// JSON, or JSON that does not match `T`.
fn read_message<T: DeserializeOwned>(record: &SqsMessage, meta: &mut RecordMeta) -> Result<T, BodyError> {
    let raw = record.body.as_deref().ok_or(BodyError::Missing)?;
    // A first look for the SNS envelope and the log fields; the contract
    // is then read from the text itself, so records keep their text.
    let peek = peek_at(raw).map_err(BodyError::NotJson)?;
    let envelope = peek.kind.as_ref().and_then(Value::as_str) == Some("Notification")
        && peek.topic_arn.as_ref().is_some_and(Value::is_string);
    let (peek, text) = match (&peek.message, envelope) {
        (Some(Value::String(message)), true) => {
            let inner = peek_at(message).map_err(BodyError::EnvelopeNotJson)?;
            meta.from_sns = true;
            (inner, message.as_str())
        }
        _ => (peek, raw),
    };
    let span = tracing::Span::current();
    if let Some(pipeline) = peek.pipeline.as_ref().and_then(Value::as_str) {
        span.record("pipeline", pipeline);
    }
    if let Some(run_id) = peek.run_id.as_ref().and_then(Value::as_str) {
        span.record("run_id", run_id);
    }
    let page = peek.page.as_ref().and_then(|p| p.get("index")).or(peek.row_index.as_ref()).and_then(Value::as_u64);
    if let Some(page) = page {
        span.record("page", page);
    }
    Ok(contracts::decode_str(text)?)
}

/// The [`Peek`] fields of `text`; JSON that is not an object peeks as
/// nothing (the contract's own error then says what is wrong).
///
/// # Errors
/// The parser's error when `text` is not JSON.
fn peek_at(text: &str) -> Result<Peek, serde_json::Error> {
    match serde_json::from_str(text) {
        Ok(peek) => Ok(peek),
        Err(_) if serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() => Ok(Peek::default()),
        Err(err) => Err(err),
    }
}

/// The text of a panic's payload (`panic!("...")` gives a `&str` or a
/// `String`).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

/// One record: its handler inside its span, with the record's X-Ray trace
/// header as the one its sends carry on ([`crate::xray`]: the handler's,
/// and the dead letter's); the failure to report, if any.
async fn one_record<'a, F, Fut, E>(
    index: usize,
    record: &'a SqsMessage,
    dead_letters: Option<DeadLetters<'a>>,
    handler: &F,
) -> Option<(usize, String)>
where
    F: Fn(&'a SqsMessage, RecordMeta) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: RecordError,
{
    let trace = record.attributes.get(crate::xray::TRACE_HEADER_ATTRIBUTE).map(String::as_str);
    crate::xray::with_record_trace(trace, async move {
        let meta = RecordMeta::of(record);
        // pipeline, run_id and page are filled in once the body is read, so
        // every line about the record can be found by run.
        let span = tracing::info_span!(
            "sqs_record",
            message_id = %meta.message_id,
            receive_count = meta.receive_count,
            queue = %meta.source_queue,
            pipeline = tracing::field::Empty,
            run_id = tracing::field::Empty,
            page = tracing::field::Empty,
        );
        let message_id = meta.message_id.clone();
        let kept = meta.clone();
        // A panic (a bug) fails this record alone: the other records of the
        // batch keep their outcomes, and the record is retried, then
        // dead-lettered with the panic's message as its reason.
        let outcome = std::panic::AssertUnwindSafe(handler(record, meta).instrument(span.clone())).catch_unwind().await;
        let failure = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(err)) => Some((err.is_permanent(), err.to_string())),
            Err(panic) => Some((false, format!("the handler panicked: {}", panic_message(panic.as_ref())))),
        };
        match failure {
            None => None,
            Some((permanent, reason)) => {
                if let Some(to) = dead_letters
                    && (permanent || kept.receive_count >= to.max_receive_count)
                {
                    match dead_letter(record, &kept, &reason, permanent, &to).await {
                        Ok(()) => {
                            span.in_scope(|| tracing::error!(error = %reason, permanent, dlq = to.dlq, "record dead-lettered with its reason"));
                            return None;
                        }
                        Err(send) => span.in_scope(
                            || tracing::error!(error = %send, "could not dead-letter the record; SQS will redeliver it"),
                        ),
                    }
                }
                span.in_scope(|| tracing::warn!(error = %reason, permanent, "record failed; SQS will redeliver it or move it to the DLQ"));
                Some((index, message_id))
            }
        }
    })
    .await
}
