//! Iceberg datasets on the AWS emulator: Persist's handler with the Persist
//! Lambda's committer (`tributary_iceberg::glue`: the Glue Data Catalog and
//! an `s3://` FileIO) against moto's Glue and S3. A run's two pages become
//! one snapshot of a Glue table Athena would read (`table_type=ICEBERG`,
//! `metadata_location`), its files under `_iceberg/warehouse/` and never
//! at the database's location; the Hive catalog leaves the table alone; a
//! second run with a new field evolves the schema in a second snapshot;
//! a completion delivered again commits nothing; pyiceberg's Glue catalog
//! (boto3 against moto, pyarrow's S3 filesystem) reads the table whole;
//! a third run with `write: merge` replaces a key in one overwrite snapshot.
//!
//! Needs moto at `AWS_ENDPOINT_URL` (`bash .ci/run` starts it).

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;

use arrow_array::{Array, Int64Array, StringArray};
use iceberg::table::Table;

use adapters::aws::stack::output;
use adapters::aws::{GlueCatalog, S3Store, SqsSender, s3_client_with_path_style};
use contracts::{PersistMessage, PersistTarget, TableFormat};
use test_support::iceberg::{scan, snapshot_summaries};
use test_support::runs;
use tributary_core::ports::ObjectStore;
use tributary_e2e::emulator::{reset_emulator, stack_with_outputs};
use tributary_e2e::readers::python;
use tributary_iceberg::glue::{GlueSettings, glue_committer};
use tributary_iceberg::{IcebergCommitter, RUN_ID_PROPERTY};

const BUCKET: &str = "tributary-lake";
const DATABASE: &str = "tributary_lake";
const PIPELINE: &str = "crm-customers";
const DATASET: &str = "customers";

fn page(run: &str, index: u32, count: u32, records: &str) -> PersistMessage {
    let target = PersistTarget { table_format: TableFormat::Iceberg, ..PersistTarget::new(DATASET) };
    runs::page(PIPELINE, target, run, index, count, records)
}

/// `(id, name, tier)` of every row (tier null: None), sorted by id.
async fn rows(table: &Table) -> Vec<(i64, String, Option<String>)> {
    let batches = scan(table, &["id", "name", "tier"]).await;
    let mut out = Vec::new();
    for batch in &batches {
        let ids = batch.column_by_name("id").expect("id");
        let ids = ids.as_any().downcast_ref::<Int64Array>().expect("id is int64");
        let names = batch.column_by_name("name").expect("name");
        let names = names.as_any().downcast_ref::<StringArray>().expect("name is utf8");
        let tiers =
            batch.column_by_name("tier").map(|t| t.as_any().downcast_ref::<StringArray>().expect("utf8").clone());
        for i in 0..batch.num_rows() {
            let tier = tiers.as_ref().filter(|t| t.is_valid(i)).map(|t| t.value(i).to_string());
            out.push((ids.value(i), names.value(i).to_string(), tier));
        }
    }
    out.sort();
    out
}

/// Reads the table through pyiceberg's Glue catalog at `endpoint` (moto):
/// its snapshots' run ids (oldest first) and its rows as `[id, name, tier]`.
const PYICEBERG_GLUE: &str = r#"
import json, sys
from pyiceberg.catalog import load_catalog
endpoint, database, table = sys.argv[1:4]
catalog = load_catalog("glue", **{
    "type": "glue", "glue.endpoint": endpoint, "glue.region": "us-east-1",
    "glue.access-key-id": "testing", "glue.secret-access-key": "testing",
    "s3.endpoint": endpoint, "s3.region": "us-east-1",
    "s3.access-key-id": "testing", "s3.secret-access-key": "testing",
})
t = catalog.load_table((database, table))
snapshots = sorted(t.snapshots(), key=lambda s: s.sequence_number)
runs = [s.summary.get("tributary.run-id") for s in snapshots]
rows = sorted([r["id"], r["name"], r["tier"]] for r in t.scan().to_arrow().to_pylist())
files = len(list(t.scan().plan_files()))
print(json.dumps({"runs": runs, "rows": rows, "files": files, "operations": [s.summary.operation.value for s in snapshots]}))
"#;

