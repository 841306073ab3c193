//! Operating a deployed stack, on the AWS emulator: the CLI's AWS mode
//! (`--stack NAME` reads the stack's CloudFormation outputs) over the real
//! handlers and aws-sdk clients against moto.
//!
//! - a dead letter survives Notify (archived whole in the lake) and is
//!   redriven to success;
//! - `status` on the S3 lake;
//! - `replay --stack` re-sends raw pages through the persist queue and the
//!   run completes again;
//! - `query --stack` runs on Athena in the stack's workgroup and database.
//!
//! Needs moto at `AWS_ENDPOINT_URL` (`bash .ci/run` starts it) and runs in
//! the `aws-emulator` test group (one at a time: each test resets moto).

use adapters::aws::stack::output;
use adapters::aws::{
    Provisioned, S3Store, SnsPublisher, SqsSender, StackOutputs, provision, s3_client_with_path_style,
};
use contracts::{PageRef, Payload, PersistMessage, PersistTarget, RunId, V1};
use tributary::dlq::Selection;
use tributary_core::ledger::{self, Expected};
use tributary_core::ports::{ObjectStore, PortError, QueueSender};
use tributary_core::{dead_letters, topology};
use tributary_e2e::emulator::{Emulator, receive_event, reset_emulator, settle, stack_with_outputs};

const BUCKET: &str = "tributary-ops-lake";
const STACK: &str = "tributary-ops";

/// A topology on moto, the lake bucket, and a stack whose outputs name
/// them as the SAM template's do.
async fn deployed() -> (Emulator, Provisioned, S3Store) {
    let emulator = reset_emulator().await;
    let provisioned = provision(&emulator.config, STACK, 262_144).await.expect("provision topology");
    let s3 = s3_client_with_path_style(&emulator.config, true);
    s3.create_bucket().bucket(BUCKET).send().await.expect("CreateBucket");
    let url = |queue: &str| provisioned.queue_url(queue).expect("url").to_string();
    let outputs = [
        (output::LAKE_BUCKET, BUCKET.to_string()),
        (output::LAKE_DATABASE, "tributary_ops_lake".to_string()),
        (output::ATHENA_WORKGROUP, "primary".to_string()),
        (output::ORCHESTRATOR_QUEUE, url(topology::ORCHESTRATOR_QUEUE)),
        (output::REQUEST_QUEUE, url(topology::REQUEST_QUEUE)),
        (output::PERSIST_QUEUE, url(topology::PERSIST_QUEUE)),
        (output::ATHENA_QUEUE, url(topology::ATHENA_QUEUE)),
    ];
    let outputs: Vec<(&str, &str)> = outputs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    stack_with_outputs(&emulator.config, STACK, &outputs).await;
    // The CLI builds its clients from the environment, as on a laptop.
    // SAFETY: nextest runs each test in its own process, one at a time here
    // (aws-emulator group), and no other thread reads the environment yet.
    unsafe { std::env::set_var(adapters::aws::S3_FORCE_PATH_STYLE_VAR, "true") };
    (emulator, provisioned, S3Store::new(s3, BUCKET))
}

fn run_id() -> RunId {
    RunId::new("20261129T060000Z").expect("run id")
}

fn page_message(payload: Payload) -> PersistMessage {
    PersistMessage {
        version: V1,
        pipeline: "ops".into(),
        run_id: run_id(),
        run_date: chrono::NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        page: PageRef::SINGLE,
        target: PersistTarget::new("ops_customers"),
        payload,
        fetched_at: None,
    }
}

fn persist_config(provisioned: &Provisioned) -> persist::PersistConfig {
    persist::PersistConfig {
        dead_letter: Some(tributary_core::batch::DeadLetterTarget {
            dlq: provisioned.queue_url("persist-dlq").expect("url").into(),
            max_receive_count: 5,
        }),
        ..persist::PersistConfig::default()
    }
}

