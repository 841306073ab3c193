//! Stream batches through Persist: the MSK and Kinesis fixtures under
//! `events/` through the handlers into a [`DirStore`]; exactly-once keys,
//! poison quarantine, partial failure at the first unwritten record (a
//! store that fails on a chosen key stands for the crash).

use arrow_array::Array;
use arrow_array::cast::AsArray;
use aws_lambda_events::event::kafka::KafkaEvent;
use aws_lambda_events::event::kinesis::KinesisEvent;
use bytes::Bytes;
use serde_json::Value;

use adapters::local::{Broker, DirStore};
use contracts::stream::StreamSpec;
use persist::stream::{self, Checkpoint};
use persist::{Deps, PersistConfig};
use tributary_core::ports::ObjectStore;

const MSK: &str = include_str!("../../../../events/msk-batch.json");
const KINESIS: &str = include_str!("../../../../events/kinesis-stream.json");

fn kafka_spec() -> StreamSpec {
    StreamSpec::from_yaml(
        "version: 1\npipeline: orders\nsource: { kind: kafka, topic: orders }\ntarget: { dataset: orders }\n",
    )
    .expect("spec")
}

fn kinesis_spec() -> StreamSpec {
    StreamSpec::from_yaml(
        "version: 1\npipeline: clicks\nsource: { kind: kinesis, stream: clicks }\ntarget: { dataset: clicks }\n",
    )
    .expect("spec")
}

type FailingStore = test_support::crash::FlakyWrites<DirStore>;

/// A lake in a temporary folder whose store fails writes on demand
/// (`store.fail`), with the queue and config Persist needs beside it.
struct Lake {
    dir: tempfile::TempDir,
    store: FailingStore,
    config: PersistConfig,
    broker: Broker,
}

impl Lake {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = FailingStore::new(DirStore::new(dir.path()));
        Self { dir, store, config: PersistConfig::default(), broker: Broker::new() }
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
}

/// Every value of `column` in the dataset's Parquet files, as JSON text.
fn column_values(lake: &std::path::Path, dataset: &str, column: &str) -> Vec<String> {
    let mut files = Vec::new();
    let mut stack = vec![lake.join(dataset)];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("dataset folder").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "parquet") {
                files.push(path);
            }
        }
    }
    let mut values = Vec::new();
    for file in files {
        let bytes = Bytes::from(std::fs::read(&file).expect("read"));
        for batch in test_support::lake::parquet_batches(bytes) {
            let Some(array) = batch.column_by_name(column) else { continue };
            let array = arrow_cast::cast(array, &arrow_schema::DataType::Utf8).expect("cast");
            let strings = array.as_string::<i32>();
            values.extend((0..strings.len()).map(|i| strings.value(i).to_string()));
        }
    }
    values.sort();
    values
}

fn quarantined(lake: &std::path::Path, dataset: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut stack = vec![lake.join("quarantine").join(dataset)];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                let text = std::fs::read_to_string(&path).expect("read");
                out.extend(text.lines().map(|l| serde_json::from_str::<Value>(l).expect("json line")));
            }
        }
    }
    out
}

#[tokio::test]
async fn the_msk_fixture_lands_once_with_its_poison_quarantined() {
    let lake = Lake::new();
    let (dir, store, deps) = (&lake.dir, &lake.store, lake.deps());
    let event: KafkaEvent = serde_json::from_str(MSK).expect("MSK event");
    let spec = kafka_spec();
    let response = stream::handle_kafka(&spec, &event, deps).await.expect("handled");
    assert_eq!(response, serde_json::json!({ "batchItemFailures": [] }));
    assert_eq!(column_values(dir.path(), "orders", "order_id"), ["o-1", "o-2", "o-3", "o-4"]);
    let poison = quarantined(dir.path(), "orders");
    assert_eq!(poison.len(), 1, "{poison:?}");
    let reason = poison[0]["reason"].as_str().expect("reason");
    assert!(reason.contains("record 16 (orders-0)") && reason.contains("not JSON"), "{reason}");
    assert_eq!(poison[0]["record"]["data_base64"], "AAFiaW5hcnk=", "the poison record's bytes are kept");

    // Redelivered as it is: nothing is written twice.
    let again = stream::handle_kafka(&spec, &event, deps).await.expect("handled");
    assert_eq!(again, serde_json::json!({ "batchItemFailures": [] }));
    assert_eq!(column_values(dir.path(), "orders", "order_id"), ["o-1", "o-2", "o-3", "o-4"]);
    let checkpoint: Checkpoint = serde_json::from_slice(
        &store.get(&stream::checkpoint_key("orders", "orders", "orders-0")).await.expect("ckpt"),
    )
    .expect("checkpoint");
    assert_eq!((checkpoint.through.as_deref(), checkpoint.pending.is_none()), (Some("17"), true));
}

