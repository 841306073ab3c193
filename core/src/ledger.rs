//! Run bookkeeping kept in the lake (S3 objects on AWS, files locally — no
//! database to run): what a run expects, what it did, and when it is done.
//!
//! | object | written by | key |
//! |---|---|---|
//! | page receipt ([`PageReceipt`]) | Persist, after the page's objects | `_runs/<pipeline>/<run_id>/page-<page>.json` |
//! | expected pages ([`Expected`]) | whoever learns the count: Orchestrator (simple: 1; paged: at the probe reply), Athena (at the end of the query) | `_runs/<pipeline>/<run_id>/expected.json` |
//! | manifest ([`Manifest`]) and `_SUCCESS` marker | the first to see every expected receipt | `_manifests/<pipeline>/<run_id>.json`, `_runs/<pipeline>/<run_id>/_SUCCESS` |
//!
//! Every key is deterministic, so redelivered messages rewrite instead of
//! counting twice. Completion is checked by [`complete_if_done`] both after
//! each receipt and after the expected count is written, so whichever comes
//! last completes the run; two writers finishing at once write the same
//! manifest, and the completion event may then be published twice
//! (at-least-once, like everything else).

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::keys;
use crate::ports::{ObjectStore, PortError};
use contracts::{RunCompleted, RunId};

/// What Persist did with one page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageReceipt {
    /// Pipeline name.
    pub pipeline: String,
    /// Run id.
    pub run_id: RunId,
    /// Run date.
    pub run_date: NaiveDate,
    /// Dataset written.
    pub dataset: String,
    /// Page index.
    pub page: u32,
    /// Pages planned for the run.
    pub page_count: u32,
    /// Records received.
    pub records_in: u64,
    /// Records written to Parquet.
    pub records_persisted: u64,
    /// Records written to quarantine with a reason.
    pub records_quarantined: u64,
    /// Parquet object keys: one per partition and part (empty when the
    /// page has no rows).
    #[serde(default)]
    pub data_keys: Vec<String>,
    /// Quarantine object key (absent when nothing was quarantined).
    pub quarantine_key: Option<String>,
    /// Raw payload key.
    pub raw_key: String,
    /// The page's Arrow schema as text (absent for an empty page), for the
    /// manifest's schema hash.
    #[serde(default)]
    pub schema: Option<String>,
}

/// How many pages a run expects.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expected {
    /// Pipeline name.
    pub pipeline: String,
    /// Run id.
    pub run_id: RunId,
    /// Run date.
    pub run_date: NaiveDate,
    /// Pages (receipts) the run is complete with; 0 for an empty run.
    pub pages: u64,
    /// Why the run stopped before the vendor's data ended (a cursor run
    /// that reached `strategy.max_pages` with a next page still offered),
    /// `None` for a whole run. Carried into the [`Manifest`] and the
    /// run-completed event: such a run is complete as a run but not a
    /// whole copy of the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
}

/// What a completed run wrote: read it instead of listing the lake.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Pipeline name.
    pub pipeline: String,
    /// Run id.
    pub run_id: RunId,
    /// Run date.
    pub run_date: NaiveDate,
    /// Pages persisted.
    pub pages: u64,
    /// Records written to Parquet.
    pub records_persisted: u64,
    /// Records quarantined.
    pub records_quarantined: u64,
    /// Parquet objects, sorted.
    pub files: Vec<String>,
    /// FNV-1a 64 hash (hex) of the distinct page schemas, sorted: equal
    /// across runs whose pages have the same columns and types.
    pub schema_hash: String,
    /// [`Expected::truncated`]: why the run holds less than the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
}

/// The ledger as a function uses it: the lake, and optionally the topic on
/// which completed runs are announced ([`RunCompleted`]).
#[derive(Clone, Copy)]
pub struct RunLedger<'a> {
    /// The lake bucket.
    pub store: &'a dyn ObjectStore,
    /// The run-events topic (an ARN on AWS, a name locally) and its publisher.
    pub events: Option<(&'a dyn crate::ports::TopicPublisher, &'a str)>,
}

