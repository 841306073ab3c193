//! Iceberg datasets end to end: three runs of the local runtime write one
//! dataset as an Iceberg table (`target.table_format: iceberg`), the second
//! from another endpoint whose records have other fields (the schema
//! evolves), and pyiceberg reads the table through the lake's SQL catalog
//! (`SqlCatalog("tributary", uri="sqlite:///<lake>/_iceberg/catalog.sqlite",
//! warehouse="file://<lake>/_iceberg/warehouse")`): one snapshot per run
//! carrying its run id, every row, the new columns null in the older rows.
//! DuckDB's iceberg extension reads the same table (`iceberg_scan` of the
//! current `metadata.json` the catalog names) with the same rows and
//! values, as does it the changing vendor of tests/tests/it/table_evolution.rs
//! (a struct gaining fields, an integer above 2^53).
//! Needs pyiceberg (`scripts/python-tools.sh install`, or
//! `TRIBUTARY_PYTHON` naming a Python that has it) and DuckDB 1.4.4 with
//! its iceberg extension (the same install makes `.tools/duckdb-iceberg`, or
//! `TRIBUTARY_DUCKDB_ICEBERG_PYTHON` names a Python that has them); without
//! them the tests fail, saying so.

use std::path::Path;
use std::process::Command;

use chrono::{TimeZone, Utc};
use contracts::TableFormat;
use contracts::spec::PipelineSpec;
use serde_json::Value;
use test_support::vendor::{VendorBehaviour, paged_spec, serve_json, start_vendor};
use tributary::runtime::{LocalOptions, LocalRuntime};
use tributary_e2e::readers::{duckdb_iceberg_python, python};

/// Turns a reader's Python values into JSON's, the same way for every
/// reader: dates and timestamps as ISO 8601, decimals as their digits,
/// binary as hex, at any depth.
pub(crate) const PLAIN: &str = r#"
import decimal, json, sys
def plain(v):
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return v.isoformat() if hasattr(v, "isoformat") else v
"#;

/// Reads every table of the lake's catalog with pyiceberg: per table its
/// snapshots (run id, pipeline, added records, oldest first), its schema's
/// column names and its rows (as JSON objects, through `plain`).
pub(crate) const READ: &str = r#"
from pyiceberg.catalog.sql import SqlCatalog
lake = sys.argv[1]
catalog = SqlCatalog("tributary", uri=f"sqlite:///{lake}/_iceberg/catalog.sqlite",
                     warehouse=f"file://{lake}/_iceberg/warehouse")
out = {}
for ident in catalog.list_tables("tributary"):
    table = catalog.load_table(ident)
    snapshots = sorted(table.snapshots(), key=lambda s: s.sequence_number)
    rows = table.scan().to_arrow().to_pylist()
    out[ident[1]] = {
        "snapshots": [dict({k: s.summary.get(k) for k in ("tributary.run-id", "tributary.pipeline", "added-records",
                                                          "deleted-records", "total-records", "tributary.rerun")},
                           operation=s.summary.operation.value)
                      for s in snapshots],
        "snapshot_ids": [s.snapshot_id for s in snapshots],
        "columns": [f.name for f in table.schema().fields],
        "partition": [f.name + ":" + str(f.transform) for f in table.spec().fields],
        "rows": [plain(row) for row in rows],
    }
print(json.dumps(out))
"#;

/// Reads every table of the lake's catalog with DuckDB's iceberg extension
/// (the wheels' binaries, never downloaded): the table's current
/// `metadata.json` from the SQL catalog's `iceberg_tables` (there is no
/// version-hint file), then `iceberg_scan` of it: per table its snapshot ids
/// (oldest first), its columns, its rows (through `plain`) and, per
/// snapshot, the rows `iceberg_scan` reads as of it.
pub(crate) const READ_DUCKDB: &str = r#"
import os, sqlite3
import duckdb, duckdb_ext
lake = sys.argv[1]
catalog = sqlite3.connect(f"file:{lake}/_iceberg/catalog.sqlite?mode=ro", uri=True)
tables = catalog.execute(
    "SELECT table_name, metadata_location FROM iceberg_tables"
    " WHERE catalog_name = 'tributary' AND table_namespace = 'tributary'").fetchall()
