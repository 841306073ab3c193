//! A Kinesis stream into the lake on moto: the real aws-sdk-kinesis client
//! (`adapters::aws::KinesisReader`), the local runtime's poller with the
//! event source mapping's semantics (`tributary::stream`), and Persist's
//! stream handler. 3 shards, 50,000 JSON records (clean and messy, some
//! gzip), two of them poison; the consumer dies mid-stream and restarts
//! from its checkpoints; writes fail mid-batch (after a batch's files, before
//! its page receipt; after its receipt, before the checkpoint); a batch is
//! redelivered. Every record lands exactly once: pyarrow and DuckDB count
//! 49,998 distinct keys; the poison records are quarantined with reasons;
//! no file holds less than `window.bytes` of batch files but each shard's
//! tail. The same stream through the same crashes into an Iceberg copy of
//! the dataset: pyiceberg and DuckDB (`iceberg_scan`) count 49,998 rows and
//! distinct keys. Then a Kappa replay from TRIM_HORIZON gives the same
//! table.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_kinesis::primitives::Blob;
use aws_sdk_kinesis::types::PutRecordsRequestEntry;
use serde_json::{Value, json};

use adapters::aws::KinesisReader;
use adapters::local::{Broker, DirCatalog, DirStore};
use contracts::stream::StreamSpec;
use persist::{Deps, PersistConfig};
use test_support::crash::FlakyWrites;
use tributary::stream::{PollOptions, PollReport, poll};
use tributary_core::ports::ObjectStore;
use tributary_core::streams::{StreamPosition, StreamReader};
use tributary_e2e::emulator::reset_emulator;
use tributary_e2e::readers::{duckdb_iceberg_python, python};

use crate::iceberg::{READ, READ_DUCKDB, read_tables};

const RECORDS: u64 = 50_000;
const POISON: [u64; 2] = [1_234, 40_000];

/// The pipeline, into a dataset of `table_format` (`parquet` or `iceberg`).
fn spec(table_format: &str) -> StreamSpec {
    StreamSpec::from_yaml(&format!(
        "version: 1
pipeline: clicks
source: {{ kind: kinesis, stream: clicks, starting_position: TRIM_HORIZON }}
batching: {{ batch_size: 2000, batch_window_secs: 0, maximum_retry_attempts: 5, bisect_on_error: true }}
window: {{ bytes: 40000 }}
target: {{ dataset: clicks, table_format: {table_format} }}
"
    ))
    .expect("spec")
}

/// Record `i`: clean, or messy (a field that is a number here and text
/// there, a nested object now and then, a late field), some gzip; two poison.
fn data(i: u64) -> Vec<u8> {
    if POISON.contains(&i) {
        return format!("{{\"id\": {i}, broken").into_bytes();
    }
    let event = ["click", "view", "buy"][(i % 3) as usize];
    let mut record = json!({ "id": i, "user": format!("u{}", i % 97), "event": event });
    if i.is_multiple_of(5) {
        record["amount"] = json!(format!("{}.50", i % 100));
    } else {
        record["amount"] = json!(i % 100);
    }
    if i.is_multiple_of(11) {
        record["context"] = json!({ "page": format!("/p/{}", i % 13), "ref": null });
    }
    if i > 45_000 {
        record["late_field"] = json!(true);
    }
    let text = record.to_string().into_bytes();
    if i.is_multiple_of(17) {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&text).expect("gzip");
        return gz.finish().expect("gzip");
    }
    text
}

async fn put_records(client: &aws_sdk_kinesis::Client, ids: std::ops::Range<u64>) {
    let ids: Vec<u64> = ids.collect();
    // PutRecords takes up to 500 records per call (Kinesis API reference).
    for chunk in ids.chunks(500) {
        let entries = chunk
            .iter()
            .map(|&i| {
                PutRecordsRequestEntry::builder()
                    .data(Blob::new(data(i)))
                    .partition_key(format!("user-{}", i % 97))
                    .build()
                    .expect("entry")
            })
            .collect();
        let answer =
            client.put_records().stream_name("clicks").set_records(Some(entries)).send().await.expect("PutRecords");
        assert_eq!(answer.failed_record_count(), Some(0));
    }
}

