//! Small files: when Persist completes a run, the run's page files of each
//! partition are coalesced into one file, before the run's manifest and
//! `_SUCCESS` marker are written.
//!
//! A run of many small pages (the Athena-driven strategy makes one page per
//! row) would otherwise leave one file per page per partition, mostly
//! footer. At completion, each partition's page files of the run, when
//! there are two or more and together less than [`COALESCE_BELOW_BYTES`],
//! are read, aligned to the dataset's published table schema (a column a
//! page did not have yet is null) and written as one file
//! `<dataset>/<partition>/<pipeline>-<run_id>.parquet`, in page order; the
//! page files are then deleted. Larger outputs keep their page files (each
//! is large already).
//!
//! Under at-least-once delivery: the coalesced key is deterministic, so a
//! completion that runs twice writes the same file, and two pages that
//! complete the run together both succeed (the later one finds the page
//! files gone and the coalesced file in place); a page of a completed
//! run delivered again is not written again (its rows are in the coalesced
//! file, see `persist_page`); `tributary replay` writes a completed run's
//! pages again (`PersistConfig::rewrite_completed_runs`) and then
//! coalesces the run again ([`recoalesce_run`]), overwriting its coalesced
//! files; for a run with a page that failed to replay, it deletes the pages
//! it wrote instead (their rows are still in the coalesced file).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_schema::{Schema, SchemaRef};
use bytes::Bytes;
use contracts::TableFormat;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use tributary_core::keys;
use tributary_core::ledger::{Compactor, PageReceipt};
use tributary_core::ports::{ObjectStore, PortError};
use tributary_core::tables::{RunFiles, TableCommitter};

use lake_format::align::{Cast, align_batch};
use lake_format::codec::decode_arrow_schema;
use lake_format::meta::META_PARTITION;

/// A run's page files of one partition are coalesced when together they
/// are smaller than this (64 MiB); bigger outputs keep their files.
pub const COALESCE_BELOW_BYTES: u64 = 64 << 20;

/// The [`Compactor`] Persist completes runs with.
pub struct RunCoalescer<'a> {
    /// The lake.
    pub store: &'a dyn ObjectStore,
    /// The run's dataset's table format (the completing page's
    /// `target.table_format`): `iceberg` hands the run's staged files to
    /// `tables` instead of coalescing them.
    pub table_format: TableFormat,
    /// Commits an Iceberg dataset's runs (`None`: no Iceberg; such a
    /// run's completion fails permanently).
    pub tables: Option<&'a dyn TableCommitter>,
}

#[async_trait::async_trait]
impl Compactor for RunCoalescer<'_> {
    async fn compact(&self, receipts: &[PageReceipt]) -> Result<Vec<String>, PortError> {
        let Some(first) = receipts.first() else { return Ok(Vec::new()) };
        let mut receipts: Vec<&PageReceipt> = receipts.iter().collect();
        receipts.sort_by_key(|r| r.page);
        if self.table_format == TableFormat::Iceberg {
            return self.commit_to_table(&receipts).await;
        }
        // (dataset, partition folder) -> the pages' files, in page order.
        let mut groups: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for receipt in &receipts {
            for key in &receipt.data_keys {
                let (folder, _) = key.rsplit_once('/').unwrap_or(("", key));
                groups.entry((receipt.dataset.clone(), folder.to_string())).or_default().push(key.clone());
            }
        }
        let mut files = Vec::new();
        for ((dataset, folder), keys) in groups {
            if keys.len() < 2 {
                files.extend(keys);
                continue;
            }
            match self.coalesce(&dataset, &folder, &keys, &first.pipeline, first.run_id.as_str()).await? {
                Some(key) => files.push(key),
                None => files.extend(keys),
            }
        }
        Ok(files)
    }
}

