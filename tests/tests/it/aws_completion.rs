//! A run's completion killed after each of its steps in turn, then its
//! message delivered again, through the real Persist handler (issue 25,
//! item 1): the dataset folder ends holding exactly the manifest's rows,
//! each record once, no page file the coalesced file replaced and no
//! staged file; and `tributary status` never says `complete` while the
//! folder holds more rows than the manifest.
//!
//! A "kill" is [`CrashingStore`]: the last page's delivery runs once
//! healthy to learn its store calls, then, for each call from the page's
//! receipt on (where the completion begins), on a fresh run whose store
//! dies after that call; the same message is then delivered again on the
//! healthy store. On the directory lake and on S3 (moto, which the
//! `aws-emulator` test group runs one at a time).

use std::collections::BTreeSet;
use std::sync::Mutex;

use adapters::aws::{S3Store, s3_client_with_path_style};
use adapters::local::{Broker, DirStore};
use contracts::{PersistMessage, PersistTarget};
use persist::{Deps, PersistConfig, PersistError};
use test_support::crash::CrashingStore;
use test_support::lake::parquet_rows;
use test_support::runs::{expect_pages, page, run_id};
use tributary_core::batch::RecordError;
use tributary_core::keys;
use tributary_core::ledger::{Manifest, PageReceipt};
use tributary_core::ports::{ObjectStore, PortError, TopicMessage, TopicPublisher};
use tributary_e2e::emulator::reset_emulator;

const RUN: &str = "20261129T060000Z";
const TOPIC: &str = "run-events";

/// The run-completed events published, kept in memory.
#[derive(Default)]
struct Events(Mutex<Vec<TopicMessage>>);

#[async_trait::async_trait]
impl TopicPublisher for Events {
    async fn publish(&self, _topic: &str, messages: Vec<TopicMessage>) -> Result<(), PortError> {
        self.0.lock().expect("events").extend(messages);
        Ok(())
    }
}

impl Events {
    fn count(&self) -> usize {
        self.0.lock().expect("events").len()
    }
}

