//! Request's handler against a real HTTP server on 127.0.0.1, with the real
//! reqwest client, the local [`Broker`] and a [`DirStore`] over a temp dir.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_lambda_events::event::sqs::SqsEvent;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::common;

use common::Harness;
use contracts::{self, PageRef, Payload, PersistMessage, ProbeReply, RequestMessage};
use request::{Outcome, RequestError};
use tributary_core::ports::ObjectStore;

const PERSIST_QUEUE: &str = "persist";
const ORCHESTRATOR_QUEUE: &str = "orchestrator";
const TOTAL: u64 = 120;

/// Hits per endpoint.
#[derive(Default)]
struct Hits {
    customers: AtomicUsize,
    flaky: AtomicUsize,
    missing: AtomicUsize,
    odd: AtomicUsize,
}

/// Levels of the deep record's `deep` value: beyond serde_json's 127, within
/// the tokenizer's 512.
const DEEP: usize = 300;

/// Five records as the odd vendor writes them, one per entry: plain, nested
/// [`DEEP`] levels, a key that is a lone surrogate, a name with a Latin-1
/// byte (0xe9, not UTF-8), plain.
fn odd_records() -> Vec<Vec<u8>> {
    let deep = format!(r#"{{"id": 1, "deep": {}{}}}"#, "[".repeat(DEEP), "]".repeat(DEEP));
    vec![
        br#"{"id": 0}"#.to_vec(),
        deep.into_bytes(),
        br#"{"id": 2, "\ud800": 1}"#.to_vec(),
        b"{\"id\": 3, \"name\": \"Jos\xe9\"}".to_vec(),
        br#"{"id": 4}"#.to_vec(),
    ]
}

/// `{"\udc00": 0, "items": [the odd records], "total": 5}` (a lone
/// surrogate key before the records too).
async fn odd(State(hits): State<Arc<Hits>>) -> Vec<u8> {
    hits.odd.fetch_add(1, Ordering::SeqCst);
    let mut body = b"{\"\\udc00\": 0, \"items\": [".to_vec();
    body.extend(odd_records().join(b", ".as_slice()));
    body.extend(b"], \"total\": 5}");
    body
}

/// The odd records as lines, the deep one first, served as `text/plain`
/// (NDJSON recognised by its shape).
async fn odd_lines(State(hits): State<Arc<Hits>>) -> Vec<u8> {
    hits.odd.fetch_add(1, Ordering::SeqCst);
    let mut lines = odd_records();
    lines.swap(0, 1);
    let mut body = lines.join(b"\n".as_slice());
    body.push(b'\n');
    body
}

fn customer(id: u64) -> Value {
    json!({
        "id": id,
        "name": format!("Customer {id}"),
        "balance": if id.is_multiple_of(2) { json!(id * 10) } else { json!(id as f64 + 0.5) },
        "address": {"city": "Recife", "zip": if id.is_multiple_of(3) { Value::Null } else { json!("50000-000") }},
    })
}

async fn customers(State(hits): State<Arc<Hits>>, Query(query): Query<BTreeMap<String, u64>>) -> Json<Value> {
    hits.customers.fetch_add(1, Ordering::SeqCst);
    let offset = query.get("offset").copied().unwrap_or(0);
    let limit = query.get("limit").copied().unwrap_or(50);
    let items: Vec<Value> = (offset..(offset + limit).min(TOTAL)).map(|i| customer(i + 1)).collect();
    Json(json!({"total": TOTAL, "offset": offset, "limit": limit, "items": items}))
}

async fn flaky(State(hits): State<Arc<Hits>>) -> Response {
    if hits.flaky.fetch_add(1, Ordering::SeqCst) < 2 {
        (StatusCode::INTERNAL_SERVER_ERROR, "upstream hiccup").into_response()
    } else {
        Json(json!({"total": 2, "items": [customer(1), customer(2)]})).into_response()
    }
}

async fn missing(State(hits): State<Arc<Hits>>) -> Response {
    hits.missing.fetch_add(1, Ordering::SeqCst);
    (StatusCode::NOT_FOUND, Json(json!({"error": "no such resource"}))).into_response()
}

async fn big() -> Json<Value> {
    let items: Vec<Value> =
        (1..=40).map(|id| json!({"id": id, "note": format!("{id:03} {}", "lorem ipsum ".repeat(8))})).collect();
    Json(json!({"total": 40, "items": items}))
}

/// Starts the vendor on 127.0.0.1:0 and returns its address and hit counters.
async fn vendor() -> (SocketAddr, Arc<Hits>) {
    let hits = Arc::new(Hits::default());
    let router = Router::new()
        .route("/customers", get(customers))
        .route("/flaky", get(flaky))
        .route("/missing", get(missing))
        .route("/html", get(|| async { "<html><body>Service maintenance</body></html>" }))
        .route("/no-array", get(|| async { Json(json!({"total": 3, "data": [1, 2, 3]})) }))
        .route("/big", get(big))
        .route(
            "/overflow",
            get(|| async { r#"{"items": [{"id": 1, "f": 1e400}, {"id": 2, "s": "\ud800"}, {"id": 3}]}"# }),
        )
        .route(
            "/exact",
            get(|| async {
                // Digits past f64, a decimal's trailing zero, a repeated key:
                // forwarded as the vendor wrote them.
                r#"{"items": [{"v": 123456789012345678901234567890, "p": 12.50, "a": 1, "a": "dup"}]}"#
            }),
        )
        .route(
            "/bom",
            get(|| async {
                ([("content-type", "application/json")], "\u{feff}{\"items\": [{\"id\": 1}, {\"id\": 2}]}")
            }),
        )
        .route(
            "/ndjson",
            get(|| async {
                (
                    [("content-type", "application/x-ndjson")],
                    "{\"id\": 1}\n{\"id\": 2, \"n\": 12.50}\r\n\n{\"id\": 3}\n",
                )
            }),
        )
        // json-server style: the total in a header, the page a bare array.
        .route("/counted", get(|| async { ([("x-total-count", "137")], Json(json!([{"id": 1}]))) }))
        // NDJSON sent as text/plain: recognised by its shape.
        .route("/lines", get(|| async { "{\"id\": 1}\n{\"id\": 2}\n" }))
        .route("/odd", get(odd))
        .route("/odd-lines", get(odd_lines))
        // A byte that is not UTF-8 between values: no string can hold it.
        .route("/bad-byte", get(|| async { b"{\"items\": [1, \xff]}".to_vec() }))
        .with_state(hits.clone());
    (common::serve(router).await, hits)
}

struct Env {
    addr: SocketAddr,
    hits: Arc<Hits>,
    harness: Harness,
}

impl std::ops::Deref for Env {
    type Target = Harness;
    fn deref(&self) -> &Harness {
        &self.harness
    }
}

impl std::ops::DerefMut for Env {
    fn deref_mut(&mut self) -> &mut Harness {
        &mut self.harness
    }
}

impl Env {
    async fn new() -> Self {
        let (addr, hits) = vendor().await;
        Self { addr, hits, harness: Harness::new() }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

fn records_message(url: &str, page: Option<Value>, query: Value) -> Value {
    let mut message = json!({
        "version": 1,
        "pipeline": "customers",
        "run_id": "20261129T060000Z",
        "run_date": "2026-11-29",
        "http": {"method": "GET", "url": url, "query": query},
        "policy": {"allow": {"loopback": true}},
        "mode": {"kind": "records", "records_pointer": "/items", "target": {"dataset": "customers"}},
        "reply_to": {"kind": "queue", "queue": PERSIST_QUEUE},
    });
    if let Some(page) = page {
        message["page"] = page;
    }
    message
}

fn decode(value: Value) -> RequestMessage {
    contracts::decode(value).expect("valid RequestMessage")
}

#[tokio::test]
async fn records_page_is_forwarded_to_persist_with_its_page() {
    let env = Env::new().await;
    let message = decode(records_message(
        &env.url("/customers"),
        Some(json!({"index": 1, "count": 3})),
        json!({"offset": "50", "limit": "50"}),
    ));
    let outcome = request::handle_message(message, env.deps()).await.expect("page fetched");
    assert_eq!(outcome, Outcome::Records { count: 50, claim_check: false });

    let sent = env.drain(PERSIST_QUEUE);
    assert_eq!(sent.len(), 1);
    let persist: PersistMessage = contracts::decode(sent[0].clone()).expect("a PersistMessage");
    assert_eq!(persist.page, PageRef { index: 1, count: 3 });
    assert_eq!(persist.run_id.as_str(), "20261129T060000Z");
    assert_eq!(persist.target.dataset, "customers");
    let Payload::Inline { records } = &persist.payload else { panic!("inline expected: {:?}", persist.payload) };
    let records = records.to_values().expect("records");
    assert_eq!(records.len(), 50);
    assert_eq!(records[0], customer(51), "offset 50 is customer 51");
    assert_eq!(records[49], customer(100));
    assert_eq!(env.hits.customers.load(Ordering::SeqCst), 1);
    assert!(env.store.list("").await.expect("list").is_empty(), "no claim check for a small page");
}

#[tokio::test]
async fn message_without_page_is_forwarded_as_the_single_page() {
    let env = Env::new().await;
    let message = decode(records_message(&env.url("/customers"), None, json!({"offset": "100", "limit": "50"})));
    let outcome = request::handle_message(message, env.deps()).await.expect("page fetched");
    assert_eq!(outcome, Outcome::Records { count: 20, claim_check: false });
    let persist: PersistMessage = contracts::decode(env.drain(PERSIST_QUEUE).remove(0)).expect("PersistMessage");
    assert_eq!(persist.page, PageRef::SINGLE);
}

#[tokio::test]
async fn probe_replies_with_the_total_and_echoes_the_context() {
    let env = Env::new().await;
    let context = json!({"version": 1, "pipeline": "customers", "strategy": {"kind": "paged", "page_size": 50, "total_pointer": "/total"}, "nested": [1, {"a": null}]});
    let message = decode(json!({
        "version": 1,
        "pipeline": "customers",
        "run_id": "20261129T060000Z",
        "run_date": "2026-11-29",
        "http": {"url": env.url("/customers"), "query": {"offset": "0", "limit": "50"}},
        "policy": {"allow": {"loopback": true}},
        "mode": {"kind": "probe", "total_pointer": "/total", "context": context},
        "reply_to": {"kind": "queue", "queue": ORCHESTRATOR_QUEUE},
    }));
    let outcome = request::handle_message(message, env.deps()).await.expect("probe answered");
    assert_eq!(outcome, Outcome::Total(TOTAL));

    let sent = env.drain(ORCHESTRATOR_QUEUE);
    assert_eq!(sent.len(), 1);
    let reply: ProbeReply = contracts::decode(sent[0].clone()).expect("a ProbeReply");
    assert_eq!(reply.total, TOTAL);
    assert_eq!(reply.context, context, "context echoed unchanged");
    assert_eq!(reply.pipeline, "customers");
    assert_eq!(reply.run_id.as_str(), "20261129T060000Z");
    assert_eq!(env.broker.depth(PERSIST_QUEUE), 0, "a probe persists nothing");
}

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    let env = Env::new().await;
    let message = decode(records_message(&env.url("/flaky"), Some(json!({"index": 0, "count": 1})), json!({})));
    let outcome = request::handle_message(message, env.deps()).await.expect("third call succeeds");
    assert_eq!(outcome, Outcome::Records { count: 2, claim_check: false });
    assert_eq!(env.hits.flaky.load(Ordering::SeqCst), 3, "500, 500, 200");
    assert_eq!(env.drain(PERSIST_QUEUE).len(), 1);
}

#[tokio::test]
async fn not_found_fails_without_retry() {
    let env = Env::new().await;
    let message = decode(records_message(&env.url("/missing"), None, json!({})));
    let err = request::handle_message(message, env.deps()).await.expect_err("404");
    assert!(matches!(err, RequestError::Status { status: 404, .. }), "{err:?}");
    assert!(!err.is_retryable());
    let text = err.to_string();
    assert!(text.contains("404") && text.contains("/missing"), "{text}");
    assert_eq!(env.hits.missing.load(Ordering::SeqCst), 1, "a 404 is not retried");
    assert_eq!(env.broker.depth(PERSIST_QUEUE), 0);
}

#[tokio::test]
async fn non_json_response_is_named() {
    let env = Env::new().await;
    let message = decode(records_message(&env.url("/html"), None, json!({})));
    let err = request::handle_message(message, env.deps()).await.expect_err("not JSON");
    assert!(matches!(err, RequestError::NotJson { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("not JSON") && text.contains("Service maintenance"), "{text}");
    assert_eq!(env.broker.depth(PERSIST_QUEUE), 0);
}

#[tokio::test]
async fn missing_records_array_names_records_pointer() {
    let env = Env::new().await;
    let message = decode(records_message(&env.url("/no-array"), None, json!({})));
    let err = request::handle_message(message, env.deps()).await.expect_err("no /items");
    let text = err.to_string();
    assert!(text.contains("records_pointer") && text.contains("/items"), "{text}");
    assert_eq!(env.broker.depth(PERSIST_QUEUE), 0);
    // The body is JSON: the spec's pointer is wrong, and calling the vendor
    // again cannot help. Dead-lettered at once, not after max receives.
    assert!(tributary_core::batch::RecordError::is_permanent(&err), "{err:?}");

    // A pointer that leads to something other than an array is named too.
    let mut value = records_message(&env.url("/no-array"), None, json!({}));
    value["mode"]["records_pointer"] = json!("/total");
    let err = request::handle_message(decode(value), env.deps()).await.expect_err("/total is a number");
    let text = err.to_string();
    assert!(text.contains("records_pointer") && text.contains("not an array"), "{text}");
    assert!(tributary_core::batch::RecordError::is_permanent(&err), "{err:?}");
}

#[tokio::test]
async fn oversize_page_goes_by_claim_check() {
    let mut env = Env::new().await;
    env.config.max_message_bytes = 2_000;
    let message = decode(records_message(&env.url("/big"), Some(json!({"index": 4, "count": 9})), json!({})));
    let outcome = request::handle_message(message, env.deps()).await.expect("claim check");
    assert_eq!(outcome, Outcome::Records { count: 40, claim_check: true });

    let sent = env.drain(PERSIST_QUEUE);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["payload"]["kind"], "object", "{}", sent[0]);
    let body_len = serde_json::to_string(&sent[0]).expect("json").len();
    assert!(body_len <= 2_000, "the claim-check message itself fits: {body_len} bytes");
    let persist: PersistMessage = contracts::decode(sent[0].clone()).expect("PersistMessage");
    assert_eq!(persist.page, PageRef { index: 4, count: 9 });
    let Payload::Object { key, .. } = &persist.payload else { panic!("object payload expected") };
    assert!(key.starts_with("_claims/"), "{key}");
    assert_eq!(key, "_claims/customers/20261129T060000Z/page-00004.json");

    let stored: Value = serde_json::from_slice(&env.store.get(key).await.expect("claim object")).expect("JSON");
    let records = stored.as_array().expect("an array of records");
    assert_eq!(records.len(), 40);
    assert_eq!(records[0]["id"], 1);
    assert_eq!(records[39]["id"], 40);
    assert!(records[0]["note"].as_str().expect("note").starts_with("001 lorem"));
}

fn sqs_event(queue: &str, bodies: &[(&str, String)]) -> SqsEvent {
    let records: Vec<Value> = bodies
        .iter()
        .map(|(id, body)| {
            json!({
                "messageId": id,
                "receiptHandle": format!("AQEB{id}"),
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": "1795932000000",
                    "SenderId": "AROAEXAMPLEROLEID:tributary-orchestrator",
                    "ApproximateFirstReceiveTimestamp": "1795932000087"
                },
                "messageAttributes": {},
                "md5OfBody": "00000000000000000000000000000000",
                "eventSource": "aws:sqs",
                "eventSourceARN": format!("arn:aws:sqs:us-east-1:123456789012:{queue}"),
                "awsRegion": "us-east-1"
            })
        })
        .collect();
    serde_json::from_value(json!({ "Records": records })).expect("SQS event")
}

#[tokio::test]
async fn sqs_batch_reports_only_the_failing_records() {
    let env = Env::new().await;
    let page = |index: u32, offset: &str| {
        records_message(
            &env.url("/customers"),
            Some(json!({"index": index, "count": 3})),
            json!({"offset": offset, "limit": "50"}),
        )
        .to_string()
    };
    let mut version_2 = records_message(&env.url("/customers"), None, json!({}));
    version_2["version"] = json!(2);
    let event = sqs_event(
        "tributary-request",
        &[
            ("page-0", page(0, "0")),
            ("gone", records_message(&env.url("/missing"), None, json!({})).to_string()),
            ("page-2", page(2, "100")),
            ("not-json", "GET /customers please".to_string()),
            ("version-2", version_2.to_string()),
            ("html", records_message(&env.url("/html"), None, json!({})).to_string()),
        ],
    );
    let response = request::handle_sqs(&event, env.deps()).await;
    let failed: Vec<&str> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
    assert_eq!(failed, ["gone", "not-json", "version-2", "html"]);

    let mut pages: Vec<PersistMessage> =
        env.drain(PERSIST_QUEUE).into_iter().map(|v| contracts::decode(v).expect("PersistMessage")).collect();
    pages.sort_by_key(|p| p.page.index);
    assert_eq!(pages.iter().map(|p| p.page.index).collect::<Vec<_>>(), [0, 2]);
    let counts: Vec<usize> = pages
        .iter()
        .map(|p| match &p.payload {
            Payload::Inline { records } => records.to_values().expect("records").len(),
            Payload::Object { .. } => usize::MAX,
        })
        .collect();
    assert_eq!(counts, [50, 20]);
}

#[tokio::test]
async fn records_are_forwarded_as_the_vendor_wrote_them() {
    let env = Env::new().await;
    let message = decode(records_message(&env.url("/exact"), None, json!({})));
    let outcome = request::handle_message(message, env.deps()).await.expect("page fetched");
    assert_eq!(outcome, Outcome::Records { count: 1, claim_check: false });
    let sent = env.drain_text(PERSIST_QUEUE);
    assert_eq!(sent.len(), 1);
    assert!(
        sent[0].contains(r#""records":[{"v": 123456789012345678901234567890, "p": 12.50, "a": 1, "a": "dup"}]"#),
        "the records' text is kept: {}",
        sent[0]
    );
}

#[tokio::test]
async fn values_serde_json_cannot_hold_are_forwarded_for_persist_to_quarantine() {
    let env = Env::new().await;
    let message = decode(records_message(&env.url("/overflow"), None, json!({})));
    let outcome = request::handle_message(message, env.deps()).await.expect("the page is not failed");
    assert_eq!(outcome, Outcome::Records { count: 3, claim_check: false });
    let sent = env.drain_text(PERSIST_QUEUE);
    assert!(sent[0].contains(r#"{"id": 1, "f": 1e400}"#) && sent[0].contains(r#""s": "\ud800""#), "{}", sent[0]);
}

#[tokio::test]
async fn a_deep_record_a_lone_surrogate_key_and_a_byte_not_utf8_are_forwarded_with_the_page_in_one_call() {
    let env = Env::new().await;
    for (path, pointer) in [("/odd", "/items"), ("/odd-lines", "")] {
        let mut value = records_message(&env.url(path), None, json!({}));
        value["mode"]["records_pointer"] = json!(pointer);
        let outcome = request::handle_message(decode(value), env.deps()).await.expect("the page is not failed");
        assert_eq!(outcome, Outcome::Records { count: 5, claim_check: false }, "{path}");
        let sent = env.drain_text(PERSIST_QUEUE);
        assert_eq!(sent.len(), 1, "{path}");
        let deep = format!(r#"{{"id": 1, "deep": {}{}}}"#, "[".repeat(DEEP), "]".repeat(DEEP));
        for record in [deep.as_str(), r#"{"id": 0}"#, r#"{"id": 2, "\ud800": 1}"#, r#"{"id": 4}"#] {
            assert!(sent[0].contains(record), "{path}: {record:.40} forwarded as written");
        }
        // The byte 0xe9 travels as the escape of a lone surrogate, which
        // Persist quarantines naming the byte.
        assert!(sent[0].contains(r#"{"id": 3, "name": "Jos\udce9"}"#), "{path}: {:.200}", sent[0]);
    }
    assert_eq!(env.hits.odd.load(Ordering::SeqCst), 2, "one call per page: nothing retried");

    let message = decode(records_message(&env.url("/bad-byte"), None, json!({})));
    let err = request::handle_message(message, env.deps()).await.expect_err("no string holds the byte");
    // As any body that is not JSON (a vendor's passing error page): no
    // retry in this invocation, SQS redelivers it.
    assert!(matches!(err, RequestError::NotJson { .. }), "{err}");
    assert!(!err.is_retryable(), "{err}");
}

#[tokio::test]
async fn a_byte_order_mark_and_ndjson_bodies_are_read() {
    let env = Env::new().await;
    let outcome = request::handle_message(decode(records_message(&env.url("/bom"), None, json!({}))), env.deps())
        .await
        .expect("a BOM before JSON is skipped");
    assert_eq!(outcome, Outcome::Records { count: 2, claim_check: false });
    assert!(env.drain_text(PERSIST_QUEUE)[0].contains(r#""records":[{"id": 1}, {"id": 2}]"#));
    for path in ["/ndjson", "/lines"] {
        let mut value = records_message(&env.url(path), None, json!({}));
        value["mode"]["records_pointer"] = json!("");
        let outcome = request::handle_message(decode(value), env.deps()).await.expect("NDJSON read");
        let sent = env.drain_text(PERSIST_QUEUE);
        let expected = if path == "/ndjson" { 3 } else { 2 };
        assert_eq!(outcome, Outcome::Records { count: expected, claim_check: false }, "{path}");
        if path == "/ndjson" {
            assert!(sent[0].contains(r#""records":[{"id": 1},{"id": 2, "n": 12.50},{"id": 3}]"#), "{}", sent[0]);
        }
    }
}

#[tokio::test]
async fn a_probe_reads_the_total_from_a_header_when_the_spec_names_one() {
    let env = Env::new().await;
    let probe = |header: &str| {
        decode(json!({
            "version": 1, "pipeline": "customers", "run_id": "20261129T060000Z", "run_date": "2026-11-29",
            "http": {"url": env.url("/counted")},
            "policy": {"allow": {"loopback": true}},
            "mode": {"kind": "probe", "total_header": header, "context": {}},
            "reply_to": {"kind": "queue", "queue": ORCHESTRATOR_QUEUE},
        }))
    };
    let outcome = request::handle_message(probe("X-Total-Count"), env.deps()).await.expect("probe answered");
    assert_eq!(outcome, Outcome::Total(137), "header names are case-insensitive");
    let reply: ProbeReply = contracts::decode(env.drain(ORCHESTRATOR_QUEUE).remove(0)).expect("a ProbeReply");
    assert_eq!(reply.total, 137);
    let err = request::handle_message(probe("X-Total"), env.deps()).await.expect_err("no such header");
    let text = err.to_string();
    assert!(
        text.contains("total_header") && text.contains("X-Total") && text.contains("not in the response"),
        "{text}"
    );
    assert!(tributary_core::batch::RecordError::is_permanent(&err), "a wrong header name is the spec's mistake");
}
