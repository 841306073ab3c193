//! The run ledger over a real store (the local lake directory): a run
//! completes whichever of its page count and its last receipt lands last,
//! at a constant number of store calls per page.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use adapters::local::DirStore;
use async_trait::async_trait;
use bytes::Bytes;
use chrono::NaiveDate;
use contracts::RunId;
use tributary_core::keys;
use tributary_core::ledger::{
    Completion, Expected, Manifest, PageReceipt, complete_if_done, holds_every_page_but_incomplete, is_stuck,
    record_expected, record_page,
};
use tributary_core::ports::{ObjectStore, PortError};

fn run_id() -> RunId {
    RunId::new("r1").expect("id")
}

fn receipt(page: u32, schema: &str) -> PageReceipt {
    PageReceipt {
        pipeline: "p".into(),
        run_id: run_id(),
        run_date: NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        dataset: "d".into(),
        page,
        page_count: 2,
        records_in: 10,
        records_persisted: 9,
        records_quarantined: 1,
        data_keys: vec![format!("d/dt=2026-11-29/p-r1-{page:05}.parquet")],
        data_bytes: 0,
        quarantine_key: None,
        raw_key: String::new(),
        schema: Some(schema.into()),
        table_commit: false,
        records_fingerprint: None,
        schema_changes: Vec::new(),
        on_schema_change: contracts::SchemaChange::default(),
    }
}

/// Writes a receipt the way Persist did before shard summaries existed.
async fn put_receipt(store: &dyn ObjectStore, receipt: &PageReceipt) {
    let key = keys::receipt_key(&receipt.pipeline, &receipt.run_id, receipt.page);
    store.put(&key, serde_json::to_vec(receipt).expect("encode").into()).await.expect("put");
}

/// Writes a receipt where versions before 2026-12-06 did: in the run's
/// folder, not its shard's.
async fn put_earlier_receipt(store: &dyn ObjectStore, receipt: &PageReceipt) {
    let key = keys::legacy_receipt_key(&receipt.pipeline, &receipt.run_id, receipt.page);
    store.put(&key, serde_json::to_vec(receipt).expect("encode").into()).await.expect("put");
}

fn expected(pages: u64) -> Expected {
    Expected {
        pipeline: "p".into(),
        run_id: run_id(),
        run_date: NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"),
        pages,
        truncated: None,
        records: None,
    }
}

/// Page `i` of `n` in an order that is not sorted: `i·7919 mod n` (7919 is
/// a prime that divides neither 1,000 nor 2,000, so every page comes once).
fn shuffled(i: u32, n: u32) -> u32 {
    u32::try_from(u64::from(i) * 7919 % u64::from(n)).expect("below n")
}

/// Store calls as S3 bills them: GETs, PUTs (deletes too) and LIST calls,
/// one per 1,000 keys listed (`ListObjectsV2`'s page), at least one.
#[derive(Debug, Default)]
struct Calls {
    get: AtomicU64,
    put: AtomicU64,
    list: AtomicU64,
}

impl Calls {
    fn total(&self) -> u64 {
        self.get.load(Ordering::Relaxed) + self.put.load(Ordering::Relaxed) + self.list.load(Ordering::Relaxed)
    }
}

/// The lake directory, counting calls; optionally, the first two LISTs of
/// receipt shards wait for each other (two pages that check their shard at
/// the same moment).
struct Counting {
    inner: DirStore,
    calls: Calls,
    rendezvous: Option<tokio::sync::Barrier>,
    waited: AtomicU64,
}

impl Counting {
    fn new(root: &std::path::Path) -> Self {
        Counting { inner: DirStore::new(root), calls: Calls::default(), rendezvous: None, waited: AtomicU64::new(0) }
    }
}

#[async_trait]
impl ObjectStore for Counting {
    async fn put(&self, key: &str, body: Bytes) -> Result<(), PortError> {
        self.calls.put.fetch_add(1, Ordering::Relaxed);
        self.inner.put(key, body).await
    }

