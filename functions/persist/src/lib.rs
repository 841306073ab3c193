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
//! Keys (see `tributary_core::keys`): `<dataset>/dt=<run_date>/<pipeline>-<run_id>-<page>.parquet`
//! — a redelivered message overwrites the same objects.
//!
//! The Lambda binary's settings come from its environment through
//! [`LambdaConfig::from_env`].

mod build;
pub mod coalesce;
mod config;
mod convert;
mod infer;
#[cfg(test)]
mod partition_props;
use tributary_core::json::tape as json;
pub mod page;
pub mod publish;
pub use page::{ConvertStats, convert_to_writer, convert_with_schema, records_to_parquet};
mod source;

pub use build::{DecimalError, Violation, parse_decimal, parse_timestamp};
pub use build::{META_JSON, META_SOURCE, META_VARIANT_OF};
pub use config::{LambdaConfig, MAX_COLUMNS_RANGE, MAX_PAGE_BYTES_RANGE, ROW_GROUP_ROWS_RANGE, ZSTD_LEVELS};
pub use convert::{
    ConvertError, DEFAULT_MAX_COLUMNS, DEFAULT_MAX_PAGE_BYTES, DEFAULT_MAX_PAGE_RECORDS, DEFAULT_PARTITION,
    LINEAGE_LOADED_AT, LINEAGE_PAGE, LINEAGE_RUN_ID, Lineage, MAX_NESTING_DEPTH, MAX_OPEN_PARTITIONS, META_LINEAGE,
    OutputFile, PageLimits, PageOutput, PageSettings, QuarantineFile, WriterConfig, convert_page, infer_page,
    lineage_fields, partition_columns, reserved_names, sanitize_partition_value, seen_in_page,
};
pub use infer::{Field, Fields, Kinds, MAX_COLUMN_NAME, Naming, Seen, Ty, Variant, column_name};
pub use json::{SyntaxError, Tape, Tok};
pub use source::{CHUNK_BYTES, DecodeError, Framer, PageSource};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use bytes::Bytes;
use serde_json::Value;

use contracts::PayloadFormat;
use contracts::spec::{SpecError, check_name};
use contracts::{Payload, PersistMessage};
use tributary_core::batch::{self, BodyError, DeadLetterTarget, RecordError, RecordMeta};
use tributary_core::keys;
use tributary_core::ledger::{self, PageReceipt};
use tributary_core::metrics::{self, Metrics, MetricsTarget};
use tributary_core::ports::{ObjectStore, PortError, QueueMessage, QueueSender};

use publish::TableSchema;

/// Persist's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct PersistConfig {
    /// Parquet writer settings.
    pub writer: WriterConfig,
    /// The most one page may hold: bytes after decompression
    /// (`MAX_PAGE_BYTES`, default 256 MiB), records (default 1,000,000),
    /// and its dataset's columns (`MAX_COLUMNS`, default 1,000); see
    /// [`PageLimits`].
    pub limits: PageLimits,
    /// Records of a batch handled at once (default 2).
    pub concurrency: usize,
    /// Where records that fail for good go, with the reason (`DLQ_URL`,
    /// `MAX_RECEIVE_COUNT`); `None` leaves them to the redrive policy.
    pub dead_letter: Option<DeadLetterTarget>,
    /// Where the EMF metrics of each page go (records persisted and
    /// quarantined, Parquet bytes).
    pub metrics: MetricsTarget,
    /// Write a page of a run already completed (its receipt and
    /// `_SUCCESS` exist) again instead of taking it as a duplicate
    /// delivery: `tributary replay` sets it, then coalesces the run again
    /// ([`coalesce::recoalesce_run`]). Default false.
    pub rewrite_completed_runs: bool,
}

