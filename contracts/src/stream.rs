//! The stream pipeline spec: records of a Kinesis data stream or a Kafka
//! topic (Amazon MSK or self-managed) into the same datasets, with the same
//! `target` block, as the REST pipelines.
//!
//! Written in YAML (or JSON) and checked strictly like [`crate::spec::PipelineSpec`]:
//! unknown fields are errors, every failure names the field path and the
//! value. A spec file is a stream spec when it has a `source` block.
//!
//! ```yaml
//! version: 1
//! pipeline: clicks
//! source:
//!   kind: kinesis          # kinesis | kafka
//!   stream: clicks
//!   starting_position: TRIM_HORIZON
//! records:
//!   records_pointer: /events   # absent: each stream record is one row
//! target:
//!   dataset: clicks
//! ```

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::{SpecError, check_name};
use crate::{PersistTarget, V1};

/// Largest `batching.batch_size`: 10,000 records, the `BatchSize` maximum of
/// a Lambda event source mapping on Kinesis and on Kafka (AWS Lambda API
/// reference, `CreateEventSourceMapping`); it is also `GetRecords`' `Limit`
/// maximum (Kinesis API reference, `GetRecords`).
pub const MAX_BATCH_SIZE: u32 = 10_000;
/// Default `batching.batch_size`: 100, the event source mapping's default
/// for Kinesis and Kafka.
pub const DEFAULT_BATCH_SIZE: u32 = 100;
/// Largest `batching.batch_window_secs`: 300 s, the event source mapping's
/// `MaximumBatchingWindowInSeconds` maximum.
pub const MAX_BATCH_WINDOW_SECS: u32 = 300;
/// Largest `batching.maximum_retry_attempts`: 10,000, the event source
/// mapping's `MaximumRetryAttempts` maximum (`-1` is infinite there; here
/// a finite count is asked, so a poison batch reaches the on-failure
/// destination).
pub const MAX_RETRY_ATTEMPTS: u32 = 10_000;
/// Default `batching.maximum_retry_attempts`.
pub const DEFAULT_RETRY_ATTEMPTS: u32 = 3;
/// Largest `window.bytes`: 64 MiB, the bin Persist coalesces a run's
/// files of one partition into (`persist::coalesce::COALESCE_BELOW_BYTES`):
/// a larger window would be cut into several files, the last of them small.
pub const MAX_WINDOW_BYTES: u64 = 64 << 20;
/// Smallest `window.bytes`: 1 KiB (a Parquet file's footer alone is
/// about that; less is a window per batch, which `window.secs: 0` says).
pub const MIN_WINDOW_BYTES: u64 = 1 << 10;
/// Default `window.bytes`: 32 MiB, half of [`MAX_WINDOW_BYTES`], so a
/// window closed at it plus one batch (a Lambda stream batch carries at
/// most 6 MB of payload, the invocation payload quota) stays one file.
pub const DEFAULT_WINDOW_BYTES: u64 = MAX_WINDOW_BYTES / 2;
/// Largest and default `window.batches`: 1,000, one shard of the run
/// ledger's receipts (`tributary_core::keys::RECEIPT_SHARD_PAGES`), so a
/// window's completion reads one summary.
pub const MAX_WINDOW_BATCHES: u32 = 1_000;
/// Largest `window.secs`: a day, the `dt=` partition's span.
pub const MAX_WINDOW_SECS: u64 = 86_400;
/// Default `window.secs`: 300 s; an Iceberg table, whose rows show when
/// their window commits, then lags a busy shard by about that at most.
pub const DEFAULT_WINDOW_SECS: u64 = 300;

/// A declared stream pipeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamSpec {
    /// Spec version, always `1`.
    pub version: V1,
    /// Pipeline name: 1–64 characters of `a-z 0-9 _ -`, starting with a
    /// letter or digit. Part of run ids, logs and keys.
    pub pipeline: String,
    /// Free text for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The stream the records come from.
    pub source: StreamSource,
    /// How each stream record's data becomes rows.
    #[serde(default)]
    pub records: StreamRecords,
    /// How records are batched (the event source mapping's settings on
    /// AWS, the local poller's here).
    #[serde(default)]
    pub batching: StreamBatching,
    /// When a shard's batches, landed one by one, are coalesced into one
    /// file per partition (Parquet) or committed in one snapshot (Iceberg).
    #[serde(default)]
    pub window: StreamWindow,
    /// Where the records go: the same block as a REST pipeline's.
    pub target: PersistTarget,
}

