//! The demo's stream pipeline (`tributary demo`): a Kafka topic of orders,
//! read from a file of records in the MSK event's record shape (no broker
//! runs here), landed by the local poller ([`crate::stream`]) into its own
//! dataset, `demo_orders`, beside the REST demo's.
//!
//! The topic is generated once per lake, at `<lake>/_demo/demo_orders.jsonl`
//! (a topic's history does not change), with its spec beside it, so the
//! user can run it again with the stream commands the demo prints. It
//! holds [`RECORDS`] orders over [`PARTITIONS`] partitions: clean ones, a
//! few messy ones (an amount as text, a null, a nested object that first
//! appears late: Persist's variant columns and schema evolution) and one
//! poison record (not JSON), which is quarantined with its reason. Run
//! again, every partition is past its checkpoint: nothing lands twice.

use std::path::{Path, PathBuf};

use base64::Engine;
use chrono::{DateTime, Utc};
use contracts::TableFormat;
use contracts::stream::StreamSpec;
use serde_json::json;
use tributary_core::ports::{ObjectStore, PortError};

use crate::stream::{LocalSource, PollOptions, PollReport, StreamRunError};

/// The demo stream's pipeline, Kafka topic and dataset.
pub const PIPELINE: &str = "demo_orders";
/// Orders in the demo topic (poison included).
pub const RECORDS: u32 = 60;
/// Partitions of the demo topic (order `i` is in partition `i % 3`).
pub const PARTITIONS: u32 = 3;
/// The order whose record is poison: its value is cut short (not JSON).
pub const POISON_ORDER: u32 = 41;
/// Records per batch (the spec's `batching.batch_size`): two batches per
/// partition, so the checkpoint moves twice.
pub const BATCH_SIZE: u32 = 10;
/// Folder of the lake holding the demo topic and its spec.
pub const DEMO_FOLDER: &str = "_demo";

/// The demo stream's spec: its own dataset, Parquet or an Iceberg table.
pub fn spec_yaml(iceberg: bool) -> String {
    let format = if iceberg { ", table_format: iceberg" } else { "" };
    format!(
        "# The demo's stream pipeline (docs/streams.md): Kafka topic {PIPELINE}, read locally from
# {PIPELINE}.jsonl beside this file (JSON lines in the MSK event's record shape).
version: 1
pipeline: {PIPELINE}
description: Orders from a Kafka topic (a file of records here), landed once per record.
source: {{ kind: kafka, topic: {PIPELINE}, starting_position: TRIM_HORIZON }}
batching: {{ batch_size: {BATCH_SIZE} }}
target: {{ dataset: {PIPELINE}{format} }}
"
    )
}

/// The demo topic as JSON lines, the newest record arriving at `newest`
/// and the others a second apart before it. Order `i` is at offset `i / 3`
/// of partition `i % 3`; its value is the order's JSON, base64.
pub fn topic_lines(newest: DateTime<Utc>) -> String {
    let engine = base64::engine::general_purpose::STANDARD;
    let mut out = String::new();
    for i in 0..RECORDS {
        let value = order(i);
        let arrival = newest - chrono::Duration::seconds(i64::from(RECORDS - 1 - i));
        let record = json!({
            "topic": PIPELINE,
            "partition": i % PARTITIONS,
            "offset": i / PARTITIONS,
            "timestamp": arrival.timestamp_millis(),
            "value": engine.encode(value),
        });
        out.push_str(&record.to_string());
        out.push('\n');
    }
    out
}

