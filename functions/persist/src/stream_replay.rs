//! A Kappa replay of a stream pipeline through the Lambda path (on AWS: a
//! new event source mapping at `TRIM_HORIZON` or `AT_TIMESTAMP`), where
//! each replayed window of an Iceberg dataset commits ONE `overwrite`
//! snapshot that removes exactly the rows that window re-derives and adds
//! its new rows, so at every snapshot each stream record is in the table
//! once.
//!
//! Rows carry the window they came from (`_tributary_run_id`, the original
//! window's run, [`crate::stream::stream_run_id`] of its first record), not
//! their stream position. A replayed window can therefore replace whole
//! original windows only, and is made to end where an original window
//! ends:
//! - [`begin`] records the replay ([`StreamReplay`], at [`replay_key`]):
//!   the original windows' runs (the pipeline's `s-…` runs in the ledger),
//!   and each shard's last sequence number in the lake; then it forgets the
//!   pipeline's stream history (checkpoints, window ledgers, staged files),
//!   so the replay's windows are runs of their own;
//! - a replayed record whose [`crate::stream::stream_run_id`] is one of
//!   those runs is the first record of an original window: a *boundary*;
//!   so is every record after the shard's last one in the lake. Persist
//!   splits a batch at its boundaries ([`segments`]) and lets a replayed
//!   window close (when its `window` rule says so) only at a boundary, so
//!   a replayed window holds whole original windows (the ones starting in
//!   it, [`crate::stream::Window::replaces`]);
//! - its close commits through the table committer as a re-run of the
//!   window named by the replay's token (`tributary.rerun`, with
//!   `tributary.replay=true`): the copy-on-write `replace_run` swap that
//!   removes the rows of the original windows it holds and adds its own.
//!   A close delivered again finds that snapshot and commits nothing.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use contracts::stream::StreamSpec;
use contracts::{RunId, TableFormat, WriteDisposition};
use serde::{Deserialize, Serialize};
use tributary_core::ports::{ObjectStore, PortError};

use crate::error::PersistError;
use crate::stream::{STREAMS_PREFIX, StreamRecord, read_checkpoint, sequence_cmp, stream_run_id};

/// Prefix of a replay's token: `kappa-<UTC time it began, to the second>`.
pub const REPLAY_TOKEN_PREFIX: &str = "kappa-";

/// A replay in progress, as recorded in the lake at [`replay_key`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamReplay {
    /// Names the replayed windows' snapshots (`tributary.rerun`).
    pub token: String,
    /// When the replay began.
    pub began_at: Option<DateTime<Utc>>,
    /// The original windows' runs whose rows the replay replaces, sorted.
    pub replaced: Vec<RunId>,
    /// Per shard (Kafka: topic-partition), the last sequence number in the
    /// lake when the replay began: records after it re-derive nothing.
    pub through: BTreeMap<String, String>,
}

impl StreamReplay {
    /// The original window that `sequence` of `partition` is the first
    /// record of, if any.
    pub fn original_started_by(&self, source: &str, partition: &str, sequence: &str) -> Option<RunId> {
        let run = stream_run_id(source, partition, sequence);
        self.replaced.binary_search(&run).is_ok().then_some(run)
    }

    /// Whether `sequence` is after every record of `partition` that was in
    /// the lake when the replay began.
    pub fn after_originals(&self, partition: &str, sequence: &str) -> bool {
        self.through.get(partition).is_none_or(|through| sequence_cmp(sequence, through).is_gt())
    }

    /// Whether a replayed window may end just before `sequence`: it starts
    /// an original window, or follows the originals.
    pub fn boundary_before(&self, source: &str, partition: &str, sequence: &str) -> bool {
        self.after_originals(partition, sequence) || self.original_started_by(source, partition, sequence).is_some()
    }

    /// Whether a replayed window may end just after `sequence`: it is the
    /// shard's last record in the lake when the replay began, or later.
    pub fn boundary_after(&self, partition: &str, sequence: &str) -> bool {
        self.through.get(partition).is_none_or(|through| sequence_cmp(sequence, through).is_ge())
    }
}

/// Key of a stream's replay record: `_streams/<pipeline>/<stream>.replay.json`
/// (beside the shards' checkpoint folder, which [`begin`] empties).
pub fn replay_key(pipeline: &str, source: &str) -> String {
    format!("{STREAMS_PREFIX}{pipeline}/{source}.replay.json")
}

