//! Persist's handler over `events/persist-batch.sqs.json`, writing into a
//! [`DirStore`] over a temp dir; the Parquet is read back and compared.

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use aws_lambda_events::event::sqs::SqsEvent;
use bytes::Bytes;
use serde_json::{Value, json};

use adapters::local::{Broker, DirStore};
use contracts::{self, Payload, PersistMessage};
use persist::{Deps, PersistConfig};
use tributary_core::ledger::PageReceipt;
use tributary_core::ports::ObjectStore;

const PERSIST_BATCH: &str = include_str!("../../../../events/persist-batch.sqs.json");

const PAGE_0: &str = "customers/dt=2026-11-29/customers-20261129T060000Z-00000.parquet";
const PAGE_1: &str = "customers/dt=2026-11-29/customers-20261129T060000Z-00001.parquet";
const QUARANTINE_0: &str = "quarantine/customers/dt=2026-11-29/customers-20261129T060000Z-00000.jsonl";
const RAW_0: &str = "raw/customers/dt=2026-11-29/customers-20261129T060000Z-00000.json";
const RAW_1: &str = "raw/customers/dt=2026-11-29/customers-20261129T060000Z-00001.json";

fn event() -> SqsEvent {
    serde_json::from_str(PERSIST_BATCH).expect("fixture is an SQS event")
}

async fn read_parquet(store: &DirStore, key: &str) -> RecordBatch {
    let bytes = store.get(key).await.unwrap_or_else(|err| panic!("{key}: {err}"));
    arrow_select(test_support::lake::parquet_batches(bytes))
}

fn arrow_select(batches: Vec<RecordBatch>) -> RecordBatch {
    assert_eq!(batches.len(), 1, "a small page reads back as one batch");
    batches.into_iter().next().expect("one batch")
}

async fn run(store: &DirStore) -> Vec<String> {
    let config = PersistConfig::default();
    let broker = Broker::new(); // dead letters are not configured here: failures are reported
    let response = persist::handle_sqs(
        &event(),
        Deps { store, queue: &broker, config: &config, run_events: None, catalog: None, tables: None },
    )
    .await;
    response.batch_item_failures.into_iter().map(|f| f.item_identifier).collect()
}

#[tokio::test]
async fn batch_is_persisted_and_only_the_version_2_record_fails() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    assert_eq!(run(&store).await, ["9a8b7c6d-0003-4e5f-a1b2-version-2"]);

    let keys = store.list("").await.expect("list");
    for key in [PAGE_0, PAGE_1, QUARANTINE_0, RAW_0, RAW_1] {
        assert!(keys.iter().any(|k| k == key), "{key} missing from {keys:#?}");
    }
    assert!(
        !keys.iter().any(|k| k.starts_with("quarantine/") && k.ends_with("-00001.jsonl")),
        "page 1 has nothing to quarantine: {keys:#?}"
    );
    // The version-2 message wrote nothing: only pages 0 and 1 have objects
    // (besides the dataset's schema).
    assert!(
        keys.iter().all(|k| k.contains("-00000")
            || k.contains("-00001")
            || k == "_schema/customers.json"
            || k == "_schema/customers.arrow"),
        "{keys:#?}"
    );
}

#[tokio::test]
async fn parquet_reads_back_with_the_records_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    run(&store).await;

    let page = read_parquet(&store, PAGE_0).await;
    assert_eq!(page.num_rows(), 3, "three objects; the bare number is quarantined");
    let ids = page.column_by_name("id").expect("id").as_primitive::<Int64Type>();
    assert_eq!(ids.values(), &[1, 2, 3]);
    let names = page.column_by_name("name").expect("name").as_string::<i32>();
    assert_eq!((names.value(0), names.value(1), names.is_null(2)), ("Ana Souza", "Bruno Lima", true));
    let amounts = page.column_by_name("amount").expect("amount").as_primitive::<Float64Type>();
    assert_eq!(
        (amounts.value(0), amounts.value(1), amounts.is_null(2)),
        (10.0, 10.5, true),
        "int and float widen to Float64"
    );
    let active = page.column_by_name("active").expect("active").as_boolean();
    assert_eq!((active.value(0), active.value(1), active.is_null(2)), (true, false, true));
    let address = page.column_by_name("address").expect("address").as_struct();
    assert!(address.is_null(2), "a null object stays null");
    let cities = address.column_by_name("city").expect("address.city").as_string::<i32>();
    assert_eq!((cities.value(0), cities.value(1)), ("Recife", "Natal"));
    let zips = address.column_by_name("zip").expect("address.zip").as_string::<i32>();
    assert!(zips.is_null(0));
    assert_eq!(zips.value(1), "59000-000");
    let tags = page.column_by_name("tags").expect("tags").as_list::<i32>();
    let tag_values = |row: usize| -> Vec<String> {
        let values = tags.value(row);
        let values = values.as_string::<i32>();
        (0..values.len()).map(|i| values.value(i).to_string()).collect()
    };
    assert_eq!(tag_values(0), ["vip"]);
    assert!(tag_values(1).is_empty());
    assert_eq!(tag_values(2), ["b", "c"]);

    let page = read_parquet(&store, PAGE_1).await;
    assert_eq!(page.num_rows(), 2);
    let ids = page.column_by_name("id").expect("id").as_primitive::<Int64Type>();
    assert_eq!(ids.values(), &[4, 5]);
    let amounts = page.column_by_name("amount").expect("amount").as_primitive::<Float64Type>();
    assert_eq!((amounts.value(0), amounts.value(1)), (7.0, 0.25));
    let address = page.column_by_name("address").expect("address").as_struct();
    let cities = address.column_by_name("city").expect("address.city").as_string::<i32>();
    assert_eq!((cities.value(0), cities.value(1)), ("João Pessoa", "Maceió"));
    let signup = page.column_by_name("signup").expect("signup").as_string::<i32>();
    assert_eq!(signup.value(0), "2026-11-28");
    assert!(signup.is_null(1));
    assert!(page.column_by_name("tags").expect("tags").is_null(1), "a null list stays null");
}