/// The value of order `i`: mostly clean, some messy, one poison.
fn order(i: u32) -> Vec<u8> {
    let id = format!("o-{:04}", i + 1);
    let customer = i * 7 % 230 + 1;
    let cents = 500 + i * 137 % 9_000;
    let amount = json!(f64::from(cents) / 100.0);
    let value = match i {
        POISON_ORDER => return format!(r#"{{"order_id": "{id}", "customer_id": {customer}, "amount": "#).into_bytes(),
        // Messy: the amount as text, once; a null; a nested object that
        // first appears late in the topic.
        7 => json!({ "order_id": id, "customer_id": customer, "amount": format!("{:.2}", f64::from(cents) / 100.0) }),
        19 => json!({ "order_id": id, "customer_id": customer, "amount": null, "note": "amount to follow" }),
        i if i >= 50 => {
            json!({ "order_id": id, "customer_id": customer, "amount": amount, "shipping": { "method": "express", "days": 1 } })
        }
        _ => json!({ "order_id": id, "customer_id": customer, "amount": amount }),
    };
    value.to_string().into_bytes()
}

/// What the demo's stream pipeline did.
#[derive(Clone, Debug)]
pub struct StreamDemo {
    /// The spec file written for the user to run again.
    pub spec_path: PathBuf,
    /// The topic's records file.
    pub records_path: PathBuf,
    /// The poll's report, per partition.
    pub report: PollReport,
    /// Each partition's checkpoint after the poll: (partition, through,
    /// records taken in all runs: rows and quarantined).
    pub checkpoints: Vec<(String, Option<String>, u64)>,
    /// Every quarantined record of the pipeline in the lake, with its
    /// reason, as `reason (key)`.
    pub quarantined: Vec<String>,
    /// The lake directory.
    pub lake: PathBuf,
    /// The dataset read back after the poll, through the lake's SQL engine
    /// (what `tributary query` runs): rows, distinct `order_id`s.
    pub table: (u64, u64),
    /// The poll's time.
    pub elapsed: std::time::Duration,
}

impl StreamDemo {
    /// Records landed as rows by this poll (written less quarantined).
    pub fn rows_landed(&self) -> u64 {
        let quarantined = self.report.records_quarantined();
        self.report.records_written() - quarantined
    }
}

/// Why the demo stream did not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoStreamError {
    /// The demo's own files could not be written in the lake.
    #[error("writing the demo stream's {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The generated spec is invalid (a bug: it names the field).
    #[error("the demo stream's spec: {0}")]
    Spec(#[from] contracts::spec::SpecError),
    /// The run failed (the records file, the lake).
    #[error(transparent)]
    Run(#[from] StreamRunError),
    /// The lake could not be read back.
    #[error(transparent)]
    Port(#[from] PortError),
    /// The lake keeps the demo's dataset in the other table format (an
    /// earlier demo with or without `--table-format iceberg`).
    #[error(
        "target.table_format is {wanted}, but dataset {dataset} is kept as {kept} in this lake; a dataset keeps one \
         table format: run the demo with --table-format {kept}, or with a new --lake"
    )]
    Format {
        /// The dataset.
        dataset: String,
        /// The format the demo was asked for.
        wanted: &'static str,
        /// The dataset's format in the lake.
        kept: &'static str,
    },
    /// The dataset could not be read back through the lake's SQL engine.
    #[error("reading {PIPELINE} back: {0}")]
    Query(String),
}

/// Writes the demo topic (once per lake) and its spec under
/// `<lake>/_demo/`, polls every partition to its tip into the lake, and
/// reads back the checkpoints and quarantined records.
///
/// # Errors
/// [`DemoStreamError`]: the demo files cannot be written; the records file
/// is not in the MSK record shape (the file and line are named: a user may
/// have edited it); the lake fails.
pub async fn run(lake: &Path, iceberg: bool) -> Result<StreamDemo, DemoStreamError> {
    let folder = lake.join(DEMO_FOLDER);
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text).map_err(|source| DemoStreamError::Write { path: path.to_path_buf(), source })
    };
    std::fs::create_dir_all(&folder).map_err(|source| DemoStreamError::Write { path: folder.clone(), source })?;
    let spec_path = folder.join(format!("{PIPELINE}.yaml"));
    let records_path = folder.join(format!("{PIPELINE}.jsonl"));
    let text = spec_yaml(iceberg);
    let spec = StreamSpec::from_yaml(&text)?;
    write(&spec_path, &text)?;
    if !records_path.exists() {
        // Whole or not at all: a demo stopped mid-write must not leave a
        // topic cut short that every later demo reads.
        let partial = folder.join(format!("{PIPELINE}.jsonl.partial"));
        write(&partial, &topic_lines(Utc::now()))?;
        std::fs::rename(&partial, &records_path)
            .map_err(|source| DemoStreamError::Write { path: records_path.clone(), source })?;
    }
    let store = adapters::local::DirStore::new(lake);
    refuse_other_format(&store, &spec.target.dataset, spec.target.table_format).await?;
    let source = LocalSource::File(records_path.clone());
    let started = std::time::Instant::now();
    let report = crate::stream::run_local(&spec, lake, &source, PollOptions::default(), false).await?;
    let elapsed = started.elapsed();
    let mut checkpoints = Vec::new();
    for partition in report.shards.keys() {
        let key = persist::stream::checkpoint_key(PIPELINE, PIPELINE, partition);
        let checkpoint = persist::stream::read_checkpoint(&store, &key)
            .await
            .map_err(|err| PortError::permanent_msg("read checkpoint", &key, err.to_string()))?;
        checkpoints.push((partition.clone(), checkpoint.through, checkpoint.records));
    }
    let quarantined = quarantined(&store, &spec).await?;
    let table = table_count(lake).await?;
    Ok(StreamDemo {
        spec_path,
        records_path,
        report,
        checkpoints,
        quarantined,
        lake: lake.to_path_buf(),
        table,
        elapsed,
    })
}

