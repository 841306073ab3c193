//! One dataset, one table: a dataset whose records change over three runs
//! (`tests/readers/fixtures/evolution/run{1,2,3}.json`), and one whose
//! pages land in either order, read whole by every independent reader
//! (`tests/readers/readers.py`: pyspark with mergeSchema and with the
//! published schema, DuckDB with and without union_by_name, pyarrow with
//! the published schema) and by our own engine (`tributary query`'s
//! DataFusion), every value equal to the vendor's JSON.
//!
//! Run 1: nulls, `{}`, `[]` and ints. Run 2: new fields, floats in the int
//! column, objects where run 1 had nulls. Run 3: a nested field, a string
//! in a number column, `id` and `ID`, an integer above 2^53 beside floats.

use std::path::Path;

use chrono::{TimeZone, Utc};
use serde_json::Value;
use test_support::vendor::{JsonBody, serve_json};
use tributary::runtime::{LocalOptions, LocalRuntime};
use tributary_e2e::readers::{query_lake, read_with_every_reader_lines};

/// The fixture records of run `n` (1-based), one JSON text per record.
fn run_records(n: u32) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("readers/fixtures/evolution/run{n}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    let records: Vec<Value> = serde_json::from_str(&text).expect("a JSON array");
    records.iter().map(Value::to_string).collect()
}

#[tokio::test]
async fn three_runs_of_a_changing_vendor_read_whole_in_every_reader() {
    let body = JsonBody::default();
    let addr = serve_json(body.clone()).await;
    let spec = contracts::spec::PipelineSpec::from_yaml(&format!(
        "version: 1\npipeline: evolution\nstrategy: {{kind: simple}}\nrequest: {{url: 'http://{addr}/records', allow: {{loopback: true}}}}\ntarget: {{dataset: evolution}}\n"
    ))
    .expect("valid spec");
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let mut expected = Vec::new();
    for run in 1..=3 {
        let records = run_records(run);
        body.set(format!("[{}]", records.join(",")));
        let at = Utc.with_ymd_and_hms(2026, 11, run, 6, 0, 0).single().expect("a time");
        let summary = runtime.run(&spec, at).await.expect("run");
        assert!(summary.succeeded(), "run {run}: {summary}");
        expected.extend(records);
    }

    let dataset = lake.path().join("evolution");
    let published = lake.path().join("_schema/evolution.arrow");
    let report = read_with_every_reader_lines(&dataset, Some(&published), &expected);
    for reader in ["spark_merge", "spark_schema", "duckdb_union", "pyarrow"] {
        let result = &report.readers[reader];
        assert!(result.ok && result.rows == Some(9), "{reader} must read all 9 records exactly:\n{report}");
    }
    // DuckDB without union_by_name binds every file to the first file's
    // columns (DuckDB's documented rule): it reads every row, and the
    // columns run 1 did not have yet read as null until a replay rewrites
    // the older files with the table's schema.
    assert_eq!(report.readers["duckdb"].rows, Some(9), "{report}");

    let (table, _) = persist::read_schema(&adapters::local::DirStore::new(lake.path()), "_schema/evolution.json")
        .await
        .expect("read")
        .expect("a table schema");
    let persist::Ty::Struct { fields } = &table.table else { panic!("a struct") };
    let columns: Vec<(&str, &str, String)> =
        fields.list.iter().map(|f| (f.name.as_str(), f.source.as_str(), f.ty.name())).collect();
    for column in [
        ("amount", "amount", "int64".to_string()),
        ("amount__float64", "amount", "float64".into()),
        ("amount__string", "amount", "string".into()),
        ("count__float64", "count", "float64".into()),
        ("id_2", "ID", "string".into()),
        ("big", "big", "float64".into()),
        ("big__int64", "big", "int64".into()),
        ("meta", "meta", "struct".into()),
    ] {
        assert!(columns.contains(&(column.0, column.1, column.2.clone())), "{column:?} not in {columns:?}");
    }
    assert_eq!(table.version, 3, "one change per run");

    let rows = query_lake(lake.path(), "SELECT count(*) AS n, max(big__int64) AS big FROM evolution").await;
    assert_eq!(rows[0]["n"], 9, "our own engine reads every row");
    assert_eq!(rows[0]["big"], 9_007_199_254_740_993_i64, "exact, not 9007199254740992.0");
    let rows = query_lake(lake.path(), "SELECT meta.geo.lat AS lat FROM evolution WHERE id = 7").await;
    assert_eq!(rows[0]["lat"], 1.5, "a nested field added by run 3");

    let replayed = tributary::replay::replay_lake(lake.path(), "evolution", Default::default()).await.expect("replay");
    assert_eq!(replayed.records_persisted, 9);
    let report = read_with_every_reader_lines(&dataset, Some(&published), &expected);
    report.assert_all_read(9);
}

