//! Table formats: the port through which a run's staged Parquet files
//! become part of a table in one commit (`target.table_format: iceberg`).
//!
//! Persist stages an Iceberg dataset's pages exactly as Parquet pages
//! (same keys); when it completes the run it hands every staged file to a
//! [`TableCommitter`] instead of coalescing them. The implementations live
//! in `tributary-iceberg`, which Persist's library does not depend on (only
//! its Lambda binary, feature `lambda`, for the Glue committer).
//!
//! Under at-least-once delivery a completion may run twice, or two may
//! race: committers make `commit_run` idempotent per (pipeline, run), and
//! guard the commit with a claim object ([`claim_commit`]).

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use contracts::RunId;
use serde::{Deserialize, Serialize};

use crate::keys;
use crate::ports::{ObjectStore, PortError};

/// One staged Parquet file of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedFile {
    /// Its lake key (`<dataset>/<partition>/<pipeline>-<run_id>-<page>….parquet`).
    pub key: String,
    /// Its Hive partition folder under the dataset, as written
    /// (`dt=2026-11-01`, `dt=2026-11-01/hour=07`, `country=S%C3o` escapes
    /// and all).
    pub partition: String,
}

/// What a completed run hands to a [`TableCommitter`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunFiles {
    /// Dataset (the table's name).
    pub dataset: String,
    /// Pipeline.
    pub pipeline: String,
    /// Run id.
    pub run_id: RunId,
    /// Every staged file of the run, in page order.
    pub files: Vec<StagedFile>,
    /// Key of the dataset's published Arrow schema (`_schema/<dataset>.arrow`).
    pub schema_key: String,
    /// How the run changes the table (`target.write`).
    pub write: RunWrite,
    /// The re-run token when the run is a completed run re-run
    /// ([`crate::rerun`]): its commit replaces the run's rows in the table
    /// (as a replay does) in a snapshot naming the token, and a snapshot
    /// naming the token means committed already.
    pub rerun: Option<String>,
    /// For a replay ([`TableCommitter::replay_run`]): the runs whose rows
    /// the replay's files replace (`_tributary_run_id`), when they are
    /// other runs than `run_id` itself: a stream's replay from its start,
    /// whose many window runs become one snapshot. Empty: `run_id`'s rows.
    pub replaces: Vec<RunId>,
}

/// How a run's commit changes its table: the spec's `target.write` with
/// its merge keys ([`contracts::WriteDisposition`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RunWrite {
    /// Add the run's rows (a `fast_append` snapshot).
    #[default]
    Append,
    /// The run's rows become the whole table (an `overwrite` snapshot that
    /// removes every file the table had).
    Replace,
    /// One row per key, the latest (an `overwrite` snapshot, copy-on-write).
    Merge {
        /// RFC 6901 pointers into the record (`target.primary_key`).
        primary_key: Vec<String>,
        /// Pointer whose greatest value wins (`target.order_by`).
        order_by: Option<String>,
        /// Pointer whose `true` or non-null text removes the key (`target.hard_delete`).
        hard_delete: Option<String>,
    },
}

impl RunWrite {
    /// The write of a dataset's `target`.
    pub fn of(target: &contracts::PersistTarget) -> Self {
        match target.write {
            contracts::WriteDisposition::Append => Self::Append,
            contracts::WriteDisposition::Replace => Self::Replace,
            contracts::WriteDisposition::Merge => Self::Merge {
                primary_key: target.primary_key.clone(),
                order_by: target.order_by.clone(),
                hard_delete: target.hard_delete.clone(),
            },
        }
    }
}

impl RunFiles {
    /// A run's staged `keys` of `dataset`, each with the partition folder
    /// between the dataset folder and the file name.
    pub fn new(dataset: &str, pipeline: &str, run_id: &RunId, keys: &[String]) -> Self {
        let prefix = format!("{dataset}/");
        let files = keys
            .iter()
            .map(|key| {
                let inside = key.strip_prefix(&prefix).unwrap_or(key);
                let partition = inside.rsplit_once('/').map_or("", |(folder, _)| folder);
                StagedFile { key: key.clone(), partition: partition.to_string() }
            })
            .collect();
        Self {
            dataset: dataset.to_string(),
            pipeline: pipeline.to_string(),
            run_id: run_id.clone(),
            files,
            schema_key: keys::arrow_schema_key(dataset),
            write: RunWrite::Append,
            rerun: None,
            replaces: Vec::new(),
        }
    }

    /// The same run, committed as `write` says.
    #[must_use]
    pub fn with_write(mut self, write: RunWrite) -> Self {
        self.write = write;
        self
    }

