//! The groundwork spike of issue 15, end to end on the local catalog: a
//! day-partitioned table with a struct and a list column, two runs each
//! committed as one fast-append snapshot carrying its run id, a schema
//! update (a new column), and a third run written with the new schema; every
//! snapshot read back through iceberg's own table scan.
//!
//! The lake is a temporary folder. With `TRIBUTARY_ICEBERG_SPIKE_LAKE` set to
//! an empty (or missing) absolute folder, the test writes there instead and
//! leaves the lake behind, for other readers (pyiceberg, DuckDB) to check.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BooleanArray, Int64Array, ListArray, RecordBatch, StringArray, StructArray,
    TimestampMicrosecondArray,
};
use arrow_buffer::OffsetBuffer;
use arrow_schema::DataType;
use futures::TryStreamExt;
use iceberg::arrow::{RecordBatchPartitionSplitter, schema_to_arrow_schema};
use iceberg::expr::Reference;
use iceberg::spec::{
    DataFile, DataFileFormat, Datum, ListType, Literal, NestedField, Operation, PrimitiveType, Schema, StructType,
    Transform, Type, UnboundPartitionSpec,
};
use iceberg::table::Table;
use iceberg::transaction::{AddColumn, ApplyTransactionAction, Transaction};
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{DefaultFileNameGenerator, DefaultLocationGenerator};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use iceberg::{Catalog, NamespaceIdent, TableCreation, TableIdent};
use parquet::file::properties::WriterProperties;
use tributary_iceberg::local_catalog;

/// The snapshot summary property naming the run a snapshot commits.
pub(super) const RUN_ID: &str = "tributary.run-id";

/// Midnight UTC of 2026-11-29, 2026-11-30 and 2026-12-01, in seconds.
pub(super) const DAY_1: i64 = 1_795_910_400;
pub(super) const DAY_2: i64 = 1_795_996_800;
const DAY_3: i64 = 1_796_083_200;

/// One record of the spike's `crm.customers` table.
pub(super) struct Customer {
    id: i64,
    name: &'static str,
    updated_at_secs: i64,
    city: Option<&'static str>,
    tags: &'static [&'static str],
    /// Only in the schema after the update.
    vip: Option<bool>,
}

pub(super) const fn customer(
    id: i64,
    updated_at_secs: i64,
    city: Option<&'static str>,
    tags: &'static [&'static str],
) -> Customer {
    Customer { id, name: "c", updated_at_secs, city, tags, vip: None }
}

/// The table's first schema. The catalog assigns fresh field ids at
/// creation, level by level (a struct's or list's children after all the
/// top-level fields); these are the ids it gives, so the proposal reads as
/// what the table has.
pub(super) fn first_schema() -> Schema {
    let address = StructType::new(vec![
        NestedField::optional(6, "city", Type::Primitive(PrimitiveType::String)).into(),
        NestedField::optional(7, "zip", Type::Primitive(PrimitiveType::String)).into(),
    ]);
    let tags = ListType::new(NestedField::list_element(8, Type::Primitive(PrimitiveType::String), true).into());
    Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(2, "name", Type::Primitive(PrimitiveType::String)).into(),
            NestedField::required(3, "updated_at", Type::Primitive(PrimitiveType::Timestamptz)).into(),
            NestedField::optional(4, "address", Type::Struct(address)).into(),
            NestedField::optional(5, "tags", Type::List(tags)).into(),
        ])
        .build()
        .expect("a valid schema")
}

/// `rows` as a batch of the table's current schema, converted by iceberg
/// (`PARQUET:field_id` on every field, nested ones included).
pub(super) fn batch(table: &Table, rows: &[Customer]) -> RecordBatch {
    let arrow = Arc::new(schema_to_arrow_schema(table.metadata().current_schema()).expect("arrow schema"));
    let columns = arrow
        .fields()
        .iter()
        .map(|field| -> ArrayRef {
            match (field.name().as_str(), field.data_type()) {
                ("id", _) => Arc::new(Int64Array::from_iter_values(rows.iter().map(|row| row.id))),
                ("name", _) => Arc::new(StringArray::from_iter_values(rows.iter().map(|row| row.name))),
                ("updated_at", DataType::Timestamp(_, zone)) => Arc::new(
                    TimestampMicrosecondArray::from_iter_values(rows.iter().map(|row| row.updated_at_secs * 1_000_000))
                        .with_timezone_opt(zone.clone()),
                ),
                ("address", DataType::Struct(fields)) => {
                    let city = StringArray::from_iter(rows.iter().map(|row| row.city));
                    let zip = StringArray::from_iter(rows.iter().map(|row| row.city.map(|_| "00000")));
                    Arc::new(StructArray::new(fields.clone(), vec![Arc::new(city), Arc::new(zip)], None))
                }
                ("tags", DataType::List(element)) => {
                    let offsets = OffsetBuffer::from_lengths(rows.iter().map(|row| row.tags.len()));
                    let values: StringArray = rows.iter().flat_map(|row| row.tags.iter().copied()).map(Some).collect();
                    Arc::new(ListArray::new(element.clone(), offsets, Arc::new(values), None))
                }
                ("vip", _) => Arc::new(BooleanArray::from_iter(rows.iter().map(|row| row.vip))),
                (name, data_type) => panic!("no test data for column {name}: {data_type}"),
            }
        })
        .collect();
    RecordBatch::try_new(arrow, columns).expect("batch")
}

