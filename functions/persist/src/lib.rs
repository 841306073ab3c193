//! Persist: a page of records -> Arrow -> Parquet in the lake.
//!
//! A short pipeline of functions you can test alone:
//! load (inline or claim check) -> split (JSON objects vs records to
//! quarantine) -> infer the schema over *all* records of the page -> decode
//! to Arrow record batches -> write Parquet (zstd) -> put at the page's
//! deterministic key. The raw page (the `PersistMessage` with its records
//! inline) is written first under `raw/`, so history can be replayed through
//! the same code; a page receipt with the counts is written last.
//!
//! Keys (see `shared::keys`): `<dataset>/dt=<run_date>/<pipeline>-<run_id>-<page>.parquet`
//! — a redelivered message overwrites the same objects.

mod convert;
pub mod page;

pub use convert::{ConvertError, WriterConfig, records_to_parquet, records_to_parquet_with_schema};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use bytes::Bytes;
use serde_json::Value;

use shared::batch::{self, BodyError, DeadLetterTarget, RecordError, RecordMeta};
use shared::contracts::{Payload, PersistMessage};
use shared::keys;
use shared::ledger::{self, PageReceipt};
use shared::metrics::{self, Metrics, MetricsTarget};
use shared::ports::{ObjectStore, PortError, QueueSender};
use shared::spec::{SpecError, check_dataset, check_name};

/// Persist's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct PersistConfig {
    /// Parquet writer settings.
    pub writer: WriterConfig,
    /// Records of a batch handled at once (default 2).
    pub concurrency: usize,
    /// Where records that fail for good go, with the reason (`DLQ_URL`,
    /// `MAX_RECEIVE_COUNT`); `None` leaves them to the redrive policy.
    pub dead_letter: Option<DeadLetterTarget>,
    /// Where the EMF metrics of each page go (records persisted and
    /// quarantined, Parquet bytes).
    pub metrics: MetricsTarget,
}

impl Default for PersistConfig {
    fn default() -> Self {
        Self { writer: WriterConfig::default(), concurrency: 2, dead_letter: None, metrics: MetricsTarget::Off }
    }
}

/// The ports and settings the handler uses.
#[derive(Clone, Copy)]
pub struct Deps<'a> {
    /// The lake.
    pub store: &'a dyn ObjectStore,
    /// Sends dead letters with their reason.
    pub queue: &'a dyn QueueSender,
    /// The run-events topic and its publisher, to announce runs this page
    /// completes (`None`: completion is recorded in the lake only).
    pub run_events: Option<(&'a dyn shared::ports::TopicPublisher, &'a str)>,
    /// Settings.
    pub config: &'a PersistConfig,
}