    /// The same run, committed as the re-run `token` ([`RunFiles::rerun`]).
    #[must_use]
    pub fn with_rerun(mut self, token: Option<String>) -> Self {
        self.rerun = token;
        self
    }

    /// The same run, replaying the rows of `runs` ([`RunFiles::replaces`]).
    #[must_use]
    pub fn with_replaces(mut self, runs: Vec<RunId>) -> Self {
        self.replaces = runs;
        self
    }

    /// The run ids whose rows a replay of this run replaces: `replaces`,
    /// or the run's own id.
    pub fn replaced_run_ids(&self) -> Vec<String> {
        if self.replaces.is_empty() {
            return vec![self.run_id.to_string()];
        }
        self.replaces.iter().map(ToString::to_string).collect()
    }
}

/// What a commit left in the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedRun {
    /// The snapshot holding the run.
    pub snapshot_id: i64,
    /// The data files the snapshot added (their locations, e.g.
    /// `file:///…/data/dt=2026-11-01/<pipeline>-<run>-<id>-00000.parquet`).
    pub files: Vec<String>,
    /// Whether the snapshot existed before this call (a completion
    /// delivered again): nothing was written.
    pub already_committed: bool,
    /// What the commit found worth a data engineer's look, one line each
    /// (a merge's rows without a key, versions it could not rank,
    /// `hard_delete` text it could not read); they reach the run's
    /// manifest and run-completed event ([`crate::ledger::Manifest::table_notes`]).
    pub notes: Vec<String>,
}

/// Commits a run's staged files to its dataset's table, in one snapshot.
#[async_trait]
pub trait TableCommitter: Send + Sync {
    /// Commits every file of `run` in one snapshot naming the run, creating
    /// the table or adding the columns it lacks first, then deletes the
    /// staged files. Idempotent: when a snapshot of the run exists,
    /// returns it and writes nothing. A re-run ([`RunFiles::rerun`]) is
    /// committed when no snapshot names its token: the run's rows in the
    /// table replaced as [`TableCommitter::replay_run`] does. A re-run
    /// with [`RunFiles::replaces`] (a replayed stream window) replaces
    /// those runs' rows whether or not its own run has a snapshot.
    ///
    /// # Errors
    /// [`PortError::Transient`] while another completion holds the run's
    /// claim, or for catalog and store hiccups; [`PortError::Permanent`]
    /// for files or schemas the table cannot take.
    async fn commit_run(&self, run: &RunFiles) -> Result<CommittedRun, PortError>;

    /// Commits a completed run's pages persisted again (`tributary
    /// replay`) in one new snapshot that replaces the run's rows in the
    /// table (`append`, `replace`) or merges them again (`merge`, which
    /// needs `order_by`), then deletes the staged files. Not idempotent:
    /// each call is one snapshot (an operator's command, not a delivery).
    ///
    /// # Errors
    /// [`PortError::Permanent`] when the committer cannot replay (the
    /// default) or the run cannot be replayed safely (named); store and
    /// catalog failures.
    async fn replay_run(&self, run: &RunFiles) -> Result<CommittedRun, PortError> {
        Err(PortError::permanent_msg(
            "replay the run into its table",
            run.dataset.clone(),
            "this table committer cannot replay runs",
        ))
    }
}

/// A claim older than this without its snapshot is taken as abandoned
/// (its writer died) and may be taken over: Lambda's longest invocation
/// (15 minutes, the function time-out's maximum in the Lambda quotas).
/// Sooner when the claim's [`ClaimHolder`] is known dead.
pub const CLAIM_EXPIRY: Duration = Duration::from_secs(15 * 60);

/// The body of a commit claim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitClaim {
    /// Pipeline.
    pub pipeline: String,
    /// Run id.
    pub run_id: RunId,
    /// When the claim was made.
    pub claimed_at: DateTime<Utc>,
    /// The process that made it, where it can tell (Linux); absent in
    /// claims written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<ClaimHolder>,
}

/// The process holding a commit claim: its machine's boot (Linux's
/// `/proc/sys/kernel/random/boot_id`, one per boot of a machine or a
/// Lambda sandbox's micro-VM) and its process id. A claim made on this
/// boot by a process that no longer runs (a `tributary run` killed, or
/// stopped by Ctrl-C or SIGTERM in the middle of a commit) is taken over
/// at once rather than after [`CLAIM_EXPIRY`]: a trial's stream stopped
/// by SIGTERM left every next run's batches failing for 15 minutes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimHolder {
    /// The boot id of the holder's machine.
    pub boot_id: String,
    /// The holder's process id.
    pub pid: u32,
}

