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
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tracing::Instrument;

use crate::contracts;

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
}

impl RecordMeta {
    /// Reads the metadata of an SQS record.
    pub fn of(record: &SqsMessage) -> Self {
        Self {
            message_id: record.message_id.clone().unwrap_or_default(),
            receive_count: record.attributes.get("ApproximateReceiveCount").and_then(|n| n.parse().ok()).unwrap_or(1),
            source_queue: record.event_source_arn.as_deref().map(queue_name_of_arn).unwrap_or_default().to_string(),
            from_sns: false,
        }
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
    NotJson(serde_json::Error),
    /// The body is an SNS envelope whose `Message` is not JSON.
    #[error("SNS envelope's Message is not JSON: {0}")]
    EnvelopeNotJson(serde_json::Error),
    /// The JSON does not match the expected contract.
    #[error(transparent)]
    Contract(#[from] contracts::ContractError),
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

/// Runs `handler` over every record of `event`, up to `concurrency` at a
/// time, and reports the failed ones.
///
/// `handler` receives the raw record and its metadata. Each call runs in a
/// span `sqs_record{message_id, receive_count, queue}`. A failure is logged
/// with its error and listed in `batchItemFailures`; successes are not.
pub async fn for_each_record<'a, F, Fut, E>(event: &'a SqsEvent, concurrency: usize, handler: F) -> SqsBatchResponse
where
    F: Fn(&'a SqsMessage, RecordMeta) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Display,
{
    let handler = &handler;
    // Futures are built eagerly so the stream holds no closure over record
    // references (which would defeat `Send` inference in spawned tasks).
    let attempts: Vec<_> =
        event.records.iter().enumerate().map(|(index, record)| one_record(index, record, handler)).collect();
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

async fn one_record<'a, F, Fut, E>(index: usize, record: &'a SqsMessage, handler: &F) -> Option<(usize, String)>
where
    F: Fn(&'a SqsMessage, RecordMeta) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Display,
{
    let meta = RecordMeta::of(record);
    let span = tracing::info_span!(
        "sqs_record",
        message_id = %meta.message_id,
        receive_count = meta.receive_count,
        queue = %meta.source_queue,
    );
    let message_id = meta.message_id.clone();
    match handler(record, meta).instrument(span.clone()).await {
        Ok(()) => None,
        Err(err) => {
            span.in_scope(
                || tracing::warn!(error = %err, "record failed; SQS will redeliver it or move it to the DLQ"),
            );
            Some((index, message_id))
        }
    }
}

/// Like [`for_each_record`], with each body decoded into contract `T` first.
/// A body that is not JSON or does not match `T` fails its record alone.
pub async fn for_each_message<T, F, Fut, E>(event: &SqsEvent, concurrency: usize, handler: F) -> SqsBatchResponse
where
    T: DeserializeOwned,
    F: Fn(T, RecordMeta) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Display + From<BodyError>,
{
    let handler = &handler;
    for_each_record(event, concurrency, move |record, mut meta| async move {
        let raw = record.body.as_deref().ok_or(BodyError::Missing)?;
        let (value, from_sns) = decode_body(raw)?;
        meta.from_sns = from_sns;
        let message: T = contracts::decode(value).map_err(BodyError::from)?;
        handler(message, meta).await
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn event_from_fixture() -> SqsEvent {
        let text = include_str!("../../events/sqs-mixed-batch.json");
        serde_json::from_str(text).expect("fixture is an SQS event")
    }

    #[derive(Debug, serde::Deserialize)]
    struct Ping {
        n: u32,
    }

    #[derive(Debug, thiserror::Error)]
    enum TestError {
        #[error(transparent)]
        Body(#[from] BodyError),
        #[error("n = {0} refused")]
        Refused(u32),
    }

    #[test]
    fn plain_and_enveloped_bodies_decode_to_the_same_json() {
        let plain = decode_body(r#"{"n": 1}"#).expect("json");
        let envelope = serde_json::json!({
            "Type": "Notification", "MessageId": "m", "TopicArn": "arn:aws:sns:us-east-1:1:t",
            "Message": "{\"n\": 1}", "Timestamp": "2026-11-29T06:00:00.000Z"
        });
        let wrapped = decode_body(&envelope.to_string()).expect("json");
        assert_eq!(plain.0, wrapped.0);
        assert!(!plain.1 && wrapped.1);
        assert!(matches!(decode_body("not json"), Err(BodyError::NotJson(_))));
    }

    #[tokio::test]
    async fn only_failed_records_are_reported() {
        let event = event_from_fixture();
        let seen = AtomicUsize::new(0);
        let response = for_each_message(&event, 4, |ping: Ping, meta: RecordMeta| {
            seen.fetch_add(1, Ordering::SeqCst);
            async move {
                assert_eq!(meta.source_queue, "tributary-persist");
                if ping.n == 3 { Err(TestError::Refused(ping.n)) } else { Ok(()) }
            }
        })
        .await;
        let failed: Vec<_> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
        // The fixture holds: n=1 plain, n=2 SNS-enveloped, n=3 (refused by the
        // handler), a body that is not JSON, and a JSON body of the wrong shape.
        assert_eq!(failed, ["msg-3", "msg-not-json", "msg-wrong-shape"]);
        assert_eq!(seen.load(Ordering::SeqCst), 3, "handler runs for every decodable record");
    }
}
