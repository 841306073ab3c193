//! The local runtime's stream poller: what a Lambda event source mapping
//! does for a Kinesis stream or a Kafka topic, on one machine, handing each
//! batch to Persist's stream handler ([`persist::stream`]).
//!
//! Per shard (shards in parallel, each shard one batch at a time, as the
//! mapping with `ParallelizationFactor` 1):
//! 1. start where the shard's checkpoint in the lake says (the record after
//!    `through`, or the unfinished batch's first record), else at the spec's
//!    `starting_position`;
//! 2. gather a batch: up to `batching.batch_size` records, reading on for up
//!    to `batching.batch_window_secs` while the shard has more
//!    (`MaximumBatchingWindowInSeconds`);
//! 3. hand it over; a reported failure (`batchItemFailures`) is retried from
//!    the failed record, bisected when `batching.bisect_on_error` is on
//!    (`BisectBatchOnFunctionError`), up to `batching.maximum_retry_attempts`
//!    (`MaximumRetryAttempts`); a batch past them is recorded for the
//!    on-failure destination (`_streams/<pipeline>/<stream>/failed/`, in the
//!    shape of Lambda's on-failure record for a stream) and skipped, as the
//!    mapping does;
//! 4. go on from the read's continuation, until the shard is read to its
//!    tip (`--follow` keeps polling: a file of records is then followed,
//!    its appended lines read, [`adapters::local::FileStream::following`]).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use contracts::stream::{StartingPosition, StreamSource, StreamSpec};
use persist::Deps;
use persist::stream::{checkpoint_key, persist_stream_batch, read_checkpoint};
use serde_json::json;
use tributary_core::ports::{ObjectStore, PortError};
use tributary_core::streams::{StreamPosition, StreamReader, StreamRecord};

/// How long a caught-up shard waits before reading again (`--follow`): the
/// event source mapping polls each shard about once a second (Lambda
/// developer guide, "How Lambda processes records from Kinesis").
pub const IDLE_POLL: Duration = Duration::from_millis(1_000);

/// How the poller stops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollOptions {
    /// Keep polling a caught-up shard (`tributary run --follow`); otherwise
    /// stop each shard at its tip.
    pub follow: bool,
    /// Stop each shard after this many batches (a consumer that dies
    /// mid-stream, in tests; `None`: no limit).
    pub max_batches_per_shard: Option<u64>,
}

/// What a poll did, per shard and in all.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PollReport {
    /// Per shard (or topic-partition).
    pub shards: BTreeMap<String, ShardReport>,
    /// Shards' windows closed at the end of the poll (the stream's tail
    /// coalesced or committed; `docs/streams.md`, "Small files").
    pub windows_closed: u32,
    /// The alerts raised for batches given up on (their reasons: which
    /// records, why; the whole alerts are in `_alerts.jsonl`).
    pub alerts: Vec<String>,
    /// What the run should say beyond its counts, not of one shard (the
    /// lake's copy of the stream's spec taken over from another pipeline).
    pub notes: Vec<String>,
    /// Why closing the shards' windows at the end failed, if it did:
    /// [`run_local`] alerts the batches given up on first, then fails
    /// with it.
    pub close_failed: Option<String>,
}

/// What a poll did on one shard.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShardReport {
    /// Batches handed over (retries and halves included).
    pub invocations: u64,
    /// Records written (rows and poison quarantined: the report's line
    /// shows them apart, as "14 records written, 2 quarantined").
    pub records_written: u64,
    /// Records skipped as in the lake already (redeliveries).
    pub records_skipped: u64,
    /// Of `records_written`, quarantined: poison records and those the
    /// converter set aside (not an object, ...).
    pub records_quarantined: u64,
    /// Rows persisted: the records not quarantined, or with
    /// `records.records_pointer` the items of their arrays.
    pub rows_persisted: u64,
    /// Batches retried after a failure.
    pub retries: u64,
    /// Batches split in two.
    pub bisections: u64,
    /// Batches given up on (sent to the on-failure record).
    pub on_failure: u64,
    /// The on-failure records written for them: an id naming the batch
    /// (`<pipeline>-<shard>-<first sequence>`, the dead letter's message
    /// id) and the record (Lambda's shape, with `tributaryCause`), for
    /// Notify's alert, which [`run_local`] raises.
    pub given_up: Vec<(String, String)>,
    /// What Persist said worth knowing beyond the counts
    /// ([`persist::stream::StreamOutcome::notes`]: the shard's positions
    /// went back), printed by `tributary run`.
    pub notes: Vec<String>,
    /// Milliseconds behind the shard's tip at the last read (Kinesis
    /// `MillisBehindLatest`), when the source says.
    pub millis_behind_latest: Option<u64>,
    /// Records of the shard after the last one handed over, at the last
    /// read ([`RECORDS_BEHIND`]), when the source can count them (a file
    /// of records; `None` for Kinesis).
    pub records_behind: Option<u64>,
    /// Time spent on the shard.
    pub elapsed: Duration,
}

impl PollReport {
    /// Records written over every shard.
    pub fn records_written(&self) -> u64 {
        self.shards.values().map(|s| s.records_written).sum()
    }

    /// Records quarantined over every shard, poison and the converter's
    /// (counted in [`PollReport::records_written`] too).
    pub fn records_quarantined(&self) -> u64 {
        self.shards.values().map(|s| s.records_quarantined).sum()
    }

    /// Rows persisted over every shard.
    pub fn rows_persisted(&self) -> u64 {
        self.shards.values().map(|s| s.rows_persisted).sum()
    }

    /// Batches given up on over every shard.
    pub fn on_failure(&self) -> u64 {
        self.shards.values().map(|s| s.on_failure).sum()
    }
}

/// Polls every shard of `spec`'s stream through `reader` into the lake
/// behind `deps`, as an event source mapping would; once every shard is
/// at its tip (no `max_batches_per_shard`), closes each shard's open
/// window ([`persist::stream::close_windows`]).
///
/// # Errors
/// [`PortError`] when the shards cannot be listed, or a shard cannot be
/// read or its checkpoint written (a failing batch is not an error: it is
/// retried, then recorded for the on-failure destination).
pub async fn poll(
    spec: &StreamSpec,
    reader: &dyn StreamReader,
    deps: Deps<'_>,
    options: PollOptions,
) -> Result<PollReport, PortError> {
    let shards = reader.partitions(spec.source_name()).await?;
    let polls = shards.iter().map(|shard| poll_shard(spec, reader, deps, shard, options));
    let mut report = PollReport::default();
    for (shard, result) in shards.iter().zip(futures::future::join_all(polls).await) {
        report.shards.insert(shard.clone(), result?);
    }
    if options.max_batches_per_shard.is_none() {
        // Every shard is at its tip: the tail of each shard's window is
        // coalesced (Parquet) or committed (Iceberg) now rather than when
        // its next batch comes, which on one machine may be never.
        match persist::stream::close_windows(spec, &shards, deps).await {
            Ok(closed) => report.windows_closed = closed,
            // The batches given up on are alerted before this fails the run.
            Err(err) => report.close_failed = Some(err.to_string()),
        }
    }
    Ok(report)
}

