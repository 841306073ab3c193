//! End-to-end on the AWS emulator: the real handlers, the AWS adapters and
//! the real aws-sdk clients against moto, with the topology provisioned from
//! `tributary_core::topology` (the declaration the local runtime uses).
//!
//! Needs moto at `AWS_ENDPOINT_URL` (`bash .ci/run` starts it); each test
//! resets it first, and `.config/nextest.toml` runs the emulator tests one at
//! a time so a reset never wipes a neighbour's resources.

use std::collections::BTreeSet;

use chrono::{TimeZone, Utc};
use serde_json::{Value, json};

use adapters::aws::{GlueCatalog, Provisioned, S3Store, SnsPublisher, SqsSender, provision, s3_client_with_path_style};
use contracts::{Alert, PageRef, Payload, PersistMessage, PersistTarget, RunId, V1};
use test_support::lake::parquet_rows;
use test_support::vendor::{VendorBehaviour, paged_spec, record, start_vendor};
use tributary_core::batch::decode_body;
use tributary_core::ports::{ObjectStore, QueueSender};
use tributary_core::topology;
use tributary_e2e::emulator::{Emulator, depth, receive_event, reset_emulator, settle};

const BUCKET: &str = "tributary-lake";

async fn setup() -> (Emulator, Provisioned, S3Store) {
    let emulator = reset_emulator().await;
    let provisioned = provision(&emulator.config, "e2e", 262_144).await.expect("provision topology");
    let s3 = s3_client_with_path_style(&emulator.config, true);
    s3.create_bucket().bucket(BUCKET).send().await.expect("CreateBucket");
    (emulator, provisioned, S3Store::new(s3, BUCKET))
}

/// A queue subscribed to `topic` with raw delivery; its URL and ARN.
async fn raw_inbox(emulator: &Emulator, topic: &str, name: &str) -> (String, String) {
    let sqs = aws_sdk_sqs::Client::new(&emulator.config);
    let url =
        sqs.create_queue().queue_name(name).send().await.expect("CreateQueue").queue_url().expect("url").to_string();
    let arn = format!("arn:aws:sqs:us-east-1:123456789012:{name}");
    aws_sdk_sns::Client::new(&emulator.config)
        .subscribe()
        .topic_arn(topic)
        .protocol("sqs")
        .endpoint(&arn)
        .attributes("RawMessageDelivery", "true")
        .send()
        .await
        .expect("Subscribe");
    (url, arn)
}

/// The Orchestrator's queue and topic addresses on the provisioned topology.
/// The deadline of an Orchestrator invocation starting now (its time-out).
fn orchestrator_deadline() -> tokio::time::Instant {
    tributary_core::deadline::after_timeout(topology::Function::Orchestrator)
}

fn orchestrator_config(provisioned: &Provisioned) -> orchestrator::OrchestratorConfig {
    orchestrator::OrchestratorConfig {
        request_queue: provisioned.queue_url(topology::REQUEST_QUEUE).expect("url").into(),
        persist_queue: provisioned.queue_url(topology::PERSIST_QUEUE).expect("url").into(),
        orchestrator_queue: provisioned.queue_url(topology::ORCHESTRATOR_QUEUE).expect("url").into(),
        athena_queue: provisioned.queue_url(topology::ATHENA_QUEUE).expect("url").into(),
        query_results_topic: provisioned.topic_arn(topology::QUERY_RESULTS_TOPIC).expect("arn").into(),
        dead_letter: None,
        fanout: orchestrator::Fanout::default(),
    }
}

/// Persist's dependencies with no run-completed topic, no catalog and no
/// table committer.
fn plain_deps<'a>(
    store: &'a dyn ObjectStore,
    queue: &'a dyn QueueSender,
    config: &'a persist::PersistConfig,
) -> persist::Deps<'a> {
    persist::Deps { store, queue, config, run_events: None, catalog: None, tables: None }
}

