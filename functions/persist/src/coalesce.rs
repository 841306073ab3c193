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
//! # A completion that dies part-way
//!
//! A Lambda can be killed at any instant (its time-out; a run of some
//! 10,000 small pages spends minutes deleting page files), and its message
//! is then delivered again. So the replacement is a protocol that a retry
//! resumes, whatever instant the previous attempt died at
//! ([`RunCoalescer::compact`]):
//!
//! 1. Plan (only when the run has no replacement record yet): per
//!    partition, read the page files, merge them and PUT the merged file
//!    *staged*, at `_runs/<pipeline>/<run_id>/coalesced/<group>.parquet`
//!    ([`keys::staged_coalesced_key`]), outside every dataset folder, so no
//!    reader (Glue/Athena, DuckDB, DataFusion, all of which read a
//!    dataset's whole folder) sees it. Nothing in a dataset folder changes.
//!    A page file missing here is never taken for a finished rival: only a
//!    replacement record says that (a rival that got there first is
//!    followed); without one it is a transient error.
//! 2. Write the replacement record ([`Replacement`],
//!    [`keys::replacement_key`]) with a create-only
//!    [`ObjectStore::put_if`]: each coalesced file's key, its staged copy,
//!    exactly the page files it replaces and its rows, and the run's final
//!    file list. Of two concurrent completers one record wins; the other
//!    follows it.
//! 3. Replace, from the record alone ([`RunCoalescer::replace`]): per
//!    coalesced file, copy the staged file to its key in the dataset folder
//!    (when the staged copy is gone, the copy was made: the key must exist),
//!    then delete the page files it replaces that a LIST still finds
//!    ([`DELETES_AT_ONCE`] at a time; a retry deletes only what is left, so
//!    each attempt makes progress); then delete the staged copies.
//! 4. Return the record's file list: the ledger writes the manifest, the
//!    cursor, the run-completed event and `_SUCCESS` (each rewritten the
//!    same by a retry).
//!
//! A retry that finds the record skips step 1 and 2 and finishes step 3,
//! so every retry ends in the same state: the coalesced files and kept
//! page files the record lists, no replaced page file, no staged file.
//! While a record has no `_SUCCESS` beside it the run is *completing*
//! (`tributary status`), and the dataset folder may briefly hold a
//! coalesced file beside page files it replaces (between the copy and the
//! deletes: S3 has no rename); `_SUCCESS` is written only once they are gone.
//!
//! Under at-least-once delivery: a page of a completed run delivered again
//! is not written again (its rows are in the coalesced file, see
//! `persist_page`); `tributary replay` writes a completed run's pages again
//! (`PersistConfig::rewrite_completed_runs`) and then coalesces the run
//! again ([`recoalesce_run`]: the old record forgotten, a new one planned),
//! overwriting its coalesced files; for a run with a page that failed to
//! replay, it deletes the pages it wrote instead (their rows are still in
//! the coalesced file).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow_schema::{Schema, SchemaRef};
use bytes::Bytes;
use contracts::{RunId, TableFormat};
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};
use tributary_core::keys;
use tributary_core::ledger::{Compacted, Compactor, PageReceipt};
use tributary_core::ports::{ObjectStore, PortError};
use tributary_core::tables::{RunFiles, RunWrite, TableCommitter};

use lake_format::align::{Cast, align_batch};
use lake_format::codec::decode_arrow_schema;
use lake_format::meta::META_PARTITION;

/// A run's page files of one partition are packed into coalesced files
/// of page files together smaller than this (64 MiB: a Parquet file Athena
/// and Spark split well, read whole within the Persist Lambda's memory); a
/// page file this big or bigger is kept as it is.
pub const COALESCE_BELOW_BYTES: u64 = 64 << 20;

/// Page files deleted at once when they are replaced: 10,000 page files at
/// about 20 ms a `DeleteObject` take 200 s one by one, about 6 s 32 at a
/// time (computed; S3 takes 3,500 writes a second per prefix).
pub const DELETES_AT_ONCE: usize = 32;

