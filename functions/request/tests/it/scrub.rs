//! Secrets scrubbed on every path a vendor's text travels, through the
//! handler (SQS events as AWS sends them) against vendors that echo the
//! request (`test_support::vendor::serve_echoes`): the error text, the
//! dead letter (body and attributes), the messages sent on, and the log
//! lines (`test_support::logs::LogBuffer`) never hold a credential in any
//! spelling — raw, JSON-escaped, `{:?}`-escaped, percent-encoded (either
//! case), base64 — nor a fragment of one longer than 8 characters.

use crate::common;

use base64::Engine;
use common::{Harness, PERSIST_QUEUE, REQUEST_QUEUE, message};
use request::RequestError;
use serde_json::{Value, json};
use test_support::logs::LogBuffer;
use test_support::vendor::{Echo, EchoReply, serve_echoes};
use tributary_core::batch::{DeadLetterTarget, RecordError};

/// A bearer token with the characters escapings touch (`/`, `+`).
const TOKEN: &str = "atk/SECRET+slash/0c9d8e7f6a5b";
/// A basic-auth login whose password has `"` and `\`.
const LOGIN: &str = "ana:pa\"ss\\w0rd-7781x";
const PASSWORD: &str = "pa\"ss\\w0rd-7781x";
const DLQ: &str = "request-dlq";

fn json_escaped(text: &str) -> String {
    let quoted = serde_json::to_string(text).expect("json");
    // PHP's json_encode escapes `/` too.
    quoted[1..quoted.len() - 1].replace('/', r"\/")
}

fn debug_escaped(text: &str) -> String {
    let quoted = format!("{text:?}");
    quoted[1..quoted.len() - 1].to_string()
}

fn percent(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// `%XX` escapes with lower-case hex digits.
fn lower_escapes(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '%' {
            out.extend(chars.by_ref().take(2).map(|h| h.to_ascii_lowercase()));
        }
    }
    out
}

/// Every form of `secret` a leak could take: raw, JSON-escaped,
/// `{:?}`-escaped (and both stacked), percent-encoded (`+` and `%20` for
/// a space, either case), JSON over percent, base64 (padded, unpadded,
/// URL-safe).
fn forms(secret: &str) -> Vec<String> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE};
    let pct = percent(secret);
    let mut forms = vec![
        secret.to_string(),
        json_escaped(secret),
        debug_escaped(secret),
        debug_escaped(&json_escaped(secret)),
        pct.clone(),
        pct.replace('+', "%20"),
        lower_escapes(&pct),
        json_escaped(&pct),
        STANDARD.encode(secret),
        STANDARD_NO_PAD.encode(secret),
        URL_SAFE.encode(secret),
    ];
    forms.dedup();
    forms
}

/// Panics naming the output when `text` holds any form of `secret` or
/// any fragment of a form longer than 8 characters.
fn assert_clean(what: &str, text: &str, secret: &str) {
    for form in forms(secret) {
        let chars: Vec<char> = form.chars().collect();
        for window in chars.windows(9) {
            let fragment: String = window.iter().collect();
            assert!(!text.contains(&fragment), "{what} holds {fragment:?} (of {form:?}):\n{text}");
        }
    }
}

/// A harness whose Request dead-letters permanent failures to [`DLQ`].
fn harness(secrets: Value) -> Harness {
    let mut harness = Harness::new();
    harness.config.dead_letter = Some(DeadLetterTarget { dlq: DLQ.into(), max_receive_count: 5 });
    harness.broker.create_queue(adapters::local::QueueConfig {
        name: DLQ.into(),
        visibility_timeout: std::time::Duration::from_secs(30),
        max_message_bytes: 262_144,
        redrive: None,
    });
    harness.secrets(secrets);
    harness
}

fn bearer() -> Value {
    json!({"auth": {"kind": "bearer", "secret_id": "vendor/token"}, "allow": {"loopback": true}})
}

fn basic() -> Value {
    json!({"auth": {"kind": "basic", "secret_id": "vendor/login"}, "allow": {"loopback": true}})
}

/// Page 0 of a cursor run on `url` finding its next page by `next`.
fn cursor(url: &str, policy: Value, next: Value) -> Value {
    json!({
        "version": 1, "pipeline": "vendor", "run_id": "20261129T060000Z", "run_date": "2026-11-29",
        "page": {"index": 0, "count": 0},
        "http": {"url": url},
        "policy": policy,
        "mode": {"kind": "records", "records_pointer": "/items", "target": {"dataset": "vendor"},
                 "next": {"paging": next, "max_pages": 10, "queue": REQUEST_QUEUE}},
        "reply_to": {"kind": "queue", "queue": PERSIST_QUEUE},
    })
}

