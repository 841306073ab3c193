//! Iceberg datasets through Persist's handler on a directory lake with the
//! local catalog: a run's pages are staged, and its completion commits them
//! in one snapshot naming the run; a later run with a new field evolves the
//! schema; a completion that runs again commits nothing; a reader between
//! pages sees none of the run; a completion racing another's claim waits.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::Arc;

use arrow_array::{Array, Date32Array, Int64Array, RecordBatch, StringArray};
use chrono::NaiveDate;
use iceberg::table::Table;

use adapters::local::{Broker, DirStore};
use contracts::{PersistMessage, PersistTarget, RunId, TableFormat};
use persist::{Deps, PersistConfig, PersistError};
use test_support::iceberg::{IcebergLake, scan, snapshot_summaries};
use test_support::runs;
use tributary_core::batch::RecordError;
use tributary_core::ledger::PageReceipt;
use tributary_core::ports::ObjectStore;
use tributary_iceberg::{PIPELINE_PROPERTY, RUN_ID_PROPERTY, local_committer, table_ident};

const PIPELINE: &str = "crm-customers";
const DATASET: &str = "customers";

/// A lake with the local catalog ([`IcebergLake`]: its folder, store and
/// committer, reached through `Deref`), and Persist's settings and queue.
struct Lake {
    local: IcebergLake,
    config: PersistConfig,
    queue: Broker,
}

impl Deref for Lake {
    type Target = IcebergLake;

    fn deref(&self) -> &IcebergLake {
        &self.local
    }
}

impl Lake {
    async fn new() -> Self {
        Self { local: IcebergLake::new().await, config: PersistConfig::default(), queue: Broker::new() }
    }

    fn deps(&self) -> Deps<'_> {
        Deps {
            store: self.store.as_ref(),
            queue: &self.queue,
            run_events: None,
            catalog: None,
            tables: Some(&self.committer),
            config: &self.config,
        }
    }

    /// Records the run's page count, as the Orchestrator does before its
    /// pages are sent.
    async fn expect(&self, run: &str, pages: u64) {
        runs::expect_pages(self.store.as_ref(), PIPELINE, run, pages).await;
    }

    async fn persist(&self, message: PersistMessage) -> Result<PageReceipt, PersistError> {
        persist::persist_page(message, self.deps()).await
    }

    async fn table(&self) -> Option<Table> {
        let ident = table_ident(DATASET);
        let catalog = self.committer.catalog();
        if !catalog.table_exists(&ident).await.expect("table_exists") {
            return None;
        }
        Some(catalog.load_table(&ident).await.expect("load"))
    }
}

fn page(run: &str, index: u32, count: u32, records: &str) -> PersistMessage {
    let target = PersistTarget { table_format: TableFormat::Iceberg, ..PersistTarget::new(DATASET) };
    runs::page(PIPELINE, target, run, index, count, records)
}

/// The table's snapshots as (run id, pipeline), oldest first.
fn snapshot_runs(table: &Table) -> Vec<(String, String)> {
    snapshot_summaries(table)
        .iter()
        .map(|props| (props[RUN_ID_PROPERTY].clone(), props[PIPELINE_PROPERTY].clone()))
        .collect()
}

async fn rows(table: &Table) -> Vec<RecordBatch> {
    scan(table, &["id", "name", "tier", "dt", lake_format::lineage::LINEAGE_RUN_ID]).await
}

/// `(id, column)` of every row, sorted, the column read as text (null: None).
fn ids_with(batches: &[RecordBatch], column: &str) -> Vec<(i64, Option<String>)> {
    let mut out = Vec::new();
    for batch in batches {
        let ids = batch.column_by_name("id").expect("id");
        let ids = ids.as_any().downcast_ref::<Int64Array>().expect("id is int64");
        let values = batch.column_by_name(column).unwrap_or_else(|| panic!("no column {column}"));
        let values = arrow_cast::cast(values, &arrow_schema::DataType::Utf8).expect("as text");
        let values = values.as_any().downcast_ref::<StringArray>().expect("utf8");
        out.extend(
            (0..batch.num_rows()).map(|i| (ids.value(i), values.is_valid(i).then(|| values.value(i).to_string()))),
        );
    }
    out.sort();
    out
}