/// The demo dataset's rows and distinct `order_id`s, through the lake's
/// SQL engine (a Parquet dataset's folder or an Iceberg table's current
/// snapshot).
///
/// # Errors
/// [`DemoStreamError::Query`] with the engine's reason; [`PortError`].
pub async fn table_count(lake: &Path) -> Result<(u64, u64), DemoStreamError> {
    use tributary_core::ports::{Query, QueryEngine, QueryState};
    let root = lake.canonicalize().map_err(|err| PortError::permanent("open lake", lake.display().to_string(), err))?;
    let engine = lakequery::LakeEngine::new(root);
    let sql = format!("SELECT count(*) AS n, count(DISTINCT order_id) AS orders FROM {PIPELINE}");
    let query = Query { sql, parameters: vec![], database: "lake".into(), workgroup: None, output_location: None };
    let id = engine.start(&query).await?;
    match engine.wait(&id, tokio::time::Instant::now() + std::time::Duration::from_secs(60)).await? {
        QueryState::Succeeded => {}
        QueryState::Failed { reason, .. } => return Err(DemoStreamError::Query(reason)),
        other => return Err(DemoStreamError::Query(format!("did not finish: {other:?}"))),
    }
    let page = engine.page(&id, None).await?;
    let number = |name: &str| page.rows.first().and_then(|row| row.get(name)).and_then(serde_json::Value::as_u64);
    match (number("n"), number("orders")) {
        (Some(n), Some(orders)) => Ok((n, orders)),
        _ => Err(DemoStreamError::Query(format!("unexpected answer {:?}", page.rows))),
    }
}

/// Refuses a lake that keeps one of the demo's datasets (`datasets`, and
/// the stream's, [`PIPELINE`]) in the other table format than `iceberg`
/// asks, before anything runs: the REST pipelines' pages would each be
/// dead-lettered by Persist (a first trial left 237 dead letters), and the
/// stream's poll would land nothing new past the checkpoints.
///
/// # Errors
/// [`DemoStreamError::Format`] naming the first such dataset;
/// [`DemoStreamError::Port`] when a table schema cannot be read.
pub async fn refuse_other_formats(lake: &Path, datasets: &[&str], iceberg: bool) -> Result<(), DemoStreamError> {
    let store = adapters::local::DirStore::new(lake);
    let wanted = if iceberg { TableFormat::Iceberg } else { TableFormat::default() };
    for dataset in datasets.iter().copied().chain([PIPELINE]) {
        refuse_other_format(&store, dataset, wanted).await?;
    }
    Ok(())
}

/// [`refuse_other_formats`] for one dataset.
async fn refuse_other_format(
    store: &dyn ObjectStore,
    dataset: &str,
    wanted: TableFormat,
) -> Result<(), DemoStreamError> {
    let key = tributary_core::keys::schema_key(dataset);
    let schema = persist::read_schema(store, &key)
        .await
        .map_err(|err| PortError::permanent_msg("read schema", &key, err.to_string()))?;
    let name = |format: TableFormat| match format {
        TableFormat::Iceberg => "iceberg",
        _ => "parquet",
    };
    match schema.and_then(|(table, _)| table.table_format) {
        Some(kept) if kept != wanted => {
            Err(DemoStreamError::Format { dataset: dataset.to_string(), wanted: name(wanted), kept: name(kept) })
        }
        _ => Ok(()),
    }
}