#[tokio::test]
async fn a_paged_pipeline_runs_through_real_sqs_and_s3() {
    let (emulator, provisioned, store) = setup().await;
    let sqs = aws_sdk_sqs::Client::new(&emulator.config);
    let sender = SqsSender::new(sqs.clone());
    let addr = start_vendor(VendorBehaviour { total: 95, ..Default::default() }).await;
    let spec = paged_spec(addr, "onaws", 20);

    // A subscriber to the run-events topic, standing in for a dashboard.
    let run_events = provisioned.topic_arn(topology::RUN_EVENTS_TOPIC).expect("arn").to_string();
    let (inbox_url, inbox_arn) = raw_inbox(&emulator, &run_events, "e2e-run-events").await;
    let inbox_arn = inbox_arn.as_str();
    let topics = SnsPublisher::new(aws_sdk_sns::Client::new(&emulator.config));
    let ledger = tributary_core::ledger::RunLedger { store: &store, events: Some((&topics, run_events.as_str())) };

    let orchestrator_config = orchestrator_config(&provisioned);
    let scheduled = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time");
    let event = tributary::runtime::scheduler_event(&spec, scheduled);
    let orchestrator_deps = orchestrator::Deps { queue: &sender, config: &orchestrator_config, ledger: Some(ledger) };
    orchestrator::handle(event, scheduled, orchestrator_deadline(), orchestrator_deps).await.expect("run starts");

    let http = request::http::ReqwestClient::new().expect("http");
    // As the template configures Request: answers only to the stack's own
    // queues; the test vendor is on loopback, which this stack opens.
    let request_config = request::RequestConfig {
        trust: request::trust::Trust {
            destinations: Some(
                [topology::REQUEST_QUEUE, topology::PERSIST_QUEUE, topology::ORCHESTRATOR_QUEUE]
                    .map(|q| provisioned.queue_url(q).expect("url").to_string())
                    .into(),
            ),
            networks: tributary_core::ports::NetworkAccess { loopback: true, private: false },
            ..request::trust::Trust::default()
        },
        ..request::RequestConfig::default()
    };
    let (secrets, warm) = (adapters::local::FileSecrets::new("no-secrets.json"), request::Warm::default());
    let persist_config = persist::PersistConfig::default();
    // The template's lake database; Persist registers the dataset's table there.
    let glue = aws_sdk_glue::Client::new(&emulator.config);
    let database_input = aws_sdk_glue::types::DatabaseInput::builder().name("tributary_lake").build().expect("input");
    glue.create_database().database_input(database_input).send().await.expect("CreateDatabase");
    let catalog = GlueCatalog::new(&emulator.config, "tributary_lake", BUCKET);
    let consumers = [topology::ORCHESTRATOR_QUEUE, topology::REQUEST_QUEUE, topology::PERSIST_QUEUE];
    // The event source mappings, by hand: poll each queue, invoke, settle.
    for _round in 0..20 {
        let mut handled = 0;
        for queue in consumers {
            let url = provisioned.queue_url(queue).expect("url");
            let event = receive_event(&sqs, url, &provisioned.queue_arns[queue], 10, 60).await;
            if event.records.is_empty() {
                continue;
            }
            let response = match queue {
                topology::ORCHESTRATOR_QUEUE => {
                    orchestrator::handle_sqs(&event, orchestrator_deadline(), orchestrator_deps).await
                }
                topology::REQUEST_QUEUE => {
                    let deps = request::Deps {
                        http: &http,
                        queue: &sender,
                        topics: &topics,
                        store: &store,
                        secrets: &secrets,
                        warm: &warm,
                        deadline: tokio::time::Instant::now() + std::time::Duration::from_secs(120),
                        config: &request_config,
                    };
                    request::handle_sqs(&event, deps).await
                }
                _ => {
                    let deps = persist::Deps {
                        store: &store,
                        queue: &sender,
                        config: &persist_config,
                        run_events: Some((&topics, run_events.as_str())),
                        catalog: Some(&catalog),
                        tables: None,
                    };
                    persist::handle_sqs(&event, deps).await
                }
            };
            assert!(response.batch_item_failures.is_empty(), "{queue}: {:?}", response.batch_item_failures);
            handled += settle(&sqs, url, &event, &response).await;
        }
        if handled == 0 {
            break;
        }
    }
    for queue in consumers {
        assert_eq!(depth(&sqs, provisioned.queue_url(queue).expect("url")).await, 0, "{queue} drained");
    }

    let keys = store.list("onaws/dt=2026-11-29/").await.expect("list");
    assert_eq!(keys, ["onaws/dt=2026-11-29/onaws-20261129T060000Z.parquet"], "5 pages coalesced into one file");
    let mut ids = Vec::new();
    for key in &keys {
        for row in parquet_rows(store.get(key).await.expect("get")) {
            let id = row["id"].as_u64().expect("id");
            assert_eq!(row["name"], record(u32::try_from(id).expect("small"))["name"]);
            ids.push(id);
        }
    }
    ids.sort_unstable();
    assert_eq!(ids, (0..95).collect::<Vec<u64>>(), "every record exactly once");
    // The table is in Glue, as the published schema says, for Athena.
    let table = glue.get_table().database_name("tributary_lake").name("onaws").send().await.expect("GetTable");
    let table = table.table.expect("table registered");
    let published = lake_format::codec::decode_arrow_schema(
        &store.get(&tributary_core::keys::arrow_schema_key("onaws")).await.expect("published schema"),
    )
    .expect("arrow schema");
    let storage = table.storage_descriptor().expect("storage descriptor");
    let columns: Vec<&str> = storage.columns().iter().map(|c| c.name()).collect();
    let data_columns: Vec<&str> = published
        .fields()
        .iter()
        .filter(|f| !f.metadata().contains_key(lake_format::meta::META_PARTITION))
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(columns, data_columns);
    assert!(columns.contains(&"nested") && columns.contains(&"_tributary_run_id"), "{columns:?}");
    assert_eq!(storage.location(), Some("s3://tributary-lake/onaws/"));
    let keys: Vec<&str> = table.partition_keys().iter().map(|k| k.name()).collect();
    assert_eq!(keys, ["dt"]);
    let parameters = table.parameters().expect("parameters");
    assert_eq!(parameters.get("projection.dt.type").map(String::as_str), Some("date"));
    assert_eq!(
        parameters.get(tributary_core::catalog::VERSION_PARAMETER),
        published.metadata().get(lake_format::meta::META_VERSION),
        "the registered version is the published one"
    );

    let run_id = RunId::new("20261129T060000Z").expect("id");
    let receipts = tributary_core::ledger::run_totals(&store, "onaws", &run_id).await;
    assert_eq!(receipts.expect("receipts").records_persisted, 95);

    // The run ledger in S3 completed the run and announced it on SNS.
    let manifest: tributary_core::ledger::Manifest = serde_json::from_slice(
        &store.get(&tributary_core::keys::manifest_key("onaws", &run_id)).await.expect("manifest in S3"),
    )
    .expect("manifest");
    assert_eq!((manifest.pages, manifest.records_persisted), (5, 95));
    let announced = receive_event(&sqs, &inbox_url, inbox_arn, 10, 60).await;
    assert_eq!(announced.records.len(), 1, "one run-completed event");
    let event: contracts::RunCompleted =
        serde_json::from_str(announced.records[0].body.as_deref().expect("body")).expect("run-completed.v1");
    assert_eq!((event.pipeline.as_str(), event.pages), ("onaws", 5));

    // The freshness check finds the day's completed run; another day is stale.
    let alerts_topic = provisioned.topic_arn(topology::ALERTS_TOPIC).expect("arn").to_string();
    let (alerts_inbox, alerts_inbox_arn) = raw_inbox(&emulator, &alerts_topic, "e2e-fresh-alerts").await;
    let notify_config = notify::NotifyConfig {
        alerts_topic: provisioned.topic_arn(topology::ALERTS_TOPIC).expect("arn").into(),
        metrics: Default::default(),
    };
    let check = notify::FreshnessCheck { pipeline: "onaws".into(), deadline_utc: "07:30".into() };
    let fresh_deps = notify::FreshnessDeps { store: &store, topics: &topics, config: &notify_config };
    let day = chrono::NaiveDate::from_ymd_opt(2026, 11, 29).expect("date");
    assert!(notify::check_freshness(&check, day, fresh_deps).await.expect("check").is_none(), "fresh");
    let stale = notify::check_freshness(&check, day.succ_opt().expect("next day"), fresh_deps).await.expect("check");
    assert!(stale.is_some(), "no run of the next day");
    let alert = receive_event(&sqs, &alerts_inbox, &alerts_inbox_arn, 10, 60).await;
    assert_eq!(alert.records.len(), 1);
    let body: Value =
        serde_json::from_str(alert.records[0].body.as_deref().expect("body")).expect("alert JSON (sqs text)");
    assert_eq!(body["function"], "freshness");
    assert!(body["reason"].as_str().is_some_and(|r| r.contains("no run of 2026-11-30")), "{body}");
}

