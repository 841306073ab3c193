//! Notify: turns dead letters into alerts on the alerts SNS topic.
//!
//! Triggered by the DLQs of the work queues. For each dead letter it builds
//! an [`Alert`] — pipeline, run and page when the body is readable, the
//! function (from the queue the message was dead-lettered from), receive
//! count and a truncated body — and publishes it. It never fails on the
//! body: unparseable, empty or huge bodies still give one clear alert. Only
//! a failure to publish fails the record, so SQS retries it (and after
//! `maxReceiveCount` moves it to `notify-dlq`, which operators alarm on).

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use serde_json::Value;

use shared::batch::{self, RecordMeta, decode_body, queue_name_of_arn};
use shared::contracts::{Alert, V1};
use shared::ports::{PortError, TopicMessage, TopicPublisher};
use shared::topology::{function_for_dead_letter_queue, function_for_queue};

/// Body bytes quoted in an alert (1 KiB).
pub const EXCERPT_BYTES: usize = 1024;

/// Error text quoted in an alert (1 KiB).
pub const REASON_BYTES: usize = 1024;

/// SNS `Subject`: printable ASCII, at most 100 characters (Amazon SNS
/// Publish API reference).
pub const SUBJECT_MAX_CHARS: usize = 100;

/// Notify's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotifyConfig {
    /// Alerts topic (`ALERTS_TOPIC_ARN` on AWS).
    pub alerts_topic: String,
}

/// The ports and settings the handler uses.
#[derive(Clone, Copy)]
pub struct Deps<'a> {
    /// Publishes alerts.
    pub topics: &'a dyn TopicPublisher,
    /// Settings.
    pub config: &'a NotifyConfig,
}

/// Handles a batch of dead letters, one alert each. Only publish failures
/// are reported in `batchItemFailures`.
pub async fn handle_sqs(event: &SqsEvent, deps: Deps<'_>) -> SqsBatchResponse {
    batch::for_each_record(event, 4, None, |record: &SqsMessage, meta: RecordMeta| async move {
        let alert = alert_for(record, &meta);
        publish(&alert, deps).await
    })
    .await
}

/// Builds the alert for one dead letter. Never fails.
pub fn alert_for(record: &SqsMessage, meta: &RecordMeta) -> Alert {
    let body = record.body.as_deref().unwrap_or("");
    // A function that dead-lettered the record itself said who, where, how
    // often and why, in message attributes.
    let attribute = |name: &str| record.message_attributes.get(name).and_then(|a| a.string_value.clone());
    let reason = attribute(batch::ATTR_ERROR).map(|r| truncate(&r, REASON_BYTES));
    // Otherwise the work queue it came from: SQS sets DeadLetterQueueSourceArn
    // on redriven messages; without it, the DLQ's own name tells.
    let source_queue = attribute(batch::ATTR_SOURCE_QUEUE)
        .or_else(|| record.attributes.get("DeadLetterQueueSourceArn").map(|arn| queue_name_of_arn(arn).to_string()))
        .unwrap_or_else(|| meta.source_queue.clone());
    let function = attribute(batch::ATTR_FUNCTION).unwrap_or_else(|| {
        match record.attributes.get("DeadLetterQueueSourceArn") {
            Some(_) => function_for_queue(&source_queue),
            None => function_for_dead_letter_queue(&meta.source_queue),
        }
        .map_or("unknown", |f| f.name())
        .to_string()
    });
    let receive_count = attribute(batch::ATTR_RECEIVE_COUNT).and_then(|n| n.parse().ok()).unwrap_or(meta.receive_count);
    let parsed = decode_body(body).ok().map(|(value, _)| value);
    let field = |name: &str| parsed.as_ref().and_then(|v| v.get(name)).and_then(Value::as_str).map(str::to_string);
    let pipeline = field("pipeline");
    let run_id = field("run_id");
    let page = parsed
        .as_ref()
        .and_then(|v| v.pointer("/page/index"))
        .and_then(Value::as_u64)
        .and_then(|p| u32::try_from(p).ok());
    let what = match (&pipeline, &run_id, page) {
        (Some(p), Some(r), Some(page)) => format!("page {page} of run {r} of pipeline {p}"),
        (Some(p), Some(r), None) => format!("run {r} of pipeline {p}"),
        (Some(p), None, _) => format!("a message of pipeline {p}"),
        _ if parsed.is_none() => "a message whose body is not JSON".to_string(),
        _ => "a message that names no pipeline".to_string(),
    };
    let summary = match &reason {
        Some(reason) => format!("{function} gave up on {what} after {receive_count} receives: {reason}"),
        None => format!(
            "{function} gave up on {what} (message {}, receive count {receive_count}); the function's logs for this message id give the reason",
            meta.message_id
        ),
    };
    Alert {
        version: V1,
        pipeline,
        run_id,
        page,
        function,
        source_queue,
        message_id: meta.message_id.clone(),
        receive_count,
        reason,
        summary,
        body_excerpt: truncate(&redacted_body(body, parsed.as_ref()), EXCERPT_BYTES),
        body_bytes: body.len(),
    }
}

