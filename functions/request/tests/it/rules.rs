//! Response rules (status actions, content type, size cap) and the rate
//! budget, counted at a local server.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use common::{Harness, PERSIST_QUEUE, items, message, recorder, reply, serve};
use contracts::{self, Payload, PersistMessage};
use request::{Outcome, RequestError};
use serde_json::json;
use tributary_core::batch::RecordError;
use tributary_core::ports::PortError;

#[tokio::test]
async fn a_status_marked_empty_is_an_empty_page() {
    let (addr, log) = recorder(|_, _| reply(404, &[], json!({"error": "no data for that day"}))).await;
    let harness = Harness::new();
    let policy = json!({"response": {"status_actions": {"404": "empty"}}});
    let outcome = request::handle_message(message(&format!("http://{addr}/day"), policy), harness.deps()).await;
    assert_eq!(outcome.expect("empty page"), Outcome::Records { count: 0, claim_check: false });
    let persist: PersistMessage = contracts::decode(harness.drain(PERSIST_QUEUE).remove(0)).expect("PersistMessage");
    assert!(matches!(persist.payload, Payload::Inline { records } if records.as_str() == "[]"));
    assert_eq!(log.lock().expect("log").len(), 1);
}

#[tokio::test]
async fn statuses_marked_retry_or_fail_are_retried_or_not() {
    let (addr, log) = recorder(|_, seen| match seen.uri.as_str() {
        "/busy" => reply(409, &[], json!({"error": "busy"})),
        _ => reply(503, &[], json!({"error": "maintenance"})),
    })
    .await;
    let harness = Harness::new();
    let policy = json!({"response": {"status_actions": {"409": "retry", "503": "fail"}}});
    let err = request::handle_message(message(&format!("http://{addr}/busy"), policy.clone()), harness.deps())
        .await
        .expect_err("always busy");
    assert!(!err.is_permanent(), "{err:?}");
    let err = request::handle_message(message(&format!("http://{addr}/gone"), policy), harness.deps())
        .await
        .expect_err("503 marked fail");
    assert!(err.is_permanent(), "{err:?}");
    let uris: Vec<String> = log.lock().expect("log").iter().map(|s| s.uri.clone()).collect();
    assert_eq!(uris, ["/busy", "/busy", "/busy", "/gone"]);
}

#[tokio::test]
async fn an_unexpected_content_type_is_named() {
    let router = Router::new().route("/x", get(|| async { ([("content-type", "text/html")], "<html>hi</html>") }));
    let addr = serve(router).await;
    let harness = Harness::new();
    let policy = json!({"response": {"content_type": "application/json"}});
    let err =
        request::handle_message(message(&format!("http://{addr}/x"), policy), harness.deps()).await.expect_err("html");
    assert!(matches!(&err, RequestError::ContentType { found, .. } if found == "text/html"), "{err:?}");
    assert!(err.to_string().contains("policy.response.content_type"), "{err}");
}

#[tokio::test]
async fn a_body_past_the_cap_stops_the_read_and_fails_permanently() {
    // Chunked (no Content-Length): the cap applies while streaming.
    let router = Router::new().route(
        "/big",
        get(|| async {
            let chunks = (0..64).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b' '; 1024])));
            axum::body::Body::from_stream(futures_stream(chunks.collect()))
        }),
    );
    let addr = serve(router).await;
    let harness = Harness::new();
    let policy = json!({"response": {"max_bytes": 4096}});
    let err = request::handle_message(message(&format!("http://{addr}/big"), policy), harness.deps())
        .await
        .expect_err("too large");
    assert!(matches!(&err, RequestError::Transport(PortError::TooLarge { limit: 4096, .. })), "{err:?}");
    assert!(err.is_permanent());
    assert!(err.to_string().contains("4096"), "{err}");
}

fn futures_stream(
    chunks: Vec<Result<bytes::Bytes, std::io::Error>>,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send {
    futures::stream::iter(chunks)
}

/// Calls in flight now, the most seen, and when each call started.
type Gauges = (Arc<AtomicUsize>, Arc<AtomicUsize>, Arc<std::sync::Mutex<Vec<std::time::Instant>>>);

#[tokio::test]
async fn the_rate_budget_holds_across_concurrent_records_and_workers() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let starts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let state = (in_flight.clone(), most.clone(), starts.clone());
    let router = Router::new()
        .route(
            "/items",
            get(|axum::extract::State((in_flight, most, starts)): axum::extract::State<Gauges>| async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                starts.lock().expect("starts").push(std::time::Instant::now());
                tokio::time::sleep(Duration::from_millis(30)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                axum::Json(items(0..1))
            }),
        )
        .with_state(state);
    let addr = serve(router).await;
    let harness = Harness::new();
    let policy = json!({"rate": {"requests_per_second": 10, "max_concurrency": 1}});
    let body = serde_json::to_string(&message(&format!("http://{addr}/items"), policy)).expect("json");
    let event = |prefix: &str| -> aws_lambda_events::event::sqs::SqsEvent {
        let records: Vec<serde_json::Value> = (0..4)
            .map(|i| {
                json!({"messageId": format!("{prefix}-{i}"), "receiptHandle": "r", "body": body,
                       "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
                       "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:1:request", "awsRegion": "us-east-1"})
            })
            .collect();
        serde_json::from_value(json!({"Records": records})).expect("event")
    };
    // Two invocations at once (two workers of the local runtime), 4 records each, 5 at a time.
    let (first, second) = (event("a"), event("b"));
    let (a, b) =
        tokio::join!(request::handle_sqs(&first, harness.deps()), request::handle_sqs(&second, harness.deps()));
    assert!(a.batch_item_failures.is_empty() && b.batch_item_failures.is_empty());
    assert_eq!(most.load(Ordering::SeqCst), 1, "never two calls in flight");
    let starts = starts.lock().expect("starts");
    assert_eq!(starts.len(), 8);
    let span = *starts.last().expect("last") - starts[0];
    // 8 calls at 10 per second without bursts: the last starts >= 7 * 100 ms after the first.
    assert!(span >= Duration::from_millis(690), "{span:?}");
}