/// Where a shard starts: after its checkpoint, at its unfinished batch, or
/// at the spec's starting position.
async fn start_position(
    spec: &StreamSpec,
    reader: &dyn StreamReader,
    shard: &str,
    deps: Deps<'_>,
) -> Result<StreamPosition, PortError> {
    let key = checkpoint_key(&spec.pipeline, spec.source_name(), shard);
    let checkpoint = read_checkpoint(deps.store, &key)
        .await
        .map_err(|err| PortError::permanent_msg("read checkpoint", &key, err.to_string()))?;
    Ok(match (checkpoint.pending, checkpoint.through) {
        (Some(pending), _) => StreamPosition::AtSequence(pending.first),
        // A Kafka topic deleted and created again starts its offsets at 0:
        // reading after `through` would never see its records (Persist
        // takes them, `persist::stream`, but only if they are delivered).
        (None, Some(through)) => match (&spec.source, checkpoint.newest_arrival) {
            (StreamSource::Kafka(_), Some(newest)) => reset_position(spec, reader, shard, &through, newest)
                .await?
                .unwrap_or(StreamPosition::AfterSequence(through)),
            _ => StreamPosition::AfterSequence(through),
        },
        (None, None) => {
            let (position, at) = match &spec.source {
                StreamSource::Kinesis(k) => (k.starting_position, k.starting_timestamp),
                StreamSource::Kafka(k) => (k.starting_position, k.starting_timestamp),
                other => {
                    return Err(PortError::permanent_msg(
                        "poll",
                        spec.source_name(),
                        format!("no poller for {other:?}"),
                    ));
                }
            };
            match (position, at) {
                (StartingPosition::Latest, _) => StreamPosition::Latest,
                (StartingPosition::AtTimestamp, Some(at)) => StreamPosition::AtTimestamp(at),
                _ => StreamPosition::TrimHorizon,
            }
        }
    })
}

/// Where a Kafka shard holds a record at or below the checkpoint's
/// `through` that arrived after every record in the lake (`newest`): its
/// offsets went back (the topic recreated, or reset). The read that holds
/// the first such record, from the shard's start; `None` when the shard
/// passes `through` (or ends) first. One scan of what the shard holds up
/// to `through`: a file of records, read from memory.
async fn reset_position(
    spec: &StreamSpec,
    reader: &dyn StreamReader,
    shard: &str,
    through: &str,
    newest: chrono::DateTime<chrono::Utc>,
) -> Result<Option<StreamPosition>, PortError> {
    const SCAN: u32 = 1_000;
    let mut position = StreamPosition::TrimHorizon;
    loop {
        let read = reader.read(spec.source_name(), shard, &position, SCAN).await?;
        for record in &read.records {
            if persist::stream::sequence_cmp(&record.sequence, through).is_gt() {
                return Ok(None);
            }
            if record.arrival > newest {
                return Ok(Some(position));
            }
        }
        match read.next {
            Some(next) if !read.records.is_empty() => position = StreamPosition::Continue(next),
            _ => return Ok(None),
        }
    }
}

