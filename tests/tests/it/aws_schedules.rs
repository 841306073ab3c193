//! Many pipelines on the AWS emulator: `deploy-schedules` makes a stack's
//! EventBridge Scheduler group match a folder of specs, and `trigger` puts
//! run triggers on its orchestrator queue, which the Orchestrator's handler
//! starts as scheduled runs.
//!
//! The "stack" is a CloudFormation stack whose outputs are the values the
//! SAM template's outputs give (moto cannot deploy the SAM template: it
//! skips SAM resources), over queues provisioned from the topology and a
//! schedule group made with the SDK. Needs moto at `AWS_ENDPOINT_URL`;
//! each test resets it (nextest's `aws-emulator` group runs them alone).

use std::path::Path;

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::{Value, json};

use adapters::aws::{Provisioned, ScheduleGroup, provision};
use contracts::schedule::ScheduleState;
use tributary::schedules::{deploy_schedules, trigger};
use tributary_core::schedules::{Change, RetryPolicy};
use tributary_core::topology;
use tributary_e2e::emulator::{Emulator, receive_event, reset_emulator, settle, stack_with_outputs};

const STACK: &str = "tributary-e2e";
const GROUP: &str = "tributary-e2e-schedules";
const ORCHESTRATOR_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:tributary-e2e-orchestrator";
const NOTIFY_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:tributary-e2e-notify";
const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/tributary-e2e-scheduler";

/// Queues from the topology, the stack's schedule group, and a stack whose
/// outputs name them as the SAM template's do.
async fn stack() -> (Emulator, Provisioned) {
    let emulator = reset_emulator().await;
    let provisioned = provision(&emulator.config, STACK, 262_144).await.expect("provision topology");
    aws_sdk_scheduler::Client::new(&emulator.config)
        .create_schedule_group()
        .name(GROUP)
        .send()
        .await
        .expect("CreateScheduleGroup");
    let orchestrator_queue = provisioned.queue_url(topology::ORCHESTRATOR_QUEUE).expect("url").to_string();
    let scheduler_dlq = provisioned.queue_arns[topology::SCHEDULER_DLQ].clone();
    let outputs = [
        ("OrchestratorQueueUrl", orchestrator_queue.as_str()),
        ("OrchestratorFunctionArn", ORCHESTRATOR_ARN),
        ("NotifyFunctionArn", NOTIFY_ARN),
        ("SchedulerRoleArn", ROLE_ARN),
        ("SchedulerDlqArn", scheduler_dlq.as_str()),
        ("ScheduleGroupName", GROUP),
    ];
    stack_with_outputs(&emulator.config, STACK, &outputs).await;
    (emulator, provisioned)
}

fn write(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).expect("write spec");
}

fn spec_text(pipeline: &str, extra: &str) -> String {
    format!(
        "version: 1\npipeline: {pipeline}\nstrategy: {{kind: simple}}\nrequest: {{url: 'https://api.vendor.example/{pipeline}'}}\ntarget: {{dataset: {pipeline}}}\n{extra}"
    )
}

fn summary(changes: &[tributary::schedules::ScheduleOutcome]) -> Vec<(String, &'static str)> {
    changes.iter().map(|o| (o.change.name().to_string(), o.change.verb(false))).collect()
}