/// Persists one page of `records` for `run_date` and `page` into `lake`.
async fn persist_page(lake: &Path, page: u32, records: &[String]) {
    let records: Vec<&str> = records.iter().map(String::as_str).collect();
    let receipt =
        persist_into(lake, "pages", contracts::PersistTarget::new("pages"), page, &records).await.expect("persisted");
    assert_eq!(receipt.records_quarantined, 0);
}

/// Every column path of `fields` with its leaf type, sorted: struct field
/// order is how readers print a table, not what they read by name.
fn leaves(prefix: &str, fields: &arrow_schema::Fields, out: &mut Vec<String>) {
    for field in fields {
        let path = format!("{prefix}{}", field.name());
        match field.data_type() {
            arrow_schema::DataType::Struct(children) => leaves(&format!("{path}."), children, out),
            arrow_schema::DataType::List(item) => match item.data_type() {
                arrow_schema::DataType::Struct(children) => leaves(&format!("{path}[]."), children, out),
                other => out.push(format!("{path}[]: {other}")),
            },
            other => out.push(format!("{path}: {other}")),
        }
    }
}

#[tokio::test]
async fn pages_that_land_in_either_order_make_the_same_table() {
    // The dataset's columns come from runs 1 and 2; run 3's two pages
    // bring variants of existing columns, a nested field, `ID` beside `id`
    // and a new field with floats and an integer above 2^53.
    let first: Vec<String> = run_records(1).into_iter().chain(run_records(2)).collect();
    let third = run_records(3);
    let (a, b) = (third[..2].to_vec(), third[2..].to_vec());
    let mut tables = Vec::new();
    for order in [[&a, &b], [&b, &a]] {
        let lake = tempfile::tempdir().expect("tempdir");
        persist_page(lake.path(), 0, &first).await;
        for (i, page) in order.iter().enumerate() {
            persist_page(lake.path(), i as u32 + 1, page).await;
        }
        let published = lake.path().join("_schema/pages.arrow");
        let expected: Vec<String> = first.iter().chain(&third).cloned().collect();
        let report = read_with_every_reader_lines(&lake.path().join("pages"), Some(&published), &expected);
        for (name, result) in report.readers.iter().filter(|(name, _)| name.as_str() != "duckdb") {
            assert!(result.ok, "{name}:\n{report}");
        }
        let schema = lake_format::codec::decode_arrow_schema(&std::fs::read(&published).expect("published"))
            .expect("an Arrow schema");
        let mut columns = Vec::new();
        leaves("", schema.fields(), &mut columns);
        columns.sort();
        tables.push(columns);
    }
    assert_eq!(tables[0], tables[1], "the same columns and types whatever the order the pages landed in");
    assert!(tables[0].contains(&"big__int64: Int64".to_string()), "{:?}", tables[0]);
    assert!(tables[0].contains(&"meta.score__float64: Float64".to_string()), "{:?}", tables[0]);
}

#[tokio::test]
async fn a_run_whose_records_are_all_quarantined_is_not_a_success() {
    let addr = serve_json("[1, \"two\", [3]]").await;
    let spec = contracts::spec::PipelineSpec::from_yaml(&format!(
        "version: 1\npipeline: junk\nstrategy: {{kind: simple}}\nrequest: {{url: 'http://{addr}/records', allow: {{loopback: true}}}}\ntarget: {{dataset: junk}}\n"
    ))
    .expect("valid spec");
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let summary = runtime.run(&spec, Utc::now()).await.expect("run");
    assert_eq!((summary.records_persisted, summary.records_quarantined), (0, 3));
    assert!(!summary.succeeded(), "nothing reached the table: {summary}");
    assert!(summary.to_string().contains("the run is not a success"), "{summary}");
    let store = adapters::local::DirStore::new(lake.path());
    let runs = tributary::status::recent_runs(&store, None, 5).await.expect("status");
    assert_eq!(runs[0].state(), "quarantined", "{runs:?}");
}

