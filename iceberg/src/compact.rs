//! Table maintenance: compaction of small data files, and snapshot expiry
//! with the deletion of the files only expired snapshots needed.
//!
//! [`compact_table`]: per partition, the live data files smaller than the
//! target are bin-packed (first-fit decreasing) into groups near the
//! target; each group of two or more files is read and written again as
//! one file, with the run commit's writers (zstd level 1, the same Hive
//! folder under `<table>/data/`); one `replace` snapshot removes the old
//! files and adds the new (the same rows, so every reader reads the same
//! table before and after), valid only on the snapshot it was planned on:
//! a commit in between makes it delete what it wrote and plan again.
//!
//! [`expire_snapshots`]: iceberg's metadata-only expiry action, then the
//! files reachable from the expired snapshots (their manifest lists, the
//! manifests those list, the data files those name) that no kept snapshot
//! reaches (kept manifest lists, kept manifests, the live entries of kept
//! manifests) are deleted, and only those: never a listing of a folder.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use iceberg::arrow::schema_to_arrow_schema;
use iceberg::io::FileIO;
use iceberg::spec::{DataFile, Operation, SnapshotRef, Struct};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, ErrorKind, TableIdent};
use tributary_core::ports::PortError;

use crate::commit::{Change, PLAN_ATTEMPTS, port_error};
use crate::files::{TableWriter, data_folder, delete_files, live_files_by_spec, read_data_file};

/// Snapshot summary property of a compaction's snapshot (`"true"`).
pub const COMPACTION_PROPERTY: &str = "tributary.compaction";

/// One partition of a compaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionCompaction {
    /// The partition's Hive folder under `<table>/data/` (`dt=2026-11-01`;
    /// empty for an unpartitioned table).
    pub folder: String,
    /// Live data files of the partition before.
    pub files_before: usize,
    /// Live data files of the partition after.
    pub files_after: usize,
    /// Rows of the partition (the same before and after).
    pub rows: u64,
}

/// What [`compact_table`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactSummary {
    /// The table.
    pub table: String,
    /// Every partition of the table, sorted by folder, compacted or not.
    pub partitions: Vec<PartitionCompaction>,
    /// The snapshot's `total-records` before.
    pub records_before: u64,
    /// The `total-records` after (equal to `records_before`).
    pub records_after: u64,
    /// The `replace` snapshot committed; `None` when there was nothing to
    /// compact (no partition with two files under the target).
    pub snapshot_id: Option<i64>,
    /// Plans made (more than one: another writer committed meanwhile).
    pub attempts: u32,
}

impl fmt::Display for CompactSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "table {}", self.table)?;
        writeln!(f, "  {:<40} {:>12} {:>11} {:>12}", "partition", "files before", "files after", "rows")?;
        for p in &self.partitions {
            let folder = if p.folder.is_empty() { "(unpartitioned)" } else { p.folder.as_str() };
            writeln!(f, "  {folder:<40} {:>12} {:>11} {:>12}", p.files_before, p.files_after, p.rows)?;
        }
        let before: usize = self.partitions.iter().map(|p| p.files_before).sum();
        let after: usize = self.partitions.iter().map(|p| p.files_after).sum();
        writeln!(f, "  data files           {before} -> {after}")?;
        writeln!(f, "  rows                 {} -> {}", self.records_before, self.records_after)?;
        match self.snapshot_id {
            Some(id) => writeln!(f, "  snapshot             {id} (operation replace, {COMPACTION_PROPERTY}=true)"),
            None => writeln!(f, "  nothing to compact: no partition has two data files under the target; no snapshot"),
        }
    }
}

