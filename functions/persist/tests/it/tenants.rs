//! Persist shared by several teams (issue 24, item 3), through `handle_sqs`
//! with SQS records as AWS delivers them (`SenderId`, `eventSourceARN`): a
//! page writes only its tenant's pipeline and dataset, reads only its own
//! claim checks, and only for a run the Orchestrator planned.

use aws_lambda_events::event::sqs::SqsEvent;
use bytes::Bytes;
use chrono::NaiveDate;
use serde_json::json;

use adapters::local::{Broker, DirStore};
use contracts::{PageRef, Payload, PersistMessage, PersistTarget, RunId, V1};
use persist::{Deps, PersistConfig};
use tributary_core::batch::{ATTR_ERROR, DeadLetterTarget};
use tributary_core::ledger::{self, Plan};
use tributary_core::ports::ObjectStore;
use tributary_core::tenant::Tenants;

const DLQ: &str = "persist-dlq";
const RUN: &str = "20261129T060000Z";

fn page(pipeline: &str, dataset: &str, index: u32, payload: Payload) -> PersistMessage {
    PersistMessage {
        version: V1,
        pipeline: pipeline.into(),
        run_id: RunId::new(RUN).expect("run id"),
        run_date: NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        page: PageRef { index, count: 1 },
        target: PersistTarget::new(dataset),
        payload,
        fetched_at: None,
    }
}

fn records(text: &str) -> Payload {
    Payload::Inline { records: contracts::RawRecords::from_text(text.to_string()).expect("a JSON array") }
}

fn delivered(message: &PersistMessage, sender: &str) -> SqsEvent {
    serde_json::from_value(json!({"Records": [{
        "messageId": "m-1", "receiptHandle": "r-1", "body": serde_json::to_string(message).expect("JSON"),
        "attributes": {"ApproximateReceiveCount": "1", "SenderId": sender}, "messageAttributes": {},
        "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:tributary-persist",
        "awsRegion": "us-east-1"
    }]}))
    .expect("SQS event")
}

struct Lake {
    _dir: tempfile::TempDir,
    store: DirStore,
    broker: Broker,
    config: PersistConfig,
}

impl Lake {
    /// Team A owns `team-a*` and `team_a*`; team B `team-b` and `team_b`,
    /// and may open runs; the stack sends as `AROASTACK:*`.
    fn shared() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DirStore::new(dir.path());
        let broker = Broker::new();
        broker.create_queue(adapters::local::QueueConfig {
            name: DLQ.into(),
            visibility_timeout: std::time::Duration::from_secs(30),
            max_message_bytes: 1 << 20,
            redrive: None,
        });
        let tenants = Tenants::parse(
            &json!({
                "team-a": {"senders": ["AROATEAMA:*"], "pipelines": ["team-a*"], "datasets": ["team_a*"]},
                "team-b": {"senders": ["AROATEAMB:*"], "pipelines": ["team-b"], "datasets": ["team_b"], "opens_runs": true}
            })
            .to_string(),
            "AROASTACK:*",
        )
        .expect("tenants");
        let config = PersistConfig {
            dead_letter: Some(DeadLetterTarget { dlq: DLQ.into(), max_receive_count: 5 }),
            tenants,
            ..PersistConfig::default()
        };
        Self { _dir: dir, store, broker, config }
    }

    fn deps(&self) -> Deps<'_> {
        Deps {
            store: &self.store,
            queue: &self.broker,
            config: &self.config,
            run_events: None,
            catalog: None,
            tables: None,
        }
    }

    /// Sends `message` as `sender`; the reason of its dead letter, if any.
    async fn send(&self, message: &PersistMessage, sender: &str) -> Option<String> {
        let response = persist::handle_sqs(&delivered(message, sender), self.deps()).await;
        assert!(response.batch_item_failures.is_empty(), "refusals are dead-lettered at once");
        let letter = self.broker.receive(DLQ, 1).expect("receive").into_iter().next()?;
        self.broker.delete(DLQ, letter.receipt_handle.as_deref().expect("receipt"));
        letter.message_attributes[ATTR_ERROR].string_value.clone()
    }

    async fn plan(&self, pipeline: &str) {
        let plan = Plan {
            pipeline: pipeline.into(),
            run_id: RunId::new(RUN).expect("run id"),
            run_date: NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
            strategy: "paged".into(),
        };
        ledger::record_plan(&self.store, &plan).await.expect("plan");
    }

    async fn keys(&self, prefix: &str) -> Vec<String> {
        self.store.list(prefix).await.expect("list")
    }
}

