//! Run bookkeeping kept in the lake: one receipt per persisted page.
//!
//! Persist writes a [`PageReceipt`] at [`crate::keys::receipt_key`] after a
//! page's objects are written. The key is deterministic, so a redelivered
//! page rewrites its receipt instead of counting twice; summing a run's
//! receipts gives its records persisted and quarantined.

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
    /// Parquet object key (absent for an empty page).
    pub data_key: Option<String>,
    /// Quarantine object key (absent when nothing was quarantined).
    pub quarantine_key: Option<String>,
    /// Raw payload key.
    pub raw_key: String,
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
    for key in store.list(&keys::receipts_prefix(pipeline, run_id)).await? {
        let bytes = store.get(&key).await?;
        let receipt: PageReceipt = serde_json::from_slice(&bytes).map_err(|err| PortError::Permanent {
            operation: "read page receipt",
            target: key.clone(),
            message: err.to_string(),
        })?;
        totals.pages += 1;
        totals.records_persisted += receipt.records_persisted;
        totals.records_quarantined += receipt.records_quarantined;
        totals.data_keys.extend(receipt.data_key);
    }
    Ok(totals)
}