/// Rows and distinct `id`s of the dataset, by pyarrow and by DuckDB.
fn count_with_readers(dataset: &Path) -> Value {
    const READER: &str = r#"
import json, sys
import pyarrow.dataset as ds
import duckdb
t = ds.dataset(sys.argv[1], format="parquet", partitioning="hive").to_table(columns=["id"])
ids = t.column("id").to_pylist()
glob = sys.argv[1] + "/**/*.parquet"
rows, distinct = duckdb.sql(f"SELECT count(*), count(DISTINCT id) FROM read_parquet('{glob}', union_by_name=true)").fetchone()
print(json.dumps({"pyarrow": {"rows": len(ids), "distinct": len(set(ids))}, "duckdb": {"rows": rows, "distinct": distinct}}))
"#;
    let python = python();
    let output = Command::new(&python).arg("-c").arg(READER).arg(dataset).output().unwrap_or_else(|err| {
        panic!("cannot run {} ({err}): run `scripts/python-tools.sh install` or set TRIBUTARY_PYTHON", python.display())
    });
    assert!(output.status.success(), "readers failed:\n{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("the readers print JSON")
}

/// Every row's user columns, sorted by id (the lineage columns left out).
fn table_rows(dataset: &Path) -> Vec<Value> {
    const READER: &str = r#"
import json, sys
import pyarrow.dataset as ds
t = ds.dataset(sys.argv[1], format="parquet", partitioning="hive").to_table()
rows = [{k: v for k, v in r.items() if not k.startswith("_tributary")} for r in t.to_pylist()]
print(json.dumps(sorted(rows, key=lambda r: r["id"]), default=str))
"#;
    let output = Command::new(python()).arg("-c").arg(READER).arg(dataset).output().expect("python");
    assert!(output.status.success(), "reader failed:\n{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("JSON")
}

fn quarantined(lake: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    let mut stack = vec![lake.join("quarantine/clicks")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for path in entries.flatten().map(|e| e.path()) {
            if path.is_dir() {
                stack.push(path);
            } else {
                let text = std::fs::read_to_string(&path).expect("read");
                out.extend(text.lines().map(|l| serde_json::from_str::<Value>(l).expect("JSON line")));
            }
        }
    }
    out
}

/// Lands the whole stream in `store`'s lake through the crashes and the
/// redelivery: a batch dies after its files, before its page receipt;
/// another completes and the consumer dies before its checkpoint moves; the
/// consumer dies after 3 batches a shard and starts again from its
/// checkpoints; then the first 2,000 records of a shard are delivered again
/// (as a mapping that lost its position would send them) and nothing is
/// written. Returns the poll after the restart and how long it took.
async fn land_through_crashes(
    spec: &StreamSpec,
    reader: &KinesisReader,
    deps: Deps<'_>,
    store: &FlakyWrites<DirStore>,
) -> (PollReport, Duration) {
    store.fail("/page-", 4, 1);
    store.fail("_streams/clicks/clicks/shardId-000000000001.json", 5, 1);
    let died = poll(spec, reader, deps, PollOptions { follow: false, max_batches_per_shard: Some(3) })
        .await
        .expect("first poll");
    assert!(died.records_written() < RECORDS, "{died:?}");
    let started = Instant::now();
    let rest = poll(spec, reader, deps, PollOptions::default()).await.expect("second poll");
    let elapsed = started.elapsed();
    assert_eq!(store.failed(), 2, "both crashes happened");
    let retries: u64 = died.shards.values().chain(rest.shards.values()).map(|s| s.retries).sum();
    assert!(retries >= 2, "each crash is a retried batch: {died:?} {rest:?}");
    assert_eq!(died.on_failure() + rest.on_failure(), 0);

    let again = reader.read("clicks", "shardId-000000000000", &StreamPosition::TrimHorizon, 2_000).await.expect("read");
    let outcome = persist::stream::persist_stream_batch(spec, &again.records, deps).await;
    assert!(outcome.failures.is_empty());
    assert_eq!((outcome.records_written, outcome.records_skipped), (0, again.records.len() as u64));
    (rest, elapsed)
}

#[tokio::test]
async fn kinesis_on_moto_lands_every_record_exactly_once_through_crashes_and_redelivery() {
    let emulator = reset_emulator().await;
    let reader = KinesisReader::new(&emulator.config);
    let kinesis = reader.client();
    kinesis.create_stream().stream_name("clicks").shard_count(3).send().await.expect("CreateStream");
    put_records(kinesis, 0..RECORDS).await;
    assert_eq!(reader.partitions("clicks").await.expect("shards").len(), 3);

    let lake = tempfile::tempdir().expect("tempdir");
    let store = FlakyWrites::new(DirStore::new(lake.path()));
    let (config, broker) = (PersistConfig::default(), Broker::new());
    let deps = Deps { store: &store, queue: &broker, config: &config, run_events: None, catalog: None, tables: None };
    let (spec, iceberg_spec) = (spec("parquet"), spec("iceberg"));
    let (rest, elapsed) = land_through_crashes(&spec, &reader, deps, &store).await;
    for (shard, report) in &rest.shards {
        let per_second = report.records_written as f64 / report.elapsed.as_secs_f64().max(1e-3);
        eprintln!(
            "{shard}: {} records in {:.2} s ({per_second:.0} records/s), {} batches, behind {:?} ms",
            report.records_written,
            report.elapsed.as_secs_f64(),
            report.invocations,
            report.millis_behind_latest
        );
        assert_eq!(report.millis_behind_latest, Some(0), "{shard} read to its tip");
    }
    eprintln!("3 shards: {} records after the restart in {:.2} s", rest.records_written(), elapsed.as_secs_f64());

    let counts = count_with_readers(&lake.path().join("clicks"));
    let expected = RECORDS - POISON.len() as u64;
    for reader in ["pyarrow", "duckdb"] {
        assert_eq!(counts[reader]["rows"], expected, "{reader}: {counts}");
        assert_eq!(counts[reader]["distinct"], expected, "{reader}: {counts}");
    }
    let poison = quarantined(lake.path());
    assert_eq!(poison.len(), 2, "{poison:?}");
    for record in &poison {
        let reason = record["reason"].as_str().expect("reason");
        assert!(reason.contains("not JSON"), "{reason}");
        assert!(record["record"]["data_base64"].is_string(), "the poison record's bytes are kept");
    }

    // The small-file rule: every file is a shard window's, none holding
    // less than `window.bytes` of batch files but each shard's tail.
    let files = store.list("clicks/").await.expect("files");
    let below = tributary_e2e::windows::below_the_rule(&store, "clicks", &files, 40_000).await;
    eprintln!("{} files for {RECORDS} records; below the rule: {below:?}", files.len());
    assert!(below.len() <= 3, "at most each shard's tail: {below:?}");

    // Each shard's checkpoint is at its last record.
    for shard in reader.partitions("clicks").await.expect("shards") {
        let key = persist::stream::checkpoint_key("clicks", "clicks", &shard);
        let checkpoint: persist::stream::Checkpoint =
            serde_json::from_slice(&store.get(&key).await.expect("checkpoint")).expect("JSON");
        assert!(checkpoint.pending.is_none(), "{shard}: {checkpoint:?}");
        let tip = reader.read("clicks", &shard, &StreamPosition::TrimHorizon, 10_000).await.expect("read");
        let mut last = tip.records.last().map(|r| r.sequence.clone());
        let mut next = tip.next;
        while let Some(n) = next.take() {
            let more = reader.read("clicks", &shard, &StreamPosition::Continue(n), 10_000).await.expect("read");
            if more.records.is_empty() {
                break;
            }
            last = more.records.last().map(|r| r.sequence.clone());
            next = more.next;
        }
        assert_eq!(checkpoint.through, last, "{shard}");
    }

    // The same stream through the same crashes into an Iceberg copy of the
    // dataset (its own lake, the local catalog and committer): pyiceberg
    // and DuckDB's `iceberg_scan` read every record once, and no staged
    // file is left beside the table.
    let started = Instant::now();
    let iceberg_lake = tempfile::tempdir().expect("tempdir");
    let root = iceberg_lake.path().canonicalize().expect("lake");
    let iceberg_store = Arc::new(FlakyWrites::new(DirStore::new(&root)));
    let (catalog, tables) =
        (DirCatalog::new(&root), tributary_iceberg::LocalCommitter::new(root.clone(), iceberg_store.clone()));
    let iceberg_deps = Deps { store: iceberg_store.as_ref(), catalog: Some(&catalog), tables: Some(&tables), ..deps };
    land_through_crashes(&iceberg_spec, &reader, iceberg_deps, &iceberg_store).await;
    let landed = started.elapsed();
    let py_read = Instant::now();
    let pyiceberg = read_tables(&python(), "TRIBUTARY_PYTHON", READ, &root);
    let (py_read, duck_read) = (py_read.elapsed(), Instant::now());
    let duckdb = read_tables(&duckdb_iceberg_python(), "TRIBUTARY_DUCKDB_ICEBERG_PYTHON", READ_DUCKDB, &root);
    let duck_read = duck_read.elapsed();
    for (name, tables) in [("pyiceberg", &pyiceberg), ("duckdb", &duckdb)] {
        let rows = tables["clicks"]["rows"].as_array().expect("the clicks table's rows");
        let ids: std::collections::BTreeSet<u64> = rows.iter().filter_map(|row| row["id"].as_u64()).collect();
        eprintln!("iceberg copy, {name}: {} rows, {} distinct ids", rows.len(), ids.len());
        assert_eq!((rows.len() as u64, ids.len() as u64), (expected, expected), "{name}: rows, distinct ids");
    }
    let snapshots = pyiceberg["clicks"]["snapshots"].as_array().expect("snapshots");
    assert!(snapshots.iter().all(|s| s["operation"] == "append"), "one append a window: {snapshots:?}");
    assert_eq!(quarantined(&root).len(), 2);
    let staged = iceberg_store.list("clicks/").await.expect("files");
    assert!(staged.iter().all(|key| !key.ends_with(".parquet")), "staged files left: {staged:?}");
    eprintln!(
        "iceberg copy: {} snapshots; landed in {:.2} s; read by pyiceberg in {:.2} s, by DuckDB in {:.2} s",
        snapshots.len(),
        landed.as_secs_f64(),
        py_read.as_secs_f64(),
        duck_read.as_secs_f64()
    );

    // Put to visible: one more record, polled as the mapping would.
    let put_at = Instant::now();
    put_records(kinesis, RECORDS..RECORDS + 1).await;
    let more = poll(&spec, &reader, deps, PollOptions::default()).await.expect("poll");
    assert_eq!(more.records_written(), 1);
    eprintln!("put to visible in the table: {} ms", put_at.elapsed().as_millis());

    // Kappa: the dataset re-derived from TRIM_HORIZON through the same code
    // (no crashes this time) is the same table, value for value.
    let before = table_rows(&lake.path().join("clicks"));
    let replay_lake = tempfile::tempdir().expect("tempdir");
    let replay_store = DirStore::new(replay_lake.path());
    let replay_deps = Deps { store: &replay_store, ..deps };
    let replayed = poll(&spec, &reader, replay_deps, PollOptions::default()).await.expect("replay");
    assert_eq!(replayed.records_written(), RECORDS + 1);
    let after = table_rows(&replay_lake.path().join("clicks"));
    assert_eq!(before.len(), after.len());
    let differing: BTreeMap<usize, (&Value, &Value)> =
        before.iter().zip(&after).enumerate().filter(|(_, (a, b))| a != b).take(3).collect();
    assert!(differing.is_empty(), "{differing:?}");
}