/// A run's replacement record, `_runs/<pipeline>/<run_id>/replacement.json`
/// ([`keys::replacement_key`]): what the run's coalesced files replace,
/// written once (create-only) before the first page file is deleted, and
/// finished by every completion of the run that finds it (see the module
/// documentation). Kept after the run completes, as the record of what was
/// replaced; `tributary replay` forgets it
/// ([`tributary_core::ledger::forget_replacement`]) before the run is
/// coalesced again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replacement {
    /// Pipeline name.
    pub pipeline: String,
    /// Run id.
    pub run_id: RunId,
    /// Each coalesced file and the page files it replaces, by partition
    /// folder (sorted by dataset and folder).
    pub coalesced: Vec<CoalescedFile>,
    /// The run's data files once every replacement is done: the coalesced
    /// files, and the page files kept (a partition with one file, or with
    /// [`COALESCE_BELOW_BYTES`] or more), sorted: the manifest's `files`.
    pub files: Vec<String>,
}

/// One coalesced file of a [`Replacement`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoalescedFile {
    /// Its key in the dataset folder, where readers read it:
    /// `<dataset>/<partition>/<pipeline>-<run_id>.parquet`.
    pub key: String,
    /// Where it was staged before: `_runs/<pipeline>/<run_id>/coalesced/<group:05>.parquet`
    /// (deleted once `key` is written and `pages` are deleted).
    pub staged: String,
    /// Exactly the page files it replaces, in page order.
    pub pages: Vec<String>,
    /// Its rows: the sum of the pages' rows.
    pub rows: u64,
}

/// A run's replacement record as [`RunCoalescer::plan`] builds it, bin
/// by bin.
struct Packing<'a> {
    pipeline: &'a str,
    run_id: &'a RunId,
    /// The partition folder being packed, and its coalesced files so far.
    folder: String,
    bins: usize,
    /// Files staged so far, all partitions.
    staged: usize,
    coalesced: Vec<CoalescedFile>,
    files: Vec<String>,
}

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
    /// How an Iceberg run changes its table (the completing page's
    /// `target.write`); Parquet datasets only append.
    pub write: RunWrite,
    /// A Parquet run's page files of one partition are packed, in page
    /// order, into coalesced files of less than this many bytes of page
    /// files each ([`COALESCE_BELOW_BYTES`] in production).
    pub bin_bytes: u64,
    /// A stream window of a replay on AWS ([`crate::stream_replay`]): its
    /// Iceberg commit replaces the rows of the original windows it
    /// re-derives, in one `overwrite` snapshot naming the replay. `None`:
    /// every other run.
    pub replay: Option<ReplayCommit>,
}

/// How a replayed stream window commits ([`RunCoalescer::replay`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayCommit {
    /// The replay's token (`tributary.rerun` of its snapshots): a snapshot
    /// of the window's run naming it is the window committed, so a close
    /// delivered again commits nothing twice.
    pub token: String,
    /// The original window runs whose rows (`_tributary_run_id`) the
    /// window's commit removes; empty: the window re-derives none (records
    /// newer than the replay's start), and commits as any window does.
    pub replaces: Vec<RunId>,
}

#[async_trait::async_trait]
impl Compactor for RunCoalescer<'_> {
    /// The run's final data files: an Iceberg run's committed files, or a
    /// Parquet run's files after its [`Replacement`] is done: the record
    /// found (an earlier or concurrent completion wrote it) or planned and
    /// written now, then finished ([`RunCoalescer::replace`]).
    ///
    /// # Errors
    /// [`PortError`] from the store; a page file missing while the run has
    /// no replacement record is [`PortError::Transient`] naming it (retried,
    /// then dead-lettered with an alert).
    async fn compact(&self, receipts: &[PageReceipt], partial: Option<&str>) -> Result<Compacted, PortError> {
        let Some(first) = receipts.first() else { return Ok(Compacted::default()) };
        let mut receipts: Vec<&PageReceipt> = receipts.iter().collect();
        receipts.sort_by_key(|r| r.page);
        if self.table_format == TableFormat::Iceberg {
            return self.commit_to_table(&receipts, partial).await;
        }
        let replacement = match read_replacement(self.store, &first.pipeline, &first.run_id).await? {
            Some(found) => {
                tracing::info!(coalesced = found.coalesced.len(), "finishing the run's replacement record");
                found
            }
            None => self.plan(&receipts, &first.pipeline, &first.run_id).await?,
        };
        self.replace(&replacement).await?;
        Ok(Compacted { files: replacement.files, notes: Vec::new() })
    }
}