/// Persists `records` (JSON texts) as page `page` of `pipeline`'s run 20261102T060000Z into
/// `target`, registering the table in the lake's local catalog.
async fn persist_into(
    lake: &Path,
    pipeline: &str,
    target: contracts::PersistTarget,
    page: u32,
    records: &[&str],
) -> Result<tributary_core::ledger::PageReceipt, persist::PersistError> {
    let store = adapters::local::DirStore::new(lake);
    let message = contracts::PersistMessage {
        version: contracts::V1,
        pipeline: pipeline.into(),
        run_id: contracts::RunId::new("20261102T060000Z").expect("run id"),
        run_date: chrono::NaiveDate::from_ymd_opt(2026, 11, 2).expect("date"),
        page: contracts::PageRef { index: page, count: 3 },
        target,
        payload: contracts::Payload::Inline {
            records: contracts::RawRecords::from_text(format!("[{}]", records.join(","))).expect("records"),
        },
        fetched_at: Some(Utc.with_ymd_and_hms(2026, 11, 2, 6, 0, 0).single().expect("a time")),
    };
    let (config, broker) = (persist::PersistConfig::default(), adapters::local::Broker::new());
    let catalog = adapters::local::DirCatalog::new(lake);
    let deps = persist::Deps {
        store: &store,
        queue: &broker,
        run_events: None,
        catalog: Some(&catalog),
        tables: None,
        config: &config,
    };
    persist::persist_page(message, deps).await
}

