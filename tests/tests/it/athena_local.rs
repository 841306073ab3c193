//! End-to-end: the Athena-driven strategy on one machine — rows of a
//! DataFusion query over the lake's Parquet drive one vendor call each.

use std::collections::BTreeSet;

use chrono::Utc;
use contracts::spec::PipelineSpec;
use test_support::lake::read_dataset;
use test_support::vendor::{VendorBehaviour, detail, paged_spec, start_vendor};
use tributary::runtime::{LocalOptions, LocalRuntime};

/// The `(item_id, k)` of every row of the `details` dataset, sorted.
fn detail_keys(lake: &std::path::Path) -> Vec<(u64, u64)> {
    let mut rows: Vec<(u64, u64)> = read_dataset(lake, "details")
        .iter()
        .map(|r| (r["item_id"].as_u64().expect("item_id"), r["k"].as_u64().expect("k")))
        .collect();
    rows.sort_unstable();
    rows
}

fn athena_spec(addr: std::net::SocketAddr, sql: &str, url_path: &str) -> PipelineSpec {
    PipelineSpec::from_yaml(&format!(
        "version: 1\npipeline: details\nstrategy: {{kind: athena, query: \"{sql}\", parameters: ['{{run_date}}'], database: lake}}\nrequest: {{url: 'http://{addr}{url_path}', records_pointer: /data, allow: {{loopback: true}}}}\ntarget: {{dataset: details}}\n"
    ))
    .expect("valid spec")
}

/// A trial: the re-run of a fan-out run that failed on one customer ran
/// its `SELECT DISTINCT` again, got the rows in another order, and stored
/// some customers' records twice and lost others; it also called the
/// vendor once per row again. The query runs in one order, and the re-run
/// calls only the row whose page is missing.
#[tokio::test]
async fn a_fan_out_rerun_calls_only_the_missing_row_and_holds_every_record_once() {
    let vendor = VendorBehaviour { total: 30, broken_details: BTreeSet::from([17]), ..Default::default() };
    let (healed, calls) = (vendor.healed.clone(), vendor.calls.clone());
    let addr = start_vendor(vendor).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let now = Utc::now();
    assert!(runtime.run(&paged_spec(addr, "items", 20), now).await.expect("items").succeeded());
    // No ORDER BY: the Athena function orders the rows itself.
    let spec = athena_spec(addr, "SELECT DISTINCT id FROM items WHERE dt = ?", "/items/{id}/details");
    let failed = runtime.run(&spec, now).await.expect("first attempt");
    assert!(!failed.completed && failed.pages == 29, "{failed}");

    healed.store(true, std::sync::atomic::Ordering::SeqCst);
    let before = calls.load(std::sync::atomic::Ordering::SeqCst);
    let rerun = runtime.run(&spec, now).await.expect("re-run");
    assert!(rerun.succeeded(), "{rerun}");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst) - before, 1, "only item 17's details: {rerun}");
    let rows = detail_keys(lake.path());
    let expected: Vec<(u64, u64)> = (0..30).flat_map(|id| [(id, 0), (id, 1)]).collect();
    assert_eq!(rows, expected, "every detail exactly once");
}

#[tokio::test]
async fn each_row_of_a_lake_query_becomes_one_call_and_its_records_persist_once() {
    let vendor = VendorBehaviour { total: 57, ..Default::default() };
    let addr = start_vendor(vendor).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let now = Utc::now();
    assert!(runtime.run(&paged_spec(addr, "items", 20), now).await.expect("items").succeeded());

    let spec =
        athena_spec(addr, "SELECT DISTINCT id FROM items WHERE dt = ? AND id < 30 ORDER BY id", "/items/{id}/details");
    let summary = runtime.run(&spec, now).await.expect("run");

    assert!(summary.succeeded(), "{summary}");
    assert_eq!(summary.requests, 30, "one call per row");
    assert_eq!(summary.pages, 30);
    let rows = detail_keys(lake.path());
    let expected: Vec<(u64, u64)> = (0..30).flat_map(|id| [(id, 0), (id, 1)]).collect();
    assert_eq!(rows, expected, "every detail exactly once");
    let sample =
        read_dataset(lake.path(), "details").into_iter().find(|r| r["item_id"] == 3 && r["k"] == 1).expect("row");
    assert_eq!(sample["note"], detail(3, 1)["note"]);
    let run_id = contracts::RunId::new(summary.run_id.clone()).expect("run id");
    let manifest: tributary_core::ledger::Manifest = serde_json::from_slice(
        &std::fs::read(lake.path().join(tributary_core::keys::manifest_key("details", &run_id))).expect("manifest"),
    )
    .expect("manifest");
    assert_eq!((manifest.pages, manifest.records_persisted), (30, 60), "complete once the row count is known");
}

