//! Auth kinds against a local server that checks what it receives:
//! credentials read by secret id, never shown in errors; OAuth tokens cached
//! across messages and refreshed once on 401; bad auth fails permanently.

use crate::common;

use std::sync::{Arc, Mutex};

use common::{Harness, PERSIST_QUEUE, items, message, recorder, reply};
use request::{Outcome, RequestError};
use serde_json::json;
use tributary_core::batch::{DeadLetterTarget, RecordError};

const KEY: &str = "K3Y-s3cr3t-7781";

#[tokio::test]
async fn api_key_bearer_and_basic_carry_the_secret() {
    let (addr, log) = recorder(|_, _| reply(200, &[], items(0..1))).await;
    let harness = Harness::new();
    harness.secrets(json!({"vendor/key": KEY, "vendor/basic": "ana:pa ss"}));
    let url = format!("http://{addr}/data");
    for policy in [
        json!({"auth": {"kind": "api_key", "secret_id": "vendor/key", "header": "x-api-key"}}),
        json!({"auth": {"kind": "api_key", "secret_id": "vendor/key", "query_param": "api_key"}}),
        json!({"auth": {"kind": "bearer", "secret_id": "vendor/key"}}),
        json!({"auth": {"kind": "basic", "secret_id": "vendor/basic"}}),
        json!({"auth": {"kind": "bearer", "secret_id": "vendor/key", "scheme": "Token"}}),
    ] {
        request::handle_message(message(&url, policy), harness.deps()).await.expect("authorised call");
    }
    let log = log.lock().expect("log");
    assert_eq!(log.len(), 5);
    assert_eq!(log[0].headers.get("x-api-key").map(String::as_str), Some(KEY));
    assert_eq!(log[1].query("api_key").as_deref(), Some(KEY));
    assert_eq!(log[2].headers.get("authorization").map(String::as_str), Some(format!("Bearer {KEY}").as_str()));
    // base64("ana:pa ss")
    assert_eq!(log[3].headers.get("authorization").map(String::as_str), Some("Basic YW5hOnBhIHNz"));
    // Django REST Framework's TokenAuthentication.
    assert_eq!(log[4].headers.get("authorization").map(String::as_str), Some(format!("Token {KEY}").as_str()));
}

#[tokio::test]
async fn a_secret_never_appears_in_errors() {
    let (addr, _log) = recorder(|_, _| reply(500, &[], json!({"error": "down"}))).await;
    let harness = Harness::new();
    harness.secrets(json!({"vendor/key": KEY}));
    let policy = json!({"auth": {"kind": "api_key", "secret_id": "vendor/key", "query_param": "api_key"}});
    let err = request::handle_message(message(&format!("http://{addr}/data"), policy), harness.deps())
        .await
        .expect_err("500");
    let text = format!("{err} {err:?}");
    assert!(text.contains("500") && !text.contains(KEY), "{text}");
}

#[tokio::test]
async fn a_vendor_echoing_the_credential_does_not_put_it_in_the_error() {
    let (addr, _log) = recorder(|_, seen| {
        let echoed = seen.headers.get("authorization").cloned().unwrap_or_default();
        reply(403, &[], json!({"error": format!("token {echoed} is not allowed here")}))
    })
    .await;
    let harness = Harness::new();
    harness.secrets(json!({"vendor/key": KEY}));
    let policy = json!({"auth": {"kind": "bearer", "secret_id": "vendor/key"}});
    let err = request::handle_message(message(&format!("http://{addr}/data"), policy), harness.deps())
        .await
        .expect_err("403");
    let text = err.to_string();
    assert!(text.contains("403") && text.contains("<redacted>") && !text.contains(KEY), "{text}");
}