#[tokio::test]
async fn a_poison_message_is_dead_lettered_and_notify_alerts_on_the_alerts_topic() {
    let (emulator, provisioned, _store) = setup().await;
    let sqs = aws_sdk_sqs::Client::new(&emulator.config);
    let sns = aws_sdk_sns::Client::new(&emulator.config);
    // A subscriber to the alerts topic, standing in for e-mail (enveloped).
    let inbox = sqs.create_queue().queue_name("e2e-alerts-inbox").send().await.expect("CreateQueue");
    let inbox_url = inbox.queue_url().expect("url").to_string();
    let inbox_arn = "arn:aws:sqs:us-east-1:123456789012:e2e-alerts-inbox".to_string();
    sns.subscribe()
        .topic_arn(provisioned.topic_arn(topology::ALERTS_TOPIC).expect("arn"))
        .protocol("sqs")
        .endpoint(&inbox_arn)
        .send()
        .await
        .expect("Subscribe");

    let persist_url = provisioned.queue_url(topology::PERSIST_QUEUE).expect("url");
    let dlq_url = provisioned.queue_url("persist-dlq").expect("url");
    SqsSender::new(sqs.clone()).send(persist_url, vec!["{this is not json".into()]).await.expect("send");

    let store = S3Store::new(s3_client_with_path_style(&emulator.config, true), BUCKET);
    let persist_config = persist::PersistConfig::default();
    let mut receives = 0;
    while depth(&sqs, dlq_url).await == 0 && receives < 20 {
        // Visibility 0: the failed record is visible again at once, standing in
        // for the queue's visibility timeout passing.
        let event = receive_event(&sqs, persist_url, &provisioned.queue_arns["persist"], 10, 0).await;
        if event.records.is_empty() {
            continue;
        }
        receives += 1;
        let sender = SqsSender::new(sqs.clone());
        let response = persist::handle_sqs(&event, plain_deps(&store, &sender, &persist_config)).await;
        assert_eq!(response.batch_item_failures.len(), 1, "the record fails alone");
        settle(&sqs, persist_url, &event, &response).await;
    }
    assert_eq!(receives, topology::MAX_RECEIVE_COUNT as usize, "received maxReceiveCount times, then redriven");
    assert_eq!(depth(&sqs, persist_url).await, 0);

    let dead = receive_event(&sqs, dlq_url, &provisioned.queue_arns["persist-dlq"], 10, 60).await;
    assert_eq!(dead.records.len(), 1);
    let publisher = SnsPublisher::new(sns.clone());
    let notify_config = notify::NotifyConfig {
        alerts_topic: provisioned.topic_arn(topology::ALERTS_TOPIC).expect("arn").into(),
        metrics: Default::default(),
    };
    let response =
        notify::handle_sqs(&dead, notify::Deps { topics: &publisher, config: &notify_config, store: Some(&store) })
            .await;
    assert!(response.batch_item_failures.is_empty(), "Notify never fails on the body");
    let archived = tributary_core::dead_letters::list(&store, None).await.expect("list the archive");
    assert_eq!(archived.len(), 1, "the dead letter is kept whole in the lake: {archived:?}");
    let letter = tributary_core::dead_letters::read(&store, &archived[0]).await.expect("archived letter");
    assert_eq!((letter.body.as_str(), letter.function.as_str()), ("{this is not json", "persist"));
    settle(&sqs, dlq_url, &dead, &response).await;

    let delivered = receive_event(&sqs, &inbox_url, &inbox_arn, 10, 60).await;
    assert_eq!(delivered.records.len(), 1, "one alert on the alerts topic");
    let (body, from_sns) = decode_body(delivered.records[0].body.as_deref().expect("body")).expect("alert JSON");
    assert!(from_sns, "delivered in the SNS envelope");
    let alert: Alert = serde_json::from_value(body).expect("alert contract");
    assert_eq!(alert.function, "persist");
    assert_eq!(alert.body_excerpt, "{this is not json");
    assert!(alert.receive_count >= topology::MAX_RECEIVE_COUNT, "{alert:?}");
    assert_eq!(alert.reason, None, "a redrive policy moves the message without its reason");
}