/// The stream, tagged by `kind`. `#[non_exhaustive]`: a new kind of
/// stream is an additive change, and a `match` outside this crate needs a
/// wildcard arm.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum StreamSource {
    /// An Amazon Kinesis data stream.
    Kinesis(KinesisSource),
    /// A Kafka topic: Amazon MSK or a self-managed cluster.
    Kafka(KafkaSource),
}

/// A Kinesis data stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KinesisSource {
    /// Stream name: 1–128 characters of `a-z A-Z 0-9 _ . -` (Kinesis API
    /// reference, `CreateStream` `StreamName`).
    pub stream: String,
    /// Where a consumer without a checkpoint starts.
    #[serde(default)]
    pub starting_position: StartingPosition,
    /// The instant `AT_TIMESTAMP` starts at (RFC 3339, UTC); only with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_timestamp: Option<DateTime<Utc>>,
}

/// A Kafka topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KafkaSource {
    /// Topic name: 1–249 characters of `a-z A-Z 0-9 _ . -` (Kafka's rule
    /// for topic names).
    pub topic: String,
    /// Where a consumer group without committed offsets starts.
    #[serde(default)]
    pub starting_position: StartingPosition,
    /// The instant `AT_TIMESTAMP` starts at (RFC 3339, UTC); only with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_timestamp: Option<DateTime<Utc>>,
    /// Consumer group id of the event source mapping (default: the
    /// pipeline's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_group_id: Option<String>,
}

/// Where reading starts when nothing has been read yet (the event source
/// mapping's `StartingPosition`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum StartingPosition {
    /// The oldest record retained (the stream's whole retention: a Kappa
    /// replay starts here).
    #[default]
    TrimHorizon,
    /// Only records written after the consumer starts.
    Latest,
    /// The first record at or after `starting_timestamp`.
    AtTimestamp,
}

/// How a stream record's data becomes rows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamRecords {
    /// RFC 6901 pointer to an array of rows inside each record's JSON,
    /// e.g. `/events`; absent: each stream record is one row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_pointer: Option<String>,
    /// Whether the data is gzip-compressed.
    #[serde(default)]
    pub compression: Compression,
}

/// Compression of a stream record's data (after base64 decoding).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    /// gzip when the data starts with gzip's magic bytes `1f 8b`, else none.
    #[default]
    Auto,
    /// Never compressed.
    None,
    /// Always gzip (data that is not is a poison record).
    Gzip,
}

/// How records are batched: on AWS the event source mapping's settings
/// (the template's parameters), locally the poller's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamBatching {
    /// Records per batch, 1–10,000 (default 100).
    #[serde(default = "default_batch_size")]
    pub batch_size: u32,
    /// Seconds to gather records before a batch smaller than `batch_size`
    /// is handed over, 0–300 (default 0).
    #[serde(default)]
    pub batch_window_secs: u32,
    /// Retries of a failing batch before it goes to the on-failure
    /// destination, 0–10,000 (default 3).
    #[serde(default = "default_retry_attempts")]
    pub maximum_retry_attempts: u32,
    /// Split a failing batch in two and retry the halves (the event source
    /// mapping's `BisectBatchOnFunctionError`; default true).
    #[serde(default = "default_true")]
    pub bisect_on_error: bool,
}

impl Default for StreamBatching {
    fn default() -> Self {
        StreamBatching {
            batch_size: DEFAULT_BATCH_SIZE,
            batch_window_secs: 0,
            maximum_retry_attempts: DEFAULT_RETRY_ATTEMPTS,
            bisect_on_error: true,
        }
    }
}

