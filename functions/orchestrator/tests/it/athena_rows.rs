//! The athena strategy through the Orchestrator's handler: a scheduled run
//! sends one query; each query row arriving on the orchestrator queue (raw
//! or in the SNS envelope) becomes one request; a row without a template
//! value fails alone.

use crate::common;

use adapters::local::Broker;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use chrono::{TimeZone, Utc};
use contracts::{QueryMessage, RequestMessage};
use serde_json::{Value, json};

const SPEC: &str = r#"{"version":1,"pipeline":"tx","strategy":{"kind":"athena",
  "query":"SELECT id FROM customers WHERE dt = ?","parameters":["{run_date}"],"database":"lake"},
  "request":{"url":"http://127.0.0.1:9/customers/{id}/transactions","records_pointer":"/data"},
  "target":{"dataset":"tx"}}"#;

fn config() -> orchestrator::OrchestratorConfig {
    common::config()
}

fn broker() -> Broker {
    common::broker(&["request", "athena"])
}

fn bodies(broker: &Broker, queue: &str) -> Vec<Value> {
    broker
        .receive(queue, 10)
        .expect("receive")
        .into_iter()
        .map(|r| serde_json::from_str(r.body.as_deref().expect("body")).expect("json"))
        .collect()
}

fn record(id: &str, body: String) -> SqsMessage {
    let mut record = SqsMessage::default();
    record.message_id = Some(id.into());
    record.body = Some(body);
    record.event_source = Some("aws:sqs".into());
    record.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:tributary-orchestrator".into());
    record
}

#[tokio::test]
async fn rows_become_requests_and_a_row_without_a_value_fails_alone() {
    let broker = broker();
    let config = config();
    let deps = orchestrator::Deps { queue: &broker, config: &config, ledger: None };
    let scheduled = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time");
    let event = json!({"source": "aws.scheduler", "time": "2026-11-29T06:00:00Z", "detail": serde_json::from_str::<Value>(SPEC).expect("spec")});
    let started = orchestrator::handle(event, scheduled, common::deadline(), deps).await.expect("start");
    assert_eq!(started["strategy"], "athena");
    let queries = bodies(&broker, "athena");
    assert_eq!(queries.len(), 1);
    let query: QueryMessage = serde_json::from_value(queries[0].clone()).expect("query message");
    assert_eq!(query.parameters, ["2026-11-29"], "{{run_date}} bound as a parameter, not into the SQL");
    assert!(bodies(&broker, "request").is_empty());

    let row = |index: u64, row: Value| {
        json!({"version": 1, "pipeline": "tx", "run_id": "20261129T060000Z", "run_date": "2026-11-29",
               "row_index": index, "row": row, "context": query.context})
        .to_string()
    };
    let envelope =
        json!({"Type": "Notification", "MessageId": "m", "TopicArn": "arn:aws:sns:us-east-1:1:query-results",
                          "Message": row(1, json!({"id": 8}))})
        .to_string();
    let mut sqs = SqsEvent::default();
    sqs.records = vec![
        record("raw", row(0, json!({"id": 7}))),
        record("enveloped", envelope),
        record("no-id", row(2, json!({"name": "x"}))),
    ];
    let response = orchestrator::handle_sqs(&sqs, common::deadline(), deps).await;
    let failed: Vec<_> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
    assert_eq!(failed, ["no-id"]);
    let mut requests: Vec<RequestMessage> =
        bodies(&broker, "request").into_iter().map(|b| serde_json::from_value(b).expect("request")).collect();
    requests.sort_by_key(|r| r.page.map(|p| p.index));
    let urls: Vec<&str> = requests.iter().map(|r| r.http.url.as_str()).collect();
    assert_eq!(urls, ["http://127.0.0.1:9/customers/7/transactions", "http://127.0.0.1:9/customers/8/transactions"]);
    assert_eq!(requests[1].page.map(|p| (p.index, p.count)), Some((1, 0)));
}

#[tokio::test]
async fn only_rows_of_the_orchestrators_own_query_plan_requests() {
    let broker = broker();
    let config = config();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = adapters::local::DirStore::new(dir.path());
    let ledger = tributary_core::ledger::RunLedger { store: &store, events: None };
    let deps = orchestrator::Deps { queue: &broker, config: &config, ledger: Some(ledger) };
    let scheduled = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time");
    let event = json!({"source": "aws.scheduler", "time": "2026-11-29T06:00:00Z", "detail": serde_json::from_str::<Value>(SPEC).expect("spec")});
    orchestrator::handle(event, scheduled, common::deadline(), deps).await.expect("start");
    let query: QueryMessage = serde_json::from_value(bodies(&broker, "athena").remove(0)).expect("query message");
    let row = |context: &Value, run_id: &str| -> contracts::QueryRow {
        contracts::decode(json!({"version": 1, "pipeline": "tx", "run_id": run_id, "run_date": "2026-11-29",
               "row_index": 0, "row": {"id": 7}, "context": context}))
        .expect("row")
    };
    // A forged row: the run's spec with a secret, pointed elsewhere.
    let mut forged = query.context.clone();
    forged["request"]["url"] = json!("https://attacker.example/{id}");
    let err = orchestrator::on_query_row(row(&forged, "20261129T060000Z"), deps).await.expect_err("forged");
    assert!(err.to_string().contains("query row") && err.to_string().contains("not the one sent"), "{err}");
    let err = orchestrator::on_query_row(row(&query.context, "20260101T000000Z"), deps).await.expect_err("no run");
    assert!(err.to_string().contains("nothing was sent for this run"), "{err}");
    assert!(tributary_core::batch::RecordError::is_permanent(&err));
    assert!(bodies(&broker, "request").is_empty(), "nothing planned for either");
    orchestrator::on_query_row(row(&query.context, "20261129T060000Z"), deps).await.expect("a genuine row");
    assert_eq!(bodies(&broker, "request").len(), 1);
}