/// Why a page could not be persisted.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// A name in the message cannot become part of a key.
    #[error("persist message: {0}")]
    Name(#[from] SpecError),
    /// A claim-check object could not be read as a JSON array.
    #[error("claim-check object {key}: {problem}")]
    Claim {
        /// Object key.
        key: String,
        /// What is wrong.
        problem: String,
    },
    /// The records could not be converted to Parquet.
    #[error("dataset {dataset} page {page}: {source}")]
    Convert {
        /// Dataset.
        dataset: String,
        /// Page index.
        page: u32,
        /// Conversion failure.
        source: ConvertError,
    },
    /// The lake refused a read or write.
    #[error(transparent)]
    Store(#[from] PortError),
    /// The record body could not be read.
    #[error(transparent)]
    Body(#[from] BodyError),
}

impl RecordError for PersistError {
    /// Invalid names, unreadable claim checks, missing objects and
    /// conversion failures recur on every try; store hiccups do not.
    fn is_permanent(&self) -> bool {
        match self {
            PersistError::Store(err) => !err.is_retryable(),
            PersistError::Name(_)
            | PersistError::Claim { .. }
            | PersistError::Convert { .. }
            | PersistError::Body(_) => true,
        }
    }
}

/// Handles an SQS batch of `PersistMessage`s, reporting only failed records.
pub async fn handle_sqs(event: &SqsEvent, deps: Deps<'_>) -> SqsBatchResponse {
    let dead_letters = deps.config.dead_letter.as_ref().map(|target| target.policy(deps.queue, "persist"));
    batch::for_each_message(
        event,
        deps.config.concurrency,
        dead_letters,
        |message: PersistMessage, _meta: RecordMeta| async move { persist_page(message, deps).await.map(|_| ()) },
    )
    .await
}

/// A record set aside with the reason.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Quarantined {
    /// Position in the page.
    pub index: usize,
    /// Why it was not persisted.
    pub reason: String,
    /// The record as received.
    pub record: Value,
}

/// Persists one page and returns its receipt.
///
/// # Errors
/// [`PersistError`]: invalid names, unreadable claim checks and conversion
/// failures are permanent (the message is dead-lettered with an alert after
/// `maxReceiveCount`, its raw payload already kept); store failures are
/// transient.
#[tracing::instrument(skip_all, fields(pipeline = %message.pipeline, run_id = %message.run_id, page = message.page.index))]
pub async fn persist_page(message: PersistMessage, deps: Deps<'_>) -> Result<PageReceipt, PersistError> {
    check_name("pipeline", &message.pipeline)?;
    check_dataset("target.dataset", &message.target.dataset)?;
    let dataset = message.target.dataset.clone();
    let pipeline = message.pipeline.clone();
    let (run_id, run_date, page) = (message.run_id.clone(), message.run_date, message.page);

    let records = load_records(&message.payload, deps.store).await?;
    let page_key =
        keys::PageKey { dataset: &dataset, run_date, pipeline: &pipeline, run_id: &run_id, page: page.index };
    let raw_key = page_key.raw();
    let raw = PersistMessage { payload: Payload::Inline { records }, ..message };
    let raw_bytes = serde_json::to_vec(&raw).map_err(|err| PortError::Permanent {
        operation: "encode raw page",
        target: raw_key.clone(),
        message: err.to_string(),
    })?;
    deps.store.put(&raw_key, Bytes::from(raw_bytes)).await?;
    let Payload::Inline { records } = raw.payload else {
        return Err(PersistError::Claim { key: raw_key, problem: "internal: raw payload not inline".into() });
    };

    let records_in = records.len() as u64;
    let (objects, quarantined) = split_records(records);
    let mut parquet_bytes = 0;
    let mut schema = None;
    let data_key = if objects.is_empty() {
        None
    } else {
        let converted = records_to_parquet_with_schema(&objects, &deps.config.writer);
        let (parquet, arrow_schema) =
            converted.map_err(|source| PersistError::Convert { dataset: dataset.clone(), page: page.index, source })?;
        parquet_bytes = parquet.len() as u64;
        schema = Some(format!("{:?}", arrow_schema.fields()));
        let key = page_key.data();
        deps.store.put(&key, Bytes::from(parquet)).await?;
        Some(key)
    };
    let quarantine_key = if quarantined.is_empty() {
        None
    } else {
        let key = page_key.quarantine();
        let mut lines = Vec::new();
        for entry in &quarantined {
            serde_json::to_writer(&mut lines, entry).map_err(|err| PortError::Permanent {
                operation: "encode quarantine",
                target: key.clone(),
                message: err.to_string(),
            })?;
            lines.push(b'\n');
        }
        deps.store.put(&key, Bytes::from(lines)).await?;
        tracing::warn!(quarantined = quarantined.len(), key, "records quarantined");
        Some(key)
    };
    let receipt = PageReceipt {
        pipeline: raw.pipeline.clone(),
        run_id: run_id.clone(),
        run_date,
        dataset,
        page: page.index,
        page_count: page.count,
        records_in,
        records_persisted: objects.len() as u64,
        records_quarantined: quarantined.len() as u64,
        data_key,
        quarantine_key,
        raw_key,
        schema,
    };
    let receipt_key = keys::receipt_key(&raw.pipeline, &run_id, page.index);
    let receipt_bytes = serde_json::to_vec(&receipt).map_err(|err| PortError::Permanent {
        operation: "encode receipt",
        target: receipt_key.clone(),
        message: err.to_string(),
    })?;
    deps.store.put(&receipt_key, Bytes::from(receipt_bytes)).await?;
    ledger::RunLedger { store: deps.store, events: deps.run_events }.complete_if_done(&raw.pipeline, &run_id).await?;
    tracing::info!(records = receipt.records_persisted, quarantined = receipt.records_quarantined, "page persisted");
    let mut emf = Metrics::new("persist", &receipt.pipeline);
    emf.count(metrics::RECORDS_PERSISTED, receipt.records_persisted);
    emf.count(metrics::RECORDS_QUARANTINED, receipt.records_quarantined);
    emf.bytes(metrics::BYTES_PERSISTED, parquet_bytes);
    emf.property("run_id", Value::String(receipt.run_id.to_string()));
    emf.property("page", Value::from(receipt.page));
    emf.property("dataset", Value::String(receipt.dataset.clone()));
    emf.flush_to(&deps.config.metrics);
    Ok(receipt)
}

/// Nesting depth of a JSON value (a scalar is 0, `{}` and `[]` are 1),
/// computed without recursion so any depth is safe to measure.
pub fn nesting_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((value, depth)) = stack.pop() {
        match value {
            Value::Object(map) => {
                deepest = deepest.max(depth);
                stack.extend(map.values().map(|v| (v, depth + 1)));
            }
            Value::Array(items) => {
                deepest = deepest.max(depth);
                stack.extend(items.iter().map(|v| (v, depth + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// The page's records: inline, or the JSON array stored at a claim-check key.
///
/// # Errors
/// [`PersistError::Store`] when the object cannot be read (not found is
/// permanent); [`PersistError::Claim`] when it is not a JSON array.
pub async fn load_records(payload: &Payload, store: &dyn ObjectStore) -> Result<Vec<Value>, PersistError> {
    match payload {
        Payload::Inline { records } => Ok(records.clone()),
        Payload::Object { key, .. } => {
            let bytes = store.get(key).await?;
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(Value::Array(records)) => Ok(records),
                Ok(_) => {
                    Err(PersistError::Claim { key: key.clone(), problem: "is JSON but not an array of records".into() })
                }
                Err(err) => Err(PersistError::Claim { key: key.clone(), problem: format!("is not JSON: {err}") }),
            }
        }
    }
}

/// Deepest nesting of objects and arrays a record may have (the record
/// itself is level 1). Deeper records are quarantined: the Arrow/Parquet
/// writers recurse per level, and Athena's Hive DDL cannot describe such
/// types anyway.
pub const MAX_NESTING_DEPTH: usize = 32;

/// Splits records into JSON objects (persisted) and everything else —
/// non-objects and records nested deeper than [`MAX_NESTING_DEPTH`] —
/// (quarantined with the reason).
pub fn split_records(records: Vec<Value>) -> (Vec<Value>, Vec<Quarantined>) {
    let mut objects = Vec::with_capacity(records.len());
    let mut quarantined = Vec::new();
    for (index, record) in records.into_iter().enumerate() {
        let depth = nesting_depth(&record);
        if record.is_object() && depth > MAX_NESTING_DEPTH {
            let reason = format!("record {index} is nested {depth} levels deep, more than {MAX_NESTING_DEPTH}");
            quarantined.push(Quarantined { index, reason, record });
        } else if record.is_object() {
            objects.push(record);
        } else {
            let kind = shared::json::kind_of(&record);
            quarantined.push(Quarantined {
                index,
                reason: format!("record {index} is {kind}, not a JSON object"),
                record,
            });
        }
    }
    (objects, quarantined)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn nested(depth: usize) -> Value {
        let mut value = json!(1);
        for _ in 0..depth {
            value = json!({ "x": value });
        }
        value
    }

    #[test]
    fn depth_is_measured_without_recursion() {
        assert_eq!(nesting_depth(&json!(1)), 0);
        assert_eq!(nesting_depth(&json!({})), 1);
        assert_eq!(nesting_depth(&json!({"a": [1, {"b": []}]})), 4);
        // serde_json refuses JSON text nested deeper than 128, so that is the deepest a record gets.
        assert_eq!(nesting_depth(&nested(127)), 127);
    }

    #[test]
    fn too_deep_and_non_object_records_are_quarantined_with_the_reason() {
        let records = vec![json!({"id": 1}), nested(MAX_NESTING_DEPTH + 8), json!("text"), nested(MAX_NESTING_DEPTH)];
        let (objects, quarantined) = split_records(records);
        assert_eq!(objects.len(), 2);
        let reasons: Vec<_> = quarantined.iter().map(|q| q.reason.as_str()).collect();
        assert_eq!(
            reasons,
            ["record 1 is nested 40 levels deep, more than 32", "record 2 is a string, not a JSON object"]
        );
    }
}
