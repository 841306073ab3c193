//! The run commit: a completed run's staged Parquet files become one
//! fast-append snapshot of the dataset's table (`tributary.<dataset>`).
//!
//! Steps ([`IcebergCommitter::commit_run`]): find the run's snapshot (its
//! summary names the pipeline and run id; found, nothing is done); claim
//! the commit ([`tributary_core::tables::claim_commit`]); create the table
//! from the published Arrow schema, or add the columns it lacks, a family
//! of scalar columns new to the table decided by the run's majority
//! (`IcebergCommitter::decided_schema`); read each
//! staged file, align it to the table's schema and add its partition
//! columns from its folder; write it with iceberg's writer stack (zstd);
//! append every data file in one snapshot; delete the staged files.
//!
//! The Hive partition columns are real columns, partitioned by `identity`:
//! the folder's value is the partition (`dt` a `date`, `hour` an `int`, a
//! `value` column a `string`). `target.partition_by` adds `day()`/`hour()`
//! transforms of a timestamp column after them (`time_partitions`): the
//! writers compute each row's value from the column itself (iceberg's
//! `RecordBatchPartitionSplitter`), so a file's partition value always
//! agrees with its rows, and readers prune on the column.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow_array::new_null_array;
use arrow_array::{ArrayRef, Date32Array, Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema as ArrowSchema, SchemaRef, TimeUnit};
use async_trait::async_trait;
use contracts::{RunId, TimeTransform};
use iceberg::arrow::{arrow_schema_to_schema_auto_assign_ids, schema_to_arrow_schema};
use iceberg::spec::{DataFile, ManifestStatus, Operation, SnapshotRef, Transform, Type, UnboundPartitionSpec};
use iceberg::table::Table;
use iceberg::transaction::{AddColumn, ApplyTransactionAction, Transaction};
use iceberg::{Catalog, ErrorKind, NamespaceIdent, TableCreation, TableIdent};
use lake_format::align::{Cast, align};
use lake_format::lineage::LINEAGE_COLUMNS;
use lake_format::meta::{
    META_LINEAGE, META_PARTITION, META_PARTITION_BY, META_PARTITION_KIND, META_SOURCE, META_VARIANT_OF,
};
use lake_format::partition;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tributary_core::ports::{ObjectStore, PortError};
use tributary_core::tables::{
    Claimed, CommittedRun, RunFiles, RunWrite, StagedFile, TableCommitter, claim_commit, release_claim,
};

use crate::files::{TableWriter, data_folder, delete_files, live_files, read_data_file};
use crate::merge::{KeyEncoder, KeyRange, MergeColumns, Plan};

/// The namespace every dataset's table lives in, in the local catalog (on
/// AWS: the stack's Glue database, [`IcebergCommitter::with_namespace`]).
pub const NAMESPACE: &str = "tributary";

/// Snapshot summary property: the run the snapshot commits.
pub const RUN_ID_PROPERTY: &str = "tributary.run-id";

/// Snapshot summary property: `true` on a replayed run's snapshot.
pub const REPLAY_PROPERTY: &str = "tributary.replay";

/// Snapshot summary property of a completed run re-run at its scheduled
/// time (`tributary_core::rerun`): the re-run's token. A snapshot naming
/// the token is the re-run committed.
pub const RERUN_PROPERTY: &str = "tributary.rerun";

/// Snapshot summary property: the pipeline of that run.
pub const PIPELINE_PROPERTY: &str = "tributary.pipeline";

/// Commits runs to Iceberg tables in `catalog`, reading the staged files
/// and the published schema from `store` (the lake).
pub struct IcebergCommitter {
    catalog: Arc<dyn Catalog>,
    store: Arc<dyn ObjectStore>,
    namespace: NamespaceIdent,
    /// Where new tables go (`<root>/<namespace>/<table>`); `None`: where
    /// the catalog puts them.
    location_root: Option<String>,
    /// What is asked of each table once per process after a commit (Glue's
    /// table optimizers on AWS); `None`: nothing.
    housekeeping: Option<Arc<dyn TableHousekeeping>>,
    /// The tables [`IcebergCommitter::housekeeping`] succeeded for.
    housekept: std::sync::Mutex<HashSet<String>>,
}

/// Upkeep a catalog does for a table (compaction, snapshot expiry,
/// orphan-file deletion), asked for after a run commits to it: once per
/// table per process while it succeeds. A failure is logged and asked
/// again at the next commit; it never fails the commit (the table reads
/// the same without upkeep, only its small files and old snapshots stay).
#[async_trait]
pub trait TableHousekeeping: Send + Sync {
    /// Makes sure the upkeep of `table` is on; already on is success.
    ///
    /// # Errors
    /// Why it could not (the catalog's answer), to be logged.
    async fn ensure(&self, table: &TableIdent) -> Result<(), String>;
}

impl IcebergCommitter {
    /// A committer over `catalog` and the lake `store`.
    pub fn new(catalog: Arc<dyn Catalog>, store: Arc<dyn ObjectStore>) -> Self {
        Self {
            catalog,
            store,
            namespace: NamespaceIdent::new(NAMESPACE.to_string()),
            location_root: None,
            housekeeping: None,
            housekept: std::sync::Mutex::default(),
        }
    }

    /// The same committer, asking `housekeeping` for each table it commits
    /// to ([`TableHousekeeping`]).
    #[must_use]
    pub fn with_housekeeping(mut self, housekeeping: Arc<dyn TableHousekeeping>) -> Self {
        self.housekeeping = Some(housekeeping);
        self
    }

    /// Asks [`IcebergCommitter::housekeeping`] for `ident` unless it
    /// succeeded in this process already; logs a failure.
    async fn housekeep(&self, ident: &TableIdent) {
        let Some(housekeeping) = &self.housekeeping else { return };
        let key = ident.to_string();
        if self.housekept.lock().is_ok_and(|done| done.contains(&key)) {
            return;
        }
        match housekeeping.ensure(ident).await {
            Ok(()) => {
                if let Ok(mut done) = self.housekept.lock() {
                    done.insert(key);
                }
            }
            Err(problem) => {
                tracing::warn!(table = %ident, problem = %problem, "could not turn the table's upkeep on; asking again at its next commit");
            }
        }
    }

    /// The same committer, with the tables in `namespace` (a Glue database
    /// name on AWS) rather than [`NAMESPACE`].
    #[must_use]
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = NamespaceIdent::new(namespace.into());
        self
    }

    /// The same committer, creating each new table at
    /// `<root>/<namespace>/<table>` (e.g. `s3://<lake>/_iceberg/warehouse`),
    /// not where the catalog would: the Glue catalog would put it under
    /// the database's `LocationUri`, the lake bucket's root, where the
    /// dataset's Hive folders are.
    #[must_use]
    pub fn with_location_root(mut self, root: impl Into<String>) -> Self {
        self.location_root = Some(root.into().trim_end_matches('/').to_string());
        self
    }

    /// The table of `dataset` in this committer's namespace.
    pub fn table_ident(&self, dataset: &str) -> TableIdent {
        TableIdent::new(self.namespace.clone(), dataset.to_string())
    }

    /// The catalog.
    pub fn catalog(&self) -> &dyn Catalog {
        self.catalog.as_ref()
    }
}

/// The table of `dataset`.
pub fn table_ident(dataset: &str) -> TableIdent {
    TableIdent::new(NamespaceIdent::new(NAMESPACE.to_string()), dataset.to_string())
}

#[async_trait]
impl TableCommitter for IcebergCommitter {
    #[tracing::instrument(skip_all, fields(dataset = %run.dataset, pipeline = %run.pipeline, run_id = %run.run_id))]
    async fn replay_run(&self, run: &RunFiles) -> Result<CommittedRun, PortError> {
        self.replay(run).await
    }