/// A shard's window: its batches land one by one (each a page of the
/// window's run: Parquet page files readers see at once; for Iceberg,
/// staged files), and when the window closes they become one file per
/// partition (Parquet: coalesced) or one snapshot (Iceberg: committed).
/// It closes after the batch that makes any of these true; the local
/// poller also closes it at the end of a run (docs/streams.md, "Small
/// files and Iceberg commits").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamWindow {
    /// Bytes of its batches' Parquet files, 1,024–67,108,864 (1 KiB–64
    /// MiB; default 33,554,432, 32 MiB).
    #[serde(default = "default_window_bytes")]
    pub bytes: u64,
    /// Batches in it, 1–1,000 (default 1,000).
    #[serde(default = "default_window_batches")]
    pub batches: u32,
    /// Seconds of stream time from its first record's arrival to its
    /// newest's, 0–86,400 (default 300; 0: every batch is a window of its
    /// own, one file or commit per batch).
    #[serde(default = "default_window_secs")]
    pub secs: u64,
}

impl Default for StreamWindow {
    fn default() -> Self {
        StreamWindow { bytes: DEFAULT_WINDOW_BYTES, batches: MAX_WINDOW_BATCHES, secs: DEFAULT_WINDOW_SECS }
    }
}

fn default_window_bytes() -> u64 {
    DEFAULT_WINDOW_BYTES
}

fn default_window_batches() -> u32 {
    MAX_WINDOW_BATCHES
}

fn default_window_secs() -> u64 {
    DEFAULT_WINDOW_SECS
}

fn default_batch_size() -> u32 {
    DEFAULT_BATCH_SIZE
}

fn default_retry_attempts() -> u32 {
    DEFAULT_RETRY_ATTEMPTS
}

fn default_true() -> bool {
    true
}

impl StreamSpec {
    /// Parses and validates a stream spec from YAML (or JSON).
    ///
    /// # Errors
    /// [`SpecError::Parse`] with the field path when the text does not match
    /// the shape; [`SpecError::Invalid`] from [`StreamSpec::validate`].
    pub fn from_yaml(text: &str) -> Result<Self, SpecError> {
        let spec: StreamSpec = crate::spec::parse_yaml(text).map_err(|err| inside_source(text, err))?;
        spec.validate()?;
        Ok(spec)
    }

    /// Whether a spec document is a stream spec: it has a top-level
    /// `source` key (a REST pipeline has `strategy` and `request`).
    pub fn is_stream_document(text: &str) -> bool {
        text.lines().any(|line| line.starts_with("source:") || line.trim_start().starts_with("\"source\""))
    }

    /// Checks the values serde cannot: names, positions, pointers, limits.
    ///
    /// # Errors
    /// [`SpecError::Invalid`] naming the first offending field and its value.
    pub fn validate(&self) -> Result<(), SpecError> {
        check_name("pipeline", &self.pipeline)?;
        self.target.validate("target")?;
        match &self.source {
            StreamSource::Kinesis(kinesis) => {
                check_stream_name("source.stream", &kinesis.stream, 128)?;
                check_position(kinesis.starting_position, kinesis.starting_timestamp.as_ref())?;
            }
            StreamSource::Kafka(kafka) => {
                check_stream_name("source.topic", &kafka.topic, 249)?;
                check_position(kafka.starting_position, kafka.starting_timestamp.as_ref())?;
                if let Some(group) = &kafka.consumer_group_id {
                    check_stream_name("source.consumer_group_id", group, 200)?;
                }
            }
        }
        if let Some(pointer) = &self.records.records_pointer
            && !pointer.starts_with('/')
        {
            return Err(invalid(
                "records.records_pointer",
                &format!("{pointer:?}"),
                "must be an RFC 6901 JSON pointer starting with '/' (e.g. /events); leave it out for one row per record",
            ));
        }
        let batching = &self.batching;
        if !(1..=MAX_BATCH_SIZE).contains(&batching.batch_size) {
            return Err(invalid(
                "batching.batch_size",
                &batching.batch_size.to_string(),
                "must be 1-10000 (the event source mapping's BatchSize)",
            ));
        }
        if batching.batch_window_secs > MAX_BATCH_WINDOW_SECS {
            return Err(invalid(
                "batching.batch_window_secs",
                &batching.batch_window_secs.to_string(),
                "must be 0-300 (the event source mapping's MaximumBatchingWindowInSeconds)",
            ));
        }
        if batching.maximum_retry_attempts > MAX_RETRY_ATTEMPTS {
            return Err(invalid(
                "batching.maximum_retry_attempts",
                &batching.maximum_retry_attempts.to_string(),
                "must be 0-10000 (the event source mapping's MaximumRetryAttempts)",
            ));
        }
        let window = &self.window;
        if !(MIN_WINDOW_BYTES..=MAX_WINDOW_BYTES).contains(&window.bytes) {
            return Err(invalid(
                "window.bytes",
                &window.bytes.to_string(),
                "must be 1024-67108864 (1 KiB to 64 MiB, the bin Persist coalesces a partition's files into)",
            ));
        }
        if !(1..=MAX_WINDOW_BATCHES).contains(&window.batches) {
            return Err(invalid(
                "window.batches",
                &window.batches.to_string(),
                "must be 1-1000 (one shard of the run ledger's receipts)",
            ));
        }
        if window.secs > MAX_WINDOW_SECS {
            return Err(invalid("window.secs", &window.secs.to_string(), "must be 0-86400 (a day)"));
        }
        Ok(())
    }

