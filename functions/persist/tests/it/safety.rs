//! Persist's bounds against hostile or broken pages, through the handler
//! (`persist_page`, and `handle_sqs` where the batch's answer matters) on a
//! directory lake: claim checks only under the message's own pipeline, one bad
//! record quarantined alone, bounded decompression and records per page, and a
//! cap on a dataset's columns.

use aws_lambda_events::event::sqs::SqsEvent;
use bytes::Bytes;
use chrono::NaiveDate;
use serde_json::json;

use adapters::local::{Broker, DirStore};
use contracts::{PageRef, Payload, PersistMessage, PersistTarget, RunId, V1};
use persist::{Deps, PageLimits, PersistConfig, PersistError};
use tributary_core::batch::RecordError;
use tributary_core::ledger::PageReceipt;
use tributary_core::ports::ObjectStore;

fn message(pipeline: &str, dataset: &str, payload: Payload) -> PersistMessage {
    PersistMessage {
        version: V1,
        pipeline: pipeline.into(),
        run_id: RunId::new("20261129T060000Z").expect("run id"),
        run_date: NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        page: PageRef { index: 0, count: 1 },
        target: PersistTarget::new(dataset),
        payload,
        fetched_at: None,
    }
}

/// An inline payload of exactly this JSON array text (records a
/// `serde_json::Value` cannot hold travel as text).
fn inline_text(text: &str) -> Payload {
    Payload::Inline { records: contracts::RawRecords::from_text(text.to_string()).expect("a JSON array") }
}

fn object(key: &str) -> Payload {
    Payload::Object { key: key.into(), format: contracts::PayloadFormat::default() }
}

async fn persist(store: &DirStore, config: &PersistConfig, m: PersistMessage) -> Result<PageReceipt, PersistError> {
    persist::persist_page(
        m,
        Deps { store, queue: &Broker::new(), config, run_events: None, catalog: None, tables: None },
    )
    .await
}

/// An SQS event of one record per body, as Lambda delivers it.
fn sqs_event(bodies: &[String]) -> SqsEvent {
    let records: Vec<serde_json::Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| {
            json!({
                "messageId": format!("m-{i}"), "receiptHandle": format!("r-{i}"), "body": body,
                "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
                "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:persist", "awsRegion": "us-east-1"
            })
        })
        .collect();
    serde_json::from_value(json!({ "Records": records })).expect("an SQS event")
}

/// A broker with Persist's DLQ, and a config that dead-letters into it.
fn with_dlq() -> (Broker, PersistConfig) {
    let broker = Broker::new();
    broker.create_queue(adapters::local::QueueConfig {
        name: "persist-dlq".into(),
        visibility_timeout: std::time::Duration::from_secs(30),
        max_message_bytes: 262_144,
        redrive: None,
    });
    let config = PersistConfig {
        dead_letter: Some(tributary_core::batch::DeadLetterTarget { dlq: "persist-dlq".into(), max_receive_count: 5 }),
        ..PersistConfig::default()
    };
    (broker, config)
}

/// The reasons of the dead letters in Persist's DLQ.
fn dead_letter_reasons(broker: &Broker) -> Vec<String> {
    let letters = broker.receive("persist-dlq", 10).expect("receive");
    letters
        .iter()
        .map(|letter| {
            let reason = letter.message_attributes.get(tributary_core::batch::ATTR_ERROR);
            reason.and_then(|a| a.string_value.clone()).expect("a reason")
        })
        .collect()
}

/// A quarantine line's index and reason; the record is kept as written,
/// which a `serde_json::Value` cannot always hold (a lone surrogate).
#[derive(serde::Deserialize)]
struct QuarantineLine {
    index: u64,
    reason: String,
    #[allow(dead_code)]
    record: serde::de::IgnoredAny,
}

/// The quarantine file's lines as (index, reason).
async fn quarantined(store: &DirStore, receipt: &PageReceipt) -> Vec<(u64, String)> {
    let key = receipt.quarantine_key.as_deref().expect("a quarantine file");
    let bytes = store.get(key).await.expect("quarantine file");
    std::str::from_utf8(&bytes)
        .expect("UTF-8")
        .lines()
        .map(|line| {
            let line: QuarantineLine = serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}"));
            (line.index, line.reason)
        })
        .collect()
}

/// The receipt of page 0 of run 20261129T060000Z of `pipeline`.
async fn receipt(store: &DirStore, pipeline: &str) -> PageReceipt {
    let key = format!("_runs/{pipeline}/20261129T060000Z/receipts-00000/page-00000.json");
    serde_json::from_slice(&store.get(&key).await.expect("receipt")).expect("a PageReceipt")
}

