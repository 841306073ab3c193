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
//!    tip (`--follow` keeps polling).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use contracts::stream::{StartingPosition, StreamSource, StreamSpec};
use persist::Deps;
use persist::stream::{checkpoint_key, persist_stream_batch, read_checkpoint};
use serde_json::json;
use tributary_core::ports::PortError;
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
}

/// What a poll did on one shard.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShardReport {
    /// Batches handed over (retries and halves included).
    pub invocations: u64,
    /// Records written (rows and quarantined).
    pub records_written: u64,
    /// Records skipped as in the lake already (redeliveries).
    pub records_skipped: u64,
    /// Poison records quarantined.
    pub records_poison: u64,
    /// Batches retried after a failure.
    pub retries: u64,
    /// Batches split in two.
    pub bisections: u64,
    /// Batches given up on (sent to the on-failure record).
    pub on_failure: u64,
    /// Milliseconds behind the shard's tip at the last read (Kinesis
    /// `MillisBehindLatest`), when the source says.
    pub millis_behind_latest: Option<u64>,
    /// Time spent on the shard.
    pub elapsed: Duration,
}

impl PollReport {
    /// Records written over every shard.
    pub fn records_written(&self) -> u64 {
        self.shards.values().map(|s| s.records_written).sum()
    }

    /// Batches given up on over every shard.
    pub fn on_failure(&self) -> u64 {
        self.shards.values().map(|s| s.on_failure).sum()
    }
}

/// Polls every shard of `spec`'s stream through `reader` into the lake
/// behind `deps`, as an event source mapping would.
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
    Ok(report)
}

/// Where a shard starts: after its checkpoint, at its unfinished batch, or
/// at the spec's starting position.
async fn start_position(spec: &StreamSpec, shard: &str, deps: Deps<'_>) -> Result<StreamPosition, PortError> {
    let key = checkpoint_key(&spec.pipeline, spec.source_name(), shard);
    let checkpoint = read_checkpoint(deps.store, &key)
        .await
        .map_err(|err| PortError::permanent_msg("read checkpoint", &key, err.to_string()))?;
    Ok(match (checkpoint.pending, checkpoint.through) {
        (Some(pending), _) => StreamPosition::AtSequence(pending.first),
        (None, Some(through)) => StreamPosition::AfterSequence(through),
        (None, None) => {
            let (position, at) = match &spec.source {
                StreamSource::Kinesis(k) => (k.starting_position, k.starting_timestamp),
                StreamSource::Kafka(k) => (k.starting_position, k.starting_timestamp),
            };
            match (position, at) {
                (StartingPosition::Latest, _) => StreamPosition::Latest,
                (StartingPosition::AtTimestamp, Some(at)) => StreamPosition::AtTimestamp(at),
                _ => StreamPosition::TrimHorizon,
            }
        }
    })
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
    let mut position = start_position(spec, shard, deps).await?;
    let mut batches = 0u64;
    loop {
        if options.max_batches_per_shard.is_some_and(|max| batches >= max) {
            break;
        }
        let (records, next, behind) = gather(spec, reader, shard, &position).await?;
        report.millis_behind_latest = behind;
        if records.is_empty() {
            match next {
                Some(next) if options.follow => {
                    position = StreamPosition::Continue(next);
                    tokio::time::sleep(IDLE_POLL).await;
                    continue;
                }
                Some(next) if behind != Some(0) => {
                    // An empty read short of the tip (a trimmed stretch): read on.
                    position = StreamPosition::Continue(next);
                    continue;
                }
                _ => break,
            }
        }
        batches += 1;
        deliver(spec, records, deps, &mut report).await?;
        match next {
            Some(next) => position = StreamPosition::Continue(next),
            None => break,
        }
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Up to `batch_size` records from `position`, reading on within the batch
/// window while the shard has more; the continuation and lag of the last
/// read.
async fn gather(
    spec: &StreamSpec,
    reader: &dyn StreamReader,
    shard: &str,
    position: &StreamPosition,
) -> Result<(Vec<StreamRecord>, Option<String>, Option<u64>), PortError> {
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
    Ok((records, read.next, read.millis_behind_latest))
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
        report.records_poison += outcome.records_poison;
        let Some((_, failed_at)) = outcome.failures.first() else { continue };
        // Checkpoint before the failed record; retry from it.
        let rest: Vec<StreamRecord> = batch.into_iter().skip_while(|r| r.sequence != *failed_at).collect();
        attempts += 1;
        if attempts > spec.batching.maximum_retry_attempts {
            report.on_failure += 1;
            record_on_failure(spec, &rest, attempts, deps).await?;
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
/// on-failure destination record for a stream (`KinesisBatchInfo` /
/// `KafkaBatchInfo`): written to `_streams/<pipeline>/<stream>/failed/`.
async fn record_on_failure(
    spec: &StreamSpec,
    records: &[StreamRecord],
    attempts: u32,
    deps: Deps<'_>,
) -> Result<(), PortError> {
    let (Some(first), Some(last)) = (records.first(), records.last()) else { return Ok(()) };
    let key =
        format!("_streams/{}/{}/failed/{}-{}.json", spec.pipeline, spec.source_name(), first.partition, first.sequence);
    let body = json!({
        "requestContext": { "condition": "RetryAttemptsExhausted", "approximateInvokeCount": attempts },
        "batchInfo": {
            "shardId": first.partition,
            "startSequenceNumber": first.sequence,
            "endSequenceNumber": last.sequence,
            "approximateArrivalOfFirstRecord": first.arrival,
            "approximateArrivalOfLastRecord": last.arrival,
            "batchSize": records.len(),
            "streamArn": spec.source_name(),
        }
    });
    tracing::error!(key, shard = %first.partition, from = %first.sequence, to = %last.sequence, "a stream batch failed past its retries; recorded for the on-failure destination");
    deps.store.put(&key, Bytes::from(body.to_string())).await
}
