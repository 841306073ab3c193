//! `persist_page` end to end on a directory lake: claim checks (gzip NDJSON),
//! the raw copy kept for replay, a missing claim check, a redelivery that
//! writes fewer parts, an incompatible schema change that alerts, and
//! pages racing to widen the dataset's schema.

use std::io::Write;
use std::time::Duration;

use bytes::Bytes;
use chrono::NaiveDate;
use serde_json::{Value, json};

use adapters::local::{Broker, DirStore, QueueConfig};
use contracts::{FileSettings, PageRef, Payload, PayloadFormat, PersistMessage, PersistTarget, RunId, V1};
use persist::{Deps, PersistConfig, PersistError};
use tributary_core::batch::{ATTR_ERROR, DeadLetterTarget, RecordError};
use tributary_core::ledger::Compactor;
use tributary_core::ports::ObjectStore;

fn message(page: u32, target: PersistTarget, payload: Payload) -> PersistMessage {
    PersistMessage {
        version: V1,
        pipeline: "orders".into(),
        run_id: RunId::new("20261129T060000Z").expect("run id"),
        run_date: NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        page: PageRef { index: page, count: 3 },
        target,
        payload,
        fetched_at: None,
    }
}

fn inline(records: Value) -> Payload {
    let Value::Array(records) = records else { panic!("array") };
    Payload::Inline { records: contracts::RawRecords::from_values(&records).expect("records") }
}

/// A broker with Persist's DLQ, and a config that dead-letters into it.
fn with_dlq() -> (Broker, PersistConfig) {
    let broker = Broker::new();
    broker.create_queue(QueueConfig {
        name: "persist-dlq".into(),
        visibility_timeout: Duration::from_secs(30),
        max_message_bytes: 262_144,
        redrive: None,
    });
    let config = PersistConfig {
        dead_letter: Some(DeadLetterTarget { dlq: "persist-dlq".into(), max_receive_count: 5 }),
        ..PersistConfig::default()
    };
    (broker, config)
}

async fn persist(
    store: &DirStore,
    broker: &Broker,
    config: &PersistConfig,
    m: PersistMessage,
) -> Result<tributary_core::ledger::PageReceipt, PersistError> {
    persist::persist_page(m, Deps { store, queue: broker, config, run_events: None, catalog: None, tables: None }).await
}

#[tokio::test]
async fn a_gzip_ndjson_claim_check_is_persisted_and_kept_for_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    for i in 0..1000 {
        writeln!(gz, "{}", json!({"id": i, "amount": if i % 2 == 0 { json!(i) } else { json!(i as f64 + 0.5) }}))
            .expect("gz");
    }
    let claim = "_claims/orders/20261129T060000Z/page-00000.json.gz";
    store.put(claim, Bytes::from(gz.finish().expect("gz"))).await.expect("put claim");
    let payload = Payload::Object { key: claim.into(), format: PayloadFormat::default() };
    let config = PersistConfig::default();
    let receipt = persist(&store, &Broker::new(), &config, message(0, PersistTarget::new("orders"), payload))
        .await
        .expect("persisted");
    assert_eq!((receipt.records_in, receipt.records_persisted), (1000, 1000));
    assert!(store.get(claim).await.is_ok(), "Persist deletes nothing it did not write");
    let raw: PersistMessage =
        serde_json::from_slice(&store.get(&receipt.raw_key).await.expect("raw")).expect("envelope");
    let Payload::Object { key, .. } = &raw.payload else { panic!("the raw envelope points at the copy") };
    assert_eq!(key, "raw/orders/dt=2026-11-29/orders-20261129T060000Z-00000.payload");
    assert_eq!(store.get(key).await.expect("copy"), store.get(claim).await.expect("claim"), "copied byte for byte");
    // Replaying the raw envelope writes the same keys again.
    let again = persist(&store, &Broker::new(), &config, raw).await.expect("replayed");
    assert_eq!(again.data_keys, receipt.data_keys);
}

#[tokio::test]
async fn a_missing_claim_check_fails_permanently_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let payload = Payload::Object { key: "_claims/orders/gone.json".into(), format: PayloadFormat::default() };
    let err =
        persist(&store, &Broker::new(), &PersistConfig::default(), message(0, PersistTarget::new("orders"), payload))
            .await
            .expect_err("missing object");
    assert!(err.is_permanent(), "{err}");
    assert!(
        err.to_string().contains("_claims/orders/gone.json") && err.to_string().contains("does not exist"),
        "{err}"
    );
}

