//! Notify's handler over `events/dlq-batch.sqs.json`, publishing to a local
//! alerts topic whose file subscription stands in for e-mail/SMS.

use std::path::{Path, PathBuf};

use aws_lambda_events::event::sqs::SqsEvent;
use serde_json::json;

use adapters::local::{Broker, Subscription};
use contracts::Alert;
use notify::{Deps, EXCERPT_BYTES, NotifyConfig};

const DLQ_BATCH: &str = include_str!("../../../../events/dlq-batch.sqs.json");

const REQUEST_RECORD: &str = "c0ffee00-0001-4a4a-9b9b-request-page-2";
const NOT_JSON_RECORD: &str = "c0ffee00-0002-4a4a-9b9b-not-json";
const EMPTY_RECORD: &str = "c0ffee00-0003-4a4a-9b9b-empty-body";

struct Env {
    _dir: tempfile::TempDir,
    sink: PathBuf,
    broker: Broker,
    config: NotifyConfig,
}

impl Env {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let sink = dir.path().join("alerts.jsonl");
        let broker = Broker::new();
        broker.create_topic("alerts", vec![Subscription::File { path: sink.clone() }]);
        Self {
            _dir: dir,
            sink,
            broker,
            config: NotifyConfig { alerts_topic: "alerts".into(), metrics: Default::default() },
        }
    }

    fn deps(&self) -> Deps<'_> {
        Deps { topics: &self.broker, config: &self.config, store: None }
    }

    fn alerts(&self) -> Vec<Alert> {
        read_alerts(&self.sink)
    }
}

fn read_alerts(path: &Path) -> Vec<Alert> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}"))).collect()
}

fn alert<'a>(alerts: &'a [Alert], message_id: &str) -> &'a Alert {
    alerts
        .iter()
        .find(|a| a.message_id == message_id)
        .unwrap_or_else(|| panic!("no alert for {message_id}: {alerts:#?}"))
}

#[tokio::test]
async fn dead_letters_are_grouped_by_pipeline_run_and_function_and_none_fails() {
    let env = Env::new();
    let event: SqsEvent = serde_json::from_str(DLQ_BATCH).expect("fixture is an SQS event");
    let response = notify::handle_sqs(&event, env.deps()).await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);

    // The RequestMessage names its run; the two unreadable bodies name none:
    // two groups, two alerts.
    let alerts = env.alerts();
    assert_eq!(alerts.len(), 2, "{alerts:#?}");

    let request = alert(&alerts, REQUEST_RECORD);
    assert_eq!(request.count, 1);
    assert_eq!(request.pipeline.as_deref(), Some("customers"));
    assert_eq!(request.run_id.as_deref(), Some("20261129T060000Z"));
    assert_eq!(request.page, Some(2));
    assert_eq!(request.function, "request");
    assert_eq!(request.source_queue, "tributary-request");
    assert_eq!(request.receive_count, 3);
    assert!(
        request.summary.contains("page 2 (the 3rd) of run 20261129T060000Z of pipeline customers"),
        "{}",
        request.summary
    );
    assert!(request.body_excerpt.starts_with("{\"version\":1"), "{}", request.body_excerpt);

    let unreadable = alert(&alerts, NOT_JSON_RECORD);
    assert_eq!(unreadable.count, 2, "the non-JSON and the empty body are one group: {unreadable:#?}");
    assert_eq!(unreadable.function, "request", "from the DLQ's name");
    assert_eq!((&unreadable.pipeline, &unreadable.run_id, unreadable.page), (&None, &None, None));
    assert_eq!(unreadable.body_excerpt, "<html><body>502 Bad Gateway</body></html>");
    let examples: Vec<(&str, &str)> =
        unreadable.examples.iter().map(|e| (e.message_id.as_str(), e.body_excerpt.as_str())).collect();
    assert_eq!(examples, [(NOT_JSON_RECORD, "<html><body>502 Bad Gateway</body></html>"), (EMPTY_RECORD, "")]);
    assert!(unreadable.summary.contains("gave up on 2 messages"), "{}", unreadable.summary);
}

