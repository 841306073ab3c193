//! The SSRF guard: the host allow-list, resolved addresses (through a name
//! table standing in for DNS), address literals and redirects, each
//! re-checked; credentials only to the message's own host.

use crate::common;

use std::net::IpAddr;
use std::sync::Arc;

use common::{Harness, items, message, recorder, reply};
use request::ssrf::{Lookup, LookupFuture};
use request::{Outcome, RequestError};
use serde_json::json;
use tributary_core::batch::RecordError;

/// `vendor.test` and `other.test` are this machine; `internal.test` is in
/// the VPC; `metadata.test` is the instance metadata service.
struct Names;

impl Lookup for Names {
    fn lookup(&self, host: &str) -> LookupFuture {
        let found: Vec<IpAddr> = match host {
            "vendor.test" | "other.test" => vec!["127.0.0.1".parse().expect("ip")],
            "internal.test" => vec!["10.0.0.5".parse().expect("ip")],
            "metadata.test" => vec!["169.254.169.254".parse().expect("ip")],
            _ => Vec::new(),
        };
        Box::pin(async move { Ok(found) })
    }
}

fn expect_refusal(err: &RequestError, needles: &[&str]) {
    assert!(err.is_permanent(), "a refusal is permanent: {err:?}");
    let text = err.to_string();
    for needle in needles {
        assert!(text.contains(needle), "{needle:?} not in {text}");
    }
}

#[tokio::test]
async fn loopback_is_refused_unless_the_policy_allows_it() {
    let (addr, log) = recorder(|_, _| reply(200, &[], items(0..1))).await;
    let harness = Harness::new();
    let refused = message(&format!("http://{addr}/x"), json!({"allow": {}}));
    let err = request::handle_message(refused, harness.deps()).await.expect_err("loopback refused");
    expect_refusal(&err, &["127.0.0.1", "loopback", "SSRF"]);
    assert_eq!(log.lock().expect("log").len(), 0, "nothing reached the server");
    let allowed = message(&format!("http://{addr}/x"), json!({"allow": {"loopback": true}}));
    assert!(request::handle_message(allowed, harness.deps()).await.is_ok());
    assert_eq!(log.lock().expect("log").len(), 1);
}

#[tokio::test]
async fn a_name_resolving_to_a_private_or_metadata_address_is_refused() {
    let harness = Harness::with_lookup(Arc::new(Names));
    for (host, address, class) in
        [("internal.test", "10.0.0.5", "private"), ("metadata.test", "169.254.169.254", "link-local")]
    {
        let err = request::handle_message(message(&format!("http://{host}:9/x"), json!({})), harness.deps())
            .await
            .expect_err("refused after resolution");
        expect_refusal(&err, &[host, address, class]);
    }
    // Link-local stays refused even when private and loopback are allowed.
    let everything = json!({"allow": {"loopback": true, "private": true}});
    let err = request::handle_message(message("http://169.254.169.254/latest/meta-data/", everything), harness.deps())
        .await
        .expect_err("metadata literal");
    expect_refusal(&err, &["169.254.169.254", "link-local"]);
}

#[tokio::test]
async fn a_redirect_to_a_private_address_is_refused() {
    let (addr, log) = recorder(|_, seen| match seen.uri.as_str() {
        "/to-internal" => reply(302, &[("location", "http://internal.test:80/x")], json!({})),
        "/to-metadata" => reply(302, &[("location", "http://169.254.169.254/latest/meta-data/iam")], json!({})),
        _ => reply(200, &[], items(0..1)),
    })
    .await;
    let harness = Harness::with_lookup(Arc::new(Names));
    let port = addr.port();
    let listed = json!({"allow": {"loopback": true, "hosts": ["internal.test", "169.254.169.254"]}});
    let err = request::handle_message(
        message(&format!("http://vendor.test:{port}/to-internal"), listed.clone()),
        harness.deps(),
    )
    .await
    .expect_err("redirect to 10.0.0.5");
    expect_refusal(&err, &["internal.test", "10.0.0.5", "private"]);
    let err =
        request::handle_message(message(&format!("http://vendor.test:{port}/to-metadata"), listed), harness.deps())
            .await
            .expect_err("redirect to the metadata endpoint");
    expect_refusal(&err, &["169.254.169.254", "link-local"]);
    // A host not in the allow-list is refused before any resolution.
    let err =
        request::handle_message(message(&format!("http://vendor.test:{port}/to-internal"), json!({})), harness.deps())
            .await
            .expect_err("internal.test not listed");
    expect_refusal(&err, &["internal.test", "allow.hosts"]);
    let uris: Vec<String> = log.lock().expect("log").iter().map(|s| s.uri.clone()).collect();
    assert_eq!(uris, ["/to-internal", "/to-metadata", "/to-internal"], "each redirect target was never called");
}

#[tokio::test]
async fn allowed_redirects_are_followed_and_credentials_stay_with_the_origin() {
    // The 307 goes to another host on the same port (its Host header's).
    let (addr, log) = recorder(|_, seen| match seen.uri.as_str() {
        "/first" => reply(301, &[("location", "/second")], json!({})),
        "/second" => {
            let host = seen.headers.get("host").cloned().unwrap_or_default();
            let port = host.rsplit(':').next().unwrap_or("80").to_string();
            reply(307, &[("location", &format!("http://other.test:{port}/items"))], json!({}))
        }
        _ => reply(200, &[], items(0..2)),
    })
    .await;
    let harness = Harness::with_lookup(Arc::new(Names));
    harness.secrets(json!({"vendor/token": "T0KEN-SECRET"}));
    let policy = json!({"allow": {"loopback": true, "hosts": ["*.test"]}, "auth": {"kind": "bearer", "secret_id": "vendor/token"}});
    let outcome =
        request::handle_message(message(&format!("http://vendor.test:{}/first", addr.port()), policy), harness.deps())
            .await
            .expect("followed");
    assert_eq!(outcome, Outcome::Records { count: 2, claim_check: false });
    let log = log.lock().expect("log");
    let seen: Vec<(String, Option<String>)> =
        log.iter().map(|s| (s.uri.clone(), s.headers.get("authorization").cloned())).collect();
    assert_eq!(
        seen,
        [
            ("/first".to_string(), Some("Bearer T0KEN-SECRET".to_string())),
            ("/second".to_string(), Some("Bearer T0KEN-SECRET".to_string())),
            ("/items".to_string(), None),
        ],
        "the token is not sent to another host"
    );
    assert!(log[2].headers.get("host").is_some_and(|h| h.starts_with("other.test")));
}

#[tokio::test]
async fn redirects_to_other_schemes_are_refused() {
    let (addr, log) = recorder(|_, _| reply(302, &[("location", "file:///etc/passwd")], json!({}))).await;
    let harness = Harness::new();
    let err = request::handle_message(message(&format!("http://{addr}/x"), json!({})), harness.deps())
        .await
        .expect_err("file URL");
    expect_refusal(&err, &["redirect to a file URL"]);
    assert_eq!(log.lock().expect("log").len(), 1);
}

#[tokio::test]
async fn redirect_loops_stop_after_five() {
    let (addr, log) = recorder(|_, _| reply(302, &[("location", "/again")], json!({}))).await;
    let harness = Harness::new();
    let err = request::handle_message(message(&format!("http://{addr}/again"), json!({})), harness.deps())
        .await
        .expect_err("loop");
    expect_refusal(&err, &["more than 5 redirects"]);
    assert_eq!(log.lock().expect("log").len(), 6, "the call and five redirects");
}
