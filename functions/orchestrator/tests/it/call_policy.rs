//! Every call-policy field survives from the spec's `request` to every
//! `RequestMessage` the Orchestrator sends, whatever the strategy: the spec
//! travels as JSON (the scheduler event's detail, a probe's or a query's
//! context) and the messages are read back from the request queue, so both
//! wire formats are crossed.
//!
//! The policy is compared whole; [`every_policy_field`] names each field
//! without `..` (a field added to `CallPolicy` does not compile until it is
//! set here), and [`every_field_is_set`] checks against the published JSON
//! Schema that none is left at its default (a default is not serialised, so
//! it would survive by accident).

use crate::common;

use chrono::{TimeZone, Utc};
use serde_json::{Value, json};

use adapters::local::Broker;
use contracts::spec::PipelineSpec;
use contracts::{
    Auth, CallPolicy, NetworkPolicy, ProbeReply, QueryMessage, QueryRow, RateBudget, RequestMessage, RequestMode,
    ResponseRules, StatusAction, V1,
};
use orchestrator::Deps;
use test_support::queues::drain_json;

/// A call policy with every field, and every field of its parts, away from
/// its default.
fn every_policy_field() -> CallPolicy {
    CallPolicy {
        auth: Some(Auth::OAuth2ClientCredentials {
            token_url: url::Url::parse("https://auth.vendor.example/oauth/token").expect("url"),
            client_id: "tributary".into(),
            secret_id: "tributary/vendor-client-secret".into(),
            scope: Some("read:events".into()),
        }),
        allow: NetworkPolicy { hosts: vec!["*.cdn.vendor.example".into()], loopback: true, private: true },
        rate: Some(RateBudget { max_concurrency: Some(2), ..RateBudget::per_second(5) }),
        response: ResponseRules {
            status_actions: [(404, StatusAction::Empty), (409, StatusAction::Retry), (503, StatusAction::Fail)].into(),
            content_type: Some("application/json".into()),
            max_bytes: Some(1_000_000),
        },
        timeout_secs: Some(12),
    }
}

/// The `$ref` a property's schema points to, directly or as the non-null
/// member of an `Option`'s `anyOf`.
fn reference(property: &Value) -> Option<&str> {
    property["$ref"]
        .as_str()
        .or_else(|| property["anyOf"].as_array()?.iter().find_map(|member| member["$ref"].as_str()))
        .and_then(|target| target.strip_prefix("#/$defs/"))
}

/// Fields of which a valid policy sets exactly one (`request.rate`): the
/// other stays at its default.
const ONE_OF: &[[&str; 2]] = &[["requests_per_second", "requests_per_minute"]];

/// Panics naming the first property of `schema` (and, inside, of every
/// object it refers to) that `value` leaves out, i.e. at its default,
/// unless it is one of a [`ONE_OF`] pair whose other member is set.
fn every_field_is_set(schema: &Value, defs: &Value, value: &Value, path: &str) {
    let Some(properties) = schema["properties"].as_object() else { return };
    for (name, property) in properties {
        let at = format!("{path}.{name}");
        let alternative_set =
            || ONE_OF.iter().any(|pair| pair.contains(&name.as_str()) && pair.iter().any(|o| value.get(*o).is_some()));
        let Some(field) = value.get(name) else {
            assert!(alternative_set(), "{at} is at its default: set it in every_policy_field()");
            continue;
        };
        if let Some(def) = reference(property) {
            every_field_is_set(&defs[def], defs, field, &at);
        }
    }
}

#[test]
fn the_policy_under_test_sets_every_field() {
    let (_, schema) = contracts::schemas()
        .into_iter()
        .find(|(name, _)| *name == "request-message.v1.schema.json")
        .expect("the RequestMessage schema");
    let schema: Value = serde_json::from_str(&schema).expect("JSON");
    let defs = &schema["$defs"];
    let policy = serde_json::to_value(every_policy_field()).expect("JSON");
    every_field_is_set(&defs["CallPolicy"], defs, &policy, "policy");
}

