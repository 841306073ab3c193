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
//! - the shard's batches are pages of its open window, a run whose id is
//!   derived from (stream, shard, first sequence number of the window)
//!   ([`stream_run_id`]); a retried batch (the event source mapping
//!   retries from the same position, and a bisected batch's first half
//!   starts there too) is the same page of the same run, so it rewrites
//!   the same files and Persist deletes parts an earlier delivery left;
//! - the checkpoint (`_streams/<pipeline>/<stream>/<shard>.json`,
//!   [`Checkpoint`]) holds the highest sequence number whose page receipt
//!   is written (`through`), the batch in flight (`pending`) and the open
//!   window ([`Window`]); records at or below `through` are a redelivery
//!   and skipped, so a batch retried after its page was recorded (a crash
//!   before the response) writes nothing twice, whatever the retry's
//!   bounds;
//! - unless it arrived after every record in the lake
//!   ([`Checkpoint::newest_arrival`]): a redelivered record keeps its
//!   arrival time, so such a record is one the lake does not hold. The
//!   shard's positions went back (a Kafka topic deleted and created again
//!   restarts its offsets at 0, as does an offset reset): the records are
//!   written as new, with a warning, and windows opened from then on take
//!   an epoch into their run ids ([`window_run_id`]) so as not to reuse
//!   the old windows' ids, files and receipts;
//! - a batch that fails reports its first unwritten record
//!   ([`StreamOutcome::failures`]): the event source mapping restarts
//!   there, so nothing after it is lost and nothing before it repeated.
//!
//! Small files: a window closes when the spec's `window` rule says
//! ([`Window::is_due`]: bytes of its batch files, batches, stream time),
//! and its run completes as a REST run does: Parquet batch files coalesced
//! into one file per partition ([`crate::coalesce`], resumable from its
//! replacement record), Iceberg staged files committed in one snapshot.
//! The checkpoint marks the window `closing` before the close writes
//! anything, so no batch joins it after, and the next batch (or
//! [`close_windows`]) finishes a close that died.
//!
//! The checkpoint is a high-water mark per shard, which holds while one
//! batch per shard is in flight: `ParallelizationFactor` 1 (see
//! `docs/streams.md` for what a higher factor costs). A batch arriving
//! while another of its shard is in flight ([`PendingBatch::in_flight`])
//! is refused, naming both.
//!
//! In a replay ([`crate::stream_replay`]) a batch is split where original
//! windows begin, and a window closes only there, committing as the
//! replacement of the original windows it holds.
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
use contracts::stream::{Compression, StreamSpec, StreamWindow};
use contracts::{PageRef, Payload, PersistMessage, RawRecords, RunId, V1};
use serde::{Deserialize, Serialize};
use tributary_core::keys;
use tributary_core::ledger::{Completion, Expected, PageReceipt};
use tributary_core::metrics::Metrics;
use tributary_core::ports::{ObjectStore, PortError};

use crate::deps::Deps;
use crate::error::PersistError;
use crate::handler::persist_page_after_poison;

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
                arrival: StreamRecord::kafka_arrival(record.timestamp.0.timestamp_millis()),
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
    /// Why the first of [`StreamOutcome::failures`] failed, for the
    /// poller's and the on-failure destination's messages.
    pub failure_reason: Option<String>,
    /// Records written (to the table or quarantine) by this call.
    pub records_written: u64,
    /// Records skipped as already in the lake (at or below the checkpoint).
    pub records_skipped: u64,
    /// Records quarantined by this call: poison records (not gzip, UTF-8
    /// or JSON, tombstones) and those the converter set aside (not an
    /// object, a value no column takes, ...), as the pages' receipts count
    /// them.
    pub records_quarantined: u64,
    /// Rows persisted by this call: the records not quarantined, or with
    /// `records.records_pointer` the items of their arrays.
    pub rows_persisted: u64,
    /// What a person running the stream should know of this call beyond
    /// its counts: a shard whose positions went back (a topic or stream
    /// recreated, its offsets reset), whose records at or below the
    /// checkpoint were written as new records.
    pub notes: Vec<String>,
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
    /// The open window the shard's batches are recorded in, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
    /// Records of the shard's batches in the lake (rows and quarantined).
    #[serde(default)]
    pub records: u64,
    /// When the latest batch in the lake's last record reached the stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_arrival: Option<DateTime<Utc>>,
    /// When the checkpoint last moved (the writer's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<DateTime<Utc>>,
    /// The latest arrival of any record of the shard in the lake (`None`:
    /// not known, as in checkpoints written before it was kept). A record
    /// at or below `through` that arrived after it is not a redelivery:
    /// no record the lake holds arrived so late, so the shard's positions
    /// went back (a topic or stream recreated, offsets reset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest_arrival: Option<DateTime<Utc>>,
    /// Set when the shard's positions went back: the arrival (Unix
    /// milliseconds) of the first record after that. Windows opened since
    /// take it into their run ids ([`window_run_id`]), so that a window
    /// starting at a position an earlier window started at does not take
    /// that window's run id, files and receipts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<String>,
}