    #[tracing::instrument(skip_all, fields(dataset = %run.dataset, pipeline = %run.pipeline, run_id = %run.run_id))]
    async fn commit_run(&self, run: &RunFiles) -> Result<CommittedRun, PortError> {
        let ident = self.table_ident(&run.dataset);
        let target = ident.to_string();
        if let Some(done) = self.committed(&ident, run).await? {
            tracing::info!(snapshot_id = done.snapshot_id, "the run is committed already");
            // A completion that died between its commit and the deletes.
            self.delete_staged(run).await?;
            return Ok(done);
        }
        let claimed_at = chrono::Utc::now();
        match claim_commit(self.store.as_ref(), &run.pipeline, &run.run_id, claimed_at).await? {
            Claimed::Mine => {}
            Claimed::Held { since } => {
                // The holder may have committed between our look and claim.
                if let Some(done) = self.committed(&ident, run).await? {
                    return Ok(done);
                }
                return Err(PortError::transient_msg(
                    "commit the run to its table",
                    target,
                    format!(
                        "another completion of the run has held its commit claim since {since} (a failed attempt \
                         releases it; one whose process ended on this machine is taken over at once, any other \
                         after {} minutes)",
                        tributary_core::tables::CLAIM_EXPIRY.as_secs() / 60
                    ),
                ));
            }
        }
        match self.commit_claimed(&ident, run).await {
            Ok(done) => {
                self.housekeep(&ident).await;
                Ok(done)
            }
            Err(err) => {
                // The retry must not wait for the claim to expire, and must
                // see this attempt's own error, not "held".
                if let Err(release) = release_claim(self.store.as_ref(), &run.pipeline, &run.run_id, claimed_at).await {
                    tracing::warn!(error = %release, "could not release the commit claim");
                }
                Err(err)
            }
        }
    }
}

impl IcebergCommitter {
    /// [`TableCommitter::replay_run`]: the run's rows swapped in one
    /// `overwrite` snapshot ([`IcebergCommitter::swap_run`]), or merged
    /// again; the snapshot's summary carries `tributary.replay=true`.
    async fn replay(&self, run: &RunFiles) -> Result<CommittedRun, PortError> {
        self.replace_run(run, (REPLAY_PROPERTY, "true")).await
    }

    /// The run's rows in the table replaced by its staged files: swapped,
    /// or merged again; the snapshot's summary carries `marker` (the
    /// replay's or the re-run's property) beside the run's.
    async fn replace_run(&self, run: &RunFiles, marker: (&str, &str)) -> Result<CommittedRun, PortError> {
        let ident = self.table_ident(&run.dataset);
        let target = ident.to_string();
        if let RunWrite::Merge { order_by: None, .. } = &run.write {
            return Err(PortError::permanent_msg(
                "replay the run into its table",
                target,
                "a merge table without target.order_by cannot be replayed or re-run: the run's versions would \
                 replace newer versions from later runs",
            ));
        }
        let others = self.other_pipelines_with_run_id(&ident, run).await?;
        if !others.is_empty() {
            return Err(PortError::permanent_msg(
                "replay the run into its table",
                target,
                format!(
                    "pipelines {} also committed a run {} to this table; rows are told apart by \
                     _tributary_run_id only, so replaying one would replace the others' rows",
                    others.join(", "),
                    run.run_id
                ),
            ));
        }
        let published = self.published_schema(&run.schema_key).await?;
        let mut table = self.table_for(&ident, &published, run).await?;
        let mut properties = HashMap::from([
            (RUN_ID_PROPERTY.to_string(), run.run_id.to_string()),
            (PIPELINE_PROPERTY.to_string(), run.pipeline.clone()),
        ]);
        properties.insert(marker.0.to_string(), marker.1.to_string());
        if !run.replaces.is_empty() {
            properties.insert(REPLAY_PROPERTY.to_string(), "true".to_string());
        }
        let mut attempt = 1;
        loop {
            let change = match &run.write {
                RunWrite::Merge { .. } => self.merge(&table, run, &published, true).await?,
                _ => self.swap_run(&table, run).await?,
            };
            let added: Vec<String> = change.added.iter().map(|f| f.file_path().to_string()).collect();
            let notes = change.notes.clone();
            match change.commit(&table, self.catalog.as_ref(), properties.clone()).await {
                Ok(committed) => {
                    let snapshot = committed.metadata().current_snapshot().map(|s| s.snapshot_id()).unwrap_or_default();
                    self.delete_staged(run).await?;
                    tracing::info!(snapshot_id = snapshot, files = added.len(), "the replayed run committed");
                    return Ok(CommittedRun { snapshot_id: snapshot, files: added, already_committed: false, notes });
                }
                Err(err) if err.kind() == ErrorKind::CatalogCommitConflicts && attempt < PLAN_ATTEMPTS => {
                    delete_files(&table, &added).await;
                    table =
                        self.catalog.load_table(&ident).await.map_err(|e| port_error("load the table", &target, e))?;
                    attempt += 1;
                }
                Err(err) => {
                    delete_files(&table, &added).await;
                    return Err(port_error("commit the replayed run", &target, err));
                }
            }
        }
    }

    /// The pipelines other than `run`'s whose snapshots name `run`'s id
    /// (or one of the runs it replaces, [`RunFiles::replaces`]).
    async fn other_pipelines_with_run_id(&self, ident: &TableIdent, run: &RunFiles) -> Result<Vec<String>, PortError> {
        let target = ident.to_string();
        let table = self.catalog.load_table(ident).await.map_err(|e| port_error("load the table", &target, e))?;
        let mut run_ids = run.replaced_run_ids();
        run_ids.push(run.run_id.to_string());
        let mut others: Vec<String> = table
            .metadata()
            .snapshots()
            .filter_map(|s| {
                let props = &s.summary().additional_properties;
                props
                    .get(RUN_ID_PROPERTY)
                    .is_some_and(|id| run_ids.contains(id))
                    .then(|| props.get(PIPELINE_PROPERTY).cloned())
                    .flatten()
            })
            .filter(|pipeline| *pipeline != run.pipeline)
            .collect();
        others.sort();
        others.dedup();
        Ok(others)
    }