#[tokio::test]
async fn a_partition_that_fails_reports_its_first_unwritten_offset_and_the_retry_lands_it_once() {
    let lake = Lake::new();
    let (dir, store, deps) = (&lake.dir, &lake.store, lake.deps());
    let event: KafkaEvent = serde_json::from_str(MSK).expect("MSK event");
    let spec = kafka_spec();
    // Partition 1's run dies writing its completion marker: its page files
    // are in the lake, its run and checkpoint are not.
    let run_1 = stream::stream_run_id("orders", "orders-1", "40");
    store.fail(&format!("_runs/orders/{run_1}/_SUCCESS"), 0, 1);
    let response = stream::handle_kafka(&spec, &event, deps).await.expect("handled");
    assert_eq!(
        response,
        serde_json::json!({ "batchItemFailures": [ { "itemIdentifier": { "partition": "orders-1", "offset": 40 } } ] })
    );
    // The event source mapping retries from offset 40 of partition 1 (and
    // partition 0's records come again in the same event): every record once.
    let retry = stream::handle_kafka(&spec, &event, deps).await.expect("handled");
    assert_eq!(retry, serde_json::json!({ "batchItemFailures": [] }));
    assert_eq!(column_values(dir.path(), "orders", "order_id"), ["o-1", "o-2", "o-3", "o-4"]);
}

#[tokio::test]
async fn a_batch_retried_with_other_bounds_after_its_run_completed_commits_nothing_twice() {
    let lake = Lake::new();
    let (dir, store, deps) = (&lake.dir, &lake.store, lake.deps());
    let event: KinesisEvent = serde_json::from_str(KINESIS).expect("Kinesis event");
    let spec = kinesis_spec();
    let records = stream::kinesis_records(&event).expect("records");
    // The run completes, then the checkpoint write dies (a crash before
    // the response): the mapping retries, bisected, with the first half.
    store.fail("_streams/clicks/clicks/shardId-000000000001.json", 1, 1);
    let outcome = stream::persist_stream_batch(&spec, &records, deps).await;
    assert_eq!(outcome.failures, [("shardId-000000000001".to_string(), records[0].sequence.clone())]);
    let half = stream::persist_stream_batch(&spec, &records[..2], deps).await;
    assert!(half.failures.is_empty(), "{half:?}");
    assert_eq!((half.records_written, half.records_skipped), (0, 2), "the first half is in the lake already");
    let rest = stream::persist_stream_batch(&spec, &records[2..], deps).await;
    assert_eq!((rest.records_written, rest.records_skipped), (0, 2));
    assert_eq!(column_values(dir.path(), "clicks", "id"), ["1", "2", "3"], "three JSON records (one gzip), one poison");
    let poison = quarantined(dir.path(), "clicks");
    assert_eq!(poison.len(), 1);
    assert!(poison[0]["reason"].as_str().expect("reason").contains("not JSON"), "{poison:?}");

    // A response for Lambda names the first failed sequence number.
    let response = stream::kinesis_response(&outcome);
    let body = serde_json::to_value(&response).expect("json");
    assert_eq!(body["batchItemFailures"][0]["itemIdentifier"], records[0].sequence.as_str());
}

