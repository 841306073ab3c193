//! The per-message function: one page of a run into the lake, as a short
//! list of named steps ([`persist_page`]), each a function of its own.
//!
//! 1. [`PageContext::check`]: names and target valid, the table format
//!    has a committer; the page's keys.
//! 2. [`PageContext::settle_completed_run`]: a page of a run already completed is a
//!    redelivery (its receipt is returned) or a new fetch (refused).
//! 3. [`PageContext::keep_raw_page`]: the payload read (inline or claim check) and the
//!    raw page kept under `raw/` for replay.
//! 4. [`crate::table::convert_against_table_schema`]: the conversion
//!    against the dataset's table schema, written back if it widened.
//!    Then [`PageContext::settle_late_completion`]: the run completed
//!    meanwhile (step 2 again, judged by the converted records).
//! 5. [`PageContext::write_outputs`]: Parquet parts, stale parts of an earlier delivery
//!    deleted, the quarantine file.
//! 6. [`alert_schema_conflict`] when the page's types conflict with the
//!    dataset's.
//! 7. [`PageContext::record_receipt`]: the page receipt, which may complete the run.
//! 8. [`emit_metrics`].

use std::path::Path;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use bytes::Bytes;
use chrono::{DateTime, NaiveDate, Utc};
use contracts::spec::check_name;
use contracts::{PageRef, Payload, PayloadFormat, PersistMessage, RunId, TableFormat};
use lake_format::lineage::Lineage;
use serde_json::Value;
use tributary_core::batch::{self, RecordMeta};
use tributary_core::keys;
use tributary_core::ledger::{self, PageReceipt};
use tributary_core::metrics::{self, Metrics};
use tributary_core::ports::{ObjectStore, PortError, QueueMessage};

use crate::coalesce::{RunCoalescer, drop_files_outside_manifest};
use crate::convert::PageOutput;
use crate::deps::Deps;
use crate::error::{PersistError, encode_error, local_error};
use crate::source::PageSource;
use crate::table::convert_against_table_schema;
use crate::tenancy::authorize;

/// Handles an SQS batch of `PersistMessage`s, reporting only failed records.
///
/// Each record is authorized first (`crate::tenancy::authorize`: its
/// sender authenticated by `SenderId` or queue, the pipeline and dataset
/// its own, the run planned); a refusal is permanent and nothing is read
/// or written for it.
pub async fn handle_sqs(event: &SqsEvent, deps: Deps<'_>) -> SqsBatchResponse {
    let dead_letters = deps.config.dead_letter.as_ref().map(|target| target.policy(deps.queue, "persist"));
    batch::for_each_message(
        event,
        deps.config.concurrency,
        dead_letters,
        |message: PersistMessage, meta: RecordMeta| async move {
            authorize(&message, &meta, deps).await?;
            persist_page(message, deps).await.map(|_| ())
        },
    )
    .await
}

/// Persists one page and returns its receipt.
///
/// Steps (see the module's list): check the names and the table format;
/// settle a page of a completed run (again after the conversion, for a run
/// that completed meanwhile); keep the raw page (the message as
/// received under `raw/`, and for a claim check — read only under the
/// message's own pipeline's `_claims/` — a copy of the payload, so replay
/// never depends on the claim-check object's lifetime); convert against
/// the dataset's table schema (see [`crate::convert_page`]) on a blocking
/// thread, writing the widened schema back with [`ObjectStore::put_if`]
/// on the version read, converting again when another page changed it
/// meanwhile (at most [`crate::SCHEMA_WRITE_ATTEMPTS`] times); put every
/// Parquet part and the quarantine file, deleting parts an earlier
/// delivery of this page wrote that this one did not (so a redelivery
/// never leaves duplicates); write the receipt, completing the run when
/// this was its last page.
///
/// Records whose values the dataset's schema cannot take (an incompatible
/// change) are quarantined and a dead letter with the reason goes to the
/// DLQ, so Notify alerts, while the rest of the page is persisted; so are
/// records that would take the dataset past `limits.max_columns`.
///
/// # Errors
/// [`PersistError`]: a new fetch of a page of a completed run
/// ([`PersistError::CompletedRun`]) or of a run that completed while the
/// page was persisted ([`PersistError::CompletedWhileFetched`]), invalid
/// names, a claim-check key outside the
/// message's own pipeline, unreadable or missing claim checks, invalid
/// JSON, a page past `limits.max_page_bytes` or `limits.max_page_records`
/// and conversion failures are permanent (the message is
/// dead-lettered with an alert, its raw payload already kept); store
/// failures are transient.
pub async fn persist_page(message: PersistMessage, deps: Deps<'_>) -> Result<PageReceipt, PersistError> {
    persist_page_after_poison(message, 0, deps).await
}