/// Rewrites each partition's small data files (under `target_file_bytes`)
/// into files near that size, in one `replace` snapshot of the table
/// `ident` carrying [`COMPACTION_PROPERTY`]. A partition with one small
/// file is left as it is; nothing to compact commits nothing.
///
/// # Errors
/// The table cannot be loaded, read or written ([`PortError`] with the
/// operation and table); the rows written are not the rows read
/// (permanent: nothing is committed); another writer committed during each
/// of [`PLAN_ATTEMPTS`] plans (transient).
#[tracing::instrument(skip(catalog, ident), fields(table = %ident))]
pub async fn compact_table(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    target_file_bytes: u64,
) -> Result<CompactSummary, PortError> {
    let target = ident.to_string();
    let mut attempt = 1;
    loop {
        let table = catalog.load_table(ident).await.map_err(|err| port_error("load the table", &target, err))?;
        let plan = plan_compaction(&table, target_file_bytes).await?;
        let records_before = total_records(table.metadata().current_snapshot());
        let mut summary = CompactSummary {
            table: target.clone(),
            partitions: plan.partitions(),
            records_before,
            records_after: records_before,
            snapshot_id: None,
            attempts: attempt,
        };
        if plan.groups.is_empty() {
            tracing::info!("nothing to compact");
            return Ok(summary);
        }
        let change = rewrite(&table, &plan).await?;
        let added: Vec<String> = change.added.iter().map(|f| f.file_path().to_string()).collect();
        let properties = HashMap::from([(COMPACTION_PROPERTY.to_string(), "true".to_string())]);
        match change.commit(&table, catalog, properties).await {
            Ok(committed) => {
                let snapshot = committed.metadata().current_snapshot();
                summary.snapshot_id = snapshot.map(|s| s.snapshot_id());
                summary.records_after = total_records(snapshot);
                tracing::info!(
                    snapshot_id = summary.snapshot_id,
                    removed = plan.removed(),
                    added = added.len(),
                    "the table compacted in one replace snapshot"
                );
                return Ok(summary);
            }
            Err(err) if err.kind() == ErrorKind::CatalogCommitConflicts && attempt < PLAN_ATTEMPTS => {
                tracing::warn!(attempt, error = %err, "the table changed while the compaction was planned; planning again");
                delete_files(&table, &added).await;
                attempt += 1;
            }
            Err(err) => {
                delete_files(&table, &added).await;
                return Err(port_error("commit the compaction", &target, err));
            }
        }
    }
}

/// A partition's identity: the partition spec and value of its files.
type PartitionId = (i32, Struct);

/// What a compaction rewrites, planned on one snapshot.
struct CompactionPlan {
    /// The snapshot planned on.
    base: Option<i64>,
    /// Per partition: its folder, live files and rows.
    partitions: HashMap<PartitionId, (String, usize, u64)>,
    /// Groups of two or more files to write as one, with their partition.
    groups: Vec<(PartitionId, Vec<DataFile>)>,
}

impl CompactionPlan {
    /// Every partition, sorted by folder, with its files after the plan.
    fn partitions(&self) -> Vec<PartitionCompaction> {
        let mut out: Vec<PartitionCompaction> = self
            .partitions
            .iter()
            .map(|(id, (folder, files, rows))| {
                let (removed, groups) = self
                    .groups
                    .iter()
                    .filter(|(group, _)| group == id)
                    .fold((0, 0), |(removed, groups), (_, files)| (removed + files.len(), groups + 1));
                PartitionCompaction {
                    folder: folder.clone(),
                    files_before: *files,
                    files_after: files - removed + groups,
                    rows: *rows,
                }
            })
            .collect();
        out.sort_by(|a, b| a.folder.cmp(&b.folder));
        out
    }

    /// Files the plan removes.
    fn removed(&self) -> usize {
        self.groups.iter().map(|(_, files)| files.len()).sum()
    }
}

/// Reads the current snapshot's live files and bin-packs each partition's
/// small ones. Files of another partition spec than the default are left
/// alone (the writers write the default spec).
async fn plan_compaction(table: &Table, target_file_bytes: u64) -> Result<CompactionPlan, PortError> {
    let target = table.identifier().to_string();
    let files = live_files_by_spec(table).await.map_err(|err| port_error("list the table's files", &target, err))?;
    let default_spec = table.metadata().default_partition_spec_id();
    let mut partitions: HashMap<PartitionId, (String, usize, u64)> = HashMap::new();
    let mut small: HashMap<PartitionId, Vec<DataFile>> = HashMap::new();
    for (spec, file) in files {
        let id = (spec, file.partition().clone());
        let entry = partitions.entry(id.clone()).or_insert_with(|| (data_folder(table, file.file_path()), 0, 0));
        entry.1 += 1;
        entry.2 += file.record_count();
        if spec == default_spec && file.file_size_in_bytes() < target_file_bytes {
            small.entry(id).or_default().push(file);
        }
    }
    let mut groups = Vec::new();
    for (id, files) in small {
        for group in bin_pack(files, target_file_bytes, DataFile::file_size_in_bytes) {
            if group.len() > 1 {
                groups.push((id.clone(), group));
            }
        }
    }
    Ok(CompactionPlan { base: table.metadata().current_snapshot_id(), partitions, groups })
}

