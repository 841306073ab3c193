//! Retries, `Retry-After`, time-outs and the invocation deadline, against
//! local servers that count every call.

use crate::common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use common::{Conn, Harness, items, message, recorder, reply, scripted};
use request::{Outcome, RequestError};
use serde_json::json;
use tributary_core::batch::RecordError;
use tributary_core::ports::QueueSender;

fn gaps(log: &common::Log) -> Vec<Duration> {
    let log = log.lock().expect("log");
    log.windows(2).map(|w| w[1].at - w[0].at).collect()
}

#[tokio::test]
async fn throttled_429_with_retry_after_2_waits_two_seconds_then_succeeds() {
    let (addr, log) = recorder(|n, _| {
        if n == 0 {
            reply(429, &[("retry-after", "2")], json!({"error": "slow down"}))
        } else {
            reply(200, &[], items(0..3))
        }
    })
    .await;
    let harness = Harness::new();
    let outcome = request::handle_message(message(&format!("http://{addr}/t"), json!({})), harness.deps()).await;
    assert_eq!(outcome.expect("second call succeeds"), Outcome::Records { count: 3, claim_check: false });
    let gaps = gaps(&log);
    assert_eq!(gaps.len(), 1, "two calls");
    assert!(gaps[0] >= Duration::from_secs(2) && gaps[0] < Duration::from_millis(3500), "{gaps:?}");
    assert_eq!(harness.drain(common::PERSIST_QUEUE).len(), 1);
}

#[tokio::test]
async fn retry_after_as_an_http_date_is_honoured() {
    let (addr, log) = recorder(|n, _| {
        if n == 0 {
            let when = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(2));
            reply(429, &[("retry-after", &when)], json!({}))
        } else {
            reply(200, &[], items(0..1))
        }
    })
    .await;
    let harness = Harness::new();
    request::handle_message(message(&format!("http://{addr}/t"), json!({})), harness.deps()).await.expect("ok");
    let gaps = gaps(&log);
    // The date has whole seconds: 1 to 2 s from now.
    assert!(gaps.len() == 1 && gaps[0] >= Duration::from_millis(900) && gaps[0] < Duration::from_secs(3), "{gaps:?}");
}

#[tokio::test]
async fn retry_after_3600_fails_the_record_now_for_sqs_to_redeliver() {
    let (addr, log) = recorder(|_, _| reply(429, &[("retry-after", "3600")], json!({}))).await;
    let harness = Harness::new();
    let started = Instant::now();
    let err = request::handle_message(message(&format!("http://{addr}/t"), json!({})), harness.deps())
        .await
        .expect_err("not slept");
    assert!(started.elapsed() < Duration::from_secs(1), "no sleep: {:?}", started.elapsed());
    assert_eq!(log.lock().expect("log").len(), 1, "one call only");
    assert!(matches!(&err, RequestError::RetryLater { .. }), "{err:?}");
    assert!(!err.is_permanent(), "retryable: batchItemFailures, SQS redelivers after the visibility timeout");
    let text = err.to_string();
    assert!(text.contains("429") && text.contains("3600") && text.contains("cap"), "{text}");
}

#[tokio::test]
async fn retry_after_0_waits_at_least_the_base_delay() {
    let (addr, log) = recorder(|_, _| reply(429, &[("retry-after", "0")], json!({}))).await;
    let mut harness = Harness::new();
    harness.config.base_delay = Duration::from_millis(300);
    let err = request::handle_message(message(&format!("http://{addr}/t"), json!({})), harness.deps())
        .await
        .expect_err("always throttled");
    assert!(matches!(err, RequestError::Status { status: 429, .. }), "{err:?}");
    assert!(!err.is_permanent());
    let gaps = gaps(&log);
    assert_eq!(gaps.len(), 2, "max_attempts 3");
    assert!(gaps.iter().all(|g| *g >= Duration::from_millis(300)), "no hot loop: {gaps:?}");
}

#[tokio::test]
async fn throttled_without_retry_after_backs_off_and_attempts_are_capped() {
    let (addr, log) = recorder(|_, _| reply(429, &[], json!({}))).await;
    let mut harness = Harness::new();
    harness.config.max_attempts = 4;
    let err = request::handle_message(message(&format!("http://{addr}/t"), json!({})), harness.deps())
        .await
        .expect_err("always throttled");
    assert!(matches!(err, RequestError::Status { status: 429, retry_after: None, .. }), "{err:?}");
    assert!(!err.is_permanent());
    assert_eq!(log.lock().expect("log").len(), 4, "max_attempts calls, no more");
}