    /// An `append` or `replace` run replayed: the table's rows of the run
    /// (`_tributary_run_id`; only files whose bounds can hold it are read)
    /// removed, copy-on-write, and the run's staged rows added. A
    /// `replace` table that no longer holds the run (a later run replaced
    /// it) gains nothing: only the rows are swapped that are there. With
    /// [`RunFiles::replaces`] the rows of those runs are the ones removed
    /// (a stream's windows replayed as one snapshot).
    async fn swap_run(&self, table: &Table, run: &RunFiles) -> Result<Change, PortError> {
        let target = table.identifier().to_string();
        let err = |operation: &'static str| {
            let target = target.clone();
            move |err: iceberg::Error| port_error(operation, &target, err)
        };
        let schema = table.metadata().current_schema();
        let arrow = Arc::new(schema_to_arrow_schema(schema).map_err(err("convert the table schema"))?);
        let replaced: std::collections::BTreeSet<String> = run.replaced_run_ids().into_iter().collect();
        let field_id = schema.field_by_name(lake_format::lineage::LINEAGE_RUN_ID).map(|f| f.id);
        let range = KeyRange::of_texts(replaced.iter().cloned().collect());
        let prefix = format!("{}-{}-{}", run.pipeline, run.run_id, uuid::Uuid::new_v4().simple());
        let mut writer = TableWriter::new(table, &prefix).map_err(err("open the table's writers"))?;
        let mut removed = Vec::new();
        let mut rows_removed = 0;
        let candidates = live_files(table).await.map_err(err("list the table's files"))?;
        for file in candidates.iter().filter(|file| range.may_hold(file, field_id)) {
            let rows = read_data_file(table, file, &arrow).await?;
            let Some(ids) = run_ids(&rows) else {
                continue;
            };
            let keep: arrow_array::BooleanArray =
                ids.iter().map(|id| Some(id.is_none_or(|id| !replaced.contains(id)))).collect();
            if keep.true_count() == rows.num_rows() {
                continue;
            }
            let kept = arrow_select::filter::filter_record_batch(&rows, &keep)
                .map_err(|e| PortError::permanent("rewrite a table file", file.file_path(), e))?;
            if kept.num_rows() > 0 {
                writer.write(&kept, &data_folder(table, file.file_path())).await?;
            }
            rows_removed += rows.num_rows() - kept.num_rows();
            removed.push(file.file_path().to_string());
        }
        let mut added = writer.close().await?;
        let mut notes = Vec::new();
        if removed.is_empty() && run.write == RunWrite::Replace {
            tracing::warn!("the table no longer holds the run (a later run replaced it): nothing to swap");
            delete_files(table, &added.iter().map(|f| f.file_path().to_string()).collect::<Vec<_>>()).await;
            added.clear();
            let later = later_run(table, run).unwrap_or_else(|| "a later run".into());
            notes.push(superseded_note(run, &later));
        } else {
            let fetched = self.write(table, run).await?;
            if run.write == RunWrite::Replace
                && let Err(err) = refuse_rows_without_values(table, &fetched).await
            {
                delete_files(table, &added.iter().map(|f| f.file_path().to_string()).collect::<Vec<_>>()).await;
                return Err(err);
            }
            // What was swapped, for the summary (a trial's `--replace`
            // said nothing of the rows it replaced).
            let rows_added: u64 = fetched.iter().map(DataFile::record_count).sum();
            let runs = replaced.iter().cloned().collect::<Vec<_>>().join(", ");
            notes.push(format!(
                "{rows_removed} row(s) of run {runs} replaced by this attempt's {rows_added}, in one snapshot"
            ));
            added.extend(fetched);
        }
        tracing::info!(rewritten = removed.len(), "the run's rows swapped");
        Ok(Change {
            added,
            removed,
            base: Some(table.metadata().current_snapshot_id()),
            operation: Some(Operation::Overwrite),
            notes,
        })
    }

    /// The commit once the claim is this writer's: an `append` snapshot,
    /// or for `replace` and `merge` an `overwrite` planned on the table as
    /// read, planned again (up to [`PLAN_ATTEMPTS`] times) when another
    /// writer committed in between.
    async fn commit_claimed(&self, ident: &TableIdent, run: &RunFiles) -> Result<CommittedRun, PortError> {
        let target = ident.to_string();
        if let Some(token) = &run.rerun {
            // A re-run of a committed run, or a stream window of a replay
            // (`replaces`: the original windows it re-derives): the rows
            // replaced in one snapshot naming the token.
            let table = self.catalog.load_table(ident).await.ok();
            let replaces = !run.replaces.is_empty();
            // Committed before: its snapshot is there, or (that snapshot
            // expired by `compact --expire-older-than`) its rows are: a
            // trial found the re-run then appended beside them.
            let committed = match &table {
                None => false,
                Some(table) if replaces || find_snapshot(table, &run.clone().with_rerun(None)).is_some() => true,
                Some(table) => holds_rows_of(table, &run.run_id.to_string()).await?,
            };
            if committed {
                let done = self.replace_run(run, (RERUN_PROPERTY, token)).await?;
                tracing::info!(snapshot_id = done.snapshot_id, token, "the re-run replaced the run's rows");
                return Ok(done);
            }
        }
        let published = self.published_schema(&run.schema_key).await?;
        let mut table = self.table_for(ident, &published, run).await?;
        let mut properties = HashMap::from([
            (RUN_ID_PROPERTY.to_string(), run.run_id.to_string()),
            (PIPELINE_PROPERTY.to_string(), run.pipeline.clone()),
        ]);
        if let Some(token) = &run.rerun {
            properties.insert(RERUN_PROPERTY.to_string(), token.clone());
        }
        let mut attempt = 1;
        let (table, added, notes) = loop {
            let change = match &run.write {
                RunWrite::Append => Change::append(self.write(&table, run).await?),
                RunWrite::Replace => match later_run(&table, run) {
                    // A run completed after a later one (recovered from
                    // the DLQ, run again for its scheduled time): the
                    // table keeps the later refresh; the run's snapshot
                    // changes nothing and says so.
                    Some(later) => Change::nothing(&table, superseded_note(run, &later)),
                    None => {
                        let added = self.write(&table, run).await?;
                        refuse_rows_without_values(&table, &added).await?;
                        Change::replace(&table, added)
                            .await
                            .map_err(|err| port_error("list the table's files", &target, err))?
                    }
                },
                RunWrite::Merge { .. } => self.merge(&table, run, &published, false).await?,
            };
            let added: Vec<String> = change.added.iter().map(|f| f.file_path().to_string()).collect();
            let notes = change.notes.clone();
            match change.commit(&table, self.catalog.as_ref(), properties.clone()).await {
                Ok(committed) => break (committed, added, notes),
                Err(err) if err.kind() == ErrorKind::CatalogCommitConflicts && attempt < PLAN_ATTEMPTS => {
                    tracing::warn!(attempt, error = %err, "the table changed while the run was planned; planning again");
                    delete_files(&table, &added).await;
                    table =
                        self.catalog.load_table(ident).await.map_err(|e| port_error("load the table", &target, e))?;
                    attempt += 1;
                }
                Err(err) => {
                    delete_files(&table, &added).await;
                    return Err(port_error("commit the run", &target, err));
                }
            }
        };
        let snapshot = find_snapshot(&table, run).ok_or_else(|| {
            PortError::transient_msg("commit the run", target.clone(), "the committed snapshot is not in the table")
        })?;
        self.delete_staged(run).await?;
        tracing::info!(
            snapshot_id = snapshot.snapshot_id(),
            operation = snapshot.summary().operation.as_str(),
            files = added.len(),
            "the run committed in one snapshot"
        );
        Ok(CommittedRun { snapshot_id: snapshot.snapshot_id(), files: added, already_committed: false, notes })
    }
}

/// Plans of a `replace` or `merge` commit made before another writer's
/// commit are made again this many times before the completion fails
/// (transient: retried by the queue).
pub const PLAN_ATTEMPTS: u32 = 4;

/// What one commit does to the table: files added and removed, and the
/// snapshot it was planned on.
pub(crate) struct Change {
    pub(crate) added: Vec<DataFile>,
    pub(crate) removed: Vec<String>,
    /// `None`: a plain append, valid on any snapshot.
    pub(crate) base: Option<Option<i64>>,
    /// The snapshot's operation; `None`: `overwrite` when files are
    /// removed, else `append`.
    pub(crate) operation: Option<Operation>,
    /// What the planning found worth a look ([`CommittedRun::notes`]).
    pub(crate) notes: Vec<String>,
}

impl Change {
    /// Nothing added or removed: a snapshot that marks the run committed
    /// (an empty `overwrite`, valid on the snapshot read), with `note`.
    fn nothing(table: &Table, note: String) -> Self {
        Self {
            added: Vec::new(),
            removed: Vec::new(),
            base: Some(table.metadata().current_snapshot_id()),
            operation: Some(Operation::Overwrite),
            notes: vec![note],
        }
    }

    fn append(added: Vec<DataFile>) -> Self {
        Self { added, removed: Vec::new(), base: None, operation: None, notes: Vec::new() }
    }

    /// Every live data file of `table` removed, `added` added.
    async fn replace(table: &Table, added: Vec<DataFile>) -> iceberg::Result<Self> {
        let removed = live_files(table).await?.into_iter().map(|f| f.file_path().to_string()).collect();
        Ok(Self {
            added,
            removed,
            base: Some(table.metadata().current_snapshot_id()),
            operation: None,
            notes: Vec::new(),
        })
    }

    /// Commits the change in one snapshot carrying `properties`.
    pub(crate) async fn commit(
        self,
        table: &Table,
        catalog: &dyn Catalog,
        properties: HashMap<String, String>,
    ) -> iceberg::Result<Table> {
        let tx = Transaction::new(table);
        let tx = match self.base {
            None => tx.fast_append().set_snapshot_properties(properties).add_data_files(self.added).apply(tx)?,
            Some(base) => {
                let operation = self.operation.unwrap_or(if self.removed.is_empty() {
                    Operation::Append
                } else {
                    Operation::Overwrite
                });
                tx.overwrite_files()
                    .set_operation(operation)
                    .validate_from_snapshot(base)
                    .set_snapshot_properties(properties)
                    .delete_files(self.removed)
                    .add_data_files(self.added)
                    .apply(tx)?
            }
        };
        tx.commit(catalog).await
    }
}

