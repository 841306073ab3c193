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
    /// Commits Iceberg datasets to the local catalog in the lake (`None`:
    /// no Iceberg).
    tables: Option<tributary_iceberg::LocalCommitter>,
}

impl Lake {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = FailingStore::new(DirStore::new(dir.path()));
        Self { dir, store, config: PersistConfig::default(), broker: Broker::new(), tables: None }
    }

    /// A lake whose Iceberg datasets commit to its local catalog.
    fn iceberg() -> Self {
        let mut lake = Self::new();
        let root = lake.dir.path().canonicalize().expect("lake path");
        lake.tables =
            Some(tributary_iceberg::LocalCommitter::new(root.clone(), std::sync::Arc::new(DirStore::new(&root))));
        lake
    }

    /// The dataset's Iceberg table, as it is now.
    async fn table(&self, dataset: &str) -> iceberg::table::Table {
        let committer = self.tables.as_ref().expect("an Iceberg lake").committer().await.expect("catalog");
        committer.catalog().load_table(&committer.table_ident(dataset)).await.expect("table")
    }

    fn deps(&self) -> Deps<'_> {
        Deps {
            store: &self.store,
            queue: &self.broker,
            config: &self.config,
            run_events: None,
            catalog: None,
            tables: self.tables.as_ref().map(|t| t as &dyn tributary_core::tables::TableCommitter),
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
    // Partition 1's batch dies writing its page receipt: its page files
    // are in the lake, its receipt and checkpoint are not.
    let run_1 = stream::stream_run_id("orders", "orders-1", "40");
    store.fail(&tributary_core::keys::receipt_key("orders", &run_1, 0), 0, 1);
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
async fn a_batch_that_died_before_its_receipt_and_comes_back_bisected_lands_once() {
    let lake = Lake::new();
    let (dir, store, deps) = (&lake.dir, &lake.store, lake.deps());
    let event: KinesisEvent = serde_json::from_str(KINESIS).expect("Kinesis event");
    let spec = kinesis_spec();
    let records = stream::kinesis_records(&event).expect("records");
    // The whole batch's files are written; its page receipt is not.
    store.fail("/page-00000.json", 0, 1);
    let outcome = stream::persist_stream_batch(&spec, &records, deps).await;
    assert_eq!(outcome.failures.len(), 1);
    // Bisected: the first half is the same page of the same window (same
    // first record), rewritten; the second half the window's next page.
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
    // The first two records' batch dies before its receipt every time;
    // the mapping gives up on it (on-failure destination) and moves on.
    store.fail("/page-00000.json", 0, 3);
    for _ in 0..3 {
        assert_eq!(stream::persist_stream_batch(&spec, &records[..2], deps).await.failures.len(), 1);
    }
    assert_eq!(column_values(dir.path(), "clicks", "id"), ["1", "2"], "its files are written, not recorded");
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

/// `count` Kafka records of `orders-0` from offset `from`, one order each,
/// a second apart.
fn orders(from: u64, count: u64) -> Vec<stream::StreamRecord> {
    (from..from + count)
        .map(|offset| stream::StreamRecord {
            partition: "orders-0".into(),
            sequence: offset.to_string(),
            data: Some(
                serde_json::json!({
                    "order_id": format!("o-{offset:05}"),
                    "amount": offset * 3,
                    // Text that does not compress away, so a batch file is mostly rows.
                    "note": (0..12).map(|i| format!("{:08x}", (offset * 2_654_435_761 + i * 40_503) % 4_294_967_291)).collect::<String>(),
                })
                    .to_string()
                    .into_bytes(),
            ),
            arrival: chrono::DateTime::from_timestamp(1_764_583_200 + offset as i64, 0).expect("time"),
        })
        .collect()
}

/// A Kafka spec whose shard windows close at `window_bytes` of batch files.
fn windowed_spec(window_bytes: u64) -> StreamSpec {
    StreamSpec::from_yaml(&format!(
        "version: 1\npipeline: orders\nsource: {{ kind: kafka, topic: orders }}\nwindow: {{ bytes: {window_bytes} }}\ntarget: {{ dataset: orders }}\n"
    ))
    .expect("spec")
}

/// The dataset's files: (key, bytes, the window run's batch bytes).
async fn dataset_files(store: &dyn ObjectStore, dataset: &str) -> Vec<(String, u64, u64)> {
    let mut out = Vec::new();
    for key in store.list(&format!("{dataset}/")).await.expect("list") {
        let bytes = store.get(&key).await.expect("file").len() as u64;
        let name = key.rsplit('/').next().expect("name");
        let run = name.trim_start_matches("orders-").split(['.', '-']).take(2).collect::<Vec<_>>().join("-");
        let run_id = contracts::RunId::new(run).expect("run id");
        let receipts = tributary_core::ledger::run_receipts(store, "orders", &run_id).await.expect("receipts");
        out.push((key, bytes, receipts.iter().map(|r| r.data_bytes).sum()));
    }
    out
}

const BATCHES: u64 = 40;
const PER_BATCH: u64 = 25;
const WINDOW_BYTES: u64 = 32 << 10;

/// Every order once, and the small-file rule: every file is a window's
/// coalesced file holding at least the rule's bytes of batch files, but
/// the stream's last window (closed by the flush), which holds its last
/// record.
async fn assert_one_file_per_window(lake: &Lake) {
    let dir = lake.dir.path();
    let expected: Vec<String> = (0..BATCHES * PER_BATCH).map(|i| format!("o-{i:05}")).collect();
    assert_eq!(column_values(dir, "orders", "order_id"), expected, "every order once");
    let files = dataset_files(&lake.store, "orders").await;
    let small: Vec<_> = files.iter().filter(|(_, _, batch_bytes)| *batch_bytes < WINDOW_BYTES).collect();
    assert!(small.len() <= 1, "one small file at most, the last: {files:?}");
    for (key, ..) in small {
        let ids = test_support::lake::parquet_batches(lake.store.get(key).await.expect("file"));
        let last = format!("o-{:05}", BATCHES * PER_BATCH - 1);
        let holds_last = ids.iter().any(|batch| {
            let column = batch.column_by_name("order_id").expect("order_id");
            let column = column.as_string::<i32>();
            (0..column.len()).any(|i| column.value(i) == last)
        });
        assert!(holds_last, "the small file is the stream's tail: {key}");
    }
    assert!(files.len() < (BATCHES / 3) as usize, "fewer files than batches: {files:?}");
    eprintln!(
        "{} batches of {PER_BATCH} records -> {} files: {:?}",
        BATCHES,
        files.len(),
        files.iter().map(|(_, bytes, batch_bytes)| (bytes, batch_bytes)).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn many_small_batches_land_as_one_file_per_window_every_order_once() {
    let lake = Lake::new();
    let spec = windowed_spec(WINDOW_BYTES);
    for batch in 0..BATCHES {
        let records = orders(batch * PER_BATCH, PER_BATCH);
        let outcome = stream::persist_stream_batch(&spec, &records, lake.deps()).await;
        assert!(outcome.failures.is_empty(), "{outcome:?}");
        // A redelivery of each batch (a crash before the response) writes nothing.
        let again = stream::persist_stream_batch(&spec, &records, lake.deps()).await;
        assert_eq!((again.records_written, again.records_skipped), (0, PER_BATCH));
    }
    let closed = stream::close_windows(&spec, &["orders-0".to_string()], lake.deps()).await.expect("flush");
    assert!(closed <= 1, "the tail window, unless the last batch closed it: {closed}");
    assert_one_file_per_window(&lake).await;
    let checkpoint = stream::read_checkpoint(&lake.store, &stream::checkpoint_key("orders", "orders", "orders-0"))
        .await
        .expect("checkpoint");
    assert_eq!(checkpoint.through, Some((BATCHES * PER_BATCH - 1).to_string()));
    assert_eq!((checkpoint.window, checkpoint.pending), (None, None));
}

#[tokio::test]
async fn a_window_whose_close_died_between_the_coalesced_file_and_the_deletes_is_finished_by_the_next_batch() {
    let lake = Lake::new();
    let spec = windowed_spec(WINDOW_BYTES);
    // Killed at the first delete of a batch file in the dataset folder: the
    // coalesced file is in place beside the files it replaces.
    let crashing = test_support::crash::CrashingStore::new(&lake.store, 0)
        .counting(|call| call.method == "delete" && call.key.starts_with("orders/"));
    let crash_deps = Deps { store: &crashing, ..lake.deps() };
    let mut next = 0;
    while !crashing.calls().iter().any(|call| call.method == "delete" && call.key.starts_with("orders/")) {
        let outcome = stream::persist_stream_batch(&spec, &orders(next * PER_BATCH, PER_BATCH), crash_deps).await;
        assert!(outcome.failures.is_empty(), "the batch landed; only its window's close died: {outcome:?}");
        next += 1;
    }
    // The window is closing: its replacement record written, no `_SUCCESS`.
    let key = stream::checkpoint_key("orders", "orders", "orders-0");
    let checkpoint = stream::read_checkpoint(&lake.store, &key).await.expect("checkpoint");
    let window = checkpoint.window.expect("the window is still open");
    assert!(window.closing, "{window:?}");
    let run = format!("_runs/orders/{}/", window.run_id);
    let ledger = lake.store.list(&run).await.expect("ledger");
    assert!(ledger.iter().any(|k| k.ends_with("replacement.json")) && !ledger.iter().any(|k| k.ends_with("_SUCCESS")));
    // What a folder reader sees at this instant (the documented limit of a
    // Hive Parquet dataset, docs/streams.md): the closing window's orders
    // twice, in its coalesced file and its batch files; every other once.
    let seen = column_values(lake.dir.path(), "orders", "order_id");
    let twice = seen.windows(2).filter(|pair| pair[0] == pair[1]).count() as u64;
    assert_eq!(twice, window.records, "only the closing window's {} orders are seen twice", window.records);
    // The next batch (on a live store) finishes the close first.
    for batch in next..BATCHES {
        let outcome = stream::persist_stream_batch(&spec, &orders(batch * PER_BATCH, PER_BATCH), lake.deps()).await;
        assert!(outcome.failures.is_empty(), "{outcome:?}");
    }
    assert!(lake.store.list(&run).await.expect("ledger").iter().any(|k| k.ends_with("_SUCCESS")));
    stream::close_windows(&spec, &["orders-0".to_string()], lake.deps()).await.expect("flush");
    assert_one_file_per_window(&lake).await;
}

#[tokio::test]
async fn a_window_closes_only_after_its_pending_batch_lands_or_is_given_up() {
    let lake = Lake::new();
    let spec = windowed_spec(1024);
    // The batch dies before its receipt: the flush leaves the window open
    // (the batch's page belongs to it), the retry lands it and closes it.
    lake.store.fail("/page-00000.json", 0, 1);
    let records = orders(0, PER_BATCH);
    assert_eq!(stream::persist_stream_batch(&spec, &records, lake.deps()).await.failures.len(), 1);
    let partitions = ["orders-0".to_string()];
    assert_eq!(stream::close_windows(&spec, &partitions, lake.deps()).await.expect("flush"), 0);
    let done = stream::persist_stream_batch(&spec, &records, lake.deps()).await;
    assert!(done.failures.is_empty(), "{done:?}");
    let files = dataset_files(&lake.store, "orders").await;
    assert_eq!(files.len(), 1, "{files:?}");
    let expected: Vec<String> = (0..PER_BATCH).map(|i| format!("o-{i:05}")).collect();
    assert_eq!(column_values(lake.dir.path(), "orders", "order_id"), expected);
}

#[test]
fn the_window_limit_is_the_coalescer_bin() {
    assert_eq!(contracts::stream::MAX_WINDOW_BYTES, persist::coalesce::COALESCE_BELOW_BYTES);
}

#[tokio::test]
async fn a_window_closes_on_stream_time_and_secs_zero_makes_a_window_per_batch() {
    // Records a second apart in batches of 5: with `secs: 12` a window
    // closes once its records span 12 s (the third batch: 0-14 s).
    for (secs, files) in [(12, 4), (0, 10)] {
        let lake = Lake::new();
        let spec = StreamSpec::from_yaml(&format!(
            "version: 1\npipeline: orders\nsource: {{ kind: kafka, topic: orders }}\nwindow: {{ secs: {secs} }}\ntarget: {{ dataset: orders }}\n"
        ))
        .expect("spec");
        for batch in 0..10 {
            let outcome = stream::persist_stream_batch(&spec, &orders(batch * 5, 5), lake.deps()).await;
            assert!(outcome.failures.is_empty(), "{outcome:?}");
        }
        stream::close_windows(&spec, &["orders-0".to_string()], lake.deps()).await.expect("flush");
        let found = dataset_files(&lake.store, "orders").await;
        assert_eq!(found.len(), files, "secs {secs}: {found:?}");
        let expected: Vec<String> = (0..50).map(|i| format!("o-{i:05}")).collect();
        assert_eq!(column_values(lake.dir.path(), "orders", "order_id"), expected);
    }
}

/// Writes `records`' batch into the shard's checkpoint as pending, started
/// `age_secs` ago by an invocation that has not answered (one running
/// beside this one, or one that crashed).
async fn pending_in_flight(lake: &Lake, spec: &StreamSpec, records: &[stream::StreamRecord], age_secs: i64) {
    let key = stream::checkpoint_key(&spec.pipeline, spec.source_name(), "orders-0");
    let (first, last) = (records.first().expect("records"), records.last().expect("records"));
    let checkpoint = Checkpoint {
        pending: Some(stream::PendingBatch {
            run_id: stream::stream_run_id("orders", "orders-0", &first.sequence),
            page: 0,
            first: first.sequence.clone(),
            last: last.sequence.clone(),
            records: records.len() as u64,
            last_arrival: last.arrival,
            newest_arrival: Some(last.arrival),
            started_at: Some(chrono::Utc::now() - chrono::Duration::seconds(age_secs)),
            failed_at: None,
        }),
        ..Checkpoint::default()
    };
    lake.store.put(&key, Bytes::from(serde_json::to_vec(&checkpoint).expect("json"))).await.expect("put");
}

#[tokio::test]
async fn a_second_batch_of_a_shard_while_one_is_in_flight_is_refused_and_lands_once_after_it() {
    let lake = Lake::new();
    let spec = windowed_spec(1024);
    let (first_batch, second_batch) = (orders(0, 10), orders(10, 10));
    pending_in_flight(&lake, &spec, &first_batch, 5).await;
    let logs = test_support::logs::LogBuffer::new();
    let refused = {
        let _guard = logs.capture();
        stream::persist_stream_batch(&spec, &second_batch, lake.deps()).await
    };
    // Reported at its first record, so the mapping retries it whole.
    assert_eq!(refused.failures, [("orders-0".to_string(), "10".to_string())]);
    assert_eq!(refused.records_written, 0);
    assert!(!lake.dir.path().join("orders").exists(), "nothing written");
    let text = logs.text();
    for part in ["orders-0", "batch 10..19 refused", "batch 0..9 of the same shard", "ParallelizationFactor"] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }
    // The in-flight batch was not marked answered by the refused one.
    let key = stream::checkpoint_key("orders", "orders", "orders-0");
    let checkpoint = stream::read_checkpoint(&lake.store, &key).await.expect("checkpoint");
    assert_eq!(checkpoint.pending.as_ref().map(|p| (p.first.as_str(), p.failed_at)), Some(("0", None)));

    // A retry of the in-flight batch itself (same first record: a crash
    // and redelivery) proceeds; then the refused one's retry lands.
    for batch in [&first_batch, &second_batch] {
        let done = stream::persist_stream_batch(&spec, batch, lake.deps()).await;
        assert!(done.failures.is_empty(), "{done:?}");
        assert_eq!(done.records_written, 10);
    }
    stream::close_windows(&spec, &["orders-0".to_string()], lake.deps()).await.expect("flush");
    let expected: Vec<String> = (0..20).map(|i| format!("o-{i:05}")).collect();
    let mut found = column_values(lake.dir.path(), "orders", "order_id");
    found.sort();
    assert_eq!(found, expected, "every order once");
}

#[tokio::test]
async fn a_pending_batch_older_than_the_longest_invocation_is_given_up_not_in_flight() {
    let lake = Lake::new();
    let spec = windowed_spec(1024);
    pending_in_flight(&lake, &spec, &orders(0, 10), stream::IN_FLIGHT_SECS + 1).await;
    let next = stream::persist_stream_batch(&spec, &orders(10, 10), lake.deps()).await;
    assert!(next.failures.is_empty(), "{next:?}");
    assert_eq!(next.records_written, 10);
    stream::close_windows(&spec, &["orders-0".to_string()], lake.deps()).await.expect("flush");
    let expected: Vec<String> = (10..20).map(|i| format!("o-{i:05}")).collect();
    assert_eq!(column_values(lake.dir.path(), "orders", "order_id"), expected);
}

fn iceberg_spec(window_batches: u32) -> StreamSpec {
    StreamSpec::from_yaml(&format!(
        "version: 1\npipeline: orders\nsource: {{ kind: kafka, topic: orders }}\nwindow: {{ batches: {window_batches} }}\ntarget: {{ dataset: orders, table_format: iceberg }}\n"
    ))
    .expect("spec")
}

/// The table's rows as (order id, run id), read with iceberg-rust's reader.
async fn table_rows(lake: &Lake) -> Vec<(String, String)> {
    let table = lake.table("orders").await;
    let mut rows = Vec::new();
    for batch in test_support::iceberg::scan(&table, &["order_id", "_tributary_run_id"]).await {
        let ids = batch.column_by_name("order_id").expect("order_id").as_string::<i32>().clone();
        let runs = batch.column_by_name("_tributary_run_id").expect("run id").as_string::<i32>().clone();
        rows.extend((0..batch.num_rows()).map(|i| (ids.value(i).to_string(), runs.value(i).to_string())));
    }
    rows
}

/// Every order `0..count` is in the table exactly once.
async fn assert_each_order_once(lake: &Lake, count: u64, when: &str) {
    let mut found: Vec<String> = table_rows(lake).await.into_iter().map(|(id, _)| id).collect();
    found.sort();
    let expected: Vec<String> = (0..count).map(|i| format!("o-{i:05}")).collect();
    assert_eq!(found, expected, "{when}: every order exactly once");
}

/// The table's snapshots, oldest first: (operation, summary properties).
async fn snapshots(lake: &Lake) -> Vec<(iceberg::spec::Operation, std::collections::HashMap<String, String>)> {
    let table = lake.table("orders").await;
    let mut snapshots: Vec<_> = table.metadata().snapshots().cloned().collect();
    snapshots.sort_by_key(|s| s.sequence_number());
    snapshots.iter().map(|s| (s.summary().operation.clone(), s.summary().additional_properties.clone())).collect()
}

#[tokio::test]
async fn a_replay_through_the_handler_commits_one_overwrite_per_window_and_every_order_is_in_the_table_once_throughout()
{
    let lake = Lake::iceberg();
    // The original ingestion: 12 batches of 10, a window every 2 batches:
    // 6 windows of 20 orders, 6 append snapshots.
    let original = iceberg_spec(2);
    for batch in 0..12 {
        let done = stream::persist_stream_batch(&original, &orders(batch * 10, 10), lake.deps()).await;
        assert!(done.failures.is_empty(), "{done:?}");
    }
    assert_each_order_once(&lake, 120, "after the original ingestion").await;
    assert_eq!(snapshots(&lake).await.len(), 6);

    // The replay begins (the old mapping disabled); a new mapping reads
    // from TRIM_HORIZON with other bounds: batches of 15, a window every 3.
    let replay = persist::stream_replay::begin(&original, &lake.store, chrono::Utc::now())
        .await
        .expect("begin")
        .expect("an Iceberg replay is recorded");
    assert_eq!(replay.replaced.len(), 6, "{replay:?}");
    assert_eq!(replay.through.get("orders-0").map(String::as_str), Some("119"));
    // The forgotten windows are recorded as superseded, so `tributary
    // replay` leaves their raw pages as history.
    let superseded = persist::stream_replay::superseded_runs(&original.pipeline, &lake.store).await.expect("record");
    assert_eq!(superseded, replay.replaced);
    let spec = iceberg_spec(3);
    let batch = |i: u64| orders(i * 15, 15);
    for i in 0..5 {
        let done = stream::persist_stream_batch(&spec, &batch(i), lake.deps()).await;
        assert!(done.failures.is_empty(), "batch {i}: {done:?}");
        assert_each_order_once(&lake, 120, &format!("after replay batch {i}")).await;
    }
    // One replayed window closed so far, where an original window ends:
    // 0-39, before order 40 (batch 2); 40-79 waits for order 80.
    assert_eq!(snapshots(&lake).await.len(), 7);
    // A batch delivered again after it landed writes nothing and commits nothing.
    let again = stream::persist_stream_batch(&spec, &batch(2), lake.deps()).await;
    assert_eq!((again.records_written, again.records_skipped, again.failures.len()), (0, 15, 0));
    assert_eq!(snapshots(&lake).await.len(), 7);

    // The next batch closes the window 40-79 before its order 80; the
    // close commits, then dies before the ledger's `_SUCCESS` and the
    // checkpoint: the batch fails at order 80, the table already holds
    // the window once.
    lake.store.fail("/_SUCCESS", 0, 1);
    let crashed = stream::persist_stream_batch(&spec, &batch(5), lake.deps()).await;
    assert_eq!(crashed.failures, [("orders-0".to_string(), "80".to_string())]);
    assert_eq!(snapshots(&lake).await.len(), 8);
    assert_each_order_once(&lake, 120, "after a close that died after its commit").await;
    // The mapping retries from order 80: the close is finished without a
    // second snapshot, and the replay goes on.
    let retried = stream::persist_stream_batch(&spec, &orders(80, 10), lake.deps()).await;
    assert!(retried.failures.is_empty(), "{retried:?}");
    assert_eq!(snapshots(&lake).await.len(), 8, "the redone close committed nothing twice");
    for i in 6..8 {
        let done = stream::persist_stream_batch(&spec, &batch(i), lake.deps()).await;
        assert!(done.failures.is_empty(), "batch {i}: {done:?}");
        assert_each_order_once(&lake, 120, &format!("after replay batch {i}")).await;
    }
    // The last window (80-119) closed after the shard's last original record.
    let all = snapshots(&lake).await;
    assert_eq!(all.len(), 9, "6 original windows, 3 replayed ones");
    for (operation, summary) in &all[6..] {
        assert_eq!(*operation, iceberg::spec::Operation::Overwrite, "{summary:?}");
        assert_eq!(summary.get("tributary.replay").map(String::as_str), Some("true"));
        assert_eq!(summary.get("tributary.rerun"), Some(&replay.token));
    }
    // Every row is now a replayed window's: 0-39, 40-79, 80-119.
    let mut runs: Vec<String> = table_rows(&lake).await.into_iter().map(|(_, run)| run).collect();
    runs.sort();
    runs.dedup();
    let mut windows: Vec<String> =
        ["0", "40", "80"].iter().map(|first| stream::stream_run_id("orders", "orders-0", first).to_string()).collect();
    windows.sort();
    assert_eq!(runs, windows);
    // Records after the replay began are plain windows (nothing to
    // replace): the replay's mapping is the live one from here on.
    for i in 8..11 {
        let live = stream::persist_stream_batch(&spec, &batch(i), lake.deps()).await;
        assert!(live.failures.is_empty(), "{live:?}");
    }
    assert_each_order_once(&lake, 165, "after records newer than the replay").await;
    let last = snapshots(&lake).await.pop().expect("snapshot");
    assert_eq!(last.0, iceberg::spec::Operation::Append, "{last:?}");
}

#[tokio::test]
async fn a_replay_is_refused_while_a_batch_of_the_pipeline_is_in_flight() {
    let lake = Lake::new();
    let spec = iceberg_spec(2);
    pending_in_flight(&lake, &spec, &orders(0, 10), 5).await;
    let err = persist::stream_replay::begin(&spec, &lake.store, chrono::Utc::now()).await.expect_err("in flight");
    let text = err.to_string();
    assert!(text.contains("batch 0..9 of shard orders-0 is in flight") && text.contains("disable it"), "{text}");
    assert!(lake.store.list("_streams/orders/orders/").await.expect("list").len() == 1, "nothing forgotten");
}

/// A record the converter quarantines (valid JSON, not an object) is named by its stream position, as a poison record is:
/// `partition` and `sequence` beside it and in its reason, its text as sent.
#[tokio::test]
async fn a_record_the_converter_quarantines_is_named_by_its_partition_and_offset() {
    let lake = Lake::new();
    let spec = kafka_spec();
    let mut records = orders(40, 4);
    records[1].data = Some(b"\"just text\"".to_vec());
    records[2].data = Some(b"42".to_vec());
    let outcome = stream::persist_stream_batch(&spec, &records, lake.deps()).await;
    assert!(outcome.failures.is_empty(), "{outcome:?}");
    let lines = quarantined(lake.dir.path(), "orders");
    let mut named: Vec<(String, String, String)> = lines
        .iter()
        .map(|l| {
            let field = |name: &str| l[name].as_str().unwrap_or_default().to_string();
            (field("partition"), field("sequence"), field("reason"))
        })
        .collect();
    named.sort();
    assert_eq!(named.len(), 2, "{lines:?}");
    for ((partition, sequence, reason), offset) in named.iter().zip(["41", "42"]) {
        assert_eq!((partition.as_str(), sequence.as_str()), ("orders-0", offset), "{lines:?}");
        assert!(reason.starts_with(&format!("record {offset} (orders-0) is a")), "{reason}");
    }
    let kept: Vec<String> = lines.iter().map(|l| l["record"].to_string()).collect();
    assert!(kept.contains(&"\"just text\"".to_string()), "the record as sent: {kept:?}");
}

/// With `records.records_pointer`, a stream record gives the rows of its
/// array: the outcome counts the rows persisted apart from the records
/// taken (the poller's line had said "1 records written" for 3 rows).
#[tokio::test]
async fn rows_of_records_pointer_arrays_are_counted_as_rows() {
    let lake = Lake::new();
    let spec = StreamSpec::from_yaml(
        "version: 1\npipeline: ev\nsource: { kind: kafka, topic: ev }\nrecords: { records_pointer: /events }\n\
         target: { dataset: ev }\n",
    )
    .expect("spec");
    let mut records = orders(0, 3);
    records[0].data = Some(br#"{"events": [{"id": 1}, {"id": 2}]}"#.to_vec());
    records[1].data = Some(br#"{"events": [{"id": 3}]}"#.to_vec());
    records[2].data = Some(br#"{"other": []}"#.to_vec());
    let outcome = stream::persist_stream_batch(&spec, &records, lake.deps()).await;
    assert!(outcome.failures.is_empty(), "{outcome:?}");
    assert_eq!(
        (outcome.records_written, outcome.rows_persisted, outcome.records_quarantined),
        (3, 3, 1),
        "3 records taken, 3 rows persisted, 1 record without the array quarantined"
    );
}

/// A first record with no usable timestamp (the epoch) no longer dates its
/// window: the window's run date, and so the `dt=` folder of the good
/// records after it, is the first real arrival's.
#[tokio::test]
async fn a_window_is_dated_by_its_first_record_with_a_real_arrival() {
    let lake = Lake::new();
    let spec = kafka_spec();
    let mut records = orders(0, 3);
    records[0].arrival = chrono::DateTime::UNIX_EPOCH;
    let outcome = stream::persist_stream_batch(&spec, &records, lake.deps()).await;
    assert!(outcome.failures.is_empty(), "{outcome:?}");
    let folders: std::collections::BTreeSet<String> = lake
        .store
        .list("orders/")
        .await
        .expect("list")
        .iter()
        .filter_map(|key| key.split('/').nth(1).map(str::to_string))
        .collect();
    // `orders` arrive at 1_764_583_200 + offset seconds: 2025-12-01.
    assert_eq!(folders.into_iter().collect::<Vec<_>>(), ["dt=2025-12-01"]);
}

/// `count` orders of a topic recreated a day after [`orders`]' one: the
/// same offsets from `from`, other orders, arriving a day later.
fn orders_of_a_recreated_topic(from: u64, count: u64) -> Vec<stream::StreamRecord> {
    let mut records = orders(from, count);
    for record in &mut records {
        let offset: u64 = record.sequence.parse().expect("offset");
        record.data =
            Some(serde_json::json!({"order_id": format!("n-{offset:05}"), "amount": 1}).to_string().into_bytes());
        record.arrival += chrono::Duration::days(1);
    }
    records
}

#[tokio::test]
async fn records_of_a_recreated_topic_at_old_offsets_land_and_redeliveries_still_do_not() {
    let lake = Lake::new();
    // A window per batch: windows start at every batch's first offset.
    let spec = StreamSpec::from_yaml(
        "version: 1\npipeline: orders\nsource: { kind: kafka, topic: orders }\nwindow: { batches: 1 }\ntarget: { dataset: orders }\n",
    )
    .expect("spec");
    let old = orders(0, 10);
    for batch in old.chunks(5) {
        let outcome = stream::persist_stream_batch(&spec, batch, lake.deps()).await;
        assert!(outcome.failures.is_empty(), "{outcome:?}");
    }
    // A redelivery of the old topic's records: at or below the checkpoint,
    // arrived no later than what the lake holds.
    let again = stream::persist_stream_batch(&spec, &old[3..8], lake.deps()).await;
    assert_eq!((again.records_written, again.records_skipped), (0, 5), "{again:?}");

    // The topic is recreated: offsets start at 0 again, a day later.
    let new = orders_of_a_recreated_topic(0, 7);
    for (index, batch) in new.chunks(4).enumerate() {
        let outcome = stream::persist_stream_batch(&spec, batch, lake.deps()).await;
        assert!(outcome.failures.is_empty(), "{outcome:?}");
        assert_eq!((outcome.records_written, outcome.records_skipped), (batch.len() as u64, 0), "{outcome:?}");
        // Said once, by the batch that went back, for the person running
        // the stream (a trial: only a warning log line said it).
        let said = outcome.notes.iter().any(|note| note.contains("orders-0: its positions went back"));
        assert_eq!(said, index == 0, "{outcome:?}");
    }
    assert!(again.notes.is_empty(), "{again:?}");
    // ... and its redelivery is skipped like any other.
    let again = stream::persist_stream_batch(&spec, &new[..4], lake.deps()).await;
    assert_eq!((again.records_written, again.records_skipped), (0, 4), "{again:?}");
    stream::close_windows(&spec, &["orders-0".to_string()], lake.deps()).await.expect("flush");

    let mut expected: Vec<String> = (0..10).map(|i| format!("o-{i:05}")).collect();
    expected.extend((0..7).map(|i| format!("n-{i:05}")));
    expected.sort();
    // The old topic's windows started at offsets 0 and 5, and the new
    // topic's at 0 and 4: without the epoch, the first new window took
    // the run id of the first old one, and its files.
    assert_eq!(column_values(lake.dir.path(), "orders", "order_id"), expected, "every order of both topics once");
    let checkpoint = stream::read_checkpoint(&lake.store, &stream::checkpoint_key("orders", "orders", "orders-0"))
        .await
        .expect("checkpoint");
    assert_eq!(checkpoint.through.as_deref(), Some("6"));
    assert_eq!(checkpoint.newest_arrival, Some(new[6].arrival));
    assert!(checkpoint.epoch.is_some());
}
