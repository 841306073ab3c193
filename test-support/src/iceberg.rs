//! Iceberg datasets in tests (feature `iceberg`): a directory lake with the
//! local catalog, as the local runtime wires it, and a table read back
//! (its rows as record batches, its snapshots' summaries) with
//! iceberg-rust's own reader.

use std::collections::HashMap;
use std::sync::Arc;

use ::iceberg::table::Table;
use adapters::local::DirStore;
use arrow_array::RecordBatch;
use futures::TryStreamExt;
use tributary_iceberg::{IcebergCommitter, local_committer};

/// A lake folder (removed on drop), its store, and the committer over the
/// local catalog in it.
pub struct IcebergLake {
    /// The lake's folder.
    pub dir: tempfile::TempDir,
    /// The lake.
    pub store: Arc<DirStore>,
    /// Commits runs to the local catalog's tables.
    pub committer: IcebergCommitter,
}

impl IcebergLake {
    /// A new, empty lake in a temporary folder.
    ///
    /// # Panics
    /// When the folder or the local catalog cannot be created.
    pub async fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Arc::new(DirStore::new(dir.path()));
        let committer = local_committer(dir.path(), store.clone()).await.expect("local catalog");
        Self { dir, store, committer }
    }
}

/// Every row of the table's current snapshot, `columns` only (those the
/// current schema has; the others are left out).
///
/// Ask for top-level columns that are not structs: iceberg-rust 0.10.1's
/// reader cannot read a file written before a struct gained a field
/// (pyiceberg can, see tests/tests/it/iceberg.rs).
///
/// # Panics
/// When the scan cannot be built or a file cannot be read.
pub async fn scan(table: &Table, columns: &[&str]) -> Vec<RecordBatch> {
    let schema = table.metadata().current_schema();
    let columns = columns.iter().filter(|c| schema.field_by_name(c).is_some());
    table
        .scan()
        .select(columns.copied())
        .build()
        .expect("scan")
        .to_arrow()
        .await
        .expect("arrow")
        .try_collect()
        .await
        .expect("rows")
}

/// The summary properties of the table's snapshots (e.g.
/// `tributary.run-id`), oldest first (by sequence number).
pub fn snapshot_summaries(table: &Table) -> Vec<HashMap<String, String>> {
    let mut snapshots: Vec<_> = table.metadata().snapshots().cloned().collect();
    snapshots.sort_by_key(|s| s.sequence_number());
    snapshots.iter().map(|s| s.summary().additional_properties.clone()).collect()
}
