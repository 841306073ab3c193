//! Request shared by several teams (issue 24, item 1), through `handle_sqs`
//! with SQS records as AWS delivers them (`SenderId`, `eventSourceARN`): a
//! message's tenant is who sent it, not the `pipeline` it names.

use crate::common;

use aws_lambda_events::event::sqs::SqsEvent;
use common::{Harness, PERSIST_QUEUE, items, message, recorder, reply};
use request::trust::SecretGrant;
use serde_json::{Value, json};
use tributary_core::batch::{ATTR_ERROR, ATTR_PERMANENT, DeadLetterTarget};
use tributary_core::ports::ObjectStore;
use tributary_core::tenant::Tenants;

const DLQ: &str = "request-dlq";
const TEAM_A_TOKEN: &str = "team-a-bearer-0123456789";
const TEAM_B_QUEUE: &str = "arn:aws:sqs:us-east-1:123456789012:team-b-requests";

/// Two teams and the stack; team A's token granted to pipeline `team-a`.
fn shared(vendor: std::net::SocketAddr) -> Harness {
    let mut harness = Harness::new();
    harness.broker.create_queue(adapters::local::QueueConfig {
        name: DLQ.into(),
        visibility_timeout: std::time::Duration::from_secs(30),
        max_message_bytes: 1 << 20,
        redrive: None,
    });
    harness.secrets(json!({"tributary/team-a-token": TEAM_A_TOKEN}));
    let mut trust = harness.config.trust.clone();
    trust.secrets = Some(Default::default());
    trust.grant(
        "tributary/team-a-token",
        SecretGrant {
            pipelines: vec!["team-a".into()],
            methods: vec![contracts::HttpMethod::Get, contracts::HttpMethod::Post],
            ..SecretGrant::origin_of(&url::Url::parse(&format!("http://{vendor}/")).expect("url"))
        },
    );
    harness.config.trust = trust;
    harness.config.tenants = Tenants::parse(
        &json!({
            "team-a": {"senders": ["AROATEAMA:*"], "pipelines": ["team-a"], "datasets": ["team_a"]},
            "team-b": {"senders": ["AROATEAMB:*"], "queues": [TEAM_B_QUEUE], "pipelines": ["team-b"], "datasets": ["team_b"]}
        })
        .to_string(),
        "AROASTACK:*",
    )
    .expect("tenants");
    harness.config.dead_letter = Some(DeadLetterTarget { dlq: DLQ.into(), max_receive_count: 5 });
    harness
}

/// An SQS event of one record as AWS delivers it: `sender` as `SenderId`,
/// arriving on `queue_arn`.
fn delivered(body: &contracts::RequestMessage, sender: &str, queue_arn: &str) -> SqsEvent {
    serde_json::from_value(json!({"Records": [{
        "messageId": "m-1",
        "receiptHandle": "AQEBm-1",
        "body": serde_json::to_string(body).expect("JSON"),
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1795932000000", "SenderId": sender},
        "messageAttributes": {},
        "md5OfBody": "00000000000000000000000000000000",
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": "us-east-1"
    }]}))
    .expect("SQS event")
}

const SHARED_QUEUE: &str = "arn:aws:sqs:us-east-1:123456789012:tributary-request";

/// Team A's pipeline, token and dataset; POST to `path`.
fn team_a_call(url: &str) -> contracts::RequestMessage {
    let mut value = serde_json::to_value(message(
        url,
        json!({"auth": {"kind": "bearer", "secret_id": "tributary/team-a-token"}, "allow": {"loopback": true}}),
    ))
    .expect("JSON");
    value["pipeline"] = json!("team-a");
    value["http"]["method"] = json!("POST");
    value["mode"]["target"]["dataset"] = json!("team_a");
    contracts::decode(value).expect("message")
}

fn dead_letters(harness: &Harness) -> Vec<(String, Value)> {
    let mut letters = Vec::new();
    while let Some(record) = harness.broker.receive(DLQ, 10).expect("receive").into_iter().next() {
        let reason = record.message_attributes[ATTR_ERROR].string_value.clone().unwrap_or_default();
        assert_eq!(record.message_attributes[ATTR_PERMANENT].string_value.as_deref(), Some("true"));
        letters.push((reason, serde_json::from_str(record.body.as_deref().unwrap_or("null")).expect("body")));
        harness.broker.delete(DLQ, record.receipt_handle.as_deref().expect("receipt"));
    }
    letters
}

#[tokio::test]
async fn another_team_naming_a_pipeline_is_refused_before_any_call() {
    let (addr, log) = recorder(|_, _| reply(200, &[], items(0..1))).await;
    let harness = shared(addr);
    let forged = team_a_call(&format!("http://{addr}/admin/delete-everything"));
    let response = request::handle_sqs(&delivered(&forged, "AROATEAMB:mallory", SHARED_QUEUE), harness.deps()).await;
    assert!(response.batch_item_failures.is_empty(), "dead-lettered with its reason, not redelivered");
    assert!(log.lock().expect("log").is_empty(), "the vendor saw no call with team A's token");
    let letters = dead_letters(&harness);
    assert_eq!(letters.len(), 1);
    let (reason, body) = &letters[0];
    assert!(reason.contains("tenant team-b does not own it") && reason.contains("`pipeline` = team-a"), "{reason}");
    assert!(!reason.contains(TEAM_A_TOKEN));
    assert_eq!(body["pipeline"], "team-a", "the letter keeps the message as sent");
    assert!(harness.drain(PERSIST_QUEUE).is_empty(), "nothing reached team B's dataset");
    let ledger = harness.store.list("_runs/team-a/").await.expect("list");
    assert!(ledger.is_empty(), "no receipt in team A's run ledger: {ledger:?}");

    // Team B's own queue makes its messages team B's, whoever the SenderId says.
    let response =
        request::handle_sqs(&delivered(&forged, "AROASTACK:tributary-request", TEAM_B_QUEUE), harness.deps()).await;
    assert!(response.batch_item_failures.is_empty());
    assert!(dead_letters(&harness)[0].0.contains("tenant team-b does not own it"));
    assert!(log.lock().expect("log").is_empty());
}

#[tokio::test]
async fn an_unknown_sender_is_refused_and_the_owner_and_the_stack_are_served() {
    let (addr, log) = recorder(|_, _| reply(200, &[], items(0..2))).await;
    let harness = shared(addr);
    let call = team_a_call(&format!("http://{addr}/contacts"));
    request::handle_sqs(&delivered(&call, "AIDAOUTSIDER", SHARED_QUEUE), harness.deps()).await;
    let letters = dead_letters(&harness);
    assert!(letters[0].0.contains("sender not authenticated: SenderId AIDAOUTSIDER"), "{}", letters[0].0);
    assert!(log.lock().expect("log").is_empty());

    for sender in ["AROATEAMA:alice", "AROASTACK:tributary-orchestrator"] {
        let response = request::handle_sqs(&delivered(&call, sender, SHARED_QUEUE), harness.deps()).await;
        assert!(response.batch_item_failures.is_empty(), "{sender}");
        assert!(dead_letters(&harness).is_empty(), "{sender} is served");
    }
    let seen = log.lock().expect("log").clone();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|s| s.headers["authorization"] == format!("Bearer {TEAM_A_TOKEN}")));
    assert_eq!(harness.drain(PERSIST_QUEUE).len(), 2, "both pages forwarded");
}
