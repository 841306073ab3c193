//! A Kappa replay of a stream pipeline into an Iceberg dataset
//! (`tributary run SPEC --from-trim-horizon`): the stream is read again
//! from TRIM_HORIZON through the same code, and the replayed window lands
//! in ONE snapshot that replaces the pipeline's rows, so readers see the
//! old table until it commits and the new one after, never a half.
//!
//! 1. [`Replay::begin`]: refuses what it cannot replay whole (`target.write`
//!    other than `append`), and notes the pipeline's stream runs in the
//!    lake's ledger (`_runs/<pipeline>/s-…`), whose rows the snapshot
//!    replaces, in a record ([`record_key`]) that outlives a replay
//!    stopped before its commit.
//! 2. The poll runs with [`SetAside`] as Persist's table committer: each
//!    shard window completes in the ledger as usual (same run ids, keys and
//!    staged files as a first ingestion), but its staged files are set
//!    aside instead of committed, so the table does not change.
//! 3. [`Replay::commit`]: when every shard was read whole (no batch given
//!    up, no window left open), the set-aside files of every window are one
//!    `RunFiles` whose replay (`TableCommitter::replay_run`, the committer's
//!    `replace_run`: copy-on-write removal of the replaced runs' rows, the
//!    staged files added) is one `overwrite` snapshot carrying
//!    `tributary.replay=true`; the staged files are deleted after it.
//!
//! A replay that dies before step 3 leaves the table as it was and staged
//! files in the dataset folder that no table reader reads; running it
//! again removes them (the pipeline's stream history is forgotten first)
//! and replays anew. One that dies after the commit, before the staged
//! files are deleted, has its new table; running it again commits the same
//! rows again in another snapshot.

use std::sync::Mutex;

use contracts::stream::StreamSpec;
use contracts::{RunId, TableFormat, WriteDisposition};
use tributary_core::ports::{ObjectStore, PortError};
use tributary_core::tables::{CommittedRun, RunFiles, TableCommitter};

use crate::stream::StreamRunError;

/// Prefix of a Kappa replay snapshot's run id (`tributary.run-id`):
/// `kappa-<UTC time of the commit, to the second>`, told apart from every
/// stream window's `s-…` and every scheduled run's time.
pub const REPLAY_RUN_PREFIX: &str = "kappa-";

/// Key of a replay's record of the runs whose rows it replaces:
/// `_streams/<pipeline>/<stream>.kappa.json` (beside the shards'
/// checkpoint folder, which the replay removes).
pub fn record_key(spec: &StreamSpec) -> String {
    format!("{}{}/{}.kappa.json", persist::stream::STREAMS_PREFIX, spec.pipeline, spec.source_name())
}

/// Persist's table committer during a Kappa replay: a completed window's
/// staged files are kept for the replay's one snapshot, not committed.
#[derive(Debug, Default)]
pub struct SetAside {
    /// Each window's run and staged keys, in completion order.
    runs: Mutex<Vec<(RunId, Vec<String>)>>,
}

#[async_trait::async_trait]
impl TableCommitter for SetAside {
    /// Keeps the window's staged files for [`Replay::commit`] (a window
    /// completed twice, by a retried close, is kept once).
    ///
    /// # Errors
    /// [`PortError::Transient`] when a thread panicked holding the list.
    async fn commit_run(&self, run: &RunFiles) -> Result<CommittedRun, PortError> {
        let mut runs = self
            .runs
            .lock()
            .map_err(|_| PortError::transient_msg("set a replayed window aside", run.run_id.to_string(), "poisoned"))?;
        runs.retain(|(id, _)| *id != run.run_id);
        runs.push((run.run_id.clone(), run.files.iter().map(|f| f.key.clone()).collect()));
        Ok(CommittedRun { snapshot_id: 0, files: Vec::new(), already_committed: false, notes: Vec::new() })
    }
}

/// A Kappa replay of an Iceberg dataset in progress.
#[derive(Debug)]
pub struct Replay {
    /// The pipeline's stream runs in the lake before the replay.
    replaced: Vec<RunId>,
    /// The replayed windows' staged files.
    pub set_aside: SetAside,
}