/// An SQS event carrying `bodies`, as AWS delivers it from the request queue.
fn event(bodies: &[Value]) -> aws_lambda_events::event::sqs::SqsEvent {
    let records: Vec<Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| {
            json!({
                "messageId": format!("m-{i}"), "receiptHandle": format!("r-{i}"), "body": body.to_string(),
                "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
                "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:1:request", "awsRegion": "us-east-1"
            })
        })
        .collect();
    serde_json::from_value(json!({ "Records": records })).expect("event")
}

/// Every dead letter on [`DLQ`] as text: body and every attribute.
fn dead_letters(harness: &Harness) -> Vec<String> {
    let mut letters = Vec::new();
    loop {
        let batch = harness.broker.receive(DLQ, 10).expect("receive");
        if batch.is_empty() {
            break;
        }
        letters.extend(batch);
    }
    letters
        .iter()
        .map(|letter| {
            let attributes: Vec<String> = letter
                .message_attributes
                .iter()
                .map(|(name, value)| format!("{name}={}", value.string_value.clone().unwrap_or_default()))
                .collect();
            format!("{}\n{}", letter.body.clone().unwrap_or_default(), attributes.join("\n"))
        })
        .collect()
}

/// The error of one message, handled directly.
async fn failure(harness: &Harness, message: Value) -> RequestError {
    let message = contracts::decode(message).expect("valid RequestMessage");
    request::handle_message(message, harness.deps()).await.expect_err("the call fails")
}

/// A vendor refusing every call with 403 and a body of `pad` bytes of `x`
/// and then the echoed credential (`/pad/<n>`), JSON-escaped when the
/// path says `/json/…`.
fn echoes_after_padding(echo: &Echo) -> EchoReply {
    let mut parts = echo.path.trim_start_matches('/').split('/');
    let (kind, pad) = (parts.next().unwrap_or(""), parts.next().and_then(|n| n.parse().ok()).unwrap_or(0));
    let token = echo.credential().unwrap_or_default();
    let shown = if kind == "json" { json_escaped(&token) } else { token };
    EchoReply::json(403, format!("{}{shown} is not allowed here", "x".repeat(pad)))
}

#[tokio::test]
async fn a_token_straddling_byte_200_leaves_no_fragment_in_the_error_or_the_dead_letter() {
    let (addr, _log) = serve_echoes(echoes_after_padding).await;
    let harness = harness(json!({"vendor/token": TOKEN}));
    let mut messages = Vec::new();
    // Every cut from "all but the last character" to "only the first".
    for pad in 200 - TOKEN.len()..=200 {
        let url = format!("http://{addr}/raw/{pad}");
        let err = failure(&harness, serde_json::to_value(message(&url, bearer())).expect("json")).await;
        let text = format!("{err} {err:?}");
        assert!(err.is_permanent(), "{text}");
        assert!(text.contains("403"), "{text}");
        assert_clean(&format!("the error at pad {pad}"), &text, TOKEN);
        messages.push(serde_json::to_value(message(&url, bearer())).expect("json"));
    }
    let response = request::handle_sqs(&event(&messages), harness.deps()).await;
    assert!(response.batch_item_failures.is_empty(), "dead-lettered at once, not redelivered");
    let letters = dead_letters(&harness);
    assert_eq!(letters.len(), messages.len());
    for letter in &letters {
        assert!(letter.contains("answered HTTP 403"), "{letter}");
        assert_clean("a dead letter", letter, TOKEN);
    }
}

#[tokio::test]
async fn a_json_escaped_token_is_redacted() {
    let (addr, _log) = serve_echoes(echoes_after_padding).await;
    let harness = harness(json!({"vendor/token": TOKEN}));
    let url = format!("http://{addr}/json/10");
    let err = failure(&harness, serde_json::to_value(message(&url, bearer())).expect("json")).await;
    let text = format!("{err} {err:?}");
    assert!(text.contains("<redacted> is not allowed here"), "{text}");
    assert_clean("the error", &text, TOKEN);
}

