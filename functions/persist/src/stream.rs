//! Stream batches into the lake: a Kinesis or Kafka (Amazon MSK,
//! self-managed) batch handed to Persist's own page pipeline
//! ([`crate::persist_page`]), exactly once per stream record.
//!
//! Why here and not in a function of its own: a stream batch *is* a page.
//! Everything Persist does to a page (raw copy for replay, conversion
//! against the dataset's schema, quarantine, Iceberg commit at run
//! completion, receipts) is what a stream batch needs, so this module only
//! turns a batch into a [`PersistMessage`] with a key derived from the
//! stream position, and keeps a checkpoint per shard. A second function
//! would duplicate Persist's wiring (catalog, committer, limits) for no
//! gain.
//!
//! Exactly once, per shard (or Kafka topic-partition):
//! - the batch's run id is derived from (stream, shard, first sequence
//!   number) ([`stream_run_id`]); a retried batch (the event source
//!   mapping retries from the same position, and a bisected batch's first
//!   half starts there too) is the same run and page, so it rewrites the
//!   same files and Persist deletes parts an earlier delivery left;
//! - the checkpoint (`_streams/<pipeline>/<stream>/<shard>.json`,
//!   [`Checkpoint`]) holds the highest sequence number whose run is
//!   complete (`through`) and the batch in flight (`pending`); records at
//!   or below `through` are a redelivery and skipped, so a batch retried
//!   after its run completed (a crash before the response) commits nothing
//!   twice, whatever the retry's bounds;
//! - a batch that fails reports its first unwritten record
//!   ([`StreamOutcome::failures`]): the event source mapping restarts
//!   there, so nothing after it is lost and nothing before it repeated.
//!
//! The checkpoint is a high-water mark per shard, which holds while one
//! batch per shard is in flight: `ParallelizationFactor` 1 (see
//! `docs/streams.md` for what a higher factor costs).
//!
//! Poison records (not base64, not gzip when said to be, not UTF-8 JSON,
//! no pointer target) never fail the batch: they are quarantined with the
//! reason, as JSON lines `{"index","reason","record"}` beside Persist's own
//! quarantine file, with the record's data kept in base64.

use std::collections::BTreeMap;
use std::io::Read;

use aws_lambda_events::event::kafka::KafkaEvent;
use aws_lambda_events::event::kinesis::KinesisEvent;
use base64::Engine;
use bytes::Bytes;
use chrono::{DateTime, NaiveDate, Utc};
use contracts::stream::{Compression, StreamSpec};
use contracts::{PageRef, Payload, PersistMessage, RawRecords, RunId, V1};
use serde::{Deserialize, Serialize};
use tributary_core::keys;
use tributary_core::ledger::Expected;
use tributary_core::metrics::Metrics;
use tributary_core::ports::{ObjectStore, PortError};

use crate::deps::Deps;
use crate::error::PersistError;
use crate::handler::persist_page;

/// Folder of the stream checkpoints: `_streams/<pipeline>/<stream>/<shard>.json`.
pub const STREAMS_PREFIX: &str = "_streams/";

pub use tributary_core::streams::{StreamRecord, sequence_cmp};

/// Records of a Kinesis Lambda event, in the event's order. The shard is
/// the part of `eventID` before `:` (`shardId-000000000006:4959…`), the
/// Lambda Kinesis event's only mention of it.
///
/// # Errors
/// [`PersistError::Stream`] naming `Records[i].eventID` when it has no shard.
pub fn kinesis_records(event: &KinesisEvent) -> Result<Vec<StreamRecord>, PersistError> {
    event
        .records
        .iter()
        .enumerate()
        .map(|(index, record)| {
            let shard = record
                .event_id
                .as_deref()
                .and_then(|id| id.split_once(':'))
                .map(|(shard, _)| shard.to_string())
                .ok_or_else(|| PersistError::Stream {
                    field: format!("Records[{index}].eventID"),
                    problem: format!("{:?} is not `<shardId>:<sequenceNumber>`", record.event_id),
                })?;
            Ok(StreamRecord {
                partition: shard,
                sequence: record.kinesis.sequence_number.clone(),
                data: Some(record.kinesis.data.0.clone()),
                arrival: record.kinesis.approximate_arrival_timestamp.0,
            })
        })
        .collect()
}