/// A batch being written: its page of the window started, its receipt not
/// yet seen by the checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingBatch {
    /// Its window's run id ([`Window::run_id`]).
    pub run_id: RunId,
    /// Its page in that run (checkpoints written before windows: 0).
    #[serde(default)]
    pub page: u32,
    /// Its first and last sequence numbers.
    pub first: String,
    /// Last sequence number.
    pub last: String,
    /// Records in it.
    pub records: u64,
    /// When its last record reached the stream.
    pub last_arrival: DateTime<Utc>,
    /// The latest arrival among its records (absent in checkpoints
    /// written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest_arrival: Option<DateTime<Utc>>,
    /// When the invocation writing it started it (the writer's clock;
    /// absent in checkpoints written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// When that invocation answered that it failed (its batch is then
    /// retried or given up on by the event source mapping, not in flight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<DateTime<Utc>>,
}

/// How long a pending batch whose invocation has not answered counts as
/// in flight: Lambda's maximum function timeout, 900 s ("Lambda quotas":
/// function timeout, 900 seconds (15 minutes)), so the bound holds
/// whatever `Timeout` the stack gives Persist (300 s in
/// `infra/template.yaml`). An invocation older than this has ended,
/// whether or not it could say so.
pub const IN_FLIGHT_SECS: i64 = 900;

impl PendingBatch {
    /// Whether its invocation may still be running at `now`: started less
    /// than [`IN_FLIGHT_SECS`] ago and not answered as failed. A batch of
    /// the same shard with another first record arriving meanwhile is a
    /// second batch in flight: `ParallelizationFactor` above 1.
    pub fn in_flight(&self, now: DateTime<Utc>) -> bool {
        self.failed_at.is_none() && self.started_at.is_some_and(|t| (now - t).num_seconds() < IN_FLIGHT_SECS)
    }
}

/// A shard's window: the batches recorded as pages of one run, coalesced
/// (Parquet) or committed (Iceberg) together when it closes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// Its run id ([`stream_run_id`] of its first record).
    pub run_id: RunId,
    /// Its run date (`dt=` of the run-date layout): the arrival date of its
    /// first record, for every batch in it.
    pub run_date: NaiveDate,
    /// Sequence number of its first record.
    pub first: String,
    /// Batches recorded (pages `0..batches`).
    pub batches: u32,
    /// Bytes of their Parquet files.
    pub bytes: u64,
    /// Stream records in them.
    pub records: u64,
    /// When its first record reached the stream.
    pub opened: DateTime<Utc>,
    /// When its newest record reached the stream.
    pub newest: DateTime<Utc>,
    /// Its close has begun: its count is fixed, no batch joins it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub closing: bool,
    /// In a replay ([`crate::stream_replay`]): the original windows whose
    /// first record is in it, whose rows its commit replaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaces: Vec<RunId>,
}

/// The record of a batch that dates a window it opens: the first whose
/// arrival is after the Unix epoch (`None`: none is). A Kafka record
/// with no usable timestamp arrives at the epoch
/// ([`StreamRecord::kafka_arrival`]); a window it opened was dated
/// 1970-01-01, and every good record after it landed in `dt=1970-01-01`
/// (a trial finding). Only a batch of such records dates its window 1970.
fn dating_record<'a>(records: &[&'a StreamRecord]) -> Option<&'a StreamRecord> {
    records.iter().copied().find(|record| record.arrival.timestamp_millis() > 0)
}

impl Window {
    /// A window opened by `first`, the first record of a shard's batch,
    /// dated by `dated`: the batch's first record with a real arrival time
    /// ([`dating_record`]).
    fn open(source: &str, partition: &str, first: &StreamRecord, dated: &StreamRecord, epoch: Option<&str>) -> Self {
        Self {
            run_id: window_run_id(source, partition, &first.sequence, epoch),
            run_date: dated.arrival.date_naive(),
            first: first.sequence.clone(),
            batches: 0,
            bytes: 0,
            records: 0,
            opened: dated.arrival,
            newest: dated.arrival,
            closing: false,
            replaces: Vec::new(),
        }
    }