con = duckdb.connect(config={
    "extension_directory": os.path.join(list(duckdb_ext.__path__)[0], "extensions"),
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
})
# A query slower than 2 s (a loaded machine) would print a progress bar on
# stdout, before the JSON.
con.execute("SET enable_progress_bar = false")
con.execute("LOAD iceberg")
con.execute("SET TimeZone = 'UTC'")
def literal(text):
    return "'" + text.replace("'", "''") + "'"
out = {}
for name, location in tables:
    cursor = con.execute(f"SELECT * FROM iceberg_scan({literal(location)})")
    columns = [d[0] for d in cursor.description]
    types = {d[0]: str(d[1]) for d in cursor.description}
    rows = [plain(dict(zip(columns, row))) for row in cursor.fetchall()]
    snapshot_ids = [s for (s,) in con.execute(
        f"SELECT snapshot_id FROM iceberg_snapshots({literal(location)}) ORDER BY sequence_number").fetchall()]
    rows_as_of = [con.execute(
        f"SELECT count(*) FROM iceberg_scan({literal(location)}, snapshot_from_id => {int(s)})").fetchone()[0]
        for s in snapshot_ids]
    out[name] = {"metadata_location": location, "snapshot_ids": snapshot_ids, "rows_as_of": rows_as_of,
                 "columns": columns, "types": types, "rows": rows}
print(json.dumps(out))
"#;

