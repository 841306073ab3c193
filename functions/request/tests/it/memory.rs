//! Request's memory on large pages: one large body at a time per process
//! (the client's large-body turn), and a batch of large pages forwarded
//! whole. The peak RSS figures come from `request-bench` (bench/), not
//! from a test.

use std::collections::BTreeMap;
use std::time::Duration;

use contracts::HttpMethod;
use request::http::{HttpOptions, ReqwestClient};
use serde_json::{Value, json};
use tributary_core::ports::{HttpClient, HttpRequest, NetworkAccess};

use crate::common::{Harness, PERSIST_QUEUE, message};

fn get(url: &str) -> HttpRequest {
    HttpRequest {
        method: HttpMethod::Get,
        url: url.parse().expect("url"),
        headers: BTreeMap::new(),
        body: None,
        timeout: Duration::from_secs(5),
        access: NetworkAccess { loopback: true, private: false },
        max_body_bytes: None,
    }
}

fn client(large_body_bytes: u64) -> ReqwestClient {
    ReqwestClient::with_options(HttpOptions { large_body_bytes, ..HttpOptions::default() }).expect("client")
}

#[tokio::test]
async fn a_second_large_body_waits_until_the_first_response_is_dropped() {
    let (addr, _) = test_support::vendor::serve_bytes(vec![b' '; 64 * 1024], "application/json").await;
    let url = format!("http://{addr}/records");
    let client = client(16 * 1024);
    let first = client.send(get(&url)).await.expect("first");
    assert!(first.turn.is_some(), "a 64 KiB body past 16 KiB holds the turn");
    let second = client.send(get(&url));
    tokio::pin!(second);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut second).await.is_err(),
        "the second large body is not read while the first response lives"
    );
    drop(first);
    let second = tokio::time::timeout(Duration::from_secs(3), second)
        .await
        .expect("read once the first is dropped")
        .expect("second");
    assert_eq!(second.body.len(), 64 * 1024);
}

#[tokio::test]
async fn small_bodies_are_read_side_by_side() {
    let (addr, _) = test_support::vendor::serve_bytes(vec![b' '; 1024], "application/json").await;
    let url = format!("http://{addr}/records");
    let client = client(16 * 1024);
    let first = client.send(get(&url)).await.expect("first");
    let second = tokio::time::timeout(Duration::from_secs(3), client.send(get(&url)))
        .await
        .expect("a small body needs no turn")
        .expect("second");
    assert!(first.turn.is_none() && second.turn.is_none());
}

#[tokio::test]
async fn a_turn_never_held_by_its_own_message_times_out_instead_of_hanging() {
    let (addr, _) = test_support::vendor::serve_bytes(vec![b' '; 64 * 1024], "application/json").await;
    let url = format!("http://{addr}/records");
    let client = client(16 * 1024);
    let _held = client.send(get(&url)).await.expect("first");
    let mut request = get(&url);
    request.timeout = Duration::from_millis(300);
    let err = client.send(request).await.expect_err("no turn within the call's time-out");
    assert!(err.is_retryable(), "{err}");
    assert!(err.to_string().contains("turn to read a large body"), "{err}");
}

#[tokio::test]
async fn a_batch_of_large_pages_is_forwarded_whole_one_at_a_time() {
    let items: Vec<Value> = (0..20_000).map(|id| json!({"id": id, "name": format!("customer {id}")})).collect();
    let page = serde_json::to_vec(&json!({"meta": {"total": 20_000}, "items": items})).expect("page");
    let bytes = page.len();
    let (addr, calls) = test_support::vendor::serve_bytes(page, "application/json").await;
    let mut env = Harness::new();
    env.http = client(64 * 1024);
    let url = format!("http://{addr}/records");
    let outcomes = futures::future::join_all((0..5u32).map(|index| {
        let mut message = message(&url, json!({}));
        message.page = Some(contracts::PageRef { index, count: 5 });
        request::handle_message(message, env.deps())
    }))
    .await;
    for outcome in outcomes {
        assert!(matches!(outcome, Ok(request::Outcome::Records { count: 20_000, claim_check: true })), "{outcome:?}");
    }
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 5);
    let forwarded = env.drain(PERSIST_QUEUE);
    assert_eq!(forwarded.len(), 5);
    for message in forwarded {
        let key = message["payload"]["key"].as_str().expect("a claim check");
        let stored: Vec<Value> =
            serde_json::from_slice(&std::fs::read(env.dir.path().join(key)).expect("claim-check object"))
                .expect("json");
        assert_eq!(stored.len(), 20_000);
        assert_eq!(stored[19_999], json!({"id": 19_999, "name": "customer 19999"}));
    }
    assert!(bytes > 64 * 1024);
}