/// [`persist_page`] of a stream batch, `poison` of whose records
/// ([`crate::stream`]) were quarantined before conversion, beside the
/// page's quarantine file: the receipt counts them among its records in
/// and quarantined, so the run's manifest, its summary and `tributary
/// status` count every record the batch quarantined.
///
/// # Errors
/// As [`persist_page`].
#[tracing::instrument(skip_all, fields(pipeline = %message.pipeline, run_id = %message.run_id, page = message.page.index))]
pub(crate) async fn persist_page_after_poison(
    message: PersistMessage,
    poison: u64,
    deps: Deps<'_>,
) -> Result<PageReceipt, PersistError> {
    let page = PageContext::check(&message, deps)?;
    let previous = page.previous_receipt().await;
    if let Some(receipt) = page.settle_completed_run(previous.as_ref()).await? {
        return Ok(receipt);
    }
    let temp_dir = tempfile::tempdir().map_err(|err| local_error("create temporary folder", err))?;
    let kept = page.keep_raw_page(temp_dir.path()).await?;
    let output = convert_against_table_schema(&message, &kept, temp_dir.path(), deps).await?;
    if let Some(receipt) = page.settle_late_completion(&output).await? {
        return Ok(receipt);
    }
    let written = page.write_outputs(&output, previous.as_ref()).await?;
    if !output.conflicts.is_empty() {
        alert_schema_conflict(&kept.raw, &output, written.quarantine_key.as_deref(), deps).await?;
    }
    let parquet_bytes = written.parquet_bytes;
    // A replay re-derives a stream batch's page from its raw copy, which
    // does not hold the records the batch quarantined before conversion
    // (poison): the page's earlier receipt counts them beyond the raw
    // page's records (a trial's `status` lost a stream run's quarantined
    // record after a replay).
    let poison = match &previous {
        Some(previous) if poison == 0 && deps.config.rewrite_completed_runs => {
            previous.records_in.saturating_sub(output.records_in)
        }
        _ => poison,
    };
    let receipt = page.record_receipt(&output, written, poison, previous).await?;
    emit_metrics(&receipt, &output, parquet_bytes, deps);
    Ok(receipt)
}

/// The page being persisted: its message, the ports, its identity and the
/// keys derived from it. Steps 2, 3, 5 and 7 are its methods.
pub(crate) struct PageContext<'a> {
    /// The message as received.
    pub message: &'a PersistMessage,
    /// The ports and settings.
    pub deps: Deps<'a>,
    /// `target.dataset`.
    pub dataset: String,
    /// The run.
    pub run_id: RunId,
    /// The run's date (`dt=` of the run-date layout).
    pub run_date: NaiveDate,
    /// Index and count.
    pub page: PageRef,
    /// `raw/…/<stem>.json`: the message as received.
    pub raw_key: String,
    /// `raw/…/<stem>.payload`: the claim-check payload's copy.
    pub raw_payload_key: String,
}

impl<'a> PageContext<'a> {
    /// Step 1: the names valid as key segments and the target valid; a page
    /// of an Iceberg dataset needs a committer (never written as plain
    /// Parquet instead).
    ///
    /// # Errors
    /// [`PersistError::Name`] naming the field, [`PersistError::TableFormat`].
    fn check(message: &'a PersistMessage, deps: Deps<'a>) -> Result<Self, PersistError> {
        check_name("pipeline", &message.pipeline)?;
        message.target.validate("target")?;
        let dataset = message.target.dataset.clone();
        if message.target.table_format == TableFormat::Iceberg && deps.tables.is_none() {
            return Err(PersistError::TableFormat { dataset });
        }
        let (run_id, run_date, page) = (message.run_id.clone(), message.run_date, message.page);
        let key = keys::PageKey {
            dataset: &dataset,
            run_date,
            pipeline: &message.pipeline,
            run_id: &run_id,
            page: page.index,
        };
        let (raw_key, raw_payload_key) = (key.raw(), key.raw_payload());
        Ok(PageContext { message, deps, dataset, run_id, run_date, page, raw_key, raw_payload_key })
    }