#[tokio::test]
async fn retry_after_past_the_deadline_fails_now() {
    let (addr, log) = recorder(|_, _| reply(503, &[("retry-after", "5")], json!({}))).await;
    let mut harness = Harness::new();
    harness.invocation = Duration::from_secs(3);
    let started = Instant::now();
    let err = request::handle_message(message(&format!("http://{addr}/t"), json!({})), harness.deps())
        .await
        .expect_err("5 s do not fit in 3 s");
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    assert_eq!(log.lock().expect("log").len(), 1);
    assert!(err.to_string().contains("deadline"), "{err}");
    assert!(!err.is_permanent());
}

#[tokio::test]
async fn request_timeout_408_is_retried_other_4xx_are_permanent() {
    let (addr, log) = recorder(|n, seen| match (seen.uri.as_str(), n) {
        ("/slow", 0) => reply(408, &[], json!({})),
        ("/slow", _) => reply(200, &[], items(0..2)),
        _ => reply(403, &[], json!({"error": "forbidden"})),
    })
    .await;
    let harness = Harness::new();
    let outcome = request::handle_message(message(&format!("http://{addr}/slow"), json!({})), harness.deps()).await;
    assert_eq!(outcome.expect("408 then 200"), Outcome::Records { count: 2, claim_check: false });
    let err = request::handle_message(message(&format!("http://{addr}/denied"), json!({})), harness.deps())
        .await
        .expect_err("403");
    assert!(err.is_permanent(), "{err:?}");
    let uris: Vec<String> = log.lock().expect("log").iter().map(|s| s.uri.clone()).collect();
    assert_eq!(uris, ["/slow", "/slow", "/denied"], "a 403 is called once");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_on_every_attempt() {
    let (addr, accepted) = scripted(vec![Conn::Silent]).await;
    let mut harness = Harness::new();
    harness.config.timeout = Duration::from_millis(300);
    harness.config.max_attempts = 2;
    let started = Instant::now();
    let err = request::handle_message(message(&format!("http://{addr}/t"), json!({})), harness.deps())
        .await
        .expect_err("time-out");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "one connection per attempt");
    assert!(err.to_string().contains("timed out"), "{err}");
    assert!(!err.is_permanent());
}

#[tokio::test]
async fn the_invocation_deadline_bounds_the_call() {
    let (addr, accepted) = scripted(vec![Conn::Silent]).await;
    let mut harness = Harness::new();
    harness.config.timeout = Duration::from_secs(30);
    harness.invocation = Duration::from_millis(1500);
    let started = Instant::now();
    let err = request::handle_message(message(&format!("http://{addr}/t"), json!({})), harness.deps())
        .await
        .expect_err("deadline");
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_millis(1500), "ended before the deadline: {elapsed:?}");
    assert!(elapsed >= Duration::from_millis(1000), "the call had the time left less the reserve: {elapsed:?}");
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "no second attempt without time for it");
    assert!(!err.is_permanent(), "{err:?}");
}

#[tokio::test]
async fn reset_connections_are_retried() {
    let (addr, accepted) = scripted(vec![Conn::Reset, Conn::Reset, Conn::Json(items(0..4).to_string())]).await;
    let harness = Harness::new();
    let outcome = request::handle_message(message(&format!("http://{addr}/t"), json!({})), harness.deps()).await;
    assert_eq!(outcome.expect("third connection answers"), Outcome::Records { count: 4, claim_check: false });
    assert_eq!(accepted.load(Ordering::SeqCst), 3);

    let (addr, accepted) = scripted(vec![Conn::Reset]).await;
    let err = request::handle_message(message(&format!("http://{addr}/t"), json!({})), harness.deps())
        .await
        .expect_err("always reset");
    assert_eq!(accepted.load(Ordering::SeqCst), 3, "max_attempts");
    assert!(!err.is_permanent(), "{err:?}");
}

