//! A secret that another team put in its RequestMessage (a header and a
//! query parameter) never appears in any log line of the run, nor in the
//! alert that goes out by e-mail/SMS; the run's log lines carry pipeline,
//! run_id, page and message_id.

use serde_json::{Value, json};
use test_support::logs::LogBuffer;
use test_support::vendor::{EchoReply, VendorBehaviour, serve_echoes, start_vendor};
use tributary::runtime::{LocalOptions, LocalRuntime, read_alerts};
use tributary_core::ports::QueueSender;

const SECRET: &str = "s3cr3t-TOKEN-4f9a";
/// A credential referenced by secret id (`policy.auth`), read from the lake's
/// secrets file: it must not reach a log line either.
const AUTH_SECRET: &str = "Bearer-VALUE-77c1";

#[tokio::test]
async fn a_secret_never_reaches_a_log_line_or_an_alert() {
    let logs = LogBuffer::new();
    // The Lambda functions' JSON subscriber; a current-thread runtime keeps
    // every task on this thread, under this default.
    let _guard = logs.capture();

    // Offset 0 answers a maintenance page that is not JSON: the request fails
    // on every receive and ends in the DLQ with an alert.
    let addr = start_vendor(VendorBehaviour { total: 10, broken_offsets: [0].into(), ..Default::default() }).await;
    let lake = tempfile::tempdir().expect("tempdir");
    // The deployment grants both secrets to the vendor's origin; the message
    // with credentials in its headers is refused before any call.
    let mut options = LocalOptions::new(lake.path());
    for id in ["vendor/token", "vendor/key"] {
        let origin = url::Url::parse(&format!("http://{addr}/")).expect("url");
        let grant = request::trust::SecretGrant {
            pipelines: vec!["leaky".into()],
            api_key: Some(request::trust::KeyPlacement::QueryParam("key".into())),
            ..request::trust::SecretGrant::origin_of(&origin)
        };
        options.request.trust.grant(id, grant);
    }
    let runtime = LocalRuntime::new(options).expect("runtime");
    let message = json!({
        "version": 1, "pipeline": "leaky", "run_id": "20261129T060000Z", "run_date": "2026-11-29",
        "page": {"index": 0, "count": 1},
        "http": {"url": format!("http://{addr}/items"), "query": {"offset": "0", "limit": "5", "api_key": SECRET},
                 "headers": {"x-api-key": SECRET, "authorization": format!("Bearer {SECRET}")}},
        "policy": {"allow": {"loopback": true}},
        "mode": {"kind": "records", "records_pointer": "/results", "target": {"dataset": "leaky"}},
        "reply_to": {"kind": "queue", "queue": "persist"}
    });
    std::fs::write(
        lake.path().join("_secrets.json"),
        json!({"vendor/token": AUTH_SECRET, "vendor/key": AUTH_SECRET}).to_string(),
    )
    .expect("secrets file");
    let mut bearer = message.clone();
    bearer["policy"]["auth"] = json!({"kind": "bearer", "secret_id": "vendor/token"});
    bearer["http"]["query"] = json!({"offset": "0", "limit": "5"});
    bearer["http"]["headers"] = json!({});
    let mut keyed = bearer.clone();
    keyed["policy"]["auth"] = json!({"kind": "api_key", "secret_id": "vendor/key", "query_param": "key"});
    runtime
        .broker()
        .send("request", vec![message.to_string(), bearer.to_string(), keyed.to_string()])
        .await
        .expect("send");
    runtime.drain().await;

    let text = logs.text();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("JSON log line")).collect();
    assert!(lines.len() >= 5, "the failures were logged: {text}");
    assert!(!text.contains(SECRET), "a log line holds the secret:\n{text}");
    assert!(!text.contains(AUTH_SECRET), "a log line holds the referenced secret:\n{text}");
    let failure = lines
        .iter()
        .find(|l| l["message"].as_str().is_some_and(|m| m.contains("record failed")))
        .expect("a failure line");
    let spans = failure["spans"].as_array().expect("span list");
    let field = |name: &str| spans.iter().find_map(|s| s.get(name).cloned());
    assert_eq!(field("pipeline"), Some(json!("leaky")), "{failure}");
    assert_eq!(field("run_id"), Some(json!("20261129T060000Z")));
    assert_eq!(field("page"), Some(json!(0)));
    assert!(field("message_id").is_some(), "{failure}");

    let alerts = read_alerts(lake.path());
    // One for the message refused at once (credentials in its headers), one
    // for the two that failed on every receive.
    assert_eq!(alerts.len(), 2, "one alert per group of dead letters: {alerts:?}");
    for alert in &alerts {
        let text = serde_json::to_string(alert).expect("alert JSON");
        assert!(!text.contains(SECRET), "the alert holds the secret: {text}");
        assert!(!text.contains(AUTH_SECRET), "the alert holds the referenced secret: {text}");
        assert!(!notify::sms_text(alert).contains(SECRET));
    }
    assert!(alerts.iter().any(|a| notify::email_text(a).contains("<redacted>")), "redacted, not dropped");
}

