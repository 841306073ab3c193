//! End-to-end through the local runtime against the demo vendor API: `cursor`
//! runs (Request sends each next page itself) with OAuth2 or an API key,
//! completed by the ledger, and incremental loading that moves the cursor
//! only with completed runs.

use chrono::{TimeZone, Utc};
use serde_json::{Value, json};

use contracts::RunId;
use contracts::spec::PipelineSpec;
use tributary::runtime::{LocalOptions, LocalRuntime};
use tributary::vendor::{self, DemoData};

async fn demo(events: u32) -> std::net::SocketAddr {
    let data = DemoData { events, ..DemoData::default() };
    vendor::spawn("127.0.0.1:0".parse().expect("addr"), data).await.expect("vendor")
}

fn spec(addr: std::net::SocketAddr, path: &str, next: &str, auth: &str, extra: &str) -> PipelineSpec {
    PipelineSpec::from_yaml(&format!(
        "version: 1\npipeline: events\nstrategy: {{kind: cursor, next: {next}, max_pages: 50}}\nrequest: {{url: 'http://{addr}{path}', query: {{limit: '20'}}, records_pointer: /data, allow: {{loopback: true}}, auth: {auth}}}\ntarget: {{dataset: events}}\n{extra}"
    ))
    .expect("valid spec")
}

fn manifest(lake: &std::path::Path, run_id: &str) -> tributary_core::ledger::Manifest {
    let key = tributary_core::keys::manifest_key("events", &RunId::new(run_id).expect("run id"));
    serde_json::from_slice(&std::fs::read(lake.join(key)).expect("the run completed")).expect("manifest")
}

#[tokio::test]
async fn oauth_cursor_run_completes_and_the_next_run_is_incremental() {
    let addr = demo(50).await;
    let lake = tempfile::tempdir().expect("tempdir");
    std::fs::write(lake.path().join("_secrets.json"), json!({"demo/client-secret": "demo-secret"}).to_string())
        .expect("secrets");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let auth = format!(
        "{{kind: oauth2_client_credentials, token_url: 'http://{addr}/oauth/token', client_id: demo, secret_id: demo/client-secret}}"
    );
    let incremental = "incremental: {cursor_field: /updated_at, param: updated_since, start: '2026-01-01T00:00:00Z'}\n";
    let spec =
        spec(addr, "/secure/events", "{kind: body_token, pointer: /next_cursor, param: cursor}", &auth, incremental);

    let first = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time");
    let summary = runtime.run(&spec, first).await.expect("run");
    assert!(summary.succeeded(), "{summary}");
    assert_eq!((summary.pages, summary.records_persisted), (3, 50), "{summary}");
    assert_eq!(summary.requests, 4, "one token, three pages: {summary}");
    assert_eq!(manifest(lake.path(), &summary.run_id).pages, 3);
    let state: Value =
        serde_json::from_slice(&std::fs::read(lake.path().join("_state/events.json")).expect("cursor kept"))
            .expect("json");
    assert_eq!(state["max"], vendor::event(50)["updated_at"], "the highest updated_at of the run");

    // The next run asks only for what changed since: nothing, one empty page.
    let second = Utc.with_ymd_and_hms(2026, 11, 30, 6, 0, 0).single().expect("time");
    let summary = runtime.run(&spec, second).await.expect("run");
    assert!(summary.succeeded(), "{summary}");
    assert_eq!((summary.pages, summary.records_persisted), (1, 0), "{summary}");
    assert_eq!(summary.requests, 1, "the token is cached across runs: {summary}");
    assert_eq!(manifest(lake.path(), &summary.run_id).pages, 1);
}

#[tokio::test]
async fn link_header_and_body_url_runs_with_an_api_key() {
    let addr = demo(45).await;
    let lake = tempfile::tempdir().expect("tempdir");
    std::fs::write(lake.path().join("_secrets.json"), json!({"demo/key": vendor::DEMO_API_KEY}).to_string())
        .expect("secrets");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let auth = "{kind: api_key, secret_id: demo/key, header: x-api-key}";
    for (hour, next) in [(6, "{kind: link_header}"), (7, "{kind: body_url, pointer: /links/next}")] {
        let spec = spec(addr, "/secure/events", next, auth, "");
        let at = Utc.with_ymd_and_hms(2026, 11, 29, hour, 0, 0).single().expect("time");
        let summary = runtime.run(&spec, at).await.expect("run");
        assert!(summary.succeeded(), "{next}: {summary}");
        assert_eq!((summary.pages, summary.records_persisted, summary.requests), (3, 45, 3), "{next}: {summary}");
    }
}

