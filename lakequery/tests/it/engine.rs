//! `LakeEngine` over a lake folder written the way Persist writes it: Parquet
//! from `persist::records_to_parquet` under `<dataset>/dt=<date>/`.

use std::path::Path;
use std::time::Duration;

use lakequery::{LakeEngine, PAGE_ROWS};
use serde_json::{Value, json};
use tokio::time::Instant;
use tributary_core::ports::{PortError, Query, QueryEngine, QueryState, ResultPage};

/// Writes `records` as one Parquet file at `<root>/<relative>`.
fn write_parquet(root: &Path, relative: &str, records: &[Value]) {
    let bytes = persist::records_to_parquet(records, &persist::WriterConfig::default()).expect("parquet");
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, bytes).expect("write");
}

/// A lake with `customers` and `orders` over two days, plus the folders that
/// are not datasets.
fn lake() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write_parquet(
        root,
        "customers/dt=2026-11-28/crm-20261128T060000Z-00000.parquet",
        &[json!({"id": 1, "name": "ada"}), json!({"id": 2, "name": "bob"})],
    );
    write_parquet(
        root,
        "customers/dt=2026-11-29/crm-20261129T060000Z-00000.parquet",
        &[json!({"id": 4, "name": "dan", "vip": true}), json!({"id": 3, "name": "a?b"})],
    );
    write_parquet(
        root,
        "orders/dt=2026-11-29/shop-20261129T060000Z-00000.parquet",
        &[
            json!({"order_id": "o-1", "customer_id": 3, "amount": 12.5}),
            json!({"order_id": "o-2", "customer_id": 4, "amount": 7.25}),
            json!({"order_id": "o-3", "customer_id": 4, "amount": 1.0}),
        ],
    );
    // Not datasets: raw pages, quarantine, receipts, and a dataset with no Parquet yet.
    write_parquet(root, "raw/customers/dt=2026-11-29/crm-x-00000.parquet", &[json!({"id": 99})]);
    write_parquet(root, "quarantine/customers/dt=2026-11-29/crm-x-00000.parquet", &[json!({"id": 98})]);
    write_parquet(root, "_runs/crm/20261129T060000Z/page-00000.parquet", &[json!({"id": 97})]);
    std::fs::create_dir_all(root.join("invoices/dt=2026-11-29")).expect("mkdir");
    std::fs::write(root.join("invoices/dt=2026-11-29/half.tmp-1-0"), b"not yet").expect("write");
    dir
}

