//! `LakeEngine` over Iceberg datasets: runs written through Persist's
//! handler with the local catalog (as the local runtime does), each dataset
//! also written as Parquet folders from the same pages, so the two forms'
//! answers can be compared. The Iceberg table is read as its current
//! snapshot: committed runs only (a run in flight, its pages staged, is not
//! seen), the current schema (a column or a struct field a run predates is
//! null), and partition columns shown as the Parquet form shows them.

use std::time::Duration;

use adapters::local::Broker;
use contracts::{Granularity, Partitioning, PersistTarget, TableFormat};
use lakequery::LakeEngine;
use persist::{Deps, PersistConfig};
use serde_json::{Map, Value, json};
use test_support::iceberg::IcebergLake;
use test_support::runs;
use tokio::time::Instant;
use tributary_core::ports::{Query, QueryEngine, QueryState};
use tributary_core::tables::TableCommitter;

/// A lake with the local catalog ([`IcebergLake`]), and Persist's settings
/// and queue.
struct Lake {
    local: IcebergLake,
    config: PersistConfig,
    queue: Broker,
}

impl Lake {
    async fn new() -> Self {
        Self { local: IcebergLake::new().await, config: PersistConfig::default(), queue: Broker::new() }
    }

    /// Persists page `index` of `count` of `run` with `records`, into the
    /// dataset `<dataset>` as Iceberg (pipeline `<dataset>-i`) and into
    /// `<dataset>_parquet` as Parquet folders (pipeline `<dataset>-p`).
    async fn persist(
        &self,
        dataset: &str,
        partition: &Partitioning,
        run: &str,
        index: u32,
        count: u32,
        records: &Value,
    ) {
        for (format, pipeline, name) in [
            (TableFormat::Iceberg, format!("{dataset}-i"), dataset.to_string()),
            (TableFormat::Parquet, format!("{dataset}-p"), format!("{dataset}_parquet")),
        ] {
            let store = self.local.store.as_ref();
            if index == 0 {
                // The page count, as the Orchestrator records it first.
                runs::expect_pages(store, &pipeline, run, u64::from(count)).await;
            }
            let target = PersistTarget {
                table_format: format,
                partition: partition.clone(),
                ..PersistTarget::new(name.as_str())
            };
            let message = runs::page(&pipeline, target, run, index, count, &records.to_string());
            let tables = Some(&self.local.committer as &dyn TableCommitter);
            let deps =
                Deps { store, queue: &self.queue, run_events: None, catalog: None, tables, config: &self.config };
            persist::persist_page(message, deps).await.expect("persisted");
        }
    }

    /// The column names and rows of `sql`.
    async fn query(&self, sql: &str) -> (Vec<String>, Vec<Map<String, Value>>) {
        query(self.local.dir.path(), sql).await
    }

    async fn rows(&self, sql: &str) -> Value {
        Value::Array(self.query(sql).await.1.into_iter().map(Value::Object).collect())
    }
}

/// `sql` as a query of the lake.
fn lake_query(sql: &str) -> Query {
    Query { sql: sql.into(), parameters: Vec::new(), database: "lake".into(), workgroup: None, output_location: None }
}

/// The column names and rows of `sql` over the lake at `root` (one page).
async fn query(root: &std::path::Path, sql: &str) -> (Vec<String>, Vec<Map<String, Value>>) {
    let engine = LakeEngine::new(root);
    let id = engine.start(&lake_query(sql)).await.expect("start");
    let state = engine.wait(&id, Instant::now() + Duration::from_secs(5)).await.expect("wait");
    assert_eq!(state, QueryState::Succeeded, "{sql}");
    let page = engine.page(&id, None).await.expect("page");
    assert!(page.next_token.is_none(), "one page");
    (page.columns, page.rows)
}

fn hourly() -> Partitioning {
    Partitioning::Field { field: "/at".into(), granularity: Granularity::Hour, column: "dt".into() }
}

