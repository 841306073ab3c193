//! The alert for a stream batch an event source mapping gave up on: Lambda's
//! on-failure destination record for a Kinesis (`KinesisBatchInfo`) or Kafka
//! (`KafkaBatchInfo`) mapping, sent to the `stream-failures` queue. It says
//! which records were dropped (stream or topic, shard or partition, the
//! sequence-number or offset range, when they arrived), why (retries
//! exhausted, record too old, payload too big), and how to replay them
//! before the stream's retention ends.
//!
//! The record's shapes are the Lambda developer guide's: "Retain discarded
//! batch records for a Kinesis Data Streams event source in Lambda" (an
//! invocation record with `requestContext`, `responseContext` and
//! `KinesisBatchInfo`: `shardId`, `startSequenceNumber`, `endSequenceNumber`,
//! `approximateArrivalOfFirstRecord`, `approximateArrivalOfLastRecord`,
//! `batchSize`, `streamArn`) and "Capturing discarded batches for Amazon MSK
//! and self-managed Apache Kafka event sources" (`KafkaBatchInfo`:
//! `batchSize`, `eventSourceArn`, `bootstrapServers`, `payloadSize`, and
//! `recordsInfo` keyed `<topic>-<partition>` with `firstRecordOffset`,
//! `lastRecordOffset`, `firstRecordTimestamp`, `lastRecordTimestamp`). The
//! records themselves are not in it: they are still in the stream, until
//! its retention ends.

use serde_json::Value;

use crate::handler::{NAME_BYTES, REASON_BYTES, truncate};

/// Function name of a dropped-stream-batch alert (the mapping, on
/// Persist's behalf, dropped the records).
pub const STREAM_FUNCTION: &str = "stream";

/// The lake key of a stream's spec (`_streams/_specs/<stream or topic>.json`),
/// where Notify finds the pipeline the stream feeds. The same key as
/// `persist::stream::spec_key`, which Notify does not depend on.
pub fn stream_spec_key(stream: &str) -> String {
    format!("_streams/_specs/{stream}.json")
}

/// Which kind of stream dropped the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// A Kinesis data stream (`KinesisBatchInfo`).
    Kinesis,
    /// An Amazon MSK or self-managed Kafka topic (`KafkaBatchInfo`).
    Kafka,
}

/// The records of one shard or topic-partition a mapping dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DroppedRange {
    /// The Kinesis shard id, or the Kafka partition number.
    pub partition: String,
    /// The first dropped record's sequence number (Kinesis) or offset (Kafka).
    pub first: String,
    /// The last dropped record's sequence number or offset.
    pub last: String,
    /// When the first record reached the stream (RFC 3339, as the record has it).
    pub first_arrival: Option<String>,
}

/// A batch an event source mapping gave up on, read from its on-failure record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DroppedStreamBatch {
    /// Kinesis or Kafka.
    pub kind: StreamKind,
    /// The Kinesis stream's name (from `streamArn`) or the Kafka topic
    /// (from the `recordsInfo` keys): the name the stream spec is kept under.
    pub stream: String,
    /// The source's ARN (`streamArn` / `eventSourceArn`), empty when absent.
    pub source_arn: String,
    /// The dropped ranges: one for Kinesis, one per topic-partition for Kafka.
    pub ranges: Vec<DroppedRange>,
    /// Records in the batch (`batchSize`).
    pub records: u64,
    /// Why: `RetryAttemptsExhausted`, `RecordAgeExceeded`,
    /// `MaximumPayloadSizeExceeded`, … (`requestContext.condition`).
    pub condition: String,
    /// Invocations tried (`requestContext.approximateInvokeCount`).
    pub attempts: u32,
    /// What Persist said of the batch, when the record carries it
    /// (`tributaryCause`: the local runtime's poller knows it; Lambda's
    /// on-failure record does not, and its alert points at the logs).
    pub cause: Option<String>,
}

/// Reads a dropped batch from a `stream-failures` message body; `None` when
/// the body is not an on-failure record of a stream mapping.
pub fn dropped_stream_batch(body: &Value) -> Option<DroppedStreamBatch> {
    let context = body.get("requestContext");
    let condition = context
        .and_then(|c| c.get("condition"))
        .and_then(Value::as_str)
        .map_or_else(|| "an unknown condition".to_string(), |c| truncate(c, NAME_BYTES));
    let attempts = context
        .and_then(|c| c.get("approximateInvokeCount"))
        .and_then(Value::as_u64)
        .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX));
    let cause = body.get("tributaryCause").and_then(Value::as_str).map(|c| truncate(c, REASON_BYTES / 2));
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => Some(truncate(s, NAME_BYTES)),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    if let Some(info) = body.get("KinesisBatchInfo") {
        let source_arn = text(info.get("streamArn")).unwrap_or_default();
        let stream = source_arn.rsplit_once(":stream/").map_or(source_arn.as_str(), |(_, name)| name).to_string();
        let range = DroppedRange {
            partition: text(info.get("shardId")).unwrap_or_else(|| "(no shardId)".into()),
            first: text(info.get("startSequenceNumber")).unwrap_or_else(|| "?".into()),
            last: text(info.get("endSequenceNumber")).unwrap_or_else(|| "?".into()),
            first_arrival: text(info.get("approximateArrivalOfFirstRecord")),
        };
        let records = info.get("batchSize").and_then(Value::as_u64).unwrap_or(0);
        return Some(DroppedStreamBatch {
            kind: StreamKind::Kinesis,
            stream,
            source_arn,
            ranges: vec![range],
            records,
            condition,
            attempts,
            cause,
        });
    }
    let info = body.get("KafkaBatchInfo")?;
    let source_arn = text(info.get("eventSourceArn")).unwrap_or_default();
    let mut topic = String::new();
    let mut ranges = Vec::new();
    for (key, range) in info.get("recordsInfo").and_then(Value::as_object).into_iter().flatten() {
        // `<topic>-<partition>`: topics may hold '-', partitions never do.
        let (name, partition) = key.rsplit_once('-').unwrap_or((key.as_str(), "?"));
        topic = truncate(name, NAME_BYTES);
        ranges.push(DroppedRange {
            partition: truncate(partition, NAME_BYTES),
            first: text(range.get("firstRecordOffset")).unwrap_or_else(|| "?".into()),
            last: text(range.get("lastRecordOffset")).unwrap_or_else(|| "?".into()),
            first_arrival: text(range.get("firstRecordTimestamp")),
        });
    }
    let records = info.get("batchSize").and_then(Value::as_u64).unwrap_or(0);
    Some(DroppedStreamBatch {
        kind: StreamKind::Kafka,
        stream: topic,
        source_arn,
        ranges,
        records,
        condition,
        attempts,
        cause,
    })
}