#[tokio::test]
async fn a_query_with_no_rows_is_a_successful_run_of_zero_requests() {
    let addr = start_vendor(VendorBehaviour { total: 5, ..Default::default() }).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let now = Utc::now();
    runtime.run(&paged_spec(addr, "items", 20), now).await.expect("items");
    let spec = athena_spec(addr, "SELECT id FROM items WHERE dt = ? AND id > 1000", "/items/{id}/details");
    let summary = runtime.run(&spec, now).await.expect("run");
    assert!(summary.succeeded(), "{summary}");
    assert_eq!((summary.requests, summary.pages), (0, 0));
}

#[tokio::test]
async fn sql_that_fails_to_plan_is_dead_lettered_with_an_alert() {
    let addr = start_vendor(VendorBehaviour { total: 5, ..Default::default() }).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let spec = athena_spec(addr, "SELECT id FROM no_such_table WHERE dt = ?", "/items/{id}/details");
    let summary = runtime.run(&spec, Utc::now()).await.expect("run");
    assert_eq!(summary.dead_lettered.get("athena-dlq"), Some(&1), "{summary}");
    assert_eq!(summary.alerts.len(), 1);
    assert_eq!(summary.alerts[0].function, "athena");
    let reason = summary.alerts[0].reason.as_deref().expect("reason");
    assert!(
        reason.contains("FAILED") && reason.contains("no_such_table"),
        "the engine's reason reaches the alert: {reason}"
    );
    assert_eq!(summary.requests, 0);
}

#[tokio::test]
async fn a_row_without_the_templates_value_fails_alone() {
    let addr = start_vendor(VendorBehaviour { total: 4, ..Default::default() }).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let now = Utc::now();
    runtime.run(&paged_spec(addr, "items", 20), now).await.expect("items");
    // Rows 0..2 have an id; the UNION adds one row whose id is NULL.
    let sql = "SELECT id FROM items WHERE dt = ? AND id < 3 UNION ALL SELECT CAST(NULL AS BIGINT) AS id";
    let summary = runtime.run(&athena_spec(addr, sql, "/items/{id}/details"), now).await.expect("run");
    assert_eq!(summary.requests, 3, "{summary}");
    assert_eq!(summary.records_persisted, 6);
    assert_eq!(summary.dead_lettered.get("orchestrator-dlq"), Some(&1), "{summary}");
    let reason = summary.alerts[0].reason.as_deref().expect("reason");
    assert!(reason.contains("request.url") && reason.contains("{id}"), "the field and placeholder are named: {reason}");
}

/// A query that answers none of the template's `{id}` (the column is
/// `item`): one dead letter for the query, naming the column, instead of
/// one per row (a trial: 25 rows, 25 letters); no call is made.
#[tokio::test]
async fn a_query_without_the_templates_column_is_dead_lettered_once_not_per_row() {
    let addr = start_vendor(VendorBehaviour { total: 25, ..Default::default() }).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let now = Utc::now();
    runtime.run(&paged_spec(addr, "items", 20), now).await.expect("items");
    let sql = "SELECT id AS item FROM items WHERE dt = ?";
    let summary = runtime.run(&athena_spec(addr, sql, "/items/{id}/details"), now).await.expect("run");
    assert_eq!(summary.requests, 0, "{summary}");
    assert_eq!(summary.dead_lettered.get("athena-dlq"), Some(&1), "{summary}");
    assert_eq!(summary.dead_lettered.get("orchestrator-dlq"), None, "{summary}");
    assert_eq!(summary.alerts.len(), 1, "{summary}");
    let reason = summary.alerts[0].reason.as_deref().expect("reason");
    assert!(reason.contains("[\"item\"]") && reason.contains("[\"id\"]"), "names both columns: {reason}");
}
