//! Deterministic object keys of the lake.
//!
//! Every key derives from (dataset or pipeline, run date, run id, page) and
//! nothing else — no wall clock, no random part — so a redelivered message
//! rewrites the same objects instead of adding duplicates.
//!
//! | what | key |
//! |---|---|
//! | Parquet data | `<dataset>/dt=<YYYY-MM-DD>/<run_id>-<page:05>.parquet` |
//! | raw page (the `PersistMessage`, replayable) | `raw/<dataset>/dt=<YYYY-MM-DD>/<run_id>-<page:05>.json` |
//! | quarantined records | `quarantine/<dataset>/dt=<YYYY-MM-DD>/<run_id>-<page:05>.jsonl` |
//! | page receipt (counts) | `_runs/<pipeline>/<run_id>/page-<page:05>.json` |
//! | claim-check payload | `_claims/<pipeline>/<run_id>/page-<page:05>.json` |

use chrono::NaiveDate;

use crate::contracts::RunId;

/// Folder of Parquet data: `<dataset>/dt=<date>`.
pub fn data_prefix(dataset: &str, run_date: NaiveDate) -> String {
    format!("{dataset}/dt={run_date}")
}

/// Key of a page's Parquet file.
pub fn data_key(dataset: &str, run_date: NaiveDate, run_id: &RunId, page: u32) -> String {
    format!("{}/{run_id}-{page:05}.parquet", data_prefix(dataset, run_date))
}

/// Key of a page's raw payload (the `PersistMessage` as received).
pub fn raw_key(dataset: &str, run_date: NaiveDate, run_id: &RunId, page: u32) -> String {
    format!("raw/{}/{run_id}-{page:05}.json", data_prefix(dataset, run_date))
}

/// Key of a page's quarantined records (JSON lines with the reason).
pub fn quarantine_key(dataset: &str, run_date: NaiveDate, run_id: &RunId, page: u32) -> String {
    format!("quarantine/{}/{run_id}-{page:05}.jsonl", data_prefix(dataset, run_date))
}

/// Folder of a run's page receipts.
pub fn receipts_prefix(pipeline: &str, run_id: &RunId) -> String {
    format!("_runs/{pipeline}/{run_id}/")
}

/// Key of a page receipt.
pub fn receipt_key(pipeline: &str, run_id: &RunId, page: u32) -> String {
    format!("{}page-{page:05}.json", receipts_prefix(pipeline, run_id))
}

/// Key of a claim-check payload written by Request.
pub fn claim_key(pipeline: &str, run_id: &RunId, page: u32) -> String {
    format!("_claims/{pipeline}/{run_id}/page-{page:05}.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_depend_only_on_their_inputs() {
        let run = RunId::new("20261129T060000Z").expect("valid");
        let date = NaiveDate::from_ymd_opt(2026, 11, 29).expect("valid date");
        assert_eq!(data_key("customers", date, &run, 3), "customers/dt=2026-11-29/20261129T060000Z-00003.parquet");
        assert_eq!(raw_key("customers", date, &run, 3), "raw/customers/dt=2026-11-29/20261129T060000Z-00003.json");
        assert_eq!(data_key("customers", date, &run, 3), data_key("customers", date, &run, 3));
        assert_eq!(receipt_key("p", &run, 12), "_runs/p/20261129T060000Z/page-00012.json");
    }
}