fn query(sql: &str, parameters: &[&str]) -> Query {
    Query {
        sql: sql.to_string(),
        parameters: parameters.iter().map(|p| p.to_string()).collect(),
        database: "ignored".to_string(),
        workgroup: None,
        output_location: None,
    }
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

/// Starts `sql`, expects it to succeed and returns every page.
async fn pages(engine: &LakeEngine, sql: &str, parameters: &[&str]) -> Vec<ResultPage> {
    let id = engine.start(&query(sql, parameters)).await.expect("start");
    assert_eq!(engine.wait(&id, soon()).await.expect("wait"), QueryState::Succeeded, "{sql}");
    let mut pages = vec![engine.page(&id, None).await.expect("first page")];
    while let Some(token) = pages.last().and_then(|page| page.next_token.clone()) {
        pages.push(engine.page(&id, Some(&token)).await.expect("next page"));
    }
    pages
}

/// All rows of `sql` as one JSON array.
async fn rows(engine: &LakeEngine, sql: &str, parameters: &[&str]) -> Value {
    let rows = pages(engine, sql, parameters).await.into_iter().flat_map(|page| page.rows).map(Value::Object);
    Value::Array(rows.collect())
}

/// Starts `sql` and returns the reason it failed.
async fn failure(engine: &LakeEngine, sql: &str, parameters: &[&str]) -> String {
    let id = engine.start(&query(sql, parameters)).await.expect("start returns an id even for a bad query");
    match engine.wait(&id, soon()).await.expect("wait") {
        QueryState::Failed { state, reason } => {
            assert_eq!(state, "FAILED");
            reason
        }
        other => panic!("{sql}: expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn a_parameter_selects_one_partition_with_typed_values() {
    let lake = lake();
    let engine = LakeEngine::new(lake.path());
    let pages = pages(&engine, "SELECT id, name FROM customers WHERE dt = ? ORDER BY id", &["2026-11-29"]).await;
    assert_eq!(pages.len(), 1);
    assert_eq!(pages[0].columns, ["id", "name"]);
    assert_eq!(pages[0].next_token, None);
    let rows = Value::Array(pages[0].rows.iter().cloned().map(Value::Object).collect());
    assert_eq!(rows, json!([{"id": 3, "name": "a?b"}, {"id": 4, "name": "dan"}]));
    assert!(rows[0]["id"].is_i64(), "id is a JSON integer");
}

#[tokio::test]
async fn a_parameter_compared_with_a_number_is_bound_as_that_number() {
    let lake = lake();
    let engine = LakeEngine::new(lake.path());
    // As strings, "2", "3" and "4" are all greater than "10".
    let none = rows(&engine, "SELECT id FROM customers WHERE id > ? ORDER BY id", &["10"]).await;
    assert_eq!(none, json!([]));
    let some = rows(&engine, "SELECT id FROM customers WHERE id >= ? ORDER BY id", &["3"]).await;
    assert_eq!(some, json!([{"id": 3}, {"id": 4}]));
}

#[tokio::test]
async fn dt_is_a_column_missing_fields_are_null_and_datasets_join() {
    let lake = lake();
    let engine = LakeEngine::new(lake.path());
    assert_eq!(
        rows(&engine, "SELECT id, dt, vip FROM customers ORDER BY id", &[]).await,
        json!([
            {"id": 1, "dt": "2026-11-28", "vip": null},
            {"id": 2, "dt": "2026-11-28", "vip": null},
            {"id": 3, "dt": "2026-11-29", "vip": null},
            {"id": 4, "dt": "2026-11-29", "vip": true},
        ])
    );
    assert_eq!(
        rows(
            &engine,
            "SELECT c.name, count(*) AS orders, sum(o.amount) AS total \
             FROM orders o JOIN customers c ON c.id = o.customer_id \
             GROUP BY c.name ORDER BY c.name",
            &[],
        )
        .await,
        json!([{"name": "a?b", "orders": 1, "total": 12.5}, {"name": "dan", "orders": 2, "total": 8.25}])
    );
    // Parameters are strings; other types go through CAST, as on Athena.
    assert_eq!(
        rows(&engine, "SELECT substr(name, 1, 2) AS prefix FROM customers WHERE id = CAST(? AS BIGINT)", &["2"]).await,
        json!([{"prefix": "bo"}])
    );
    // Unlike Athena (`bigint = varchar` is an error there), DataFusion casts
    // a string parameter to the column's type by itself.
    assert_eq!(rows(&engine, "SELECT name FROM customers WHERE id = ?", &["2"]).await, json!([{"name": "bob"}]));
}

#[tokio::test]
async fn a_question_mark_inside_a_literal_is_not_a_placeholder() {
    let lake = lake();
    let engine = LakeEngine::new(lake.path());
    assert_eq!(
        rows(&engine, "SELECT id FROM customers WHERE name = 'a?b' AND dt = ?", &["2026-11-29"]).await,
        json!([{"id": 3}])
    );
    assert_eq!(
        lakequery::numbered_placeholders("SELECT * FROM customers WHERE name = 'a?b' AND dt = ?"),
        ("SELECT * FROM customers WHERE name = 'a?b' AND dt = $1".to_string(), 1)
    );
}

#[tokio::test]
async fn results_are_paged_by_a_thousand_rows_each_row_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first: Vec<Value> = (0..1500).map(|i| json!({"n": i})).collect();
    let second: Vec<Value> = (1500..2500).map(|i| json!({"n": i})).collect();
    write_parquet(dir.path(), "numbers/dt=2026-11-28/x.parquet", &first);
    write_parquet(dir.path(), "numbers/dt=2026-11-29/y.parquet", &second);
    let engine = LakeEngine::new(dir.path());

    let pages = pages(&engine, "SELECT n FROM numbers ORDER BY n", &[]).await;
    let sizes: Vec<usize> = pages.iter().map(|page| page.rows.len()).collect();
    assert_eq!(sizes, [PAGE_ROWS, PAGE_ROWS, 500]);
    let tokens: Vec<Option<&str>> = pages.iter().map(|page| page.next_token.as_deref()).collect();
    assert_eq!(tokens, [Some("1000"), Some("2000"), None]);
    let numbers: Vec<i64> =
        pages.iter().flat_map(|page| &page.rows).map(|row| row["n"].as_i64().expect("int")).collect();
    assert_eq!(numbers, (0..2500).collect::<Vec<i64>>(), "every row once, in order");
    assert!(pages.iter().all(|page| page.columns == ["n"]));
}

#[tokio::test]
async fn bad_page_tokens_and_unknown_ids_are_errors() {
    let lake = lake();
    let engine = LakeEngine::new(lake.path());
    let id = engine.start(&query("SELECT id FROM customers", &[])).await.expect("start");
    for token in ["abc", "-1", "4", "1000"] {
        match engine.page(&id, Some(token)).await {
            Err(PortError::Permanent { message, .. }) => assert!(message.contains(token), "{message}"),
            other => panic!("token {token}: {other:?}"),
        }
    }
    assert!(matches!(engine.wait("local-query-999", soon()).await, Err(PortError::NotFound { what: "query", .. })));
    assert!(matches!(engine.page("local-query-999", None).await, Err(PortError::NotFound { what: "query", .. })));

    let empty = pages(&engine, "SELECT id FROM customers WHERE id > 100", &[]).await;
    assert_eq!(empty.len(), 1);
    assert_eq!(empty[0].columns, ["id"]);
    assert!(empty[0].rows.is_empty() && empty[0].next_token.is_none());
}

#[tokio::test]
async fn planning_errors_are_reported_by_wait_not_start() {
    let lake = lake();
    let engine = LakeEngine::new(lake.path());

    let reason = failure(&engine, "SELECT * FROM invoices", &[]).await;
    assert!(reason.contains("invoices") && reason.contains("not found"), "{reason}");

    let reason = failure(&engine, "SELEC id FROM customers", &[]).await;
    assert!(reason.contains("SELEC"), "{reason}");

    let reason = failure(&engine, "SELECT id FROM customers WHERE dt = ? AND name = ?", &["2026-11-29"]).await;
    assert!(reason.contains("2 `?` placeholder(s) but 1 parameter(s)"), "{reason}");
    let reason = failure(&engine, "SELECT id FROM customers", &["extra"]).await;
    assert!(reason.contains("0 `?` placeholder(s) but 1 parameter(s)"), "{reason}");

    // A string parameter that is not a number, compared with an integer column.
    let reason = failure(&engine, "SELECT name FROM customers WHERE id = ?", &["two"]).await;
    assert!(reason.contains("two"), "{reason}");

    // Read-only: no writing to the disk through SQL.
    let reason = failure(&engine, "COPY (SELECT 1) TO '/tmp/lakequery-copy.parquet'", &[]).await;
    assert!(reason.to_lowercase().contains("not supported") || reason.contains("DML"), "{reason}");

    // The failure is kept: a second wait says the same, and there are no pages.
    let id = engine.start(&query("SELECT * FROM nope", &[])).await.expect("start");
    let first = engine.wait(&id, soon()).await.expect("wait");
    assert_eq!(engine.wait(&id, soon()).await.expect("wait again"), first);
    assert!(matches!(engine.page(&id, None).await, Err(PortError::Permanent { .. })));
}

#[tokio::test]
async fn only_dataset_folders_are_tables() {
    let lake = lake();
    let engine = LakeEngine::new(lake.path());
    assert_eq!(
        rows(
            &engine,
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
            &[],
        )
        .await,
        json!([{"table_name": "customers"}, {"table_name": "orders"}])
    );
    for folder in ["raw", "quarantine", "_runs", "invoices"] {
        let reason = failure(&engine, &format!("SELECT * FROM \"{folder}\""), &[]).await;
        assert!(reason.contains(folder) && reason.contains("not found"), "{reason}");
    }
}

#[tokio::test]
async fn an_unusable_lake_root_is_refused_by_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("no-lake-here");
    let engine = LakeEngine::new(&missing);
    match engine.start(&query("SELECT 1", &[])).await {
        Err(PortError::Permanent { target, .. }) => assert!(target.contains("no-lake-here"), "{target}"),
        other => panic!("{other:?}"),
    }
    // An empty lake is usable: it just has no tables.
    let engine = LakeEngine::new(dir.path());
    assert_eq!(rows(&engine, "SELECT 1 AS one", &[]).await, json!([{"one": 1}]));
}

#[tokio::test]
async fn a_dataset_whose_files_disagree_is_left_out_and_named_on_failure() {
    let lake = lake();
    write_parquet(lake.path(), "events/dt=2026-11-28/a.parquet", &[json!({"v": 1})]);
    write_parquet(lake.path(), "events/dt=2026-11-29/b.parquet", &[json!({"v": "one"})]);
    let engine = LakeEngine::new(lake.path());
    // Other datasets still work.
    assert_eq!(rows(&engine, "SELECT count(*) AS n FROM orders", &[]).await, json!([{"n": 3}]));
    let reason = failure(&engine, "SELECT * FROM events", &[]).await;
    assert!(reason.contains("events") && reason.contains("left out"), "{reason}");
}

#[tokio::test]
async fn nested_values_are_indexed_as_on_athena() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_parquet(
        dir.path(),
        "contacts/dt=2026-11-29/crm-20261129T060000Z-00000.parquet",
        &[
            json!({"id": 1, "tags": ["vip", "eu"], "address": {"city": "Lima", "zip": "15001"}}),
            json!({"id": 2, "tags": ["new"], "address": {"city": "Oslo", "zip": "0150"}}),
        ],
    );
    let engine = LakeEngine::new(dir.path());
    assert_eq!(
        rows(
            &engine,
            "SELECT id, tags[1] AS first, address['city'] AS city, cardinality(tags) AS n, \
             array_element(tags, 2) AS second FROM contacts ORDER BY id",
            &[]
        )
        .await,
        json!([
            {"id": 1, "first": "vip", "city": "Lima", "n": 2, "second": "eu"},
            {"id": 2, "first": "new", "city": "Oslo", "n": 1, "second": null},
        ])
    );
}

#[tokio::test]
async fn lists_and_structs_are_json_values_for_the_cli_and_json_text_for_the_athena_strategy() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_parquet(
        dir.path(),
        "contacts/dt=2026-11-29/crm-20261129T060000Z-00000.parquet",
        &[json!({"id": 1, "tags": ["vip", "eu"], "address": {"city": "Lima"}})],
    );
    let sql = "SELECT tags, address FROM contacts";
    let cli = LakeEngine::new(dir.path()).with_nested_values();
    assert_eq!(rows(&cli, sql, &[]).await, json!([{"tags": ["vip", "eu"], "address": {"city": "Lima"}}]));
    let athena_like = LakeEngine::new(dir.path());
    assert_eq!(
        rows(&athena_like, sql, &[]).await,
        json!([{"tags": "[\"vip\",\"eu\"]", "address": "{\"city\":\"Lima\"}"}])
    );
}