fn pairs(items: &[(&str, &'static str)]) -> Vec<(String, &'static str)> {
    items.iter().map(|(name, verb)| (name.to_string(), *verb)).collect()
}

#[tokio::test]
async fn deploy_schedules_makes_the_group_match_the_folder() {
    let (emulator, provisioned) = stack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "customers.yaml",
        &spec_text("customers", "schedule: {expression: 'cron(0 6 * * ? *)'}\nfreshness: {deadline_utc: '07:30'}\n"),
    );
    write(
        dir.path(),
        "orders.yml",
        &spec_text("orders", "schedule: {expression: 'rate(6 hours)', timezone: Europe/Lisbon, state: DISABLED}\n"),
    );
    write(dir.path(), "fx.json", &spec_text("fx", "schedule: {expression: 'cron(15 * ? * MON-FRI *)'}\n"));
    // No schedule and no freshness: nothing to deploy for it.
    write(dir.path(), "adhoc.yaml", &spec_text("adhoc", ""));
    write(dir.path(), "notes.txt", "not a spec");
    // A schedule in the group that no spec declares (left by a removed spec).
    let group = ScheduleGroup::new(aws_sdk_scheduler::Client::new(&emulator.config), GROUP);

    // A dry run changes nothing.
    let plan = deploy_schedules(&emulator.config, STACK, dir.path(), true).await.expect("dry run");
    assert!(plan.dry_run);
    assert_eq!(group.list().await.expect("list").len(), 0, "a dry run creates nothing");
    assert_eq!(
        summary(&plan.outcomes),
        pairs(&[
            ("customers", "created"),
            ("customers.freshness", "created"),
            ("fx", "created"),
            ("orders", "created")
        ])
    );

    let report = deploy_schedules(&emulator.config, STACK, dir.path(), false).await.expect("deploy");
    assert_eq!(summary(&report.outcomes), summary(&plan.outcomes));
    assert_eq!(report.group, GROUP);
    let text = report.to_string();
    assert!(
        text.contains("created   customers") && text.contains("4 created, 0 updated, 0 unchanged, 0 deleted"),
        "{text}"
    );

    // What Scheduler holds: targets, inputs, DLQ and retry policy.
    let dlq = provisioned.queue_arns[topology::SCHEDULER_DLQ].clone();
    let customers = group.get("customers").await.expect("customers schedule");
    assert_eq!(customers.expression, "cron(0 6 * * ? *)");
    assert_eq!((customers.target_arn.as_str(), customers.role_arn.as_str()), (ORCHESTRATOR_ARN, ROLE_ARN));
    assert_eq!(customers.dlq_arn.as_deref(), Some(dlq.as_str()));
    assert_eq!(customers.retry, Some(RetryPolicy::DEFAULT));
    let input: Value = serde_json::from_str(&customers.input).expect("JSON input");
    assert_eq!(input["source"], "aws.scheduler");
    assert_eq!(input["time"], "<aws.scheduler.scheduled-time>");
    assert_eq!(input["detail"]["pipeline"], "customers");
    let fresh = group.get("customers.freshness").await.expect("freshness check");
    assert_eq!((fresh.expression.as_str(), fresh.target_arn.as_str()), ("cron(30 7 * * ? *)", NOTIFY_ARN));
    assert_eq!(
        serde_json::from_str::<Value>(&fresh.input).expect("JSON"),
        json!({"time": "<aws.scheduler.scheduled-time>", "freshness_check": {"pipeline": "customers", "deadline_utc": "07:30"}})
    );
    assert_eq!(fresh.dlq_arn.as_deref(), Some(dlq.as_str()));
    let orders = group.get("orders").await.expect("orders schedule");
    assert_eq!(
        (orders.expression.as_str(), orders.timezone.as_str(), orders.state),
        ("rate(6 hours)", "Europe/Lisbon", ScheduleState::Disabled)
    );

    // A second run changes nothing.
    let again = deploy_schedules(&emulator.config, STACK, dir.path(), false).await.expect("redeploy");
    assert!(again.outcomes.iter().all(|o| matches!(o.change, Change::Unchanged(_))), "{again}");
    assert!(again.to_string().contains("0 created, 0 updated, 4 unchanged, 0 deleted"), "{again}");

    // Edit one spec, remove another (and its freshness check with it).
    write(dir.path(), "fx.json", &spec_text("fx", "schedule: {expression: 'cron(45 * ? * MON-FRI *)'}\n"));
    std::fs::remove_file(dir.path().join("customers.yaml")).expect("remove");
    let edited = deploy_schedules(&emulator.config, STACK, dir.path(), false).await.expect("deploy edits");
    assert_eq!(
        summary(&edited.outcomes),
        pairs(&[
            ("customers", "deleted"),
            ("customers.freshness", "deleted"),
            ("fx", "updated"),
            ("orders", "unchanged")
        ])
    );
    let names: Vec<String> = group.list().await.expect("list").into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["fx", "orders"]);
    assert_eq!(group.get("fx").await.expect("fx").expression, "cron(45 * ? * MON-FRI *)");

    // An invalid spec stops everything before any AWS call, naming the file.
    write(dir.path(), "broken.yaml", &spec_text("broken", "schedule: {expression: 'cron(0 6 * * *)'}\n"));
    std::fs::remove_file(dir.path().join("orders.yml")).expect("remove");
    let err = deploy_schedules(&emulator.config, STACK, dir.path(), false).await.expect_err("invalid spec");
    let text = err.to_string();
    assert!(text.contains("broken.yaml") && text.contains("schedule.expression"), "{text}");
    assert_eq!(group.list().await.expect("list").len(), 2, "orders was not deleted: nothing changed");
}

#[tokio::test]
async fn a_missing_stack_output_is_named() {
    let emulator = reset_emulator().await;
    stack_with_outputs(&emulator.config, STACK, &[("OrchestratorFunctionArn", ORCHESTRATOR_ARN)]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "a.yaml", &spec_text("a", "schedule: {expression: 'rate(1 day)'}\n"));
    let err = deploy_schedules(&emulator.config, STACK, dir.path(), false).await.expect_err("no outputs");
    assert!(err.to_string().contains("NotifyFunctionArn"), "{err}");
}