#[tokio::test]
async fn a_run_commits_in_one_snapshot_with_its_run_id_and_every_row() {
    let lake = Lake::new().await;
    lake.expect("r1", 2).await;
    let first =
        lake.persist(page("r1", 0, 2, r#"[{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]"#)).await.expect("page 0");
    // Between pages: staged only, the table holds none of the run.
    assert!(lake.table().await.is_none(), "no table before the run completes");
    assert!(lake.store.get(&first.data_keys[0]).await.is_ok(), "page 0 staged at its Parquet key");
    lake.persist(page("r1", 1, 2, r#"[{"id": 3, "name": "c"}]"#)).await.expect("page 1");

    let table = lake.table().await.expect("the table, created at completion");
    assert_eq!(snapshot_runs(&table), [("r1".to_string(), PIPELINE.to_string())]);
    let summary = &table.metadata().current_snapshot().expect("snapshot").summary().additional_properties;
    assert_eq!(summary["added-records"], "3");
    let batches = rows(&table).await;
    assert_eq!(ids_with(&batches, "name"), [(1, Some("a".into())), (2, Some("b".into())), (3, Some("c".into()))]);
    // The partition column is a real date column, partitioned by identity.
    let dt = batches[0].column_by_name("dt").expect("dt");
    let dt = dt.as_any().downcast_ref::<Date32Array>().expect("dt is a date");
    assert_eq!(dt.value_as_date(0), NaiveDate::from_ymd_opt(2026, 11, 29));
    let spec = table.metadata().default_partition_spec();
    assert_eq!(
        spec.fields().iter().map(|f| (f.name.as_str(), f.transform.to_string())).collect::<Vec<_>>(),
        [("dt", "identity".to_string())]
    );
    // The lineage columns are there too.
    assert!(batches[0].column_by_name(lake_format::lineage::LINEAGE_RUN_ID).is_some());

    // The staged files are gone; the manifest lists the table's data files.
    assert!(lake.store.list(&format!("{DATASET}/")).await.expect("list").is_empty(), "staged files deleted");
    let manifest: serde_json::Value = serde_json::from_slice(
        &lake
            .store
            .get(&tributary_core::keys::manifest_key(PIPELINE, &RunId::new("r1").expect("id")))
            .await
            .expect("manifest"),
    )
    .expect("json");
    let files = manifest["files"].as_array().expect("files");
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        files[0].as_str().is_some_and(|f| f.contains("/_iceberg/warehouse/tributary/customers/data/dt=2026-11-29/")),
        "{files:?}"
    );
}

/// A value partition holds record data: its folder under the table is the
/// staged Hive folder, values escaped, so `../..` never leaves the table
/// and `a/b` never nests; readers get the values back as sent.
#[tokio::test]
async fn value_partitions_stay_inside_the_table_whatever_the_value() {
    let lake = Lake::new().await;
    lake.expect("r1", 1).await;
    let mut message = page(
        "r1",
        0,
        1,
        r#"[{"id": 1, "c": "x/../../../../../../../../escaped"}, {"id": 2, "c": ".."}, {"id": 3, "c": "a/b"}]"#,
    );
    message.target.partition = contracts::Partitioning::Field {
        field: "/c".into(),
        granularity: contracts::Granularity::Value,
        column: "country".into(),
    };
    lake.persist(message).await.expect("page");
    let table = lake.table().await.expect("committed");
    let warehouse = lake.dir.path().join("_iceberg/warehouse/tributary/customers/data");
    let mut files = Vec::new();
    let mut stack = vec![lake.dir.path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "parquet") {
                files.push(path);
            }
        }
    }
    assert_eq!(files.len(), 3, "one data file per partition: {files:?}");
    for file in &files {
        assert!(file.starts_with(&warehouse), "{} is outside the table's data folder", file.display());
        let folder = file.parent().expect("folder").file_name().expect("name").to_string_lossy().to_string();
        assert!(folder.starts_with("country=") && !folder.contains('/'), "{folder}");
    }
    assert!(
        !lake.dir.path().join("escaped").exists() && !lake.dir.path().parent().expect("tmp").join("escaped").exists()
    );
    assert_eq!(
        ids_with(&scan(&table, &["id", "country"]).await, "country"),
        [(1, Some("x/../../../../../../../../escaped".into())), (2, Some("..".into())), (3, Some("a/b".into()))],
        "the values as sent"
    );
}

/// A boxed future a store runs before one of its reads.
type Rival = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// How [`InterferingStore`] interferes with the reads of staged Parquet files.
enum Interference {
    /// The first read fails (a store hiccup in the middle of a commit).
    FailOnce(std::sync::atomic::AtomicBool),
    /// The first read of one of `run`'s staged files (while its committer
    /// plans) first lets `rival` complete: that plan is then made on a
    /// table that is no longer current when it commits.
    RivalCommits { run: &'static str, rival: tokio::sync::Mutex<Option<Rival>> },
}

/// The lake as one committer sees it, with an [`Interference`].
struct InterferingStore {
    inner: Arc<DirStore>,
    interference: Interference,
}

#[async_trait::async_trait]
impl ObjectStore for InterferingStore {
    async fn put(&self, key: &str, body: bytes::Bytes) -> Result<(), tributary_core::ports::PortError> {
        self.inner.put(key, body).await
    }
    async fn get(&self, key: &str) -> Result<bytes::Bytes, tributary_core::ports::PortError> {
        if key.ends_with(".parquet") {
            match &self.interference {
                Interference::FailOnce(failed) if !failed.swap(true, std::sync::atomic::Ordering::SeqCst) => {
                    return Err(tributary_core::ports::PortError::transient_msg("get", key, "connection reset"));
                }
                Interference::RivalCommits { run, rival } if key.contains(&format!("-{run}-")) => {
                    let rival = rival.lock().await.take();
                    if let Some(rival) = rival {
                        rival.await;
                    }
                }
                _ => {}
            }
        }
        self.inner.get(key).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<String>, tributary_core::ports::PortError> {
        self.inner.list(prefix).await
    }
    async fn delete(&self, key: &str) -> Result<(), tributary_core::ports::PortError> {
        self.inner.delete(key).await
    }
    async fn get_versioned(
        &self,
        key: &str,
    ) -> Result<Option<(bytes::Bytes, String)>, tributary_core::ports::PortError> {
        self.inner.get_versioned(key).await
    }
    async fn put_if(
        &self,
        key: &str,
        body: bytes::Bytes,
        version: Option<&str>,
    ) -> Result<bool, tributary_core::ports::PortError> {
        self.inner.put_if(key, body, version).await
    }
}

/// A commit that fails part-way releases its claim: the retry commits at
/// once (not "held" for 15 minutes), and the failure reported is the
/// real one.
#[tokio::test]
async fn a_failed_commit_releases_its_claim_and_the_retry_commits() {
    let lake = Lake::new().await;
    let flaky = Arc::new(InterferingStore {
        inner: lake.store.clone(),
        interference: Interference::FailOnce(Default::default()),
    });
    let committer = local_committer(lake.dir.path(), flaky).await.expect("catalog");
    let deps = Deps { tables: Some(&committer), ..lake.deps() };
    lake.expect("r1", 1).await;
    let message = page("r1", 0, 1, r#"[{"id": 1, "name": "a"}]"#);
    let err = persist::persist_page(message.clone(), deps).await.expect_err("the commit fails once");
    assert!(err.to_string().contains("connection reset"), "the real cause: {err}");
    let claim = tributary_core::keys::table_commit_claim_key(PIPELINE, &RunId::new("r1").expect("id"));
    assert!(lake.store.get(&claim).await.is_err(), "the claim is released");
    persist::persist_page(message, deps).await.expect("the retry commits");
    let table = lake.table().await.expect("committed");
    assert_eq!(snapshot_runs(&table).len(), 1);
    assert_eq!(ids_with(&rows(&table).await, "name"), [(1, Some("a".into()))]);
}

/// A dataset keeps the table format of its first page: a page asking for
/// the other fails permanently (to the DLQ, with an alert) naming
/// `target.table_format`, both formats and the way out, in both directions.
#[tokio::test]
async fn a_dataset_keeps_its_table_format() {
    let lake = Lake::new().await;
    lake.expect("r1", 1).await;
    lake.persist(page("r1", 0, 1, r#"[{"id": 1, "name": "a"}]"#)).await.expect("iceberg page");
    let mut parquet = page("r2", 0, 1, r#"[{"id": 2, "name": "b"}]"#);
    parquet.target.table_format = TableFormat::Parquet;
    let err = lake.persist(parquet).await.expect_err("the other format");
    assert!(err.is_permanent(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("target.table_format is parquet, but dataset customers is kept as iceberg")
            && text.contains("new dataset"),
        "{text}"
    );
    // And the other way round, on a Parquet dataset.
    let mut first = page("r3", 0, 1, r#"[{"id": 3}]"#);
    first.target = PersistTarget::new("orders");
    lake.persist(first).await.expect("parquet page");
    let mut iceberg = page("r4", 0, 1, r#"[{"id": 4}]"#);
    iceberg.target.dataset = "orders".into();
    let err = lake.persist(iceberg).await.expect_err("the other format");
    assert!(err.to_string().contains("target.table_format is iceberg, but dataset orders is kept as parquet"), "{err}");
    let table = lake.table().await.expect("the iceberg table");
    assert_eq!(snapshot_runs(&table).len(), 1, "the refused page committed nothing");
}

/// A count learnt after every page is in (Athena's last rows, a cursor
/// run's last page) is recorded by a function that cannot commit: the run
/// stays open, its pages staged, not marked complete with nothing in the
/// table; the next persist of one of its pages (a redelivery, `tributary
/// replay`) completes it with the commit.
#[tokio::test]
async fn a_count_learnt_after_the_last_page_leaves_the_commit_to_persist() {
    let lake = Lake::new().await;
    lake.persist(page("r1", 0, 0, r#"[{"id": 1, "name": "a"}]"#)).await.expect("page 0");
    lake.persist(page("r1", 1, 0, r#"[{"id": 2, "name": "b"}]"#)).await.expect("page 1");
    let run = RunId::new("r1").expect("run id");
    let completion = tributary_core::ledger::RunLedger { store: lake.store.as_ref(), events: None }
        .record_expected(&tributary_core::ledger::Expected {
            pipeline: PIPELINE.into(),
            run_id: run.clone(),
            run_date: NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
            pages: 2,
            truncated: None,
            records: None,
        })
        .await
        .expect("count");
    assert_eq!(completion, tributary_core::ledger::Completion::NotYet, "left to Persist");
    assert!(lake.table().await.is_none(), "nothing committed");
    let success = tributary_core::keys::success_key(PIPELINE, &run);
    assert!(lake.store.get(&success).await.is_err(), "the run is not marked complete with its files staged");

    lake.persist(page("r1", 1, 0, r#"[{"id": 2, "name": "b"}]"#)).await.expect("page 1 again");
    let table = lake.table().await.expect("committed");
    assert_eq!(snapshot_runs(&table), [("r1".to_string(), PIPELINE.to_string())]);
    assert_eq!(ids_with(&rows(&table).await, "name"), [(1, Some("a".into())), (2, Some("b".into()))]);
    assert!(lake.store.get(&success).await.is_ok(), "complete once committed");
}

#[tokio::test]
async fn a_run_with_a_new_field_evolves_the_schema_and_old_rows_read_it_as_null() {
    let lake = Lake::new().await;
    for run in ["r1", "r2", "r3"] {
        lake.expect(run, 1).await;
    }
    lake.persist(page("r1", 0, 1, r#"[{"id": 1, "name": "a"}]"#)).await.expect("r1");
    lake.persist(page("r2", 0, 1, r#"[{"id": 2, "name": "b", "tier": "gold", "address": {"city": "Oslo"}}]"#))
        .await
        .expect("r2");
    lake.persist(page("r3", 0, 1, r#"[{"id": 3, "address": {"city": "Lima", "zip": "15001"}}]"#)).await.expect("r3");

    let table = lake.table().await.expect("table");
    let runs: Vec<String> = snapshot_runs(&table).into_iter().map(|(run, _)| run).collect();
    assert_eq!(runs, ["r1", "r2", "r3"]);
    let schema = table.metadata().current_schema();
    assert!(schema.field_by_name("tier").is_some());
    assert!(schema.field_by_name("address.zip").is_some(), "a struct's new field added under its parent");
    let batches = rows(&table).await;
    assert_eq!(ids_with(&batches, "tier"), [(1, None), (2, Some("gold".into())), (3, None)]);
    assert_eq!(ids_with(&batches, "name"), [(1, Some("a".into())), (2, Some("b".into())), (3, None)]);
}

#[tokio::test]
async fn a_completion_that_runs_again_commits_nothing() {
    let lake = Lake::new().await;
    let run = RunId::new("r1").expect("id");
    lake.expect("r1", 1).await;
    lake.persist(page("r1", 0, 1, r#"[{"id": 1}, {"id": 2}]"#)).await.expect("r1");
    let manifest = lake.store.get(&tributary_core::keys::manifest_key(PIPELINE, &run)).await.expect("manifest");
    // A completion that died after its commit, before the manifest and
    // `_SUCCESS`: the last page is delivered again and completes the run again.
    lake.store.delete(&tributary_core::keys::success_key(PIPELINE, &run)).await.expect("delete");
    lake.store.delete(&tributary_core::keys::manifest_key(PIPELINE, &run)).await.expect("delete");
    lake.persist(page("r1", 0, 1, r#"[{"id": 1}, {"id": 2}]"#)).await.expect("again");

    let table = lake.table().await.expect("table");
    assert_eq!(snapshot_runs(&table).len(), 1, "one snapshot");
    assert_eq!(ids_with(&rows(&table).await, "id").len(), 2, "every row once");
    let again = lake.store.get(&tributary_core::keys::manifest_key(PIPELINE, &run)).await.expect("manifest");
    let files = |bytes: &[u8]| serde_json::from_slice::<serde_json::Value>(bytes).expect("json")["files"].clone();
    assert_eq!(files(&again), files(&manifest), "the same data files");
    assert!(lake.store.list(&format!("{DATASET}/")).await.expect("list").is_empty(), "staged files deleted");
}

#[tokio::test]
async fn a_completion_racing_a_held_claim_waits_and_commits_nothing() {
    let lake = Lake::new().await;
    let run = RunId::new("r1").expect("id");
    let claimed = tributary_core::tables::claim_commit(lake.store.as_ref(), PIPELINE, &run, chrono::Utc::now())
        .await
        .expect("claim");
    assert_eq!(claimed, tributary_core::tables::Claimed::Mine);
    lake.expect("r1", 1).await;
    let err = lake.persist(page("r1", 0, 1, r#"[{"id": 1}]"#)).await.expect_err("the claim is held");
    assert!(!err.is_permanent(), "retried later: {err}");
    assert!(lake.table().await.is_none_or(|t| t.metadata().snapshots().next().is_none()), "nothing committed");
    let staged: BTreeMap<_, _> =
        lake.store.list(&format!("{DATASET}/")).await.expect("list").into_iter().map(|k| (k, ())).collect();
    assert_eq!(staged.len(), 1, "the page stays staged for the retry");
}

#[tokio::test]
async fn a_reader_between_pages_sees_no_row_of_the_run() {
    let lake = Lake::new().await;
    lake.expect("r1", 1).await;
    lake.persist(page("r1", 0, 1, r#"[{"id": 1}]"#)).await.expect("r1");
    lake.expect("r2", 2).await;
    lake.persist(page("r2", 0, 2, r#"[{"id": 2}, {"id": 3}]"#)).await.expect("r2 page 0");

    // Between r2's pages: the table is as r1 left it.
    let table = lake.table().await.expect("table");
    assert_eq!(snapshot_runs(&table).len(), 1);
    assert_eq!(ids_with(&rows(&table).await, "id"), [(1, Some("1".into()))]);

    lake.persist(page("r2", 1, 2, r#"[{"id": 4}]"#)).await.expect("r2 page 1");
    let table = lake.table().await.expect("table");
    let runs: Vec<String> = snapshot_runs(&table).into_iter().map(|(run, _)| run).collect();
    assert_eq!(runs, ["r1", "r2"]);
    let ids: Vec<i64> = ids_with(&rows(&table).await, "id").into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, [1, 2, 3, 4], "the whole run at once");
}

/// A merge run's target: `id` the key, the greatest `v` wins.
fn merge_page(run: &str, index: u32, count: u32, records: &str) -> PersistMessage {
    let target = PersistTarget {
        table_format: TableFormat::Iceberg,
        write: contracts::WriteDisposition::Merge,
        primary_key: vec!["/id".into()],
        order_by: Some("/v".into()),
        ..PersistTarget::new(DATASET)
    };
    runs::page(PIPELINE, target, run, index, count, records)
}

/// Two merge completions racing: the second planned on the table before
/// the first committed, so its commit is refused (the table moved) and it
/// plans again on the table as the first left it: no lost update, one
/// snapshot per run, in commit order.
#[tokio::test]
async fn a_merge_planned_before_a_rival_commit_plans_again_and_loses_no_update() {
    let lake = Lake::new().await;
    lake.expect("r1", 1).await;
    lake.persist(merge_page("r1", 0, 1, r#"[{"id":1,"v":1},{"id":2,"v":1},{"id":3,"v":1},{"id":4,"v":1}]"#))
        .await
        .expect("r1 commits");
    // r2's first page is staged; its last page, which completes and commits
    // it, is sent while r3 plans.
    lake.expect("r2", 2).await;
    lake.persist(merge_page("r2", 0, 2, r#"[{"id":1,"v":2},{"id":2,"v":2}]"#)).await.expect("r2 page 0");
    let dir = lake.dir.path().to_path_buf();
    let rival = async move {
        let store = Arc::new(DirStore::new(&dir));
        let committer = local_committer(&dir, store.clone()).await.expect("the rival's catalog");
        let (queue, config) = (Broker::new(), PersistConfig::default());
        let deps = Deps {
            store: store.as_ref(),
            queue: &queue,
            run_events: None,
            catalog: None,
            tables: Some(&committer),
            config: &config,
        };
        persist::persist_page(merge_page("r2", 1, 2, r#"[{"id":5,"v":2}]"#), deps).await.expect("r2 commits");
    };
    let racing = Arc::new(InterferingStore {
        inner: lake.store.clone(),
        interference: Interference::RivalCommits { run: "r3", rival: tokio::sync::Mutex::new(Some(Box::pin(rival))) },
    });
    let committer = local_committer(lake.dir.path(), racing).await.expect("catalog");
    let logs = test_support::logs::LogBuffer::new();
    lake.expect("r3", 1).await;
    {
        let _guard = logs.capture();
        let deps = Deps { tables: Some(&committer), ..lake.deps() };
        persist::persist_page(merge_page("r3", 0, 1, r#"[{"id":2,"v":3},{"id":3,"v":3}]"#), deps)
            .await
            .expect("r3 commits after planning again");
    }
    let replanned = logs
        .lines()
        .iter()
        .filter(|line| line["message"].as_str().is_some_and(|m| m.contains("planning again")))
        .count();
    assert_eq!(replanned, 1, "r3 planned again once");
    let table = lake.table().await.expect("table");
    let runs: Vec<String> = snapshot_runs(&table).into_iter().map(|(run, _)| run).collect();
    assert_eq!(runs, ["r1", "r2", "r3"], "one snapshot per run, in commit order");
    assert_eq!(
        ids_with(&scan(&table, &["id", "v"]).await, "v"),
        [
            (1, Some("2".into())),
            (2, Some("3".into())),
            (3, Some("3".into())),
            (4, Some("1".into())),
            (5, Some("2".into()))
        ],
        "r2's and r3's changes both kept"
    );
}

/// The table's top-level columns as `name type`, in order.
fn columns(table: &Table) -> Vec<String> {
    let schema = table.metadata().current_schema();
    schema.as_struct().fields().iter().map(|f| format!("{} {}", f.name, f.field_type)).collect()
}

/// Page 0 holds mostly text in `code` (so Persist's schema makes `code` a
/// string and the integers `code__int64`); pages 1 and 2 hold integers
/// with one stray text.
fn skewed_pages(run: &str) -> Vec<PersistMessage> {
    vec![
        page(run, 0, 3, r#"[{"id": 1, "code": "n/a"}, {"id": 2, "code": "none"}, {"id": 3, "code": 3}]"#),
        page(run, 1, 3, r#"[{"id": 4, "code": 4}, {"id": 5, "code": 5}, {"id": 6, "code": "six"}]"#),
        page(run, 2, 3, r#"[{"id": 7, "code": 7}, {"id": 8, "code": 8}, {"id": 9, "code": 9}]"#),
    ]
}

#[tokio::test]
async fn a_new_column_takes_the_runs_majority_whatever_the_pages_order() {
    let mut tables = Vec::new();
    for order in [[0, 1, 2], [2, 1, 0], [1, 0, 2]] {
        let lake = Lake::new().await;
        lake.expect("r1", 3).await;
        let pages = skewed_pages("r1");
        for i in order {
            lake.persist(pages[i].clone()).await.expect("page");
        }
        let table = lake.table().await.expect("table");
        let names = columns(&table);
        let code: Vec<&String> = names.iter().filter(|c| c.starts_with("code")).collect();
        assert_eq!(code, ["code long", "code__string string"], "pages in order {order:?}: {names:?}");
        let batches = scan(&table, &["id", "code", "code__string"]).await;
        let expected: Vec<(i64, Option<String>)> =
            [3, 4, 5, 7, 8, 9].into_iter().map(|id| (id, Some(id.to_string()))).collect();
        let with_code: Vec<_> = ids_with(&batches, "code").into_iter().filter(|(_, v)| v.is_some()).collect();
        assert_eq!(with_code, expected, "every integer in the column, order {order:?}");
        let texts: Vec<_> = ids_with(&batches, "code__string").into_iter().filter(|(_, v)| v.is_some()).collect();
        assert_eq!(texts, [(1, Some("n/a".into())), (2, Some("none".into())), (6, Some("six".into()))]);
        tables.push(names);
    }
    assert!(tables.windows(2).all(|pair| pair[0] == pair[1]), "one table in every order: {tables:?}");
}

#[tokio::test]
async fn later_runs_land_in_the_family_the_table_decided() {
    let lake = Lake::new().await;
    lake.expect("r1", 3).await;
    for message in skewed_pages("r1") {
        lake.persist(message).await.expect("r1");
    }
    // Persist's own schema still names the integers `code__int64`: the
    // second run's files carry them there, and its text in `code`.
    lake.expect("r2", 1).await;
    lake.persist(page(
        "r2",
        0,
        1,
        r#"[{"id": 10, "code": 10}, {"id": 11, "code": "eleven"}, {"id": 12, "code": true}]"#,
    ))
    .await
    .expect("r2");
    let table = lake.table().await.expect("table");
    let names = columns(&table);
    let code: Vec<&String> = names.iter().filter(|c| c.starts_with("code")).collect();
    assert_eq!(code, ["code long", "code__string string", "code__bool boolean"], "{names:?}");
    let batches = scan(&table, &["id", "code", "code__string", "code__bool"]).await;
    let by_id =
        |column: &str, id: i64| ids_with(&batches, column).into_iter().find(|(i, _)| *i == id).and_then(|(_, v)| v);
    assert_eq!(by_id("code", 10).as_deref(), Some("10"));
    assert_eq!(by_id("code__string", 11).as_deref(), Some("eleven"));
    assert_eq!(by_id("code__bool", 12).as_deref(), Some("true"));
    assert_eq!(by_id("code", 11), None);
}

/// Upkeep that records each table asked for and refuses the first ask.
#[derive(Default)]
struct RefusesOnce {
    asked: std::sync::Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl tributary_iceberg::TableHousekeeping for RefusesOnce {
    async fn ensure(&self, table: &iceberg::TableIdent) -> Result<(), String> {
        let mut asked = self.asked.lock().expect("asked");
        asked.push(table.to_string());
        if asked.len() == 1 { Err("AccessDeniedException: not yet".into()) } else { Ok(()) }
    }
}

#[tokio::test]
async fn upkeep_is_asked_after_a_commit_until_it_succeeds_and_never_fails_the_run() {
    let mut lake = Lake::new().await;
    let upkeep = Arc::new(RefusesOnce::default());
    lake.local.committer = local_committer(lake.local.dir.path(), lake.local.store.clone())
        .await
        .expect("local catalog")
        .with_housekeeping(upkeep.clone());
    for (run, id) in [("r1", 1), ("r2", 2), ("r3", 3)] {
        lake.expect(run, 1).await;
        lake.persist(page(run, 0, 1, &format!(r#"[{{"id": {id}, "name": "n{id}"}}]"#))).await.expect(run);
    }
    let table = lake.table().await.expect("table");
    let runs: Vec<String> = snapshot_runs(&table).into_iter().map(|(run, _)| run).collect();
    assert_eq!(runs, ["r1", "r2", "r3"], "the refused upkeep failed no commit");
    let asked = upkeep.asked.lock().expect("asked").clone();
    assert_eq!(asked, ["tributary.customers", "tributary.customers"], "asked again after the refusal, then not again");
}

/// (the partition's last field as an int, rows) of each live data file.
async fn rows_per_last_partition_field(table: &Table) -> Vec<(Option<i32>, u64)> {
    use iceberg::spec::{Literal, ManifestContentType, PrimitiveLiteral};
    let snapshot = table.metadata().current_snapshot().expect("a snapshot").clone();
    let list = table.manifest_list_reader(&snapshot).load().await.expect("manifest list");
    let mut out = Vec::new();
    for manifest in list.entries().iter().filter(|m| m.content == ManifestContentType::Data) {
        let manifest = manifest.load_manifest(table.file_io()).await.expect("manifest");
        for entry in manifest.entries().iter().filter(|e| e.is_alive()) {
            let file = entry.data_file();
            let value = match file.partition().iter().last().flatten() {
                Some(Literal::Primitive(PrimitiveLiteral::Int(n))) => Some(*n),
                None => None,
                Some(other) => panic!("a day is an int: {other:?}"),
            };
            out.push((value, file.record_count()));
        }
    }
    out.sort();
    out
}

fn days_since_epoch(date: &str) -> i32 {
    let day = NaiveDate::parse_from_str(date, "%Y-%m-%d").expect("date");
    i32::try_from(day.signed_duration_since(NaiveDate::default()).num_days()).expect("days")
}

#[tokio::test]
async fn a_day_transform_partitions_by_the_timestamp_column_itself() {
    let lake = Lake::new().await;
    lake.expect("r1", 1).await;
    let target = PersistTarget {
        table_format: TableFormat::Iceberg,
        partition_by: vec!["day(/ts)".into()],
        ..PersistTarget::new(DATASET)
    };
    let records = r#"[
        {"id": 1, "ts": "2026-11-01T23:59:59.999999Z"},
        {"id": 2, "ts": "2026-11-02T00:00:00Z"},
        {"id": 3, "ts": "2026-11-02T12:00:00.5Z"},
        {"id": 4, "ts": "2026-11-03T01:00:00Z"},
        {"id": 5, "ts": null},
        {"id": 6, "ts": "2026-11-03T01:00:00+02:00"}
    ]"#;
    lake.persist(runs::page(PIPELINE, target, "r1", 0, 1, records)).await.expect("page");
    let table = lake.table().await.expect("table");
    let spec: Vec<String> = table
        .metadata()
        .default_partition_spec()
        .fields()
        .iter()
        .map(|f| format!("{}({})", f.transform, f.name))
        .collect();
    assert_eq!(spec, ["identity(dt)", "day(ts_day)"]);
    // One file per UTC day of the column's own values: the offset
    // `2026-11-03T01:00:00+02:00` is 2026-11-02T23:00Z, day 2; the null
    // in the null partition.
    assert_eq!(
        rows_per_last_partition_field(&table).await,
        [
            (None, 1),
            (Some(days_since_epoch("2026-11-01")), 1),
            (Some(days_since_epoch("2026-11-02")), 3),
            (Some(days_since_epoch("2026-11-03")), 1)
        ]
    );
    let batches = scan(&table, &["id", "ts__text"]).await;
    assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), 6, "every row read");
}

#[tokio::test]
async fn a_transform_of_a_column_that_is_not_a_timestamp_fails_naming_the_spec_field() {
    let lake = Lake::new().await;
    lake.expect("r1", 1).await;
    let target = PersistTarget {
        table_format: TableFormat::Iceberg,
        partition_by: vec!["hour(/name)".into()],
        ..PersistTarget::new(DATASET)
    };
    let err = lake
        .persist(runs::page(PIPELINE, target, "r1", 0, 1, r#"[{"id": 1, "name": "a"}]"#))
        .await
        .expect_err("not a timestamp");
    let message = format!("{err:#}");
    assert!(message.contains("target.partition_by hour(/name)") && message.contains("not a timestamp"), "{message}");
    assert!(lake.table().await.is_none(), "no table made");
}

#[tokio::test]
async fn a_dataset_keeps_its_partition_transforms() {
    let lake = Lake::new().await;
    for run in ["r1", "r2"] {
        lake.expect(run, 1).await;
    }
    lake.persist(page("r1", 0, 1, r#"[{"id": 1, "ts": "2026-11-01T00:00:00Z"}]"#)).await.expect("r1");
    let target = PersistTarget {
        table_format: TableFormat::Iceberg,
        partition_by: vec!["day(/ts)".into()],
        ..PersistTarget::new(DATASET)
    };
    let err = lake
        .persist(runs::page(PIPELINE, target, "r2", 0, 1, r#"[{"id": 2, "ts": "2026-11-02T00:00:00Z"}]"#))
        .await
        .expect_err("another partition spec");
    let message = format!("{err:#}");
    assert!(
        message.contains("target.partition_by asks for day(/ts)") && message.contains("partitioned by nothing"),
        "{message}"
    );
    let table = lake.table().await.expect("table");
    assert_eq!(snapshot_runs(&table).len(), 1, "r2 committed nothing");
}

/// A `write: replace` run's target.
fn replace_page(run: &str, index: u32, count: u32, records: &str) -> PersistMessage {
    let target = PersistTarget {
        table_format: TableFormat::Iceberg,
        write: contracts::WriteDisposition::Replace,
        ..PersistTarget::new(DATASET)
    };
    runs::page(PIPELINE, target, run, index, count, records)
}

/// A full-refresh vendor in trouble answering `[{}, {}]` (or records of
/// nulls) must not replace the table with rows of nothing: the commit
/// fails loudly (permanent: DLQ and alert), the table is as it was; a run
/// with one value replaces it.
#[tokio::test]
async fn a_replace_run_whose_rows_hold_no_value_fails_and_leaves_the_table() {
    let lake = Lake::new().await;
    lake.expect("r1", 1).await;
    lake.persist(replace_page("r1", 0, 1, r#"[{"id":1,"name":"a"},{"id":2,"name":"b"}]"#)).await.expect("r1");
    lake.expect("r2", 1).await;
    let err = lake.persist(replace_page("r2", 0, 1, r#"[{}, {"id":null}, {}]"#)).await.expect_err("r2 refused");
    let message = err.to_string();
    assert!(
        message.contains("none of the run's 3 rows holds a value") && message.contains("nothing was committed"),
        "{message}"
    );
    let table = lake.table().await.expect("table");
    assert_eq!(snapshot_runs(&table).len(), 1, "no snapshot for r2");
    assert_eq!(ids_with(&rows(&table).await, "name"), [(1, Some("a".into())), (2, Some("b".into()))]);
    lake.expect("r3", 1).await;
    lake.persist(replace_page("r3", 0, 1, r#"[{}, {"name":"c"}]"#)).await.expect("r3: a value is a table");
    let table = lake.table().await.expect("table");
    let names: Vec<Option<String>> = scan(&table, &["name"])
        .await
        .iter()
        .flat_map(|b| {
            let names = b.column(0).as_any().downcast_ref::<arrow_array::StringArray>().expect("names").clone();
            names.iter().map(|n| n.map(str::to_string)).collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(names.len(), 2, "r3's two rows");
    assert!(names.contains(&Some("c".into())), "{names:?}");
}