/// The dataset's table schema as stored, as text.
async fn schema_text(store: &DirStore, dataset: &str) -> String {
    String::from_utf8(store.get(&format!("_schema/{dataset}.json")).await.expect("schema").to_vec()).expect("utf-8")
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

fn limits(limits: PageLimits) -> PersistConfig {
    PersistConfig { limits, ..PersistConfig::default() }
}

#[tokio::test]
async fn a_claim_check_is_read_only_under_the_messages_own_pipeline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let config = PersistConfig::default();
    // Another pipeline's dataset, with its raw page and a claim check.
    let crm = persist(&store, &config, message("crm", "customers", inline_text(r#"[{"ssn": "123-45-6789"}]"#)))
        .await
        .expect("crm's page");
    let crm_claim = tributary_core::keys::claim_key("crm", &RunId::new("20261129T060000Z").expect("run"), 0);
    store.put(&crm_claim, Bytes::from_static(br#"[{"ssn": "987-65-4321"}]"#)).await.expect("put");
    let refused = [
        (crm.raw_key.as_str(), "is not a claim check"),
        (crm_claim.as_str(), "is another pipeline's claim check"),
        ("_claims/orders/../crm/20261129T060000Z/page-00000.json", "has an empty, `.` or `..` segment"),
        ("_claims/orders/./x.json", "has an empty, `.` or `..` segment"),
        ("_claims/orders//x.json", "has an empty, `.` or `..` segment"),
        ("_claims/orders/", "has an empty, `.` or `..` segment"),
        ("_claims/orders/a\\..\\..\\x.json", "holds a backslash or a control character"),
        ("/_claims/orders/x.json", "is absolute"),
        ("", "is empty"),
        ("_schema/customers.json", "is not a claim check"),
    ];
    for (key, problem) in refused {
        let err = persist(&store, &config, message("orders", "orders", object(key))).await.expect_err(key);
        assert!(err.is_permanent(), "{key}: {err}");
        let text = err.to_string();
        assert!(text.starts_with(&format!("payload.key {key:?} {problem}: ")), "{key}: {text}");
        assert!(text.contains("under _claims/orders/"), "{text}");
    }
    assert!(store.list("raw/orders/").await.expect("list").is_empty(), "a refused message writes nothing");
    assert!(store.list("orders/").await.expect("list").is_empty());

    // Its own claim check is read; and a replay of its raw envelope reads its raw copy.
    let own = "_claims/orders/20261129T060000Z/page-00000.json";
    store.put(own, Bytes::from_static(br#"[{"id": 1}, {"id": 2}]"#)).await.expect("put");
    let receipt = persist(&store, &config, message("orders", "orders", object(own))).await.expect("own claim");
    assert_eq!(receipt.records_persisted, 2);
    let raw: PersistMessage =
        serde_json::from_slice(&store.get(&receipt.raw_key).await.expect("raw")).expect("the raw envelope");
    let replayed = persist(&store, &config, raw).await.expect("its own raw copy");
    assert_eq!(replayed.records_persisted, 2);

    // Through the batch: dead-lettered at once, with the reason.
    let (broker, config) = with_dlq();
    let body = contracts::encode(&message("orders", "orders", object(&crm.raw_key))).expect("encode");
    let response = persist::handle_sqs(
        &sqs_event(&[body]),
        Deps { store: &store, queue: &broker, config: &config, run_events: None, catalog: None, tables: None },
    )
    .await;
    assert!(response.batch_item_failures.is_empty(), "dead-lettered, not redelivered");
    let reasons = dead_letter_reasons(&broker);
    assert_eq!(reasons.len(), 1);
    assert!(reasons[0].contains(&format!("payload.key {:?} is not a claim check", crm.raw_key)), "{reasons:?}");
}

#[tokio::test]
async fn a_pipeline_name_that_is_no_key_segment_is_refused_before_the_claim_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    for pipeline in ["../crm", "crm/x", "", "CRM"] {
        let key = format!("_claims/{pipeline}/20261129T060000Z/page-00000.json");
        let err = persist(&store, &PersistConfig::default(), message(pipeline, "orders", object(&key)))
            .await
            .expect_err(pipeline);
        assert!(err.is_permanent(), "{err}");
        assert!(err.to_string().contains(&format!("`pipeline` = {pipeline:?}")), "{err}");
    }
    assert!(store.list("").await.expect("list").is_empty(), "nothing read or written");
}

#[tokio::test]
async fn a_lone_surrogate_key_or_deep_nesting_quarantines_that_record_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let deep = |levels: usize| format!("{}1{}", "{\"x\":".repeat(levels), "}".repeat(levels));
    let text = format!(
        r#"[{{"id": 1}}, {{"\ud800": 1, "id": 2}}, {}, {{"id": 4, "o": {{"a\udc00b": true}}}}, {}, {{"id": 6}}]"#,
        deep(200),
        deep(1000),
    );
    let receipt = persist(&store, &PersistConfig::default(), message("orders", "orders", inline_text(&text)))
        .await
        .expect("the page is persisted, not failed");
    assert_eq!((receipt.records_in, receipt.records_persisted, receipt.records_quarantined), (6, 2, 4));
    let reasons = quarantined(&store, &receipt).await;
    let indexes: Vec<u64> = reasons.iter().map(|(index, _)| *index).collect();
    assert_eq!(indexes, [1, 2, 3, 4]);
    assert!(reasons[0].1.contains(r#"key "\ud800""#) && reasons[0].1.contains("not valid Unicode"), "{reasons:?}");
    assert_eq!(reasons[1].1, "record 2 is nested 200 levels deep, more than 32");
    assert!(reasons[2].1.contains(r#"key "a\udc00b" at /o"#), "{reasons:?}");
    assert_eq!(reasons[3].1, "record 4 is nested 1000 levels deep, more than 32", "past the tokenizer's 512 too");
    let schema = schema_text(&store, "orders").await;
    assert!(!schema.contains('\u{FFFD}') && !schema.contains("\"x\"") && !schema.contains("\"o\""), "{schema}");
}

/// A claim-check object another team wrote, whose records hold bytes
/// that are not UTF-8: the record with one in a string is quarantined
/// alone, naming the byte; one outside any string fails the page naming
/// the record.
#[tokio::test]
async fn a_claim_check_with_a_byte_not_utf8_in_a_string_quarantines_that_record_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let claim = "_claims/orders/20261129T060000Z/page-00000.json";
    let mut text = b"{\"id\": 1, \"name\": \"Ana\"}\n{\"id\": 2, \"name\": \"Jos".to_vec();
    text.extend_from_slice(b"\xe9\"}\n{\"id\": 3, \"name\": \"Bo\"}\n");
    store.put(claim, Bytes::from(text)).await.expect("put");
    let receipt = persist(&store, &PersistConfig::default(), message("orders", "orders", object(claim)))
        .await
        .expect("the page is persisted, not failed");
    assert_eq!((receipt.records_in, receipt.records_persisted, receipt.records_quarantined), (3, 2, 1));
    let reasons = quarantined(&store, &receipt).await;
    assert_eq!(reasons.len(), 1);
    assert_eq!(reasons[0].0, 1);
    assert!(reasons[0].1.contains("/name") && reasons[0].1.contains("0xe9"), "{reasons:?}");

    let outside = b"{\"id\": 1}\n{\"id\": 2\xe9}\n".to_vec();
    store.put(claim, Bytes::from(outside)).await.expect("put");
    let err = persist(&store, &PersistConfig::default(), message("orders", "orders", object(claim)))
        .await
        .expect_err("not JSON");
    assert!(err.to_string().contains("outside any string"), "{err}");
}

#[tokio::test]
async fn an_sqs_body_with_a_record_nested_1000_deep_fails_nothing_but_that_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let deep = format!("{}1{}", "[".repeat(1000), "]".repeat(1000));
    let text = format!(r#"[{{"id": 1}}, {{"deep": {deep}}}, {{"id": 3}}]"#);
    let body = contracts::encode(&message("orders", "orders", inline_text(&text))).expect("encode");
    let config = PersistConfig::default();
    let response = persist::handle_sqs(
        &sqs_event(&[body]),
        Deps { store: &store, queue: &Broker::new(), config: &config, run_events: None, catalog: None, tables: None },
    )
    .await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
    let receipt = receipt(&store, "orders").await;
    assert_eq!((receipt.records_persisted, receipt.records_quarantined), (2, 1));
    assert_eq!(quarantined(&store, &receipt).await, [(1, "record 1 is nested 1001 levels deep, more than 32".into())]);
}

#[tokio::test]
async fn a_gzip_claim_check_is_inflated_only_up_to_max_page_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    // 3,072 gzip members of 1 MiB of `x` each, in one record: 3 MB that
    // inflate to one string of 3 GiB (this used to abort Persist).
    let mib = gzip(&vec![b'x'; 1 << 20]);
    let mut bomb = gzip(br#"[{"s": ""#);
    for _ in 0..3072 {
        bomb.extend_from_slice(&mib);
    }
    bomb.extend(gzip(br#""}]"#));
    assert!(bomb.len() < 4 << 20, "{} bytes", bomb.len());
    let claim = "_claims/orders/20261129T060000Z/page-00000.json.gz";
    store.put(claim, Bytes::from(bomb)).await.expect("put");
    let config = limits(PageLimits { max_page_bytes: 8 << 20, ..PageLimits::default() });
    let err = persist(&store, &config, message("orders", "orders", object(claim))).await.expect_err("past the bound");
    assert!(err.is_permanent(), "{err}");
    let text = err.to_string();
    assert!(text.contains("more than 8388608 bytes (after decompression), the most MAX_PAGE_BYTES allows"), "{text}");
    assert!(store.list("orders/").await.expect("list").is_empty(), "no data written");

    // Within the bound, a gzip claim check is read whole.
    let records: Vec<String> = (0..1000).map(|i| format!(r#"{{"id": {i}, "s": "{}"}}"#, "y".repeat(100))).collect();
    store.put(claim, Bytes::from(gzip(records.join("\n").as_bytes()))).await.expect("put");
    let receipt = persist(&store, &config, message("orders", "orders", object(claim))).await.expect("within");
    assert_eq!(receipt.records_persisted, 1000);
}

#[tokio::test]
async fn a_page_of_more_records_than_max_page_records_fails_naming_the_cap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let config = limits(PageLimits { max_page_records: 1000, ..PageLimits::default() });
    let page = |n: usize| format!("[{}]", (0..n).map(|i| format!(r#"{{"i":{i}}}"#)).collect::<Vec<_>>().join(","));
    let err = persist(&store, &config, message("orders", "orders", inline_text(&page(1001))))
        .await
        .expect_err("one record too many");
    assert!(err.is_permanent(), "{err}");
    assert!(err.to_string().contains("the page holds more than 1000 records"), "{err}");
    assert!(store.list("orders/").await.expect("list").is_empty(), "no data written");
    let receipt =
        persist(&store, &config, message("orders", "orders", inline_text(&page(1000)))).await.expect("at the cap");
    assert_eq!(receipt.records_persisted, 1000);
}

#[tokio::test]
async fn records_that_would_widen_the_dataset_past_max_columns_are_quarantined_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let (broker, config) = with_dlq();
    let config = PersistConfig { limits: PageLimits { max_columns: 10, ..PageLimits::default() }, ..config };
    let deps = Deps { store: &store, queue: &broker, config: &config, run_events: None, catalog: None, tables: None };
    let first = message("orders", "orders", inline_text(r#"[{"id": 1, "a": 1}]"#));
    persist::persist_page(first, deps).await.expect("first page: id, a");
    let wide: String = (0..20).map(|k| format!(r#""k{k}": {k}, "#)).collect();
    let text = format!(
        r#"[{{"id": 2, "b": true}}, {{{wide}"id": 3}}, {{"id": 4, "c": "x"}}, {{"id": 5, "a": "text"}},
            {{"id": 6, "d": {{"e": 1, "f": 2, "g": 3, "h": 4, "i": 5, "j": 6}}}}, {{"id": 7, "k0": 1}}]"#
    );
    let mut second = message("orders", "orders", inline_text(&text));
    second.page.index = 1;
    second.page.count = 2;
    let receipt = persist::persist_page(second, deps).await.expect("persisted, not failed");
    assert_eq!((receipt.records_in, receipt.records_persisted, receipt.records_quarantined), (6, 4, 2));
    let reasons = quarantined(&store, &receipt).await;
    assert_eq!(
        reasons,
        [
            (
                1,
                "record 1 would take the dataset to at least 23 columns, more than MAX_COLUMNS (10); it is \
                 quarantined and the schema is not widened"
                    .to_string()
            ),
            (
                4,
                "record 4 would take the dataset to 12 columns, more than MAX_COLUMNS (10); it is quarantined and \
                 the schema is not widened"
                    .to_string()
            ),
        ]
    );
    let (table, _) = persist::read_schema(&store, "_schema/orders.json").await.expect("read").expect("a schema");
    let persist::Ty::Struct { fields } = &table.table else { panic!("a struct") };
    let names: Vec<&str> = fields.list.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["id", "a", "b", "c", "a__string", "k0"], "widened by the kept records only");
    assert_eq!(table.table.columns(), 6);
    let reasons = dead_letter_reasons(&broker);
    assert_eq!(reasons.len(), 1, "one alert for the page: {reasons:?}");
    assert!(reasons[0].contains("MAX_COLUMNS: the dataset would have more than 10 columns"), "{reasons:?}");
    assert!(reasons[0].contains("2 records quarantined"), "{reasons:?}");
}

#[tokio::test]
async fn a_record_of_5000_distinct_keys_is_quarantined_under_the_default_cap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let wide: String = (0..5000).map(|k| format!(r#""key_{k}": {k}, "#)).collect();
    let text = format!(r#"[{{"id": 1}}, {{{wide}"id": 2}}, {{"id": 3, "name": "x"}}]"#);
    let receipt = persist(&store, &PersistConfig::default(), message("orders", "orders", inline_text(&text)))
        .await
        .expect("persisted");
    assert_eq!((receipt.records_persisted, receipt.records_quarantined), (2, 1));
    let reasons = quarantined(&store, &receipt).await;
    assert_eq!(reasons.len(), 1);
    assert!(
        reasons[0]
            .1
            .starts_with("record 1 would take the dataset to at least 5001 columns, more than MAX_COLUMNS (1000)"),
        "{reasons:?}"
    );
    let (table, _) = persist::read_schema(&store, "_schema/orders.json").await.expect("read").expect("a schema");
    assert_eq!(table.table.columns(), 2, "id and name");
}

/// An Iceberg dataset's page, with no table committer configured (the
/// Lambda until the Glue catalog is wired): it fails permanently, naming
/// `target.table_format`, and no data file is written (never plain Parquet).
#[tokio::test]
async fn an_iceberg_page_without_a_committer_fails_permanently_and_writes_no_parquet() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let mut m = message("p", "orders", inline_text(r#"[{"id": 1}]"#));
    m.target.table_format = contracts::TableFormat::Iceberg;
    let err = persist(&store, &PersistConfig::default(), m).await.expect_err("no committer");
    assert!(err.is_permanent());
    assert!(err.to_string().contains("target.table_format"), "{err}");
    assert!(store.list("orders/").await.expect("list").is_empty(), "no Parquet written");
}

/// A page of a completed run: delivered again (the same records), it
/// returns its receipt and writes nothing; fetched anew with other records
/// (a re-run of the same scheduled time), it fails permanently (to the DLQ,
/// with an alert) naming the run and the ways out, and the raw copy keeps
/// the records the lake holds. Inline and claim-check payloads alike.
#[tokio::test]
async fn a_completed_run_takes_a_redelivery_but_refuses_a_new_fetch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let config = PersistConfig::default();
    let run_id = RunId::new("20261129T060000Z").expect("run id");
    let expected = tributary_core::ledger::Expected {
        pipeline: "p".into(),
        run_id: run_id.clone(),
        run_date: NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        pages: 1,
        truncated: None,
        records: None,
    };
    tributary_core::ledger::record_expected(&store, &expected).await.expect("expected");
    let first = message("p", "d", inline_text(r#"[{"id": 1, "name": "bad"}]"#));
    let receipt = persist(&store, &config, first.clone()).await.expect("first fetch");
    assert!(store.get(&tributary_core::keys::success_key("p", &run_id)).await.is_ok(), "the run is complete");
    let raw_before = store.get(&receipt.raw_key).await.expect("raw copy");

    assert_eq!(persist(&store, &config, first).await.expect("redelivery"), receipt, "the same receipt");
    let again = message("p", "d", inline_text(r#"[{"id": 1, "name": "fixed"}, {"id": 2, "name": "new"}]"#));
    let err = persist(&store, &config, again).await.expect_err("a new fetch of a completed run");
    assert!(err.is_permanent(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("run 20261129T060000Z of pipeline p is complete") && text.contains("tributary replay"),
        "{text}"
    );
    assert_eq!(store.get(&receipt.raw_key).await.expect("raw copy"), raw_before, "the raw copy is kept");

    // A claim check: the same object bytes are a redelivery, others a new fetch.
    store
        .put("_claims/p/20261129T060000Z/00000.json", Bytes::from_static(br#"[{"id": 1, "name": "bad"}]"#))
        .await
        .expect("put");
    let err = persist(&store, &config, message("p", "d", object("_claims/p/20261129T060000Z/00000.json")))
        .await
        .expect_err("an inline page now sent as a claim check is another fetch");
    assert!(matches!(err, PersistError::CompletedRun { .. }), "{err}");
}
