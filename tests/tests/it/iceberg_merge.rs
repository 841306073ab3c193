//! Current-state tables (`target.write: merge | replace`, issue 26) end to
//! end: runs of the local runtime against a paged vendor, the table read
//! back by pyiceberg, DuckDB's iceberg extension and `tributary query`'s
//! engine, each of which must read exactly the latest row per key.

use chrono::{TimeZone, Utc};
use contracts::spec::PipelineSpec;
use serde_json::{Value, json};
use test_support::vendor::{PagedRecords, serve_pages};
use tributary::runtime::{LocalOptions, LocalRuntime};
use tributary_core::ports::ObjectStore;
use tributary_e2e::readers::{duckdb_iceberg_python, python, query_lake};

use super::iceberg::{READ, READ_DUCKDB, read_tables};

fn contact(id: u32, version: &str, updated_at: &str) -> Value {
    json!({"id": id, "name": format!("{version} {id}"), "updatedAt": updated_at, "deleted": false})
}

fn spec(addr: std::net::SocketAddr, write: &str) -> PipelineSpec {
    let text = format!(
        "version: 1\npipeline: contacts\nstrategy: {{kind: paged, page_size: 40, total_pointer: /meta/total}}\n\
         request: {{url: 'http://{addr}/records', records_pointer: /results, allow: {{loopback: true}}}}\n\
         target: {{dataset: contacts, table_format: iceberg, {write}}}\n"
    );
    PipelineSpec::from_yaml(&text).expect("valid spec")
}

/// A paged vendor on 127.0.0.1 serving `records`, a pipeline against it
/// whose target says `write`, an empty lake and the local runtime on it.
struct Setup {
    records: PagedRecords,
    addr: std::net::SocketAddr,
    spec: PipelineSpec,
    lake: tempfile::TempDir,
    runtime: LocalRuntime,
}

async fn setup(write: &str) -> Setup {
    let records = PagedRecords::default();
    let addr = serve_pages(records.clone()).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    Setup { spec: spec(addr, write), records, addr, lake, runtime }
}

/// 06:00 UTC on 2026-11-`day`: the scheduled time of that day's run.
fn at(day: u32) -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, day, 6, 0, 0).single().expect("a valid time")
}

/// Every row of a reader's `contacts` table as JSON text, sorted: each
/// value compared as read.
fn contact_rows(tables: &Value) -> Vec<String> {
    let mut rows: Vec<String> =
        tables["contacts"]["rows"].as_array().expect("rows").iter().map(Value::to_string).collect();
    rows.sort();
    rows
}

/// The (id, name) pairs of a reader's rows, sorted.
fn id_names(rows: &[Value]) -> Vec<(i64, String)> {
    let mut pairs: Vec<(i64, String)> =
        rows.iter().map(|r| (r["id"].as_i64().expect("id"), r["name"].as_str().expect("name").to_string())).collect();
    pairs.sort();
    pairs
}