/// Page `index` of `pages` of run [`RUN`] of pipeline `name` into dataset
/// `name`: `records` records with distinct ids.
fn message(name: &str, index: u32, pages: u32, records: u32) -> PersistMessage {
    let rows: Vec<String> = (0..records)
        .map(|i| format!(r#"{{"id": {}, "page": {index}, "name": "r{i}"}}"#, index * 100_000 + i))
        .collect();
    page(name, PersistTarget::new(name), RUN, index, pages, &format!("[{}]", rows.join(",")))
}

async fn persist(store: &dyn ObjectStore, events: &Events, m: PersistMessage) -> Result<PageReceipt, PersistError> {
    let (queue, config) = (Broker::new(), PersistConfig::default());
    let deps =
        Deps { store, queue: &queue, config: &config, run_events: Some((events, TOPIC)), catalog: None, tables: None };
    persist::persist_page(m, deps).await
}

/// Every page of run `name` but the last, persisted on the healthy lake.
async fn all_but_the_last(lake: &dyn ObjectStore, events: &Events, name: &str, pages: u32, records: u32) {
    expect_pages(lake, name, RUN, u64::from(pages)).await;
    for index in 0..pages - 1 {
        persist(lake, events, message(name, index, pages, records)).await.expect("page");
    }
}

/// What the dataset folder of run `name` holds, read back.
#[derive(Debug)]
struct Folder {
    /// Rows in every Parquet file of the folder.
    rows: u64,
    /// Distinct `id`s among them.
    ids: usize,
    /// Page files (not the run's coalesced file).
    page_files: usize,
    /// Every Parquet key.
    files: BTreeSet<String>,
}

async fn folder(lake: &dyn ObjectStore, name: &str) -> Folder {
    let files: BTreeSet<String> =
        lake.list(&format!("{name}/")).await.expect("list").into_iter().filter(|k| k.ends_with(".parquet")).collect();
    let (mut rows, mut ids) = (0, BTreeSet::new());
    for key in &files {
        for row in parquet_rows(lake.get(key).await.expect("get")) {
            rows += 1;
            ids.insert(row["id"].as_u64().expect("id"));
        }
    }
    let page_files = files.iter().filter(|k| !keys::is_coalesced(k, name, RUN)).count();
    Folder { rows, ids: ids.len(), page_files, files }
}

async fn manifest(lake: &dyn ObjectStore, name: &str) -> Option<Manifest> {
    let bytes = lake.get(&keys::manifest_key(name, &run_id(RUN))).await.ok()?;
    Some(serde_json::from_slice(&bytes).expect("manifest"))
}

/// `tributary status`'s state of run `name`.
async fn state(lake: &dyn ObjectStore, name: &str) -> String {
    let runs = tributary::status::recent_runs(lake, None, 10_000).await.expect("status");
    runs.iter().find(|run| run.pipeline == name).map_or("none", |run| run.state()).to_string()
}

/// What `tributary status` says must be true of the folder: `complete`
/// only with the manifest's rows in it.
async fn assert_status_honest(lake: &dyn ObjectStore, name: &str, when: &str) {
    if state(lake, name).await != "complete" {
        return;
    }
    let (folder, manifest) = (folder(lake, name).await, manifest(lake, name).await.expect("manifest"));
    assert_eq!(
        folder.rows, manifest.records_persisted,
        "{when}: status says complete, so the folder holds the manifest's rows: {folder:?}"
    );
}

/// The state every completion must end in: `_SUCCESS`, a manifest of
/// every record, exactly its files in the folder holding each record once,
/// no staged file left, status `complete`, the run announced.
async fn assert_completed(lake: &dyn ObjectStore, events: &Events, name: &str, pages: u32, records: u32, when: &str) {
    let run = run_id(RUN);
    assert!(lake.get(&keys::success_key(name, &run)).await.is_ok(), "{when}: _SUCCESS");
    let manifest = manifest(lake, name).await.expect("manifest");
    let total = u64::from(pages * records);
    assert_eq!(manifest.records_persisted, total, "{when}: the manifest counts every record");
    let folder = folder(lake, name).await;
    assert_eq!(folder.rows, manifest.records_persisted, "{when}: the folder holds exactly the manifest's rows");
    assert_eq!(folder.ids as u64, total, "{when}: each record once");
    assert_eq!(folder.files, manifest.files.iter().cloned().collect(), "{when}: the folder holds the manifest's files");
    assert_eq!(folder.page_files, 0, "{when}: no page file the coalesced file replaced");
    let staged = lake.list(&keys::staged_coalesced_prefix(name, &run)).await.expect("list");
    assert!(staged.is_empty(), "{when}: no staged file left: {staged:?}");
    assert_eq!(state(lake, name).await, "complete", "{when}");
    assert!(events.count() >= 1, "{when}: the run is announced");
    // The replacement record the completion finished says the same.
    let record: persist::coalesce::Replacement =
        serde_json::from_slice(&lake.get(&keys::replacement_key(name, &run)).await.expect("record")).expect("record");
    assert_eq!(record.files, manifest.files, "{when}: the record's files are the manifest's");
    let replaced: u64 = record.coalesced.iter().map(|file| file.rows).sum();
    assert_eq!(replaced, total, "{when}: the record's rows (one partition, every page coalesced)");
}

/// A lake of its own for each kill point (a folder, or a key prefix in
/// the bucket), so `tributary status` reads one run.
type NewLake<'a> = &'a dyn Fn(&str) -> Box<dyn ObjectStore>;

/// Kills the last page's delivery after each store call from its receipt
/// on, each on its own lake, delivers it again healthy, and checks the end
/// state; returns how many kill points were tried.
async fn kill_the_completion_after_each_step(new_lake: NewLake<'_>) -> usize {
    const PAGES: u32 = 3;
    const RECORDS: u32 = 10;
    const NAME: &str = "crash";
    // The healthy delivery's calls.
    let (lake, events) = (new_lake("probe"), Events::default());
    all_but_the_last(lake.as_ref(), &events, NAME, PAGES, RECORDS).await;
    let logged = CrashingStore::healthy(lake.as_ref());
    persist(&logged, &events, message(NAME, PAGES - 1, PAGES, RECORDS)).await.expect("healthy completion");
    assert_completed(lake.as_ref(), &events, NAME, PAGES, RECORDS, "healthy").await;
    let calls = logged.calls();
    let receipt = keys::receipt_key(NAME, &run_id(RUN), PAGES - 1);
    let start = calls.iter().position(|c| c.method == "put" && c.key == receipt).expect("the receipt's PUT");
    for method in ["put_if", "copy", "delete"] {
        assert!(calls[start..].iter().any(|c| c.method == method), "the completion makes a {method}: {calls:#?}");
    }
    for allowed in start..calls.len() {
        let (lake, events) = (new_lake(&format!("kill-{allowed}")), Events::default());
        let lake = lake.as_ref();
        let when = format!("killed after call {allowed} ({} {})", calls[allowed - 1].method, calls[allowed - 1].key);
        all_but_the_last(lake, &events, NAME, PAGES, RECORDS).await;
        let last = message(NAME, PAGES - 1, PAGES, RECORDS);
        persist(&CrashingStore::new(lake, allowed), &events, last.clone()).await.expect_err(&when);
        assert_status_honest(lake, NAME, &when).await;
        persist(lake, &events, last.clone()).await.unwrap_or_else(|err| panic!("{when}: the redelivery: {err}"));
        assert_completed(lake, &events, NAME, PAGES, RECORDS, &when).await;
        // Late duplicates of the run's pages change nothing.
        persist(lake, &events, last).await.expect("again");
        persist(lake, &events, message(NAME, 0, PAGES, RECORDS)).await.expect("page 0 again");
        assert_completed(lake, &events, NAME, PAGES, RECORDS, &format!("{when}, pages delivered again")).await;
    }
    calls.len() - start
}

#[tokio::test]
async fn a_completion_killed_after_each_step_then_redelivered_leaves_exactly_the_manifests_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let new_lake = |name: &str| -> Box<dyn ObjectStore> { Box::new(DirStore::new(dir.path().join(name))) };
    let tried = kill_the_completion_after_each_step(&new_lake).await;
    assert!(tried > 8, "{tried} kill points");
}

#[tokio::test]
async fn on_s3_a_completion_killed_after_each_step_then_redelivered_leaves_exactly_the_manifests_rows() {
    let emulator = reset_emulator().await;
    let s3 = s3_client_with_path_style(&emulator.config, true);
    s3.create_bucket().bucket("tributary-crash-lake").send().await.expect("CreateBucket");
    let new_lake = |name: &str| -> Box<dyn ObjectStore> {
        Box::new(S3Store::new(s3.clone(), "tributary-crash-lake").with_prefix(format!("{name}/")))
    };
    let tried = kill_the_completion_after_each_step(&new_lake).await;
    assert!(tried > 8, "{tried} kill points");
}

/// The issue's measurement: 200 pages of 10 records, the completion killed
/// after `deletes` page files were deleted, then the last page delivered
/// again. Prints the figures (run with `--no-capture` to see them).
async fn killed_mid_delete(lake: &dyn ObjectStore, name: &str, deletes: usize) -> (Folder, Manifest, String) {
    const PAGES: u32 = 200;
    const RECORDS: u32 = 10;
    let events = Events::default();
    all_but_the_last(lake, &events, name, PAGES, RECORDS).await;
    let page_file = move |key: &str| key.starts_with(&format!("{name}/")) && !keys::is_coalesced(key, name, RUN);
    let dying = CrashingStore::new(lake, deletes).counting(move |c| c.method == "delete" && page_file(&c.key));
    persist(&dying, &events, message(name, PAGES - 1, PAGES, RECORDS)).await.expect_err("killed");
    let after_kill = format!("{} ({} rows in the folder)", state(lake, name).await, folder(lake, name).await.rows);
    persist(lake, &events, message(name, PAGES - 1, PAGES, RECORDS)).await.expect("redelivered");
    let (folder, manifest) = (folder(lake, name).await, manifest(lake, name).await.expect("manifest"));
    println!(
        "{PAGES} pages of {RECORDS} records, killed after {deletes} page-file deletes: status after the kill: \
         {after_kill}; after the redelivery: {} page files left, {} rows in the folder, manifest {} records, \
         status {}",
        folder.page_files,
        folder.rows,
        manifest.records_persisted,
        state(lake, name).await
    );
    (folder, manifest, after_kill)
}

#[tokio::test]
async fn two_hundred_pages_killed_mid_delete_then_redelivered_leave_exactly_the_manifests_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = DirStore::new(dir.path());
    for deletes in [1, 26] {
        let name = format!("mid-delete-{deletes}");
        let (folder, manifest, after_kill) = killed_mid_delete(&lake, &name, deletes).await;
        assert!(after_kill.starts_with("completing"), "{after_kill}");
        assert_eq!((folder.page_files, folder.rows, folder.ids), (0, 2_000, 2_000));
        assert_eq!(manifest.records_persisted, 2_000);
        assert_eq!(state(&lake, &name).await, "complete");
    }
}

