//! Iceberg datasets end to end: three runs of the local runtime write one
//! dataset as an Iceberg table (`target.table_format: iceberg`), the second
//! from another endpoint whose records have other fields (the schema
//! evolves), and pyiceberg reads the table through the lake's SQL catalog
//! (`SqlCatalog("tributary", uri="sqlite:///<lake>/_iceberg/catalog.sqlite",
//! warehouse="file://<lake>/_iceberg/warehouse")`): one snapshot per run
//! carrying its run id, every row, the new columns null in the older rows.
//! Needs pyiceberg (`scripts/python-tools.sh install`, or
//! `TRIBUTARY_PYTHON` naming a Python that has it).

use std::process::Command;

use chrono::{TimeZone, Utc};
use contracts::TableFormat;
use contracts::spec::PipelineSpec;
use serde_json::Value;
use tributary::runtime::{LocalOptions, LocalRuntime};
use tributary_e2e::readers::python;
use tributary_e2e::{VendorBehaviour, paged_spec, start_vendor};

/// Reads every table of the lake's catalog with pyiceberg: per table its
/// snapshots (run id, pipeline, added records, oldest first), its schema's
/// column names and its rows (as JSON objects, sorted by the data's
/// `id`/`item_id`).
const READ: &str = r#"
import json, sys
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
        "snapshots": [{k: s.summary.get(k) for k in ("tributary.run-id", "tributary.pipeline", "added-records")}
                      for s in snapshots],
        "columns": [f.name for f in table.schema().fields],
        "partition": [f.name + ":" + str(f.transform) for f in table.spec().fields],
        "rows": [{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()} for row in rows],
    }
print(json.dumps(out))
"#;

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
async fn pyiceberg_reads_three_runs_one_snapshot_each_with_the_schema_evolved() {
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
    assert!(tributary_e2e::read_dataset(lake.path(), "things").is_empty(), "no Parquet left in things/");

    let output = Command::new(python()).arg("-c").arg(READ).arg(lake.path()).output().unwrap_or_else(|err| {
        panic!(
            "cannot run {} ({err}): run `scripts/python-tools.sh install` or set TRIBUTARY_PYTHON",
            python().display()
        )
    });
    assert!(output.status.success(), "pyiceberg failed: {}", String::from_utf8_lossy(&output.stderr));
    let tables: Value = serde_json::from_slice(&output.stdout).expect("the reader's JSON");
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
}