/// Runs `script` (after [`PLAIN`]) with `interpreter` on the lake and parses
/// the JSON it prints; fails, saying how to install the tools, when the
/// interpreter is missing or the script fails.
pub(crate) fn read_tables(interpreter: &Path, variable: &str, script: &str, lake: &Path) -> Value {
    let install = format!("run `scripts/python-tools.sh install` or set {variable}");
    let output = Command::new(interpreter)
        .arg("-c")
        .arg([PLAIN, script].concat())
        .arg(lake)
        .output()
        .unwrap_or_else(|err| panic!("cannot run {} ({err}): {install}", interpreter.display()));
    assert!(
        output.status.success(),
        "{} failed ({install}): {}",
        interpreter.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the reader's JSON")
}

/// The rows of a reader's table, in the order of run, `id`, `item_id` and `k`.
fn sorted_rows(table: &Value) -> Vec<Value> {
    let mut rows = table["rows"].as_array().expect("rows").clone();
    rows.sort_by_key(|r| {
        let int = |k: &str| r[k].as_i64().unwrap_or(-1);
        (r["_tributary_run_id"].as_str().unwrap_or_default().to_string(), int("id"), int("item_id"), int("k"))
    });
    rows
}

/// Asserts that DuckDB read `duck` as pyiceberg read `pyiceberg` (one
/// table of each reader's output): the same snapshots, as of each the
/// number of rows given (each run whole), the same columns in the same
/// order and the same rows, value for value. Returns DuckDB's rows, sorted.
fn assert_duckdb_reads_as_pyiceberg(duck: &Value, pyiceberg: &Value, rows_as_of: &[u64]) -> Vec<Value> {
    assert_eq!(duck["snapshot_ids"], pyiceberg["snapshot_ids"], "DuckDB's snapshots, then pyiceberg's");
    assert_eq!(duck["rows_as_of"], serde_json::json!(rows_as_of), "rows DuckDB reads as of each snapshot");
    assert_eq!(duck["columns"], pyiceberg["columns"], "DuckDB's columns, then pyiceberg's");
    let (duck_rows, pyiceberg_rows) = (sorted_rows(duck), sorted_rows(pyiceberg));
    assert_eq!(duck_rows.len(), pyiceberg_rows.len(), "rows DuckDB read, then pyiceberg");
    for (duck_row, pyiceberg_row) in duck_rows.iter().zip(&pyiceberg_rows) {
        assert_eq!(duck_row, pyiceberg_row, "DuckDB's row, then pyiceberg's");
    }
    duck_rows
}

fn iceberg(mut spec: PipelineSpec, dataset: &str) -> PipelineSpec {
    spec.target.dataset = dataset.into();
    spec.target.table_format = TableFormat::Iceberg;
    spec
}

/// A simple pipeline over one item's details (`item_id`, `k`, `note`: fields
/// the paged records do not have).
fn details_spec(addr: std::net::SocketAddr, dataset: &str) -> PipelineSpec {
    let text = format!(
        "version: 1\npipeline: things_details\nstrategy: {{kind: simple}}\nrequest: {{url: 'http://{addr}/items/3/details', records_pointer: /data, allow: {{loopback: true}}}}\ntarget: {{dataset: {dataset}, table_format: iceberg}}\n"
    );
    PipelineSpec::from_yaml(&text).expect("valid spec")
}

#[tokio::test]
async fn pyiceberg_and_duckdb_read_three_runs_one_snapshot_each_with_the_schema_evolved() {
    let addr = start_vendor(VendorBehaviour { total: 61, ..Default::default() }).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let at = |hour| Utc.with_ymd_and_hms(2026, 11, 1, hour, 0, 0).single().expect("a valid time");
    let items = iceberg(paged_spec(addr, "things", 25), "things");
    let mut run_ids = Vec::new();
    for (spec, hour) in [(&items, 6), (&details_spec(addr, "things"), 7), (&items, 8)] {
        let summary = runtime.run(spec, at(hour)).await.expect("run");
        assert!(summary.succeeded(), "{summary}");
        run_ids.push(summary.run_id.clone());
    }
    // The staged page files are gone: the table holds the rows.
    assert!(test_support::lake::read_dataset(lake.path(), "things").is_empty(), "no Parquet left in things/");

    let tables = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    let table = &tables["things"];

    let snapshots: Vec<(String, String, String)> = table["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| {
            let field = |k: &str| s[k].as_str().unwrap_or_default().to_string();
            (field("tributary.run-id"), field("tributary.pipeline"), field("added-records"))
        })
        .collect();
    assert_eq!(
        snapshots,
        [
            (run_ids[0].clone(), "things".to_string(), "61".to_string()),
            (run_ids[1].clone(), "things_details".to_string(), "2".to_string()),
            (run_ids[2].clone(), "things".to_string(), "61".to_string()),
        ],
        "one snapshot per run, in order, with every record"
    );
    assert_eq!(table["partition"], serde_json::json!(["dt:identity"]));
    let columns = table["columns"].as_array().expect("columns");
    for column in ["id", "name", "nested", "item_id", "note", "dt", "_tributary_run_id"] {
        assert!(columns.iter().any(|c| c == column), "column {column} in {columns:?}");
    }

    let rows = table["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 124);
    let of_run = |run: &String| -> Vec<&Value> { rows.iter().filter(|r| r["_tributary_run_id"] == *run).collect() };
    // The first run's rows, written before `note` existed, read it as null.
    assert!(of_run(&run_ids[0]).iter().all(|r| r["note"].is_null() && r["item_id"].is_null()));
    let details = of_run(&run_ids[1]);
    assert_eq!(details.len(), 2);
    assert!(details.iter().all(|r| r["item_id"] == 3 && r["id"].is_null()), "{details:?}");
    assert!(details.iter().any(|r| r["note"] == "detail 1 of item 3"), "{details:?}");
    // The values as served, in every run of the items.
    for run in [&run_ids[0], &run_ids[2]] {
        let mut ids: Vec<i64> = of_run(run).iter().filter_map(|r| r["id"].as_i64()).collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..61).collect::<Vec<_>>());
        let seven = *of_run(run).iter().find(|r| r["id"] == 7).expect("item 7");
        assert_eq!(seven["name"], "item 7");
        assert_eq!(seven["nested"]["even"], false);
        assert_eq!(seven["dt"], "2026-11-01");
    }

    // DuckDB's iceberg extension reads the same table, with the same values.
    let duckdb = read_tables(&duckdb_iceberg_python(), "TRIBUTARY_DUCKDB_ICEBERG_PYTHON", READ_DUCKDB, lake.path());
    let duck_rows = assert_duckdb_reads_as_pyiceberg(&duckdb["things"], table, &[61, 63, 124]);
    let seven = duck_rows.iter().find(|r| r["id"] == 7).expect("item 7 in DuckDB's rows");
    assert_eq!(seven["nested"], serde_json::json!({"even": false, "tags": ["t", "7"]}), "{seven}");
    assert!(seven["note"].is_null() && seven["item_id"].is_null(), "{seven}");
}