    /// Whether it is to close under the spec's `window` rule: its files
    /// reach `rule.bytes`, it has `rule.batches` batches, or its records
    /// span `rule.secs` of stream time (arrival times, not the clock, so a
    /// retry decides alike).
    pub fn is_due(&self, rule: &StreamWindow) -> bool {
        self.bytes >= rule.bytes
            || self.batches >= rule.batches
            || (self.newest - self.opened).num_seconds() >= i64::try_from(rule.secs).unwrap_or(i64::MAX)
    }
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

/// The run id of a window opened by the record at `first`: its
/// [`stream_run_id`], or after the shard's positions went back (`epoch`,
/// [`Checkpoint::epoch`]) the same digest with the epoch in it.
pub fn window_run_id(source: &str, partition: &str, first: &str, epoch: Option<&str>) -> RunId {
    match epoch {
        None => stream_run_id(source, partition, first),
        Some(epoch) => stream_run_id(source, partition, &format!("{first}\n{epoch}")),
    }
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
    // A replay in progress ([`crate::stream_replay`]): one GET per batch,
    // of an Iceberg dataset only.
    let replay = match crate::stream_replay::read_replay(spec, deps.store).await {
        Ok(replay) => replay,
        Err(err) => {
            tracing::error!(error = %err, "the stream's replay record is unreadable; the batch is reported for retry");
            outcome.failures = groups.iter().map(|(p, r)| (p.to_string(), r[0].sequence.clone())).collect();
            outcome.failure_reason = Some(format!("the stream's replay record is unreadable: {err}"));
            return outcome;
        }
    };
    for (partition, records) in groups {
        let done = match &replay {
            Some(replay) => persist_replayed(spec, partition, &records, replay, deps).await,
            None => persist_partition(spec, partition, &records, None, deps).await,
        };
        match done {
            Ok(done) => {
                outcome.records_written += done.written;
                outcome.records_skipped += done.skipped;
                outcome.records_quarantined += done.quarantined;
                outcome.rows_persisted += done.rows;
                outcome.notes.extend(done.notes);
            }
            Err((first_unwritten, err)) => {
                tracing::error!(partition, first_unwritten, error = %err, "stream batch not written; reported for retry");
                mark_failed(spec, partition, &first_unwritten, deps.store).await;
                outcome.failures.push((partition.to_string(), first_unwritten));
                outcome.failure_reason.get_or_insert_with(|| err.to_string());
            }
        }
    }
    outcome
}

/// The refusal of a batch that arrived while `pending`, another batch of
/// the same shard, is in flight: two batches of one shard at once, which
/// the checkpoint (a high-water mark) cannot take.
fn overlapping_batch(partition: &str, pending: &PendingBatch, first: &str, last: &str) -> PersistError {
    let since = pending.started_at.map_or_else(|| "?".into(), |t| t.to_rfc3339());
    PersistError::Stream {
        field: partition.to_string(),
        problem: format!(
            "batch {first}..{last} refused: batch {}..{} of the same shard has been in flight since {since}; two \
             batches of one shard at once mean the event source mapping's ParallelizationFactor is above 1, and \
             the shard's checkpoint holds only at ParallelizationFactor 1: set it to 1. This batch is retried by \
             the mapping (and goes to its on-failure destination, alerted, if its retries run out)",
            pending.first, pending.last
        ),
    }
}

/// After a partition failed at `first_unwritten`: its pending batch, when it
/// is this invocation's (same first record), is marked answered
/// ([`PendingBatch::failed_at`]), so the shard's next batch does not take
/// it for one in flight. Best effort: a mark that cannot be written leaves
/// the next batch waiting [`IN_FLIGHT_SECS`] at most.
async fn mark_failed(spec: &StreamSpec, partition: &str, first_unwritten: &str, store: &dyn ObjectStore) {
    let key = checkpoint_key(&spec.pipeline, spec.source_name(), partition);
    let Ok(mut checkpoint) = read_checkpoint(store, &key).await else { return };
    let Some(pending) = checkpoint.pending.as_mut() else { return };
    if pending.first != first_unwritten || pending.failed_at.is_some() {
        return;
    }
    pending.failed_at = Some(Utc::now());
    if let Err(err) = write_checkpoint(store, &key, &checkpoint).await {
        tracing::warn!(partition, error = %err, "the failed batch could not be marked answered");
    }
}

#[derive(Default)]
struct PartitionDone {
    written: u64,
    skipped: u64,
    /// Of `written`, quarantined (poison, and the converter's).
    quarantined: u64,
    /// Rows persisted (a record with a `records_pointer` array gives several).
    rows: u64,
    /// [`StreamOutcome::notes`].
    notes: Vec<String>,
}

/// One partition's records in a replay: each segment between boundaries
/// ([`crate::stream_replay::segments`]) a page of its own, in order; the
/// first that fails stops the rest (reported at its first unwritten record).
async fn persist_replayed(
    spec: &StreamSpec,
    partition: &str,
    records: &[&StreamRecord],
    replay: &crate::stream_replay::StreamReplay,
    deps: Deps<'_>,
) -> Result<PartitionDone, (String, PersistError)> {
    let mut total = PartitionDone::default();
    for segment in crate::stream_replay::segments(replay, spec.source_name(), partition, records) {
        let done = persist_partition(spec, partition, segment, Some(replay), deps).await?;
        total.written += done.written;
        total.skipped += done.skipped;
        total.quarantined += done.quarantined;
        total.rows += done.rows;
        total.notes.extend(done.notes);
    }
    Ok(total)
}

/// One partition's records: checkpoint, page of the shard's window,
/// checkpoint, and the window closed when it is due (in a `replay`, only
/// where a boundary allows, [`crate::stream_replay`]).
async fn persist_partition(
    spec: &StreamSpec,
    partition: &str,
    records: &[&StreamRecord],
    replay: Option<&crate::stream_replay::StreamReplay>,
    deps: Deps<'_>,
) -> Result<PartitionDone, (String, PersistError)> {
    let first_of_batch = records.first().map(|r| r.sequence.clone()).unwrap_or_default();
    let fail = |at: &str| {
        let at = at.to_string();
        move |err: PersistError| (at, err)
    };
    let source = spec.source_name();
    let key = checkpoint_key(&spec.pipeline, source, partition);
    let read = read_checkpoint(deps.store, &key).await.map_err(fail(&first_of_batch))?;
    let mut checkpoint = read.clone();
    settle_pending(&spec.pipeline, &mut checkpoint, deps.store).await.map_err(fail(&first_of_batch))?;
    let above = |r: &StreamRecord| checkpoint.through.as_deref().is_none_or(|t| sequence_cmp(&r.sequence, t).is_gt());
    // At or below the checkpoint is a redelivery, unless the record
    // arrived after every record in the lake: then the positions went back.
    let newest = checkpoint.newest_arrival;
    let fresh: Vec<&StreamRecord> =
        records.iter().copied().filter(|r| above(r) || newest.is_some_and(|n| r.arrival > n)).collect();
    let skipped = (records.len() - fresh.len()) as u64;
    let mut notes = Vec::new();
    if let Some(reset) = fresh.iter().find(|r| !above(r)) {
        let behind = fresh.iter().filter(|r| !above(r)).count();
        tracing::warn!(
            partition,
            records = behind,
            from = %reset.sequence,
            through = checkpoint.through.as_deref().unwrap_or_default(),
            arrived = %reset.arrival,
            newest_in_lake = ?newest,
            "the shard's positions went back: records at or below the checkpoint arrived after every record in \
             the lake (a topic or stream recreated, or its offsets reset); they are written as new records"
        );
        checkpoint.epoch = Some(reset.arrival.timestamp_millis().to_string());
        notes.push(format!(
            "{partition}: its positions went back ({behind} record(s) from {} at or below the checkpoint {}, arrived \
             {} after every record in the lake): a topic or stream recreated, or its offsets reset; they were \
             written as new records",
            reset.sequence,
            checkpoint.through.as_deref().unwrap_or_default(),
            reset.arrival.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        ));
    }
    if let (Some(pending), Some(first), Some(last)) = (&checkpoint.pending, fresh.first(), fresh.last())
        && pending.first != first.sequence
    {
        if pending.in_flight(Utc::now()) {
            return Err((
                first.sequence.clone(),
                overlapping_batch(partition, pending, &first.sequence, &last.sequence),
            ));
        }
        tracing::warn!(partition, abandoned = %pending.run_id, page = pending.page, from = %pending.first, "an unfinished batch was not retried (retries exhausted or records expired); it went to the on-failure destination");
        drop_abandoned_batch(spec, pending, checkpoint.window.as_ref(), deps.store)
            .await
            .map_err(fail(&first.sequence))?;
        checkpoint.pending = None;
    }
    let may_close =
        replay.is_none_or(|r| fresh.first().is_some_and(|f| r.boundary_before(source, partition, &f.sequence)));
    let token = replay.map(|r| r.token.as_str());
    close_window_if_due(spec, &key, &mut checkpoint, Close { force: false, may_close, token }, deps)
        .await
        .map_err(fail(&first_of_batch))?;
    let (Some(first), Some(last)) = (fresh.first(), fresh.last()) else {
        if skipped > 0 {
            tracing::info!(partition, skipped, "a redelivered batch: every record is in the lake already");
        }
        if checkpoint != read {
            write_checkpoint(deps.store, &key, &checkpoint).await.map_err(fail(&first_of_batch))?;
        }
        return Ok(PartitionDone { skipped, notes, ..PartitionDone::default() });
    };
    let window = checkpoint.window.get_or_insert_with(|| {
        Window::open(source, partition, first, dating_record(&fresh).unwrap_or(first), checkpoint.epoch.as_deref())
    });
    if let Some(replay) = replay {
        // Written with the pending batch, so a retry finds them; a batch
        // given up on leaves its originals replaced (its records are in
        // the on-failure alert, to be put into the stream again).
        window.replaces.extend(fresh.iter().filter_map(|r| replay.original_started_by(source, partition, &r.sequence)));
        window.replaces.sort();
        window.replaces.dedup();
    }
    let (run_id, run_date, page) = (window.run_id.clone(), window.run_date, window.batches);
    checkpoint.pending = Some(PendingBatch {
        run_id: run_id.clone(),
        page,
        first: first.sequence.clone(),
        last: last.sequence.clone(),
        records: fresh.len() as u64,
        last_arrival: last.arrival,
        newest_arrival: fresh.iter().map(|r| r.arrival).max(),
        started_at: Some(Utc::now()),
        failed_at: None,
    });
    write_checkpoint(deps.store, &key, &checkpoint).await.map_err(fail(&first.sequence))?;

    let batch = decode_batch(spec, &fresh).map_err(fail(&first.sequence))?;
    write_poison(spec, &run_id, run_date, page, &batch.poison, deps.store).await.map_err(fail(&first.sequence))?;
    let message = PersistMessage {
        version: V1,
        pipeline: spec.pipeline.clone(),
        run_id: run_id.clone(),
        run_date,
        // The window's count is learnt when it closes ([`close_window`]).
        page: PageRef { index: page, count: page + 1 },
        target: spec.target.clone(),
        payload: Payload::Inline { records: batch.rows },
        fetched_at: DateTime::from_timestamp_millis(last.arrival.timestamp_millis()),
    };
    // The poison records count in the page's receipt: the run's manifest
    // and `tributary status` quarantined them as the poller reports.
    let receipt =
        persist_page_after_poison(message, batch.poison.len() as u64, deps).await.map_err(fail(&first.sequence))?;
    if let Some(key) = &receipt.quarantine_key {
        // Idempotent: a retry of a batch that died after this names the
        // same lines again, to the same positions.
        if let Err(err) = name_positions(key, &batch.positions, deps.store).await {
            tracing::warn!(key, error = %err, "the quarantined records' stream positions were not added");
        }
    }

    settle_pending(&spec.pipeline, &mut checkpoint, deps.store).await.map_err(fail(&first.sequence))?;
    checkpoint.updated_at = Some(Utc::now());
    write_checkpoint(deps.store, &key, &checkpoint).await.map_err(fail(&first.sequence))?;
    // The batch is in the lake and checkpointed: a window that fails to
    // close here is closed by the shard's next batch (or flush), so this
    // batch is not reported failed for it.
    let may_close = replay.is_none_or(|r| r.boundary_after(partition, &last.sequence));
    if let Err(err) =
        close_window_if_due(spec, &key, &mut checkpoint, Close { force: false, may_close, token }, deps).await
    {
        tracing::warn!(partition, run_id = %run_id, error = %err, "the shard's window did not close; its next batch closes it");
    }
    emit_stream_metrics(spec, partition, batch.poison.len() as u64, last.arrival, deps);
    Ok(PartitionDone {
        written: fresh.len() as u64,
        skipped,
        quarantined: receipt.records_quarantined,
        rows: receipt.records_persisted,
        notes,
    })
}

/// What a batch given up on (the event source mapping's retries
/// exhausted, or its records too old: its description is in the on-failure
/// destination) left of page `pending.page` of its window: it died before
/// its receipt, so nothing lists its files, and the shard's next batch
/// takes the same page. Its data parts in the window's run-date folder
/// (one LIST of the page's own file stem) and its quarantine file are
/// deleted, so none of its rows stay in the table and a replay of the
/// on-failure record writes them once. (The next batch rewrites the page's
/// raw copy and stream quarantine file at the same keys.)
async fn drop_abandoned_batch(
    spec: &StreamSpec,
    pending: &PendingBatch,
    window: Option<&Window>,
    store: &dyn ObjectStore,
) -> Result<(), PersistError> {
    let Some(window) = window.filter(|w| w.run_id == pending.run_id) else { return Ok(()) };
    let page = keys::PageKey {
        dataset: &spec.target.dataset,
        run_date: window.run_date,
        pipeline: &spec.pipeline,
        run_id: &pending.run_id,
        page: pending.page,
    };
    let stem = page.data();
    let stem = stem.trim_end_matches(".parquet");
    // The page's parts only: `<stem>.parquet`, `<stem>-001.parquet`…
    let own = |key: &String| key.strip_prefix(stem).is_some_and(|rest| rest.starts_with(['.', '-']));
    let mut doomed: Vec<String> = store.list(stem).await?.into_iter().filter(own).collect();
    doomed.push(page.quarantine());
    for key in doomed {
        match store.delete(&key).await {
            Ok(()) | Err(PortError::NotFound { .. }) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

/// A pending batch whose page receipt exists moves `through` to its last
/// sequence number and joins the shard's window (its rows are in the
/// lake: a crash came between the receipt and the checkpoint). The
/// receipt is this page's, whatever attempt wrote it: an earlier, longer
/// attempt's receipt covers the records the pending batch names, since the
/// pending batch is only ever rewritten before its page is.
async fn settle_pending(
    pipeline: &str,
    checkpoint: &mut Checkpoint,
    store: &dyn ObjectStore,
) -> Result<(), PersistError> {
    let Some(pending) = checkpoint.pending.clone() else { return Ok(()) };
    let key = keys::receipt_key(pipeline, &pending.run_id, pending.page);
    let receipt = match store.get(&key).await {
        Ok(bytes) => bytes,
        Err(PortError::NotFound { .. }) => return Ok(()),
        Err(err) => return Err(err.into()),
    };
    let receipt: PageReceipt = serde_json::from_slice(&receipt)
        .map_err(|err| PersistError::Stream { field: key.clone(), problem: format!("unreadable receipt: {err}") })?;
    // Known only when every batch of the shard recorded it.
    let known = checkpoint.through.is_none() || checkpoint.newest_arrival.is_some();
    checkpoint.newest_arrival = match (known, pending.newest_arrival) {
        (true, Some(newest)) => Some(checkpoint.newest_arrival.map_or(newest, |n| n.max(newest))),
        _ => None,
    };
    checkpoint.through = Some(pending.last.clone());
    checkpoint.records += pending.records;
    checkpoint.last_arrival = Some(pending.last_arrival);
    checkpoint.pending = None;
    match &mut checkpoint.window {
        Some(window) if window.run_id == pending.run_id => {
            window.batches = window.batches.max(pending.page + 1);
            window.bytes += receipt.data_bytes;
            window.records += pending.records;
            window.newest = window.newest.max(pending.last_arrival);
        }
        // A checkpoint written before windows: its one-page run is a
        // window of one batch.
        _ => {
            checkpoint.window = Some(Window {
                run_id: pending.run_id.clone(),
                run_date: receipt.run_date,
                first: pending.first.clone(),
                batches: pending.page + 1,
                bytes: receipt.data_bytes,
                records: pending.records,
                opened: pending.last_arrival,
                newest: pending.last_arrival,
                closing: false,
                replaces: Vec::new(),
            })
        }
    }
    Ok(())
}

/// When [`close_window_if_due`] may close a window.
#[derive(Clone, Copy)]
struct Close<'a> {
    /// Close whatever the rule says (the local poller at the end of a run).
    force: bool,
    /// The rule may close it here (in a replay: at a boundary only).
    may_close: bool,
    /// The replay's token, in a replay.
    token: Option<&'a str>,
}

/// Closes the shard's window when it is due ([`Window::is_due`]) and
/// `close.may_close`, is closing already (an attempt died part-way), or
/// `close.force` says so (the local poller at the end of a run); never
/// while a batch is pending (its page belongs to the window). Writes the
/// checkpoint when it closes.
async fn close_window_if_due(
    spec: &StreamSpec,
    key: &str,
    checkpoint: &mut Checkpoint,
    close: Close<'_>,
    deps: Deps<'_>,
) -> Result<bool, PersistError> {
    if checkpoint.pending.is_some() {
        return Ok(false);
    }
    let Some(window) = checkpoint.window.as_mut() else { return Ok(false) };
    if !(window.closing || close.force || (close.may_close && window.is_due(&spec.window))) {
        return Ok(false);
    }
    if window.batches > 0 {
        if !window.closing {
            // From here on no batch joins this window, whatever instant
            // the close dies at: the count is fixed.
            window.closing = true;
            write_checkpoint(deps.store, key, checkpoint).await?;
        }
        if let Some(window) = &checkpoint.window {
            close_window(spec, window, close.token, deps).await?;
        }
    }
    checkpoint.window = None;
    write_checkpoint(deps.store, key, checkpoint).await?;
    Ok(true)
}

/// A window's run completed: its count recorded, then the ledger's
/// completion with Persist's coalescer, as a REST run's last page does:
/// a Parquet dataset's batch files of each partition coalesced into one
/// file ([`crate::coalesce`], its replacement record making every step
/// resumable), an Iceberg dataset's committed in one snapshot. Idempotent.
///
/// # Errors
/// Store, coalescer and committer failures; a batch receipt missing
/// ([`PersistError::Stream`] naming the run).
///
/// In a replay (`token`), a window holding original windows
/// ([`Window::replaces`]) commits as their replacement
/// ([`crate::coalesce::ReplayCommit`]).
async fn close_window(
    spec: &StreamSpec,
    window: &Window,
    token: Option<&str>,
    deps: Deps<'_>,
) -> Result<(), PersistError> {
    let expected = Expected {
        pipeline: spec.pipeline.clone(),
        run_id: window.run_id.clone(),
        run_date: window.run_date,
        pages: u64::from(window.batches),
        truncated: None,
        records: None,
    };
    tributary_core::ledger::write_record(deps.store, &keys::expected_key(&spec.pipeline, &window.run_id), &expected)
        .await?;
    let coalescer = crate::coalesce::RunCoalescer {
        store: deps.store,
        table_format: spec.target.table_format,
        tables: deps.tables,
        write: tributary_core::tables::RunWrite::of(&spec.target),
        bin_bytes: crate::coalesce::COALESCE_BELOW_BYTES,
        replay: token
            .map(|token| crate::coalesce::ReplayCommit { token: token.to_string(), replaces: window.replaces.clone() }),
    };
    let ledger = tributary_core::ledger::RunLedger { store: deps.store, events: deps.run_events };
    match ledger.complete_with(&spec.pipeline, &window.run_id, &coalescer).await? {
        Completion::NotYet => Err(PersistError::Stream {
            field: keys::receipts_prefix(&spec.pipeline, &window.run_id),
            problem: format!("the window's {} batch receipts are not all there", window.batches),
        }),
        _ => {
            tracing::info!(run_id = %window.run_id, batches = window.batches, bytes = window.bytes, records = window.records, "the shard's window closed");
            Ok(())
        }
    }
}

/// Closes each of `partitions`' open window of `spec`'s stream whatever
/// its size (the local poller, once every shard is read to its tip): the
/// tail of the stream coalesced, or committed to its Iceberg table. A
/// shard with a batch pending (given up on, or in flight) keeps its
/// window. Returns the windows closed.
///
/// # Errors
/// [`PersistError`] from the store, the coalescer or the committer; the
/// window stays closing and the next batch or flush finishes it.
pub async fn close_windows(spec: &StreamSpec, partitions: &[String], deps: Deps<'_>) -> Result<u32, PersistError> {
    let replay = crate::stream_replay::read_replay(spec, deps.store).await?;
    let close = Close { force: true, may_close: true, token: replay.as_ref().map(|r| r.token.as_str()) };
    let mut closed = 0;
    for partition in partitions {
        let key = checkpoint_key(&spec.pipeline, spec.source_name(), partition);
        let mut checkpoint = read_checkpoint(deps.store, &key).await?;
        settle_pending(&spec.pipeline, &mut checkpoint, deps.store).await?;
        if checkpoint.window.is_some() && close_window_if_due(spec, &key, &mut checkpoint, close, deps).await? {
            closed += 1;
        }
    }
    Ok(closed)
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
    /// Per row of `rows`, its record's partition and sequence (a record
    /// with a `records_pointer` array gives several rows).
    positions: Vec<(String, String)>,
}

/// Each record's data: gunzipped (per `records.compression`), UTF-8 JSON,
/// one row or the array at `records.records_pointer`; anything else is
/// poison with the reason.
fn decode_batch(spec: &StreamSpec, records: &[&StreamRecord]) -> Result<DecodedBatch, PersistError> {
    let mut text = String::from("[");
    let mut poison = Vec::new();
    let mut positions = Vec::new();
    for (index, record) in records.iter().enumerate() {
        match decode_record(spec, record) {
            Ok(rows) => {
                for row in rows {
                    if text.len() > 1 {
                        text.push(',');
                    }
                    text.push_str(&row);
                    positions.push((record.partition.clone(), record.sequence.clone()));
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
    Ok(DecodedBatch { rows, poison, positions })
}

/// Names each record the converter quarantined from a stream batch by its
/// position in the stream: the quarantine file at `key` (lines
/// `{"index":N,"reason":"record N: …","record":…}`, `N` the row in the
/// batch) gets `partition` and `sequence` fields, and its reasons say
/// `record <sequence> (<partition>)` where they said `record N`, as the
/// poison records' do, so an
/// operator can find the record in the stream. The record's text is kept
/// as it is; a line that is not of that shape is left alone.
async fn name_positions(
    key: &str,
    positions: &[(String, String)],
    store: &dyn ObjectStore,
) -> Result<(), PersistError> {
    #[derive(serde::Deserialize)]
    struct Line<'a> {
        index: usize,
        reason: String,
        #[serde(borrow)]
        record: &'a serde_json::value::RawValue,
    }
    let bytes = store.get(key).await?;
    let text = String::from_utf8_lossy(&bytes);
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.lines() {
        match serde_json::from_str::<Line<'_>>(line) {
            Ok(parsed) if parsed.index < positions.len() => {
                let (partition, sequence) = &positions[parsed.index];
                // `record N: …` and `record N is …` name the row.
                let reason = match parsed.reason.strip_prefix(&format!("record {}", parsed.index)) {
                    Some(rest) if rest.starts_with([':', ' ']) => format!("record {sequence} ({partition}){rest}"),
                    _ => parsed.reason.clone(),
                };
                let head = serde_json::json!({"index": parsed.index, "partition": partition, "sequence": sequence, "reason": reason});
                let head = head.to_string();
                out.push_str(&head[..head.len() - 1]);
                out.push_str(",\"record\":");
                out.push_str(parsed.record.get());
                out.push('}');
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    store.put(key, bytes::Bytes::from(out)).await?;
    Ok(())
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
    // A UTF-8 byte order mark (some Windows producers write one) is not
    // part of the JSON text, as in a page (`source::Framer`).
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    match &spec.records.records_pointer {
        None => {
            let raw: Box<serde_json::value::RawValue> =
                serde_json::from_str(text).map_err(|err| format!("not JSON: {err}"))?;
            Ok(vec![raw.get().to_string()])
        }
        Some(pointer) => items_at(text, pointer),
    }
}

/// The items of the array at RFC 6901 `pointer` in the JSON `text`, each
/// as its text exactly as sent (navigated as raw JSON: a `Value` would
/// have turned an integer beyond 64 bits into a float).
fn items_at(text: &str, pointer: &str) -> Result<Vec<String>, String> {
    use serde_json::value::RawValue;
    let not_in = || format!("records.records_pointer {pointer} is not in the record");
    let mut here: Box<RawValue> = serde_json::from_str(text).map_err(|err| format!("not JSON: {err}"))?;
    for token in pointer.split('/').skip(1).map(|t| t.replace("~1", "/").replace("~0", "~")) {
        let next = match here.get().trim_start().as_bytes().first() {
            Some(b'{') => serde_json::from_str::<std::collections::HashMap<String, Box<RawValue>>>(here.get())
                .ok()
                .and_then(|mut object| object.remove(&token)),
            Some(b'[') => serde_json::from_str::<Vec<Box<RawValue>>>(here.get()).ok().and_then(|mut items| {
                token.parse::<usize>().ok().filter(|i| *i < items.len()).map(|i| items.swap_remove(i))
            }),
            _ => None,
        };
        here = next.ok_or_else(not_in)?;
    }
    serde_json::from_str::<Vec<Box<RawValue>>>(here.get())
        .map(|items| items.iter().map(|item| item.get().to_string()).collect())
        .map_err(|_| format!("records.records_pointer {pointer} is not an array here"))
}

/// Key of a batch's poison records: beside Persist's quarantine file.
pub fn poison_key(dataset: &str, run_date: NaiveDate, pipeline: &str, run_id: &RunId, page: u32) -> String {
    format!(
        "quarantine/{}/{}-stream.jsonl",
        keys::data_prefix(dataset, run_date),
        keys::page_stem(pipeline, run_id, page)
    )
}

async fn write_poison(
    spec: &StreamSpec,
    run_id: &RunId,
    run_date: NaiveDate,
    page: u32,
    poison: &[(u64, String, String)],
    store: &dyn ObjectStore,
) -> Result<(), PersistError> {
    let key = poison_key(&spec.target.dataset, run_date, &spec.pipeline, run_id, page);
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

/// EMF, per shard: the batch's poison records and the iterator age
/// (milliseconds from the batch's last record reaching the stream to now,
/// the event source mapping's `IteratorAge` as the function sees it). The
/// records written (and those the converter quarantined) are the page's
/// own line, from [`persist_page_after_poison`]: counting them here too
/// doubled `records_persisted`.
fn emit_stream_metrics(spec: &StreamSpec, partition: &str, poison: u64, last: DateTime<Utc>, deps: Deps<'_>) {
    let age_ms = (Utc::now() - last).num_milliseconds().max(0) as f64;
    let mut emf = Metrics::new("persist", &spec.pipeline);
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

#[cfg(test)]
mod tests {
    use super::{StreamRecord, decode_record, items_at};

    #[test]
    fn a_record_with_a_byte_order_mark_is_its_json() {
        let spec = contracts::stream::StreamSpec::from_yaml(
            "version: 1\npipeline: orders\nsource: { kind: kafka, topic: orders }\ntarget: { dataset: orders }\n",
        )
        .expect("spec");
        let record = |data: &[u8]| StreamRecord {
            partition: "orders-0".into(),
            sequence: "7".into(),
            data: Some(data.to_vec()),
            arrival: chrono::DateTime::UNIX_EPOCH,
        };
        let with_bom = [&[0xEF, 0xBB, 0xBF][..], br#"{"id": 1}"#].concat();
        assert_eq!(decode_record(&spec, &record(&with_bom)).expect("JSON"), [r#"{"id": 1}"#]);
        // A mark anywhere else is not skipped.
        let inside = [&br#"{"id": 1}"#[..], &[0xEF, 0xBB, 0xBF][..]].concat();
        assert!(decode_record(&spec, &record(&inside)).expect_err("not JSON").starts_with("not JSON"));
    }

    #[test]
    fn items_at_a_pointer_keep_their_text_as_sent() {
        // An integer beyond 64 bits, a float's digits, an escaped key.
        let text = r#"{"data": {"a/b": [{"id": 123456789012345678901234, "x": 1.50}, {"id": 2}]}, "n": [[{"k": 1}]]}"#;
        assert_eq!(
            items_at(text, "/data/a~1b").expect("items"),
            [r#"{"id": 123456789012345678901234, "x": 1.50}"#, r#"{"id": 2}"#]
        );
        assert_eq!(items_at(text, "/n/0").expect("items"), [r#"{"k": 1}"#]);
        assert_eq!(
            items_at(text, "/data/missing").expect_err("missing"),
            "records.records_pointer /data/missing is not in the record"
        );
        assert_eq!(
            items_at(text, "/n/5").expect_err("out of range"),
            "records.records_pointer /n/5 is not in the record"
        );
        assert_eq!(items_at(text, "/data").expect_err("object"), "records.records_pointer /data is not an array here");
        assert!(items_at("{", "/x").expect_err("not JSON").starts_with("not JSON"));
    }
}