#[tokio::test]
async fn a_page_naming_the_victims_pipeline_copies_nothing_into_the_attackers_table() {
    let lake = Lake::shared();
    lake.plan("team-a").await;
    let claim = "_claims/team-a/20261129T060000Z/page-00000.json";
    lake.store.put(claim, Bytes::from_static(br#"[{"ssn": "123-45-6789"}]"#)).await.expect("claim");
    let stolen = Payload::Object { key: claim.into(), format: Default::default() };
    let reason = lake.send(&page("team-a", "team_b", 0, stolen), "AROATEAMB:mallory").await.expect("refused");
    assert!(reason.contains("tenant team-b does not own it") && reason.contains("`pipeline` = team-a"), "{reason}");
    assert!(lake.keys("team_b/").await.is_empty() && lake.keys("raw/team_b/").await.is_empty());
    assert!(lake.keys("_runs/team-a/20261129T060000Z/receipts-").await.is_empty(), "no receipt in team A's ledger");
}

#[tokio::test]
async fn a_tenants_page_cannot_write_or_widen_another_tenants_table() {
    let lake = Lake::shared();
    let junk: Vec<String> = (0..997).map(|i| format!(r#""junk_{i}": 1"#)).collect();
    let widening = records(&format!("[{{{}}}]", junk.join(",")));
    // Team B's own pipeline into team A's dataset, sent by team B or relayed by the stack's Request.
    for sender in ["AROATEAMB:mallory", "AROASTACK:tributary-request"] {
        let reason = lake.send(&page("team-b", "team_a_orders", 0, widening.clone()), sender).await.expect("refused");
        assert!(reason.contains("`target.dataset` = team_a_orders") && reason.contains("tenant team-b"), "{reason}");
    }
    assert!(lake.keys("team_a_orders/").await.is_empty() && lake.keys("_schema/team_a").await.is_empty());
    // Its own dataset is written (team B opens its own runs).
    assert_eq!(lake.send(&page("team-b", "team_b", 0, records(r#"[{"id": 1}]"#)), "AROATEAMB:bob").await, None);
    assert_eq!(lake.keys("team_b/").await.len(), 1);
}

#[tokio::test]
async fn a_page_of_a_run_no_orchestrator_planned_is_refused() {
    let lake = Lake::shared();
    // A forged page 0 of team A's next run, even from team A's own role, before the Orchestrator starts it.
    let forged = page("team-a", "team_a", 0, records(r#"[{"id": "forged"}]"#));
    for sender in ["AROATEAMA:alice", "AROASTACK:tributary-request"] {
        let reason = lake.send(&forged, sender).await.expect("refused");
        assert!(reason.contains("was not planned") && reason.contains("opens_runs"), "{reason}");
    }
    assert!(lake.keys("_runs/team-a/").await.is_empty(), "nothing recorded: the run cannot be pre-completed");
    // Once planned, the page relayed by the stack's Request is written.
    lake.plan("team-a").await;
    assert_eq!(lake.send(&forged, "AROASTACK:tributary-request").await, None);
    assert_eq!(lake.keys("team_a/").await.len(), 1);
    // An unknown sender is refused even for a planned run.
    let reason = lake.send(&forged, "AIDAOUTSIDER").await.expect("refused");
    assert!(reason.contains("sender not authenticated"), "{reason}");
}
