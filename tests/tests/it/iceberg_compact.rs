//! Compaction and snapshot expiry of an Iceberg dataset (`tributary
//! compact`, issue 26): 30 small runs of the local runtime over two `dt`
//! partitions, then one `replace` snapshot leaves one data file per
//! partition with the same rows, value for value, in pyiceberg and DuckDB;
//! expiry then deletes the old files from disk and the table still reads
//! whole in both.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{TimeZone, Utc};
use contracts::spec::PipelineSpec;
use serde_json::{Value, json};
use test_support::vendor::{PagedRecords, serve_pages};
use tributary::runtime::{LocalOptions, LocalRuntime};
use tributary_e2e::readers::{duckdb_iceberg_python, python};
use tributary_iceberg::compact::{COMPACTION_PROPERTY, compact_table, expire_snapshots};

use super::iceberg::{READ_DUCKDB, read_tables};

/// The `events` table as pyiceberg reads it: each snapshot's operation and
/// summary (oldest first), the live data files of the current snapshot
/// (`inspect.files()`: path, `dt`, records) and the rows.
const READ_FILES: &str = r#"
from pyiceberg.catalog.sql import SqlCatalog
lake = sys.argv[1]
catalog = SqlCatalog("tributary", uri=f"sqlite:///{lake}/_iceberg/catalog.sqlite",
                     warehouse=f"file://{lake}/_iceberg/warehouse")
table = catalog.load_table(("tributary", "events"))
snapshots = sorted(table.snapshots(), key=lambda s: s.sequence_number)
files = table.inspect.files().to_pylist()
print(json.dumps({
    "snapshots": [dict(s.summary.additional_properties, operation=s.summary.operation.value) for s in snapshots],
    "files": [{"path": f["file_path"], "dt": plain(f["partition"]["dt"]), "records": f["record_count"]}
              for f in files],
    "rows": [plain(row) for row in table.scan().to_arrow().to_pylist()],
}))
"#;

const RUNS: u32 = 30;
const PER_RUN: u32 = 20;

fn spec(addr: std::net::SocketAddr) -> PipelineSpec {
    let text = format!(
        "version: 1\npipeline: events\nstrategy: {{kind: paged, page_size: 40, total_pointer: /meta/total}}\n\
         request: {{url: 'http://{addr}/records', records_pointer: /results, allow: {{loopback: true}}}}\n\
         target: {{dataset: events, table_format: iceberg}}\n"
    );
    PipelineSpec::from_yaml(&text).expect("valid spec")
}

/// A reader's rows sorted by `id`: every row must have one, once.
fn by_id(rows: &Value) -> Vec<Value> {
    let mut rows = rows.as_array().expect("rows").clone();
    rows.sort_by_key(|r| r["id"].as_i64().expect("id"));
    rows
}

/// Live data files per `dt`.
fn files_per_day(files: &Value) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for file in files.as_array().expect("files") {
        *out.entry(file["dt"].as_str().expect("dt").to_string()).or_default() += 1;
    }
    out
}

fn local_path(location: &str) -> PathBuf {
    PathBuf::from(location.strip_prefix("file://").unwrap_or(location))
}

fn read_pyiceberg(lake: &Path) -> Value {
    read_tables(&python(), "TRIBUTARY_PYTHON", READ_FILES, lake)
}

fn read_duckdb(lake: &Path) -> Value {
    read_tables(&duckdb_iceberg_python(), "TRIBUTARY_DUCKDB_ICEBERG_PYTHON", READ_DUCKDB, lake)["events"].clone()
}