#[tokio::test]
async fn a_basic_password_with_quotes_and_backslashes_is_redacted_in_every_escaping() {
    let (addr, _log) = serve_echoes(|echo| {
        let decoded = echo
            .credential()
            .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default();
        let password = decoded.split_once(':').map(|(_, p)| p.to_string()).unwrap_or_default();
        // JSON-escaped (then `{:?}`-escaped in our excerpt), and raw.
        let body = format!(
            "{{\"error\": \"password {} refused\"}} raw: {password}",
            serde_json::to_string(&password).expect("json").trim_matches('"')
        );
        EchoReply { status: 401, headers: vec![("content-type".into(), "text/plain".into())], body }
    })
    .await;
    let harness = harness(json!({"vendor/login": LOGIN}));
    let err =
        failure(&harness, serde_json::to_value(message(&format!("http://{addr}/data"), basic())).expect("json")).await;
    let text = format!("{err} {err:?}");
    assert!(err.is_permanent() && text.contains("401") && text.contains("<redacted>"), "{text}");
    assert_clean("the error", &text, PASSWORD);
    assert_clean("the error", &text, LOGIN);
}

/// A vendor whose next link (in the body at `/next`) carries the token as
/// `where` says: inside another parameter, percent-encoded twice, or in
/// the path.
fn next_link_vendor(echo: &Echo) -> EchoReply {
    let token = echo.credential().unwrap_or_default();
    let next = match echo.path.as_str() {
        // The key inside another parameter: a callback URL, percent-encoded.
        "/in-param" => format!("/data?page=2&callback={}", percent(&format!("https://cb.example/?key={token}"))),
        "/in-path" => format!("/v1/{}/data?page=2", percent(&token).replace("%2F", "/")),
        _ => return EchoReply::json(404, "{}"),
    };
    EchoReply::json(200, json!({"items": [{"id": 1}], "next": next}).to_string())
}

#[tokio::test]
async fn a_next_link_holding_the_token_in_another_parameter_or_its_path_is_refused() {
    let (addr, _log) = serve_echoes(next_link_vendor).await;
    let harness = harness(json!({"vendor/token": TOKEN}));
    let next = json!({"kind": "body_url", "pointer": "/next"});
    for (path, place) in [("/in-param", "query parameter `callback`"), ("/in-path", "its path")] {
        let err = failure(&harness, cursor(&format!("http://{addr}{path}"), bearer(), next.clone())).await;
        let text = format!("{err} {err:?}");
        assert!(err.is_permanent(), "{text}");
        assert!(text.contains("`next link`") && text.contains(place), "{path}: {text}");
        assert_clean(&format!("the error of {path}"), &text, TOKEN);
    }
    assert!(harness.drain(REQUEST_QUEUE).is_empty(), "no next page was sent");
    assert!(harness.drain(PERSIST_QUEUE).is_empty(), "the page fails whole");
}

#[tokio::test]
async fn a_redirect_to_a_location_with_the_token_in_its_path_is_not_logged() {
    let (addr, log) = serve_echoes(|echo| match echo.path.as_str() {
        "/start" => {
            let token = echo.credential().unwrap_or_default();
            EchoReply::json(302, "{}").with_header("location", format!("/r/{}/data", percent(&token)))
        }
        _ => EchoReply::json(200, json!({"items": [{"id": 1}]}).to_string()),
    })
    .await;
    let harness = harness(json!({"vendor/token": TOKEN}));
    let logs = LogBuffer::new();
    let _guard = logs.capture();
    let message = message(&format!("http://{addr}/start"), bearer());
    request::handle_message(message, harness.deps()).await.expect("redirect followed");
    assert_eq!(log.lock().expect("log").len(), 2, "the redirect was followed");
    let text = logs.text();
    let redirect = logs
        .lines()
        .into_iter()
        .find(|line| line["message"] == "following a redirect")
        .unwrap_or_else(|| panic!("a redirect line: {text}"));
    assert!(redirect["to"].as_str().is_some_and(|to| to.contains("/r/<redacted>/data")), "{redirect}");
    assert_clean("the logs", &text, TOKEN);
}