#[tokio::test]
async fn an_iceberg_dataset_reads_as_its_committed_runs_with_the_current_schema() {
    let lake = Lake::new().await;
    let customers = hourly();
    lake.persist(
        "customers",
        &customers,
        "r1",
        0,
        1,
        &json!([{"id": 1, "name": "a", "at": "2026-11-29T06:10:00Z", "address": {"city": "Oslo"}}]),
    )
    .await;
    // r2 adds a column and a field of the `address` struct.
    lake.persist(
        "customers",
        &customers,
        "r2",
        0,
        2,
        &json!([{"id": 2, "name": "b", "tier": "gold", "at": "2026-11-29T07:00:00Z", "address": {"city": "Lima", "zip": "15001"}}]),
    )
    .await;
    lake.persist("customers", &customers, "r2", 1, 2, &json!([{"id": 3, "at": "2026-11-30T23:59:00Z"}])).await;
    // r3 is in flight: its first page is staged in `customers/`, not committed.
    lake.persist(
        "customers",
        &customers,
        "r3",
        0,
        2,
        &json!([{"id": 9, "name": "staged", "at": "2026-11-29T06:00:00Z"}]),
    )
    .await;
    assert!(
        std::fs::read_dir(lake.local.dir.path().join("customers")).is_ok_and(|mut entries| entries.next().is_some()),
        "r3's page is staged in the dataset folder"
    );

    let sql = "SELECT id, name, tier, address, dt, hour, _tributary_run_id FROM customers ORDER BY id";
    assert_eq!(
        lake.rows(sql).await,
        json!([
            {"id": 1, "name": "a", "tier": null, "address": r#"{"city":"Oslo","zip":null}"#, "dt": "2026-11-29", "hour": "06", "_tributary_run_id": "r1"},
            {"id": 2, "name": "b", "tier": "gold", "address": r#"{"city":"Lima","zip":"15001"}"#, "dt": "2026-11-29", "hour": "07", "_tributary_run_id": "r2"},
            {"id": 3, "name": null, "tier": null, "address": null, "dt": "2026-11-30", "hour": "23", "_tributary_run_id": "r2"},
        ])
    );
    // Partition columns compare as the Parquet form's text.
    assert_eq!(
        lake.rows("SELECT count(*) AS n FROM customers WHERE dt = '2026-11-29' AND hour = '07'").await,
        json!([{"n": 1}])
    );
    // A struct's new field and a new column, read from the file that predates them.
    assert_eq!(
        lake.rows("SELECT id FROM customers WHERE address.zip IS NULL AND tier IS NULL ORDER BY id").await,
        json!([{"id": 1}, {"id": 3}])
    );

    // The same pages as Parquet folders: the same columns, in the same
    // order, and the same values (the Parquet form shows r3's staged page).
    let (iceberg_columns, iceberg_rows) = lake.query("SELECT * FROM customers ORDER BY id").await;
    let (parquet_columns, parquet_rows) = lake.query("SELECT * FROM customers_parquet WHERE id < 9 ORDER BY id").await;
    assert_eq!(iceberg_columns, parquet_columns);
    let without_load_time = |rows: Vec<Map<String, Value>>| -> Vec<Map<String, Value>> {
        rows.into_iter()
            .map(|mut row| {
                let loaded = row.remove(lake_format::lineage::LINEAGE_LOADED_AT).expect("load time");
                // Both forms write it the same way: `2026-11-29T06:00:00.123Z`.
                assert!(
                    loaded.as_str().is_some_and(|t| t.starts_with("20") && t.ends_with('Z') && t.len() == 24),
                    "{loaded}"
                );
                row
            })
            .collect()
    };
    assert_eq!(without_load_time(iceberg_rows), without_load_time(parquet_rows));

    // r3 completes: now its rows are there.
    lake.persist("customers", &customers, "r3", 1, 2, &json!([{"id": 10, "at": "2026-11-29T06:00:00Z"}])).await;
    assert_eq!(
        lake.rows("SELECT id, _tributary_run_id FROM customers WHERE _tributary_run_id = 'r3' ORDER BY id").await,
        json!([{"id": 9, "_tributary_run_id": "r3"}, {"id": 10, "_tributary_run_id": "r3"}])
    );
}

#[tokio::test]
async fn value_partitions_read_as_in_the_parquet_form_and_tables_join() {
    let lake = Lake::new().await;
    let by_country =
        Partitioning::Field { field: "/country".into(), granularity: Granularity::Value, column: "country".into() };
    lake.persist(
        "shops",
        &by_country,
        "r1",
        0,
        1,
        &json!([{"id": 1, "country": "a/b"}, {"id": 2, "country": null}, {"id": 3, "country": "NO"}]),
    )
    .await;
    let sql = |table: &str| format!("SELECT id, country FROM {table} ORDER BY id");
    let iceberg = lake.rows(&sql("shops")).await;
    assert_eq!(iceberg, json!([{"id": 1, "country": "a/b"}, {"id": 2, "country": null}, {"id": 3, "country": "NO"}]));
    assert_eq!(iceberg, lake.rows(&sql("shops_parquet")).await);
    assert_eq!(
        lake.rows("SELECT count(*) AS n FROM shops s JOIN shops_parquet p ON s.id = p.id AND s.country = p.country")
            .await,
        json!([{"n": 2}])
    );
    // SHOW TABLES lists the Iceberg dataset once.
    let (_, tables) = lake
        .query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name")
        .await;
    // (The Parquet form's value partitions read through a view over a hidden table.)
    let names: Vec<&str> = tables
        .iter()
        .filter_map(|row| row["table_name"].as_str())
        .filter(|name| !name.starts_with("__tributary_files_"))
        .collect();
    assert_eq!(names, ["shops", "shops_parquet"]);
}

#[tokio::test]
async fn a_lake_without_iceberg_tables_gets_no_catalog() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = persist::records_to_parquet(&[json!({"id": 1})], &persist::WriterConfig::default()).expect("parquet");
    std::fs::create_dir_all(dir.path().join("things/dt=2026-11-29")).expect("mkdir");
    std::fs::write(dir.path().join("things/dt=2026-11-29/p-r1-00000.parquet"), bytes).expect("write");
    assert_eq!(
        query(dir.path(), "SELECT id FROM things").await.1,
        [json!({"id": 1}).as_object().cloned().expect("row")]
    );
    assert!(!dir.path().join(tributary_core::keys::ICEBERG_DIR).exists(), "a query creates no _iceberg/");
}

/// An Iceberg dataset's first run in flight: no table yet, and its folder
/// of staged pages is not read as one either (its schema says iceberg), so
/// a reader sees none of the run; the Parquet copy shows the page at once.
#[tokio::test]
async fn a_first_run_in_flight_is_not_seen_before_its_commit() {
    let lake = Lake::new().await;
    let by_day = Partitioning::default();
    lake.persist("first", &by_day, "r1", 0, 2, &json!([{"id": 1}, {"id": 2}])).await;
    assert_eq!(lake.rows("SELECT count(*) AS n FROM first_parquet").await, json!([{"n": 2}]));
    let engine = LakeEngine::new(lake.local.dir.path());
    let id = engine.start(&lake_query("SELECT count(*) AS n FROM first")).await.expect("start");
    let state = engine.wait(&id, Instant::now() + Duration::from_secs(5)).await.expect("wait");
    let QueryState::Failed { reason, .. } = state else { panic!("the staged pages were read: {state:?}") };
    assert!(reason.contains("first") && reason.contains("not found"), "{reason}");
    // The reason says why, not only that the table is missing.
    assert!(
        reason.contains("first kept as an Iceberg table with no commit yet")
            && reason.contains("read once that run completes"),
        "{reason}"
    );
    // A table missing for another reason is not explained that way.
    let id = engine.start(&lake_query("SELECT * FROM firsts")).await.expect("start");
    let state = engine.wait(&id, Instant::now() + Duration::from_secs(5)).await.expect("wait");
    let QueryState::Failed { reason, .. } = state else { panic!("an unknown table was read: {state:?}") };
    assert!(reason.contains("not found") && !reason.contains("no commit yet"), "{reason}");
    lake.persist("first", &by_day, "r1", 1, 2, &json!([{"id": 3}])).await;
    assert_eq!(lake.rows("SELECT count(*) AS n FROM first").await, json!([{"n": 3}]), "the run, whole");
}