/// Receives what is visible on Request's queue, hands it to `handle_sqs`,
/// and deletes the records it handled (as the event source mapping does).
async fn deliver(
    harness: &Harness,
) -> (Vec<aws_lambda_events::event::sqs::SqsMessage>, aws_lambda_events::event::sqs::SqsBatchResponse) {
    let received = harness.broker.receive(common::REQUEST_QUEUE, 10).expect("receive");
    let mut event = aws_lambda_events::event::sqs::SqsEvent::default();
    event.records = received.clone();
    let response = request::handle_sqs(&event, harness.deps()).await;
    let failed: Vec<_> = response.batch_item_failures.iter().map(|f| f.item_identifier.clone()).collect();
    for record in received.iter().filter(|r| !failed.contains(r.message_id.as_ref().expect("id"))) {
        harness.broker.delete(common::REQUEST_QUEUE, record.receipt_handle.as_deref().expect("receipt"));
    }
    (received, response)
}

#[tokio::test]
async fn a_retry_after_past_the_cap_sends_the_page_again_after_it_without_counting_a_receive() {
    let (addr, log) = recorder(|_, _| reply(429, &[("retry-after", "3600")], json!({}))).await;
    let harness = Harness::new();
    let body = serde_json::to_string(&message(&format!("http://{addr}/t"), json!({}))).expect("json");
    harness.broker.send(common::REQUEST_QUEUE, vec![body]).await.expect("send");
    let before = harness.broker.clock_ms();
    let (_, response) = deliver(&harness).await;
    assert!(response.batch_item_failures.is_empty(), "waiting for the vendor is not a failure");
    // The vendor's hour is waited in SQS's 15-minute delays, each a new
    // message (its receive count 1), without calling the vendor.
    let mut steps = Vec::new();
    while log.lock().expect("log").len() == 1 {
        let at = harness.broker.clock_ms();
        assert!(harness.broker.advance_to_next_visible(), "a delayed copy");
        steps.push(harness.broker.clock_ms() - at);
        let (copy, response) = deliver(&harness).await;
        assert_eq!(copy.len(), 1);
        assert_eq!(copy[0].attributes.get("ApproximateReceiveCount").map(String::as_str), Some("1"));
        assert_eq!(copy[0].message_attributes["tributary-paused-secs"].string_value.as_deref(), Some("3600"));
        assert!(response.batch_item_failures.is_empty());
    }
    assert_eq!(steps, [900_000; 4], "{steps:?}");
    assert!(harness.broker.clock_ms() - before >= 3_600_000);
    // Called again after the hour: throttled again, paused again (two hours in all).
    let again = harness.broker.receive(common::REQUEST_QUEUE, 10);
    assert!(again.expect("receive").is_empty(), "the next copy is delayed");
    assert!(harness.broker.advance_to_next_visible());
    let copy = harness.broker.receive(common::REQUEST_QUEUE, 10).expect("receive");
    assert_eq!(copy[0].message_attributes["tributary-paused-secs"].string_value.as_deref(), Some("7200"));
}

#[tokio::test]
async fn past_twelve_hours_of_pauses_a_retry_after_becomes_the_messages_visibility() {
    let (addr, log) = recorder(|_, _| reply(429, &[("retry-after", "3600")], json!({}))).await;
    let harness = Harness::new();
    let body = serde_json::to_string(&message(&format!("http://{addr}/t"), json!({}))).expect("json");
    let paused = tributary_core::ports::QueueMessage {
        body,
        attributes: [("tributary-paused-secs".to_string(), "43000".to_string())].into(),
    };
    harness.broker.send_messages(common::REQUEST_QUEUE, vec![paused]).await.expect("send");
    let before = harness.broker.clock_ms();
    let (_, response) = deliver(&harness).await;
    assert_eq!(response.batch_item_failures.len(), 1, "failed: the receive counts");
    // Visible again after the vendor's hour, not the queue's 720 s.
    assert!(harness.broker.advance_to_next_visible(), "in flight");
    assert_eq!(harness.broker.clock_ms() - before, 3_600_000);
    let again = harness.broker.receive(common::REQUEST_QUEUE, 10).expect("receive");
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attributes.get("ApproximateReceiveCount").map(String::as_str), Some("2"));
    assert_eq!(log.lock().expect("log").len(), 1, "one call in the first receive");
}