#[tokio::test]
async fn thirty_small_runs_compact_to_one_file_per_partition_and_expiry_deletes_the_old_files() {
    let records = PagedRecords::default();
    let addr = serve_pages(records.clone()).await;
    let spec = spec(addr);
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    // 30 runs of 20 records, 15 on each of two days: 15 files per `dt`.
    for run in 0..RUNS {
        let day = 1 + run / 15;
        let at = Utc.with_ymd_and_hms(2026, 11, day, run % 15, 0, 0).single().expect("a valid time");
        records.set(
            (0..PER_RUN)
                .map(|i| {
                    let id = run * 1000 + i;
                    json!({"id": id, "name": format!("event {id}"), "score": f64::from(id) / 8.0,
                           "tags": [format!("t{}", id % 3)], "meta": {"even": id % 2 == 0}})
                })
                .collect(),
        );
        let summary = runtime.run(&spec, at).await.expect("run");
        assert!(summary.succeeded(), "run {run}: {summary}");
    }
    let rows_total = u64::from(RUNS * PER_RUN);

    let before = read_pyiceberg(lake.path());
    assert_eq!(
        files_per_day(&before["files"]),
        BTreeMap::from([("2026-11-01".to_string(), 15), ("2026-11-02".to_string(), 15)]),
        "one small file per run"
    );
    let old_files: Vec<PathBuf> = before["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| local_path(f["path"].as_str().expect("path")))
        .collect();
    assert!(old_files.iter().all(|path| path.is_file()), "the runs' files are on disk");
    let rows_before = by_id(&before["rows"]);
    assert_eq!(rows_before.len() as u64, rows_total);
    let duck_before = read_duckdb(lake.path());
    let duck_rows_before = by_id(&duck_before["rows"]);
    assert_eq!(duck_rows_before.len() as u64, rows_total);

    // Compact.
    let catalog = tributary_iceberg::local_catalog(lake.path()).await.expect("catalog");
    let ident = tributary_iceberg::table_ident("events");
    let summary = compact_table(&catalog, &ident, 128 << 20).await.expect("compact");
    let per_partition: Vec<(String, usize, usize, u64)> =
        summary.partitions.iter().map(|p| (p.folder.clone(), p.files_before, p.files_after, p.rows)).collect();
    assert_eq!(
        per_partition,
        [("dt=2026-11-01".to_string(), 15, 1, 300), ("dt=2026-11-02".to_string(), 15, 1, 300)],
        "{summary}"
    );
    assert_eq!((summary.records_before, summary.records_after), (rows_total, rows_total), "{summary}");
    let snapshot_id = summary.snapshot_id.expect("a snapshot");
    println!("{summary}");

    let after = read_pyiceberg(lake.path());
    assert_eq!(
        files_per_day(&after["files"]),
        BTreeMap::from([("2026-11-01".to_string(), 1), ("2026-11-02".to_string(), 1)]),
        "one file per partition"
    );
    for file in after["files"].as_array().expect("files") {
        let path = file["path"].as_str().expect("path");
        let folder = format!("/events/data/dt={}/", file["dt"].as_str().expect("dt"));
        assert!(path.contains(&folder), "{path} in its partition's Hive folder");
        assert_eq!(file["records"], 300);
    }
    let snapshots = after["snapshots"].as_array().expect("snapshots");
    assert_eq!(snapshots.len() as u32, RUNS + 1);
    let last = snapshots.last().expect("the compaction's snapshot");
    assert_eq!(last["operation"], "replace");
    assert_eq!(last[COMPACTION_PROPERTY], "true");
    assert_eq!((&last["deleted-data-files"], &last["added-data-files"]), (&json!("30"), &json!("2")));
    assert_eq!((&last["total-records"], &last["total-data-files"]), (&json!("600"), &json!("2")));
    assert_eq!(by_id(&after["rows"]), rows_before, "pyiceberg's rows, value for value");
    let duck_after = read_duckdb(lake.path());
    assert_eq!(by_id(&duck_after["rows"]), duck_rows_before, "DuckDB's rows, value for value");
    assert_eq!(duck_after["columns"], duck_before["columns"]);
    assert_eq!(duck_after["rows_as_of"].as_array().expect("rows as of").last(), Some(&json!(600)));

    // A second compaction finds nothing to do and commits nothing.
    let again = compact_table(&catalog, &ident, 128 << 20).await.expect("compact again");
    assert_eq!(again.snapshot_id, None, "{again}");

    // Expire every snapshot but the current one: the runs' files go.
    let expired = expire_snapshots(&catalog, &ident, chrono::Duration::zero(), 1).await.expect("expire");
    println!("{expired}");
    assert_eq!((expired.snapshots_expired, expired.snapshots_kept), (RUNS as usize, 1));
    assert_eq!(expired.data_files_deleted, 30, "{expired}");
    assert_eq!(expired.manifest_lists_deleted, RUNS as usize, "{expired}");
    assert!(expired.failed.is_empty(), "{expired}");
    let left: Vec<&PathBuf> = old_files.iter().filter(|path| path.exists()).collect();
    assert!(left.is_empty(), "old data files left on disk: {left:?}");
    let compacted =
        after["files"].as_array().expect("files").iter().map(|f| local_path(f["path"].as_str().expect("path")));
    assert!(compacted.into_iter().all(|path| path.is_file()), "the compacted files stay");

    let expired_read = read_pyiceberg(lake.path());
    let kept: Vec<&Value> = expired_read["snapshots"].as_array().expect("snapshots").iter().collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0]["operation"], "replace");
    assert_eq!(by_id(&expired_read["rows"]), rows_before, "pyiceberg reads the table whole after expiry");
    let duck_expired = read_duckdb(lake.path());
    assert_eq!(duck_expired["snapshot_ids"], json!([snapshot_id]));
    assert_eq!(by_id(&duck_expired["rows"]), duck_rows_before, "DuckDB reads the table whole after expiry");
}