#[tokio::test]
async fn a_redelivery_that_writes_fewer_parts_removes_the_stale_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let records = json!([{"i": 1}, {"i": 2}, {"i": 3}, {"i": 4}, {"i": 5}]);
    let mut target = PersistTarget::new("orders");
    target.files = FileSettings { max_rows: Some(2), ..FileSettings::default() };
    let config = PersistConfig::default();
    let first =
        persist(&store, &Broker::new(), &config, message(1, target, inline(records.clone()))).await.expect("first");
    assert_eq!(first.data_keys.len(), 3, "{:?}", first.data_keys);
    let second = persist(&store, &Broker::new(), &config, message(1, PersistTarget::new("orders"), inline(records)))
        .await
        .expect("second");
    assert_eq!(second.data_keys, ["orders/dt=2026-11-29/orders-20261129T060000Z-00001.parquet"]);
    let parquet: Vec<String> =
        store.list("orders/").await.expect("list").into_iter().filter(|k| k.ends_with(".parquet")).collect();
    assert_eq!(parquet, second.data_keys, "no duplicate rows are left behind");
}

#[tokio::test]
async fn a_change_of_kind_goes_to_a_variant_column_and_is_published() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let (broker, config) = with_dlq();
    let target = PersistTarget::new("orders");
    persist(
        &store,
        &broker,
        &config,
        message(0, target.clone(), inline(json!([{"id": 1, "addr": {"city": "Recife"}}]))),
    )
    .await
    .expect("first page");
    let receipt = persist(
        &store,
        &broker,
        &config,
        message(1, target, inline(json!([{"id": 2, "addr": {"city": "Natal"}}, {"id": 3, "addr": "Rua A, 1"}]))),
    )
    .await
    .expect("the page is persisted, not failed");
    assert_eq!((receipt.records_persisted, receipt.records_quarantined), (2, 0), "nothing is set aside");
    assert!(broker.receive("persist-dlq", 10).expect("receive").is_empty(), "no alert: readers follow variants");
    let (table, _) = persist::read_schema(&store, "_schema/orders.json").await.expect("read").expect("a schema");
    assert_eq!(table.version, 2, "one change per page that changed it");
    let published = lake_format::codec::decode_arrow_schema(&store.get("_schema/orders.arrow").await.expect("arrow"))
        .expect("an Arrow IPC schema");
    let names: Vec<&str> = published.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        ["addr", "id", "addr__string", "_tributary_run_id", "_tributary_page", "_tributary_loaded_at", "dt"],
        "data (inline records' keys come sorted), lineage, partition columns"
    );
    assert_eq!(published.metadata().get(lake_format::meta::META_VERSION).map(String::as_str), Some("2"));
}

#[tokio::test]
async fn a_page_of_another_dataset_with_the_same_pipeline_run_and_page_deletes_nothing_of_this_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let config = PersistConfig::default();
    let alpha =
        persist(&store, &Broker::new(), &config, message(0, PersistTarget::new("alpha"), inline(json!([{"a": 1}]))))
            .await
            .expect("alpha");
    let beta =
        persist(&store, &Broker::new(), &config, message(0, PersistTarget::new("beta"), inline(json!([{"b": 1}]))))
            .await
            .expect("beta");
    for key in alpha.data_keys.iter().chain(&beta.data_keys) {
        assert!(store.get(key).await.is_ok(), "{key} must still exist");
    }
}

#[tokio::test]
async fn an_sqs_body_with_unrepresentable_numbers_reaches_persist_intact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let body = r#"{"version":1,"pipeline":"orders","run_id":"20261129T060000Z","run_date":"2026-11-29","page":{"index":0,"count":1},"target":{"dataset":"orders"},"payload":{"kind":"inline","records":[{"id":1,"f":1e400},{"id":2,"big":123456789012345678901234567890,"p":12.50}]}}"#;
    let event: aws_lambda_events::event::sqs::SqsEvent = serde_json::from_value(json!({"Records": [{
        "messageId": "m-1", "receiptHandle": "r-1", "body": body,
        "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
        "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:persist", "awsRegion": "us-east-1"
    }]}))
    .expect("an SQS event");
    let (broker, config) = with_dlq();
    let response = persist::handle_sqs(
        &event,
        Deps { store: &store, queue: &broker, config: &config, run_events: None, catalog: None, tables: None },
    )
    .await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
    let receipt: tributary_core::ledger::PageReceipt = serde_json::from_slice(
        &store.get("_runs/orders/20261129T060000Z/receipts-00000/page-00000.json").await.expect("receipt"),
    )
    .expect("receipt");
    assert_eq!((receipt.records_persisted, receipt.records_quarantined), (1, 1), "1e400 is set aside, the rest lands");
    let raw = String::from_utf8(store.get(&receipt.raw_key).await.expect("raw").to_vec()).expect("utf-8");
    assert!(raw.contains("123456789012345678901234567890") && raw.contains("12.50") && raw.contains("1e400"), "{raw}");
    let letters = broker.receive("persist-dlq", 10).expect("receive");
    assert!(letters.is_empty(), "a value no type holds is the record's problem, not a schema change: {letters:?}");
}