impl Default for PersistConfig {
    fn default() -> Self {
        Self {
            writer: WriterConfig::default(),
            limits: PageLimits::default(),
            concurrency: 2,
            dead_letter: None,
            metrics: MetricsTarget::Off,
            rewrite_completed_runs: false,
        }
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
    pub run_events: Option<(&'a dyn tributary_core::ports::TopicPublisher, &'a str)>,
    /// The table catalog each dataset's table definition goes to when its
    /// schema changes (the Glue Data Catalog on AWS; `None`: the published
    /// Arrow schema in the lake only).
    pub catalog: Option<&'a dyn tributary_core::catalog::Catalog>,
    /// Commits the runs of datasets with `target.table_format: iceberg` to
    /// their tables at completion (`None`: pages of such datasets fail
    /// permanently, naming `target.table_format`; they are never written
    /// as plain Parquet).
    pub tables: Option<&'a dyn tributary_core::tables::TableCommitter>,
    /// Settings.
    pub config: &'a PersistConfig,
}

/// Why a page could not be persisted.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// A name in the message cannot become part of a key.
    #[error("persist message: {0}")]
    Name(#[from] SpecError),
    /// A claim check's key that this message may not read: not under its
    /// own pipeline's `_claims/<pipeline>/` (another pipeline's claims,
    /// another dataset's `raw/` page, an absolute or empty key), or with a
    /// `.`, `..` or empty segment.
    #[error(
        "payload.key {key:?} {problem}: a claim check is read only under {prefix} (the message's own pipeline) or \
         as the page's own raw copy {raw}"
    )]
    ClaimKey {
        /// The key, as the message has it.
        key: String,
        /// What is wrong with it.
        problem: &'static str,
        /// `_claims/<pipeline>/` of the message's pipeline.
        prefix: String,
        /// The page's own raw copy (what a replayed raw envelope names).
        raw: String,
    },
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
    /// The page asks for another partition layout than the dataset has.
    #[error("dataset {dataset}: {problem}")]
    Layout {
        /// Dataset.
        dataset: String,
        /// Both layouts, and what to do.
        problem: String,
    },
    /// The dataset's table format has no committer in this Persist.
    #[error(
        "dataset {dataset}: target.table_format is iceberg, but this Persist has no Iceberg table committer; the \
         page is not written (never as plain Parquet)"
    )]
    TableFormat {
        /// Dataset.
        dataset: String,
    },
    /// A page of a completed run with other records than the ones
    /// persisted: a new fetch of the run (a re-run of the same scheduled
    /// time), not a redelivery. A completed run's files were coalesced or
    /// committed to its table; one page cannot rewrite them.
    #[error(
        "run {run_id} of pipeline {pipeline} is complete, and page {page} now holds other records than the ones \
         persisted (a new fetch of a completed run, not a redelivery); a completed run is not rewritten by a new \
         fetch: start a new run (another scheduled time), or re-derive this one from its raw pages (tributary replay)"
    )]
    CompletedRun {
        /// Pipeline.
        pipeline: String,
        /// Run id.
        run_id: String,
        /// Page index.
        page: u32,
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
            | PersistError::ClaimKey { .. }
            | PersistError::Claim { .. }
            | PersistError::Convert { .. }
            | PersistError::Layout { .. }
            | PersistError::TableFormat { .. }
            | PersistError::CompletedRun { .. }
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

/// Persists one page and returns its receipt.
///
/// Steps: check the names and, for a claim check, that its key is under
/// the message's own pipeline's `_claims/` (nothing is read or written
/// otherwise); keep the raw page (the message as received under `raw/`, and for
/// a claim check a copy of the payload, so replay never depends on the
/// claim-check object's lifetime); read the dataset's schema from
/// `_schema/<dataset>.json` with its version; convert (see
/// [`convert_page`]) on a blocking thread, the payload spilled to a
/// temporary file first; write the widened schema back with
/// [`ObjectStore::put_if`] on that version, converting again when another
/// page changed it meanwhile (at most [`SCHEMA_WRITE_ATTEMPTS`] times);
/// put every Parquet part and the quarantine file; delete parts an earlier
/// delivery of this page wrote that this one did not (so a redelivery never
/// leaves duplicates); write the receipt; complete the run when this was
/// its last page.
///
/// Records whose values the dataset's schema cannot take (an incompatible
/// change) are quarantined and a dead letter with the reason goes to the
/// DLQ, so Notify alerts, while the rest of the page is persisted; so are
/// records that would take the dataset past `limits.max_columns`.
///
/// # Errors
/// [`PersistError`]: invalid names, a claim-check key outside the
/// message's own pipeline, unreadable or missing claim checks, invalid
/// JSON, a page past `limits.max_page_bytes` or `limits.max_page_records`
/// and conversion failures are permanent (the message is
/// dead-lettered with an alert, its raw payload already kept); store
/// failures are transient.
#[tracing::instrument(skip_all, fields(pipeline = %message.pipeline, run_id = %message.run_id, page = message.page.index))]
pub async fn persist_page(message: PersistMessage, deps: Deps<'_>) -> Result<PageReceipt, PersistError> {
    check_name("pipeline", &message.pipeline)?;
    message.target.validate("target")?;
    let dataset = message.target.dataset.clone();
    if message.target.table_format == contracts::TableFormat::Iceberg && deps.tables.is_none() {
        return Err(PersistError::TableFormat { dataset });
    }
    let (run_id, run_date, page) = (message.run_id.clone(), message.run_date, message.page);
    let page_key =
        keys::PageKey { dataset: &dataset, run_date, pipeline: &message.pipeline, run_id: &run_id, page: page.index };
    let raw_key = page_key.raw();
    let temp_dir = tempfile::tempdir().map_err(|err| local_error("create temporary folder", &err))?;

    // 0. A page of a run already completed: delivered again (the same
    //    records), its rows are in the run's files (coalesced, or
    //    committed to its table) and its receipt is returned; fetched
    //    anew (other records), it is refused before anything is written,
    //    the raw copy included, so the lake keeps what the table holds.
    //    `tributary replay` reopens a run before replaying it.
    let receipt_key = keys::receipt_key(&message.pipeline, &run_id, page.index);
    if !deps.config.rewrite_completed_runs
        && deps.store.get(&keys::success_key(&message.pipeline, &run_id)).await.is_ok()
        && let Ok(previous) = deps.store.get(&receipt_key).await
        && let Ok(previous) = serde_json::from_slice::<PageReceipt>(&previous)
    {
        if same_records(&message, &raw_key, &page_key.raw_payload(), deps.store).await? {
            tracing::info!("a page of a completed run delivered again; its rows are in the lake already");
            return Ok(previous);
        }
        return Err(PersistError::CompletedRun {
            pipeline: message.pipeline.clone(),
            run_id: run_id.to_string(),
            page: page.index,
        });
    }

    // 1. The payload, and the raw page kept for replay.
    let (source, format, raw) = match &message.payload {
        Payload::Inline { records } => {
            let bytes = Bytes::copy_from_slice(records.as_str().as_bytes());
            (PageSource::Bytes(bytes), PayloadFormat::default(), message.clone())
        }
        Payload::Object { key, format } => {
            check_claim_key(key, &message.pipeline, &page_key.raw_payload())?;
            let local = temp_dir.path().join("payload");
            deps.store.get_to_file(key, &local).await.map_err(|err| match err {
                PortError::NotFound { .. } => PersistError::Claim {
                    key: key.clone(),
                    problem: "does not exist (expired or never written)".into(),
                },
                other => PersistError::Store(other),
            })?;
            let raw_payload = page_key.raw_payload();
            if *key != raw_payload {
                deps.store.put_file(&raw_payload, &local).await?;
            }
            let payload = Payload::Object { key: raw_payload, format: format.clone() };
            (PageSource::File(local), format.clone(), PersistMessage { payload, ..message.clone() })
        }
    };
    // The load time: Request's, or now (kept in the raw copy, so a replay
    // writes the same rows).
    let fetched_at = message.fetched_at.unwrap_or_else(|| {
        let now = chrono::Utc::now();
        chrono::DateTime::from_timestamp_millis(now.timestamp_millis()).unwrap_or(now)
    });
    let raw = PersistMessage { fetched_at: Some(fetched_at), ..raw };
    let lineage = Lineage { run_id: run_id.to_string(), page: page.index, loaded_at_ms: fetched_at.timestamp_millis() };
    let raw_bytes = serde_json::to_vec(&raw).map_err(|err| encode_error("encode raw page", &raw_key, &err))?;
    deps.store.put(&raw_key, Bytes::from(raw_bytes)).await?;

    // 2. The dataset's schema, the conversion against it, and the schema
    //    widened by this page, written back only if no other page changed
    //    it meanwhile (a conditional write on the version read). When one
    //    did, the page is converted again against what that page left, as
    //    if the two had run one after the other: a change that conflicts
    //    with it is quarantined, never written beside it.
    let schema_key = keys::schema_key(&dataset);
    let mut attempt = 1;
    let output = loop {
        let (lake_table, version) = match read_schema(deps.store, &schema_key).await? {
            Some((schema, version)) => (Some(schema), Some(version)),
            None => (None, None),
        };
        if let Some(conflict) = lake_table.as_ref().and_then(|t| t.layout_conflict(&message.target)) {
            return Err(PersistError::Layout { dataset: dataset.clone(), problem: conflict });
        }
        let lake_schema = lake_table.as_ref().map(|t| t.table.clone());
        let (source, format, target) = (source.clone(), format.clone(), message.target.clone());
        let (writer, limits) = (deps.config.writer.clone(), deps.config.limits);
        let dir = temp_dir.path().join(format!("attempt-{attempt}"));
        std::fs::create_dir_all(&dir).map_err(|err| local_error("create temporary folder", &err))?;
        let (lake, lineage) = (lake_schema.clone(), lineage.clone());
        let converted = tokio::task::spawn_blocking(move || {
            let settings = PageSettings {
                target: &target,
                lineage: Some(&lineage),
                lake_schema: lake.as_ref(),
                run_date,
                writer: &writer,
                limits,
                temp_dir: &dir,
            };
            convert_page(&source, &format, settings)
        })
        .await
        .map_err(|err| PersistError::Claim { key: raw_key.clone(), problem: format!("conversion panicked: {err}") })?;
        let output =
            converted.map_err(|source| PersistError::Convert { dataset: dataset.clone(), page: page.index, source })?;
        let lake = lake_table.clone().unwrap_or_default();
        let mut table = TableSchema { table: output.schema.clone(), ..lake.clone() }.with_layout(&message.target);
        table.note_partitions(output.files.iter().map(|f| f.partition.as_str()), chrono::Utc::now().date_naive());
        if lake_table.as_ref() == Some(&table) {
            publish_if_stale(&dataset, &table, message.target.table_format, deps).await?;
            break output;
        }
        table.version = lake.version + 1;
        let bytes = serde_json::to_vec_pretty(&table)
            .map_err(|err| encode_error("encode dataset schema", &schema_key, &err))?;
        if deps.store.put_if(&schema_key, Bytes::from(bytes), version.as_deref()).await? {
            publish(&dataset, &table, message.target.table_format, deps).await?;
            break output;
        }
        if attempt == SCHEMA_WRITE_ATTEMPTS {
            return Err(PersistError::Store(PortError::Transient {
                operation: "update dataset schema",
                target: schema_key,
                message: format!("other pages changed it during each of {SCHEMA_WRITE_ATTEMPTS} conversions"),
            }));
        }
        tracing::info!(key = %schema_key, attempt, "the dataset's schema changed during the conversion; converting again");
        attempt += 1;
    };

    // 3. (A page of a completed run was settled in step 0.)

    // 4. Files, stale parts of an earlier delivery, quarantine.
    let mut data_keys = Vec::with_capacity(output.files.len());
    let mut parquet_bytes = 0;
    for file in &output.files {
        let key = page_key.data_part(&file.partition, file.part);
        deps.store.put_file(&key, &file.path).await?;
        parquet_bytes += file.bytes;
        data_keys.push(key);
    }
    if let Ok(previous) = deps.store.get(&receipt_key).await
        && let Ok(previous) = serde_json::from_slice::<PageReceipt>(&previous)
    {
        // Only this page's own parts: same dataset folder and the same
        // `<pipeline>-<run_id>-<page>` file stem (a receipt of another
        // dataset fed by the same pipeline, run and page must not delete
        // that dataset's files).
        let stem = format!("/{}-{}-{:05}", message.pipeline, run_id, page.index);
        let own = |key: &&String| {
            key.starts_with(&format!("{dataset}/"))
                && key.rsplit_once('/').is_some_and(|(_, name)| format!("/{name}").starts_with(&stem))
        };
        for stale in previous.data_keys.iter().filter(own).filter(|k| !data_keys.contains(k)) {
            tracing::info!(key = %stale, "deleting a part an earlier delivery of this page wrote");
            deps.store.delete(stale).await?;
        }
    }
    let quarantine_key = match &output.quarantine {
        None => None,
        Some(quarantine) => {
            let key = page_key.quarantine();
            deps.store.put_file(&key, &quarantine.path).await?;
            tracing::warn!(quarantined = quarantine.records, key, reasons = ?quarantine.sample_reasons, "records quarantined");
            Some(key)
        }
    };

    // 4. An incompatible change: alert.
    if !output.conflicts.is_empty() {
        alert_schema_conflict(&raw, &output, quarantine_key.as_deref(), deps).await?;
    }

    // 5. Receipt, run completion, metrics.
    let receipt = PageReceipt {
        pipeline: message.pipeline.clone(),
        run_id: run_id.clone(),
        run_date,
        dataset: dataset.clone(),
        page: page.index,
        page_count: page.count,
        records_in: output.records_in,
        records_persisted: output.rows_written,
        records_quarantined: output.quarantined(),
        data_keys,
        quarantine_key,
        raw_key: page_key.raw(),
        schema: (output.rows_written > 0).then(|| format!("{:?}", output.arrow_schema.fields())),
        table_commit: message.target.table_format == contracts::TableFormat::Iceberg,
    };
    ledger::RunLedger { store: deps.store, events: deps.run_events }
        .record_page(
            &receipt,
            Some(&coalesce::RunCoalescer {
                store: deps.store,
                table_format: message.target.table_format,
                tables: deps.tables,
            }),
        )
        .await?;
    tracing::info!(
        records = receipt.records_persisted,
        quarantined = receipt.records_quarantined,
        files = receipt.data_keys.len(),
        input_bytes = output.input_bytes,
        "page persisted"
    );
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

/// Whether `message` carries the records the page's raw copy holds (a
/// redelivery), comparing the inline records' text, or the claim-check
/// object's bytes with the kept raw payload (`raw_payload`). Without a raw
/// copy (written before raw copies existed) it is taken as a redelivery.
///
/// # Errors
/// [`PersistError::Store`] when a copy cannot be read.
async fn same_records(
    message: &PersistMessage,
    raw_key: &str,
    raw_payload: &str,
    store: &dyn ObjectStore,
) -> Result<bool, PersistError> {
    let kept = match store.get(raw_key).await {
        Ok(bytes) => bytes,
        Err(PortError::NotFound { .. }) => return Ok(true),
        Err(err) => return Err(err.into()),
    };
    let Ok(kept) = serde_json::from_slice::<PersistMessage>(&kept) else { return Ok(true) };
    Ok(match (&message.payload, &kept.payload) {
        (Payload::Inline { records }, Payload::Inline { records: kept }) => records.as_str() == kept.as_str(),
        (Payload::Object { key, .. }, Payload::Object { .. }) if key == raw_payload => true,
        (Payload::Object { key, .. }, Payload::Object { .. }) => {
            match (store.get(key).await, store.get(raw_payload).await) {
                (Ok(new), Ok(kept)) => new == kept,
                // The claim check expired: it cannot be compared, nor
                // persisted; the receipt stands.
                (Err(PortError::NotFound { .. }), _) => true,
                (Err(err), _) | (_, Err(err)) => return Err(err.into()),
            }
        }
        _ => false,
    })
}

/// Checks that a claim check's `key` is one a message of `pipeline` may
/// read: under `_claims/<pipeline>/` ([`keys::claims_prefix`], where
/// Request writes them), without empty, `.` or `..` segments, backslashes
/// or control characters; or exactly `own_raw`, the page's own raw copy
/// (`raw/<dataset>/dt=…/<pipeline>-<run_id>-<page>.payload`), which a
/// replayed raw envelope names. Without it, a message could name any key
/// of the lake and copy another dataset's `raw/` page into its table.
///
/// # Errors
/// [`PersistError::ClaimKey`] naming the field (`payload.key`), the key
/// and the prefix (permanent).
fn check_claim_key(key: &str, pipeline: &str, own_raw: &str) -> Result<(), PersistError> {
    if key == own_raw {
        return Ok(());
    }
    let prefix = keys::claims_prefix(pipeline);
    let problem = match key.strip_prefix(prefix.as_str()) {
        _ if key.is_empty() => "is empty",
        None if key.starts_with('/') => "is absolute",
        None if key.starts_with("_claims/") => "is another pipeline's claim check",
        None => "is not a claim check",
        Some(rest) if rest.split('/').any(|segment| matches!(segment, "" | "." | "..")) => {
            "has an empty, `.` or `..` segment"
        }
        Some(rest) if rest.contains('\\') || rest.chars().any(char::is_control) => {
            "holds a backslash or a control character"
        }
        Some(_) => return Ok(()),
    };
    Err(PersistError::ClaimKey { key: key.to_string(), problem, prefix, raw: own_raw.to_string() })
}

fn local_error(operation: &'static str, err: &std::io::Error) -> PersistError {
    PersistError::Store(PortError::Transient {
        operation,
        target: std::env::temp_dir().display().to_string(),
        message: err.to_string(),
    })
}

fn encode_error(operation: &'static str, key: &str, err: &serde_json::Error) -> PersistError {
    PersistError::Store(PortError::Permanent { operation, target: key.to_string(), message: err.to_string() })
}

/// Conversions of one page against a dataset schema that other pages keep
/// changing before it is written back; then the message is retried later.
pub const SCHEMA_WRITE_ATTEMPTS: u32 = 4;

/// The dataset's table schema from the lake with its object version (for
/// the conditional write back), `None` before its first page.
///
/// # Errors
/// [`PersistError::Store`] when it cannot be read, or is not a schema
/// (permanent: someone wrote it by hand; fix or delete the object).
pub async fn read_schema(store: &dyn ObjectStore, key: &str) -> Result<Option<(TableSchema, String)>, PersistError> {
    match store.get_versioned(key).await? {
        Some((bytes, version)) => serde_json::from_slice(&bytes)
            .map(|schema| Some((schema, version)))
            .map_err(|err| encode_error("read dataset schema", key, &err)),
        None => Ok(None),
    }
}

/// Publishes the table schema: the Arrow schema at
/// `_schema/<dataset>.arrow`, and, for a Parquet dataset, the Hive table
/// definition to the catalog. An Iceberg dataset's table is the
/// committer's (`deps.tables`): a Hive definition of the same name in the
/// same Glue database would replace it.
async fn publish(
    dataset: &str,
    table: &TableSchema,
    format: contracts::TableFormat,
    deps: Deps<'_>,
) -> Result<(), PersistError> {
    if let Some(catalog) = deps.catalog.filter(|_| format == contracts::TableFormat::Parquet) {
        catalog.upsert_table(&table.table_def(dataset)).await?;
    }
    let key = keys::arrow_schema_key(dataset);
    let bytes = publish::encode_arrow_schema(&table.arrow_schema()).map_err(|err| {
        PersistError::Store(PortError::Permanent {
            operation: "encode the Arrow schema",
            target: key.clone(),
            message: err.to_string(),
        })
    })?;
    deps.store.put(&key, Bytes::from(bytes)).await?;
    Ok(())
}

/// Publishes `table` again when the published Arrow schema is missing or
/// of another version: two pages that changed the schema one after the
/// other may publish in the other order, and the next page mends it (the
/// catalog never takes a lower version).
async fn publish_if_stale(
    dataset: &str,
    table: &TableSchema,
    format: contracts::TableFormat,
    deps: Deps<'_>,
) -> Result<(), PersistError> {
    let published = match deps.store.get(&keys::arrow_schema_key(dataset)).await {
        Ok(bytes) => publish::decode_arrow_schema(&bytes)
            .ok()
            .and_then(|schema| schema.metadata().get(publish::META_VERSION).and_then(|v| v.parse::<u64>().ok())),
        Err(PortError::NotFound { .. }) => None,
        Err(err) => return Err(err.into()),
    };
    if published != Some(table.version) {
        publish(dataset, table, format, deps).await?;
    }
    Ok(())
}

async fn alert_schema_conflict(
    raw: &PersistMessage,
    output: &PageOutput,
    quarantine_key: Option<&str>,
    deps: Deps<'_>,
) -> Result<(), PersistError> {
    let outcome = match (output.quarantined(), quarantine_key) {
        (0, _) | (_, None) => "no records quarantined".to_string(),
        (n, Some(key)) => format!("{n} records quarantined in {key}"),
    };
    let reason = format!(
        "dataset {} cannot take this page's types ({}); {outcome}",
        raw.target.dataset,
        output.conflicts.join("; "),
    );
    tracing::error!(%reason, "incompatible schema change");
    let Some(target) = &deps.config.dead_letter else { return Ok(()) };
    let mut envelope = raw.clone();
    if let Payload::Inline { .. } = envelope.payload {
        envelope.payload = Payload::Object {
            key: keys::PageKey {
                dataset: &raw.target.dataset,
                run_date: raw.run_date,
                pipeline: &raw.pipeline,
                run_id: &raw.run_id,
                page: raw.page.index,
            }
            .raw(),
            format: PayloadFormat::default(),
        };
    }
    let body = serde_json::to_string(&envelope).map_err(|err| encode_error("encode alert", &target.dlq, &err))?;
    let attributes = [
        (batch::ATTR_ERROR, reason),
        (batch::ATTR_FUNCTION, "persist".to_string()),
        (batch::ATTR_PERMANENT, "true".to_string()),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), value))
    .collect();
    deps.queue.send_messages(&target.dlq, vec![QueueMessage { body, attributes }]).await?;
    Ok(())
}