/// A token with characters escapings change (`/`, `+`).
const ECHOED: &str = "atk/SECRET+slash/0c9d8e7f6a5b";

/// `text` JSON-escaped as PHP's `json_encode` writes it (`/` as `\/`).
fn php_json(text: &str) -> String {
    let quoted = serde_json::to_string(text).expect("json");
    quoted[1..quoted.len() - 1].replace('/', r"\/")
}

/// Every form of [`ECHOED`] a leak could take, and every fragment of one
/// longer than 8 characters.
fn leaks() -> Vec<String> {
    use base64::Engine;
    let percent: String = url::form_urlencoded::byte_serialize(ECHOED.as_bytes()).collect();
    let forms = [
        ECHOED.to_string(),
        php_json(ECHOED),
        format!("{:?}", php_json(ECHOED)).trim_matches('"').to_string(),
        percent.clone(),
        percent.to_lowercase().replace("secret", "SECRET"),
        base64::engine::general_purpose::STANDARD.encode(ECHOED),
    ];
    forms
        .iter()
        .flat_map(|form| {
            let chars: Vec<char> = form.chars().collect();
            chars.windows(9).map(|w| w.iter().collect::<String>()).collect::<Vec<_>>()
        })
        .collect()
}

/// `tributary run` (the local runtime) against a vendor that echoes the
/// bearer token: an error page with it across byte 200 and JSON-escaped,
/// and a cursor run whose next link carries it in its path. The run's
/// summary (what `tributary run` prints), the log lines, the alerts and
/// the lake's `_dead_letters` archive hold no form of it, nor a fragment
/// of one longer than 8 characters.
#[tokio::test]
async fn a_token_a_vendor_echoes_reaches_no_output_of_a_run() {
    let logs = LogBuffer::new();
    let _guard = logs.capture();
    let (addr, _log) = serve_echoes(|echo| {
        let token = echo.credential().unwrap_or_default();
        match echo.path.as_str() {
            "/error" => EchoReply::json(
                403,
                format!(
                    "{{\"error\": \"token {} refused\", \"pad\": \"{}\", \"raw\": \"{token}\"}}",
                    php_json(&token),
                    "x".repeat(120)
                ),
            ),
            _ => EchoReply::json(200, json!({"data": [{"id": 1}]}).to_string())
                .with_header("link", format!("</v1/{token}/events?page=2>; rel=\"next\"")),
        }
    })
    .await;
    let lake = tempfile::tempdir().expect("tempdir");
    std::fs::write(lake.path().join("_secrets.json"), json!({"vendor/token": ECHOED}).to_string()).expect("secrets");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let auth = "auth: {kind: bearer, secret_id: vendor/token}";
    let specs = [
        format!(
            "version: 1\npipeline: echoed\nstrategy: {{kind: simple}}\nrequest: {{url: 'http://{addr}/error', records_pointer: /data, allow: {{loopback: true}}, {auth}}}\ntarget: {{dataset: echoed}}\n"
        ),
        format!(
            "version: 1\npipeline: linked\nstrategy: {{kind: cursor, next: {{kind: link_header}}, max_pages: 5}}\nrequest: {{url: 'http://{addr}/events', records_pointer: /data, allow: {{loopback: true}}, {auth}}}\ntarget: {{dataset: linked}}\n"
        ),
    ];
    let mut outputs = Vec::new();
    for text in &specs {
        let spec = contracts::spec::PipelineSpec::from_yaml(text).expect("valid spec");
        let summary = runtime.run(&spec, chrono::Utc::now()).await.expect("run");
        assert_eq!(summary.dead_letters(), 1, "refused at once: {summary}");
        outputs.push(("the printed summary", summary.to_string()));
    }
    let alerts = read_alerts(lake.path());
    assert_eq!(alerts.len(), 2, "{alerts:?}");
    assert!(alerts.iter().any(|a| a.reason.as_deref().is_some_and(|r| r.contains("`next link`"))), "{alerts:?}");
    for alert in &alerts {
        outputs.push(("an alert", serde_json::to_string(alert).expect("alert JSON")));
        outputs.push(("an alert e-mail", notify::email_text(alert)));
    }
    let archive = lake.path().join("_dead_letters/request-dlq");
    let entries: Vec<_> = std::fs::read_dir(&archive).expect("dead letters archived").collect();
    assert_eq!(entries.len(), 2);
    for entry in entries {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("read");
        assert!(text.contains("<redacted>"), "the reason is kept, redacted: {text}");
        outputs.push(("the dead-letter archive", text));
    }
    let text = logs.text();
    assert!(text.contains("dead-lettered"), "{text}");
    outputs.push(("the logs", text));
    let leaks = leaks();
    for (what, text) in &outputs {
        if let Some(leak) = leaks.iter().find(|leak| text.contains(leak.as_str())) {
            panic!("{what} holds {leak:?}:\n{text}");
        }
    }
}