impl IcebergCommitter {
    /// A merge's change: the run's rows deduplicated by key against the
    /// table's (see [`crate::merge`]), the table files that hold replaced
    /// or deleted keys rewritten without them; the merge columns resolved
    /// against the dataset's `published` schema ([`MergeColumns::resolve`],
    /// its notes first among the change's). `replacing`: the run is a
    /// re-run or a replay, so the table's rows of the runs it replaces
    /// ([`RunFiles::replaced_run_ids`]) are removed first, neither kept nor
    /// weighed: the new fetch merges against the rest of the table.
    async fn merge(
        &self,
        table: &Table,
        run: &RunFiles,
        published: &ArrowSchema,
        replacing: bool,
    ) -> Result<Change, PortError> {
        let target = table.identifier().to_string();
        let target = target.as_str();
        let err = |operation: &'static str| move |err: iceberg::Error| port_error(operation, target, err);
        let problem =
            |operation: &'static str| move |message: String| PortError::permanent_msg(operation, target, message);
        let RunWrite::Merge { primary_key, order_by, hard_delete } = &run.write else {
            return Err(problem("merge the run")(format!("the run's write is {:?}, not merge", run.write)));
        };
        let (columns, mut notes) =
            MergeColumns::resolve(published, primary_key, order_by.as_deref(), hard_delete.as_deref())
                .map_err(problem("resolve target.primary_key, order_by and hard_delete"))?;
        let base = table.metadata().current_snapshot_id();
        let arrow = Arc::new(
            schema_to_arrow_schema(table.metadata().current_schema()).map_err(err("convert the table schema"))?,
        );
        let encoder = KeyEncoder::new(columns.clone(), &arrow).map_err(problem("compare the merge keys"))?;
        // 1. The run's rows, in fetch order, and the winner per key.
        let partitions = partition_columns(table, &arrow);
        let mut batches = Vec::new();
        for staged in &run.files {
            batches.extend(self.staged_batches(staged, &arrow, &partitions).await?);
        }
        let keyed = batches
            .iter()
            .map(|(batch, _)| encoder.encode(batch))
            .collect::<Result<Vec<_>, _>>()
            .map_err(problem("key the run's rows"))?;
        let mut plan = Plan::of_run(&keyed);
        drop(keyed);
        let run_batches: Vec<RecordBatch> = batches.iter().map(|(b, _)| b.clone()).collect();
        if let Some(value) = crate::merge::text_order_hazard(&run_batches, &columns) {
            notes.push(format!(
                "merge: target.order_by's column is text, so versions compare character by character (\"9\" after \
                 \"10\", \"12/31/2025\" after \"01/02/2026\"): a value like {value:?} may lose to an older version; \
                 send or declare (target.schema) times as RFC 3339 or numbers as numbers"
            ));
        }
        let range = if plan.has_variant_keys() { KeyRange::all() } else { KeyRange::of(&run_batches, &columns) };
        let first_key_id = columns
            .key
            .first()
            .and_then(|path| table.metadata().current_schema().field_by_name(&path.join(".")))
            .map(|field| field.id);
        // The rows of the runs a re-run or replay replaces go, whatever their keys.
        let replaced: std::collections::BTreeSet<String> =
            if replacing { run.replaced_run_ids().into_iter().collect() } else { Default::default() };
        let run_id_field =
            table.metadata().current_schema().field_by_name(lake_format::lineage::LINEAGE_RUN_ID).map(|f| f.id);
        let replaced_range = KeyRange::of_texts(replaced.iter().cloned().collect());
        let replaced_rows = |rows: &RecordBatch| -> Vec<bool> {
            match run_ids(rows) {
                Some(ids) if !replaced.is_empty() => {
                    ids.iter().map(|id| id.is_some_and(|id| replaced.contains(id))).collect()
                }
                _ => vec![false; rows.num_rows()],
            }
        };
        // 2. The table files that may hold a run key (or a replaced run's
        // row), weighed when order_by decides.
        let candidates: Vec<DataFile> = live_files(table)
            .await
            .map_err(err("list the table's files"))?
            .into_iter()
            .filter(|file| {
                range.may_hold(file, first_key_id)
                    || (!replaced.is_empty() && replaced_range.may_hold(file, run_id_field))
            })
            .collect();
        let mut touched = Vec::new();
        for file in &candidates {
            let rows = read_data_file(table, file, &arrow).await?;
            let mut keys = encoder.encode(&rows).map_err(problem("key a table file's rows"))?;
            let gone = replaced_rows(&rows);
            keys.forget(&gone);
            plan.note_table_keys(&keys);
            if plan.touches(&keys) || gone.contains(&true) {
                plan.weigh_table_rows(file.file_path(), &keys);
                touched.push((file, if plan.ordered() { None } else { Some((rows, keys, gone)) }));
            }
        }
        // 3. The rewrites and the run's rows, written per partition.
        let prefix = format!("{}-{}-{}", run.pipeline, run.run_id, uuid::Uuid::new_v4().simple());
        let mut writer = TableWriter::new(table, &prefix).map_err(err("open the table's writers"))?;
        let mut removed = Vec::new();
        let mut rows_replaced = 0;
        for (file, read) in touched {
            let (rows, keys, gone) = match read {
                Some(read) => read,
                None => {
                    let rows = read_data_file(table, file, &arrow).await?;
                    let mut keys = encoder.encode(&rows).map_err(problem("key a table file's rows"))?;
                    let gone = replaced_rows(&rows);
                    keys.forget(&gone);
                    (rows, keys, gone)
                }
            };
            let merged = plan.kept_rows(file.file_path(), &keys);
            if merged.is_none() && !gone.contains(&true) {
                continue;
            }
            let keep: arrow_array::BooleanArray = (0..rows.num_rows())
                .map(|i| Some(!gone[i] && merged.as_ref().is_none_or(|keep| keep.value(i))))
                .collect();
            let kept = arrow_select::filter::filter_record_batch(&rows, &keep)
                .map_err(|e| problem("rewrite a table file")(e.to_string()))?;
            if kept.num_rows() > 0 {
                writer.write(&kept, &data_folder(table, file.file_path())).await?;
            }
            rows_replaced += gone.iter().filter(|gone| **gone).count();
            removed.push(file.file_path().to_string());
        }
        let masks = plan.run_rows(&batches.iter().map(|(b, _)| b.num_rows()).collect::<Vec<_>>());
        for ((batch, folder), mask) in batches.iter().zip(&masks) {
            let rows = arrow_select::filter::filter_record_batch(batch, mask)
                .map_err(|e| problem("select the run's rows")(e.to_string()))?;
            if rows.num_rows() > 0 {
                writer.write(&rows, folder).await?;
            }
        }
        let added = writer.close().await?;
        let (keys, unkeyed) = plan.counts();
        let outcome = plan.outcome();
        let unranked = plan.unranked();
        let repeated = plan.repeated();
        tracing::info!(
            keys,
            unkeyed,
            unranked,
            deleted = outcome.deleted,
            deleted_absent = outcome.absent,
            stale = outcome.stale,
            repeated,
            table_files = candidates.len(),
            rewritten = removed.len(),
            "the run merged by primary key"
        );
        if unkeyed > 0 {
            notes.push(format!(
                "merge: {unkeyed} rows without a value in a primary-key column were added as they are (no key to \
                 merge on; each run adds its own again): declare the key column with `required: true` in \
                 target.schema to quarantine such records instead"
            ));
        }
        let variant_keyed = plan.variant_keyed();
        if variant_keyed > 0 {
            notes.push(format!(
                "merge: {variant_keyed} rows had a primary-key value of another kind than its column's (kept in a \
                 variant column, such as id__string beside id): a key's value and its kind make the key, so 4 and \
                 \"4\" are two keys, and a key the vendor sent both ways has a current row of each"
            ));
        }
        let unclear = plan.unclear_deletions();
        if unclear > 0 {
            notes.push(format!(
                "merge: {unclear} hard_delete values were text that says neither yes/no, a number nor a time (e.g. \
                 \"active\"): their keys were kept"
            ));
        }
        if unranked > 0 {
            notes.push(format!(
                "merge: {unranked} versions had an order_by value that reads as no instant and is not of the \
                 column's type (it is in a variant column): for their keys the row fetched last won"
            ));
        }
        for line in &notes {
            tracing::warn!(note = line.as_str(), "the merge has something to look at");
        }
        // Not warnings: the run's deletions and its versions that lost,
        // counted, since the summary's "records persisted" counts them as
        // records (a trial); and what a re-run or replay swapped.
        if !outcome.is_empty() {
            let absent = match outcome.absent {
                0 => String::new(),
                n => format!(" ({n} more marked deleted held no row: deleted before, or never added)"),
            };
            notes.push(format!(
                "merge: {} key(s) deleted by target.hard_delete{absent}, {} version(s) left out as older than the \
                 table's row of their key",
                outcome.deleted, outcome.stale
            ));
        }
        if repeated > 0 {
            notes.push(format!(
                "merge: {repeated} record(s) left out as another version of a key the run holds again (the key's \
                 row is its newest version by order_by, or the one fetched last)"
            ));
        }
        if replacing {
            let fetched: usize = batches.iter().map(|(batch, _)| batch.num_rows()).sum();
            let runs = replaced.iter().cloned().collect::<Vec<_>>().join(", ");
            notes.push(format!(
                "{rows_replaced} row(s) of run {runs} removed and this attempt's {fetched} merged by key in their \
                 place, in one snapshot"
            ));
        }
        Ok(Change { added, removed, base: Some(base), operation: None, notes })
    }