impl Replay {
    /// Step 1, before the pipeline's stream history is forgotten: the runs
    /// to replace are the pipeline's stream runs in the ledger and those a
    /// replay that stopped before its commit recorded, kept in the lake
    /// ([`record_key`]) until this replay commits.
    ///
    /// # Errors
    /// [`StreamRunError::Source`] naming `target.write` and its value when
    /// it is not `append` (a `replace` or `merge` table's rows depend on
    /// the order its runs committed in, which one snapshot of every window
    /// does not keep); [`PortError`] from the lake.
    pub async fn begin(spec: &StreamSpec, store: &dyn ObjectStore) -> Result<Self, StreamRunError> {
        debug_assert_eq!(spec.target.table_format, TableFormat::Iceberg);
        if spec.target.write != WriteDisposition::Append {
            return Err(StreamRunError::Source(format!(
                "--from-trim-horizon replays an Iceberg dataset in one snapshot only with `target.write: append`; \
                 target.write is {} in {}: re-create the table instead",
                spec.target.write, spec.target.dataset
            )));
        }
        let mut replaced = persist::stream_replay::window_runs(&spec.pipeline, store).await?;
        // A replay that stopped before its commit forgot the ledgers of the
        // runs whose rows the table still holds: its record names them.
        let record = record_key(spec);
        let earlier: Option<Vec<RunId>> = tributary_core::ledger::read_record(store, &record).await?;
        replaced.extend(earlier.unwrap_or_default());
        replaced.sort();
        replaced.dedup();
        tributary_core::ledger::write_record(store, &record, &replaced).await?;
        Ok(Self { replaced, set_aside: SetAside::default() })
    }

    /// Step 3: the replayed windows in one snapshot of `tables` replacing
    /// the rows of the pipeline's earlier runs and of the replayed ones;
    /// then the replay's record is deleted from `store` (the lake).
    /// `open_shards` names shards that did not end whole (a batch given up,
    /// a window left open): then nothing is committed. A table that does
    /// not exist yet gets the windows as its first (append) snapshot.
    ///
    /// # Errors
    /// [`StreamRunError::Source`] for an incomplete replay (the table is
    /// left as it was); [`PortError`] from the catalog, the lake or the
    /// committer (a conflict with another writer is planned again by it).
    pub async fn commit(
        self,
        spec: &StreamSpec,
        tables: &tributary_iceberg::LocalCommitter,
        store: &dyn ObjectStore,
        open_shards: &[String],
    ) -> Result<CommittedRun, StreamRunError> {
        if !open_shards.is_empty() {
            return Err(StreamRunError::Source(format!(
                "the replay did not read {} whole (a batch given up, or a window left open): the table {} is left \
                 as it was; see `tributary status` and run the replay again",
                open_shards.join(", "),
                spec.target.dataset
            )));
        }
        let runs = self.set_aside.runs.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        let keys: Vec<String> = runs.iter().flat_map(|(_, keys)| keys.iter().cloned()).collect();
        let mut replaces = self.replaced;
        replaces.extend(runs.into_iter().map(|(run, _)| run));
        replaces.sort();
        replaces.dedup();
        let id = format!("{REPLAY_RUN_PREFIX}{}", chrono::Utc::now().format("%Y%m%dT%H%M%SZ"));
        let run_id = RunId::new(id.clone()).map_err(|err| PortError::permanent("name the replay", &id, err))?;
        let run = RunFiles::new(&spec.target.dataset, &spec.pipeline, &run_id, &keys).with_replaces(replaces);
        let committer = tables.committer().await?;
        let exists = iceberg::Catalog::table_exists(committer.catalog(), &committer.table_ident(&spec.target.dataset))
            .await
            .map_err(|err| PortError::transient("look the table up", &spec.target.dataset, err))?;
        let done = if exists { tables.replay_run(&run).await? } else { tables.commit_run(&run).await? };
        tracing::info!(snapshot_id = done.snapshot_id, files = keys.len(), "the replay committed in one snapshot");
        if let Err(err) = store.delete(&record_key(spec)).await {
            tracing::warn!(error = %err, "the replay's record stays; the next replay replaces those runs' rows too");
        }
        Ok(done)
    }
}