    async fn get(&self, key: &str) -> Result<Bytes, PortError> {
        self.calls.get.fetch_add(1, Ordering::Relaxed);
        self.inner.get(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, PortError> {
        if let Some(barrier) = &self.rendezvous
            && prefix.contains("/receipts-")
            && self.waited.fetch_add(1, Ordering::Relaxed) < 2
        {
            barrier.wait().await;
        }
        let keys = self.inner.list(prefix).await?;
        self.calls.list.fetch_add((keys.len() as u64).div_ceil(1000).max(1), Ordering::Relaxed);
        Ok(keys)
    }

    async fn delete(&self, key: &str) -> Result<(), PortError> {
        self.calls.put.fetch_add(1, Ordering::Relaxed);
        self.inner.delete(key).await
    }

    async fn get_versioned(&self, key: &str) -> Result<Option<(Bytes, String)>, PortError> {
        self.calls.get.fetch_add(1, Ordering::Relaxed);
        self.inner.get_versioned(key).await
    }

    async fn put_if(&self, key: &str, body: Bytes, version: Option<&str>) -> Result<bool, PortError> {
        self.calls.put.fetch_add(1, Ordering::Relaxed);
        self.inner.put_if(key, body, version).await
    }
}

fn distinct_files(manifest: &Manifest) -> usize {
    let mut files = manifest.files.clone();
    files.dedup();
    files.len()
}

#[tokio::test]
async fn completes_when_the_last_receipt_arrives_after_the_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let run = run_id();
    assert_eq!(complete_if_done(&store, "p", &run).await.expect("check"), Completion::NotYet, "no count yet");
    assert_eq!(record_expected(&store, &expected(2)).await.expect("expected"), Completion::NotYet);
    assert_eq!(record_page(&store, &receipt(0, "a"), None).await.expect("page"), Completion::NotYet, "1 of 2");
    let Completion::Completed(manifest) = record_page(&store, &receipt(1, "a"), None).await.expect("page") else {
        panic!("2 of 2 completes")
    };
    assert_eq!((manifest.pages, manifest.records_persisted, manifest.records_quarantined), (2, 18, 2));
    assert_eq!(manifest.files.len(), 2);
    assert_eq!(complete_if_done(&store, "p", &run).await.expect("check"), Completion::AlreadyComplete);
    assert_eq!(record_page(&store, &receipt(1, "a"), None).await.expect("again"), Completion::AlreadyComplete);
    assert!(store.get(&keys::success_key("p", &run)).await.is_ok());
}

/// Stands in for Persist's coalescer (which commits an Iceberg run): names
/// every staged file, with a mark.
struct Committing;

#[async_trait]
impl tributary_core::ledger::Compactor for Committing {
    async fn compact(
        &self,
        receipts: &[PageReceipt],
        _partial: Option<&str>,
    ) -> Result<tributary_core::ledger::Compacted, PortError> {
        Ok(tributary_core::ledger::Compacted {
            files: receipts.iter().flat_map(|r| r.data_keys.iter().map(|k| format!("committed:{k}"))).collect(),
            notes: Vec::new(),
        })
    }
}

/// A run whose files wait for a table commit: a count learnt after every
/// page is in (no compactor) leaves the run open rather than marking it
/// done with its files never committed; the next persist of a page
/// completes it through the compactor.
#[tokio::test]
async fn a_table_commit_run_is_completed_only_by_a_completion_with_a_compactor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let run = run_id();
    let staged = |page| PageReceipt { table_commit: true, ..receipt(page, "a") };
    assert_eq!(record_page(&store, &staged(0), Some(&Committing)).await.expect("page"), Completion::NotYet);
    assert_eq!(record_page(&store, &staged(1), Some(&Committing)).await.expect("page"), Completion::NotYet, "no count");
    assert_eq!(record_expected(&store, &expected(2)).await.expect("expected"), Completion::NotYet, "left to Persist");
    assert_eq!(complete_if_done(&store, "p", &run).await.expect("check"), Completion::NotYet);
    assert!(store.get(&keys::success_key("p", &run)).await.is_err(), "the run is not marked done");
    let Completion::Completed(manifest) = record_page(&store, &staged(1), Some(&Committing)).await.expect("again")
    else {
        panic!("a page persisted again completes the run")
    };
    assert_eq!(manifest.files.len(), 2);
    assert!(manifest.files.iter().all(|f| f.starts_with("committed:")), "{:?}", manifest.files);
    // A Parquet run's count learnt last still completes it (no commit to wait for).
    let other = RunId::new("r2").expect("id");
    let parquet = |page| PageReceipt { run_id: other.clone(), ..receipt(page, "a") };
    record_page(&store, &parquet(0), None).await.expect("page");
    record_page(&store, &parquet(1), None).await.expect("page");
    let Completion::Completed(_) =
        record_expected(&store, &Expected { run_id: other.clone(), ..expected(2) }).await.expect("expected")
    else {
        panic!("a Parquet run completes when its count is learnt last")
    };
}