    /// A staged file's rows as batches of the table's schema, with its folder.
    async fn staged_batches(
        &self,
        staged: &StagedFile,
        arrow: &SchemaRef,
        partition_columns: &[(String, DataType)],
    ) -> Result<Vec<(RecordBatch, String)>, PortError> {
        let bytes = self.store.get(&staged.key).await?;
        let values =
            check_folder(&staged.partition).and_then(|()| partition_values(staged, partition_columns)).map_err(
                |message| PortError::permanent_msg("read a staged file's partition", staged.key.clone(), message),
            )?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .map_err(|e| PortError::permanent("read a staged file", staged.key.clone(), e))?;
        let have: Vec<&Field> = arrow.fields().iter().map(AsRef::as_ref).collect();
        let renamed = Arc::new(in_table_names(builder.schema(), builder.schema(), &have));
        let reader = builder.build().map_err(|e| PortError::permanent("read a staged file", staged.key.clone(), e))?;
        let mut batches = Vec::new();
        for batch in reader {
            let batch = batch
                .map_err(|e| e.to_string())
                .and_then(|batch| {
                    RecordBatch::try_new(renamed.clone(), batch.columns().to_vec()).map_err(|e| e.to_string())
                })
                .and_then(|batch| table_batch(&batch, arrow, &values))
                .map_err(|message| {
                    PortError::permanent_msg("align a staged file to the table", staged.key.clone(), message)
                })?;
            batches.push((batch, staged.partition.clone()));
        }
        Ok(batches)
    }
}

/// The partition columns of `table` (name and Arrow type), as
/// [`partition_values`] takes them.
fn partition_columns(table: &Table, arrow: &ArrowSchema) -> Vec<(String, DataType)> {
    let metadata = table.metadata();
    let schema = metadata.current_schema();
    metadata
        .default_partition_spec()
        .fields()
        .iter()
        .filter(|f| f.transform == Transform::Identity)
        .filter_map(|f| schema.field_by_id(f.source_id))
        .filter_map(|field| arrow.field_with_name(&field.name).ok())
        .map(|field| (field.name().clone(), field.data_type().clone()))
        .collect()
}

impl IcebergCommitter {
    /// Deletes the run's staged files (their rows are in the table).
    async fn delete_staged(&self, run: &RunFiles) -> Result<(), PortError> {
        for staged in &run.files {
            self.store.delete(&staged.key).await?;
        }
        Ok(())
    }

    /// The run's snapshot and the files it added, if it exists.
    async fn committed(&self, ident: &TableIdent, run: &RunFiles) -> Result<Option<CommittedRun>, PortError> {
        let target = ident.to_string();
        let exists =
            self.catalog.table_exists(ident).await.map_err(|err| port_error("look the table up", &target, err))?;
        if !exists {
            return Ok(None);
        }
        let table = self.catalog.load_table(ident).await.map_err(|err| port_error("load the table", &target, err))?;
        let Some(snapshot) = find_snapshot(&table, run) else { return Ok(None) };
        let files =
            added_files(&table, &snapshot).await.map_err(|err| port_error("read the run's snapshot", &target, err))?;
        Ok(Some(CommittedRun {
            snapshot_id: snapshot.snapshot_id(),
            files,
            already_committed: true,
            notes: Vec::new(),
        }))
    }

    /// The published Arrow schema at `key`.
    async fn published_schema(&self, key: &str) -> Result<SchemaRef, PortError> {
        let bytes = self.store.get(key).await?;
        lake_format::codec::decode_arrow_schema(&bytes)
            .map_err(|err| PortError::permanent("read the published schema", key.to_string(), err))
    }

    /// The dataset's table: created from `published` on first use, else
    /// loaded and given the columns of `published` it lacks, each family of
    /// columns new to the table decided by `run`'s values
    /// ([`IcebergCommitter::decided_schema`]), each column named as the
    /// table names its family's member of that type
    /// ([`lake_format::variant::table_name`]).
    async fn table_for(&self, ident: &TableIdent, published: &ArrowSchema, run: &RunFiles) -> Result<Table, PortError> {
        let target = ident.to_string();
        let target = target.as_str();
        let err = |operation: &'static str| move |err: iceberg::Error| port_error(operation, target, err);
        let namespace = ident.namespace();
        if !self.catalog.namespace_exists(namespace).await.map_err(err("look the namespace up"))? {
            match self.catalog.create_namespace(namespace, HashMap::new()).await {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::NamespaceAlreadyExists => {}
                Err(e) => return Err(err("create the namespace")(e)),
            }
        }
        if !self.catalog.table_exists(ident).await.map_err(err("look the table up"))? {
            let wanted = self.decided_schema(published, &[], run).await?;
            let schema = arrow_schema_to_schema_auto_assign_ids(&wanted).map_err(err("convert the schema"))?;
            let mut spec = UnboundPartitionSpec::builder();
            for field in published.fields().iter().filter(|f| f.metadata().contains_key(META_PARTITION)) {
                let source = schema.field_by_name(field.name()).ok_or_else(|| {
                    PortError::permanent_msg(
                        "create the table",
                        ident.to_string(),
                        format!("no partition column {}", field.name()),
                    )
                })?;
                spec = spec
                    .add_partition_field(source.id, field.name(), Transform::Identity)
                    .map_err(err("build the partition spec"))?;
            }
            let transforms = time_partitions(published, &wanted)
                .map_err(|message| PortError::permanent_msg("create the table", ident.to_string(), message))?;
            for (transform, column) in transforms {
                let source = schema.field_by_name(&column).ok_or_else(|| {
                    PortError::permanent_msg("create the table", ident.to_string(), format!("no column {column}"))
                })?;
                let name = format!("{column}_{}", transform.as_str());
                let transform = iceberg_transform(transform)
                    .map_err(|message| PortError::permanent_msg("create the table", ident.to_string(), message))?;
                spec = spec.add_partition_field(source.id, name, transform).map_err(err("build the partition spec"))?;
            }
            let location = self.location_root.as_ref().map(|root| {
                format!(
                    "{root}/{}/{}",
                    namespace.iter().map(String::as_str).collect::<Vec<_>>().join("/"),
                    ident.name()
                )
            });
            let creation = TableCreation::builder()
                .name(ident.name().to_string())
                .schema(schema)
                .partition_spec(spec.build())
                .location_opt(location)
                .build();
            match self.catalog.create_table(namespace, creation).await {
                Ok(table) => {
                    tracing::info!(table = %ident, "table created");
                    return Ok(table);
                }
                Err(e) if e.kind() == ErrorKind::TableAlreadyExists => {}
                Err(e) => return Err(err("create the table")(e)),
            }
        }
        let table = self.catalog.load_table(ident).await.map_err(err("load the table"))?;
        check_time_partitions(&table, published)
            .map_err(|message| PortError::permanent_msg("commit to the table", ident.to_string(), message))?;
        let current =
            schema_to_arrow_schema(table.metadata().current_schema()).map_err(err("convert the table schema"))?;
        let have: Vec<&Field> = current.fields().iter().map(AsRef::as_ref).collect();
        let decided = self.decided_schema(published, &have, run).await?;
        let wanted = in_table_names(&decided, published, &have);
        let additions = missing_columns(&current, &wanted).map_err(err("convert a new column"))?;
        if additions.is_empty() {
            return Ok(table);
        }
        let names: Vec<String> = additions.iter().map(|(name, _)| name.clone()).collect();
        let tx = Transaction::new(&table);
        let mut update = tx.update_schema();
        for (_, column) in additions {
            update = update.add_column(column);
        }
        let tx = update.apply(tx).map_err(err("add columns"))?;
        let table = tx.commit(self.catalog.as_ref()).await.map_err(err("add columns"))?;
        tracing::info!(table = %ident, columns = ?names, "columns added to the table");
        Ok(table)
    }