async fn poll_shard(
    spec: &StreamSpec,
    reader: &dyn StreamReader,
    deps: Deps<'_>,
    shard: &str,
    options: PollOptions,
) -> Result<ShardReport, PortError> {
    let started = Instant::now();
    let mut report = ShardReport::default();
    let mut position = start_position(spec, reader, shard, deps).await?;
    let mut batches = 0u64;
    loop {
        if options.max_batches_per_shard.is_some_and(|max| batches >= max) {
            break;
        }
        let (records, next, behind) = gather(spec, reader, shard, &position).await?;
        report.millis_behind_latest = behind.millis;
        report.records_behind = behind.records;
        if records.is_empty() {
            match next {
                Some(next) if options.follow => {
                    position = StreamPosition::Continue(next);
                    tokio::time::sleep(IDLE_POLL).await;
                    continue;
                }
                Some(next) if behind.millis != Some(0) => {
                    // An empty read short of the tip (a trimmed stretch): read on.
                    position = StreamPosition::Continue(next);
                    continue;
                }
                _ => {
                    emit_records_behind(spec, shard, &report, deps).await;
                    break;
                }
            }
        }
        batches += 1;
        deliver(spec, records, deps, &mut report).await?;
        emit_records_behind(spec, shard, &report, deps).await;
        match next {
            Some(next) => position = StreamPosition::Continue(next),
            None => break,
        }
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// How far behind its shard's tip a read ended.
#[derive(Clone, Copy, Debug)]
struct Behind {
    /// Kinesis `MillisBehindLatest`.
    millis: Option<u64>,
    /// Records after the read's last one (a file of records).
    records: Option<u64>,
}

/// Up to `batch_size` records from `position`, reading on within the batch
/// window while the shard has more; the continuation and lag of the last
/// read.
async fn gather(
    spec: &StreamSpec,
    reader: &dyn StreamReader,
    shard: &str,
    position: &StreamPosition,
) -> Result<(Vec<StreamRecord>, Option<String>, Behind), PortError> {
    let size = spec.batching.batch_size;
    let window = Duration::from_secs(u64::from(spec.batching.batch_window_secs));
    let opened = Instant::now();
    let mut read = reader.read(spec.source_name(), shard, position, size).await?;
    let mut records = std::mem::take(&mut read.records);
    while records.len() < size as usize && !window.is_zero() && opened.elapsed() < window {
        let Some(next) = read.next.clone() else { break };
        let more = size - records.len() as u32;
        read = reader.read(spec.source_name(), shard, &StreamPosition::Continue(next), more).await?;
        if read.records.is_empty() && read.millis_behind_latest == Some(0) {
            tokio::time::sleep(Duration::from_millis(200).min(window)).await;
        }
        records.append(&mut read.records);
    }
    Ok((records, read.next, Behind { millis: read.millis_behind_latest, records: read.records_behind }))
}

/// Hands a batch over with the event source mapping's retry semantics.
async fn deliver(
    spec: &StreamSpec,
    records: Vec<StreamRecord>,
    deps: Deps<'_>,
    report: &mut ShardReport,
) -> Result<(), PortError> {
    let mut queue = VecDeque::from([records]);
    let mut attempts = 0u32;
    while let Some(batch) = queue.pop_front() {
        report.invocations += 1;
        let outcome = persist_stream_batch(spec, &batch, deps).await;
        report.records_written += outcome.records_written;
        report.records_skipped += outcome.records_skipped;
        report.records_quarantined += outcome.records_quarantined;
        report.rows_persisted += outcome.rows_persisted;
        report.notes.extend(outcome.notes.iter().cloned());
        let Some((_, failed_at)) = outcome.failures.first() else { continue };
        let reason = outcome.failure_reason.clone().unwrap_or_default();
        // Checkpoint before the failed record; retry from it.
        let rest: Vec<StreamRecord> = batch.into_iter().skip_while(|r| r.sequence != *failed_at).collect();
        attempts += 1;
        if attempts > spec.batching.maximum_retry_attempts {
            report.on_failure += 1;
            report.given_up.push(record_on_failure(spec, &rest, attempts, &reason, deps).await?);
            continue;
        }
        report.retries += 1;
        if spec.batching.bisect_on_error && rest.len() > 1 {
            report.bisections += 1;
            let mut first = rest;
            let second = first.split_off(first.len() / 2);
            queue.push_front(second);
            queue.push_front(first);
        } else {
            queue.push_front(rest);
        }
    }
    Ok(())
}

/// The on-failure record of a batch given up on, in the shape of Lambda's
/// on-failure destination record for a stream (`KinesisBatchInfo` or
/// `KafkaBatchInfo`, as Notify reads it: `notify::stream`), with the cause
/// Persist gave as `tributaryCause` (Lambda's record has none; locally it
/// is known): written to `_streams/<pipeline>/<stream>/failed/`. Returns
/// the batch's id and the record's text.
async fn record_on_failure(
    spec: &StreamSpec,
    records: &[StreamRecord],
    attempts: u32,
    reason: &str,
    deps: Deps<'_>,
) -> Result<(String, String), PortError> {
    let (Some(first), Some(last)) = (records.first(), records.last()) else { return Ok(Default::default()) };
    let key =
        format!("_streams/{}/{}/failed/{}-{}.json", spec.pipeline, spec.source_name(), first.partition, first.sequence);
    // Kafka's `recordsInfo` key is `<topic>-<partition>`, which the
    // local shard name already is (`orders-0`).
    let topic_partition = match first.partition.strip_prefix(spec.source_name()) {
        Some(rest) if rest.starts_with('-') => first.partition.clone(),
        _ => format!("{}-{}", spec.source_name(), first.partition),
    };
    let info = match &spec.source {
        StreamSource::Kafka(_) => json!({ "KafkaBatchInfo": {
            "batchSize": records.len(),
            "eventSourceArn": spec.source_name(),
            "recordsInfo": { topic_partition: {
                "firstRecordOffset": first.sequence,
                "lastRecordOffset": last.sequence,
                "firstRecordTimestamp": first.arrival,
                "lastRecordTimestamp": last.arrival,
            }},
        }}),
        _ => json!({ "KinesisBatchInfo": {
            "shardId": first.partition,
            "startSequenceNumber": first.sequence,
            "endSequenceNumber": last.sequence,
            "approximateArrivalOfFirstRecord": first.arrival,
            "approximateArrivalOfLastRecord": last.arrival,
            "batchSize": records.len(),
            "streamArn": spec.source_name(),
        }}),
    };
    let mut body = json!({
        "requestContext": { "condition": "RetryAttemptsExhausted", "approximateInvokeCount": attempts },
        "tributaryCause": reason,
    });
    if let (Some(body), Some(info)) = (body.as_object_mut(), info.as_object()) {
        body.extend(info.clone());
    }
    tracing::error!(key, shard = %first.partition, from = %first.sequence, to = %last.sequence, reason, "a stream batch failed past its retries; recorded for the on-failure destination");
    let text = body.to_string();
    deps.store.put(&key, Bytes::from(text.clone())).await?;
    Ok((format!("{}-{}-{}", spec.pipeline, first.partition, first.sequence), text))
}

/// What Notify does on AWS with the on-failure destination's records and
/// the run-events topic's, done here: each batch given up on is archived
/// as a dead letter (`tributary dlq list`) and alerted (which records were
/// dropped, why, and how to read them again); each completed window that
/// changed its dataset's columns (`events`, the `schema-changes`
/// subscription's messages) is alerted under `target.on_schema_change`
/// `alert` and `freeze`, once per window. The alerts go to
/// `<lake>/_alerts.jsonl`. Returns their reasons (a schema alert's: its
/// summary).
async fn alert(
    report: &PollReport,
    events: Vec<aws_lambda_events::event::sqs::SqsMessage>,
    store: &dyn ObjectStore,
    lake: &std::path::Path,
) -> Vec<String> {
    let bodies: Vec<&(String, String)> =
        report.shards.values().flat_map(|s| &s.given_up).filter(|(_, body)| !body.is_empty()).collect();
    if bodies.is_empty() && events.is_empty() {
        return Vec::new();
    }
    let broker = adapters::local::Broker::new();
    broker.create_topic(
        tributary_core::topology::ALERTS_TOPIC,
        vec![adapters::local::Subscription::File { path: crate::runtime::alerts_file(lake) }],
    );
    let before = crate::runtime::read_alerts(lake).len();
    let records = bodies
        .iter()
        .map(|(id, body)| {
            let mut message = aws_lambda_events::event::sqs::SqsMessage::default();
            message.message_id = Some(id.clone());
            message.body = Some(body.clone());
            message.event_source_arn = Some("arn:aws:sqs:local:000000000000:stream-failures".into());
            message
        })
        .chain(events)
        .collect();
    let mut event = aws_lambda_events::event::sqs::SqsEvent::default();
    event.records = records;
    let config = crate::runtime::notify_config(lake);
    let deps = notify::Deps { topics: &broker, config: &config, store: Some(store) };
    let response = notify::handle_sqs(&event, deps).await;
    if !response.batch_item_failures.is_empty() {
        tracing::error!(failed = response.batch_item_failures.len(), "could not alert every batch given up on");
    }
    crate::runtime::read_alerts(lake)
        .into_iter()
        .skip(before)
        .map(|alert| match alert.function.as_str() {
            notify::stream::STREAM_FUNCTION => alert.reason.unwrap_or(alert.summary),
            _ => alert.summary,
        })
        .collect()
}

/// Why a Kafka spec cannot run without `--records`.
const KAFKA_NEEDS_RECORDS: &str = "a Kafka topic is read locally from a file of records: add --records FILE (JSON lines in the MSK event's record shape)";

/// Where a local stream run reads from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocalSource {
    /// The spec's Kinesis stream through the AWS SDK (the usual AWS
    /// environment; `AWS_ENDPOINT_URL` for moto). Needs feature `aws`.
    Kinesis,
    /// A JSON-lines file of Kafka records ([`adapters::local::FileStream`]).
    File(std::path::PathBuf),
}

/// Why a local stream run could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamRunError {
    /// The spec could not be read or is invalid.
    #[error("{path}: {source}")]
    Spec {
        /// The spec file.
        path: std::path::PathBuf,
        /// Why.
        source: contracts::spec::SpecError,
    },
    /// The spec file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The spec file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The source cannot be read in this build or with these options.
    #[error("{0}")]
    Source(String),
    /// The lake or the stream failed.
    #[error(transparent)]
    Port(#[from] PortError),
    /// Another `tributary run` of the stream is polling it in this lake
    /// ([`crate::lease`]).
    #[error(transparent)]
    InFlight(#[from] crate::lease::InFlight),
}

/// Persist's stream code shared with the local runtime
/// ([`persist::stream_replay`]): a lake failure stays a lake failure
/// ([`StreamRunError::Port`], retryable or not as the store said); any other
/// refusal is told as Persist words it.
impl From<persist::PersistError> for StreamRunError {
    fn from(err: persist::PersistError) -> Self {
        match err {
            persist::PersistError::Store(err) => StreamRunError::Port(err),
            other => StreamRunError::Source(other.to_string()),
        }
    }
}

/// Reads a stream spec file.
///
/// # Errors
/// [`StreamRunError::Read`], [`StreamRunError::Spec`] naming the field.
pub fn load_stream_spec(path: &std::path::Path) -> Result<StreamSpec, StreamRunError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| StreamRunError::Read { path: path.to_path_buf(), source })?;
    StreamSpec::from_yaml(&text).map_err(|source| StreamRunError::Spec { path: path.to_path_buf(), source })
}

/// Whether the spec file at `path` is a stream spec (it has `source:`).
pub fn is_stream_spec(path: &std::path::Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| StreamSpec::is_stream_document(&text))
}