/// The pipeline's quarantined records in the lake
/// (`quarantine/<dataset>/dt=<date>/<pipeline>-…jsonl`, Persist's lines
/// `{"index", "reason", …}`), as `reason (key)`.
async fn quarantined(store: &dyn ObjectStore, spec: &StreamSpec) -> Result<Vec<String>, PortError> {
    let own = format!("{}-", spec.pipeline);
    let mut reasons = Vec::new();
    for key in store.list(&format!("quarantine/{}/", spec.target.dataset)).await? {
        if !key.rsplit('/').next().is_some_and(|name| name.starts_with(&own) && name.ends_with(".jsonl")) {
            continue;
        }
        let body = store.get(&key).await?;
        for line in String::from_utf8_lossy(&body).lines().filter(|l| !l.trim().is_empty()) {
            let reason = serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|v| v["reason"].as_str().map(str::to_string))
                .unwrap_or_else(|| format!("unreadable quarantine line: {line}"));
            reasons.push(format!("{reason} ({key})"));
        }
    }
    Ok(reasons)
}

impl std::fmt::Display for StreamDemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let poison = self.report.records_quarantined();
        writeln!(
            f,
            "stream {PIPELINE}: Kafka topic {PIPELINE}, {} partitions, from {} (the MSK record shape)",
            self.checkpoints.len(),
            self.records_path.display()
        )?;
        let rows = self.rows_landed();
        let again = if rows + poison == 0 { " (every partition is past its checkpoint)" } else { "" };
        writeln!(f, "  rows landed          {rows}{again}")?;
        writeln!(f, "  poison quarantined   {poison}")?;
        writeln!(f, "  {:<20} {} rows, {} distinct order_id", format!("table {PIPELINE}"), self.table.0, self.table.1)?;
        writeln!(f, "  wall time            {:.2} s", self.elapsed.as_secs_f64())?;
        // The checkpoint counts every record taken: rows and quarantined.
        writeln!(f, "  partition         checkpoint (offset)   records taken  records behind")?;
        for (partition, through, records) in &self.checkpoints {
            let behind = self.report.shards.get(partition).and_then(|s| s.records_behind);
            writeln!(
                f,
                "  {partition:<17} {:>19}  {records:>14}  {:>14}",
                through.as_deref().unwrap_or("-"),
                behind.map_or("-".into(), |n| n.to_string())
            )?;
        }
        let given_up = self.report.on_failure();
        if given_up > 0 {
            writeln!(
                f,
                "  FAILED: {given_up} batch(es) given up after their retries: see {}{PIPELINE}/{PIPELINE}/failed/ in the lake",
                persist::stream::STREAMS_PREFIX
            )?;
        }
        for reason in &self.quarantined {
            writeln!(f, "  in quarantine: {reason}")?;
        }
        let lake = self.lake.display();
        writeln!(f, "  again (nothing lands twice), then the partitions' checkpoints and records behind:")?;
        writeln!(
            f,
            "    tributary run {} --records {} --lake {lake}",
            self.spec_path.display(),
            self.records_path.display()
        )?;
        writeln!(f, "    tributary status --lake {lake}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{records_behind_table, run_local};

    /// The `stream_records_behind` values in the lake's EMF lines, per shard.
    fn behind_metrics(lake: &Path) -> std::collections::BTreeMap<String, Vec<u64>> {
        let text = std::fs::read_to_string(lake.join("_metrics.jsonl")).expect("metrics file");
        let mut out = std::collections::BTreeMap::<String, Vec<u64>>::new();
        for line in text.lines() {
            let value: serde_json::Value = serde_json::from_str(line).expect("EMF line");
            if let Some(n) = value[crate::stream::RECORDS_BEHIND].as_u64() {
                assert_eq!(value["function"], crate::stream::POLLER);
                assert_eq!(value["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Unit"], "Count");
                out.entry(value["shard"].as_str().expect("shard").to_string()).or_default().push(n);
            }
        }
        out
    }

    #[test]
    fn the_topic_has_one_poison_record_and_every_partition_its_share() {
        let lines = topic_lines(Utc::now());
        let values: Vec<serde_json::Value> = lines.lines().map(|l| serde_json::from_str(l).expect("line")).collect();
        assert_eq!(values.len(), RECORDS as usize);
        let engine = base64::engine::general_purpose::STANDARD;
        let decoded: Vec<Vec<u8>> =
            values.iter().map(|v| engine.decode(v["value"].as_str().expect("b64")).expect("b64")).collect();
        let poison: Vec<usize> =
            (0..decoded.len()).filter(|&i| serde_json::from_slice::<serde_json::Value>(&decoded[i]).is_err()).collect();
        assert_eq!(poison, [POISON_ORDER as usize]);
        for partition in 0..PARTITIONS {
            let offsets: Vec<u64> = values
                .iter()
                .filter(|v| v["partition"] == partition)
                .map(|v| v["offset"].as_u64().expect("offset"))
                .collect();
            assert_eq!(offsets, (0..u64::from(RECORDS / PARTITIONS)).collect::<Vec<_>>());
        }
    }

    #[tokio::test]
    async fn a_lake_keeping_the_dataset_in_the_other_format_is_refused_naming_both() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = run(dir.path(), false).await.expect("demo stream");
        assert_eq!((first.rows_landed(), first.table), (59, (59, 59)), "{first}");
        let err = run(dir.path(), true).await.expect_err("iceberg over parquet");
        let text = err.to_string();
        assert!(text.contains("target.table_format is iceberg") && text.contains("kept as parquet"), "{text}");
        let again = run(dir.path(), false).await.expect("demo stream again");
        assert_eq!((again.rows_landed(), again.table), (0, (59, 59)), "{again}");
    }

    #[tokio::test]
    async fn the_poller_counts_the_records_behind_each_partition_after_its_checkpoint() {
        let dir = tempfile::tempdir().expect("tempdir");
        let lake = dir.path().join("lake");
        let topic = dir.path().join("topic.jsonl");
        std::fs::write(&topic, topic_lines(Utc::now())).expect("topic");
        let spec = StreamSpec::from_yaml(&spec_yaml(false)).expect("spec");
        let source = LocalSource::File(topic);
        let per_partition = u64::from(RECORDS / PARTITIONS);

        // A consumer that stops after one batch per partition.
        let one = PollOptions { follow: false, max_batches_per_shard: Some(1) };
        let report = run_local(&spec, &lake, &source, one, false).await.expect("first batches");
        let store = adapters::local::DirStore::new(&lake);
        for (shard, s) in &report.shards {
            assert_eq!(s.records_behind, Some(per_partition - u64::from(BATCH_SIZE)), "{shard}: {report}");
            let key = persist::stream::checkpoint_key(PIPELINE, PIPELINE, shard);
            let checkpoint = persist::stream::read_checkpoint(&store, &key).await.expect("checkpoint");
            assert_eq!(checkpoint.through.as_deref(), Some("9"), "{shard}: behind counts after the checkpoint");
        }
        let behind = format!("{:>10}", per_partition - u64::from(BATCH_SIZE));
        let table = records_behind_table(&store, None).await.expect("table");
        assert_eq!(table.lines().filter(|l| l.starts_with(PIPELINE) && l.contains(&behind)).count(), 3, "{table}");

        // Read on to the tip: nothing behind.
        let report = run_local(&spec, &lake, &source, PollOptions::default(), false).await.expect("the rest");
        assert!(report.shards.values().all(|s| s.records_behind == Some(0)), "{report}");
        let metrics = behind_metrics(&lake);
        assert_eq!(metrics.len(), PARTITIONS as usize, "{metrics:?}");
        for values in metrics.values() {
            // One value per batch, and one where the shard stopped at its tip.
            assert_eq!(values, &[per_partition - u64::from(BATCH_SIZE), 0, 0]);
        }
        let table = records_behind_table(&store, None).await.expect("table");
        assert_eq!(table.lines().filter(|l| l.starts_with(PIPELINE) && l.contains(&format!("{:>10}", 0))).count(), 3);
    }
}