/// A run with every page in whose completion did not happen (here: a table
/// commit without a compactor) is stuck, as the store says it and as the
/// counts `tributary status` has say it; a run missing a page, without a
/// count, or complete is not.
#[tokio::test]
async fn a_run_holding_every_page_without_completing_is_stuck_by_the_store_and_by_the_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    let run = run_id();
    let staged = |page| PageReceipt { table_commit: true, ..receipt(page, "a") };
    record_page(&store, &staged(0), None).await.expect("page");
    assert!(!is_stuck(&store, "p", &run).await.expect("stuck"), "no count yet");
    record_expected(&store, &expected(2)).await.expect("expected");
    assert!(!is_stuck(&store, "p", &run).await.expect("stuck"), "a page is missing");
    record_page(&store, &staged(1), None).await.expect("page");
    assert!(is_stuck(&store, "p", &run).await.expect("stuck"), "every page in, not complete");
    assert!(holds_every_page_but_incomplete(false, Some(2), 2));
    assert!(!holds_every_page_but_incomplete(false, Some(2), 1), "a page missing");
    assert!(!holds_every_page_but_incomplete(true, Some(2), 2), "complete");
    assert!(!holds_every_page_but_incomplete(false, None, 2), "no count (Athena-driven)");
    assert!(!holds_every_page_but_incomplete(false, Some(0), 0), "an empty run completes at once");
    let Completion::Completed(_) = record_page(&store, &staged(1), Some(&Committing)).await.expect("again") else {
        panic!("a completion with a compactor completes it")
    };
    assert!(!is_stuck(&store, "p", &run).await.expect("stuck"), "complete");
}

/// Receipts alone, without shard summaries (as an earlier version wrote
/// them, or a run in flight across the upgrade): the count completes the
/// run, summarising its shards then.
#[tokio::test]
async fn completes_when_the_count_arrives_after_the_last_receipt_and_hashes_schemas_stably() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    put_receipt(&store, &receipt(0, "b")).await;
    put_receipt(&store, &receipt(1, "a")).await;
    let Completion::Completed(first) = record_expected(&store, &expected(2)).await.expect("expected") else {
        panic!("the count completes the run")
    };
    assert_eq!(first.pages, 2);
    let other = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(other.path());
    put_receipt(&store, &receipt(0, "a")).await;
    put_receipt(&store, &receipt(1, "b")).await;
    let Completion::Completed(second) = record_expected(&store, &expected(2)).await.expect("expected") else {
        panic!("completes")
    };
    assert_eq!(first.schema_hash, second.schema_hash, "order of pages does not matter");
    let run = run_id();
    let receipts = tributary_core::ledger::run_receipts(&store, "p", &run).await.expect("receipts");
    assert_eq!(receipts.iter().map(|r| r.page).collect::<Vec<_>>(), [0, 1], "summaries are not receipts");
}

#[tokio::test]
async fn an_empty_run_completes_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DirStore::new(dir.path());
    assert!(
        matches!(record_expected(&store, &expected(0)).await.expect("expected"), Completion::Completed(m) if m.pages == 0)
    );
}