    /// The receipt an earlier delivery of this page wrote (either layout:
    /// [`ledger::read_receipt`]); `None` when there is none or it cannot
    /// be read (the page is then handled as a first delivery).
    async fn previous_receipt(&self) -> Option<PageReceipt> {
        ledger::read_receipt(self.deps.store, &self.message.pipeline, &self.run_id, self.page.index)
            .await
            .ok()
            .flatten()
    }

    /// The page's lake keys.
    fn key(&self) -> keys::PageKey<'_> {
        keys::PageKey {
            dataset: &self.dataset,
            run_date: self.run_date,
            pipeline: &self.message.pipeline,
            run_id: &self.run_id,
            page: self.page.index,
        }
    }

    /// Step 2: a page of a run already completed. Delivered again (the same
    /// records), its rows are in the run's files (coalesced, or committed to
    /// its table) and its receipt is returned; fetched anew (other records),
    /// it is refused before anything is written, the raw copy included, so the
    /// lake keeps what the table holds. `tributary replay` reopens a run
    /// before replaying it (`rewrite_completed_runs`). `None`: go on.
    ///
    /// # Errors
    /// [`PersistError::CompletedRun`] (permanent); store failures.
    async fn settle_completed_run(&self, previous: Option<&PageReceipt>) -> Result<Option<PageReceipt>, PersistError> {
        if !self.run_completed().await {
            return Ok(None);
        }
        let Some(previous) = previous else { return Ok(None) };
        if same_records(self.message, &self.raw_key, &self.raw_payload_key, self.deps.store).await? {
            tracing::info!("a page of a completed run delivered again; its rows are in the lake already");
            return Ok(Some(previous.clone()));
        }
        Err(PersistError::CompletedRun {
            pipeline: self.message.pipeline.clone(),
            run_id: self.run_id.to_string(),
            page: self.page.index,
        })
    }

    /// Whether the run is complete as far as this page is concerned: its
    /// `_SUCCESS` marker exists (one GET), and this is not a replay (which
    /// rewrites completed runs on purpose).
    async fn run_completed(&self) -> bool {
        !self.deps.config.rewrite_completed_runs
            && self.deps.store.get(&keys::success_key(&self.message.pipeline, &self.run_id)).await.is_ok()
    }

    /// Step 4b: the run completed while this page was read and converted
    /// (a retry's page that passed step 2 just before another page
    /// completed the run). Nothing of the page's is written into the
    /// dataset folder then, so a file the completion took (a page file kept
    /// as it was, or committed to an Iceberg table) is never rewritten in
    /// place. The same records as the receipt the run completed with: a
    /// redelivery, that receipt is returned. Other records (the vendor
    /// answered otherwise this time): refused, see
    /// [`PersistError::CompletedWhileFetched`]. `None`: go on. One GET of
    /// the `_SUCCESS` marker per page; the receipt is read only when the
    /// run is complete.
    ///
    /// # Errors
    /// [`PersistError::CompletedWhileFetched`] (permanent); store failures.
    async fn settle_late_completion(&self, output: &PageOutput) -> Result<Option<PageReceipt>, PersistError> {
        if !self.run_completed().await {
            return Ok(None);
        }
        let Some(completed) = self.previous_receipt().await else { return Ok(None) };
        if !other_records(&completed, output.records_fingerprint.as_ref()) {
            tracing::info!("the run completed while this page was converted; its rows are in the lake already");
            return Ok(Some(completed));
        }
        Err(self.completed_while_fetched("the table holds the fetch the run completed with"))
    }

    /// [`PersistError::CompletedWhileFetched`] for this page; `table` says
    /// what the run's table holds of it.
    fn completed_while_fetched(&self, table: &str) -> PersistError {
        PersistError::CompletedWhileFetched {
            pipeline: self.message.pipeline.clone(),
            run_id: self.run_id.to_string(),
            page: self.page.index,
            table: table.to_string(),
            raw_key: self.raw_key.clone(),
        }
    }

    /// Step 3: the payload (inline, or the claim check read into
    /// `temp_dir` after [`check_claim_key`]) and the raw page kept for replay:
    /// the claim-check payload copied beside it, and the load time (Request's
    /// `fetched_at`, or now) written into it so a replay writes the same rows.
    ///
    /// # Errors
    /// [`PersistError::ClaimKey`] and [`PersistError::Claim`] (permanent);
    /// store failures.
    async fn keep_raw_page(&self, temp_dir: &Path) -> Result<KeptPage, PersistError> {
        let (source, format, raw) = match &self.message.payload {
            Payload::Inline { records } => {
                let bytes = Bytes::copy_from_slice(records.as_str().as_bytes());
                (PageSource::Bytes(bytes), PayloadFormat::default(), self.message.clone())
            }
            Payload::Object { key, format } => {
                check_claim_key(key, &self.message.pipeline, &self.raw_payload_key)?;
                let local = temp_dir.join("payload");
                self.deps.store.get_to_file(key, &local).await.map_err(|err| match err {
                    PortError::NotFound { .. } => PersistError::Claim {
                        key: key.clone(),
                        problem: "does not exist (expired or never written)".into(),
                        source: None,
                    },
                    other => PersistError::Store(other),
                })?;
                if *key != self.raw_payload_key {
                    self.deps.store.put_file(&self.raw_payload_key, &local).await?;
                }
                let payload = Payload::Object { key: self.raw_payload_key.clone(), format: format.clone() };
                (PageSource::File(local), format.clone(), PersistMessage { payload, ..self.message.clone() })
            }
        };
        let fetched_at = self.message.fetched_at.unwrap_or_else(now_to_the_millisecond);
        let raw = PersistMessage { fetched_at: Some(fetched_at), ..raw };
        let lineage = Lineage {
            run_id: self.run_id.to_string(),
            page: self.page.index,
            loaded_at_ms: fetched_at.timestamp_millis(),
        };
        let raw_bytes = serde_json::to_vec(&raw).map_err(|err| encode_error("encode raw page", &self.raw_key, err))?;
        self.deps.store.put(&self.raw_key, Bytes::from(raw_bytes)).await?;
        Ok(KeptPage { source, format, raw, lineage, raw_key: self.raw_key.clone() })
    }

    /// Step 5: every Parquet part at its deterministic key, the parts an
    /// earlier delivery of this page wrote that this one did not deleted (so
    /// a redelivery never leaves duplicates), and the quarantine file.
    ///
    /// # Errors
    /// Store failures (transient).
    async fn write_outputs(
        &self,
        output: &PageOutput,
        previous: Option<&PageReceipt>,
    ) -> Result<Written, PersistError> {
        let key = self.key();
        let mut data_keys = Vec::with_capacity(output.files.len());
        let mut parquet_bytes = 0;
        for file in &output.files {
            let part = key.data_part(&file.partition, file.part);
            self.deps.store.put_file(&part, &file.path).await?;
            parquet_bytes += file.bytes;
            data_keys.push(part);
        }
        self.delete_stale_parts(&data_keys, previous).await?;
        let quarantine_key = match &output.quarantine {
            None => None,
            Some(quarantine) => {
                let quarantine_key = key.quarantine();
                self.deps.store.put_file(&quarantine_key, &quarantine.path).await?;
                tracing::warn!(quarantined = quarantine.records, key = quarantine_key, reasons = ?quarantine.sample_reasons, "records quarantined");
                Some(quarantine_key)
            }
        };
        Ok(Written { data_keys, parquet_bytes, quarantine_key })
    }

    /// Deletes the parts the page's previous receipt lists that `data_keys`
    /// does not: only this page's own parts, in the same dataset folder with
    /// the same `<pipeline>-<run_id>-<page>` file stem (a receipt of another
    /// dataset fed by the same pipeline, run and page must not delete that
    /// dataset's files).
    async fn delete_stale_parts(
        &self,
        data_keys: &[String],
        previous: Option<&PageReceipt>,
    ) -> Result<(), PersistError> {
        let Some(previous) = previous else { return Ok(()) };
        let stem = format!("/{}", keys::page_stem(&self.message.pipeline, &self.run_id, self.page.index));
        let own = |key: &&String| {
            key.starts_with(&format!("{}/", self.dataset))
                && key.rsplit_once('/').is_some_and(|(_, name)| format!("/{name}").starts_with(&stem))
        };
        for stale in previous.data_keys.iter().filter(own).filter(|k| !data_keys.contains(k)) {
            tracing::info!(key = %stale, "deleting a part an earlier delivery of this page wrote");
            self.deps.store.delete(stale).await?;
        }
        Ok(())
    }

    /// Step 7: the page receipt, recorded in the run's ledger, which completes
    /// the run when this was its last page (coalescing its files, or
    /// committing them to its Iceberg table). When the run turns out
    /// complete already (it completed after step 4b), the files this page
    /// wrote that the manifest does not list are deleted
    /// ([`drop_files_outside_manifest`]); when this page holds other
    /// records than `previous`, the receipt the run completed with, that
    /// receipt is recorded again and the page fails.
    ///
    /// # Errors
    /// [`PersistError::CompletedWhileFetched`] (permanent); store
    /// failures; a completion that fails (permanent or transient, as the
    /// coalescer or committer says).
    /// `poison`: records of a stream batch quarantined before conversion
    /// ([`persist_page_after_poison`]), counted in and quarantined.
    async fn record_receipt(
        &self,
        output: &PageOutput,
        written: Written,
        poison: u64,
        previous: Option<PageReceipt>,
    ) -> Result<PageReceipt, PersistError> {
        let receipt = PageReceipt {
            pipeline: self.message.pipeline.clone(),
            run_id: self.run_id.clone(),
            run_date: self.run_date,
            dataset: self.dataset.clone(),
            page: self.page.index,
            page_count: self.page.count,
            records_in: output.records_in + poison,
            records_persisted: output.rows_written,
            records_quarantined: output.quarantined() + poison,
            data_keys: written.data_keys,
            data_bytes: written.parquet_bytes,
            quarantine_key: written.quarantine_key,
            raw_key: self.raw_key.clone(),
            schema: (output.rows_written > 0).then(|| format!("{:?}", output.arrow_schema.fields())),
            table_commit: self.message.target.table_format == TableFormat::Iceberg,
            records_fingerprint: output.records_fingerprint.clone(),
            schema_changes: output.schema_changes.clone(),
            on_schema_change: self.message.target.on_schema_change,
        };
        let coalescer = RunCoalescer {
            store: self.deps.store,
            table_format: self.message.target.table_format,
            tables: self.deps.tables,
            write: tributary_core::tables::RunWrite::of(&self.message.target),
            bin_bytes: crate::coalesce::COALESCE_BELOW_BYTES,
            replay: None,
        };
        let ledger = ledger::RunLedger { store: self.deps.store, events: self.deps.run_events };
        let completion = ledger.record_page(&receipt, Some(&coalescer)).await?;
        // The run completed between step 4b and this page's writes (a
        // delivery racing the completion): the completion took this page's
        // files before they were written again. (A replay rewrites
        // completed runs on purpose, and coalesces them again after.)
        if completion == ledger::Completion::AlreadyComplete && !self.deps.config.rewrite_completed_runs {
            let dropped = drop_files_outside_manifest(self.deps.store, &receipt).await?;
            let Some(previous) = previous.filter(|p| other_records(p, receipt.records_fingerprint.as_ref())) else {
                return Ok(receipt); // a redelivery: the table holds these records
            };
            if dropped.is_empty() {
                // The completion kept this page's file as it was, and it
                // was written again since: it holds this fetch now.
                return Err(self.completed_while_fetched(
                    "the run's file of this page was written again with this fetch after the run completed, so the \
                     run's manifest and table metadata count the earlier fetch",
                ));
            }
            // The ledger says again what the run completed with.
            ledger.record_page(&previous, None).await?;
            return Err(self.completed_while_fetched("the table holds the fetch the run completed with"));
        }
        Ok(receipt)
    }
}