/// An API key the vendor takes as a query parameter under a name that does
/// not look like a credential (`access`).
const QUERY_KEY: &str = "qk-7Hd93/kLm+20aa";

/// A paged run whose page 7 fails: the alert and the logs name the vendor's
/// page parameters (`?page=7&per_page=100`), and the key in the query,
/// sent on every call and echoed by the vendor in a redirect, never shows:
/// a URL holding it shows `access=***`.
#[tokio::test]
async fn an_alert_names_the_page_query_and_never_the_key_in_it() {
    let logs = LogBuffer::new();
    let _guard = logs.capture();
    let (addr, _log) = serve_echoes(|echo| {
        let query: Vec<(String, String)> = url::form_urlencoded::parse(echo.query.as_deref().unwrap_or("").as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let get = |name: &str| query.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).unwrap_or_default();
        let key = get("access");
        if key != QUERY_KEY {
            return EchoReply::json(401, r#"{"error": "no key"}"#);
        }
        match get("page").as_str() {
            "7" => EchoReply::json(503, r#"{"error": "overloaded"}"#),
            // A vendor that moves a page and echoes the key in the Location.
            "3" if get("r").is_empty() => {
                let encoded: String = url::form_urlencoded::byte_serialize(key.as_bytes()).collect();
                EchoReply::json(302, "{}")
                    .with_header("location", format!("/items?page=3&per_page=100&access={encoded}&r=1"))
            }
            page => EchoReply::json(200, json!({"total": 1000, "data": [{"page": page}]}).to_string()),
        }
    })
    .await;
    let lake = tempfile::tempdir().expect("tempdir");
    std::fs::write(lake.path().join("_secrets.json"), json!({"vendor/key": QUERY_KEY}).to_string()).expect("secrets");
    let text = format!(
        "version: 1\npipeline: paged_key\nstrategy: {{kind: paged, page_size: 100, total_pointer: /total, params: {{style: page_number, page_param: page, size_param: per_page, first_page: 1}}}}\n\
         request: {{url: 'http://{addr}/items', records_pointer: /data, allow: {{loopback: true}}, auth: {{kind: api_key, secret_id: vendor/key, query_param: access}}}}\n\
         target: {{dataset: paged_key}}\n"
    );
    let spec = contracts::spec::PipelineSpec::from_yaml(&text).expect("valid spec");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let summary = runtime.run(&spec, chrono::Utc::now()).await.expect("run");
    assert_eq!(summary.dead_letters(), 1, "page 7 alone: {summary}");

    let alerts = read_alerts(lake.path());
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    let alert = serde_json::to_string(&alerts[0]).expect("alert JSON");
    let email = notify::email_text(&alerts[0]);
    for shown in [&alert, &email, &alerts[0].summary] {
        assert!(shown.contains(&format!("GET http://{addr}/items?page=7&per_page=100")), "the page asked for: {shown}");
    }
    let text = logs.text();
    assert!(text.contains("page=7&per_page=100"), "{text}");
    assert!(text.contains("page=3&per_page=100&access=***&r=1"), "the redirect, its key masked: {text}");
    let percent: String = url::form_urlencoded::byte_serialize(QUERY_KEY.as_bytes()).collect();
    let archive = std::fs::read_dir(lake.path().join("_dead_letters/request-dlq"))
        .expect("archive")
        .map(|entry| std::fs::read_to_string(entry.expect("entry").path()).expect("read"))
        .collect::<Vec<_>>()
        .join("\n");
    for (what, output) in
        [("the alert", &alert), ("the e-mail", &email), ("the logs", &text), ("the archive", &archive)]
    {
        for leak in [QUERY_KEY, percent.as_str(), &QUERY_KEY[..12]] {
            assert!(!output.contains(leak), "{what} holds {leak:?}:\n{output}");
        }
    }
    assert!(!notify::sms_text(&alerts[0]).contains(QUERY_KEY));
}