/// Records of an Amazon MSK or self-managed Kafka event: `records` keyed
/// `<topic>-<partition>`, each value base64 (Lambda developer guide, "Using
/// Lambda with Amazon MSK", example event). Partitions in key order, records
/// by offset.
///
/// # Errors
/// [`PersistError::Stream`] naming `records.<key>[i].value` when a value is
/// not base64 (a poison value is still one the event carries as base64: an
/// event that does not is malformed as a whole).
pub fn kafka_records(event: &KafkaEvent) -> Result<Vec<StreamRecord>, PersistError> {
    let mut keys: Vec<&String> = event.records.keys().collect();
    keys.sort();
    let mut out = Vec::new();
    for key in keys {
        let mut records: Vec<_> = event.records[key].iter().collect();
        records.sort_by_key(|record| record.offset);
        for (index, record) in records.into_iter().enumerate() {
            let data = match &record.value {
                None => None,
                Some(value) => Some(base64::engine::general_purpose::STANDARD.decode(value).map_err(|err| {
                    PersistError::Stream { field: format!("records.{key}[{index}].value"), problem: err.to_string() }
                })?),
            };
            out.push(StreamRecord {
                partition: key.clone(),
                sequence: record.offset.to_string(),
                data,
                arrival: record.timestamp.0,
            })
        }
    }
    Ok(out)
}

/// What a batch came to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamOutcome {
    /// Per partition that failed, its first record not written (the
    /// event source mapping's `itemIdentifier`): `(partition, sequence)`.
    pub failures: Vec<(String, String)>,
    /// Records written (to the table or quarantine) by this call.
    pub records_written: u64,
    /// Records skipped as already in the lake (at or below the checkpoint).
    pub records_skipped: u64,
    /// Poison records quarantined by this call.
    pub records_poison: u64,
}

/// A shard's position in the lake.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The highest sequence number whose run is complete (`None`: nothing yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub through: Option<String>,
    /// The batch being written, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingBatch>,
    /// Records the completed runs of this shard held (rows and quarantined).
    #[serde(default)]
    pub records: u64,
    /// When the latest completed batch's last record reached the stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_arrival: Option<DateTime<Utc>>,
    /// When the checkpoint last moved (the writer's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<DateTime<Utc>>,
}

/// A batch whose run has started but whose checkpoint has not moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingBatch {
    /// Its run id ([`stream_run_id`]).
    pub run_id: RunId,
    /// Its first and last sequence numbers.
    pub first: String,
    /// Last sequence number.
    pub last: String,
    /// Records in it.
    pub records: u64,
    /// When its last record reached the stream.
    pub last_arrival: DateTime<Utc>,
}

/// Key of a shard's checkpoint.
pub fn checkpoint_key(pipeline: &str, source: &str, partition: &str) -> String {
    format!("{STREAMS_PREFIX}{pipeline}/{source}/{partition}.json")
}

/// Reads a shard's checkpoint (default when there is none).
///
/// # Errors
/// Store failures; an unreadable checkpoint is [`PersistError::Stream`].
pub async fn read_checkpoint(store: &dyn ObjectStore, key: &str) -> Result<Checkpoint, PersistError> {
    match store.get(key).await {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|err| PersistError::Stream {
            field: key.to_string(),
            problem: format!("unreadable checkpoint: {err}"),
        }),
        Err(PortError::NotFound { .. }) => Ok(Checkpoint::default()),
        Err(err) => Err(err.into()),
    }
}

