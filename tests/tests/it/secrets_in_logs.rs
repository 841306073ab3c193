//! A secret that another team put in its RequestMessage (a header and a
//! query parameter) never appears in any log line of the run, nor in the
//! alert that goes out by e-mail/SMS; the run's log lines carry pipeline,
//! run_id, page and message_id.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use test_support::vendor::{VendorBehaviour, start_vendor};
use tributary::runtime::{LocalOptions, LocalRuntime, read_alerts};
use tributary_core::ports::QueueSender;

const SECRET: &str = "s3cr3t-TOKEN-4f9a";
/// A credential referenced by secret id (`policy.auth`), read from the lake's
/// secrets file: it must not reach a log line either.
const AUTH_SECRET: &str = "Bearer-VALUE-77c1";

/// Collects the log output in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'w> tracing_subscriber::fmt::MakeWriter<'w> for Captured {
    type Writer = Captured;
    fn make_writer(&'w self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn a_secret_never_reaches_a_log_line_or_an_alert() {
    let logs = Captured::default();
    // The Lambda functions' JSON subscriber; a current-thread runtime keeps
    // every task on this thread, under this default.
    let _guard = tracing::subscriber::set_default(tributary_core::telemetry::lambda_subscriber(logs.clone()));

    // Offset 0 answers a maintenance page that is not JSON: the request fails
    // on every receive and ends in the DLQ with an alert.
    let addr = start_vendor(VendorBehaviour { total: 10, broken_offsets: [0].into(), ..Default::default() }).await;
    let lake = tempfile::tempdir().expect("tempdir");
    // The deployment grants both secrets to the vendor's host; the message
    // with credentials in its headers is refused before any call.
    let mut options = LocalOptions::new(lake.path());
    for id in ["vendor/token", "vendor/key"] {
        let grant = request::trust::SecretGrant { hosts: vec!["127.0.0.1".into()], pipelines: vec!["leaky".into()] };
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

    let text = String::from_utf8(logs.0.lock().expect("log buffer").clone()).expect("utf-8 logs");
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