impl RunCoalescer<'_> {
    /// Steps 1 and 2: stages each partition's coalesced file and writes the
    /// run's replacement record (create-only); a rival's record, written
    /// first, is returned instead.
    async fn plan(&self, receipts: &[&PageReceipt], pipeline: &str, run_id: &RunId) -> Result<Replacement, PortError> {
        // (dataset, partition folder) -> the pages' files, in page order.
        let mut groups: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for receipt in receipts {
            for key in &receipt.data_keys {
                let (folder, _) = key.rsplit_once('/').unwrap_or(("", key));
                groups.entry((receipt.dataset.clone(), folder.to_string())).or_default().push(key.clone());
            }
        }
        let mut packing = Packing {
            pipeline,
            run_id,
            folder: String::new(),
            bins: 0,
            staged: 0,
            coalesced: Vec::new(),
            files: Vec::new(),
        };
        for ((dataset, folder), pages) in groups {
            if pages.len() < 2 {
                packing.files.extend(pages);
                continue;
            }
            let Some(schema) = self.table_schema(&dataset).await? else {
                packing.files.extend(pages);
                continue;
            };
            (packing.folder, packing.bins) = (folder, 0);
            // Bin-packed in page order: each bin's pages together under
            // `bin_bytes`, whatever the partition's total; one page is
            // read at a time and merged as it is read ([`Bin`]).
            let mut bin = Bin::default();
            for page_key in pages {
                let bytes = match self.store.get(&page_key).await {
                    Ok(bytes) => bytes,
                    Err(PortError::NotFound { .. }) => return self.rivals_record(pipeline, run_id, &page_key).await,
                    Err(err) => return Err(err),
                };
                if !bin.pages.is_empty() && bin.bytes + bytes.len() as u64 >= self.bin_bytes {
                    self.close_bin(std::mem::take(&mut bin), &mut packing).await?;
                }
                bin.add(page_key, bytes, &schema, &mut packing)?;
            }
            self.close_bin(bin, &mut packing).await?;
        }
        let Packing { coalesced, mut files, .. } = packing;
        files.sort();
        let replacement = Replacement { pipeline: pipeline.to_string(), run_id: run_id.clone(), coalesced, files };
        let key = keys::replacement_key(pipeline, run_id);
        let body = serde_json::to_vec(&replacement)
            .map_err(|err| PortError::permanent("encode the replacement record", &key, err))?;
        if self.store.put_if(&key, Bytes::from(body), None).await? {
            tracing::info!(key, coalesced = replacement.coalesced.len(), "the run's replacement record written");
            return Ok(replacement);
        }
        self.rivals_record(pipeline, run_id, &key).await
    }

    /// The replacement record a concurrent completion wrote (it deletes
    /// page files only after writing it); without one, `missing` (a page
    /// file gone, or the record that was there a moment ago) is a
    /// transient error: never taken for a finished rival.
    async fn rivals_record(&self, pipeline: &str, run_id: &RunId, missing: &str) -> Result<Replacement, PortError> {
        match read_replacement(self.store, pipeline, run_id).await? {
            Some(found) => {
                tracing::info!(missing, "a concurrent completion wrote the run's replacement record; following it");
                Ok(found)
            }
            None => Err(PortError::transient_msg(
                "read a page file to coalesce",
                missing.to_string(),
                format!(
                    "it is gone and the run has no replacement record {} (no completion replaced it)",
                    keys::replacement_key(pipeline, run_id)
                ),
            )),
        }
    }

    /// The dataset's table schema without its partition columns (what a
    /// coalesced file holds); `None` when it has none yet. Read from the
    /// table schema itself (`_schema/<dataset>.json`, which pages only
    /// ever widen, by conditional writes), not from its published Arrow
    /// form, which a page that converted against an older version could
    /// once put back after a newer one: the coalesced file then lost the
    /// columns the run's later pages added (a trial). The Arrow form is
    /// read only for a dataset without the JSON one.
    async fn table_schema(&self, dataset: &str) -> Result<Option<SchemaRef>, PortError> {
        let table_key = keys::schema_key(dataset);
        let schema = match crate::table::read_schema(self.store, &table_key).await {
            Ok(Some((table, _))) => table.arrow_schema(),
            Ok(None) => {
                let schema_key = keys::arrow_schema_key(dataset);
                match self.store.get(&schema_key).await {
                    Ok(bytes) => decode_arrow_schema(&bytes)
                        .map_err(|err| PortError::permanent("read the published schema", &schema_key, err))?,
                    Err(PortError::NotFound { .. }) => return Ok(None),
                    Err(err) => return Err(err),
                }
            }
            Err(crate::PersistError::Store(err)) => return Err(err),
            Err(err) => return Err(PortError::permanent_msg("read the table schema", table_key, err.to_string())),
        };
        Ok(Some(Arc::new(Schema::new(
            schema.fields().iter().filter(|f| !f.metadata().contains_key(META_PARTITION)).cloned().collect::<Vec<_>>(),
        ))))
    }

    /// Step 1 for one bin of a partition's pages: two or more merged and
    /// PUT staged, as the partition's next coalesced file; one kept as it is.
    async fn close_bin(&self, bin: Bin, packing: &mut Packing<'_>) -> Result<(), PortError> {
        let Bin { pages, bytes, merger, .. } = bin;
        let Some(merger) = merger else {
            packing.files.extend(pages);
            return Ok(());
        };
        let staged = merger.staged.clone();
        let (merged, rows) = merger.finish()?;
        self.store.put_file(&staged, &merged).await?;
        tracing::info!(staged, files = pages.len(), bytes, rows, "a bin of the run's page files coalesced (staged)");
        let key = keys::coalesced_bin_key(&packing.folder, packing.pipeline, packing.run_id.as_str(), packing.bins);
        packing.bins += 1;
        packing.files.push(key.clone());
        packing.coalesced.push(CoalescedFile { key, staged, pages, rows });
        Ok(())
    }

    /// Step 3: the record's coalesced files put in place and the page files
    /// they replace deleted, then the staged copies deleted. Idempotent:
    /// a retry after any of these calls ends in the same state.
    ///
    /// # Errors
    /// [`PortError`] from the store; a coalesced file with neither its
    /// staged copy nor itself is [`PortError::Transient`] naming its pages.
    pub async fn replace(&self, replacement: &Replacement) -> Result<(), PortError> {
        let prefix = keys::staged_coalesced_prefix(&replacement.pipeline, &replacement.run_id);
        let staged: BTreeSet<String> = self.store.list(&prefix).await?.into_iter().collect();
        for file in &replacement.coalesced {
            self.put_in_place(file, staged.contains(&file.staged)).await?;
            let left = self.pages_left(replacement, file).await?;
            let deletes: Vec<_> = left.iter().map(|page| self.store.delete(page)).collect();
            futures::stream::iter(deletes).buffer_unordered(DELETES_AT_ONCE).try_collect::<()>().await?;
            tracing::info!(
                key = file.key,
                pages = file.pages.len(),
                deleted = left.len(),
                rows = file.rows,
                "page files replaced"
            );
        }
        for file in replacement.coalesced.iter().filter(|file| staged.contains(&file.staged)) {
            self.store.delete(&file.staged).await?;
        }
        Ok(())
    }

    /// The page files `file` replaces that are still there (one LIST per
    /// 1,000 of the run's files in the folder), so that a retry deletes only
    /// what the killed attempt left: each retry makes progress, however
    /// many page files the run has.
    async fn pages_left<'r>(
        &self,
        replacement: &Replacement,
        file: &'r CoalescedFile,
    ) -> Result<Vec<&'r String>, PortError> {
        let (folder, _) = file.key.rsplit_once('/').unwrap_or(("", &file.key));
        let prefix = keys::run_page_files_prefix(folder, &replacement.pipeline, replacement.run_id.as_str());
        let listed: BTreeSet<String> = self.store.list(&prefix).await?.into_iter().collect();
        Ok(file.pages.iter().filter(|page| listed.contains(*page)).collect())
    }

    /// Copies `file`'s staged copy to its key; without a staged copy (a
    /// completion before this one made the copy and then deleted it), the
    /// key must exist.
    async fn put_in_place(&self, file: &CoalescedFile, staged: bool) -> Result<(), PortError> {
        if staged {
            match self.store.copy(&file.staged, &file.key).await {
                Ok(()) => return Ok(()),
                // A concurrent completion made the copy and deleted it.
                Err(PortError::NotFound { .. }) => {}
                Err(err) => return Err(err),
            }
        }
        if self.exists(&file.key).await? {
            return Ok(());
        }
        Err(PortError::transient_msg(
            "finish the run's replacement record",
            file.key.clone(),
            format!(
                "neither it nor its staged copy {} exists, so the rows of the page files it replaces ({}) may be \
                 gone: replay the run from raw/",
                file.staged,
                file.pages.join(", ")
            ),
        ))
    }
}