impl RunLedger<'_> {
    /// [`record_expected`], announcing the run if this completed it.
    ///
    /// # Errors
    /// [`PortError`] from the store or the topic.
    pub async fn record_expected(&self, expected: &Expected) -> Result<Completion, PortError> {
        let completion = record_expected(self.store, expected).await?;
        self.announce(&completion).await?;
        Ok(completion)
    }

    /// [`complete_if_done`], announcing the run if this completed it.
    ///
    /// # Errors
    /// [`PortError`] from the store or the topic.
    pub async fn complete_if_done(&self, pipeline: &str, run_id: &RunId) -> Result<Completion, PortError> {
        self.complete_with(pipeline, run_id, None).await
    }

    /// [`complete_if_done`], with `compactor` rewriting the run's files
    /// (see [`Compactor`]) before the manifest and the `_SUCCESS` marker
    /// are written, so a completed run's manifest lists its final files.
    ///
    /// # Errors
    /// [`PortError`] from the store, the compactor or the topic.
    pub async fn complete_with(
        &self,
        pipeline: &str,
        run_id: &RunId,
        compactor: Option<&dyn Compactor>,
    ) -> Result<Completion, PortError> {
        let completion = complete(self.store, pipeline, run_id, compactor).await?;
        self.announce(&completion).await?;
        Ok(completion)
    }

    async fn announce(&self, completion: &Completion) -> Result<(), PortError> {
        let (Completion::Completed(manifest), Some((topics, topic))) = (completion, self.events) else { return Ok(()) };
        tracing::info!(pipeline = %manifest.pipeline, run_id = %manifest.run_id, pages = manifest.pages, "run completed");
        let event = RunCompleted {
            version: contracts::V1,
            pipeline: manifest.pipeline.clone(),
            run_id: manifest.run_id.clone(),
            run_date: manifest.run_date,
            pages: manifest.pages,
            records_persisted: manifest.records_persisted,
            records_quarantined: manifest.records_quarantined,
            manifest_key: keys::manifest_key(&manifest.pipeline, &manifest.run_id),
            schema_hash: manifest.schema_hash.clone(),
            truncated: manifest.truncated.clone(),
        };
        let body = String::from_utf8_lossy(&encode(topic, &event)?).into_owned();
        let attributes =
            [("pipeline".to_string(), manifest.pipeline.clone()), ("event".to_string(), "run_completed".to_string())]
                .into();
        topics.publish(topic, vec![crate::ports::TopicMessage { body, attributes, ..Default::default() }]).await
    }
}

/// What [`complete_if_done`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion {
    /// The expected count is not known yet, or pages are missing.
    NotYet,
    /// This call completed the run: the manifest and marker were written.
    Completed(Manifest),
    /// The run was already complete.
    AlreadyComplete,
}

fn encode<T: Serialize>(key: &str, value: &T) -> Result<bytes::Bytes, PortError> {
    serde_json::to_vec(value).map(bytes::Bytes::from).map_err(|err| PortError::Permanent {
        operation: "encode ledger object",
        target: key.to_string(),
        message: err.to_string(),
    })
}

/// Writes the run's expected page count, then checks completion (an empty
/// run, or one whose pages were all persisted before the count was known,
/// completes here).
///
/// # Errors
/// [`PortError`] from the store.
pub async fn record_expected(store: &dyn ObjectStore, expected: &Expected) -> Result<Completion, PortError> {
    let key = keys::expected_key(&expected.pipeline, &expected.run_id);
    store.put(&key, encode(&key, expected)?).await?;
    complete_if_done(store, &expected.pipeline, &expected.run_id).await
}

