//! A stream mapping's on-failure record (the `stream-failures` queue) is
//! one dedicated alert, through Notify's handler: which stream, shard or
//! partition and sequence or offset range was dropped, why, the pipeline
//! the stream's spec in the lake names, and how to replay the records.

use std::sync::Mutex;

use aws_lambda_events::event::sqs::SqsEvent;
use bytes::Bytes;

use adapters::local::DirStore;
use contracts::Alert;
use notify::{Deps, NotifyConfig};
use tributary_core::ports::{ObjectStore, PortError, TopicMessage, TopicPublisher};

const KINESIS_DROPPED: &str = include_str!("../../../../events/kinesis-on-failure.sqs.json");
const MSK_DROPPED: &str = include_str!("../../../../events/msk-on-failure.sqs.json");

/// A topic that keeps what it is given.
#[derive(Default)]
struct Topic {
    published: Mutex<Vec<TopicMessage>>,
}

#[async_trait::async_trait]
impl TopicPublisher for Topic {
    async fn publish(&self, _topic: &str, messages: Vec<TopicMessage>) -> Result<(), PortError> {
        self.published.lock().expect("lock").extend(messages);
        Ok(())
    }
}

impl Topic {
    fn only(&self) -> TopicMessage {
        let published = self.published.lock().expect("lock");
        assert_eq!(published.len(), 1, "one alert");
        published[0].clone()
    }
}

fn alert_of(message: &TopicMessage) -> Alert {
    serde_json::from_str(&message.per_protocol["sqs"]).expect("the sqs text is the Alert JSON")
}

async fn handle(fixture: &str, store: &DirStore) -> TopicMessage {
    let event: SqsEvent = serde_json::from_str(fixture).expect("fixture is an SQS event");
    let topic = Topic::default();
    let config = NotifyConfig { alerts_topic: "alerts".into(), metrics: Default::default() };
    let response = notify::handle_sqs(&event, Deps { topics: &topic, config: &config, store: Some(store) }).await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
    topic.only()
}

#[tokio::test]
async fn a_dropped_kinesis_batch_names_its_pipeline_shard_range_and_the_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    store
        .put("_streams/_specs/clicks.json", Bytes::from_static(br#"{"version":1,"pipeline":"clicks-to-lake"}"#))
        .await
        .expect("spec");
    let message = handle(KINESIS_DROPPED, &store).await;
    let alert = alert_of(&message);
    assert_eq!(alert.function, "stream");
    assert_eq!(alert.pipeline.as_deref(), Some("clicks-to-lake"), "the pipeline from the stream's spec in the lake");
    assert_eq!(alert.receive_count, 11);
    let reason = alert.reason.as_deref().expect("reason");
    for needle in [
        "500 records of Kinesis stream clicks dropped",
        "shard shardId-000000000001",
        "sequence numbers 49601189658422359378836298521827638475320189012309704722 to 49601189658422359378836298522902373528957594348623495186",
        "first arrived 2026-12-01T10:14:04.835Z",
        "Persist failed on them 11 times",
    ] {
        assert!(reason.contains(needle), "reason lacks {needle:?}: {reason}");
    }
    for needle in [
        "--shard-iterator-type AT_SEQUENCE_NUMBER --starting-sequence-number 49601189658422359378836298521827638475320189012309704722",
        "--stream-name clicks --shard-id shardId-000000000001",
        "put-records",
        "24 hours",
    ] {
        assert!(alert.summary.contains(needle), "summary lacks {needle:?}: {}", alert.summary);
    }
    assert_eq!(message.subject.as_deref(), Some("tributary alert: stream records dropped for pipeline clicks-to-lake"));
    let email = &message.per_protocol["email"];
    assert!(email.contains("stream batch(es) dropped") && email.contains("What to do:"), "{email}");
    assert!(email.contains("shardId-000000000001"), "{email}");
    let sms = &message.per_protocol["sms"];
    assert!(sms.chars().count() <= notify::SMS_MAX_CHARS, "{sms}");
    assert!(sms.contains("clicks-to-lake"), "{sms}");
    // Kept whole in the lake, like every dead letter.
    assert_eq!(store.list("_dead_letters/").await.expect("list").len(), 1);
}

#[tokio::test]
async fn a_dropped_kafka_batch_names_each_partition_s_offsets_and_a_missing_spec() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let message = handle(MSK_DROPPED, &store).await;
    let alert = alert_of(&message);
    assert_eq!(alert.function, "stream");
    assert_eq!(alert.pipeline, None, "no spec in the lake");
    let reason = alert.reason.as_deref().expect("reason");
    for needle in [
        "120 records of Kafka topic orders dropped",
        "partition 0, offsets 15 to 74",
        "partition 1, offsets 40 to 99",
        "older than MaximumRecordAgeInSeconds",
    ] {
        assert!(reason.contains(needle), "reason lacks {needle:?}: {reason}");
    }
    assert!(alert.summary.contains("no spec at _streams/_specs/orders.json"), "{}", alert.summary);
    assert!(alert.summary.contains("--topic orders --partition 0 --offset 15"), "{}", alert.summary);
    assert!(alert.summary.contains("--topic orders --partition 1 --offset 40"), "{}", alert.summary);
}

/// The alert's own reading of the record, for a body that is half there:
/// nothing is invented and nothing panics.
#[test]
fn a_partial_on_failure_record_still_reads() {
    let body = serde_json::json!({"KinesisBatchInfo": {"shardId": "shardId-000000000003"}});
    let dropped = notify::stream::dropped_stream_batch(&body).expect("a Kinesis record");
    assert_eq!(dropped.stream, "");
    assert_eq!(dropped.ranges[0].first, "?");
    assert!(dropped.reason().contains("(not named)"), "{}", dropped.reason());
    assert!(notify::stream::dropped_stream_batch(&serde_json::json!({"pipeline": "p"})).is_none());
}