/// The run's replacement record, `None` when it has none.
async fn read_replacement(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
) -> Result<Option<Replacement>, PortError> {
    tributary_core::ledger::read_record(store, &keys::replacement_key(pipeline, run_id)).await
}

impl RunCoalescer<'_> {
    /// An Iceberg dataset's completion: the run's staged files, per
    /// dataset in page order, committed in one snapshot by the table
    /// committer; the table's data files are the run's files.
    async fn commit_to_table(&self, receipts: &[&PageReceipt], partial: Option<&str>) -> Result<Compacted, PortError> {
        let Some(first) = receipts.first() else { return Ok(Compacted::default()) };
        if let (RunWrite::Replace, Some(partial)) = (&self.write, partial) {
            return Err(refuse_partial_replace(&first.dataset, &first.run_id, partial));
        }
        let mut by_dataset: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for receipt in receipts {
            by_dataset.entry(&receipt.dataset).or_default().extend(receipt.data_keys.iter().cloned());
        }
        let (rerun, replaces) = match &self.replay {
            Some(replay) if !replay.replaces.is_empty() => (None, Some(replay)),
            _ => (tributary_core::rerun::reopened_token(self.store, &first.pipeline, &first.run_id).await?, None),
        };
        let mut compacted = Compacted::default();
        for (dataset, keys) in by_dataset {
            if keys.is_empty() {
                continue;
            }
            let Some(tables) = self.tables else {
                return Err(PortError::permanent_msg(
                    "commit the run to its Iceberg table",
                    dataset.to_string(),
                    "target.table_format is iceberg but this Persist has no table committer",
                ));
            };
            let mut run = RunFiles::new(dataset, &first.pipeline, &first.run_id, &keys)
                .with_write(self.write.clone())
                .with_rerun(rerun.clone());
            if let Some(replay) = replaces {
                run = run.with_rerun(Some(replay.token.clone())).with_replaces(replay.replaces.clone());
            }
            let committed = tables.commit_run(&run).await?;
            compacted.files.extend(committed.files);
            compacted.notes.extend(committed.notes);
        }
        if let Some(token) = &rerun {
            self.drop_old_fetch(receipts).await?;
            tributary_core::rerun::mark_committed(self.store, &first.pipeline, &first.run_id, token).await?;
        }
        Ok(compacted)
    }

    /// A re-run's cleanup once committed: the raw and quarantine pages of
    /// the old fetch that the re-run did not write again (it had fewer
    /// pages, or a page quarantined nothing), so that a replay re-derives
    /// the run from the new fetch alone.
    async fn drop_old_fetch(&self, receipts: &[&PageReceipt]) -> Result<(), PortError> {
        let pages: BTreeSet<u32> = receipts.iter().map(|r| r.page).collect();
        let quarantined: BTreeSet<u32> =
            receipts.iter().filter(|r| r.quarantine_key.is_some()).map(|r| r.page).collect();
        let datasets: BTreeSet<(&str, chrono::NaiveDate)> =
            receipts.iter().map(|r| (r.dataset.as_str(), r.run_date)).collect();
        let Some(first) = receipts.first() else { return Ok(()) };
        for (dataset, run_date) in datasets {
            let raw = keys::run_pages_prefix("raw/", dataset, run_date, &first.pipeline, &first.run_id);
            let quarantine = keys::run_pages_prefix("quarantine/", dataset, run_date, &first.pipeline, &first.run_id);
            let mut dropped = tributary_core::rerun::drop_pages_not_in(self.store, &raw, &pages).await?;
            dropped.extend(tributary_core::rerun::drop_pages_not_in(self.store, &quarantine, &quarantined).await?);
            if !dropped.is_empty() {
                tracing::info!(files = dropped.len(), "the old fetch's pages that the re-run did not rewrite deleted");
            }
        }
        Ok(())
    }

    /// Whether the object at `key` exists (one LIST, not a GET of a file
    /// of up to 64 MiB).
    async fn exists(&self, key: &str) -> Result<bool, PortError> {
        Ok(self.store.list(key).await?.iter().any(|listed| listed == key))
    }
}