/// One batch, every path: error pages echoing the token in each form
/// (each with the raw token across byte 200), a 2xx page that is not JSON
/// echoing it, a next link with it in its path after a redirect with it
/// in its Location; then the error texts, the dead letters, every message
/// sent and every log line are searched for every form of it and every
/// fragment of a form longer than 8 characters.
#[tokio::test]
async fn no_output_holds_any_form_of_the_secret() {
    let (addr, _log) = serve_echoes(|echo| {
        let token = echo.credential().unwrap_or_default();
        let path = echo.path.as_str();
        if let Some(k) = path.strip_prefix("/error/").and_then(|k| k.parse::<usize>().ok()) {
            let mut body = format!("{{\"error\": \"{} ", forms(&token).get(k).cloned().unwrap_or_default());
            body.push_str(&"y".repeat(190usize.saturating_sub(body.len())));
            body.push_str(&token);
            body.push_str("\"}");
            return EchoReply::json(403, body);
        }
        match path {
            "/html" => EchoReply {
                status: 200,
                headers: vec![("content-type".into(), "text/html".into())],
                body: format!("<p>{}{token}</p>", "z".repeat(185)),
            },
            "/start" => EchoReply::json(307, "{}").with_header("location", format!("/r/{token}/next")),
            path if path.starts_with("/r/") => EchoReply::json(200, json!({"items": [{"id": 1}]}).to_string())
                .with_header("link", format!("</v2/{}/items>; rel=\"next\"", percent(&token))),
            _ => EchoReply::json(404, "{}"),
        }
    })
    .await;
    let harness = harness(json!({"vendor/token": TOKEN}));
    let logs = LogBuffer::new();
    let _guard = logs.capture();
    let single = |path: &str| serde_json::to_value(message(&format!("http://{addr}{path}"), bearer())).expect("json");
    let mut bodies: Vec<Value> = (0..forms(TOKEN).len()).map(|k| single(&format!("/error/{k}"))).collect();
    bodies.push(single("/html"));
    bodies.push(cursor(&format!("http://{addr}/start"), bearer(), json!({"kind": "link_header"})));
    let mut outputs = Vec::new();
    for body in &bodies {
        let err = failure(&harness, body.clone()).await;
        outputs.push(("an error", format!("{err} {err:?}")));
    }
    let response = request::handle_sqs(&event(&bodies), harness.deps()).await;
    // The page that is not JSON is retried by redelivery; the others are
    // permanent and dead-lettered at once.
    assert_eq!(response.batch_item_failures.len(), 1, "{:?}", response.batch_item_failures);
    let letters = dead_letters(&harness);
    assert_eq!(letters.len(), bodies.len() - 1, "{letters:?}");
    assert!(letters.iter().any(|l| l.contains("`next link`")), "{letters:?}");
    outputs.extend(letters.into_iter().map(|l| ("a dead letter", l)));
    for queue in [PERSIST_QUEUE, REQUEST_QUEUE] {
        outputs.extend(harness.drain_text(queue).into_iter().map(|m| ("a message sent on", m)));
    }
    let text = logs.text();
    assert!(text.contains("following a redirect") && text.contains("dead-lettered"), "{text}");
    assert!(text.contains("not JSON"), "{text}");
    outputs.push(("the logs", text));
    for (what, text) in &outputs {
        assert!(text.contains("<redacted>") || *what == "a message sent on", "{what}: {text}");
        assert_clean(what, text, TOKEN);
    }
}

/// A trial finding: credentials in a vendor's error body that are not the
/// spec's own (another caller's key echoed, a session token) were quoted
/// verbatim in the error, the dead letter and the alert.
#[tokio::test]
async fn credential_looking_values_in_a_vendors_error_body_are_redacted_in_the_error_and_dead_letter() {
    const BODY: &str = r#"{"api_key":"LeakedKey777","password":"LeakedPwd999","echo":"Authorization: Bearer LeakedBearer888","hint":"token=SuperSecretTok3n-XYZZY"}"#;
    let (addr, _log) = serve_echoes(|_| EchoReply::json(400, BODY)).await;
    let harness = harness(json!({"vendor/token": TOKEN}));
    let message = serde_json::to_value(message(&format!("http://{addr}/items"), bearer())).expect("json");
    let err = failure(&harness, message.clone()).await;
    let response = request::handle_sqs(&event(&[message]), harness.deps()).await;
    assert!(response.batch_item_failures.is_empty(), "dead-lettered at once");
    let letters = dead_letters(&harness);
    assert_eq!(letters.len(), 1);
    for (what, text) in [("the error", format!("{err} {err:?}")), ("the dead letter", letters[0].clone())] {
        assert!(text.contains("400") && text.contains("<redacted>"), "{what}: {text}");
        for leaked in ["LeakedKey777", "LeakedPwd999", "LeakedBearer888", "SuperSecretTok3n"] {
            assert!(!text.contains(leaked), "{what} shows {leaked}: {text}");
        }
    }
}