/// The replay of `spec`'s stream in progress, if any (Iceberg datasets
/// only: a Parquet dataset's replay needs none, see [`begin`]).
///
/// # Errors
/// Store failures; an unreadable record is [`PersistError::Stream`].
pub async fn read_replay(spec: &StreamSpec, store: &dyn ObjectStore) -> Result<Option<StreamReplay>, PersistError> {
    if spec.target.table_format != TableFormat::Iceberg {
        return Ok(None);
    }
    let key = replay_key(&spec.pipeline, spec.source_name());
    tributary_core::ledger::read_record(store, &key)
        .await
        .map_err(|err| PersistError::Stream { field: key, problem: format!("unreadable replay record: {err}") })
}

/// Begins a replay of `spec`'s stream into its dataset, at `now`: refuses
/// while a batch of a shard is in flight (a live event source mapping
/// still running: disable it first), records the replay ([`StreamReplay`],
/// for an Iceberg dataset), and forgets the pipeline's stream history
/// ([`forget_history`]). Returns the record; `None` for a Parquet dataset,
/// whose files are removed and written again as the replay goes (readers
/// see the rows replayed so far). A replay begun again while one is
/// recorded keeps replacing that one's original windows too.
///
/// # Errors
/// [`PersistError::Stream`] naming `target.write` when it is not `append`
/// (a `replace` or `merge` table's rows depend on the order its windows
/// committed in), or the shard with a batch in flight; store failures.
pub async fn begin(
    spec: &StreamSpec,
    store: &dyn ObjectStore,
    now: DateTime<Utc>,
) -> Result<Option<StreamReplay>, PersistError> {
    if spec.target.table_format == TableFormat::Iceberg && spec.target.write != WriteDisposition::Append {
        return Err(PersistError::Stream {
            field: "target.write".into(),
            problem: format!(
                "{:?}: a stream replay replaces the rows of an Iceberg dataset window by window only with \
                 `target.write: append`",
                spec.target.write
            ),
        });
    }
    let source = spec.source_name();
    let folder = format!("{STREAMS_PREFIX}{}/{source}/", spec.pipeline);
    let mut through = BTreeMap::new();
    for key in store.list(&folder).await? {
        let Some(shard) = key.strip_prefix(&folder).and_then(|name| name.strip_suffix(".json")) else { continue };
        if shard.contains('/') {
            continue;
        }
        let checkpoint = read_checkpoint(store, &key).await?;
        if let Some(pending) = checkpoint.pending.as_ref().filter(|p| p.in_flight(now)) {
            return Err(PersistError::Stream {
                field: key.clone(),
                problem: format!(
                    "batch {}..{} of shard {shard} is in flight: a live event source mapping is still writing \
                     pipeline {}; disable it (aws lambda update-event-source-mapping --uuid … --no-enabled), \
                     let its last batch end, then begin the replay",
                    pending.first, pending.last, spec.pipeline
                ),
            });
        }
        let last = [checkpoint.through, checkpoint.pending.map(|p| p.last)]
            .into_iter()
            .flatten()
            .max_by(|a, b| sequence_cmp(a, b));
        if let Some(last) = last {
            through.insert(shard.to_string(), last);
        }
    }
    let replay = if spec.target.table_format == TableFormat::Iceberg {
        let mut replaced = window_runs(&spec.pipeline, store).await?;
        // A replay begun before and not finished: the table still holds
        // the rows of its originals not yet replayed, whose ledgers it
        // forgot.
        if let Some(earlier) = read_replay(spec, store).await? {
            replaced.extend(earlier.replaced);
            for (shard, last) in earlier.through {
                let entry = through.entry(shard).or_insert_with(|| last.clone());
                if sequence_cmp(&last, entry).is_gt() {
                    *entry = last;
                }
            }
        }
        replaced.sort();
        replaced.dedup();
        let replay = StreamReplay {
            token: format!("{REPLAY_TOKEN_PREFIX}{}", now.format("%Y%m%dT%H%M%SZ")),
            began_at: Some(now),
            replaced,
            through,
        };
        tributary_core::ledger::write_record(store, &replay_key(&spec.pipeline, source), &replay).await?;
        Some(replay)
    } else {
        None
    };
    forget_history(spec, store).await?;
    Ok(replay)
}