/// First-fit decreasing: `items` sorted by size, largest first, each into
/// the first bin with room left under `capacity` (a new bin when none has),
/// so each bin holds at most `capacity` bytes unless one item alone does.
fn bin_pack<T>(mut items: Vec<T>, capacity: u64, size: impl Fn(&T) -> u64) -> Vec<Vec<T>> {
    items.sort_by_key(|item| std::cmp::Reverse(size(item)));
    let mut bins: Vec<(u64, Vec<T>)> = Vec::new();
    for item in items {
        let bytes = size(&item);
        match bins.iter_mut().find(|(used, _)| used.saturating_add(bytes) <= capacity) {
            Some((used, bin)) => {
                *used += bytes;
                bin.push(item);
            }
            None => bins.push((bytes, vec![item])),
        }
    }
    bins.into_iter().map(|(_, bin)| bin).collect()
}

/// Writes each group's rows as new data files in its folder: the change
/// removing the group's files and adding the new ones. The rows written
/// must be the rows read.
async fn rewrite(table: &Table, plan: &CompactionPlan) -> Result<Change, PortError> {
    let target = table.identifier().to_string();
    let arrow = Arc::new(
        schema_to_arrow_schema(table.metadata().current_schema())
            .map_err(|err| port_error("convert the table schema", &target, err))?,
    );
    let prefix = format!("compact-{}", uuid::Uuid::new_v4().simple());
    let mut added = Vec::new();
    let mut removed = Vec::new();
    for (n, (_, group)) in plan.groups.iter().enumerate() {
        // One writer per group: one file per group, even where a partition
        // has several groups.
        let mut writer = TableWriter::new(table, &format!("{prefix}-{n}"))
            .map_err(|err| port_error("open the table's writers", &target, err))?;
        for file in group {
            let rows = read_data_file(table, file, &arrow).await?;
            writer.write(&rows, &data_folder(table, file.file_path())).await?;
            removed.push(file.file_path().to_string());
        }
        let written = writer.close().await?;
        let rows_in: u64 = group.iter().map(DataFile::record_count).sum();
        let rows_out: u64 = written.iter().map(DataFile::record_count).sum();
        added.extend(written);
        if rows_in != rows_out {
            let paths: Vec<String> = added.iter().map(|f| f.file_path().to_string()).collect();
            delete_files(table, &paths).await;
            return Err(PortError::permanent_msg(
                "rewrite a partition's files",
                target,
                format!("{rows_in} rows read, {rows_out} written: nothing committed"),
            ));
        }
    }
    Ok(Change { added, removed, base: Some(plan.base), operation: Some(Operation::Replace), notes: Vec::new() })
}

/// The `total-records` of a snapshot's summary (0 without one).
fn total_records(snapshot: Option<&SnapshotRef>) -> u64 {
    snapshot
        .and_then(|s| s.summary().additional_properties.get("total-records"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// What [`expire_snapshots`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpirySummary {
    /// Snapshots expired (removed from the table's metadata).
    pub snapshots_expired: usize,
    /// Snapshots kept.
    pub snapshots_kept: usize,
    /// Data files deleted (reachable only from expired snapshots).
    pub data_files_deleted: usize,
    /// Manifests deleted.
    pub manifests_deleted: usize,
    /// Manifest lists deleted.
    pub manifest_lists_deleted: usize,
    /// Files that could not be deleted, with the reason (orphans now: no
    /// snapshot names them).
    pub failed: Vec<String>,
}

impl fmt::Display for ExpirySummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  snapshots expired    {} ({} kept)", self.snapshots_expired, self.snapshots_kept)?;
        writeln!(
            f,
            "  files deleted        {} data files, {} manifests, {} manifest lists",
            self.data_files_deleted, self.manifests_deleted, self.manifest_lists_deleted
        )?;
        for failure in &self.failed {
            writeln!(f, "  NOT DELETED: {failure}")?;
        }
        Ok(())
    }
}