/// Drives the receipts of an `n`-page run, its count known first, in an
/// unsorted order; returns the store calls (receipt PUTs included).
async fn drive(n: u32) -> u64 {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Counting::new(dir.path());
    assert_eq!(record_expected(&store, &expected(n.into())).await.expect("expected"), Completion::NotYet);
    let started = std::time::Instant::now();
    let mut manifests = Vec::new();
    for i in 0..n {
        match record_page(&store, &receipt(shuffled(i, n), "a"), None).await.expect("page") {
            Completion::Completed(manifest) => manifests.push(manifest),
            Completion::NotYet => {}
            Completion::AlreadyComplete => panic!("completed before its last page"),
        }
    }
    let [manifest] = manifests.as_slice() else { panic!("one page completes the run, not {}", manifests.len()) };
    assert_eq!(manifest.pages, u64::from(n));
    // Each page lists its shard's folder: the run's own folder holds a
    // handful of names (count, summaries, shard folders, `_SUCCESS`), so a
    // local lake reads at most 1,000 names per page whatever the run's size.
    let run_folder = dir.path().join(keys::receipts_prefix("p", &run_id()));
    let names = std::fs::read_dir(&run_folder).expect("run folder").count();
    assert!(names <= 4 + 2 * n.div_ceil(1_000) as usize, "{names} names in {}", run_folder.display());
    assert_eq!(distinct_files(manifest), n as usize, "every page's file, once");
    assert_eq!(manifest.records_persisted, 9 * u64::from(n));
    let calls = store.calls.total();
    println!(
        "{n} pages: {} GET, {} PUT, {} LIST = {calls} calls, {:.2} per page, {:?}",
        store.calls.get.load(Ordering::Relaxed),
        store.calls.put.load(Ordering::Relaxed),
        store.calls.list.load(Ordering::Relaxed),
        calls as f64 / f64::from(n),
        started.elapsed()
    );
    calls
}

#[tokio::test]
async fn store_calls_per_page_stay_constant_as_runs_grow() {
    let thousand = drive(1_000).await;
    let two_thousand = drive(2_000).await;
    assert!(thousand <= 6 * 1_000, "{thousand} calls for 1,000 pages");
    assert!(two_thousand <= 6 * 2_000, "{two_thousand} calls for 2,000 pages");
    assert!(two_thousand * 10 <= thousand * 22, "linear: {two_thousand} calls against {thousand}");
}

/// A cursor run learns its count at its last page: its pages find no count,
/// the whole shards are summarised anyway, and the count completes it.
#[tokio::test]
async fn a_cursor_run_completes_when_its_count_arrives_last() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Counting::new(dir.path());
    let n = 1_234;
    for i in 0..n {
        assert_eq!(record_page(&store, &receipt(shuffled(i, n), "a"), None).await.expect("page"), Completion::NotYet);
    }
    let run = run_id();
    assert!(store.get(&keys::shard_summary_key("p", &run, 0)).await.is_ok(), "shard 0 is whole");
    assert!(store.get(&keys::shard_summary_key("p", &run, 1)).await.is_err(), "shard 1's size is not known");
    let Completion::Completed(manifest) = record_expected(&store, &expected(n.into())).await.expect("count") else {
        panic!("the count completes the run")
    };
    assert_eq!((manifest.pages, distinct_files(&manifest)), (u64::from(n), n as usize));
    assert!(store.calls.total() <= 6 * u64::from(n), "{} calls", store.calls.total());
}

/// Every page of a run at once on four threads: each succeeds, the run
/// completes, and the manifest lists every page once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pages_finishing_together_all_succeed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(DirStore::new(dir.path()));
    let n = 1_500;
    record_expected(store.as_ref(), &expected(n.into())).await.expect("expected");
    let mut pages = tokio::task::JoinSet::new();
    for i in 0..n {
        let store = store.clone();
        pages.spawn(async move { record_page(store.as_ref(), &receipt(shuffled(i, n), "a"), None).await });
    }
    let mut manifests = Vec::new();
    while let Some(done) = pages.join_next().await {
        if let Completion::Completed(manifest) = done.expect("no panic").expect("every page succeeds") {
            manifests.push(manifest);
        }
    }
    let first = manifests.first().expect("the run completes");
    assert!(manifests.iter().all(|m| m == first), "concurrent completions write the same manifest");
    assert_eq!((first.pages, distinct_files(first)), (u64::from(n), n as usize));
}

/// The last two pages of a shard check it at the same moment: both see it
/// whole, both write its summary (one wins the compare-and-swap, the other
/// finds it written), both succeed and the run completes once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_two_pages_checking_together_both_succeed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = Counting::new(dir.path());
    let n = 1_000;
    record_expected(&store, &expected(n.into())).await.expect("expected");
    for page in 0..n - 2 {
        put_receipt(&store, &receipt(page, "a")).await;
    }
    store.rendezvous = Some(tokio::sync::Barrier::new(2));
    let store = Arc::new(store);
    let (a, b) = (store.clone(), store.clone());
    let (first, second) = tokio::join!(
        tokio::spawn(async move { record_page(a.as_ref(), &receipt(n - 2, "a"), None).await }),
        tokio::spawn(async move { record_page(b.as_ref(), &receipt(n - 1, "b"), None).await }),
    );
    let outcomes = [first.expect("no panic").expect("succeeds"), second.expect("no panic").expect("succeeds")];
    let manifests: Vec<&Manifest> =
        outcomes.iter().filter_map(|c| if let Completion::Completed(m) = c { Some(m) } else { None }).collect();
    assert!(!manifests.is_empty(), "the run completes: {outcomes:?}");
    assert!(manifests.iter().all(|m| m.pages == u64::from(n) && distinct_files(m) == n as usize));
    assert_eq!(store.waited.load(Ordering::Relaxed), 2, "both listed the shard at the rendezvous");
}