#[tokio::test]
async fn value_partitions_read_as_sent_reach_athena_and_keep_one_layout() {
    let lake = tempfile::tempdir().expect("tempdir");
    let mut by_city = contracts::PersistTarget::new("cities");
    by_city.partition = contracts::Partitioning::Field {
        field: "/city".into(),
        granularity: contracts::Granularity::Value,
        column: "city".into(),
    };
    let records = [
        r#"{"id": 1, "city": "São Paulo"}"#,
        r#"{"id": 2, "city": "a/b"}"#,
        r#"{"id": 3, "city": ""}"#,
        r#"{"id": 4}"#,
    ];
    let receipt = persist_into(lake.path(), "cities", by_city.clone(), 0, &records).await.expect("persisted");
    assert_eq!(receipt.records_persisted, 4);

    // Our engine shows the folder values as Spark, DuckDB and pyarrow do.
    let rows = query_lake(lake.path(), "SELECT id, city FROM cities ORDER BY id").await;
    let cities: Vec<Value> = rows.iter().map(|r| r["city"].clone()).collect();
    assert_eq!(cities, [Value::from("São Paulo"), Value::from("a/b"), Value::Null, Value::Null]);
    let filtered = query_lake(lake.path(), "SELECT id FROM cities WHERE city = 'a/b'").await;
    assert_eq!(filtered.len(), 1, "{filtered:?}");

    // Athena's enum projection lists every folder, the default one too.
    let entry: Value = serde_json::from_slice(
        &std::fs::read(lake.path().join(tributary_core::keys::catalog_key("cities"))).expect("catalog entry"),
    )
    .expect("JSON");
    let listed = entry["Parameters"]["projection.city.values"].as_str().expect("enum values");
    let mut listed: Vec<&str> = listed.split(',').collect();
    listed.sort_unstable();
    let mut folders: Vec<String> = std::fs::read_dir(lake.path().join("cities"))
        .expect("dataset folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().trim_start_matches("city=").to_string())
        .collect();
    folders.sort();
    assert_eq!(listed, folders, "every folder is reachable through the projection");
    assert!(listed.contains(&"__HIVE_DEFAULT_PARTITION__"), "{listed:?}");

    // Another layout for the same dataset is refused, naming both.
    let err = persist_into(lake.path(), "cities", contracts::PersistTarget::new("cities"), 1, &[r#"{"id": 5}"#])
        .await
        .expect_err("a second layout");
    let text = err.to_string();
    assert!(text.contains("target.partition") && text.contains("city (value)") && text.contains("dt (day)"), "{text}");
    assert!(tributary_core::batch::RecordError::is_permanent(&err), "dead-lettered with the reason, not retried");
    assert!(!lake.path().join("cities/dt=2026-11-02").exists(), "nothing written beside the first layout");
}

/// Issue 27, item 2: a column declared by the name it has in the lake
/// (`created_at`) while the vendor sends `createdAt` is that key's column,
/// typed as declared, in both table formats; the next run is the same
/// table.
#[tokio::test]
async fn a_column_declared_by_its_lake_name_is_filled_from_the_vendors_key() {
    for format in ["parquet", "iceberg"] {
        let body = JsonBody::default();
        let addr = serve_json(body.clone()).await;
        let spec = contracts::spec::PipelineSpec::from_yaml(&format!(
            "version: 1\npipeline: contacts\nstrategy: {{kind: simple}}\n\
             request: {{url: 'http://{addr}/records', allow: {{loopback: true}}}}\n\
             target: {{dataset: contacts, table_format: {format}, schema: [{{name: created_at, type: 'timestamp(ms, UTC)'}}]}}\n"
        ))
        .expect("valid spec");
        let lake = tempfile::tempdir().expect("tempdir");
        let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
        for (day, id) in [(1, 1), (2, 2)] {
            body.set(format!(r#"[{{"id": {id}, "createdAt": "2026-12-0{day}T10:00:00.250Z"}}]"#));
            let at = Utc.with_ymd_and_hms(2026, 12, day, 6, 0, 0).single().expect("a time");
            let summary = runtime.run(&spec, at).await.expect("run");
            let alerts = tributary::runtime::read_alerts(lake.path());
            assert!(summary.succeeded(), "{format} run {day}: {summary} {alerts:?}");
            assert_eq!(summary.records_quarantined, 0, "{format}: {summary}");
        }
        let rows = query_lake(lake.path(), "SELECT * FROM contacts ORDER BY id").await;
        let columns: Vec<&str> = rows[0].keys().map(String::as_str).filter(|c| c.starts_with("created")).collect();
        assert_eq!(columns, ["created_at"], "{format}: one column, no created_at_2: {rows:?}");
        let values: Vec<&Value> = rows.iter().map(|row| &row["created_at"]).collect();
        assert!(
            values
                .iter()
                .zip(1..)
                .all(|(v, day)| v.as_str().is_some_and(|t| t.starts_with(&format!("2026-12-0{day}T10:00:00.250")))),
            "{format}: every run's value in the declared column: {values:?}"
        );
    }
}

/// Issue 27, item 4: a vendor whose `contact_id` turns from integers to
/// text and which adds `email`. Each run that changes the dataset's columns
/// says so in its summary and run-completed event, and is alerted once
/// (not per page), per `target.on_schema_change`; `freeze` quarantines the
/// records that would change the table instead.
#[tokio::test]
async fn schema_drift_is_announced_alerted_once_or_frozen_per_on_schema_change() {
    let run_events = |lake: &Path| -> Vec<Value> {
        std::fs::read_to_string(lake.join("_run_events.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    };
    for mode in ["alert", "evolve", "freeze"] {
        let body = JsonBody::default();
        let addr = serve_json(body.clone()).await;
        let spec = contracts::spec::PipelineSpec::from_yaml(&format!(
            "version: 1\npipeline: contacts\nstrategy: {{kind: simple}}\n\
             request: {{url: 'http://{addr}/records', allow: {{loopback: true}}}}\n\
             target: {{dataset: contacts, on_schema_change: {mode}}}\n"
        ))
        .expect("valid spec");
        let lake = tempfile::tempdir().expect("tempdir");
        let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
        let pages = [
            r#"[{"id": 1, "contact_id": 10}, {"id": 2, "contact_id": 11}]"#,
            r#"[{"id": 3, "contact_id": "C-12"}, {"id": 4, "contact_id": 13, "email": "a@example.com"}, {"id": 5, "contact_id": 14}]"#,
            r#"[{"id": 6, "contact_id": "C-15", "email": "b@example.com"}]"#,
        ];
        let mut summaries = Vec::new();
        for (day, page) in (1..).zip(pages) {
            body.set(page.to_string());
            let at = Utc.with_ymd_and_hms(2026, 12, day, 6, 0, 0).single().expect("a time");
            summaries.push(runtime.run(&spec, at).await.expect("run"));
        }
        // Run 1 makes the table: no change. Run 2 changes it twice.
        assert!(summaries[0].schema_changes.is_empty(), "{mode}: {}", summaries[0]);
        let changes = &summaries[1].schema_changes;
        assert_eq!(changes.len(), 2, "{mode}: {}", summaries[1]);
        assert!(
            changes.iter().any(|c| c.contains("added variant column contact_id__string (string): /contact_id")),
            "{mode}: {changes:?}"
        );
        assert!(changes.iter().any(|c| c.ends_with("added column email (string) for /email")), "{mode}: {changes:?}");
        assert_eq!(changes.iter().all(|c| c.starts_with("refused (on_schema_change: freeze): ")), mode == "freeze");
        assert!(summaries[1].to_string().contains("  schema changes       "), "{mode}: {}", summaries[1]);
        let events = run_events(lake.path());
        assert_eq!(events.len(), 3, "{mode}: {events:?}");
        assert_eq!(events[1]["schema_changes"].as_array().map(Vec::len), Some(2), "{mode}: {events:?}");
        assert!(events[0].get("schema_changes").is_none(), "{mode}: {events:?}");
        let schema_alerts: Vec<_> =
            summaries.iter().map(|s| s.alerts.iter().filter(|a| a.function == "schema").count()).collect();
        match mode {
            "alert" => {
                // Alerted once, by the run that changed it; run 3 changes nothing.
                assert_eq!(schema_alerts, [0, 1, 0], "{mode}");
                assert!(summaries[2].schema_changes.is_empty(), "{}", summaries[2]);
                let alert = summaries[1].alerts.iter().find(|a| a.function == "schema").expect("alert");
                assert!(alert.summary.contains("contact_id__string") && alert.summary.contains("email"), "{alert:?}");
                assert!(summaries.iter().all(|s| s.succeeded()), "{mode}");
            }
            "evolve" => {
                assert_eq!(schema_alerts, [0, 0, 0], "{mode}: announced, not alerted");
                assert!(summaries.iter().all(|s| s.records_quarantined == 0), "{mode}");
            }
            _ => {
                // Frozen: the records that needed a change are quarantined,
                // the others land; each run meeting it is alerted.
                assert_eq!(schema_alerts, [0, 1, 1], "{mode}");
                assert_eq!(
                    (summaries[1].records_persisted, summaries[1].records_quarantined),
                    (1, 2),
                    "{}",
                    summaries[1]
                );
                assert_eq!(
                    (summaries[2].records_persisted, summaries[2].records_quarantined),
                    (0, 1),
                    "{}",
                    summaries[2]
                );
                let rows = query_lake(lake.path(), "SELECT * FROM contacts ORDER BY id").await;
                let columns: Vec<&str> = rows[0].keys().map(String::as_str).collect();
                assert!(
                    !columns.iter().any(|c| *c == "email" || *c == "contact_id__string"),
                    "frozen table: {columns:?}"
                );
                assert_eq!(rows.iter().map(|r| r["id"].as_i64()).collect::<Vec<_>>(), [Some(1), Some(2), Some(5)]);
                let dead: Vec<u64> = summaries.iter().map(|s| s.dead_letters()).collect();
                assert_eq!(
                    dead,
                    [0, 0, 0],
                    "frozen records are quarantined, their pages never dead-lettered: {:?}",
                    summaries.iter().flat_map(|s| s.alerts.iter().map(|a| a.summary.clone())).collect::<Vec<_>>()
                );
            }
        }
        assert!(summaries.iter().all(|s| s.alerts.iter().all(|a| a.function == "schema")), "{mode}: {summaries:#?}");
    }
}
