//! The independent-reader harness's own end-to-end check: a clean dataset
//! (ints, strings, one nested object, the same keys in every record) that
//! the local runtime writes, read by pyspark, DuckDB and pyarrow
//! (`tests/readers/readers.py`), every row rebuilt and compared with the
//! records the vendor served. Needs `scripts/python-tools.sh install` (and
//! Java 17+ for pyspark); `.ci/run` does it.

use chrono::{TimeZone, Utc};
use serde_json::Value;
use test_support::vendor::{VendorBehaviour, paged_spec, record, start_vendor};
use tributary::runtime::{LocalOptions, LocalRuntime};
use tributary_e2e::readers::read_with_every_reader;

#[tokio::test]
async fn every_reader_reads_a_clean_dataset_back_into_the_served_records() {
    let addr = start_vendor(VendorBehaviour { total: 61, ..Default::default() }).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let scheduled_at = Utc.with_ymd_and_hms(2026, 11, 1, 6, 0, 0).single().expect("a valid time");
    let summary = runtime.run(&paged_spec(addr, "readers", 25), scheduled_at).await.expect("run");
    assert!(summary.succeeded(), "{summary}");

    let served: Vec<Value> = (0..61).map(record).collect();
    let published = lake.path().join("_schema/readers.arrow");
    let report = read_with_every_reader(&lake.path().join("readers"), Some(&published), &served);

    report.assert_all_read(61);
    assert!(report.readers["spark_schema"].skipped.is_none(), "read with the published schema: {report}");
}