/// The refusal of a `write: replace` run that is not a whole copy of its
/// source (`partial`: the vendor announced more records than its pages
/// held, or the run stopped at `strategy.max_pages`): made the whole
/// table, it would drop every row it missed (a trial's vendor answered
/// its second page empty and the current-state table lost half its
/// customers). Permanent, so the completing page goes to the DLQ with an
/// alert; nothing is committed, the table is as it was and the run's
/// staged files and raw pages are kept.
fn refuse_partial_replace(dataset: &str, run_id: &contracts::RunId, partial: &str) -> PortError {
    PortError::permanent_msg(
        "replace the table with the run",
        dataset.to_string(),
        format!(
            "run {run_id} is not a whole copy of the source ({partial}). target.write: replace would make it the \
             whole table and drop every row it missed, so nothing was committed and the table is as it was; when \
             the vendor serves every record, run this scheduled time again with `tributary run SPEC --scheduled-at \
             TIME --replace` (a redrive of this letter is refused the same way: the run's pages are the same)"
        ),
    )
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
    // The first completion's record lists the page files it replaced; the
    // replayed pages are new files with those keys, to coalesce anew.
    tributary_core::ledger::forget_replacement(store, pipeline, run_id).await?;
    let files = RunCoalescer {
        store,
        table_format: TableFormat::Parquet,
        tables: None,
        write: RunWrite::Append,
        bin_bytes: COALESCE_BELOW_BYTES,
        replay: None,
    }
    // Parquet: nothing to refuse, whole or not.
    .compact(&receipts, None)
    .await?
    .files;
    tributary_core::ledger::replace_manifest_files(store, pipeline, run_id, files).await
}

