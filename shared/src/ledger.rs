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

use crate::contracts::RunId;
use crate::keys;
use crate::ports::{ObjectStore, PortError};

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
}

/// Key of a run's expected page count.
pub fn expected_key(pipeline: &str, run_id: &RunId) -> String {
    format!("{}expected.json", keys::receipts_prefix(pipeline, run_id))
}

/// Key of a completed run's marker.
pub fn success_key(pipeline: &str, run_id: &RunId) -> String {
    format!("{}_SUCCESS", keys::receipts_prefix(pipeline, run_id))
}

/// Key of a completed run's manifest.
pub fn manifest_key(pipeline: &str, run_id: &RunId) -> String {
    format!("_manifests/{pipeline}/{run_id}.json")
}

/// Announced on the run-events topic when a run completes, so dashboards and
/// downstream jobs can refresh (`run-completed.v1`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunCompleted {
    /// Contract version, always `1`.
    pub version: crate::contracts::V1,
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
    /// Key of the run's manifest in the lake bucket.
    pub manifest_key: String,
    /// The manifest's schema hash.
    pub schema_hash: String,
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
        let completion = complete_if_done(self.store, pipeline, run_id).await?;
        self.announce(&completion).await?;
        Ok(completion)
    }

    async fn announce(&self, completion: &Completion) -> Result<(), PortError> {
        let (Completion::Completed(manifest), Some((topics, topic))) = (completion, self.events) else { return Ok(()) };
        tracing::info!(pipeline = %manifest.pipeline, run_id = %manifest.run_id, pages = manifest.pages, "run completed");
        let event = RunCompleted {
            version: crate::contracts::V1,
            pipeline: manifest.pipeline.clone(),
            run_id: manifest.run_id.clone(),
            run_date: manifest.run_date,
            pages: manifest.pages,
            records_persisted: manifest.records_persisted,
            records_quarantined: manifest.records_quarantined,
            manifest_key: manifest_key(&manifest.pipeline, &manifest.run_id),
            schema_hash: manifest.schema_hash.clone(),
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
    let key = expected_key(&expected.pipeline, &expected.run_id);
    store.put(&key, encode(&key, expected)?).await?;
    complete_if_done(store, &expected.pipeline, &expected.run_id).await
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
    let expected: Expected = match store.get(&expected_key(pipeline, run_id)).await {
        Ok(bytes) => decode(&expected_key(pipeline, run_id), &bytes)?,
        Err(PortError::NotFound { .. }) => return Ok(Completion::NotYet),
        Err(err) => return Err(err),
    };
    let receipts = receipts(store, pipeline, run_id).await?;
    if (receipts.len() as u64) < expected.pages {
        return Ok(Completion::NotYet);
    }
    if store.get(&success_key(pipeline, run_id)).await.is_ok() {
        return Ok(Completion::AlreadyComplete);
    }
    let mut schemas: Vec<&str> = receipts.iter().filter_map(|r| r.schema.as_deref()).collect();
    schemas.sort_unstable();
    schemas.dedup();
    let mut files: Vec<String> = receipts.iter().flat_map(|r| r.data_keys.iter().cloned()).collect();
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
    };
    let key = manifest_key(pipeline, run_id);
    store.put(&key, encode(&key, &manifest)?).await?;
    // Incremental loading: the run's highest cursor becomes the pipeline's
    // (a no-op for pipelines without `incremental`), before the marker.
    crate::state::fold_run(store, pipeline, run_id).await?;
    store.put(&success_key(pipeline, run_id), bytes::Bytes::new()).await?;
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
fn fnv1a(bytes: &[u8]) -> u64 {
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
    Ok(totals)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::local::DirStore;

    fn receipt(page: u32, schema: &str) -> PageReceipt {
        PageReceipt {
            pipeline: "p".into(),
            run_id: RunId::new("r1").expect("id"),
            run_date: NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
            dataset: "d".into(),
            page,
            page_count: 2,
            records_in: 10,
            records_persisted: 9,
            records_quarantined: 1,
            data_keys: vec![format!("d/dt=2026-11-29/p-r1-{page:05}.parquet")],
            quarantine_key: None,
            raw_key: String::new(),
            schema: Some(schema.into()),
        }
    }

    async fn put_receipt(store: &DirStore, receipt: &PageReceipt) {
        let key = keys::receipt_key(&receipt.pipeline, &receipt.run_id, receipt.page);
        store.put(&key, encode(&key, receipt).expect("encode")).await.expect("put");
    }

    fn expected(pages: u64) -> Expected {
        Expected {
            pipeline: "p".into(),
            run_id: RunId::new("r1").expect("id"),
            run_date: NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
            pages,
        }
    }

    #[tokio::test]
    async fn completes_when_the_last_receipt_arrives_after_the_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DirStore::new(dir.path());
        let run = RunId::new("r1").expect("id");
        assert_eq!(complete_if_done(&store, "p", &run).await.expect("check"), Completion::NotYet, "no count yet");
        assert_eq!(record_expected(&store, &expected(2)).await.expect("expected"), Completion::NotYet);
        put_receipt(&store, &receipt(0, "a")).await;
        assert_eq!(complete_if_done(&store, "p", &run).await.expect("check"), Completion::NotYet, "1 of 2");
        put_receipt(&store, &receipt(1, "a")).await;
        let Completion::Completed(manifest) = complete_if_done(&store, "p", &run).await.expect("check") else {
            panic!("2 of 2 completes")
        };
        assert_eq!((manifest.pages, manifest.records_persisted, manifest.records_quarantined), (2, 18, 2));
        assert_eq!(manifest.files.len(), 2);
        assert_eq!(complete_if_done(&store, "p", &run).await.expect("check"), Completion::AlreadyComplete);
        assert!(store.get(&success_key("p", &run)).await.is_ok());
    }

    #[tokio::test]
    async fn completes_when_the_count_arrives_after_the_last_receipt_and_hashes_schemas_stably() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DirStore::new(dir.path());
        put_receipt(&store, &receipt(0, "b")).await;
        put_receipt(&store, &receipt(1, "a")).await;
        let Completion::Completed(first) = record_expected(&store, &expected(2)).await.expect("expected") else {
            panic!("the count completes the run")
        };
        let other = tempfile::tempdir().expect("tempdir");
        let store = DirStore::new(other.path());
        put_receipt(&store, &receipt(0, "a")).await;
        put_receipt(&store, &receipt(1, "b")).await;
        let Completion::Completed(second) = record_expected(&store, &expected(2)).await.expect("expected") else {
            panic!("completes")
        };
        assert_eq!(first.schema_hash, second.schema_hash, "order of pages does not matter");
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    }

    #[tokio::test]
    async fn an_empty_run_completes_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DirStore::new(dir.path());
        assert!(
            matches!(record_expected(&store, &expected(0)).await.expect("expected"), Completion::Completed(m) if m.pages == 0)
        );
    }
}
