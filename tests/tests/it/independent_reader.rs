//! Parquet written by Persist, read back by an independent reader: pyarrow
//! (installed by `scripts/python-tools.sh install`; `.ci/run` does it).

use std::path::PathBuf;
use std::process::Command;

use chrono::Utc;
use serde_json::Value;
use test_support::vendor::{VendorBehaviour, paged_spec, record, start_vendor};
use tributary::runtime::{LocalOptions, LocalRuntime};

fn python() -> PathBuf {
    std::env::var_os("TRIBUTARY_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"))
}

const READER: &str = r#"
import json, sys
import pyarrow.dataset as ds
table = ds.dataset(sys.argv[1], format="parquet", partitioning="hive").to_table()
rows = sorted(table.to_pylist(), key=lambda r: r["id"])
print(json.dumps({"schema": {f.name: str(f.type) for f in table.schema}, "rows": rows}, default=str))
"#;

#[tokio::test]
async fn pyarrow_reads_the_hive_partitioned_dataset_with_every_value() {
    let addr = start_vendor(VendorBehaviour { total: 61, ..Default::default() }).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let summary = runtime.run(&paged_spec(addr, "pyarrow", 25), Utc::now()).await.expect("run");
    assert!(summary.succeeded(), "{summary}");

    let python = python();
    let output =
        Command::new(&python).arg("-c").arg(READER).arg(lake.path().join("pyarrow")).output().unwrap_or_else(|err| {
            panic!(
                "cannot run {} ({err}): run `scripts/python-tools.sh install` or set TRIBUTARY_PYTHON",
                python.display()
            )
        });
    assert!(
        output.status.success(),
        "pyarrow failed (install it with `scripts/python-tools.sh install`):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let read: Value = serde_json::from_slice(&output.stdout).expect("reader prints JSON");
    let schema = &read["schema"];
    assert_eq!(schema["id"], "int64");
    assert_eq!(schema["score"], "double", "ints and floats in one field are float64");
    assert_eq!(schema["dt"], "string", "the Hive partition column");
    let rows = read["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 61);
    for (i, row) in rows.iter().enumerate() {
        let expected = record(u32::try_from(i).expect("small"));
        assert_eq!(row["id"], expected["id"]);
        assert_eq!(row["name"], expected["name"]);
        assert_eq!(row["score"].as_f64(), expected["score"].as_f64());
        assert_eq!(row["nested"], expected["nested"]);
        assert_eq!(row["dt"].as_str(), Some(Utc::now().date_naive().to_string().as_str()));
    }
}