/// Deletes the data files a page of a completed run wrote that the run's
/// manifest does not list: a delivery of the page that checked the run
/// before its `_SUCCESS` marker existed (`persist_page` step 2), then wrote
/// its files after the completion had replaced them, would otherwise leave
/// its rows twice in the folder (once in the coalesced file) under a run
/// that says complete. A file the manifest lists (a page file kept as it
/// was) is the page's own and stays. Returns the keys deleted.
///
/// # Errors
/// [`PortError`] from the store; a manifest that cannot be read is
/// [`PortError::Permanent`] naming its key.
pub async fn drop_files_outside_manifest(
    store: &dyn ObjectStore,
    receipt: &PageReceipt,
) -> Result<Vec<String>, PortError> {
    let key = keys::manifest_key(&receipt.pipeline, &receipt.run_id);
    let manifest: tributary_core::ledger::Manifest = serde_json::from_slice(&store.get(&key).await?)
        .map_err(|err| PortError::permanent("read the manifest", &key, err))?;
    let mut dropped = Vec::new();
    for data_key in receipt.data_keys.iter().filter(|k| !manifest.files.contains(k)) {
        store.delete(data_key).await?;
        dropped.push(data_key.clone());
    }
    if !dropped.is_empty() {
        tracing::warn!(files = ?dropped, "the run completed while this page was written: its files were replaced already");
    }
    Ok(dropped)
}

/// A coalesced file's row group is written out once its encoded columns
/// reach 16 MiB (or the writer's default 1,048,576 rows), so that merging
/// holds one row group in memory, not the whole file of up to
/// [`COALESCE_BELOW_BYTES`]. 16 MiB of zstd-compressed columns is some
/// hundreds of thousands of rows: the 100k-1M rows a row group wants for
/// Athena, Spark and DuckDB to read it well.
pub const MERGE_ROW_GROUP_BYTES: usize = 16 << 20;

/// One bin of a partition's page files (step 1), read one page at a time:
/// the first page is held until a second one joins (a bin of one page
/// keeps its file as it is); from then on each page is merged into the
/// staged file as it is read, and let go. A bin of 64 MiB of page files
/// costs one page and one row group ([`MERGE_ROW_GROUP_BYTES`]) of memory.
#[derive(Default)]
struct Bin {
    /// Its page files, in page order.
    pages: Vec<String>,
    /// Their bytes.
    bytes: u64,
    /// The first page's file, while it is the only one.
    first: Option<Bytes>,
    /// The merged file being written, from the second page on.
    merger: Option<Merger>,
}