/// Expires the snapshots of table `ident` older than `older_than` (before
/// now), keeping the current one and at least the `retain_last` newest
/// (iceberg's `expire_snapshots` action, metadata only), then deletes the
/// files reachable from the expired snapshots and from no kept one.
///
/// # Errors
/// `retain_last` of 0, or the table cannot be loaded, read or updated
/// ([`PortError`]). A file that cannot be deleted is not an error: it is
/// listed in [`ExpirySummary::failed`].
#[tracing::instrument(skip(catalog, ident), fields(table = %ident))]
pub async fn expire_snapshots(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    older_than: chrono::Duration,
    retain_last: usize,
) -> Result<ExpirySummary, PortError> {
    let target = ident.to_string();
    let target = target.as_str();
    let err = |operation: &'static str| move |err: iceberg::Error| port_error(operation, target, err);
    let before = catalog.load_table(ident).await.map_err(err("load the table"))?;
    let cutoff = (chrono::Utc::now() - older_than).timestamp_millis();
    let tx = Transaction::new(&before);
    let tx = tx
        .expire_snapshots()
        .expire_older_than_ms(cutoff)
        .retain_last(retain_last)
        .apply(tx)
        .map_err(err("expire snapshots"))?;
    let after = tx.commit(catalog).await.map_err(err("expire snapshots"))?;
    // Kept: every snapshot of the table after the commit (a writer's
    // snapshot committed meanwhile included); expired: those of the table
    // before that are gone.
    let kept_ids: HashSet<i64> = after.metadata().snapshots().map(|s| s.snapshot_id()).collect();
    let expired: Vec<&SnapshotRef> =
        before.metadata().snapshots().filter(|s| !kept_ids.contains(&s.snapshot_id())).collect();
    let mut summary =
        ExpirySummary { snapshots_expired: expired.len(), snapshots_kept: kept_ids.len(), ..Default::default() };
    if expired.is_empty() {
        return Ok(summary);
    }
    let kept = reachable(&after, after.metadata().snapshots(), true).await.map_err(err("read the kept snapshots"))?;
    let gone = reachable(&before, expired.into_iter(), false).await.map_err(err("read the expired snapshots"))?;
    let io = after.file_io();
    // Data files first, manifest lists last: a deletion that stops half
    // way leaves metadata naming no missing file of a kept snapshot.
    summary.data_files_deleted = delete_unkept(io, gone.data_files, &kept.data_files, &mut summary.failed).await;
    summary.manifests_deleted = delete_unkept(io, gone.manifests, &kept.manifests, &mut summary.failed).await;
    summary.manifest_lists_deleted =
        delete_unkept(io, gone.manifest_lists, &kept.manifest_lists, &mut summary.failed).await;
    tracing::info!(
        expired = summary.snapshots_expired,
        data_files = summary.data_files_deleted,
        manifests = summary.manifests_deleted,
        manifest_lists = summary.manifest_lists_deleted,
        failed = summary.failed.len(),
        "snapshots expired"
    );
    Ok(summary)
}

/// Deletes the files of `paths` that are not in `keep`: how many were
/// deleted; a failure is added to `failed`.
async fn delete_unkept(io: &FileIO, paths: HashSet<String>, keep: &HashSet<String>, failed: &mut Vec<String>) -> usize {
    let mut paths: Vec<String> = paths.into_iter().filter(|p| !keep.contains(p)).collect();
    paths.sort();
    let mut deleted = 0;
    for path in paths {
        match io.delete(&path).await {
            Ok(()) => deleted += 1,
            Err(e) => failed.push(format!("{path}: {e}")),
        }
    }
    deleted
}

/// The files some snapshots reach.
#[derive(Default)]
struct Reachable {
    manifest_lists: HashSet<String>,
    manifests: HashSet<String>,
    data_files: HashSet<String>,
}

/// The manifest lists, manifests and data (and delete) files that
/// `snapshots` of `table` reach: with `live_only`, only the files a
/// manifest holds as added or existing (those a kept snapshot reads);
/// without, every file named (a `DELETED` entry of an expired snapshot's
/// manifest was live in its parent).
async fn reachable<'a>(
    table: &Table,
    snapshots: impl Iterator<Item = &'a SnapshotRef>,
    live_only: bool,
) -> iceberg::Result<Reachable> {
    let mut out = Reachable::default();
    for snapshot in snapshots {
        out.manifest_lists.insert(snapshot.manifest_list().to_string());
        let list = table.manifest_list_reader(snapshot).load().await?;
        for manifest in list.entries() {
            if !out.manifests.insert(manifest.manifest_path.clone()) {
                continue;
            }
            let manifest = manifest.load_manifest(table.file_io()).await?;
            out.data_files.extend(
                manifest
                    .entries()
                    .iter()
                    .filter(|e| !live_only || e.is_alive())
                    .map(|e| e.data_file().file_path().to_string()),
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_decreasing_fills_bins_up_to_the_target() {
        let bins = bin_pack(vec![10, 70, 20, 40, 60, 30], 100, |n| *n);
        assert_eq!(bins, vec![vec![70, 30], vec![60, 40], vec![20, 10]]);
        // One item over the target is a bin of its own.
        assert_eq!(bin_pack(vec![150, 5], 100, |n| *n), vec![vec![150], vec![5]]);
        assert!(bin_pack(Vec::<u64>::new(), 100, |n| *n).is_empty());
    }
}