/// The fixture records of run `n` (1-based) of `tests/readers/fixtures/evolution/`.
fn evolution_records(n: u32) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("readers/fixtures/evolution/run{n}.json"));
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The changing vendor of tests/tests/it/table_evolution.rs, into an Iceberg
/// table: run 2 adds columns and gives the null struct `meta` fields, run 3
/// adds `meta.geo` (a struct gaining a field after data files were written
/// without it), a string in a number column, `id` beside `ID` and an
/// integer above 2^53. pyiceberg and DuckDB read the same nine rows.
#[tokio::test]
async fn duckdb_reads_a_changing_vendor_s_iceberg_table_as_pyiceberg_does() {
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    for run in 1..=3 {
        let addr = serve_json(evolution_records(run)).await;
        let spec = PipelineSpec::from_yaml(&format!(
            "version: 1\npipeline: evolution\nstrategy: {{kind: simple}}\nrequest: {{url: 'http://{addr}/records', allow: {{loopback: true}}}}\ntarget: {{dataset: evolution, table_format: iceberg}}\n"
        ))
        .expect("valid spec");
        let at = Utc.with_ymd_and_hms(2026, 11, run, 6, 0, 0).single().expect("a valid time");
        let summary = runtime.run(&spec, at).await.expect("run");
        assert!(summary.succeeded(), "run {run}: {summary}");
    }

    let tables = read_tables(&python(), "TRIBUTARY_PYTHON", READ, lake.path());
    let table = &tables["evolution"];
    let added: Vec<&str> = table["snapshots"]
        .as_array()
        .expect("snapshots")
        .iter()
        .map(|s| s["added-records"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(added, ["3", "3", "3"], "one snapshot per run");
    let duckdb = read_tables(&duckdb_iceberg_python(), "TRIBUTARY_DUCKDB_ICEBERG_PYTHON", READ_DUCKDB, lake.path());
    let rows = assert_duckdb_reads_as_pyiceberg(&duckdb["evolution"], table, &[3, 6, 9]);

    let by_id = |id: i64| rows.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("id {id} in {rows:?}"));
    assert!(by_id(1)["meta"].is_null(), "{}", by_id(1));
    assert_eq!(by_id(4)["meta"]["geo"], Value::Null, "a field the struct gained later: {}", by_id(4));
    assert_eq!(by_id(7)["meta"]["geo"], serde_json::json!({"lat": 1.5, "lon": -2.25}), "{}", by_id(7));
    assert_eq!(by_id(7)["big__int64"], 9_007_199_254_740_993_i64, "exact: {}", by_id(7));
    assert_eq!(by_id(7)["amount__string"], "n/a", "{}", by_id(7));
    assert_eq!(by_id(7)["id_2"], "X-7", "{}", by_id(7));
    // Sent as `2026-11-02T10:00:00Z`: a timestamptz column now (RFC 3339
    // UTC text is detected), the same instant in pyiceberg's isoformat.
    assert_eq!(by_id(5)["created_at"], "2026-11-02T10:00:00+00:00", "the instant the vendor sent: {}", by_id(5));
    assert_eq!(by_id(1)["dt"], "2026-11-01");
    assert_eq!(by_id(7)["dt"], "2026-11-03");
}
