//! The vendored `Transaction::overwrite_files` action (vendor/iceberg,
//! issue 26) against the Iceberg table spec, on the local catalog: an
//! overwrite removes one data file and adds its rewrite in one snapshot
//! whose summary counts both; the snapshot before still reads the old
//! rows (time travel through the DELETED entries' manifests); an
//! overwrite planned on a snapshot that is no longer current is refused
//! with `CatalogCommitConflicts`; a file the table does not hold cannot be
//! removed.

use std::collections::HashMap;

use iceberg::spec::{Operation, Transform, UnboundPartitionSpec};
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, ErrorKind, NamespaceIdent, TableCreation, TableIdent};
use tributary_iceberg::local_catalog;

use super::spike::{DAY_1, DAY_2, RUN_ID, batch, commit_run, customer, first_schema, row_count, rows_at, write_files};

#[tokio::test]
async fn an_overwrite_swaps_files_in_one_snapshot_and_refuses_a_stale_plan() -> anyhow::Result<()> {
    let lake = tempfile::tempdir()?;
    let catalog = local_catalog(lake.path()).await?;
    let namespace = NamespaceIdent::new("crm".to_string());
    catalog.create_namespace(&namespace, HashMap::new()).await?;
    let spec = UnboundPartitionSpec::builder().add_partition_field(3, "updated_at_day", Transform::Day)?.build();
    let creation =
        TableCreation::builder().name("customers".to_string()).schema(first_schema()).partition_spec(spec).build();
    let table = catalog.create_table(&namespace, creation).await?;
    let ident = TableIdent::new(namespace, "customers".to_string());

    // Run 1: one file per day, 2 + 3 rows.
    let day_1 = [customer(1, DAY_1 + 60, Some("Oslo"), &["a"]), customer(2, DAY_1 + 120, None, &[])];
    let day_2 =
        [customer(3, DAY_2, Some("Lima"), &[]), customer(4, DAY_2 + 1, None, &[]), customer(5, DAY_2 + 2, None, &[])];
    let files = write_files(&table, "r1", &[batch(&table, &day_1), batch(&table, &day_2)]).await?;
    let day_1_file = files.iter().find(|f| f.record_count() == 2).expect("day 1's file").file_path().to_string();
    let table = commit_run(&catalog, &table, "r1", files).await?;
    let before = table.metadata().current_snapshot_id();

    // The day-1 file rewritten: customer 2 now in Lima.
    let rewrite = [customer(1, DAY_1 + 60, Some("Oslo"), &["a"]), customer(2, DAY_1 + 120, Some("Lima"), &[])];
    let added = write_files(&table, "r2", &[batch(&table, &rewrite)]).await?;
    let tx = Transaction::new(&table);
    let overwrite = tx
        .overwrite_files()
        .validate_from_snapshot(before)
        .set_snapshot_properties(HashMap::from([(RUN_ID.to_string(), "r2".to_string())]))
        .delete_files([day_1_file.clone()])
        .add_data_files(added);
    let table = overwrite.apply(tx)?.commit(&catalog).await?;
    let snapshot = table.metadata().current_snapshot().expect("the overwrite's snapshot");
    assert_eq!(snapshot.parent_snapshot_id(), before);
    let summary = snapshot.summary();
    assert_eq!(summary.operation, Operation::Overwrite);
    let property = |key: &str| summary.additional_properties.get(key).map(String::as_str);
    assert_eq!(
        [property("added-data-files"), property("deleted-data-files"), property("added-records")],
        [Some("1"), Some("1"), Some("2")]
    );
    assert_eq!(
        [property("deleted-records"), property("total-records"), property("total-data-files")],
        [Some("2"), Some("5"), Some("2")]
    );

    // Now: 5 rows, customer 2 in Lima; as of run 1: the old rows.
    let table = catalog.load_table(&ident).await?;
    let now = rows_at(&table, snapshot.snapshot_id()).await?;
    assert_eq!(row_count(&now), 5);
    let cities = |batches: &[arrow_array::RecordBatch]| -> Vec<Option<String>> {
        let mut out = Vec::new();
        for batch in batches {
            let ids = batch.column_by_name("id").expect("id");
            let ids = ids.as_any().downcast_ref::<arrow_array::Int64Array>().expect("ids");
            let address = batch.column_by_name("address").expect("address");
            let address = address.as_any().downcast_ref::<arrow_array::StructArray>().expect("struct");
            let city = address.column_by_name("city").expect("city");
            let city = city.as_any().downcast_ref::<arrow_array::StringArray>().expect("city");
            for row in (0..batch.num_rows()).filter(|row| ids.value(*row) == 2) {
                out.push(arrow_array::Array::is_valid(city, row).then(|| city.value(row).to_string()));
            }
        }
        out
    };
    assert_eq!(cities(&now), [Some("Lima".to_string())]);
    let then = rows_at(&table, before.expect("run 1's snapshot")).await?;
    assert_eq!(row_count(&then), 5);
    assert_eq!(cities(&then), [None], "the snapshot before still reads the file the overwrite removed");

    // A plan made on run 1's snapshot, committed after the overwrite: refused.
    let stale = catalog.load_table(&ident).await?;
    let tx = Transaction::new(&stale);
    let late = tx.overwrite_files().validate_from_snapshot(before).delete_files([day_1_file.clone()]);
    let err = late.apply(tx)?.commit(&catalog).await.expect_err("a stale plan");
    assert_eq!(err.kind(), ErrorKind::CatalogCommitConflicts, "{err}");

    // A file the table does not hold (the one the overwrite removed).
    let current = table.metadata().current_snapshot_id();
    let tx = Transaction::new(&table);
    let gone = tx.overwrite_files().validate_from_snapshot(current).delete_files([day_1_file]);
    let err = gone.apply(tx)?.commit(&catalog).await.expect_err("not in the table");
    assert_eq!(err.kind(), ErrorKind::DataInvalid, "{err}");
    assert!(err.to_string().contains("does not hold"), "{err}");
    Ok(())
}