/// `tributary run` of a stream spec: polls the stream into the lake
/// directory `lake` (Persist with the lake's local catalog and Iceberg
/// committer), to each shard's tip, or on (`options.follow`).
///
/// With `from_trim_horizon` (a Kappa replay, `tributary run
/// --from-trim-horizon`): the pipeline's checkpoints are removed first so
/// every shard is read again from the oldest record retained, through the
/// same code; batches of the same bounds get the same run ids and keys,
/// so their files are rewritten in place (see `docs/streams.md`). An
/// Iceberg dataset's replay lands in one snapshot ([`crate::kappa`]).
///
/// # Errors
/// [`StreamRunError`]: the source is not readable in this build (Kinesis
/// without feature `aws`, Kafka without a records file), a file of records
/// refused ([`adapters::local::FileStream::records`], naming the line: the
/// whole file is checked before anything is written), the lake or the
/// stream failed; an Iceberg replay that cannot be whole (see
/// [`crate::kappa::Replay`]); [`StreamRunError::InFlight`] while another
/// process polls the same stream into the same lake.
pub async fn run_local(
    spec: &StreamSpec,
    lake: &std::path::Path,
    source: &LocalSource,
    options: PollOptions,
    from_trim_horizon: bool,
) -> Result<PollReport, StreamRunError> {
    if let (LocalSource::File(path), StreamSource::Kinesis(_)) = (source, &spec.source) {
        return Err(StreamRunError::Source(format!(
            "--records {} reads a Kafka topic from a file of records (the MSK event's record shape); pipeline {}'s \
             source is a Kinesis stream, read from Kinesis itself (a build with --features aws)",
            path.display(),
            spec.pipeline
        )));
    }
    if let (LocalSource::Kinesis, StreamSource::Kafka(_)) = (source, &spec.source) {
        // Said before anything is written (a trial found the lake folder
        // and the spec's copy made by a run that could not start).
        return Err(StreamRunError::Source(KAFKA_NEEDS_RECORDS.into()));
    }
    if let LocalSource::File(path) = source {
        // The whole file checked before anything is written or forgotten
        // (a replay's first step removes the stream's history).
        adapters::local::FileStream::new(path).following(options.follow).records(spec.source_name())?;
    }
    std::fs::create_dir_all(lake)
        .map_err(|err| PortError::permanent("create lake", lake.display().to_string(), err))?;
    let root = lake.canonicalize().map_err(|err| PortError::permanent("open lake", lake.display().to_string(), err))?;
    // One poller per stream and lake: a second would read the same shards
    // from the same checkpoints.
    let _lease = crate::lease::RunLease::take_stream(&root, &spec.pipeline, spec.source_name())
        .map_err(|err| PortError::permanent("take the stream's lock", root.display().to_string(), err))??;
    let store = adapters::local::DirStore::new(&root);
    let catalog = adapters::local::DirCatalog::new(&root);
    let tables = tributary_iceberg::LocalCommitter::new(
        root.clone(),
        std::sync::Arc::new(adapters::local::DirStore::new(&root)),
    );
    let broker = adapters::local::Broker::new();
    // The run-events topic as the stack wires it for Notify (completed
    // windows that changed their dataset's columns), and its file.
    use tributary_core::topology::{RUN_EVENTS_TOPIC, SCHEMA_CHANGES_QUEUE};
    broker.create_queue(adapters::local::QueueConfig {
        name: SCHEMA_CHANGES_QUEUE.into(),
        visibility_timeout: Duration::from_secs(3_600),
        max_message_bytes: 262_144,
        redrive: None,
    });
    broker.create_topic(
        RUN_EVENTS_TOPIC,
        vec![
            adapters::local::Subscription::Queue {
                queue: SCHEMA_CHANGES_QUEUE.into(),
                raw: true,
                filter: [(tributary_core::ledger::NOTIFY_ATTRIBUTE.to_string(), vec!["true".to_string()])].into(),
            },
            adapters::local::Subscription::File { path: root.join("_run_events.jsonl") },
        ],
    );
    let config = persist::PersistConfig {
        // Where the local runtime's EMF lines go (`LocalOptions::new`).
        metrics: tributary_core::metrics::MetricsTarget::File(root.join("_metrics.jsonl")),
        ..persist::PersistConfig::default()
    }
    // As the Lambda, the writer and page limits set in the environment.
    .with_env_limits(&tributary_core::env::LambdaEnv::from_env())
    .map_err(|err| StreamRunError::Source(format!("Persist's settings: {err}")))?;
    // A replay that stopped before its commit forgot the stream's
    // checkpoints while the table kept the rows: a run from the start now
    // would add every record again beside them (a trial's 71,500 rows for
    // 40,000). Only the replay, run again, finishes it.
    if !from_trim_horizon && spec.target.table_format == contracts::TableFormat::Iceberg {
        let record = crate::kappa::record_key(spec);
        let stopped: Option<Vec<contracts::RunId>> = tributary_core::ledger::read_record(&store, &record).await?;
        if stopped.is_some() {
            return Err(StreamRunError::Source(format!(
                "a replay of pipeline {} (--from-trim-horizon) stopped before its commit ({record} is in the lake): \
                 the stream's checkpoints are gone while the table {} still holds its rows, so a run without \
                 --from-trim-horizon would add every record again; run the replay again to finish it",
                spec.pipeline, spec.target.dataset
            )));
        }
    }
    // An Iceberg dataset's replay sets each window's files aside and
    // commits them all in one snapshot at the end ([`crate::kappa`]).
    let replay = match (from_trim_horizon, spec.target.table_format) {
        (true, contracts::TableFormat::Iceberg) => Some(crate::kappa::Replay::begin(spec, &store).await?),
        _ => None,
    };
    let deps = Deps {
        store: &store,
        queue: &broker,
        run_events: Some((&broker, RUN_EVENTS_TOPIC)),
        catalog: Some(&catalog),
        tables: Some(match &replay {
            Some(replay) => &replay.set_aside,
            None => &tables,
        }),
        config: &config,
    };
    check_target(spec, &store).await?;
    if from_trim_horizon {
        forget_stream_history(spec, &store).await?;
    }
    // Where the Persist Lambda finds the spec on AWS; kept locally too.
    let text =
        serde_json::to_vec(spec).map_err(|err| PortError::permanent("encode spec", spec.pipeline.clone(), err))?;
    let spec_key = persist::stream::spec_key(spec.source_name());
    let mut notes = Vec::new();
    let before: Option<serde_json::Value> = tributary_core::ledger::read_record(&store, &spec_key).await.ok().flatten();
    if let Some(other) = before.as_ref().and_then(|b| b.get("pipeline")).and_then(serde_json::Value::as_str)
        && other != spec.pipeline
    {
        // Locally two pipelines may read one topic file; on AWS Persist
        // finds a stream's pipeline by the stream's name, and
        // `deploy-stream` refuses a second one without --replace.
        notes.push(format!(
            "stream {} was read into this lake by pipeline {other}; {spec_key} now names pipeline {} (Notify's alerts \
             for the stream name it; on AWS one pipeline reads a stream, and deploy-stream refuses a second without \
             --replace)",
            spec.source_name(),
            spec.pipeline
        ));
    }
    store.put(&spec_key, bytes::Bytes::from(text)).await?;
    let mut spec = spec.clone();
    if from_trim_horizon {
        match &mut spec.source {
            StreamSource::Kinesis(k) => {
                (k.starting_position, k.starting_timestamp) = (StartingPosition::TrimHorizon, None)
            }
            StreamSource::Kafka(k) => {
                (k.starting_position, k.starting_timestamp) = (StartingPosition::TrimHorizon, None)
            }
            _ => {}
        }
    }
    let report = match (source, &spec.source) {
        (LocalSource::File(path), _) => {
            let reader = adapters::local::FileStream::new(path).following(options.follow);
            poll(&spec, &reader, deps, options).await?
        }
        (LocalSource::Kinesis, StreamSource::Kinesis(_)) => kinesis_poll(&spec, deps, options).await?,
        (LocalSource::Kinesis, _) => return Err(StreamRunError::Source(KAFKA_NEEDS_RECORDS.into())),
    };
    let mut report = report;
    if let Some(failed) = report.close_failed.take() {
        // Every batch given up on is alerted and kept as a dead letter even
        // so (a trial's 2,168 were neither when the close failed).
        let alerted = if alert(&report, Vec::new(), &store, &root).await.is_empty() {
            String::new()
        } else {
            format!(
                "; the {} batch(es) given up on are alerted (_alerts.jsonl) and kept as dead letters (`tributary dlq \
                 list`)",
                report.on_failure()
            )
        };
        return Err(StreamRunError::Port(PortError::transient_msg(
            "close the shards' windows",
            spec.source_name(),
            format!("{failed}{alerted}"),
        )));
    }
    if let Some(replay) = replay {
        let open = open_shards(&spec, &report, &store).await?;
        replay.commit(&spec, &tables, &store, &open).await?;
    }
    report.notes.extend(notes);
    let mut events = Vec::new();
    while let Ok(batch) = broker.receive(SCHEMA_CHANGES_QUEUE, 10) {
        if batch.is_empty() {
            break;
        }
        events.extend(batch);
    }
    report.alerts = alert(&report, events, &store, &root).await;
    Ok(report)
}