/// Rewrites a completed run's data files before its manifest is written:
/// Persist's small-file coalescing. Given every receipt of the run, it
/// returns the run's final data keys (sorted or not; the manifest sorts
/// them).
#[async_trait::async_trait]
pub trait Compactor: Send + Sync {
    /// The run's data keys after compaction.
    ///
    /// # Errors
    /// [`PortError`] from the store; the run then stays incomplete and the
    /// message that completed it is retried.
    async fn compact(&self, receipts: &[PageReceipt]) -> Result<Vec<String>, PortError>;
}

/// Completes the run if its expected count is known and every page has a
/// receipt: writes the manifest, then the `_SUCCESS` marker.
///
/// # Errors
/// [`PortError`] from the store; unreadable ledger objects are
/// [`PortError::Permanent`] naming their key.
pub async fn complete_if_done(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
) -> Result<Completion, PortError> {
    complete(store, pipeline, run_id, None).await
}

async fn complete(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
    compactor: Option<&dyn Compactor>,
) -> Result<Completion, PortError> {
    let expected: Expected = match store.get(&keys::expected_key(pipeline, run_id)).await {
        Ok(bytes) => decode(&keys::expected_key(pipeline, run_id), &bytes)?,
        Err(PortError::NotFound { .. }) => return Ok(Completion::NotYet),
        Err(err) => return Err(err),
    };
    let receipts = receipts(store, pipeline, run_id).await?;
    if (receipts.len() as u64) < expected.pages {
        return Ok(Completion::NotYet);
    }
    if store.get(&keys::success_key(pipeline, run_id)).await.is_ok() {
        return Ok(Completion::AlreadyComplete);
    }
    let mut schemas: Vec<&str> = receipts.iter().filter_map(|r| r.schema.as_deref()).collect();
    schemas.sort_unstable();
    schemas.dedup();
    let mut files: Vec<String> = match compactor {
        Some(compactor) => compactor.compact(&receipts).await?,
        None => receipts.iter().flat_map(|r| r.data_keys.iter().cloned()).collect(),
    };
    files.sort();
    let manifest = Manifest {
        pipeline: pipeline.to_string(),
        run_id: run_id.clone(),
        run_date: expected.run_date,
        pages: receipts.len() as u64,
        records_persisted: receipts.iter().map(|r| r.records_persisted).sum(),
        records_quarantined: receipts.iter().map(|r| r.records_quarantined).sum(),
        files,
        schema_hash: format!("{:016x}", fnv1a(schemas.join("\n").as_bytes())),
        truncated: expected.truncated.clone(),
    };
    let key = keys::manifest_key(pipeline, run_id);
    store.put(&key, encode(&key, &manifest)?).await?;
    // Incremental loading: the run's highest cursor becomes the pipeline's
    // (a no-op for pipelines without `incremental`), before the marker.
    crate::state::fold_run(store, pipeline, run_id).await?;
    store.put(&keys::success_key(pipeline, run_id), bytes::Bytes::new()).await?;
    Ok(Completion::Completed(manifest))
}

fn decode<T: serde::de::DeserializeOwned>(key: &str, bytes: &[u8]) -> Result<T, PortError> {
    serde_json::from_slice(bytes).map_err(|err| PortError::Permanent {
        operation: "read ledger object",
        target: key.to_string(),
        message: err.to_string(),
    })
}

async fn receipts(store: &dyn ObjectStore, pipeline: &str, run_id: &RunId) -> Result<Vec<PageReceipt>, PortError> {
    let mut receipts = Vec::new();
    for key in store.list(&keys::receipts_prefix(pipeline, run_id)).await? {
        if key.rsplit('/').next().is_some_and(|name| name.starts_with("page-")) {
            receipts.push(decode(&key, &store.get(&key).await?)?);
        }
    }
    Ok(receipts)
}

/// Reopens a completed run so that its pages, sent again (`tributary
/// replay --stack`), complete it again: deletes its `_SUCCESS` marker, then
/// its manifest. Returns whether the run was complete.
///
/// # Errors
/// [`PortError`] from the store.
pub async fn reopen_run(store: &dyn ObjectStore, pipeline: &str, run_id: &RunId) -> Result<bool, PortError> {
    if store.get(&keys::success_key(pipeline, run_id)).await.is_err() {
        return Ok(false);
    }
    store.delete(&keys::success_key(pipeline, run_id)).await?;
    store.delete(&keys::manifest_key(pipeline, run_id)).await?;
    Ok(true)
}