/// Receives Persist's queue once and runs the handler over it, as the event
/// source mapping would; returns the batch's failures.
async fn persist_once(emulator: &Emulator, provisioned: &Provisioned, store: &S3Store) -> usize {
    let sqs = aws_sdk_sqs::Client::new(&emulator.config);
    let sender = SqsSender::new(sqs.clone());
    let url = provisioned.queue_url(topology::PERSIST_QUEUE).expect("url");
    let event = receive_event(&sqs, url, &provisioned.queue_arns[topology::PERSIST_QUEUE], 10, 60).await;
    assert!(!event.records.is_empty(), "a message on the persist queue");
    let config = persist_config(provisioned);
    let deps = persist::Deps { store, queue: &sender, config: &config, run_events: None, catalog: None, tables: None };
    let response = persist::handle_sqs(&event, deps).await;
    settle(&sqs, url, &event, &response).await;
    response.batch_item_failures.len()
}

#[tokio::test]
async fn a_dead_letter_survives_notify_and_is_redriven_to_success() {
    let (emulator, provisioned, store) = deployed().await;
    let sqs = aws_sdk_sqs::Client::new(&emulator.config);
    let sender = SqsSender::new(sqs.clone());
    let claim = "_claims/ops/20261129T060000Z/page-00000.json";
    let expected = Expected {
        pipeline: "ops".into(),
        run_id: run_id(),
        run_date: chrono::NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        pages: 1,
        truncated: None,
        records: None,
    };
    ledger::record_expected(&store, &expected).await.expect("expected pages");

    // The page names a claim check that is not there yet: Persist gives up
    // at once (permanent), with the reason, into persist-dlq.
    let body = contracts::encode(&page_message(Payload::Object { key: claim.into(), format: Default::default() }))
        .expect("encode");
    sender.send(provisioned.queue_url(topology::PERSIST_QUEUE).expect("url"), vec![body]).await.expect("send");
    assert_eq!(persist_once(&emulator, &provisioned, &store).await, 0, "dead-lettered, so handled");

    // Notify consumes the DLQ: the letter is archived whole, then deleted.
    let dlq_url = provisioned.queue_url("persist-dlq").expect("url");
    let dead = receive_event(&sqs, dlq_url, &provisioned.queue_arns["persist-dlq"], 10, 60).await;
    assert_eq!(dead.records.len(), 1);
    let notify_config = notify::NotifyConfig {
        alerts_topic: provisioned.topic_arn(topology::ALERTS_TOPIC).expect("arn").into(),
        metrics: Default::default(),
    };
    let topics = SnsPublisher::new(aws_sdk_sns::Client::new(&emulator.config));
    let response =
        notify::handle_sqs(&dead, notify::Deps { topics: &topics, config: &notify_config, store: Some(&store) }).await;
    assert!(response.batch_item_failures.is_empty());
    settle(&sqs, dlq_url, &dead, &response).await;
    assert_eq!(tributary_e2e::emulator::depth(&sqs, dlq_url).await, 0, "Notify deleted it from the DLQ");

    let runs = tributary::status::recent_runs(&store, None, 10).await.expect("status on S3");
    assert_eq!((runs[0].state(), runs[0].dead_letters), ("failed", 1), "{runs:?}");

    // The operator fixes the cause and redrives through the stack.
    store.put(claim, r#"[{"id": 1, "name": "Ada"}, {"id": 2, "name": "Grace"}]"#.into()).await.expect("claim check");
    let stack = tributary::aws::Stack::connect(STACK).await.expect("the stack's outputs");
    let queues = stack.queues();
    let address = |queue: &'static str| stack.queue_url(queue);
    let selection = Selection::default();
    let outcomes = tributary::dlq::redrive(&store, &queues, &address, &selection).await.expect("redrive");
    assert_eq!(outcomes.len(), 1);
    let persist_url = provisioned.queue_url(topology::PERSIST_QUEUE).expect("url");
    assert_eq!(outcomes[0].result.as_deref(), Ok(persist_url), "back to the queue it failed on");

    assert_eq!(persist_once(&emulator, &provisioned, &store).await, 0, "persisted this time");
    let totals = ledger::run_totals(&store, "ops", &run_id()).await.expect("totals");
    assert_eq!((totals.pages, totals.records_persisted), (1, 2));
    let runs = tributary::status::recent_runs(&store, None, 10).await.expect("status on S3");
    assert_eq!(runs[0].state(), "complete", "{runs:?}");

    let (_, letter) = dead_letters::find(&store, &outcomes[0].message_id).await.expect("archived");
    assert_eq!(letter.redriven.len(), 1, "the entry says it was redriven");
    assert_eq!(letter.redriven[0].queue, persist_url);
    let again = tributary::dlq::redrive(&store, &queues, &address, &selection).await.expect("redrive");
    assert!(again[0].result.as_ref().is_err_and(|why| why.contains("already redriven")), "{again:?}");
}

#[tokio::test]
async fn replay_on_the_stack_resends_raw_pages_and_the_run_completes_again() {
    let (emulator, provisioned, store) = deployed().await;
    let expected = Expected {
        pipeline: "ops".into(),
        run_id: run_id(),
        run_date: chrono::NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        pages: 2,
        truncated: None,
        records: None,
    };
    ledger::record_expected(&store, &expected).await.expect("expected pages");
    let sender = SqsSender::new(aws_sdk_sqs::Client::new(&emulator.config));
    let persist_url = provisioned.queue_url(topology::PERSIST_QUEUE).expect("url");
    for (index, text) in [(0, r#"[{"id": 1}, {"id": 2}]"#), (1, r#"[{"id": 3}]"#)] {
        let records = contracts::RawRecords::from_text(text.to_string()).expect("records");
        let mut message = page_message(Payload::Inline { records });
        message.page = PageRef { index, count: 2 };
        sender.send(persist_url, vec![contracts::encode(&message).expect("encode")]).await.expect("send");
    }
    while store.get(&tributary_core::keys::success_key("ops", &run_id())).await.is_err() {
        assert_eq!(persist_once(&emulator, &provisioned, &store).await, 0);
    }

    let stack = tributary::aws::Stack::connect(STACK).await.expect("stack");
    let queue = stack.persist_queue().expect("persist queue output");
    let range = tributary::replay::DateRange::default();
    let summary =
        tributary::replay::resend(&store, &stack.queues(), &queue, "ops_customers", range).await.expect("resend");
    assert_eq!((summary.pages_sent, summary.runs_reopened.len()), (2, 1), "{summary}");
    assert!(summary.failures.is_empty(), "{summary}");
    assert!(store.get(&tributary_core::keys::success_key("ops", &run_id())).await.is_err(), "reopened");
    let totals = ledger::run_totals(&store, "ops", &run_id()).await.expect("totals");
    assert_eq!(totals.pages, 0, "the old receipts are gone, so only the replayed pages complete the run");

    // Each replayed page is converted again; the run completes once both are.
    while store.get(&tributary_core::keys::success_key("ops", &run_id())).await.is_err() {
        assert_eq!(persist_once(&emulator, &provisioned, &store).await, 0, "a replayed page persists");
    }
    let totals = ledger::run_totals(&store, "ops", &run_id()).await.expect("totals");
    assert_eq!((totals.pages, totals.records_persisted), (2, 3), "both pages again, the same rows, not twice");
}

#[tokio::test]
async fn query_on_the_stack_runs_in_its_workgroup_and_database() {
    let (emulator, _provisioned, _store) = deployed().await;
    let athena = aws_sdk_athena::Client::new(&emulator.config);
    athena.create_work_group().name("ops-wg").send().await.expect("CreateWorkGroup");
    // The stack's outputs decide where the query runs.
    stack_with_outputs(
        &emulator.config,
        "tributary-ops-2",
        &[(output::ATHENA_WORKGROUP, "ops-wg"), (output::LAKE_DATABASE, "ops_db"), (output::LAKE_BUCKET, BUCKET)],
    )
    .await;
    let stack = tributary::aws::Stack::connect("tributary-ops-2").await.expect("stack");
    let (engine, database) = stack.athena().expect("athena outputs");
    assert_eq!(database, "ops_db");
    use tributary_core::ports::{Query, QueryEngine};
    let query =
        Query { sql: "SELECT 1".into(), parameters: Vec::new(), database, workgroup: None, output_location: None };
    let id = engine.start(&query).await.expect("StartQueryExecution");
    let execution = athena.get_query_execution().query_execution_id(&id).send().await.expect("GetQueryExecution");
    let execution = execution.query_execution().expect("execution");
    assert_eq!(execution.work_group(), Some("ops-wg"));
    assert_eq!(execution.query_execution_context().and_then(|c| c.database()), Some("ops_db"));
}

#[tokio::test]
async fn a_missing_stack_or_output_is_named() {
    let (emulator, _provisioned, _store) = deployed().await;
    let err = StackOutputs::describe(&emulator.config, "no-such-stack").await.expect_err("no stack");
    assert!(matches!(&err, PortError::NotFound { target, .. } if target == "no-such-stack"), "{err}");
    let stack = StackOutputs::describe(&emulator.config, STACK).await.expect("stack");
    let err = stack.get("SchedulerRoleArn").expect_err("not an output of this stack").to_string();
    assert!(err.contains("SchedulerRoleArn") && err.contains(STACK) && err.contains(output::PERSIST_QUEUE), "{err}");
}

#[tokio::test]
async fn status_lists_the_subscriptions_of_the_operations_and_alerts_topics() {
    let (emulator, provisioned, _store) = deployed().await;
    let sns = aws_sdk_sns::Client::new(&emulator.config);
    let operations = sns.create_topic().name("tributary-ops-operations").send().await.expect("CreateTopic");
    let operations = operations.topic_arn().expect("arn").to_string();
    let alerts = provisioned.topic_arn(topology::ALERTS_TOPIC).expect("alerts topic").to_string();
    for (topic, address) in [(&operations, "ops@example.com"), (&alerts, "data@example.com")] {
        sns.subscribe().topic_arn(topic).protocol("email").endpoint(address).send().await.expect("Subscribe");
    }
    stack_with_outputs(
        &emulator.config,
        "tributary-ops-subs",
        &[(output::OPERATIONS_TOPIC, &operations), (output::ALERTS_TOPIC, &alerts), (output::LAKE_BUCKET, BUCKET)],
    )
    .await;
    let stack = tributary::aws::Stack::connect("tributary-ops-subs").await.expect("stack");
    let topics = stack.topic_subscriptions().await.expect("ListSubscriptionsByTopic");
    let listed: Vec<(&str, Vec<(&str, &str)>)> = topics
        .iter()
        .map(|(topic, subs)| {
            (topic.as_str(), subs.iter().map(|s| (s.protocol.as_str(), s.endpoint.as_str())).collect())
        })
        .collect();
    assert_eq!(
        listed,
        [("operations", vec![("email", "ops@example.com")]), ("alerts", vec![("email", "data@example.com")])]
    );
    // moto confirms e-mail subscriptions at once (AWS lists them as
    // PendingConfirmation until the link is followed: the status unit
    // tests cover that), so nothing is pending here.
    let (text, ok) = tributary::status::subscriptions_report(&topics);
    assert!(ok, "{text}");
    // A stack without the topic outputs (an older template) is named.
    let err =
        tributary::aws::Stack::connect(STACK).await.expect("stack").topic_subscriptions().await.expect_err("no output");
    assert!(err.to_string().contains(output::OPERATIONS_TOPIC), "{err}");
}