#[tokio::test]
async fn a_batch_that_died_before_its_completion_and_comes_back_bisected_lands_once() {
    let lake = Lake::new();
    let (dir, store, deps) = (&lake.dir, &lake.store, lake.deps());
    let event: KinesisEvent = serde_json::from_str(KINESIS).expect("Kinesis event");
    let spec = kinesis_spec();
    let records = stream::kinesis_records(&event).expect("records");
    // The whole batch's files and receipt are written; its `_SUCCESS` is not.
    store.fail("/_SUCCESS", 0, 1);
    let outcome = stream::persist_stream_batch(&spec, &records, deps).await;
    assert_eq!(outcome.failures.len(), 1);
    // Bisected: the first half is the same run (same first record), and
    // must not complete with the whole batch's earlier receipt.
    for half in [&records[..2], &records[2..]] {
        let done = stream::persist_stream_batch(&spec, half, deps).await;
        assert!(done.failures.is_empty(), "{done:?}");
        assert_eq!(done.records_written, 2);
    }
    assert_eq!(column_values(dir.path(), "clicks", "id"), ["1", "2", "3"]);
}

#[tokio::test]
async fn the_lambda_entry_point_finds_the_spec_by_stream_and_answers_each_event_shape() {
    let lake = Lake::new();
    let (dir, store, deps) = (&lake.dir, &lake.store, lake.deps());
    let kinesis: Value = serde_json::from_str(KINESIS).expect("JSON");
    let msk: Value = serde_json::from_str(MSK).expect("JSON");
    assert_eq!(stream::stream_event_kind(&kinesis), Some("kinesis"));
    assert_eq!(stream::stream_event_kind(&msk), Some("kafka"));
    let sqs: Value = serde_json::from_str(include_str!("../../../../events/persist-batch.sqs.json")).expect("JSON");
    assert_eq!(stream::stream_event_kind(&sqs), None);
    // Without its spec in the lake the batch fails, naming where it belongs.
    let err = stream::handle_stream_event(kinesis.clone(), deps).await.expect_err("no spec");
    assert!(err.to_string().contains("_streams/_specs/clicks.json"), "{err}");
    for spec in [kinesis_spec(), kafka_spec()] {
        let key = stream::spec_key(spec.source_name());
        store.put(&key, Bytes::from(serde_json::to_vec(&spec).expect("JSON"))).await.expect("put");
    }
    let answer = stream::handle_stream_event(kinesis, deps).await.expect("handled");
    assert_eq!(answer, serde_json::json!({ "batchItemFailures": [] }));
    assert_eq!(column_values(dir.path(), "clicks", "id"), ["1", "2", "3"]);
    let answer = stream::handle_stream_event(msk, deps).await.expect("handled");
    assert_eq!(answer, serde_json::json!({ "batchItemFailures": [] }));
    assert_eq!(column_values(dir.path(), "orders", "order_id"), ["o-1", "o-2", "o-3", "o-4"]);
}

#[tokio::test]
async fn a_batch_given_up_leaves_no_row_behind_and_the_next_one_lands() {
    let lake = Lake::new();
    let (dir, store, deps) = (&lake.dir, &lake.store, lake.deps());
    let event: KinesisEvent = serde_json::from_str(KINESIS).expect("Kinesis event");
    let spec = kinesis_spec();
    let records = stream::kinesis_records(&event).expect("records");
    // The first two records' batch dies before its completion every time;
    // the mapping gives up on it (on-failure destination) and moves on.
    store.fail("/_SUCCESS", 0, 3);
    for _ in 0..3 {
        assert_eq!(stream::persist_stream_batch(&spec, &records[..2], deps).await.failures.len(), 1);
    }
    assert_eq!(column_values(dir.path(), "clicks", "id"), ["1", "2"], "its files are written, not complete");
    let next = stream::persist_stream_batch(&spec, &records[2..], deps).await;
    assert!(next.failures.is_empty(), "{next:?}");
    assert_eq!(column_values(dir.path(), "clicks", "id"), ["3"], "the given-up batch's rows are gone; the next landed");
}

#[tokio::test]
async fn the_run_id_is_derived_from_the_stream_position_only() {
    let a = stream::stream_run_id("clicks", "shardId-000000000001", "4959");
    assert_eq!(a, stream::stream_run_id("clicks", "shardId-000000000001", "4959"));
    assert_ne!(a, stream::stream_run_id("clicks", "shardId-000000000002", "4959"));
    assert_ne!(a, stream::stream_run_id("clicks", "shardId-000000000001", "4960"));
    assert!(stream::sequence_cmp("100", "99").is_gt());
    assert!(stream::sequence_cmp("49590338271490256608559692538361571095921575989136588898", "4959").is_gt());
}
