//! `Alert`: what Notify publishes on the alerts topic.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::V1;

/// A human-actionable alert about messages that ended in a dead-letter queue.
///
/// Published by Notify on the alerts SNS topic (e-mail/SMS subscribers) and,
/// in the local runtime, appended to `<lake>/_alerts.jsonl`. Every field
/// Notify cannot determine from the dead letter is `null`, never guessed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Alert {
    /// Contract version, always `1`.
    pub version: V1,
    /// Pipeline named in the dead letter, if its body was readable.
    pub pipeline: Option<String>,
    /// Run id named in the dead letter, if readable.
    pub run_id: Option<String>,
    /// Page index named in the dead letter, if any.
    pub page: Option<u32>,
    /// Function whose queue the message died on (`request`, `persist`, …),
    /// or `unknown`.
    pub function: String,
    /// Name of the queue the message was dead-lettered from.
    pub source_queue: String,
    /// SQS message id of the dead letter.
    pub message_id: String,
    /// Times the message was received on its work queue before it was given
    /// up on (from the function that dead-lettered it; for a message moved
    /// by a redrive policy, SQS's `ApproximateReceiveCount` as Notify sees
    /// it, which carries the source queue's count: 6 after 5 failures).
    pub receive_count: u32,
    /// The last error, as the failing function reported it (status code,
    /// vendor message, field path, engine reason…), at most 1 KiB; `null`
    /// when the message was moved by a redrive policy without one.
    pub reason: Option<String>,
    /// One-line summary for people.
    pub summary: String,
    /// First bytes of the body (at most 1 KiB, cut on a character boundary).
    pub body_excerpt: String,
    /// Size of the whole body in bytes.
    pub body_bytes: usize,
    /// Dead letters this alert stands for: one alert per (pipeline, run,
    /// function) per Notify batch. The fields above describe the first.
    pub count: u32,
    /// When the first of them was sent to its queue (RFC 3339, UTC).
    pub first_seen: Option<String>,
    /// The first few dead letters (at most 3), with their reasons.
    pub examples: Vec<AlertExample>,
}

/// One dead letter quoted in an alert.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AlertExample {
    /// SQS message id.
    pub message_id: String,
    /// Page index named by the message, if any.
    pub page: Option<u32>,
    /// Receives on its work queue before it was given up on.
    pub receive_count: u32,
    /// The last error, if recorded.
    pub reason: Option<String>,
    /// First bytes of the body (at most 300, credentials redacted).
    pub body_excerpt: String,
}