impl ClaimHolder {
    /// This process, on a system that says its boot id (Linux).
    pub fn this_process() -> Option<Self> {
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        Some(Self { boot_id: boot_id.trim().to_string(), pid: std::process::id() })
    }

    /// Whether this holder is known to have ended: it ran on this boot,
    /// is not this process, and no process has its id any more. `false`
    /// whenever that cannot be told (another machine or boot): then only
    /// [`CLAIM_EXPIRY`] ends its claim. (A process id reused since reads
    /// as alive: the claim then waits for its expiry, as before.)
    pub fn is_gone(&self) -> bool {
        let Some(this) = Self::this_process() else { return false };
        this.boot_id == self.boot_id
            && this.pid != self.pid
            && !std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
    }
}

/// Whether this writer may commit the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claimed {
    /// The claim is this writer's (new, or taken over from an expired one).
    Mine,
    /// Another writer claimed the run less than [`CLAIM_EXPIRY`] ago.
    Held {
        /// When it did.
        since: DateTime<Utc>,
    },
}

/// Claims the commit of `pipeline`'s run `run_id`: creates
/// `_runs/<pipeline>/<run_id>/iceberg-commit.json` if absent, or takes over
/// a claim older than [`CLAIM_EXPIRY`], or one whose holder has ended
/// ([`ClaimHolder::is_gone`]), with a compare-and-swap on its version. The caller checks for the run's snapshot before and, when the
/// claim is [`Claimed::Held`], again after.
///
/// # Errors
/// [`PortError`] from the store; an unreadable claim is taken over.
pub async fn claim_commit(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
    now: DateTime<Utc>,
) -> Result<Claimed, PortError> {
    let key = keys::table_commit_claim_key(pipeline, run_id);
    let claim = CommitClaim {
        pipeline: pipeline.to_string(),
        run_id: run_id.clone(),
        claimed_at: now,
        holder: ClaimHolder::this_process(),
    };
    let body = Bytes::from(
        serde_json::to_vec(&claim).map_err(|err| PortError::permanent("encode the commit claim", key.clone(), err))?,
    );
    if store.put_if(&key, body.clone(), None).await? {
        return Ok(Claimed::Mine);
    }
    let Some((existing, version)) = store.get_versioned(&key).await? else {
        // Deleted between the two calls: try once more.
        return Ok(if store.put_if(&key, body, None).await? { Claimed::Mine } else { Claimed::Held { since: now } });
    };
    let existing = serde_json::from_slice::<CommitClaim>(&existing).ok();
    let since = existing.as_ref().map(|c| c.claimed_at);
    let gone = existing.and_then(|c| c.holder).is_some_and(|holder| holder.is_gone());
    let expiry = chrono::Duration::from_std(CLAIM_EXPIRY).unwrap_or(chrono::Duration::MAX);
    match since {
        Some(since) if now.signed_duration_since(since) < expiry && !gone => Ok(Claimed::Held { since }),
        _ => {
            tracing::warn!(key, ?since, gone, "taking over an expired commit claim, or one whose process has ended");
            Ok(if store.put_if(&key, body, Some(&version)).await? {
                Claimed::Mine
            } else {
                Claimed::Held { since: now }
            })
        }
    }
}

/// Releases this writer's claim on the commit of `pipeline`'s run `run_id`
/// (made at `claimed_at`) after its commit attempt failed, so the retry
/// need not wait [`CLAIM_EXPIRY`]: deletes the claim if it is still the
/// one made then (not one another writer took over since). A retry first
/// looks for the run's snapshot, so an attempt that committed and then
/// failed commits nothing twice.
///
/// # Errors
/// [`PortError`] from the store.
pub async fn release_claim(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
    claimed_at: DateTime<Utc>,
) -> Result<(), PortError> {
    let key = keys::table_commit_claim_key(pipeline, run_id);
    let Some((existing, _)) = store.get_versioned(&key).await? else { return Ok(()) };
    match serde_json::from_slice::<CommitClaim>(&existing) {
        Ok(claim) if claim.claimed_at == claimed_at => store.delete(&key).await,
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_files_carry_their_partition_folder() {
        let run_id = RunId::new("r1").expect("run id");
        let run = RunFiles::new(
            "orders",
            "p",
            &run_id,
            &["orders/dt=2026-11-01/hour=07/p-r1-00000.parquet".into(), "orders/p-r1-00001.parquet".into()],
        );
        assert_eq!(run.files[0].partition, "dt=2026-11-01/hour=07");
        assert_eq!(run.files[1].partition, "");
        assert_eq!(run.schema_key, "_schema/orders.arrow");
    }
}
