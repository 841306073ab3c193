//! The run ledger over a real store (the local lake directory): a run
//! completes whichever of its page count and its last receipt lands last.

use adapters::local::DirStore;
use chrono::NaiveDate;
use contracts::RunId;
use tributary_core::keys;
use tributary_core::ledger::{Completion, Expected, PageReceipt, complete_if_done, record_expected};
use tributary_core::ports::ObjectStore;

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
    store.put(&key, serde_json::to_vec(receipt).expect("encode").into()).await.expect("put");
}

fn expected(pages: u64) -> Expected {
    Expected {
        pipeline: "p".into(),
        run_id: RunId::new("r1").expect("id"),
        run_date: NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        pages,
        truncated: None,
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
    assert!(store.get(&keys::success_key("p", &run)).await.is_ok());
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
}

#[tokio::test]
async fn an_empty_run_completes_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    assert!(
        matches!(record_expected(&store, &expected(0)).await.expect("expected"), Completion::Completed(m) if m.pages == 0)
    );
}
