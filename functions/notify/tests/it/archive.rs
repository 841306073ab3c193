//! Notify keeps every dead letter whole in the lake before it alerts, and
//! reads failed triggers (Lambda asynchronous invocation records, scheduler
//! dead-letter events) as well as tributary's own messages.

use std::sync::Mutex;

use aws_lambda_events::event::sqs::SqsEvent;

use adapters::local::{Broker, DirStore, Subscription};
use contracts::Alert;
use notify::{Deps, NotifyConfig};
use tributary_core::dead_letters;
use tributary_core::ports::{PortError, TopicMessage, TopicPublisher};

const DLQ_BATCH: &str = include_str!("../../../../events/dlq-batch.sqs.json");
const ASYNC_FAILURE: &str = include_str!("../../../../events/orchestrator-async-failure.sqs.json");
const SCHEDULER_DLQ: &str = include_str!("../../../../events/scheduler-dlq.sqs.json");
const FRESHNESS_FAILURE: &str = include_str!("../../../../events/notify-freshness-async-failure.sqs.json");

fn event(text: &str) -> SqsEvent {
    serde_json::from_str(text).expect("fixture is an SQS event")
}

/// A topic that keeps what it is given and, like SNS, refuses a message
/// attribute whose value is empty (`InvalidParameterValue`).
#[derive(Default)]
struct StrictTopic {
    published: Mutex<Vec<TopicMessage>>,
}

#[async_trait::async_trait]
impl TopicPublisher for StrictTopic {
    async fn publish(&self, topic: &str, messages: Vec<TopicMessage>) -> Result<(), PortError> {
        for message in &messages {
            if let Some((name, _)) = message.attributes.iter().find(|(_, value)| value.is_empty()) {
                return Err(PortError::permanent_msg(
                    "Publish",
                    topic,
                    format!("InvalidParameterValue: message attribute {name} has an empty value"),
                ));
            }
        }
        self.published.lock().expect("lock").extend(messages);
        Ok(())
    }
}

fn config() -> NotifyConfig {
    NotifyConfig { alerts_topic: "alerts".into(), metrics: Default::default() }
}

fn alerts(topic: &StrictTopic) -> Vec<Alert> {
    let published = topic.published.lock().expect("lock");
    published.iter().map(|m| serde_json::from_str(&m.per_protocol["sqs"]).expect("alert JSON")).collect()
}

#[tokio::test]
async fn every_dead_letter_is_archived_whole_and_a_redelivery_rewrites_its_own_entry() {
    let lake = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(lake.path());
    let topic = StrictTopic::default();
    let config = config();
    let batch = event(DLQ_BATCH);
    for _ in 0..2 {
        let response = notify::handle_sqs(&batch, Deps { topics: &topic, config: &config, store: Some(&store) }).await;
        assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
    }
    let keys = dead_letters::list(&store, None).await.expect("list");
    assert_eq!(keys.len(), batch.records.len(), "one entry per letter, rewritten on redelivery: {keys:?}");
    for record in &batch.records {
        let id = record.message_id.as_deref().expect("id");
        let (key, letter) = dead_letters::find(&store, id).await.expect("archived");
        assert!(key.starts_with("_dead_letters/tributary-request-dlq/20261129T"), "{key}");
        assert_eq!(letter.body, record.body.clone().unwrap_or_default(), "the whole body");
        assert_eq!(letter.dlq, "tributary-request-dlq");
        assert_eq!(letter.source_queue, "tributary-request");
        assert_eq!(letter.attributes.get("SentTimestamp"), record.attributes.get("SentTimestamp"));
        assert_eq!(letter.source_queue_logical(), Some("request"));
    }
}

#[tokio::test]
async fn a_letter_that_cannot_be_archived_is_not_alerted_and_stays_in_its_dlq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("not-a-directory");
    std::fs::write(&file, b"x").expect("file");
    let store = DirStore::new(&file);
    let topic = StrictTopic::default();
    let config = config();
    let batch = event(DLQ_BATCH);
    let response = notify::handle_sqs(&batch, Deps { topics: &topic, config: &config, store: Some(&store) }).await;
    let failed: Vec<&str> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
    let all: Vec<&str> = batch.records.iter().filter_map(|r| r.message_id.as_deref()).collect();
    assert_eq!(failed, all, "every letter is retried by SQS, none deleted unkept");
    assert!(alerts(&topic).is_empty(), "no alert for a letter that is not kept");
}

