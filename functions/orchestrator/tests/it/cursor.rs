//! The `cursor` strategy's start (page 0 with its continuation, no page
//! count yet) and incremental loading's start value from the lake.

use crate::common;

use chrono::{TimeZone, Utc};
use serde_json::json;

use adapters::local::DirStore;
use contracts::spec::PipelineSpec;
use contracts::{self, PageRef, RequestMessage, RequestMode, RunId};
use orchestrator::Deps;
use tributary_core::ports::ObjectStore;

const SPEC: &str = "version: 1\npipeline: events\nstrategy: {kind: cursor, next: {kind: body_token, pointer: /next, param: cursor}, max_pages: 9}\nrequest: {url: 'https://api.example.com/events', records_pointer: /data}\nincremental: {cursor_field: /updated_at, param: updated_since, start: '2026-01-01T00:00:00Z'}\ntarget: {dataset: events}\n";

async fn start(store: &DirStore) -> RequestMessage {
    let broker = common::broker(&["request"]);
    let config = common::config();
    let ledger = tributary_core::ledger::RunLedger { store, events: None };
    let deps = Deps { queue: &broker, config: &config, ledger: Some(ledger) };
    let spec = PipelineSpec::from_yaml(SPEC).expect("spec");
    let now = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time");
    orchestrator::handle(scheduler_event(&spec, now), now, common::deadline(), deps).await.expect("started");
    let records = broker.receive("request", 10).expect("receive");
    assert_eq!(records.len(), 1, "page 0 only");
    let body: serde_json::Value = serde_json::from_str(records[0].body.as_deref().expect("body")).expect("json");
    contracts::decode(body).expect("RequestMessage")
}

fn scheduler_event(spec: &PipelineSpec, now: chrono::DateTime<Utc>) -> serde_json::Value {
    json!({"source": "aws.scheduler", "time": now.to_rfc3339(), "detail": spec})
}

#[tokio::test]
async fn cursor_run_starts_with_page_zero_and_the_first_start_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let first = start(&store).await;
    assert_eq!(first.page, Some(PageRef { index: 0, count: 0 }));
    assert_eq!(first.http.query.get("updated_since").map(String::as_str), Some("2026-01-01T00:00:00Z"));
    let RequestMode::Records { next: Some(next), cursor_field, .. } = &first.mode else { panic!("continuation") };
    assert_eq!((next.queue.as_str(), next.max_pages), ("request", 9));
    assert_eq!(cursor_field.as_deref(), Some("/updated_at"));
    let run_id = RunId::new("20261129T060000Z").expect("id");
    let expected = store.get(&tributary_core::keys::expected_key("events", &run_id)).await;
    assert!(expected.is_err(), "the page count is Request's to write, on the last page");
}

#[tokio::test]
async fn the_next_run_starts_from_the_cursor_of_the_last_completed_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let state = json!({"max": "2026-11-28T23:50:00Z", "run_id": "20261128T060000Z"});
    store.put(&tributary_core::keys::state_key("events"), bytes::Bytes::from(state.to_string())).await.expect("state");
    let first = start(&store).await;
    assert_eq!(first.http.query.get("updated_since").map(String::as_str), Some("2026-11-28T23:50:00Z"));
}