/// The body with the values of credential-looking fields (`authorization`,
/// `*token*`, `*secret*`, … — [`shared::spec::is_credential_name`]) replaced
/// by `<redacted>`, at any depth, so an alert e-mail never carries a secret
/// another team put in a header. A body that is not JSON is returned as is.
pub fn redacted_body(body: &str, parsed: Option<&Value>) -> String {
    let Some(parsed) = parsed else { return body.to_string() };
    let mut value = parsed.clone();
    let mut stack = vec![&mut value];
    let mut changed = false;
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                for (key, field) in map.iter_mut() {
                    if shared::spec::is_credential_name(key) && !field.is_object() && !field.is_array() {
                        *field = Value::String("<redacted>".into());
                        changed = true;
                    } else {
                        stack.push(field);
                    }
                }
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            _ => {}
        }
    }
    if changed { value.to_string() } else { body.to_string() }
}

/// Publishes one alert with a sanitised subject and filterable attributes
/// (`pipeline`, `function`, `severity`).
///
/// # Errors
/// [`PortError`] from the topic.
pub async fn publish(alert: &Alert, deps: Deps<'_>) -> Result<(), PortError> {
    let pipeline = alert.pipeline.as_deref().unwrap_or("unknown");
    let subject = sanitize_subject(&format!("tributary alert: {} failed for pipeline {pipeline}", alert.function));
    let body = serde_json::to_string(alert).map_err(|err| PortError::Permanent {
        operation: "encode alert",
        target: deps.config.alerts_topic.clone(),
        message: err.to_string(),
    })?;
    let attributes = [
        ("pipeline".to_string(), pipeline.to_string()),
        ("function".to_string(), alert.function.clone()),
        ("severity".to_string(), "error".to_string()),
    ]
    .into();
    tracing::error!(pipeline, function = %alert.function, message_id = %alert.message_id, "dead letter: {}", alert.summary);
    deps.topics
        .publish(&deps.config.alerts_topic, vec![TopicMessage { subject: Some(subject), body, attributes }])
        .await
}

/// Printable ASCII only, at most [`SUBJECT_MAX_CHARS`] characters.
pub fn sanitize_subject(subject: &str) -> String {
    subject.chars().map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).take(SUBJECT_MAX_CHARS).collect()
}

/// At most `max` bytes of `text`, cut on a character boundary, with `…`
/// when cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_is_printable_ascii_and_short() {
        let subject = sanitize_subject(&format!("ação\n{}", "x".repeat(200)));
        assert_eq!(subject.chars().count(), SUBJECT_MAX_CHARS);
        assert!(subject.chars().all(|c| c.is_ascii_graphic() || c == ' '));
    }

    #[test]
    fn credentials_never_reach_the_alert() {
        let body = r#"{"pipeline":"p","http":{"headers":{"Authorization":"Bearer SECRET123","accept":"x"},"query":{"api_key":"K3Y"}}}"#;
        let parsed: Value = serde_json::from_str(body).expect("json");
        let shown = redacted_body(body, Some(&parsed));
        assert!(!shown.contains("SECRET123") && !shown.contains("K3Y"), "{shown}");
        assert!(shown.contains("\"accept\":\"x\""), "other fields stay: {shown}");
    }

    #[test]
    fn truncation_respects_character_boundaries() {
        let text = "é".repeat(600); // 1200 bytes
        let cut = truncate(&text, EXCERPT_BYTES);
        assert!(cut.ends_with('…'));
        assert!(cut.len() <= EXCERPT_BYTES + '…'.len_utf8());
        assert_eq!(truncate("short", 10), "short");
    }
}