/// Completes run `run_id` of `pipeline` into `target`'s dataset when it
/// holds a receipt for every page and is not complete: the completion the
/// delivery of its last page runs after writing that page's receipt
/// (the run's Parquet files coalesced, or its staged files committed to
/// its Iceberg table; then its manifest, the run-completed event and its
/// `_SUCCESS` marker). For a run whose last delivery died between the two:
/// on AWS the message comes back (it was not deleted) and completes the
/// run itself, but a local `tributary run` killed there loses it, and its
/// next attempt fetches nothing, as every page is in. Idempotent: a
/// complete run is [`ledger::Completion::AlreadyComplete`], a run missing
/// pages [`ledger::Completion::NotYet`].
///
/// # Errors
/// [`PersistError::Store`] from the store, the table's commit or the
/// run-events topic: the reason the completion fails (the same one a
/// redelivery of the last page would meet).
pub async fn finish_run(
    target: &contracts::PersistTarget,
    pipeline: &str,
    run_id: &RunId,
    deps: Deps<'_>,
) -> Result<ledger::Completion, PersistError> {
    let coalescer = RunCoalescer {
        store: deps.store,
        table_format: target.table_format,
        tables: deps.tables,
        write: tributary_core::tables::RunWrite::of(target),
        bin_bytes: crate::coalesce::COALESCE_BELOW_BYTES,
        replay: None,
    };
    let ledger = ledger::RunLedger { store: deps.store, events: deps.run_events };
    Ok(ledger.complete_with(pipeline, run_id, &coalescer).await?)
}