/// Refuses a target the dataset cannot take before a record is read: the
/// dataset kept in the other table format, or partitioned otherwise
/// (`TableSchema::layout_conflict`). Every batch would fail on it, be
/// retried and bisected, and go to the on-failure destination, its
/// records skipped (a trial: 30 records, 24 batches given up).
async fn check_target(spec: &StreamSpec, store: &dyn ObjectStore) -> Result<(), StreamRunError> {
    let key = tributary_core::keys::schema_key(&spec.target.dataset);
    let schema = persist::read_schema(store, &key)
        .await
        .map_err(|err| StreamRunError::Source(format!("read dataset {}'s table schema: {err}", spec.target.dataset)))?;
    match schema.and_then(|(schema, _)| schema.layout_conflict(&spec.target)) {
        Some(conflict) => Err(StreamRunError::Source(format!(
            "pipeline {}: {conflict}; nothing was read from the stream",
            spec.pipeline
        ))),
        None => Ok(()),
    }
}

/// The shards a poll did not end whole: a batch given up on, or a batch
/// pending or a window open in its checkpoint.
async fn open_shards(
    spec: &StreamSpec,
    report: &PollReport,
    store: &dyn ObjectStore,
) -> Result<Vec<String>, StreamRunError> {
    let mut open = Vec::new();
    for (shard, shard_report) in &report.shards {
        let key = checkpoint_key(&spec.pipeline, spec.source_name(), shard);
        let checkpoint = read_checkpoint(store, &key)
            .await
            .map_err(|err| PortError::permanent_msg("read checkpoint", &key, err.to_string()))?;
        if shard_report.on_failure > 0 || checkpoint.pending.is_some() || checkpoint.window.is_some() {
            open.push(shard.clone());
        }
    }
    Ok(open)
}

/// A Kappa replay's first step ([`persist::stream_replay::forget_history`]):
/// the pipeline's stream files, window ledgers and checkpoints removed, so
/// the stream read again from TRIM_HORIZON writes the dataset anew (an
/// Iceberg table itself changes only at the replay's one snapshot,
/// [`crate::kappa`]).
async fn forget_stream_history(spec: &StreamSpec, store: &dyn ObjectStore) -> Result<(), StreamRunError> {
    Ok(persist::stream_replay::forget_history(spec, store).await?)
}

#[cfg(feature = "aws")]
async fn kinesis_poll(spec: &StreamSpec, deps: Deps<'_>, options: PollOptions) -> Result<PollReport, StreamRunError> {
    let config = crate::aws::sdk_config().await.map_err(|err| StreamRunError::Source(err.to_string()))?;
    Ok(poll(spec, &adapters::aws::KinesisReader::new(&config), deps, options).await?)
}

#[cfg(not(feature = "aws"))]
async fn kinesis_poll(_: &StreamSpec, _: Deps<'_>, _: PollOptions) -> Result<PollReport, StreamRunError> {
    Err(StreamRunError::Source(
        "reading Kinesis needs a build with --features aws (the AWS SDK); or give --records FILE".into(),
    ))
}

impl std::fmt::Display for PollReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (shard, s) in &self.shards {
            let rate = s.records_written as f64 / s.elapsed.as_secs_f64().max(1e-3);
            write!(
                f,
                "{shard}: {} records written, {} quarantined, {} skipped as in the lake, {} invocations, {} retries, {} bisections, {} to on-failure, {rate:.0} records/s",
                s.rows_persisted,
                s.records_quarantined,
                s.records_skipped,
                s.invocations,
                s.retries,
                s.bisections,
                s.on_failure
            )?;
            if let Some(records) = s.records_behind {
                write!(f, ", {records} records behind")?;
            }
            match s.millis_behind_latest {
                Some(ms) => writeln!(f, ", {ms} ms behind the tip")?,
                None => writeln!(f)?,
            }
        }
        Ok(())
    }
}

/// A shard's lag as people read it: tenths of a second under a minute
/// (`3.2 s`), then minutes (`4 min`), hours (`5.1 h`) and days (`12 d`): a
/// shard idle since a month ago reads `31 d`, not `2678400.0 s`.
fn lag_text(lag: chrono::TimeDelta) -> String {
    let seconds = lag.num_milliseconds().max(0) as f64 / 1000.0;
    match seconds {
        s if s < 60.0 => format!("{s:.1} s"),
        s if s < 3600.0 => format!("{:.0} min", s / 60.0),
        s if s < 86_400.0 => format!("{:.1} h", s / 3600.0),
        s => format!("{:.0} d", s / 86_400.0),
    }
}

/// Where the streams' checkpoints are kept: all pipelines', or with
/// `pipeline` that pipeline's (`_streams/<pipeline>/`).
fn streams_prefix(pipeline: Option<&str>) -> String {
    pipeline.map_or_else(
        || persist::stream::STREAMS_PREFIX.to_string(),
        |p| format!("{}{p}/", persist::stream::STREAMS_PREFIX),
    )
}