/// A duplicate delivery of a page racing the completion: it checks the run
/// before `_SUCCESS` exists (so it goes on), the completion then finishes,
/// and only after that does the page write its file again and record its
/// receipt. Played on the directory lake by hiding the marker from the
/// page's first look at it (`CrashingStore::counting` sees each call
/// before it is made, and kills nothing here).
#[tokio::test]
async fn a_duplicate_page_racing_the_completion_leaves_no_row_twice() {
    const PAGES: u32 = 3;
    const RECORDS: u32 = 10;
    const NAME: &str = "racing";
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = DirStore::new(dir.path());
    let events = Events::default();
    all_but_the_last(&lake, &events, NAME, PAGES, RECORDS).await;
    persist(&lake, &events, message(NAME, PAGES - 1, PAGES, RECORDS)).await.expect("completion");
    assert_completed(&lake, &events, NAME, PAGES, RECORDS, "completed").await;
    let success = keys::success_key(NAME, &run_id(RUN));
    let (marker, hidden) = (dir.path().join(&success), dir.path().join("hidden-success"));
    let receipt = keys::receipt_key(NAME, &run_id(RUN), 0);
    let looked = std::sync::atomic::AtomicBool::new(false);
    let racing = CrashingStore::new(&lake, usize::MAX).counting(move |call| {
        if call.method == "get" && call.key == success && !looked.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::fs::rename(&marker, &hidden).expect("hide the marker"); // not complete yet, as the page sees it
        } else if call.method == "put" && call.key == receipt && hidden.exists() {
            std::fs::rename(&hidden, &marker).expect("the marker back"); // the completion finished meanwhile
        }
        false
    });
    persist(&racing, &events, message(NAME, 0, PAGES, RECORDS)).await.expect("the duplicate");
    assert!(
        racing.calls().iter().any(|c| c.method == "put_file" && c.key.starts_with(&format!("{NAME}/"))),
        "the duplicate wrote its page file again"
    );
    assert_completed(&lake, &events, NAME, PAGES, RECORDS, "after the racing duplicate").await;
}