#[tokio::test]
async fn a_missing_secret_fails_permanently_naming_the_field() {
    let (addr, log) = recorder(|_, _| reply(200, &[], items(0..1))).await;
    let harness = Harness::new();
    let policy = json!({"auth": {"kind": "bearer", "secret_id": "vendor/absent"}});
    let err = request::handle_message(message(&format!("http://{addr}/data"), policy), harness.deps())
        .await
        .expect_err("no such secret");
    assert!(matches!(err, RequestError::Auth { permanent: true, .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("policy.auth.secret_id") && text.contains("vendor/absent"), "{text}");
    assert!(text.contains("no such secret"), "{text}");
    assert_eq!(log.lock().expect("log").len(), 0, "no call without credentials");

    let policy = json!({"auth": {"kind": "api_key", "secret_id": "vendor/absent"}});
    let err = request::handle_message(message(&format!("http://{addr}/data"), policy), harness.deps())
        .await
        .expect_err("no place for the key");
    assert!(err.is_permanent() && err.to_string().contains("`policy.auth`"), "{err}");
}

#[tokio::test]
async fn an_unknown_auth_kind_goes_to_the_dlq_at_once_with_the_field_named() {
    let harness = {
        let mut harness = Harness::new();
        harness.config.dead_letter = Some(DeadLetterTarget { dlq: "request-dlq".into(), max_receive_count: 5 });
        harness
    };
    harness.broker.create_queue(adapters::local::QueueConfig {
        name: "request-dlq".into(),
        visibility_timeout: std::time::Duration::from_secs(30),
        max_message_bytes: 262_144,
        redrive: None,
    });
    let mut body = serde_json::to_value(message("http://127.0.0.1:9/x", json!({}))).expect("json");
    body["policy"]["auth"] = json!({"kind": "kerberos", "secret_id": "x"});
    let event = serde_json::from_value(json!({"Records": [{
        "messageId": "m-1", "receiptHandle": "r-1", "body": body.to_string(),
        "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
        "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:1:request", "awsRegion": "us-east-1"
    }]}))
    .expect("event");
    let response = request::handle_sqs(&event, harness.deps()).await;
    assert!(response.batch_item_failures.is_empty(), "handled by dead-lettering, not redelivered");
    let dead = harness.broker.receive("request-dlq", 10).expect("receive");
    assert_eq!(dead.len(), 1);
    let attributes = &dead[0].message_attributes;
    let reason = attributes["tributary-error"].string_value.clone().unwrap_or_default();
    assert!(reason.contains("policy.auth") && reason.contains("kerberos"), "{reason}");
    assert_eq!(attributes["tributary-permanent"].string_value.as_deref(), Some("true"));
}

#[tokio::test]
async fn oauth_tokens_are_cached_and_refreshed_once_on_401() {
    let issued = Arc::new(Mutex::new(0u32));
    let revoked = Arc::new(Mutex::new(Vec::<String>::new()));
    let (issued_in, revoked_in) = (issued.clone(), revoked.clone());
    let (addr, log) = recorder(move |_, seen| {
        if seen.uri == "/oauth/token" {
            let mut n = issued_in.lock().expect("issued");
            *n += 1;
            return reply(
                200,
                &[],
                json!({"access_token": format!("tok-{n}"), "token_type": "bearer", "expires_in": 3600}),
            );
        }
        let token = seen.headers.get("authorization").cloned().unwrap_or_default();
        if token.is_empty() || revoked_in.lock().expect("revoked").contains(&token) {
            return reply(401, &[], json!({"error": "invalid_token"}));
        }
        reply(200, &[], items(0..2))
    })
    .await;
    let harness = Harness::new();
    harness.secrets(json!({"vendor/client-secret": "cl!ent-s3cret"}));
    let policy = json!({"auth": {
        "kind": "oauth2_client_credentials", "token_url": format!("http://{addr}/oauth/token"),
        "client_id": "tributary", "secret_id": "vendor/client-secret", "scope": "read"
    }});
    let url = format!("http://{addr}/data");
    for _ in 0..2 {
        let outcome = request::handle_message(message(&url, policy.clone()), harness.deps()).await.expect("ok");
        assert_eq!(outcome, Outcome::Records { count: 2, claim_check: false });
    }
    revoked.lock().expect("revoked").push("Bearer tok-1".into());
    request::handle_message(message(&url, policy.clone()), harness.deps()).await.expect("refreshed");

    let log = log.lock().expect("log");
    let calls: Vec<(String, String)> =
        log.iter().map(|s| (s.uri.clone(), s.headers.get("authorization").cloned().unwrap_or_default())).collect();
    let data = |token: &str| ("/data".to_string(), format!("Bearer {token}"));
    let token_call = ("/oauth/token".to_string(), "Basic dHJpYnV0YXJ5OmNsIWVudC1zM2NyZXQ=".to_string());
    assert_eq!(
        calls,
        [token_call.clone(), data("tok-1"), data("tok-1"), data("tok-1"), token_call, data("tok-2")],
        "one token for two messages; a 401 fetches one fresh token and calls again"
    );
    assert_eq!(log[0].method, "POST");
    assert_eq!(log[0].body, "grant_type=client_credentials&scope=read");
    assert_eq!(log[0].headers.get("content-type").map(String::as_str), Some("application/x-www-form-urlencoded"));
    drop(log);
    assert_eq!(harness.drain(PERSIST_QUEUE).len(), 3);
}

#[tokio::test]
async fn a_401_after_the_refresh_fails_permanently() {
    let (addr, log) = recorder(|_, seen| {
        if seen.uri == "/oauth/token" {
            return reply(200, &[], json!({"access_token": "tok", "expires_in": 3600}));
        }
        reply(401, &[], json!({"error": "invalid_token"}))
    })
    .await;
    let harness = Harness::new();
    harness.secrets(json!({"s": "x"}));
    let policy = json!({"auth": {"kind": "oauth2_client_credentials", "token_url": format!("http://{addr}/oauth/token"), "client_id": "c", "secret_id": "s"}});
    let err = request::handle_message(message(&format!("http://{addr}/data"), policy), harness.deps())
        .await
        .expect_err("401 twice");
    assert!(matches!(err, RequestError::Status { status: 401, .. }) && err.is_permanent(), "{err:?}");
    let uris: Vec<String> = log.lock().expect("log").iter().map(|s| s.uri.clone()).collect();
    assert_eq!(uris, ["/oauth/token", "/data", "/oauth/token", "/data"], "one refresh, never a loop");
}