/// The run id of a batch: `s-` and the FNV-1a of (stream, partition,
/// first sequence number): the same for every retry of the batch, and
/// within [`RunId::MAX_LEN`] where a Kinesis sequence number alone (up to
/// 128 digits, Kinesis API reference `SequenceNumber`) is not.
pub fn stream_run_id(source: &str, partition: &str, first: &str) -> RunId {
    let digest = contracts::digest::fnv1a_hex(format!("{source}\n{partition}\n{first}").as_bytes());
    RunId::new(format!("s-{digest}")).unwrap_or_else(|_| RunId::from_time(Utc::now()))
}

/// Persists a stream batch: each partition's records in order, as one page
/// of one run per partition, skipping what the checkpoint says is in the
/// lake. Partitions fail alone: a failure is reported at its first record
/// not written, the others go on.
#[tracing::instrument(skip_all, fields(pipeline = %spec.pipeline, source = spec.source_name(), records = records.len()))]
pub async fn persist_stream_batch(spec: &StreamSpec, records: &[StreamRecord], deps: Deps<'_>) -> StreamOutcome {
    let mut groups: BTreeMap<&str, Vec<&StreamRecord>> = BTreeMap::new();
    for record in records {
        groups.entry(record.partition.as_str()).or_default().push(record);
    }
    let mut outcome = StreamOutcome::default();
    for (partition, records) in groups {
        match persist_partition(spec, partition, &records, deps).await {
            Ok(done) => {
                outcome.records_written += done.written;
                outcome.records_skipped += done.skipped;
                outcome.records_poison += done.poison;
            }
            Err((first_unwritten, err)) => {
                tracing::error!(partition, first_unwritten, error = %err, "stream batch not written; reported for retry");
                outcome.failures.push((partition.to_string(), first_unwritten));
            }
        }
    }
    outcome
}

struct PartitionDone {
    written: u64,
    skipped: u64,
    poison: u64,
}

/// One partition's records: checkpoint, page, checkpoint.
async fn persist_partition(
    spec: &StreamSpec,
    partition: &str,
    records: &[&StreamRecord],
    deps: Deps<'_>,
) -> Result<PartitionDone, (String, PersistError)> {
    let first_of_batch = records.first().map(|r| r.sequence.clone()).unwrap_or_default();
    let fail = |at: &str| {
        let at = at.to_string();
        move |err: PersistError| (at, err)
    };
    let source = spec.source_name();
    let key = checkpoint_key(&spec.pipeline, source, partition);
    let mut checkpoint = read_checkpoint(deps.store, &key).await.map_err(fail(&first_of_batch))?;
    settle_pending(&spec.pipeline, &mut checkpoint, deps.store).await.map_err(fail(&first_of_batch))?;
    let fresh: Vec<&StreamRecord> = records
        .iter()
        .copied()
        .filter(|r| checkpoint.through.as_deref().is_none_or(|t| sequence_cmp(&r.sequence, t).is_gt()))
        .collect();
    let skipped = (records.len() - fresh.len()) as u64;
    let (Some(first), Some(last)) = (fresh.first(), fresh.last()) else {
        if skipped > 0 {
            tracing::info!(partition, skipped, "a redelivered batch: every record is in the lake already");
        }
        return Ok(PartitionDone { written: 0, skipped, poison: 0 });
    };
    let run_id = stream_run_id(source, partition, &first.sequence);
    if let Some(pending) = &checkpoint.pending
        && pending.run_id != run_id
    {
        tracing::warn!(partition, abandoned = %pending.run_id, from = %pending.first, "an unfinished batch was not retried (retries exhausted or records expired); it went to the on-failure destination");
        drop_abandoned_batch(&spec.pipeline, &pending.run_id, deps.store).await.map_err(fail(&first.sequence))?;
    }
    checkpoint.pending = Some(PendingBatch {
        run_id: run_id.clone(),
        first: first.sequence.clone(),
        last: last.sequence.clone(),
        records: fresh.len() as u64,
        last_arrival: last.arrival,
    });
    write_checkpoint(deps.store, &key, &checkpoint).await.map_err(fail(&first.sequence))?;

    let batch = decode_batch(spec, &fresh).map_err(fail(&first.sequence))?;
    let run_date = first.arrival.date_naive();
    write_poison(spec, &run_id, run_date, &batch.poison, deps.store).await.map_err(fail(&first.sequence))?;
    let message = PersistMessage {
        version: V1,
        pipeline: spec.pipeline.clone(),
        run_id: run_id.clone(),
        run_date,
        page: PageRef { index: 0, count: 1 },
        target: spec.target.clone(),
        payload: Payload::Inline { records: batch.rows },
        fetched_at: DateTime::from_timestamp_millis(last.arrival.timestamp_millis()),
    };
    let expected = Expected {
        pipeline: spec.pipeline.clone(),
        run_id: run_id.clone(),
        run_date,
        pages: 1,
        truncated: None,
        records: None,
    };
    // The expected count only: asking the ledger to complete the run here
    // would complete it with an earlier attempt's receipt (a longer batch
    // that died before its `_SUCCESS`); this page's receipt completes it.
    let expected_key = keys::expected_key(&spec.pipeline, &run_id);
    let expected = serde_json::to_vec(&expected).map_err(|err| {
        (first.sequence.clone(), PersistError::Stream { field: expected_key.clone(), problem: err.to_string() })
    })?;
    deps.store.put(&expected_key, Bytes::from(expected)).await.map_err(|err| (first.sequence.clone(), err.into()))?;
    persist_page(message, deps).await.map_err(fail(&first.sequence))?;

    settle_pending(&spec.pipeline, &mut checkpoint, deps.store).await.map_err(fail(&first.sequence))?;
    checkpoint.updated_at = Some(Utc::now());
    write_checkpoint(deps.store, &key, &checkpoint).await.map_err(fail(&first.sequence))?;
    emit_stream_metrics(spec, partition, fresh.len() as u64, batch.poison.len() as u64, last.arrival, deps);
    Ok(PartitionDone { written: fresh.len() as u64, skipped, poison: batch.poison.len() as u64 })
}