    /// `published` as the table's types ([`table_arrow_schema`]), with each
    /// family of scalar columns new to the table (`current`: its top-level
    /// fields) decided by the run: the member holding the most of the run's
    /// values takes the base name, ties to the base, and the base's type
    /// becomes the variant `<base>__<suffix>`. Persist's pages decide a new
    /// column by the majority of the first page that holds it; this makes
    /// the table's column the run's majority, whatever the pages' order
    /// (one stray text in the first page, and the integers of the other
    /// pages are still the column `id`). Families of structs, lists,
    /// timestamps and JSON text keep Persist's names. Counting reads only
    /// those columns of the staged files, and only when such a family is new.
    async fn decided_schema(
        &self,
        published: &ArrowSchema,
        current: &[&Field],
        run: &RunFiles,
    ) -> Result<ArrowSchema, PortError> {
        let wanted = table_arrow_schema(published);
        let families = new_families(published, current);
        if families.is_empty() {
            return Ok(wanted);
        }
        let members: HashSet<String> = families.iter().flatten().map(|&i| published.field(i).name().clone()).collect();
        let counts = self.count_values(run, &members).await?;
        let count = |i: usize| counts.get(published.field(i).name()).copied().unwrap_or(0);
        let mut fields: Vec<Field> = wanted.fields().iter().map(|f| f.as_ref().clone()).collect();
        for family in families {
            let base = family[0];
            let winner = family.iter().copied().max_by_key(|&i| (count(i), i == base)).unwrap_or(base);
            let Some(suffix) = lake_format::variant::scalar_suffix(published.field(base)).filter(|_| winner != base)
            else {
                continue;
            };
            let name = published.field(base).name().clone();
            let (base_type, winner_type) = (fields[base].data_type().clone(), fields[winner].data_type().clone());
            tracing::info!(
                column = %name,
                from = %base_type,
                to = %winner_type,
                base_values = count(base),
                winner_values = count(winner),
                "the run's majority takes the new column"
            );
            fields[base] = Field::new(&name, winner_type, true);
            fields[winner] = Field::new(format!("{name}__{suffix}"), base_type, true);
        }
        Ok(ArrowSchema::new(fields))
    }

    /// Non-null values per column named in `columns`, over `run`'s staged
    /// files (only those columns read).
    async fn count_values(&self, run: &RunFiles, columns: &HashSet<String>) -> Result<HashMap<String, u64>, PortError> {
        let mut counts: HashMap<String, u64> = HashMap::new();
        for staged in &run.files {
            let bytes = self.store.get(&staged.key).await?;
            let read =
                |e: parquet::errors::ParquetError| PortError::permanent("read a staged file", staged.key.clone(), e);
            let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(read)?;
            let roots: Vec<usize> = builder
                .schema()
                .fields()
                .iter()
                .enumerate()
                .filter(|(_, f)| columns.contains(f.name()))
                .map(|(i, _)| i)
                .collect();
            if roots.is_empty() {
                continue;
            }
            let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
            for batch in builder.with_projection(mask).build().map_err(read)? {
                let batch = batch.map_err(|e| PortError::permanent("read a staged file", staged.key.clone(), e))?;
                for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
                    *counts.entry(field.name().clone()).or_default() += (column.len() - column.null_count()) as u64;
                }
            }
        }
        Ok(counts)
    }

    /// Writes every staged file of `run` as data files of `table` (nothing
    /// committed), one staged file at a time.
    async fn write(&self, table: &Table, run: &RunFiles) -> Result<Vec<DataFile>, PortError> {
        let target = table.identifier().to_string();
        let arrow = Arc::new(
            schema_to_arrow_schema(table.metadata().current_schema())
                .map_err(|err| port_error("convert the table schema", &target, err))?,
        );
        let partitions = partition_columns(table, &arrow);
        // The file names' prefix: unique per write (the default generator
        // only numbers files), so a commit taken over never collides.
        let prefix = format!("{}-{}-{}", run.pipeline, run.run_id, uuid::Uuid::new_v4().simple());
        let mut writer =
            TableWriter::new(table, &prefix).map_err(|err| port_error("open the table's writers", &target, err))?;
        for staged in &run.files {
            for (batch, folder) in self.staged_batches(staged, &arrow, &partitions).await? {
                writer.write(&batch, &folder).await?;
            }
        }
        writer.close().await
    }
}

/// Refuses a `write: replace` run whose rows hold no value
/// ([`rows_without_values`]), deleting its `added` files: permanently,
/// naming the table, so nothing is committed and the table is as it was.
async fn refuse_rows_without_values(table: &Table, added: &[DataFile]) -> Result<(), PortError> {
    let Some(rows) = rows_without_values(table, added) else { return Ok(()) };
    let paths: Vec<String> = added.iter().map(|f| f.file_path().to_string()).collect();
    delete_files(table, &paths).await;
    Err(PortError::permanent_msg(
        "replace the table with the run",
        table.identifier().to_string(),
        format!(
            "none of the run's {rows} rows holds a value (the vendor sent only {{}} records or nulls): a replace \
             would make them the whole table, so nothing was committed and the table is as it was (the run's raw \
             pages are kept)"
        ),
    ))
}

/// The rows of `files` when none of them holds a value: every column but
/// the lineage and the identity partitions (values from the folder) is
/// null in every row, by the files' `null_value_counts`. `None` when a
/// row holds a value, when there is no row, or when a file has no counts
/// (nothing to decide on). A `write: replace` run of such rows would
/// empty the table of everything the vendor sent before.
fn rows_without_values(table: &Table, files: &[DataFile]) -> Option<u64> {
    let schema = table.metadata().current_schema();
    let mut skip: HashSet<i32> =
        LINEAGE_COLUMNS.iter().filter_map(|name| schema.field_by_name(name)).map(|field| field.id).collect();
    for field in table.metadata().default_partition_spec().fields() {
        if field.transform == Transform::Identity {
            skip.insert(field.source_id);
        }
    }
    let rows: u64 = files.iter().map(DataFile::record_count).sum();
    let empty = files.iter().all(|file| {
        let mut counts = file.null_value_counts().iter().filter(|(id, _)| !skip.contains(id)).peekable();
        counts.peek().is_some() && counts.all(|(_, nulls)| *nulls == file.record_count())
    });
    (rows > 0 && empty).then_some(rows)
}

/// A staged file's folder is safe as a path under the table: segments
/// `name=value`, none empty, `.` or `..`, no backslash or control
/// character (Persist's keys never have them; a hand-made file might).
fn check_folder(folder: &str) -> Result<(), String> {
    let bad = folder.split('/').any(|segment| {
        matches!(segment, "" | "." | "..")
            || !segment.contains('=')
            || segment.split_once('=').is_some_and(|(_, value)| matches!(value, "." | ".."))
            || segment.contains('\\')
            || segment.chars().any(char::is_control)
    });
    if bad && !folder.is_empty() {
        return Err(format!("the partition folder {folder:?} is not a safe path (segments name=value, no . or ..)"));
    }
    Ok(())
}

/// The run's snapshot: the one whose summary names its pipeline and run
/// (and, for a re-run, its token).
/// The rows' run ids (`_tributary_run_id`), when they have the column.
fn run_ids(rows: &arrow_array::RecordBatch) -> Option<arrow_array::StringArray> {
    rows.column_by_name(lake_format::lineage::LINEAGE_RUN_ID)
        .and_then(|c| c.as_any().downcast_ref::<arrow_array::StringArray>().cloned())
}