impl RunCoalescer<'_> {
    /// Coalesces `keys` into one file in `folder`; `None` when they are too
    /// big together, or the dataset has no published schema.
    async fn coalesce(
        &self,
        dataset: &str,
        folder: &str,
        keys: &[String],
        pipeline: &str,
        run_id: &str,
    ) -> Result<Option<String>, PortError> {
        let schema_key = keys::arrow_schema_key(dataset);
        let schema = match self.store.get(&schema_key).await {
            Ok(bytes) => {
                decode_arrow_schema(&bytes).map_err(|err| permanent("read the published schema", &schema_key, err))?
            }
            Err(PortError::NotFound { .. }) => return Ok(None),
            Err(err) => return Err(err),
        };
        let target: SchemaRef = Arc::new(Schema::new(
            schema.fields().iter().filter(|f| !f.metadata().contains_key(META_PARTITION)).cloned().collect::<Vec<_>>(),
        ));
        let key = keys::coalesced_key(folder, pipeline, run_id);
        let mut pages = Vec::with_capacity(keys.len());
        let mut total = 0;
        for page_key in keys {
            let bytes = match self.store.get(page_key).await {
                Ok(bytes) => bytes,
                // Two pages that finish together both see every receipt and
                // both complete the run. The first writes the coalesced file
                // and then deletes the page files, so a missing page file
                // beside the coalesced file is that rival's work, done.
                Err(PortError::NotFound { .. }) if self.exists(&key).await? => {
                    tracing::info!(key, "the run's files were coalesced by a concurrent completion");
                    return Ok(Some(key));
                }
                // A page file gone with no coalesced file: retried (the
                // rival may be between its writes), then dead-lettered.
                Err(PortError::NotFound { target, .. }) => {
                    return Err(PortError::Transient {
                        operation: "read a page file to coalesce",
                        target,
                        message: format!("the page file is gone and {key} does not exist"),
                    });
                }
                Err(err) => return Err(err),
            };
            total += bytes.len() as u64;
            if total >= COALESCE_BELOW_BYTES {
                return Ok(None);
            }
            pages.push((page_key, bytes));
        }
        let merged = merge(&pages, &target).map_err(|message| PortError::Permanent {
            operation: "coalesce the run's files",
            target: key.clone(),
            message,
        })?;
        self.store.put(&key, Bytes::from(merged)).await?;
        for (page_key, _) in &pages {
            self.store.delete(page_key).await?;
        }
        tracing::info!(key, files = pages.len(), bytes = total, "the run's page files coalesced");
        Ok(Some(key))
    }
}

impl RunCoalescer<'_> {
    /// An Iceberg dataset's completion: the run's staged files, per
    /// dataset in page order, committed in one snapshot by the table
    /// committer; the table's data files are the run's files.
    async fn commit_to_table(&self, receipts: &[&PageReceipt]) -> Result<Vec<String>, PortError> {
        let Some(first) = receipts.first() else { return Ok(Vec::new()) };
        let mut by_dataset: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for receipt in receipts {
            by_dataset.entry(&receipt.dataset).or_default().extend(receipt.data_keys.iter().cloned());
        }
        let mut files = Vec::new();
        for (dataset, keys) in by_dataset {
            if keys.is_empty() {
                continue;
            }
            let Some(tables) = self.tables else {
                return Err(PortError::Permanent {
                    operation: "commit the run to its Iceberg table",
                    target: dataset.to_string(),
                    message: "target.table_format is iceberg but this Persist has no table committer".into(),
                });
            };
            let run = RunFiles::new(dataset, &first.pipeline, &first.run_id, &keys);
            files.extend(tables.commit_run(&run).await?.files);
        }
        Ok(files)
    }

    async fn exists(&self, key: &str) -> Result<bool, PortError> {
        match self.store.get(key).await {
            Ok(_) => Ok(true),
            Err(PortError::NotFound { .. }) => Ok(false),
            Err(err) => Err(err),
        }
    }
}

/// Coalesces a completed run's page files again (after a replay wrote
/// them) and rewrites its manifest's file list. A run whose files were not
/// coalesced (each partition had one file, or too many bytes) keeps them.
///
/// # Errors
/// [`PortError`] from the store.
pub async fn recoalesce_run(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &contracts::RunId,
) -> Result<(), PortError> {
    let receipts = tributary_core::ledger::run_receipts(store, pipeline, run_id).await?;
    let files = RunCoalescer { store, table_format: TableFormat::Parquet, tables: None }.compact(&receipts).await?;
    tributary_core::ledger::replace_manifest_files(store, pipeline, run_id, files).await
}

fn permanent(operation: &'static str, key: &str, err: impl std::fmt::Display) -> PortError {
    PortError::Permanent { operation, target: key.to_string(), message: err.to_string() }
}

/// The files' rows, in order, aligned to `target`, as one Parquet file.
fn merge(pages: &[(&String, Bytes)], target: &SchemaRef) -> Result<Vec<u8>, String> {
    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).map_err(|e| e.to_string())?))
        .set_dictionary_page_size_limit(crate::convert::DICTIONARY_PAGE_BYTES)
        .build();
    let mut writer = ArrowWriter::try_new(Vec::new(), target.clone(), Some(properties)).map_err(|e| e.to_string())?;
    for (key, bytes) in pages {
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())
            .and_then(|builder| builder.build())
            .map_err(|err| format!("{key}: {err}"))?;
        for batch in reader {
            let batch = batch.map_err(|err| format!("{key}: {err}"))?;
            writer
                .write(&align_batch(&batch, target, Cast::Exact).map_err(|err| format!("{key}: {err}"))?)
                .map_err(|e| e.to_string())?;
        }
    }
    writer.into_inner().map_err(|e| e.to_string())
}