/// A lake where, the first time a page writes the dataset's schema back,
/// another page's schema lands just before: the race of two pages of one
/// dataset converted at once.
struct RacingStore {
    inner: DirStore,
    rival: std::sync::Mutex<Option<Value>>,
}

#[async_trait::async_trait]
impl ObjectStore for RacingStore {
    async fn put(&self, key: &str, body: Bytes) -> Result<(), tributary_core::ports::PortError> {
        self.inner.put(key, body).await
    }
    async fn get(&self, key: &str) -> Result<Bytes, tributary_core::ports::PortError> {
        self.inner.get(key).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<String>, tributary_core::ports::PortError> {
        self.inner.list(prefix).await
    }
    async fn delete(&self, key: &str) -> Result<(), tributary_core::ports::PortError> {
        self.inner.delete(key).await
    }
    async fn get_versioned(&self, key: &str) -> Result<Option<(Bytes, String)>, tributary_core::ports::PortError> {
        self.inner.get_versioned(key).await
    }
    async fn put_if(
        &self,
        key: &str,
        body: Bytes,
        version: Option<&str>,
    ) -> Result<bool, tributary_core::ports::PortError> {
        let rival = self.rival.lock().expect("lock").take();
        if let Some(rival) = rival {
            let bytes = serde_json::to_vec(&rival).expect("rival schema");
            self.inner.put(key, Bytes::from(bytes)).await?;
        }
        self.inner.put_if(key, body, version).await
    }
}

/// The schema another page of `orders` would have written, as Persist
/// writes it: inferred from `records` alone.
fn schema_of(records: &Value) -> Value {
    let text = records.to_string();
    let source = persist::PageSource::Bytes(Bytes::from(text));
    let schema =
        persist::infer_page(&source, &PayloadFormat::default(), &PersistTarget::new("orders"), None).expect("infer");
    serde_json::to_value(&schema).expect("schema json")
}

#[tokio::test]
async fn pages_racing_to_widen_the_schema_keep_both_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rival = schema_of(&json!([{"id": 1, "coupon": "SPRING"}]));
    let store = RacingStore { inner: DirStore::new(dir.path()), rival: std::sync::Mutex::new(Some(rival)) };
    let broker = Broker::new();
    let config = PersistConfig::default();
    let m = message(0, PersistTarget::new("orders"), inline(json!([{"id": 2, "region": "NE"}])));
    persist::persist_page(
        m,
        Deps { store: &store, queue: &broker, config: &config, run_events: None, catalog: None, tables: None },
    )
    .await
    .expect("persisted after converting again");
    let schema = String::from_utf8(store.get("_schema/orders.json").await.expect("schema").to_vec()).expect("utf-8");
    assert!(schema.contains("coupon") && schema.contains("region"), "no lost update: {schema}");
}

#[tokio::test]
async fn a_racing_page_is_converted_again_against_the_rivals_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The rival page made `addr` a struct; this page, converted before it
    // landed, has `addr` as text.
    let rival = schema_of(&json!([{"id": 1, "addr": {"city": "Recife"}}]));
    let store = RacingStore { inner: DirStore::new(dir.path()), rival: std::sync::Mutex::new(Some(rival)) };
    let (broker, config) = with_dlq();
    let m = message(0, PersistTarget::new("orders"), inline(json!([{"id": 2, "addr": "Rua A, 1"}, {"id": 3}])));
    let receipt = persist::persist_page(
        m,
        Deps { store: &store, queue: &broker, config: &config, run_events: None, catalog: None, tables: None },
    )
    .await
    .expect("persisted, not failed");
    assert_eq!((receipt.records_persisted, receipt.records_quarantined), (2, 0), "as if the pages ran in turn");
    let (table, _) = persist::read_schema(&store, "_schema/orders.json").await.expect("read").expect("a schema");
    let persist::Ty::Struct { fields } = &table.table else { panic!("a struct") };
    let columns: Vec<(&str, String)> = fields.list.iter().map(|f| (f.name.as_str(), f.ty.name())).collect();
    assert_eq!(
        columns,
        [("addr", "struct".to_string()), ("id", "int64".into()), ("addr__string", "string".into())],
        "the dataset keeps the rival's struct, the text goes beside it"
    );
    assert!(broker.receive("persist-dlq", 10).expect("receive").is_empty());
}