#[tokio::test]
async fn a_merge_keeps_the_latest_row_per_key_across_runs_in_every_reader() {
    let Setup { records, spec, lake, runtime, .. } =
        setup("write: merge, primary_key: [/id], order_by: /updatedAt, hard_delete: /deleted").await;

    // Run 1: 1,000 keys.
    records.set((0..1000).map(|id| contact(id, "v1", "2026-11-01T00:00:00Z")).collect());
    let summary = runtime.run(&spec, at(1)).await.expect("run 1");
    assert!(summary.succeeded(), "run 1: {summary}");
    // Run 2: 100 updates, 50 inserts, 10 deletes, and 5 of the updates sent
    // again on a later page (pages of 40).
    let mut second: Vec<Value> = (0..100).map(|id| contact(id, "v2", "2026-11-02T00:00:00Z")).collect();
    second.extend((1000..1050).map(|id| contact(id, "v2", "2026-11-02T00:00:00Z")));
    second.extend((100..110).map(
        |id| json!({"id": id, "name": format!("gone {id}"), "updatedAt": "2026-11-02T00:00:00Z", "deleted": true}),
    ));
    second.extend((0..5).map(|id| contact(id, "v2", "2026-11-02T00:00:00Z")));
    assert_eq!(second.len(), 165);
    records.set(second);
    let summary = runtime.run(&spec, at(2)).await.expect("run 2");
    assert!(summary.succeeded(), "run 2: {summary}");
    // Run 3: 20 records older than the table's: they must not win.
    records.set((200..220).map(|id| contact(id, "stale", "2026-10-01T00:00:00Z")).collect());
    let summary = runtime.run(&spec, at(3)).await.expect("run 3");
    assert!(summary.succeeded(), "run 3: {summary}");

    let mut expected: Vec<(i64, String)> = (0..1000)
        .filter(|id| !(100..110).contains(id))
        .map(|id| (i64::from(id), format!("{} {id}", if id < 100 { "v2" } else { "v1" })))
        .chain((1000..1050).map(|id| (i64::from(id), format!("v2 {id}"))))
        .collect();
    expected.sort();
    assert_eq!(expected.len(), 1040);

    let tables = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    let table = &tables["contacts"];
    let pyiceberg_rows = table["rows"].as_array().expect("rows");
    assert_eq!(id_names(pyiceberg_rows), expected, "pyiceberg's rows");
    let operations: Vec<&str> = table["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| s["operation"].as_str().unwrap_or(""))
        .collect();
    // Run 3 changed nothing (its versions were older): its snapshot removes
    // and adds no file, so it is an `append` of nothing, kept so that a
    // redelivered completion finds the run committed.
    assert_eq!(operations, ["append", "overwrite", "append"], "one snapshot per run");
    let totals: Vec<&str> = table["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| s["total-records"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(totals, ["1000", "1040", "1040"], "the snapshots' summaries count the rows");

    // DuckDB reads the same rows, and each snapshot whole: before or after
    // a run, never half of one.
    let duckdb = read_tables(&duckdb_iceberg_python(), "TRIBUTARY_DUCKDB_ICEBERG_PYTHON", READ_DUCKDB, lake.path());
    let duck = &duckdb["contacts"];
    assert_eq!(duck["rows_as_of"], json!([1000, 1040, 1040]), "rows DuckDB reads as of each snapshot");
    assert_eq!(id_names(duck["rows"].as_array().expect("rows")), expected, "DuckDB's rows");

    // `tributary query`'s engine (a result page holds 1,000 rows: the
    // counts, then the rows around every change).
    let counts = query_lake(lake.path(), "SELECT count(*) AS n, count(DISTINCT id) AS keys FROM contacts").await;
    assert_eq!((&counts[0]["n"], &counts[0]["keys"]), (&json!(1040), &json!(1040)), "tributary query's counts");
    let rows = query_lake(lake.path(), "SELECT id, name FROM contacts WHERE id < 300 OR id >= 1000 ORDER BY id").await;
    let rows: Vec<Value> = rows.into_iter().map(Value::Object).collect();
    let around: Vec<(i64, String)> = expected.iter().filter(|(id, _)| *id < 300 || *id >= 1000).cloned().collect();
    assert_eq!(id_names(&rows), around, "tributary query's rows");
}

#[tokio::test]
async fn merge_values_in_variant_columns_still_key_rank_and_delete() {
    let Setup { records, spec, lake, runtime, .. } =
        setup("write: merge, primary_key: [/id], order_by: /updatedAt, hard_delete: /deleted").await;
    // Run 1: 30 dated keys, and a key sent as text (`id__string`).
    let mut first: Vec<Value> = (0..30).map(|id| contact(id, "v1", "2026-11-01T00:00:00Z")).collect();
    first.push(json!({"id": "A-1", "name": "v1 A-1", "updatedAt": "2026-11-01T00:00:00Z", "deleted": false}));
    records.set(first);
    let summary = runtime.run(&spec, at(1)).await.expect("run 1");
    assert!(summary.succeeded(), "run 1: {summary}");
    // Run 2: the vendor now sends other time formats (they land in
    // `updatedAt__int64` and `updatedAt__string`): epoch seconds of
    // 2026-12-01 for keys 0-4 (newer: they win), of 2023 for keys 5-7 and
    // `2025-06-01 10:00:00` for keys 8-9 (older: the table's rows stay),
    // `soon` for key 15 (no instant: unranked, the row fetched last wins);
    // a deletion time as text for keys 10-14 (`deletedAt__string`: they
    // go), and the text key again.
    let mut second: Vec<Value> = (0..10)
        .map(|id| {
            let version: Value = match id {
                0..5 => json!(1_796_083_200),
                5..8 => json!(1_700_000_000),
                _ => json!("2025-06-01 10:00:00"),
            };
            json!({"id": id, "name": format!("v2 {id}"), "updatedAt": version, "deleted": false})
        })
        .collect();
    second.extend((10..15).map(|id| {
        json!({"id": id, "name": format!("gone {id}"), "updatedAt": "2026-11-02T00:00:00Z", "deleted": "2026-11-02T00:00:00Z"})
    }));
    second.push(json!({"id": 15, "name": "v2 15", "updatedAt": "soon", "deleted": false}));
    second.push(json!({"id": "A-1", "name": "v2 A-1", "updatedAt": "2026-11-02T00:00:00Z", "deleted": false}));
    records.set(second);
    let summary = runtime.run(&spec, at(2)).await.expect("run 2");
    assert!(summary.succeeded(), "run 2: {summary}");
    // The one version read as no instant is said in the run's summary
    // (and its manifest and run-completed event), not only in the logs.
    // So is the key of another kind than the column's (`"A-1"` beside int ids).
    // And the run's deletions (keys 10-14) and its versions older than the
    // table's (keys 5-9), which "records persisted" counts as records.
    assert_eq!(summary.table_notes.len(), 3, "{summary}");
    assert!(
        summary.table_notes[0].contains("merge: 1 rows had a primary-key value of another kind than its column's"),
        "{summary}"
    );
    assert!(summary.table_notes[1].contains("1 versions had an order_by value that reads as no instant"), "{summary}");
    assert!(
        summary.table_notes[2].contains(
            "merge: 5 key(s) deleted by target.hard_delete, 5 version(s) left out as older than the table's row"
        ),
        "{summary}"
    );
    assert!(summary.to_string().contains("table notes"), "{summary}");

    let rows = query_lake(
        lake.path(),
        "SELECT coalesce(CAST(id AS VARCHAR), id__string) AS key, name FROM contacts ORDER BY name",
    )
    .await;
    let mut got: Vec<(String, String)> = rows
        .iter()
        .map(|r| (r["key"].as_str().unwrap_or("").to_string(), r["name"].as_str().unwrap_or("").to_string()))
        .collect();
    got.sort();
    let mut expected: Vec<(String, String)> = (0..30)
        .filter(|id| !(10..15).contains(id))
        .map(|id| (id.to_string(), format!("{} {id}", if id < 5 || id == 15 { "v2" } else { "v1" })))
        .chain([("A-1".to_string(), "v2 A-1".to_string())])
        .collect();
    expected.sort();
    assert_eq!(got, expected, "one row per key, the newer versions in, the older out, the deleted keys out");

    // Run 3: keys 10-14 marked deleted again (the table holds none of them
    // now), and key 20 twice in the run: the notes count what the merge
    // did to the table, not what the run asked (a trial read "2 key(s)
    // deleted" for a run that deleted nothing, and found a page's repeated
    // keys counted nowhere).
    let mut third: Vec<Value> = (10..15)
        .map(|id| json!({"id": id, "name": format!("gone {id}"), "updatedAt": "2026-11-03T00:00:00Z", "deleted": true}))
        .collect();
    third.push(contact(20, "v3a", "2026-11-03T00:00:00Z"));
    third.push(contact(20, "v3b", "2026-11-04T00:00:00Z"));
    records.set(third);
    let summary = runtime.run(&spec, at(3)).await.expect("run 3");
    assert!(summary.succeeded(), "run 3: {summary}");
    let notes = summary.table_notes.join("\n");
    assert!(
        notes.contains("merge: 0 key(s) deleted by target.hard_delete (5 more marked deleted held no row"),
        "{summary}"
    );
    assert!(notes.contains("merge: 1 record(s) left out as another version of a key the run holds again"), "{summary}");
    let rows = query_lake(lake.path(), "SELECT name FROM contacts WHERE id = 20").await;
    assert_eq!(rows.len(), 1, "one row for key 20");
    assert_eq!(rows[0]["name"], json!("v3b 20"), "its newer version");
}

#[tokio::test]
async fn a_first_run_whose_deletion_field_is_null_everywhere_merges_and_a_later_deletion_removes_its_key() {
    let Setup { records, spec, lake, runtime, .. } =
        setup("write: merge, primary_key: [/id], order_by: /updatedAt, hard_delete: /deletedAt").await;
    // Every live record has `deletedAt: null` (and `updatedAt` is absent
    // from the first run): no column yet for either; the merge goes on.
    records.set((0..5).map(|id| json!({"id": id, "name": format!("v1 {id}"), "deletedAt": null})).collect());
    let summary = runtime.run(&spec, at(1)).await.expect("run 1");
    assert!(summary.succeeded(), "run 1: {summary}");
    // Not silently: the run's table notes say neither ranked nor deleted
    // (a misspelt pointer would read the same), naming the fields there.
    let notes = summary.table_notes.join("\n");
    assert!(
        notes.contains("target.order_by /updatedAt") && notes.contains("target.hard_delete /deletedAt"),
        "{summary}"
    );
    assert!(notes.contains(r#""id", "name""#), "{notes}");
    records.set(vec![
        json!({"id": 1, "name": "gone 1", "updatedAt": "2026-11-02T00:00:00Z", "deletedAt": "2026-11-02T00:00:00Z"}),
        json!({"id": 2, "name": "v2 2", "updatedAt": "2026-11-02T00:00:00Z", "deletedAt": null}),
    ]);
    let summary = runtime.run(&spec, at(2)).await.expect("run 2");
    assert!(summary.succeeded(), "run 2: {summary}");
    let rows = query_lake(lake.path(), "SELECT id, name FROM contacts ORDER BY id").await;
    let rows: Vec<Value> = rows.into_iter().map(Value::Object).collect();
    let expected: Vec<(i64, String)> =
        vec![(0, "v1 0".into()), (2, "v2 2".into()), (3, "v1 3".into()), (4, "v1 4".into())];
    assert_eq!(id_names(&rows), expected);
}

/// A `--replace` of a merged run removes the run's rows left in the table
/// (a later run's newer version of a key stays) and merges the new fetch:
/// the summary says how many of each (a trial: it said nothing).
#[tokio::test]
async fn a_replace_of_a_merged_run_says_how_many_rows_it_swapped() {
    let Setup { records, spec, lake, runtime, .. } =
        setup("write: merge, primary_key: [/id], order_by: /updatedAt").await;
    records.set((0..3).map(|id| contact(id, "v1", "2026-11-01T00:00:00Z")).collect());
    let first = runtime.run(&spec, at(1)).await.expect("run 1");
    assert!(first.succeeded(), "run 1: {first}");
    records.set(vec![contact(1, "v2", "2026-11-02T00:00:00Z")]);
    assert!(runtime.run(&spec, at(2)).await.expect("run 2").succeeded());
    // Run 1 again: its rows of keys 0 and 2 are in the table (key 1's is
    // run 2's); the new fetch has four keys, key 1 older than run 2's.
    records.set((0..4).map(|id| contact(id, "v1b", "2026-11-01T12:00:00Z")).collect());
    let again = runtime.run_replacing(&spec, at(1), Some("again")).await.expect("the re-run");
    assert!(again.succeeded(), "{again}");
    let printed = again.to_string();
    let note = format!(
        "2 row(s) of run {} removed and this attempt's 4 merged by key in their place, in one snapshot",
        first.run_id
    );
    assert!(printed.contains(&note), "{printed}");
    let rows = query_lake(lake.path(), "SELECT id, name FROM contacts ORDER BY id").await;
    let rows: Vec<Value> = rows.into_iter().map(Value::Object).collect();
    let expected: Vec<(i64, String)> =
        vec![(0, "v1b 0".into()), (1, "v2 1".into()), (2, "v1b 2".into()), (3, "v1b 3".into())];
    assert_eq!(id_names(&rows), expected);
}

/// A trial finding: records without a key pile up in a merge table, one
/// more row each run. Added as they are by default (and counted in the
/// table notes, which say how to refuse them); with the key column
/// declared required they are quarantined with their reason instead, and
/// the table holds one row per key after every run.
#[tokio::test]
async fn records_without_a_key_are_noted_or_with_the_key_declared_required_quarantined() {
    let keyless = || {
        let mut records: Vec<Value> = (0..3).map(|id| contact(id, "v1", "2026-11-01T00:00:00Z")).collect();
        records.push(json!({"name": "no id", "updatedAt": "2026-11-01T00:00:00Z", "deleted": false}));
        records.push(json!({"id": null, "name": "null id", "updatedAt": "2026-11-01T00:00:00Z", "deleted": false}));
        records
    };
    let Setup { records, spec, runtime, .. } = setup("write: merge, primary_key: [/id], order_by: /updatedAt").await;
    records.set(keyless());
    let summary = runtime.run(&spec, at(1)).await.expect("run 1");
    let notes = summary.table_notes.join("\n");
    assert!(
        notes.contains("merge: 2 rows without a value in a primary-key column were added as they are")
            && notes.contains("required: true"),
        "{summary}"
    );

    let required = "write: merge, primary_key: [/id], order_by: /updatedAt, \
                    schema: [{name: id, type: int64, required: true}]";
    let Setup { records, spec, lake, runtime, .. } = setup(required).await;
    let mut quarantine_keys = Vec::new();
    for day in [1, 2] {
        records.set(keyless());
        let summary = runtime.run(&spec, at(day)).await.expect("run");
        assert!(summary.table_notes.is_empty(), "{summary}");
        assert_eq!((summary.records_persisted, summary.records_quarantined), (3, 2), "{summary}");
        quarantine_keys = summary.quarantine_keys;
    }
    let file = lake.path().join(quarantine_keys.first().expect("a quarantine file"));
    let quarantined = std::fs::read_to_string(file).expect("the quarantine file");
    assert!(quarantined.contains("field /id: expected int64 (required), found no value"), "{quarantined}");
    let rows = query_lake(lake.path(), "SELECT count(*) AS n, count(DISTINCT id) AS keys FROM contacts").await;
    assert_eq!((rows[0]["n"].as_i64(), rows[0]["keys"].as_i64()), (Some(3), Some(3)), "{rows:?}");
}

#[tokio::test]
async fn a_merge_pointer_spelt_as_a_field_but_for_case_or_underscores_fails_the_commit_naming_the_field() {
    let Setup { records, addr, spec, lake, runtime } =
        setup("write: merge, primary_key: [/id], order_by: /updated_at").await;
    records.set((0..3).map(|id| contact(id, "v1", "2026-11-02T00:00:00Z")).collect());
    let summary = runtime.run(&spec, at(1)).await.expect("run 1");
    assert!(!summary.succeeded(), "a misspelt order_by must not merge unranked: {summary}");
    let alerts = tributary::runtime::read_alerts(lake.path());
    let reason = alerts.iter().filter_map(|a| a.reason.clone()).collect::<Vec<_>>().join("\n");
    assert!(
        reason.contains("target.order_by: /updated_at") && reason.contains(r#"but records have "updatedAt""#),
        "the alert names the pointer and the field: {reason}"
    );
    let tables = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    assert!(tables.get("contacts").is_none_or(|t| t["rows"].as_array().is_none_or(Vec::is_empty)), "{tables}");
    // With the pointer fixed, a re-run of the time (`--replace`) fetches
    // the run again and commits it: the run had every page in and its
    // completion refused, and a plain re-run sent nothing (a trial).
    let fixed = self::spec(addr, "write: merge, primary_key: [/id], order_by: /updatedAt");
    let summary = runtime.run_replacing(&fixed, at(1), Some("fixed-order-by")).await.expect("the re-run");
    assert!(summary.succeeded(), "{summary}");
    let rows = query_lake(lake.path(), "SELECT id, name FROM contacts ORDER BY id").await;
    let rows: Vec<Value> = rows.into_iter().map(Value::Object).collect();
    assert_eq!(id_names(&rows), (0..3).map(|id| (id, format!("v1 {id}"))).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_replace_makes_each_run_the_whole_table() {
    let Setup { records, spec, lake, runtime, .. } = setup("write: replace").await;
    records.set((0..90).map(|id| contact(id, "v1", "2026-11-01T00:00:00Z")).collect());
    let summary = runtime.run(&spec, at(1)).await.expect("run 1");
    assert!(summary.succeeded(), "run 1: {summary}");
    records.set((50..120).map(|id| contact(id, "v2", "2026-11-02T00:00:00Z")).collect());
    let summary = runtime.run(&spec, at(2)).await.expect("run 2");
    assert!(summary.succeeded(), "run 2: {summary}");

    let expected: Vec<(i64, String)> = (50..120).map(|id| (id, format!("v2 {id}"))).collect();
    let tables = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    let table = &tables["contacts"];
    assert_eq!(id_names(table["rows"].as_array().expect("rows")), expected, "pyiceberg's rows");
    let operations: Vec<&str> = table["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| s["operation"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(operations, ["append", "overwrite"]);
    let deleted: Vec<&str> = table["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| s["deleted-records"].as_str().unwrap_or("0"))
        .collect();
    assert_eq!(deleted, ["0", "90"], "the replace removed the first run's rows");
    let duckdb = read_tables(&duckdb_iceberg_python(), "TRIBUTARY_DUCKDB_ICEBERG_PYTHON", READ_DUCKDB, lake.path());
    assert_eq!(duckdb["contacts"]["rows_as_of"], json!([90, 70]));
    assert_eq!(id_names(duckdb["contacts"]["rows"].as_array().expect("rows")), expected, "DuckDB's rows");
}

#[tokio::test]
async fn a_replace_run_completed_after_a_later_one_leaves_the_later_refresh_in_the_table() {
    let Setup { records, spec, lake, runtime, .. } = setup("write: replace").await;
    records.set((0..3).map(|id| contact(id, "day2", "2026-11-02T00:00:00Z")).collect());
    assert!(runtime.run(&spec, at(2)).await.expect("run 2").succeeded());
    // The run of day 1 completes only now (recovered from the DLQ, or run
    // again for its scheduled time): a full refresh older than the one in
    // the table must not bring back its rows.
    records.set((0..5).map(|id| contact(id, "day1", "2026-11-01T00:00:00Z")).collect());
    let summary = runtime.run(&spec, at(1)).await.expect("run 1");
    assert!(summary.succeeded(), "{summary}");
    let notes = summary.table_notes.join("\n");
    assert!(
        notes.contains("the table holds the refresh of 20261102T060000Z") && notes.contains("did not"),
        "{summary}"
    );
    let expected: Vec<(i64, String)> = (0..3).map(|id| (id, format!("day2 {id}"))).collect();
    let rows = query_lake(lake.path(), "SELECT id, name FROM contacts ORDER BY id").await;
    let rows: Vec<Value> = rows.into_iter().map(Value::Object).collect();
    assert_eq!(id_names(&rows), expected, "the later refresh stays");
    let tables = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    assert_eq!(id_names(tables["contacts"]["rows"].as_array().expect("rows")), expected, "pyiceberg's rows");
    // A run later than the table's replaces it, as every run does.
    records.set((7..9).map(|id| contact(id, "day3", "2026-11-03T00:00:00Z")).collect());
    assert!(runtime.run(&spec, at(3)).await.expect("run 3").succeeded());
    let rows = query_lake(lake.path(), "SELECT id, name FROM contacts ORDER BY id").await;
    let rows: Vec<Value> = rows.into_iter().map(Value::Object).collect();
    assert_eq!(id_names(&rows), vec![(7, "day3 7".to_string()), (8, "day3 8".to_string())]);
    // A replay commits each run again: the runs the table no longer holds
    // say they gained nothing, and the table is the latest refresh still.
    let summary = tributary::replay::replay_lake(lake.path(), "contacts", Default::default()).await.expect("replay");
    assert!(summary.succeeded(), "{summary}");
    let noted = |what: &str| -> Vec<&str> {
        summary.table_notes.iter().filter(|(_, note)| note.contains(what)).map(|(run, _)| run.as_str()).collect()
    };
    assert_eq!(noted("the table holds the refresh of"), ["20261101T060000Z", "20261102T060000Z"], "{summary}");
    // The run the table holds is swapped for its re-derived rows, and says so.
    assert_eq!(noted("2 row(s) of run 20261103T060000Z replaced by this attempt's 2"), ["20261103T060000Z"]);
    assert!(
        summary.to_string().contains("note: replace: the table holds the refresh of 20261103T060000Z"),
        "{summary}"
    );
    let rows = query_lake(lake.path(), "SELECT id, name FROM contacts ORDER BY id").await;
    let rows: Vec<Value> = rows.into_iter().map(Value::Object).collect();
    assert_eq!(id_names(&rows), vec![(7, "day3 7".to_string()), (8, "day3 8".to_string())]);
}

#[tokio::test]
async fn a_replay_swaps_a_run_s_rows_in_one_snapshot_and_every_value_stays() {
    let Setup { records, spec, lake, runtime, .. } = setup("write: append").await;
    for (day, version) in [(1, "v1"), (2, "v2")] {
        records.set((0..90).map(|id| contact(id, version, "2026-11-01T00:00:00Z")).collect());
        let summary = runtime.run(&spec, at(day)).await.expect("run");
        assert!(summary.succeeded(), "{summary}");
    }
    let before = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    let summary = tributary::replay::replay_lake(lake.path(), "contacts", Default::default()).await.expect("replay");
    assert!(summary.succeeded(), "{summary}");
    assert_eq!(summary.snapshots.len(), 2, "both runs committed again: {summary}");

    let after = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    assert_eq!(contact_rows(&after).len(), 180);
    assert_eq!(contact_rows(&after), contact_rows(&before), "every value as before the replay");
    let operations: Vec<&str> = after["contacts"]["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| s["operation"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(operations, ["append", "append", "overwrite", "overwrite"], "one snapshot per replayed run");
    let duckdb = read_tables(&duckdb_iceberg_python(), "TRIBUTARY_DUCKDB_ICEBERG_PYTHON", READ_DUCKDB, lake.path());
    assert_eq!(duckdb["contacts"]["rows_as_of"], json!([90, 180, 180, 180]), "each snapshot whole");
}

/// A trial: the vendor announced 6 customers and answered its second page
/// empty; the run was truncated and its replace still swapped the table,
/// which lost half its rows. A replace run that is not a whole copy of its
/// source now commits nothing: the table is as it was, and the run fails
/// to the DLQ with an alert saying why and how to run it again.
#[tokio::test]
async fn a_replace_run_holding_fewer_records_than_announced_leaves_the_table() {
    use test_support::vendor::serve_pages_capped;
    let records = PagedRecords::default();
    // The vendor serves at most 20 records a page, whatever the 40 asked.
    let addr = serve_pages_capped(records.clone(), 20).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let spec = spec(addr, "write: replace");
    records.set((0..20).map(|id| contact(id, "day1", "2026-11-01T00:00:00Z")).collect());
    assert!(runtime.run(&spec, at(1)).await.expect("day 1").succeeded(), "20 records fit the cap");
    // Day 2: 100 announced, 3 pages of 40 asked, 60 served.
    records.set((0..100).map(|id| contact(id, "day2", "2026-11-02T00:00:00Z")).collect());
    let summary = runtime.run(&spec, at(2)).await.expect("day 2");
    assert!(!summary.succeeded(), "a partial replace fails: {summary}");
    let alerts = tributary::runtime::read_alerts(lake.path());
    let reason = alerts.iter().filter_map(|a| a.reason.clone()).collect::<Vec<_>>().join("\n");
    assert!(
        reason.contains("is not a whole copy of the source")
            && reason.contains("the vendor announced 100 records")
            && reason.contains("nothing was committed")
            && reason.contains("--replace"),
        "the alert says why and how to recover: {reason}"
    );
    let expected: Vec<(i64, String)> = (0..20).map(|id| (id, format!("day1 {id}"))).collect();
    // `status` says to re-run it with --replace, not to redrive it (a
    // redrive fails the same way) nor to run it plainly (a trial).
    let store = adapters::local::DirStore::new(lake.path());
    let runs = tributary::status::recent_runs(&store, None, 10).await.expect("status");
    let hints = tributary::status::recovery_hints(&runs, &tributary::status::Place::Lake("lake".into()));
    assert!(
        hints.contains("re-run:   tributary run SPEC --scheduled-at 2026-11-02T06:00:00Z --replace --lake lake")
            && !hints.contains("dlq redrive"),
        "{hints}"
    );
    // A plain re-run sends nothing (every page is in) and says so.
    let plain = runtime.run(&spec, at(2)).await.expect("day 2 again, without --replace");
    assert!(!plain.succeeded(), "{plain}");
    assert!(
        plain.to_string().contains("holds every page but completing it failed")
            && plain.to_string().contains("is not a whole copy of the source")
            && plain.to_string().contains("--scheduled-at 2026-11-02T06:00:00Z --replace"),
        "{plain}"
    );
    let rows = query_lake(lake.path(), "SELECT id, name FROM contacts ORDER BY id").await;
    let rows: Vec<Value> = rows.into_iter().map(Value::Object).collect();
    assert_eq!(id_names(&rows), expected, "the table as it was");
    let tables = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    assert_eq!(id_names(tables["contacts"]["rows"].as_array().expect("rows")), expected, "pyiceberg's rows");
    // Once the vendor serves every record, a re-run of the time swaps it in.
    records.set((0..15).map(|id| contact(id, "day2", "2026-11-02T00:00:00Z")).collect());
    let summary = runtime.run_replacing(&spec, at(2), Some("vendor-fixed")).await.expect("day 2 again");
    assert!(summary.succeeded(), "{summary}");
    let rows = query_lake(lake.path(), "SELECT id, name FROM contacts ORDER BY id").await;
    let rows: Vec<Value> = rows.into_iter().map(Value::Object).collect();
    assert_eq!(id_names(&rows), (0..15).map(|id| (id, format!("day2 {id}"))).collect::<Vec<_>>());
}

/// A trial: the vendor sent a customer's id as `"4"` after `4`; the table
/// then had two current rows for it, and only a schema-change alert said
/// anything. The run's table notes now say that a key arrived as another
/// kind and what that does.
#[tokio::test]
async fn a_key_sent_as_another_kind_is_a_table_note() {
    let Setup { records, spec, lake, runtime, .. } = setup("write: merge, primary_key: [/id]").await;
    records.set((0..3).map(|id| contact(id, "v1", "2026-11-01T00:00:00Z")).collect());
    assert!(runtime.run(&spec, at(1)).await.expect("day 1").succeeded());
    records.set(vec![json!({"id": "1", "name": "v2 1", "updatedAt": "2026-11-02T00:00:00Z", "deleted": false})]);
    let summary = runtime.run(&spec, at(2)).await.expect("day 2");
    assert!(summary.succeeded(), "{summary}");
    let notes = summary.table_notes.join("\n");
    assert!(
        notes.contains("merge: 1 rows had a primary-key value of another kind than its column's")
            && notes.contains("a key the vendor sent both ways has a current row of each"),
        "{summary}"
    );
    let rows = query_lake(lake.path(), "SELECT count(*) AS n FROM contacts").await;
    assert_eq!(rows[0]["n"], json!(4), "the documented rule: 1 and \"1\" are two keys");
}

/// A trial: a product's `name` sent as an object on day 2 was announced
/// as `added variant column name__json`, and no reader of the Iceberg
/// table saw it: the table had no such column and the value was lost.
#[tokio::test]
async fn a_value_that_becomes_an_object_reaches_the_table_in_its_variant_column() {
    for write in ["write: replace", "write: append", "write: merge, primary_key: [/id]"] {
        let Setup { records, spec, lake, runtime, .. } = setup(write).await;
        records.set((0..3).map(|id| contact(id, "v1", "2026-11-01T00:00:00Z")).collect());
        assert!(runtime.run(&spec, at(1)).await.expect("day 1").succeeded());
        let mut day2: Vec<Value> = (0..3).map(|id| contact(id, "v2", "2026-11-02T00:00:00Z")).collect();
        day2[2]["name"] = json!({"en": "Two", "fr": "Deux"});
        records.set(day2);
        let summary = runtime.run(&spec, at(2)).await.expect("day 2");
        assert!(summary.succeeded(), "{write}: {summary}");
        let rows = query_lake(lake.path(), "SELECT id, name, name__json FROM contacts WHERE id = 2").await;
        let json_text = rows.iter().find_map(|r| r.get("name__json").and_then(Value::as_str).map(str::to_string));
        let value: Option<Value> = json_text.as_deref().map(|t| serde_json::from_str(t).expect("JSON text"));
        assert_eq!(value, Some(json!({"en": "Two", "fr": "Deux"})), "{write}: {rows:?}");
        let tables = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
        let row = tables["contacts"]["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .find(|r| r["id"] == json!(2) && !r["name__json"].is_null())
            .cloned();
        assert!(row.is_some(), "{write}: pyiceberg reads the variant column: {tables}");
    }
}

#[tokio::test]
async fn a_re_run_with_replace_of_a_replace_run_that_fetched_only_empty_records_leaves_the_table() {
    let Setup { records, spec, lake, runtime, .. } = setup("write: replace").await;
    records.set((0..5).map(|id| contact(id, "v1", "2026-11-01T00:00:00Z")).collect());
    assert!(runtime.run(&spec, at(1)).await.expect("run 1").succeeded());
    // The vendor in trouble answers records with no value: a re-run of
    // the run must not swap the table's rows for rows of nothing.
    records.set(vec![json!({}), json!({"id": null}), json!({})]);
    let summary = runtime.run_replacing(&spec, at(1), Some("fix")).await.expect("the re-run");
    assert!(!summary.succeeded(), "refused: {summary}");
    let rows = query_lake(lake.path(), "SELECT id, name FROM contacts ORDER BY id").await;
    let rows: Vec<Value> = rows.into_iter().map(Value::Object).collect();
    let expected: Vec<(i64, String)> = (0..5).map(|id| (id, format!("v1 {id}"))).collect();
    assert_eq!(id_names(&rows), expected, "the table as it was");
}

#[tokio::test]
async fn a_re_run_with_replace_of_a_merge_run_swaps_its_rows_for_the_new_fetch() {
    let Setup { records, spec, lake, runtime, .. } =
        setup("write: merge, primary_key: [/id], order_by: /updatedAt").await;
    // Day 1 was bad: a wrong name and a key that should not exist, with a
    // version greater than the corrected one.
    records.set(vec![
        json!({"id": 1, "name": "bad 1", "updatedAt": "2026-11-01T10:00:00Z"}),
        json!({"id": 2, "name": "bad 2", "updatedAt": "2026-11-01T10:00:00Z"}),
    ]);
    assert!(runtime.run(&spec, at(1)).await.expect("day 1").succeeded());
    // Day 2 adds key 3.
    records.set(vec![json!({"id": 3, "name": "v1 3", "updatedAt": "2026-11-02T00:00:00Z"})]);
    assert!(runtime.run(&spec, at(2)).await.expect("day 2").succeeded());
    // The vendor corrects day 1 (key 1 only, an earlier version); the
    // re-run's rows replace day 1's, whatever their versions.
    records.set(vec![json!({"id": 1, "name": "good 1", "updatedAt": "2026-11-01T09:00:00Z"})]);
    let summary = runtime.run_replacing(&spec, at(1), Some("fix-day-1")).await.expect("day 1 re-run");
    assert!(summary.succeeded(), "the re-run: {summary}");
    // Every page of a re-run is fetched by it: none "from earlier attempts".
    assert_eq!((summary.pages, summary.pages_before), (1, 0), "{summary}");
    let rows = query_lake(lake.path(), "SELECT id, name FROM contacts ORDER BY id").await;
    let rows: Vec<Value> = rows.into_iter().map(Value::Object).collect();
    assert_eq!(id_names(&rows), vec![(1, "good 1".to_string()), (3, "v1 3".to_string())]);
    // A replay of the dataset re-derives the same table from the raw pages.
    tributary::replay::replay_lake(lake.path(), "contacts", Default::default()).await.expect("replay");
    let rows = query_lake(lake.path(), "SELECT id, name FROM contacts ORDER BY id").await;
    let rows: Vec<Value> = rows.into_iter().map(Value::Object).collect();
    assert_eq!(id_names(&rows), vec![(1, "good 1".to_string()), (3, "v1 3".to_string())], "after the replay");
}

#[tokio::test]
async fn a_completed_run_re_run_with_replace_swaps_its_rows_in_one_snapshot() {
    let Setup { records, addr, spec, lake, runtime } = setup("write: append").await;
    // Day 1 fetched 90 records (3 pages of 40), day 2 30 others.
    records.set((0..90).map(|id| contact(id, "v1", "2026-11-01T00:00:00Z")).collect());
    assert!(runtime.run(&spec, at(1)).await.expect("day 1").succeeded());
    records.set((100..130).map(|id| contact(id, "v1", "2026-11-02T00:00:00Z")).collect());
    assert!(runtime.run(&spec, at(2)).await.expect("day 2").succeeded());
    let raw_pages = |day: &str| {
        let folder = lake.path().join(format!("raw/contacts/dt=2026-11-{day}"));
        let mut names: Vec<String> = std::fs::read_dir(folder)
            .expect("raw folder")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(raw_pages("01").len(), 3, "day 1's raw pages");

    // Day 1 was bad: the vendor now serves 60 corrected records (2 pages).
    records.set((0..60).map(|id| contact(id, "v2", "2026-11-01T00:00:00Z")).collect());
    let plain = runtime.run(&spec, at(1)).await.expect("day 1 again, without --replace");
    // Without --replace the completed run is left as it was (its snapshots
    // are counted below: the plain run adds none).
    assert_eq!(plain.records_persisted, 90, "the completed run is left as it was: {plain}");
    // ... and its summary says its pages were not fetched again, and how
    // to (a trial read "records persisted" as a new fetch).
    assert!(
        plain.to_string().contains("this run was complete before this attempt, so its pages were not fetched again")
            && plain.to_string().contains("--scheduled-at 2026-11-01T06:00:00Z --replace"),
        "{plain}"
    );
    let summary = runtime.run_replacing(&spec, at(1), Some("fix-day-1")).await.expect("day 1 re-run");
    assert!(summary.succeeded(), "the re-run: {summary}");
    assert_eq!(summary.records_persisted, 60, "{summary}");
    assert_eq!(summary.next_step, None, "a fetch has no next step: {summary}");

    let mut expected: Vec<(i64, String)> = (0..60).map(|id| (id, format!("v2 {id}"))).collect();
    expected.extend((100..130).map(|id| (id, format!("v1 {id}"))));
    let tables = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    let table = &tables["contacts"];
    assert_eq!(id_names(table["rows"].as_array().expect("rows")), expected, "pyiceberg's rows");
    let snapshots = table["snapshots"].as_array().expect("snapshots");
    let operations: Vec<&str> = snapshots.iter().map(|s| s["operation"].as_str().unwrap_or("")).collect();
    assert_eq!(operations, ["append", "append", "overwrite"], "the re-run is one overwrite snapshot");
    let last = &snapshots[2];
    assert_eq!(
        (&last["tributary.run-id"], &last["tributary.rerun"], &last["deleted-records"], &last["added-records"]),
        (&json!("20261101T060000Z"), &json!("fix-day-1"), &json!("90"), &json!("60")),
        "the re-run's snapshot names the run and the token, and swaps 90 rows for 60"
    );
    let duckdb = read_tables(&duckdb_iceberg_python(), "TRIBUTARY_DUCKDB_ICEBERG_PYTHON", READ_DUCKDB, lake.path());
    assert_eq!(id_names(duckdb["contacts"]["rows"].as_array().expect("rows")), expected, "DuckDB's rows");
    assert_eq!(duckdb["contacts"]["rows_as_of"], json!([90, 120, 90]), "DuckDB as of each snapshot");
    // The old fetch's third raw page is gone: a replay re-derives the new fetch.
    assert_eq!(raw_pages("01").len(), 2, "day 1's raw pages after the re-run: {:?}", raw_pages("01"));

    // The same trigger delivered again starts nothing and commits nothing.
    let again = runtime.run_replacing(&spec, at(1), Some("fix-day-1")).await.expect("the same re-run again");
    assert_eq!((again.requests, again.dead_letters()), (0, 0), "{again}");
    let tables = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    assert_eq!(tables["contacts"]["snapshots"].as_array().expect("snapshots").len(), 3, "no new snapshot");

    // A Parquet dataset cannot be re-run in place.
    let parquet = PipelineSpec::from_yaml(&format!(
        "version: 1\npipeline: flat\nstrategy: {{kind: paged, page_size: 40, total_pointer: /meta/total}}\n\
         request: {{url: 'http://{addr}/records', records_pointer: /results, allow: {{loopback: true}}}}\n\
         target: {{dataset: flat}}\n"
    ))
    .expect("valid spec");
    let err = runtime.run_replacing(&parquet, at(1), Some("t")).await.expect_err("a Parquet re-run is refused");
    let text = err.to_string();
    assert!(text.contains("replace") && text.contains("table_format: parquet"), "{text}");
}

/// A trial finding: once `compact --expire-older-than` had expired the
/// run's snapshot, a re-run with `--replace` appended its rows beside the
/// old ones (25 rows for 5). The run's rows are found by their run id.
#[tokio::test]
async fn a_re_run_after_its_snapshot_expired_still_replaces_its_rows() {
    let Setup { records, spec, lake, runtime, .. } = setup("write: append").await;
    records.set((0..90).map(|id| contact(id, "v1", "2026-11-01T00:00:00Z")).collect());
    assert!(runtime.run(&spec, at(1)).await.expect("day 1").succeeded());
    records.set((100..130).map(|id| contact(id, "v1", "2026-11-02T00:00:00Z")).collect());
    assert!(runtime.run(&spec, at(2)).await.expect("day 2").succeeded());
    let root = std::fs::canonicalize(lake.path()).expect("lake");
    let catalog = tributary_iceberg::local_catalog(&root).await.expect("catalog");
    let ident = tributary_iceberg::table_ident("contacts");
    let expired = tributary_iceberg::compact::expire_snapshots(&catalog, &ident, chrono::Duration::zero(), 1)
        .await
        .expect("expire");
    assert!(expired.failed.is_empty(), "{expired}");

    records.set((0..60).map(|id| contact(id, "v2", "2026-11-01T00:00:00Z")).collect());
    let summary = runtime.run_replacing(&spec, at(1), Some("fix-day-1")).await.expect("day 1 re-run");
    assert!(summary.succeeded(), "{summary}");
    let mut expected: Vec<(i64, String)> = (0..60).map(|id| (id, format!("v2 {id}"))).collect();
    expected.extend((100..130).map(|id| (id, format!("v1 {id}"))));
    let tables = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    assert_eq!(id_names(tables["contacts"]["rows"].as_array().expect("rows")), expected, "pyiceberg's rows");
    let snapshots = tables["contacts"]["snapshots"].as_array().expect("snapshots");
    let last = snapshots.last().expect("a snapshot");
    assert_eq!((&last["operation"], &last["deleted-records"]), (&json!("overwrite"), &json!("90")), "{last}");
}

#[tokio::test]
async fn a_replay_through_the_persist_queue_swaps_each_run_in_one_snapshot() {
    // `tributary replay --stack` sends the raw pages to Persist's queue;
    // here the local runtime's queue and Persist stand in for the stack's.
    let Setup { records, spec, lake, runtime, .. } = setup("write: append").await;
    for (day, version) in [(1, "v1"), (2, "v2")] {
        records.set((0..90).map(|id| contact(id, version, "2026-11-01T00:00:00Z")).collect());
        assert!(runtime.run(&spec, at(day)).await.expect("run").succeeded());
    }
    let before = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    let store = runtime.store().clone();
    let summary = tributary::replay::resend(
        store.as_ref(),
        runtime.broker().as_ref(),
        tributary_core::topology::PERSIST_QUEUE,
        "contacts",
        Default::default(),
    )
    .await
    .expect("resend");
    assert_eq!((summary.pages_sent, summary.runs_reopened.len()), (6, 2), "{summary}");
    assert!(summary.failures.is_empty(), "{summary}");
    runtime.drain().await;

    let after = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    assert_eq!(contact_rows(&after).len(), 180);
    assert_eq!(contact_rows(&after), contact_rows(&before), "every value as before the replay");
    let snapshots = after["contacts"]["snapshots"].as_array().expect("snapshots");
    let operations: Vec<&str> = snapshots.iter().map(|s| s["operation"].as_str().unwrap_or("")).collect();
    assert_eq!(operations, ["append", "append", "overwrite", "overwrite"], "one snapshot per replayed run");
    assert!(
        snapshots[2..].iter().all(|s| s["tributary.rerun"].as_str().is_some_and(|t| t.starts_with("replay-"))),
        "each replayed run's snapshot names the replay: {snapshots:?}"
    );
    for day in ["20261101T060000Z", "20261102T060000Z"] {
        let run = contracts::RunId::new(day).expect("run id");
        let success = tributary_core::keys::success_key("contacts", &run);
        assert!(store.get(&success).await.is_ok(), "run {day} complete again");
    }
}

/// The instant a reader's text stands for, in microseconds since the epoch
/// (RFC 3339, with `T` or a space before the time).
fn instant(text: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(&text.replacen(' ', "T", 1))
        .unwrap_or_else(|err| panic!("{text:?} is not a time: {err}"))
        .timestamp_micros()
}

#[tokio::test]
async fn timestamps_read_as_the_same_instants_in_every_reader_offsets_and_other_text_as_sent() {
    let Setup { records, spec, lake, runtime, .. } = setup("write: append").await;
    // UTC timestamps (3), an offset (a timestamp too: its instant in the
    // column, its text in ts__text), a date alone, garbage and a null.
    let sent = [
        (1, json!("2026-11-29T06:00:00Z")),
        (2, json!("2026-11-29T06:00:00.123456Z")),
        (3, json!("2026-11-29T08:00:00+02:00")),
        (4, json!("2026-11-29")),
        (5, json!("soon")),
        (6, Value::Null),
        (7, json!("2026-12-01T00:00:00Z")),
    ];
    records.set(sent.iter().map(|(id, ts)| json!({"id": id, "name": format!("n{id}"), "ts": ts})).collect());
    assert!(runtime.run(&spec, at(1)).await.expect("run").succeeded());

    let typed = |id: i64| match id {
        1..=3 | 7 => Some(instant(sent[id as usize - 1].1.as_str().expect("text"))),
        _ => None,
    };
    let text = |id: i64| match id {
        4 | 5 => sent[id as usize - 1].1.as_str().map(str::to_string),
        _ => None,
    };
    let check = |reader: &str, rows: Vec<Value>| {
        assert_eq!(rows.len(), sent.len(), "{reader}");
        for row in rows {
            let id = row["id"].as_i64().expect("id");
            let ts = row["ts"].as_str().map(instant);
            assert_eq!(ts, typed(id), "{reader}: id {id}: the instant ({row})");
            assert_eq!(row["ts__string"].as_str().map(str::to_string), text(id), "{reader}: id {id}: the text ({row})");
            // The offset's text as sent, beside its instant.
            let zoned = (id == 3).then(|| "2026-11-29T08:00:00+02:00".to_string());
            assert_eq!(row["ts__text"].as_str().map(str::to_string), zoned, "{reader}: id {id}: __text ({row})");
        }
    };
    let tables = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    let rows = tables["contacts"]["rows"].as_array().expect("rows").clone();
    assert!(
        rows.iter().any(|r| r["ts"] == "2026-11-29T06:00:00.123456+00:00"),
        "pyiceberg reads a datetime (isoformat), not the text: {rows:?}"
    );
    check("pyiceberg", rows);
    let duckdb = read_tables(&duckdb_iceberg_python(), "TRIBUTARY_DUCKDB_ICEBERG_PYTHON", READ_DUCKDB, lake.path());
    let duck = &duckdb["contacts"];
    assert_eq!(
        (&duck["types"]["ts"], &duck["types"]["ts__string"]),
        (&json!("TIMESTAMP WITH TIME ZONE"), &json!("VARCHAR")),
        "DuckDB's types"
    );
    check("DuckDB", duck["rows"].as_array().expect("rows").clone());
    let rows = query_lake(lake.path(), "SELECT id, ts, ts__string, ts__text FROM contacts ORDER BY id").await;
    check("tributary query", rows.into_iter().map(Value::Object).collect());
    let day =
        query_lake(lake.path(), "SELECT count(*) AS n FROM contacts WHERE ts >= TIMESTAMP '2026-11-30T00:00:00Z'")
            .await;
    assert_eq!(day[0]["n"], json!(1), "tributary query compares the column as instants");
}

/// pyiceberg's plan for `ts >= 2026-11-02`: the files it would read and
/// the rows they hold, and the rows it reads.
const PRUNED: &str = r#"
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import GreaterThanOrEqual
lake = sys.argv[1]
catalog = SqlCatalog("tributary", uri=f"sqlite:///{lake}/_iceberg/catalog.sqlite",
                     warehouse=f"file://{lake}/_iceberg/warehouse")
table = catalog.load_table(("tributary", "contacts"))
scan = table.scan(row_filter=GreaterThanOrEqual("ts", "2026-11-02T00:00:00+00:00"))
tasks = list(scan.plan_files())
print(json.dumps({"contacts": {
    "all_files": len(list(table.scan().plan_files())),
    "files": len(tasks),
    "file_rows": sum(t.file.record_count for t in tasks),
    "rows": scan.to_arrow().num_rows,
}}))
"#;

#[tokio::test]
async fn a_day_partitioned_table_reads_whole_everywhere_and_prunes_by_its_timestamp_column() {
    let Setup { records, spec, lake, runtime, .. } = setup("partition_by: ['day(/ts)']").await;
    // 30 records over three days (10 a day), and 2 without a timestamp.
    let mut sent: Vec<Value> = (0..30)
        .map(|i| json!({"id": i, "name": format!("n{i}"), "ts": format!("2026-11-0{}T{:02}:00:00Z", 1 + i / 10, i % 10)}))
        .collect();
    sent.push(json!({"id": 30, "name": "n30", "ts": null}));
    sent.push(json!({"id": 31, "name": "n31", "ts": "not a time"}));
    records.set(sent);
    assert!(runtime.run(&spec, at(3)).await.expect("run").succeeded());

    let tables = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    assert_eq!(tables["contacts"]["partition"], json!(["dt:identity", "ts_day:day"]), "pyiceberg's spec");
    assert_eq!(tables["contacts"]["rows"].as_array().expect("rows").len(), 32, "pyiceberg reads every row");
    let pruned = read_tables(&python(), "TRIBUTARY_PYTHON", PRUNED, lake.path());
    assert_eq!(pruned["contacts"]["all_files"], json!(4), "one file per day and one for no day: {pruned}");
    assert_eq!(
        (&pruned["contacts"]["files"], &pruned["contacts"]["file_rows"], &pruned["contacts"]["rows"]),
        (&json!(2), &json!(20), &json!(20)),
        "the filter on ts reads the two days' files only: {pruned}"
    );
    let duckdb = read_tables(&duckdb_iceberg_python(), "TRIBUTARY_DUCKDB_ICEBERG_PYTHON", READ_DUCKDB, lake.path());
    assert_eq!(duckdb["contacts"]["rows"].as_array().expect("rows").len(), 32, "DuckDB reads every row");
    let later =
        query_lake(lake.path(), "SELECT count(*) AS n FROM contacts WHERE ts >= TIMESTAMP '2026-11-02T00:00:00Z'")
            .await;
    assert_eq!(later[0]["n"], json!(20), "tributary query");
    let all = query_lake(lake.path(), "SELECT count(*) AS n FROM contacts").await;
    assert_eq!(all[0]["n"], json!(32));
}

#[tokio::test]
async fn a_transform_of_a_text_column_fails_the_run_loudly_and_the_summary_says_it_did_not_complete() {
    let Setup { records, spec, runtime, .. } = setup("partition_by: ['day(/name)']").await;
    records.set((0..5).map(|i| json!({"id": i, "name": format!("n{i}")})).collect());
    let summary = runtime.run(&spec, at(1)).await.expect("run");
    assert!(!summary.succeeded() && !summary.completed, "{summary}");
    assert_eq!(summary.records_persisted, 5, "staged, not in a table");
    let text = summary.to_string();
    assert!(text.contains("records persisted    5  (the run did not complete"), "{text}");
    let alerts: Vec<&str> = summary.alerts.iter().map(|a| a.summary.as_str()).collect();
    assert!(
        summary.dead_letters() >= 1 && summary.alerts.iter().any(|a| format!("{a:?}").contains("target.partition_by")),
        "a dead letter and an alert naming target.partition_by: {alerts:?} {summary:?}"
    );
}