/// Page `index` of run `name` fetched again with other records (the
/// vendor answered otherwise): the same ids, other names.
fn refetched(name: &str, index: u32, pages: u32, records: u32) -> PersistMessage {
    let rows: Vec<String> = (0..records)
        .map(|i| format!(r#"{{"id": {}, "page": {index}, "name": "again{i}"}}"#, index * 100_000 + i))
        .collect();
    page(name, PersistTarget::new(name), RUN, index, pages, &format!("[{}]", rows.join(",")))
}

/// Every `name` value in run `name`'s folder.
async fn names(lake: &dyn ObjectStore, name: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for key in lake.list(&format!("{name}/")).await.expect("list") {
        for row in parquet_rows(lake.get(&key).await.expect("get")) {
            names.insert(row["name"].as_str().expect("name").to_string());
        }
    }
    names
}

/// The race of `a_duplicate_page_racing_the_completion_leaves_no_row_twice`
/// with a page fetched anew (a retry of the run after the vendor's answers
/// changed, a trial's finding): the run completes with the earlier fetch
/// while the new one is written. The new fetch's files are dropped as
/// before, but no longer silently: the page fails as
/// `CompletedWhileFetched` (dead-lettered with an alert naming `tributary
/// replay`), and the page's receipt says again what the table holds.
/// `marker_back_on`: the store call before which the marker reappears:
/// the receipt's put (the completion finished while the page wrote its
/// files) or the second look at the marker (it finished while the page
/// was converted: then nothing is written into the dataset folder).
async fn race_a_new_fetch_with_the_completion(name: &str, marker_back_on: &'static str) {
    const PAGES: u32 = 3;
    const RECORDS: u32 = 10;
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = DirStore::new(dir.path());
    let events = Events::default();
    all_but_the_last(&lake, &events, name, PAGES, RECORDS).await;
    persist(&lake, &events, message(name, PAGES - 1, PAGES, RECORDS)).await.expect("completion");
    let receipt = keys::receipt_key(name, &run_id(RUN), 0);
    let completed_with = lake.get(&receipt).await.expect("receipt");
    let success = keys::success_key(name, &run_id(RUN));
    let (marker, hidden) = (dir.path().join(&success), dir.path().join("hidden-success"));
    let looks = std::sync::atomic::AtomicUsize::new(0);
    let racing = CrashingStore::new(&lake, usize::MAX).counting(move |call| {
        let back = match marker_back_on {
            "receipt" => call.method == "put" && call.key == receipt,
            _ => call.method == "get" && call.key == success && looks.load(std::sync::atomic::Ordering::SeqCst) == 1,
        };
        if call.method == "get" && call.key == success && looks.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            std::fs::rename(&marker, &hidden).expect("hide the marker"); // not complete yet, as the page sees it
        } else if back && hidden.exists() {
            std::fs::rename(&hidden, &marker).expect("the marker back"); // the completion finished meanwhile
        }
        false
    });
    let err = persist(&racing, &events, refetched(name, 0, PAGES, RECORDS)).await.expect_err("a new fetch, too late");
    assert!(matches!(err, PersistError::CompletedWhileFetched { page: 0, .. }), "{err}");
    assert!(err.is_permanent(), "dead-lettered with an alert, not retried: {err}");
    let text = err.to_string();
    assert!(text.contains("tributary replay") && text.contains("raw/"), "names the remedy and the raw copy: {text}");
    assert_completed(&lake, &events, name, PAGES, RECORDS, "after the new fetch").await;
    assert!(!names(&lake, name).await.iter().any(|n| n.starts_with("again")), "the table holds the earlier fetch");
    let receipt_now = lake.get(&keys::receipt_key(name, &run_id(RUN), 0)).await.expect("receipt");
    let (was, now): (PageReceipt, PageReceipt) =
        (serde_json::from_slice(&completed_with).expect("was"), serde_json::from_slice(&receipt_now).expect("now"));
    assert_eq!(now.records_fingerprint, was.records_fingerprint, "the receipt says what the table holds");
    let wrote_into_the_folder =
        racing.calls().iter().any(|c| c.method == "put_file" && c.key.starts_with(&format!("{name}/")));
    assert_eq!(wrote_into_the_folder, marker_back_on == "receipt", "writes into the dataset folder");
    // A redrive of its dead letter changes nothing: its records are the
    // raw copy's, so it is taken for a redelivery of a completed run's page.
    persist(&lake, &events, refetched(name, 0, PAGES, RECORDS)).await.expect("a redrive");
    assert!(
        !names(&lake, name).await.iter().any(|n| n.starts_with("again")),
        "the table still holds the earlier fetch"
    );
    assert_completed(&lake, &events, name, PAGES, RECORDS, "after a redrive").await;
}

#[tokio::test]
async fn a_new_fetch_whose_run_completed_while_it_was_written_is_dead_lettered() {
    race_a_new_fetch_with_the_completion("refetch-written", "receipt").await;
}

#[tokio::test]
async fn a_new_fetch_whose_run_completed_while_it_was_converted_writes_no_file() {
    race_a_new_fetch_with_the_completion("refetch-converted", "second look").await;
}

/// The last page delivered twice at once (two invocations): both complete
/// the run together, one replacement record wins, both finish it, and the
/// folder holds each record once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_deliveries_completing_a_run_at_once_leave_each_row_once() {
    const PAGES: u32 = 4;
    const RECORDS: u32 = 10;
    const NAME: &str = "rivals";
    for attempt in 0..5 {
        let dir = tempfile::tempdir().expect("tempdir");
        let lake = DirStore::new(dir.path());
        let events = Events::default();
        all_but_the_last(&lake, &events, NAME, PAGES, RECORDS).await;
        let last = message(NAME, PAGES - 1, PAGES, RECORDS);
        let (a, b) = tokio::join!(persist(&lake, &events, last.clone()), persist(&lake, &events, last));
        let when = format!("attempt {attempt}");
        a.unwrap_or_else(|err| panic!("{when}: one delivery: {err}"));
        b.unwrap_or_else(|err| panic!("{when}: the other: {err}"));
        assert_completed(&lake, &events, NAME, PAGES, RECORDS, &when).await;
    }
}