#[tokio::test]
async fn a_declared_type_changed_in_the_spec_is_reported_and_the_dataset_keeps_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let (broker, config) = with_dlq();
    let declared = |card: &str| {
        let mut target = PersistTarget::new("orders");
        target.schema = serde_json::from_value(json!([{"name": "card", "type": card}])).expect("declared");
        target
    };
    let mut receipts = Vec::new();
    for (page, card, brand) in [(0, "json", "visa"), (1, "int64", "elo")] {
        let records = inline(json!([{"id": page, "card": {"brand": brand}}]));
        receipts
            .push(persist(&store, &broker, &config, message(page, declared(card), records)).await.expect("persisted"));
    }
    let receipt = &receipts[1];
    assert_eq!((receipt.records_persisted, receipt.records_quarantined), (1, 0));
    let letters = broker.receive("persist-dlq", 10).expect("receive");
    assert_eq!(letters.len(), 1, "the changed declaration is alerted, not ignored");
    let reason = letters[0].message_attributes.get(ATTR_ERROR).and_then(|a| a.string_value.clone()).expect("reason");
    assert!(
        reason.contains("/card: the dataset declares json, the spec now declares int64")
            && reason.contains("no records quarantined"),
        "{reason}"
    );
    let schema = String::from_utf8(store.get("_schema/orders.json").await.expect("schema").to_vec()).expect("utf-8");
    assert!(schema.contains("json") && !schema.contains("int64\""), "the dataset keeps json: {schema}");
}

#[tokio::test]
async fn two_pages_completing_a_run_together_both_succeed_and_keep_every_row() {
    // Both pages' invocations saw every receipt and both complete the run;
    // the first coalesced and deleted the page files before the second read
    // them. The second must not fail (a NotFound would be permanent: a DLQ
    // message and an alert for a run that is fine).
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let config = PersistConfig::default();
    let mut receipts = Vec::new();
    for page in 1..=3 {
        let m = message(page, PersistTarget::new("orders"), inline(json!([{"i": page}, {"i": page + 10}])));
        receipts.push(persist(&store, &Broker::new(), &config, m).await.expect("page"));
    }
    let coalescer = persist::coalesce::RunCoalescer {
        store: &store,
        table_format: contracts::TableFormat::Parquet,
        tables: None,
        write: tributary_core::tables::RunWrite::Append,
        bin_bytes: persist::coalesce::COALESCE_BELOW_BYTES,
        replay: None,
    };
    let coalesced = "orders/dt=2026-11-29/orders-20261129T060000Z.parquet";
    assert_eq!(coalescer.compact(&receipts, None).await.expect("first completion").files, [coalesced]);
    assert_eq!(coalescer.compact(&receipts, None).await.expect("the rival completion").files, [coalesced]);
    let parquet: Vec<String> =
        store.list("orders/").await.expect("list").into_iter().filter(|k| k.ends_with(".parquet")).collect();
    assert_eq!(parquet, [coalesced], "the page files are gone, the coalesced file stays");
    let bytes = store.get(coalesced).await.expect("coalesced file");
    let rows: usize = test_support::lake::parquet_batches(bytes).iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 6, "every row of the three pages");
    // A page file lost with no coalesced file is retried, not dead-lettered at once.
    store.delete(coalesced).await.expect("delete");
    let err = coalescer.compact(&receipts, None).await.expect_err("pages and coalesced file gone");
    assert!(err.is_retryable(), "{err}");
    assert!(err.to_string().contains("orders-20261129T060000Z-0000"), "{err}");
}