#[tokio::test]
async fn non_object_record_is_quarantined_with_a_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    run(&store).await;

    let bytes = store.get(QUARANTINE_0).await.expect("quarantine file");
    let text = std::str::from_utf8(&bytes).expect("UTF-8");
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert_eq!(lines[0]["index"], 3);
    assert_eq!(lines[0]["record"], json!(42));
    let reason = lines[0]["reason"].as_str().expect("reason");
    assert!(reason.contains("integer") && reason.contains("not a JSON object"), "{reason}");

    let receipt: PageReceipt = serde_json::from_slice(
        &store.get("_runs/customers/20261129T060000Z/receipts-00000/page-00000.json").await.expect("receipt"),
    )
    .expect("a PageReceipt");
    assert_eq!((receipt.records_in, receipt.records_persisted, receipt.records_quarantined), (4, 3, 1));
    assert_eq!(receipt.data_keys, vec![PAGE_0.to_string()]);
    assert_eq!(receipt.quarantine_key.as_deref(), Some(QUARANTINE_0));
}

#[tokio::test]
async fn raw_page_is_kept_for_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    run(&store).await;

    let raw: Value = serde_json::from_slice(&store.get(RAW_0).await.expect("raw page")).expect("JSON");
    let raw: PersistMessage = contracts::decode(raw).expect("the raw page is a PersistMessage");
    let fixture = event();
    let original: Value =
        serde_json::from_str(fixture.records[0].body.as_deref().expect("body")).expect("fixture body is JSON");
    let original: PersistMessage = contracts::decode(original).expect("fixture body is a PersistMessage");
    assert!(raw.fetched_at.is_some(), "a message without fetched_at gets Persist's time, kept for replay");
    let original = PersistMessage { fetched_at: raw.fetched_at, ..original };
    assert_eq!(raw, original, "the raw page is the message as received, the quarantined record included");
    let Payload::Inline { records } = &raw.payload else { panic!("raw pages are inline") };
    assert_eq!(records.to_values().expect("records").len(), 4);
}

#[tokio::test]
async fn handling_the_same_batch_twice_overwrites_the_same_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let first_failures = run(&store).await;
    let first = store.list("").await.expect("list");
    let second_failures = run(&store).await;
    let second = store.list("").await.expect("list");
    assert_eq!(first_failures, second_failures);
    assert_eq!(first, second, "a redelivered batch adds no object");
    assert_eq!(read_parquet(&store, PAGE_0).await.num_rows(), 3);
    assert_eq!(read_parquet(&store, PAGE_1).await.num_rows(), 2);
    let _: Bytes = store.get(QUARANTINE_0).await.expect("quarantine still there");
}

#[tokio::test]
async fn field_null_in_every_record_is_persisted_with_lineage_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let message: PersistMessage = contracts::decode(json!({
        "version": 1, "pipeline": "customers", "run_id": "20261129T060000Z", "run_date": "2026-11-29",
        "page": {"index": 7, "count": 8}, "target": {"dataset": "customers"},
        "payload": {"kind": "inline", "records": [{"id": 1, "deleted_at": null}, {"id": 2, "deleted_at": null}]}
    }))
    .expect("PersistMessage");
    let config = PersistConfig::default();
    let broker = Broker::new();
    let receipt = persist::persist_page(
        message,
        Deps { store: &store, queue: &broker, config: &config, run_events: None, catalog: None, tables: None },
    )
    .await
    .expect("persisted");
    assert_eq!(receipt.records_persisted, 2);
    let page = read_parquet(&store, receipt.data_keys.first().expect("data key")).await;
    assert_eq!(page.num_rows(), 2);
    assert!(page.column_by_name("deleted_at").is_none(), "no column until a value decides its type");
    let run = page.column_by_name(lake_format::lineage::LINEAGE_RUN_ID).expect("lineage").as_string::<i32>();
    assert_eq!((run.value(0), run.value(1)), ("20261129T060000Z", "20261129T060000Z"));
    let pages = page.column_by_name(lake_format::lineage::LINEAGE_PAGE).expect("lineage").as_primitive::<Int64Type>();
    assert_eq!(pages.values(), &[7, 7]);
    let raw: serde_json::Value =
        serde_json::from_slice(&store.get(&receipt.raw_key).await.expect("raw page")).expect("json");
    let loaded = page
        .column_by_name(lake_format::lineage::LINEAGE_LOADED_AT)
        .expect("lineage")
        .as_primitive::<arrow_array::types::TimestampMillisecondType>();
    let fetched_at: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(raw["fetched_at"].clone()).expect("the raw copy keeps the load time");
    assert_eq!(loaded.value(0), fetched_at.timestamp_millis(), "rows carry the time the raw copy keeps");
}