#[tokio::test]
async fn a_wrong_key_is_dead_lettered_once_with_an_alert() {
    let addr = demo(10).await;
    let lake = tempfile::tempdir().expect("tempdir");
    std::fs::write(lake.path().join("_secrets.json"), json!({"demo/key": "not-the-key"}).to_string()).expect("secrets");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let spec = spec(
        addr,
        "/secure/events",
        "{kind: link_header}",
        "{kind: api_key, secret_id: demo/key, header: x-api-key}",
        "",
    );
    let summary = runtime.run(&spec, Utc::now()).await.expect("run");
    assert_eq!(summary.requests, 1, "a 401 is permanent: no retry, no redelivery");
    assert_eq!(summary.dead_letters(), 1);
    assert_eq!(summary.alerts.len(), 1);
    let alert = serde_json::to_string(&summary.alerts[0]).expect("alert");
    assert!(alert.contains("401") && !alert.contains("not-the-key"), "{alert}");
}

#[tokio::test]
async fn a_spec_that_does_not_allow_loopback_is_refused_once_with_an_alert() {
    let addr = demo(10).await;
    let lake = tempfile::tempdir().expect("tempdir");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let text = format!(
        "version: 1\npipeline: events\nstrategy: {{kind: simple}}\nrequest: {{url: 'http://{addr}/events', records_pointer: /data}}\ntarget: {{dataset: events}}\n"
    );
    let spec = PipelineSpec::from_yaml(&text).expect("valid spec");
    let summary = runtime.run(&spec, Utc::now()).await.expect("run");
    assert_eq!(summary.dead_letters(), 1, "permanent: dead-lettered at once, never retried");
    let reason = summary.alerts[0].reason.clone().unwrap_or_default();
    assert!(reason.contains("127.0.0.1") && reason.contains("loopback") && reason.contains("SSRF"), "{reason}");
}

#[tokio::test]
async fn a_cursor_run_stopped_by_max_pages_with_more_offered_is_truncated_not_a_success() {
    let addr = demo(45).await;
    let lake = tempfile::tempdir().expect("tempdir");
    std::fs::write(lake.path().join("_secrets.json"), json!({"demo/key": vendor::DEMO_API_KEY}).to_string())
        .expect("secrets");
    let runtime = LocalRuntime::new(LocalOptions::new(lake.path())).expect("runtime");
    let text = format!(
        "version: 1\npipeline: events\nstrategy: {{kind: cursor, next: {{kind: link_header}}, max_pages: 2}}\nrequest: {{url: 'http://{addr}/secure/events', query: {{limit: '20'}}, records_pointer: /data, allow: {{loopback: true}}, auth: {{kind: api_key, secret_id: demo/key, header: x-api-key}}}}\ntarget: {{dataset: events}}\n"
    );
    let spec = PipelineSpec::from_yaml(&text).expect("valid spec");
    let summary = runtime.run(&spec, Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time")).await;
    let summary = summary.expect("run");
    assert_eq!((summary.pages, summary.records_persisted), (2, 40), "{summary}");
    assert!(!summary.succeeded(), "45 events, 40 taken: {summary}");
    let reason = summary.truncated.clone().expect("truncated");
    assert!(reason.contains("strategy.max_pages 2"), "{reason}");
    assert!(summary.to_string().contains("truncated"), "{summary}");
    assert_eq!(manifest(lake.path(), &summary.run_id).truncated.as_deref(), Some(reason.as_str()));
    let store = adapters::local::DirStore::new(lake.path());
    let runs = tributary::status::recent_runs(&store, None, 5).await.expect("status");
    assert_eq!(runs[0].state(), "truncated", "{runs:?}");
    // `tributary status` says why, under the table.
    let hints = tributary::status::recovery_hints(&runs, &tributary::status::Place::Lake("lake".into()));
    assert!(hints.contains(&format!("events run {}: truncated: {reason}", summary.run_id)), "{hints}");
}