#[tokio::test]
async fn a_burst_of_dead_letters_is_one_alert_with_short_sms_and_full_email_texts() {
    let template: SqsEvent = serde_json::from_str(DLQ_BATCH).expect("fixture is an SQS event");
    let mut event = SqsEvent::default();
    for i in 0..100 {
        let mut record = template.records[0].clone();
        record.message_id = Some(format!("m-{i:03}"));
        let mut attribute = aws_lambda_events::event::sqs::SqsMessageAttribute::default();
        attribute.string_value =
            Some(format!("GET https://api.example.com/v1/customers?… answered HTTP 404: \"no page {i}\""));
        attribute.data_type = Some("String".into());
        record.message_attributes.insert(tributary_core::batch::ATTR_ERROR.into(), attribute);
        event.records.push(record);
    }
    let env = Env::new();
    let response = notify::handle_sqs(&event, env.deps()).await;
    assert!(response.batch_item_failures.is_empty());
    let alerts = env.alerts();
    assert_eq!(alerts.len(), 1, "one alert for the burst");
    let grouped = &alerts[0];
    assert_eq!(grouped.count, 100);
    assert_eq!(grouped.examples.len(), notify::EXAMPLES);
    let sms = notify::sms_text(grouped);
    assert!(sms.chars().count() <= notify::SMS_MAX_CHARS, "{sms}");
    assert!(sms.starts_with("tributary: request failed 100x, customers run 20261129T060000Z: GET"), "{sms}");
    let email = notify::email_text(grouped);
    for needle in [
        "Pipeline:    customers",
        "Run:         20261129T060000Z",
        "Dead letters: 100",
        "1. message m-000, page 2, receive count 3",
        "reason: GET https://api.example.com/v1/customers?… answered HTTP 404: \"no page 0\"",
        "filter pipeline = \"customers\" and run_id = \"20261129T060000Z\"",
        // A trial's alerts said what failed, not what to do next.
        "What to do:\nThe vendor has nothing at that address: check request.url",
        "tributary dlq redrive --all --pipeline customers",
    ] {
        assert!(email.contains(needle), "missing {needle:?} in:\n{email}");
    }
    // A refused credential points at the secret.
    let mut refused = template.records[0].clone();
    let mut attribute = aws_lambda_events::event::sqs::SqsMessageAttribute::default();
    attribute.string_value = Some("GET https://api.example.com/v1/customers answered HTTP 401: \"bad key\"".into());
    attribute.data_type = Some("String".into());
    refused.message_attributes.insert(tributary_core::batch::ATTR_ERROR.into(), attribute);
    let alert = notify::alert_for(&refused, &tributary_core::batch::RecordMeta::of(&refused));
    let email = notify::email_text(&alert);
    assert!(email.contains("check the pipeline's request.auth secret"), "{email}");
}

/// Whatever the record, the alert names the function; this checks it for
/// each DLQ record on its own so a failure points at the one that is wrong.
#[tokio::test]
async fn alert_function_for_each_fixture_record() {
    let event: SqsEvent = serde_json::from_str(DLQ_BATCH).expect("fixture is an SQS event");
    let mut found = Vec::new();
    for record in &event.records {
        let meta = tributary_core::batch::RecordMeta::of(record);
        let alert = notify::alert_for(record, &meta);
        found.push((alert.message_id, alert.function));
    }
    let expected: Vec<(String, String)> = [REQUEST_RECORD, NOT_JSON_RECORD, EMPTY_RECORD]
        .iter()
        .map(|id| (id.to_string(), "request".to_string()))
        .collect();
    assert_eq!(found, expected);
}