    /// The stream's (or topic's) name.
    pub fn source_name(&self) -> &str {
        match &self.source {
            StreamSource::Kinesis(kinesis) => &kinesis.stream,
            StreamSource::Kafka(kafka) => &kafka.topic,
        }
    }
}

fn invalid(field: &str, value: &str, reason: &str) -> SpecError {
    SpecError::Invalid { field: field.into(), value: value.into(), reason: reason.into() }
}

/// A Kinesis stream, Kafka topic or consumer group name: 1–`max` of
/// `a-z A-Z 0-9 _ . -`.
fn check_stream_name(field: &str, value: &str, max: usize) -> Result<(), SpecError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    if value.is_empty() || value.len() > max || !value.chars().all(ok) {
        return Err(invalid(field, &format!("{value:?}"), &format!("must be 1-{max} characters of a-z A-Z 0-9 _ . -")));
    }
    Ok(())
}

/// An error serde reports at `source` as a whole (inside an enum tagged by
/// `kind` it loses the field's path: `at source: input contains invalid
/// characters`, a trial's finding) found again inside the source: the
/// field's path (`source.starting_timestamp`) and the value written. Any
/// other error is returned as it is.
fn inside_source(text: &str, err: SpecError) -> SpecError {
    let SpecError::Parse { path, .. } = &err else { return err };
    if path != "source" {
        return err;
    }
    let Ok(document) = serde_norway::from_str::<serde_json::Value>(text) else { return err };
    let Some(mut source) = document.get("source").and_then(serde_json::Value::as_object).cloned() else { return err };
    let kind = source.remove("kind");
    let fields = serde_json::Value::Object(source.clone());
    let inner = match kind.as_ref().and_then(serde_json::Value::as_str) {
        Some("kinesis") => serde_path_to_error::deserialize::<_, KinesisSource>(fields).err().map(|e| located(&e)),
        Some("kafka") => serde_path_to_error::deserialize::<_, KafkaSource>(fields).err().map(|e| located(&e)),
        _ => None,
    };
    let Some((field, message)) = inner.filter(|(field, _)| field != ".") else { return err };
    let written = source.get(field.split(['.', '[']).next().unwrap_or_default()).map_or(String::new(), |value| {
        let text = value.to_string();
        if text.len() > 80 { String::new() } else { format!(" (written: {text})") }
    });
    SpecError::Parse { path: format!("source.{field}"), message: format!("{message}{written}") }
}

/// A `serde_path_to_error` error's path and message.
fn located(err: &serde_path_to_error::Error<serde_json::Error>) -> (String, String) {
    (err.path().to_string(), crate::spec::plain_types(err.inner().to_string()))
}