impl DroppedStreamBatch {
    /// What was dropped and why, in one line: `500 records of Kinesis stream
    /// clicks dropped (shard shardId-000000000001, sequence numbers 4960… to
    /// 4960…, first arrived 2019-11-14T00:38:04.835Z): retries exhausted
    /// after 3 attempts`.
    pub fn reason(&self) -> String {
        let (source, position) = match self.kind {
            StreamKind::Kinesis => ("Kinesis stream", "sequence numbers"),
            StreamKind::Kafka => ("Kafka topic", "offsets"),
        };
        let ranges: Vec<String> = self
            .ranges
            .iter()
            .map(|r| {
                let arrived = r.first_arrival.as_deref().map(|t| format!(", first arrived {t}")).unwrap_or_default();
                let unit = match self.kind {
                    StreamKind::Kinesis => "shard",
                    StreamKind::Kafka => "partition",
                };
                format!("{unit} {}, {position} {} to {}{arrived}", r.partition, r.first, r.last)
            })
            .collect();
        let why = match self.condition.as_str() {
            "RetryAttemptsExhausted" | "RetriesExhausted" => {
                format!("Persist failed on them {} times (MaximumRetryAttempts)", self.attempts)
            }
            "RecordAgeExceeded" => {
                "they grew older than MaximumRecordAgeInSeconds before Persist wrote them (Persist fell behind)".into()
            }
            "MaximumPayloadSizeExceeded" => "the batch was larger than Lambda's 6 MB invocation payload".into(),
            other => format!("the mapping gave up on them ({other})"),
        };
        let why = match &self.cause {
            Some(cause) => format!("{why}; Persist said: {cause}"),
            None => why,
        };
        let stream = if self.stream.is_empty() { "(not named)" } else { self.stream.as_str() };
        truncate(
            &format!("{} records of {source} {stream} dropped ({}): {why}", self.records, ranges.join("; ")),
            REASON_BYTES,
        )
    }

    /// How to get the records into the lake: fix the cause, then put them
    /// into the stream again before its retention ends (the batch's files
    /// were removed, so they land once).
    pub fn replay_steps(&self) -> String {
        let read = self
            .ranges
            .iter()
            .map(|r| match self.kind {
                StreamKind::Kinesis => format!(
                    "aws kinesis get-shard-iterator --stream-name {} --shard-id {} --shard-iterator-type AT_SEQUENCE_NUMBER --starting-sequence-number {}, then get-records until sequence number {}",
                    self.stream, r.partition, r.first, r.last
                ),
                StreamKind::Kafka => format!(
                    "kafka-console-consumer.sh --topic {} --partition {} --offset {} --max-messages <{} - {} + 1>",
                    self.stream, r.partition, r.first, r.last, r.first
                ),
            })
            .collect::<Vec<_>>()
            .join("; ");
        format!(
            "The records are still in the stream until its retention ends (Kinesis: 24 hours after they arrived unless the stream keeps them longer; Kafka: the topic's retention.ms). \
             1. Find why in Persist's log lines for this batch (CloudWatch Logs Insights on /aws/lambda/<stack>-persist: filter shard = \"<shard>\"), and fix it (a poison record is quarantined, not failed: a dropped batch is a write, spec or permission failure). \
             2. Read them: {read}. \
             3. Put them into the stream again (aws kinesis put-records / kafka-console-producer.sh): the mapping delivers them as new records, and since the dropped batch's files were removed when the next batch of its shard started, they land once."
        )
    }
}

/// The pipeline a stream feeds, from its spec in the lake (`pipeline` of
/// [`stream_spec_key`]); `None` when there is no store, no spec or no
/// readable `pipeline` in it (the alert then names the stream only).
pub async fn stream_pipeline(store: Option<&dyn tributary_core::ports::ObjectStore>, stream: &str) -> Option<String> {
    if stream.is_empty() {
        return None;
    }
    let key = stream_spec_key(stream);
    let bytes = match store?.get(&key).await {
        Ok(bytes) => bytes,
        Err(tributary_core::ports::PortError::NotFound { .. }) => return None,
        Err(err) => {
            tracing::warn!(key, error = %err, "could not read the stream's spec; the alert names the stream only");
            return None;
        }
    };
    let spec: Value = serde_json::from_slice(&bytes).ok()?;
    spec.get("pipeline").and_then(Value::as_str).filter(|p| !p.trim().is_empty()).map(|p| truncate(p, NAME_BYTES))
}