/// The pipeline's stream window runs in the lake's ledger
/// (`_runs/<pipeline>/s-…`), each once, sorted.
///
/// # Errors
/// Store failures.
pub async fn window_runs(pipeline: &str, store: &dyn ObjectStore) -> Result<Vec<RunId>, PersistError> {
    let prefix = format!("{}{pipeline}/s-", tributary_core::keys::RUNS_PREFIX);
    let mut runs: Vec<RunId> = store
        .list(&prefix)
        .await?
        .iter()
        .filter_map(|key| key.strip_prefix(tributary_core::keys::RUNS_PREFIX)?.split('/').nth(1))
        .filter_map(|run| RunId::new(run).ok())
        .collect();
    runs.sort();
    runs.dedup();
    Ok(runs)
}

/// Key of the pipeline's superseded stream windows:
/// `_streams/<pipeline>/superseded-runs.json`, a sorted JSON array of run
/// ids. Every Kappa replay adds the windows it forgets
/// ([`forget_history`]); the record is never pruned, as their raw pages
/// stay in `raw/` as the stream's history.
pub fn superseded_key(pipeline: &str) -> String {
    format!("{STREAMS_PREFIX}{pipeline}/superseded-runs.json")
}

/// The pipeline's stream windows that a Kappa replay forgot, sorted (empty
/// when it never had one). A raw page of such a window that the ledger
/// does not hold again (the replay re-derived no page of that run and
/// number) is history only: its records are in the table as the replay
/// read them, so `tributary replay` leaves it where it is.
///
/// # Errors
/// Store failures; an unreadable record.
pub async fn superseded_runs(pipeline: &str, store: &dyn ObjectStore) -> Result<Vec<RunId>, PortError> {
    Ok(tributary_core::ledger::read_record(store, &superseded_key(pipeline)).await?.unwrap_or_default())
}

/// Removes the pipeline's stream history, so the stream read again writes
/// the dataset anew: its files in the dataset folder
/// (`<pipeline>-s-*.parquet`: a Parquet dataset's data, an Iceberg
/// dataset's staged files, which no table reader reads), its windows'
/// ledgers (`_runs/<pipeline>/s-…`) and the shard checkpoints. An Iceberg
/// table itself is not touched. The windows forgotten are added first to
/// the pipeline's superseded runs ([`superseded_key`]); their raw pages
/// (`raw/<dataset>/…`) are kept, as the only history past the stream's
/// retention.
///
/// # Errors
/// Store failures.
pub async fn forget_history(spec: &StreamSpec, store: &dyn ObjectStore) -> Result<(), PersistError> {
    let forgotten = window_runs(&spec.pipeline, store).await?;
    if !forgotten.is_empty() {
        let mut superseded = superseded_runs(&spec.pipeline, store).await?;
        superseded.extend(forgotten);
        superseded.sort();
        superseded.dedup();
        tributary_core::ledger::write_record(store, &superseded_key(&spec.pipeline), &superseded).await?;
    }
    let own_file = format!("{}-s-", spec.pipeline);
    let mut doomed: Vec<String> = store
        .list(&format!("{}/", spec.target.dataset))
        .await?
        .into_iter()
        .filter(|key| key.rsplit('/').next().is_some_and(|name| name.starts_with(&own_file)))
        .collect();
    doomed.extend(store.list(&format!("{}{}/s-", tributary_core::keys::RUNS_PREFIX, spec.pipeline)).await?);
    doomed.extend(store.list(&format!("{STREAMS_PREFIX}{}/{}/", spec.pipeline, spec.source_name())).await?);
    for key in doomed {
        store.delete(&key).await?;
    }
    Ok(())
}

/// `records` of one shard split before each boundary
/// ([`StreamReplay::boundary_before`]) but the first record, so each
/// segment is a page of one replayed window, and a window can close
/// between two segments.
pub fn segments<'a, 'r>(
    replay: &StreamReplay,
    source: &str,
    partition: &str,
    records: &'a [&'r StreamRecord],
) -> Vec<&'a [&'r StreamRecord]> {
    let mut out = Vec::new();
    let mut start = 0;
    for (index, record) in records.iter().enumerate().skip(1) {
        let previous_past = replay.after_originals(partition, &records[index - 1].sequence);
        let boundary = replay.original_started_by(source, partition, &record.sequence).is_some()
            || (!previous_past && replay.after_originals(partition, &record.sequence));
        if boundary {
            out.push(&records[start..index]);
            start = index;
        }
    }
    if start < records.len() {
        out.push(&records[start..]);
    }
    out
}