/// Writes `batches` as Parquet data files under the table's `data/`, one
/// file per batch and day partition, with iceberg's writer stack; nothing is
/// committed.
pub(super) async fn write_files(
    table: &Table,
    run_id: &str,
    batches: &[RecordBatch],
) -> iceberg::Result<Vec<DataFile>> {
    let metadata = table.metadata();
    let schema = metadata.current_schema().clone();
    let splitter = RecordBatchPartitionSplitter::try_new_with_computed_values(
        schema.clone(),
        metadata.default_partition_spec().clone(),
    )?;
    let parquet = ParquetWriterBuilder::new(WriterProperties::default(), schema);
    let rolling = RollingFileWriterBuilder::new_with_default_file_size(
        parquet,
        table.file_io().clone(),
        DefaultLocationGenerator::new(metadata)?,
        DefaultFileNameGenerator::new(format!("run-{run_id}"), None, DataFileFormat::Parquet),
    );
    let writers = DataFileWriterBuilder::new(rolling);
    let mut files = Vec::new();
    for batch in batches {
        for (partition, rows) in splitter.split(batch)? {
            let mut writer = writers.build(Some(partition)).await?;
            writer.write(rows).await?;
            files.extend(writer.close().await?);
        }
    }
    Ok(files)
}

/// Commits `files` in one fast-append snapshot whose summary names `run_id`.
pub(super) async fn commit_run(
    catalog: &dyn Catalog,
    table: &Table,
    run_id: &str,
    files: Vec<DataFile>,
) -> iceberg::Result<Table> {
    let tx = Transaction::new(table);
    let append = tx
        .fast_append()
        .set_snapshot_properties(HashMap::from([(RUN_ID.to_string(), run_id.to_string())]))
        .add_data_files(files);
    append.apply(tx)?.commit(catalog).await
}

/// Every row of the table as of `snapshot_id`, through iceberg's scan.
pub(super) async fn rows_at(table: &Table, snapshot_id: i64) -> iceberg::Result<Vec<RecordBatch>> {
    table.scan().snapshot_id(snapshot_id).build()?.to_arrow().await?.try_collect().await
}

/// The table's snapshots, oldest first (`TableMetadata::snapshots` iterates
/// a hash map: in no order).
fn snapshots_in_order(table: &Table) -> Vec<iceberg::spec::SnapshotRef> {
    let mut snapshots: Vec<_> = table.metadata().snapshots().cloned().collect();
    snapshots.sort_by_key(|snapshot| snapshot.sequence_number());
    snapshots
}

pub(super) fn row_count(batches: &[RecordBatch]) -> usize {
    batches.iter().map(RecordBatch::num_rows).sum()
}

/// `(id, vip)` of every row, sorted by id.
pub(super) fn ids_and_vip(batches: &[RecordBatch]) -> Vec<(i64, Option<bool>)> {
    let mut rows = Vec::new();
    for batch in batches {
        let ids = batch.column_by_name("id").expect("id").as_any().downcast_ref::<Int64Array>().expect("Int64");
        let vip = batch.column_by_name("vip").expect("vip").as_any().downcast_ref::<BooleanArray>().expect("Boolean");
        rows.extend((0..batch.num_rows()).map(|row| (ids.value(row), vip.is_valid(row).then(|| vip.value(row)))));
    }
    rows.sort_unstable();
    rows
}