/// A redelivered page rewrites its receipt; after its shard's summary was
/// written, its entry there is replaced (once: the same receipt again
/// writes nothing); the manifest counts it once, as last written.
#[tokio::test]
async fn a_redelivered_page_rewrites_and_counts_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Counting::new(dir.path());
    let n = 1_500;
    record_expected(&store, &expected(n.into())).await.expect("expected");
    for page in 0..1_000 {
        record_page(&store, &receipt(page, "a"), None).await.expect("page");
    }
    let run = run_id();
    assert!(store.get(&keys::shard_summary_key("p", &run, 0)).await.is_ok(), "shard 0 is summarised");
    let mut again = receipt(5, "b");
    again.records_persisted = 7;
    again.data_keys =
        vec!["d/dt=2026-11-29/p-r1-00005.parquet".into(), "d/dt=2026-11-29/p-r1-00005-001.parquet".into()];
    assert_eq!(record_page(&store, &again, None).await.expect("redelivered"), Completion::NotYet);
    let puts = store.calls.put.load(Ordering::Relaxed);
    assert_eq!(record_page(&store, &again, None).await.expect("redelivered again"), Completion::NotYet);
    assert_eq!(store.calls.put.load(Ordering::Relaxed) - puts, 1, "only the receipt: its entry is up to date");
    for page in 1_000..n {
        record_page(&store, &receipt(page, "a"), None).await.expect("page");
        if page == 1_200 {
            record_page(&store, &receipt(page, "a"), None).await.expect("delivered twice before its shard is whole");
        }
    }
    let Completion::AlreadyComplete = complete_if_done(&store, "p", &run).await.expect("check") else {
        panic!("the last page completed the run")
    };
    let manifest: Manifest =
        serde_json::from_slice(&store.get(&keys::manifest_key("p", &run)).await.expect("manifest")).expect("json");
    assert_eq!(manifest.pages, u64::from(n));
    assert_eq!(manifest.records_persisted, 9 * (u64::from(n) - 1) + 7);
    assert_eq!(distinct_files(&manifest), n as usize + 1, "page 5's two parts");
    assert!(manifest.files.contains(&"d/dt=2026-11-29/p-r1-00005-001.parquet".to_string()));
    let single_schema = receipt(0, "a");
    assert_ne!(
        manifest.schema_hash,
        contracts::digest::fnv1a_hex(single_schema.schema.expect("schema").as_bytes()),
        "page 5's new schema counts"
    );
}

/// A run in flight when receipts moved into shard folders: its first pages'
/// receipts (and its count) were written by an earlier version in the
/// run's folder, its later pages' by this one. It completes, each page
/// counted once, a page delivered before and after the change as the
/// later delivery says.
#[tokio::test]
async fn a_run_in_flight_across_the_receipt_layout_change_completes_counting_each_page_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Counting::new(dir.path());
    let (n, run) = (1_500u32, run_id());
    // The count as an earlier version wrote it: no layout note.
    let count_key = keys::expected_key("p", &run);
    store.put(&count_key, serde_json::to_vec(&expected(n.into())).expect("encode").into()).await.expect("count");
    for page in 0..700 {
        put_earlier_receipt(&store, &receipt(page, "a")).await;
    }
    let mut again = receipt(5, "a");
    again.records_persisted = 7;
    assert_eq!(record_page(&store, &again, None).await.expect("redelivered"), Completion::NotYet);
    let mut completed = Vec::new();
    for page in 700..n {
        if let Completion::Completed(manifest) = record_page(&store, &receipt(page, "a"), None).await.expect("page") {
            completed.push(manifest);
        }
    }
    let [manifest] = completed.as_slice() else { panic!("the last page completes the run, not {}", completed.len()) };
    assert_eq!(manifest.pages, u64::from(n), "page 5 once");
    assert_eq!(manifest.records_persisted, 9 * (u64::from(n) - 1) + 7, "page 5 as redelivered");
    assert_eq!(distinct_files(manifest), n as usize);
    let totals = tributary_core::ledger::run_totals(&store, "p", &run).await.expect("totals");
    assert_eq!((totals.pages, totals.records_persisted), (u64::from(n), manifest.records_persisted));
    let receipts = tributary_core::ledger::run_receipts(&store, "p", &run).await.expect("receipts");
    assert_eq!(receipts.len(), n as usize, "one receipt per page");
    assert_eq!(receipts.iter().find(|r| r.page == 5).map(|r| r.records_persisted), Some(7));
    for page in [5, 6, 800] {
        let found = tributary_core::ledger::read_receipt(&store, "p", &run, page).await.expect("read");
        assert_eq!(found.map(|r| r.page), Some(page), "page {page}'s receipt, in either layout");
    }
}