#[tokio::test]
async fn huge_body_is_quoted_in_at_most_one_kib() {
    let env = Env::new();
    let body = "é".repeat(512 * 1024); // 1 MiB of two-byte characters
    assert_eq!(body.len(), 1_048_576);
    let event: SqsEvent = serde_json::from_value(json!({
        "Records": [{
            "messageId": "c0ffee00-0004-4a4a-9b9b-huge-body",
            "receiptHandle": "AQEBhuge",
            "body": body,
            "attributes": {
                "ApproximateReceiveCount": "3",
                "SentTimestamp": "1795932009300",
                "SenderId": "AROAEXAMPLEROLEID:tributary-persist",
                "ApproximateFirstReceiveTimestamp": "1795932009387",
                "DeadLetterQueueSourceArn": "arn:aws:sqs:us-east-1:123456789012:tributary-persist"
            },
            "messageAttributes": {},
            "md5OfBody": "00000000000000000000000000000000",
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:tributary-persist-dlq",
            "awsRegion": "us-east-1"
        }]
    }))
    .expect("SQS event");
    let response = notify::handle_sqs(&event, env.deps()).await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);

    let alerts = env.alerts();
    assert_eq!(alerts.len(), 1);
    let alert = &alerts[0];
    assert_eq!(alert.body_bytes, 1_048_576);
    assert_eq!(alert.function, "persist");
    assert_eq!(alert.receive_count, 3);
    assert!(alert.body_excerpt.ends_with('…'), "cut bodies end with an ellipsis");
    assert!(alert.body_excerpt.len() <= EXCERPT_BYTES + '…'.len_utf8(), "{} bytes", alert.body_excerpt.len());
    assert!(alert.body_excerpt.len() >= EXCERPT_BYTES - 1, "quotes as much as fits: {}", alert.body_excerpt.len());
    assert!(alert.body_excerpt.trim_end_matches('…').chars().all(|c| c == 'é'), "cut on a character boundary");
}

/// The alerts published for the run-completed event `completed`
/// delivered twice (a completion retried, two pages completing the run at
/// once), with a lake at hand.
async fn alerts_of_a_completed_event_delivered_twice(completed: serde_json::Value) -> Vec<contracts::Alert> {
    let env = Env::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = adapters::local::DirStore::new(dir.path());
    let event = |id: &str| -> SqsEvent {
        serde_json::from_value(json!({"Records": [{
            "messageId": id, "receiptHandle": "r", "body": completed.to_string(),
            "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
            "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:1:notify", "awsRegion": "us-east-1"
        }]}))
        .expect("event")
    };
    let deps = Deps { topics: &env.broker, config: &env.config, store: Some(&store) };
    for id in ["m-1", "m-2"] {
        let response = notify::handle_sqs(&event(id), deps).await;
        assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
    }
    env.alerts()
}

/// A trial got a run's "records twice" alert twice: the run-completed event
/// is announced at least once (a completion retried, two pages completing
/// the run at once). With the lake at hand, one alert per run.
#[tokio::test]
async fn a_run_completed_event_delivered_twice_is_alerted_once() {
    let alerts = alerts_of_a_completed_event_delivered_twice(json!({
        "version": 1, "pipeline": "orders", "run_id": "20261201T060000Z", "run_date": "2026-12-01",
        "pages": 2, "records_persisted": 120, "records_quarantined": 0,
        "manifest_key": "_manifests/orders/20261201T060000Z.json", "schema_hash": "h",
        "duplicated": "the run's pages held 120 records, 20 more than the 100 the vendor announced",
    }))
    .await;
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    assert!(alerts[0].summary.contains("holds records twice, or misses some"), "{}", alerts[0].summary);
}

/// A trial: a truncated run (records past it never fetched) raised no
/// alert where a duplicated one did; its exit code and `status` were all
/// that said so, and on AWS nobody reads those. Alerted once, naming the
/// run and the reason.
#[tokio::test]
async fn a_truncated_run_is_alerted_once() {
    let alerts = alerts_of_a_completed_event_delivered_twice(json!({
        "version": 1, "pipeline": "orders", "run_id": "20261201T060000Z", "run_date": "2026-12-01",
        "pages": 2, "records_persisted": 20, "records_quarantined": 0,
        "manifest_key": "_manifests/orders/20261201T060000Z.json", "schema_hash": "h",
        "truncated": "the vendor's cursor cycled: page 2's next page is page 2 again",
    }))
    .await;
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    assert_eq!(alerts[0].function, notify::TRUNCATED_FUNCTION);
    assert_eq!(
        (alerts[0].pipeline.as_deref(), alerts[0].run_id.as_deref()),
        (Some("orders"), Some("20261201T060000Z"))
    );
    assert!(
        alerts[0].summary.contains("holds less than the vendor offers") && alerts[0].summary.contains("cursor cycled"),
        "{}",
        alerts[0].summary
    );
}