#[tokio::test]
async fn a_permanent_failure_is_dead_lettered_at_once_and_the_alert_carries_the_reason() {
    let (emulator, provisioned, store) = setup().await;
    let sqs = aws_sdk_sqs::Client::new(&emulator.config);
    let sender = SqsSender::new(sqs.clone());
    let persist_url = provisioned.queue_url(topology::PERSIST_QUEUE).expect("url");
    let dlq_url = provisioned.queue_url("persist-dlq").expect("url");
    let bad = json!({"version": 1, "pipeline": "p", "run_id": "r1", "run_date": "2026-11-29",
                     "page": {"index": 0, "count": 1}, "target": {"dataset": "raw"},
                     "payload": {"kind": "inline", "records": []}});
    sender.send(persist_url, vec![bad.to_string()]).await.expect("send");
    let persist_config = persist::PersistConfig {
        dead_letter: Some(tributary_core::batch::DeadLetterTarget { dlq: dlq_url.into(), max_receive_count: 5 }),
        ..persist::PersistConfig::default()
    };
    let event = receive_event(&sqs, persist_url, &provisioned.queue_arns["persist"], 10, 60).await;
    let response = persist::handle_sqs(&event, plain_deps(&store, &sender, &persist_config)).await;
    assert!(response.batch_item_failures.is_empty(), "dead-lettered, so handled");
    settle(&sqs, persist_url, &event, &response).await;
    assert_eq!(depth(&sqs, persist_url).await, 0, "gone from the work queue after one receive");

    let dead = receive_event(&sqs, dlq_url, &provisioned.queue_arns["persist-dlq"], 10, 60).await;
    assert_eq!(dead.records.len(), 1);
    let publisher = SnsPublisher::new(aws_sdk_sns::Client::new(&emulator.config));
    let alerts_topic = provisioned.topic_arn(topology::ALERTS_TOPIC).expect("arn").to_string();
    let alert = notify::alert_for(&dead.records[0], &tributary_core::batch::RecordMeta::of(&dead.records[0]));
    let reason = alert.reason.clone().expect("the reason travelled in message attributes");
    assert!(reason.contains("target.dataset") && reason.contains("reserved"), "{reason}");
    assert_eq!((alert.function.as_str(), alert.receive_count, alert.pipeline.as_deref()), ("persist", 1, Some("p")));
    assert!(alert.summary.contains(&reason), "{}", alert.summary);
    let config = notify::NotifyConfig { alerts_topic, metrics: Default::default() };
    let response =
        notify::handle_sqs(&dead, notify::Deps { topics: &publisher, config: &config, store: Some(&store) }).await;
    assert!(response.batch_item_failures.is_empty());
    let (_, letter) = tributary_core::dead_letters::find(&store, dead.records[0].message_id.as_deref().expect("id"))
        .await
        .expect("kept");
    assert_eq!(letter.reason.as_deref(), Some(reason.as_str()));
    assert_eq!(letter.body, bad.to_string(), "the whole body, not an excerpt");
}