/// A cursor run in flight across the change learns its count after it:
/// writing the count completes the shards of both layouts.
#[tokio::test]
async fn a_cursor_run_across_the_receipt_layout_change_completes_at_its_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Counting::new(dir.path());
    let (n, run) = (1_200u32, run_id());
    for page in 0..500 {
        put_earlier_receipt(&store, &receipt(page, "a")).await;
    }
    for page in 500..n {
        assert_eq!(record_page(&store, &receipt(page, "a"), None).await.expect("page"), Completion::NotYet);
    }
    let Completion::Completed(manifest) = record_expected(&store, &expected(n.into())).await.expect("count") else {
        panic!("the count completes the run")
    };
    assert_eq!((manifest.pages, distinct_files(&manifest)), (u64::from(n), n as usize));
    let count: serde_json::Value =
        serde_json::from_slice(&store.get(&keys::expected_key("p", &run)).await.expect("count")).expect("json");
    assert_eq!(count["receipts_in_shard_folders"], serde_json::Value::Null, "earlier receipts noted: {count}");
}

/// The completion reports pages holding the same records (a vendor that
/// served a page again) and more records than the vendor announced, and
/// nothing for a run of distinct pages.
#[test]
fn a_run_holding_records_twice_says_which_pages_and_why() {
    use tributary_core::ledger::duplicated;
    let page = |page: u32, fingerprint: &str| PageReceipt {
        records_in: 30,
        records_fingerprint: Some(fingerprint.into()),
        ..receipt(page, "a")
    };
    let distinct = [page(0, "a0"), page(1, "b1"), page(2, "c2")];
    assert_eq!(duplicated(&distinct, Some(90), 90), None);
    let empty_pages = [PageReceipt { records_in: 0, records_fingerprint: None, ..receipt(3, "a") }, receipt(4, "a")];
    assert_eq!(duplicated(&empty_pages, Some(0), 0), None, "pages without records repeat nothing");
    let repeated = [page(0, "a0"), page(1, "a0"), page(2, "c2"), page(3, "a0"), page(4, "c2")];
    let reason = duplicated(&repeated, Some(150), 150).expect("repeated pages");
    assert!(reason.starts_with("5 of the run's pages hold records another of its pages holds"), "{reason}");
    assert!(reason.contains("pages 0, 1, 3 hold the same 30 records"), "{reason}");
    assert!(reason.contains("90 records stored more than once"), "two extra copies of page 0, one of page 2: {reason}");
    // Each strategy's cause: a page parameter ignored, a cursor cycle, a
    // query row returned twice or rows answered alike (an Athena-driven
    // run's pages are calls for different rows: a trial was told to check
    // offset parameters it does not have).
    for cause in
        ["strategy.offset_param", "a cycle", "DISTINCT values in strategy.query", "answers different rows alike"]
    {
        assert!(reason.contains(cause), "{cause}: {reason}");
    }
    let over = duplicated(&distinct, Some(85), 90).expect("more than announced");
    assert!(over.contains("held 90 records, 5 more than the 85 the vendor announced"), "{over}");
    assert!(over.contains("target.write: merge"), "{over}");
}