#[tokio::test]
async fn an_orchestrator_async_failure_names_the_pipeline_run_and_error() {
    let lake = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(lake.path());
    let topic = StrictTopic::default();
    let config = config();
    let batch = event(ASYNC_FAILURE);
    let response = notify::handle_sqs(&batch, Deps { topics: &topic, config: &config, store: Some(&store) }).await;
    assert!(response.batch_item_failures.is_empty());
    let alerts = alerts(&topic);
    assert_eq!(alerts.len(), 1);
    let alert = &alerts[0];
    assert_eq!(alert.function, "orchestrator");
    assert_eq!(alert.pipeline.as_deref(), Some("customers"));
    assert_eq!(alert.run_id.as_deref(), Some("20261129T060000Z"), "the scheduled time of the failed trigger");
    assert_eq!(alert.receive_count, 3, "approximateInvokeCount");
    let reason = alert.reason.as_deref().expect("reason");
    assert!(reason.ends_with("strategy.page_size: 0 is out of range 1..=100000"), "{reason}");
    assert!(alert.summary.contains("the trigger of run 20261129T060000Z of pipeline customers"), "{}", alert.summary);
    let (_, letter) = dead_letters::find(&store, &alert.message_id).await.expect("archived");
    assert_eq!((letter.function.as_str(), letter.pipeline.as_deref()), ("orchestrator", Some("customers")));
}

#[tokio::test]
async fn a_scheduler_dead_letter_event_names_the_pipeline_and_the_error_code() {
    let topic = StrictTopic::default();
    let config = config();
    let batch = event(SCHEDULER_DLQ);
    let response = notify::handle_sqs(&batch, Deps { topics: &topic, config: &config, store: None }).await;
    assert!(response.batch_item_failures.is_empty());
    let alerts = alerts(&topic);
    let alert = &alerts[0];
    assert_eq!((alert.function.as_str(), alert.pipeline.as_deref()), ("scheduler", Some("customers")));
    assert_eq!(alert.receive_count, 4, "RETRY_ATTEMPTS 3, plus the first attempt");
    let reason = alert.reason.as_deref().expect("reason");
    assert!(reason.starts_with("AWS.Lambda.AccessDeniedException: User: "), "{reason}");
}

/// A freshness check Notify could not run, sent to scheduler-dlq by its
/// on-failure destination (infra/template.yaml), is alerted on as the check
/// of its pipeline, not as a run.
#[tokio::test]
async fn a_failed_freshness_check_names_the_pipeline_and_the_error() {
    let topic = StrictTopic::default();
    let config = config();
    let batch = event(FRESHNESS_FAILURE);
    let response = notify::handle_sqs(&batch, Deps { topics: &topic, config: &config, store: None }).await;
    assert!(response.batch_item_failures.is_empty());
    let alerts = alerts(&topic);
    let [alert] = alerts.as_slice() else { panic!("one alert: {alerts:?}") };
    assert_eq!((alert.function.as_str(), alert.pipeline.as_deref()), ("notify", Some("customers")));
    assert_eq!(alert.run_id, None, "a freshness check is no run");
    assert_eq!(alert.source_queue, "tributary-prod-scheduler-dlq");
    assert_eq!(alert.receive_count, 3, "approximateInvokeCount");
    assert!(
        alert.summary.starts_with("notify gave up on the freshness check of pipeline customers after 3 attempts: "),
        "{}",
        alert.summary
    );
    assert!(alert.reason.as_deref().is_some_and(|r| r.contains("AccessDenied")), "{:?}", alert.reason);
}

#[tokio::test]
async fn a_blank_or_huge_pipeline_name_never_blocks_the_alert() {
    let topic = StrictTopic::default();
    let config = config();
    let mut batch = event(DLQ_BATCH);
    batch.records.truncate(1);
    let huge = "p".repeat(300_000);
    let mut second = batch.records[0].clone();
    second.message_id = Some("huge-pipeline".into());
    second.body = Some(format!(r#"{{"pipeline":"{huge}","run_id":"r"}}"#));
    batch.records[0].body = Some(r#"{"pipeline":"","run_id":"","page":{"index":1}}"#.into());
    batch.records.push(second);
    let response = notify::handle_sqs(&batch, Deps { topics: &topic, config: &config, store: None }).await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
    let published = topic.published.lock().expect("lock").clone();
    assert_eq!(published.len(), 2);
    assert_eq!(published[0].attributes["pipeline"], "unknown");
    let largest =
        published.iter().map(|m| m.body.len() + m.per_protocol.values().map(String::len).sum::<usize>()).max();
    assert!(largest.is_some_and(|bytes| bytes < 64 * 1024), "names are cut: {largest:?} bytes");
}

#[tokio::test]
async fn the_local_broker_carries_the_archived_alert_too() {
    // The same handler over the local broker, as `tributary run` wires it.
    let lake = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(lake.path());
    let broker = Broker::new();
    let sink = lake.path().join("alerts.jsonl");
    broker.create_topic("alerts", vec![Subscription::File { path: sink.clone() }]);
    let config = config();
    let response =
        notify::handle_sqs(&event(ASYNC_FAILURE), Deps { topics: &broker, config: &config, store: Some(&store) }).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(std::fs::read_to_string(sink).expect("alert written").lines().count(), 1);
    assert_eq!(dead_letters::list(&store, Some("tributary-prod-orchestrator-dlq")).await.expect("list").len(), 1);
}