#[tokio::test]
async fn trigger_backfills_queue_one_run_per_fire_time_and_the_orchestrator_starts_them() {
    let (emulator, provisioned) = stack().await;
    let spec = contracts::spec::PipelineSpec::from_yaml(&spec_text(
        "customers",
        "schedule: {expression: 'cron(0 6,18 * * ? *)'}\n",
    ))
    .expect("spec");
    let day = |text: &str| text.parse::<NaiveDate>().expect("date");
    // 11 days, twice a day: 22 runs, three SendMessageBatch calls.
    let times = tributary::pipelines::backfill_times(&spec, day("2026-11-20"), day("2026-11-30"), 1000).expect("times");
    assert_eq!(times.len(), 22);
    let runs = trigger(&emulator.config, STACK, &spec, &times, None).await.expect("trigger");
    assert_eq!(runs.first().map(|r| r.run_id.to_string()).as_deref(), Some("20261120T060000Z"));
    assert_eq!(runs.last().map(|r| r.run_id.to_string()).as_deref(), Some("20261130T180000Z"));

    // The queue holds exactly those triggers; the Orchestrator starts each
    // run, named after its time, with one probe... here one simple request.
    let sqs = aws_sdk_sqs::Client::new(&emulator.config);
    let queue_url = provisioned.queue_url(topology::ORCHESTRATOR_QUEUE).expect("url").to_string();
    let queue_arn = provisioned.queue_arns[topology::ORCHESTRATOR_QUEUE].clone();
    let config = orchestrator::OrchestratorConfig {
        request_queue: provisioned.queue_url(topology::REQUEST_QUEUE).expect("url").into(),
        persist_queue: provisioned.queue_url(topology::PERSIST_QUEUE).expect("url").into(),
        orchestrator_queue: queue_url.clone(),
        athena_queue: provisioned.queue_url(topology::ATHENA_QUEUE).expect("url").into(),
        query_results_topic: provisioned.topic_arn(topology::QUERY_RESULTS_TOPIC).expect("arn").into(),
        dead_letter: None,
        fanout: orchestrator::Fanout::default(),
    };
    let sender = adapters::aws::SqsSender::new(sqs.clone());
    let lake = tempfile::tempdir().expect("lake");
    let store = adapters::local::DirStore::new(lake.path());
    let ledger = tributary_core::ledger::RunLedger { store: &store, events: None };
    let deps = orchestrator::Deps { queue: &sender, config: &config, ledger: Some(ledger) };
    let mut queued_times = Vec::new();
    loop {
        let event = receive_event(&sqs, &queue_url, &queue_arn, 10, 60).await;
        if event.records.is_empty() {
            break;
        }
        for record in &event.records {
            let body: Value = serde_json::from_str(record.body.as_deref().expect("body")).expect("JSON");
            assert_eq!(body["source"], "aws.scheduler");
            assert_eq!(body["detail"]["pipeline"], "customers");
            queued_times.push(body["time"].as_str().expect("time").to_string());
        }
        let response = orchestrator::handle_sqs(
            &event,
            tributary_core::deadline::after_timeout(tributary_core::topology::Function::Orchestrator),
            deps,
        )
        .await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
        settle(&sqs, &queue_url, &event, &response).await;
    }
    queued_times.sort();
    let expected: Vec<String> =
        times.iter().map(|t: &DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)).collect();
    assert_eq!(queued_times, expected, "exactly one trigger per fire time");

    let request_url = provisioned.queue_url(topology::REQUEST_QUEUE).expect("url").to_string();
    let request_arn = provisioned.queue_arns[topology::REQUEST_QUEUE].clone();
    let mut planned = Vec::new();
    loop {
        let event = receive_event(&sqs, &request_url, &request_arn, 10, 60).await;
        if event.records.is_empty() {
            break;
        }
        for record in &event.records {
            let message: contracts::RequestMessage =
                contracts::decode_str(record.body.as_deref().expect("body")).expect("a RequestMessage");
            planned.push(message.run_id.to_string());
        }
        settle(&sqs, &request_url, &event, &Default::default()).await;
    }
    planned.sort();
    let expected: Vec<String> = runs.iter().map(|r| r.run_id.to_string()).collect();
    assert_eq!(planned, expected, "each trigger planned its run's request, named by its time");
    // The simple runs recorded their expected page count in the ledger.
    assert!(lake.path().join("_runs/customers/20261120T060000Z/expected.json").exists());
}