/// The files an abandoned batch (given up by the event source mapping, so
/// its records are in the on-failure destination) wrote before it died:
/// its page's parts and quarantine, as its receipt lists them, so none of
/// its rows stay in the table half-landed, and a replay of the on-failure
/// record writes them once.
async fn drop_abandoned_batch(pipeline: &str, run_id: &RunId, store: &dyn ObjectStore) -> Result<(), PersistError> {
    let receipt = match store.get(&keys::receipt_key(pipeline, run_id, 0)).await {
        Ok(bytes) => bytes,
        Err(PortError::NotFound { .. }) => return Ok(()),
        Err(err) => return Err(err.into()),
    };
    let Ok(receipt) = serde_json::from_slice::<tributary_core::ledger::PageReceipt>(&receipt) else { return Ok(()) };
    for key in receipt.data_keys.iter().chain(receipt.quarantine_key.as_ref()) {
        match store.delete(key).await {
            Ok(()) | Err(PortError::NotFound { .. }) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

/// A pending batch whose run is complete moves `through` to its last
/// sequence number (its rows are in the lake: a crash came between the
/// run's completion and the checkpoint).
async fn settle_pending(
    pipeline: &str,
    checkpoint: &mut Checkpoint,
    store: &dyn ObjectStore,
) -> Result<(), PersistError> {
    let Some(pending) = checkpoint.pending.clone() else { return Ok(()) };
    match store.get(&keys::success_key(pipeline, &pending.run_id)).await {
        Ok(_) => {
            checkpoint.through = Some(pending.last);
            checkpoint.records += pending.records;
            checkpoint.last_arrival = Some(pending.last_arrival);
            checkpoint.pending = None;
            Ok(())
        }
        Err(PortError::NotFound { .. }) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

async fn write_checkpoint(store: &dyn ObjectStore, key: &str, checkpoint: &Checkpoint) -> Result<(), PersistError> {
    let bytes = serde_json::to_vec(checkpoint)
        .map_err(|err| PersistError::Stream { field: key.to_string(), problem: err.to_string() })?;
    store.put(key, Bytes::from(bytes)).await?;
    Ok(())
}

/// A batch's rows (a JSON array's text) and its poison records.
struct DecodedBatch {
    rows: RawRecords,
    poison: Vec<(u64, String, String)>,
}

/// Each record's data: gunzipped (per `records.compression`), UTF-8 JSON,
/// one row or the array at `records.records_pointer`; anything else is
/// poison with the reason.
fn decode_batch(spec: &StreamSpec, records: &[&StreamRecord]) -> Result<DecodedBatch, PersistError> {
    let mut text = String::from("[");
    let mut poison = Vec::new();
    for (index, record) in records.iter().enumerate() {
        match decode_record(spec, record) {
            Ok(rows) => {
                for row in rows {
                    if text.len() > 1 {
                        text.push(',');
                    }
                    text.push_str(&row);
                }
            }
            Err(reason) => {
                let data = record.data.as_deref().map(|d| base64::engine::general_purpose::STANDARD.encode(d));
                let kept = serde_json::json!({
                    "partition": record.partition,
                    "sequence": record.sequence,
                    "data_base64": data,
                });
                poison.push((
                    index as u64,
                    format!("record {} ({}): {reason}", record.sequence, record.partition),
                    kept.to_string(),
                ));
            }
        }
    }
    text.push(']');
    // An array of JSON texts each checked by serde_json: it parses.
    let rows = RawRecords::from_text(text).map_err(|err| PersistError::Stream {
        field: "records".into(),
        problem: format!("rows do not form an array: {err}"),
    })?;
    Ok(DecodedBatch { rows, poison })
}

/// One record's rows as JSON texts, or why it is poison.
fn decode_record(spec: &StreamSpec, record: &StreamRecord) -> Result<Vec<String>, String> {
    let Some(data) = record.data.as_deref() else { return Err("no value (a Kafka tombstone)".into()) };
    let gzipped = data.starts_with(&[0x1f, 0x8b]);
    let data = match (spec.records.compression, gzipped) {
        (Compression::Gzip, false) => return Err("not gzip (records.compression: gzip)".into()),
        (Compression::Gzip | Compression::Auto, true) => {
            let mut out = Vec::new();
            flate2::read::MultiGzDecoder::new(data)
                .take(crate::DEFAULT_MAX_PAGE_BYTES)
                .read_to_end(&mut out)
                .map_err(|err| format!("not valid gzip: {err}"))?;
            out
        }
        _ => data.to_vec(),
    };
    let text = std::str::from_utf8(&data).map_err(|err| format!("not UTF-8: {err}"))?;
    match &spec.records.records_pointer {
        None => {
            let raw: Box<serde_json::value::RawValue> =
                serde_json::from_str(text).map_err(|err| format!("not JSON: {err}"))?;
            Ok(vec![raw.get().to_string()])
        }
        Some(pointer) => {
            let value: serde_json::Value = serde_json::from_str(text).map_err(|err| format!("not JSON: {err}"))?;
            match value.pointer(pointer) {
                Some(serde_json::Value::Array(items)) => Ok(items.iter().map(|item| item.to_string()).collect()),
                Some(_) => Err(format!("records.records_pointer {pointer} is not an array here")),
                None => Err(format!("records.records_pointer {pointer} is not in the record")),
            }
        }
    }
}

/// Key of a batch's poison records: beside Persist's quarantine file.
pub fn poison_key(dataset: &str, run_date: NaiveDate, pipeline: &str, run_id: &RunId) -> String {
    format!("quarantine/{}/{}-stream.jsonl", keys::data_prefix(dataset, run_date), keys::page_stem(pipeline, run_id, 0))
}

async fn write_poison(
    spec: &StreamSpec,
    run_id: &RunId,
    run_date: NaiveDate,
    poison: &[(u64, String, String)],
    store: &dyn ObjectStore,
) -> Result<(), PersistError> {
    let key = poison_key(&spec.target.dataset, run_date, &spec.pipeline, run_id);
    if poison.is_empty() {
        // A retry of this batch that found no poison: no stale file stays.
        return match store.delete(&key).await {
            Ok(()) | Err(PortError::NotFound { .. }) => Ok(()),
            Err(err) => Err(err.into()),
        };
    }
    let mut text = String::new();
    for (index, reason, record) in poison {
        let reason = serde_json::Value::String(reason.clone());
        text.push_str(&format!("{{\"index\":{index},\"reason\":{reason},\"record\":{record}}}\n"));
    }
    tracing::warn!(quarantined = poison.len(), key, "poison stream records quarantined");
    store.put(&key, Bytes::from(text)).await?;
    Ok(())
}

/// EMF: records persisted and poison, and the iterator age (milliseconds
/// from the batch's last record reaching the stream to now, the event
/// source mapping's `IteratorAge` as the function sees it), per shard.
fn emit_stream_metrics(
    spec: &StreamSpec,
    partition: &str,
    records: u64,
    poison: u64,
    last: DateTime<Utc>,
    deps: Deps<'_>,
) {
    let age_ms = (Utc::now() - last).num_milliseconds().max(0) as f64;
    let mut emf = Metrics::new("persist", &spec.pipeline);
    emf.count(tributary_core::metrics::RECORDS_PERSISTED, records - poison);
    emf.count(tributary_core::metrics::RECORDS_QUARANTINED, poison);
    emf.duration_ms(ITERATOR_AGE, age_ms);
    emf.property("stream", serde_json::Value::String(spec.source_name().to_string()));
    emf.property("shard", serde_json::Value::String(partition.to_string()));
    emf.flush_to(&deps.config.metrics);
}

/// EMF metric name of a stream batch's iterator age (milliseconds).
pub const ITERATOR_AGE: &str = "stream_iterator_age";

/// The Lambda response to a Kinesis event: `batchItemFailures` with each
/// failed shard's first unwritten sequence number (Lambda developer guide,
/// "Configuring partial batch response with Kinesis Data Streams").
pub fn kinesis_response(outcome: &StreamOutcome) -> aws_lambda_events::event::streams::KinesisEventResponse {
    let mut response = aws_lambda_events::event::streams::KinesisEventResponse::default();
    for (_, sequence) in &outcome.failures {
        let mut failure = aws_lambda_events::event::streams::KinesisBatchItemFailure::default();
        failure.item_identifier = Some(sequence.clone());
        response.batch_item_failures.push(failure);
    }
    response
}

/// The Lambda response to a Kafka event: `batchItemFailures`, one per
/// failed topic-partition, `itemIdentifier` `{"partition": "<topic>-<n>",
/// "offset": <offset>}` at its first unwritten record (an object, not the
/// string of Kinesis and SQS: AWS Lambda Developer Guide, "Configuring
/// error handling controls for Kafka event sources"; a string there fails
/// the whole batch, retried whole).
pub fn kafka_response(outcome: &StreamOutcome) -> serde_json::Value {
    let failures: Vec<serde_json::Value> = outcome
        .failures
        .iter()
        .map(|(partition, offset)| {
            let offset: serde_json::Value =
                offset.parse::<i64>().map(serde_json::Value::from).unwrap_or_else(|_| offset.clone().into());
            serde_json::json!({ "itemIdentifier": { "partition": partition, "offset": offset } })
        })
        .collect();
    serde_json::json!({ "batchItemFailures": failures })
}

/// Handles a Kinesis Lambda event for `spec`.
///
/// # Errors
/// A malformed event ([`PersistError::Stream`]); everything else is a
/// per-shard failure in the response.
pub async fn handle_kinesis(
    spec: &StreamSpec,
    event: &KinesisEvent,
    deps: Deps<'_>,
) -> Result<aws_lambda_events::event::streams::KinesisEventResponse, PersistError> {
    let records = kinesis_records(event)?;
    Ok(kinesis_response(&persist_stream_batch(spec, &records, deps).await))
}

/// Handles an MSK or self-managed Kafka Lambda event for `spec`.
///
/// # Errors
/// A malformed event ([`PersistError::Stream`]); everything else is a
/// per-partition failure in the response.
pub async fn handle_kafka(
    spec: &StreamSpec,
    event: &KafkaEvent,
    deps: Deps<'_>,
) -> Result<serde_json::Value, PersistError> {
    let records = kafka_records(event)?;
    Ok(kafka_response(&persist_stream_batch(spec, &records, deps).await))
}

/// Folder of the stream specs the Persist Lambda reads: `_streams/_specs/<stream or topic>.json`.
pub const SPECS_PREFIX: &str = "_streams/_specs/";

/// Key of the spec of the stream (or Kafka topic) `source`.
pub fn spec_key(source: &str) -> String {
    format!("{SPECS_PREFIX}{source}.json")
}

/// Which stream event a Lambda payload is, by its `eventSource`: a Kinesis
/// event (`Records[].eventSource` `aws:kinesis`), an MSK (`aws:kafka`) or
/// self-managed Kafka (`SelfManagedKafka`) event; `None` for anything else
/// (an SQS event, handled as Persist's messages).
pub fn stream_event_kind(payload: &serde_json::Value) -> Option<&'static str> {
    if let Some("aws:kafka" | "SelfManagedKafka") = payload["eventSource"].as_str() {
        return Some("kafka");
    }
    (payload["Records"][0]["eventSource"].as_str() == Some("aws:kinesis")).then_some("kinesis")
}

/// Handles a Kinesis or Kafka Lambda event: the stream's name (Kinesis: the
/// `eventSourceARN`'s `stream/<name>`; Kafka: the records' `topic`) finds
/// its spec in the lake ([`spec_key`], written at deploy time), and the
/// batch goes through [`persist_stream_batch`]. The answer is the partial
/// batch response.
///
/// # Errors
/// [`PersistError::Stream`]: not a stream event, an event without a
/// stream name, no spec for the stream (so the mapping retries, then sends
/// the batch to its on-failure destination, and Notify alerts).
pub async fn handle_stream_event(
    payload: serde_json::Value,
    deps: Deps<'_>,
) -> Result<serde_json::Value, PersistError> {
    let bad = |field: &str, problem: String| PersistError::Stream { field: field.to_string(), problem };
    match stream_event_kind(&payload) {
        Some("kinesis") => {
            let event: KinesisEvent = serde_json::from_value(payload).map_err(|err| bad("Records", err.to_string()))?;
            let arn = event.records.first().and_then(|r| r.event_source_arn.clone()).unwrap_or_default();
            let stream = arn
                .split_once(":stream/")
                .map(|(_, name)| name.to_string())
                .ok_or_else(|| bad("Records[0].eventSourceARN", format!("{arn:?} names no stream")))?;
            let spec = load_spec(&stream, deps.store).await?;
            let response = handle_kinesis(&spec, &event, deps).await?;
            serde_json::to_value(response).map_err(|err| bad("response", err.to_string()))
        }
        Some(_) => {
            let event: KafkaEvent = serde_json::from_value(payload).map_err(|err| bad("records", err.to_string()))?;
            let topic = event
                .records
                .values()
                .flatten()
                .find_map(|r| r.topic.clone())
                .ok_or_else(|| bad("records[].topic", "no record names its topic".into()))?;
            let spec = load_spec(&topic, deps.store).await?;
            handle_kafka(&spec, &event, deps).await
        }
        None => Err(bad("eventSource", "not a Kinesis or Kafka event".into())),
    }
}

async fn load_spec(source: &str, store: &dyn ObjectStore) -> Result<StreamSpec, PersistError> {
    let key = spec_key(source);
    let bytes = store.get(&key).await.map_err(|err| PersistError::Stream {
        field: key.clone(),
        problem: format!("no stream spec for {source} ({err}); upload the pipeline's spec there"),
    })?;
    let text = String::from_utf8_lossy(&bytes);
    StreamSpec::from_yaml(&text).map_err(|err| PersistError::Stream { field: key, problem: err.to_string() })
}