/// The page's payload, ready to convert, and its raw copy as kept.
pub(crate) struct KeptPage {
    /// The records: the inline text, or the claim check spilled to a file.
    pub source: PageSource,
    /// How they are framed.
    pub format: PayloadFormat,
    /// The raw page as written under `raw/` (claim check: pointing at the
    /// payload's copy), with the load time set.
    pub raw: PersistMessage,
    /// The lineage columns' values.
    pub lineage: Lineage,
    /// Where the raw page is (`raw/…/<stem>.json`).
    pub raw_key: String,
}

/// Now, cut to the millisecond (the lineage column's unit), so the raw
/// copy and the rows hold the same instant.
fn now_to_the_millisecond() -> DateTime<Utc> {
    let now = Utc::now();
    DateTime::from_timestamp_millis(now.timestamp_millis()).unwrap_or(now)
}

/// What [`PageContext::write_outputs`] put in the lake.
struct Written {
    data_keys: Vec<String>,
    parquet_bytes: u64,
    quarantine_key: Option<String>,
}

/// Step 8: the page's log line and EMF metrics (the page, records
/// persisted and quarantined, Parquet bytes).
fn emit_metrics(receipt: &PageReceipt, output: &PageOutput, parquet_bytes: u64, deps: Deps<'_>) {
    tracing::info!(
        records = receipt.records_persisted,
        quarantined = receipt.records_quarantined,
        files = receipt.data_keys.len(),
        input_bytes = output.input_bytes,
        "page persisted"
    );
    let mut emf = Metrics::new("persist", &receipt.pipeline);
    emf.count(metrics::PAGES_PERSISTED, 1);
    emf.count(metrics::RECORDS_PERSISTED, receipt.records_persisted);
    // The page's own quarantine: a stream batch's poison records, counted
    // in the receipt, are emitted per shard by `crate::stream`, once.
    emf.count(metrics::RECORDS_QUARANTINED, output.quarantined());
    emf.bytes(metrics::BYTES_PERSISTED, parquet_bytes);
    emf.property("run_id", Value::String(receipt.run_id.to_string()));
    emf.property("page", Value::from(receipt.page));
    emf.property("dataset", Value::String(receipt.dataset.clone()));
    emf.flush_to(&deps.config.metrics);
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

/// Whether a page converted to `fingerprint` holds other records than
/// `receipt` says its page held ([`PageReceipt::records_fingerprint`]);
/// `false` when either is unknown (a receipt written before fingerprints).
fn other_records(receipt: &PageReceipt, fingerprint: Option<&String>) -> bool {
    matches!((&receipt.records_fingerprint, fingerprint), (Some(held), Some(new)) if held != new)
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
        None if key.starts_with(keys::CLAIMS_PREFIX) => "is another pipeline's claim check",
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

/// Step 6: an incompatible schema change: a dead letter with the reason
/// (the raw page as a claim check to it) goes to the DLQ, so Notify alerts,
/// while the rest of the page is persisted. Without a DLQ only the log
/// says it.
///
/// # Errors
/// The DLQ refused the message.
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
    let body = serde_json::to_string(&envelope).map_err(|err| encode_error("encode alert", &target.dlq, err))?;
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