/// Runs of `pipeline` completed for `run_date` (their manifests).
///
/// # Errors
/// [`PortError`] from the store; unreadable manifests are skipped.
pub async fn completed_runs(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_date: NaiveDate,
) -> Result<Vec<Manifest>, PortError> {
    let mut runs = Vec::new();
    for key in store.list(&format!("_manifests/{pipeline}/")).await? {
        match decode::<Manifest>(&key, &store.get(&key).await?) {
            Ok(manifest) if manifest.run_date == run_date => runs.push(manifest),
            Ok(_) => {}
            Err(err) => tracing::warn!(key, error = %err, "unreadable manifest skipped"),
        }
    }
    Ok(runs)
}

/// FNV-1a, 64 bits: a stable hash (std's hasher may change between Rust
/// releases, and the manifest's hash must not).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3))
}

/// Totals over a run's receipts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunTotals {
    /// Pages with a receipt.
    pub pages: u64,
    /// Records written to Parquet.
    pub records_persisted: u64,
    /// Records quarantined.
    pub records_quarantined: u64,
    /// Parquet objects written.
    pub data_keys: Vec<String>,
    /// The completed run's [`Manifest::truncated`].
    pub truncated: Option<String>,
}

/// Sums the receipts of `run_id` of `pipeline`.
///
/// # Errors
/// [`PortError`] from the store; a receipt that is not valid JSON is a
/// [`PortError::Permanent`] naming its key.
pub async fn run_totals(store: &dyn ObjectStore, pipeline: &str, run_id: &RunId) -> Result<RunTotals, PortError> {
    let mut totals = RunTotals::default();
    for receipt in receipts(store, pipeline, run_id).await? {
        totals.pages += 1;
        totals.records_persisted += receipt.records_persisted;
        totals.records_quarantined += receipt.records_quarantined;
        totals.data_keys.extend(receipt.data_keys);
    }
    // A completed run's files are its manifest's (Persist may have
    // coalesced the pages' files).
    if store.get(&keys::success_key(pipeline, run_id)).await.is_ok()
        && let Ok(bytes) = store.get(&keys::manifest_key(pipeline, run_id)).await
        && let Ok(manifest) = serde_json::from_slice::<Manifest>(&bytes)
    {
        totals.data_keys = manifest.files;
        totals.truncated = manifest.truncated;
    }
    Ok(totals)
}

/// Every page receipt of a run, in page order.
///
/// # Errors
/// [`PortError`] from the store; unreadable receipts are
/// [`PortError::Permanent`] naming their key.
pub async fn run_receipts(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
) -> Result<Vec<PageReceipt>, PortError> {
    let mut receipts = receipts(store, pipeline, run_id).await?;
    receipts.sort_by_key(|r| r.page);
    Ok(receipts)
}

/// Rewrites a completed run's manifest with `files` (after its files were
/// coalesced again, by a replay).
///
/// # Errors
/// [`PortError`] from the store; [`PortError::NotFound`] without a manifest.
pub async fn replace_manifest_files(
    store: &dyn ObjectStore,
    pipeline: &str,
    run_id: &RunId,
    mut files: Vec<String>,
) -> Result<(), PortError> {
    let key = keys::manifest_key(pipeline, run_id);
    let mut manifest: Manifest = decode(&key, &store.get(&key).await?)?;
    files.sort();
    manifest.files = files;
    store.put(&key, encode(&key, &manifest)?).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_hash_is_fnv1a_64() {
        // The FNV-1a 64-bit offset basis (FNV spec, draft-eastlake-fnv).
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_ne!(fnv1a(b"a"), fnv1a(b"b"));
    }
}