#[tokio::test]
async fn persist_writes_parquet_to_s3_that_reads_back_byte_for_byte() {
    let (emulator, _provisioned, store) = setup().await;
    let _sender = SqsSender::new(aws_sdk_sqs::Client::new(&emulator.config));
    let records: Vec<Value> = (0..500).map(record).chain([json!(42)]).collect();
    let message = PersistMessage {
        version: V1,
        pipeline: "bytes".into(),
        run_id: RunId::new("r-1").expect("id"),
        run_date: chrono::NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        page: PageRef { index: 3, count: 4 },
        target: PersistTarget::new("bytes"),
        payload: Payload::Inline { records: contracts::RawRecords::from_values(&records).expect("records") },
        fetched_at: Some(chrono::Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("a time")),
    };
    let config = persist::PersistConfig::default();
    // The same message persisted to a local lake: the bytes S3 must hold.
    let local_dir = tempfile::tempdir().expect("tempdir");
    let local = adapters::local::DirStore::new(local_dir.path());
    persist::persist_page(message.clone(), plain_deps(&local, &_sender, &config)).await.expect("persist locally");
    let receipt = persist::persist_page(message, plain_deps(&store, &_sender, &config)).await.expect("persist");
    assert_eq!((receipt.records_persisted, receipt.records_quarantined), (500, 1));

    let key = receipt.data_keys.into_iter().next().expect("data key");
    assert_eq!(key, "bytes/dt=2026-11-29/bytes-r-1-00003.parquet");
    let stored = store.get(&key).await.expect("get");
    let expected = local.get(&key).await.expect("the local copy");
    assert_eq!(stored, expected, "the object is the bytes Persist wrote");
    let ids: BTreeSet<u64> = parquet_rows(stored).iter().map(|r| r["id"].as_u64().expect("id")).collect();
    assert_eq!(ids.len(), 500);
    let quarantine = store.get(receipt.quarantine_key.as_deref().expect("quarantine key")).await.expect("get");
    assert!(String::from_utf8_lossy(&quarantine).contains("record 500 is an integer"));
}