impl Bin {
    /// Adds page file `key` (its `bytes`) to the bin, merged into the
    /// coalesced file aligned to `target` once the bin has two pages (the
    /// run's next staged file, numbered in `packing`).
    ///
    /// # Errors
    /// [`PortError::Permanent`] naming the staged file and the page that
    /// cannot be read or aligned; [`PortError::Transient`] when the local
    /// file cannot be written.
    fn add(
        &mut self,
        key: String,
        bytes: Bytes,
        target: &SchemaRef,
        packing: &mut Packing<'_>,
    ) -> Result<(), PortError> {
        self.bytes += bytes.len() as u64;
        if let Some(merger) = &mut self.merger {
            merger.add(&key, bytes)?;
        } else if let Some(first) = self.first.take() {
            let staged = keys::staged_coalesced_key(packing.pipeline, packing.run_id, packing.staged);
            packing.staged += 1;
            let mut merger = Merger::new(staged, target)?;
            merger.add(&self.pages[0], first)?;
            merger.add(&key, bytes)?;
            self.merger = Some(merger);
        } else {
            self.first = Some(bytes);
        }
        self.pages.push(key);
        Ok(())
    }
}

/// A coalesced file being written to a local temporary file, page after
/// page, aligned to the table schema.
struct Merger {
    /// Its staged key, for errors and the upload.
    staged: String,
    target: SchemaRef,
    /// The writer, opened on the first batch (its dictionaries decided
    /// from it, `crate::dictionary`), and the file until then.
    writer: Sink,
    file: tempfile::TempPath,
    rows: u64,
}

/// A coalesced file's writer, or the file it will write before the first
/// batch.
enum Sink {
    Unopened(std::fs::File),
    Open(Box<ArrowWriter<std::io::BufWriter<std::fs::File>>>),
    /// Taken while the writer is opened.
    Taken,
}

impl Merger {
    fn new(staged: String, target: &SchemaRef) -> Result<Self, PortError> {
        let local = |err: std::io::Error| PortError::transient("create the coalesced file", &staged, err);
        let (file, path) = tempfile::NamedTempFile::new().map_err(local)?.into_parts();
        Ok(Self { staged, target: target.clone(), writer: Sink::Unopened(file), file: path, rows: 0 })
    }

    /// The writer, opened with `first`'s dictionary choice when it is not
    /// yet (the same choice as Persist's page files: a column whose
    /// distinct values would overflow the dictionary is written plain).
    fn writer(
        &mut self,
        first: &arrow_array::RecordBatch,
    ) -> Result<&mut ArrowWriter<std::io::BufWriter<std::fs::File>>, PortError> {
        self.writer = match std::mem::replace(&mut self.writer, Sink::Taken) {
            Sink::Unopened(file) => {
                let level = ZstdLevel::try_new(1).map_err(|err| permanent(&self.staged, err))?;
                let base = WriterProperties::builder()
                    .set_compression(Compression::ZSTD(level))
                    .set_dictionary_page_size_limit(crate::convert::DICTIONARY_PAGE_BYTES)
                    .build();
                let properties =
                    crate::dictionary::for_first_batch(&base, first, crate::convert::DICTIONARY_PAGE_BYTES);
                let writer = ArrowWriter::try_new(std::io::BufWriter::new(file), self.target.clone(), Some(properties))
                    .map_err(|err| permanent(&self.staged, err))?;
                Sink::Open(Box::new(writer))
            }
            other => other,
        };
        match &mut self.writer {
            Sink::Open(writer) => Ok(writer),
            _ => Err(permanent(&self.staged, "the coalesced file's writer did not open")),
        }
    }

    /// Page file `key`'s rows, in order, aligned to the table schema.
    fn add(&mut self, key: &str, bytes: Bytes) -> Result<(), PortError> {
        let staged = self.staged.clone();
        let page = |err: &dyn std::fmt::Display| permanent(&staged, format!("{key}: {err}"));
        // Batches large enough for the first to decide the dictionaries.
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .and_then(|builder| builder.with_batch_size(crate::dictionary::SAMPLE_VALUES).build())
            .map_err(|err| page(&err))?;
        for batch in reader {
            let batch = batch.map_err(|err| page(&err))?;
            let aligned = align_batch(&batch, &self.target, Cast::Exact).map_err(|err| page(&err))?;
            self.rows += batch.num_rows() as u64;
            let writer = self.writer(&aligned)?;
            writer.write(&aligned).map_err(|err| page(&err))?;
            if writer.in_progress_size() >= MERGE_ROW_GROUP_BYTES {
                writer.flush().map_err(|err| page(&err))?;
            }
        }
        Ok(())
    }