/// `AT_TIMESTAMP` needs `starting_timestamp`, the other positions refuse it.
fn check_position(position: StartingPosition, timestamp: Option<&DateTime<Utc>>) -> Result<(), SpecError> {
    match (position, timestamp) {
        (StartingPosition::AtTimestamp, None) => Err(invalid(
            "source.starting_timestamp",
            "null",
            "is required with starting_position AT_TIMESTAMP (an RFC 3339 instant, e.g. 2026-12-01T00:00:00Z)",
        )),
        (StartingPosition::TrimHorizon | StartingPosition::Latest, Some(at)) => Err(invalid(
            "source.starting_timestamp",
            &format!("{:?}", at.to_rfc3339()),
            "is only read with starting_position AT_TIMESTAMP",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINESIS: &str = "
version: 1
pipeline: clicks
source:
  kind: kinesis
  stream: clicks-stream
  starting_position: TRIM_HORIZON
records:
  records_pointer: /events
target:
  dataset: clicks
";

    #[test]
    fn a_kinesis_spec_parses_with_defaults() {
        let spec = StreamSpec::from_yaml(KINESIS).unwrap();
        assert_eq!(spec.source_name(), "clicks-stream");
        assert_eq!(spec.batching, StreamBatching::default());
        assert_eq!(spec.window, StreamWindow::default());
        assert_eq!(spec.records.compression, Compression::Auto);
        assert!(StreamSpec::is_stream_document(KINESIS));
    }

    #[test]
    fn a_kafka_spec_parses() {
        let text = "version: 1\npipeline: orders\nsource: { kind: kafka, topic: orders.v1, starting_position: LATEST }\ntarget: { dataset: orders }\n";
        let spec = StreamSpec::from_yaml(text).unwrap();
        assert!(matches!(spec.source, StreamSource::Kafka(ref kafka) if kafka.topic == "orders.v1"));
    }

    #[test]
    fn errors_name_the_field_and_value() {
        let cases = [
            (KINESIS.replace("clicks-stream", "bad/name"), "source.stream", "\"bad/name\""),
            (KINESIS.replace("TRIM_HORIZON", "AT_TIMESTAMP"), "source.starting_timestamp", "null"),
            (KINESIS.replace("/events", "events"), "records.records_pointer", "\"events\""),
            (format!("{KINESIS}batching: {{ batch_size: 20000 }}\n"), "batching.batch_size", "20000"),
            (format!("{KINESIS}batching: {{ batch_window_secs: 301 }}\n"), "batching.batch_window_secs", "301"),
            (format!("{KINESIS}window: {{ bytes: 100 }}\n"), "window.bytes", "100"),
            (format!("{KINESIS}window: {{ bytes: 67108865 }}\n"), "window.bytes", "67108865"),
            (format!("{KINESIS}window: {{ batches: 0 }}\n"), "window.batches", "0"),
            (format!("{KINESIS}window: {{ secs: 86401 }}\n"), "window.secs", "86401"),
        ];
        for (text, field, value) in cases {
            match StreamSpec::from_yaml(&text) {
                Err(SpecError::Invalid { field: f, value: v, .. }) => {
                    assert_eq!((f.as_str(), v.as_str()), (field, value), "{text}");
                }
                other => panic!("{field}: {other:?}"),
            }
        }
    }

    #[test]
    fn shape_errors_name_the_path() {
        let text = KINESIS.replace("TRIM_HORIZON", "EARLIEST");
        let err = StreamSpec::from_yaml(&text).unwrap_err().to_string();
        assert!(err.contains("source") && err.contains("EARLIEST"), "{err}");
        let text = KINESIS.replace("stream: clicks-stream", "strem: clicks-stream");
        let err = StreamSpec::from_yaml(&text).unwrap_err().to_string();
        assert!(err.contains("strem"), "{err}");
    }

    /// Inside `source` (an enum tagged by `kind`) serde names only
    /// `source`; the error names the field and the value written (a
    /// trial: `at source: input contains invalid characters`).
    #[test]
    fn errors_inside_the_source_name_the_field_and_the_value() {
        let cases = [
            (
                "starting_position: TRIM_HORIZON",
                "starting_position: EARLIEST",
                "source.starting_position",
                "\"EARLIEST\"",
            ),
            (
                "starting_position: TRIM_HORIZON",
                "starting_position: AT_TIMESTAMP\n  starting_timestamp: yesterday",
                "source.starting_timestamp",
                "\"yesterday\"",
            ),
        ];
        for (from, to, field, value) in cases {
            let text = KINESIS.replace(from, to);
            assert_ne!(text, KINESIS, "{from}");
            let err = StreamSpec::from_yaml(&text).unwrap_err().to_string();
            assert!(err.contains(&format!("`{field}`")) && err.contains(value), "{err}");
        }
    }
}