#[tokio::test]
async fn athena_rows_fan_out_through_sns_to_the_orchestrator_and_become_requests() {
    let (emulator, provisioned, _store) = setup().await;
    let http = reqwest::Client::new();
    let seeded = json!({"results": [{
        "rows": [{"Data": [{"VarCharValue": "id"}]}, {"Data": [{"VarCharValue": "7"}]},
                 {"Data": [{"VarCharValue": "8"}]}, {"Data": [{"VarCharValue": "9"}]}],
        "column_info": [{"Name": "id", "Type": "integer"}]}]});
    let seeded = http
        .post(format!("{}/moto-api/static/athena/query-results", emulator.endpoint))
        .header("content-type", "application/json")
        .body(seeded.to_string())
        .send()
        .await
        .expect("seed Athena results");
    assert!(seeded.status().is_success());

    let sqs = aws_sdk_sqs::Client::new(&emulator.config);
    let sender = SqsSender::new(sqs.clone());
    let orchestrator_config = orchestrator_config(&provisioned);
    let orchestrator_deps = orchestrator::Deps { queue: &sender, config: &orchestrator_config, ledger: None };
    let spec: Value = serde_json::from_str(
        r#"{"version":1,"pipeline":"tx","strategy":{"kind":"athena","query":"SELECT id FROM customers WHERE dt = ?",
            "parameters":["{run_date}"],"database":"lake"},
            "request":{"url":"http://127.0.0.1:9/customers/{id}/transactions"},"target":{"dataset":"tx"}}"#,
    )
    .expect("spec");
    let scheduled = Utc.with_ymd_and_hms(2026, 11, 29, 6, 0, 0).single().expect("time");
    let event = json!({"source": "aws.scheduler", "time": "2026-11-29T06:00:00Z", "detail": spec});
    orchestrator::handle(event, scheduled, orchestrator_deadline(), orchestrator_deps).await.expect("run starts");

    // The Athena function's turn: its queue holds the query.
    let athena_url = provisioned.queue_url(topology::ATHENA_QUEUE).expect("url");
    let event = receive_event(&sqs, athena_url, &provisioned.queue_arns["athena"], 10, 60).await;
    assert_eq!(event.records.len(), 1);
    let engine = adapters::aws::AthenaEngine::new(aws_sdk_athena::Client::new(&emulator.config))
        .with_poll_delays(std::time::Duration::from_millis(5), std::time::Duration::from_millis(20));
    let topics = SnsPublisher::new(aws_sdk_sns::Client::new(&emulator.config));
    let athena_config = athena::AthenaConfig::new(athena_url);
    let athena_deps =
        athena::Deps { engine: &engine, topics: &topics, queue: &sender, config: &athena_config, ledger: None };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let response = athena::handle_sqs(&event, deadline, athena_deps).await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);

    // SNS (raw delivery) -> the orchestrator queue -> one request per row.
    let orchestrator_url = provisioned.queue_url(topology::ORCHESTRATOR_QUEUE).expect("url");
    let rows = receive_event(&sqs, orchestrator_url, &provisioned.queue_arns["orchestrator"], 10, 60).await;
    assert_eq!(rows.records.len(), 3, "one message per row, header skipped");
    let response = orchestrator::handle_sqs(&rows, orchestrator_deadline(), orchestrator_deps).await;
    assert!(response.batch_item_failures.is_empty(), "{:?}", response.batch_item_failures);
    let requests = receive_event(
        &sqs,
        provisioned.queue_url(topology::REQUEST_QUEUE).expect("url"),
        &provisioned.queue_arns["request"],
        10,
        60,
    )
    .await;
    let mut urls: Vec<String> = requests
        .records
        .iter()
        .map(|r| {
            let message: contracts::RequestMessage =
                serde_json::from_str(r.body.as_deref().expect("body")).expect("request message");
            message.http.url.to_string()
        })
        .collect();
    urls.sort();
    assert_eq!(
        urls,
        ["7", "8", "9"].map(|id| format!("http://127.0.0.1:9/customers/{id}/transactions")),
        "row values bound into the URL"
    );
}