    /// The finished file (deleted when dropped) and its rows.
    fn finish(mut self) -> Result<(tempfile::TempPath, u64), PortError> {
        if !matches!(self.writer, Sink::Open(_)) {
            // Pages of no rows: the file is the table schema's, empty.
            let empty = arrow_array::RecordBatch::new_empty(self.target.clone());
            self.writer(&empty)?;
        }
        let Self { staged, writer, file, rows, .. } = self;
        let Sink::Open(writer) = writer else {
            return Err(permanent(&staged, "the coalesced file's writer did not open"));
        };
        let out = writer.into_inner().map_err(|err| permanent(&staged, err))?;
        out.into_inner().map_err(|err| PortError::transient("write the coalesced file", &staged, err.into_error()))?;
        Ok((file, rows))
    }
}

/// Why the run's files cannot be coalesced into `staged`.
fn permanent(staged: &str, err: impl std::fmt::Display) -> PortError {
    PortError::permanent_msg("coalesce the run's files", staged.to_string(), err.to_string())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::Encoding;

    use super::*;

    /// A page file of `rows` rows from `from`: distinct ids, five currencies.
    fn page(schema: &SchemaRef, from: usize, rows: usize) -> (RecordBatch, Bytes) {
        let ids = StringArray::from_iter_values((from..from + rows).map(|i| format!("order-{i:08}")));
        let currencies = StringArray::from_iter_values((from..from + rows).map(|i| ["USD", "EUR", "BRL"][i % 3]));
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(ids), Arc::new(currencies)]).expect("batch");
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, schema.clone(), None).expect("writer");
        writer.write(&batch).expect("write");
        writer.close().expect("close");
        (batch, Bytes::from(bytes))
    }

    #[test]
    fn a_coalesced_file_takes_the_dictionary_choice_of_its_first_batch_and_keeps_every_value() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("currency", DataType::Utf8, true),
        ]));
        let (one, first) = page(&schema, 0, 3_000);
        let (two, second) = page(&schema, 3_000, 3_000);
        let mut merger = Merger::new("staged/x.parquet".into(), &schema).expect("merger");
        merger.add("p0", first).expect("page 0");
        merger.add("p1", second).expect("page 1");
        let (file, rows) = merger.finish().expect("finish");
        assert_eq!(rows, 6_000);
        let bytes = Bytes::from(std::fs::read(&file).expect("read"));
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes).expect("reader");
        let dictionary: Vec<(String, bool)> = reader
            .metadata()
            .row_group(0)
            .columns()
            .iter()
            .map(|c| (c.column_path().string(), c.encodings().any(|e| e == Encoding::RLE_DICTIONARY)))
            .collect();
        // 6,000 distinct ids would overflow a dictionary: plain from the start.
        assert_eq!(dictionary, [("id".to_string(), false), ("currency".to_string(), true)]);
        let back: Vec<RecordBatch> = reader.build().expect("build").map(|b| b.expect("batch")).collect();
        let values = |batches: &[&RecordBatch]| -> Vec<(String, String)> {
            batches
                .iter()
                .flat_map(|b| {
                    let column = |i: usize| b.column(i).as_any().downcast_ref::<StringArray>().expect("text").clone();
                    let (ids, currencies) = (column(0), column(1));
                    (0..b.num_rows()).map(move |r| (ids.value(r).to_string(), currencies.value(r).to_string()))
                })
                .collect()
        };
        assert_eq!(values(&back.iter().collect::<Vec<_>>()), values(&[&one, &two]), "every value, in order");
    }

    #[test]
    fn a_coalesced_file_of_pages_without_rows_is_an_empty_file_of_the_schema() {
        let schema: SchemaRef = Arc::new(Schema::new(vec![Field::new("id", DataType::Utf8, true)]));
        let mut bytes = Vec::new();
        ArrowWriter::try_new(&mut bytes, schema.clone(), None).expect("writer").close().expect("close");
        let mut merger = Merger::new("staged/y.parquet".into(), &schema).expect("merger");
        merger.add("p0", Bytes::from(bytes)).expect("page 0");
        let (file, rows) = merger.finish().expect("finish");
        assert_eq!(rows, 0);
        let reader = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(std::fs::read(&file).expect("read")))
            .expect("a Parquet file");
        assert_eq!(reader.schema().fields().len(), 1);
        assert_eq!(reader.metadata().file_metadata().num_rows(), 0);
    }
}