/// A spec of `strategy` whose `request` carries [`every_policy_field`], as
/// the JSON a schedule sends.
fn spec(strategy: Value, url: &str) -> Value {
    let base = json!({"version": 1, "pipeline": "events", "strategy": strategy,
                      "request": {"url": url, "records_pointer": "/items"}, "target": {"dataset": "events"}});
    let mut spec = PipelineSpec::from_value(base).expect("a valid spec");
    spec.request.policy = every_policy_field();
    let text = serde_json::to_string(&spec).expect("JSON");
    serde_json::from_str(&text).expect("JSON")
}

fn requests(broker: &Broker) -> Vec<RequestMessage> {
    drain_json(broker, "request").into_iter().map(|b| contracts::decode(b).expect("a RequestMessage")).collect()
}

fn assert_policy_survives(messages: &[RequestMessage], what: &str) {
    assert!(!messages.is_empty(), "{what}: no request was sent");
    for message in messages {
        assert_eq!(message.policy, every_policy_field(), "{what}: page {:?}", message.page);
    }
}

async fn start(detail: Value, deps: Deps<'_>) {
    let event = json!({"source": "aws.scheduler", "time": "2026-11-29T06:00:00Z", "detail": detail});
    let now = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 3).single().expect("time");
    orchestrator::handle(event, now, common::deadline(), deps).await.expect("the run starts");
}

#[tokio::test]
async fn every_call_policy_field_reaches_every_planned_message() {
    let broker = common::broker(&["request", "athena"]);
    let config = common::config();
    let deps = Deps { queue: &broker, config: &config, ledger: None };

    start(spec(json!({"kind": "simple"}), "https://api.vendor.example/rates"), deps).await;
    assert_policy_survives(&requests(&broker), "simple");

    let cursor = json!({"kind": "cursor", "next": {"kind": "body_token", "pointer": "/next", "param": "cursor"}});
    start(spec(cursor, "https://api.vendor.example/events"), deps).await;
    assert_policy_survives(&requests(&broker), "cursor");

    // Count first: the probe, then each page planned from its reply.
    let paged = json!({"kind": "paged", "page_size": 50, "total_pointer": "/total"});
    start(spec(paged, "https://api.vendor.example/events"), deps).await;
    let probes = requests(&broker);
    assert_policy_survives(&probes, "paged probe");
    let RequestMode::Probe { context, .. } = &probes[0].mode else { panic!("a probe: {:?}", probes[0].mode) };
    let reply = ProbeReply {
        version: V1,
        pipeline: probes[0].pipeline.clone(),
        run_id: probes[0].run_id.clone(),
        run_date: probes[0].run_date,
        total: 120,
        context: context.clone(),
    };
    orchestrator::on_probe_reply(reply, common::deadline(), deps).await.expect("pages planned");
    let pages = requests(&broker);
    assert_eq!(pages.len(), 3);
    assert_policy_survives(&pages, "paged pages");

    // Athena-driven: the query, then one request per row.
    let athena = json!({"kind": "athena", "query": "SELECT id FROM customers", "database": "lake"});
    start(spec(athena, "https://api.vendor.example/customers/{id}/events"), deps).await;
    let [query] = drain_json(&broker, "athena").try_into().expect("one query");
    let query: QueryMessage = contracts::decode(query).expect("a QueryMessage");
    let row = QueryRow {
        version: V1,
        pipeline: query.pipeline.clone(),
        run_id: query.run_id.clone(),
        run_date: query.run_date,
        row_index: 0,
        row: json!({"id": 7}).as_object().cloned().unwrap_or_default(),
        context: query.context.clone(),
    };
    orchestrator::on_query_row(row, deps).await.expect("the row's request");
    assert_policy_survives(&requests(&broker), "athena row");
}
