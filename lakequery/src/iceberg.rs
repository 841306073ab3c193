//! Iceberg datasets (`target.table_format: iceberg`): each table of the
//! lake's local catalog (`_iceberg/catalog.sqlite`, namespace `tributary`)
//! read as its current snapshot.
//!
//! The `iceberg` crate loads each table and lists its current snapshot's
//! data files and converts its current schema to Arrow; DataFusion reads
//! the files (`register_iceberg` in lib.rs says why not iceberg-datafusion).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use futures::TryStreamExt;
use iceberg::spec::{DataFileFormat, Transform};
use iceberg::table::Table;
use iceberg::{Catalog, NamespaceIdent};
use lake_format::partition::PartitionKind;

/// One table's current snapshot, ready to register.
#[derive(Debug)]
pub(crate) struct Snapshot {
    /// The table's current schema in Arrow. Its fields keep the
    /// `PARQUET:field_id` metadata `iceberg` gives them: DataFusion 53
    /// matches a file's columns and struct fields to these by name whether
    /// the metadata is there or not (tested with and without, on a file
    /// written before its struct gained a field), so it is not stripped.
    pub schema: SchemaRef,
    /// The partition columns (identity partitions of top-level columns), in
    /// the partition spec's order, with their kind: a `date` column is a
    /// day, an `int` column an hour, a `string` column a value (the
    /// committer stored it with Hive's escapes undone, null for the default
    /// partition).
    pub partitions: Vec<(String, PartitionKind)>,
    /// The current snapshot's data files (none: the table has no snapshot).
    pub files: Vec<PathBuf>,
}

/// The Iceberg tables of the lake at `root`: `(dataset, snapshot or why it
/// cannot be read)`, sorted by dataset. No `_iceberg/catalog.sqlite`: no
/// tables (and nothing is created).
///
/// # Errors
/// The catalog exists but cannot be opened, or its tables not listed: then
/// which datasets are Iceberg tables is unknown.
pub(crate) async fn find_tables(root: &Path) -> Result<Vec<(String, Result<Snapshot, String>)>, String> {
    let file = root.join(tributary_core::keys::iceberg_catalog_key());
    if !tokio::fs::try_exists(&file).await.unwrap_or(false) {
        return Ok(Vec::new());
    }
    let unreadable =
        |err: iceberg::Error| format!("the lake's Iceberg catalog {} cannot be read: {err:#}", file.display());
    let catalog = tributary_iceberg::local_catalog(root).await.map_err(unreadable)?;
    let namespace = NamespaceIdent::new(tributary_iceberg::NAMESPACE.to_string());
    if !catalog.namespace_exists(&namespace).await.map_err(unreadable)? {
        return Ok(Vec::new());
    }
    let mut tables = Vec::new();
    for ident in catalog.list_tables(&namespace).await.map_err(unreadable)? {
        let snapshot = match catalog.load_table(&ident).await {
            Ok(table) => current_snapshot(&table).await,
            Err(err) => Err(format!("{err:#}")),
        };
        tables.push((ident.name().to_string(), snapshot.map_err(|err| format!("Iceberg table {ident}: {err}"))));
    }
    tables.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(tables)
}

/// `table`'s current snapshot: its data files, schema and partition columns.
///
/// # Errors
/// The manifests cannot be read, a data file is not a local Parquet file,
/// a file has delete files (the committer only appends, so they would come
/// from another writer, and reading past them would show deleted rows), or
/// the schema has no Arrow form.
async fn current_snapshot(table: &Table) -> Result<Snapshot, String> {
    let metadata = table.metadata();
    let schema = metadata.current_schema();
    let arrow = iceberg::arrow::schema_to_arrow_schema(schema).map_err(|err| format!("{err:#}"))?;
    let schema_ref = Arc::new(arrow);
    let mut partitions = Vec::new();
    for field in metadata.default_partition_spec().fields() {
        let column = schema.field_by_id(field.source_id).filter(|_| field.transform == Transform::Identity);
        let kind = column.and_then(|column| {
            let name = column.name.clone();
            match schema_ref.field_with_name(&name).map(|f| f.data_type().clone()) {
                Ok(DataType::Date32) => Some((name, PartitionKind::Day)),
                Ok(DataType::Int32) => Some((name, PartitionKind::Hour)),
                Ok(DataType::Utf8) => Some((name, PartitionKind::Value)),
                _ => None,
            }
        });
        // Another partition (not written by tributary) stays a plain column.
        partitions.extend(kind);
    }
    let scan = table.scan().build().map_err(|err| format!("{err:#}"))?;
    let tasks: Vec<_> = scan
        .plan_files()
        .await
        .map_err(|err| format!("{err:#}"))?
        .try_collect()
        .await
        .map_err(|err| format!("{err:#}"))?;
    let mut files = Vec::with_capacity(tasks.len());
    for task in tasks {
        if !task.deletes.is_empty() {
            return Err(format!("data file {} has delete files, which are not read", task.data_file_path));
        }
        if task.data_file_format != DataFileFormat::Parquet {
            return Err(format!("data file {} is not Parquet", task.data_file_path));
        }
        // Local FileIO locations are `file://` and the path as it is (not
        // percent-encoded).
        let path = task
            .data_file_path
            .strip_prefix("file://")
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
            .ok_or_else(|| format!("data file {} is not a local file", task.data_file_path))?;
        files.push(path);
    }
    files.sort();
    files.dedup();
    Ok(Snapshot { schema: schema_ref, partitions, files })
}