/// A count-first run holding fewer records than announced says why from
/// its pages: a short page before the last is named (a trial's empty
/// middle page was blamed on the page size), and pages all equally full
/// before a short last one mean a page-size cap or a short last answer,
/// both said (the ledger does not know `strategy.page_size`).
#[tokio::test]
async fn a_short_run_names_its_short_pages_or_the_vendors_page_size_cap() {
    for (sizes, expect) in [
        (vec![5, 5, 0, 5, 3], "page 2 (the 3rd) held 0 where the fullest page held 5"),
        (
            vec![25, 25, 25],
            "every page before the last held 25 records and the last held 25: if strategy.page_size is more than 25, the vendor caps its page size",
        ),
        // A trial: page_size 3, the vendor's second page came back empty;
        // the cap was blamed with "set it to 3" when it already was 3.
        (
            vec![3, 0],
            "the last held 0: if strategy.page_size is more than 3, the vendor caps its page size (Django REST Framework's is 1,000): set it to 3; if it is 3, the vendor answered its last page short",
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DirStore::new(dir.path());
        let pages = sizes.len() as u32;
        let announced = Expected { records: Some(1_000), ..expected(pages.into()) };
        record_expected(&store, &announced).await.expect("expected");
        let manifest = persist_pages(&store, &sizes).await;
        let why = manifest.truncated.expect("a short run is truncated");
        assert!(why.contains("announced 1000 records") && why.contains(expect), "{why}");
        // A page that held 0 may be a status mapped to empty (a trial's 404).
        assert_eq!(why.contains("response.status_actions maps to an empty page"), sizes.contains(&0), "{why}");
    }
}

/// A trial: a cursor vendor answered one page empty while offering the
/// next, and later pages held records; the run completed and the
/// incremental cursor moved past the records the empty page should have
/// held, so no later run fetched them. The cursor now stays, and the run
/// is truncated, saying why; an empty last page is still a plain end.
#[tokio::test]
async fn an_empty_page_before_records_holds_the_incremental_cursor_back() {
    // The third: a fan-out run (its query binding kept), whose empty page
    // is a query row with nothing (a trial's customer without orders kept
    // its incremental cursor from ever moving).
    for (sizes, gap, fan_out) in
        [(vec![5, 0, 5], true, false), (vec![5, 5, 0], false, false), (vec![5, 0, 5], false, true)]
    {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DirStore::new(dir.path());
        let run = run_id();
        let pages = sizes.len() as u32;
        if fan_out {
            store.put(&tributary_core::keys::query_key("p", &run), "{}".into()).await.expect("binding");
        }
        record_expected(&store, &expected(pages.into())).await.expect("expected");
        // Request records each page's cursor before it is persisted.
        for (page, records) in (0..pages).zip(&sizes) {
            if *records > 0 {
                let max = serde_json::json!(format!("2026-11-29T0{page}:00:00Z"));
                tributary_core::state::record_page(&store, "p", &run, page, max.clone(), Some(max))
                    .await
                    .expect("cursor");
            }
        }
        let manifest = persist_pages(&store, &sizes).await;
        let cursor = tributary_core::state::current(&store, "p").await.expect("state");
        if gap {
            let why = manifest.truncated.expect("truncated");
            assert!(
                why.contains("page 1 (the 2nd) came back empty while the vendor offered a next page")
                    && why.contains("the incremental cursor stays at incremental.start"),
                "{why}"
            );
            assert_eq!(cursor, None, "the cursor did not move");
        } else if fan_out {
            assert_eq!(manifest.truncated, None, "a row with nothing is no gap");
            assert_eq!(cursor.map(|c| c.max), Some(serde_json::json!("2026-11-29T02:00:00Z")));
        } else {
            assert_eq!(manifest.truncated, None, "an empty last page ends the run");
            assert_eq!(cursor.map(|c| c.max), Some(serde_json::json!("2026-11-29T01:00:00Z")));
        }
    }
}

/// Receipts of pages 0.. holding `sizes` records each (none quarantined),
/// in order; the manifest of the run they complete.
async fn persist_pages(store: &DirStore, sizes: &[u64]) -> tributary_core::ledger::Manifest {
    let mut last = Completion::NotYet;
    for (page, &records) in (0u32..).zip(sizes) {
        let receipt = PageReceipt {
            records_in: records,
            records_persisted: records,
            records_quarantined: 0,
            ..receipt(page, "a")
        };
        last = record_page(store, &receipt, None).await.expect("page");
    }
    let Completion::Completed(manifest) = last else { panic!("complete: {last:?}") };
    manifest
}
