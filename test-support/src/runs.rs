//! A run's pages as Persist receives them: the `PersistMessage` of one page
//! with its records inline, and the page count the Orchestrator records
//! before the pages are sent (without it, no page can complete the run).

use chrono::NaiveDate;
use contracts::{PageRef, Payload, PersistMessage, PersistTarget, RawRecords, RunId, V1};
use tributary_core::ledger::{Expected, record_expected};
use tributary_core::ports::ObjectStore;

/// The run date of every run these helpers build: 2026-11-29.
///
/// # Panics
/// Never (a valid date).
pub fn run_date() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 11, 29).expect("date")
}

/// The run id `run`.
///
/// # Panics
/// When `run` is not a valid run id.
pub fn run_id(run: &str) -> RunId {
    RunId::new(run).expect("run id")
}

/// Page `index` of `count` of run `run` of `pipeline` into `target`, its
/// `records` (a JSON array's text) inline, on [`run_date`], with no fetch
/// time.
///
/// # Panics
/// When `run` is not a valid run id or `records` is not a JSON array.
pub fn page(pipeline: &str, target: PersistTarget, run: &str, index: u32, count: u32, records: &str) -> PersistMessage {
    PersistMessage {
        version: V1,
        pipeline: pipeline.into(),
        run_id: run_id(run),
        run_date: run_date(),
        page: PageRef { index, count },
        target,
        payload: Payload::Inline { records: RawRecords::from_text(records.to_string()).expect("JSON array") },
        fetched_at: None,
    }
}

/// Records that run `run` of `pipeline` (on [`run_date`]) has `pages` pages,
/// as the Orchestrator does before its pages are sent.
///
/// # Panics
/// When `run` is not a valid run id or the store refuses the write.
pub async fn expect_pages(store: &dyn ObjectStore, pipeline: &str, run: &str, pages: u64) {
    let expected = Expected {
        pipeline: pipeline.into(),
        run_id: run_id(run),
        run_date: run_date(),
        pages,
        truncated: None,
        records: None,
    };
    record_expected(store, &expected).await.expect("expected");
}