/// Whether a live data file of `table` holds a row of run `run_id`
/// (`_tributary_run_id`; only the files whose bounds can hold it are read).
async fn holds_rows_of(table: &Table, run_id: &str) -> Result<bool, PortError> {
    let target = table.identifier().to_string();
    let schema = table.metadata().current_schema();
    let Some(field_id) = schema.field_by_name(lake_format::lineage::LINEAGE_RUN_ID).map(|f| f.id) else {
        return Ok(false);
    };
    let arrow =
        Arc::new(schema_to_arrow_schema(schema).map_err(|e| port_error("convert the table schema", &target, e))?);
    let range = KeyRange::of_texts(vec![run_id.to_string()]);
    let files = live_files(table).await.map_err(|e| port_error("list the table's files", &target, e))?;
    for file in files.iter().filter(|file| range.may_hold(file, Some(field_id))) {
        let rows = read_data_file(table, file, &arrow).await?;
        if run_ids(&rows).is_some_and(|ids| ids.iter().any(|id| id == Some(run_id))) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The latest run of `run`'s pipeline that committed to `table` (a
/// snapshot's `tributary.run-id`), when it came after `run`
/// ([`RunId::is_after`]: by scheduled time; an id of another form, a
/// queued trigger's own or a stream replay's, is not ordered). Snapshots
/// expired by `compact` are not seen.
fn later_run(table: &Table, run: &RunFiles) -> Option<String> {
    table
        .metadata()
        .snapshots()
        .filter_map(|snapshot| {
            let props = &snapshot.summary().additional_properties;
            (props.get(PIPELINE_PROPERTY) == Some(&run.pipeline)).then(|| props.get(RUN_ID_PROPERTY)).flatten()
        })
        .filter_map(|id| RunId::new(id.as_str()).ok().filter(|id| id.is_after(&run.run_id)))
        .reduce(|latest, id| if id.is_after(&latest) { id } else { latest })
        .map(|id| id.to_string())
}

/// The table note of a `replace` run that a later run superseded.
fn superseded_note(run: &RunFiles, later: &str) -> String {
    format!(
        "replace: the table holds the refresh of {later}, later than this run ({}): this run's rows did not \
         replace it (a full refresh completed late, recovered from the DLQ or run again for its scheduled time, \
         would bring back older data); its raw pages are kept",
        run.run_id
    )
}

fn find_snapshot(table: &Table, run: &RunFiles) -> Option<SnapshotRef> {
    let run_id = run.run_id.to_string();
    table
        .metadata()
        .snapshots()
        .find(|snapshot| {
            let props = &snapshot.summary().additional_properties;
            props.get(RUN_ID_PROPERTY) == Some(&run_id)
                && props.get(PIPELINE_PROPERTY) == Some(&run.pipeline)
                && run.rerun.as_ref().is_none_or(|token| props.get(RERUN_PROPERTY) == Some(token))
        })
        .cloned()
}

/// The data files `snapshot` added, sorted.
async fn added_files(table: &Table, snapshot: &SnapshotRef) -> iceberg::Result<Vec<String>> {
    let list = table.manifest_list_reader(snapshot).load().await?;
    let mut files = Vec::new();
    for manifest in list.entries().iter().filter(|m| m.added_snapshot_id == snapshot.snapshot_id()) {
        let manifest = manifest.load_manifest(table.file_io()).await?;
        files.extend(
            manifest
                .entries()
                .iter()
                .filter(|e| e.status() == ManifestStatus::Added)
                .map(|e| e.data_file().file_path().to_string()),
        );
    }
    files.sort();
    Ok(files)
}

/// The table's Arrow schema for a published schema: every column, with
/// types Iceberg has (timestamps in microseconds), the partition columns
/// typed by kind (`day`: `date`, `hour`: `int`, `value`: `string`).
pub fn table_arrow_schema(published: &ArrowSchema) -> ArrowSchema {
    let fields: Vec<Field> = published
        .fields()
        .iter()
        .map(|field| {
            match field.metadata().get(META_PARTITION_KIND).map(|kind| partition::PartitionKind::parse(kind)) {
                Some(Some(partition::PartitionKind::Day)) => Field::new(field.name(), DataType::Date32, true),
                Some(Some(partition::PartitionKind::Hour)) => Field::new(field.name(), DataType::Int32, true),
                Some(_) => Field::new(field.name(), DataType::Utf8, true),
                None => iceberg_field(field),
            }
        })
        .collect();
    ArrowSchema::new(fields)
}

/// `field` with the nearest type Iceberg has, without field metadata.
fn iceberg_field(field: &Field) -> Field {
    Field::new(field.name(), iceberg_type(field.data_type()), field.is_nullable())
}

fn iceberg_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Timestamp(TimeUnit::Second | TimeUnit::Millisecond, zone) => {
            DataType::Timestamp(TimeUnit::Microsecond, zone.clone())
        }
        DataType::Int8 | DataType::Int16 => DataType::Int32,
        DataType::Float16 => DataType::Float32,
        DataType::Struct(fields) => DataType::Struct(fields.iter().map(|f| Arc::new(iceberg_field(f))).collect()),
        DataType::List(item) => DataType::List(Arc::new(iceberg_field(item))),
        DataType::LargeList(item) => DataType::List(Arc::new(iceberg_field(item))),
        other => other.clone(),
    }
}

/// The published schema's `target.partition_by` ([`META_PARTITION_BY`])
/// as (transform, column): each pointer's top-level column (its
/// `tributary.source` key, not a variant), which must be a timestamp in
/// `wanted` (the table's types).
///
/// # Errors
/// A transform that does not parse, a field with no column yet (no
/// record had a value there: declare it in `target.schema`), or a column
/// of another type (its values were not RFC 3339 UTC text).
fn time_partitions(published: &ArrowSchema, wanted: &ArrowSchema) -> Result<Vec<(TimeTransform, String)>, String> {
    let Some(listed) = published.metadata().get(META_PARTITION_BY) else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for text in listed.split(',').filter(|t| !t.trim().is_empty()) {
        let (transform, pointer) = TimeTransform::parse(text)
            .ok_or_else(|| format!("target.partition_by {text:?} is not day(/f) or hour(/f)"))?;
        let key = pointer[1..].replace("~1", "/").replace("~0", "~");
        let column = published
            .fields()
            .iter()
            .find(|f| {
                f.metadata().get(META_SOURCE) == Some(&key)
                    && !f.metadata().contains_key(META_VARIANT_OF)
                    && !f.metadata().contains_key(META_PARTITION)
            })
            .ok_or_else(|| {
                format!(
                    "target.partition_by {text}: the dataset has no column for {pointer} yet (no record had a value \
                     there); declare it in target.schema as timestamp(us, UTC) so the table can be partitioned"
                )
            })?;
        let table_type = wanted.field_with_name(column.name()).map(|f| f.data_type().clone()).ok();
        if !matches!(table_type, Some(DataType::Timestamp(..))) {
            return Err(format!(
                "target.partition_by {text}: column {} is {}, not a timestamp (its values are not RFC 3339 UTC text; \
                 declare it in target.schema as timestamp(us, UTC))",
                column.name(),
                table_type.map_or_else(|| "absent".to_string(), |t| t.to_string())
            ));
        }
        out.push((transform, column.name().clone()));
    }
    Ok(out)
}

/// Iceberg's transform for `transform`.
///
/// # Errors
/// A transform newer than this build (`TimeTransform` is non-exhaustive),
/// naming it.
fn iceberg_transform(transform: TimeTransform) -> Result<Transform, String> {
    match transform {
        TimeTransform::Day => Ok(Transform::Day),
        TimeTransform::Hour => Ok(Transform::Hour),
        other => Err(format!("target.partition_by: {} is not a transform this build knows", other.as_str())),
    }
}

/// Whether `table`'s partition spec has the transforms the published
/// schema asks for, each of the same column (a table keeps the spec it was
/// created with; Persist refuses another `target.partition_by` for a
/// dataset with pages).
fn check_time_partitions(table: &Table, published: &ArrowSchema) -> Result<(), String> {
    if !published.metadata().contains_key(META_PARTITION_BY) {
        return Ok(());
    }
    let metadata = table.metadata();
    let schema = metadata.current_schema();
    let current = schema_to_arrow_schema(schema).map_err(|err| err.to_string())?;
    let spec = metadata.default_partition_spec();
    for (transform, column) in time_partitions(published, &current)? {
        let wanted = iceberg_transform(transform)?;
        let source = schema.field_by_name(&column).map(|f| f.id);
        if !spec.fields().iter().any(|f| f.transform == wanted && Some(f.source_id) == source) {
            let have: Vec<String> = spec.fields().iter().map(|f| format!("{}({})", f.transform, f.name)).collect();
            return Err(format!(
                "target.partition_by asks for {}({column}), but the table was created without it (partitioned by \
                 {}); a table keeps its partition spec: write to a new dataset",
                transform.as_str(),
                have.join(", ")
            ));
        }
    }
    Ok(())
}

/// The scalar families of `published` (indices, base first) whose base
/// the table (`current`'s top-level fields) lacks and that have at least
/// one variant: the families [`IcebergCommitter::decided_schema`] decides.
fn new_families(published: &ArrowSchema, current: &[&Field]) -> Vec<Vec<usize>> {
    let mut families: Vec<(&str, Vec<usize>)> = Vec::new();
    for (i, field) in published.fields().iter().enumerate() {
        let skip = field.metadata().contains_key(META_PARTITION) || field.metadata().contains_key(META_LINEAGE);
        if skip
            || lake_format::variant::scalar_suffix(field).is_none()
            || current.iter().any(|f| f.name() == field.name())
        {
            continue;
        }
        let family = lake_format::variant::family(field);
        match families.iter_mut().find(|(name, _)| *name == family) {
            Some((_, members)) if field.name() == family => members.insert(0, i),
            Some((_, members)) => members.push(i),
            None => families.push((family, vec![i])),
        }
    }
    families
        .into_iter()
        .filter(|(family, members)| members.len() > 1 && published.field(members[0]).name() == family)
        .map(|(_, members)| members)
        .collect()
}

