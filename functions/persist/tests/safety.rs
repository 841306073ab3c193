//! Persist's bounds against hostile or broken pages, through the handler
//! (`persist_page`, and `handle_sqs` where the batch's answer matters) on a
//! directory lake: claim checks only under the message's own pipeline.

use aws_lambda_events::event::sqs::SqsEvent;
use bytes::Bytes;
use chrono::NaiveDate;
use serde_json::json;

use adapters::local::{Broker, DirStore};
use contracts::{PageRef, Payload, PersistMessage, PersistTarget, RunId, V1};
use persist::{Deps, PersistConfig, PersistError};
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
    persist::persist_page(m, Deps { store, queue: &Broker::new(), config, run_events: None, catalog: None }).await
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
        Deps { store: &store, queue: &broker, config: &config, run_events: None, catalog: None },
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