/// The stream checkpoints in the lake (`_streams/…`), a line per shard for
/// `tributary status`: pipeline, stream, shard, the last sequence number
/// in the lake, records taken (rows and quarantined), a batch in flight and the open window, and the lag (now minus
/// the arrival of the newest record landed: the iterator age a caught-up
/// consumer would report; `-` when no record had a usable timestamp).
/// Empty when the lake has no stream pipeline.
///
/// # Errors
/// [`PortError`] from the store; an unreadable checkpoint is shown as such.
pub async fn checkpoints_table(
    store: &dyn ObjectStore,
    pipeline: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<String, PortError> {
    let keys = store.list(&streams_prefix(pipeline)).await?;
    let mut lines = Vec::new();
    for key in keys.iter().filter(|k| k.ends_with(".json") && !k.contains("/failed/") && !k.contains(BEHIND_FOLDER)) {
        let rest = key.trim_start_matches(persist::stream::STREAMS_PREFIX).trim_end_matches(".json");
        let mut parts = rest.splitn(3, '/');
        let (Some(pipeline), Some(stream), Some(shard)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let line = match read_checkpoint(store, key).await {
            Ok(c) => {
                // A record without a usable timestamp arrives at the Unix
                // epoch (`persist::stream`): no lag of 20,000 days from it
                // (a trial's finding); the newest arrival known stands.
                let known =
                    [c.last_arrival, c.newest_arrival].into_iter().flatten().filter(|t| t.timestamp_millis() > 0);
                let lag = known.max().map_or("-".to_string(), |at| lag_text(now - at));
                // A pending batch is in flight only while its invocation
                // may run; one that answered failure, or is older than the
                // longest invocation, is given up (its files are removed
                // when the shard's next batch starts).
                let mut pending = c.pending.map_or("-".to_string(), |p| {
                    let state = if p.in_flight(now) {
                        String::new()
                    } else {
                        let at = p.failed_at.or(p.started_at).map(|t| t.format(" at %Y-%m-%d %H:%M:%SZ").to_string());
                        format!(" (given up{}; not in flight)", at.unwrap_or_default())
                    };
                    format!("{} records from {}{state}", p.records, p.first)
                });
                if let Some(w) = c.window {
                    let closing = if w.closing { ", closing" } else { "" };
                    pending.push_str(&format!("; window {} batches, {} bytes{closing}", w.batches, w.bytes));
                }
                format!(
                    "{pipeline:<16} {stream:<16} {shard:<22} {:<24} {:>10} {lag:>10}  {pending}",
                    c.through.unwrap_or_else(|| "-".into()),
                    c.records
                )
            }
            Err(err) => format!("{pipeline:<16} {stream:<16} {shard:<22} unreadable checkpoint: {err}"),
        };
        lines.push(line);
    }
    if lines.is_empty() {
        return Ok(String::new());
    }
    let failed = keys.iter().filter(|k| k.contains("/failed/")).count();
    let mut out = format!(
        "\nstream checkpoints\n{:<16} {:<16} {:<22} {:<24} {:>10} {:>10}  in flight\n",
        "pipeline", "stream", "shard", "through", "records", "lag"
    );
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    if failed > 0 {
        out.push_str(&format!(
            "{failed} batch(es) given up after their retries: see {}<pipeline>/<stream>/failed/\n",
            persist::stream::STREAMS_PREFIX
        ));
    }
    Ok(out)
}

/// EMF metric of the local poller: the records of a shard (a Kafka
/// topic-partition) after the last record handed over,
/// [`Count`](tributary_core::metrics::Unit::Count), one value per batch and one
/// when the shard stops, under the dimensions `function` = [`POLLER`] and
/// `pipeline`, with `stream` and `shard` properties. Only a source that can
/// count them emits it: a file of records (Kinesis says time behind,
/// `MillisBehindLatest`; on AWS, Lambda's `OffsetLag` is the Kafka figure).
pub const RECORDS_BEHIND: &str = "stream_records_behind";

/// The `function` dimension of the local poller's metrics (it stands in
/// for the event source mapping, not a Lambda function).
pub const POLLER: &str = "poller";

/// Folder, within `_streams/<pipeline>/<stream>/`, of each shard's
/// [`RecordsBehind`] at the last local poll.
const BEHIND_FOLDER: &str = "/behind/";

/// A shard's records behind at the last local poll, for `tributary status`:
/// `_streams/<pipeline>/<stream>/behind/<shard>.json`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordsBehind {
    /// Records after the last one handed over.
    pub records: u64,
    /// When the poller counted them.
    pub measured_at: chrono::DateTime<chrono::Utc>,
}

/// Where [`RecordsBehind`] of `shard` is kept.
pub fn records_behind_key(pipeline: &str, stream: &str, shard: &str) -> String {
    format!("{}{pipeline}/{stream}{BEHIND_FOLDER}{shard}.json", persist::stream::STREAMS_PREFIX)
}

/// Emits [`RECORDS_BEHIND`] for `shard` and keeps it for `tributary
/// status`, when the source counted them. Observability must not stop the
/// ingestion: a failed write is logged, and the poll goes on.
async fn emit_records_behind(spec: &StreamSpec, shard: &str, report: &ShardReport, deps: Deps<'_>) {
    let Some(records) = report.records_behind else { return };
    let mut emf = tributary_core::metrics::Metrics::new(POLLER, &spec.pipeline);
    emf.count(RECORDS_BEHIND, records);
    emf.property("stream", serde_json::Value::String(spec.source_name().to_string()));
    emf.property("shard", serde_json::Value::String(shard.to_string()));
    emf.flush_to(&deps.config.metrics);
    let key = records_behind_key(&spec.pipeline, spec.source_name(), shard);
    let body = json!(RecordsBehind { records, measured_at: chrono::Utc::now() }).to_string();
    if let Err(error) = deps.store.put(&key, Bytes::from(body)).await {
        tracing::warn!(key, %error, "could not keep the records behind for `tributary status`");
    }
}

/// The records behind each shard at the last local poll of a file of
/// records (`_streams/<pipeline>/<stream>/behind/`), a line per shard for
/// `tributary status`; empty when no such poll ran in the lake (a Kinesis
/// stream has no count: its lag is the checkpoints' time).
///
/// # Errors
/// [`PortError`] from the store; an unreadable figure is shown as such.
pub async fn records_behind_table(store: &dyn ObjectStore, pipeline: Option<&str>) -> Result<String, PortError> {
    let keys = store.list(&streams_prefix(pipeline)).await?;
    let mut out = String::new();
    for key in keys.iter().filter(|k| k.contains(BEHIND_FOLDER) && k.ends_with(".json")) {
        let rest = key.trim_start_matches(persist::stream::STREAMS_PREFIX).trim_end_matches(".json");
        let Some((path, shard)) = rest.split_once(BEHIND_FOLDER) else { continue };
        let Some((pipeline, stream)) = path.split_once('/') else { continue };
        let figure = match store.get(key).await {
            Ok(body) => serde_json::from_slice::<RecordsBehind>(&body)
                .map(|b| format!("{:>10}  {}", b.records, b.measured_at.format("%Y-%m-%d %H:%M:%SZ")))
                .unwrap_or_else(|err| format!("unreadable {key}: {err}")),
            // Removed since it was listed (a replay forgetting the stream).
            Err(PortError::NotFound { .. }) => continue,
            Err(err) => format!("unreadable {key}: {err}"),
        };
        if out.is_empty() {
            out = format!(
                "\nrecords behind (a file of Kafka records, at the last local poll)\n{:<16} {:<16} {:<22} {:>10}  measured\n",
                "pipeline", "stream", "shard", "records"
            );
        }
        out.push_str(&format!("{pipeline:<16} {stream:<16} {shard:<22} {figure}\n"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    const SPEC: &str = "version: 1
pipeline: orders
source: { kind: kafka, topic: orders }
batching: { batch_size: 10, batch_window_secs: 0 }
target: { dataset: orders }
";

    /// A record line of topic `orders`, partition 0; `value` none: poison
    /// (not JSON).
    fn line(offset: u64, value: Option<&str>) -> String {
        let data = value.map_or_else(|| b"not json".to_vec(), |v| v.as_bytes().to_vec());
        serde_json::json!({
            "topic": "orders", "partition": 0, "offset": offset, "timestamp": 1_764_583_200_000_u64 + offset,
            "value": base64::engine::general_purpose::STANDARD.encode(data),
        })
        .to_string()
            + "\n"
    }

    fn order(offset: u64) -> String {
        line(offset, Some(&format!(r#"{{"order_id": "o-{offset}"}}"#)))
    }

    /// A re-test finding: the local poller read after the checkpoint's
    /// offset, so a recreated topic's records (offsets from 0 again) never
    /// reached Persist's check and were skipped silently.
    #[tokio::test]
    async fn a_recreated_topic_s_records_land_and_a_re_run_of_the_same_file_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (lake, old, new) = (dir.path().join("lake"), dir.path().join("old.jsonl"), dir.path().join("new.jsonl"));
        std::fs::write(&old, (0..5).map(order).collect::<String>()).expect("old topic");
        // The topic recreated an hour later: offsets 0..3 again, other records.
        let recreated: String = (0..3)
            .map(|offset| {
                let mut record: serde_json::Value =
                    serde_json::from_str(&line(offset, Some(&format!(r#"{{"order_id": "n-{offset}"}}"#))))
                        .expect("json");
                record["timestamp"] = serde_json::json!(1_764_583_200_000_u64 + 3_600_000 + offset);
                record.to_string() + "\n"
            })
            .collect();
        std::fs::write(&new, recreated).expect("new topic");
        let spec = StreamSpec::from_yaml(SPEC).expect("spec");
        let run = |file: &std::path::Path| {
            let (spec, lake, source) = (spec.clone(), lake.clone(), LocalSource::File(file.to_path_buf()));
            async move { run_local(&spec, &lake, &source, PollOptions::default(), false).await.expect("run") }
        };
        assert_eq!(run(&old).await.records_written(), 5);
        assert_eq!(run(&old).await.records_written(), 0, "the same records again: nothing twice");
        assert_eq!(run(&new).await.records_written(), 3, "the recreated topic's records land");
        assert_eq!(run(&new).await.records_written(), 0, "and once");
    }

    /// A trial: a stream run whose windows could not be closed at the end
    /// (a commit claim held) failed before its batches given up on were
    /// alerted: 54,200 records dropped with no alert and no dead letter.
    #[tokio::test]
    async fn batches_given_up_are_alerted_even_when_the_windows_cannot_be_closed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (lake, topic) = (dir.path().join("lake"), dir.path().join("orders.jsonl"));
        // Partition 0: one batch, its window left to close at the tip;
        // partition 1: one batch that cannot be written.
        let in_partition_1 = |offset: u64| {
            let mut record: serde_json::Value = serde_json::from_str(&order(offset)).expect("json");
            record["partition"] = serde_json::json!(1);
            record.to_string() + "\n"
        };
        let lines: String = (0..10).map(order).chain((0..10).map(in_partition_1)).collect();
        std::fs::write(&topic, lines).expect("topic");
        let spec = StreamSpec::from_yaml(
            "version: 1
pipeline: orders
source: { kind: kafka, topic: orders }
batching: { batch_size: 10, batch_window_secs: 0, maximum_retry_attempts: 0, bisect_on_error: false }
target: { dataset: orders, table_format: iceberg }
",
        )
        .expect("spec");
        // Partition 1's batch cannot keep its raw copy: given up.
        let failing = persist::stream::stream_run_id("orders", "orders-1", "0");
        let raw = format!("raw/orders/dt=2025-12-01/orders-{failing}-00000.json");
        std::fs::create_dir_all(lake.join(&raw)).expect("a directory where the raw page goes");
        // Partition 0's window commit is claimed by a process that runs
        // (this one), so it cannot close.
        let run_id = persist::stream::stream_run_id("orders", "orders-0", "0");
        let claim = tributary_core::tables::CommitClaim {
            pipeline: "orders".into(),
            run_id: run_id.clone(),
            claimed_at: chrono::Utc::now(),
            holder: tributary_core::tables::ClaimHolder::this_process(),
        };
        let claim_key = tributary_core::keys::table_commit_claim_key("orders", &run_id);
        std::fs::create_dir_all(lake.join(&claim_key).parent().expect("folder")).expect("folder");
        std::fs::write(lake.join(&claim_key), serde_json::to_vec(&claim).expect("json")).expect("claim");

        let source = LocalSource::File(topic);
        let err = run_local(&spec, &lake, &source, PollOptions::default(), false).await.expect_err("the close fails");
        let text = err.to_string();
        assert!(text.contains("close the shards' windows") && text.contains("held its commit claim"), "{text}");
        assert!(text.contains("the 1 batch(es) given up on are alerted"), "{text}");
        let alerts = crate::runtime::read_alerts(&lake);
        assert!(alerts.iter().any(|a| a.summary.contains("dropped")), "{alerts:?}");
        let letters = tributary_core::dead_letters::list(&adapters::local::DirStore::new(&lake), None).await;
        assert_eq!(letters.expect("dead letters").len(), 1, "one dead letter for the batch given up on");
    }

    #[tokio::test]
    async fn status_tells_a_batch_in_flight_from_one_given_up() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = adapters::local::DirStore::new(dir.path());
        let now = chrono::Utc::now();
        let pending = |failed_at: Option<chrono::DateTime<chrono::Utc>>| persist::stream::PendingBatch {
            run_id: persist::stream::stream_run_id("orders", "orders-0", "40"),
            page: 0,
            first: "40".into(),
            last: "59".into(),
            records: 20,
            last_arrival: now,
            newest_arrival: Some(now),
            started_at: Some(now - chrono::Duration::seconds(30)),
            failed_at,
        };
        let key = checkpoint_key("orders", "orders", "orders-0");
        for (failed_at, expected) in [(None, "20 records from 40  "), (Some(now), "20 records from 40 (given up at ")] {
            let checkpoint = persist::stream::Checkpoint { pending: Some(pending(failed_at)), ..Default::default() };
            store.put(&key, bytes::Bytes::from(serde_json::to_vec(&checkpoint).expect("json"))).await.expect("put");
            let table = checkpoints_table(&store, None, now).await.expect("table");
            let line = table.lines().find(|l| l.starts_with("orders")).expect("the shard's line");
            assert!(format!("{line}  ").contains(expected), "{failed_at:?}: {line}");
        }
    }

    /// A record without a usable timestamp arrives at the Unix epoch: the
    /// lag is the newest known arrival's (a trial read `20794 d`), or `-`.
    #[tokio::test]
    async fn a_lag_is_not_measured_from_a_record_without_a_timestamp() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = adapters::local::DirStore::new(dir.path());
        let now = chrono::Utc::now();
        let epoch = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
        let key = checkpoint_key("orders", "orders", "orders-0");
        for (newest, expected) in [(Some(now - chrono::Duration::seconds(240)), " 4 min "), (Some(epoch), " - ")] {
            let checkpoint = persist::stream::Checkpoint {
                through: Some("7".into()),
                last_arrival: Some(epoch),
                newest_arrival: newest,
                ..Default::default()
            };
            store.put(&key, bytes::Bytes::from(serde_json::to_vec(&checkpoint).expect("json"))).await.expect("put");
            let table = checkpoints_table(&store, None, now).await.expect("table");
            let line = table.lines().find(|l| l.starts_with("orders")).expect("the shard's line");
            assert!(format!("{line} ").contains(expected), "{newest:?}: {line}");
        }
    }

    /// Trial findings: a Kafka spec run without `--records` made the lake
    /// folder and the spec's copy before it failed; a second pipeline on
    /// the same topic took the spec's copy over without a word.
    #[tokio::test]
    async fn a_kafka_spec_without_records_writes_nothing_and_a_second_pipeline_on_its_topic_is_noted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (lake, topic) = (dir.path().join("lake"), dir.path().join("topic.jsonl"));
        std::fs::write(&topic, format!("{}{}", order(0), order(1))).expect("topic");
        let spec = StreamSpec::from_yaml(SPEC).expect("spec");
        let err = run_local(&spec, &lake, &LocalSource::Kinesis, PollOptions::default(), false)
            .await
            .expect_err("a Kafka topic needs --records");
        assert!(err.to_string().contains("--records FILE"), "{err}");
        assert!(!lake.exists(), "nothing written, not even the lake folder");
        let source = LocalSource::File(topic);
        let first = run_local(&spec, &lake, &source, PollOptions::default(), false).await.expect("run");
        assert!(first.notes.is_empty(), "{:?}", first.notes);
        let other = StreamSpec::from_yaml(&SPEC.replace("pipeline: orders", "pipeline: orders-copy")).expect("spec");
        let second = run_local(&other, &lake, &source, PollOptions::default(), false).await.expect("run");
        assert_eq!(second.records_written(), 2, "the other pipeline reads the topic too");
        assert!(
            second.notes.iter().any(|n| n.contains("by pipeline orders;") && n.contains("names pipeline orders-copy")),
            "{:?}",
            second.notes
        );
    }

    #[tokio::test]
    async fn a_refused_file_of_records_lands_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (lake, topic) = (dir.path().join("lake"), dir.path().join("topic.jsonl"));
        // Good records first: the bad line is refused before any batch.
        let bad = r#"{"topic": "orders", "partition": 0, "value": "e30="}"#;
        std::fs::write(&topic, format!("{}{}{bad}\n", order(0), order(1))).expect("topic");
        let spec = StreamSpec::from_yaml(SPEC).expect("spec");
        let source = LocalSource::File(topic);
        let err = run_local(&spec, &lake, &source, PollOptions::default(), false).await.expect_err("refused");
        assert!(err.to_string().contains("topic.jsonl:3") && err.to_string().contains("`offset` is missing"), "{err}");
        assert!(!lake.exists(), "nothing written, not even the lake folder");
    }

    #[tokio::test]
    async fn follow_reads_the_lines_appended_to_a_file_of_records() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (lake, topic) = (dir.path().join("lake"), dir.path().join("topic.jsonl"));
        std::fs::write(&topic, format!("{}{}", order(0), order(1))).expect("topic");
        let spec = StreamSpec::from_yaml(SPEC).expect("spec");
        let following = {
            let (lake, source, spec) = (lake.clone(), LocalSource::File(topic.clone()), spec.clone());
            let options = PollOptions { follow: true, max_batches_per_shard: None };
            tokio::spawn(async move { run_local(&spec, &lake, &source, options, false).await })
        };
        let through = || async {
            let store = adapters::local::DirStore::new(&lake);
            let key = checkpoint_key("orders", "orders", "orders-0");
            read_checkpoint(&store, &key).await.ok().and_then(|c| c.through)
        };
        let wait_for = |offset: &'static str| async move {
            let deadline = Instant::now() + Duration::from_secs(30);
            while through().await.as_deref() != Some(offset) {
                assert!(Instant::now() < deadline, "offset {offset} not in the lake after 30 s");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        wait_for("1").await;
        assert!(!following.is_finished(), "still following at the end of the file");
        // A second poller of the stream meanwhile is refused.
        let source = LocalSource::File(topic.clone());
        let second = run_local(&spec, &lake, &source, PollOptions::default(), false).await;
        assert!(matches!(second, Err(StreamRunError::InFlight(_))), "{second:?}");
        let mut file = std::fs::OpenOptions::new().append(true).open(&topic).expect("open");
        std::io::Write::write_all(&mut file, format!("{}{}", order(2), order(3)).as_bytes()).expect("append");
        wait_for("3").await;
        assert!(!following.is_finished(), "still following");
        // What Ctrl-C does: the run stops where it is.
        following.abort();
        assert!(following.await.expect_err("stopped").is_cancelled());
        // Stopped, it holds the stream no more.
        let report = run_local(&spec, &lake, &source, PollOptions::default(), false).await.expect("after the stop");
        assert_eq!(report.records_written(), 0, "every record is in the lake: {report:?}");
    }

    #[tokio::test]
    async fn poison_records_count_as_quarantined_in_the_receipt_status_and_manifest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (lake, topic) = (dir.path().join("lake"), dir.path().join("topic.jsonl"));
        // Two poison records (not JSON) and one the converter sets aside
        // (JSON, but not an object): three quarantined, thirteen rows.
        let lines: String = (0..16)
            .map(|i| match i {
                3 | 9 => line(i, None),
                12 => line(i, Some("42")),
                _ => order(i),
            })
            .collect();
        std::fs::write(&topic, lines).expect("topic");
        let spec = StreamSpec::from_yaml(&SPEC.replace("batch_size: 10", "batch_size: 100")).expect("spec");
        let report =
            run_local(&spec, &lake, &LocalSource::File(topic), PollOptions::default(), false).await.expect("run");
        assert!(report.to_string().starts_with("orders-0: 13 records written, 3 quarantined, "), "{report}");
        let store = adapters::local::DirStore::new(&lake);
        let runs = crate::status::recent_runs(&store, None, 10).await.expect("status");
        let counts: Vec<(u64, u64, &str)> =
            runs.iter().map(|r| (r.records_persisted, r.records_quarantined, r.state())).collect();
        assert_eq!(counts, vec![(13, 3, "complete")], "{runs:?}");
        let manifests = store.list("_manifests/orders/").await.expect("manifests");
        assert_eq!(manifests.len(), 1, "{manifests:?}");
        let manifest: serde_json::Value =
            serde_json::from_slice(&store.get(&manifests[0]).await.expect("manifest")).expect("json");
        assert_eq!(
            (manifest["records_persisted"].as_u64(), manifest["records_quarantined"].as_u64()),
            (Some(13), Some(3))
        );
        // The EMF counts agree, each record counted once: the page's line
        // counts the records written, the shard's line the poison.
        let emf = std::fs::read_to_string(lake.join("_metrics.jsonl")).expect("metrics file");
        let sum = |metric: &str| -> u64 {
            emf.lines()
                .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("EMF line"))
                .filter(|line| line["function"] == "persist")
                .filter_map(|line| line[metric].as_u64())
                .sum()
        };
        assert_eq!((sum("records_persisted"), sum("records_quarantined")), (13, 3), "{emf}");
    }

    #[test]
    fn a_lag_reads_in_the_unit_that_fits_it() {
        use chrono::TimeDelta;
        assert_eq!(lag_text(TimeDelta::milliseconds(3_250)), "3.2 s");
        assert_eq!(lag_text(TimeDelta::seconds(240)), "4 min");
        assert_eq!(lag_text(TimeDelta::seconds(5 * 3600 + 360)), "5.1 h");
        assert_eq!(lag_text(TimeDelta::seconds(31_955_558)), "370 d");
        assert_eq!(lag_text(TimeDelta::seconds(-5)), "0.0 s", "a clock ahead of the record reads as no lag");
    }
}