/// `schema` with each top-level field renamed as the table names it
/// ([`lake_format::variant::table_name`]); `named` is the same schema with
/// Persist's metadata (the published or the file's own), which tells the
/// families.
fn in_table_names(schema: &ArrowSchema, named: &ArrowSchema, table: &[&Field]) -> ArrowSchema {
    let same_type = |file: &DataType, table: &DataType| iceberg_type(file) == *table;
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .zip(named.fields())
        .map(|(field, named)| {
            let named = field.as_ref().clone().with_metadata(named.metadata().clone());
            field.as_ref().clone().with_name(lake_format::variant::table_name(&named, table, same_type))
        })
        .collect();
    ArrowSchema::new_with_metadata(fields, schema.metadata().clone())
}

/// The columns of `wanted` that `current` lacks, by name, as schema
/// additions (a struct's new field under its parent, dotted: `address.zip`,
/// a list's struct elements under `tags.element`). Types never change.
fn missing_columns(current: &ArrowSchema, wanted: &ArrowSchema) -> iceberg::Result<Vec<(String, AddColumn)>> {
    let mut out = Vec::new();
    missing_in(current.fields(), wanted.fields(), None, &mut out)?;
    Ok(out)
}

fn missing_in(
    current: &Fields,
    wanted: &Fields,
    parent: Option<&str>,
    out: &mut Vec<(String, AddColumn)>,
) -> iceberg::Result<()> {
    for field in wanted {
        let path = parent.map_or_else(|| field.name().clone(), |p| format!("{p}.{}", field.name()));
        match current.iter().find(|f| f.name() == field.name()) {
            None => {
                let ty = field_type(field)?;
                let column = match parent {
                    None => AddColumn::optional(field.name(), ty),
                    Some(parent) => AddColumn::builder().parent(parent).name(field.name()).field_type(ty).build(),
                };
                out.push((path, column));
            }
            Some(existing) => match (existing.data_type(), field.data_type()) {
                (DataType::Struct(have), DataType::Struct(want)) => missing_in(have, want, Some(&path), out)?,
                (DataType::List(have), DataType::List(want)) => {
                    if let (DataType::Struct(have), DataType::Struct(want)) = (have.data_type(), want.data_type()) {
                        missing_in(have, want, Some(&format!("{path}.element")), out)?;
                    }
                }
                _ => {}
            },
        }
    }
    Ok(())
}

/// The Iceberg type of one Arrow field (nested ids are placeholders; the
/// schema update assigns fresh ones).
fn field_type(field: &FieldRef) -> iceberg::Result<Type> {
    let schema = arrow_schema_to_schema_auto_assign_ids(&ArrowSchema::new(vec![field.clone()]))?;
    schema.as_struct().fields().first().map(|f| (*f.field_type).clone()).ok_or_else(|| {
        iceberg::Error::new(ErrorKind::DataInvalid, format!("column {} has no Iceberg type", field.name()))
    })
}

/// A partition column's value from a staged file's folder.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum PartitionValue {
    /// `dt=2026-11-01`: days since 1970-01-01.
    Day(i32),
    /// `hour=07`.
    Hour(i32),
    /// A value column, Hive's escapes undone; `None` for the default partition.
    Value(Option<String>),
}

/// The values of the partition columns `columns` (name and table type:
/// `date`, `int` or `string`) from `staged`'s folder (`dt=…/hour=…`).
fn partition_values(
    staged: &StagedFile,
    columns: &[(String, DataType)],
) -> Result<Vec<(String, PartitionValue)>, String> {
    let segments: HashMap<&str, &str> =
        staged.partition.split('/').filter_map(|segment| segment.split_once('=')).collect();
    columns
        .iter()
        .map(|(name, data_type)| {
            let raw = segments
                .get(name.as_str())
                .ok_or_else(|| format!("the folder {:?} has no partition {name}", staged.partition))?;
            let value = match data_type {
                DataType::Date32 => {
                    let day = chrono::NaiveDate::parse_from_str(raw, "%Y-%m-%d")
                        .map_err(|_| format!("{name}={raw} is not a date"))?;
                    let days = day.signed_duration_since(chrono::NaiveDate::default()).num_days();
                    PartitionValue::Day(i32::try_from(days).map_err(|e| e.to_string())?)
                }
                DataType::Int32 => {
                    PartitionValue::Hour(raw.parse().map_err(|_| format!("{name}={raw} is not an hour"))?)
                }
                _ => PartitionValue::Value(partition::value_of(raw)),
            };
            Ok((name.clone(), value))
        })
        .collect()
}

/// `batch` as a batch of the table's Arrow schema `arrow` (with field ids):
/// columns by name, a missing one null, the partition columns from `values`.
pub(crate) fn table_batch(
    batch: &RecordBatch,
    arrow: &SchemaRef,
    values: &[(String, PartitionValue)],
) -> Result<RecordBatch, String> {
    let rows = batch.num_rows();
    let columns = arrow
        .fields()
        .iter()
        .map(|field| {
            if let Some((_, value)) = values.iter().find(|(name, _)| name == field.name()) {
                let column: ArrayRef = match value {
                    PartitionValue::Day(day) => Arc::new(Date32Array::from(vec![*day; rows])),
                    PartitionValue::Hour(hour) => Arc::new(Int32Array::from(vec![*hour; rows])),
                    PartitionValue::Value(value) => Arc::new(StringArray::from(vec![value.as_deref(); rows])),
                };
                return Ok(column);
            }
            match batch.column_by_name(field.name()) {
                Some(column) => align(column, field, Cast::Lossless).map_err(|err| err.to_string()),
                None => Ok(new_null_array(field.data_type(), rows)),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(arrow.clone(), columns).map_err(|e| e.to_string())
}

/// An iceberg error as a port error: invalid data and unsupported features
/// recur (permanent); catalog conflicts and I/O may pass (transient).
pub(crate) fn port_error(operation: &'static str, target: &str, err: iceberg::Error) -> PortError {
    let message = format!("{err:#}");
    let port_error = match err.kind() {
        ErrorKind::DataInvalid | ErrorKind::FeatureUnsupported | ErrorKind::PreconditionFailed => {
            PortError::permanent(operation, target, err)
        }
        _ => PortError::transient(operation, target, err),
    };
    port_error.with_message(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_cast_only_without_loss() {
        let field = Field::new("score", DataType::Int64, true);
        let doubles: ArrayRef = Arc::new(arrow_array::Float64Array::from(vec![1.5]));
        let err = align(&doubles, &field, Cast::Lossless).expect_err("1.5 is no int64").to_string();
        assert!(err.contains("without loss"), "{err}");
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![7]));
        assert_eq!(align(&ints, &field, Cast::Lossless).expect("widened").data_type(), &DataType::Int64);
        let millis: ArrayRef = Arc::new(arrow_array::TimestampMillisecondArray::from(vec![1_500]).with_timezone("UTC"));
        let micros = Field::new("at", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true);
        let cast = align(&millis, &micros, Cast::Lossless).expect("to microseconds");
        let cast = cast.as_any().downcast_ref::<arrow_array::TimestampMicrosecondArray>().expect("micros");
        assert_eq!(cast.value(0), 1_500_000);
    }

    #[test]
    fn folders_give_typed_partition_values_with_hive_escapes_undone() {
        let staged = |partition: &str| StagedFile { key: "k".into(), partition: partition.into() };
        let day_hour = [("dt".to_string(), DataType::Date32), ("hour".to_string(), DataType::Int32)];
        assert_eq!(
            partition_values(&staged("dt=1970-01-02/hour=07"), &day_hour).expect("values"),
            [("dt".to_string(), PartitionValue::Day(1)), ("hour".to_string(), PartitionValue::Hour(7))]
        );
        let country = [("country".to_string(), DataType::Utf8)];
        assert_eq!(
            partition_values(&staged("country=a%2Fb"), &country).expect("values")[0].1,
            PartitionValue::Value(Some("a/b".into()))
        );
        assert_eq!(
            partition_values(&staged("country=__HIVE_DEFAULT_PARTITION__"), &country).expect("values")[0].1,
            PartitionValue::Value(None)
        );
        assert!(partition_values(&staged("dt=2026-11-01"), &day_hour).is_err(), "no hour folder");
    }
}