#[tokio::test]
async fn a_run_too_big_for_one_file_is_packed_into_several_in_page_order() {
    // Seven pages of one partition, each a page file of about the same
    // size: bins of under 2.5 page files hold two pages each, so pages
    // 1-2, 3-4, 5-6 are coalesced and page 7, alone in its bin, is kept.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let config = PersistConfig::default();
    let mut receipts = Vec::new();
    for page in 1..=7_u32 {
        let records: Vec<Value> =
            (0..50).map(|i| json!({"page": page, "i": i, "note": format!("page {page} record {i}")})).collect();
        let mut m = message(page, PersistTarget::new("orders"), inline(Value::Array(records)));
        m.page.count = 7;
        receipts.push(persist(&store, &Broker::new(), &config, m).await.expect("page"));
    }
    let mut sizes = Vec::new();
    for receipt in &receipts {
        for key in &receipt.data_keys {
            sizes.push(store.get(key).await.expect("page file").len() as u64);
        }
    }
    let largest = *sizes.iter().max().expect("page files");
    let coalescer = persist::coalesce::RunCoalescer {
        store: &store,
        table_format: contracts::TableFormat::Parquet,
        tables: None,
        write: tributary_core::tables::RunWrite::Append,
        bin_bytes: largest * 5 / 2,
        replay: None,
    };
    let files = coalescer.compact(&receipts, None).await.expect("completion").files;
    let folder = "orders/dt=2026-11-29";
    let expected = vec![
        format!("{folder}/orders-20261129T060000Z-00007.parquet"),
        format!("{folder}/orders-20261129T060000Z.00001.parquet"),
        format!("{folder}/orders-20261129T060000Z.00002.parquet"),
        format!("{folder}/orders-20261129T060000Z.parquet"),
    ];
    let kept_page = &receipts[6].data_keys[0];
    assert_eq!(&expected[0], kept_page, "the last page, alone in its bin, is kept as it is");
    assert_eq!(files, expected, "three coalesced files and the kept page file, sorted");
    assert_eq!(coalescer.compact(&receipts, None).await.expect("a redelivered completion").files, expected);
    let listed: Vec<String> =
        store.list("orders/").await.expect("list").into_iter().filter(|k| k.ends_with(".parquet")).collect();
    assert_eq!(listed, expected, "the replaced page files are gone");
    // Each coalesced file holds its two pages' rows, in page order.
    for (key, pages) in [(&expected[3], [1, 2]), (&expected[1], [3, 4]), (&expected[2], [5, 6])] {
        let batches = test_support::lake::parquet_batches(store.get(key).await.expect("coalesced file"));
        let mut seen = Vec::new();
        for batch in &batches {
            let column = batch.column_by_name("page").expect("page column");
            let column = column.as_any().downcast_ref::<arrow_array::Int64Array>().expect("int64");
            seen.extend(column.iter().flatten());
        }
        let want: Vec<i64> = pages.iter().flat_map(|&p| std::iter::repeat_n(i64::from(p), 50)).collect();
        assert_eq!(seen, want, "{key}");
    }
}

/// A trial finding: on a dataset's first run, an empty page persisted
/// before the first page with records made a table of no columns, and
/// that page then reported every column as added (a schema-change alert).
/// A page without rows makes no table and changes none.
#[tokio::test]
async fn an_empty_page_first_makes_no_table_so_the_first_records_change_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let (broker, config) = with_dlq();
    let target = PersistTarget::new("orders");
    let empty = persist(&store, &broker, &config, message(2, target.clone(), inline(json!([])))).await.expect("empty");
    assert_eq!((empty.records_in, empty.records_persisted), (0, 0));
    assert!(store.get(&tributary_core::keys::schema_key("orders")).await.is_err(), "no table made of no rows");
    let records = inline(json!([{"id": 1, "amount": 2.5}, {"id": 2, "amount": 3}]));
    let first = persist(&store, &broker, &config, message(0, target.clone(), records)).await.expect("records");
    assert_eq!(first.records_persisted, 2);
    assert!(first.schema_changes.is_empty(), "the dataset's first records make its table: {:?}", first.schema_changes);
    assert!(store.get(&tributary_core::keys::schema_key("orders")).await.is_ok(), "their page made the table");
    let later = persist(&store, &broker, &config, message(1, target, inline(json!([])))).await.expect("empty again");
    assert!(later.schema_changes.is_empty());
    let schema: Value =
        serde_json::from_slice(&store.get(&tributary_core::keys::schema_key("orders")).await.expect("schema"))
            .expect("json");
    assert!(schema.to_string().contains("amount"), "an empty page leaves the table as it is: {schema}");
}
