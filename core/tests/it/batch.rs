//! The SQS batch helper with a real queue (the local broker) as the DLQ.

use adapters::local::{Broker, QueueConfig};
use aws_lambda_events::event::sqs::SqsEvent;
use std::sync::atomic::{AtomicUsize, Ordering};
use tributary_core::batch::{
    ATTR_ERROR, ATTR_FUNCTION, ATTR_PERMANENT, ATTR_RECEIVE_COUNT, BodyError, DeadLetters, RecordError, RecordMeta,
    decode_body, for_each_message,
};

fn event_from_fixture() -> SqsEvent {
    let text = include_str!("../../../events/sqs-mixed-batch.json");
    serde_json::from_str(text).expect("fixture is an SQS event")
}

/// A local broker with a queue `dlq` taking messages up to `max_message_bytes`.
fn broker_with_dlq(max_message_bytes: usize) -> Broker {
    let broker = Broker::new();
    broker.create_queue(QueueConfig {
        name: "dlq".into(),
        visibility_timeout: std::time::Duration::from_secs(1),
        max_message_bytes,
        redrive: None,
    });
    broker
}

#[derive(Debug, serde::Deserialize)]
struct Ping {
    n: u32,
}

#[derive(Debug, thiserror::Error)]
enum TestError {
    #[error(transparent)]
    Body(#[from] BodyError),
    #[error("n = {0} refused")]
    Refused(u32),
    #[error("{0}")]
    Permanent(String),
}

impl RecordError for TestError {
    fn is_permanent(&self) -> bool {
        matches!(self, TestError::Body(_) | TestError::Permanent(_))
    }
}

#[tokio::test]
async fn permanent_and_last_receive_failures_go_to_the_dlq_with_their_reason() {
    let broker = broker_with_dlq(262_144);
    let mut event = event_from_fixture();
    // msg-3 (refused, transient) is on its 5th and last allowed receive.
    event.records[2].attributes.insert("ApproximateReceiveCount".into(), "5".into());
    let dead_letters = DeadLetters { queue: &broker, dlq: "dlq", max_receive_count: 5, function: "persist" };
    let response = for_each_message(&event, 4, Some(dead_letters), |ping: Ping, _meta: RecordMeta| async move {
        if ping.n == 3 { Err(TestError::Refused(ping.n)) } else { Ok(()) }
    })
    .await;
    assert!(
        response.batch_item_failures.is_empty(),
        "all failures were dead-lettered: {:?}",
        response.batch_item_failures
    );
    let dead = broker.receive("dlq", 10).expect("receive");
    let mut reasons: Vec<(String, String, String)> = dead
        .iter()
        .map(|r| {
            let attr = |name: &str| r.message_attributes[name].string_value.clone().unwrap_or_default();
            (attr(ATTR_ERROR), attr(ATTR_PERMANENT), attr(ATTR_RECEIVE_COUNT))
        })
        .collect();
    reasons.sort();
    assert_eq!(reasons.len(), 3);
    assert!(reasons[0].0.starts_with("body is not JSON") && reasons[0].1 == "true", "{reasons:?}");
    assert!(reasons[1].0.contains("missing field `n`") && reasons[1].1 == "true", "{reasons:?}");
    assert_eq!(reasons[2], ("n = 3 refused".to_string(), "false".to_string(), "5".to_string()));
    assert_eq!(dead[0].message_attributes[ATTR_FUNCTION].string_value.as_deref(), Some("persist"));
}

#[test]
fn plain_and_enveloped_bodies_decode_to_the_same_json() {
    let plain = decode_body(r#"{"n": 1}"#).expect("json");
    let envelope = serde_json::json!({
        "Type": "Notification", "MessageId": "m", "TopicArn": "arn:aws:sns:us-east-1:1:t",
        "Message": "{\"n\": 1}", "Timestamp": "2026-11-29T06:00:00.000Z"
    });
    let wrapped = decode_body(&envelope.to_string()).expect("json");
    assert_eq!(plain.0, wrapped.0);
    assert!(!plain.1 && wrapped.1);
    assert!(matches!(decode_body("not json"), Err(BodyError::NotJson(_))));
}

#[tokio::test]
async fn only_failed_records_are_reported() {
    let event = event_from_fixture();
    let seen = AtomicUsize::new(0);
    let response = for_each_message(&event, 4, None, |ping: Ping, meta: RecordMeta| {
        seen.fetch_add(1, Ordering::SeqCst);
        async move {
            assert_eq!(meta.source_queue, "tributary-persist");
            if ping.n == 3 { Err(TestError::Refused(ping.n)) } else { Ok(()) }
        }
    })
    .await;
    let failed: Vec<_> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
    // The fixture holds: n=1 plain, n=2 SNS-enveloped, n=3 (refused by the
    // handler), a body that is not JSON, and a JSON body of the wrong shape.
    assert_eq!(failed, ["msg-3", "msg-not-json", "msg-wrong-shape"]);
    assert_eq!(seen.load(Ordering::SeqCst), 3, "handler runs for every decodable record");
}

#[tokio::test]
async fn a_record_near_the_size_limit_is_dead_lettered_with_its_reason_cut_to_fit() {
    const LIMIT: usize = 262_144;
    let broker = broker_with_dlq(LIMIT);
    let mut event = event_from_fixture();
    event.records.truncate(1);
    // A body the work queue took (under 256 KiB), 1 KiB short of the limit,
    // and an error of 4 KiB: together they are over.
    let padding = "x".repeat(LIMIT - 1024 - r#"{"n":7,"pad":""}"#.len());
    event.records[0].body = Some(format!(r#"{{"n":7,"pad":"{padding}"}}"#));
    let mut tight = event.records[0].clone();
    tight.message_id = Some("no-room-for-a-reason".into());
    tight.body = Some(format!(r#"{{"n":7,"pad":"{}"}}"#, "x".repeat(LIMIT - 10 - r#"{"n":7,"pad":""}"#.len())));
    event.records.push(tight);
    let dead_letters = DeadLetters { queue: &broker, dlq: "dlq", max_receive_count: 5, function: "persist" };
    let response = for_each_message(&event, 1, Some(dead_letters), |_: Ping, _meta: RecordMeta| async move {
        // A permanent failure with a 4 KiB reason: dead-lettered at once.
        Err::<(), _>(TestError::Permanent(format!("vendor said: {}", "e".repeat(4096))))
    })
    .await;
    assert!(response.batch_item_failures.is_empty(), "both dead-lettered: {:?}", response.batch_item_failures);
    let dead = broker.receive("dlq", 10).expect("receive");
    assert_eq!(dead.len(), 2);
    for letter in &dead {
        let original = event.records.iter().find(|r| r.body == letter.body).expect("the body, whole and unchanged");
        assert!(letter.body.as_ref().is_some_and(|b| b.len() + 1100 > LIMIT), "{:?}", original.message_id);
    }
    let with_reason = dead.iter().find(|r| r.message_attributes.contains_key(ATTR_ERROR)).expect("one keeps a reason");
    let reason = with_reason.message_attributes[ATTR_ERROR].string_value.clone().unwrap_or_default();
    assert!(reason.starts_with("vendor said: eee") && reason.len() < 1024, "cut to what fits: {} bytes", reason.len());
    assert!(dead.iter().any(|r| r.message_attributes.is_empty()), "no room at all: the body goes alone");
}

#[tokio::test]
async fn a_panic_fails_its_record_alone_and_is_dead_lettered_on_the_last_receive() {
    let broker = broker_with_dlq(262_144);
    let handler = |ping: Ping, _meta: RecordMeta| async move {
        if ping.n == 2 {
            panic!("a bug met n = {}", ping.n);
        }
        Ok::<(), TestError>(())
    };
    let event = event_from_fixture();
    let response = for_each_message(&event, 4, None, handler).await;
    let failed: Vec<_> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
    assert_eq!(failed, ["msg-2", "msg-not-json", "msg-wrong-shape"], "n=1 and n=3 succeeded beside the panic");

    let mut last = event_from_fixture();
    last.records[1].attributes.insert("ApproximateReceiveCount".into(), "5".into());
    let dead_letters = DeadLetters { queue: &broker, dlq: "dlq", max_receive_count: 5, function: "persist" };
    let response = for_each_message(&last, 4, Some(dead_letters), handler).await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
    let reasons: Vec<String> = broker
        .receive("dlq", 10)
        .expect("receive")
        .iter()
        .map(|r| r.message_attributes[ATTR_ERROR].string_value.clone().unwrap_or_default())
        .collect();
    assert!(reasons.contains(&"the handler panicked: a bug met n = 2".to_string()), "{reasons:?}");
}

/// Issue 30, item 3: each record's handler runs with that record's X-Ray
/// trace header (its `AWSTraceHeader` attribute), so what it sends stays
/// in its run's trace even when a batch mixes runs; a record without one
/// has none.
#[tokio::test]
async fn each_record_is_handled_in_its_own_xray_trace() {
    let mut event = event_from_fixture();
    event.records.retain(|r| serde_json::from_str::<Ping>(r.body.as_deref().unwrap_or_default()).is_ok());
    assert!(event.records.len() >= 2, "the fixture has two good records");
    let trace = |n: usize| format!("Root=1-5759e988-bd862e3fe1be46a99427279{n};Sampled=1");
    for (n, record) in event.records.iter_mut().enumerate().skip(1) {
        record.attributes.insert(tributary_core::xray::TRACE_HEADER_ATTRIBUTE.into(), trace(n));
    }
    let seen = std::sync::Mutex::new(Vec::new());
    let response = for_each_message(&event, 4, None, |ping: Ping, _meta: RecordMeta| {
        let seen = &seen;
        async move {
            tokio::task::yield_now().await;
            seen.lock().expect("lock").push((ping.n, tributary_core::xray::record_trace()));
            Ok::<(), TestError>(())
        }
    })
    .await;
    assert!(response.batch_item_failures.is_empty());
    let mut seen = seen.into_inner().expect("lock");
    seen.sort();
    let mut expected: Vec<(u32, Option<String>)> = event
        .records
        .iter()
        .enumerate()
        .map(|(n, r)| {
            let ping: Ping = serde_json::from_str(r.body.as_deref().unwrap_or_default()).expect("ping");
            (ping.n, (n > 0).then(|| trace(n)))
        })
        .collect();
    expected.sort();
    assert_eq!(seen, expected);
}