#[tokio::test]
async fn runs_commit_as_one_snapshot_each_and_a_new_column_reads_as_null_before_it() -> anyhow::Result<()> {
    let temp = tempfile::tempdir()?;
    let lake = match std::env::var_os("TRIBUTARY_ICEBERG_SPIKE_LAKE") {
        Some(kept) => PathBuf::from(kept),
        None => temp.path().to_path_buf(),
    };
    let catalog = local_catalog(&lake).await?;
    let namespace = NamespaceIdent::new("crm".to_string());
    catalog.create_namespace(&namespace, HashMap::new()).await?;
    let spec = UnboundPartitionSpec::builder().add_partition_field(3, "updated_at_day", Transform::Day)?.build();
    let creation =
        TableCreation::builder().name("customers".to_string()).schema(first_schema()).partition_spec(spec).build();
    let table = catalog.create_table(&namespace, creation).await?;
    let ident = TableIdent::new(namespace.clone(), "customers".to_string());
    assert!(table.metadata().current_snapshot().is_none());
    assert_eq!(table.metadata().current_schema().as_struct(), first_schema().as_struct());

    // Run 1: two days, so two data files, in one snapshot.
    let day_1 = [customer(1, DAY_1 + 60, Some("Oslo"), &["a"]), customer(2, DAY_1 + 120, None, &[])];
    let day_2 = [
        customer(3, DAY_2, Some("Lima"), &["a", "b"]),
        customer(4, DAY_2 + 1, Some("Pune"), &[]),
        customer(5, DAY_2 + 2, None, &["c"]),
    ];
    let files = write_files(&table, "r1", &[batch(&table, &day_1), batch(&table, &day_2)]).await?;
    assert_eq!(files.len(), 2);
    // The day transform's value: days since 1970-01-01.
    let days: Vec<_> = files.iter().map(|file| file.partition().fields()[0].clone()).collect();
    assert_eq!(days, [Some(Literal::date(20_786)), Some(Literal::date(20_787))]);
    assert!(
        files.iter().all(|file| file.file_path().contains("/data/updated_at_day=2026-11-")),
        "{:?}",
        files[0].file_path()
    );
    let table = commit_run(&catalog, &table, "r1", files).await?;

    // Run 2: one file, in a second snapshot.
    let files = write_files(&table, "r2", &[batch(&table, &[customer(6, DAY_2 + 3, Some("Oslo"), &["d"])])]).await?;
    commit_run(&catalog, &table, "r2", files).await?;

    // What the catalog holds now, read back from the SQLite file.
    let table = catalog.load_table(&ident).await?;
    let snapshots = snapshots_in_order(&table);
    assert_eq!(snapshots.len(), 2);
    let [first, second] = [&snapshots[0], &snapshots[1]];
    assert_eq!(second.parent_snapshot_id(), Some(first.snapshot_id()));
    for (snapshot, run, files, records) in [(first, "r1", "2", "5"), (second, "r2", "1", "1")] {
        let summary = snapshot.summary();
        assert_eq!(summary.operation, Operation::Append);
        assert_eq!(summary.additional_properties.get(RUN_ID).map(String::as_str), Some(run));
        assert_eq!(summary.additional_properties["added-data-files"], files);
        assert_eq!(summary.additional_properties["added-records"], records);
    }
    assert_eq!(row_count(&rows_at(&table, first.snapshot_id()).await?), 5);
    assert_eq!(row_count(&rows_at(&table, second.snapshot_id()).await?), 6);

    // A schema update: a new optional column, with a fresh field id.
    let before = table.metadata().current_schema_id();
    let tx = Transaction::new(&table);
    let tx =
        tx.update_schema().add_column(AddColumn::optional("vip", Type::Primitive(PrimitiveType::Boolean))).apply(tx)?;
    let table = tx.commit(&catalog).await?;
    assert_ne!(table.metadata().current_schema_id(), before);
    let vip = table.metadata().current_schema().field_by_name("vip").expect("vip added");
    assert_eq!(vip.id, 9, "the next id after the first schema's 1..=8");
    assert_eq!(table.metadata().current_snapshot_id(), Some(second.snapshot_id()), "no data change, no snapshot");

    // Run 3, written with the new schema.
    let mut day_3 = [customer(7, DAY_3, None, &[]), customer(8, DAY_3 + 5, Some("Kyiv"), &["e"])];
    day_3[0].vip = Some(true);
    let files = write_files(&table, "r3", &[batch(&table, &day_3)]).await?;
    commit_run(&catalog, &table, "r3", files).await?;

    let table = catalog.load_table(&ident).await?;
    let snapshots = snapshots_in_order(&table);
    let runs: Vec<_> =
        snapshots.iter().map(|snapshot| snapshot.summary().additional_properties[RUN_ID].clone()).collect();
    assert_eq!(runs, ["r1", "r2", "r3"]);
    let counts = [
        row_count(&rows_at(&table, snapshots[0].snapshot_id()).await?),
        row_count(&rows_at(&table, snapshots[1].snapshot_id()).await?),
        row_count(&rows_at(&table, snapshots[2].snapshot_id()).await?),
    ];
    assert_eq!(counts, [5, 6, 8]);

    // The current snapshot reads every row with the current schema: `vip`
    // is null in the files written before it existed.
    let current = table.scan().build()?.to_arrow().await?.try_collect::<Vec<_>>().await?;
    let expected: Vec<_> = (1..=8).map(|id| (id, (id == 7).then_some(true))).collect();
    assert_eq!(ids_and_vip(&current), expected);

    // The day partitions prune: a filter on the third day plans one file.
    let third_day = Reference::new("updated_at").greater_than_or_equal_to(Datum::timestamptz_micros(DAY_3 * 1_000_000));
    let scan = table.scan().with_filter(third_day).build()?;
    let tasks: Vec<_> = scan.plan_files().await?.try_collect().await?;
    assert_eq!(tasks.len(), 1);
    assert!(tasks[0].data_file_path.contains("updated_at_day=2026-12-01"), "{}", tasks[0].data_file_path);
    Ok(())
}