fn read_with_pyiceberg(endpoint: &str) -> serde_json::Value {
    let python = python();
    let out = Command::new(&python)
        .args(["-c", PYICEBERG_GLUE, endpoint, DATABASE, DATASET])
        .output()
        .unwrap_or_else(|err| panic!("cannot run {} ({err}): run scripts/python-tools.sh install", python.display()));
    assert!(out.status.success(), "pyiceberg failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("pyiceberg's JSON")
}

/// The table's snapshots' run ids, oldest first.
fn snapshot_runs(table: &Table) -> Vec<String> {
    snapshot_summaries(table).iter().map(|props| props[RUN_ID_PROPERTY].clone()).collect()
}

#[tokio::test]
async fn persist_commits_each_run_to_a_glue_iceberg_table_on_s3() {
    let emulator = reset_emulator().await;
    let s3 = s3_client_with_path_style(&emulator.config, true);
    s3.create_bucket().bucket(BUCKET).send().await.expect("CreateBucket");
    let store: Arc<dyn ObjectStore> = Arc::new(S3Store::new(s3.clone(), BUCKET));
    // The template's lake database, its location the bucket's root.
    let glue = aws_sdk_glue::Client::new(&emulator.config);
    let database = aws_sdk_glue::types::DatabaseInput::builder()
        .name(DATABASE)
        .location_uri(format!("s3://{BUCKET}/"))
        .build()
        .expect("input");
    glue.create_database().database_input(database).send().await.expect("CreateDatabase");

    let settings = GlueSettings {
        database: DATABASE.into(),
        bucket: BUCKET.into(),
        region: Some("us-east-1".into()),
        endpoint: Some(emulator.endpoint.clone()),
        path_style: true,
    };
    let committer: IcebergCommitter = glue_committer(&settings, store.clone()).await.expect("Glue committer");
    // The Hive catalog is wired too, as in the Lambda: it must leave the
    // Iceberg dataset's table alone.
    let hive = GlueCatalog::new(&emulator.config, DATABASE, BUCKET);
    let queue = SqsSender::new(aws_sdk_sqs::Client::new(&emulator.config));
    let config = persist::PersistConfig::default();
    let deps = persist::Deps {
        store: store.as_ref(),
        queue: &queue,
        run_events: None,
        catalog: Some(&hive),
        tables: Some(&committer),
        config: &config,
    };

    // Run 1: two pages, committed together when the second lands.
    runs::expect_pages(store.as_ref(), PIPELINE, "r-1", 2).await;
    persist::persist_page(page("r-1", 0, 2, r#"[{"id":1,"name":"ada"},{"id":2,"name":"bo"}]"#), deps)
        .await
        .expect("page 0");
    let ident = committer.table_ident(DATASET);
    assert_eq!(ident.namespace().to_url_string(), DATABASE, "the stack's Glue database is the namespace");
    assert!(
        !committer.catalog().table_exists(&ident).await.expect("GetTable"),
        "a run half in is not in the catalog (the Hive catalog did not register it either)"
    );
    persist::persist_page(page("r-1", 1, 2, r#"[{"id":3,"name":"cy"}]"#), deps).await.expect("page 1");

    let table = committer.catalog().load_table(&ident).await.expect("the table");
    assert_eq!(snapshot_runs(&table), ["r-1"]);
    assert_eq!(
        rows(&table).await,
        [(1, "ada".into(), None), (2, "bo".into(), None), (3, "cy".into(), None)],
        "every row, read back through the S3 FileIO"
    );

    // What Athena and Spark read: a Glue table of type ICEBERG pointing at
    // the current metadata file, under the warehouse, not the bucket root.
    let glue_table = glue.get_table().database_name(DATABASE).name(DATASET).send().await.expect("GetTable");
    let glue_table = glue_table.table().expect("table");
    let params: BTreeMap<_, _> = glue_table.parameters().into_iter().flatten().collect();
    assert_eq!(params.get(&"table_type".to_string()).map(|v| v.as_str()), Some("ICEBERG"), "{params:?}");
    let location = format!("s3://{BUCKET}/_iceberg/warehouse/{DATABASE}/{DATASET}");
    let metadata = params.get(&"metadata_location".to_string()).expect("metadata_location");
    assert!(metadata.starts_with(&format!("{location}/metadata/")), "{metadata}");
    assert_eq!(table.metadata().location(), location);

    // The objects: the table's files under the warehouse; no staged page
    // file is left at the dataset's Hive folder.
    let objects = store.list("").await.expect("list");
    let data: Vec<&String> = objects.iter().filter(|k| k.ends_with(".parquet")).collect();
    assert!(!data.is_empty());
    assert!(
        data.iter().all(|k| k.starts_with(&format!("_iceberg/warehouse/{DATABASE}/{DATASET}/data/"))),
        "data files only under the table: {data:?}"
    );
    assert!(objects.iter().any(|k| k.ends_with(".metadata.json")), "{objects:?}");

    // The completion delivered again (page 1 redelivered): nothing new.
    persist::persist_page(page("r-1", 1, 2, r#"[{"id":3,"name":"cy"}]"#), deps).await.expect("page 1 again");
    let table = committer.catalog().load_table(&ident).await.expect("the table");
    assert_eq!(snapshot_runs(&table), ["r-1"], "a redelivered page commits nothing");
    assert_eq!(rows(&table).await.len(), 3);

    // Run 2: a new field; the table gains the column, older rows read null.
    runs::expect_pages(store.as_ref(), PIPELINE, "r-2", 1).await;
    persist::persist_page(page("r-2", 0, 1, r#"[{"id":4,"name":"di","tier":"gold"}]"#), deps).await.expect("run 2");
    let table = committer.catalog().load_table(&ident).await.expect("the table");
    assert_eq!(snapshot_runs(&table), ["r-1", "r-2"]);
    assert_eq!(
        rows(&table).await,
        [
            (1, "ada".into(), None),
            (2, "bo".into(), None),
            (3, "cy".into(), None),
            (4, "di".into(), Some("gold".into()))
        ]
    );
    let glue_table = glue.get_table().database_name(DATABASE).name(DATASET).send().await.expect("GetTable");
    let columns: Vec<&str> = glue_table
        .table()
        .and_then(|t| t.storage_descriptor())
        .map(|sd| sd.columns().iter().map(|c| c.name()).collect())
        .unwrap_or_default();
    assert!(columns.contains(&"tier"), "Glue's columns follow the schema: {columns:?}");

    // Another engine through the same catalog: pyiceberg's Glue catalog.
    let read = read_with_pyiceberg(&emulator.endpoint);
    assert_eq!(read["runs"], serde_json::json!(["r-1", "r-2"]));
    assert_eq!(
        read["rows"],
        serde_json::json!([[1, "ada", null], [2, "bo", null], [3, "cy", null], [4, "di", "gold"]]),
        "pyiceberg reads every row through Glue and S3"
    );

    // Run 3, `write: merge` by `/id` (issue 26): one `overwrite` snapshot
    // through Glue's UpdateTable; id 2 replaced, id 5 added, the file that
    // held id 2 rewritten under the warehouse.
    runs::expect_pages(store.as_ref(), PIPELINE, "r-3", 1).await;
    let merge = PersistTarget {
        table_format: TableFormat::Iceberg,
        write: contracts::WriteDisposition::Merge,
        primary_key: vec!["/id".into()],
        ..PersistTarget::new(DATASET)
    };
    let records = r#"[{"id":2,"name":"bo","tier":"silver"},{"id":5,"name":"ed"}]"#;
    persist::persist_page(runs::page(PIPELINE, merge, "r-3", 0, 1, records), deps).await.expect("run 3");
    let table = committer.catalog().load_table(&ident).await.expect("the table");
    assert_eq!(snapshot_runs(&table), ["r-1", "r-2", "r-3"]);
    let operation = table.metadata().current_snapshot().map(|s| s.summary().operation.as_str().to_string());
    assert_eq!(operation.as_deref(), Some("overwrite"));
    let read = read_with_pyiceberg(&emulator.endpoint);
    assert_eq!(
        read["rows"],
        serde_json::json!([[1, "ada", null], [2, "bo", "silver"], [3, "cy", null], [4, "di", "gold"], [5, "ed", null]]),
        "pyiceberg reads the merged table through Glue and S3: one row per id"
    );

    // `tributary compact --stack`: the table the stack's outputs name, in
    // Glue, compacted in one `replace` snapshot, then its old snapshots
    // expired; pyiceberg reads the same rows from one file.
    let before = read["rows"].clone();
    assert!(read["files"].as_u64().is_some_and(|n| n >= 2), "several small files before: {read}");
    stack_with_outputs(
        &emulator.config,
        "tributary-iceberg",
        &[(output::LAKE_BUCKET, BUCKET), (output::LAKE_DATABASE, DATABASE)],
    )
    .await;
    // SAFETY: nextest runs each test in its own process, one at a time here
    // (aws-emulator group), and no other thread reads the environment yet.
    unsafe { std::env::set_var(adapters::aws::S3_FORCE_PATH_STYLE_VAR, "true") };
    let stack = tributary::aws::Stack::connect("tributary-iceberg").await.expect("stack");
    let (catalog, stack_ident) = stack.iceberg_table(DATASET).await.expect("the stack's table");
    assert_eq!(stack_ident, ident, "the table Persist commits to");
    let compacted =
        tributary_iceberg::compact::compact_table(catalog.as_ref(), &stack_ident, 128 << 20).await.expect("compact");
    assert!(compacted.snapshot_id.is_some(), "{compacted}");
    let read = read_with_pyiceberg(&emulator.endpoint);
    assert_eq!(read["rows"], before, "the same rows after compaction");
    assert_eq!(read["files"], serde_json::json!(1), "one file for the table's one partition");
    assert_eq!(
        read["operations"],
        serde_json::json!(["append", "append", "overwrite", "replace"]),
        "compaction is one replace snapshot"
    );
    let expired =
        tributary_iceberg::compact::expire_snapshots(catalog.as_ref(), &stack_ident, chrono::Duration::zero(), 1)
            .await
            .expect("expire");
    assert!(expired.failed.is_empty() && expired.data_files_deleted > 0, "{expired}");
    let read = read_with_pyiceberg(&emulator.endpoint);
    assert_eq!((&read["rows"], &read["operations"]), (&before, &serde_json::json!(["replace"])), "after expiry");
    let objects = store.list("_iceberg/warehouse/").await.expect("list");
    assert_eq!(
        objects.iter().filter(|k| k.ends_with(".parquet")).count(),
        1,
        "the files only old snapshots read are deleted: {objects:?}"
    );
}
